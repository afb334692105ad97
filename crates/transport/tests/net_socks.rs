//! `nena proxy client --socks5` and `nena proxy server --allow`, the production code of both
//! ends and of their accept loops, over the in-memory network (`testing::net`): a SOCKS5
//! client written here connects to the proxy client on loopback TCP (no root), the proxy
//! client dials the proxy server through a `MemoryNet`, the proxy server connects to
//! in-memory targets (`testing::pair::Targets`), which record every connection. Replaces the
//! lab tests of crates/cli/tests/cli/transfer_socks.rs (`socks5_through_both_proxies_with_allow_rules`,
//! `a_proxy_server_without_allow_refuses_every_request`,
//! `a_wide_allow_rule_never_reaches_the_proxy_servers_own_host`,
//! `socks5_username_and_password`, `socks5_ipv6_destination_end_to_end`,
//! `the_access_token_comes_before_the_allow_rules`). Which addresses the kernel says the
//! server's host holds (`proxy::socks::allow::host_address`) is the unit test
//! `proxy/socks/tests.rs::the_servers_own_host_is_reached_only_by_a_rule_inside_its_range`;
//! the datagrams of UDP ASSOCIATE are net_socks_udp.rs's.

mod proxies;

use nena_proto::Mode;
use nena_transport::proxy::client::Entry;
use nena_transport::proxy::socks::{AllowList, Rep, Users};
use nena_transport::proxy::Egress;
use nena_transport::testing::net::MemoryNet;
use nena_transport::wire::AccessToken;
use proxies::{addr, client, domain, exchange, payload, socks_connect, v4, v6, Server};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const SERVER: &str = "198.18.3.2:7401";

fn allow(rules: &[&str]) -> Egress {
    Egress::Allow(AllowList(
        rules.iter().map(|r| r.parse().unwrap()).collect(),
    ))
}

/// A SOCKS proxy client (no authentication, aead) in front of the server at `to`.
async fn socks_front(net: &Arc<MemoryNet>, to: &str, token: Option<AccessToken>) -> SocketAddr {
    client(
        net,
        to,
        Entry::Socks5 { users: None },
        Mode::Aead,
        token,
        None,
        64,
    )
    .await
}

