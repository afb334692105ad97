//! `nena proxy client` / `nena proxy server` through the lab (root): 1,000 concurrent
//! sessions, each echoed byte-exact through both proxies with half-close (the server on two
//! threads, the client on its default one, so both runtimes carry the load), here for the
//! kernel's misplaced bytes (docs/investigations/kernel-41-bytes) that aead must refuse; a
//! proxy process stopped by a signal. The proxies' protocol (the access token, clean ends)
//! runs without root over the in-memory network: crates/transport/tests/net_forward.rs.

use crate::harness::*;
use nena_lab::Host;
use nena_transport::testing;
use std::net::SocketAddr;
use std::time::Duration;

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn thousand_concurrent_proxy_sessions_all_verify() {
    let lab = lab();
    let _captures = captures_if_asked(&lab);
    // Target: an echo server on the server host's loopback.
    let target: SocketAddr = "127.0.0.1:7300".parse().unwrap();
    let _echo = echo_server(&lab, target);

    let listen = server(&lab, 7301);
    let ps = spawn_listening(
        &lab,
        Host::Server,
        &[
            "proxy",
            "server",
            "--listen",
            &listen,
            "--forward",
            "127.0.0.1:7300",
            "--threads",
            "2",
        ],
    );
    let mut args = vec![
        "proxy",
        "client",
        "--listen",
        "127.0.0.1:7302",
        "--to",
        &listen,
        "--timeout",
        "30",
    ];
    args.extend_from_slice(&PATHS);
    let pc = spawn_listening(&lab, Host::Client, &args);

    let entry: SocketAddr = "127.0.0.1:7302".parse().unwrap();
    let report = lab
        .run_in(Host::Client, move || {
            testing::load(entry, 1000, 16 * 1024, Duration::from_secs(90))
        })
        .unwrap()
        .unwrap();
    assert_eq!(report.concurrent, 1000, "{report:?}");
    let (pc_log, ps_log) = (pc.stderr(), ps.stderr());
    // The one failure tolerated is the receiving kernel's misplaced first bytes of a new subflow
    // (docs/investigations/kernel-41-bytes): rarely (once in 103 runs on 2026-11-23, 7 in 80
    // before), the server's MPTCP puts them 41 bytes early although their mapping on the wire is
    // right (server-side capture), and aead refuses the record. In a session's opening (record 0:
    // the open request and the application's first bytes) the server tells the client, which opens
    // a new session: the application sees nothing. Later (none in 60 runs since the opening carries
    // the first bytes) the session aborts: such an abort must deliver no wrong byte and stay rare;
    // every other session verifies.
    // NENA_TEST_CAPTURE_DIR=DIR captures the three links.
    let aborts: Vec<&str> = ps_log
        .lines()
        .filter(|l| l.contains("integrity check failed"))
        .collect();
    let (retried, aborts): (Vec<&str>, Vec<&str>) = aborts
        .into_iter()
        .partition(|l| l.contains("the client was told and may retry"));
    assert!(
        retried
            .iter()
            .all(|l| l.contains("(record 0 of the peer's stream")),
        "openings retried for another reason: {retried:#?}"
    );
    assert!(
        aborts.len() <= 3 && aborts.iter().all(|l| l.contains(" of the peer's stream")),
        "integrity aborts other than the kernel's misplaced bytes: {aborts:#?}"
    );
    for a in retried.iter().chain(&aborts) {
        eprintln!("tolerated (docs/investigations/kernel-41-bytes): {a}");
    }
    let aborts = aborts.len();
    assert!(
        report.errors.iter().all(|e| !e.contains("echo differs")),
        "wrong bytes reached the application: {report:?}"
    );
    // All other sessions had carried data end to end while every one of them was open.
    assert!(
        report.open_at_once + aborts >= 1000,
        "{report:?}\nproxy client: {pc_log}\nproxy server: {ps_log}"
    );
    assert_eq!(
        report.verified + aborts,
        1000,
        "{report:?}\nproxy client: {pc_log}\nproxy server: {ps_log}"
    );
    // Neither proxy logged another failed session (a connect retried because nena-mptcp could
    // not verify the first flight under the burst is allowed: it is a new connection).
    let failures = |log: &str| -> Vec<String> {
        log.lines()
            .filter(|l| {
                l.contains("WARN")
                    && !l.contains("retrying with a new connection")
                    && !l.contains("integrity check failed")
                    && !l.contains("trying again with a new session")
            })
            .map(str::to_string)
            .collect()
    };
    // A session aborted by the server's integrity check fails on the client too.
    assert!(failures(&pc_log).len() <= aborts, "{pc_log}");
    // Each retried connect was dropped by the client, which the server may log once.
    let retries = pc_log.matches("retrying with a new connection").count();
    assert!(failures(&ps_log).len() <= retries, "{ps_log}");
}

