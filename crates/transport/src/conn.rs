//! Opening nena sessions over kernel MPTCP: the client side (connect from a trusted
//! address, hello as the first flight on the trusted subflow, untrusted paths released only
//! after its data-level ACK, then the server's answer) and the server side (accept, refuse
//! fallback unless allowed, handshake with a deadline).
//!
//! A *kato-mpc* connection has no in-band handshake either: the papers' negotiation rides on
//! the SYN and SYN-ACK (nena's BPF programs, attached by the command line, which hands the
//! transport an [`MpcLookup`] to read what they recorded); [`mpc_session`] turns that into a
//! kato session keyed by the MPTCP keys; without all three marks (request, consent,
//! confirmation) each side refuses the connection before a byte of data is written or read,
//! unless its user allowed plain (`allow_plain`: then plain on both sides, said so). A
//! connection of which the programs hold no record is refused either way. The wait for a
//! record's keys is async (the runtime's timer, never a sleeping thread: the other sessions
//! of a one-thread runtime go on meanwhile), and the record is forgotten once decided,
//! whatever it held.
//!
//! A *raw* connection skips the nena handshake: the same MPTCP socket and gate, with the
//! caller's first message as the first flight and no protection. It exists only as the
//! plain-MPTCP baseline of `nena bench transfer` (`nena serve --raw`, `nena perf --raw`).

use crate::handshake::{client_finish_held, entropy, secure_pair_with, server_handshake};
use crate::stream::{SecureReader, SecureWriter};
use anyhow::{anyhow, bail, Context, Result};
use nena_mptcp::{ConnectOptions, Gate, PathPolicy, PathReport, SubflowInfo};
use nena_proto::{ClientConfig, ClientHandshake, Mode, ServerConfig, SessionInfo, Suite};
use serde::Serialize;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// A session's reader over a tokio TCP stream.
pub type Reader = SecureReader<OwnedReadHalf>;
/// A session's writer over a tokio TCP stream.
pub type Writer = SecureWriter<OwnedWriteHalf>;

/// What nena's kato-mpc programs recorded about one connection (nena-bpf's `mpc`
/// module; the transport does not load BPF itself). `Debug` shows the keys' tokens only.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct MpcSeen {
    pub requested: bool,
    pub consented: bool,
    pub confirmed: bool,
    pub local_key: Option<[u8; 8]>,
    pub remote_key: Option<[u8; 8]>,
}

impl std::fmt::Debug for MpcSeen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use nena_proto::mpc::KeyByToken;
        f.debug_struct("MpcSeen")
            .field("requested", &self.requested)
            .field("consented", &self.consented)
            .field("confirmed", &self.confirmed)
            .field("local_key", &self.local_key.as_ref().map(KeyByToken))
            .field("remote_key", &self.remote_key.as_ref().map(KeyByToken))
            .finish()
    }
}

/// The kato-mpc programs' records of connections, by the 4-tuple of a connection's first
/// subflow as this host sees it (the command line that attached them implements it).
pub trait MpcRecords: Send + Sync + 'static {
    /// The record of the connection (local, remote) as it is now, without waiting (the
    /// caller polls); `Ok(None)`: the programs hold none.
    fn read(&self, local: SocketAddr, remote: SocketAddr) -> Result<Option<MpcSeen>>;
    /// The connection's side decided: its record goes, whatever it held.
    fn forget(&self, local: SocketAddr, remote: SocketAddr);
}

/// The kato-mpc programs' records, as the command line that attached them reads them.
#[derive(Clone)]
pub struct MpcLookup(pub std::sync::Arc<dyn MpcRecords>);

/// How long a side waits for its record's keys (a third ACK lost on the way lets the first
/// data segment carry them).
pub const MPC_KEYS_WITHIN: Duration = Duration::from_secs(1);
/// How often the record is read again meanwhile.
const MPC_POLL: Duration = Duration::from_millis(5);

/// The record of (local, remote), read until it holds both keys or [`MPC_KEYS_WITHIN`]
/// passed, waiting on the runtime's timer; then forgotten, whatever it held.
async fn await_record(
    lookup: &MpcLookup,
    local: SocketAddr,
    remote: SocketAddr,
) -> Result<Option<MpcSeen>> {
    let end = tokio::time::Instant::now() + MPC_KEYS_WITHIN;
    let r = loop {
        let r = lookup.0.read(local, remote);
        let keyed = matches!(&r, Ok(Some(s)) if s.local_key.is_some() && s.remote_key.is_some());
        if keyed || r.is_err() || tokio::time::Instant::now() >= end {
            break r;
        }
        tokio::time::sleep(MPC_POLL).await;
    };
    lookup.0.forget(local, remote);
    r
}

