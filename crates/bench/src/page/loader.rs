//! The page loader of `nena bench page`, behaving as a browser does with an HTTP/1.1 page:
//! it resolves `www.example.test` (DNS over UDP), fetches the document on one connection,
//! reads the objects' URLs from it, resolves each other host name once as it first meets it,
//! and fetches the objects with up to [`LoadConfig::per_host`] keep-alive connections per
//! host name (the document's connection among them), each connection taking the next object
//! of its host as soon as the previous one ended. Every body is checked byte for byte
//! against the [`Page`]. The page's time runs from before the first DNS query to the last
//! byte of the last object. The connections are TCP sockets, or MPTCP sockets
//! (`IPPROTO_MPTCP`, as `mptcpize` makes them, refused if one falls back to TCP).

use super::site::{Page, INDEX, WWW};
use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How the loader works.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// The DNS resolver asked for every host name (UDP).
    pub resolver: SocketAddr,
    /// MPTCP sockets instead of TCP ones.
    pub mptcp: bool,
    /// Connections per host name at most (browsers: 6).
    pub per_host: usize,
    /// Bound on the whole page.
    pub timeout: Duration,
}

/// One name looked up.
#[derive(Debug, Clone, Serialize)]
pub struct Lookup {
    pub name: String,
    /// From the query sent to the answer read.
    pub ms: f64,
}

/// One HTTP connection of a page load.
#[derive(Debug, Clone, Serialize)]
pub struct Connection {
    pub host: String,
    /// When its connect began, from the start of the page.
    pub opened_at_ms: f64,
    /// connect(): through the gateway this is the LAN hop only, the nena session is set
    /// up behind it.
    pub connect_ms: f64,
    /// Its first request's time to first byte (request written to first response byte):
    /// through the gateway, this holds the nena session's set-up.
    pub first_byte_ms: f64,
    /// The median time to first byte of its later requests, if any.
    pub later_first_byte_ms: Option<f64>,
    pub requests: usize,
    /// An MPTCP connection's subflows when it ended its last request (the initial one
    /// included; `MPTCP_INFO`); none for TCP.
    pub subflows: Option<u32>,
}

/// One page load.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub seconds: f64,
    /// Objects fetched and checked (the document not counted).
    pub objects: usize,
    /// Body bytes fetched and checked, the document's included.
    pub bytes: u64,
    pub lookups: Vec<Lookup>,
    pub connections: Vec<Connection>,
}

/// Load `page` as configured, on this thread's network namespace, within the timeout.
pub async fn load(cfg: &LoadConfig, page: Arc<Page>) -> Result<Loaded> {
    tokio::time::timeout(cfg.timeout, load_in(cfg, page))
        .await
        .map_err(|_| anyhow!("the page did not load within {:?}", cfg.timeout))?
}

async fn load_in(cfg: &LoadConfig, page: Arc<Page>) -> Result<Loaded> {
    let t0 = Instant::now();
    let (www, dns) = lookup(cfg.resolver, WWW).await?;
    let mut lookups = vec![dns];
    let port = page.port;
    let mut first = Conn::open(WWW, SocketAddrV4::new(www, port), cfg.mptcp, t0).await?;
    let html = first.get(WWW, port, INDEX).await?;
    if html != page.html {
        bail!("the document differs from the page's");
    }
    let mut bytes = html.len() as u64;
    // The objects per host name, in the document's order, hosts in order of appearance.
    let mut hosts: Vec<(String, u16, Vec<String>)> = Vec::new();
    for (host, port, path) in object_refs(&html)? {
        match hosts.iter_mut().find(|h| h.0 == host && h.1 == port) {
            Some(h) => h.2.push(path),
            None => hosts.push((host, port, vec![path])),
        }
    }
    let mut tasks = tokio::task::JoinSet::new();
    let mut reuse = Some(first);
    for (host, port, paths) in hosts {
        let known = (host == WWW && port == first_port(&reuse)).then_some(www);
        let conn = if known.is_some() { reuse.take() } else { None };
        let cfg = cfg.clone();
        let page = page.clone();
        tasks.spawn(
            async move { fetch_host(&cfg, &page, t0, host, port, known, paths, conn).await },
        );
    }
    let mut connections = Vec::new();
    let mut objects = 0;
    while let Some(r) = tasks.join_next().await {
        let h = r.map_err(|e| anyhow!("a host's fetches panicked: {e}"))??;
        lookups.extend(h.lookup);
        connections.extend(h.connections);
        objects += h.objects;
        bytes += h.bytes;
    }
    let seconds = t0.elapsed().as_secs_f64();
    // The document's connection when no object came from its host (not this page's case).
    if let Some(c) = reuse {
        connections.push(c.record());
    }
    if objects != page.objects.len() {
        bail!(
            "the document names {objects} objects, the page has {}",
            page.objects.len()
        );
    }
    Ok(Loaded {
        seconds,
        objects,
        bytes,
        lookups,
        connections,
    })
}

