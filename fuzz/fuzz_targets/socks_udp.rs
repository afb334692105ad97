//! Fuzzes the header of a SOCKS5 UDP ASSOCIATE datagram (RFC 1928 section 7) as
//! `nena proxy client --socks5` reads it from the network. The checks live in
//! `nena_transport::proxy::socks::fuzzing::udp_packet`, which `cargo test -p nena-transport` also
//! runs on stable (`udp_fuzz_body_on_random_and_near_valid_input`, `udp_packets_roundtrip`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nena_transport::proxy::socks::fuzzing::udp_packet(data);
});
