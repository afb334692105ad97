//! The proxy client (`nena proxy client`, and the TCP side of `nena run` and `nena gateway`):
//! what its listener speaks ([`Entry`]: plain TCP for a `--forward` server, SOCKS5, connections
//! redirected by `nena run`'s BPF programs or by the gateway's TPROXY rule), and one session
//! per accepted connection: the opening (`proxy::open`), the relay, the log line.

use crate::conn::{self, ClientOptions};
use crate::error::{Doing, During, Error, ProxyFault, Result, Timeout};
use crate::ops::metrics::{PathsUsed, Tally};
use crate::ops::stop::StopSignal;
use crate::proxy::bridge::{abort_nena, relay, stopped, Ending};
use crate::proxy::listen::{accept_loop, mode_of, session_line, ProxyLimits, ProxyStats};
use crate::proxy::open::{open_to, FirstFlight, Opened};
use crate::proxy::socks::{self, Command, Handshake, Host, Rep, Target, Users};
use crate::stream::PROXY_BUF;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

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
        dns: Arc<crate::proxy::carry::responder::Responder>,
    },
    /// Connections a TPROXY rule sent to the listener (`nena gateway`): the accepted
    /// socket's local address is the original destination. A connection to the listener's
    /// own address (loopback) did not come through the rule and is reset. A LAN host with
    /// its cap of connections carried has the next one reset.
    Transparent {
        hosts: Arc<crate::proxy::gateway::bounds::HostSessions>,
    },
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

/// How long an application has for its SOCKS greeting and request.
pub const SOCKS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Reads the application's SOCKS exchange up to its request (CONNECT or UDP ASSOCIATE),
/// answering as it goes; on a malformed exchange answers what the RFC says and fails.
pub(crate) async fn socks_accept<S: AsyncRead + AsyncWrite + Unpin>(
    plain: &mut S,
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
                    return Err(Error::from(e).during(Doing::SocksExchange));
                }
            }
        }
    };
    tokio::time::timeout(SOCKS_HANDSHAKE_TIMEOUT, exchange)
        .await
        .map_err(|_| Timeout::SocksRequest {
            after: SOCKS_HANDSHAKE_TIMEOUT,
        })?
}

