//! The agreed lab topology (notes/LAB-CONTRACT.md): hosts, links, interface names and
//! addresses. Everything else in the crate reads these tables instead of repeating literals.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

/// A host of the lab, each one a network namespace `<prefix>-<host>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Host {
    Client,
    Router,
    Server,
}

impl Host {
    pub const ALL: [Host; 3] = [Host::Client, Host::Router, Host::Server];

    pub fn name(self) -> &'static str {
        match self {
            Host::Client => "client",
            Host::Router => "router",
            Host::Server => "server",
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
            _ => Err(format!(
                "unknown host `{s}` (hosts: client, router, server)"
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
}

impl Link {
    pub const ALL: [Link; 3] = [Link::Trusted, Link::Untrusted, Link::Server];

    pub fn name(self) -> &'static str {
        match self {
            Link::Trusted => "trusted",
            Link::Untrusted => "untrusted",
            Link::Server => "server",
        }
    }

    /// The edge end of the link (client for the two client links, server for the server
    /// link): where captures run. The other end is always the router.
    pub fn edge(self) -> End {
        match self {
            Link::Trusted => End {
                host: Host::Client,
                iface: "trusted",
                addr: Ipv4Addr::new(198, 18, 1, 2),
            },
            Link::Untrusted => End {
                host: Host::Client,
                iface: "untrusted",
                addr: Ipv4Addr::new(198, 18, 2, 2),
            },
            Link::Server => End {
                host: Host::Server,
                iface: "eth0",
                addr: Ipv4Addr::new(198, 18, 3, 2),
            },
        }
    }

    /// The router end of the link.
    pub fn router(self) -> End {
        match self {
            Link::Trusted => End {
                host: Host::Router,
                iface: "trusted",
                addr: Ipv4Addr::new(198, 18, 1, 1),
            },
            Link::Untrusted => End {
                host: Host::Router,
                iface: "untrusted",
                addr: Ipv4Addr::new(198, 18, 2, 1),
            },
            Link::Server => End {
                host: Host::Router,
                iface: "server",
                addr: Ipv4Addr::new(198, 18, 3, 1),
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
            Link::Server => None,
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
            _ => Err(format!(
                "unknown link `{s}` (links: trusted, untrusted, server)"
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
}

impl End {
    /// `198.18.x.y/24`.
    pub fn cidr(&self) -> String {
        format!("{}/24", self.addr)
    }
}

/// The server address nena tests connect to.
pub const SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 3, 2);
