//! Server names resolved where no untrusted path can answer.
//!
//! nena authenticates no server by a certificate, so whoever answers the DNS query for a
//! server's name chooses the server. A laptop on a public WLAN asks the WLAN's resolver (its
//! DHCP put it in /etc/resolv.conf, and the query leaves by the WLAN): an attacker there
//! answers with the address of a nena server of its own and receives the file, in every
//! mode. So a client resolves a server name only with queries that leave by a trusted
//! interface:
//!
//! 1. an address literal is used as it is, and a name in /etc/hosts (a local file no path
//!    can change) as that file says;
//! 2. otherwise the resolver is `--resolver ADDR` when given, else each `nameserver` of
//!    /etc/resolv.conf. The kernel's routing table says which interface a query to it would
//!    leave by (`RTM_GETROUTE`, [`nena_mptcp::route`]): a system resolver counts only when
//!    that is a trusted interface; a given one, when a trusted interface has a route to it;
//!    a resolver on this host (127.0.0.53, systemd-resolved's stub) never, since nena
//!    cannot see which way it forwards;
//! 3. the queries go on a socket bound to that interface (`SO_BINDTODEVICE`: they cannot
//!    leave by another, whatever the routes, and the socket takes no answer that arrived by
//!    another), connected to the resolver (answers from elsewhere are dropped by the
//!    kernel), with a random ID, the question checked in the answer ([`crate::dns`]);
//! 4. where no resolver qualifies, nothing is sent: one line names the resolver, the
//!    interface its query would leave by, and the fix ([`ResolveError::Untrusted`]).
//!
//! The pure parts (parsing `HOST:PORT` (host_port.rs), choosing resolvers from routes,
//! /etc/hosts) are tested without a network; the messages, their exchange and resolv.conf
//! are [`crate::dns`]'s.

pub mod fuzzing;
mod host_port;
mod query;

pub use host_port::{Host, ServerAddr};

use nena_mptcp::path::{LocalIface, ResolvedPolicy};
use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;
use thiserror::Error;

/// `--resolver ADDR[:PORT]` (port 53 when not given).
pub fn parse_resolver(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    let bare = s.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<IpAddr>()
        .map(|ip| SocketAddr::new(ip, 53))
        .map_err(|_| format!("`{s}` is not a resolver address (ADDR or ADDR:PORT)"))
}

/// Where names are looked up: the files of the system, a resolver the user gave, and how
/// long to wait for answers.
#[derive(Debug, Clone)]
pub struct ResolverConfig {
    /// `--resolver`: the only resolver asked (through a trusted interface).
    pub resolver: Option<SocketAddr>,
    pub resolv_conf: PathBuf,
    pub hosts: PathBuf,
    /// Bound on all the queries of one name.
    pub timeout: Duration,
}

impl ResolverConfig {
    /// The system's files, `resolver` when given, `timeout` for the answers.
    pub fn new(resolver: Option<SocketAddr>, timeout: Duration) -> Self {
        ResolverConfig {
            resolver,
            resolv_conf: PathBuf::from("/etc/resolv.conf"),
            hosts: PathBuf::from("/etc/hosts"),
            timeout,
        }
    }
}

/// How a server's address was found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Given as an address.
    Literal,
    /// From /etc/hosts.
    HostsFile,
    /// From `resolver`, asked by the trusted interface `via`.
    Dns { resolver: SocketAddr, via: String },
}

/// A server name turned into the address nena connects to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub addr: SocketAddr,
    pub source: Source,
}

impl Resolved {
    /// `srv.lab is 198.18.3.2 (asked 198.18.1.1:53 by `trusted`)`, for the log.
    pub fn describe(&self, server: &ServerAddr) -> String {
        match &self.source {
            Source::Literal => format!("{}", self.addr),
            Source::HostsFile => format!("{server} is {} (/etc/hosts)", self.addr.ip()),
            Source::Dns { resolver, via } => format!(
                "{server} is {} (asked {resolver} by `{via}`)",
                self.addr.ip()
            ),
        }
    }
}

/// Which resolver was refused, and why: what a person needs to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// Its route leaves by an interface that is not trusted.
    Untrusted { iface: String },
    /// No route at all.
    NoRoute,
    /// A resolver on this host: where it forwards is not nena's to see.
    Local,
    /// `--resolver`: no trusted interface has a route to it.
    NoTrustedRoute { trusted: Vec<String> },
}

