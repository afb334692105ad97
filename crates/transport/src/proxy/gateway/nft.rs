//! The gateway's nftables table, as text for `nft -f -` (sans-IO: [`ruleset`] is a pure
//! function of the [`Plan`], tested without a kernel).
//!
//! ```text
//! table inet nena_gateway
//!   chain prerouting  (filter hook prerouting, priority mangle)
//!     from a LAN interface:
//!       TCP of a connection the listener took: marked, accepted (see below)
//!       a source the interface's routes do not hold (reverse path): counted, dropped
//!       TCP to port 53 of this host: refused (a resolver here would ask by the WLAN)
//!       to this host's own addresses: left alone (its own services), except DNS
//!       TCP        -> TPROXY to the gateway's listener (127.0.0.1 / ::1), marked
//!       UDP 53     -> TPROXY to the DNS answerer, when there is one; else refused
//!       other UDP  -> TPROXY to the datagram relay (carry), or refused (block)
//!   chain forward     (filter hook forward, priority filter - 10)
//!     in or out of a LAN interface: dropped
//! ```
//!
//! The first TCP rule is the kernel's TPROXY recipe for established connections
//! (Documentation/networking/tproxy.rst): a segment of a connection the gateway's listener
//! already took belongs to a transparent socket of this host, so it is marked for local
//! delivery and accepted before the `fib` lookups and the `tproxy` lookup. Without it,
//! every segment from the LAN paid two FIB lookups, the TPROXY socket lookup and, since
//! `tproxy` assigns the socket before routing, the slow input route (policy rules, then
//! table `4710`): the kernel's early demultiplexing and its cached route were never used
//! (measured in docs/BENCHMARKS.md, "The gateway against the proxy client"). Only sockets
//! with IP_TRANSPARENT match, which only CAP_NET_ADMIN can set; such a packet is delivered
//! on this host, never forwarded.
//!
//! The forward chain is what makes the gateway fail closed: whatever else the host's
//! ruleset accepts and whatever `ip_forward` says, a packet that would be forwarded from or
//! to the LAN is dropped (a drop in any base chain is final). The kill switch
//! ([`super::killswitch`]) drops the same and stays when the gateway stops; this table is
//! removed then, and replaced in one transaction at the next start.

use std::fmt::Write;

/// The table's name (in family `inet`).
pub const TABLE: &str = "nena_gateway";

/// The comment of the reverse-path rules, whose counters count what they dropped.
pub const SPOOFED: &str = "nena: source outside the LAN interface's prefixes";

/// The mark of packets sent to a local socket (the policy rule's `fwmark`).
pub const MARK: u32 = 0x6e67_0001;

/// What the table sends where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The LAN interfaces.
    pub lan: Vec<String>,
    /// The TCP listener's port, on 127.0.0.1 and (when `v6`) ::1.
    pub tcp_port: u16,
    /// The DNS answerer's UDP port (None: DNS is refused like any UDP that is not carried).
    pub dns_port: Option<u16>,
    /// The datagram relay's port (None: UDP other than DNS is refused: `--udp block`).
    pub udp_port: Option<u16>,
    /// IPv6 is carried too (a listener on ::1 exists); else IPv6 from the LAN is refused.
    pub v6: bool,
}

/// `{ "lan0", "lan1" }`, each name quoted for nft.
fn iface_set(names: &[String]) -> String {
    let q: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    format!("{{ {} }}", q.join(", "))
}

/// Checks an interface name before it goes into the ruleset: what Linux accepts (at most
/// 15 bytes, no `/`, no whitespace) and nothing that could end nft's quoted string.
pub fn check_iface(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() < 16
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.@".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!("`{name}` is not an interface name"))
    }
}

