//! Trusted / untrusted local paths: `--trusted ADDR|IFACE` and `--untrusted ADDR|IFACE`
//! specifications ([`PathSpec`], [`PathPolicy`]), their resolution to local addresses and
//! the interfaces that hold them in the current network namespace ([`ResolvedPolicy`],
//! [`LocalIface`]) and the classification of a subflow's local address ([`Trust`]). An
//! address in neither list counts as untrusted.
//!
//! A path is an interface, not an address: routing alone may send a packet from the trusted
//! address out of the untrusted interface (a host without source-based rules whose default
//! route leaves by the untrusted link). So every policy address keeps the interface it
//! belongs to, and the connection code binds each subflow to it (`SO_BINDTODEVICE` for the
//! initial subflow, the interface index on `SUBFLOW_CREATE`).

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

/// A local path: an IP address, or an interface name (all of its addresses).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum PathSpec {
    Addr(IpAddr),
    Iface(String),
}

/// Why a `PathSpec` string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid path `{input}`: {reason}")]
pub struct PathSpecError {
    pub input: String,
    pub reason: &'static str,
}

impl FromStr for PathSpec {
    type Err = PathSpecError;
    /// An IP address (v4 or v6, `[v6]` accepted), otherwise a Linux interface name
    /// (1..=15 bytes, no `/`, `:` or whitespace).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason| PathSpecError {
            input: s.to_string(),
            reason,
        };
        let t = s.trim();
        let unbracketed = t
            .strip_prefix('[')
            .and_then(|x| x.strip_suffix(']'))
            .unwrap_or(t);
        if let Ok(ip) = unbracketed.parse::<IpAddr>() {
            return Ok(PathSpec::Addr(ip));
        }
        if t.is_empty() {
            return Err(err("empty; expected an IP address or an interface name"));
        }
        if t.len() > 15 {
            return Err(err(
                "not an IP address, and too long for an interface name (max 15)",
            ));
        }
        if t == "."
            || t == ".."
            || t.chars()
                .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control())
        {
            return Err(err("not an IP address nor a valid interface name"));
        }
        if t.chars().all(|c| c.is_ascii_digit() || c == '.') {
            return Err(err("looks like an IP address but does not parse as one"));
        }
        Ok(PathSpec::Iface(t.to_string()))
    }
}

impl fmt::Display for PathSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathSpec::Addr(a) => write!(f, "{a}"),
            PathSpec::Iface(i) => write!(f, "{i}"),
        }
    }
}

/// Which local paths the user trusts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PathPolicy {
    pub trusted: Vec<PathSpec>,
    pub untrusted: Vec<PathSpec>,
}

/// Trust of one local address under a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Trust {
    Trusted,
    Untrusted,
    /// Listed nowhere: treated as untrusted by every check.
    Unlisted,
}

impl Trust {
    pub fn is_trusted(self) -> bool {
        self == Trust::Trusted
    }
    /// How the tools name it to a person (`unlisted` in JSON).
    pub fn label(self) -> &'static str {
        match self {
            Trust::Trusted => "trusted",
            Trust::Untrusted => "untrusted",
            Trust::Unlisted => "not named by --trusted or --untrusted, counted as untrusted",
        }
    }
}

/// A local interface: its name and index in the current network namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct LocalIface {
    pub name: String,
    pub index: u32,
}