/// Why a server name was not resolved. Nothing was sent for a refusal.
#[derive(Debug, Error)]
pub enum ResolveError {
    #[error("{}", refusal(.name, .resolvers, *.from_conf))]
    Untrusted {
        name: String,
        resolvers: Vec<(IpAddr, Why)>,
        from_conf: bool,
    },
    #[error("cannot read {path}: {error}")]
    Config { path: PathBuf, error: String },
    #[error("`{name}`: no such name (asked {resolver} by `{via}`)")]
    NoSuchName {
        name: String,
        resolver: SocketAddr,
        via: String,
    },
    #[error("`{name}` has no IPv4 or IPv6 address (asked {resolver} by `{via}`)")]
    NoAddress {
        name: String,
        resolver: SocketAddr,
        via: String,
    },
    #[error("`{name}` could not be resolved: {reason}")]
    Failed { name: String, reason: String },
    #[error("cannot look up routes: {0}")]
    Routes(std::io::Error),
}

fn refusal(name: &str, resolvers: &[(IpAddr, Why)], from_conf: bool) -> String {
    let what = |ip: &IpAddr, why: &Why| -> String {
        let which = if from_conf {
            format!("the system's resolver {ip} (/etc/resolv.conf)")
        } else {
            format!("--resolver {ip}")
        };
        match why {
            Why::Untrusted { iface } => {
                format!("{which} is reached by `{iface}`, which is not a trusted interface")
            }
            Why::NoRoute => format!("{which} has no route"),
            Why::Local => format!(
                "{which} is on this host, and nena cannot see which path it forwards queries by"
            ),
            Why::NoTrustedRoute { trusted } => format!(
                "{which} is not reached through a trusted interface ({})",
                trusted
                    .iter()
                    .map(|t| format!("`{t}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    };
    let list = if resolvers.is_empty() {
        "/etc/resolv.conf names no resolver".to_string()
    } else {
        resolvers
            .iter()
            .map(|(ip, why)| what(ip, why))
            .collect::<Vec<_>>()
            .join("; ")
    };
    format!(
        "refusing to resolve `{name}`: {list}, so whoever answers there would choose the \
         server; give --resolver ADDR (a resolver reached through a trusted interface) or \
         the server's address"
    )
}

/// The interface the routing table sends `dst` by (through `oif` only, when given): what
/// [`choose`] needs of the host. `Ok(None)`: no route.
pub type RouteFn<'a> = dyn Fn(IpAddr, Option<u32>) -> std::io::Result<Option<LocalIface>> + 'a;

/// The resolvers nena may ask, each with the trusted interface its queries leave by; the
/// refusal when none qualifies. `given`: `--resolver`; else `system`, the nameservers of
/// resolv.conf.
pub fn choose(
    name: &str,
    given: Option<SocketAddr>,
    system: &[IpAddr],
    trusted: &BTreeSet<LocalIface>,
    route: &RouteFn<'_>,
) -> Result<Vec<(SocketAddr, LocalIface)>, ResolveError> {
    let mut ok = Vec::new();
    let mut refused = Vec::new();
    match given {
        Some(r) => {
            if r.ip().is_loopback() || is_local(r.ip()) {
                refused.push((r.ip(), Why::Local));
            } else {
                let mut via = None;
                for t in trusted {
                    if route(r.ip(), Some(t.index))
                        .map_err(ResolveError::Routes)?
                        .is_some()
                    {
                        via = Some(t.clone());
                        break;
                    }
                }
                match via {
                    Some(t) => ok.push((r, t)),
                    None => refused.push((
                        r.ip(),
                        Why::NoTrustedRoute {
                            trusted: trusted.iter().map(|t| t.name.clone()).collect(),
                        },
                    )),
                }
            }
        }
        None => {
            for ip in system {
                if ip.is_loopback() || ip.is_unspecified() || is_local(*ip) {
                    refused.push((*ip, Why::Local));
                    continue;
                }
                match route(*ip, None).map_err(ResolveError::Routes)? {
                    Some(i) if trusted.iter().any(|t| t.index == i.index) => {
                        ok.push((SocketAddr::new(*ip, 53), i))
                    }
                    Some(i) => refused.push((*ip, Why::Untrusted { iface: i.name })),
                    None => refused.push((*ip, Why::NoRoute)),
                }
            }
        }
    }
    if ok.is_empty() {
        return Err(ResolveError::Untrusted {
            name: name.to_string(),
            resolvers: refused,
            from_conf: given.is_none(),
        });
    }
    for (ip, why) in &refused {
        log::info!("not asking the resolver {ip} about `{name}`: {why:?}");
    }
    Ok(ok)
}

/// An address of this host's own interfaces (a resolver there is a local one).
fn is_local(ip: IpAddr) -> bool {
    matches!(nena_mptcp::path::iface_of(ip), Ok(Some(_)))
}

/// The addresses /etc/hosts (in `text`) gives `name`, in file order.
pub fn hosts_lookup(text: &str, name: &str) -> Vec<IpAddr> {
    let want = name.trim_end_matches('.');
    text.lines()
        .filter_map(|l| {
            let l = l.split('#').next().unwrap_or("");
            let mut f = l.split_whitespace();
            let ip = f.next()?;
            let ip: IpAddr = ip.split('%').next()?.parse().ok()?;
            f.any(|n| n.trim_end_matches('.').eq_ignore_ascii_case(want))
                .then_some(ip)
        })
        .collect()
}

/// The address to connect to for `server`, found without any path but a trusted one
/// answering (module doc). `policy` is the client's, resolved on this host.
pub fn resolve(
    server: &ServerAddr,
    policy: &ResolvedPolicy,
    cfg: &ResolverConfig,
) -> Result<Resolved, ResolveError> {
    let name = match &server.host {
        Host::Ip(ip) => {
            return Ok(Resolved {
                addr: SocketAddr::new(*ip, server.port),
                source: Source::Literal,
            })
        }
        Host::Name(n) => n.as_str(),
    };
    let v4_first = prefers_v4(policy);
    if let Ok(text) = std::fs::read_to_string(&cfg.hosts) {
        let found = hosts_lookup(&text, name);
        if let Some(ip) = pick(&found, v4_first) {
            return Ok(Resolved {
                addr: SocketAddr::new(ip, server.port),
                source: Source::HostsFile,
            });
        }
    }
    let system = match cfg.resolver {
        Some(_) => Vec::new(),
        None => read_nameservers(&cfg.resolv_conf)?,
    };
    let trusted = policy.trusted_ifaces().into_iter().cloned().collect();
    let route = |dst: IpAddr, oif: Option<u32>| -> std::io::Result<Option<LocalIface>> {
        Ok(nena_mptcp::route::lookup(dst, oif)?.and_then(|r| {
            Some(LocalIface {
                name: r.dev()?,
                index: r.oif?,
            })
        }))
    };
    let chosen = choose(name, cfg.resolver, &system, &trusted, &route)?;
    let named = name.to_string();
    match query::ask(name, &chosen, v4_first, cfg.timeout) {
        Ok((ip, resolver, via)) => Ok(Resolved {
            addr: SocketAddr::new(ip, server.port),
            source: Source::Dns {
                resolver,
                via: via.name,
            },
        }),
        Err(query::AskError::NoSuchName { resolver, via }) => Err(ResolveError::NoSuchName {
            name: named,
            resolver,
            via,
        }),
        Err(query::AskError::NoAddress { resolver, via }) => Err(ResolveError::NoAddress {
            name: named,
            resolver,
            via,
        }),
        Err(query::AskError::Failed(reason)) => Err(ResolveError::Failed {
            name: named,
            reason,
        }),
    }
}

fn read_nameservers(path: &Path) -> Result<Vec<IpAddr>, ResolveError> {
    let text = std::fs::read_to_string(path).map_err(|e| ResolveError::Config {
        path: path.to_path_buf(),
        error: e.to_string(),
    })?;
    Ok(crate::dns::nameservers(&text))
}

/// Whether the client's trusted paths have IPv4 (then A is asked first) rather than only
/// IPv6 with a global address.
fn prefers_v4(policy: &ResolvedPolicy) -> bool {
    let v4 = policy.trusted.iter().any(|a| a.is_ipv4());
    let v6 = policy
        .trusted
        .iter()
        .any(|a| matches!(a, IpAddr::V6(v6) if !v6.is_loopback() && (v6.segments()[0] & 0xffc0) != 0xfe80));
    v4 || !v6
}

/// The first address of the preferred family, else the first.
fn pick(found: &[IpAddr], v4_first: bool) -> Option<IpAddr> {
    found
        .iter()
        .copied()
        .find(|a| a.is_ipv4() == v4_first)
        .or_else(|| found.first().copied())
}

#[cfg(test)]
mod tests;
