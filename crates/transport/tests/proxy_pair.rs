//! The proxy server's sessions over the in-memory pair (`testing::pair`): the real nena
//! handshake, the real session body of `nena proxy server` (opening, access token,
//! `--allow`/`--forward`, relay, counters), with in-memory targets. No socket, namespace or
//! root: these run anywhere `cargo test` does. Each mirrors a lab test of
//! crates/cli/tests/cli/ (named in its doc), which stays for the kernel's side.

use nena_proto::{AbortReason, Mode, ServerConfig, SessionError};
use nena_transport::ops::access::DENIED;
use nena_transport::ops::stop::{stop_pair, StopSignal};
use nena_transport::proxy::socks::{AllowList, Host, Rep, Target};
use nena_transport::proxy::Egress;
use nena_transport::stream::handshake::server_handshake;
use nena_transport::testing::pair::{
    in_band_modes, open, open_request, pair, wires, Dir, ProxyServer,
};
use nena_transport::wire::{AccessToken, ConnectReply, ConnectRequest, Service};
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// A `--forward` proxy session relays bytes byte-exact both ways, with half-closes passed
/// on (the server's half of net_forward::clean_ends_through_both_proxies).
#[tokio::test]
async fn a_forward_session_relays_byte_exact_both_ways() {
    for mode in [Mode::Aead, Mode::Plain] {
        let p = pair(mode).await.unwrap();
        let server = ProxyServer::new(Egress::Forward(addr("198.51.100.9:7")));
        let mut c = p.client;
        let serve = server.serve(p.server, StopSignal::never());
        let client = async {
            let reply = open(&mut c, None, None).await.unwrap();
            assert_eq!(reply.code, Rep::Succeeded, "{mode}: {}", reply.msg);
            let msg: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
            let (r, w) = (&mut c.reader, &mut c.writer);
            let send = async {
                w.write_all(&msg).await.unwrap();
                w.shutdown().await.unwrap();
            };
            let mut back = Vec::new();
            let recv = r.read_to_end(&mut back);
            let ((), got) = tokio::join!(send, recv);
            got.unwrap();
            assert_eq!(back, msg, "{mode}: the echo");
            msg
        };
        let (served, msg) = tokio::join!(serve, client);
        let line = served.unwrap();
        assert!(line.contains("200000 B in, 200000 B out"), "{line}");
        let conns = server.targets.take();
        assert_eq!(conns.len(), 1);
        assert_eq!(conns[0].addr, addr("198.51.100.9:7"));
        let got = conns.into_iter().next().unwrap().received.await.unwrap();
        assert_eq!(got, msg, "{mode}: what the target received");
        let ok =
            format!("nena_sessions_total{{role=\"proxy_server\",mode=\"{mode}\",outcome=\"ok\"}}");
        assert_eq!(server.counter(&ok), 1, "{mode}");
        assert_eq!(server.stats.sessions_ok.load(Relaxed), 1);
    }
}

fn target(s: &str) -> Target {
    let a = addr(s);
    Target {
        host: Host::Ip(a.ip()),
        port: a.port(),
    }
}

fn allow(rules: &[&str]) -> Egress {
    Egress::Allow(AllowList(
        rules.iter().map(|r| r.parse().unwrap()).collect(),
    ))
}

/// `nena_sessions_total` of the proxy server for `mode` and `outcome`.
fn sessions(mode: Mode, outcome: &str) -> String {
    format!("nena_sessions_total{{role=\"proxy_server\",mode=\"{mode}\",outcome=\"{outcome}\"}}")
}

fn refusals(cause: &str) -> String {
    format!("nena_refusals_total{{role=\"proxy_server\",cause=\"{cause}\"}}")
}

const INTEGRITY: &str = "nena_integrity_failures_total{role=\"proxy_server\"}";