impl fmt::Display for LocalIface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`", self.name)
    }
}

/// A policy turned into concrete local addresses of the current network namespace, each
/// with the interface that holds it (`ifaces`; an address given literally that no
/// interface holds has no entry).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ResolvedPolicy {
    pub trusted: BTreeSet<IpAddr>,
    pub untrusted: BTreeSet<IpAddr>,
    pub ifaces: BTreeMap<IpAddr, LocalIface>,
}

/// Policy resolution failures.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("no trusted path given: pass at least one --trusted ADDR|IFACE")]
    NoTrusted,
    #[error("interface `{0}` does not exist in this network namespace")]
    NoSuchIface(String),
    #[error("interface `{0}` has no IP address")]
    IfaceWithoutAddress(String),
    /// Every address of the interface is link-local (fe80::/10): none can be a subflow's
    /// source towards a server beyond the link.
    #[error(
        "interface `{0}` has only link-local addresses (fe80::/10), which are no path to a \
         server beyond the link: give it a global address"
    )]
    IfaceOnlyLinkLocal(String),
    /// A link-local address named as a path.
    #[error(
        "{0} is a link-local address (fe80::/10): it cannot be a subflow's source towards a \
         server beyond the link; name the interface or one of its global addresses"
    )]
    LinkLocal(IpAddr),
    #[error("{0} is both trusted and untrusted")]
    Conflict(IpAddr),
    #[error("cannot list local addresses: {0}")]
    Io(#[from] std::io::Error),
    #[error(
        "the address {addr} is held by two interfaces, `{a}` and `{b}`: name the interface instead"
    )]
    AmbiguousAddr { addr: IpAddr, a: String, b: String },
}

/// The interface of this network namespace that holds `addr`, if one does (an IPv4-mapped
/// IPv6 address is looked up as IPv4).
pub fn iface_of(addr: IpAddr) -> std::io::Result<Option<LocalIface>> {
    let want = canonical(addr);
    Ok(local_addresses()?
        .into_iter()
        .find(|(_, a)| canonical(*a) == want)
        .and_then(|(name, _)| {
            let index = nix::net::if_::if_nametoindex(name.as_str()).ok()?;
            Some(LocalIface { name, index })
        }))
}

/// The addresses of every interface of the current network namespace, with their names.
fn local_addresses() -> std::io::Result<Vec<(String, IpAddr)>> {
    let addrs = nix::ifaddrs::getifaddrs().map_err(std::io::Error::from)?;
    Ok(addrs
        .filter_map(|ifa| {
            let sa = ifa.address?;
            let ip = if let Some(v4) = sa.as_sockaddr_in() {
                IpAddr::V4(v4.ip())
            } else if let Some(v6) = sa.as_sockaddr_in6() {
                IpAddr::V6(v6.ip())
            } else {
                return None;
            };
            Some((ifa.interface_name, ip))
        })
        .collect())
}

/// The interfaces of the current network namespace that own `ip`, each named once, in the
/// order `getifaddrs` lists them; for an unspecified `ip` every one with an address of its
/// family (IPv4 ones too for `::`: a listener on 0.0.0.0 or :: takes connections on each).
pub fn interfaces_owning(ip: IpAddr) -> std::io::Result<Vec<String>> {
    Ok(owners(ip, &local_addresses()?))
}

fn owners(ip: IpAddr, locals: &[(String, IpAddr)]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (name, addr) in locals {
        let fits = if ip.is_unspecified() {
            addr.is_ipv4() == ip.is_ipv4() || (ip.is_ipv6() && addr.is_ipv4())
        } else {
            *addr == ip
        };
        if fits && !out.contains(name) {
            out.push(name.clone());
        }
    }
    out
}

/// The interfaces a client's first subflow leaves on: those of its trusted paths (an
/// interface as named, an address by the interfaces that own it), each named once. An
/// address no interface owns is an error.
pub fn trusted_interfaces(trusted: &[PathSpec]) -> std::io::Result<Vec<String>> {
    let mut out = Vec::new();
    for t in trusted {
        let names = match t {
            PathSpec::Iface(n) => vec![n.clone()],
            PathSpec::Addr(a) => interfaces_owning(*a)?,
        };
        if names.is_empty() {
            return Err(std::io::Error::other(format!(
                "no local interface has the trusted address {t:?}"
            )));
        }
        for n in names {
            if !out.contains(&n) {
                out.push(n);
            }
        }
    }
    Ok(out)
}

fn iface_exists(name: &str) -> bool {
    nix::net::if_::if_nametoindex(name).is_ok()
}

impl PathPolicy {
    /// Resolve interface names to their current addresses (both families). Addresses given
    /// literally are kept as they are (they need not be configured yet for classification,
    /// but `connect` binds to one and fails clearly if it is not local).
    pub fn resolve(&self) -> Result<ResolvedPolicy, PolicyError> {
        let locals = local_addresses()?;
        let expand = |specs: &[PathSpec]| -> Result<BTreeSet<IpAddr>, PolicyError> {
            let mut out = BTreeSet::new();
            for s in specs {
                match s {
                    PathSpec::Addr(a) if is_link_local(*a) => {
                        return Err(PolicyError::LinkLocal(*a));
                    }
                    PathSpec::Addr(a) => {
                        out.insert(*a);
                    }
                    PathSpec::Iface(name) => {
                        let all: Vec<IpAddr> = locals
                            .iter()
                            .filter(|(n, _)| n == name)
                            .map(|(_, a)| *a)
                            .collect();
                        let found = path_sources(&all);
                        if found.is_empty() {
                            return Err(if !all.is_empty() {
                                PolicyError::IfaceOnlyLinkLocal(name.clone())
                            } else if iface_exists(name) {
                                PolicyError::IfaceWithoutAddress(name.clone())
                            } else {
                                PolicyError::NoSuchIface(name.clone())
                            });
                        }
                        out.extend(found);
                    }
                }
            }
            Ok(out)
        };
        let trusted = expand(&self.trusted)?;
        let untrusted = expand(&self.untrusted)?;
        // Each policy address's interface: the one it was named by, else the one holding it.
        let mut ifaces = BTreeMap::new();
        for spec in self.trusted.iter().chain(&self.untrusted) {
            if let PathSpec::Iface(name) = spec {
                let index = nix::net::if_::if_nametoindex(name.as_str())
                    .map_err(|_| PolicyError::NoSuchIface(name.clone()))?;
                for (n, a) in locals
                    .iter()
                    .filter(|(n, a)| n == name && !is_link_local(*a))
                {
                    ifaces.insert(
                        *a,
                        LocalIface {
                            name: n.clone(),
                            index,
                        },
                    );
                }
            }
        }
        for addr in trusted.iter().chain(&untrusted) {
            if ifaces.contains_key(addr) {
                continue;
            }
            let holders: Vec<&String> = locals
                .iter()
                .filter(|(_, a)| canonical(*a) == canonical(*addr))
                .map(|(n, _)| n)
                .collect();
            if let [a, b, ..] = holders.as_slice() {
                if a != b {
                    return Err(PolicyError::AmbiguousAddr {
                        addr: *addr,
                        a: a.to_string(),
                        b: b.to_string(),
                    });
                }
            }
            if let Some(name) = holders.first() {
                if let Ok(index) = nix::net::if_::if_nametoindex(name.as_str()) {
                    ifaces.insert(
                        *addr,
                        LocalIface {
                            name: name.to_string(),
                            index,
                        },
                    );
                }
            }
        }
        let mut r = ResolvedPolicy::new(trusted, untrusted)?;
        r.ifaces = ifaces;
        Ok(r)
    }
}

impl ResolvedPolicy {
    /// Build from address sets; refuses an address present in both.
    pub fn new(
        trusted: BTreeSet<IpAddr>,
        untrusted: BTreeSet<IpAddr>,
    ) -> Result<Self, PolicyError> {
        if let Some(a) = trusted.intersection(&untrusted).next() {
            return Err(PolicyError::Conflict(*a));
        }
        Ok(ResolvedPolicy {
            trusted,
            untrusted,
            ifaces: BTreeMap::new(),
        })
    }

    /// The interface that holds the policy address `addr` (None for an address no
    /// interface holds, or one outside the policy).
    pub fn iface(&self, addr: IpAddr) -> Option<&LocalIface> {
        let addr = canonical(addr);
        self.ifaces
            .iter()
            .find(|(a, _)| canonical(**a) == addr)
            .map(|(_, i)| i)
    }

    /// The trusted interfaces (by index).
    pub fn trusted_ifaces(&self) -> BTreeSet<&LocalIface> {
        self.trusted.iter().filter_map(|a| self.iface(*a)).collect()
    }

    /// Trust of a local address; IPv4-mapped IPv6 addresses are compared as IPv4.
    pub fn classify(&self, addr: IpAddr) -> Trust {
        let addr = canonical(addr);
        let has = |set: &BTreeSet<IpAddr>| set.iter().any(|a| canonical(*a) == addr);
        if has(&self.trusted) {
            Trust::Trusted
        } else if has(&self.untrusted) {
            Trust::Untrusted
        } else {
            Trust::Unlisted
        }
    }

    /// Trust of a subflow from `addr` that leaves by the interface `iface` (index): a path is
    /// an interface, so a trusted address counts as trusted only when the subflow leaves by a
    /// trusted interface; leaving by another one, or by one nobody could tell, it is
    /// untrusted. (A policy that knows no interface of its trusted addresses, as unit tests
    /// build them, classifies by address.) Other addresses: as [`ResolvedPolicy::classify`].
    pub fn classify_path(&self, addr: IpAddr, iface: Option<u32>) -> Trust {
        let t = self.classify(addr);
        if t != Trust::Trusted {
            return t;
        }
        let trusted: BTreeSet<u32> = self.trusted_ifaces().iter().map(|i| i.index).collect();
        if trusted.is_empty() || iface.is_some_and(|i| trusted.contains(&i)) {
            Trust::Trusted
        } else {
            Trust::Untrusted
        }
    }

    /// The first trusted address of the same family as `remote` (the initial subflow's source).
    pub fn trusted_source_for(&self, remote: IpAddr) -> Option<IpAddr> {
        self.trusted
            .iter()
            .copied()
            .filter(|a| !a.is_unspecified() && !is_link_local(*a))
            .find(|a| is_ipv4(*a) == is_ipv4(remote))
    }

    /// The policy's addresses of the other family than `remote`'s that can be subflow
    /// sources (untrusted ones first; loopback, unspecified and link-local ones left out):
    /// the paths a connection to `remote` reaches only by joining an address the server
    /// announces in that family (an IPv6-only LTE link and an IPv4-only WLAN). Pure.
    pub fn other_family_sources(&self, remote: IpAddr) -> Vec<IpAddr> {
        let v4 = !is_ipv4(remote);
        let mut out: Vec<IpAddr> = Vec::new();
        for a in self.untrusted.iter().chain(&self.trusted).copied() {
            if is_ipv4(a) == v4
                && !a.is_loopback()
                && !a.is_unspecified()
                && !is_link_local(a)
                && !out.contains(&canonical(a))
            {
                out.push(canonical(a));
            }
        }
        out
    }

    /// Whether a connection to `remote` needs an IPv6 socket: always for an IPv6 remote, and
    /// for an IPv4 one when the policy has IPv6 paths too (only an `AF_INET6` MPTCP socket
    /// that is not `IPV6_V6ONLY` takes subflows of both families; it reaches an IPv4 remote
    /// at its IPv4-mapped address). Pure.
    pub fn needs_ipv6_socket(&self, remote: IpAddr) -> bool {
        !is_ipv4(remote) || !self.other_family_sources(remote).is_empty()
    }
}

/// Where subflows nena opens (userspace PM) go: the address and port the connection went
/// to, unless the peer denies joins there (the C flag of MP_CAPABLE, `deny_initial`): then
/// the first address it announced of the connection's family (ADD_ADDR; announced without
/// a port, it keeps the connection's port), and `None` while it has announced none: a join
/// to the denied address would go nowhere useful, so the caller waits for the announcement.
/// A server behind a balancer announces its own address or port and denies joins to the
/// shared one (`net.mptcp.allow_join_initial_addr_port=0`): a join there would be balanced
/// to a random server (docs/DEPLOY.md). A server that announces a second address without
/// denying the first may listen on the first only, so joins stay there. Pure, for the gate,
/// the recovery machine and tests.
pub fn join_target(
    remote: SocketAddr,
    announced: &[SocketAddr],
    deny_initial: bool,
) -> Option<SocketAddr> {
    if !deny_initial {
        return Some(remote);
    }
    announced
        .iter()
        .find(|a| a.is_ipv4() == remote.is_ipv4())
        .map(|a| {
            let port = if a.port() == 0 {
                remote.port()
            } else {
                a.port()
            };
            SocketAddr::new(a.ip(), port)
        })
}

/// Where a subflow of the other family than the connection's goes: the first address the
/// peer announced in the family `v4` (ADD_ADDR; one announced without a port keeps the
/// connection's port `port`). `None` when it announced none of that family: the initial
/// address is of the other family, so there is nothing else to join. Pure.
pub fn other_family_target(announced: &[SocketAddr], v4: bool, port: u16) -> Option<SocketAddr> {
    announced.iter().find(|a| is_ipv4(a.ip()) == v4).map(|a| {
        let p = if a.port() == 0 { port } else { a.port() };
        SocketAddr::new(canonical(a.ip()), p)
    })
}

/// The warning the in-kernel path manager's release gives when it will open no subflow of
/// the connection's family (`same_endpoints`: its `subflow` endpoints of that family; none),
/// naming the real cause: no endpoint at all, or, when the policy (`other_sources`) or the
/// endpoints (`other_endpoints`) have paths of the other family, that the server announced
/// no address of that family, or that the kernel joined the one it announced before the
/// first flight (nena closes such subflows; the kernel does not join again). `None` when
/// there is nothing to warn of (an endpoint of the connection's family, or a subflow of the
/// other family open: `other_subflow`). Pure.
pub fn kernel_pm_family_note(
    remote: SocketAddr,
    same_endpoints: &[IpAddr],
    other_endpoints: &[IpAddr],
    other_sources: &[IpAddr],
    announced: &[SocketAddr],
    other_subflow: bool,
) -> Option<String> {
    if !same_endpoints.is_empty() || other_subflow {
        return None;
    }
    let mut paths: Vec<IpAddr> = Vec::new();
    for a in other_endpoints.iter().chain(other_sources) {
        let a = canonical(*a);
        if !is_link_local(a) && !paths.contains(&a) {
            paths.push(a);
        }
    }
    if paths.is_empty() {
        return Some(
            "the in-kernel path manager has no `subflow` endpoint: the connection stays on one \
             path (add one with `ip mptcp endpoint add ADDR dev IFACE subflow`)"
                .to_string(),
        );
    }
    let v4 = !is_ipv4(remote.ip());
    let (fam, conn_fam) = (family_name(v4), family_name(!v4));
    let list = paths
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    Some(match other_family_target(announced, v4, remote.port()) {
        None => format!(
            "the server had announced no {fam} address when the first flight was acknowledged, \
             so the {fam} path(s) {list} cannot join this {conn_fam} connection to {remote} (a \
             subflow of another family than the connection's can only go to an address the \
             server announces: a `signal` endpoint of that family on the server); the \
             connection stays on its {conn_fam} path(s) unless the server announces one later, \
             which the kernel then joins"
        ),
        Some(t) => format!(
            "the server announced {t}, but the in-kernel path manager joins it only when the \
             announcement arrives, which was before the first flight: nena closed that subflow \
             (nothing leaves by an untrusted link before the first flight is acknowledged) and \
             the kernel does not join again, so the {fam} path(s) {list} carry nothing on this \
             connection (the userspace path manager, net.mptcp.path_manager=userspace, joins \
             it after the first flight)"
        ),
    })
}

/// `addr` as an address of an IPv6 socket: IPv4 addresses become IPv4-mapped IPv6 ones.
pub fn to_ipv6_socket_addr(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V4(v4) => SocketAddr::new(IpAddr::V6(v4.ip().to_ipv6_mapped()), v4.port()),
        v6 => v6,
    }
}

/// An IPv6 link-local unicast address (fe80::/10). It is valid on its link only: a subflow
/// from it cannot reach a server beyond the link (the kernel accepts the `SUBFLOW_CREATE`
/// and the SYN goes nowhere), so it is never a path: interfaces resolve to their other
/// addresses, and naming one is refused.
pub fn is_link_local(a: IpAddr) -> bool {
    match a {
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
        IpAddr::V4(_) => false,
    }
}

/// The addresses of `addrs` that can be a subflow's source: link-local ones left out, in
/// their order. Pure.
pub fn path_sources(addrs: &[IpAddr]) -> Vec<IpAddr> {
    addrs
        .iter()
        .copied()
        .filter(|a| !is_link_local(*a))
        .collect()
}

/// The address family of `a` as a subflow sees it (an IPv4-mapped IPv6 address is IPv4).
pub fn is_ipv4(a: IpAddr) -> bool {
    canonical(a).is_ipv4()
}

/// How the tools name an address family to a person.
/// The line for a path that cannot join the address `target` the server announced, for want
/// of a route in its family through its interface `iface` (holding `addr`).
pub fn no_route_to_announced(target: SocketAddr, iface: &LocalIface, addr: IpAddr) -> String {
    format!(
        "no {} route to {target} (the address the server announced) through {iface} ({addr}), \
         so that path cannot join: add one, e.g. a default route on `{}`",
        family_name(is_ipv4(target.ip())),
        iface.name
    )
}

pub fn family_name(v4: bool) -> &'static str {
    if v4 {
        "IPv4"
    } else {
        "IPv6"
    }
}

pub(crate) fn canonical(a: IpAddr) -> IpAddr {
    match a {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(a),
        v4 => v4,
    }
}

/// The same socket address, an IPv4-mapped IPv6 address being its IPv4 address (events and
/// `MPTCP_FULL_INFO` may spell one address in the two ways).
pub(crate) fn same_addr(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() == b.port() && canonical(a.ip()) == canonical(b.ip())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owners_of_an_address_or_of_any() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let locals = vec![
            ("lo".to_string(), ip("127.0.0.1")),
            ("lo".to_string(), ip("::1")),
            ("eth0".to_string(), ip("198.18.1.2")),
            ("eth1".to_string(), ip("2001:db8::2")),
        ];
        assert_eq!(owners(ip("198.18.1.2"), &locals), ["eth0"]);
        assert!(owners(ip("198.18.255.254"), &locals).is_empty());
        assert_eq!(owners(ip("0.0.0.0"), &locals), ["lo", "eth0"]);
        assert_eq!(owners(ip("::"), &locals), ["lo", "eth0", "eth1"]);
    }

    #[test]
    fn loopback_owns_127_0_0_1() {
        let v = interfaces_owning("127.0.0.1".parse().unwrap()).unwrap();
        assert_eq!(v, vec!["lo".to_string()]);
        assert!(interfaces_owning("0.0.0.0".parse().unwrap())
            .unwrap()
            .contains(&"lo".to_string()));
        let t = [PathSpec::Iface("x0".into()), "127.0.0.1".parse().unwrap()];
        assert_eq!(trusted_interfaces(&t).unwrap(), ["x0", "lo"]);
        let none = ["198.18.255.254".parse().unwrap()];
        assert!(trusted_interfaces(&none)
            .unwrap_err()
            .to_string()
            .starts_with("no local interface has the trusted address"));
    }

    #[test]
    fn parses_addresses_and_ifaces() {
        assert_eq!(
            "198.18.1.2".parse::<PathSpec>().unwrap(),
            PathSpec::Addr("198.18.1.2".parse().unwrap())
        );
        assert_eq!(
            "2001:db8::1".parse::<PathSpec>().unwrap(),
            PathSpec::Addr("2001:db8::1".parse().unwrap())
        );
        assert_eq!(
            "[2001:db8::1]".parse::<PathSpec>().unwrap(),
            PathSpec::Addr("2001:db8::1".parse().unwrap())
        );
        assert_eq!(
            "untrusted".parse::<PathSpec>().unwrap(),
            PathSpec::Iface("untrusted".into())
        );
        assert_eq!(
            "eth0.100".parse::<PathSpec>().unwrap(),
            PathSpec::Iface("eth0.100".into())
        );
    }

    #[test]
    fn rejects_bad_specs() {
        for bad in [
            "",
            "  ",
            "a/b",
            "averyveryverylongname",
            "198.18.1.300",
            "1.2.3",
            "wl an",
            "..",
        ] {
            let e = bad.parse::<PathSpec>().unwrap_err();
            assert!(e.to_string().contains("invalid path"), "{bad}: {e}");
        }
    }

    #[test]
    fn display_round_trips() {
        for s in ["198.18.2.2", "trusted", "fe80::1"] {
            assert_eq!(s.parse::<PathSpec>().unwrap().to_string(), s);
        }
    }

    #[test]
    fn classification_and_source_choice() {
        let t: BTreeSet<IpAddr> = [
            "198.18.1.2".parse().unwrap(),
            "2001:db8::2".parse().unwrap(),
        ]
        .into();
        let u: BTreeSet<IpAddr> = ["198.18.2.2".parse().unwrap()].into();
        let p = ResolvedPolicy::new(t, u).unwrap();
        assert_eq!(p.classify("198.18.1.2".parse().unwrap()), Trust::Trusted);
        assert_eq!(
            p.classify("::ffff:198.18.1.2".parse().unwrap()),
            Trust::Trusted
        );
        assert_eq!(p.classify("198.18.2.2".parse().unwrap()), Trust::Untrusted);
        assert_eq!(p.classify("198.18.9.9".parse().unwrap()), Trust::Unlisted);
        assert!(!Trust::Unlisted.is_trusted());
        assert_eq!(
            p.trusted_source_for("198.18.3.2".parse().unwrap()),
            Some("198.18.1.2".parse().unwrap())
        );
        assert_eq!(
            p.trusted_source_for("2001:db8::9".parse().unwrap()),
            Some("2001:db8::2".parse().unwrap())
        );
    }

    #[test]
    fn link_local_addresses_are_never_paths() {
        let ll: IpAddr = "fe80::f06b:f2ff:fe06:19c6".parse().unwrap();
        assert!(is_link_local(ll));
        assert!(is_link_local("febf::1".parse().unwrap()));
        assert!(!is_link_local("fec0::1".parse().unwrap()));
        assert!(!is_link_local("2001:2:0:1::2".parse().unwrap()));
        assert!(!is_link_local("198.18.1.2".parse().unwrap()));
        let g: IpAddr = "2001:2:0:1::2".parse().unwrap();
        assert_eq!(path_sources(&[ll, g]), vec![g]);
        assert!(path_sources(&[ll]).is_empty());
        // named literally: refused with one line
        let p = PathPolicy {
            trusted: vec![PathSpec::Addr(ll)],
            untrusted: vec![],
        };
        let e = p.resolve().unwrap_err();
        assert!(matches!(e, PolicyError::LinkLocal(a) if a == ll), "{e}");
        assert!(e.to_string().contains("link-local") && !e.to_string().contains('\n'));
        // a policy built by hand with one: never the initial subflow's source
        let r = ResolvedPolicy::new([ll].into(), BTreeSet::new()).unwrap();
        assert_eq!(r.trusted_source_for("2001:2:0:3::2".parse().unwrap()), None);
        let r = ResolvedPolicy::new(
            [ll, g].into(),
            [ll.to_string().replace("c6", "c7").parse().unwrap()].into(),
        )
        .unwrap();
        assert_eq!(
            r.trusted_source_for("2001:2:0:3::2".parse().unwrap()),
            Some(g)
        );
        assert!(r.other_family_sources("198.18.3.2".parse().unwrap()) == vec![g]);
    }

    #[test]
    fn the_other_family_and_its_announced_target() {
        let t6: IpAddr = "2001:2:0:1::2".parse().unwrap();
        let u4: IpAddr = "198.18.2.2".parse().unwrap();
        let p = ResolvedPolicy::new([t6].into(), [u4].into()).unwrap();
        let r6: IpAddr = "2001:2:0:3::2".parse().unwrap();
        let r4: IpAddr = "198.18.3.2".parse().unwrap();
        assert_eq!(p.other_family_sources(r6), vec![u4]);
        assert_eq!(p.other_family_sources(r4), vec![t6]);
        assert!(p.needs_ipv6_socket(r6) && p.needs_ipv6_socket(r4));
        // one family only: an IPv4 connection keeps its IPv4 socket
        let p4 = ResolvedPolicy::new(["198.18.1.2".parse().unwrap()].into(), [u4].into()).unwrap();
        assert!(p4.other_family_sources(r4).is_empty());
        assert!(!p4.needs_ipv6_socket(r4));
        assert!(p4.needs_ipv6_socket(r6));
        // an IPv4-mapped policy address counts as IPv4
        let pm = ResolvedPolicy::new([t6].into(), ["::ffff:198.18.2.2".parse().unwrap()].into())
            .unwrap();
        assert_eq!(pm.other_family_sources(r6), vec![u4]);
        // the announced address of the family asked for, the connection's port when none
        let ann: Vec<SocketAddr> = vec![
            "[2001:2:0:3::3]:0".parse().unwrap(),
            "198.18.3.2:0".parse().unwrap(),
            "198.18.3.3:9000".parse().unwrap(),
        ];
        assert_eq!(
            other_family_target(&ann, true, 4433),
            Some("198.18.3.2:4433".parse().unwrap())
        );
        assert_eq!(
            other_family_target(&ann[2..], true, 4433),
            Some("198.18.3.3:9000".parse().unwrap())
        );
        assert_eq!(
            other_family_target(&ann, false, 4433),
            Some("[2001:2:0:3::3]:4433".parse().unwrap())
        );
        assert_eq!(other_family_target(&ann[1..], false, 4433), None);
        assert_eq!(other_family_target(&[], true, 4433), None);
        // a mapped announcement is an IPv4 target
        let mapped: Vec<SocketAddr> = vec!["[::ffff:198.18.3.2]:0".parse().unwrap()];
        assert_eq!(
            other_family_target(&mapped, true, 80),
            Some("198.18.3.2:80".parse().unwrap())
        );
        assert_eq!(
            to_ipv6_socket_addr("198.18.3.2:80".parse().unwrap()),
            "[::ffff:198.18.3.2]:80".parse().unwrap()
        );
        assert_eq!(
            to_ipv6_socket_addr("[2001:2:0:3::2]:80".parse().unwrap()),
            "[2001:2:0:3::2]:80".parse().unwrap()
        );
        assert_eq!((family_name(true), family_name(false)), ("IPv4", "IPv6"));
    }

    #[test]
    fn the_kernel_pm_note_names_the_real_cause() {
        let r6: SocketAddr = "[2001:2:0:3::2]:4433".parse().unwrap();
        let u4: IpAddr = "198.18.2.2".parse().unwrap();
        let u6: IpAddr = "2001:2:0:2::2".parse().unwrap();
        // an endpoint of the connection's family: nothing to say
        assert_eq!(
            kernel_pm_family_note(r6, &[u6], &[u4], &[u4], &[], false),
            None
        );
        // nothing of either family: the endpoint is missing
        let n = kernel_pm_family_note(r6, &[], &[], &[], &[], false).unwrap();
        assert!(n.contains("has no `subflow` endpoint"), "{n}");
        // an IPv4 endpoint on an IPv6 connection, the server announced no IPv4 address
        let n = kernel_pm_family_note(r6, &[], &[u4], &[u4], &[], false).unwrap();
        assert!(
            n.starts_with("the server had announced no IPv4 address when the first flight was acknowledged, so the IPv4 path(s) 198.18.2.2 cannot join this IPv6 connection"),
            "{n}"
        );
        assert!(
            !n.contains("no `subflow` endpoint") && !n.contains('\n'),
            "{n}"
        );
        // an announced IPv6 address does not help an IPv4 path
        let ann6: Vec<SocketAddr> = vec!["[2001:2:0:3::3]:0".parse().unwrap()];
        let n = kernel_pm_family_note(r6, &[], &[u4], &[], &ann6, false).unwrap();
        assert!(
            n.starts_with("the server had announced no IPv4 address"),
            "{n}"
        );
        // announced, and no IPv4 subflow at the release: closed before the first flight
        let ann4: Vec<SocketAddr> = vec!["198.18.3.2:0".parse().unwrap()];
        let n = kernel_pm_family_note(r6, &[], &[u4], &[u4], &ann4, false).unwrap();
        assert!(
            n.starts_with("the server announced 198.18.3.2:4433, but")
                && n.contains("198.18.2.2 carry nothing"),
            "{n}"
        );
        // the subflow of the other family is there: nothing to say
        assert_eq!(
            kernel_pm_family_note(r6, &[], &[u4], &[u4], &ann4, true),
            None
        );
        // the reverse: an IPv6 path on an IPv4 connection
        let r4: SocketAddr = "198.18.3.2:4433".parse().unwrap();
        let n = kernel_pm_family_note(r4, &[], &[], &[u6], &[], false).unwrap();
        assert!(n.starts_with("the server had announced no IPv6 address when the first flight was acknowledged, so the IPv6 path(s) 2001:2:0:2::2 cannot join this IPv4 connection"), "{n}");
    }

    #[test]
    fn conflict_is_refused() {
        let a: IpAddr = "198.18.1.2".parse().unwrap();
        let e = ResolvedPolicy::new([a].into(), [a].into()).unwrap_err();
        assert_eq!(e.to_string(), "198.18.1.2 is both trusted and untrusted");
    }

    #[test]
    fn resolves_loopback_iface_and_missing_iface() {
        let p = PathPolicy {
            trusted: vec![PathSpec::Iface("lo".into())],
            untrusted: vec![],
        };
        let r = p.resolve().unwrap();
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        assert!(r.trusted.contains(&lo));
        assert_eq!(r.iface(lo).map(|i| i.name.as_str()), Some("lo"));
        assert_eq!(r.trusted_ifaces().len(), 1);
        // an address given literally gets the interface that holds it
        let p = PathPolicy {
            trusted: vec![PathSpec::Addr(lo)],
            untrusted: vec![],
        };
        let r = p.resolve().unwrap();
        assert_eq!(r.iface(lo).map(|i| i.name.as_str()), Some("lo"));
        assert_eq!(
            iface_of(lo).unwrap().map(|i| i.name),
            Some("lo".to_string())
        );
        // an address no interface holds has none
        let far: IpAddr = "198.18.250.250".parse().unwrap();
        assert_eq!(iface_of(far).unwrap(), None);
        let p = PathPolicy {
            trusted: vec![PathSpec::Iface("nonexist0".into())],
            untrusted: vec![],
        };
        assert!(matches!(p.resolve(), Err(PolicyError::NoSuchIface(_))));
    }

    #[test]
    fn joins_go_to_the_address_the_peer_announced_of_the_connections_family() {
        use SocketAddr;
        let remote: SocketAddr = "198.18.4.2:7300".parse().unwrap();
        // Nothing announced and the initial address denied: nowhere yet.
        assert_eq!(join_target(remote, &[], true), None);
        assert_eq!(join_target(remote, &[], false), Some(remote));
        // A fleet server's join port, when the initial address is denied; not otherwise.
        let fleet: SocketAddr = "198.18.4.2:4462".parse().unwrap();
        assert_eq!(join_target(remote, &[fleet], true), Some(fleet));
        assert_eq!(join_target(remote, &[fleet], false), Some(remote));
        // Announced without a port: the connection's port; another family is skipped.
        let v6: SocketAddr = "[2001:db8::1]:4462".parse().unwrap();
        let bare: SocketAddr = "198.18.5.2:0".parse().unwrap();
        assert_eq!(
            join_target(remote, &[v6, bare], true),
            Some("198.18.5.2:7300".parse::<SocketAddr>().unwrap())
        );
        assert_eq!(join_target(remote, &[v6], true), None);
    }
}
