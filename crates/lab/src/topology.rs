//! The agreed lab topology (notes/LAB-CONTRACT.md): hosts, links, interface names and
//! addresses. Everything else in the crate reads these tables instead of repeating literals.
//!
//! The classic lab is [`Host::ALL`] joined by [`Link::ALL`]. A lab built with `--lan`
//! ([`LabConfig::lan`](crate::LabConfig::lan)) also has [`Host::Lan`], a LAN host behind the
//! client joined to it by [`Link::Lan`]; they stay out of `ALL` (every lab has those) and are
//! handled where the configuration asks for them.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// A host of the lab, each one a network namespace `<prefix>-<host>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Host {
    Client,
    Router,
    Server,
    /// The LAN host behind the client (`nena lab up --lan`): only in labs built with it.
    Lan,
}

impl Host {
    /// The hosts every lab has ([`Host::Lan`] only exists in labs built with `--lan`).
    pub const ALL: [Host; 3] = [Host::Client, Host::Router, Host::Server];

    pub fn name(self) -> &'static str {
        match self {
            Host::Client => "client",
            Host::Router => "router",
            Host::Server => "server",
            Host::Lan => "lan",
        }
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Host {
    type Err = String;
    fn from_str(s: &str) -> Result<Host, String> {
        match s.to_ascii_lowercase().as_str() {
            "client" => Ok(Host::Client),
            "router" => Ok(Host::Router),
            "server" => Ok(Host::Server),
            "lan" => Ok(Host::Lan),
            _ => Err(format!(
                "unknown host `{s}` (hosts: client, router, server, lan)"
            )),
        }
    }
}

/// A link of the lab: a veth pair between two hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Link {
    /// client `trusted` <-> router `trusted` (think Ethernet/LTE).
    Trusted,
    /// client `untrusted` <-> router `untrusted` (think public WLAN).
    Untrusted,
    /// server `eth0` <-> router `server`.
    Server,
    /// client `lan` <-> LAN host `eth0` (`nena lab up --lan`): only in labs built with it.
    Lan,
}

impl Link {
    /// The links every lab has ([`Link::Lan`] only exists in labs built with `--lan`).
    pub const ALL: [Link; 3] = [Link::Trusted, Link::Untrusted, Link::Server];

    pub fn name(self) -> &'static str {
        match self {
            Link::Trusted => "trusted",
            Link::Untrusted => "untrusted",
            Link::Server => "server",
            Link::Lan => "lan",
        }
    }

    /// The edge end of the link (client for the two client links and the LAN link, server
    /// for the server link): where captures run. The other end is the router, or the LAN
    /// host for the LAN link.
    pub fn edge(self) -> End {
        match self {
            Link::Trusted => End {
                host: Host::Client,
                iface: "trusted",
                addr: Ipv4Addr::new(198, 18, 1, 2),
                addr6: Ipv6Addr::new(0x2001, 2, 0, 1, 0, 0, 0, 2),
            },
            Link::Untrusted => End {
                host: Host::Client,
                iface: "untrusted",
                addr: Ipv4Addr::new(198, 18, 2, 2),
                addr6: Ipv6Addr::new(0x2001, 2, 0, 2, 0, 0, 0, 2),
            },
            Link::Server => End {
                host: Host::Server,
                iface: "eth0",
                addr: Ipv4Addr::new(198, 18, 3, 2),
                addr6: SERVER_ADDR6,
            },
            Link::Lan => End {
                host: Host::Client,
                iface: "lan",
                addr: LAN_GATEWAY_ADDR,
                addr6: LAN_GATEWAY_ADDR6,
            },
        }
    }

    /// The router end of the link (for the LAN link: the LAN host's end).
    pub fn router(self) -> End {
        match self {
            Link::Trusted => End {
                host: Host::Router,
                iface: "trusted",
                addr: Ipv4Addr::new(198, 18, 1, 1),
                addr6: Ipv6Addr::new(0x2001, 2, 0, 1, 0, 0, 0, 1),
            },
            Link::Untrusted => End {
                host: Host::Router,
                iface: "untrusted",
                addr: Ipv4Addr::new(198, 18, 2, 1),
                addr6: Ipv6Addr::new(0x2001, 2, 0, 2, 0, 0, 0, 1),
            },
            Link::Server => End {
                host: Host::Router,
                iface: "server",
                addr: Ipv4Addr::new(198, 18, 3, 1),
                addr6: Ipv6Addr::new(0x2001, 2, 0, 3, 0, 0, 0, 1),
            },
            Link::Lan => End {
                host: Host::Lan,
                iface: "eth0",
                addr: LAN_HOST_ADDR,
                addr6: LAN_HOST_ADDR6,
            },
        }
    }

    /// Both ends, edge first.
    pub fn ends(self) -> [End; 2] {
        [self.edge(), self.router()]
    }

    /// The client's policy-routing table for traffic sourced from this link's address.
    pub(crate) fn table(self) -> Option<u32> {
        match self {
            Link::Trusted => Some(101),
            Link::Untrusted => Some(102),
            Link::Server | Link::Lan => None,
        }
    }
}

