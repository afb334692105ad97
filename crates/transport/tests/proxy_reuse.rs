//! Sessions reused flow after flow (wire `OP_REUSE`, the flow-end record), over the
//! in-memory pair (`testing::pair`) with the real session body of `nena proxy server`: the
//! server takes the client's next open request on the same session after a flow that ended
//! with flow-end records both ways, only in `aead`, and ends the session cleanly when the
//! client does or when it stops. No socket, namespace or root. The kernel's side (one MPTCP
//! connection for many SOCKS flows through the real proxy client) is
//! `net_reuse.rs`.

use nena_proto::Mode;
use nena_transport::ops::stop::{stop_pair, StopSignal};
use nena_transport::proxy::socks::{AllowList, Host, Rep, Target};
use nena_transport::proxy::Egress;
use nena_transport::testing::pair::{open_request, pair, ClientEnd, ProxyServer};
use nena_transport::wire::{ConnectRequest, Service};
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn target(s: &str) -> Target {
    let a: SocketAddr = s.parse().unwrap();
    Target {
        host: Host::Ip(a.ip()),
        port: a.port(),
    }
}

fn allow_all_test_targets() -> ProxyServer {
    ProxyServer::new(Egress::Allow(AllowList(vec!["198.18.0.0/24"
        .parse()
        .unwrap()])))
}

fn asking(to: Target) -> ConnectRequest {
    ConnectRequest {
        reuse: true,
        ..ConnectRequest::to(to)
    }
}

/// The open request asking for reuse, and the server's ok.
async fn open_asking(c: &mut ClientEnd, to: Target) {
    let reply = open_request(c, asking(to)).await.unwrap();
    assert_eq!(reply.code, Rep::Succeeded, "{}", reply.msg);
}

/// One flow of a reused session as the proxy client makes it: the open request asking for
/// reuse, `msg` sent and the client's direction ended with the flow-end record, the echo
/// read to the server's flow end. Returns the echo and whether the server ended its
/// direction with a flow-end record (not its closing record).
async fn flow(c: &mut ClientEnd, to: Target, msg: &[u8]) -> (Vec<u8>, bool) {
    open_asking(c, to).await;
    let (r, w) = (&mut c.reader, &mut c.writer);
    let send = async {
        w.write_all(msg).await.unwrap();
        w.end_flow().await.unwrap();
    };
    let mut back = Vec::new();
    let recv = r.read_to_end(&mut back);
    let ((), got) = tokio::join!(send, recv);
    got.unwrap();
    let flow_ended = c.reader.flow_ended();
    if flow_ended {
        c.reader.next_flow();
        c.writer.next_flow();
    }
    (back, flow_ended)
}

/// Three flows to two targets on one session, byte-exact both ways, then the client's end:
/// the server connected each target once per flow, counted one session, and its line says
/// how many flows it carried.
#[tokio::test]
async fn a_session_carries_flow_after_flow_when_the_client_asks() {
    let server = allow_all_test_targets();
    let p = pair(Mode::Aead).await.unwrap();
    let mut c = p.client;
    let serve = server.serve(p.server, StopSignal::never());
    let big: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let msgs = [b"first flow".to_vec(), big, b"third".to_vec()];
    let dests = ["198.18.0.9:80", "198.18.0.10:443", "198.18.0.9:80"];
    let client = async {
        for (msg, to) in msgs.iter().zip(dests) {
            let (back, reused) = flow(&mut c, target(to), msg).await;
            assert_eq!(&back, msg, "the echo of the flow to {to}");
            assert!(
                reused,
                "the server ended its direction of the flow, not the session"
            );
        }
        // The client gives the session up: its closing record, then the server's.
        c.writer.shutdown().await.unwrap();
        let mut rest = Vec::new();
        c.reader.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty());
        assert!(!c.reader.flow_ended(), "a session's end is not a flow's");
    };
    let (served, ()) = tokio::join!(serve, client);
    let line = served.unwrap();
    assert!(line.contains("after 3 flows"), "{line}");
    assert!(line.contains("200015 B in, 200015 B out"), "{line}");
    let conns = server.targets.take();
    let addrs: Vec<String> = conns.iter().map(|t| t.addr.to_string()).collect();
    assert_eq!(addrs, dests);
    for (conn, msg) in conns.into_iter().zip(&msgs) {
        assert_eq!(
            &conn.received.await.unwrap(),
            msg,
            "what the target received"
        );
    }
    let ok = "nena_sessions_total{role=\"proxy_server\",mode=\"aead\",outcome=\"ok\"}";
    assert_eq!(server.counter(ok), 1, "one session for three flows");
}