impl std::fmt::Debug for MpcLookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MpcLookup(..)")
    }
}

/// How a kato-mpc connection came out, for reports: `None` in other modes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MpcOutcome {
    /// Scrambling (both sides agreed) or plain on both sides.
    pub scrambled: bool,
    /// Why it is plain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plain_because: Option<String>,
}

impl MpcOutcome {
    /// The line the tools print when kato-mpc was not negotiated (None: it was).
    pub fn warning(&self) -> Option<String> {
        self.plain_because.as_ref().map(|r| {
            format!("kato-mpc not negotiated ({r}): this connection is plain on both sides")
        })
    }
}

/// The session of a kato-mpc connection on `fd`, from what the programs recorded (`lookup`
/// None: no programs on this side, so no request or consent). Errors close the connection:
/// both sides agreed but this one cannot scramble as the other will; or the connection
/// would be plain and `allow_plain` is false (fail closed: the caller has written nothing);
/// or the programs hold no record of it (`lookup` given: the peer may scramble).
pub async fn mpc_session(
    role: nena_proto::Role,
    fd: BorrowedFd<'_>,
    local: SocketAddr,
    remote: SocketAddr,
    lookup: Option<&MpcLookup>,
    allow_plain: bool,
) -> Result<(nena_proto::Session, MpcOutcome)> {
    use nena_proto::mpc::{decide, MpcDecision, MpcObservation};
    let fallback = nena_mptcp::is_fallback(fd).unwrap_or(false);
    let seen = match (lookup, fallback) {
        (Some(l), false) => await_record(l, local, remote).await?,
        (Some(l), true) => {
            l.0.forget(local, remote);
            None
        }
        (None, _) => None,
    };
    let obs = MpcObservation {
        fallback,
        seen: seen.is_some(),
        unrecorded: lookup.is_some() && !fallback && seen.is_none(),
        requested: seen.is_some_and(|s| s.requested),
        consented: seen.is_some_and(|s| s.consented),
        confirmed: seen.is_some_and(|s| s.confirmed),
        local_key: seen.and_then(|s| s.local_key),
        remote_key: seen.and_then(|s| s.remote_key),
        socket_token: nena_mptcp::info(fd).ok().map(|i| i.token),
    };
    let d = decide(role, &obs).map_err(|e| anyhow!("{e}; closing the connection"))?;
    if let Some(line) = d.refusal(role, allow_plain) {
        bail!("{line}");
    }
    let outcome = match &d {
        MpcDecision::Scramble(_) => MpcOutcome {
            scrambled: true,
            plain_because: None,
        },
        MpcDecision::Plain(r) => MpcOutcome {
            scrambled: false,
            plain_because: Some(r.describe(role).to_string()),
        },
    };
    Ok((nena_proto::Session::from_decision(role, &d), outcome))
}

/// How long ending a session that is not wanted any more may take ([`ClientConn::end`]).
pub const END_WITHIN: Duration = Duration::from_millis(500);

/// Sessions opened ahead of the flows that take them (the `warm` module's pool).
pub trait Ahead: Send + Sync + std::fmt::Debug {
    /// A session whose handshake is done and which carried nothing yet, if one is ready;
    /// another is opened in its place.
    fn take(&self, opts: &ClientOptions) -> Option<ClientConn>;
}

