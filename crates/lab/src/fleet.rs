//! A server fleet behind the router (`nena lab up --servers N`): N server hosts
//! `<prefix>-s1` .. `<prefix>-sN` share one address, [`FLEET_ADDR`], which the router balances
//! over them with nftables, as an ordinary L4 balancer does:
//!
//! * **Initial subflows:** a new connection to the shared address (any port but the join
//!   ports) gets a server from a hash of its 4-tuple (`jhash ... mod N`), kept in the
//!   connection's conntrack mark; every packet of it carries that mark, and a policy rule per
//!   mark routes it to that server's link, unchanged (no NAT: every server holds the shared
//!   address on its loopback, as the real servers behind IPVS's direct routing do).
//! * **Joins:** server `i` announces the shared address with a port of its own
//!   ([`FleetServer::join_port`], a `signal` endpoint with a port) and sets
//!   `net.mptcp.allow_join_initial_addr_port=0`, which tells clients (the C flag of
//!   MP_CAPABLE) never to join the address and port they connected to, where the hash would
//!   send a join to a random server. The router maps each join port to its server.
//!
//! A server taken out of the balancer ([`Lab::set_fleet_member`]) gets no new connection;
//! connections it has keep their conntrack mark and go on. The classic `server` host stays
//! as it is. Nothing here parses MPTCP: the balancer sees TCP 4-tuples only.

use crate::hostns::{host_netns, mptcp_limits, sysctl_in};
use crate::run::{ip, run, run_tolerant};
use crate::Lab;
use anyhow::{bail, Context, Result};
use std::net::Ipv4Addr;
use std::process::Command;

/// The address the fleet shares (on every fleet server's loopback).
pub const FLEET_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 4, 2);
/// Server `i` (1-based) announces [`FLEET_ADDR`] with port `FLEET_JOIN_PORT_BASE + i`.
pub const FLEET_JOIN_PORT_BASE: u16 = 4460;
/// The largest fleet (its links use 198.18.11.0/24 .. 198.18.18.0/24).
pub const MAX_FLEET: u8 = 8;
/// The nftables table the router balances with.
const NFT_TABLE: &str = "nena_fleet";
/// On the router, server `i`'s packets carry fwmark `i` and are routed by table (and rule
/// preference) `TABLE_BASE + i`.
const TABLE_BASE: u32 = 200;

/// One server of the fleet.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FleetServer {
    /// 1-based.
    pub index: u8,
    /// Its network namespace, `<prefix>-s<index>`.
    pub netns: String,
    /// Its own address on its link to the router (`198.18.(10+i).2`).
    pub addr: Ipv4Addr,
    /// The router's address on that link (`198.18.(10+i).1`).
    pub router_addr: Ipv4Addr,
    /// The router's interface of that link, `fleet<index>`.
    pub router_iface: String,
    /// The port it announces with [`FLEET_ADDR`] for joins.
    pub join_port: u16,
}

impl FleetServer {
    fn new(prefix: &str, index: u8) -> FleetServer {
        FleetServer {
            index,
            netns: format!("{prefix}-s{index}"),
            addr: Ipv4Addr::new(198, 18, 10 + index, 2),
            router_addr: Ipv4Addr::new(198, 18, 10 + index, 1),
            router_iface: format!("fleet{index}"),
            join_port: FLEET_JOIN_PORT_BASE + u16::from(index),
        }
    }
}

/// Check a fleet size: 1 (no fleet: the classic lab) to [`MAX_FLEET`].
pub fn validate_servers(n: u8) -> Result<()> {
    if n == 0 || n > MAX_FLEET {
        bail!("--servers {n}: a lab has 1 to {MAX_FLEET} servers");
    }
    Ok(())
}

/// Namespaces of fleet servers of `prefix` that exist (`<prefix>-s<digits>`), by index.
pub(crate) fn existing(prefix: &str) -> Vec<(u8, String)> {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return Vec::new();
    };
    let want = format!("{prefix}-s");
    let mut v: Vec<(u8, String)> = dir
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let i: u8 = name.strip_prefix(&want)?.parse().ok()?;
            Some((i, name))
        })
        .collect();
    v.sort();
    v
}

