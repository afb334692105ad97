//! Sessions opened ahead (`nena gateway --warm N`, `proxy::warm::Warm`), the production code
//! of both proxies over the in-memory network (`testing::net`): the proxy client's flows
//! take sessions from the pool as the gateway's do (`ClientOptions::warm`, the same opening
//! in `proxy::open`), here behind its SOCKS5 entry (the gateway's TPROXY entry needs the
//! kernel); the proxy server (`run_server_on`) gives a client 1 s to send its open request
//! (`--handshake-timeout 1`). Both sessions opened ahead are gone before the application's
//! connection takes one: the flow finds its session given up and opens a new one in its
//! path, and the application gets its connection and its bytes.
//!
//! Replaces the lab test `transfer_gateway.rs::a_session_opened_ahead_that_its_server_gave_up_is_replaced_in_the_flows_path`;
//! the gateway's own entry (TPROXY, nftables, routes) stays in the lab
//! (crates/cli/tests/cli/transfer_gateway.rs).

mod logs;
mod proxies;

use nena_proto::Mode;
use nena_transport::conn::{AcceptOptions, Ahead, ClientOptions};
use nena_transport::ops::metrics::{Metrics, Role};
use nena_transport::proxy::client::Entry;
use nena_transport::proxy::socks::{AllowList, Rep};
use nena_transport::proxy::warm::{Keeping, Warm};
use nena_transport::proxy::Egress;
use nena_transport::testing::net::{accept_options, MemoryNet};
use nena_transport::testing::pair::Targets;
use proxies::{addr, client_with, counter, exchange, socks_connect, v4, Server};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

const SERVER: &str = "198.18.3.2:7160";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_opened_ahead_that_its_server_gave_up_is_replaced_in_the_flows_path() {
    logs::keep();
    let net = MemoryNet::new();
    // A server that gives a client 1 s to send its open request; the proxy client with two
    // sessions opened ahead, filled at its start as the gateway's `--warm 2` is.
    let warm = Arc::new(Warm::new(2));
    let (targets, front) =
        proxies_with_pool(&net, SERVER, Duration::from_secs(1), None, &warm).await;
    // Both sessions opened ahead are given up by the server.
    let gone = logs::wait_for_n(&["no open request within 1s"], 2, Duration::from_secs(10)).await;
    assert_eq!(gone.len(), 2, "{gone:?}");
    assert_eq!(net.taps().len(), 2, "the two sessions opened ahead");

    let (code, s) = socks_connect(front, &v4([198, 18, 4, 2], 8000), false).await;
    assert_eq!(code, Rep::Succeeded as u8);
    let back = exchange(s, b"after the pool went stale\n").await.unwrap();
    assert_eq!(back, b"after the pool went stale\n");
    assert!(
        warm.taken() >= 1,
        "the flow took a session opened ahead first"
    );
    assert_eq!(targets.connected(), vec![addr("198.18.4.2:8000")]);
}

/// An idle pool is kept fresh (`proxy::warm`'s keeper): each session opened ahead is
/// replaced before the server would give it up, and ended cleanly; once no flow came for
/// the pool's idle time it keeps only its idle share (1 of 3). The first flow after the
/// pause takes a session from the pool (none missed), and none of the server's sessions
/// waited out its handshake timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_pool_is_kept_fresh_and_the_flow_after_a_pause_takes_from_it() {
    logs::keep();
    let net = MemoryNet::new();
    const AT: &str = "198.18.3.2:7161";
    // A server that gives a client 3 s to send its open request; a pool of 3 (1 when
    // idle), each session waiting 2 s at most.
    let metrics = Metrics::new(Role::ProxyServer);
    let keeping = Keeping {
        size: 3,
        idle: 1,
        max_age: Duration::from_secs(2),
        idle_after: Duration::from_secs(2),
        ..Keeping::new(3)
    };
    let warm = Arc::new(Warm::keeping(keeping));
    let (targets, front) = proxies_with_pool(
        &net,
        AT,
        Duration::from_secs(3),
        Some(metrics.clone()),
        &warm,
    )
    .await;
    // No flow for 6 s: three times the sessions' longest wait, and past the pool's window.
    // sleep: the pause is the scenario (an idle gateway), not a wait for an event.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(
        warm.replaced() >= 4,
        "{} sessions replaced in 6 s (each after 1.4 s)",
        warm.replaced()
    );
    assert!(warm.ready() <= 1, "idle, the pool keeps 1: {warm:?}");
    // The server counts the sessions given back as unused, none failed, none with a
    // warning (each ends cleanly, in aead with its closing record).
    let outcome = |o: &str| {
        counter(
            &metrics,
            &format!("nena_sessions_total{{role=\"proxy_server\",mode=\"aead\",outcome=\"{o}\"}}"),
        )
    };
    assert_eq!(outcome("failed"), 0);
    assert!(outcome("unused") >= 3, "{} unused", outcome("unused"));
    assert!(
        logs::lines_with("given back").is_empty(),
        "{:?}",
        logs::lines_with("given back")
    );
    assert!(
        logs::lines_with("no open request within 3s").is_empty(),
        "the server gave up a session opened ahead: {:?}",
        logs::lines_with("open request")
    );

    let (code, s) = socks_connect(front, &v4([198, 18, 4, 3], 8000), false).await;
    assert_eq!(code, Rep::Succeeded as u8);
    let back = exchange(s, b"after a pause\n").await.unwrap();
    assert_eq!(back, b"after a pause\n");
    assert_eq!(
        (warm.taken(), warm.missed()),
        (1, 0),
        "the flow took a fresh session from the pool"
    );
    assert_eq!(targets.connected(), vec![addr("198.18.4.3:8000")]);
}

/// The proxy server at `at` (the LAN targets of 198.18.4.0/24 allowed, 16 sessions at once,
/// counting into `metrics`) that gives a client `handshake_timeout` to send its open
/// request, and the proxy client behind its SOCKS5 entry whose flows take sessions from
/// `warm`, filled at its start as the gateway's pool is; returns the server's targets and
/// the client's SOCKS address.
async fn proxies_with_pool(
    net: &Arc<MemoryNet>,
    at: &str,
    handshake_timeout: Duration,
    metrics: Option<Arc<Metrics>>,
    warm: &Arc<Warm>,
) -> (Targets, SocketAddr) {
    let mut server = Server::new(
        net,
        at,
        Egress::Allow(AllowList(vec!["198.18.4.0/24".parse().unwrap()])),
    );
    server.sessions = 16;
    server.metrics = metrics;
    server.accept = AcceptOptions {
        handshake_timeout,
        ..accept_options()
    };
    let targets = server.start();
    let opts = ClientOptions {
        warm: Some(warm.clone() as Arc<dyn Ahead>),
        buffer: nena_transport::stream::PROXY_BUF,
        ..net.options(addr(at), vec![Mode::Aead])
    };
    warm.fill(&opts);
    let front = client_with(opts, Entry::Socks5 { users: None }, None, 16).await;
    (targets, front)
}
