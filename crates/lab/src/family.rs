//! Address families per link (`nena lab up --ipv6`, `--trusted-family`, `--untrusted-family`):
//! which ends get their IPv4 address and their IPv6 one ([`End::addr6`](crate::End),
//! `2001:2:0:N::2/64` on the edge end, `::1` on the router's), and the routes and source
//! rules of each family.
//!
//! The namespaces stay IPv6-off (module `hostns`) except on the interfaces of links that
//! carry IPv6 and, in a lab with IPv6, the loopbacks; there the addresses are `nodad` with
//! `accept_dad=0` (usable at once; [`Lab::wait_ipv6_usable`] checks none is left
//! `tentative`) and kept while the link is down. A lab brought up again without IPv6 turns it
//! off again on those interfaces, which removes their IPv6 addresses and routes.

use crate::hostns::sysctl_in;
use crate::run::{ip, probe, run, run_tolerant};
use crate::{Host, Lab, LabConfig, Link};
use anyhow::{bail, Result};
use std::time::{Duration, Instant};

/// The network of a link end's address of one family (`198.18.1.0/24`, `2001:2:0:1::/64`).
pub(crate) fn subnet(e: crate::End, v6: bool) -> String {
    if v6 {
        let s = e.addr6.segments();
        let net = std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0);
        format!("{net}/{}", crate::PREFIX6)
    } else {
        let net = std::net::Ipv4Addr::from(u32::from(e.addr) & 0xffff_ff00);
        format!("{net}/24")
    }
}

impl Lab {
    /// The addresses of both ends of `link` for the families it carries (the device exists);
    /// the other family's are removed.
    pub(crate) fn apply_link_families(&self, cfg: &LabConfig, link: Link) -> Result<()> {
        let fam = cfg.family(link);
        for e in link.ends() {
            let ns = self.netns(e.host);
            if fam.has_v4() {
                run(ip(
                    Some(&ns),
                    &["addr", "replace", &e.cidr(), "dev", e.iface],
                ))?;
            } else {
                run_tolerant(
                    ip(Some(&ns), &["addr", "del", &e.cidr(), "dev", e.iface]),
                    &["Cannot assign requested address", "Address not found"],
                )?;
            }
            let conf = |k: &str| format!("net.ipv6.conf.{}.{k}", e.iface);
            if fam.has_v6() {
                sysctl_in(&ns, &conf("accept_dad"), "0")?;
                sysctl_in(&ns, &conf("keep_addr_on_down"), "1")?;
                sysctl_in(&ns, &conf("disable_ipv6"), "0")?;
                run(ip(
                    Some(&ns),
                    &["-6", "addr", "replace", &e.cidr6(), "dev", e.iface, "nodad"],
                ))?;
            } else {
                // removes the link's IPv6 addresses and routes, if an earlier `up` gave any
                sysctl_in(&ns, &conf("disable_ipv6"), "1")?;
            }
        }
        Ok(())
    }

    /// IPv6 on the loopbacks and forwarding on the router, when the lab has IPv6; without,
    /// the router stops forwarding IPv6 (the loopbacks keep `::1`: the LAN host's gateway
    /// uses the client's).
    pub(crate) fn apply_ipv6_hosts(&self, cfg: &LabConfig) -> Result<()> {
        if cfg.ipv6() {
            for h in Host::ALL {
                sysctl_in(&self.netns(h), "net.ipv6.conf.lo.disable_ipv6", "0")?;
            }
        }
        let fwd = if cfg.ipv6() { "1" } else { "0" };
        sysctl_in(
            &self.netns(Host::Router),
            "net.ipv6.conf.all.forwarding",
            fwd,
        )
    }

