//! Fuzzes nena's DNS parsers: what a client believes of a resolver's answer (the trusted
//! resolver of `--to HOST:PORT`), the queries a responder takes and its answers, resolv.conf
//! (`nena_transport::dns::fuzzing`), and the `HOST:PORT` parser. The checks live in
//! `nena_transport::resolve::fuzzing`, which `cargo test -p nena-transport` also runs
//! on stable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nena_transport::resolve::fuzzing::answer(data);
});
