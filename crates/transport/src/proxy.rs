//! `nena proxy`: plain TCP in, nena over MPTCP between two proxies, plain TCP out.
//!
//! ```text
//! app ──TCP──> proxy client ══nena/MPTCP══> proxy server ──TCP──> target
//! ```
//!
//! Each session is one task relaying both directions at once (copy_bidirectional style,
//! through the session's own zero-copy pumps [`copy_in`] and [`copy_out`]): nothing is
//! queued beyond the session's buffers, so a slow side slows the other down (back-pressure)
//! and memory is bounded by sessions x 2 x [`PROXY_BUF`]. When one side ends its direction
//! cleanly, the proxy ends the same direction on the other side (half-close; in `aead` mode
//! with the closing record) and keeps the other direction going until it ends too. A plain
//! peer that goes away (resets, or closes without reading the rest, as iperf3 does at the
//! end of a test) ends the session cleanly, not as a failure (see [`bridge`]). When the
//! nena side fails (an integrity failure, a truncated `aead` stream), the plain side is
//! **reset**, not closed, so that the application sees an error instead of a short but
//! seemingly complete stream. With `--forward` the proxy uses the nena handshake and then raw
//! bytes: no application header, so a client cannot choose where the proxy server connects:
//! every session goes to its one `--forward` target. Each end logs, per session, the mode
//! and the bytes per subflow.
//!
//! SOCKS5 (`--socks5` on the client, `--allow` on the server): the client speaks SOCKS5 to
//! the application ([`crate::socks::Handshake`]), opens one nena session per CONNECT and
//! sends the destination inside it ([`crate::wire::ConnectRequest`]); the server resolves it,
//! connects only to addresses its `--allow` list permits and answers with a SOCKS reply code
//! ([`crate::wire::ConnectReply`]), which the client passes on to the application. A UDP
//! ASSOCIATE gets a UDP socket of the client's and one datagram session (op 7) for its
//! datagrams ([`crate::socks_udp`]), sent on by the server within the same `--allow` list. A server
//! without `--forward` and without `--allow` refuses every request (never an open relay).

use crate::bridge::{abort_nena, relay, stopped};
pub use crate::bridge::{bridge, Bridged, DRAIN_AFTER_PLAIN_RESET};
use crate::conn::{self, AcceptOptions, ClientOptions};
pub use crate::ends::{Refused, Refusing, ShuttingDown};
use crate::metrics::{HandshakeFailed, Metrics, Tally, Wire};
use crate::proxy_open::{open_to, FirstFlight};
use crate::socks::{self, AllowList, Command, Handshake, Host, Rep, Target, Users};
use crate::stop::StopSignal;
use crate::stream::PROXY_BUF;
use crate::wire::{AccessToken, ConnectReply, Service};
use anyhow::{Context, Result};
use nena_proto::{AbortReason, SessionError, SessionInfo};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

fn mode_of(info: Option<SessionInfo>) -> String {
    info.map_or("?".to_string(), |i| i.describe())
}

/// Session counters of a proxy (for logs and tests).
#[derive(Debug, Default)]
pub struct ProxyStats {
    pub sessions_ok: AtomicU64,
    pub sessions_failed: AtomicU64,
}

/// Options shared by both proxy ends.
#[derive(Debug, Clone)]
pub struct ProxyLimits {
    /// Sessions served at once; further connections wait in the listen backlog.
    pub max_sessions: usize,
    /// Client end: nena sessions being opened at once (connect, first flight, handshake).
    /// Opened sessions do not count. This bounds bursts of connects: every connect in
    /// progress watches the kernel's MPTCP path-manager events, which grow with the number
    /// of connects in flight.
    pub max_connecting: usize,
    /// After SIGTERM/SIGINT, how long the sessions in progress may go on; those left are
    /// then reset on both sides (never closed cleanly: a peer must not take a cut stream
    /// for a complete one).
    pub grace: Duration,
    /// Server end: the access token every session must open with (`--token-file`),
    /// checked before anything is resolved or connected. (The client end sends
    /// [`ClientOptions::token`].)
    pub token: Option<AccessToken>,
    /// Counters for `--metrics` (None: none kept).
    pub metrics: Option<Arc<Metrics>>,
}

/// The log line of a finished proxy session: bytes each way, the mode, and how the nena
/// side's bytes were split across the paths.
fn session_line(
    inbound: u64,
    outbound: u64,
    gone: bool,
    mode: Option<SessionInfo>,
    split: &str,
) -> String {
    format!(
        "session done ({inbound} B in, {outbound} B out{}); mode {}; subflows: {split}",
        if gone {
            "; the plain side closed before reading everything"
        } else {
            ""
        },
        mode_of(mode)
    )
}

