//! The proxy client's SOCKS5 side over the in-memory pair (`testing::pair::socks_front`: the
//! proxy client's own SOCKS exchange, then the open request and the relay), to a proxy
//! server session with `--allow` rules and in-memory targets. No socket, namespace or root.

use nena_proto::Mode;
use nena_transport::ops::stop::StopSignal;
use nena_transport::proxy::socks::{AllowList, Users};
use nena_transport::proxy::Egress;
use nena_transport::testing::pair::{pair, socks_front, Dir, ProxyServer};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn allow(rules: &[&str]) -> Egress {
    Egress::Allow(AllowList(
        rules.iter().map(|r| r.parse().unwrap()).collect(),
    ))
}

/// A SOCKS5 CONNECT to an IPv4 destination: `05 01 00 01 a.b.c.d port`.
fn connect_v4(to: SocketAddr) -> Vec<u8> {
    let SocketAddr::V4(v4) = to else {
        panic!("IPv4")
    };
    let mut out = vec![5, 1, 0, 1];
    out.extend_from_slice(&v4.ip().octets());
    out.extend_from_slice(&v4.port().to_be_bytes());
    out
}

/// A greeting and a CONNECT through the proxy client's SOCKS side reach the target, whose
/// echo comes back byte-exact; a destination outside the rules gets the SOCKS reply
/// "connection not allowed by ruleset" (0x02), nothing connected (mirrors
/// net_socks::socks5_through_both_proxies_with_allow_rules, the proxy client's SOCKS side alone).
#[tokio::test]
async fn socks5_connect_reaches_the_target_through_the_pair() {
    let server = ProxyServer::new(allow(&["198.51.100.0/24"]));
    for (to, rep) in [("198.51.100.20:443", 0u8), ("203.0.113.5:443", 2)] {
        let to: SocketAddr = to.parse().unwrap();
        let p = pair(Mode::Aead).await.unwrap();
        let (mut app, ours) = tokio::io::duplex(1 << 16);
        let front = socks_front(ours, None, p.client, None);
        let serve = server.serve(p.server, StopSignal::never());
        let application = async {
            app.write_all(&[5, 1, 0]).await.unwrap();
            let mut choice = [0u8; 2];
            app.read_exact(&mut choice).await.unwrap();
            assert_eq!(choice, [5, 0], "no authentication");
            app.write_all(&connect_v4(to)).await.unwrap();
            let mut reply = [0u8; 10];
            app.read_exact(&mut reply).await.unwrap();
            assert_eq!(reply[..2], [5, rep], "{to}: {reply:?}");
            if rep != 0 {
                let mut rest = Vec::new();
                let _ = app.read_to_end(&mut rest).await;
                assert!(rest.is_empty(), "{rest:?}");
                return Vec::new();
            }
            let msg: Vec<u8> = (0..50_000u32).map(|i| (i % 241) as u8).collect();
            app.write_all(&msg).await.unwrap();
            app.shutdown().await.unwrap();
            let mut back = Vec::new();
            app.read_to_end(&mut back).await.unwrap();
            assert_eq!(back, msg, "the echo");
            msg
        };
        let (fronted, served, msg) = tokio::join!(front, serve, application);
        if rep == 0 {
            let b = fronted.unwrap();
            assert_eq!((b.up, b.down), (50_000, 50_000));
            served.unwrap();
            let conn = server.targets.take().pop().unwrap();
            assert_eq!(conn.addr, to);
            assert_eq!(conn.received.await.unwrap(), msg);
        } else {
            let e = format!("{:#}", fronted.unwrap_err());
            assert!(e.contains("refused the session"), "{e}");
            assert!(served.unwrap_err().contains("not permitted by --allow"));
        }
    }
    assert!(
        server.targets.connected().is_empty(),
        "only the permitted one"
    );
}

/// Malformed SOCKS greetings get the RFC's refusal (or none), never a panic or a hang, and
/// open nothing: no acceptable method is answered `05 FF`; another version and a missing
/// password are refused; the nena session is not used (mirrors
/// net_socks::socks5_username_and_password's refusals).
#[tokio::test]
async fn a_malformed_greeting_gets_a_clean_refusal() {
    let users = Users::parse("alice:secret").unwrap();
    for (greeting, users, answer) in [
        (vec![5u8, 1, 0x80], None, vec![5u8, 0xff]),
        (vec![4u8, 1, 0, 80, 198, 51, 100, 1, 0], None, vec![]),
        (vec![5u8, 1, 0], Some(users.clone()), vec![5u8, 0xff]),
        (vec![5u8, 0], None, vec![5u8, 0xff]),
    ] {
        let p = pair(Mode::Aead).await.unwrap();
        let tap = p.tap.clone();
        let sent = tap.len(Dir::ToServer);
        let (mut app, ours) = tokio::io::duplex(1 << 16);
        let front = socks_front(ours, users, p.client, None);
        let application = async {
            app.write_all(&greeting).await.unwrap();
            let mut got = Vec::new();
            let _ = app.read_to_end(&mut got).await;
            got
        };
        // Bounded: a hang fails here instead of holding the test run.
        let (fronted, got) = tokio::time::timeout(Duration::from_secs(10), async {
            tokio::join!(front, application)
        })
        .await
        .expect("the SOCKS side hung on a malformed greeting");
        let e = format!("{:#}", fronted.unwrap_err());
        assert!(e.contains("SOCKS exchange"), "{greeting:?}: {e}");
        assert_eq!(got, answer, "{greeting:?}: {e}");
        assert_eq!(
            tap.len(Dir::ToServer),
            sent,
            "{greeting:?}: the session was used"
        );
    }
}