/// Opens a session of a fresh pair with `server`, sending `token`, asking for `to`; returns
/// the reply and what the server's session ended with.
async fn ask(
    server: &ProxyServer,
    mode: Mode,
    to: Option<Target>,
    token: Option<AccessToken>,
) -> (ConnectReply, Result<String, String>) {
    let p = pair(mode).await.unwrap();
    let mut c = p.client;
    let serve = server.serve(p.server, StopSignal::never());
    let client = async {
        let reply = open(&mut c, to, token).await.unwrap();
        if reply.code == Rep::Succeeded {
            // A clean end: nothing sent, nothing echoed.
            c.writer.shutdown().await.unwrap();
            let mut back = Vec::new();
            c.reader.read_to_end(&mut back).await.unwrap();
            assert!(back.is_empty());
        }
        // A refused client's end, as the proxy client leaves it.
        drop(c);
        reply
    };
    let (served, reply) = tokio::join!(serve, client);
    (reply, served)
}

/// The access token is checked before anything is connected: a session without it, or with
/// another one, is refused with the reply's code and reason, the connector is never called,
/// and `--metrics` counts it refused, cause access_denied; the session with the token is
/// connected (the server's half of
/// net_forward::the_proxy_server_checks_the_access_token_before_it_connects and
/// net_socks::the_access_token_comes_before_the_allow_rules, with its counters).
#[tokio::test]
async fn the_access_token_is_checked_before_anything_is_connected() {
    let token = AccessToken::new(b"the right token, long enough".to_vec()).unwrap();
    let wrong = AccessToken::new(b"another token, as long as it".to_vec()).unwrap();
    for egress in [
        Egress::Forward(addr("198.51.100.9:7")),
        allow(&["198.51.100.0/24"]),
    ] {
        let mut server = ProxyServer::new(egress.clone());
        server.token = Some(token.clone());
        let to = match egress {
            Egress::Forward(_) => None,
            Egress::Allow(_) => Some(target("198.51.100.9:7")),
        };
        for given in [None, Some(wrong.clone())] {
            let (reply, served) = ask(&server, Mode::Aead, to.clone(), given).await;
            assert_eq!(reply.code, Rep::NotAllowed);
            assert_eq!(reply.msg, DENIED);
            let e = served.unwrap_err();
            assert!(e.contains("refused") && e.contains(DENIED), "{e}");
        }
        assert!(
            server.targets.connected().is_empty(),
            "connected without the token"
        );
        assert_eq!(server.counter(&refusals("access_denied")), 2);
        assert_eq!(server.counter(&sessions(Mode::Aead, "refused")), 2);
        assert_eq!(server.stats.sessions_failed.load(Relaxed), 2);
        let (reply, served) = ask(&server, Mode::Aead, to.clone(), Some(token.clone())).await;
        assert_eq!(reply.code, Rep::Succeeded, "{}", reply.msg);
        served.unwrap();
        assert_eq!(server.targets.connected(), vec![addr("198.51.100.9:7")]);
        assert_eq!(server.counter(&sessions(Mode::Aead, "ok")), 1);
    }
}

