//! The proxy server (`nena proxy server`): where it sends its sessions ([`Egress`]: one
//! `--forward` target, or what each session asks for within `--allow`), the opening of a
//! session (the open request read, the access token checked before anything is resolved or
//! connected, the reply), then the relay, or the DNS and datagram services of
//! [`crate::proxy::carry`].

use crate::conn::halves::SessionSocket;
use crate::conn::{self, AcceptOptions, ServerConn};
use crate::error::{Doing, During, Error, ProxyFault, Result, Timeout};
use crate::ops::metrics::{PathsUsed, Tally};
use crate::ops::stop::StopSignal;
use crate::proxy::bridge::{abort_nena, relay, stopped, Bridged, Ending};
use crate::proxy::ends::Refusing;
use crate::proxy::listen::{
    accept_loop, bytes_carried, mode_of, session_line, ProxyLimits, ProxyStats,
};
use crate::proxy::socks::{AllowList, Host, Rep, Target};
use crate::stream::{SecureReader, SecureWriter, PROXY_BUF};
use crate::wire::{AccessToken, ConnectReply, Service};
use nena_proto::{AbortReason, SessionError};
use std::future::Future;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// Where the proxy server sends its sessions.
#[derive(Debug, Clone)]
pub enum Egress {
    /// Every session to this one target; no request is read (`--forward`).
    Forward(SocketAddr),
    /// Each session names its destination ([`crate::wire::ConnectRequest`]); only what the list permits is
    /// connected (`--allow`; empty: nothing).
    Allow(AllowList),
}
/// How the proxy server reaches its targets and relays to them: [`Tcp`] in the proxy
/// server; an in-memory target in tests (the `testing` module's pair).
pub trait Connector: Send + Sync {
    /// A connection to a target.
    type Stream: Send;
    /// Connects to `addr` (the caller bounds the time it takes).
    fn connect(
        &self,
        addr: SocketAddr,
    ) -> impl Future<Output = std::io::Result<Self::Stream>> + Send;
    /// Relays between a target's connection and the session until both ends are done, or
    /// the proxy stops.
    fn relay<SR, SW>(
        &self,
        target: Self::Stream,
        sec_r: &mut SecureReader<SR>,
        sec_w: &mut SecureWriter<SW>,
        ending: Ending,
        stop: &StopSignal,
    ) -> impl Future<Output = std::io::Result<Bridged>> + Send
    where
        SR: AsyncRead + Unpin + Send,
        SW: AsyncWrite + Unpin + Send;
    /// The resolver a DNS session's queries are asked of (op 6): the first `nameserver` of
    /// this host's /etc/resolv.conf unless the connector says otherwise.
    fn resolver(&self) -> Result<crate::proxy::carry::resolver::Upstream> {
        crate::proxy::carry::resolver::Upstream::system()
    }
}

/// The proxy server's targets over TCP: [`TcpStream::connect`], and [`relay`] (the target's
/// connection is reset when the session fails or the proxy stops).
#[derive(Debug, Clone, Copy)]
pub struct Tcp;

impl Connector for Tcp {
    type Stream = TcpStream;
    fn connect(&self, addr: SocketAddr) -> impl Future<Output = std::io::Result<TcpStream>> + Send {
        TcpStream::connect(addr)
    }
    fn relay<SR, SW>(
        &self,
        target: TcpStream,
        sec_r: &mut SecureReader<SR>,
        sec_w: &mut SecureWriter<SW>,
        ending: Ending,
        stop: &StopSignal,
    ) -> impl Future<Output = std::io::Result<Bridged>> + Send
    where
        SR: AsyncRead + Unpin + Send,
        SW: AsyncWrite + Unpin + Send,
    {
        relay(target, sec_r, sec_w, ending, stop)
    }
}