/// With `NENA_TEST_CAPTURE_DIR` set: captures of the three links (first 200 bytes of every
/// TCP packet, enough for the MPTCP options) into that directory, stopped when dropped. For
/// investigating a failure (docs/investigations/kernel-41-bytes); off by default.
fn captures_if_asked(lab: &nena_lab::Lab) -> Vec<nena_lab::Capture> {
    let Some(dir) = std::env::var_os("NENA_TEST_CAPTURE_DIR") else {
        return Vec::new();
    };
    let dir = std::path::PathBuf::from(dir);
    std::fs::create_dir_all(&dir).unwrap();
    let opts = nena_lab::CaptureOptions {
        snaplen: Some(200),
        filter: Some("tcp".into()),
        ..Default::default()
    };
    [
        (nena_lab::Link::Server, "server"),
        (nena_lab::Link::Trusted, "trusted"),
        (nena_lab::Link::Untrusted, "untrusted"),
    ]
    .into_iter()
    .map(|(link, name)| {
        lab.capture_with(link, &dir.join(format!("{name}.pcap")), &opts)
            .unwrap()
    })
    .collect()
}

/// `nena -v proxy server --listen LISTEN --forward TARGET SERVER_EXTRA...` in the server
/// host and `nena -v proxy client --listen ENTRY --to LISTEN CLIENT_EXTRA...` over both
/// paths in the client host, each returned once it listens.
fn forwarding_proxies(
    lab: &nena_lab::Lab,
    listen: &str,
    target: SocketAddr,
    entry: SocketAddr,
    server_extra: &[&str],
    client_extra: &[&str],
) -> (Proc, Proc) {
    let target = target.to_string();
    let mut args = vec![
        "-v",
        "proxy",
        "server",
        "--listen",
        listen,
        "--forward",
        &target,
    ];
    args.extend_from_slice(server_extra);
    let ps = spawn_listening(lab, Host::Server, &args);
    let entry = entry.to_string();
    let mut args = vec!["-v", "proxy", "client", "--listen", &entry, "--to", listen];
    args.extend_from_slice(&PATHS);
    args.extend_from_slice(client_extra);
    (ps, spawn_listening(lab, Host::Client, &args))
}

