//! `--metrics ADDR:PORT`: what `nena serve`, `nena proxy server` and `nena proxy client`
//! count, served as OpenMetrics text (`GET /metrics`, the Prometheus project's
//! `prometheus-client` encoder, HTTP/1.1 by hyper) for Prometheus and its kin.
//!
//! Every family has a `role` label (`serve`, `proxy_server`, `proxy_client`). Sessions are
//! counted when they end, with what they were (mode) and how they ended ([`Outcome`]);
//! bytes and subflow events are read from the kernel's MPTCP_INFO / MPTCP_FULL_INFO at the
//! session's end (a subflow already closed by then no longer reports its bytes: they are
//! missing from `nena_bytes_total`, and counted in `nena_subflow_events_total{event="close"}`).
//! docs/OPERATIONS.md lists the families and the queries an operator runs on them.

use crate::access::ErrorReply;
use crate::wire::Status;
use anyhow::{Context, Result};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The content type of OpenMetrics text, version 1.0.0.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Which command counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Serve,
    ProxyServer,
    ProxyClient,
    Gateway,
}

impl Role {
    pub fn label(self) -> &'static str {
        match self {
            Role::Serve => "serve",
            Role::ProxyServer => "proxy_server",
            Role::ProxyClient => "proxy_client",
            Role::Gateway => "gateway",
        }
    }
}

/// How a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Done, verified.
    Ok,
    /// Refused before any data (its cause in `nena_refusals_total`).
    Refused(&'static str),
    /// The protected stream or a file's tag did not verify, or the stream was cut
    /// (counted in `nena_integrity_failures_total` too).
    Integrity,
    /// Cut by the command's stop (SIGTERM/SIGINT beyond the grace).
    Aborted,
    /// Anything else: the peer went away, a timeout, an I/O error.
    Failed,
}

impl Outcome {
    fn label(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Refused(_) => "refused",
            Outcome::Integrity => "integrity_failure",
            Outcome::Aborted => "aborted",
            Outcome::Failed => "failed",
        }
    }

    /// What a failed session's error says about how it ended: an error reply the server
    /// sent ([`ErrorReply`]), a session failure of the protected stream, a stop, or else
    /// a plain failure.
    pub fn of_error(e: &anyhow::Error) -> Outcome {
        if e.downcast_ref::<HandshakeFailed>().is_some() {
            return Outcome::Refused("handshake");
        }
        for c in e.chain() {
            // The error itself, or the one an io::Error carries (the proxies' relay).
            let own = [
                Some(c),
                c.downcast_ref::<std::io::Error>()
                    .and_then(|io| io.get_ref())
                    .map(|x| x as _),
            ];
            for c in own.into_iter().flatten() {
                if let Some(r) = c.downcast_ref::<ErrorReply>() {
                    return Outcome::of_status(r.status);
                }
                if let Some(r) = c.downcast_ref::<crate::ends::Refused>() {
                    return Outcome::Refused(refusal_cause(r.0.code, &r.0.msg));
                }
                if let Some(r) = c.downcast_ref::<crate::ends::Refusing>() {
                    return Outcome::Refused(refusal_cause(r.code, &r.msg));
                }
                if c.is::<crate::ends::ShuttingDown>() {
                    return Outcome::Aborted;
                }
            }
        }
        if let Some(se) = crate::files::session_failure(e) {
            use nena_proto::SessionError::*;
            return match se {
                Integrity { .. } | AfterClose | Truncated { .. } | ClientConfirm(_) => {
                    Outcome::Integrity
                }
                PeerAborted { .. } => Outcome::Aborted,
                _ => Outcome::Failed,
            };
        }
        Outcome::Failed
    }

    /// The outcome of a session the server answered with `status`.
    pub fn of_status(status: Status) -> Outcome {
        match status {
            Status::Ok => Outcome::Ok,
            Status::Corrupt => Outcome::Integrity,
            Status::ShuttingDown => Outcome::Aborted,
            Status::ServerError => Outcome::Failed,
            Status::BadName => Outcome::Refused("bad_name"),
            Status::Exists => Outcome::Refused("exists"),
            Status::NotFound => Outcome::Refused("not_found"),
            Status::Refused => Outcome::Refused("refused"),
            Status::AccessDenied => Outcome::Refused("access_denied"),
            Status::TooLarge => Outcome::Refused("file_too_large"),
            Status::NoSpace => Outcome::Refused("not_enough_space"),
        }
    }
}