impl fmt::Display for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Link {
    type Err = String;
    fn from_str(s: &str) -> Result<Link, String> {
        match s.to_ascii_lowercase().as_str() {
            "trusted" => Ok(Link::Trusted),
            "untrusted" => Ok(Link::Untrusted),
            "server" => Ok(Link::Server),
            "lan" => Ok(Link::Lan),
            _ => Err(format!(
                "unknown link `{s}` (links: trusted, untrusted, server, lan)"
            )),
        }
    }
}

/// One end of a link: the host, its interface name there and its address (/24).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct End {
    pub host: Host,
    pub iface: &'static str,
    pub addr: Ipv4Addr,
    /// Its IPv6 address (/64), `2001:2:0:N::2` on the edge end and `2001:2:0:N::1` on the
    /// router end of link N (trusted 1, untrusted 2, server 3, lan 5: the LAN host is `::2`).
    /// Configured only where the link carries IPv6 ([`Family`]; `nena lab up --ipv6`).
    pub addr6: Ipv6Addr,
}

impl End {
    /// `198.18.x.y/24`.
    pub fn cidr(&self) -> String {
        format!("{}/24", self.addr)
    }

    /// `2001:2:0:N::x/64`.
    pub fn cidr6(&self) -> String {
        format!("{}/{PREFIX6}", self.addr6)
    }

    /// Its address of one family.
    pub fn addr_of(&self, v6: bool) -> IpAddr {
        if v6 {
            IpAddr::V6(self.addr6)
        } else {
            IpAddr::V4(self.addr)
        }
    }
}

/// Which address families a link carries (`nena lab up --trusted-family ...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// IPv4 only (the classic lab).
    #[default]
    Ipv4,
    /// IPv6 only: no IPv4 address on either end of the link.
    Ipv6,
    /// Both.
    Dual,
}

impl Family {
    pub fn has_v4(self) -> bool {
        self != Family::Ipv6
    }

    pub fn has_v6(self) -> bool {
        self != Family::Ipv4
    }

    pub fn name(self) -> &'static str {
        match self {
            Family::Ipv4 => "ipv4",
            Family::Ipv6 => "ipv6",
            Family::Dual => "dual",
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Family {
    type Err = String;
    fn from_str(s: &str) -> Result<Family, String> {
        match s.to_ascii_lowercase().as_str() {
            "ipv4" | "4" => Ok(Family::Ipv4),
            "ipv6" | "6" => Ok(Family::Ipv6),
            "dual" => Ok(Family::Dual),
            _ => Err(format!(
                "unknown address family `{s}` (families: ipv4, ipv6, dual)"
            )),
        }
    }
}

/// The server address nena tests connect to.
pub const SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 3, 2);
/// The server's IPv6 address (a lab with IPv6 on some link: `nena lab up --ipv6`), /64.
pub const SERVER_ADDR6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 3, 0, 0, 0, 2);
/// The prefix length of every lab link's IPv6 addresses.
pub const PREFIX6: u8 = 64;