/// A plain target in the server host for one connection: reads until the client's end (or
/// an error), then, after `answer_after`, answers `got N bytes` and closes. Reports how its
/// read ended.
fn slow_target(
    lab: &nena_lab::Lab,
    addr: SocketAddr,
    answer_after: Duration,
) -> std::sync::mpsc::Receiver<std::io::Result<usize>> {
    use std::io::{Read, Write};
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (tx, rx) = std::sync::mpsc::channel();
    lab.spawn_in(Host::Server, move || {
        let l = std::net::TcpListener::bind(addr).unwrap();
        ready_tx.send(()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut got = Vec::new();
        let r = s.read_to_end(&mut got);
        if r.is_ok() {
            // sleep: the target's late answer is the test's subject
            std::thread::sleep(answer_after);
            let _ = s.write_all(format!("got {} bytes", got.len()).as_bytes());
        }
        let _ = tx.send(r);
    });
    ready_rx.recv_timeout(Duration::from_secs(5)).unwrap();
    rx
}

/// Stopping either proxy (SIGTERM, SIGINT) in the middle of a session: the proxy exits 0
/// within a second of the signal (no --grace), and the session is reset on both sides, so
/// that neither the application nor the target takes the cut stream for a complete one; in
/// `aead` the other proxy is told why first (its log: "the peer aborted the session: it is
/// shutting down"). With --grace, a session that ends within it is carried to its end first.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn stopping_a_proxy_resets_its_sessions_or_lets_them_finish_within_the_grace() {
    use std::io::{Read, Write};
    let lab = lab();
    // In `stream` mode a clean close of the nena side would end the other proxy's plain side
    // cleanly too (no closing record to miss, as `aead` has): only the reset of the nena
    // socket keeps the cut from looking complete there.
    for (round, (stopped, sig, grace, mode)) in [
        ("server", libc::SIGTERM, "0", "stream"),
        ("client", libc::SIGINT, "0", "aead"),
        ("client", libc::SIGTERM, "0", "stream"),
        ("server", libc::SIGINT, "10", "aead"),
        ("server", libc::SIGTERM, "0", "aead"),
    ]
    .into_iter()
    .enumerate()
    {
        let port = 7320 + 3 * round as u16;
        let target: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        // With a grace period the target answers a second after the client's end: the
        // session is still running when the signal comes.
        let graceful = grace != "0";
        let saw = slow_target(&lab, target, Duration::from_secs(1));
        let listen = server(&lab, port + 1);
        let server_grace = if stopped == "server" { grace } else { "0" };
        let entry: SocketAddr = format!("127.0.0.1:{}", port + 2).parse().unwrap();
        let (mut ps, mut pc) = forwarding_proxies(
            &lab,
            &listen,
            target,
            entry,
            &["--grace", server_grace],
            &["--mode", mode],
        );
        let payload = testing::session_payload(round, 1 << 20);
        let len = payload.len();
        let app = lab.spawn_in(Host::Client, move || {
            let mut s = std::net::TcpStream::connect(entry).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            s.write_all(&payload).unwrap();
            if graceful {
                s.shutdown(std::net::Shutdown::Write).unwrap();
            }
            let mut answer = Vec::new();
            s.read_to_end(&mut answer).map(|_| answer)
        });
        // The session is up on the server side (its mode logged) before the signal.
        ps.wait_stderr(&format!("mode {mode}"), Duration::from_secs(20));
        let proc = if stopped == "server" {
            &mut ps
        } else {
            &mut pc
        };
        let t0 = std::time::Instant::now();
        let status = proc.stop_with(sig);
        let took = t0.elapsed();
        let log = proc.stderr();
        assert!(
            status.success(),
            "proxy {stopped} after signal {sig}: {status}\n{log}"
        );
        let answer = app
            .join()
            .unwrap()
            .expect("the application thread ran in the lab");
        if graceful {
            assert!(
                took < Duration::from_secs(5),
                "{took:?} with a session of about 1 s"
            );
            assert_eq!(
                answer.expect("the session finished within the grace period"),
                format!("got {len} bytes").as_bytes()
            );
            assert!(log.contains("in progress"), "{log}");
        } else {
            assert!(
                took < Duration::from_secs(1),
                "{stopped} took {took:?} to exit\n{log}"
            );
            let err = answer.expect_err("a cut session must not end cleanly for the app");
            assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset, "{err}");
            let t = saw.recv_timeout(Duration::from_secs(20)).unwrap();
            let err = t.expect_err("a cut session must not end cleanly for the target");
            assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset, "{err}");
            assert!(log.contains("aborting 1 session"), "{log}");
            // aead tells the other proxy why, in an authenticated abort record; stream has
            // no room for a message: the reset alone.
            if mode == "aead" {
                let other = if stopped == "server" { &pc } else { &ps };
                other.wait_stderr(
                    "the peer aborted the session: it is shutting down",
                    Duration::from_secs(10),
                );
            }
        }
    }
}