/// Through both proxies with `--allow 198.18.4.0/24:8000-8010 --allow [2001:2::7]:8000`: an
/// IPv4 literal (3 MiB) and a domain name the proxy server resolves (`localhost`, permitted
/// by a loopback rule of its own) are connected and echoed byte-exact; the RFC 1928 codes
/// for a destination outside the rules (the address, or another port: 0x02, nothing
/// connected), a target that refuses (0x05, by address and by name), BIND (0x07) and an
/// unknown address type (0x08); then 1,000 SOCKS sessions at once, each its own request to
/// the server and echoed byte-exact with all of them open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socks5_through_both_proxies_with_allow_rules() {
    nena_transport::conn::raise_nofile_limit();
    let net = MemoryNet::new();
    let mut server = Server::new(
        &net,
        SERVER,
        allow(&[
            "198.18.4.0/24:8000-8010",
            "[2001:2::7]:8000",
            "127.0.0.1:8000-8001",
            "[::1]:8000-8001",
        ]),
    );
    server.sessions = 2000;
    server.targets.refuse = vec![
        addr("198.18.4.2:8001"),
        addr("127.0.0.1:8001"),
        addr("[::1]:8001"),
    ];
    let targets = server.start();
    let front = client(
        &net,
        SERVER,
        Entry::Socks5 { users: None },
        Mode::Aead,
        None,
        None,
        2000,
    )
    .await;

    let body = payload(42, 3 * 1024 * 1024 + 17);
    let (code, s) = socks_connect(front, &v4([198, 18, 4, 2], 8000), false).await;
    assert_eq!(code, Rep::Succeeded as u8);
    assert!(
        exchange(s, &body).await.unwrap() == body,
        "the echo differs"
    );
    let (code, s) = socks_connect(front, &domain("localhost", 8000), false).await;
    assert_eq!(code, Rep::Succeeded as u8, "a name the server resolves");
    assert_eq!(exchange(s, b"by name").await.unwrap(), b"by name");
    let conns = targets.take();
    assert_eq!(conns[0].addr, addr("198.18.4.2:8000"));
    assert!(
        conns[1].addr.ip().is_loopback() && conns[1].addr.port() == 8000,
        "localhost: {}",
        conns[1].addr
    );
    assert_eq!(conns.len(), 2);
    assert!(conns.into_iter().next().unwrap().received.await.unwrap() == body);

    let mut codes = Vec::new();
    for (req, raw) in [
        // Outside --allow: another address, an allowed address's other port.
        (v4([198, 18, 5, 2], 8000), false),
        (v4([198, 18, 4, 2], 22), false),
        // Allowed, refused by the target: IPv4 and a domain name.
        (v4([198, 18, 4, 2], 8001), false),
        (domain("localhost", 8001), false),
        // BIND, and an unknown address type: answered by the proxy client.
        (vec![5, 2, 0, 1, 198, 18, 4, 2, 0, 80], true),
        (vec![5, 1, 0, 9, 0, 0], true),
    ] {
        codes.push(socks_connect(front, &req, raw).await.0);
    }
    assert_eq!(codes, vec![0x02, 0x02, 0x05, 0x05, 0x07, 0x08]);
    assert!(
        targets.take().is_empty(),
        "only what was allowed and answered was connected"
    );

    // 1,000 SOCKS sessions, all open at once before any ends.
    const SESSIONS: usize = 1000;
    let barrier = Arc::new(tokio::sync::Barrier::new(SESSIONS));
    let tasks: Vec<_> = (0..SESSIONS)
        .map(|i| {
            let barrier = barrier.clone();
            tokio::spawn(async move {
                let msg = payload(i as u32, 16 * 1024);
                let (code, mut s) = socks_connect(front, &v4([198, 18, 4, 7], 8007), false).await;
                let wrote = s.write_all(&msg).await;
                barrier.wait().await;
                assert_eq!(code, 0, "session {i}: the reply");
                wrote.unwrap();
                s.shutdown().await.unwrap();
                let mut back = Vec::new();
                s.read_to_end(&mut back).await.unwrap();
                assert!(back == msg, "session {i}: the echo differs");
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let conns = targets.take();
    assert_eq!(conns.len(), SESSIONS, "each its own request to the server");
    assert!(conns.iter().all(|c| c.addr == addr("198.18.4.7:8007")));
    // A session each for the 4 refused requests and the 1,000 open at once; the two
    // accepted flows before them may share one (reused flow after flow), and the session
    // given back by the second may carry one of the 1,000.
    let sessions = net.taps().len();
    assert!(
        (4 + SESSIONS..=2 + 4 + SESSIONS).contains(&sessions),
        "{sessions} sessions"
    );
}

/// A proxy server without `--forward` and without `--allow` refuses every SOCKS request with
/// 0x02, its own address and port included, and connects nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_server_without_allow_refuses_every_request() {
    let net = MemoryNet::new();
    let targets = Server::new(&net, SERVER, allow(&[])).start();
    let front = socks_front(&net, SERVER, None).await;
    let mut codes = Vec::new();
    for req in [
        v4([198, 18, 3, 2], 7401),
        v4([198, 18, 4, 2], 80),
        v6("2001:2::7", 80),
        domain("localhost", 7401),
    ] {
        codes.push(socks_connect(front, &req, false).await.0);
    }
    assert_eq!(codes, vec![0x02; 4]);
    assert!(targets.connected().is_empty());
}

/// `--allow 0.0.0.0/0:8000` (GATEWAY.md's kind of rule) reaches neither loopback nor the
/// cloud metadata address 169.254.169.254: each is refused with 0x02 and never connected,
/// while another address on the port is reached. Named by rules of their own
/// (`--allow 127.0.0.1:8000 --allow 169.254.169.254/32`), both are reached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wide_allow_rule_never_reaches_the_proxy_servers_own_host() {
    let reqs = [
        v4([127, 0, 0, 1], 8000),
        v4([169, 254, 169, 254], 8000),
        v4([198, 18, 4, 2], 8000),
    ];
    for (rules, want) in [
        (vec!["0.0.0.0/0:8000"], vec![0x02, 0x02, 0x00]),
        (
            vec!["0.0.0.0/0:8000", "127.0.0.1:8000", "169.254.169.254/32"],
            vec![0x00, 0x00, 0x00],
        ),
    ] {
        let net = MemoryNet::new();
        let targets = Server::new(&net, SERVER, allow(&rules)).start();
        let front = socks_front(&net, SERVER, None).await;
        let mut codes = Vec::new();
        for req in &reqs {
            codes.push(socks_connect(front, req, false).await.0);
        }
        assert_eq!(codes, want, "{rules:?}");
        let connected: Vec<SocketAddr> =
            ["127.0.0.1:8000", "169.254.169.254:8000", "198.18.4.2:8000"]
                .iter()
                .zip(&want)
                .filter(|(_, c)| **c == 0)
                .map(|(a, _)| addr(a))
                .collect();
        assert_eq!(targets.connected(), connected, "{rules:?}");
    }
}

/// With a user file (`alice:s3cret pass`), the proxy client takes username/password (RFC
/// 1929): the right password gets the session through, byte-exact; a wrong one gets the
/// status failure and the connection closed, a client that offers no authentication gets
/// `05 FF`; neither reaches the proxy server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socks5_username_and_password() {
    let net = MemoryNet::new();
    let targets = Server::new(&net, SERVER, allow(&["198.18.4.2:8000"])).start();
    let users = Users::parse("# SOCKS users\nalice:s3cret pass\n").unwrap();
    let front = client(
        &net,
        SERVER,
        Entry::Socks5 { users: Some(users) },
        Mode::Aead,
        None,
        None,
        64,
    )
    .await;
    let login = |user: &str, pass: &str| {
        let mut m = vec![1, user.len() as u8];
        m.extend_from_slice(user.as_bytes());
        m.push(pass.len() as u8);
        m.extend_from_slice(pass.as_bytes());
        m
    };
    let page = b"<p>hello through nena</p>\n".repeat(1000);
    // The right password.
    let mut s = TcpStream::connect(front).await.unwrap();
    s.write_all(&[5, 1, 2]).await.unwrap();
    let mut m = [0u8; 2];
    s.read_exact(&mut m).await.unwrap();
    assert_eq!(m, [5, 2], "username/password chosen");
    s.write_all(&login("alice", "s3cret pass")).await.unwrap();
    s.read_exact(&mut m).await.unwrap();
    assert_eq!(m, [1, 0], "accepted");
    let mut req = vec![5, 1, 0];
    req.extend_from_slice(&v4([198, 18, 4, 2], 8000));
    s.write_all(&req).await.unwrap();
    assert_eq!(proxies::socks_reply(&mut s).await, 0);
    assert!(exchange(s, &page).await.unwrap() == page);
    // A wrong password: refused, the connection closed.
    let mut s = TcpStream::connect(front).await.unwrap();
    s.write_all(&[5, 1, 2]).await.unwrap();
    s.read_exact(&mut m).await.unwrap();
    assert_eq!(m, [5, 2]);
    s.write_all(&login("alice", "wrong")).await.unwrap();
    s.read_exact(&mut m).await.unwrap();
    assert_eq!(m[0], 1);
    assert_ne!(m[1], 0, "a wrong password accepted");
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest).await;
    assert!(rest.is_empty());
    // No credentials offered: no acceptable method.
    let mut s = TcpStream::connect(front).await.unwrap();
    s.write_all(&[5, 1, 0]).await.unwrap();
    s.read_exact(&mut m).await.unwrap();
    assert_eq!(m, [5, 0xff]);
    assert_eq!(
        targets.connected(),
        vec![addr("198.18.4.2:8000")],
        "only the session with the password"
    );
    assert_eq!(net.taps().len(), 1, "the refused ones never dialed");
}

