//! Sessions reused flow after flow (wire `OP_REUSE`), the production code of both proxies
//! over the in-memory network (`testing::net`): the proxy client's SOCKS5 flows, one after
//! another, each end with flow-end records both ways, and the session goes back to the
//! client's pool (`proxy::warm`) for the next flow. With reuse (the default) ten flows share
//! one connection and one handshake; with `--no-reuse` each has its own. Every byte is
//! checked at the application and at the target. The record-level and server-side rules
//! are `proxy_reuse.rs`'s.

mod proxies;

use nena_proto::Mode;
use nena_transport::conn::{Ahead, ClientOptions, Reuse};
use nena_transport::ops::metrics::{Metrics, Role};
use nena_transport::proxy::client::Entry;
use nena_transport::proxy::socks::{AllowList, Rep};
use nena_transport::proxy::warm::{Keeping, Warm};
use nena_transport::proxy::Egress;
use nena_transport::testing::net::MemoryNet;
use proxies::{addr, client_with, counter, exchange, payload, socks_connect, v4, Server};
use std::sync::Arc;
use std::time::{Duration, Instant};

const FLOWS: u16 = 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flows_one_after_another_share_one_session_unless_told_not_to() {
    for reuse in [true, false] {
        let at = if reuse {
            "198.18.3.2:7170"
        } else {
            "198.18.3.2:7171"
        };
        let net = MemoryNet::new();
        let metrics = Metrics::new(Role::ProxyServer);
        let mut server = Server::new(
            &net,
            at,
            Egress::Allow(AllowList(vec!["198.18.4.0/24".parse().unwrap()])),
        );
        server.metrics = Some(metrics.clone());
        let targets = server.start();
        // The pool the proxy client keeps without --warm (sessions given back only), here
        // held by the test to see them come back.
        let pool = Arc::new(Warm::new(0));
        let opts = ClientOptions {
            warm: Some(pool.clone() as Arc<dyn Ahead>),
            reuse: reuse.then(Reuse::new),
            buffer: nena_transport::stream::PROXY_BUF,
            ..net.options(addr(at), vec![Mode::Aead])
        };
        let front = client_with(opts, Entry::Socks5 { users: None }, None, 16).await;
        let mut sent = Vec::new();
        for i in 0..FLOWS {
            let msg = payload(u32::from(i), 1000 + 3000 * usize::from(i));
            let (code, s) = socks_connect(front, &v4([198, 18, 4, 2], 8000 + i), false).await;
            assert_eq!(code, Rep::Succeeded as u8, "flow {i}");
            let back = exchange(s, &msg).await.unwrap();
            assert_eq!(back, msg, "flow {i}: the echo");
            sent.push(msg);
            if reuse {
                // The session comes back to the pool once the proxy client saw both flow
                // ends; the next flow should find it there.
                let t = Instant::now();
                while pool.given_back() < usize::from(i) + 1 {
                    assert!(
                        t.elapsed() < Duration::from_secs(10),
                        "flow {i} not given back"
                    );
                    // sleep: polls a counter the pool has no event for, briefly.
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
        }
        if reuse {
            // An application that sends and closes its socket whole without reading (as
            // iperf3 ends a data stream): the flow still ends cleanly both ways, and the
            // session carries the next flow.
            let dropped = payload(99, 1 << 20);
            let (code, mut s) =
                socks_connect(front, &v4([198, 18, 4, 2], 8000 + FLOWS), false).await;
            assert_eq!(code, Rep::Succeeded as u8);
            tokio::io::AsyncWriteExt::write_all(&mut s, &dropped)
                .await
                .unwrap();
            drop(s);
            sent.push(dropped);
            let t = Instant::now();
            while pool.given_back() < usize::from(FLOWS) + 1 {
                assert!(t.elapsed() < Duration::from_secs(10), "not given back");
                // sleep: polls a counter the pool has no event for, briefly.
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            let (code, s) = socks_connect(front, &v4([198, 18, 4, 2], 8001 + FLOWS), false).await;
            assert_eq!(code, Rep::Succeeded as u8);
            assert_eq!(exchange(s, b"after it").await.unwrap(), b"after it");
            sent.push(b"after it".to_vec());
        }
        let conns = targets.take();
        assert_eq!(conns.len(), sent.len(), "reuse {reuse}");
        for (i, (conn, msg)) in conns.into_iter().zip(&sent).enumerate() {
            assert_eq!(conn.addr, addr(&format!("198.18.4.2:{}", 8000 + i)));
            assert_eq!(&conn.received.await.unwrap(), msg, "flow {i} at its target");
        }
        let sessions = net.taps().len();
        if reuse {
            assert_eq!(
                sessions, 1,
                "twelve flows, one connection and one handshake"
            );
            assert_eq!((pool.taken(), pool.missed()), (11, 1), "{pool:?}");
        } else {
            assert_eq!(sessions, usize::from(FLOWS), "a session per flow");
            assert_eq!(pool.given_back(), 0);
            let ok = "nena_sessions_total{role=\"proxy_server\",mode=\"aead\",outcome=\"ok\"}";
            let t = Instant::now();
            while counter(&metrics, ok) < u64::from(FLOWS) {
                assert!(
                    t.elapsed() < Duration::from_secs(10),
                    "sessions not counted"
                );
                // sleep: the server counts a session after its last write; polled briefly.
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    }
}

/// A session is reused only within the pool's `reuse_within` of its handshake (10 minutes by
/// default, 300 ms here): the flow that finds it older at its end ends it (its closing
/// record) instead of giving it back, and the next flow opens a new session, with new keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_past_its_reuse_time_is_ended_and_the_next_flow_opens_one() {
    const AT: &str = "198.18.3.2:7172";
    let net = MemoryNet::new();
    let targets = Server::new(
        &net,
        AT,
        Egress::Allow(AllowList(vec!["198.18.4.0/24".parse().unwrap()])),
    )
    .start();
    let pool = Arc::new(Warm::keeping(Keeping {
        reuse_within: Duration::from_millis(300),
        ..Keeping::new(0)
    }));
    let opts = ClientOptions {
        warm: Some(pool.clone() as Arc<dyn Ahead>),
        buffer: nena_transport::stream::PROXY_BUF,
        ..net.options(addr(AT), vec![Mode::Aead])
    };
    let front = client_with(opts, Entry::Socks5 { users: None }, None, 16).await;
    let flow = |i: u16| async move {
        let msg = payload(u32::from(i), 500);
        let (code, s) = socks_connect(front, &v4([198, 18, 4, 2], 8100 + i), false).await;
        assert_eq!(code, Rep::Succeeded as u8, "flow {i}");
        assert_eq!(exchange(s, &msg).await.unwrap(), msg, "flow {i}");
    };
    let given_back = |n: usize| {
        let pool = pool.clone();
        async move {
            let t = Instant::now();
            while pool.given_back() < n {
                assert!(t.elapsed() < Duration::from_secs(10), "not given back");
                // sleep: polls a counter the pool has no event for, briefly.
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    };
    flow(0).await;
    given_back(1).await;
    // sleep: the session's age is the scenario: it passes its reuse time while it waits.
    tokio::time::sleep(Duration::from_millis(400)).await;
    flow(1).await; // takes it (it waited less than the pool's 5 s), then it is too old to keep
    flow(2).await;
    // The second session is given back after the third flow (the first was ended).
    given_back(2).await;
    assert_eq!(net.taps().len(), 2, "the third flow opened a new session");
    assert_eq!(pool.given_back(), 2);
    assert_eq!(targets.connected().len(), 3);
}

/// A proxy server older than reuse reads the bit as an unknown op and closes the session
/// without a reply (played here by a server that does just that, then serves requests
/// without the bit: a reply and an echo). The proxy client opens another session for the
/// flow without the bit, stops asking, and every flow gets its bytes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_older_than_reuse_costs_one_session_and_is_asked_no_more() {
    use nena_transport::conn::{accept, Acceptor};
    use nena_transport::wire::ConnectReply;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const AT: &str = "198.18.3.2:7173";
    let net = MemoryNet::new();
    let listener = net.listen(addr(AT));
    let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = asked.clone();
    // One set of options for every session (its ticket store among them), as a server has.
    let opts = Arc::new(nena_transport::testing::net::accept_options());
    tokio::spawn(async move {
        while let Some(Ok((conn, peer))) = listener.next().await {
            let (seen, opts) = (seen.clone(), opts.clone());
            tokio::spawn(async move {
                let mut c = accept(conn, peer, &opts).await.unwrap();
                let req = match c.reader.read_connect_request().await {
                    Ok(r) if r.reuse => {
                        // An older server masks only the token's bit off the op: what is
                        // left is no op it knows (4 to 8), and it closes without a word.
                        let op = r.encode()[4] & !nena_transport::wire::OP_TOKEN;
                        assert!(!(4..=8).contains(&op), "op {op:#x}");
                        seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        return;
                    }
                    Ok(r) => r,
                    Err(_) => return,
                };
                assert!(req.target.is_some());
                let ok = ConnectReply {
                    code: Rep::Succeeded,
                    msg: String::new(),
                };
                c.writer.write_msg(ok.encode()).await.unwrap();
                let mut got = Vec::new();
                c.reader.read_to_end(&mut got).await.unwrap();
                c.writer.write_all(&got).await.unwrap();
                c.writer.shutdown().await.unwrap();
            });
        }
    });
    let opts = ClientOptions {
        buffer: nena_transport::stream::PROXY_BUF,
        ..net.options(addr(AT), vec![Mode::Aead])
    };
    let front = client_with(opts, Entry::Socks5 { users: None }, None, 16).await;
    for i in 0..3u16 {
        let msg = payload(u32::from(i), 700);
        let (code, s) = socks_connect(front, &v4([198, 18, 4, 2], 8200 + i), false).await;
        assert_eq!(code, Rep::Succeeded as u8, "flow {i}");
        assert_eq!(exchange(s, &msg).await.unwrap(), msg, "flow {i}");
    }
    assert_eq!(
        asked.load(std::sync::atomic::Ordering::Relaxed),
        1,
        "only the first session asked"
    );
    assert_eq!(
        net.taps().len(),
        4,
        "one session given up, then one per flow"
    );
}
