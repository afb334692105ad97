//! The fuzz target's body (fuzz/fuzz_targets/dns_answer.rs), also run on stable by the
//! property tests of [`super::dns`]: any bytes as a resolver's answer, and as `HOST:PORT`.

use super::dns::{addresses, name, Family};
use super::server::ServerAddr;
use hickory_proto::rr::Name;

/// Never a panic; what is believed has the family asked for; a parsed server address
/// prints as text that parses back to it.
pub fn answer(data: &[u8]) {
    let n = name("srv.lab").unwrap_or_else(|_| Name::root());
    let id = u16::from_be_bytes([
        data.first().copied().unwrap_or(0),
        data.get(1).copied().unwrap_or(0),
    ]);
    for family in [Family::V4, Family::V6] {
        if let Ok(addrs) = addresses(data, &n, family, id) {
            assert!(addrs.iter().all(|a| a.is_ipv4() == (family == Family::V4)));
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(a) = text.parse::<ServerAddr>() {
            assert_eq!(a.to_string().parse::<ServerAddr>(), Ok(a));
        }
    }
}
