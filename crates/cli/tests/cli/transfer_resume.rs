//! Resumed sessions through the kernel (root): a proxy pair in the lab, each application
//! connection its own nena session. After the first (a full handshake that grants tickets)
//! the proxy client's sessions resume; the proxy server restarted (its tickets gone, as after
//! a crash or an upgrade) refuses the next one's ticket, and that connection still goes
//! through, on a full handshake made in the same opening; the sessions after it resume again.
//! Every echo comes back byte-exact.

use crate::harness::*;
use nena_lab::Host;
use nena_transport::testing;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

/// One application connection through the proxy client's entry: `payload` there and back.
fn through(lab: &nena_lab::Lab, entry: SocketAddr, payload: Vec<u8>) {
    let back = lab
        .run_in(Host::Client, move || {
            let mut s = std::net::TcpStream::connect(entry).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            s.write_all(&payload).unwrap();
            s.shutdown(std::net::Shutdown::Write).unwrap();
            let mut back = Vec::new();
            s.read_to_end(&mut back).unwrap();
            (back == payload, back.len())
        })
        .unwrap();
    assert!(back.0, "the echo came back altered ({} bytes)", back.1);
}

/// The proxy server: `nena -v proxy server --listen LISTEN --forward TARGET`.
fn proxy_server(lab: &nena_lab::Lab, listen: &str, target: SocketAddr) -> Proc {
    let target = target.to_string();
    spawn_listening(
        lab,
        Host::Server,
        &[
            "-v",
            "proxy",
            "server",
            "--listen",
            listen,
            "--forward",
            &target,
        ],
    )
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn a_proxy_clients_sessions_resume_and_a_restarted_server_gets_full_handshakes() {
    let lab = lab();
    let target: SocketAddr = "127.0.0.1:7360".parse().unwrap();
    let _echo = echo_server(&lab, target);
    let listen = server(&lab, 7361);
    let entry: SocketAddr = "127.0.0.1:7362".parse().unwrap();
    let mut ps = proxy_server(&lab, &listen, target);
    let entry_s = entry.to_string();
    // A session per connection (`--no-reuse`): each one's handshake is the subject.
    let mut args = vec![
        "-v",
        "proxy",
        "client",
        "--listen",
        &entry_s,
        "--to",
        &listen,
        "--no-reuse",
    ];
    args.extend_from_slice(&PATHS);
    let pc = spawn_listening(&lab, Host::Client, &args);

    for i in 0..3 {
        through(&lab, entry, testing::session_payload(i, 100_000));
    }
    // The first session was a full handshake, the two after it resumed.
    ps.wait_stderr_n("mode aead", 3, Duration::from_secs(10));
    let log = ps.stderr();
    assert_eq!(log.matches(", resumed").count(), 2, "{log}");
    assert!(ps.stop_with(libc::SIGTERM).success());

    // Restarted: its tickets are gone. The next connection is still carried (its opening
    // falls back to a full handshake), and the ones after it resume again.
    let mut ps = proxy_server(&lab, &listen, target);
    for i in 3..6 {
        through(&lab, entry, testing::session_payload(i, 100_000));
    }
    ps.wait_stderr_n("mode aead", 3, Duration::from_secs(10));
    let log = ps.stderr();
    assert_eq!(log.matches(", resumed").count(), 2, "{log}");
    assert!(log.contains("resumption refused"), "{log}");
    pc.wait_stderr(
        "a full handshake on a new connection",
        Duration::from_secs(5),
    );
    assert!(ps.stop_with(libc::SIGTERM).success());
}