/// An `--allow` proxy connects what its rules permit and refuses the rest with NotAllowed,
/// counted (cause not_allowed), without connecting; a target that refuses the connection is
/// passed on as its SOCKS code; a `--forward` proxy refuses a request that names a target,
/// and an `--allow` proxy one that names none (mirrors
/// net_socks::socks5_through_both_proxies_with_allow_rules and
/// net_socks::a_proxy_server_without_allow_refuses_every_request, the server's half).
#[tokio::test]
async fn allow_rules_decide_what_is_connected() {
    let mut server = ProxyServer::new(allow(&["198.51.100.0/24:80-81"]));
    server.targets.refuse = vec![addr("198.51.100.6:81")];
    let (reply, served) = ask(&server, Mode::Aead, Some(target("198.51.100.5:80")), None).await;
    assert_eq!(reply.code, Rep::Succeeded, "{}", reply.msg);
    served.unwrap();
    for (to, code, why) in [
        (
            "203.0.113.1:80",
            Rep::NotAllowed,
            "is not permitted by --allow",
        ),
        (
            "198.51.100.5:443",
            Rep::NotAllowed,
            "is not permitted by --allow",
        ),
        ("198.51.100.6:81", Rep::ConnectionRefused, "198.51.100.6:81"),
    ] {
        let (reply, served) = ask(&server, Mode::Plain, Some(target(to)), None).await;
        assert_eq!(reply.code, code, "{to}: {}", reply.msg);
        assert!(reply.msg.contains(why), "{to}: {}", reply.msg);
        let e = served.unwrap_err();
        assert!(e.contains(&format!("CONNECT {to} refused")), "{e}");
    }
    let (reply, _) = ask(&server, Mode::Plain, None, None).await;
    assert_eq!(reply.code, Rep::NotAllowed);
    assert!(
        reply.msg.contains("has no --forward target"),
        "{}",
        reply.msg
    );
    assert_eq!(server.targets.connected(), vec![addr("198.51.100.5:80")]);
    assert_eq!(server.counter(&refusals("not_allowed")), 3);
    assert_eq!(server.counter(&refusals("connection_refused")), 1);
    assert_eq!(server.counter(&sessions(Mode::Plain, "refused")), 4);

    // No rule: nothing at all.
    let none = ProxyServer::new(allow(&[]));
    let (reply, _) = ask(&none, Mode::Aead, Some(target("198.51.100.5:80")), None).await;
    assert_eq!(reply.code, Rep::NotAllowed);
    assert!(none.targets.connected().is_empty());

    let forward = ProxyServer::new(Egress::Forward(addr("198.51.100.9:7")));
    let (reply, served) = ask(&forward, Mode::Aead, Some(target("198.51.100.5:80")), None).await;
    assert_eq!(reply.code, Rep::NotAllowed);
    assert!(
        reply.msg.contains("takes no request for 198.51.100.5:80"),
        "{}",
        reply.msg
    );
    assert!(served.unwrap_err().contains("refused"));
    assert!(forward.targets.connected().is_empty());
    assert_eq!(forward.counter(&refusals("not_allowed")), 1);
}

/// One byte of the client's first record (its open request) flipped in flight: the server
/// refuses it as altered and tells the client so (AbortReason::Altered, which makes the
/// proxy client try again), connects nothing, and counts an integrity failure (mirrors
/// net_tamper::an_altered_forward_opening_is_retried_with_the_applications_first_bytes,
/// the server's half).
#[tokio::test]
async fn an_altered_open_request_is_refused_and_the_client_told() {
    let server = ProxyServer::new(Egress::Forward(addr("198.51.100.9:7")));
    let p = pair(Mode::Aead).await.unwrap();
    let before = p.tap.len(Dir::ToServer);
    p.tap.flip_next_write(Dir::ToServer, 1);
    let mut c = p.client;
    let serve = server.serve(p.server, StopSignal::never());
    let client = async {
        let e = open(&mut c, None, None).await.unwrap_err();
        drop(c);
        e
    };
    let (served, e) = tokio::join!(serve, client);
    assert!(p.tap.flipped(Dir::ToServer).unwrap() > before);
    assert_eq!(
        session_failure(&e),
        Some(&SessionError::PeerAborted {
            reason: AbortReason::Altered
        }),
        "{e:#}"
    );
    let e = served.unwrap_err();
    assert!(e.contains("the client was told and may retry"), "{e}");
    assert!(server.targets.connected().is_empty());
    assert_eq!(server.counter(INTEGRITY), 1);
    assert_eq!(
        server.counter(&sessions(Mode::Aead, "integrity_failure")),
        1
    );
}

