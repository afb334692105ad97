//! Metered paths (issue 56, item 4; root, lab): with `--metered trusted`, the trusted link
//! carries the hello (the gate's first flight, checked by the gate as always) and next to
//! nothing else, the untrusted one the rest, files byte-exact both ways, with either path
//! manager; with the WLAN taken down mid-transfer the transfer completes on the trusted
//! link; the proxy client's metrics count the bytes per interface; a `--metered` that names
//! no interface is refused at start (exit 2, one line). The figures of a 100 MiB transfer
//! (share, goodput against the WLAN alone, the longest gap through the WLAN's loss) are
//! `nena bench metered`'s.

use crate::harness::*;
use nena_lab::{Host, Lab, Link, PmMode, Rate};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// Both links at 20 Mbit/s: the metered path's share is then what it is on real links
/// (unlimited veths carry megabytes in the round trip before the WLAN's join).
fn metered_lab(pm: PmMode) -> nena_lab::LabGuard {
    lab_with(|c| {
        c.pm = pm;
        c.trusted_rate = Some(Rate::mbit(20));
        c.untrusted_rate = Some(Rate::mbit(20));
    })
}

/// The header of a nena client hello (magic, version, type).
fn hello_header() -> Vec<u8> {
    let mut h = nena_proto::wire::MAGIC.to_vec();
    h.extend_from_slice(&[nena_proto::wire::VERSION, nena_proto::wire::TYPE_HELLO]);
    h
}

/// TCP payload bytes in a capture, both directions, every connection (`nena analyze`).
fn payload_bytes(cap: &Path) -> u64 {
    let out = nena(&["analyze", cap.to_str().unwrap(), "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["connections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            c["payload_bytes"]["c2s"].as_u64().unwrap()
                + c["payload_bytes"]["s2c"].as_u64().unwrap()
        })
        .sum()
}