/// An IPv6 destination (RFC 5180's 2001:2::/48, ATYP 4) through both proxies with
/// `--allow [2001:2::7/128]:8000`: connected at that address, 1 MiB echoed byte-exact;
/// another port of it is refused with 0x02 and never connected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socks5_ipv6_destination_end_to_end() {
    let net = MemoryNet::new();
    let targets = Server::new(&net, SERVER, allow(&["[2001:2::7/128]:8000"])).start();
    let front = socks_front(&net, SERVER, None).await;
    let body = payload(6, 1024 * 1024 + 5);
    let (code, s) = socks_connect(front, &v6("2001:2::7", 8000), false).await;
    assert_eq!(code, 0);
    assert!(exchange(s, &body).await.unwrap() == body);
    let (code, _s) = socks_connect(front, &v6("2001:2::7", 22), false).await;
    assert_eq!(code, 0x02);
    let conns = targets.take();
    assert_eq!(conns.len(), 1);
    assert_eq!(conns[0].addr, addr("[2001:2::7]:8000"));
    assert!(conns.into_iter().next().unwrap().received.await.unwrap() == body);
}

/// The proxy server's access token comes before its `--allow` rules (issue 22, item 3): a
/// SOCKS client without the token, or with another one, gets 0x02 for a destination the
/// rules permit, and nothing is connected; with the token the same request succeeds and is
/// echoed byte-exact. A SOCKS client sent to a `--forward` server gets 0x02 too, and its
/// forward target is never connected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_access_token_comes_before_the_allow_rules() {
    let token = AccessToken::new(b"the token of this test".to_vec()).unwrap();
    let other = AccessToken::new(b"another token altogether".to_vec()).unwrap();
    let net = MemoryNet::new();
    let mut server = Server::new(&net, SERVER, allow(&["198.18.4.0/24"]));
    server.token = Some(token.clone());
    let targets = server.start();
    const FORWARD: &str = "198.18.3.2:7402";
    let forwarded = Server::new(&net, FORWARD, Egress::Forward(addr("198.18.4.9:8017"))).start();
    let without = socks_front(&net, SERVER, None).await;
    let wrong = socks_front(&net, SERVER, Some(other)).await;
    let right = socks_front(&net, SERVER, Some(token)).await;
    let misdirected = socks_front(&net, FORWARD, None).await;

    let req = v4([198, 18, 4, 2], 8017);
    let mut codes = Vec::new();
    for front in [without, wrong, misdirected] {
        codes.push(socks_connect(front, &req, false).await.0);
    }
    assert_eq!(codes, vec![0x02; 3], "without, wrong, misdirected");
    assert!(targets.connected().is_empty(), "refused before any connect");
    assert!(forwarded.connected().is_empty());
    let body = payload(7, 256 * 1024 + 3);
    let (code, s) = socks_connect(right, &req, false).await;
    assert_eq!(code, 0, "the client with the token was refused");
    assert!(exchange(s, &body).await.unwrap() == body);
    assert_eq!(targets.connected(), vec![addr("198.18.4.2:8017")]);
    assert!(forwarded.connected().is_empty());
}