fn first_port(c: &Option<Conn>) -> u16 {
    c.as_ref().map_or(0, |c| c.port)
}

/// What the fetches of one host name gave.
struct HostDone {
    lookup: Option<Lookup>,
    connections: Vec<Connection>,
    objects: usize,
    bytes: u64,
}

/// Fetch `paths` of `host`: look the name up unless `known`, then up to `per_host`
/// connections (`conn` the first, when given) each taking the next path until none is left.
#[allow(clippy::too_many_arguments)]
async fn fetch_host(
    cfg: &LoadConfig,
    page: &Page,
    t0: Instant,
    host: String,
    port: u16,
    known: Option<Ipv4Addr>,
    paths: Vec<String>,
    conn: Option<Conn>,
) -> Result<HostDone> {
    let (ip, lookup) = match known {
        Some(ip) => (ip, None),
        None => {
            let (ip, l) = lookup(cfg.resolver, &host).await?;
            (ip, Some(l))
        }
    };
    let workers = cfg.per_host.min(paths.len()).max(1);
    let queue = Arc::new(Mutex::new(VecDeque::from(paths)));
    let mut conn = conn;
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..workers {
        let (queue, host) = (queue.clone(), host.clone());
        let mine = conn.take();
        let mptcp = cfg.mptcp;
        let page_bodies: Vec<(String, bytes::Bytes)> = page
            .objects
            .iter()
            .filter(|o| o.0 == host)
            .map(|o| (o.1.clone(), o.2.clone()))
            .collect();
        set.spawn(async move {
            let mut c = mine;
            let (mut objects, mut bytes) = (0usize, 0u64);
            loop {
                let next = queue.lock().map_err(|_| anyhow!("poisoned"))?.pop_front();
                let Some(path) = next else { break };
                if c.is_none() {
                    let addr = SocketAddrV4::new(ip, port);
                    c = Some(Conn::open(&host, addr, mptcp, t0).await?);
                }
                let Some(cn) = c.as_mut() else { break };
                let body = cn.get(&host, port, &path).await?;
                let want = page_bodies
                    .iter()
                    .find(|(p, _)| *p == path)
                    .map(|(_, b)| b)
                    .ok_or_else(|| {
                        anyhow!("the document names http://{host}{path}, not on the page")
                    })?;
                if body != *want {
                    bail!(
                        "http://{host}{path}: {} bytes that differ from the page's {}",
                        body.len(),
                        want.len()
                    );
                }
                objects += 1;
                bytes += body.len() as u64;
            }
            Ok::<_, anyhow::Error>((c.map(|c| c.record()), objects, bytes))
        });
    }
    let mut done = HostDone {
        lookup,
        connections: Vec::new(),
        objects: 0,
        bytes: 0,
    };
    while let Some(r) = set.join_next().await {
        let (c, o, b) = r.map_err(|e| anyhow!("a connection's fetches panicked: {e}"))??;
        done.connections.extend(c);
        done.objects += o;
        done.bytes += b;
    }
    Ok(done)
}

/// The IPv4 address of `name` from `resolver` (nena-transport's DNS exchange: UDP, three
/// tries of a second each), and the time its answer took.
async fn lookup(resolver: SocketAddr, name: &str) -> Result<(Ipv4Addr, Lookup)> {
    use nena_transport::dns::{self, ExchangeError, Family, Question};
    let qname = dns::name(name).map_err(|e| anyhow!(e))?;
    let q = Question::of(&qname, Family::V4, dns::random_id()?);
    let t = Instant::now();
    let until = tokio::time::Instant::now() + 3 * dns::exchange::RESEND;
    let answer = dns::exchange(resolver, None, &q, &q.encode(), until)
        .await
        .map_err(|e| match e {
            ExchangeError::NoAnswer => {
                anyhow!("{resolver} did not answer for {name} in three tries")
            }
            e => anyhow!("asking {resolver} for {name}: {e}"),
        })?;
    let addrs =
        dns::addresses(&answer, &q).map_err(|e| anyhow!("{resolver}'s answer for {name}: {e}"))?;
    let ip = addrs
        .iter()
        .find_map(|a| match a {
            std::net::IpAddr::V4(v4) => Some(*v4),
            _ => None,
        })
        .ok_or_else(|| anyhow!("{resolver} has no IPv4 address for {name}"))?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    Ok((
        ip,
        Lookup {
            name: name.into(),
            ms,
        },
    ))
}

