//! Where a LAN datagram came in, and whether its sender belongs there: the gateway answers
//! only a source inside the prefixes of the LAN interface the datagram arrived on, and its
//! answers leave by that interface (`SO_BINDTODEVICE`), never by a client link. A LAN host
//! that forges an off-LAN source (another network's address, to have the gateway send
//! answers or carried replies there) gets nothing; the datagram is dropped and counted.
//! The nft table drops such packets before they get here too; this is the second layer.
//!
//! The interfaces' prefixes are read (`getifaddrs`) at most once per [`REFRESH`], so a
//! datagram costs a lookup, not a system call, and an address the LAN interface gains
//! (DHCP, SLAAC) is known within that time.

use ipnet::IpNet;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the LAN interfaces' prefixes are taken as read.
pub const REFRESH: Duration = Duration::from_secs(1);

/// Why a datagram is not answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// It came in on an interface that is no `--lan` (or no longer exists).
    NotLan(u32),
    /// Its source is outside every prefix of the LAN interface it came in on.
    OffLan { iface: Arc<str>, src: IpAddr },
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::NotLan(i) => write!(f, "came in on interface #{i}, no --lan"),
            Refused::OffLan { iface, src } => {
                write!(f, "source {src} is outside every prefix of {iface}")
            }
        }
    }
}

#[derive(Debug)]
struct Iface {
    name: Arc<str>,
    prefixes: Vec<IpNet>,
}

/// The LAN interfaces by index, with their prefixes.
#[derive(Debug)]
pub struct Lans {
    names: Vec<String>,
    read: Mutex<(Option<Instant>, HashMap<u32, Iface>)>,
}

impl Lans {
    pub fn new(names: &[String]) -> Lans {
        Lans {
            names: names.to_vec(),
            read: Mutex::new((None, HashMap::new())),
        }
    }

    /// The LAN interface `src` may send from when its datagram came in on interface
    /// `ifindex`; the interface's name, to answer by.
    pub fn check(&self, ifindex: u32, src: IpAddr) -> Result<Arc<str>, Refused> {
        let mut read = self.read.lock().unwrap_or_else(|e| e.into_inner());
        if read.0.is_none_or(|t| t.elapsed() >= REFRESH) {
            *read = (Some(Instant::now()), self.read_ifaces());
        }
        let iface = read.1.get(&ifindex).ok_or(Refused::NotLan(ifindex))?;
        if inside(&iface.prefixes, src) {
            Ok(iface.name.clone())
        } else {
            Err(Refused::OffLan {
                iface: iface.name.clone(),
                src,
            })
        }
    }

    fn read_ifaces(&self) -> HashMap<u32, Iface> {
        let mut out: HashMap<u32, Iface> = HashMap::new();
        let addrs = match nix::ifaddrs::getifaddrs() {
            Ok(a) => a,
            Err(e) => {
                log::warn!("cannot read the LAN interfaces' addresses: {e}");
                return out;
            }
        };
        for a in addrs {
            if !self.names.contains(&a.interface_name) {
                continue;
            }
            let Ok(index) = nix::net::if_::if_nametoindex(a.interface_name.as_str()) else {
                continue;
            };
            let iface = out.entry(index).or_insert_with(|| Iface {
                name: a.interface_name.as_str().into(),
                prefixes: Vec::new(),
            });
            if let Some(net) = a.address.as_ref().zip(a.netmask.as_ref()).and_then(prefix) {
                iface.prefixes.push(net);
            }
        }
        out
    }
}

/// An interface address and its netmask as a prefix.
fn prefix(
    (addr, mask): (
        &nix::sys::socket::SockaddrStorage,
        &nix::sys::socket::SockaddrStorage,
    ),
) -> Option<IpNet> {
    if let (Some(a), Some(m)) = (addr.as_sockaddr_in(), mask.as_sockaddr_in()) {
        return IpNet::with_netmask(IpAddr::V4(a.ip()), IpAddr::V4(m.ip())).ok();
    }
    if let (Some(a), Some(m)) = (addr.as_sockaddr_in6(), mask.as_sockaddr_in6()) {
        return IpNet::with_netmask(IpAddr::V6(a.ip()), IpAddr::V6(m.ip())).ok();
    }
    None
}

/// Whether `src` is inside one of `prefixes` (an IPv4-mapped IPv6 source as its IPv4).
fn inside(prefixes: &[IpNet], src: IpAddr) -> bool {
    let src = match src {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(src, IpAddr::V4),
        v4 => v4,
    };
    !src.is_unspecified() && prefixes.iter().any(|p| p.contains(&src))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nets(s: &[&str]) -> Vec<IpNet> {
        s.iter().map(|p| p.parse().unwrap()).collect()
    }

    /// Sources inside the LAN's prefixes pass (link-local IPv6 too); forged ones do not.
    #[test]
    fn only_sources_inside_the_lans_prefixes_pass() {
        let p = nets(&["198.18.5.1/24", "2001:2:0:5::1/64", "fe80::1/64"]);
        for ok in [
            "198.18.5.2",
            "198.18.5.3",
            "2001:2:0:5::2",
            "fe80::42",
            "::ffff:198.18.5.9",
        ] {
            assert!(inside(&p, ok.parse().unwrap()), "{ok}");
        }
        for forged in [
            "198.18.9.9",
            "198.18.6.2",
            "0.0.0.0",
            "2001:2:0:6::2",
            "::",
            "127.0.0.1",
            "::ffff:198.18.9.9",
        ] {
            assert!(!inside(&p, forged.parse().unwrap()), "{forged}");
        }
        assert!(!inside(&[], "198.18.5.2".parse().unwrap()));
    }

    /// Interfaces read from the host: loopback, as a stand-in LAN, has 127.0.0.0/8; a
    /// datagram from elsewhere or on an interface that is not named is refused.
    #[test]
    fn the_lans_are_read_from_the_host() {
        let lo = nix::net::if_::if_nametoindex("lo").unwrap();
        let lans = Lans::new(&["lo".to_string()]);
        assert_eq!(
            &*lans.check(lo, "127.0.0.1".parse().unwrap()).unwrap(),
            "lo"
        );
        assert!(matches!(
            lans.check(lo, "198.18.9.9".parse().unwrap()),
            Err(Refused::OffLan { .. })
        ));
        let none = Lans::new(&["nosuch0".to_string()]);
        assert_eq!(
            none.check(lo, "127.0.0.1".parse().unwrap()),
            Err(Refused::NotLan(lo))
        );
    }
}
