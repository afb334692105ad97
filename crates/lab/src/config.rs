//! How a lab is built: its prefix (namespace names), the client's path manager, rate limits,
//! link emulation, offloads, the server fleet, the LAN host behind the client, the address
//! families of the client links, NAT and MPTCP-option stripping on the untrusted link; serialised into the lab's state so that later commands see the same settings.

use crate::emulate::{Direction, Emulation, LinkEmulation};
use crate::{Family, Host, Link, Rate, SERVER_ADDR, SERVER_ADDR6};
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::path::PathBuf;

/// Which MPTCP path manager the client uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PmMode {
    /// The in-kernel path manager; the client announces 198.18.2.2 as a `subflow` endpoint.
    #[default]
    Kernel,
    /// The userspace path manager (`net.mptcp.pm_type=1` in the client); no endpoints,
    /// the application creates subflows.
    Userspace,
}

impl std::str::FromStr for PmMode {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<PmMode, String> {
        match s.to_ascii_lowercase().as_str() {
            "kernel" | "in-kernel" => Ok(PmMode::Kernel),
            "userspace" | "user" => Ok(PmMode::Userspace),
            _ => Err(format!("unknown path manager `{s}` (kernel or userspace)")),
        }
    }
}

impl std::fmt::Display for PmMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PmMode::Kernel => "kernel",
            PmMode::Userspace => "userspace",
        })
    }
}

/// How to build a lab.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabConfig {
    /// Namespace name prefix (default `nena`): hosts are `<prefix>-client` etc.
    pub prefix: String,
    /// The client's MPTCP path manager.
    pub pm: PmMode,
    /// Rate limit of the trusted link, both directions (tbf on both ends).
    pub trusted_rate: Option<Rate>,
    /// Rate limit of the untrusted link, both directions.
    pub untrusted_rate: Option<Rate>,
    /// Rate limit of the router-server link, both directions.
    #[serde(default)]
    pub server_rate: Option<Rate>,
    /// Check after `up` that the server is reachable from both client addresses (TCP).
    #[serde(default = "yes")]
    pub verify: bool,
    /// Keep the veths' segmentation offloads (TSO/GSO, the kernel default). With `false`
    /// every packet on a link is at most one MSS, as on a real wire: captures then show
    /// segments like the papers' figures instead of 64 KiB GSO super-packets (slower).
    #[serde(default = "yes")]
    pub offload: bool,
    /// Emulation of the trusted link (delay, jitter, loss, outages, traces; per direction).
    /// A link with emulation is a TAP pair joined by the lab's relay process instead of a
    /// veth pair (see `docs/LAB.md`).
    #[serde(default)]
    pub trusted_emulation: Option<LinkEmulation>,
    /// Emulation of the untrusted link.
    #[serde(default)]
    pub untrusted_emulation: Option<LinkEmulation>,
    /// Emulation of the router-server link.
    #[serde(default)]
    pub server_emulation: Option<LinkEmulation>,
    /// The executable the relay runs as (`EXE lab relay --prefix P`); `None`: this process's
    /// own executable (the `nena` binary). Tests pass the built binary.
    #[serde(default)]
    pub relay_exe: Option<PathBuf>,
    /// Servers: 1 is the classic `server` host; 2 to 8 add a fleet `<prefix>-s1..sN` that
    /// shares one address behind the router's nftables balancer (see `fleet`).
    #[serde(default = "one")]
    pub servers: u8,
    /// A LAN host behind the client (`nena lab up --lan`): the namespace `<prefix>-lan`,
    /// dual stack toward the client's interface `lan`, its default routes via the client
    /// (see [`LAN_HOST_ADDR`](crate::LAN_HOST_ADDR)). The client does not forward for it.
    #[serde(default)]
    pub lan: bool,
    /// The address families the trusted link carries (default IPv4 only). Any IPv6 on a
    /// client link makes the server link and the server dual stack (see [`Family`] and
    /// [`LabConfig::families`]).
    #[serde(default)]
    pub trusted_family: Family,
    /// The address families the untrusted link carries.
    #[serde(default)]
    pub untrusted_family: Family,
    /// The router source-NATs (nftables masquerade, table `inet nena_lab_nat`) what comes
    /// from the untrusted link on its way to the server, as a WLAN router does: the server
    /// sees the router's address `198.18.3.1` (`2001:2:0:3::1`) as the source.
    #[serde(default)]
    pub untrusted_nat: bool,
    /// The router replaces every MPTCP option (TCP option kind 30) of every TCP segment
    /// crossing the untrusted link, both ways, by NOPs (nftables `reset tcp option mptcp`,
    /// table `inet nena_lab_strip`), as some hotel and captive-portal middleboxes do.
    #[serde(default)]
    pub untrusted_strip_mptcp: bool,
}

