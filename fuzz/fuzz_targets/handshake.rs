//! Fuzzes both parsers of nena's handshake (crates/proto): the server reading a
//! client hello and the client reading a server answer. The checks live in
//! `nena_proto::fuzzing`, which `cargo test -p nena-proto` also runs on stable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nena_proto::fuzzing::server_read(data);
    nena_proto::fuzzing::client_read(data);
});
