//! A LAN host behind the client (`nena lab up --lan`), for a gateway on the client:
//!
//! ```text
//!   <prefix>-lan                               <prefix>-client
//!     eth0 198.18.5.2/24, 2001:2:0:5::2/64 ─── lan 198.18.5.1/24, 2001:2:0:5::1/64
//! ```
//!
//! The LAN host's default routes (IPv4 and IPv6) go via the client. IPv6 stays disabled in
//! the lab as everywhere else, except on this link's two interfaces and the LAN host's
//! loopback, so the LAN host is dual stack toward the client; the addresses are `nodad`
//! (usable at once) and kept when the link goes down. The client does not forward: a
//! gateway program running there decides what becomes of the LAN's traffic, and nothing of
//! it goes around that program.

use crate::hostns::{host_netns, sysctl_get, sysctl_in};
use crate::netns::netns_exists;
use crate::process::{netns_pids, terminate};
use crate::run::{ip, run, run_tolerant};
use crate::{Host, Lab, Link, LAN_GATEWAY_ADDR, LAN_GATEWAY_ADDR6, LAN_HOST_ADDR6, LAN_PREFIX6};
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// The LAN host as read back from the system (`nena lab status`).
#[derive(Debug, Clone, Serialize)]
pub struct LanStatus {
    /// `<prefix>-lan`.
    pub netns: String,
    pub exists: bool,
    /// The global addresses on the LAN host's `eth0` (`198.18.5.2/24`, `2001:2:0:5::2/64`).
    pub addrs: Vec<String>,
    /// The LAN host's IPv4 default gateway.
    pub gateway: Option<String>,
    /// The LAN host's IPv6 default gateway.
    pub gateway6: Option<String>,
    /// The client's `net.ipv4.ip_forward` (the lab leaves it off: a gateway program decides).
    pub client_ip_forward: Option<bool>,
    /// The client's `net.ipv6.conf.all.forwarding`.
    pub client_ipv6_forwarding: Option<bool>,
}

/// The IPv6 CIDR of one end of the LAN link (`2001:2:0:5::1/64` on the client).
fn cidr6(host: Host) -> String {
    let a = if host == Host::Lan {
        LAN_HOST_ADDR6
    } else {
        LAN_GATEWAY_ADDR6
    };
    format!("{a}/{LAN_PREFIX6}")
}

/// The default gateway in `ip -j route show default` output, if any.
fn default_gateway(json: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    v.as_array()?
        .iter()
        .find_map(|r| r.get("gateway")?.as_str().map(str::to_string))
}

/// The global addresses (`ADDR/LEN`) in `ip -j addr show dev IFACE` output.
pub(crate) fn global_addrs(json: &str) -> Vec<String> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(json) else {
        return Vec::new();
    };
    v.pointer("/0/addr_info")
        .and_then(|a| a.as_array())
        .map(|a| {
            a.iter()
                .filter(|i| i.get("scope").and_then(|s| s.as_str()) == Some("global"))
                .filter_map(|i| {
                    let local = i.get("local")?.as_str()?;
                    let len = i.get("prefixlen")?.as_u64()?;
                    Some(format!("{local}/{len}"))
                })
                .collect()
        })
        .unwrap_or_default()
}

impl Lab {
    /// Build (or reconcile) the LAN host and its link to the client with `want`; without,
    /// remove them (the processes left in the LAN host end first, as in `down`).
    pub(crate) fn build_lan(&self, want: bool) -> Result<()> {
        let client = self.netns(Host::Client);
        let lan = self.netns(Host::Lan);
        let [c, l] = Link::Lan.ends();
        if !want {
            if netns_exists(&lan) {
                terminate(&netns_pids(&lan)?, Duration::from_secs(2));
            }
            run_tolerant(
                ip(Some(&client), &["link", "del", "dev", c.iface]),
                &["Cannot find device"],
            )?;
            if netns_exists(&lan) {
                run_tolerant(ip(None, &["netns", "del", &lan]), &["No such file"])?;
            }
            return Ok(());
        }
        host_netns(&lan)?;
        let c_veth = self.link_kind(&client, c.iface)? == Some("veth");
        let l_veth = self.link_kind(&lan, l.iface)? == Some("veth");
        if !(c_veth && l_veth) {
            // missing or half a pair: start the link afresh
            for (ns, iface) in [(&client, c.iface), (&lan, l.iface)] {
                run_tolerant(
                    ip(Some(ns), &["link", "del", "dev", iface]),
                    &["Cannot find device"],
                )?;
            }
            run(ip(
                Some(&client),
                &[
                    "link", "add", "name", c.iface, "type", "veth", "peer", "name", l.iface,
                    "netns", &lan,
                ],
            ))?;
        }
        // IPv6 on this link only and both hosts' loopbacks (a gateway on the client delivers
        // the LAN's IPv6 to its local sockets through a `local ::/0 dev lo` route);
        // addresses survive link down.
        for (ns, iface) in [
            (&client, c.iface),
            (&client, "lo"),
            (&lan, l.iface),
            (&lan, "lo"),
        ] {
            sysctl_in(ns, &format!("net.ipv6.conf.{iface}.disable_ipv6"), "0")?;
            sysctl_in(ns, &format!("net.ipv6.conf.{iface}.keep_addr_on_down"), "1")?;
        }
        for (ns, iface) in [(&client, c.iface), (&lan, l.iface)] {
            run(ip(Some(ns), &["link", "set", "dev", iface, "up"]))?;
        }
        for (ns, e) in [(&client, c), (&lan, l)] {
            run(ip(
                Some(ns),
                &["addr", "replace", &e.cidr(), "dev", e.iface],
            ))?;
            run(ip(
                Some(ns),
                &[
                    "-6",
                    "addr",
                    "replace",
                    &cidr6(e.host),
                    "dev",
                    e.iface,
                    "nodad",
                ],
            ))?;
        }
        Ok(())
    }

