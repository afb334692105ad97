//! A server fleet behind an ordinary L4 balancer (issue 22 item 6): `nena lab up --servers 3`
//! puts three servers behind the router, which balances new connections to their shared
//! address with an nftables hash of the 4-tuple; each server announces its own join port
//! and denies joins to the shared address (`net.mptcp.allow_join_initial_addr_port=0`).
//! Checked here with nena's own client and servers: every join lands on its own
//! connection's server (the client's `MPTCP_FULL_INFO` subflow list, and the router's
//! captures of each server link), the load spreads, a server taken out of the balancer and
//! stopped ends only its own sessions, with the clean-stop message, and the trusted path
//! carries every handshake and first flight throughout.

use crate::harness::*;
use nena_lab::{Host, Lab, FLEET_ADDR, FLEET_JOIN_PORT_BASE};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const PORT: u16 = 7300;

fn shared() -> String {
    format!("{FLEET_ADDR}:{PORT}")
}

/// One upload directory per fleet server, `s1` .. `s3` under `tmp`.
fn fleet_dirs(tmp: &TempDir) -> Vec<PathBuf> {
    let dirs: Vec<PathBuf> = (1..=3).map(|i| tmp.join(&format!("s{i}"))).collect();
    for d in &dirs {
        std::fs::create_dir(d).unwrap();
    }
    dirs
}

