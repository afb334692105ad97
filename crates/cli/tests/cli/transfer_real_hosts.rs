//! Trusted-path-first on hosts that are not the lab (root): the lab's client normally has
//! source-based rules that send each address out of its own link; a laptop on a public WLAN
//! has none, and its default route often leaves by the untrusted link. Each test here takes
//! those rules away and puts the default route on the untrusted link (with a second default
//! route on the trusted link, of a worse metric, as NetworkManager installs for two links),
//! then checks with captures of both client links that no byte of nena's handshake, no
//! MP_CAPABLE key and no plaintext run crosses the untrusted link, that files arrive
//! byte-exact, and (either PM) that the untrusted link then carries data. Variants: a
//! server that announces a second address (`signal` endpoint, ADD_ADDR), both path
//! managers, the first data segments on the trusted link dropped, paths with a real round
//! trip (the relay's delay), and a trusted link without any route to the server (refused
//! before anything is sent, with the fix named).

use crate::harness::*;
use nena_lab::{Host, Lab, LabGuard, Link, PmMode, Rate};
use std::path::Path;

/// The server announces a second address (198.18.3.3, `signal` endpoint).
fn server_announces(lab: &Lab) {
    sh(
        lab,
        Host::Server,
        "set -e; ip addr add 198.18.3.3/24 dev eth0; ip mptcp endpoint add 198.18.3.3 dev eth0 signal",
    );
}

/// Both links shaped to 50 Mbit/s, so the scheduler's split follows the links (on
/// unshaped veth the CPU sets the pace and the untrusted share varies widely).
fn lab_pm(pm: PmMode) -> LabGuard {
    lab_with(|c| {
        c.pm = pm;
        c.trusted_rate = Some(Rate::mbit(50));
        c.untrusted_rate = Some(Rate::mbit(50));
    })
}

/// The header every nena hello starts with (magic, version, type 1).
pub(crate) fn hello_header() -> Vec<u8> {
    let mut h = nena_proto::wire::MAGIC.to_vec();
    h.extend_from_slice(&[nena_proto::wire::VERSION, 1]);
    h
}

/// The header of a resume hello (magic, version, type 5): a client's first flight when it
/// resumes with a ticket (docs/PROTOCOL.md, "Resumed sessions"); it holds `r_c` as a hello
/// does.
pub(crate) fn resume_header() -> Vec<u8> {
    let mut h = nena_proto::wire::MAGIC.to_vec();
    h.extend_from_slice(&[nena_proto::wire::VERSION, nena_proto::wire::TYPE_RESUME]);
    h
}

/// Client first flights (hellos and resume hellos) in `raw`.
pub(crate) fn first_flights(raw: &[u8]) -> usize {
    count(raw, &hello_header()) + count(raw, &resume_header())
}

