//! `nena proxy client` and `nena proxy server`, the production code of both ends and of
//! their accept loops, over the in-memory network (`testing::net`): applications connect to
//! the proxy client on loopback TCP (no root needed), the proxy client dials the proxy
//! server through a `MemoryNet`, the proxy server reaches in-memory targets
//! (`testing::pair::Targets`, an echo that records what it received). More of both ends in
//! memory: net_forward.rs, net_socks.rs, net_tamper.rs. What needs the kernel
//! (subflows, the gate, the paths, the datagram plane, a process stopped by a signal) stays
//! in the lab tests of crates/cli/tests/cli/transfer_proxy.rs and transfer_socks_udp.rs.

use nena_proto::Mode;
use nena_transport::proxy::client::{run_client_with, Entry};
use nena_transport::proxy::listen::ProxyLimits;
use nena_transport::proxy::server::{run_server_on, PlaneSetting};
use nena_transport::proxy::socks::{AllowList, Rep};
use nena_transport::proxy::Egress;
use nena_transport::testing::net::{accept_options, MemoryNet};
use nena_transport::testing::pair::{in_band_modes, Dir, Targets};
use nena_transport::wire::AccessToken;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const SERVER: &str = "198.18.3.2:7100";

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn limits(token: Option<AccessToken>) -> ProxyLimits {
    ProxyLimits {
        max_sessions: 16,
        max_connecting: 4,
        grace: Duration::from_secs(1),
        token,
        metrics: None,
        datagram_plane: false,
    }
}

/// The proxy server on the memory network at [`SERVER`] with `egress` and `token`, its
/// targets in memory; returns them.
fn proxy_server(net: &Arc<MemoryNet>, egress: Egress, token: Option<AccessToken>) -> Targets {
    let targets = Targets::default();
    let accept = accept_options();
    let listener = net.listen(addr(SERVER));
    let t = targets.clone();
    tokio::spawn(async move {
        run_server_on(
            listener,
            egress,
            accept,
            limits(token),
            PlaneSetting::default(),
            t,
        )
        .await
        .unwrap()
    });
    targets
}

/// The proxy client on loopback (an ephemeral port) with `entry`, dialing the proxy server
/// through `net` offering `mode`; returns the address applications connect to.
async fn proxy_client(
    net: &Arc<MemoryNet>,
    entry: Entry,
    mode: Mode,
    token: Option<AccessToken>,
) -> SocketAddr {
    let mut opts = net.options(addr(SERVER), vec![mode]);
    opts.token = token;
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        run_client_with(addr("127.0.0.1:0"), entry, opts, limits(None), |a| {
            let _ = tx.send(a);
        })
        .await
        .unwrap()
    });
    rx.await.expect("the proxy client's listener")
}

/// An application's bytes go through both proxies to the `--forward` target and its echo
/// comes back byte-exact, with the half-close passed on, in every in-band mode; in the
/// cryptographic modes and kato no 64-byte run of them crosses the wire as it is, in plain it
/// does (the check can fail).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_reaches_the_forward_target_through_both_proxies() {
    let target = addr("198.18.3.2:8000");
    for mode in in_band_modes() {
        let net = MemoryNet::new();
        let targets = proxy_server(&net, Egress::Forward(target), None);
        let front = proxy_client(&net, Entry::Plain, mode, None).await;
        let msg: Vec<u8> = (0..150_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
            .collect();
        let app = TcpStream::connect(front).await.unwrap();
        let (mut r, mut w) = app.into_split();
        let send = async {
            w.write_all(&msg).await.unwrap();
            w.shutdown().await.unwrap();
        };
        let mut back = Vec::new();
        let ((), got) = tokio::join!(send, r.read_to_end(&mut back));
        got.unwrap();
        assert_eq!(back, msg, "{mode}: the echo");
        let conns = targets.take();
        assert_eq!(conns.len(), 1, "{mode}");
        assert_eq!(conns[0].addr, target);
        let received = conns.into_iter().next().unwrap().received.await.unwrap();
        assert_eq!(received, msg, "{mode}: what the target received");
        let taps = net.taps();
        assert_eq!(taps.len(), 1, "{mode}: one session");
        for dir in [Dir::ToServer, Dir::ToClient] {
            let crossed = taps[0].crossed(dir);
            let clear = msg
                .chunks(64)
                .take(200)
                .any(|run| crossed.windows(64).any(|w| w == run));
            assert_eq!(clear, mode == Mode::Plain, "{mode} {dir:?}: in the clear");
        }
    }
}

/// SOCKS5 through both proxies: a destination `--allow` permits is connected and relayed; one
/// it does not is refused with the SOCKS reply "not allowed" and never connected; a session
/// without the proxy server's access token is refused before anything is connected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socks_through_both_proxies_obeys_allow_and_the_token() {
    let token = AccessToken::new(b"a token of this test".to_vec()).unwrap();
    let net = MemoryNet::new();
    let allow = AllowList(vec!["198.18.3.2:8000".parse().unwrap()]);
    let targets = proxy_server(&net, Egress::Allow(allow), Some(token.clone()));
    let front = proxy_client(&net, Entry::Socks5 { users: None }, Mode::Aead, Some(token)).await;
    // Allowed.
    let (mut s, rep) = socks_connect(front, [198, 18, 3, 2], 8000).await;
    assert_eq!(rep, Rep::Succeeded as u8);
    s.write_all(b"ping through socks").await.unwrap();
    let mut back = [0u8; 18];
    s.read_exact(&mut back).await.unwrap();
    assert_eq!(&back, b"ping through socks");
    drop(s);
    // Not allowed: refused, never connected.
    let (_s, rep) = socks_connect(front, [198, 18, 3, 2], 9000).await;
    assert_eq!(rep, Rep::NotAllowed as u8);
    assert_eq!(targets.connected(), vec![addr("198.18.3.2:8000")]);
    // Without the token: the proxy server refuses the session.
    let untokened = proxy_client(&net, Entry::Socks5 { users: None }, Mode::Aead, None).await;
    let (_s, rep) = socks_connect(untokened, [198, 18, 3, 2], 8000).await;
    assert_ne!(rep, Rep::Succeeded as u8);
    assert_eq!(targets.connected().len(), 1, "nothing more connected");
}

/// A SOCKS5 CONNECT (no authentication) to `ip:port` through the proxy client at `front`:
/// the connection and the reply's code.
async fn socks_connect(front: SocketAddr, ip: [u8; 4], port: u16) -> (TcpStream, u8) {
    let mut s = TcpStream::connect(front).await.unwrap();
    s.write_all(&[5, 1, 0]).await.unwrap();
    let mut m = [0u8; 2];
    s.read_exact(&mut m).await.unwrap();
    assert_eq!(m, [5, 0], "no authentication");
    let mut req = vec![5, 1, 0, 1];
    req.extend_from_slice(&ip);
    req.extend_from_slice(&port.to_be_bytes());
    s.write_all(&req).await.unwrap();
    let mut rep = [0u8; 10];
    tokio::time::timeout(Duration::from_secs(10), s.read_exact(&mut rep))
        .await
        .expect("a SOCKS reply within 10 s")
        .unwrap();
    (s, rep[1])
}
