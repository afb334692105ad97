//! What every lab host's namespace gets, the classic three and the fleet's servers alike:
//! the namespace itself (loopback up, IPv4 only), sysctls, MPTCP limits. Used by `build`
//! and `fleet`.

use crate::netns;
use crate::run::{ip, run};
use anyhow::Result;

/// `sysctl -w KEY=VALUE` inside the namespace `ns`.
pub(crate) fn sysctl_in(ns: &str, key: &str, value: &str) -> Result<()> {
    let mut c = crate::run::netns_exec(ns, "sysctl");
    c.args(["-q", "-w", &format!("{key}={value}")]);
    run(c).map(|_| ())
}

/// The namespace `ns` of a host (created if missing) with loopback up and IPv6 off: IPv4
/// only, no IPv6 link-local chatter (router solicitations, MLD) in captures.
pub(crate) fn host_netns(ns: &str) -> Result<()> {
    if !netns::netns_exists(ns) {
        run(ip(None, &["netns", "add", ns]))?;
    }
    run(ip(Some(ns), &["link", "set", "dev", "lo", "up"]))?;
    for k in ["all", "default"] {
        sysctl_in(ns, &format!("net.ipv6.conf.{k}.disable_ipv6"), "1")?;
    }
    Ok(())
}

/// The MPTCP limits of every lab host that makes or accepts joins.
pub(crate) fn mptcp_limits(ns: &str) -> Result<()> {
    run(ip(
        Some(ns),
        &[
            "mptcp",
            "limits",
            "set",
            "subflow",
            "2",
            "add_addr_accepted",
            "2",
        ],
    ))
    .map(|_| ())
}
