//! The proxy server's `--allow` list: `CIDR[:PORT[-PORT]]` rules ([`AllowRule`]) and the
//! list of them ([`AllowList`]), which permits an address only if a rule does (an empty list
//! permits nothing).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// One `--allow` rule: `CIDR[:PORT[-PORT]]`; IPv6 with ports in brackets:
/// `[2001:db8::/32]:443`. Without a prefix length the rule is one address; without ports,
/// every port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowRule {
    pub net: IpAddr,
    pub prefix: u8,
    pub ports: (u16, u16),
}

impl std::str::FromStr for AllowRule {
    type Err = String;
    fn from_str(s: &str) -> Result<AllowRule, String> {
        let bad = |why: &str| format!("`{s}` is not CIDR[:PORT[-PORT]] ({why})");
        let (cidr, ports) = if let Some(rest) = s.strip_prefix('[') {
            let (c, after) = rest.split_once(']').ok_or_else(|| bad("missing `]`"))?;
            match after {
                "" => (c, None),
                p => (
                    c,
                    Some(
                        p.strip_prefix(':')
                            .ok_or_else(|| bad("expected `:` after `]`"))?,
                    ),
                ),
            }
        } else if s.matches(':').count() == 1 {
            let (c, p) = s.split_once(':').unwrap();
            (c, Some(p))
        } else {
            (s, None)
        };
        let (addr, prefix) = match cidr.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (cidr, None),
        };
        let net: IpAddr = addr.parse().map_err(|_| bad("not an IP address"))?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| bad("bad prefix length"))?,
        };
        let port = |p: &str| p.parse::<u16>().map_err(|_| bad("bad port"));
        let ports = match ports {
            None => (0, u16::MAX),
            Some(p) => match p.split_once('-') {
                Some((lo, hi)) => (port(lo)?, port(hi)?),
                None => (port(p)?, port(p)?),
            },
        };
        if ports.0 > ports.1 {
            return Err(bad("empty port range"));
        }
        Ok(AllowRule {
            net: mask(net, prefix),
            prefix,
            ports,
        })
    }
}

fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(a) => {
            let m = u32::MAX.checked_shl(32 - prefix as u32).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & m))
        }
        IpAddr::V6(a) => {
            let m = u128::MAX.checked_shl(128 - prefix as u32).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(a) & m))
        }
    }
}

impl AllowRule {
    /// Whether the rule permits `addr` (an IPv4-mapped IPv6 address counts as IPv4).
    pub fn permits(&self, addr: SocketAddr) -> bool {
        let ip = addr.ip().to_canonical();
        let port = addr.port();
        ip.is_ipv4() == self.net.is_ipv4()
            && mask(ip, self.prefix) == self.net
            && (self.ports.0..=self.ports.1).contains(&port)
    }
}

/// The proxy server's `--allow` rules. Empty: nothing is permitted (never an open relay).
#[derive(Debug, Clone, Default)]
pub struct AllowList(pub Vec<AllowRule>);

impl AllowList {
    pub fn permits(&self, addr: SocketAddr) -> bool {
        self.0.iter().any(|r| r.permits(addr))
    }

    /// Of the addresses a destination resolved to, those the list permits (in order):
    /// the proxy server connects to these only; none means [`crate::proxy::socks::Rep::NotAllowed`].
    pub fn filter(&self, resolved: &[SocketAddr]) -> Vec<SocketAddr> {
        resolved
            .iter()
            .copied()
            .filter(|a| self.permits(*a))
            .collect()
    }
}