    /// Wait until no IPv6 address of the lab's hosts is `tentative` (duplicate address
    /// detection is off, so this returns at once unless something turned it back on);
    /// fails after `timeout`, naming the addresses.
    pub(crate) fn wait_ipv6_usable(&self, cfg: &LabConfig, timeout: Duration) -> Result<()> {
        if !cfg.ipv6() {
            return Ok(());
        }
        let deadline = Instant::now() + timeout;
        loop {
            let mut left = Vec::new();
            for h in Host::ALL {
                let out = run(ip(
                    Some(&self.netns(h)),
                    &["-6", "-o", "addr", "show", "tentative"],
                ))?;
                left.extend(out.lines().map(|l| format!("{h}: {}", l.trim())));
            }
            if left.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "IPv6 addresses still tentative after {timeout:?}: {}",
                    left.join("; ")
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The client's default route of one family in its main table: via the trusted link
    /// when it carries the family, else via the untrusted one; none when neither does.
    fn apply_default(
        &self,
        cfg: &LabConfig,
        v6: bool,
        up: &dyn Fn(Link) -> Result<bool>,
    ) -> Result<()> {
        let client = self.netns(Host::Client);
        let f = if v6 { "-6" } else { "-4" };
        let carries = |l: Link| {
            let fam = cfg.family(l);
            if v6 {
                fam.has_v6()
            } else {
                fam.has_v4()
            }
        };
        match [Link::Trusted, Link::Untrusted]
            .into_iter()
            .find(|&l| carries(l))
        {
            Some(l) => {
                if up(l)? {
                    let gw = l.router().addr_of(v6).to_string();
                    run(ip(
                        Some(&client),
                        &[
                            f,
                            "route",
                            "replace",
                            "default",
                            "via",
                            &gw,
                            "dev",
                            l.edge().iface,
                        ],
                    ))?;
                }
            }
            None => {
                // no link of this family: no default route of it (an earlier `up` may have set one)
                let _ = probe(ip(Some(&client), &[f, "route", "del", "default"]))?;
            }
        }
        Ok(())
    }

    /// The client's routes and source rules of one family: the main table's default
    /// ([`apply_default`](Self::apply_default)) and, per client link that carries the family,
    /// its table (101 trusted, 102 untrusted: the link's subnet and default route, and an
    /// `unreachable` default so that traffic from its address never falls back to another
    /// link) and the rule `from ADDR lookup TABLE` (preference 1000 + table). A link that does
    /// not carry the family has neither. `up` says whether a link is up (routes go with it).
    pub(crate) fn apply_client_routes(
        &self,
        cfg: &LabConfig,
        v6: bool,
        up: &dyn Fn(Link) -> Result<bool>,
    ) -> Result<()> {
        let client = self.netns(Host::Client);
        let f = if v6 { "-6" } else { "-4" };
        self.apply_default(cfg, v6, up)?;
        for link in [Link::Trusted, Link::Untrusted] {
            let e = link.edge();
            let table = link.table().expect("client links have tables").to_string();
            let pref = (1000 + link.table().unwrap_or(0)).to_string();
            let fam = cfg.family(link);
            if !(if v6 { fam.has_v6() } else { fam.has_v4() }) {
                while probe(ip(Some(&client), &[f, "rule", "del", "pref", &pref]))? {}
                let _ = probe(ip(Some(&client), &[f, "route", "flush", "table", &table]))?;
                continue;
            }
            let src = e.addr_of(v6).to_string();
            let gw = link.router().addr_of(v6).to_string();
            if up(link)? {
                let subnet = subnet(e, v6);
                run(ip(
                    Some(&client),
                    &[
                        f, "route", "replace", &subnet, "dev", e.iface, "src", &src, "table",
                        &table,
                    ],
                ))?;
                run(ip(
                    Some(&client),
                    &[
                        f, "route", "replace", "default", "via", &gw, "dev", e.iface, "table",
                        &table,
                    ],
                ))?;
            }
            run(ip(
                Some(&client),
                &[
                    f,
                    "route",
                    "replace",
                    "unreachable",
                    "default",
                    "metric",
                    "4096",
                    "table",
                    &table,
                ],
            ))?;
            let existing = run(ip(Some(&client), &[f, "rule", "show", "pref", &pref]))?;
            let want = format!("from {src} lookup {table}");
            if !existing.contains(&want) || existing.lines().count() != 1 {
                while probe(ip(Some(&client), &[f, "rule", "del", "pref", &pref]))? {}
                run(ip(
                    Some(&client),
                    &[
                        f, "rule", "add", "pref", &pref, "from", &src, "lookup", &table,
                    ],
                ))?;
            }
        }
        Ok(())
    }

    /// The server's IPv6 default route via the router, in a lab with IPv6 whose server link
    /// is up.
    pub(crate) fn apply_server_route6(&self, cfg: &LabConfig, server_up: bool) -> Result<()> {
        if !(cfg.ipv6() && server_up) {
            return Ok(());
        }
        let gw = Link::Server.router().addr6.to_string();
        run(ip(
            Some(&self.netns(Host::Server)),
            &[
                "-6", "route", "replace", "default", "via", &gw, "dev", "eth0",
            ],
        ))
        .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnets_of_each_family() {
        assert_eq!(subnet(Link::Trusted.edge(), false), "198.18.1.0/24");
        assert_eq!(subnet(Link::Untrusted.router(), true), "2001:2:0:2::/64");
        assert_eq!(subnet(Link::Server.edge(), true), "2001:2:0:3::/64");
    }
}