/// The nftables table (family `inet`) of [`LabConfig::untrusted_nat`] on the router.
pub const NAT_TABLE: &str = "nena_lab_nat";
/// The nftables table (family `inet`) of [`LabConfig::untrusted_strip_mptcp`] on the router.
pub const STRIP_TABLE: &str = "nena_lab_strip";

fn one() -> u8 {
    1
}

fn yes() -> bool {
    true
}

impl Default for LabConfig {
    fn default() -> Self {
        LabConfig {
            prefix: "nena".into(),
            pm: PmMode::Kernel,
            trusted_rate: None,
            untrusted_rate: None,
            server_rate: None,
            verify: true,
            offload: true,
            trusted_emulation: None,
            untrusted_emulation: None,
            server_emulation: None,
            relay_exe: None,
            servers: 1,
            lan: false,
            trusted_family: Family::Ipv4,
            untrusted_family: Family::Ipv4,
            untrusted_nat: false,
            untrusted_strip_mptcp: false,
        }
    }
}

impl LabConfig {
    /// The default configuration with another prefix.
    pub fn with_prefix(prefix: impl Into<String>) -> Self {
        LabConfig {
            prefix: prefix.into(),
            ..LabConfig::default()
        }
    }

    /// The families of the two client links from what `nena lab up` (or a scenario's `[lab]`)
    /// was given: `--ipv6` makes the default `dual`, without it `ipv4`; a family named
    /// explicitly wins. `--ipv6` with both links named `ipv4` is refused (it would ask for
    /// IPv6 and give it to no client link).
    pub fn families(
        ipv6: bool,
        trusted: Option<Family>,
        untrusted: Option<Family>,
    ) -> Result<(Family, Family)> {
        let default = if ipv6 { Family::Dual } else { Family::Ipv4 };
        let (t, u) = (trusted.unwrap_or(default), untrusted.unwrap_or(default));
        if ipv6 && !t.has_v6() && !u.has_v6() {
            bail!(
                "--ipv6 with --trusted-family {t} and --untrusted-family {u}: no client link \
                 would carry IPv6 (leave out --ipv6, or give a link ipv6 or dual)"
            );
        }
        Ok((t, u))
    }

    /// Whether the lab has IPv6 anywhere: a client link carries it (the server link and
    /// the server are then dual stack).
    pub fn ipv6(&self) -> bool {
        self.trusted_family.has_v6() || self.untrusted_family.has_v6()
    }

    /// The families a link carries: the client links as configured, the server link dual
    /// stack when [`ipv6`](Self::ipv6) (else IPv4), the LAN link always dual stack.
    pub fn family(&self, link: Link) -> Family {
        match link {
            Link::Trusted => self.trusted_family,
            Link::Untrusted => self.untrusted_family,
            Link::Server if self.ipv6() => Family::Dual,
            Link::Server => Family::Ipv4,
            Link::Lan => Family::Dual,
        }
    }

    /// The server's address a client reaches over `link` (a client link): its IPv4 address
    /// when the link carries IPv4, else its IPv6 address.
    pub fn server_addr_for(&self, link: Link) -> IpAddr {
        if self.family(link).has_v4() {
            IpAddr::V4(SERVER_ADDR)
        } else {
            IpAddr::V6(SERVER_ADDR6)
        }
    }

    /// The client's address on `link` in the link's first family (IPv4 when it carries
    /// IPv4, else IPv6); for the server link, the server's.
    pub fn client_addr(&self, link: Link) -> IpAddr {
        link.edge().addr_of(!self.family(link).has_v4())
    }

    /// The configured rate of a link (the LAN link has none).
    pub fn rate(&self, link: Link) -> Option<Rate> {
        match link {
            Link::Trusted => self.trusted_rate,
            Link::Untrusted => self.untrusted_rate,
            Link::Server => self.server_rate,
            Link::Lan => None,
        }
    }

    /// The configured emulation of a link (`None`: a plain veth pair, as the LAN link
    /// always is).
    pub fn emulation(&self, link: Link) -> Option<&LinkEmulation> {
        match link {
            Link::Trusted => self.trusted_emulation.as_ref(),
            Link::Untrusted => self.untrusted_emulation.as_ref(),
            Link::Server => self.server_emulation.as_ref(),
            Link::Lan => None,
        }
    }

    /// Set (or remove, with `None`) the emulation of a link, both directions. The LAN link
    /// is never emulated: [`Lab::set_emulation`](crate::Lab::set_emulation) refuses it.
    pub fn set_link_emulation(&mut self, link: Link, e: Option<LinkEmulation>) {
        *match link {
            Link::Trusted => &mut self.trusted_emulation,
            Link::Untrusted => &mut self.untrusted_emulation,
            Link::Server => &mut self.server_emulation,
            Link::Lan => return,
        } = e;
    }

    /// The links of a lab built with this configuration: [`Link::ALL`], and [`Link::Lan`]
    /// with [`lan`](Self::lan).
    pub fn links(&self) -> Vec<Link> {
        let mut v = Link::ALL.to_vec();
        if self.lan {
            v.push(Link::Lan);
        }
        v
    }