/// One SOCKS session of the proxy client: the exchange with the application, the nena
/// session, the connect request, the reply passed on, then the relay. A UDP ASSOCIATE is
/// [`crate::proxy::socks::associate::associate`]'s.
async fn socks_session(
    mut plain: TcpStream,
    users: Option<Users>,
    opts: Arc<ClientOptions>,
    connecting: Arc<Semaphore>,
    stop: StopSignal,
    tally: Tally,
) -> Result<String, Error> {
    // Boxed: the exchange and the opening are done before the session idles, and their
    // state would otherwise stay allocated in every session's task for its whole life.
    let (target, command, leftover) = Box::pin(socks_accept(&mut plain, users)).await?;
    if command == Command::UdpAssociate {
        // The control connection carries nothing after the request: `leftover` is dropped
        // with what follows it.
        return Box::pin(crate::proxy::socks::associate::associate(
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
        c.c.writer.write_all(&leftover).await?;
    }
    log::info!("SOCKS CONNECT {target}: mode {}", mode_of(c.c.info));
    let line = carry(
        plain,
        c,
        leftover.len() as u64,
        Some(&target),
        &opts,
        &stop,
        &tally,
    )
    .await?;
    Ok(format!("{target}: {line}"))
}

/// One redirected connection (`nena run`, `nena gateway`): its original destination from `lookup`, asked
/// for exactly as a SOCKS request is; a refusal resets the application's connection (it is
/// already established, to the proxy: a reset is the closest to "refused" it can see).
#[allow(clippy::too_many_arguments)]
async fn redirected_session(
    plain: TcpStream,
    peer: SocketAddr,
    lookup: OriginalDst,
    dns: Option<Arc<crate::proxy::carry::responder::Responder>>,
    opts: Arc<ClientOptions>,
    connecting: Arc<Semaphore>,
    stop: StopSignal,
    tally: Tally,
) -> Result<String, Error> {
    let Some(dst) = (lookup.0)(peer) else {
        let _ = plain.set_zero_linger();
        return Err(ProxyFault::NoOriginalDst { peer }.into());
    };
    if let (53, Some(dns)) = (dst.port(), &dns) {
        let n = dns
            .serve_tcp(plain)
            .await
            .during(Doing::ServingDns { dst })?;
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
    let c = match opened {
        Ok(c) => c,
        Err((code, e)) => {
            let _ = plain.set_zero_linger();
            return Err(e.during(Doing::ResettingApplication { code }));
        }
    };
    log::info!("CONNECT {target} (redirected): mode {}", mode_of(c.c.info));
    let line = carry(plain, c, first, Some(&target), &opts, &stop, &tally).await?;
    Ok(format!("{target}: {line}"))
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
        .during(Doing::Listening { addr: listen })?;
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
    // Sessions reused flow after flow wait for the next flow in a pool: one that opens
    // nothing ahead when the client keeps none (`--warm`).
    let own_pool = (opts.warm.is_none() && opts.reuse.is_some())
        .then(|| Arc::new(crate::proxy::warm::Warm::new(0)));
    let warm = match &own_pool {
        Some(w) => Some(w.clone() as Arc<dyn conn::Ahead>),
        None => opts.warm.clone(),
    };
    let opts = Arc::new(ClientOptions {
        buffer: PROXY_BUF,
        warm,
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
    let mut served = Ok(());
    while let Some(r) = loops.join_next().await {
        if let Err(e) = r.during(Doing::AwaitingListener).and_then(|r| r) {
            served = Err(e);
            break;
        }
    }
    // The sessions waiting for a next flow end with their closing records.
    if let Some(w) = own_pool {
        w.close().await;
    }
    served
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
                    Entry::Transparent { hosts } => {
                        let Some(_slot) = hosts.take(peer.ip()) else {
                            let _ = plain.set_zero_linger();
                            return Err(ProxyFault::HostCap {
                                peer,
                                cap: hosts.cap(),
                            }
                            .into());
                        };
                        let dst = plain.local_addr()?;
                        if dst.ip().is_loopback() {
                            let _ = plain.set_zero_linger();
                            return Err(ProxyFault::SelfConnect { peer, dst }.into());
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
) -> Result<String, Error> {
    let mut first = FirstFlight::new(&plain);
    let opened = Box::pin(open_to(None, Some(&mut first), &opts, &connecting, &tally)).await;
    let first = first.len();
    let c = match opened {
        Ok(c) => c,
        Err((code, e)) => {
            let _ = plain.set_zero_linger();
            return Err(e.during(Doing::ResettingApplication { code }));
        }
    };
    carry(plain, c, first, None, &opts, &stop, &tally).await
}

/// Carries an application connection over its opened session until both ends are done,
/// then counts what crossed each path and returns the session's line. `sent` bytes of the
/// application's went with the opening and count as sent; `target`, when the client knows
/// it, leads the error's context. A session the server reuses (`OP_REUSE`) whose flow ended
/// with flow-end records both ways goes back to `opts.warm` for the next flow.
async fn carry(
    plain: TcpStream,
    opened: Opened,
    sent: u64,
    target: Option<&(dyn std::fmt::Display + Sync)>,
    opts: &ClientOptions,
    stop: &StopSignal,
    tally: &Tally,
) -> Result<String, Error> {
    let Opened { mut c, reuse, .. } = opened;
    let ending = if reuse { Ending::Flow } else { Ending::Session };
    let gate = c.gate.as_ref();
    let live = || PathsUsed::of_gate(gate);
    let relayed = tally
        .live(
            live,
            relay(plain, &mut c.reader, &mut c.writer, ending, stop),
        )
        .await;
    let paths = crate::conn::Paths::of(&c);
    let split = paths.describe();
    tally.paths_used(PathsUsed::of_client(&paths.subflows, c.gate.as_ref()));
    let stopping = stopped(&relayed);
    let relayed = relayed.during(Doing::RelayingClient {
        target: target.map(|t| t.to_string()),
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
    let line = session_line(b.up + sent, b.down, b.plain_gone, c.info, &split);
    match (&opts.warm, b.flow_ended) {
        (Some(pool), true) => {
            c.reader.next_flow();
            c.writer.next_flow();
            pool.give_back(c);
        }
        // The flow ended; the session ends with its closing record.
        _ if reuse => c.end_later(conn::END_WITHIN),
        _ => {}
    }
    Ok(line)
}
