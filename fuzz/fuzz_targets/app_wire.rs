//! Fuzzes the application protocol inside a nena session (crates/transport/src/wire.rs): file
//! and perf requests with their access token, replies, the proxies' connect requests (tag
//! and token) and replies, `nena run`'s DNS frames and datagrams (ops 6 and 7), and the
//! chunked perf stream. The checks live in
//! `nena_transport::wire::fuzzing`, which `cargo test -p nena-transport` also runs on stable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nena_transport::wire::fuzzing::app_messages(data);
});
