//! `nena run`'s carrier, the production proxy client with its redirected entry
//! (`Entry::Redirected`: what the cgroup's BPF programs hand it), over the in-memory network
//! (`testing::net`) to the production proxy server (`run_server_on`): the application's
//! connections arrive on loopback TCP as the programs redirect them, each one's original
//! destination from a lookup that stands in for the programs' map; one to port 53 is DNS
//! over TCP, answered by the responder through nena. No cgroup, BPF, namespace or root; what
//! needs them stays in crates/cli/tests/cli/transfer_run*.rs.

use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use nena_proto::Mode;
use nena_transport::dns::{read_frame, write_frame};
use nena_transport::proxy::carry::responder::Responder;
use nena_transport::proxy::client::{run_client_with, Entry, OriginalDst};
use nena_transport::proxy::listen::ProxyLimits;
use nena_transport::proxy::server::{run_server_on, PlaneSetting};
use nena_transport::proxy::socks::AllowList;
use nena_transport::proxy::Egress;
use nena_transport::testing::net::{accept_options, MemoryNet};
use nena_transport::testing::pair::{in_band_modes, Dir, Targets};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

const SERVER: &str = "198.18.3.2:7100";

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn limits() -> ProxyLimits {
    ProxyLimits {
        max_sessions: 16,
        max_connecting: 4,
        grace: Duration::from_secs(1),
        token: None,
        metrics: None,
        datagram_plane: false,
    }
}

/// A resolver on loopback UDP answering `A 198.18.3.2` for every name.
async fn resolver() -> SocketAddr {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let at = sock.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = [0u8; 1500];
        while let Ok((len, peer)) = sock.recv_from(&mut buf).await {
            let q = Message::from_vec(&buf[..len]).unwrap();
            let mut a = Message::response(q.metadata.id, OpCode::Query);
            a.add_query(q.queries[0].clone());
            a.add_answer(Record::from_rdata(
                q.queries[0].name().clone(),
                60,
                RData::A(Ipv4Addr::new(198, 18, 3, 2).into()),
            ));
            let _ = sock.send_to(&a.to_vec().unwrap(), peer).await;
        }
    });
    at
}

/// The proxy server (`--allow 198.18.3.0/24`, in-memory targets, DNS asked of `ns`) and
/// `nena run`'s proxy client in `mode`, its original destinations from `dsts` (the
/// application's local address -> where it connected); returns the targets and the address
/// the redirected connections arrive at.
async fn carrier(
    net: &Arc<MemoryNet>,
    mode: Mode,
    ns: SocketAddr,
    dsts: Arc<Mutex<Vec<(SocketAddr, SocketAddr)>>>,
) -> (Targets, SocketAddr) {
    let mut targets = Targets::default();
    targets.resolver = Some(ns);
    let accept = accept_options();
    let listener = net.listen(addr(SERVER));
    let t = targets.clone();
    let allow = AllowList(vec!["198.18.3.0/24".parse().unwrap()]);
    tokio::spawn(async move {
        run_server_on(
            listener,
            Egress::Allow(allow),
            accept,
            limits(),
            PlaneSetting::default(),
            t,
        )
        .await
        .unwrap()
    });
    let opts = Arc::new(net.options(addr(SERVER), vec![mode]));
    let dns = Arc::new(Responder::new(
        opts.clone(),
        Arc::new(tokio::sync::Semaphore::new(4)),
        None,
    ));
    let lookup = OriginalDst(Arc::new(move |peer| {
        let d = dsts.lock().unwrap();
        d.iter().find(|(p, _)| *p == peer).map(|(_, dst)| *dst)
    }));
    let entry = Entry::Redirected { lookup, dns };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let client_opts = (*opts).clone();
    tokio::spawn(async move {
        run_client_with(addr("127.0.0.1:0"), entry, client_opts, limits(), |a| {
            let _ = tx.send(a);
        })
        .await
        .unwrap()
    });
    (targets, rx.await.expect("the proxy client's listener"))
}

/// A connection "redirected" to the carrier with `dst` as its original destination.
async fn redirected(
    at: SocketAddr,
    dst: SocketAddr,
    dsts: &Mutex<Vec<(SocketAddr, SocketAddr)>>,
) -> TcpStream {
    // The local address is known only once bound: bind, record, then connect (as the
    // programs record the destination at connect()).
    let s = tokio::net::TcpSocket::new_v4().unwrap();
    s.bind(addr("127.0.0.1:0")).unwrap();
    dsts.lock().unwrap().push((s.local_addr().unwrap(), dst));
    s.connect(at).await.unwrap()
}

/// A command's TCP connection reaches its original destination through nena and its
/// answer comes back byte-exact, in every in-band mode; its request never crosses the wire
/// as it is in the cryptographic modes and kato (it does in plain: the check can fail).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirected_connection_reaches_its_original_destination_in_every_mode() {
    let ns = resolver().await;
    for mode in in_band_modes() {
        let net = MemoryNet::new();
        let dsts = Arc::new(Mutex::new(Vec::new()));
        let (targets, at) = carrier(&net, mode, ns, dsts.clone()).await;
        let dst = addr("198.18.3.2:8000");
        let mut app = redirected(at, dst, &dsts).await;
        let request = b"GET /letter.txt HTTP/1.0\r\nHost: files.example.test\r\n\r\n";
        app.write_all(request).await.unwrap();
        app.shutdown().await.unwrap();
        let mut back = Vec::new();
        app.read_to_end(&mut back).await.unwrap();
        assert_eq!(back, request, "{mode}: the echo");
        let conns = targets.take();
        assert_eq!(conns.len(), 1, "{mode}");
        assert_eq!(conns[0].addr, dst, "{mode}: the original destination");
        let crossed = net.taps()[0].crossed(Dir::ToServer);
        let clear = crossed.windows(15).any(|w| w == b"GET /letter.txt");
        assert_eq!(
            clear,
            mode == Mode::Plain,
            "{mode}: the request in the clear"
        );
    }
}

/// A command's DNS over TCP (a connection to port 53) is answered through nena by the
/// proxy server's resolver, never connected to the resolver it named: two queries on the
/// one connection, each answered under its own ID; no target connected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_over_tcp_to_port_53_is_answered_through_nena() {
    let ns = resolver().await;
    let net = MemoryNet::new();
    let dsts = Arc::new(Mutex::new(Vec::new()));
    let (targets, at) = carrier(&net, Mode::Aead, ns, dsts.clone()).await;
    // The resolver the command named: a WLAN's, never reached.
    let mut app = redirected(at, addr("198.18.1.1:53"), &dsts).await;
    for id in [11u16, 12] {
        let mut m = Message::new(id, MessageType::Query, OpCode::Query);
        m.metadata.recursion_desired = true;
        m.add_query(Query::query(
            Name::from_ascii("files.example.test.").unwrap(),
            RecordType::A,
        ));
        write_frame(&mut app, &m.to_vec().unwrap()).await.unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(10), read_frame(&mut app))
            .await
            .expect("an answer within 10 s")
            .unwrap()
            .expect("an answer, not the end");
        let a = Message::from_vec(&answer).unwrap();
        assert_eq!(a.metadata.id, id);
        assert_eq!(a.metadata.response_code, ResponseCode::NoError);
        assert_eq!(a.answers.len(), 1);
    }
    assert!(targets.connected().is_empty(), "nothing connected for DNS");
}