/// One `send` then one `get` of the same 16 MiB with `--metered trusted`, both links
/// captured; what each capture and the client's reports show.
fn metered_round_trip(pm: PmMode, port: u16) {
    let lab = metered_lab(pm);
    let dir = TempDir::new("metered");
    let _serve = serve(&lab, port, dir.path(), &["--overwrite"]);
    let data = random(16 << 20, port as u64);
    let src = dir.join("src.bin");
    std::fs::write(&src, &data).unwrap();
    let caps = TempDir::new("metered-caps");
    let (ct, cu) = (caps.join("trusted.pcap"), caps.join("untrusted.pcap"));
    let cap_t = lab.capture(Link::Trusted, &ct).unwrap();
    let cap_u = lab.capture(Link::Untrusted, &cu).unwrap();
    let to = server(&lab, port);
    let back = dir.join("back.bin");
    let mut send = vec![
        "-v",
        "send",
        src.to_str().unwrap(),
        "--to",
        &to,
        "--name",
        "stored.bin",
        "--no-progress",
        "--json",
        "--metered",
        "trusted",
    ];
    send.extend_from_slice(&PATHS);
    let up = client(&lab, &send);
    let up_err = String::from_utf8_lossy(&up.stderr).into_owned();
    assert!(up.status.success(), "{up_err}");
    let mut get = vec![
        "-v",
        "get",
        "stored.bin",
        "--from",
        &to,
        "--out",
        back.to_str().unwrap(),
        "--no-progress",
        "--json",
        "--metered",
        "trusted",
    ];
    get.extend_from_slice(&PATHS);
    let down = client(&lab, &get);
    let down_err = String::from_utf8_lossy(&down.stderr).into_owned();
    assert!(down.status.success(), "{down_err}");
    let (_t, _u) = (cap_t.stop().unwrap(), cap_u.stop().unwrap());

    // Byte-exact both ways.
    assert!(
        std::fs::read(dir.join("stored.bin")).unwrap() == data,
        "the upload differs"
    );
    assert!(
        std::fs::read(&back).unwrap() == data,
        "the download differs"
    );

    // The first flight on the trusted link, none on the untrusted one.
    let raw_t = std::fs::read(&ct).unwrap();
    let raw_u = std::fs::read(&cu).unwrap();
    assert_eq!(
        count(&raw_t, &hello_header()),
        2,
        "one hello per transfer on the trusted link"
    );
    assert_eq!(
        crate::transfer_real_hosts::first_flights(&raw_u),
        0,
        "a hello on the untrusted link"
    );

    // The trusted link carried under 1% of the payload, the untrusted one the rest (the
    // links together at least both files: until the switch to backup took effect a few
    // segments may cross the trusted link, 65 KiB of an upload on a loaded host).
    let (t, u) = (payload_bytes(&ct), payload_bytes(&cu));
    assert!(
        t + u >= 2 * data.len() as u64,
        "the links carried {t} + {u} B of 2 x {} B",
        data.len()
    );
    assert!(
        (t as f64) < 0.01 * (t + u) as f64,
        "the metered trusted link carried {t} B of {} B",
        t + u
    );

    // The reports name the metered subflow.
    for (out, err) in [(&up.stdout, &up_err), (&down.stdout, &down_err)] {
        let r: serde_json::Value = serde_json::from_slice(out).unwrap();
        let subs = r["paths"]["subflows"].as_array().unwrap();
        let trusted = subs
            .iter()
            .find(|s| s["local"].as_str().unwrap().starts_with("198.18.1.2:"))
            .unwrap_or_else(|| panic!("no trusted subflow: {r}"));
        assert_eq!(trusted["metered"], true, "{r}");
        assert_eq!(trusted["iface"], "trusted", "{r}");
        let untrusted = subs
            .iter()
            .find(|s| s["local"].as_str().unwrap().starts_with("198.18.2.2:"))
            .unwrap_or_else(|| panic!("no untrusted subflow: {r}"));
        assert_eq!(untrusted["metered"], false, "{r}");
        // Each switch has its line.
        let said = match pm {
            PmMode::Userspace => "the metered path is backup now (MP_PRIO)",
            PmMode::Kernel => "added the endpoint 198.18.1.2 dev trusted backup",
        };
        assert!(err.contains(said), "{err}");
    }
    // The in-kernel PM's endpoint is gone with the command that made it.
    let eps = sh(&lab, Host::Client, "ip mptcp endpoint show");
    assert!(!eps.contains("198.18.1.2"), "{eps}");
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn metered_trusted_link_carries_the_hello_and_under_1_percent_userspace_pm() {
    metered_round_trip(PmMode::Userspace, 7711);
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn metered_trusted_link_carries_the_hello_and_under_1_percent_kernel_pm() {
    metered_round_trip(PmMode::Kernel, 7712);
}

/// The bytes the client's subflows from `addr` carried (acknowledged + received), from
/// `nena perf`'s JSON report.
fn carried(report: &serde_json::Value, addr: &str) -> u64 {
    report["paths"]["subflows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["local"].as_str().unwrap().starts_with(addr))
        .map(|s| s["bytes_acked"].as_u64().unwrap() + s["bytes_received"].as_u64().unwrap())
        .sum()
}

/// A 24 MiB transfer each way with `--metered trusted`, the WLAN taken down once it
/// carried 4 MiB of it: the transfer completes, verified, and the trusted link carried
/// the rest; the switch is said.
fn through_the_wlans_loss(pm: PmMode, port: u16, reverse: bool) {
    let lab = metered_lab(pm);
    let dir = TempDir::new("metered-outage");
    let _serve = serve(&lab, port, dir.path(), &[]);
    let to = server(&lab, port);
    let mut args = vec![
        "-v",
        "perf",
        "--to",
        &to,
        "--bytes",
        "24M",
        "--interval",
        "0",
        "--json",
        "--metered",
        "trusted",
    ];
    if reverse {
        args.push("--reverse");
    }
    args.extend_from_slice(&PATHS);
    let mut cmd = lab.command(Host::Client, NENA, &args);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut perf = Killed(cmd.spawn().expect("nena perf"));
    let err = perf.0.stderr.take().unwrap();
    let lines = std::thread::spawn(move || {
        BufReader::new(err)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<_>>()
            .join("\n")
    });
    let mut stdout = perf.0.stdout.take().unwrap();
    let report = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut v).map(|_| v)
    });
    // Mid-transfer: the WLAN carried 4 MiB (the client's subflow counters).
    let wlan = lab.client_addr(Link::Untrusted).to_string();
    nena_testkit::wait_until("4 MiB on the WLAN", Duration::from_secs(30), || {
        wlan_bytes(&lab, &wlan, port) >= 4 << 20
    });
    lab.set_link(Link::Untrusted, false).unwrap();
    let status = perf.0.wait().unwrap();
    let err = lines.join().unwrap();
    assert!(status.success(), "{err}");
    let out = report.join().unwrap().unwrap();
    let r: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(r["verified"], true, "{r}");
    let moved = if reverse { &r["received"] } else { &r["sent"] };
    assert_eq!(moved, 24 << 20, "{r}");
    // Nearly nothing on the trusted link before, the rest after: over 8 MiB on it.
    let t = carried(&r, "198.18.1.2:");
    assert!(t > 8 << 20, "the trusted link carried {t} B: {r}");
    if pm == PmMode::Userspace {
        assert!(
            err.contains("the metered path carries data now, no other path carries"),
            "{err}"
        );
    } else {
        assert!(
            err.contains("the metered path carries data now, no other path is up"),
            "{err}"
        );
    }
}