/// The objects' URLs in the document (`src="http://HOST:PORT/PATH"`), in order.
pub fn object_refs(html: &[u8]) -> Result<Vec<(String, u16, String)>> {
    let text = std::str::from_utf8(html).context("the document is not UTF-8")?;
    text.split("src=\"")
        .skip(1)
        .map(|rest| {
            let url = rest.split('"').next().unwrap_or("");
            let at = url
                .strip_prefix("http://")
                .ok_or_else(|| anyhow!("not an http URL: {url}"))?;
            let (authority, path) = at.split_at(at.find('/').unwrap_or(at.len()));
            let (host, port) = match authority.rsplit_once(':') {
                Some((h, p)) => (h, p.parse().with_context(|| format!("the port of {url}"))?),
                None => (authority, 80),
            };
            let path = if path.is_empty() { "/" } else { path };
            Ok((host.to_string(), port, path.to_string()))
        })
        .collect()
}

/// One keep-alive HTTP/1.1 connection and what it measured.
struct Conn {
    s: TcpStream,
    host: String,
    port: u16,
    buf: Vec<u8>,
    opened_at_ms: f64,
    connect_ms: f64,
    first_bytes_ms: Vec<f64>,
}

impl Conn {
    async fn open(host: &str, addr: SocketAddrV4, mptcp: bool, t0: Instant) -> Result<Conn> {
        let t = Instant::now();
        let s = if mptcp {
            use socket2::{Domain, Protocol, Socket, Type};
            let sock = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::MPTCP))
                .context("an MPTCP socket (net.mptcp.enabled?)")?;
            sock.set_nonblocking(true)?;
            let sock = tokio::net::TcpSocket::from_std_stream(sock.into());
            let s = sock
                .connect(addr.into())
                .await
                .with_context(|| format!("MPTCP connect to {addr}"))?;
            use std::os::fd::AsFd;
            if nena_mptcp::is_fallback(s.as_fd())? {
                bail!("the MPTCP connection to {addr} fell back to TCP");
            }
            s
        } else {
            TcpStream::connect(addr)
                .await
                .with_context(|| format!("connect to {addr}"))?
        };
        s.set_nodelay(true)?;
        Ok(Conn {
            s,
            host: host.into(),
            port: addr.port(),
            buf: Vec::with_capacity(64 * 1024),
            opened_at_ms: (t - t0).as_secs_f64() * 1e3,
            connect_ms: t.elapsed().as_secs_f64() * 1e3,
            first_bytes_ms: Vec::new(),
        })
    }

    /// GET `path` from `host`: the body (status 200 and Content-Length required).
    async fn get(&mut self, host: &str, port: u16, path: &str) -> Result<bytes::Bytes> {
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: */*\r\n\
             User-Agent: nena-bench-page\r\n\r\n"
        );
        self.s.write_all(req.as_bytes()).await?;
        let sent = Instant::now();
        let mut first = None;
        let head_end = loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if self.buf.len() > 64 * 1024 {
                bail!("http://{host}{path}: a response head over 64 KiB");
            }
            let n = self.s.read_buf(&mut self.buf).await?;
            first.get_or_insert_with(|| sent.elapsed());
            if n == 0 {
                bail!("http://{host}{path}: the connection closed before the response");
            }
        };
        self.first_bytes_ms
            .push(first.unwrap_or_default().as_secs_f64() * 1e3);
        let len = content_length(&self.buf[..head_end])
            .with_context(|| format!("the response for http://{host}{path}"))?;
        while self.buf.len() < head_end + len {
            if self.s.read_buf(&mut self.buf).await? == 0 {
                bail!("http://{host}{path}: the connection closed inside the body");
            }
        }
        let body = bytes::Bytes::copy_from_slice(&self.buf[head_end..head_end + len]);
        self.buf.drain(..head_end + len);
        Ok(body)
    }

    fn record(self) -> Connection {
        use std::os::fd::AsFd;
        let subflows = nena_mptcp::info(self.s.as_fd()).ok().map(|i| i.subflows);
        let mut later: Vec<f64> = self.first_bytes_ms.iter().skip(1).copied().collect();
        Connection {
            host: self.host,
            opened_at_ms: self.opened_at_ms,
            connect_ms: self.connect_ms,
            first_byte_ms: self.first_bytes_ms.first().copied().unwrap_or(0.0),
            later_first_byte_ms: (!later.is_empty()).then(|| crate::harness::median(&mut later)),
            requests: self.first_bytes_ms.len(),
            subflows,
        }
    }
}

/// The body length of a `200` response head (`Content-Length`).
pub fn content_length(head: &[u8]) -> Result<usize> {
    let head = std::str::from_utf8(head).context("not text")?;
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or("");
    let code = status.split(' ').nth(1).unwrap_or("");
    if !status.starts_with("HTTP/1.1 ") || code != "200" {
        bail!("status `{status}`");
    }
    lines
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .ok_or_else(|| anyhow!("no Content-Length"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::UdpSocket;

    #[test]
    fn the_documents_urls_are_read_in_order() {
        let page = Page::new(8080);
        let refs = object_refs(&page.html).unwrap();
        assert_eq!(refs.len(), page.objects.len());
        for ((h, port, path), (host, p, _)) in refs.iter().zip(&page.objects) {
            assert_eq!((h.as_str(), *port, path), (*host, 8080, p));
        }
        let odd =
            object_refs(b"<img src=\"http://a.test/x\"><img src=\"http://b.test:81\">").unwrap();
        assert_eq!(
            odd,
            [
                ("a.test".into(), 80, "/x".into()),
                ("b.test".into(), 81, "/".into())
            ]
        );
        assert!(object_refs(b"<img src=\"https://a.test/x\">").is_err());
    }

    #[test]
    fn a_response_head_gives_its_length_only_for_200() {
        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 1234\r\ndate: x\r\n\r\n";
        assert_eq!(content_length(ok).unwrap(), 1234);
        let caps = b"HTTP/1.1 200 OK\r\nContent-Length:  7\r\n\r\n";
        assert_eq!(content_length(caps).unwrap(), 7);
        assert!(content_length(b"HTTP/1.1 404 Not Found\r\ncontent-length: 9\r\n\r\n").is_err());
        assert!(content_length(b"HTTP/1.1 200 OK\r\n\r\n").is_err());
    }

    #[test]
    fn a_page_loads_byte_exact_over_loopback() {
        // The web server and the resolver are the lab's in the bench; here, a server on
        // loopback for both names and a resolver answering 127.0.0.1.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let page = Arc::new(Page::new(l.local_addr().unwrap().port()));
            let served = page.clone();
            let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let count = accepted.clone();
            tokio::spawn(async move {
                loop {
                    let (s, _) = l.accept().await.unwrap();
                    count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let page = served.clone();
                    tokio::spawn(async move {
                        let svc = hyper::service::service_fn(move |req| {
                            let page = page.clone();
                            async move {
                                Ok::<_, std::convert::Infallible>(super::super::site::answer(
                                    &page, &req,
                                ))
                            }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(s), svc)
                            .await;
                    });
                }
            });
            let dns = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let resolver = dns.local_addr().unwrap();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 1500];
                loop {
                    let (n, from) = dns.recv_from(&mut buf).await.unwrap();
                    let answer = answer_localhost(&buf[..n]);
                    dns.send_to(&answer, from).await.unwrap();
                }
            });
            let cfg = LoadConfig {
                resolver,
                mptcp: false,
                per_host: 6,
                timeout: Duration::from_secs(30),
            };
            let r = load(&cfg, page.clone()).await.unwrap();
            assert_eq!(r.objects, 30);
            assert_eq!(r.bytes, page.bytes());
            assert_eq!(r.lookups.len(), 2, "each name once");
            assert_eq!(r.connections.len(), 12, "six per name");
            assert_eq!(accepted.load(std::sync::atomic::Ordering::Relaxed), 12);
            let requests: usize = r.connections.iter().map(|c| c.requests).sum();
            assert_eq!(requests, 31, "the document and every object once");
            assert!(r.seconds > 0.0);
        });
    }

    /// A DNS answer giving 127.0.0.1 for the question of `query`.
    fn answer_localhost(query: &[u8]) -> Vec<u8> {
        use hickory_proto::op::{Message, MessageType};
        use hickory_proto::rr::{rdata::A, RData, Record};
        let q = Message::from_vec(query).unwrap();
        let mut m = q.clone();
        m.metadata.message_type = MessageType::Response;
        let name = q.queries[0].name.clone();
        m.add_answer(Record::from_rdata(name, 60, RData::A(A::new(127, 0, 0, 1))));
        m.to_vec().unwrap()
    }
}