async fn accept_loop<F, Fut>(
    listener: TcpListener,
    limits: &ProxyLimits,
    stats: Arc<ProxyStats>,
    session: F,
) -> Result<()>
where
    F: Fn(TcpStream, SocketAddr, StopSignal, Tally) -> Fut,
    Fut: std::future::Future<Output = Result<String>> + Send + 'static,
{
    let (switch, signal) = crate::stop::stop_pair();
    let sessions =
        conn::accept_until_interrupted(&listener, limits.max_sessions, |stream, peer| {
            let tally = Tally::begin(limits.metrics.as_ref());
            let fut = session(stream, peer, signal.clone(), tally.clone());
            let stats = stats.clone();
            async move {
                let ended = fut.await;
                tally.finish(&ended);
                match ended {
                    Ok(summary) => {
                        stats.sessions_ok.fetch_add(1, Ordering::Relaxed);
                        log::info!("{peer}: {summary}");
                    }
                    Err(e) => {
                        stats.sessions_failed.fetch_add(1, Ordering::Relaxed);
                        log::warn!("{peer}: {e:#}");
                    }
                }
            }
        })
        .await?;
    drop(listener);
    sessions.wind_down(limits.grace, &switch).await;
    Ok(())
}

/// What the proxy client's listener speaks.
#[derive(Debug, Clone)]
pub enum Entry {
    /// Plain TCP: every connection goes to the proxy server's `--forward` target.
    Plain,
    /// SOCKS5 (`--socks5`); with `users`, username/password is required (RFC 1929).
    Socks5 { users: Option<Users> },
    /// Connections redirected to the listener by `nena run`'s BPF programs: each one's
    /// original destination comes from the lookup, and is asked for as SOCKS does; one to
    /// port 53 is DNS over TCP, answered by the responder (the proxy server's resolver,
    /// through nena) instead of being connected to the resolver it named.
    Redirected {
        lookup: OriginalDst,
        dns: Arc<crate::carry::responder::Responder>,
    },
    /// Connections a TPROXY rule sent to the listener (`nena gateway`): the accepted
    /// socket's local address is the original destination. A connection to the listener's
    /// own address (loopback) did not come through the rule and is reset.
    Transparent,
}

/// The original destination of a redirected connection, by its client's address and port
/// as the proxy accepted it (`nena run`: read, and removed, from its BPF map).
#[derive(Clone)]
pub struct OriginalDst(pub Arc<dyn Fn(SocketAddr) -> Option<SocketAddr> + Send + Sync>);

impl std::fmt::Debug for OriginalDst {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OriginalDst")
    }
}

/// Where the proxy server sends its sessions.
#[derive(Debug, Clone)]
pub enum Egress {
    /// Every session to this one target; no request is read (`--forward`).
    Forward(SocketAddr),
    /// Each session names its destination ([`ConnectRequest`]); only what the list permits is
    /// connected (`--allow`; empty: nothing).
    Allow(AllowList),
}

/// How long an application has for its SOCKS greeting and request.
pub const SOCKS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Reads the application's SOCKS exchange up to its request (CONNECT or UDP ASSOCIATE),
/// answering as it goes; on a malformed exchange answers what the RFC says and fails.
async fn socks_accept(
    plain: &mut TcpStream,
    users: Option<Users>,
) -> Result<(Target, Command, Vec<u8>)> {
    let mut hs = Handshake::new(users);
    let mut buf = [0u8; 1024];
    let exchange = async {
        loop {
            let n = plain.read(&mut buf).await?;
            if n == 0 {
                hs.eof()?;
            }
            match hs.feed(&buf[..n]) {
                Ok(p) => {
                    if !p.send.is_empty() {
                        plain.write_all(&p.send).await?;
                    }
                    if let Some(t) = p.request {
                        return Ok((t, p.command, p.leftover));
                    }
                }
                Err(e) => {
                    if let Some(r) = e.reply() {
                        let _ = plain.write_all(&r).await;
                    }
                    return Err(anyhow::Error::new(e).context("SOCKS exchange"));
                }
            }
        }
    };
    tokio::time::timeout(SOCKS_HANDSHAKE_TIMEOUT, exchange)
        .await
        .map_err(|_| {
            anyhow::anyhow!("SOCKS exchange: no request within {SOCKS_HANDSHAKE_TIMEOUT:?}")
        })?
}