    /// The hosts of a lab built with this configuration (fleet servers aside):
    /// [`Host::ALL`], and [`Host::Lan`] with [`lan`](Self::lan).
    pub fn hosts(&self) -> Vec<Host> {
        let mut v = Host::ALL.to_vec();
        if self.lan {
            v.push(Host::Lan);
        }
        v
    }

    /// Set the emulation of one direction of a link (the other direction keeps its own, or
    /// none if the link had none).
    pub fn set_emulation(&mut self, link: Link, direction: Direction, e: Emulation) {
        let mut le = self.emulation(link).cloned().unwrap_or_default();
        *le.get_mut(direction) = e;
        self.set_link_emulation(link, Some(le));
    }

    /// The links that are emulated (TAP pair and relay).
    pub fn emulated_links(&self) -> Vec<(Link, LinkEmulation)> {
        Link::ALL
            .iter()
            .filter_map(|&l| self.emulation(l).map(|e| (l, e.clone())))
            .collect()
    }

    pub(crate) fn set_rate(&mut self, link: Link, rate: Option<Rate>) {
        match link {
            Link::Trusted => self.trusted_rate = rate,
            Link::Untrusted => self.untrusted_rate = rate,
            Link::Server => self.server_rate = rate,
            // refused by `Lab::set_rate`: the LAN link has no rate limit
            Link::Lan => {}
        }
    }
}

/// Check a lab prefix: 1-24 letters, digits, `-` or `_` (namespace names stay short).
pub fn validate_prefix(prefix: &str) -> Result<()> {
    if prefix.is_empty()
        || prefix.len() > 24
        || !prefix
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        || prefix.starts_with('-')
    {
        bail!("invalid lab prefix `{prefix}`: use 1-24 letters, digits, `-` or `_`");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lab_has_the_lan_host_and_link_only_when_asked_for() {
        let plain = LabConfig::default();
        assert!(!plain.lan);
        assert_eq!(plain.hosts(), Host::ALL.to_vec());
        assert_eq!(plain.links(), Link::ALL.to_vec());
        let lan = LabConfig {
            lan: true,
            ..LabConfig::default()
        };
        assert_eq!(lan.hosts().last(), Some(&Host::Lan));
        assert_eq!(lan.links().last(), Some(&Link::Lan));
        assert_eq!(lan.rate(Link::Lan), None);
        assert!(lan.emulation(Link::Lan).is_none());
    }

    #[test]
    fn a_state_written_before_lan_existed_reads_as_no_lan() {
        let mut v = serde_json::to_value(LabConfig::default()).unwrap();
        v.as_object_mut().unwrap().remove("lan");
        let cfg: LabConfig = serde_json::from_value(v).unwrap();
        assert!(!cfg.lan);
        assert_eq!(
            (cfg.trusted_family, cfg.untrusted_family),
            (Family::Ipv4, Family::Ipv4)
        );
        assert!(!cfg.untrusted_nat && !cfg.untrusted_strip_mptcp && !cfg.ipv6());
    }

    #[test]
    fn ipv6_makes_dual_the_default_and_a_named_family_wins() {
        use Family::*;
        assert_eq!(
            LabConfig::families(false, None, None).unwrap(),
            (Ipv4, Ipv4)
        );
        assert_eq!(LabConfig::families(true, None, None).unwrap(), (Dual, Dual));
        assert_eq!(
            LabConfig::families(true, Some(Ipv6), Some(Ipv4)).unwrap(),
            (Ipv6, Ipv4)
        );
        assert_eq!(
            LabConfig::families(false, Some(Ipv6), None).unwrap(),
            (Ipv6, Ipv4)
        );
        let e = LabConfig::families(true, Some(Ipv4), Some(Ipv4)).unwrap_err();
        assert!(format!("{e:#}").contains("no client link"), "{e:#}");
    }

    #[test]
    fn ipv6_on_a_client_link_makes_the_server_link_dual_stack() {
        let mut c = LabConfig::default();
        assert_eq!(c.family(Link::Server), Family::Ipv4);
        assert_eq!(c.server_addr_for(Link::Trusted), IpAddr::V4(SERVER_ADDR));
        c.trusted_family = Family::Ipv6;
        assert!(c.ipv6());
        assert_eq!(c.family(Link::Server), Family::Dual);
        assert_eq!(c.server_addr_for(Link::Trusted), IpAddr::V6(SERVER_ADDR6));
        assert_eq!(c.server_addr_for(Link::Untrusted), IpAddr::V4(SERVER_ADDR));
        assert_eq!(
            c.client_addr(Link::Trusted).to_string(),
            "2001:2:0:1::2".to_string()
        );
        assert_eq!(c.client_addr(Link::Untrusted).to_string(), "198.18.2.2");
    }
}