/// How a client connects.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    pub remote: SocketAddr,
    pub policy: PathPolicy,
    /// Modes offered, most preferred first.
    pub modes: Vec<Mode>,
    /// The cipher suite to prefer for `stream` and `aead` (`None`: the fastest on this CPU).
    pub suite: Option<Suite>,
    /// Key update intervals (log2 of records for aead, of bytes for stream); `None`: the
    /// protocol's largest. Smaller values exist to test key updates.
    pub aead_epoch_log2: Option<u8>,
    pub stream_epoch_log2: Option<u8>,
    pub allow_fallback: bool,
    /// Bound on connect, the first flight's ACK and the server's answer.
    pub timeout: Duration,
    /// No nena handshake (benchmark baseline only).
    pub raw: bool,
    /// Testing aid: append the hex of every hello (first flight) to this file. The hello
    /// holds the session keys: only in builds with the non-default `debug-dump` feature.
    #[cfg(feature = "debug-dump")]
    pub dump_first_flight: Option<std::path::PathBuf>,
    /// Buffer per direction of the session ([`crate::stream::BULK_BUF`] for files and perf).
    pub buffer: usize,
    /// Access token sent with the request, inside the session (`--token-file`).
    pub token: Option<crate::wire::AccessToken>,
    /// Re-create a subflow after its link's outage (userspace PM; `--no-recovery` turns it
    /// off). See nena-mptcp's `recovery` module.
    pub recover: bool,
    /// Congestion control of every subflow (`--cc NAME`; `None`: the namespace's default).
    pub congestion: Option<String>,
    /// `--mode kato-mpc`: the programs' records (None: no programs attached on this side).
    pub mpc: Option<MpcLookup>,
    /// `--mode kato-mpc`: send in the clear when the negotiation did not complete (by
    /// default such a connection is refused before a byte is sent).
    pub allow_plain: bool,
    /// A proxy's flows take sessions opened ahead from here (`nena gateway --warm`).
    pub warm: Option<std::sync::Arc<dyn Ahead>>,
    /// The server key to expect (`--server-key`, or the `known_servers` file: pinned on
    /// first contact). `None`: any key that signs the handshake, nothing pinned (tests and
    /// benchmarks). Checked only in offers with key agreement (aead, stream).
    pub server_key: Option<crate::server_keys::ServerKeyCheck>,
}

impl ClientOptions {
    /// Options to reach `remote` with `policy`, offering `modes`, everything else default.
    pub fn new(remote: SocketAddr, policy: PathPolicy, modes: Vec<Mode>) -> Self {
        ClientOptions {
            remote,
            policy,
            modes,
            suite: None,
            aead_epoch_log2: None,
            stream_epoch_log2: None,
            allow_fallback: false,
            timeout: Duration::from_secs(10),
            raw: false,
            #[cfg(feature = "debug-dump")]
            dump_first_flight: None,
            buffer: crate::stream::BULK_BUF,
            token: None,
            recover: true,
            congestion: None,
            mpc: None,
            allow_plain: false,
            warm: None,
            server_key: None,
        }
    }
}

/// An open client session. In the crypto modes the client's key confirmation is still in
/// `writer`'s buffer and leaves with its first write or flush: the server reads nothing of
/// the session before it, so a flow writes (or flushes) before it waits to read.
pub struct ClientConn {
    pub reader: Reader,
    pub writer: Writer,
    /// The MPTCP gate (with its own descriptor): subflow reports stay available.
    pub gate: Gate,
    /// Negotiated mode and cipher; `None` for a raw connection.
    pub info: Option<SessionInfo>,
    /// Time from connect() to the session being ready.
    pub setup: Duration,
    /// kato-mpc: whether it scrambles, or why not.
    pub mpc: Option<MpcOutcome>,
}

impl ClientConn {
    /// Ends a session that is not wanted any more (kept for a next query, or opened ahead)
    /// cleanly, within `limit`: its closing record tells the proxy server that nothing was
    /// cut off.
    pub async fn end(mut self, limit: Duration) {
        use tokio::io::AsyncWriteExt;
        let _ = tokio::time::timeout(limit, self.writer.shutdown()).await;
    }

    /// [`ClientConn::end`] in a task of its own (for a caller that cannot wait).
    pub fn end_later(self, limit: Duration) {
        tokio::spawn(self.end(limit));
    }

    /// Ends, each in a task of its own within [`END_WITHIN`], the sessions of `idle` (each
    /// with when it became idle) that waited `max_age` or longer; the others stay, in order.
    /// For the pools of sessions kept for later: DNS sessions kept for the next query, and
    /// sessions opened ahead of their flows.
    pub fn end_stale(idle: &mut Vec<(Instant, ClientConn)>, max_age: Duration) {
        let (fresh, stale): (Vec<_>, Vec<_>) = std::mem::take(idle)
            .into_iter()
            .partition(|(t, _)| t.elapsed() < max_age);
        *idle = fresh;
        for (_, c) in stale {
            c.end_later(END_WITHIN);
        }
    }

    /// What the connection is now: MPTCP or fallback, multipath, bytes per subflow.
    pub fn paths(&self) -> Option<PathReport> {
        match self.gate.report() {
            Ok(r) => Some(r),
            Err(e) => {
                log::warn!("cannot read the subflows of the connection: {e}");
                None
            }
        }
    }
}