/// One SOCKS session of the proxy client: the exchange with the application, the nena
/// session, the connect request, the reply passed on, then the relay. A UDP ASSOCIATE is
/// [`crate::socks_udp::associate`]'s.
async fn socks_session(
    mut plain: TcpStream,
    users: Option<Users>,
    opts: Arc<ClientOptions>,
    connecting: Arc<Semaphore>,
    stop: StopSignal,
    tally: Tally,
) -> Result<String> {
    // Boxed: the exchange and the opening are done before the session idles, and their
    // state would otherwise stay allocated in every session's task for its whole life.
    let (target, command, leftover) = Box::pin(socks_accept(&mut plain, users)).await?;
    if command == Command::UdpAssociate {
        // The control connection carries nothing after the request: `leftover` is dropped
        // with what follows it.
        return Box::pin(crate::socks_udp::associate(
            plain,
            target,
            &opts,
            &connecting,
            &stop,
            &tally,
        ))
        .await;
    }
    let mut c = match Box::pin(open_to(Some(&target), None, &opts, &connecting, &tally)).await {
        Ok(c) => c,
        Err((code, e)) => {
            let _ = plain.write_all(&socks::reply(code, None)).await;
            return Err(e);
        }
    };
    plain.write_all(&socks::reply(Rep::Succeeded, None)).await?;
    if !leftover.is_empty() {
        c.writer.write_all(&leftover).await?;
    }
    log::info!("SOCKS CONNECT {target}: mode {}", mode_of(c.info));
    let relayed = relay(plain, &mut c.reader, &mut c.writer, &stop).await;
    let paths = crate::client::Paths::of(&c);
    let split = paths.describe();
    tally.wire(Wire::of_client(&paths, &c));
    if stopped(&relayed) {
        abort_nena(&mut c.reader, c.writer).await;
    }
    let b = relayed.with_context(|| format!("{target}; mode {}; {split}", mode_of(c.info)))?;
    Ok(format!(
        "{target}: {}",
        session_line(
            b.up + leftover.len() as u64,
            b.down,
            b.plain_gone,
            c.info,
            &split
        )
    ))
}

/// One redirected connection (`nena run`, `nena gateway`): its original destination from `lookup`, asked
/// for exactly as a SOCKS request is; a refusal resets the application's connection (it is
/// already established, to the proxy: a reset is the closest to "refused" it can see).
#[allow(clippy::too_many_arguments)]
async fn redirected_session(
    plain: TcpStream,
    peer: SocketAddr,
    lookup: OriginalDst,
    dns: Option<Arc<crate::carry::responder::Responder>>,
    opts: Arc<ClientOptions>,
    connecting: Arc<Semaphore>,
    stop: StopSignal,
    tally: Tally,
) -> Result<String> {
    let Some(dst) = (lookup.0)(peer) else {
        let _ = plain.set_zero_linger();
        anyhow::bail!(
            "no original destination recorded for {peer} (a connection from outside the \
             cgroup?); reset"
        );
    };
    if let (53, Some(dns)) = (dst.port(), &dns) {
        let n = dns.serve_tcp(plain).await.context(dst)?;
        return Ok(format!("{dst}: DNS over TCP, {n} queries answered"));
    }
    let target = Target {
        host: Host::Ip(dst.ip()),
        port: dst.port(),
    };
    // The application has connected and may have sent its request already (it does not
    // wait for a SOCKS reply): what it has sent by the time the session is open goes with
    // the open request, which saves the round trip of the server's reply.
    let mut first = FirstFlight::new(&plain);
    let opened = Box::pin(open_to(
        Some(&target),
        Some(&mut first),
        &opts,
        &connecting,
        &tally,
    ))
    .await;
    let first = first.len();
    let mut c = match opened {
        Ok(c) => c,
        Err((code, e)) => {
            let _ = plain.set_zero_linger();
            return Err(e.context(format!("{code}; the application's connection is reset")));
        }
    };
    log::info!("CONNECT {target} (redirected): mode {}", mode_of(c.info));
    let relayed = relay(plain, &mut c.reader, &mut c.writer, &stop).await;
    let paths = crate::client::Paths::of(&c);
    let split = paths.describe();
    tally.wire(Wire::of_client(&paths, &c));
    if stopped(&relayed) {
        abort_nena(&mut c.reader, c.writer).await;
    }
    let b = relayed.with_context(|| format!("{target}; mode {}; {split}", mode_of(c.info)))?;
    Ok(format!(
        "{target}: {}",
        session_line(b.up + first, b.down, b.plain_gone, c.info, &split)
    ))
}

