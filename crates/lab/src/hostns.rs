//! What every lab host's namespace gets, the classic three and the fleet's servers alike:
//! the namespace itself (loopback up, IPv6 off: module `family` turns it on where a link
//! carries it), sysctls, MPTCP limits. Used by `build` and `fleet`.

use crate::netns;
use crate::run::{ip, run};
use anyhow::Result;

/// `sysctl -w KEY=VALUE` inside the namespace `ns`.
pub(crate) fn sysctl_in(ns: &str, key: &str, value: &str) -> Result<()> {
    let mut c = crate::run::netns_exec(ns, "sysctl");
    c.args(["-q", "-w", &format!("{key}={value}")]);
    run(c).map(|_| ())
}

/// `sysctl -n KEY` inside the namespace `ns`, trimmed.
pub(crate) fn sysctl_get(ns: &str, key: &str) -> Result<String> {
    let mut c = crate::run::netns_exec(ns, "sysctl");
    c.args(["-n", key]);
    run(c).map(|v| v.trim().to_string())
}

/// The namespace `ns` of a host (created if missing) with loopback up and IPv6 off: IPv4
/// only, no IPv6 link-local chatter (router solicitations, MLD) in captures. The exceptions
/// (the LAN link's interfaces, `lan`; links that carry IPv6, module `family`) keep their
/// IPv6: `all` is written only when it is not already 1, since writing it sets every
/// interface's value.
pub(crate) fn host_netns(ns: &str) -> Result<()> {
    if !netns::netns_exists(ns) {
        run(ip(None, &["netns", "add", ns]))?;
    }
    run(ip(Some(ns), &["link", "set", "dev", "lo", "up"]))?;
    if sysctl_get(ns, "net.ipv6.conf.all.disable_ipv6")? != "1" {
        sysctl_in(ns, "net.ipv6.conf.all.disable_ipv6", "1")?;
    }
    sysctl_in(ns, "net.ipv6.conf.default.disable_ipv6", "1")?;
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
