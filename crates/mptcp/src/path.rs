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
mod tests;
