//! What the gateway installs on the host, and takes away again: the nftables table
//! ([`super::nft`], through `nft -f -`, one atomic transaction) and the policy routing that
//! delivers TPROXY-marked packets to local sockets (`ip rule ... fwmark lookup TABLE`, `ip
//! route add local default dev lo table TABLE`, IPv4 and IPv6, through iproute2). The
//! [`Installed`] guard removes all of it on drop; what a killed gateway left is replaced
//! when a new one installs its own. None of this touches the kill switch
//! ([`super::killswitch`]), which no exit removes.

use super::nft::{self, Plan, MARK};
use anyhow::{anyhow, bail, Context, Result};
use std::io::Write;
use std::process::{Command, Stdio};

/// The routing table and the policy rule's preference of the marked packets.
pub const ROUTE_TABLE: u32 = 4710;

/// Runs `prog args`, feeding `input`; an error carries its stderr.
pub(super) fn run(prog: &str, args: &[&str], input: Option<&str>) -> Result<String> {
    let mut child = Command::new(prog)
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {prog} (install nftables and iproute2)"))?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(text.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "`{prog} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The policy rules and local routes, for `ip -4` and `ip -6`.
fn routing(family: &str, add: bool) -> Result<()> {
    let table = ROUTE_TABLE.to_string();
    let mark = format!("{MARK:#x}");
    let local = if family == "-4" { "0.0.0.0/0" } else { "::/0" };
    if add {
        run(
            "ip",
            &[
                family, "rule", "add", "pref", &table, "fwmark", &mark, "lookup", &table,
            ],
            None,
        )?;
        run(
            "ip",
            &[
                family, "route", "replace", "local", local, "dev", "lo", "table", &table,
            ],
            None,
        )?;
    } else {
        // A host without IPv6 has no IPv6 rules or routes to remove.
        if family == "-6" && !std::path::Path::new("/proc/sys/net/ipv6").exists() {
            return Ok(());
        }
        // Every rule of ours (a killed gateway may have left more than one).
        for _ in 0..16 {
            if run("ip", &[family, "rule", "del", "pref", &table], None).is_err() {
                break;
            }
        }
        // Fails when the table does not exist (nothing to flush): what is left is checked
        // below.
        let flushed = run("ip", &[family, "route", "flush", "table", &table], None);
        let rules = run("ip", &[family, "rule", "show", "pref", &table], None)?;
        let needle = format!("table {table} ");
        let routes: Vec<String> = run("ip", &[family, "route", "show", "table", "all"], None)?
            .lines()
            .filter(|l| l.contains(&needle))
            .map(str::to_string)
            .collect();
        if !rules.trim().is_empty() || !routes.is_empty() {
            bail!(
                "`ip {family}` rules or routes of table {table} remain ({}{}){}",
                rules.trim(),
                routes.join("; "),
                flushed
                    .err()
                    .map(|e| format!(": {e:#}"))
                    .unwrap_or_default()
            );
        }
    }
    Ok(())
}

/// Removes what a gateway left (its table, rules and routes); whether there was a table.
/// The kill switch ([`super::killswitch`]) is not touched.
pub fn remove_leftovers() -> Result<bool> {
    let had = run("nft", &["list", "table", "inet", nft::TABLE], None).is_ok();
    run("nft", &["-f", "-"], Some(&nft::removal()))?;
    remove_routing_leftovers()?;
    Ok(had)
}

/// Removes the policy rules and routes a killed gateway left.
fn remove_routing_leftovers() -> Result<()> {
    routing("-4", false)?;
    routing("-6", false).context("removing an earlier gateway's IPv6 policy routing")
}

/// Checks the LAN interfaces before anything is installed: each exists and is not a
/// bridge port (a bridge would switch LAN frames past the forward hook).
pub fn check_lan(lan: &[String]) -> Result<()> {
    if lan.is_empty() {
        bail!("no LAN interface: give --lan IFACE");
    }
    for name in lan {
        nft::check_iface(name).map_err(|e| anyhow!("--lan {name}: {e}"))?;
        let dir = std::path::Path::new("/sys/class/net").join(name);
        if !dir.exists() {
            bail!("--lan {name}: no such interface in this network namespace");
        }
        if dir.join("master").exists() {
            bail!(
                "--lan {name}: the interface is a bridge port, whose frames the bridge switches \
                 past nena; name the bridge instead"
            );
        }
    }
    Ok(())
}

/// Checks that no LAN interface is one of the gateway's own paths: a `--trusted` or
/// `--untrusted` interface (named, or holding a named address), or the interface of this
/// host's default route (the WAN of a router). A gateway whose "LAN" is its WAN would
/// capture its own paths' traffic and hand the upstream network the LAN's place.
pub fn check_lan_is_not_a_path(
    lan: &[String],
    trusted: &[nena_mptcp::PathSpec],
    untrusted: &[nena_mptcp::PathSpec],
) -> Result<()> {
    let defaults = default_route_ifaces();
    for name in lan {
        for (flag, specs) in [("--trusted", trusted), ("--untrusted", untrusted)] {
            if specs
                .iter()
                .any(|p| iface_of(p).as_deref() == Some(name.as_str()))
            {
                bail!(
                    "--lan {name} is also a {flag} path of this gateway: --lan names the \
                     interface the LAN hosts are on, --trusted and --untrusted the links to \
                     the internet"
                );
            }
        }
        if defaults.iter().any(|d| d == name) {
            bail!(
                "--lan {name} carries this host's default route: it is the WAN; --lan names \
                 the interface the LAN hosts are on"
            );
        }
    }
    Ok(())
}

/// The interface a path names: itself, or the one holding its address.
fn iface_of(p: &nena_mptcp::PathSpec) -> Option<String> {
    match p {
        nena_mptcp::PathSpec::Iface(name) => Some(name.clone()),
        nena_mptcp::PathSpec::Addr(ip) => nena_mptcp::path::iface_of(*ip)
            .ok()
            .flatten()
            .map(|i| i.name),
    }
}

/// The interfaces of this namespace's default routes (IPv4 from /proc/net/route, IPv6 from
/// /proc/net/ipv6_route; routes of the main table).
fn default_route_ifaces() -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(text) = std::fs::read_to_string("/proc/net/route") {
        out.extend(default_ifaces_v4(&text));
    }
    if let Ok(text) = std::fs::read_to_string("/proc/net/ipv6_route") {
        out.extend(default_ifaces_v6(&text));
    }
    out
}

/// `/proc/net/route`: Iface, Destination, Gateway, Flags, .., Mask (hex); a default route
/// has destination and mask 0 and is up (flag 1).
fn default_ifaces_v4(text: &str) -> Vec<String> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let up = f.get(3).and_then(|x| u32::from_str_radix(x, 16).ok())? & 1 == 1;
            (f.len() >= 8 && f[1] == "00000000" && f[7] == "00000000" && up)
                .then(|| f[0].to_string())
        })
        .collect()
}

/// `/proc/net/ipv6_route`: destination (32 hex), prefix length, .., flags, interface (last);
/// a default route has an all-zero destination of length 0 and is up (flag 1). The
/// unreachable default the kernel keeps on `lo` is not one.
fn default_ifaces_v6(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 10 || f[0].chars().any(|c| c != '0') || f[1] != "00" {
                return None;
            }
            let up = u32::from_str_radix(f[8], 16).ok()? & 1 == 1;
            (up && f[9] != "lo").then(|| f[9].to_string())
        })
        .collect()
}

/// The installed table and routing; dropping it removes them.
#[derive(Debug)]
pub struct Installed {
    v6: bool,
}

impl Installed {
    /// Installs `plan`'s table and the routing it needs (what a killed gateway left is
    /// replaced, not doubled). Where the host has no IPv6 routing, `plan.v6` is turned off:
    /// IPv6 from the LAN is then refused, never forwarded. A table a killed gateway left is
    /// not deleted first: it stays in force until the new one replaces it in one
    /// transaction ([`nft::ruleset`]).
    pub fn install(plan: &mut Plan) -> Result<Installed> {
        check_lan(&plan.lan)?;
        remove_routing_leftovers()?;
        // Routing first: a marked packet must find its local route as soon as the table
        // marks it. The guard from here on removes what was added if a step fails.
        let mut guard = Installed { v6: false };
        routing("-4", true)?;
        if plan.v6 {
            match routing("-6", true) {
                Ok(()) => guard.v6 = true,
                Err(e) => {
                    let _ = routing("-6", false);
                    log::warn!("no IPv6 policy routing ({e:#}): IPv6 from the LAN is refused");
                    plan.v6 = false;
                }
            }
        }
        run("nft", &["-f", "-"], Some(&nft::ruleset(plan)))
            .context("installing the gateway's nftables table")?;
        Ok(guard)
    }

    /// The table as the kernel has it (`nft list table`), for logs and tests.
    pub fn listing() -> Result<String> {
        run("nft", &["list", "table", "inet", nft::TABLE], None)
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        if let Err(e) = run("nft", &["-f", "-"], Some(&nft::removal())) {
            log::warn!("cannot remove the nftables table {}: {e:#}", nft::TABLE);
        }
        if let Err(e) = routing("-4", false) {
            log::warn!("cannot remove the IPv4 policy routing: {e:#}");
        }
        if self.v6 {
            if let Err(e) = routing("-6", false) {
                log::warn!("cannot remove the IPv6 policy routing: {e:#}");
            }
        }
    }
}

#[cfg(test)]
mod default_route_tests {
    use super::{default_ifaces_v4, default_ifaces_v6};

    #[test]
    fn the_default_routes_interfaces_are_read_from_procfs() {
        let v4 =
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                  wlan0\t00000000\t0212A8C6\t0003\t0\t0\t600\t00000000\t0\t0\t0\n\
                  lan\t0001A8C6\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
                  down0\t00000000\t0212A8C6\t0002\t0\t0\t600\t00000000\t0\t0\t0\n";
        assert_eq!(default_ifaces_v4(v4), vec!["wlan0".to_string()]);
        let v6 = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 \
                  20010002000000000000000000000001 00000400 00000001 00000000 00000003     lte\n\
                  20010002000000010000000000000000 40 00000000000000000000000000000000 00 \
                  00000000000000000000000000000000 00000100 00000001 00000000 00000001     lan\n\
                  00000000000000000000000000000000 00 00000000000000000000000000000000 00 \
                  00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n";
        assert_eq!(default_ifaces_v6(v6), vec!["lte".to_string()]);
        assert!(default_ifaces_v4("").is_empty() && default_ifaces_v6("junk\n").is_empty());
    }
}