/// The router's nftables ruleset for `members` (fleet indices that take new connections)
/// out of `n` servers: replaces the whole table in one transaction.
fn ruleset(n: u8, members: &[u8]) -> String {
    let vip = FLEET_ADDR;
    let join_ports: Vec<String> = (1..=n)
        .map(|i| (FLEET_JOIN_PORT_BASE + u16::from(i)).to_string())
        .collect();
    let mut s = format!(
        "add table ip {NFT_TABLE}\nflush table ip {NFT_TABLE}\ntable ip {NFT_TABLE} {{\n  \
         chain prerouting {{\n    type filter hook prerouting priority mangle; policy accept;\n"
    );
    for i in 1..=n {
        s.push_str(&format!(
            "    ip daddr {vip} tcp dport {} meta mark set {i}\n",
            FLEET_JOIN_PORT_BASE + u16::from(i)
        ));
    }
    let others = format!(
        "ip daddr {vip} tcp dport != {{ {} }}",
        join_ports.join(", ")
    );
    if !members.is_empty() {
        let map: Vec<String> = members
            .iter()
            .enumerate()
            .map(|(k, i)| format!("{k} : {i}"))
            .collect();
        s.push_str(&format!(
            "    {others} ct state new ct mark set jhash ip saddr . tcp sport . ip daddr . tcp dport \
             mod {} seed 0x6e656e61 map {{ {} }}\n",
            members.len(),
            map.join(", ")
        ));
    }
    // Established connections keep the server their first packet was given; a new one with
    // no member left gets mark 0 and no route (the client sees the address unreachable).
    s.push_str(&format!("    {others} meta mark set ct mark\n  }}\n}}\n"));
    s
}

impl Lab {
    /// The fleet's servers (empty for a lab with one server).
    pub fn fleet(&self) -> Vec<FleetServer> {
        let n = self.config().servers;
        if n < 2 {
            return Vec::new();
        }
        (1..=n).map(|i| FleetServer::new(&self.prefix, i)).collect()
    }

    /// A command that runs `program args...` inside fleet server `index` (1-based).
    pub fn fleet_command<I, S>(&self, index: u8, program: &str, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut c = crate::run::netns_exec(&FleetServer::new(&self.prefix, index).netns, program);
        c.args(args);
        c
    }

    /// Take fleet server `index` out of the balancer (`member = false`: no new connection
    /// goes to it, those it has go on) or put it back.
    pub fn set_fleet_member(&self, index: u8, member: bool) -> Result<()> {
        let mut st = self.load()?;
        let n = st.config.servers;
        if n < 2 || index == 0 || index > n {
            bail!("lab `{}` has no fleet server {index}", self.prefix);
        }
        st.fleet_out.retain(|&i| i != index);
        if !member {
            st.fleet_out.push(index);
            st.fleet_out.sort();
        }
        self.apply_balancer(n, &st.fleet_out)?;
        self.save(&st)
    }

    /// Fleet servers taken out of the balancer.
    pub fn fleet_out(&self) -> Vec<u8> {
        self.load().map(|s| s.fleet_out).unwrap_or_default()
    }

    fn apply_balancer(&self, n: u8, out: &[u8]) -> Result<()> {
        let members: Vec<u8> = (1..=n).filter(|i| !out.contains(i)).collect();
        std::fs::create_dir_all(&self.state_dir)?;
        let file = self.state_dir.join("fleet.nft");
        std::fs::write(&file, ruleset(n, &members))
            .with_context(|| format!("cannot write {}", file.display()))?;
        run(self.command(
            crate::Host::Router,
            "nft",
            ["-f".as_ref(), file.as_os_str()],
        ))
        .context("loading the fleet's nftables rules on the router (is `nftables` installed?)")?;
        Ok(())
    }