/// Resolves `target` (domain names here, on the server) and connects to the first address
/// the allow-list permits; a refusal is the SOCKS reply code and why.
async fn connect_allowed(
    allow: &AllowList,
    target: &Target,
    limit: Duration,
) -> std::result::Result<TcpStream, (Rep, String)> {
    let resolved: Vec<SocketAddr> = match &target.host {
        Host::Ip(ip) => vec![SocketAddr::new(*ip, target.port)],
        Host::Domain(d) => {
            match tokio::time::timeout(limit, tokio::net::lookup_host((d.as_str(), target.port)))
                .await
            {
                Ok(Ok(a)) => a.collect(),
                Ok(Err(e)) => {
                    return Err((Rep::HostUnreachable, format!("cannot resolve {d}: {e}")))
                }
                Err(_) => return Err((Rep::HostUnreachable, format!("resolving {d} timed out"))),
            }
        }
    };
    let permitted = allow.filter(&resolved);
    if permitted.is_empty() {
        let list: Vec<String> = resolved.iter().map(|a| a.to_string()).collect();
        return Err((
            Rep::NotAllowed,
            if resolved.is_empty() {
                format!("{target} resolves to no address")
            } else {
                format!("{target} ({}) is not permitted by --allow", list.join(", "))
            },
        ));
    }
    let mut last = (Rep::HostUnreachable, String::new());
    for addr in permitted {
        match tokio::time::timeout(limit, TcpStream::connect(addr)).await {
            Ok(Ok(s)) => return Ok(s),
            Ok(Err(e)) => last = (Rep::of_connect_error(&e), format!("{addr}: {e}")),
            Err(_) => last = (Rep::HostUnreachable, format!("{addr}: connect timed out")),
        }
    }
    Err(last)
}

/// What the proxy server opened for a session.
enum Admitted {
    /// A TCP connection to the destination (ops 4, 5).
    Stream(TcpStream),
    /// DNS queries for its resolver (op 6).
    Dns(crate::carry::resolver::Upstream),
    /// Datagrams within `--allow` (op 7).
    Datagram(AllowList),
}

/// Why the proxy server does not open a session: the code and reason of its
/// [`ConnectReply`], or no reply at all to a client that sent no open request it can read.
enum Refusal {
    /// The reply's code and reason, and what was refused for the log ("CONNECT dest" or
    /// "session").
    Reply(Rep, String, String),
    Silent(anyhow::Error),
    /// The open request arrived altered (it failed the session's integrity check): the
    /// client is told so with an abort record ([`AbortReason::Altered`]), and may try again
    /// with a new session.
    Altered(anyhow::Error),
}

