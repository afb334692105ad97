//! Both proxy ends on the in-memory network, shared by the net_* tests of the proxies: the
//! production `nena proxy server` (`run_server_on`, its targets in memory) on a `MemoryNet`
//! listener and the production `nena proxy client` (`run_client_with`) on loopback TCP,
//! dialing through the same net; and a SOCKS5 client written by hand.

#![allow(dead_code)]

use nena_proto::Mode;
use nena_transport::conn::{AcceptOptions, ClientOptions};
use nena_transport::ops::metrics::Metrics;
use nena_transport::proxy::client::{run_client_with, Entry};
use nena_transport::proxy::listen::ProxyLimits;
use nena_transport::proxy::server::{run_server_on, PlaneSetting};
use nena_transport::proxy::Egress;
use nena_transport::testing::net::{accept_options, MemoryNet};
use nena_transport::testing::pair::Targets;
use nena_transport::wire::AccessToken;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// Limits as `nena proxy server`/`client` take them: `sessions` at once, no grace.
pub fn limits(
    sessions: usize,
    token: Option<AccessToken>,
    metrics: Option<Arc<Metrics>>,
) -> ProxyLimits {
    ProxyLimits {
        max_sessions: sessions,
        max_connecting: 64,
        grace: Duration::ZERO,
        token,
        metrics,
        datagram_plane: false,
    }
}

/// A proxy server as [`server`] starts it.
pub struct Server {
    pub net: Arc<MemoryNet>,
    pub at: SocketAddr,
    pub egress: Egress,
    pub token: Option<AccessToken>,
    /// Its targets (`refuse`, `answer_count` set before it starts).
    pub targets: Targets,
    pub sessions: usize,
    pub metrics: Option<Arc<Metrics>>,
    /// How it accepts (its handshake timeout, `--handshake-timeout`).
    pub accept: AcceptOptions,
}

impl Server {
    /// A proxy server on `net` at `at` with `egress`: no token, echo targets, 64 sessions.
    pub fn new(net: &Arc<MemoryNet>, at: &str, egress: Egress) -> Server {
        Server {
            net: net.clone(),
            at: addr(at),
            egress,
            token: None,
            targets: Targets::default(),
            sessions: 64,
            metrics: None,
            accept: accept_options(),
        }
    }

    /// Starts it (every in-band mode accepted, the test server key); returns its targets.
    pub fn start(self) -> Targets {
        let accept = self.accept;
        let listener = self.net.listen(self.at);
        let t = self.targets.clone();
        let limits = limits(self.sessions, self.token, self.metrics);
        let egress = self.egress;
        tokio::spawn(async move {
            run_server_on(listener, egress, accept, limits, PlaneSetting::default(), t)
                .await
                .unwrap()
        });
        self.targets
    }
}

/// The proxy client on loopback (an ephemeral port) with `entry`, dialing the proxy server
/// at `to` through `net` offering `mode`, sending `token`, counting into `metrics`; returns
/// the address applications connect to.
pub async fn client(
    net: &Arc<MemoryNet>,
    to: &str,
    entry: Entry,
    mode: Mode,
    token: Option<AccessToken>,
    metrics: Option<Arc<Metrics>>,
    sessions: usize,
) -> SocketAddr {
    let mut opts = net.options(addr(to), vec![mode]);
    opts.token = token;
    client_with(opts, entry, metrics, sessions).await
}

/// [`client`] with its client options given whole (sessions opened ahead, a buffer size).
pub async fn client_with(
    opts: ClientOptions,
    entry: Entry,
    metrics: Option<Arc<Metrics>>,
    sessions: usize,
) -> SocketAddr {
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        run_client_with(
            addr("127.0.0.1:0"),
            entry,
            opts,
            limits(sessions, None, metrics),
            |a| {
                let _ = tx.send(a);
            },
        )
        .await
        .unwrap()
    });
    rx.await.expect("the proxy client's listener")
}

/// The value of the counter `name` in `metrics` (as `--metrics` serves it); 0 when absent.
pub fn counter(metrics: &Metrics, name: &str) -> u64 {
    metrics
        .encode()
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

/// A SOCKS5 request's `ATYP ADDR PORT` for an IPv4 address.
pub fn v4(ip: [u8; 4], port: u16) -> Vec<u8> {
    let mut r = vec![1];
    r.extend_from_slice(&ip);
    r.extend_from_slice(&port.to_be_bytes());
    r
}

/// A SOCKS5 request's `ATYP ADDR PORT` for an IPv6 address.
pub fn v6(ip: &str, port: u16) -> Vec<u8> {
    let mut r = vec![4];
    r.extend_from_slice(&ip.parse::<std::net::Ipv6Addr>().unwrap().octets());
    r.extend_from_slice(&port.to_be_bytes());
    r
}

/// A SOCKS5 request's `ATYP ADDR PORT` for a domain name.
pub fn domain(name: &str, port: u16) -> Vec<u8> {
    let mut r = vec![3, name.len() as u8];
    r.extend_from_slice(name.as_bytes());
    r.extend_from_slice(&port.to_be_bytes());
    r
}

/// SOCKS5 by hand at `front`: the greeting (no authentication), then CONNECT with `req`
/// (`ATYP ADDR PORT`, or a whole request of its own when `raw`). Returns the reply's code and
/// the connection; the reply must come within 10 s.
pub async fn socks_connect(front: SocketAddr, req: &[u8], raw: bool) -> (u8, TcpStream) {
    let mut s = TcpStream::connect(front).await.unwrap();
    s.write_all(&[5, 1, 0]).await.unwrap();
    let mut m = [0u8; 2];
    s.read_exact(&mut m).await.unwrap();
    assert_eq!(m, [5, 0], "the method reply");
    let mut r = if raw { Vec::new() } else { vec![5, 1, 0] };
    r.extend_from_slice(req);
    s.write_all(&r).await.unwrap();
    let code = tokio::time::timeout(Duration::from_secs(10), socks_reply(&mut s))
        .await
        .expect("a SOCKS reply within 10 s");
    (code, s)
}

/// Reads a SOCKS5 reply (its bound address too); returns its code.
pub async fn socks_reply(s: &mut TcpStream) -> u8 {
    let mut head = [0u8; 4];
    s.read_exact(&mut head).await.unwrap();
    assert_eq!(head[0], 5, "the reply's version");
    let rest = match head[3] {
        1 => 4 + 2,
        4 => 16 + 2,
        other => panic!("reply address type {other}"),
    };
    let mut bnd = vec![0u8; rest];
    s.read_exact(&mut bnd).await.unwrap();
    head[1]
}

/// Writes `msg` on `s`, ends its direction and reads everything that comes back.
pub async fn exchange(s: TcpStream, msg: &[u8]) -> std::io::Result<Vec<u8>> {
    let (mut r, mut w) = s.into_split();
    let send = async {
        w.write_all(msg).await?;
        w.shutdown().await
    };
    let mut back = Vec::new();
    let (sent, got) = tokio::join!(send, r.read_to_end(&mut back));
    got?;
    sent?;
    Ok(back)
}

/// `len` bytes of a pattern of its own for each `seed`.
pub fn payload(seed: u32, len: usize) -> Vec<u8> {
    (0..len as u32)
        .map(|i| {
            (i.wrapping_add(seed.wrapping_mul(7919))
                .wrapping_mul(2_654_435_761)
                >> 11) as u8
        })
        .collect()
}