pub(crate) fn eavesdrop(cap: &Path, known: &Path) -> serde_json::Value {
    let out = std::process::Command::new(NENA)
        .args(["eavesdrop", cap.to_str().unwrap(), "--known"])
        .arg(known)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `rounds` sends and gets of a random file with both client links captured; returns the
/// JSON reports, each connection's log (standard error) and what each capture holds.
pub(crate) struct Outcome {
    pub(crate) reports: Vec<serde_json::Value>,
    pub(crate) logs: Vec<String>,
    pub(crate) untrusted_raw: Vec<u8>,
    pub(crate) trusted_raw: Vec<u8>,
    pub(crate) untrusted_view: serde_json::Value,
}

pub(crate) fn transfers(lab: &Lab, rounds: usize) -> Outcome {
    let srv = TempDir::new("rh");
    let cli = TempDir::new("rhc");
    let _s = serve(lab, 7000, srv.path(), &[]);
    let to = server(lab, 7000);
    let known = cli.join("known.bin");
    let data = random(1_500_000, 19);
    std::fs::write(&known, &data).unwrap();
    std::fs::copy(&known, srv.join("served.bin")).unwrap();
    let (cap_u, cap_t) = (cli.join("u.pcap"), cli.join("t.pcap"));
    let cu = lab.capture(Link::Untrusted, &cap_u).unwrap();
    let ct = lab.capture(Link::Trusted, &cap_t).unwrap();
    let known_s = known.display().to_string();
    let mut reports = Vec::new();
    let mut logs = Vec::new();
    for i in 0..rounds {
        let name = format!("up{i}");
        let out = cli.join(&format!("down{i}")).display().to_string();
        for args in [
            vec!["send", known_s.as_str(), "--name", &name, "--to", &to],
            vec!["get", "served.bin", "--out", &out, "--from", &to],
        ] {
            let mut a = args.clone();
            a.push("--json");
            a.extend_from_slice(&PATHS);
            let out = client(lab, &a);
            let log = String::from_utf8_lossy(&out.stderr).to_string();
            assert!(
                out.status.success(),
                "nena {a:?} failed ({}): {log}",
                out.status
            );
            reports.push(serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
                panic!(
                    "nena {a:?}: not JSON ({e}): {}",
                    String::from_utf8_lossy(&out.stdout)
                )
            }));
            logs.push(log);
        }
        assert!(
            std::fs::read(srv.join(&name)).unwrap() == data,
            "{name} differs"
        );
        assert!(std::fs::read(&out).unwrap() == data, "{out} differs");
    }
    cu.stop().unwrap();
    ct.stop().unwrap();
    if std::env::var_os("NENA_TEST_DEBUG").is_some() {
        let by_trust: Vec<(u64, u64)> = reports.iter().map(bytes_by_trust).collect();
        eprintln!("DEBUG bytes (trusted, untrusted) per connection: {by_trust:?}");
        for r in &reports {
            eprintln!("DEBUG single path: {}", r["paths"]["single_path"]);
        }
    }
    if std::env::var_os("NENA_TEST_DEBUG").is_some() {
        for l in &logs {
            eprintln!("DEBUG stderr: {l}");
        }
    }
    Outcome {
        reports,
        logs,
        untrusted_view: eavesdrop(&cap_u, &known),
        untrusted_raw: std::fs::read(&cap_u).unwrap(),
        trusted_raw: std::fs::read(&cap_t).unwrap(),
    }
}

/// What must hold on every host: every hello crossed the trusted link and none the
/// untrusted one, no MPTCP key and no plaintext run on the untrusted link, every
/// connection aead.
pub(crate) fn check_trusted_first(o: &Outcome) {
    let h = hello_header();
    assert_eq!(
        first_flights(&o.untrusted_raw),
        0,
        "a nena hello crossed the untrusted link"
    );
    assert!(
        count(&o.trusted_raw, &h) >= o.reports.len(),
        "{} hellos on the trusted link for {} connections",
        count(&o.trusted_raw, &h),
        o.reports.len()
    );
    for f in o.untrusted_view["flows"].as_array().unwrap() {
        assert!(
            f["mptcp_keys"].as_array().unwrap().is_empty(),
            "MPTCP key on the untrusted link: {f}"
        );
    }
    assert_eq!(o.untrusted_view["known"]["runs_found"], 0);
    assert!(o.reports.iter().all(|r| r["mode"] == "aead"));
}

pub(crate) fn untrusted_bytes(o: &Outcome) -> u64 {
    o.reports.iter().map(|r| bytes_by_trust(r).1).sum()
}

/// The untrusted link carried data (the property; how much of it is a matter of the
/// scheduler and the CPU on unshaped links, so only "well beyond the handshake's ACKs").
pub(crate) fn assert_untrusted_carried(o: &Outcome) {
    let u = untrusted_bytes(o);
    assert!(u > 64 * 1024, "the untrusted link carried {u} B");
}