/// The bytes the client's established subflows from `addr` to the server's `port` carried
/// both ways (sock_diag).
fn wlan_bytes(lab: &Lab, addr: &str, port: u16) -> u64 {
    let ip: std::net::IpAddr = addr.parse().unwrap();
    lab.run_in(Host::Client, move || nena_mptcp::sample::dump(port))
        .expect("entering the client host")
        .expect("sock_diag dump")
        .into_iter()
        .filter(|s| s.src.ip() == ip && s.is_established_to(port))
        .map(|s| s.bytes_acked + s.bytes_received)
        .sum()
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn an_upload_completes_on_the_metered_link_when_the_wlan_goes_down_userspace_pm() {
    through_the_wlans_loss(PmMode::Userspace, 7713, false);
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn a_download_completes_on_the_metered_link_when_the_wlan_goes_down_kernel_pm() {
    through_the_wlans_loss(PmMode::Kernel, 7714, true);
}

/// The WLAN goes down and comes back during a 10 s perf (userspace PM): the metered path
/// carries while it is gone, the recovery's new subflow takes the data back when it returns,
/// and the metered path is backup again (each switch said), carrying nothing in the run's
/// last 2 s; verified.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn the_metered_path_is_backup_again_once_the_wlan_is_back_userspace_pm() {
    let lab = metered_lab(PmMode::Userspace);
    let dir = TempDir::new("metered-back");
    let _serve = serve(&lab, 7718, dir.path(), &[]);
    let to = server(&lab, 7718);
    let mut args = vec![
        "-v",
        "perf",
        "--to",
        &to,
        "--time",
        "10",
        "--interval",
        "0.1",
        "--json",
        "--metered",
        "trusted",
    ];
    args.extend_from_slice(&PATHS);
    let mut cmd = lab.command(Host::Client, NENA, &args);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut perf = Killed(cmd.spawn().expect("nena perf"));
    let err = perf.0.stderr.take().unwrap();
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let sink = log.clone();
    let reader = std::thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            let mut s = sink.lock().unwrap();
            s.push_str(&l);
            s.push('\n');
        }
    });
    let mut stdout = perf.0.stdout.take().unwrap();
    let report = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut v).map(|_| v)
    });
    let said = |what: &str, n: usize| {
        let log = log.clone();
        let what = what.to_string();
        nena_testkit::wait_until(&what.clone(), Duration::from_secs(15), move || {
            log.lock().unwrap().matches(&what).count() >= n
        });
    };
    said("the metered path is backup now", 1);
    lab.set_link(Link::Untrusted, false).unwrap();
    said("the metered path carries data now", 1);
    lab.set_link(Link::Untrusted, true).unwrap();
    said("the metered path is backup now", 2);
    let back = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let status = perf.0.wait().unwrap();
    reader.join().unwrap();
    let text = log.lock().unwrap().clone();
    assert!(status.success(), "{text}");
    let r: serde_json::Value = serde_json::from_slice(&report.join().unwrap().unwrap()).unwrap();
    assert_eq!(r["verified"], true, "{r}");
    // From the switch back on, the WLAN carries and the trusted link next to nothing.
    let (mut t, mut u) = (0u64, 0u64);
    for iv in r["intervals"].as_array().unwrap() {
        if iv["unix"].as_f64().unwrap() <= back + 0.2 {
            continue;
        }
        for s in iv["subflows_interval"].as_array().unwrap() {
            let b = s["acked"].as_u64().unwrap() + s["received"].as_u64().unwrap();
            if s["local"].as_str().unwrap().starts_with("198.18.1.2:") {
                t += b;
            } else {
                u += b;
            }
        }
    }
    assert!(
        u > 1 << 20,
        "the WLAN carried {u} B after its return: {text}"
    );
    assert!(
        (t as f64) < 0.02 * (t + u) as f64,
        "the trusted link carried {t} B of {} after the WLAN's return: {text}",
        t + u
    );
}