/// Resolves `target` (domain names here, on the server) and connects to the first address
/// the allow-list permits; a refusal is the SOCKS reply code and why.
async fn connect_allowed<C: Connector>(
    allow: &AllowList,
    target: &Target,
    limit: Duration,
    connector: &C,
) -> std::result::Result<C::Stream, (Rep, String)> {
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
                match resolved
                    .iter()
                    .find_map(|a| allow.guarded(*a).map(|g| (a, g)))
                {
                    Some((a, what)) => format!(
                        "{target} ({}) is not permitted by --allow: {a} is guarded ({what}); \
                         only an --allow rule inside that range reaches it",
                        list.join(", ")
                    ),
                    None if allow.0.is_empty() => format!(
                        "{target} ({}) is not permitted: this proxy server has no --allow rule \
                         (its operator gives --allow PREFIX:PORTS)",
                        list.join(", ")
                    ),
                    None => format!("{target} ({}) is not permitted by --allow", list.join(", ")),
                }
            },
        ));
    }
    let mut last = (Rep::HostUnreachable, String::new());
    for addr in permitted {
        match tokio::time::timeout(limit, connector.connect(addr)).await {
            Ok(Ok(s)) => return Ok(s),
            Ok(Err(e)) => last = (Rep::of_connect_error(&e), format!("{addr}: {e}")),
            Err(_) => last = (Rep::HostUnreachable, format!("{addr}: connect timed out")),
        }
    }
    Err(last)
}

/// What the proxy server opened for a session.
enum Admitted<S> {
    /// A TCP connection to the destination (ops 4, 5), and whether the client reuses the
    /// session for its next flow ([`crate::wire::OP_REUSE`], honoured in `aead` only).
    Stream(S, bool),
    /// DNS queries for its resolver (op 6).
    Dns(crate::proxy::carry::resolver::Upstream),
    /// Datagrams within `--allow` (op 7; op 8 with the client's offer of the datagram
    /// plane).
    Datagram(AllowList, Option<crate::wire::plane::PlaneOffer>),
}

/// The proxy server's datagram plane: its UDP socket (`None`: it has none), and whether it
/// is turned off (`--no-datagram-plane`: every offer declined).
#[derive(Clone, Default)]
pub struct PlaneSetting {
    pub server: Option<Arc<crate::proxy::carry::plane::PlaneServer>>,
    pub off: bool,
}

/// Why the proxy server does not open a session: the code and reason of its
/// [`ConnectReply`], or no reply at all to a client that sent no open request it can read.
enum Refusal {
    /// The reply's code and reason, and what was refused for the log ("CONNECT dest" or
    /// "session").
    Reply(Rep, String, String),
    Silent(Error),
    /// The open request arrived altered (it failed the session's integrity check): the
    /// client is told so with an abort record ([`AbortReason::Altered`]), and may try again
    /// with a new session.
    Altered(Error),
}