/// The LAN host's address on its `eth0` (`nena lab up --lan`), /24.
pub const LAN_HOST_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 5, 2);
/// The LAN host's IPv6 address on its `eth0`, /64.
pub const LAN_HOST_ADDR6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 5, 0, 0, 0, 2);
/// The client's address on its `lan` interface: the LAN host's IPv4 default gateway, /24.
pub const LAN_GATEWAY_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 5, 1);
/// The client's IPv6 address on its `lan` interface: the LAN host's IPv6 default gateway, /64.
pub const LAN_GATEWAY_ADDR6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 5, 0, 0, 0, 1);
/// The prefix length of the LAN's IPv6 addresses.
pub const LAN_PREFIX6: u8 = 64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_to_their_host_and_link() {
        for h in Host::ALL.into_iter().chain([Host::Lan]) {
            assert_eq!(h.name().parse::<Host>(), Ok(h));
        }
        for l in Link::ALL.into_iter().chain([Link::Lan]) {
            assert_eq!(l.name().parse::<Link>(), Ok(l));
        }
        assert!("lan".parse::<Host>().is_ok() && !Host::ALL.contains(&Host::Lan));
        assert!(!Link::ALL.contains(&Link::Lan));
        let e = "wan".parse::<Link>().unwrap_err();
        assert!(e.contains("lan"), "{e}");
    }

    #[test]
    fn the_lan_link_joins_the_clients_lan_to_the_lan_hosts_eth0() {
        let [edge, far] = Link::Lan.ends();
        assert_eq!((edge.host, edge.iface), (Host::Client, "lan"));
        assert_eq!(edge.cidr(), "198.18.5.1/24");
        assert_eq!((far.host, far.iface), (Host::Lan, "eth0"));
        assert_eq!(far.cidr(), "198.18.5.2/24");
        assert_eq!(LAN_HOST_ADDR6.to_string(), "2001:2:0:5::2");
        assert_eq!(LAN_GATEWAY_ADDR6.to_string(), "2001:2:0:5::1");
        assert_eq!(Link::Lan.table(), None);
        assert_eq!((edge.addr6, far.addr6), (LAN_GATEWAY_ADDR6, LAN_HOST_ADDR6));
    }

    #[test]
    fn ipv6_addresses_mirror_the_ipv4_ones() {
        let want = [
            (Link::Trusted, "2001:2:0:1::2/64", "2001:2:0:1::1/64"),
            (Link::Untrusted, "2001:2:0:2::2/64", "2001:2:0:2::1/64"),
            (Link::Server, "2001:2:0:3::2/64", "2001:2:0:3::1/64"),
        ];
        for (link, edge, router) in want {
            let [e, r] = link.ends();
            assert_eq!((e.cidr6().as_str(), r.cidr6().as_str()), (edge, router));
            // the third group is the IPv4 address's third byte
            assert_eq!(e.addr6.segments()[3], u16::from(e.addr.octets()[2]));
            assert!(e.addr6.segments()[..3] == [0x2001, 2, 0]);
        }
        assert_eq!(Link::Server.edge().addr6, SERVER_ADDR6);
        assert_eq!(SERVER_ADDR6.to_string(), "2001:2:0:3::2");
    }

    #[test]
    fn families_parse_and_say_what_they_carry() {
        for f in [Family::Ipv4, Family::Ipv6, Family::Dual] {
            assert_eq!(f.name().parse::<Family>(), Ok(f));
        }
        assert_eq!("IPv6".parse::<Family>(), Ok(Family::Ipv6));
        assert!(Family::Dual.has_v4() && Family::Dual.has_v6());
        assert!(!Family::Ipv6.has_v4() && !Family::Ipv4.has_v6());
        let e = "ipx".parse::<Family>().unwrap_err();
        assert!(e.contains("ipv4, ipv6, dual") && !e.contains('\n'), "{e}");
    }
}