/// The whole table: delete-then-create in one transaction (`nft -f` applies a file
/// atomically), so a table left by a killed gateway is replaced, never doubled.
pub fn ruleset(p: &Plan) -> String {
    let lan = iface_set(&p.lan);
    let mark = format!("{MARK:#010x}");
    let mut s = String::new();
    // `add` then `delete`: deleting a table that does not exist would fail the transaction.
    let _ = writeln!(s, "add table inet {TABLE}");
    let _ = writeln!(s, "delete table inet {TABLE}");
    let _ = writeln!(s, "table inet {TABLE} {{");
    let _ = writeln!(s, "  chain prerouting {{");
    let _ = writeln!(
        s,
        "    type filter hook prerouting priority mangle; policy accept;"
    );
    let _ = writeln!(s, "    iifname != {lan} return");
    let _ = writeln!(
        s,
        "    meta l4proto tcp socket transparent 1 meta mark set {mark} accept"
    );
    // Reverse path: a source the LAN interface's routes do not hold (a forged or foreign
    // address) is dropped and counted, before anything answers it or carries it. DHCP's
    // 0.0.0.0 and IPv6 duplicate address detection's :: have no route by design.
    for (family, any) in [("ip", "0.0.0.0"), ("ip6", "::")] {
        let _ = writeln!(
            s,
            "    {family} saddr != {any} fib saddr . iif oif missing counter drop comment \"{SPOOFED}\""
        );
    }
    // DNS over TCP to this host's own addresses is refused, not left to a resolver here:
    // that resolver would ask its upstream by the host's routes, the WLAN included (UDP to
    // port 53 goes to the gateway's answerer below; the kill switch drops what is neither).
    let _ = writeln!(
        s,
        "    fib daddr type local tcp dport 53 counter reject with tcp reset"
    );
    let _ = writeln!(s, "    fib daddr type local udp dport != 53 return");
    let _ = writeln!(s, "    fib daddr type local meta l4proto != udp return");
    let _ = writeln!(
        s,
        "    meta nfproto ipv4 meta l4proto tcp tproxy ip to 127.0.0.1:{} meta mark set {mark} accept",
        p.tcp_port
    );
    if p.v6 {
        let _ = writeln!(
            s,
            "    meta nfproto ipv6 meta l4proto tcp tproxy ip6 to [::1]:{} meta mark set {mark} accept",
            p.tcp_port
        );
    }
    if let Some(port) = p.dns_port {
        let _ = writeln!(
            s,
            "    meta nfproto ipv4 udp dport 53 tproxy ip to 127.0.0.1:{port} meta mark set {mark} accept"
        );
        if p.v6 {
            let _ = writeln!(
                s,
                "    meta nfproto ipv6 udp dport 53 tproxy ip6 to [::1]:{port} meta mark set {mark} accept"
            );
        }
    }
    if let Some(port) = p.udp_port {
        let _ = writeln!(
            s,
            "    meta nfproto ipv4 meta l4proto udp tproxy ip to 127.0.0.1:{port} meta mark set {mark} accept"
        );
        if p.v6 {
            let _ = writeln!(
                s,
                "    meta nfproto ipv6 meta l4proto udp tproxy ip6 to [::1]:{port} meta mark set {mark} accept"
            );
        }
    }
    // What is not carried is refused where the sender sees it (TCP reset, ICMP port
    // unreachable), not dropped in silence.
    let _ = writeln!(s, "    meta l4proto tcp counter reject with tcp reset");
    let _ = writeln!(
        s,
        "    meta l4proto udp counter reject with icmpx type port-unreachable"
    );
    let _ = writeln!(s, "  }}");
    let _ = writeln!(s, "  chain forward {{");
    let _ = writeln!(
        s,
        "    type filter hook forward priority filter - 10; policy accept;"
    );
    let _ = writeln!(s, "    iifname {lan} counter drop");
    let _ = writeln!(s, "    oifname {lan} counter drop");
    let _ = writeln!(s, "  }}");
    let _ = writeln!(s, "}}");
    s
}

/// Removes the table (nothing when it is not there).
pub fn removal() -> String {
    format!("add table inet {TABLE}\ndelete table inet {TABLE}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        Plan {
            lan: vec!["lan".into(), "lan2".into()],
            tcp_port: 40001,
            dns_port: Some(40002),
            udp_port: None,
            v6: true,
        }
    }

    #[test]
    fn tcp_goes_to_the_listener_and_lan_forwarding_is_dropped() {
        let r = ruleset(&plan());
        assert!(r.starts_with("add table inet nena_gateway\ndelete table inet nena_gateway\n"));
        assert!(r.contains("iifname != { \"lan\", \"lan2\" } return"));
        assert!(r.contains("tproxy ip to 127.0.0.1:40001 meta mark set 0x6e670001 accept"));
        assert!(r.contains("tproxy ip6 to [::1]:40001"));
        assert!(r.contains("udp dport 53 tproxy ip to 127.0.0.1:40002"));
        assert!(r.contains("iifname { \"lan\", \"lan2\" } counter drop"));
        assert!(r.contains("oifname { \"lan\", \"lan2\" } counter drop"));
        // Established connections skip the lookups, after the LAN check, before the rest.
        let established = r
            .find("meta l4proto tcp socket transparent 1 meta mark set 0x6e670001 accept")
            .unwrap();
        assert!(r.find("iifname != ").unwrap() < established);
        assert!(established < r.find("fib daddr type local").unwrap());
        // Reverse path, for both families, after the established fast path and before
        // anything is answered or carried; DHCP's and DAD's unspecified sources exempt.
        let rp = r
            .find("ip saddr != 0.0.0.0 fib saddr . iif oif missing counter drop")
            .unwrap();
        assert!(r.contains("ip6 saddr != :: fib saddr . iif oif missing counter drop"));
        assert!(established < rp && rp < r.find("fib daddr type local").unwrap());
        // TCP DNS to this host is refused before its own services are left alone.
        let tcp53 = r
            .find("fib daddr type local tcp dport 53 counter reject with tcp reset")
            .unwrap();
        assert!(
            tcp53
                < r.find("fib daddr type local meta l4proto != udp return")
                    .unwrap()
        );
        // Block: no relay, the rest of UDP refused after DNS.
        assert!(!r.contains("meta l4proto udp tproxy"));
        let dns = r.find("udp dport 53 tproxy").unwrap();
        let refuse = r.find("reject with icmpx").unwrap();
        assert!(dns < refuse);
    }

    #[test]
    fn carry_sends_udp_to_the_relay_and_v4_only_leaves_v6_to_the_refusals() {
        let mut p = plan();
        p.udp_port = Some(40003);
        p.v6 = false;
        let r = ruleset(&p);
        assert!(r.contains("meta l4proto udp tproxy ip to 127.0.0.1:40003"));
        assert!(!r.contains("ip6 to"));
        assert!(r.contains("meta l4proto tcp counter reject with tcp reset"));
    }

    #[test]
    fn interface_names_cannot_break_out_of_the_ruleset() {
        assert!(check_iface("lan0").is_ok());
        assert!(check_iface("br-lan.10").is_ok());
        for bad in [
            "",
            "a\"; flush ruleset",
            "has space",
            "sixteen-bytes-xx",
            "a/b",
            "a}",
        ] {
            assert!(check_iface(bad).is_err(), "{bad}");
        }
    }
}
