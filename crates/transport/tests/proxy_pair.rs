//! The proxy server's sessions over the in-memory pair (`testing::pair`): the real nena
//! handshake, the real session body of `nena proxy server` (opening, access token,
//! `--allow`/`--forward`, relay, counters), with in-memory targets. No socket, namespace or
//! root: these run anywhere `cargo test` does. Each mirrors a lab test of
//! crates/cli/tests/cli/ (named in its doc), which stays for the kernel's side.

use nena_proto::Mode;
use nena_transport::ops::stop::StopSignal;
use nena_transport::proxy::socks::Rep;
use nena_transport::proxy::Egress;
use nena_transport::testing::pair::{open, pair, ProxyServer};
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// A `--forward` proxy session relays bytes byte-exact both ways, with half-closes passed
/// on (mirrors transfer_proxy::clean_ends_through_both_proxies).
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
