//! SOCKS5 UDP ASSOCIATE through `nena proxy client --socks5` and `nena proxy server
//! --allow`, the production code of both ends and of their accept loops over the in-memory
//! network (`testing::net`): a SOCKS5 UDP client written here talks to the proxy client on
//! loopback (TCP for the control connection, UDP for the relay: no root), the proxy client
//! opens the association's datagram session through a `MemoryNet`, the proxy server sends
//! what `--allow` permits to UDP echoes on loopback. A payload's echo round trip; a datagram
//! to an echo `--allow` does not permit gets no answer and the server logs it as not
//! permitted; datagrams from another socket, fragments (FRAG 1) and domain-name destinations
//! are dropped by the proxy client with a line saying why; the counts of both ends; closing
//! the control connection ends the association (its UDP port closed: the next datagram gets
//! "port unreachable"); with `--socks-user-file` UDP ASSOCIATE needs the password too. The
//! datagram plane is off here (its sealed UDP goes on each path: the lab's).
//!
//! Moved here from the lab tests `transfer_socks_udp.rs::socks5_udp_associate_round_trip_allow_and_end`
//! and `socks5_udp_associate_keeps_username_and_password`; what needs the kernel stays
//! there: the captures of both client links (no UDP but the datagram plane's, no 16-byte
//! run of the payload), and the proxy client's stop by SIGTERM ending an association.

mod logs;

