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
            "--mode",
            "kato",
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
    assert_eq!(
        report.verified,
        1000,
        "{report:?}\nproxy client: {}\nproxy server: {}",
        pc.stderr(),
        ps.stderr()
    );
    // Neither proxy logged a failed session.
    assert!(!pc.stderr().contains("WARN"), "{}", pc.stderr());
    assert!(!ps.stderr().contains("WARN"), "{}", ps.stderr());
}
