//! The fuzz target's body for DNS (fuzz/fuzz_targets/dns_answer.rs, through
//! [`crate::resolve::fuzzing`]), also run on stable by the property tests of this room: any
//! bytes as a resolver's answer, as an application's query, and as a resolv.conf.

use super::conf::nameservers;
use super::message::{addresses, check_answer, check_query, name, Family, Question};
use super::reply::{fit_udp, servfail, udp_limit};
use hickory_proto::rr::Name;

/// Never a panic; what is believed has the family asked for; a query taken is answered
/// with a SERVFAIL that passes the check against it, and left as it is where it fits.
pub fn messages(data: &[u8]) {
    let n = name("srv.lab").unwrap_or_else(|_| Name::root());
    let id = u16::from_be_bytes([
        data.first().copied().unwrap_or(0),
        data.get(1).copied().unwrap_or(0),
    ]);
    for family in [Family::V4, Family::V6] {
        if let Ok(addrs) = addresses(data, &Question::of(&n, family, id)) {
            assert!(addrs.iter().all(|a| a.is_ipv4() == (family == Family::V4)));
        }
    }
    if let Ok(q) = check_query(data) {
        assert_eq!(q.id, id);
        assert!(
            check_answer(&q, &servfail(&q)).is_ok(),
            "SERVFAIL answers {q}"
        );
        assert!(udp_limit(data) >= 512);
        let fits = fit_udp(data.to_vec(), usize::MAX);
        assert_eq!(fits, data, "what fits is left as it is");
        let _ = fit_udp(data.to_vec(), 512);
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let ns = nameservers(text);
        assert!(ns.len() <= text.matches("nameserver").count());
    }
}
