//! DNS through nena, the production code of both ends over the in-memory network
//! (`testing::net`): the responder that answers `nena run`'s and the gateway's LAN's queries
//! (`proxy::carry::responder::Responder`) opens its DNS sessions (op 6) with `conn::connect`
//! over a `MemoryNet`; the proxy server (`run_server_on`) asks a resolver of the test's own on
//! loopback UDP (`Targets::resolver`). No namespace or root. What needs the kernel (the BPF
//! redirection of `nena run`, the gateway's TPROXY, the resolvers of a lab host) stays in
//! crates/cli/tests/cli/transfer_run*.rs, transfer_gateway*.rs and transfer_names.rs.

use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use nena_proto::Mode;
use nena_transport::proxy::carry::responder::Responder;
use nena_transport::proxy::listen::ProxyLimits;
use nena_transport::proxy::server::{run_server_on, PlaneSetting};
use nena_transport::proxy::socks::AllowList;
use nena_transport::proxy::Egress;
use nena_transport::testing::net::{accept_options, MemoryNet};
use nena_transport::testing::pair::{in_band_modes, Dir, Targets};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::UdpSocket;

const SERVER: &str = "198.18.3.2:7100";

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// What the test's resolver does with a query.
#[derive(Clone, Copy)]
enum Resolver {
    /// Answers `A 198.18.3.2` for every name.
    Answers,
    /// Answers with an ID other than the query's (an answer nena must not pass on).
    WrongId,
}

/// A resolver on loopback UDP; returns its address and how many queries it got.
async fn resolver(kind: Resolver) -> (SocketAddr, Arc<std::sync::atomic::AtomicU64>) {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let at = sock.local_addr().unwrap();
    let asked = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let n = asked.clone();
    tokio::spawn(async move {
        let mut buf = [0u8; 1500];
        loop {
            let Ok((len, peer)) = sock.recv_from(&mut buf).await else {
                return;
            };
            n.fetch_add(1, Relaxed);
            let q = Message::from_vec(&buf[..len]).unwrap();
            let id = match kind {
                Resolver::Answers => q.metadata.id,
                Resolver::WrongId => q.metadata.id.wrapping_add(1),
            };
            let mut a = Message::response(id, OpCode::Query);
            a.metadata.recursion_available = true;
            a.add_query(q.queries[0].clone());
            a.add_answer(Record::from_rdata(
                q.queries[0].name().clone(),
                60,
                RData::A(Ipv4Addr::new(198, 18, 3, 2).into()),
            ));
            let _ = sock.send_to(&a.to_vec().unwrap(), peer).await;
        }
    });
    (at, asked)
}

/// The proxy server on the memory net, `--allow 198.18.3.0/24`, its DNS asked of `ns`.
fn proxy_server(net: &Arc<MemoryNet>, ns: SocketAddr) {
    let mut targets = Targets::default();
    targets.resolver = Some(ns);
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
    let allow = AllowList(vec!["198.18.3.0/24".parse().unwrap()]);
    tokio::spawn(async move {
        run_server_on(
            listener,
            Egress::Allow(allow),
            accept,
            limits,
            PlaneSetting::default(),
            targets,
        )
        .await
        .unwrap()
    });
}

fn a_query(name: &str, id: u16) -> Vec<u8> {
    let mut m = Message::new(id, MessageType::Query, OpCode::Query);
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
    m.to_vec().unwrap()
}

fn responder(net: &Arc<MemoryNet>, mode: Mode) -> Responder {
    let opts = net.options(addr(SERVER), vec![mode]);
    Responder::new(
        Arc::new(opts),
        Arc::new(tokio::sync::Semaphore::new(4)),
        None,
    )
}

/// A query is answered by the proxy server's resolver, through a nena session, in every
/// in-band mode: the application gets the resolver's answer under its own ID; a second
/// query rides the session kept from the first (one connection for both); in the
/// cryptographic modes and kato the name never crosses the wire as it is (it does in plain:
/// the check can fail).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_are_answered_through_one_kept_session_in_every_mode() {
    for mode in in_band_modes() {
        let (ns, asked) = resolver(Resolver::Answers).await;
        let net = MemoryNet::new();
        proxy_server(&net, ns);
        let r = responder(&net, mode);
        for (i, name) in ["letters.example.test.", "parcels.example.test."]
            .iter()
            .enumerate()
        {
            let id = 4711 + i as u16;
            let answer = r.answer(&a_query(name, id)).await.expect("an answer");
            let m = Message::from_vec(&answer).unwrap();
            assert_eq!(m.metadata.id, id, "{mode}");
            assert_eq!(m.metadata.response_code, ResponseCode::NoError, "{mode}");
            let ips: Vec<_> = m
                .answers
                .iter()
                .filter_map(|rr| match &rr.data {
                    RData::A(a) => Some(a.0),
                    _ => None,
                })
                .collect();
            assert_eq!(ips, vec![Ipv4Addr::new(198, 18, 3, 2)], "{mode}: {name}");
        }
        assert_eq!(
            asked.load(Relaxed),
            2,
            "{mode}: the resolver was asked twice"
        );
        assert_eq!(r.stats.answered.load(Relaxed), 2, "{mode}");
        let taps = net.taps();
        assert_eq!(
            taps.len(),
            1,
            "{mode}: the second query took the kept session"
        );
        let up = taps[0].crossed(Dir::ToServer);
        let clear = up.windows(7).any(|w| w == b"letters");
        assert_eq!(clear, mode == Mode::Plain, "{mode}: the name in the clear");
        r.close(Duration::from_secs(2)).await;
    }
}

/// A resolver's answer that does not match the query (another ID) never reaches the
/// application: it gets SERVFAIL under its own ID, and the failure is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_that_does_not_match_is_servfail() {
    let (ns, asked) = resolver(Resolver::WrongId).await;
    let net = MemoryNet::new();
    proxy_server(&net, ns);
    let r = responder(&net, Mode::Aead);
    let answer = r
        .answer(&a_query("letters.example.test.", 99))
        .await
        .expect("an answer");
    let m = Message::from_vec(&answer).unwrap();
    assert_eq!(m.metadata.id, 99);
    assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
    assert!(
        m.answers.is_empty(),
        "nothing of the wrong answer passed on"
    );
    assert!(asked.load(Relaxed) >= 1, "the resolver was asked");
}

/// A message that is no query is dropped (no answer, nothing carried); a proxy server that
/// is not there makes the application's query SERVFAIL at once, not silence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn junk_is_dropped_and_no_server_is_servfail() {
    let net = MemoryNet::new();
    let r = responder(&net, Mode::Aead);
    assert!(r.answer(&[0xff; 20]).await.is_none());
    assert_eq!(r.stats.dropped.load(Relaxed), 1);
    assert!(net.taps().is_empty(), "nothing dialed for junk");
    let answer = r
        .answer(&a_query("letters.example.test.", 7))
        .await
        .expect("an answer");
    let m = Message::from_vec(&answer).unwrap();
    assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
    assert_eq!(r.stats.failed.load(Relaxed), 1);
}