/// Untrusted subflows of a session's report, with their remote address and bytes sent.
fn untrusted(report: &Value) -> Vec<(String, u64)> {
    report["paths"]["subflows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["trust"] != "trusted")
        .map(|s| {
            (
                s["remote"].as_str().unwrap().to_string(),
                s["bytes_sent"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// `nena serve` on every fleet server, each with its own directory.
fn serve_fleet(lab: &Lab, dirs: &[PathBuf], extra: &[&str]) -> Vec<Proc> {
    let listen = format!("0.0.0.0:{PORT}");
    lab.fleet()
        .iter()
        .zip(dirs)
        .map(|(s, dir)| {
            let dir = dir.display().to_string();
            let mut args = vec!["-v", "serve", "--listen", &listen, "--dir", &dir];
            args.extend_from_slice(extra);
            spawn_listening_cmd(lab.fleet_command(s.index, NENA, &args), &args)
        })
        .collect()
}

/// `nena send FILE --name NAME --to SHARED --json` from the client.
fn send_cmd(lab: &Lab, file: &Path, name: &str) -> Command {
    let to = shared();
    let mut args = vec!["send", file.to_str().unwrap(), "--name", name, "--to", &to];
    args.extend_from_slice(&PATHS);
    args.push("--json");
    let mut c = lab.command(Host::Client, NENA, &args);
    c.stdin(Stdio::null());
    c
}

/// The fleet server (1-based) a session's joins went to, from its report's subflows:
/// every subflow but the initial one goes to a join port; the initial one to the shared
/// address's balanced port, from the trusted address. Panics on anything else.
fn joined_server(report: &Value) -> Option<u8> {
    let subflows = report["paths"]["subflows"].as_array().expect("subflows");
    let shared = shared();
    let mut server = None;
    let mut initial = 0;
    for s in subflows {
        let remote = s["remote"].as_str().unwrap();
        if remote == shared {
            initial += 1;
            assert_eq!(
                s["trust"], "trusted",
                "initial subflow not trusted: {report}"
            );
            continue;
        }
        let (addr, port) = remote.rsplit_once(':').unwrap();
        assert_eq!(addr, FLEET_ADDR.to_string(), "join elsewhere: {report}");
        let port: u16 = port.parse().unwrap();
        let i = u8::try_from(port - FLEET_JOIN_PORT_BASE).unwrap();
        assert!(
            server.is_none() || server == Some(i),
            "joins to two servers: {report}"
        );
        server = Some(i);
    }
    assert_eq!(initial, 1, "one initial subflow: {report}");
    server
}

/// tcpdump of SYNs (no ACK) on the router's link to each fleet server.
struct SynCaptures(Vec<(Child, PathBuf)>);

impl SynCaptures {
    fn start(lab: &Lab, dir: &TempDir) -> SynCaptures {
        let caps = lab
            .fleet()
            .iter()
            .map(|s| {
                let file = dir.join(&format!("{}.pcap", s.router_iface));
                let mut child = lab
                    .command(
                        Host::Router,
                        "tcpdump",
                        [
                            "-i",
                            &s.router_iface,
                            // Each packet written as it comes: without immediate mode the
                            // last second's packets wait in the ring for a block timeout
                            // and are lost when the capture stops (seen: 41 SYNs).
                            "--immediate-mode",
                            "-U",
                            "-n",
                            "-w",
                            file.to_str().unwrap(),
                            "tcp[tcpflags] & tcp-syn != 0 and tcp[tcpflags] & tcp-ack == 0",
                        ],
                    )
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("tcpdump");
                // Wait for its "listening on" line: from then on it sees every packet.
                let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
                let mut line = String::new();
                std::io::BufRead::read_line(&mut err, &mut line).unwrap();
                assert!(line.contains("listening on"), "tcpdump: {line}");
                std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
                (child, file)
            })
            .collect();
        SynCaptures(caps)
    }

    /// Stop the captures; per server, the (destination port, MPTCP subtype) of every SYN.
    fn stop(mut self) -> Vec<Vec<(u16, u8)>> {
        self.0
            .drain(..)
            .map(|(mut child, file)| {
                unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
                let _ = child.wait();
                let out = Command::new("tshark")
                    .args(["-r", file.to_str().unwrap(), "-T", "fields"])
                    .args(["-e", "tcp.dstport", "-e", "tcp.options.mptcp.subtype"])
                    .output()
                    .expect("tshark");
                assert!(out.status.success(), "tshark: {}", text_of(&out.stderr));
                text_of(&out.stdout)
                    .lines()
                    .map(|l| {
                        let (port, sub) = l.split_once('\t').unwrap_or((l, ""));
                        let sub = sub.split(',').next().unwrap_or("");
                        (
                            port.parse().unwrap(),
                            sub.parse()
                                .unwrap_or_else(|_| panic!("no MPTCP option: {l}")),
                        )
                    })
                    .collect()
            })
            .collect()
    }
}

impl Drop for SynCaptures {
    fn drop(&mut self) {
        for (c, _) in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn text_of(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Files in `dir` (stored uploads; no `.part` left behind).
fn stored(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `n` sessions (uploads of `file` named f0000.bin, ...), eight at a time; each must
/// succeed with aead and a verified MAC. Their `--json` reports, with their names.
fn run_sessions(lab: &Lab, file: &Path, n: usize) -> Vec<(String, Value)> {
    let next = AtomicUsize::new(0);
    std::thread::scope(|sc| {
        let workers: Vec<_> = (0..8)
            .map(|_| {
                sc.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        if k >= n {
                            return mine;
                        }
                        let name = format!("f{k:04}.bin");
                        let out = send_cmd(lab, file, &name).output().unwrap();
                        assert!(
                            out.status.success(),
                            "session {k}: {}",
                            text_of(&out.stderr)
                        );
                        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
                        assert_eq!(v["verified"], true, "{v}");
                        assert_eq!(v["mode"], "aead", "{v}");
                        mine.push((name, v));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    })
}

/// Checks every session against where its file is stored: by the client's
/// `MPTCP_FULL_INFO` subflow list, each join went to its connection's own server; by the
/// router's SYN captures, on server i's link every MP_JOIN SYN asks for its own join port
/// and every MP_CAPABLE SYN for the shared port, one per session stored there. Returns the
/// sessions per server and how many sessions had a join.
fn check_fleet(
    reports: &[(String, Value)],
    dirs: &[PathBuf],
    syns: &[Vec<(u16, u8)>],
) -> (Vec<usize>, usize) {
    // Where each session's file is: its connection's server.
    let mut server_of: BTreeMap<String, u8> = BTreeMap::new();
    for (i, d) in dirs.iter().enumerate() {
        for f in stored(d) {
            assert!(!f.ends_with(".part"), "partial file {f} in {}", d.display());
            assert!(server_of.insert(f, i as u8 + 1).is_none(), "stored twice");
        }
    }
    assert_eq!(server_of.len(), reports.len(), "every session stored once");

    // MPTCP_FULL_INFO on the client: every join went to its connection's own server.
    let mut joined = 0;
    for (name, v) in reports {
        if let Some(i) = joined_server(v) {
            assert_eq!(Some(&i), server_of.get(name), "{name}: joined s{i}: {v}");
            joined += 1;
        }
    }
    // The router's captures: on server i's link, every MP_JOIN SYN (subtype 1) asks for its
    // join port, every MP_CAPABLE SYN (subtype 0) the shared port; as many MP_CAPABLE SYNs
    // as sessions stored there (no SYN was retransmitted on an idle lab link).
    let mut load = Vec::new();
    for (k, s) in syns.iter().enumerate() {
        let i = k as u16 + 1;
        let mpc = s.iter().filter(|(_, t)| *t == 0).count();
        let joins: Vec<u16> = s.iter().filter(|(_, t)| *t == 1).map(|(p, _)| *p).collect();
        assert!(s.iter().all(|(_, t)| *t <= 1), "other SYNs on s{i}: {s:?}");
        assert!(
            s.iter().filter(|(_, t)| *t == 0).all(|(p, _)| *p == PORT),
            "MP_CAPABLE SYN to another port on s{i}"
        );
        let stray: Vec<u16> = joins
            .iter()
            .copied()
            .filter(|&p| p != FLEET_JOIN_PORT_BASE + i)
            .collect();
        assert!(
            stray.is_empty(),
            "{} of {} joins reaching s{i} were for another port (first: {:?})",
            stray.len(),
            joins.len(),
            &stray[..stray.len().min(5)]
        );
        let files = server_of.values().filter(|&&x| u16::from(x) == i).count();
        assert_eq!(mpc, files, "s{i}: {mpc} connections, {files} files");
        load.push(files);
    }
    (load, joined)
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn a_thousand_sessions_through_the_shared_address_each_join_on_its_own_server() {
    const SESSIONS: usize = 1000;
    let lab = lab_with(|c| c.servers = 3);
    let tmp = TempDir::new("fleet");
    let dirs = fleet_dirs(&tmp);
    let _servers = serve_fleet(&lab, &dirs, &[]);
    let file = tmp.join("payload.bin");
    std::fs::write(&file, random(3000, 22)).unwrap();
    let caps = SynCaptures::start(&lab, &tmp);

    let reports = run_sessions(&lab, &file, SESSIONS);
    let syns = caps.stop();
    assert_eq!(reports.len(), SESSIONS);

    let (load, joined) = check_fleet(&reports, &dirs, &syns);
    // The in-kernel PM joins the announced port from the address routing picks (the
    // trusted one here); its `subflow` endpoint on the untrusted link never joins the shared
    // address, which the servers deny: the untrusted path carries nothing.
    for (name, v) in &reports {
        assert!(
            untrusted(v).iter().all(|(_, sent)| *sent == 0),
            "{name}: the untrusted path carried data: {v}"
        );
    }
    // The hash spreads the load: each server within ±20% of a third (with 1,000 sessions
    // a third is 333 ± 15 (one standard deviation); ±20% is 4.5 of them).
    for (k, &n) in load.iter().enumerate() {
        assert!(
            (267..=400).contains(&n),
            "s{}: {n} of {SESSIONS} sessions ({load:?})",
            k + 1
        );
    }
    eprintln!(
        "fleet: {SESSIONS} sessions, per server {load:?}, {joined} with a join (every join \
         on its own server)"
    );
    assert!(joined > 0, "no session joined a second subflow");
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn a_server_out_of_the_balancer_and_stopped_ends_only_its_sessions() {
    // A slow trusted link keeps uploads running long enough to stop a server under them.
    let lab = lab_with(|c| {
        c.servers = 3;
        c.trusted_rate = Some(nena_lab::Rate::mbit(8));
    });
    let tmp = TempDir::new("fleet-stop");
    let dirs = fleet_dirs(&tmp);
    let mut servers = serve_fleet(&lab, &dirs, &["--grace", "0"]);
    let big = tmp.join("big.bin");
    std::fs::write(&big, random(2 << 20, 7)).unwrap();
    let parts = |d: &Path| stored(d).iter().filter(|f| f.ends_with(".part")).count();
    let files = || dirs.iter().map(|d| stored(d).len()).sum::<usize>();

    // Uploads until every server has one in progress (a `.part` file); each upload is
    // started once the one before it has its file on a server.
    let mut running: Vec<(String, Child)> = Vec::new();
    for k in 0..40 {
        if dirs.iter().all(|d| parts(d) > 0) {
            break;
        }
        let name = format!("up{k:02}.bin");
        let child = send_cmd(&lab, &big, &name)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        running.push((name, child));
        nena_testkit::wait_until("the upload's file", Duration::from_secs(10), || {
            files() >= running.len()
        });
    }
    assert!(
        dirs.iter().all(|d| parts(d) > 0),
        "not every server got an upload"
    );
    // Out of the balancer, then stopped (SIGTERM, no grace): its uploads in progress end.
    let s2_running = parts(&dirs[1]);
    lab.set_fleet_member(2, false).unwrap();
    let st = servers[1].terminate();
    assert!(st.success(), "s2 exit: {st}; {}", servers[1].stderr());

    let mut failed = 0;
    for (name, child) in running {
        let out = child.wait_with_output().unwrap();
        let err = text_of(&out.stderr);
        if out.status.success() {
            assert!(
                dirs.iter().any(|d| stored(d).contains(&name)),
                "{name} succeeded but is stored nowhere"
            );
        } else {
            // Only s2's sessions end, each told why at once.
            failed += 1;
            assert!(err.contains("server shutting down"), "{name}: {err}");
            assert!(
                !dirs.iter().any(|d| stored(d).contains(&name)),
                "{name} failed but was stored"
            );
        }
    }
    assert!(
        (1..=s2_running).contains(&failed),
        "{failed} uploads ended; s2 had {s2_running} under way"
    );
    assert_eq!(parts(&dirs[1]), 0, "s2 left partial files");
    assert!(
        parts(&dirs[0]) == 0 && parts(&dirs[2]) == 0,
        "s1 or s3 has an upload that never ended"
    );

    // New sessions go to the two others, and complete.
    let small = tmp.join("small.bin");
    std::fs::write(&small, random(2000, 9)).unwrap();
    for k in 0..30 {
        let name = format!("after{k:02}.bin");
        let out = send_cmd(&lab, &small, &name).output().unwrap();
        assert!(out.status.success(), "{name}: {}", text_of(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        if let Some(i) = joined_server(&v) {
            assert_ne!(i, 2, "{v}");
        }
        assert!(
            stored(&dirs[0]).contains(&name) || stored(&dirs[2]).contains(&name),
            "{name} not on s1 or s3"
        );
    }
}

/// With the userspace path manager nena opens the untrusted subflow itself, after the first
/// flight: to the port the server announced, never to the shared address (where the hash
/// would send it to a random server), so the untrusted path carries data on every server.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn with_the_userspace_path_manager_nena_joins_the_port_its_server_announced() {
    const SESSIONS: usize = 90;
    let lab = lab_with(|c| {
        c.servers = 3;
        c.pm = nena_lab::PmMode::Userspace;
    });
    let tmp = TempDir::new("fleet-user");
    let dirs = fleet_dirs(&tmp);
    let _servers = serve_fleet(&lab, &dirs, &[]);
    let file = tmp.join("payload.bin");
    std::fs::write(&file, random(200_000, 5)).unwrap();
    let caps = SynCaptures::start(&lab, &tmp);
    let reports = run_sessions(&lab, &file, SESSIONS);
    let syns = caps.stop();
    let (load, joined) = check_fleet(&reports, &dirs, &syns);
    let shared = shared();
    let mut carried = [0usize; 3];
    for (name, v) in &reports {
        for (remote, sent) in untrusted(v) {
            assert_ne!(
                remote, shared,
                "{name}: untrusted join to the shared address: {v}"
            );
            if sent > 0 {
                let port: u16 = remote.rsplit_once(':').unwrap().1.parse().unwrap();
                carried[usize::from(port - FLEET_JOIN_PORT_BASE - 1)] += 1;
            }
        }
    }
    eprintln!(
        "fleet, userspace PM: {SESSIONS} sessions, per server {load:?}, {joined} joined, \
         untrusted data on {carried:?}"
    );
    assert!(
        carried.iter().all(|&n| n > 0),
        "the untrusted path carried data on every server: {carried:?} ({load:?})"
    );
}

/// Packets the client dropped with the ADD_ADDR rule of [`hold_announcements`].
fn dropped_announcements(lab: &Lab) -> u64 {
    let out = lab
        .command(
            Host::Client,
            "nft",
            ["--json", "list", "table", "inet", "nena_test_addaddr"],
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text_of(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["nftables"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["rule"]["expr"].as_array())
        .flatten()
        .filter_map(|e| e["counter"]["packets"].as_u64())
        .sum()
}

/// The client drops every packet carrying an ADD_ADDR (MPTCP option subtype 3) until the
/// table is deleted; the servers resend an unanswered one after 1 s
/// (`net.mptcp.add_addr_timeout`), so their announcement reaches nena late, after it has
/// released the untrusted path.
fn hold_announcements(lab: &Lab) {
    for s in lab.fleet() {
        let st = lab
            .fleet_command(s.index, "sysctl", ["-qw", "net.mptcp.add_addr_timeout=1"])
            .status()
            .unwrap();
        assert!(st.success());
    }
    let mut nft = lab.command(Host::Client, "nft", ["-f", "-"]);
    nft.stdin(Stdio::piped());
    let mut child = nft.spawn().unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(
            b"table inet nena_test_addaddr {\n chain input {\n  type filter hook input priority 0;\n  \
              tcp option mptcp subtype 3 counter drop\n }\n}\n",
        )
        .unwrap();
    assert!(child.wait().unwrap().success(), "nft rule");
}

/// `nena perf` through the fleet's shared address for `secs` seconds, verbose; its
/// stdout (the JSON report) and stderr (the log) go to `tag`.json and `tag`.log in `tmp`.
fn perf_cmd(lab: &Lab, tmp: &TempDir, tag: &str, secs: &str, extra: &[&str]) -> Killed {
    let to = shared();
    let mut args = vec!["-v", "perf", "--to", &to, "--time", secs, "--interval", "0"];
    args.extend_from_slice(&PATHS);
    args.extend_from_slice(extra);
    args.push("--json");
    let file = |ext: &str| std::fs::File::create(tmp.join(&format!("{tag}.{ext}"))).unwrap();
    let mut c = lab.command(Host::Client, NENA, &args);
    c.stdin(Stdio::null())
        .stdout(file("json"))
        .stderr(file("log"));
    Killed(c.spawn().unwrap())
}

/// Waits for a [`perf_cmd`]: its report and its log; panics (with the log) if it failed.
fn finish(mut p: Killed, tmp: &TempDir, tag: &str) -> (Value, String) {
    let status = p.0.wait().unwrap();
    let log = std::fs::read_to_string(tmp.join(&format!("{tag}.log"))).unwrap();
    assert!(status.success(), "nena perf failed: {log}");
    let json = std::fs::read(tmp.join(&format!("{tag}.json"))).unwrap();
    (serde_json::from_slice(&json).unwrap(), log)
}

/// A server whose announcement comes after nena released the untrusted path (lost once on
/// the way, resent after `add_addr_timeout`) is joined where it announced, once it does:
/// the gate does not join the shared address it was told not to (the C flag), and the
/// recovery service opens the untrusted subflow to the announced port. Without recovery
/// the connection stays on its trusted path and the log says why.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn a_late_announcement_is_joined_when_it_comes() {
    let lab = lab_with(|c| {
        c.servers = 2;
        c.pm = nena_lab::PmMode::Userspace;
    });
    let tmp = TempDir::new("fleet-late");
    let dirs = fleet_dirs(&tmp);
    let _servers = serve_fleet(&lab, &dirs, &[]);
    hold_announcements(&lab);

    // Without recovery: nothing to wait with, so no untrusted subflow at all.
    let (v, log) = finish(
        perf_cmd(&lab, &tmp, "once", "1", &["--no-recovery"]),
        &tmp,
        "once",
    );
    assert!(
        log.contains("without subflow recovery nena does not wait for one"),
        "{log}"
    );
    assert_eq!(untrusted(&v), vec![], "{v}");
    assert_eq!(joined_server(&v), None);

    let before = dropped_announcements(&lab);
    assert!(before >= 1, "the first run's ADD_ADDR was dropped");
    let run = perf_cmd(&lab, &tmp, "late", "4", &[]);
    // Its server's ADD_ADDR dropped (the handshake and release are done by then, within
    // the first milliseconds), then let the resent one through.
    nena_testkit::wait_until(
        "the second run's ADD_ADDR dropped at the client",
        Duration::from_secs(10),
        || dropped_announcements(&lab) > before,
    );
    let st = lab
        .command(
            Host::Client,
            "nft",
            ["delete", "table", "inet", "nena_test_addaddr"],
        )
        .status()
        .unwrap();
    assert!(st.success());
    let (v, log) = finish(run, &tmp, "late");
    assert!(
        log.contains("has announced no other address yet"),
        "the release came before the announcement: {log}"
    );
    assert!(
        log.contains("the address the server announced"),
        "the recovery service opened the join: {log}"
    );
    let joins = untrusted(&v);
    assert_eq!(joins.len(), 1, "{v}");
    let (remote, sent) = &joins[0];
    assert_ne!(remote, &shared(), "{v}");
    assert!(*sent > 0, "the late join carried data: {v}");
    let i = joined_server(&v).expect("joined a fleet port");
    assert!(i == 1 || i == 2, "{v}");
}