/// The proxy client's metrics count its sessions' bytes per interface, metered or not: the
/// interfaces together count the exchange, each under its metered label, and today's gauge
/// counts as much as the total.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn proxy_client_metrics_count_bytes_per_interface() {
    let lab = metered_lab(PmMode::Userspace);
    let target: std::net::SocketAddr = format!("{}:7715", lab.server_addr()).parse().unwrap();
    let _echo = echo_server(&lab, target);
    let listen = server(&lab, 7716);
    let _ps = spawn_listening(
        &lab,
        Host::Server,
        &[
            "proxy",
            "server",
            "--listen",
            &listen,
            "--forward",
            &target.to_string(),
        ],
    );
    let mut args = vec![
        "-v",
        "proxy",
        "client",
        "--listen",
        "127.0.0.1:7717",
        "--to",
        &listen,
        "--metrics",
        "127.0.0.1:9478",
        "--metered",
        "trusted",
    ];
    args.extend_from_slice(&PATHS);
    let _pc = spawn_listening(&lab, Host::Client, &args);
    let payload = random(1 << 20, 56);
    let answer = exchange(&lab, "127.0.0.1:7717".parse().unwrap(), payload.clone()).unwrap();
    assert!(answer == payload, "the echo differs");
    let scrape = || sh(&lab, Host::Client, "curl -s http://127.0.0.1:9478/metrics");
    let value = |text: &str, family: &str, iface: &str, metered: &str, dir: &str| -> u64 {
        let key = format!(
            "{family}{{role=\"proxy_client\",interface=\"{iface}\",metered=\"{metered}\",direction=\"{dir}\"}} "
        );
        text.lines()
            .find_map(|l| l.strip_prefix(&key))
            .map_or(0, |v| v.trim().parse().unwrap())
    };
    // The session is counted when it ends, just after the application's connection.
    let text = nena_testkit::wait_for("the session counted", Duration::from_secs(10), || {
        let t = scrape();
        (value(
            &t,
            "nena_interface_bytes_total",
            "untrusted",
            "false",
            "sent",
        ) > 0)
            .then_some(t)
    });
    let total =
        |iface, metered, dir| value(&text, "nena_interface_bytes_total", iface, metered, dir);
    let today =
        |iface, metered, dir| value(&text, "nena_interface_bytes_today", iface, metered, dir);
    let (u_sent, u_recv) = (
        total("untrusted", "false", "sent"),
        total("untrusted", "false", "received"),
    );
    let (t_sent, t_recv) = (
        total("trusted", "true", "sent"),
        total("trusted", "true", "received"),
    );
    // Every byte of the exchange is counted on one interface or the other (how little the
    // metered one carries is the 16 MiB tests' and `nena bench metered`'s: a share of a
    // 1 MiB exchange depends on how soon the WLAN's subflow joins on a loaded host).
    assert!(
        u_sent + t_sent >= 1 << 20 && u_recv + t_recv >= 1 << 20,
        "{text}"
    );
    assert!(u_sent > 0 && u_recv > 0, "{text}");
    assert!(
        t_sent > 0,
        "the hello crossed the trusted interface: {text}"
    );
    assert_eq!(today("untrusted", "false", "sent"), u_sent, "{text}");
    assert_eq!(today("trusted", "true", "received"), t_recv, "{text}");
    assert!(
        text.contains("nena_interface_bytes_today_start_seconds{role=\"proxy_client\"}"),
        "{text}"
    );
}

/// A `--metered` naming no interface of the namespace, or every path, is refused before
/// anything starts, with one line and status 2, by every client command.
#[test]
fn a_metered_interface_that_does_not_exist_is_refused_at_start() {
    let to = "198.18.3.2:7000";
    let cmds: Vec<Vec<&str>> = vec![
        vec!["send", "/etc/hostname", "--to", to],
        vec!["get", "x", "--from", to],
        vec!["perf", "--to", to],
        vec!["proxy", "client", "--listen", "127.0.0.1:7719", "--to", to],
        vec!["gateway", "--lan", "lo", "--via", to],
        vec!["run", "--via", to],
    ];
    for base in cmds {
        let mut args = base.clone();
        args.extend(["--trusted", "lo", "--metered", "nosuch0"]);
        if base[0] == "run" {
            args.extend(["--", "true"]);
        }
        let o = nena(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{base:?}: {err}");
        assert_eq!(
            err.trim_end(),
            "nena: --metered nosuch0: no such interface in this network namespace",
            "{base:?}"
        );
        assert_eq!(err.lines().count(), 1, "{base:?}: {err}");
    }
    let o = nena(&["perf", "--to", to, "--trusted", "lo", "--metered", "lo"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("every path is metered"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