/// A byte flipped mid-relay: in `aead` the server's session ends with an integrity failure,
/// nothing of the altered record reaches the target, the client's session does not end
/// cleanly, and the outcome is counted integrity_failure (mirrors
/// transfer_tamper::an_altered_byte_on_the_untrusted_path, for the proxy). In `stream`
/// (no integrity) the same flip reaches the target: the tap did alter it.
#[tokio::test]
async fn a_byte_flipped_mid_relay_ends_the_session_in_aead() {
    for mode in [Mode::Aead, Mode::Stream] {
        let server = ProxyServer::new(Egress::Forward(addr("198.51.100.9:7")));
        let p = pair(mode).await.unwrap();
        let tap = p.tap.clone();
        let mut c = p.client;
        let serve = server.serve(p.server, StopSignal::never());
        let client = async {
            let reply = open(&mut c, None, None).await.unwrap();
            assert_eq!(reply.code, Rep::Succeeded);
            c.writer.write_all(b"first part").await.unwrap();
            c.writer.flush().await.unwrap();
            let mut echo = [0u8; 10];
            c.reader.read_exact(&mut echo).await.unwrap();
            assert_eq!(&echo, b"first part");
            tap.flip_next_write(Dir::ToServer, 1);
            c.writer.write_all(b"second part").await.unwrap();
            c.writer.flush().await.unwrap();
            let _ = c.writer.shutdown().await;
            let mut rest = Vec::new();
            let end = c.reader.read_to_end(&mut rest).await;
            (rest, end)
        };
        let (served, (rest, end)) = tokio::join!(serve, client);
        assert!(tap.flipped(Dir::ToServer).is_some(), "{mode}");
        let received = server.targets.take().pop().unwrap().received.await.unwrap();
        if mode == Mode::Aead {
            let e = served.unwrap_err();
            assert!(e.contains("integrity"), "{e}");
            assert_eq!(
                received, b"first part",
                "an altered byte reached the target"
            );
            assert!(end.is_err(), "the client's session ended cleanly: {rest:?}");
            assert_eq!(server.counter(INTEGRITY), 1);
            assert_eq!(server.counter(&sessions(mode, "integrity_failure")), 1);
        } else {
            served.unwrap();
            assert_eq!(received.len(), b"first partsecond part".len());
            assert_ne!(received, b"first partsecond part", "{mode}: not altered");
            assert_eq!(rest, received[10..], "{mode}");
        }
    }
}

/// A stopping proxy server aborts the sessions it still relays: the session's outcome is
/// aborted, and an `aead` client is told why (AbortReason::ShuttingDown) (mirrors
/// transfer_proxy::stopping_a_proxy_resets_its_sessions_or_lets_them_finish_within_the_grace,
/// the server's half).
#[tokio::test]
async fn a_stopping_proxy_server_tells_its_aead_client() {
    let server = ProxyServer::new(Egress::Forward(addr("198.51.100.9:7")));
    let p = pair(Mode::Aead).await.unwrap();
    let (switch, signal) = stop_pair();
    let mut c = p.client;
    let serve = server.serve(p.server, signal);
    let client = async {
        let reply = open(&mut c, None, None).await.unwrap();
        assert_eq!(reply.code, Rep::Succeeded);
        c.writer.write_all(b"ping").await.unwrap();
        c.writer.flush().await.unwrap();
        let mut echo = [0u8; 4];
        c.reader.read_exact(&mut echo).await.unwrap();
        switch.stop();
        let mut rest = Vec::new();
        let e = c.reader.read_to_end(&mut rest).await.unwrap_err();
        drop(c);
        e
    };
    let (served, e) = tokio::join!(serve, client);
    let e = nena_transport::Error::from(e);
    assert_eq!(
        session_failure(&e),
        Some(&SessionError::PeerAborted {
            reason: AbortReason::ShuttingDown
        }),
        "{e:#}"
    );
    assert!(served.unwrap_err().contains("shutting down"));
    assert_eq!(server.counter(&sessions(Mode::Aead, "aborted")), 1);
}