    /// The LAN host's default routes via the client, when the LAN host exists and its link
    /// is up (they go away with the link).
    pub(crate) fn apply_lan_routes(&self) -> Result<()> {
        let lan = self.netns(Host::Lan);
        if !netns_exists(&lan) {
            return Ok(());
        }
        let out = run(ip(Some(&lan), &["-o", "link", "show", "dev", "eth0"]))?;
        if !(out.contains(",UP") || out.contains("<UP")) {
            return Ok(());
        }
        for (family, gw) in [
            ("-4", LAN_GATEWAY_ADDR.to_string()),
            ("-6", LAN_GATEWAY_ADDR6.to_string()),
        ] {
            run(ip(
                Some(&lan),
                &[
                    family, "route", "replace", "default", "via", &gw, "dev", "eth0",
                ],
            ))?;
        }
        Ok(())
    }

    /// Check with TCP connections from the LAN host to listeners in the client, on
    /// 198.18.5.1 and on [2001:2:0:5::1], that the LAN link works. Fails after `timeout`.
    pub fn check_lan(&self, timeout: Duration) -> Result<()> {
        for gw in [IpAddr::V4(LAN_GATEWAY_ADDR), IpAddr::V6(LAN_GATEWAY_ADDR6)] {
            let listener = self
                .run_in(Host::Client, move || {
                    TcpListener::bind(SocketAddr::new(gw, 0))
                })?
                .with_context(|| format!("cannot listen on {gw} in the client"))?;
            listener.set_nonblocking(true)?;
            let dst = listener.local_addr()?;
            let stream = self
                .run_in(Host::Lan, move || TcpStream::connect_timeout(&dst, timeout))?
                .with_context(|| format!("TCP connect from the LAN host to {dst}"))?;
            let src = stream.local_addr()?;
            let deadline = Instant::now() + timeout;
            loop {
                match listener.accept() {
                    Ok((_, peer)) if peer == src => break,
                    Ok((_, peer)) => log::debug!("lan check: unexpected peer {peer}"),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e).context("accept in the client"),
                }
                if Instant::now() > deadline {
                    bail!("the client did not see the connection from {src} within {timeout:?}");
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        Ok(())
    }

    /// The LAN host as read back from the system.
    pub(crate) fn lan_status(&self) -> LanStatus {
        let lan = self.netns(Host::Lan);
        let client = self.netns(Host::Client);
        let exists = netns_exists(&lan);
        let read = |ns: &str, args: &[&str]| {
            if netns_exists(ns) {
                run(ip(Some(ns), args)).ok()
            } else {
                None
            }
        };
        let sysctl = |key: &str| -> Option<bool> {
            if !netns_exists(&client) {
                return None;
            }
            sysctl_get(&client, key).ok().map(|v| v != "0")
        };
        LanStatus {
            exists,
            addrs: read(&lan, &["-j", "addr", "show", "dev", "eth0"])
                .map(|j| global_addrs(&j))
                .unwrap_or_default(),
            gateway: read(&lan, &["-4", "-j", "route", "show", "default"])
                .and_then(|j| default_gateway(&j)),
            gateway6: read(&lan, &["-6", "-j", "route", "show", "default"])
                .and_then(|j| default_gateway(&j)),
            client_ip_forward: sysctl("net.ipv4.ip_forward"),
            client_ipv6_forwarding: sysctl("net.ipv6.conf.all.forwarding"),
            netns: lan,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_addresses_of_the_two_ends() {
        assert_eq!(cidr6(Host::Lan), "2001:2:0:5::2/64");
        assert_eq!(cidr6(Host::Client), "2001:2:0:5::1/64");
    }

    #[test]
    fn the_default_gateway_is_read_from_ip_json() {
        let j = r#"[{"dst":"default","gateway":"198.18.5.1","dev":"eth0","flags":[]}]"#;
        assert_eq!(default_gateway(j).as_deref(), Some("198.18.5.1"));
        assert_eq!(default_gateway("[]"), None);
        assert_eq!(default_gateway("not json"), None);
    }

    #[test]
    fn only_global_addresses_are_listed() {
        let j = r#"[{"ifname":"eth0","addr_info":[
            {"family":"inet","local":"198.18.5.2","prefixlen":24,"scope":"global"},
            {"family":"inet6","local":"2001:2:0:5::2","prefixlen":64,"scope":"global"},
            {"family":"inet6","local":"fe80::1","prefixlen":64,"scope":"link"}]}]"#;
        assert_eq!(
            global_addrs(j),
            vec!["198.18.5.2/24".to_string(), "2001:2:0:5::2/64".to_string()]
        );
        assert!(global_addrs("[]").is_empty());
    }
}
