//! Paths of both address families (root): trusted and untrusted links over IPv6, and a
//! trusted link of one family beside an untrusted link of the other (the usual phone: an
//! IPv6-only LTE link and an IPv4-only WLAN; and the reverse) in one connection, which joins
//! the address the server announces in the other family (`signal` endpoint). With both path
//! managers, files sent and fetched with both client links captured: no byte of a nena hello,
//! no MPTCP key and no plaintext run on the untrusted link, files byte-exact, the untrusted
//! link carrying data (the in-kernel PM: on links with a round trip), no subflow from a
//! link-local address (fe80::/10), and, where a family cannot join, a message that names
//! the cause. Per-subflow figures read through sock_diag cover IPv6 and IPv4-mapped
//! subflows. Each test builds its own lab, torn down on drop (also on failure).

use crate::harness::*;
use crate::transfer_real_hosts::{
    assert_untrusted_carried, check_trusted_first, kernel_pm_with_a_round_trip, transfers,
    untrusted_bytes, Outcome,
};
use nena_lab::{Family, Host, Lab, LabConfig, LabGuard, Link, PmMode, Rate};
use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::process::Stdio;
use std::time::Duration;

/// A lab whose trusted and untrusted links carry the given families, both links shaped to
/// 50 Mbit/s (so the scheduler's split follows the links, as in transfer_real_hosts).
fn family_lab(pm: PmMode, trusted: Family, untrusted: Family) -> LabGuard {
    lab_with(|c| {
        (c.trusted_family, c.untrusted_family) =
            LabConfig::families(true, Some(trusted), Some(untrusted)).unwrap();
        c.pm = pm;
        c.trusted_rate = Some(Rate::mbit(50));
        c.untrusted_rate = Some(Rate::mbit(50));
    })
}