    /// Build (or reconcile) the fleet of `n` servers; `n < 2` removes any fleet.
    pub(crate) fn build_fleet(&self, n: u8, out: &[u8]) -> Result<()> {
        validate_servers(n)?;
        let router = self.netns(crate::Host::Router);
        let keep = if n >= 2 { n } else { 0 };
        for (i, ns) in existing(&self.prefix) {
            if i > keep {
                run_tolerant(ip(None, &["netns", "del", &ns]), &["No such file"])?;
                let pref = (TABLE_BASE + u32::from(i)).to_string();
                run_tolerant(
                    ip(Some(&router), &["rule", "del", "pref", &pref]),
                    &["No such file", "Cannot find"],
                )?;
            }
        }
        if keep == 0 {
            // No fleet: no table (tolerated where nft is missing or the table never was).
            let _ = self
                .command(
                    crate::Host::Router,
                    "nft",
                    ["delete", "table", "ip", NFT_TABLE],
                )
                .output();
            return Ok(());
        }
        let vip = FLEET_ADDR.to_string();
        for i in 1..=n {
            let s = FleetServer::new(&self.prefix, i);
            let ns = s.netns.as_str();
            host_netns(ns)?;
            if !crate::run::probe(ip(Some(ns), &["link", "show", "dev", "eth0"]))? {
                run_tolerant(
                    ip(Some(&router), &["link", "del", "dev", &s.router_iface]),
                    &["Cannot find device"],
                )?;
                run(ip(
                    Some(&router),
                    &[
                        "link",
                        "add",
                        "name",
                        &s.router_iface,
                        "type",
                        "veth",
                        "peer",
                        "name",
                        "eth0",
                        "netns",
                        ns,
                    ],
                ))?;
            }
            let (addr, raddr) = (format!("{}/24", s.addr), format!("{}/24", s.router_addr));
            run(ip(Some(ns), &["addr", "replace", &addr, "dev", "eth0"]))?;
            run(ip(Some(ns), &["link", "set", "dev", "eth0", "up"]))?;
            run(ip(
                Some(&router),
                &["addr", "replace", &raddr, "dev", &s.router_iface],
            ))?;
            run(ip(
                Some(&router),
                &["link", "set", "dev", &s.router_iface, "up"],
            ))?;
            run(ip(
                Some(ns),
                &["addr", "replace", &format!("{vip}/32"), "dev", "lo"],
            ))?;
            let gw = s.router_addr.to_string();
            run(ip(
                Some(ns),
                &["route", "replace", "default", "via", &gw, "dev", "eth0"],
            ))?;
            sysctl_in(ns, "net.mptcp.enabled", "1")?;
            sysctl_in(ns, "net.mptcp.allow_join_initial_addr_port", "0")?;
            mptcp_limits(ns)?;
            run(ip(Some(ns), &["mptcp", "endpoint", "flush"]))?;
            run(ip(
                Some(ns),
                &[
                    "mptcp",
                    "endpoint",
                    "add",
                    &vip,
                    "port",
                    &s.join_port.to_string(),
                    "signal",
                ],
            ))?;
            // The router: mark i → table 200+i → the shared address via server i.
            let table = (TABLE_BASE + u32::from(i)).to_string();
            run(ip(
                Some(&router),
                &[
                    "route",
                    "replace",
                    &format!("{vip}/32"),
                    "via",
                    &s.addr.to_string(),
                    "dev",
                    &s.router_iface,
                    "table",
                    &table,
                ],
            ))?;
            let existing = run(ip(Some(&router), &["rule", "show", "pref", &table]))?;
            if !existing.contains(&format!("fwmark {i:#x} lookup {table}"))
                || existing.lines().count() != 1
            {
                while crate::run::probe(ip(Some(&router), &["rule", "del", "pref", &table]))? {}
                run(ip(
                    Some(&router),
                    &[
                        "rule",
                        "add",
                        "pref",
                        &table,
                        "fwmark",
                        &i.to_string(),
                        "lookup",
                        &table,
                    ],
                ))?;
            }
        }
        self.apply_balancer(n, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ruleset_hashes_new_connections_over_the_members_and_maps_each_join_port() {
        let r = ruleset(3, &[1, 3]);
        assert!(r.contains("tcp dport 4461 meta mark set 1"), "{r}");
        assert!(r.contains("tcp dport 4462 meta mark set 2"), "{r}");
        assert!(r.contains("tcp dport 4463 meta mark set 3"), "{r}");
        assert!(
            r.contains("ct state new ct mark set jhash ip saddr . tcp sport . ip daddr . tcp dport mod 2 seed 0x6e656e61 map { 0 : 1, 1 : 3 }"),
            "{r}"
        );
        assert!(
            r.contains("tcp dport != { 4461, 4462, 4463 } meta mark set ct mark"),
            "{r}"
        );
        // No member: no hash rule, new connections get no route.
        assert!(!ruleset(2, &[]).contains("jhash"));
    }

    #[test]
    fn fleet_sizes_outside_one_to_eight_are_refused() {
        assert!(validate_servers(0).is_err());
        assert!(validate_servers(9).is_err());
        assert!(validate_servers(1).is_ok() && validate_servers(8).is_ok());
    }

    #[test]
    fn each_server_has_its_own_link_and_join_port() {
        let s = FleetServer::new("p", 3);
        assert_eq!(s.netns, "p-s3");
        assert_eq!(s.addr, Ipv4Addr::new(198, 18, 13, 2));
        assert_eq!(s.router_addr, Ipv4Addr::new(198, 18, 13, 1));
        assert_eq!(s.join_port, 4463);
    }
}
