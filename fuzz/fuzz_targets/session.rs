//! Fuzzes the incoming half of a nena session (crates/proto): the client's key confirmation
//! a server reads first, and the records of `aead` mode (headers, lengths, authentication,
//! the closing record), for every mode. The checks live in `nena_proto::fuzzing`, which
//! `cargo test -p nena-proto` also runs on stable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nena_proto::fuzzing::session_input(data);
});