/// Every connection kept its untrusted path: it carried data there, or its untrusted
/// subflow is still established at its end (on unshaped links a loaded host's scheduler may
/// finish a download before the join is usable: how much each carries is the scheduler's;
/// [`assert_untrusted_carried`] checks the link carried data over all of them), except one
/// of the in-kernel PM whose report says why not: the kernel handed bytes of its first
/// flight to an untrusted subflow (its MPTCP-level retransmission takes a subflow with
/// nothing outstanding, so the idle untrusted one, after a loss on the trusted path), the
/// hold dropped them, and nena closed that subflow before the release. Returns how many
/// connections were so.
fn assert_each_untrusted_carried(o: &Outcome) -> usize {
    let mut handed = 0;
    for r in &o.reports {
        let (_, u) = bytes_by_trust(r);
        let kept = r["paths"]["subflows"].as_array().is_some_and(|s| {
            s.iter()
                .any(|s| s["trust"] == "untrusted" && s["state"] == 1)
        });
        if u > 64 * 1024 || kept {
            continue;
        }
        let why = r["paths"]["single_path"].as_str().unwrap_or("");
        assert!(
            r["paths"]["path_manager"] == "kernel" && why.contains("bytes of the first flight"),
            "a connection carried {u} B on the untrusted link: {}",
            r["paths"]
        );
        handed += 1;
    }
    handed
}

/// A lab whose client is routed like a laptop (both default routes), its server announcing
/// a second address or not.
fn laptop_lab(pm: PmMode, announce: bool) -> LabGuard {
    let lab = lab_pm(pm);
    laptop_routes(&lab, true);
    if announce {
        server_announces(&lab);
    }
    lab
}