/// The proxy server's side of a session's opening: reads the client's [`ConnectRequest`],
/// checks the access token first (nothing is resolved or connected for a client without
/// it), then whether this server serves that kind of request, and connects. Returns the
/// target's connection (the caller answers "succeeded").
async fn admit(
    c: &mut conn::ServerConn,
    egress: &Egress,
    token: Option<&AccessToken>,
    limit: Duration,
) -> std::result::Result<Admitted, Refusal> {
    let req = tokio::time::timeout(limit, c.reader.read_connect_request())
        .await
        .map_err(|_| Refusal::Silent(anyhow::anyhow!("no open request within {limit:?}")))?;
    let req = match req {
        Ok(r) => r,
        // An altered request (its tag) or a version-1 client: told why, and nothing is
        // connected.
        Err(crate::stream::MsgError::Wire(
            e @ (crate::wire::WireError::BadConnectTag | crate::wire::WireError::OldVersion(_)),
        )) => {
            return Err(Refusal::Reply(
                Rep::NotAllowed,
                e.to_string(),
                "session".into(),
            ))
        }
        Err(e) if e.session_error().is_some_and(SessionError::is_altered) => {
            return Err(Refusal::Altered(
                anyhow::Error::new(e).context("reading the open request"),
            ))
        }
        // Whatever else the client sent is not for us to answer: it may be an application's
        // bytes from a proxy client older than the open request.
        Err(e) => {
            return Err(Refusal::Silent(anyhow::Error::new(e).context(
                "reading the open request (a nena proxy client older than it, or not a proxy \
                 client?)",
            )))
        }
    };
    let what = match (req.service, &req.target) {
        (Service::Dns, _) => "DNS".to_string(),
        (Service::Datagram, _) => "datagrams".to_string(),
        (Service::Stream, Some(t)) => format!("CONNECT {t}"),
        (Service::Stream, None) => "session".to_string(),
    };
    let refuse = |code, msg: String| Refusal::Reply(code, msg, what.clone());
    if let Some(t) = token {
        if !t.admits(req.token.as_ref()) {
            return Err(refuse(Rep::NotAllowed, crate::access::DENIED.to_string()));
        }
    }
    match (req.service, egress) {
        (Service::Stream, _) => {}
        (_, Egress::Forward(_)) => {
            return Err(refuse(
                Rep::NotAllowed,
                format!(
                    "this proxy server forwards every session to its one --forward target and \
                     takes no {what} session (`nena run` needs a proxy server with --allow)"
                ),
            ))
        }
        (_, Egress::Allow(allow)) if allow.0.is_empty() => {
            return Err(refuse(
                Rep::NotAllowed,
                format!("this proxy server has no --allow rule: it carries no {what}"),
            ))
        }
        (Service::Dns, Egress::Allow(_)) => {
            let up = crate::carry::resolver::Upstream::system()
                .map_err(|e| refuse(Rep::GeneralFailure, format!("{e:#}")))?;
            log::info!("{}: DNS through {}", c.peer, up.nameserver);
            return Ok(Admitted::Dns(up));
        }
        (Service::Datagram, Egress::Allow(allow)) => {
            log::info!("{}: datagrams", c.peer);
            return Ok(Admitted::Datagram(allow.clone()));
        }
    }
    match (egress, &req.target) {
        // The one target of this proxy (--forward): nothing the client sends can choose
        // another.
        (Egress::Forward(forward), None) => {
            match tokio::time::timeout(limit, TcpStream::connect(forward)).await {
                Ok(Ok(s)) => Ok(Admitted::Stream(s)),
                Ok(Err(e)) => Err(refuse(
                    Rep::of_connect_error(&e),
                    format!("cannot connect to {forward}: {e}"),
                )),
                Err(_) => Err(refuse(
                    Rep::HostUnreachable,
                    format!("connecting to {forward} timed out"),
                )),
            }
        }
        (Egress::Forward(_), Some(t)) => Err(refuse(
            Rep::NotAllowed,
            format!(
                "this proxy server forwards every session to its one --forward target and \
                 takes no request for {t} (it is for `nena proxy client --listen`)"
            ),
        )),
        (Egress::Allow(allow), Some(t)) => {
            let s = connect_allowed(allow, t, limit)
                .await
                .map_err(|(code, msg)| refuse(code, msg))?;
            log::info!("{}: CONNECT {t}", c.peer);
            Ok(Admitted::Stream(s))
        }
        (Egress::Allow(_), None) => Err(refuse(
            Rep::NotAllowed,
            "this proxy server has no --forward target: it connects to what a SOCKS request \
             names, within its --allow rules (it is for `nena proxy client --socks5`)"
                .to_string(),
        )),
    }
}

/// `nena proxy client`: accept plain TCP on `listen`, carry each connection over nena to
/// the proxy server at `opts.remote`.
pub async fn run_client(
    listen: SocketAddr,
    opts: ClientOptions,
    limits: ProxyLimits,
    ready: impl FnOnce(SocketAddr),
) -> Result<()> {
    run_client_with(listen, Entry::Plain, opts, limits, ready).await
}

/// `nena proxy client` with its [`Entry`]: plain TCP or SOCKS5.
pub async fn run_client_with(
    listen: SocketAddr,
    entry: Entry,
    opts: ClientOptions,
    limits: ProxyLimits,
    ready: impl FnOnce(SocketAddr),
) -> Result<()> {
    conn::raise_nofile_limit();
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    ready(listener.local_addr()?);
    serve_client(vec![listener], entry, opts, limits).await
}