/// Reuse needs records: a client that asks in `stream` or `plain` has its session ended with
/// its flow, as without the bit (neither side could say where a flow ends).
#[tokio::test]
async fn reuse_is_honoured_only_in_aead() {
    for mode in [Mode::Stream, Mode::Plain] {
        let server = allow_all_test_targets();
        let p = pair(mode).await.unwrap();
        let mut c = p.client;
        let serve = server.serve(p.server, StopSignal::never());
        let client = async {
            open_asking(&mut c, target("198.18.0.9:80")).await;
            assert!(
                c.writer.end_flow().await.is_err(),
                "{mode}: no flow-end record"
            );
            c.writer.write_all(b"one flow").await.unwrap();
            c.writer.shutdown().await.unwrap();
            let mut back = Vec::new();
            c.reader.read_to_end(&mut back).await.unwrap();
            assert_eq!(back, b"one flow", "{mode}");
            assert!(!c.reader.flow_ended(), "{mode}");
        };
        let (served, ()) = tokio::join!(serve, client);
        let line = served.unwrap();
        assert!(!line.contains(" flows"), "{mode}: {line}");
    }
}

/// A client that asked for reuse but ends the session with its flow (its closing record
/// in place of the flow-end record, as a proxy client does with a session too old to keep)
/// has the server end the session too, with the flow.
#[tokio::test]
async fn a_client_may_end_the_session_with_its_flow() {
    let server = allow_all_test_targets();
    let p = pair(Mode::Aead).await.unwrap();
    let mut c = p.client;
    let serve = server.serve(p.server, StopSignal::never());
    let client = async {
        open_asking(&mut c, target("198.18.0.9:80")).await;
        c.writer.write_all(b"only flow").await.unwrap();
        c.writer.shutdown().await.unwrap();
        let mut back = Vec::new();
        c.reader.read_to_end(&mut back).await.unwrap();
        assert_eq!(back, b"only flow");
        // The server ended its direction of the flow with a flow-end record (it did not
        // know yet); its closing record follows.
        assert!(c.reader.flow_ended());
        c.reader.next_flow();
        let mut rest = Vec::new();
        c.reader.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty() && !c.reader.flow_ended());
    };
    let (served, ()) = tokio::join!(serve, client);
    let line = served.unwrap();
    assert!(line.contains("9 B in, 9 B out"), "{line}");
}

/// A proxy server that begins to stop (its grace period, `StopSwitch::wind_down`, before any
/// abort) while a reused session waits for its next flow ends the session cleanly at once
/// (its closing record): the client's next read is a clean end, not an abort, and the server
/// counts the session as done.
#[tokio::test]
async fn a_stopping_server_ends_a_waiting_session_cleanly() {
    // A server that would wait a minute for the next open request: the session must end on
    // the stop, not on that wait.
    let server = ProxyServer {
        limit: std::time::Duration::from_secs(60),
        ..allow_all_test_targets()
    };
    let p = pair(Mode::Aead).await.unwrap();
    let (switch, signal) = stop_pair();
    let mut c = p.client;
    let serve = server.serve(p.server, signal);
    let client = async {
        let (back, reused) = flow(&mut c, target("198.18.0.9:80"), b"ping").await;
        assert_eq!(back, b"ping");
        assert!(reused);
        switch.wind_down();
        let mut rest = Vec::new();
        c.reader.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty() && !c.reader.flow_ended());
    };
    let (served, ()) = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        tokio::join!(serve, client)
    })
    .await
    .expect("the waiting session ended on the stop");
    let line = served.unwrap();
    assert!(line.contains("after 1 flow ("), "{line}");
}

/// The bit is a stream request's: a DNS or datagram request with it is no request (a
/// server answers nothing and the session ends), and a stream request keeps it through the
/// wire both ways.
#[test]
fn the_reuse_bit_belongs_to_stream_requests() {
    let req = asking(target("198.18.0.9:80"));
    let wire = req.encode();
    assert_eq!(
        wire[4],
        nena_transport::wire::OP_CONNECT | nena_transport::wire::OP_REUSE
    );
    let (back, used) = ConnectRequest::decode(&wire).unwrap().unwrap();
    assert_eq!((back, used), (req, wire.len()));
    let mut dns = ConnectRequest::of(Service::Dns).encode().to_vec();
    assert_eq!(
        ConnectRequest {
            reuse: true,
            ..ConnectRequest::of(Service::Dns)
        }
        .encode()
        .to_vec(),
        dns,
        "not encoded for a DNS request"
    );
    dns[4] |= nena_transport::wire::OP_REUSE;
    assert!(ConnectRequest::decode(&dns).is_err());
}