/// Connect and open a session. For a raw connection, `raw_first` is written as the first
/// flight (it must be the first application message); for nena it must be `None`.
pub async fn connect(opts: &ClientOptions, raw_first: Option<Vec<u8>>) -> Result<ClientConn> {
    let mut attempt = 1;
    loop {
        match connect_once(opts, raw_first.clone()).await {
            Err(e) if attempt < CONNECT_ATTEMPTS && is_unverifiable(&e) => {
                log::warn!("{e:#}; retrying with a new connection and new keys");
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// Attempts of [`connect`] when the first flight could not be verified.
const CONNECT_ATTEMPTS: usize = 3;

/// nena-mptcp refused because it could not verify the first flight (its path-manager event
/// queue overflowed when many connections start at once), not because a rule was broken.
/// A new connection with fresh keys is as safe as the first attempt.
fn is_unverifiable(e: &anyhow::Error) -> bool {
    e.downcast_ref::<nena_mptcp::MptcpError>()
        .is_some_and(nena_mptcp::MptcpError::is_unverifiable)
}

/// Whether the options ask for kato-mpc (alone: it cannot be combined with in-band modes).
fn is_kato_mpc(modes: &[Mode]) -> Result<bool> {
    if !modes.contains(&Mode::KatoMpc) {
        return Ok(false);
    }
    if modes.len() > 1 {
        bail!("kato-mpc is negotiated on the SYN, without a hello: it cannot be combined with other modes");
    }
    Ok(true)
}

/// A kato-mpc client: connect, no hello; the first subflow's handshake carried the request
/// (our programs) and the consent (the server's), and both MPTCP keys.
async fn connect_kato_mpc(opts: &ClientOptions, start: Instant) -> Result<ClientConn> {
    let mopts = ConnectOptions {
        policy: opts.policy.clone(),
        allow_fallback: opts.allow_fallback,
        timeout: opts.timeout,
        congestion: opts.congestion.clone(),
    };
    let mut client = nena_mptcp::connect_async(opts.remote, &mopts).await?;
    client.before_first_flight()?;
    let (local, remote) = (client.stream.local_addr()?, client.stream.peer_addr()?);
    let (session, outcome) = mpc_session(
        nena_proto::Role::Client,
        client.stream.as_fd(),
        local,
        remote,
        opts.mpc.as_ref(),
        opts.allow_plain,
    )
    .await?;
    if let Some(w) = outcome.warning() {
        log::warn!("{w} (--allow-plain)");
    }
    // No first flight: the keys crossed in MP_CAPABLE on the trusted first subflow; the
    // untrusted paths may carry data from the first byte, scrambled (or plain, as agreed).
    client.gate_mut().set_recovery(opts.recover);
    client.after_first_flight(0, opts.timeout).await?;
    let (stream, gate) = client.into_parts();
    stream.set_nodelay(true)?;
    let (r, w) = stream.into_split();
    let info = Some(session.info());
    let (reader, writer) = socket_pair(Some(session), Vec::new(), r, w, opts.buffer);
    Ok(ClientConn {
        reader,
        writer,
        gate,
        info,
        setup: start.elapsed(),
        mpc: Some(outcome),
    })
}

async fn connect_once(opts: &ClientOptions, raw_first: Option<Vec<u8>>) -> Result<ClientConn> {
    let start = Instant::now();
    if !opts.raw && is_kato_mpc(&opts.modes)? {
        if raw_first.is_some() {
            bail!("internal: a kato-mpc connection has no first message of its own");
        }
        return connect_kato_mpc(opts, start).await;
    }
    let mut hs = if opts.raw {
        None
    } else {
        let mut cfg = ClientConfig::offering(&opts.modes);
        if let Some(s) = opts.suite {
            cfg.suite = s;
        }
        if let Some(e) = opts.aead_epoch_log2 {
            cfg.aead_epoch_log2 = e;
        }
        if let Some(e) = opts.stream_epoch_log2 {
            cfg.stream_epoch_log2 = e;
        }
        if cfg.offer.iter().any(|m| m.is_cryptographic()) {
            if let Some(check) = &opts.server_key {
                cfg.server_key = check.expected()?;
            }
        }
        Some(ClientHandshake::new(&cfg, entropy()?).map_err(|e| anyhow!("{e}"))?)
    };
    // The hello is written from the handshake's own buffer (wiped by it), never copied.
    let first: &[u8] = match (&hs, &raw_first) {
        (Some(h), None) => h.first_flight(),
        (None, Some(f)) => f,
        _ => bail!(
            "internal: a raw connection needs its first message, a nena one must not have one"
        ),
    };
    #[cfg(feature = "debug-dump")]
    if let (Some(path), Some(_)) = (&opts.dump_first_flight, &hs) {
        use std::io::Write;
        // Reserved whole and wiped: a growing String would leave copies of the hello behind.
        let mut line = zeroize::Zeroizing::new(String::with_capacity(first.len() * 2 + 1));
        for b in first {
            use std::fmt::Write as _;
            let _ = write!(line, "{b:02x}");
        }
        line.push('\n');
        // One write() per line: concurrent clients may append to the same file.
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        f.write_all(line.as_bytes())?;
    }
    let mopts = ConnectOptions {
        policy: opts.policy.clone(),
        allow_fallback: opts.allow_fallback,
        timeout: opts.timeout,
        congestion: opts.congestion.clone(),
    };
    let timeout = opts.timeout;
    // connect() and the first-flight gate, on readiness (no thread blocks).
    let mut client = nena_mptcp::connect_async(opts.remote, &mopts).await?;
    if let Err(e) = client.before_first_flight() {
        // A server that speaks first makes the connection fully established early, so
        // the in-kernel PM opens the untrusted subflow before our hello: say what the
        // real problem is.
        if let Some(preview) = spoke_first(client.stream.as_fd()) {
            bail!(
                "peer does not speak nena: it spoke first ({preview}), a nena server waits \
                 for the client's hello; nothing was sent"
            );
        }
        return Err(e.into());
    }
    client
        .stream
        .write_all(first)
        .await
        .context("writing the first flight")?;
    let first_len = first.len() as u64;
    client.gate_mut().set_recovery(opts.recover);
    if let Err(e) = client.after_first_flight(first_len, timeout).await {
        // A server that refuses the hello answers and closes the connection, which also
        // closes a subflow the in-kernel PM opened meanwhile, and the gate refuses for that
        // close. Say the server's reason first when it sent one, and the gate's refusal
        // after it (it may also be a real violation): the answer is only read (into a
        // handshake whose reply goes nowhere), nothing more is written.
        if let Some(h) = hs.as_mut() {
            let (mut r, _) = client.stream.split();
            let answer = client_finish_held(h, &mut r, Duration::from_millis(300)).await;
            if let Err(why) = answer {
                if why.downcast_ref::<nena_proto::HandshakeError>().is_some() {
                    return Err(anyhow!("{why}; and the connection was refused here: {e}"));
                }
            }
        }
        return Err(e.into());
    }
    let (stream, gate) = client.into_parts();
    stream.set_nodelay(true)?;
    let (mut r, w) = stream.into_split();
    let (session, leftover, confirm) = match hs {
        Some(mut h) => {
            let finished = client_finish_held(&mut h, &mut r, timeout).await;
            let (s, left, confirm) = match (&opts.server_key, finished) {
                (Some(check), Err(e)) => return Err(check.explain(e)),
                (_, f) => f?,
            };
            // Pinned on first contact before a byte of data (the confirmation included).
            if let (Some(check), Some(key)) = (&opts.server_key, h.server_key()) {
                check.proved(&key)?;
            }
            (Some(s), left, confirm)
        }
        None => (None, Vec::new(), Vec::new()),
    };
    let info = session.as_ref().map(|s| s.info());
    let (reader, mut writer) = socket_pair(session, leftover, r, w, opts.buffer);
    // The key confirmation leaves with the first record, in one write: no segment of its own
    // for a new subflow's first data to follow (docs/investigations/kernel-41-bytes). Every
    // client flow writes (a request, an open request) before it waits for the server.
    writer.queue_raw(&confirm);
    Ok(ClientConn {
        reader,
        writer,
        gate,
        info,
        setup: start.elapsed(),
        mpc: None,
    })
}

/// What the peer sent before we wrote anything, as printable text (None: nothing).
fn spoke_first(fd: BorrowedFd<'_>) -> Option<String> {
    let mut buf = [0u8; 48];
    // SAFETY: `buf` is writable for its length; the descriptor is open for the call.
    let n = unsafe {
        libc::recv(
            fd.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if n <= 0 {
        return None;
    }
    let n = n as usize;
    let text: String = buf[..n]
        .iter()
        .map(|&b| {
            if (0x20..0x7f).contains(&b) {
                b as char
            } else {
                '.'
            }
        })
        .collect();
    Some(format!("{n}+ bytes: \"{text}\""))
}

/// How a server accepts sessions.
#[derive(Debug, Clone)]
pub struct AcceptOptions {
    /// Modes accepted, most preferred first.
    pub modes: Vec<Mode>,
    pub allow_fallback: bool,
    /// No nena handshake (benchmark baseline listener).
    pub raw: bool,
    pub handshake_timeout: Duration,
    /// Buffer per direction of a session.
    pub buffer: usize,
    /// `--mode kato-mpc`: the programs' records (None: no programs attached on this side).
    pub mpc: Option<MpcLookup>,
    /// `--mode kato-mpc`: serve in the clear a connection whose negotiation did not
    /// complete (by default it is closed unread).
    pub allow_plain: bool,
    /// Congestion control of the listener, which its connections inherit (`--cc NAME`;
    /// `None`: the namespace's default).
    pub congestion: Option<String>,
    /// The server's long-term key, which signs every handshake with key agreement
    /// (`--key-file`). Without one only kato and plain are served.
    pub key: Option<nena_proto::ServerKey>,
}

/// An accepted server session.
pub struct ServerConn {
    pub reader: Reader,
    pub writer: Writer,
    /// Negotiated mode and cipher; `None` for a raw connection.
    pub info: Option<SessionInfo>,
    pub peer: SocketAddr,
    /// kato-mpc: whether it scrambles, or why not.
    pub mpc: Option<MpcOutcome>,
}

impl ServerConn {
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.reader.get_ref().as_ref().as_fd()
    }
}

/// Open an MPTCP listener for tokio, its connections with congestion control `congestion`.
pub fn listen(addr: SocketAddr, congestion: Option<&str>) -> Result<tokio::net::TcpListener> {
    nena_mptcp::check_enabled()?;
    let l =
        nena_mptcp::listen(addr, congestion).with_context(|| format!("cannot listen on {addr}"))?;
    l.set_nonblocking(true)?;
    Ok(tokio::net::TcpListener::from_std(l)?)
}

/// Run the server side of a freshly accepted connection up to an open session.
pub async fn accept(
    stream: TcpStream,
    peer: SocketAddr,
    opts: &AcceptOptions,
) -> Result<ServerConn> {
    let fallback = nena_mptcp::is_fallback(stream.as_fd()).unwrap_or(false);
    stream.set_nodelay(true)?;
    let (mut r, mut w) = stream.into_split();
    if fallback && !opts.allow_fallback {
        // A nena client (one that allowed fallback on its side) is told why.
        crate::handshake::refuse_fallback(&mut r, &mut w, opts.handshake_timeout).await;
        bail!("connection is plain TCP, not MPTCP (refused; start the server with --allow-fallback to accept)");
    }
    if opts.raw {
        let (reader, writer) = socket_pair(None, Vec::new(), r, w, opts.buffer);
        return Ok(ServerConn {
            reader,
            writer,
            info: None,
            peer,
            mpc: None,
        });
    }
    if is_kato_mpc(&opts.modes)? {
        let fd = r.as_ref().as_fd();
        let local = r.as_ref().local_addr()?;
        let remote = r.as_ref().peer_addr()?;
        let (session, outcome) = mpc_session(
            nena_proto::Role::Server,
            fd,
            local,
            remote,
            opts.mpc.as_ref(),
            opts.allow_plain,
        )
        .await?;
        if let Some(w) = outcome.warning() {
            log::warn!("{peer}: {w} (--allow-plain)");
        }
        let info = Some(session.info());
        let (reader, writer) = socket_pair(Some(session), Vec::new(), r, w, opts.buffer);
        return Ok(ServerConn {
            reader,
            writer,
            info,
            peer,
            mpc: Some(outcome),
        });
    }
    let cfg = ServerConfig {
        key: opts.key.clone(),
        ..ServerConfig::accepting(&opts.modes)
    };
    let (session, leftover) =
        server_handshake(&cfg, &mut r, &mut w, opts.handshake_timeout).await?;
    let info = Some(session.info());
    let (reader, writer) = socket_pair(Some(session), leftover, r, w, opts.buffer);
    Ok(ServerConn {
        reader,
        writer,
        info,
        peer,
        mpc: None,
    })
}

/// Bytes per subflow, for reports. `bytes_sent` counts what the subflow handed to the
/// network, retransmissions and segments dropped on the way out (a local rate limiter)
/// included; `bytes_acked` what the peer acknowledged: what crossed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SubflowBytes {
    pub local: Option<SocketAddr>,
    pub remote: Option<SocketAddr>,
    pub bytes_sent: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
}

impl From<&SubflowInfo> for SubflowBytes {
    fn from(s: &SubflowInfo) -> Self {
        SubflowBytes {
            local: s.local,
            remote: s.remote,
            bytes_sent: s.bytes_sent,
            bytes_acked: s.bytes_acked,
            bytes_received: s.bytes_received,
        }
    }
}

/// The split across paths for a server's log line, each subflow named by the client's end:
/// `198.18.1.2:40000 acked 1.2 MiB recv 3.0 KiB, ...` (`none` when the socket has no
/// subflows to show, e.g. after a fallback).
pub fn describe_split(subflows: &[SubflowBytes]) -> String {
    if subflows.is_empty() {
        return "none".into();
    }
    let parts: Vec<String> = subflows
        .iter()
        .map(|s| {
            format!(
                "{} acked {} recv {}",
                s.remote.map_or("?".into(), |a| a.to_string()),
                crate::units::human(s.bytes_acked),
                crate::units::human(s.bytes_received)
            )
        })
        .collect();
    parts.join(", ")
}

/// The subflows of a socket (empty when it is not MPTCP or cannot be read).
pub fn subflow_bytes(fd: BorrowedFd<'_>) -> Vec<SubflowBytes> {
    nena_mptcp::subflows(fd)
        .map(|v| v.iter().map(SubflowBytes::from).collect())
        .unwrap_or_default()
}

/// [`secure_pair_with`] over the two halves of a connection's socket; a protected session's
/// reader wakes on whole records ([`SecureReader::wake_on_whole_records`], `SO_RCVLOWAT`).
fn socket_pair(
    session: Option<nena_proto::Session>,
    leftover: Vec<u8>,
    r: OwnedReadHalf,
    w: OwnedWriteHalf,
    cap: usize,
) -> (Reader, Writer) {
    let fd = r.as_ref().as_raw_fd();
    let (mut reader, writer) = secure_pair_with(session, leftover, r, w, cap);
    if reader.info().is_some() {
        if let Err(e) = crate::low_water::widen_receive_window(fd) {
            log::debug!("receive window not widened: {e}");
        }
        // The reader owns the read half, so `fd` stays open for as long as it is used.
        reader.wake_on_whole_records(move |n| crate::low_water::set_rcvlowat(fd, n));
    }
    (reader, writer)
}

/// The raw descriptor of a session, for logs.
pub fn raw_fd(r: &Reader) -> i32 {
    r.get_ref().as_ref().as_raw_fd()
}

/// Accept connections on `listener` until SIGINT (Ctrl-C) or SIGTERM, running `session` for
/// each on its own task, with at most `max_sessions` running at once (further connections
/// wait in the listen backlog). An accept error (EMFILE and friends) is logged and retried
/// after a short pause instead of spinning. The server and both proxy ends use this loop.
/// Returns the sessions still running, to wait for ([`Sessions::all_done`]) or to drop.
pub async fn accept_until_interrupted<F, Fut>(
    listener: &tokio::net::TcpListener,
    max_sessions: usize,
    session: F,
) -> Result<Sessions>
where
    F: Fn(TcpStream, SocketAddr) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let max = u32::try_from(max_sessions.max(1)).unwrap_or(u32::MAX >> 3);
    let sem = std::sync::Arc::new(tokio::sync::Semaphore::new(max as usize));
    let stop = crate::stop::interrupted();
    tokio::pin!(stop);
    loop {
        // A free slot, then a connection; the signals are watched through both waits (all
        // sessions running must not make the loop deaf to them).
        let next = async {
            let permit = sem.clone().acquire_owned().await?;
            Ok::<_, anyhow::Error>((permit, listener.accept().await))
        };
        let (permit, accepted) = tokio::select! {
            n = next => n?,
            sig = &mut stop => {
                log::info!("{}; no new sessions", sig.context("installing signal handlers")?);
                return Ok(Sessions { sem, max });
            }
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                log::warn!("accept: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let fut = session(stream, peer);
        tokio::spawn(async move {
            let _permit = permit;
            fut.await;
        });
    }
}

/// The sessions an accept loop started: each holds one of `max` permits until it ends.
#[derive(Debug)]
pub struct Sessions {
    sem: std::sync::Arc<tokio::sync::Semaphore>,
    max: u32,
}

impl Sessions {
    /// How many are still running.
    pub fn running(&self) -> usize {
        (self.max as usize).saturating_sub(self.sem.available_permits())
    }

    /// Completes when every session has ended.
    pub async fn all_done(&self) {
        let _ = self.sem.acquire_many(self.max).await;
    }

    /// After the accept loop stopped: the running sessions get `grace` to end (a second
    /// SIGINT/SIGTERM cuts it short); then `switch` tells those left to abort, and they get
    /// [`ABORT_NOTICE`] to do so (tell or reset their peers) before this returns.
    pub async fn wind_down(&self, grace: Duration, switch: &crate::stop::StopSwitch) {
        if self.running() > 0 {
            log::info!(
                "{} session(s) in progress: {grace:?} to finish",
                self.running()
            );
        }
        let finished = tokio::select! {
            r = tokio::time::timeout(grace, self.all_done()) => r.is_ok(),
            sig = crate::stop::interrupted() => {
                if let Ok(sig) = sig {
                    log::info!("{sig}: not waiting any longer");
                }
                false
            }
        };
        if finished {
            return;
        }
        let after = if grace.is_zero() {
            String::new()
        } else {
            format!(" after the {grace:?} grace period")
        };
        log::warn!(
            "aborting {} session(s) still running{after}",
            self.running()
        );
        switch.stop();
        let _ = tokio::time::timeout(ABORT_NOTICE, self.all_done()).await;
    }
}

/// How long the sessions aborted at the end of a grace period get to tell or reset their
/// peers (`nena serve`: the reply `server shutting down`, or in `aead` the abort record; the
/// proxies: in `aead` the abort record, then a reset) before the
/// server or proxy exits anyway.
pub const ABORT_NOTICE: Duration = Duration::from_millis(500);

/// Raise the soft limit of open files to the hard limit (servers and proxies hold many).
pub fn raise_nofile_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A record whose keys appear only when `keyed` is set, by another task.
    #[derive(Default)]
    struct Fake {
        keyed: AtomicBool,
        reads: AtomicUsize,
        forgotten: AtomicUsize,
    }

    impl MpcRecords for Fake {
        fn read(&self, _: SocketAddr, _: SocketAddr) -> Result<Option<MpcSeen>> {
            self.reads.fetch_add(1, Ordering::Relaxed);
            let k = self.keyed.load(Ordering::Relaxed);
            Ok(Some(MpcSeen {
                requested: true,
                consented: true,
                confirmed: true,
                local_key: Some([1; 8]),
                remote_key: k.then_some([2; 8]),
            }))
        }
        fn forget(&self, _: SocketAddr, _: SocketAddr) {
            self.forgotten.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The wait for a record's keys yields its thread: on a one-thread runtime, the task
    /// that gives the keys runs meanwhile and the wait ends with them, long before its
    /// limit (a sleeping thread would never let that task run, and would end without keys
    /// after [`MPC_KEYS_WITHIN`]). The record is forgotten once, also when it never gets
    /// its keys.
    #[test]
    fn the_wait_for_keys_lets_the_runtimes_other_tasks_run() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let fake = Arc::new(Fake::default());
        let lookup = MpcLookup(fake.clone());
        let (l, r): (SocketAddr, SocketAddr) = (
            "198.18.1.2:40000".parse().unwrap(),
            "198.18.3.2:4433".parse().unwrap(),
        );
        let (seen, waited) = rt.block_on(async {
            let f = fake.clone();
            tokio::spawn(async move {
                // Runs only when the waiting task yields the thread.
                f.keyed.store(true, Ordering::Relaxed);
            });
            let t0 = tokio::time::Instant::now();
            let seen = await_record(&lookup, l, r).await.unwrap();
            (seen, t0.elapsed())
        });
        let seen = seen.expect("a record");
        assert_eq!(
            seen.remote_key,
            Some([2; 8]),
            "the keys the other task gave"
        );
        assert!(waited < MPC_KEYS_WITHIN, "{waited:?}");
        assert_eq!(fake.forgotten.load(Ordering::Relaxed), 1);

        // Never keyed: the wait ends at its limit, polled meanwhile, then forgotten.
        let fake = Arc::new(Fake::default());
        let lookup = MpcLookup(fake.clone());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let seen = rt.block_on(await_record(&lookup, l, r)).unwrap().unwrap();
        assert_eq!(seen.remote_key, None);
        assert!(
            fake.reads.load(Ordering::Relaxed) > 1,
            "read again meanwhile"
        );
        assert_eq!(fake.forgotten.load(Ordering::Relaxed), 1);
    }
}
