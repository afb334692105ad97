//! `nena proxy client --listen` and `nena proxy server --forward`, the production code of
//! both ends and of their accept loops, over the in-memory network (`testing::net`):
//! applications connect to the proxy client on loopback TCP (no root), the proxy client
//! dials the proxy server through a `MemoryNet`, the proxy server reaches in-memory targets
//! (`testing::pair::Targets`). Replaces the lab tests
//! `the_proxy_server_checks_the_access_token_before_it_connects` and
//! `clean_ends_through_both_proxies` of crates/cli/tests/cli/transfer_proxy.rs; what needs the
//! kernel (the subflows a session's log line reports, a stopping process's resets on its
//! sockets) stays there.

mod proxies;

use nena_proto::Mode;
use nena_transport::ops::metrics::{Metrics, Role};
use nena_transport::proxy::client::Entry;
use nena_transport::proxy::socks::AllowList;
use nena_transport::proxy::Egress;
use nena_transport::testing::net::MemoryNet;
use nena_transport::testing::pair::Dir;
use nena_transport::wire::AccessToken;
use proxies::{addr, client, client_with, counter, exchange, payload, Server};
use std::io::ErrorKind;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const SERVER: &str = "198.18.3.2:7341";
const TARGET: &str = "198.18.4.2:7340";

/// `--token-file` of the proxies (issue 22, item 3): the proxy server reads each session's
/// open request and checks its access token before it connects anywhere. An application
/// behind a proxy client without the token, or with another one, has its connection reset
/// (never a clean, empty answer) and nothing is connected, counted as refusals for the
/// token; behind a plain proxy client sent to an `--allow` server the same, the server
/// having no `--forward` target. The target's first and only connection is the session with
/// the token, whose bytes arrive exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_server_checks_the_access_token_before_it_connects() {
    let token = AccessToken::new(b"the token of this test".to_vec()).unwrap();
    let other = AccessToken::new(b"another token altogether".to_vec()).unwrap();
    let net = MemoryNet::new();
    let metrics = Metrics::new(Role::ProxyServer);
    let mut server = Server::new(&net, SERVER, Egress::Forward(addr(TARGET)));
    server.token = Some(token.clone());
    server.targets.answer_count = true;
    server.metrics = Some(metrics.clone());
    let targets = server.start();
    const SOCKS_ONLY: &str = "198.18.3.2:7345";
    let socks_only = Server::new(
        &net,
        SOCKS_ONLY,
        Egress::Allow(AllowList(vec!["198.18.4.0/24".parse().unwrap()])),
    )
    .start();
    let front = |to: &'static str, token: Option<AccessToken>| {
        let net = net.clone();
        async move { client(&net, to, Entry::Plain, Mode::Aead, token, None, 16).await }
    };
    let without = front(SERVER, None).await;
    let wrong = front(SERVER, Some(other)).await;
    let right = front(SERVER, Some(token)).await;
    let misdirected = front(SOCKS_ONLY, None).await;

    for (name, at) in [
        ("without", without),
        ("wrong", wrong),
        ("misdirected", misdirected),
    ] {
        // The proxy client may reset the connection before the connect has returned.
        let got = match TcpStream::connect(at).await {
            Ok(s) => exchange(s, b"GET / HTTP/1.0\r\n\r\n").await,
            Err(e) => Err(e),
        };
        let e = got.expect_err("a refused session must not look like a clean, empty answer");
        assert!(
            matches!(
                e.kind(),
                ErrorKind::ConnectionReset | ErrorKind::NotConnected | ErrorKind::BrokenPipe
            ),
            "{name}: {e}"
        );
    }
    assert!(targets.connected().is_empty(), "refused before any connect");
    assert!(socks_only.connected().is_empty());
    let denied = "nena_refusals_total{role=\"proxy_server\",cause=\"access_denied\"}";
    // Counted once the server's session ended, which may be after the application's reset.
    wait_for(|| counter(&metrics, denied) == 2).await;
    assert_eq!(counter(&metrics, denied), 2);

    let body = payload(3, 1 << 20);
    let s = TcpStream::connect(right).await.unwrap();
    let answer = exchange(s, &body).await.unwrap();
    assert_eq!(answer, format!("got {} bytes", body.len()).as_bytes());
    let conns = targets.take();
    assert_eq!(conns.len(), 1);
    assert_eq!(conns[0].addr, addr(TARGET));
    assert!(
        conns.into_iter().next().unwrap().received.await.unwrap() == body,
        "the target's first connection was not the session with the token"
    );
    assert_eq!(counter(&metrics, denied), 2, "no third refusal");
}

