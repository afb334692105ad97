//! The proxy server's `--allow` list: `CIDR[:PORT[-PORT]]` rules ([`AllowRule`]) and the
//! list of them ([`AllowList`]), which permits an address only if a rule does (an empty list
//! permits nothing).
//!
//! The proxy server's own host is guarded: a destination in a [`GUARDED`] range (loopback,
//! link-local with the cloud metadata services, multicast, broadcast, "this network") or
//! one of the host's own addresses is permitted only by a rule that names it explicitly,
//! one whose network lies inside that range (`127.0.0.1:8080`, `169.254.169.254/32`) or,
//! for an own address, that address alone (`198.18.3.2/32:8000`). `--allow 0.0.0.0/0:80`
//! then reaches the world's port 80, never the server's loopback nor 169.254.169.254:80.

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
    /// Whether the rule's addresses and ports cover `addr` (an IPv4-mapped IPv6 address
    /// counts as IPv4). The list ([`AllowList::permits`]) adds the guard of the host's own
    /// ranges.
    pub fn permits(&self, addr: SocketAddr) -> bool {
        let ip = addr.ip().to_canonical();
        let port = addr.port();
        ip.is_ipv4() == self.net.is_ipv4()
            && mask(ip, self.prefix) == self.net
            && (self.ports.0..=self.ports.1).contains(&port)
    }

    /// Whether the rule's network lies inside `net/prefix` (the rule names that range
    /// explicitly rather than covering it as part of something wider).
    fn inside(&self, net: IpAddr, prefix: u8) -> bool {
        self.net.is_ipv4() == net.is_ipv4()
            && self.prefix >= prefix
            && mask(self.net, prefix) == mask(net, prefix)
    }
}

/// Ranges of the proxy server's own host and its link that a rule must name explicitly:
/// network, prefix length, and what the range is (for the refusal's log line).
pub const GUARDED: &[(IpAddr, u8, &str)] = &[
    (IpAddr::V4(Ipv4Addr::new(127, 0, 0, 0)), 8, "loopback"),
    (
        IpAddr::V4(Ipv4Addr::new(0, 0, 0, 0)),
        8,
        "the this-host range 0.0.0.0/8",
    ),
    (
        IpAddr::V4(Ipv4Addr::new(169, 254, 0, 0)),
        16,
        "link-local, with the cloud metadata service 169.254.169.254",
    ),
    (IpAddr::V4(Ipv4Addr::new(224, 0, 0, 0)), 4, "multicast"),
    (
        IpAddr::V4(Ipv4Addr::new(255, 255, 255, 255)),
        32,
        "broadcast",
    ),
    (IpAddr::V6(Ipv6Addr::LOCALHOST), 128, "loopback"),
    (
        IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        128,
        "the unspecified address ::",
    ),
    (
        IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0)),
        10,
        "link-local",
    ),
    (
        IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)),
        128,
        "the cloud metadata service fd00:ec2::254",
    ),
    (
        IpAddr::V6(Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0)),
        8,
        "multicast",
    ),
];

/// The guarded range `ip` falls in, if any: from [`GUARDED`], else the address itself when
/// `own` says the host holds it.
fn guard_of(ip: IpAddr, own: impl Fn(IpAddr) -> bool) -> Option<(IpAddr, u8, &'static str)> {
    if let Some(g) = GUARDED
        .iter()
        .find(|(net, prefix, _)| net.is_ipv4() == ip.is_ipv4() && mask(ip, *prefix) == *net)
    {
        return Some(*g);
    }
    own(ip).then(|| {
        let full = if ip.is_ipv4() { 32 } else { 128 };
        (ip, full, "an address of the proxy server's host")
    })
}

/// Whether this host holds `ip` (or may send from it: a local route, a broadcast address):
/// the kernel's own answer, a bind to it, which fails with EADDRNOTAVAIL for every other
/// address (no `IP_FREEBIND`, no `IP_TRANSPARENT`).
pub fn host_address(ip: IpAddr) -> bool {
    use socket2::{Domain, Socket, Type};
    let addr = SocketAddr::new(ip, 0);
    let Ok(s) = Socket::new(Domain::for_address(addr), Type::DGRAM, None) else {
        return false;
    };
    if ip.is_ipv6() && s.set_only_v6(true).is_err() {
        return false;
    }
    s.bind(&addr.into()).is_ok()
}

/// The proxy server's `--allow` rules. Empty: nothing is permitted (never an open relay).
#[derive(Debug, Clone, Default)]
pub struct AllowList(pub Vec<AllowRule>);

impl AllowList {
    /// Whether a rule permits `addr`; for a destination on the proxy server's own host
    /// ([`GUARDED`], [`host_address`]) only a rule inside its range.
    pub fn permits(&self, addr: SocketAddr) -> bool {
        self.permits_with(addr, host_address)
    }

    /// [`Self::permits`] with `own` saying which addresses the host holds.
    pub fn permits_with(&self, addr: SocketAddr, own: impl Fn(IpAddr) -> bool) -> bool {
        let mut covering = self.0.iter().filter(|r| r.permits(addr)).peekable();
        if covering.peek().is_none() {
            return false;
        }
        match guard_of(addr.ip().to_canonical(), own) {
            None => true,
            Some((net, prefix, _)) => covering.any(|r| r.inside(net, prefix)),
        }
    }

    /// Why `addr` is not permitted although a rule covers it: the guarded range it is in,
    /// for the refusal's message (None: permitted, or no rule covers it at all).
    pub fn guarded(&self, addr: SocketAddr) -> Option<&'static str> {
        if self.permits(addr) || !self.0.iter().any(|r| r.permits(addr)) {
            return None;
        }
        guard_of(addr.ip().to_canonical(), host_address).map(|g| g.2)
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
