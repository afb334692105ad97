//! Datagrams through nena (`nena run --udp carry`, op 7), the production code of both ends
//! over the in-memory network (`testing::net`): `nena run`'s relay
//! (`proxy::carry::relay::Relay`) opens one datagram session per application socket with
//! `conn::connect` over a `MemoryNet`; the proxy server (`run_server_on`) sends what its
//! `--allow` permits from a UDP socket of the session's own, here to an echo on loopback (a
//! rule naming it: loopback is guarded). The destination lookup stands in for `nena run`'s
//! BPF map. No namespace or root; what needs the kernel (the cgroup's programs, the datagram
//! plane's UDP on each path) stays in crates/cli/tests/cli/transfer_run_dns_udp.rs and
//! transfer_udp_plane.rs.

use nena_proto::Mode;
use nena_transport::proxy::carry::relay::Relay;
use nena_transport::proxy::listen::ProxyLimits;
use nena_transport::proxy::server::{run_server_on, PlaneSetting};
use nena_transport::proxy::socks::AllowList;
use nena_transport::proxy::Egress;
use nena_transport::testing::net::{accept_options, MemoryNet};
use nena_transport::testing::pair::{in_band_modes, Dir, Targets};
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::UdpSocket;

const SERVER: &str = "198.18.3.2:7100";

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// A UDP echo on loopback: every datagram back to its sender.
async fn echo() -> SocketAddr {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let at = sock.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = [0u8; 2048];
        while let Ok((n, peer)) = sock.recv_from(&mut buf).await {
            let _ = sock.send_to(&buf[..n], peer).await;
        }
    });
    at
}

/// The proxy server on the memory net with `allow`, its datagram plane off.
fn proxy_server(net: &Arc<MemoryNet>, allow: AllowList) {
    let accept = accept_options();
    let limits = ProxyLimits {
        max_sessions: 16,
        max_connecting: 4,
        grace: Duration::from_secs(1),
        token: None,
        metrics: None,
        datagram_plane: false,
    };
    let listener = net.listen(addr(SERVER));
    tokio::spawn(async move {
        run_server_on(
            listener,
            Egress::Allow(allow),
            accept,
            limits,
            PlaneSetting {
                server: None,
                off: true,
            },
            Targets::default(),
        )
        .await
        .unwrap()
    });
}

/// `nena run`'s relay on loopback toward the proxy server over `net` in `mode`, every
/// application socket's datagrams recorded as sent to `dst`; returns the relay's address.
async fn relay(net: &Arc<MemoryNet>, mode: Mode, dst: SocketAddr) -> (SocketAddr, Arc<Relay>) {
    let opts = net.options(addr(SERVER), vec![mode]);
    let relay = Arc::new(Relay::new(
        Arc::new(opts),
        Arc::new(tokio::sync::Semaphore::new(4)),
        None,
        Arc::new(move |_| Some(dst)),
    ));
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let at = sock.local_addr().unwrap();
    tokio::spawn(relay.clone().serve(sock));
    (at, relay)
}

/// Sends `msg` from `app` to the relay until its echo comes back (a datagram may be
/// dropped while the flow's session opens: the queue is bounded), at most 10 s.
async fn ping(app: &UdpSocket, relay: SocketAddr, msg: &[u8]) -> Vec<u8> {
    let mut buf = [0u8; 2048];
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            app.send_to(msg, relay).await.unwrap();
            // Each try waits for an answer as long as a session's opening in memory takes.
            if let Ok(Ok((n, from))) =
                tokio::time::timeout(Duration::from_millis(500), app.recv_from(&mut buf)).await
            {
                assert_eq!(from, relay, "replies come from the relay's socket");
                return buf[..n].to_vec();
            }
        }
    })
    .await
    .expect("an echo within 10 s")
}

/// An application's datagrams reach the permitted destination through nena and its
/// replies come back, in every in-band mode; two application sockets get a session each; in
/// the cryptographic modes and kato the payload never crosses the wire as it is (it does in
/// plain: the check can fail).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datagrams_reach_a_permitted_destination_and_come_back_in_every_mode() {
    for mode in in_band_modes() {
        let dst = echo().await;
        let net = MemoryNet::new();
        proxy_server(&net, AllowList(vec![dst.to_string().parse().unwrap()]));
        let (at, relay) = relay(&net, mode, dst).await;
        let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let msg = b"a datagram of the application, 0123456789abcdef";
        assert_eq!(ping(&a, at, msg).await, msg, "{mode}");
        assert_eq!(
            ping(&b, at, b"and another's").await,
            b"and another's",
            "{mode}"
        );
        assert_eq!(
            relay.stats.sessions.load(Relaxed),
            2,
            "{mode}: one per socket"
        );
        let taps = net.taps();
        assert_eq!(taps.len(), 2, "{mode}");
        let clear = taps[0]
            .crossed(Dir::ToServer)
            .windows(16)
            .any(|w| w == b"0123456789abcdef");
        assert_eq!(
            clear,
            mode == Mode::Plain,
            "{mode}: the payload in the clear"
        );
    }
}