/// The server announces `addr`, its own address of the untrusted link's family (`signal`
/// endpoint): the only address a subflow of that family can join.
fn server_announces(lab: &Lab, addr: &str) {
    sh(
        lab,
        Host::Server,
        &format!("set -e; ip mptcp endpoint add {addr} dev eth0 signal"),
    );
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Every subflow of every report: its local address (IPv4-mapped ones as IPv4) and trust.
fn subflows(o: &Outcome) -> Vec<(IpAddr, String)> {
    o.reports
        .iter()
        .flat_map(|r| {
            r["paths"]["subflows"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|s| {
            let local: SocketAddr = s["local"]
                .as_str()
                .and_then(|l| l.parse().ok())
                .unwrap_or_else(|| panic!("a subflow without a local address: {s}"));
            (
                canonical(local.ip()),
                s["trust"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// No subflow's source is link-local, the trusted ones leave from `trusted` and the others
/// from `untrusted` (the links' global addresses).
fn check_sources(o: &Outcome, trusted: &str, untrusted: &str) {
    let (t, u): (IpAddr, IpAddr) = (trusted.parse().unwrap(), untrusted.parse().unwrap());
    let all = subflows(o);
    assert!(!all.is_empty());
    for (local, trust) in &all {
        if let IpAddr::V6(v6) = local {
            assert_ne!(
                v6.segments()[0] & 0xffc0,
                0xfe80,
                "a subflow from a link-local address: {all:?}"
            );
        }
        let want = if trust == "trusted" { t } else { u };
        assert_eq!(*local, want, "{trust} subflow from {local}: {all:?}");
    }
}

/// The interface holds a link-local address (so that a subflow could have used it).
fn has_link_local(lab: &Lab, iface: &str) {
    let out = sh(lab, Host::Client, &format!("ip -6 addr show dev {iface}"));
    assert!(out.contains("inet6 fe80:"), "{iface}: {out}");
}

/// `nena -v send --json` of a small file to the lab's server at `port` (storing into `dir`);
/// the file arrives byte-exact; returns the client's log and its report.
fn send_logged(lab: &Lab, port: u16, dir: &TempDir) -> (String, serde_json::Value) {
    let src = TempDir::new("fam-src");
    let f = src.join("small.bin");
    let data = random(200_000, 7);
    std::fs::write(&f, &data).unwrap();
    let to = server(lab, port);
    let fs = f.display().to_string();
    let mut args = vec!["-v", "send", &fs, "--name", "small", "--to", &to, "--json"];
    args.extend_from_slice(&PATHS);
    let out = client(lab, &args);
    let log = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "nena {args:?}: {log}");
    assert!(
        std::fs::read(dir.join("small")).unwrap() == data,
        "small differs"
    );
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    (log, report)
}

/// The wrong cause is never given when a link of the other family exists.
fn no_endpoint_warning(log: &str) {
    assert!(
        !log.contains("has no `subflow` endpoint"),
        "the wrong cause: {log}"
    );
}

fn both_links_ipv6(pm: PmMode) {
    let lab = family_lab(pm, Family::Ipv6, Family::Ipv6);
    has_link_local(&lab, "trusted");
    has_link_local(&lab, "untrusted");
    let o = transfers(&lab, 2);
    check_trusted_first(&o);
    assert_untrusted_carried(&o);
    check_sources(&o, "2001:2:0:1::2", "2001:2:0:2::2");
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn ipv6_on_both_links_userspace_pm() {
    both_links_ipv6(PmMode::Userspace);
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn ipv6_on_both_links_kernel_pm() {
    both_links_ipv6(PmMode::Kernel);
}

/// The usual phone: IPv6-only trusted link, IPv4-only untrusted one, the server announcing
/// its IPv4 address. nena connects over IPv6 (an IPv6 socket without IPV6_V6ONLY) and opens
/// the IPv4 subflow to the announced address after the first flight.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn ipv6_trusted_ipv4_untrusted_userspace_pm() {
    let lab = family_lab(PmMode::Userspace, Family::Ipv6, Family::Ipv4);
    server_announces(&lab, "198.18.3.2");
    let o = transfers(&lab, 2);
    check_trusted_first(&o);
    assert_untrusted_carried(&o);
    check_sources(&o, "2001:2:0:1::2", "198.18.2.2");
}

/// The reverse: IPv4-only trusted link, IPv6-only untrusted one, the server announcing its
/// IPv6 address. The connection goes to the server's IPv4-mapped address on an IPv6 socket
/// (its initial subflow still leaves from 198.18.1.2) and the IPv6 subflow joins the
/// announced address.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn ipv4_trusted_ipv6_untrusted_userspace_pm() {
    let lab = family_lab(PmMode::Userspace, Family::Ipv4, Family::Ipv6);
    server_announces(&lab, "2001:2:0:3::2");
    let o = transfers(&lab, 2);
    check_trusted_first(&o);
    assert_untrusted_carried(&o);
    check_sources(&o, "198.18.1.2", "2001:2:0:2::2");
}

/// The in-kernel path manager joins an address of the other family only when the server's
/// announcement arrives, which is before the first flight, where nena closes every subflow
/// not on a trusted link (and the kernel does not join again). The connection works, the
/// hello stays on the trusted link, and when the untrusted link carried nothing the log says
/// why (not "no `subflow` endpoint").
fn mixed_kernel_pm(trusted: Family, untrusted: Family, announce: &str, t: &str, u: &str) {
    let lab = family_lab(PmMode::Kernel, trusted, untrusted);
    server_announces(&lab, announce);
    let o = transfers(&lab, 1);
    check_trusted_first(&o);
    check_sources(&o, t, u);
    let dir = TempDir::new("fam-k");
    let _s = serve(&lab, 7100, dir.path(), &[]);
    let (log, report) = send_logged(&lab, 7100, &dir);
    no_endpoint_warning(&log);
    // This connection's own subflows: without one from the untrusted link, its log says
    // why (the kernel's join came before the first flight, and nena closed it).
    let u: IpAddr = u.parse().unwrap();
    let joined = report["paths"]["subflows"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["local"].as_str()?.parse::<SocketAddr>().ok())
        .any(|l| canonical(l.ip()) == u);
    if !joined {
        // The announcement came before the first flight (the kernel's join was closed), or,
        // on a loaded host, after its release (none had come by then).
        assert!(
            log.contains(
                "but the in-kernel path manager joins it only when the announcement arrives"
            ) || log.contains("address when the first flight was acknowledged"),
            "no subflow from {u} and the log does not say why: {log}"
        );
    }
    eprintln!(
        "untrusted link: {} B over the transfers; the logged send had {} from {u}",
        untrusted_bytes(&o),
        if joined { "a subflow" } else { "no subflow" }
    );
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn ipv6_trusted_ipv4_untrusted_kernel_pm() {
    mixed_kernel_pm(
        Family::Ipv6,
        Family::Ipv4,
        "198.18.3.2",
        "2001:2:0:1::2",
        "198.18.2.2",
    );
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn ipv4_trusted_ipv6_untrusted_kernel_pm() {
    mixed_kernel_pm(
        Family::Ipv4,
        Family::Ipv6,
        "2001:2:0:3::2",
        "198.18.1.2",
        "2001:2:0:2::2",
    );
}

/// The same labs with a real round trip (10 ms each way on both client links, the relay):
/// the server's ADD_ADDR reaches the client after its first flight is written, so the
/// in-kernel PM's subflow of the other family opens during the first flight and, once that
/// is acknowledged, carries data; the hello never crosses the untrusted link.
fn mixed_kernel_pm_with_a_round_trip(trusted: Family, untrusted: Family, announce: &str) {
    let lab = lab_with(|c| {
        (c.trusted_family, c.untrusted_family) =
            LabConfig::families(true, Some(trusted), Some(untrusted)).unwrap();
        kernel_pm_with_a_round_trip(c);
    });
    server_announces(&lab, announce);
    let o = transfers(&lab, 2);
    check_trusted_first(&o);
    assert_untrusted_carried(&o);
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn ipv6_trusted_ipv4_untrusted_kernel_pm_with_a_round_trip() {
    mixed_kernel_pm_with_a_round_trip(Family::Ipv6, Family::Ipv4, "198.18.3.2");
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn ipv4_trusted_ipv6_untrusted_kernel_pm_with_a_round_trip() {
    mixed_kernel_pm_with_a_round_trip(Family::Ipv4, Family::Ipv6, "2001:2:0:3::2");
}

/// A server that announces no address of the untrusted link's family: the connection
/// stays on its trusted link, the file arrives, and the log names that cause.
fn nothing_announced(pm: PmMode) {
    let lab = family_lab(pm, Family::Ipv6, Family::Ipv4);
    let dir = TempDir::new("fam-none");
    let _s = serve(&lab, 7200, dir.path(), &[]);
    let (log, _) = send_logged(&lab, 7200, &dir);
    no_endpoint_warning(&log);
    let want = match pm {
        // the userspace release waits for an announcement (the recovery service opens the
        // path when one comes)
        PmMode::Userspace => "the server has announced no IPv4 address yet, so the IPv4 path(s) 198.18.2.2 cannot join",
        // the in-kernel release's note (crate::path), or the gate's own line
        PmMode::Kernel if log.contains("when the first flight was acknowledged") => "the server had announced no IPv4 address when the first flight was acknowledged, so the IPv4 path(s) 198.18.2.2 cannot join",
        PmMode::Kernel => "the server announced no IPv4 address, so the IPv4 path(s) 198.18.2.2 cannot join",
    };
    assert!(log.contains(want), "{log}");
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn no_address_of_the_untrusted_family_announced_is_said_userspace_pm() {
    nothing_announced(PmMode::Userspace);
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn no_address_of_the_untrusted_family_announced_is_said_kernel_pm() {
    nothing_announced(PmMode::Kernel);
}

/// The untrusted link's family has no route to the address the server announced (the
/// client's IPv4 default routes removed): the file arrives over the trusted link and the
/// log names the missing route.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn no_route_in_the_untrusted_family_is_said() {
    let lab = family_lab(PmMode::Userspace, Family::Ipv6, Family::Ipv4);
    server_announces(&lab, "198.18.3.2");
    sh(
        &lab,
        Host::Client,
        "set -e; ip -4 route del default; ip -4 route flush table 102",
    );
    let dir = TempDir::new("fam-noroute");
    let _s = serve(&lab, 7500, dir.path(), &[]);
    let (log, _) = send_logged(&lab, 7500, &dir);
    no_endpoint_warning(&log);
    assert!(
        log.contains("no IPv4 route to 198.18.3.2:7500 (the address the server announced) through `untrusted` (198.18.2.2), so that path cannot join"),
        "{log}"
    );
}

/// A link-local address named as a path is refused before anything is sent, with one line.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn a_link_local_address_is_refused_as_a_path() {
    let lab = family_lab(PmMode::Userspace, Family::Ipv6, Family::Ipv6);
    let ll = sh(
        &lab,
        Host::Client,
        "ip -6 -o addr show dev untrusted scope link | awk '{print $4}' | cut -d/ -f1",
    );
    let ll = ll.trim();
    assert!(ll.starts_with("fe80:"), "{ll}");
    let dir = TempDir::new("fam-ll");
    let _s = serve(&lab, 7300, dir.path(), &[]);
    let src = TempDir::new("fam-ll-src");
    let f = src.join("x.bin");
    std::fs::write(&f, b"never sent").unwrap();
    let to = server(&lab, 7300);
    let fs = f.display().to_string();
    let out = client(
        &lab,
        &[
            "send",
            &fs,
            "--to",
            &to,
            "--trusted",
            "trusted",
            "--untrusted",
            ll,
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("link-local")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains(ll), "{err}");
    assert!(!dir.join("x.bin").exists());
}

/// sock_diag's per-subflow figures (what the scenario runner's samples and the tests'
/// `acked_from` read) cover IPv6 subflows and the IPv4-mapped initial subflow of a
/// dual-stack socket: during a perf session over an IPv4 trusted and an IPv6 untrusted
/// link, both show bytes acknowledged.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn per_subflow_figures_cover_ipv6_and_mapped_subflows() {
    let lab = family_lab(PmMode::Userspace, Family::Ipv4, Family::Ipv6);
    server_announces(&lab, "2001:2:0:3::2");
    let dir = TempDir::new("fam-diag");
    let port = 7400;
    let _s = serve(&lab, port, dir.path(), &[]);
    let to = server(&lab, port);
    let mut args = vec!["perf", "--to", &to, "--time", "4", "--json"];
    args.extend_from_slice(&PATHS);
    let mut cmd = lab.command(Host::Client, NENA, &args);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut perf = Killed(cmd.spawn().expect("spawn nena perf"));
    let (t, u) = nena_testkit::wait_for(
        "100 kB acknowledged on each link's subflow (sock_diag)",
        Duration::from_secs(10),
        || {
            let t = acked_from(&lab, "198.18.1.2", port);
            let u = acked_from(&lab, "2001:2:0:2::2", port);
            (t > 100_000 && u > 100_000).then_some((t, u))
        },
    );
    let mut stdout = Vec::new();
    let mut stderr = String::new();
    perf.0
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    perf.0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = perf.0.wait().unwrap();
    assert!(status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
    assert_eq!(report["verified"], true, "{report}");
    let (rt, ru) = bytes_by_trust(&report);
    assert!(
        rt >= t - 1 && ru >= u - 1,
        "sock_diag saw more than the report: {t} {u} vs {rt} {ru}"
    );
}

/// The client's established sockets from `src` to the server's `port` (sock_diag): the
/// subflows of that link, with their source port and the bytes acknowledged on them.
fn subflows_from(lab: &Lab, src: IpAddr, port: u16) -> Vec<nena_mptcp::sample::SocketSample> {
    lab.run_in(Host::Client, move || nena_mptcp::sample::dump(port))
        .expect("entering the client host")
        .expect("sock_diag dump")
        .into_iter()
        .filter(|s| s.src.ip() == src && s.is_established_to(port))
        .collect()
}

/// The IPv4 untrusted link of an IPv6 connection lost for a second and back (userspace PM):
/// nena's recovery opens a new subflow from it to the IPv4 address the server announced,
/// which carries data again; the session's bytes all verified.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn the_other_familys_subflow_is_recovered_at_the_announced_address() {
    let lab = family_lab(PmMode::Userspace, Family::Ipv6, Family::Ipv4);
    server_announces(&lab, "198.18.3.2");
    let dir = TempDir::new("fam-rec");
    let port = 7600;
    let _s = serve(&lab, port, dir.path(), &[]);
    let to = server(&lab, port);
    let mut args = vec!["perf", "--to", &to, "--time", "8", "--json"];
    args.extend_from_slice(&PATHS);
    let mut cmd = lab.command(Host::Client, NENA, &args);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut perf = Killed(cmd.spawn().expect("spawn nena perf"));
    let u: IpAddr = "198.18.2.2".parse().unwrap();
    let first = nena_testkit::wait_for(
        "64 KiB acknowledged on the IPv4 untrusted subflow",
        Duration::from_secs(5),
        || {
            subflows_from(&lab, u, port)
                .into_iter()
                .find(|s| s.bytes_acked >= 64 << 10)
        },
    );
    assert_eq!(first.dst, "198.18.3.2:7600".parse().unwrap());
    lab.set_link(Link::Untrusted, false).unwrap();
    // sleep: the outage itself, one second without the link.
    std::thread::sleep(Duration::from_secs(1));
    lab.set_link(Link::Untrusted, true).unwrap();
    let again = nena_testkit::wait_for(
        "a new IPv4 untrusted subflow carrying data after the link's return",
        Duration::from_secs(5),
        || {
            subflows_from(&lab, u, port)
                .into_iter()
                .find(|s| s.src.port() != first.src.port() && s.bytes_acked >= 64 << 10)
        },
    );
    assert_eq!(again.dst, first.dst, "recovered to the announced address");
    let mut stdout = Vec::new();
    let mut stderr = String::new();
    perf.0
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    perf.0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(perf.0.wait().unwrap().success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
    assert_eq!(report["verified"], true, "{report}");
}