/// Every in-band mode opens and relays over the pair.
#[tokio::test]
async fn every_in_band_mode_relays() {
    for mode in in_band_modes() {
        let server = ProxyServer::new(Egress::Forward(addr("198.51.100.9:7")));
        let p = pair(mode).await.unwrap();
        let mut c = p.client;
        let serve = server.serve(p.server, StopSignal::never());
        let client = async {
            assert_eq!(open(&mut c, None, None).await.unwrap().code, Rep::Succeeded);
            c.writer.write_all(b"all modes").await.unwrap();
            c.writer.shutdown().await.unwrap();
            let mut back = Vec::new();
            c.reader.read_to_end(&mut back).await.unwrap();
            back
        };
        let (served, back) = tokio::join!(serve, client);
        served.unwrap();
        assert_eq!(back, b"all modes", "{mode}");
        assert_eq!(server.counter(&sessions(mode, "ok")), 1, "{mode}");
    }
}

/// A client that opens a session and never sends its open request is dropped after the
/// handshake timeout, with nothing connected and the session counted failed; a peer that
/// never sends its hello fails the server's handshake within the same bound (tokio's paused
/// clock: no real waiting).
#[tokio::test(start_paused = true)]
async fn a_silent_client_is_dropped_at_the_handshake_timeout() {
    let mut server = ProxyServer::new(Egress::Forward(addr("198.51.100.9:7")));
    server.limit = Duration::from_secs(10);
    let p = pair(Mode::Aead).await.unwrap();
    let _client = p.client;
    let start = tokio::time::Instant::now();
    let e = server
        .serve(p.server, StopSignal::never())
        .await
        .unwrap_err();
    assert!(e.contains("no open request within 10s"), "{e}");
    assert!(start.elapsed() >= Duration::from_secs(10));
    assert!(server.targets.connected().is_empty());
    assert_eq!(server.counter(&sessions(Mode::Aead, "failed")), 1);

    let (_cr, _cw, mut sr, mut sw, _tap) = wires();
    let cfg = ServerConfig::accepting(&[Mode::Aead]).with_key(nena_proto::test_server_key());
    let e = server_handshake(&cfg, &mut sr, &mut sw, Duration::from_secs(10))
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("no complete nena hello within 10.0s"),
        "{e}"
    );
}

/// A `--forward` proxy server takes no DNS or datagram session, and an `--allow` server
/// without rules none either: each is refused with its reason, nothing connected, counted
/// not_allowed (mirrors the refusals in
/// transfer_run_dns_udp::nena_run_carries_dns_and_udp_and_lets_nothing_else_out).
#[tokio::test]
async fn services_other_than_a_stream_need_allow_rules() {
    for (egress, why) in [
        (Egress::Forward(addr("198.51.100.9:7")), "takes no"),
        (allow(&[]), "has no --allow rule"),
    ] {
        let server = ProxyServer::new(egress);
        for service in [Service::Dns, Service::Datagram] {
            let p = pair(Mode::Aead).await.unwrap();
            let mut c = p.client;
            let serve = server.serve(p.server, StopSignal::never());
            let client = async {
                let reply = open_request(&mut c, ConnectRequest::of(service)).await;
                drop(c);
                reply.unwrap()
            };
            let (served, reply) = tokio::join!(serve, client);
            assert_eq!(reply.code, Rep::NotAllowed, "{service:?}");
            assert!(reply.msg.contains(why), "{service:?}: {}", reply.msg);
            assert!(served.unwrap_err().contains("refused"));
        }
        assert!(server.targets.connected().is_empty());
        assert_eq!(server.counter(&refusals("not_allowed")), 2);
    }
}

/// The protected stream's failure that ended a session, if that is what ended it.
fn session_failure(e: &nena_transport::Error) -> Option<&SessionError> {
    match e.kind() {
        nena_transport::Error::Session(se) => Some(se),
        _ => None,
    }
}
