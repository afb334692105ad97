//! Fuzzes the SOCKS5 server side of `nena proxy client --socks5` (greeting, RFC 1929
//! username/password, CONNECT request) and the `--allow` rule parser. The checks live in
//! `nena_transport::proxy::socks::fuzzing`, which `cargo test -p nena-transport` also runs on stable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nena_transport::proxy::socks::fuzzing::handshake(data);
});