/// The proxy server's side of a session's opening: reads the client's [`ConnectRequest`],
/// checks the access token first (nothing is resolved or connected for a client without
/// it), then whether this server serves that kind of request, and connects. Returns the
/// target's connection (the caller answers "succeeded").
async fn admit<R: AsyncRead + Unpin, W, C: Connector>(
    c: &mut ServerConn<R, W>,
    egress: &Egress,
    token: Option<&AccessToken>,
    limit: Duration,
    connector: &C,
) -> std::result::Result<Admitted<C::Stream>, Refusal> {
    let req = tokio::time::timeout(limit, c.reader.read_connect_request())
        .await
        .map_err(|_| Refusal::Silent(Timeout::OpenRequest { after: limit }.into()))?;
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
                Error::from(e).during(Doing::ReadingOpenRequest),
            ))
        }
        // A session given back unused (opened ahead and replaced, `proxy::warm`).
        Err(e) if e.ended_before_any() => return Err(Refusal::Silent(ProxyFault::Unused.into())),
        // Whatever else the client sent is not for us to answer: it may be an application's
        // bytes from a proxy client older than the open request.
        Err(e) => {
            return Err(Refusal::Silent(
                Error::from(e).during(Doing::ReadingNoOpenRequest),
            ))
        }
    };
    // Flows end apart from the session only where records can say so.
    let reuse = req.reuse && c.info.is_some_and(|i| i.mode == nena_proto::Mode::Aead);
    let what = match (req.service, &req.target) {
        (Service::Dns, _) => "DNS".to_string(),
        (Service::Datagram, _) => "datagrams".to_string(),
        (Service::Stream, Some(t)) => format!("CONNECT {t}"),
        (Service::Stream, None) => "session".to_string(),
    };
    let refuse = |code, msg: String| Refusal::Reply(code, msg, what.clone());
    if let Some(t) = token {
        if !t.admits(req.token.as_ref()) {
            return Err(refuse(
                Rep::NotAllowed,
                crate::ops::access::DENIED.to_string(),
            ));
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
                format!(
                    "this proxy server has no --allow rule: it carries no {what} (its operator \
                     gives --allow PREFIX:PORTS)"
                ),
            ))
        }
        (Service::Dns, Egress::Allow(_)) => {
            let up = connector
                .resolver()
                .map_err(|e| refuse(Rep::GeneralFailure, format!("{e:#}")))?;
            log::info!("{}: DNS through {}", c.peer, up.nameserver);
            return Ok(Admitted::Dns(up));
        }
        (Service::Datagram, Egress::Allow(allow)) => {
            log::info!(
                "{}: datagrams{}",
                c.peer,
                if req.plane.is_some() {
                    " (datagram plane offered)"
                } else {
                    ""
                }
            );
            return Ok(Admitted::Datagram(allow.clone(), req.plane));
        }
    }
    match (egress, &req.target) {
        // The one target of this proxy (--forward): nothing the client sends can choose
        // another.
        (Egress::Forward(forward), None) => {
            match tokio::time::timeout(limit, connector.connect(*forward)).await {
                Ok(Ok(s)) => Ok(Admitted::Stream(s, reuse)),
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
            let s = connect_allowed(allow, t, limit, connector)
                .await
                .map_err(|(code, msg)| refuse(code, msg))?;
            log::info!("{}: CONNECT {t}", c.peer);
            Ok(Admitted::Stream(s, reuse))
        }
        (Egress::Allow(_), None) => Err(refuse(
            Rep::NotAllowed,
            "this proxy server has no --forward target: it connects to what a SOCKS request \
             names, within its --allow rules (it is for `nena proxy client --socks5`)"
                .to_string(),
        )),
    }
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
    let plane = PlaneSetting {
        server: if limits.datagram_plane && matches!(&egress, Egress::Allow(a) if !a.0.is_empty()) {
            match crate::proxy::carry::plane::PlaneServer::bind(listener.local_addr()?) {
                Ok(p) => {
                    log::info!("datagram plane on UDP port {}", p.port());
                    tokio::spawn(p.clone().run());
                    Some(p)
                }
                Err(e) => {
                    log::warn!(
                        "datagram plane: cannot bind UDP {}: {e}; datagrams ride their sessions",
                        listener.local_addr()?
                    );
                    None
                }
            }
        } else {
            None
        },
        off: !limits.datagram_plane,
    };
    run_server_on(listener, egress, accept, limits, plane, Tcp).await
}

/// [`run_server_with`] on connections from any acceptor (the in-memory harness's, say),
/// its targets reached by `connector`, its datagram plane as `plane` says.
pub async fn run_server_on<A, C>(
    listener: A,
    egress: Egress,
    accept: AcceptOptions,
    limits: ProxyLimits,
    plane: PlaneSetting,
    connector: C,
) -> Result<()>
where
    A: conn::Acceptor,
    A::Conn: Into<conn::Connection>,
    C: Connector + Clone + 'static,
{
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
            let plane = plane.clone();
            let connector = connector.clone();
            async move {
                let start = std::time::Instant::now();
                let c = conn::accept(stream.into(), peer, &accept)
                    .await
                    .map_err(crate::Error::handshake)?;
                tally.handshake(start.elapsed(), c.info, c.resumed);
                if let Some(i) = c.info {
                    let resumed = if c.resumed { ", resumed" } else { "" };
                    log::info!("{peer}: mode {}{resumed}", i.describe());
                }
                serve_opened(
                    c,
                    &egress,
                    token.as_ref(),
                    &plane,
                    accept.handshake_timeout,
                    &connector,
                    stop,
                    &tally,
                )
                .await
            }
        },
    )
    .await
}

