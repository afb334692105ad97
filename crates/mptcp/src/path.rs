//! Trusted / untrusted local paths: `--trusted ADDR|IFACE` and `--untrusted ADDR|IFACE`
//! specifications ([`PathSpec`], [`PathPolicy`]), their resolution to local addresses in the
//! current network namespace ([`ResolvedPolicy`]) and the classification of a subflow's
//! local address ([`Trust`]). An address in neither list counts as untrusted.

use serde::Serialize;
use std::collections::BTreeSet;
use std::fmt;
use std::net::IpAddr;
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
}

/// A policy turned into concrete local addresses of the current network namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ResolvedPolicy {
    pub trusted: BTreeSet<IpAddr>,
    pub untrusted: BTreeSet<IpAddr>,
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
    #[error("{0} is both trusted and untrusted")]
    Conflict(IpAddr),
    #[error("cannot list local addresses: {0}")]
    Io(#[from] std::io::Error),
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
                    PathSpec::Addr(a) => {
                        out.insert(*a);
                    }
                    PathSpec::Iface(name) => {
                        let found: Vec<IpAddr> = locals
                            .iter()
                            .filter(|(n, _)| n == name)
                            .map(|(_, a)| *a)
                            .collect();
                        if found.is_empty() {
                            return Err(if iface_exists(name) {
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
        ResolvedPolicy::new(trusted, untrusted)
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
        Ok(ResolvedPolicy { trusted, untrusted })
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

    /// The first trusted address of the same family as `remote` (the initial subflow's source).
    pub fn trusted_source_for(&self, remote: IpAddr) -> Option<IpAddr> {
        self.trusted
            .iter()
            .copied()
            .filter(|a| !a.is_unspecified())
            .find(|a| a.is_ipv4() == canonical(remote).is_ipv4())
    }
}

fn canonical(a: IpAddr) -> IpAddr {
    match a {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(a),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(r.trusted.contains(&"127.0.0.1".parse::<IpAddr>().unwrap()));
        let p = PathPolicy {
            trusted: vec![PathSpec::Iface("nonexist0".into())],
            untrusted: vec![],
        };
        assert!(matches!(p.resolve(), Err(PolicyError::NoSuchIface(_))));
    }
}