/// A plain TCP client and target through both proxies end cleanly on every side: the
/// client's half-close reaches the target, the target's answer and end reach the client;
/// a client that sends and then closes its socket whole without reading (as iperf3 ends a
/// data stream) still has every byte delivered. Both sessions are counted `ok` by both
/// proxies. The bytes the client sends look like an HTTP CONNECT to another host: the
/// `--forward` target gets them verbatim and nothing else is connected (the proxy server is
/// no relay a client can point elsewhere); they cross the memory wire only encrypted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clean_ends_through_both_proxies() {
    let net = MemoryNet::new();
    let server_metrics = Metrics::new(Role::ProxyServer);
    let client_metrics = Metrics::new(Role::ProxyClient);
    let mut server = Server::new(&net, SERVER, Egress::Forward(addr(TARGET)));
    server.targets.answer_count = true;
    server.metrics = Some(server_metrics.clone());
    let targets = server.start();
    // A session per connection (`--no-reuse`): each session's own ends are the subject here
    // (flows ending with flow-end records on one session: net_reuse.rs).
    let opts = nena_transport::conn::ClientOptions {
        reuse: None,
        ..net.options(addr(SERVER), vec![Mode::Aead])
    };
    let front = client_with(opts, Entry::Plain, Some(client_metrics.clone()), 16).await;

    // 1. Half-close: send, end our side, read the whole answer.
    let mut request = b"CONNECT 198.18.5.2:22 HTTP/1.1\r\nHost: 198.18.5.2:22\r\n\r\n".to_vec();
    request.extend(payload(1, 3 << 20));
    let s = TcpStream::connect(front).await.unwrap();
    let answer = exchange(s, &request)
        .await
        .expect("a clean end for the client");
    assert_eq!(answer, format!("got {} bytes", request.len()).as_bytes());

    // 2. Send, then close the socket whole without reading.
    let data = payload(2, 4 << 20);
    let mut s = TcpStream::connect(front).await.unwrap();
    s.write_all(&data).await.unwrap();
    drop(s);

    let conns = targets.take();
    assert_eq!(conns.len(), 2, "the --forward target only, once a session");
    let mut conns = conns.into_iter();
    let first = conns.next().unwrap();
    assert_eq!(first.addr, addr(TARGET));
    assert!(
        first.received.await.unwrap() == request,
        "the target got other bytes than the client sent"
    );
    let second = conns.next().unwrap();
    assert_eq!(second.addr, addr(TARGET));
    assert_eq!(second.received.await.unwrap().len(), data.len());

    let taps = net.taps();
    assert_eq!(taps.len(), 2);
    let crossed = taps[0].crossed(Dir::ToServer);
    assert!(
        !crossed.windows(15).any(|w| w == b"CONNECT 198.18."),
        "in the clear"
    );

    // Both sessions ended ok at both ends (each end counts its own once it has ended).
    for (m, role) in [
        (&server_metrics, "proxy_server"),
        (&client_metrics, "proxy_client"),
    ] {
        let ok = format!("nena_sessions_total{{role=\"{role}\",mode=\"aead\",outcome=\"ok\"}}");
        wait_for(|| counter(m, &ok) == 2).await;
        assert_eq!(counter(m, &ok), 2, "{role}:\n{}", m.encode());
        assert!(
            !m.encode()
                .lines()
                .any(|l| l.starts_with("nena_sessions_total")
                    && !l.contains("outcome=\"ok\"")
                    && !l.ends_with(" 0")),
            "{role}: a session ended otherwise:\n{}",
            m.encode()
        );
    }
}

/// Waits (10 s at most) until `done` holds: the proxies count a session once it has ended
/// on their side, which may be after the application saw its end.
async fn wait_for(mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while !done() && tokio::time::Instant::now() < deadline {
        tokio::task::yield_now().await;
        // sleep: the counters have no event to wait on; polled every 10 ms
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}
