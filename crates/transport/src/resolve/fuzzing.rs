//! The fuzz target's body (fuzz/fuzz_targets/dns_answer.rs), also run on stable by the
//! property tests of [`crate::dns`] and of this room: any bytes as DNS messages and a
//! resolv.conf ([`crate::dns::fuzzing::messages`]), and as `HOST:PORT`.

use super::host_port::ServerAddr;

/// Never a panic; [`crate::dns::fuzzing::messages`]' checks; a parsed server address
/// prints as text that parses back to it, and its port is the text's last number.
pub fn answer(data: &[u8]) {
    crate::dns::fuzzing::messages(data);
    if let Ok(text) = std::str::from_utf8(data) {
        host_port(text);
    }
}

/// `HOST:PORT` from any text: refused, or an address that prints as text that parses
/// back to it, with the port the text ends with.
pub fn host_port(text: &str) {
    if let Ok(a) = text.parse::<ServerAddr>() {
        assert_eq!(a.to_string().parse::<ServerAddr>(), Ok(a.clone()));
        let port = text.rsplit_once(':').map(|(_, p)| p.parse::<u16>());
        assert_eq!(port, Some(Ok(a.port)), "{text}");
    }
}
