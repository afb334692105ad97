//! `nena proxy client` / `nena proxy server` through the lab (root): 1,000 concurrent
//! sessions, each echoed byte-exact through both proxies with half-close.
mod transfer_common;

use nena_lab::Host;
use nena_transport::testing;
use std::net::SocketAddr;
use std::time::Duration;
use transfer_common::*;

#[test]
fn thousand_concurrent_proxy_sessions_all_verify() {
    let lab = lab();
    // Target: an echo server on the server host's loopback.
    let target: SocketAddr = "127.0.0.1:7300".parse().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let _echo = lab.spawn_in(Host::Server, move || {
        testing::echo_server(target, Duration::from_secs(120), move || {
            tx.send(()).unwrap()
        })
    });
    rx.recv_timeout(Duration::from_secs(5)).unwrap();

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
    // All 1,000 sessions had carried data end to end while every one of them was open.
    assert_eq!(
        report.open_at_once,
        1000,
        "{report:?}\nproxy client: {}\nproxy server: {}",
        pc.stderr(),
        ps.stderr()
    );
    assert_eq!(
        report.verified,
        1000,
        "{report:?}\nproxy client: {}\nproxy server: {}",
        pc.stderr(),
        ps.stderr()
    );
    // Neither proxy logged a failed session (a connect retried because nena-mptcp could not
    // verify the first flight under the burst is allowed: it is a new connection).
    let failures = |log: String| -> Vec<String> {
        log.lines()
            .filter(|l| l.contains("WARN") && !l.contains("retrying with a new connection"))
            .map(str::to_string)
            .collect()
    };
    assert!(failures(pc.stderr()).is_empty(), "{}", pc.stderr());
    // Each retried connect was dropped by the client, which the server may log once.
    let retries = pc
        .stderr()
        .matches("retrying with a new connection")
        .count();
    assert!(failures(ps.stderr()).len() <= retries, "{}", ps.stderr());
}