/// The proxy client on listeners already bound (`nena run` binds its own first, to tell
/// its BPF programs where they are); sessions on all of them share the limits.
pub async fn serve_client(
    listeners: Vec<TcpListener>,
    entry: Entry,
    opts: ClientOptions,
    limits: ProxyLimits,
) -> Result<()> {
    conn::raise_nofile_limit();
    let opts = Arc::new(ClientOptions {
        buffer: PROXY_BUF,
        ..opts
    });
    let connecting = Arc::new(Semaphore::new(limits.max_connecting.max(1)));
    let mut loops = tokio::task::JoinSet::new();
    for listener in listeners {
        let opts = opts.clone();
        let connecting = connecting.clone();
        let entry = entry.clone();
        let limits = limits.clone();
        loops.spawn(async move { client_loop(listener, entry, opts, connecting, &limits).await });
    }
    // Every listener until interrupted; the first failure stops them all.
    while let Some(r) = loops.join_next().await {
        r.context("a proxy listener's task panicked")??;
    }
    Ok(())
}

async fn client_loop(
    listener: TcpListener,
    entry: Entry,
    opts: Arc<ClientOptions>,
    connecting: Arc<Semaphore>,
    limits: &ProxyLimits,
) -> Result<()> {
    accept_loop(
        listener,
        limits,
        Arc::new(ProxyStats::default()),
        move |plain, peer, stop, tally| {
            let opts = opts.clone();
            let connecting = connecting.clone();
            let entry = entry.clone();
            async move {
                match entry {
                    Entry::Socks5 { users } => {
                        socks_session(plain, users, opts, connecting, stop, tally).await
                    }
                    Entry::Redirected { lookup, dns } => {
                        redirected_session(
                            plain,
                            peer,
                            lookup,
                            Some(dns),
                            opts,
                            connecting,
                            stop,
                            tally,
                        )
                        .await
                    }
                    Entry::Transparent => {
                        let dst = plain.local_addr()?;
                        if dst.ip().is_loopback() {
                            let _ = plain.set_zero_linger();
                            anyhow::bail!(
                                "{peer} connected to the gateway's listener itself ({dst}), not \
                                 through its TPROXY rule; reset"
                            );
                        }
                        let lookup = OriginalDst(Arc::new(move |_| Some(dst)));
                        redirected_session(plain, peer, lookup, None, opts, connecting, stop, tally)
                            .await
                    }
                    Entry::Plain => forward_session(plain, opts, connecting, stop, tally).await,
                }
            }
        },
    )
    .await
}

/// One `--listen` connection of a `--forward` proxy client: the session's opening carries
/// what the application has sent by then ([`FirstFlight`]), the rest follows the server's
/// reply. A refusal or a failed opening resets the application's connection.
async fn forward_session(
    plain: TcpStream,
    opts: Arc<ClientOptions>,
    connecting: Arc<Semaphore>,
    stop: StopSignal,
    tally: Tally,
) -> Result<String> {
    let mut first = FirstFlight::new(&plain);
    let opened = Box::pin(open_to(None, Some(&mut first), &opts, &connecting, &tally)).await;
    let first = first.len();
    let mut c = match opened {
        Ok(c) => c,
        Err((code, e)) => {
            let _ = plain.set_zero_linger();
            return Err(e.context(format!("{code}; the application's connection is reset")));
        }
    };
    let relayed = relay(plain, &mut c.reader, &mut c.writer, &stop).await;
    let paths = crate::client::Paths::of(&c);
    let split = paths.describe();
    tally.wire(Wire::of_client(&paths, &c));
    if stopped(&relayed) {
        abort_nena(&mut c.reader, c.writer).await;
    }
    let b = relayed.with_context(|| format!("mode {}; {split}", mode_of(c.info)))?;
    Ok(session_line(
        b.up + first,
        b.down,
        b.plain_gone,
        c.info,
        &split,
    ))
}

/// `nena proxy server`: accept nena sessions on `listen`, carry each to `forward` over
/// plain TCP.
pub async fn run_server(
    listen: SocketAddr,
    forward: SocketAddr,
    accept: AcceptOptions,
    limits: ProxyLimits,
    ready: impl FnOnce(SocketAddr),
) -> Result<()> {
    run_server_with(listen, Egress::Forward(forward), accept, limits, ready).await
}

