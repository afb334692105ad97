//! Fuzzes the datagram plane (crates/proto/src/dgram): a server end fed the input as a
//! datagram from an attacker (whole and behind a valid header), and genuine datagrams
//! altered and reordered as the input says; the same for compact datagrams (version 2). The checks live in `nena_proto::fuzzing`,
//! which `cargo test -p nena-proto` also runs on stable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nena_proto::fuzzing::datagram_input(data);
    nena_proto::fuzzing::compact_input(data);
});