use nena_proto::Mode;
use nena_transport::proxy::client::{run_client_with, Entry};
use nena_transport::proxy::listen::ProxyLimits;
use nena_transport::proxy::server::{run_server_on, PlaneSetting};
use nena_transport::proxy::socks::{AllowList, Users};
use nena_transport::proxy::Egress;
use nena_transport::testing::net::{accept_options, MemoryNet};
use nena_transport::testing::pair::{Dir, Targets};
use std::net::{SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

/// How long the test waits for an event at most.
const WAIT: Duration = Duration::from_secs(20);

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// A UDP echo on loopback: every datagram back to its sender.
async fn echo() -> SocketAddrV4 {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let SocketAddr::V4(at) = sock.local_addr().unwrap() else {
        unreachable!()
    };
    tokio::spawn(async move {
        let mut buf = [0u8; 2048];
        while let Ok((n, peer)) = sock.recv_from(&mut buf).await {
            let _ = sock.send_to(&buf[..n], peer).await;
        }
    });
    at
}

fn limits() -> ProxyLimits {
    ProxyLimits {
        max_sessions: 16,
        max_connecting: 4,
        grace: Duration::ZERO,
        token: None,
        metrics: None,
        datagram_plane: false,
    }
}

/// `nena proxy server --allow ECHO` on the memory net at `at`, its datagram plane off.
fn proxy_server(net: &Arc<MemoryNet>, at: SocketAddr, echo: SocketAddrV4) {
    let accept = accept_options();
    let allow = AllowList(vec![format!("{}/32:{}", echo.ip(), echo.port())
        .parse()
        .unwrap()]);
    let listener = net.listen(at);
    tokio::spawn(async move {
        run_server_on(
            listener,
            Egress::Allow(allow),
            accept,
            limits(),
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

/// `nena proxy client --socks5 127.0.0.1:0 --to AT` (with `users`: `--socks-user-file`),
/// aead, the datagram plane off; returns its SOCKS entry.
async fn socks_client(net: &Arc<MemoryNet>, at: SocketAddr, users: Option<Users>) -> SocketAddr {
    let mut opts = net.options(at, vec![Mode::Aead]);
    opts.datagram.plane = false;
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        run_client_with(
            addr("127.0.0.1:0"),
            Entry::Socks5 { users },
            opts,
            limits(),
            |a| {
                let _ = tx.send(a);
            },
        )
        .await
        .unwrap()
    });
    rx.await.expect("the proxy client's listener")
}

/// SOCKS5 UDP ASSOCIATE on a new control connection to `entry` (with `auth`, RFC 1929
/// username/password): the reply code and, when it succeeded, the relay's address
/// (BND.ADDR, BND.PORT) and the control connection.
async fn associate(
    entry: SocketAddr,
    auth: Option<(&str, &str)>,
) -> (u8, Option<(SocketAddr, TcpStream)>) {
    let mut s = TcpStream::connect(entry).await.unwrap();
    let method = if auth.is_some() { 2 } else { 0 };
    s.write_all(&[5, 1, method]).await.unwrap();
    let mut m = [0u8; 2];
    s.read_exact(&mut m).await.unwrap();
    if m[1] != method {
        return (m[1], None);
    }
    if let Some((u, p)) = auth {
        let mut a = vec![1, u.len() as u8];
        a.extend_from_slice(u.as_bytes());
        a.push(p.len() as u8);
        a.extend_from_slice(p.as_bytes());
        s.write_all(&a).await.unwrap();
        s.read_exact(&mut m).await.unwrap();
        assert_eq!(m, [1, 0], "authentication");
    }
    // DST.ADDR and DST.PORT zero: the client does not say where it will send from.
    s.write_all(&[5, 3, 0, 1, 0, 0, 0, 0, 0, 0]).await.unwrap();
    let mut r = [0u8; 10];
    s.read_exact(&mut r).await.unwrap();
    assert_eq!(
        (r[0], r[2], r[3]),
        (5, 0, 1),
        "reply header (IPv4 BND.ADDR)"
    );
    if r[1] != 0 {
        return (r[1], None);
    }
    let bnd = SocketAddr::from(([r[4], r[5], r[6], r[7]], u16::from_be_bytes([r[8], r[9]])));
    (0, Some((bnd, s)))
}

/// A datagram for the association: `RSV RSV FRAG ATYP(IPv4) DST.ADDR DST.PORT DATA`.
fn to(dst: SocketAddrV4, frag: u8, data: &[u8]) -> Vec<u8> {
    let mut d = vec![0, 0, frag, 1];
    d.extend_from_slice(&dst.ip().octets());
    d.extend_from_slice(&dst.port().to_be_bytes());
    d.extend_from_slice(data);
    d
}

/// A UDP socket on loopback, connected to the association's relay.
async fn client_socket(relay: SocketAddr) -> UdpSocket {
    let u = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    u.connect(relay).await.unwrap();
    u
}

/// One datagram received on `udp` within [`WAIT`].
async fn recv(udp: &UdpSocket) -> Vec<u8> {
    let mut b = vec![0u8; 65535];
    let n = tokio::time::timeout(WAIT, udp.recv(&mut b))
        .await
        .expect("a datagram back")
        .unwrap();
    b.truncate(n);
    b
}

fn payload(n: usize, seed: u32) -> Vec<u8> {
    (0..n as u32)
        .map(|i| (i.wrapping_add(seed).wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socks5_udp_associate_round_trip_allow_and_end() {
    logs::keep();
    let (echo, other) = (echo().await, echo().await);
    let net = MemoryNet::new();
    let at = addr("198.18.3.2:7441");
    proxy_server(&net, at, echo);
    let entry = socks_client(&net, at, None).await;

    let (code, assoc) = associate(entry, None).await;
    assert_eq!(code, 0, "UDP ASSOCIATE refused");
    let (relay, control) = assoc.unwrap();
    assert_eq!(
        relay.ip().to_string(),
        "127.0.0.1",
        "BND.ADDR: the listener's"
    );
    assert_ne!(relay.port(), 0);
    let udp = client_socket(relay).await;

    // Outside --allow first (it opens the session): the server drops it and says so.
    udp.send(&to(other, 0, b"for the echo outside --allow"))
        .await
        .unwrap();
    logs::wait_for(
        &[&format!(
            "datagram to {other}: not permitted by --allow; dropped"
        )],
        WAIT,
    )
    .await;
    // The echo round trip: the reply's header names the echo as its source. Twice, with two
    // payloads: nothing else arrives in between (no answer to the refused datagram).
    let (first, second) = (payload(1200, 5), payload(700, 6));
    for p in [&first, &second] {
        udp.send(&to(echo, 0, p)).await.unwrap();
        let back = recv(&udp).await;
        assert!(
            back == to(echo, 0, p),
            "not the echo of {} bytes: {} bytes back",
            p.len(),
            back.len()
        );
    }
    // Inside the session, never as it is on the wire.
    let taps = net.taps();
    assert_eq!(taps.len(), 1, "one session for the association");
    let up = taps[0].crossed(Dir::ToServer);
    assert!(
        !first.chunks(16).any(|run| up.windows(16).any(|w| w == run)),
        "a 16-byte run of the payload crossed in the clear"
    );

    // Another socket of the client, a fragment, a domain name: each dropped by the proxy
    // client, which says why.
    let bound = format!("UDP ASSOCIATE on {relay}");
    let stranger = client_socket(relay).await;
    stranger
        .send(&to(echo, 0, b"from a stranger"))
        .await
        .unwrap();
    logs::wait_for(&[&bound, "not the association's client; dropped"], WAIT).await;
    udp.send(&to(echo, 1, b"a fragment")).await.unwrap();
    logs::wait_for(
        &[
            &bound,
            "SOCKS UDP fragment 0x01 (fragmentation is not supported); dropped",
        ],
        WAIT,
    )
    .await;
    let mut named = vec![0, 0, 0, 3, 18];
    named.extend_from_slice(b"files.example.test");
    named.extend_from_slice(&7007u16.to_be_bytes());
    named.extend_from_slice(b"by name");
    udp.send(&named).await.unwrap();
    logs::wait_for(
        &[
            &bound,
            "a datagram to the domain name files.example.test:7007: names are not resolved",
        ],
        WAIT,
    )
    .await;
    // The association still works, and only its own echo comes back.
    udp.send(&to(echo, 0, &first)).await.unwrap();
    assert!(recv(&udp).await == to(echo, 0, &first));
    let mut b = [0u8; 100];
    assert!(
        stranger.try_recv(&mut b).is_err(),
        "the stranger got an answer"
    );

    // Closing the control connection ends the association: the session ends cleanly on both
    // proxies, with the counts of what each did, and the relay's port is closed.
    drop(control);
    let line = logs::wait_for(
        &[&format!("{bound} ended: the control connection closed")],
        WAIT,
    )
    .await;
    assert!(
        line.contains("4 datagrams sent, 3 received, 3 dropped"),
        "{line}"
    );
    logs::wait_for(
        &["datagrams: 3 sent, 3 received, 1 not permitted by --allow"],
        WAIT,
    )
    .await;
    udp.send(&to(echo, 0, &first)).await.unwrap();
    let after = tokio::time::timeout(WAIT, udp.recv(&mut b))
        .await
        .expect("an answer or an error");
    assert_eq!(
        after.as_ref().map_err(|e| e.kind()),
        Err(std::io::ErrorKind::ConnectionRefused),
        "a datagram after the association's end: {after:?}"
    );
}

/// With `--socks-user-file`, UDP ASSOCIATE needs the user's password: without it no method
/// is acceptable (0xff); with it the round trip works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socks5_udp_associate_keeps_username_and_password() {
    let echo = echo().await;
    let net = MemoryNet::new();
    let at = addr("198.18.3.2:7442");
    proxy_server(&net, at, echo);
    let users = Users::parse("alice:s3cret\n").unwrap();
    let entry = socks_client(&net, at, Some(users)).await;
    let (without, none) = associate(entry, None).await;
    assert_eq!(without, 0xff, "no acceptable method without the password");
    assert!(none.is_none());
    assert!(net.taps().is_empty(), "no session for a refused client");
    let (code, assoc) = associate(entry, Some(("alice", "s3cret"))).await;
    assert_eq!(code, 0);
    let (relay, _control) = assoc.unwrap();
    let udp = client_socket(relay).await;
    let p = payload(512, 77);
    udp.send(&to(echo, 0, &p)).await.unwrap();
    assert!(recv(&udp).await == to(echo, 0, &p));
}