/// `nena proxy server` with its [`Egress`]: one `--forward` target, or requested
/// destinations checked against `--allow`.
pub async fn run_server_with(
    listen: SocketAddr,
    egress: Egress,
    accept: AcceptOptions,
    limits: ProxyLimits,
    ready: impl FnOnce(SocketAddr),
) -> Result<()> {
    conn::raise_nofile_limit();
    let listener = conn::listen(listen, accept.congestion.as_deref())?;
    ready(listener.local_addr()?);
    let accept = Arc::new(AcceptOptions {
        buffer: PROXY_BUF,
        ..accept
    });
    let token = limits.token.clone();
    accept_loop(
        listener,
        &limits,
        Arc::new(ProxyStats::default()),
        move |stream, peer, stop, tally| {
            let accept = accept.clone();
            let egress = egress.clone();
            let token = token.clone();
            async move {
                let start = std::time::Instant::now();
                let mut c = conn::accept(stream, peer, &accept)
                    .await
                    .context(HandshakeFailed)?;
                tally.handshake(start.elapsed(), c.info);
                if let Some(i) = c.info {
                    log::info!("{peer}: mode {}", i.describe());
                }
                let target =
                    match admit(&mut c, &egress, token.as_ref(), accept.handshake_timeout).await {
                        Ok(t) => t,
                        Err(Refusal::Silent(e)) => return Err(e),
                        Err(Refusal::Altered(e)) => {
                            let told = c.writer.abort(AbortReason::Altered).await;
                            if matches!(told, Ok(true)) {
                                c.reader.discard(Duration::from_secs(2)).await;
                            }
                            return Err(e.context("the client was told and may retry"));
                        }
                        Err(Refusal::Reply(code, msg, what)) => {
                            let reply = ConnectReply {
                                code,
                                msg: msg.clone(),
                            };
                            let _ = c.writer.write_msg(reply.encode()).await;
                            let _ = c.writer.shutdown().await;
                            c.reader.discard(Duration::from_secs(2)).await;
                            return Err(Refusing { code, msg, what }.into());
                        }
                    };
                c.writer
                    .write_msg(
                        ConnectReply {
                            code: Rep::Succeeded,
                            msg: String::new(),
                        }
                        .encode(),
                    )
                    .await?;
                let target = match target {
                    Admitted::Stream(t) => t,
                    Admitted::Dns(up) => {
                        let served = tokio::select! {
                            r = crate::carry::resolver::serve(&mut c.reader, &mut c.writer, &up) => r,
                            _ = stop.stopped() => Err(anyhow::anyhow!("stopped")),
                        };
                        let _ = c.writer.shutdown().await;
                        let n = served?;
                        return Ok(format!("DNS: {n} queries answered by {}", up.nameserver));
                    }
                    Admitted::Datagram(allow) => {
                        let served = tokio::select! {
                            r = crate::carry::relay::serve(&mut c.reader, &mut c.writer, &allow) => r,
                            _ = stop.stopped() => Err(anyhow::anyhow!("stopped")),
                        };
                        let _ = c.writer.shutdown().await;
                        let n = served?;
                        return Ok(format!(
                            "datagrams: {} sent, {} received, {} not permitted by --allow",
                            n.sent, n.received, n.refused
                        ));
                    }
                };
                let relayed = relay(target, &mut c.reader, &mut c.writer, &stop).await;
                let subflows = conn::subflow_bytes(c.fd());
                let split = conn::describe_split(&subflows);
                tally.wire(Wire::of_server(&subflows, c.fd()));
                if stopped(&relayed) {
                    abort_nena(&mut c.reader, c.writer).await;
                }
                let b = relayed
                    .with_context(|| format!("mode {}; subflows: {split}", mode_of(c.info)))?;
                Ok(session_line(b.down, b.up, b.plain_gone, c.info, &split))
            }
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handshake::secure_pair;
    #[allow(unused_imports)]
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Two proxies' nena halves joined back to back in memory, with kato-like protection
    /// replaced by raw (protection is tested elsewhere); checks both directions and half-close.
    #[tokio::test]
    async fn bridge_carries_both_directions_and_half_close() {
        // app <-> [bridge A] <-> secure link <-> [bridge B] <-> target
        let (app, a_plain) = tokio::io::duplex(4096);
        let (a_sec, b_sec) = tokio::io::duplex(4096);
        let (b_plain, target) = tokio::io::duplex(4096);
        let a = tokio::spawn(async move {
            let (sr, sw) = tokio::io::split(a_sec);
            let (mut r, mut w) = secure_pair(None, Vec::new(), sr, sw);
            let (pr, pw) = tokio::io::split(a_plain);
            bridge(pr, pw, &mut r, &mut w).await.unwrap()
        });
        let b = tokio::spawn(async move {
            let (sr, sw) = tokio::io::split(b_sec);
            let (mut r, mut w) = secure_pair(None, Vec::new(), sr, sw);
            let (pr, pw) = tokio::io::split(b_plain);
            bridge(pr, pw, &mut r, &mut w).await.unwrap()
        });
        // Target: read everything until EOF, then answer with its reverse and close.
        let t = tokio::spawn(async move {
            let (mut tr, mut tw) = tokio::io::split(target);
            let mut got = Vec::new();
            tr.read_to_end(&mut got).await.unwrap();
            let answer: Vec<u8> = got.iter().rev().copied().collect();
            tw.write_all(&answer).await.unwrap();
            tw.shutdown().await.unwrap();
            got.len()
        });
        let (mut ar, mut aw) = tokio::io::split(app);
        let msg: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        aw.write_all(&msg).await.unwrap();
        aw.shutdown().await.unwrap(); // half-close: the answer must still arrive
        let mut back = Vec::new();
        ar.read_to_end(&mut back).await.unwrap();
        let expect: Vec<u8> = msg.iter().rev().copied().collect();
        assert_eq!(back, expect);
        assert_eq!(t.await.unwrap(), msg.len());
        let ends = |up, down| Bridged {
            up,
            down,
            plain_gone: false,
        };
        assert_eq!(a.await.unwrap(), ends(100_000, 100_000));
        assert_eq!(b.await.unwrap(), ends(100_000, 100_000));
    }

    /// A nena side that ends without its closing record (a forged FIN on the way) must not
    /// look like a clean end to the application: the proxy resets the TCP connection.
    #[tokio::test]
    async fn a_truncated_aead_stream_resets_the_plain_side() {
        let nena_proto::Exchange {
            client: cs,
            server: ss,
            confirm,
            ..
        } = nena_proto::exchange_in(nena_proto::Mode::Aead);
        // The proxy's nena side: the client's records arrive, then the stream just ends.
        let (mut peer, ours) = tokio::io::duplex(1 << 16);
        let (_unused, peer_w) = tokio::io::duplex(16);
        peer.write_all(&confirm).await.unwrap();
        let mut w = crate::stream::SecureWriter::new(peer, Some(cs.split().0));
        w.write_all(b"first part of the answer").await.unwrap();
        w.flush().await.unwrap();
        drop(w); // no closing record
        let (sr, _) = tokio::io::split(ours);
        let (_, sw) = tokio::io::split(peer_w);
        let (mut r, mut sw) = secure_pair(Some(ss), Vec::new(), sr, sw);

        // The plain side: an application on loopback.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut s = TcpStream::connect(addr).await.unwrap();
        let app = tokio::spawn(async move {
            let mut got = Vec::new();
            let end = s.read_to_end(&mut got).await;
            (got, end)
        });
        let (plain, _) = listener.accept().await.unwrap();
        let err = relay(plain, &mut r, &mut sw, &StopSignal::never())
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("without its closing record"),
            "{err}"
        );
        let (got, end) = app.await.unwrap();
        assert_eq!(got, b"first part of the answer");
        let e = end.expect_err("the application must see an error, not a clean end");
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}");
    }

    /// An application that closes its socket without reading the rest (iperf3 at the end of
    /// a test): the session ends cleanly, the rest is taken off the nena side and dropped,
    /// and the nena side is ended cleanly too (no reset toward the other proxy).
    #[tokio::test]
    async fn an_application_that_closes_without_reading_ends_the_session_cleanly() {
        // The other proxy: sends 1 MiB, then its clean end; reads what we send until our end.
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let (sr, sw) = tokio::io::split(ours);
        let (mut r, mut w) = secure_pair(None, Vec::new(), sr, sw);
        let other = tokio::spawn(async move {
            let (tr, tw) = tokio::io::split(theirs);
            let (mut tr, mut tw) = secure_pair(None, Vec::new(), tr, tw);
            let data = vec![7u8; 1 << 20];
            let send = async {
                tw.write_all(&data).await?;
                tw.shutdown().await
            };
            let mut got = Vec::new();
            let recv = tr.read_to_end(&mut got);
            let (s, g) = tokio::join!(send, recv);
            (s, g.map(|_| got))
        });
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut app = TcpStream::connect(addr).await.unwrap();
        let (plain, _) = listener.accept().await.unwrap();
        app.write_all(b"request").await.unwrap();
        drop(app); // closed whole, nothing read
        let b = relay(plain, &mut r, &mut w, &StopSignal::never())
            .await
            .expect("a clean end");
        assert!(b.plain_gone, "{b:?}");
        assert_eq!(b.up, 7);
        let (sent, got) = other.await.unwrap();
        sent.expect("the other proxy's data was taken off the session");
        assert_eq!(got.unwrap(), b"request", "our side ended cleanly");
    }
}