/// The proxy server's session after its handshake: the opening (the open request read, the
/// access token checked, the target connected by `connector` within `limit`), the reply,
/// then the relay or the DNS and datagram services; what the session did on its paths goes
/// to `tally`. Returns the session's line.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn serve_opened<R, W, C>(
    mut c: ServerConn<R, W>,
    egress: &Egress,
    token: Option<&AccessToken>,
    plane: &PlaneSetting,
    limit: Duration,
    connector: &C,
    stop: StopSignal,
    tally: &Tally,
) -> Result<String, Error>
where
    R: AsyncRead + Unpin + Send,
    W: SessionSocket,
    C: Connector,
{
    // Flows this session carried before the one being opened (a session the client reuses
    // flow after flow, `OP_REUSE`), and their bytes.
    let (mut flows, mut inbound, mut outbound) = (0u64, 0u64, 0u64);
    loop {
        let admitted = if flows == 0 {
            admit(&mut c, egress, token, limit, connector).await
        } else {
            // The client's next flow: it keeps an idle session for less than `limit`
            // (`proxy::warm`), then ends it with its closing record.
            tokio::select! {
                biased;
                // A stopping proxy takes no new flow (as it accepts no new connection).
                _ = stop.winding_down() => Err(Refusal::Silent(ProxyFault::Unused.into())),
                r = admit(&mut c, egress, token, limit, connector) => r,
            }
        };
        let target = match admitted {
            Ok(t) => t,
            // The client ended a reused session between flows, or kept it idle longer than
            // this server waits, or the proxy stops: the session's clean end.
            Err(Refusal::Silent(e))
                if flows > 0
                    && matches!(
                        e.kind(),
                        Error::Proxy(ProxyFault::Unused)
                            | Error::Timeout(Timeout::OpenRequest { .. })
                    ) =>
            {
                let _ = tokio::time::timeout(conn::END_WITHIN, c.writer.shutdown()).await;
                let (split, used) = paths_of(&c.writer);
                tally.paths_used(used);
                return Ok(format!(
                    "session done after {flows} flow{} ({inbound} B in, {outbound} B out); \
                     mode {}; subflows: {split}",
                    if flows == 1 { "" } else { "s" },
                    mode_of(c.info)
                ));
            }
            Err(Refusal::Silent(e)) => return Err(e),
            Err(Refusal::Altered(e)) => {
                let told = c.writer.abort(AbortReason::Altered).await;
                if matches!(told, Ok(true)) {
                    c.reader.discard(Duration::from_secs(2)).await;
                }
                return Err(e.during(Doing::ToldClient));
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
        // The data begins now, maybe long after the handshake (a session opened ahead): the
        // receive buffer may grow as a new session's does (docs/benchmarks-log.md, "Sessions
        // opened ahead and bulk").
        if flows == 0 {
            if let Some(fd) = c.writer.get_ref().socket_fd() {
                crate::stream::low_water::widen_for_data(fd.as_raw_fd());
            }
        }
        let mut ok = ConnectReply {
            code: Rep::Succeeded,
            msg: String::new(),
        }
        .encode();
        // An offer of the datagram plane is answered right after the reply, in the same write.
        let mut registered = None;
        if let Admitted::Datagram(_, Some(offer)) = &target {
            let (answer, reg) = crate::proxy::carry::plane::answer(
                plane.server.as_ref(),
                plane.off,
                c.dgram.as_ref(),
                offer,
            );
            if let crate::wire::plane::PlaneAnswer::Declined(d) = answer {
                log::info!("{}: datagram plane declined: {}", c.peer, d.reason());
            }
            ok.extend_from_slice(&answer.encode());
            registered = reg;
        }
        c.writer.write_msg(ok).await?;
        let (target, reuse) = match target {
            Admitted::Stream(t, reuse) => (t, reuse),
            Admitted::Dns(up) => {
                let served = tokio::select! {
                    r = crate::proxy::carry::resolver::serve(&mut c.reader, &mut c.writer, &up) => r,
                    _ = stop.stopped() => Err(ProxyFault::Stopped.into()),
                };
                let _ = c.writer.shutdown().await;
                let n = served?;
                return Ok(format!("DNS: {n} queries answered by {}", up.nameserver));
            }
            Admitted::Datagram(allow, Some(offer)) if registered.is_some() => {
                let (Some(reg), Some(keys)) = (registered, c.dgram.clone()) else {
                    return Err(Error::Internal("a plane session without its keys"));
                };
                let served = tokio::select! {
                    r = crate::proxy::carry::plane::serve_plane(&mut c.reader, &mut c.writer, &allow, &keys, &offer, reg) => r,
                    _ = stop.stopped() => Err(ProxyFault::Stopped.into()),
                };
                let _ = c.writer.shutdown().await;
                let n = served?;
                tally.datagrams(&n.plane.metrics());
                return Ok(format!(
                    "datagrams: {} sent, {} received, {} not permitted by --allow; {}",
                    n.relay.sent,
                    n.relay.received,
                    n.relay.refused,
                    n.plane.describe()
                ));
            }
            Admitted::Datagram(allow, _) => {
                let served = tokio::select! {
                    r = crate::proxy::carry::relay::serve(&mut c.reader, &mut c.writer, &allow) => r,
                    _ = stop.stopped() => Err(ProxyFault::Stopped.into()),
                };
                let _ = c.writer.shutdown().await;
                let n = served?;
                return Ok(format!(
                    "datagrams: {} sent, {} received, {} not permitted by --allow",
                    n.sent, n.received, n.refused
                ));
            }
        };
        let fd = c.writer.get_ref().socket_fd().map(|f| f.as_raw_fd());
        // SAFETY: `c` owns the socket and outlives the relay that `live` runs the reader beside.
        let live = unsafe { PathsUsed::server_reader(fd) };
        let relayed = tally
            .live(
                live,
                connector.relay(
                    target,
                    &mut c.reader,
                    &mut c.writer,
                    if reuse { Ending::Flow } else { Ending::Session },
                    &stop,
                ),
            )
            .await;
        if let Ok(b) = &relayed {
            if b.flow_ended {
                // The session goes on: what its paths carried is read at its end.
                flows += 1;
                (inbound, outbound) = (inbound + b.down, outbound + b.up);
                log::info!(
                    "{}: flow {flows} done ({})",
                    c.peer,
                    bytes_carried(b.down, b.up, b.plain_gone)
                );
                c.reader.next_flow();
                c.writer.next_flow();
                continue;
            }
        }
        let (split, used) = paths_of(&c.writer);
        tally.paths_used(used);
        let stopping = stopped(&relayed);
        let relayed = relayed.during(Doing::RelayingServer {
            mode: mode_of(c.info),
            split: split.clone(),
        });
        let b = match relayed {
            Ok(b) => b,
            Err(e) => {
                if stopping {
                    abort_nena(&mut c.reader, c.writer).await;
                }
                return Err(e);
            }
        };
        let line = session_line(b.down, b.up, b.plain_gone, c.info, &split);
        if reuse {
            // The client ended the session with its flow: so does this side.
            let _ = tokio::time::timeout(conn::END_WITHIN, c.writer.shutdown()).await;
        }
        return Ok(if flows == 0 {
            line
        } else {
            format!("flow {} of a reused session: {line}", flows + 1)
        });
    }
}

/// What a session's paths carried (its subflows' bytes): the line's split, and the counts.
fn paths_of<W: SessionSocket>(w: &SecureWriter<W>) -> (String, PathsUsed) {
    match w.get_ref().socket_fd() {
        Some(fd) => {
            let subflows = conn::subflow_bytes(fd);
            (
                conn::describe_split(&subflows),
                PathsUsed::of_server(&subflows, Some(fd)),
            )
        }
        None => (conn::describe_split(&[]), PathsUsed::default()),
    }
}