/// A laptop-routed client against a server that announces a second address or not. The
/// untrusted link must carry data with either PM: with the in-kernel PM the subflows the
/// kernel opened before the first flight stay, held by the first-flight hold (nena closes
/// only one the kernel handed first-flight bytes).
fn laptop(pm: PmMode, announce: bool) {
    let lab = laptop_lab(pm, announce);
    let o = transfers(&lab, 3);
    check_trusted_first(&o);
    assert_untrusted_carried(&o);
    let handed = assert_each_untrusted_carried(&o);
    assert!(handed < o.reports.len(), "{handed} single-path connections");
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn laptop_routes_userspace_pm_keep_the_handshake_on_the_trusted_link() {
    laptop(PmMode::Userspace, false);
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn laptop_routes_kernel_pm_keep_the_handshake_on_the_trusted_link() {
    laptop(PmMode::Kernel, false);
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn signal_server_userspace_pm_connects_and_uses_both_links() {
    laptop(PmMode::Userspace, true);
}

/// The in-kernel PM opens subflows as soon as the server's ADD_ADDR arrives, which may be
/// before the first flight: held by the first-flight hold, they stay open and carry data
/// after the release, and the hello never crosses the untrusted link.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn signal_server_kernel_pm_connects_without_the_hello_leaving_by_the_untrusted_link() {
    laptop(PmMode::Kernel, true);
}

/// Paths with a real round trip (10 ms each way on both links): the server's ADD_ADDR
/// reaches the client after its first flight is written, so the in-kernel PM's subflows
/// open during the first flight and, once it is acked, carry data; the hello never crosses
/// the untrusted link. (On the lab's bare veth the ADD_ADDR can beat the client's first
/// write: the subflows then open before it, held, as in
/// `signal_server_kernel_pm_connects_without_the_hello_leaving_by_the_untrusted_link`.)
/// The in-kernel PM on paths with a round trip: both links 10 ms each way (the relay) and
/// 50 Mbit/s.
pub(crate) fn kernel_pm_with_a_round_trip(c: &mut nena_lab::LabConfig) {
    c.pm = PmMode::Kernel;
    c.relay_exe = Some(NENA.into());
    c.offload = false;
    c.trusted_rate = Some(Rate::mbit(50));
    c.untrusted_rate = Some(Rate::mbit(50));
    for link in [Link::Trusted, Link::Untrusted] {
        c.set_link_emulation(
            link,
            Some(nena_lab::LinkEmulation::both(nena_lab::Emulation {
                delay: std::time::Duration::from_millis(10),
                ..nena_lab::Emulation::default()
            })),
        );
    }
}

/// A laptop-routed lab against an announcing server, [`kernel_pm_with_a_round_trip`].
fn delayed_signal_lab() -> LabGuard {
    let lab = lab_with(kernel_pm_with_a_round_trip);
    laptop_routes(&lab, true);
    server_announces(&lab);
    lab
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn signal_server_kernel_pm_on_paths_with_a_round_trip_uses_both_links() {
    let lab = delayed_signal_lab();
    let o = transfers(&lab, 2);
    check_trusted_first(&o);
    assert_untrusted_carried(&o);
}

/// The same paths, the first flight lost: its ACK comes after the trusted subflow's RTO,
/// and the in-kernel PM's subflows to the announced address (and from the untrusted
/// endpoint) opened meanwhile. nena closes them at half that RTO, before the kernel's own
/// retransmission could put the hello on them: the hello stays on the trusted link and the
/// connection goes on over it.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn signal_server_kernel_pm_with_a_round_trip_and_the_first_flight_lost_keeps_the_hello_trusted() {
    let lab = delayed_signal_lab();
    lossy_start(&lab);
}

/// Trust is the interface a subflow leaves by, not its address. The trusted interface has a
/// second address, 198.18.1.3, with an in-kernel `subflow` endpoint without `dev`, and the
/// client has laptop routes: the subflow the in-kernel PM opens from that trusted address
/// leaves by the untrusted link. nena counts it untrusted (its socket is bound to no device,
/// and the route from its address leaves by `untrusted`), so it is closed before the first
/// flight (on bare veth the server's ADD_ADDR makes the kernel open it before the client's
/// first write; the old rule, trust by address, left it open and the hello could go on it)
/// or withdrawn during it: the hello never crosses the untrusted link, although a subflow
/// from a trusted address did.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn a_subflow_from_a_trusted_address_on_the_untrusted_link_is_untrusted() {
    let lab = laptop_lab(PmMode::Kernel, true);
    sh(
        &lab,
        Host::Client,
        "ip addr add 198.18.1.3/24 dev trusted && ip mptcp endpoint add 198.18.1.3 subflow && \
         ip mptcp limits set subflows 8 add_addr_accepted 8",
    );
    let route = sh(
        &lab,
        Host::Client,
        "ip route get 198.18.3.2 from 198.18.1.3",
    );
    assert!(route.contains("dev untrusted"), "{route}");
    let o = transfers(&lab, 2);
    check_trusted_first(&o);
    let flows = o.untrusted_view["flows"].as_array().unwrap();
    assert!(
        flows.iter().any(|f| f["src"]
            .as_str()
            .is_some_and(|s| s.starts_with("198.18.1.3:"))),
        "no subflow from the trusted address crossed the untrusted link, so this test proves \
         nothing: {flows:?}"
    );
}

/// The first data segments on the trusted link are dropped (netfilter in the client, on
/// its way out of `trusted`): the first flight is sent again, on the trusted link only.
fn first_flight_lost(pm: PmMode, announce: bool) {
    let lab = laptop_lab(pm, announce);
    let o = lossy_start(&lab);
    assert_untrusted_carried(&o);
    let handed = assert_each_untrusted_carried(&o);
    if std::env::var_os("NENA_TEST_DEBUG").is_some() {
        eprintln!("DEBUG {handed} connection(s) lost their untrusted subflow to the hold");
    }
}

/// One send and one get whose first data-bearing packets from the trusted address to the
/// server's port are lost on the trusted link (the router drops them, until 4000 bytes of
/// them were: the first connection's hello, about 1,330 bytes on the wire with the hybrid
/// key share, and its first retransmissions; the quota is one for the whole rule), as a
/// lossy start would. Checks that something was dropped and that
/// the hello stayed on the trusted link.
fn lossy_start(lab: &Lab) -> Outcome {
    sh(
        lab,
        Host::Router,
        "nft add table inet nena_loss && \
         nft add chain inet nena_loss lossy '{ type filter hook forward priority 0; }' && \
         nft add rule inet nena_loss lossy ip saddr 198.18.1.2 tcp dport 7000 ip length '>' 120 \
         quota until 4000 bytes counter drop",
    );
    let o = transfers(lab, 1);
    let rules = sh(lab, Host::Router, "nft list table inet nena_loss");
    let dropped: u64 = rules
        .split("packets ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    assert!(dropped >= 1, "nothing was dropped: {rules}");
    check_trusted_first(&o);
    o
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn first_flight_lost_userspace_pm() {
    first_flight_lost(PmMode::Userspace, false);
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn first_flight_lost_kernel_pm() {
    first_flight_lost(PmMode::Kernel, false);
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn first_flight_lost_signal_server_userspace_pm() {
    first_flight_lost(PmMode::Userspace, true);
}

/// On the lab's bare veth the in-kernel PM's join completes within tens of microseconds,
/// faster than the gate looks, and the kernel may copy the lost first flight onto it at
/// once: the first-flight hold (nena-bpf's `hold`, a cgroup egress program) drops that copy
/// before it leaves, and the gate closes the join before releasing the hold. (Before the
/// hold this crossed in 1 of 2 full runs.)
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn first_flight_lost_signal_server_kernel_pm() {
    first_flight_lost(PmMode::Kernel, true);
}

/// No route to the server through the trusted interface: refused before anything is sent,
/// whether the trusted path is named by interface or by address, with one line naming the
/// interface, the host's route and the fix; nothing of the connection on either link.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn no_route_through_the_trusted_interface_fails_closed_and_says_how_to_fix_it() {
    let lab = lab_pm(PmMode::Kernel);
    laptop_routes(&lab, false);
    let srv = TempDir::new("nr");
    let cli = TempDir::new("nrc");
    let _s = serve(&lab, 7000, srv.path(), &[]);
    let to = server(&lab, 7000);
    let f = cli.join("f.bin");
    std::fs::write(&f, random(10_000, 3)).unwrap();
    let (cap_u, cap_t) = (cli.join("u.pcap"), cli.join("t.pcap"));
    let cu = lab.capture(Link::Untrusted, &cap_u).unwrap();
    let ct = lab.capture(Link::Trusted, &cap_t).unwrap();
    for trusted in ["trusted", "198.18.1.2"] {
        let out = client(
            &lab,
            &[
                "send",
                f.to_str().unwrap(),
                "--to",
                &to,
                "--trusted",
                trusted,
                "--untrusted",
                "untrusted",
            ],
        );
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        for want in [
            "no route to 198.18.3.2 through the trusted interface `trusted`",
            "default via 198.18.2.1 dev untrusted",
            "ip route add 198.18.3.2 via GATEWAY dev trusted",
        ] {
            assert!(err.contains(want), "{want:?} not in: {err}");
        }
    }
    cu.stop().unwrap();
    ct.stop().unwrap();
    for cap in [&cap_u, &cap_t] {
        let raw = std::fs::read(cap).unwrap();
        assert_eq!(first_flights(&raw), 0);
        let v = eavesdrop(cap, &f);
        assert_eq!(v["payload_bytes"], 0, "{}: {v}", cap.display());
    }
    assert!(std::fs::read_dir(srv.path()).unwrap().next().is_none());
}

/// Leaving out `--untrusted` with the in-kernel PM: its endpoint on the untrusted link still
/// carries data (the kernel opens it), and the user is told so in one line with the fix.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn an_endpoint_the_user_did_not_name_is_said_in_one_line() {
    let lab = lab_pm(PmMode::Kernel);
    let srv = TempDir::new("un");
    let cli = TempDir::new("unc");
    let _s = serve(&lab, 7000, srv.path(), &[]);
    let to = server(&lab, 7000);
    let f = cli.join("f.bin");
    std::fs::write(&f, random(200_000, 5)).unwrap();
    let out = client(
        &lab,
        &[
            "send",
            f.to_str().unwrap(),
            "--to",
            &to,
            "--trusted",
            "trusted",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("named by neither --trusted nor --untrusted"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("198.18.2.2") && lines[0].contains("--untrusted 198.18.2.2"));
    // Named, it is quiet.
    let out = client(
        &lab,
        &[
            "send",
            f.to_str().unwrap(),
            "--name",
            "g",
            "--to",
            &to,
            "--trusted",
            "trusted",
            "--untrusted",
            "untrusted",
        ],
    );
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("named by neither"));
}