/// Context of a session whose nena handshake failed or was refused (mode, version, key
/// confirmation, a peer that is no nena client): counted as refused, cause `handshake`.
#[derive(Debug)]
pub struct HandshakeFailed;

impl std::fmt::Display for HandshakeFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the nena handshake failed")
    }
}

/// The cause label of a proxy server's refusal (its SOCKS reply code and reason).
pub fn refusal_cause(code: crate::socks::Rep, msg: &str) -> &'static str {
    use crate::socks::Rep;
    if msg == crate::access::DENIED {
        return "access_denied";
    }
    match code {
        Rep::NotAllowed => "not_allowed",
        Rep::NetworkUnreachable => "network_unreachable",
        Rep::HostUnreachable => "host_unreachable",
        Rep::ConnectionRefused => "connection_refused",
        _ => "other",
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RoleLabels {
    role: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SessionLabels {
    role: &'static str,
    mode: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CauseLabels {
    role: &'static str,
    cause: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BytesLabels {
    role: &'static str,
    path: String,
    direction: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabels {
    role: &'static str,
    event: &'static str,
}

fn handshake_histogram() -> Histogram {
    // 1 ms .. about 16 s, doubling.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

/// What one session did on the wire, read when it ends.
#[derive(Debug, Clone, Default)]
pub struct Wire {
    /// Per path (the client's trust class, the server's local address): bytes the peer
    /// acknowledged, bytes received.
    pub paths: Vec<(String, u64, u64)>,
    /// Subflows that joined after the first, subflows closed before the end, subflows
    /// re-created after an outage (the client's recovery).
    pub joins: u64,
    pub closes: u64,
    pub recoveries: u64,
}

impl Wire {
    /// The server's view of a session: each subflow (as [`crate::conn::subflow_bytes`]
    /// read them) by its local address; `fd` for the count of subflows ever created.
    pub fn of_server(
        subflows: &[crate::conn::SubflowBytes],
        fd: std::os::fd::BorrowedFd<'_>,
    ) -> Wire {
        let named = subflows.iter().map(|s| {
            let name = s.local.map_or("?".to_string(), |a| a.ip().to_string());
            (name, s.bytes_acked, s.bytes_received)
        });
        Wire::of_subflows(named, fd, 0)
    }

    /// The client's view: each subflow of `paths` (the report it logs) by its trust class.
    pub fn of_client(paths: &crate::client::Paths, c: &crate::conn::ClientConn) -> Wire {
        let named = paths.subflows.iter().map(|s| {
            let name = s.trust.label().to_string();
            (name, s.subflow.bytes_acked, s.subflow.bytes_received)
        });
        Wire::of_subflows(named, c.gate.fd(), c.gate.recoveries())
    }

    /// The subflows present at the end, each `(path, acked, received)`, summed per path;
    /// joins and closes from the number of subflows the connection ever had (MPTCP_INFO).
    fn of_subflows(
        named: impl Iterator<Item = (String, u64, u64)>,
        fd: std::os::fd::BorrowedFd<'_>,
        recoveries: u64,
    ) -> Wire {
        let mut paths: Vec<(String, u64, u64)> = Vec::new();
        let mut present = 0u64;
        for (name, acked, received) in named {
            present += 1;
            match paths.iter_mut().find(|p| p.0 == name) {
                Some(p) => {
                    p.1 += acked;
                    p.2 += received;
                }
                None => paths.push((name, acked, received)),
            }
        }
        let total = nena_mptcp::info(fd).map_or(present, |i| u64::from(i.subflows));
        Wire {
            paths,
            joins: total.saturating_sub(1),
            closes: total.saturating_sub(present),
            recoveries,
        }
    }
}

/// The counters of one command, shared by its sessions.
#[derive(Debug)]
pub struct Metrics {
    role: Role,
    registry: Registry,
    sessions: Family<SessionLabels, Counter>,
    active: Family<RoleLabels, Gauge>,
    refusals: Family<CauseLabels, Counter>,
    integrity: Family<RoleLabels, Counter>,
    bytes: Family<BytesLabels, Counter>,
    subflows: Family<EventLabels, Counter>,
    handshake: Family<RoleLabels, Histogram>,
    retried: Family<RoleLabels, Counter>,
    waiting: Family<RoleLabels, Gauge>,
    waits: Family<RoleLabels, Counter>,
    wait_timeouts: Family<RoleLabels, Counter>,
}

impl Metrics {
    pub fn new(role: Role) -> Arc<Metrics> {
        let mut registry = Registry::with_prefix("nena");
        let sessions = Family::<SessionLabels, Counter>::default();
        registry.register(
            "sessions",
            "Sessions ended, by mode and outcome (ok, refused, integrity_failure, aborted, failed)",
            sessions.clone(),
        );
        let active = Family::<RoleLabels, Gauge>::default();
        registry.register("sessions_active", "Sessions in progress", active.clone());
        let refusals = Family::<CauseLabels, Counter>::default();
        registry.register(
            "refusals",
            "Sessions refused, by cause (access_denied, not_allowed, handshake, file_too_large, ...)",
            refusals.clone(),
        );
        let integrity = Family::<RoleLabels, Counter>::default();
        registry.register(
            "integrity_failures",
            "Sessions whose protected stream or file tag did not verify, or whose stream was cut",
            integrity.clone(),
        );
        let bytes = Family::<BytesLabels, Counter>::default();
        registry.register(
            "bytes",
            "Payload bytes per path (trust class on clients, local address on servers) and \
             direction (sent: acknowledged by the peer; received), at each session's end",
            bytes.clone(),
        );
        let subflows = Family::<EventLabels, Counter>::default();
        registry.register(
            "subflow_events",
            "Subflow joins (beyond the first), closes before the session's end, and recoveries \
             after a link outage",
            subflows.clone(),
        );
        let handshake = Family::<RoleLabels, Histogram>::new_with_constructor(
            handshake_histogram as fn() -> Histogram,
        );
        registry.register(
            "handshake_seconds",
            "Time from the connection to the end of the nena handshake",
            handshake.clone(),
        );
        let retried = Family::<RoleLabels, Counter>::default();
        registry.register(
            "retried_openings",
            "Proxy client: sessions opened again because the proxy server found the opening \
             altered (an attacker on a path, or a receiving kernel's misplaced bytes)",
            retried.clone(),
        );
        let waiting = Family::<RoleLabels, Gauge>::default();
        registry.register(
            "sessions_waiting_for_trusted_link",
            "New connections waiting now for a trusted interface that is down (their hello \
             goes by no other interface)",
            waiting.clone(),
        );
        let waits = Family::<RoleLabels, Counter>::default();
        registry.register(
            "trusted_link_waits",
            "New connections that had to wait for a trusted interface that was down",
            waits.clone(),
        );
        let wait_timeouts = Family::<RoleLabels, Counter>::default();
        registry.register(
            "trusted_link_wait_timeouts",
            "Of those, the ones that failed when their timeout ran out",
            wait_timeouts.clone(),
        );
        let m = Metrics {
            role,
            waiting,
            waits,
            wait_timeouts,
            registry,
            sessions,
            active,
            refusals,
            integrity,
            bytes,
            subflows,
            handshake,
            retried,
        };
        // Every family shows up from the first scrape, at 0 where it has no labels yet.
        let _ = m.active.get_or_create(&m.role_labels());
        let _ = m.integrity.get_or_create(&m.role_labels());
        let _ = m.retried.get_or_create(&m.role_labels());
        m.trusted_waits(nena_mptcp::TrustedWaits::default());
        Arc::new(m)
    }

    fn role_labels(&self) -> RoleLabels {
        RoleLabels {
            role: self.role.label(),
        }
    }

    /// A session begins: counted as active until the guard is dropped.
    pub fn begin(self: &Arc<Self>) -> Active {
        self.active.get_or_create(&self.role_labels()).inc();
        Active(self.clone())
    }

    /// The handshake of a session took `d`.
    pub fn handshake(&self, d: Duration) {
        self.handshake
            .get_or_create(&self.role_labels())
            .observe(d.as_secs_f64());
    }

    /// The proxy client opens a session again: the server found the opening altered.
    pub fn retried_opening(&self) {
        self.retried.get_or_create(&self.role_labels()).inc();
    }

    /// A session ended: `mode` (`aead`, ..., `none` before a handshake), how, and what it
    /// did on the wire.
    pub fn end(&self, mode: &'static str, outcome: Outcome, wire: &Wire) {
        let role = self.role.label();
        self.sessions
            .get_or_create(&SessionLabels {
                role,
                mode,
                outcome: outcome.label(),
            })
            .inc();
        match outcome {
            Outcome::Refused(cause) => {
                self.refusals
                    .get_or_create(&CauseLabels { role, cause })
                    .inc();
            }
            Outcome::Integrity => {
                self.integrity.get_or_create(&self.role_labels()).inc();
            }
            _ => {}
        }
        for (path, sent, received) in &wire.paths {
            for (direction, n) in [("sent", *sent), ("received", *received)] {
                self.bytes
                    .get_or_create(&BytesLabels {
                        role,
                        path: path.clone(),
                        direction,
                    })
                    .inc_by(n);
            }
        }
        for (event, n) in [
            ("join", wire.joins),
            ("close", wire.closes),
            ("recovery", wire.recoveries),
        ] {
            self.subflows
                .get_or_create(&EventLabels { role, event })
                .inc_by(n);
        }
    }

    /// The process's waits for a trusted link (they happen inside connect, before there is
    /// a session), as they stand now.
    fn trusted_waits(&self, w: nena_mptcp::TrustedWaits) {
        let l = self.role_labels();
        self.waiting.get_or_create(&l).set(w.waiting as i64);
        for (c, total) in [(&self.waits, w.waited), (&self.wait_timeouts, w.gave_up)] {
            let c = c.get_or_create(&l);
            c.inc_by(total.saturating_sub(c.get()));
        }
    }

    /// The OpenMetrics text of every family.
    pub fn encode(&self) -> String {
        self.trusted_waits(nena_mptcp::trusted_waits());
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String does not fail");
        out
    }
}

/// A session in progress ([`Metrics::begin`]).
#[derive(Debug)]
pub struct Active(Arc<Metrics>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.active.get_or_create(&self.0.role_labels()).dec();
    }
}

/// One session's entry, filled in as the session learns what it is (its mode, the
/// handshake's time, what it did on the wire) and counted once, at [`Tally::finish`].
/// Without metrics it records nothing.
#[derive(Clone, Debug)]
pub struct Tally(Option<Arc<std::sync::Mutex<TallyState>>>);

#[derive(Debug)]
struct TallyState {
    metrics: Arc<Metrics>,
    mode: &'static str,
    wire: Wire,
    done: bool,
    _active: Active,
}

impl Tally {
    /// A session begins (counted as active until it finishes).
    pub fn begin(metrics: Option<&Arc<Metrics>>) -> Tally {
        Tally(metrics.map(|m| {
            Arc::new(std::sync::Mutex::new(TallyState {
                metrics: m.clone(),
                mode: "none",
                wire: Wire::default(),
                done: false,
                _active: m.begin(),
            }))
        }))
    }

    fn with(&self, f: impl FnOnce(&mut TallyState)) {
        if let Some(t) = &self.0 {
            if let Ok(mut t) = t.lock() {
                f(&mut t);
            }
        }
    }

    /// The handshake is done: its time, and the session's mode (`None`: a raw listener).
    pub fn handshake(&self, took: Duration, info: Option<nena_proto::SessionInfo>) {
        self.with(|t| {
            t.metrics.handshake(took);
            t.mode = info.map_or("raw", |i| i.mode.name());
        });
    }

    /// The session's opening is tried again ([`Metrics::retried_opening`]).
    pub fn retried_opening(&self) {
        self.with(|t| t.metrics.retried_opening());
    }

    /// What the session did on the wire (read just before its socket closes).
    pub fn wire(&self, wire: Wire) {
        self.with(|t| t.wire = wire);
    }

    /// The session ended with `result`: counted (once; later calls change nothing).
    pub fn finish<T>(&self, result: &Result<T>) {
        let outcome = result
            .as_ref()
            .map_or_else(Outcome::of_error, |_| Outcome::Ok);
        self.with(|t| {
            if !t.done {
                t.done = true;
                t.metrics.end(t.mode, outcome, &t.wire);
            }
        });
    }
}

/// What one scraper may hold of the metrics endpoint: connections at once (more are closed
/// at once), the time to send a request's header, and a connection's whole life.
#[derive(Debug, Clone, Copy)]
pub struct EndpointLimits {
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub lifetime: Duration,
}

impl EndpointLimits {
    /// 16 connections, 5 s for a header, 30 s per connection: a Prometheus scrape needs one
    /// connection and milliseconds; a slow client (slowloris) holds nothing for long.
    pub const DEFAULT: EndpointLimits = EndpointLimits {
        max_connections: 16,
        header_timeout: Duration::from_secs(5),
        lifetime: Duration::from_secs(30),
    };
}

/// Serves `GET /metrics` (any other path: 404) on `listener` until the task is dropped,
/// within [`EndpointLimits::DEFAULT`].
pub async fn serve(listener: tokio::net::TcpListener, metrics: Arc<Metrics>) {
    serve_within(listener, metrics, EndpointLimits::DEFAULT).await
}

/// [`serve`] within `limits`.
pub async fn serve_within(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
    limits: EndpointLimits,
) {
    use http_body_util::Full;
    use hyper::body::Bytes;
    use hyper::{Request, Response, StatusCode};
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let mut warned = false;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                log::warn!("metrics: accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            if !warned {
                log::warn!(
                    "metrics: {} connections open, closing {peer} (and more, said once)",
                    limits.max_connections
                );
                warned = true;
            }
            drop(stream);
            continue;
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let metrics = metrics.clone();
                async move {
                    let resp = if req.uri().path() == "/metrics" {
                        Response::builder()
                            .header(hyper::header::CONTENT_TYPE, CONTENT_TYPE)
                            .body(Full::new(Bytes::from(metrics.encode())))
                    } else {
                        Response::builder()
                            .status(StatusCode::NOT_FOUND)
                            .body(Full::new(Bytes::from_static(
                                b"nena serves /metrics only\n",
                            )))
                    };
                    resp
                }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .serve_connection(io, service);
            match tokio::time::timeout(limits.lifetime, conn).await {
                Ok(Err(e)) => log::debug!("metrics: {peer}: {e}"),
                Err(_) => log::debug!("metrics: {peer}: closed after {:?}", limits.lifetime),
                Ok(Ok(())) => {}
            }
        });
    }
}

/// Binds `addr` for [`serve`] (so that a taken port is an error at start, not later).
pub async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("--metrics {addr}: cannot listen"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slow clients (slowloris) cannot hold the endpoint (issue 41, finding 6): connections
    /// past the cap are closed at once, one that never finishes its header is closed after
    /// the header timeout, and then a scrape is served.
    #[tokio::test]
    async fn slow_clients_are_capped_and_timed_out() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let limits = EndpointLimits {
            max_connections: 3,
            header_timeout: Duration::from_millis(500),
            lifetime: Duration::from_secs(30),
        };
        let server = tokio::spawn(serve_within(listener, Metrics::new(Role::Serve), limits));
        let mut slow = Vec::new();
        for _ in 0..3 {
            let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
            c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                .await
                .unwrap();
            slow.push(c);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        // The fourth is closed without an answer while the three hold their slots.
        let mut extra = tokio::net::TcpStream::connect(addr).await.unwrap();
        let _ = extra
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .await;
        let mut got = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), extra.read_to_end(&mut got)).await;
        assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "{read:?} {got:?}");
        // Each slow one is closed once its header is late (well before 10 s).
        for c in &mut slow {
            let mut buf = Vec::new();
            let r = tokio::time::timeout(Duration::from_secs(10), c.read_to_end(&mut buf)).await;
            assert!(
                r.is_ok(),
                "a client that never finished its header was kept"
            );
        }
        drop(slow);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut text = String::new();
        c.read_to_string(&mut text).await.unwrap();
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        server.abort();
    }

    /// The text a scrape gets: every family, the labels of what was recorded, and the
    /// OpenMetrics end marker.
    #[test]
    fn sessions_bytes_refusals_and_handshakes_are_encoded() {
        let m = Metrics::new(Role::Serve);
        let text = m.encode();
        assert!(
            text.contains("nena_sessions_active{role=\"serve\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("nena_integrity_failures_total{role=\"serve\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("nena_retried_openings_total{role=\"serve\"} 0"),
            "{text}"
        );
        let active = m.begin();
        assert!(m
            .encode()
            .contains("nena_sessions_active{role=\"serve\"} 1"));
        m.handshake(Duration::from_millis(3));
        let wire = Wire {
            paths: vec![("198.18.3.2".into(), 1000, 2000)],
            joins: 1,
            closes: 0,
            recoveries: 0,
        };
        m.end("aead", Outcome::Ok, &wire);
        m.end("aead", Outcome::Refused("access_denied"), &Wire::default());
        m.end("stream", Outcome::Integrity, &Wire::default());
        m.retried_opening();
        drop(active);
        let text = m.encode();
        for line in [
            "nena_sessions_active{role=\"serve\"} 0",
            "nena_sessions_total{role=\"serve\",mode=\"aead\",outcome=\"ok\"} 1",
            "nena_sessions_total{role=\"serve\",mode=\"aead\",outcome=\"refused\"} 1",
            "nena_sessions_total{role=\"serve\",mode=\"stream\",outcome=\"integrity_failure\"} 1",
            "nena_refusals_total{role=\"serve\",cause=\"access_denied\"} 1",
            "nena_integrity_failures_total{role=\"serve\"} 1",
            "nena_retried_openings_total{role=\"serve\"} 1",
            "nena_bytes_total{role=\"serve\",path=\"198.18.3.2\",direction=\"sent\"} 1000",
            "nena_bytes_total{role=\"serve\",path=\"198.18.3.2\",direction=\"received\"} 2000",
            "nena_subflow_events_total{role=\"serve\",event=\"join\"} 1",
            "nena_handshake_seconds_count{role=\"serve\"} 1",
            "nena_handshake_seconds_bucket{le=\"0.004\",role=\"serve\"} 1",
            "nena_handshake_seconds_bucket{le=\"0.002\",role=\"serve\"} 0",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    /// Errors are told apart by their types, not their words.
    #[test]
    fn outcomes_of_errors() {
        let refused: anyhow::Error = ErrorReply::new(Status::TooLarge, "too large").into();
        assert_eq!(
            Outcome::of_error(&refused.context("serving")),
            Outcome::Refused("file_too_large")
        );
        let corrupt: anyhow::Error = ErrorReply::new(Status::Corrupt, "tag").into();
        assert_eq!(Outcome::of_error(&corrupt), Outcome::Integrity);
        let se = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            nena_proto::SessionError::Truncated { records: 3 },
        );
        let e = anyhow::Error::new(se).context("reading");
        assert_eq!(Outcome::of_error(&e), Outcome::Integrity);
        let stop = anyhow::Error::new(std::io::Error::other(crate::ends::ShuttingDown));
        assert_eq!(
            Outcome::of_error(&stop.context("relaying")),
            Outcome::Aborted
        );
        assert_eq!(
            Outcome::of_error(&anyhow::anyhow!("connection reset")),
            Outcome::Failed
        );
    }

    #[test]
    fn trusted_link_waits_follow_the_process_totals() {
        let m = Metrics::new(Role::Gateway);
        m.trusted_waits(nena_mptcp::TrustedWaits {
            waiting: 2,
            waited: 3,
            gave_up: 1,
        });
        let text = {
            let mut out = String::new();
            prometheus_client::encoding::text::encode(&mut out, &m.registry).unwrap();
            out
        };
        for line in [
            "nena_sessions_waiting_for_trusted_link{role=\"gateway\"} 2",
            "nena_trusted_link_waits_total{role=\"gateway\"} 3",
            "nena_trusted_link_wait_timeouts_total{role=\"gateway\"} 1",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        // Totals only grow: a later reading that is the same changes nothing.
        m.trusted_waits(nena_mptcp::TrustedWaits {
            waiting: 0,
            waited: 3,
            gave_up: 1,
        });
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &m.registry).unwrap();
        assert!(
            out.contains("nena_trusted_link_waits_total{role=\"gateway\"} 3"),
            "{out}"
        );
        assert!(out.contains("nena_sessions_waiting_for_trusted_link{role=\"gateway\"} 0"));
    }
}
