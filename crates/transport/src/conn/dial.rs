//! The client side of opening a session: connect from a trusted address, the hello as the
//! first flight on the trusted subflow, untrusted paths released only after its data-level
//! ACK, then the server's answer; kato-mpc and raw connections; tried again when the first
//! flight could not be verified. The connecting and the first flight are a [`Dialer`]'s:
//! the kernel's MPTCP with its gate ([`KernelMptcp`], what every command uses), or the
//! `testing` module's in-memory network; the handshake around them is the same.

use super::halves::{session_halves, Connection, ReadHalf, Reader, WriteHalf, Writer};
use super::mpc::{mpc_session, MpcLookup, MpcOutcome};
use crate::error::{Doing, During, Error, Result, Unsupported};
use crate::stream::handshake::{client_finish_held, entropy};
use nena_mptcp::{ConnectOptions, Gate, PathPolicy, PathReport};
use nena_proto::{ClientConfig, ClientHandshake, Mode, SessionInfo, Suite};
use std::future::Future;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWriteExt};

/// A connection whose first flight went out and whose paths may now carry data.
pub struct Dialed {
    pub reader: ReadHalf,
    pub writer: WriteHalf,
    /// The MPTCP gate (`None`: not a kernel connection, no subflows).
    pub gate: Option<Gate>,
}

/// Why a dial failed; with the connection still held where the peer may have answered the
/// first flight (the server's reason for a refusal is read from it before it closes).
pub struct DialFailure {
    pub error: Error,
    pub held: Option<Box<dyn HeldConnection>>,
}

impl<E: Into<Error>> From<E> for DialFailure {
    fn from(e: E) -> DialFailure {
        DialFailure {
            error: e.into(),
            held: None,
        }
    }
}

/// A connection a failed dial still holds (its paths still held as its gate left them):
/// what the peer answered can be read, nothing more is written.
pub trait HeldConnection: Send {
    fn answer(&mut self) -> &mut (dyn AsyncRead + Unpin + Send);
}

/// The future of [`Dialer::dial`].
pub type DialFuture<'a> = Pin<Box<dyn Future<Output = Result<Dialed, DialFailure>> + Send + 'a>>;

/// Connects to a server and sends a session's first flight so that it crosses only where it
/// may: the seam between a session's opening and what carries it.
pub trait Dialer: Send + Sync + std::fmt::Debug {
    /// Connects to `opts.remote` with `opts`'s path policy and bounds, writes `first` as the
    /// first flight, and returns once the paths may carry the rest.
    fn dial<'a>(&'a self, opts: &'a ClientOptions, first: &'a [u8]) -> DialFuture<'a>;
    /// Whether this is the kernel's MPTCP (kato-mpc is negotiated on its SYN: nothing else
    /// can carry it).
    fn is_kernel(&self) -> bool {
        false
    }
}

/// The kernel's MPTCP (`IPPROTO_MPTCP`) with nena-mptcp's gate: connect from a trusted
/// address, the first flight on the trusted subflow, the untrusted paths released only after
/// its data-level ACK.
#[derive(Debug, Clone, Copy, Default)]
pub struct KernelMptcp;

/// How long ending a session that is not wanted any more may take ([`ClientConn::end`]).
pub const END_WITHIN: Duration = Duration::from_millis(500);

/// Sessions opened ahead of the flows that take them (the `warm` module's pool).
pub trait Ahead: Send + Sync + std::fmt::Debug {
    /// A session whose handshake is done and which carries no flow now, if one is ready;
    /// another is opened in its place.
    fn take(&self, opts: &ClientOptions) -> Option<ClientConn>;
    /// A session whose flow ended with flow-end records both ways (`OP_REUSE`), ready for
    /// the next flow; the pool keeps it (or ends it cleanly).
    fn give_back(&self, c: ClientConn);
}

/// Whether a proxy client asks its proxy server to reuse sessions flow after flow (wire
/// `OP_REUSE`, `aead` only; `--no-reuse` turns it off), and whether the server turned out
/// older than that (it closed a session that asked without a reply: later flows do not ask).
#[derive(Debug, Default)]
pub struct Reuse {
    older_server: std::sync::atomic::AtomicBool,
}

impl Reuse {
    /// Asking, until a server turns out older.
    pub fn new() -> Arc<Reuse> {
        Arc::new(Reuse::default())
    }

    /// Whether to ask in the next open request.
    pub fn asking(&self) -> bool {
        !self.older_server.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The server closed a session that asked without answering: ask no more.
    pub fn server_is_older(&self) {
        self.older_server
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }
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
    /// Interfaces of metered paths (`--metered IFACE`): see nena-mptcp's `metered` module.
    pub metered: Vec<String>,
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
    pub server_key: Option<crate::keys::ServerKeyCheck>,
    /// How a datagram session carries its datagrams (`--udp-plane`, `--udp-redundancy`,
    /// `--realtime-port`).
    pub datagram: DatagramOptions,
    /// What connects and carries the first flight ([`KernelMptcp`] unless a test says).
    pub dialer: Arc<dyn Dialer>,
    /// Resumed sessions: the tickets this client holds, shared by every session the options
    /// open (`None`: every session makes a full handshake; `--no-resume`).
    pub tickets: Option<Arc<super::TicketJar>>,
    /// A proxy client's sessions reused flow after flow (`None`: one flow per session;
    /// `--no-reuse`).
    pub reuse: Option<Arc<Reuse>>,
}

/// How datagram sessions (the gateway's, `nena run`'s, SOCKS5 UDP ASSOCIATE's) carry their
/// datagrams: the datagram plane (sealed UDP on each path, the session as the fallback) or
/// inside the session alone (op 7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatagramOptions {
    /// Offer the datagram plane (`--udp-plane on`, the default).
    pub plane: bool,
    /// Which datagrams go on every usable path (`--udp-redundancy`).
    pub redundancy: nena_proto::dgram::Redundancy,
    /// Destination ports whose flows are real-time (`--realtime-port`).
    pub realtime_ports: Vec<u16>,
}

impl Default for DatagramOptions {
    fn default() -> Self {
        DatagramOptions {
            plane: true,
            redundancy: nena_proto::dgram::Redundancy::Auto,
            realtime_ports: Vec::new(),
        }
    }
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
            metered: Vec::new(),
            mpc: None,
            allow_plain: false,
            warm: None,
            server_key: None,
            datagram: DatagramOptions::default(),
            dialer: Arc::new(KernelMptcp),
            tickets: Some(super::TicketJar::new()),
            reuse: Some(Reuse::new()),
        }
    }
}

/// An open client session. In the crypto modes the client's key confirmation is still in
/// `writer`'s buffer and leaves with its first write or flush: the server reads nothing of
/// the session before it, so a flow writes (or flushes) before it waits to read.
pub struct ClientConn {
    pub reader: Reader,
    pub writer: Writer,
    /// The MPTCP gate (with its own descriptor): subflow reports stay available. `None`:
    /// not a kernel connection (the in-memory harness), no subflows.
    pub gate: Option<Gate>,
    /// Negotiated mode and cipher; `None` for a raw connection.
    pub info: Option<SessionInfo>,
    /// Time from connect() to the session being ready.
    pub setup: Duration,
    /// kato-mpc: whether it scrambles, or why not.
    pub mpc: Option<MpcOutcome>,
    /// The session's datagram plane keys (aead and stream; taken before the session was
    /// split): the datagram plane of a datagram session ([`crate::proxy::carry::plane`]).
    pub dgram: Option<nena_proto::dgram::DatagramKeys>,
    /// Whether the session resumed an earlier one with a ticket (no key agreement).
    pub resumed: bool,
    /// When the session was opened: a session reused flow after flow is given up at
    /// [`REUSE_WITHIN`] of it, so that its keys live no longer than that.
    pub opened: tokio::time::Instant,
    /// It carried a flow before (given back after it): its handshake is counted already.
    pub reused: bool,
}

/// How long after its opening a proxy session may take another flow (`OP_REUSE`); later it
/// is ended with its flow, and the next flow opens a new session (new keys: a full or
/// resumed handshake).
pub const REUSE_WITHIN: Duration = Duration::from_secs(600);

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
    /// sessions opened ahead of their flows. Tokio's clock, so that tests can pause it.
    pub fn end_stale(idle: &mut Vec<(tokio::time::Instant, ClientConn)>, max_age: Duration) {
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
        match self.gate.as_ref()?.report() {
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
pub async fn connect(
    opts: &ClientOptions,
    raw_first: Option<Vec<u8>>,
) -> Result<ClientConn, Error> {
    let mut attempt = 1;
    let mut resume = true;
    loop {
        match connect_once(opts, raw_first.clone(), resume).await {
            Err(e) if attempt < CONNECT_ATTEMPTS && is_unverifiable(&e) => {
                log::warn!("{e:#}; retrying with a new connection and new keys");
                attempt += 1;
            }
            Err(e) if resume && is_resume_refused(&e) => {
                // Its tickets are of no use any more (a restart, another process, or spent).
                log::info!("{e:#}; a full handshake on a new connection");
                if let Some(jar) = &opts.tickets {
                    jar.forget(opts.remote);
                }
                resume = false;
            }
            other => return other,
        }
    }
}

/// The server did not resume (its tickets are gone: a restart, another process, spent).
/// Only an answer to a resume hello says so: a server takes the ticket before it looks for
/// a common mode, so a refusal for any other cause is the same with a full hello.
fn is_resume_refused(e: &Error) -> bool {
    use nena_proto::{HandshakeError as H, RejectReason as R};
    let answer = match e.kind() {
        Error::RefusedBothWays { answer, .. } => answer.kind(),
        other => other,
    };
    matches!(answer, Error::Proto(H::PeerRejected(R::ResumeRefused)))
}

/// Attempts of [`connect`] when the first flight could not be verified.
const CONNECT_ATTEMPTS: usize = 3;

/// nena-mptcp refused because it could not verify the first flight (its path-manager event
/// queue overflowed when many connections start at once), not because a rule was broken.
/// A new connection with fresh keys is as safe as the first attempt.
fn is_unverifiable(e: &Error) -> bool {
    matches!(e.kind(), Error::Mptcp(m) if m.is_unverifiable())
}

/// Whether the options ask for kato-mpc (alone: it cannot be combined with in-band modes).
pub(crate) fn is_kato_mpc(modes: &[Mode]) -> Result<bool> {
    if !modes.contains(&Mode::KatoMpc) {
        return Ok(false);
    }
    if modes.len() > 1 {
        return Err(Unsupported::KatoMpcCombined.into());
    }
    Ok(true)
}

/// A kato-mpc client: connect, no hello; the first subflow's handshake carried the request
/// (our programs) and the consent (the server's), and both MPTCP keys.
async fn connect_kato_mpc(opts: &ClientOptions, start: Instant) -> Result<ClientConn, Error> {
    if !opts.dialer.is_kernel() {
        return Err(Unsupported::KatoMpcNotKernel.into());
    }
    let mopts = ConnectOptions {
        policy: opts.policy.clone(),
        allow_fallback: opts.allow_fallback,
        timeout: opts.timeout,
        congestion: opts.congestion.clone(),
        metered: opts.metered.clone(),
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
    let (r, w) = Connection::Socket(stream).into_halves()?;
    let info = Some(session.info());
    let (reader, writer) = session_halves(Some(session), Vec::new(), r, w, opts.buffer);
    Ok(ClientConn {
        reader,
        writer,
        gate: Some(gate),
        info,
        setup: start.elapsed(),
        mpc: Some(outcome),
        dgram: None,
        resumed: false,
        opened: tokio::time::Instant::now(),
        reused: false,
    })
}

/// One attempt of [`connect`]; `resume`: with a ticket, if the jar holds one.
async fn connect_once(
    opts: &ClientOptions,
    raw_first: Option<Vec<u8>>,
    resume: bool,
) -> Result<ClientConn, Error> {
    let start = Instant::now();
    if !opts.raw && is_kato_mpc(&opts.modes)? {
        if raw_first.is_some() {
            return Err(Error::Internal(
                "a kato-mpc connection has no first message of its own",
            ));
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
            if let Some(jar) = &opts.tickets {
                if resume {
                    cfg.resume = jar.take(opts.remote, cfg.server_key);
                }
                cfg.want_tickets = jar.want(opts.remote);
            }
        }
        Some(ClientHandshake::new(&cfg, entropy()?)?)
    };
    // The hello is written from the handshake's own buffer (wiped by it), never copied.
    let first: &[u8] = match (&hs, &raw_first) {
        (Some(h), None) => h.first_flight(),
        (None, Some(f)) => f,
        _ => {
            return Err(Error::Internal(
                "a raw connection needs its first message, a nena one must not have one",
            ))
        }
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
    let timeout = opts.timeout;
    let Dialed {
        reader: mut r,
        writer: w,
        gate,
    } = match opts.dialer.dial(opts, first).await {
        Ok(d) => d,
        Err(DialFailure { error, held }) => {
            // A server that refuses the hello answers and closes the connection, which also
            // closes a subflow the in-kernel PM opened meanwhile, and the gate refuses for
            // that close. Say the server's reason first when it sent one, and the gate's
            // refusal after it (it may also be a real violation): the answer is only read
            // (into a handshake whose reply goes nowhere), nothing more is written.
            if let (Some(h), Some(mut held)) = (hs.as_mut(), held) {
                let answer =
                    client_finish_held(h, &mut held.answer(), Duration::from_millis(300)).await;
                if let Err(why) = answer {
                    if let Error::Proto(_) = why.kind() {
                        return Err(Error::RefusedBothWays {
                            answer: Box::new(why),
                            refusal: Box::new(error),
                        });
                    }
                }
            }
            return Err(error);
        }
    };
    let mut resumed = false;
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
            resumed = h.resuming();
            if let Some(jar) = &opts.tickets {
                jar.put(opts.remote, h.take_tickets());
            }
            (Some(s), left, confirm)
        }
        None => (None, Vec::new(), Vec::new()),
    };
    let info = session.as_ref().map(|s| s.info());
    let dgram = session.as_ref().and_then(|s| s.datagram_keys());
    let (reader, mut writer) = session_halves(session, leftover, r, w, opts.buffer);
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
        dgram,
        resumed,
        opened: tokio::time::Instant::now(),
        reused: false,
    })
}

impl Dialer for KernelMptcp {
    fn dial<'a>(&'a self, opts: &'a ClientOptions, first: &'a [u8]) -> DialFuture<'a> {
        Box::pin(dial_kernel(opts, first))
    }
    fn is_kernel(&self) -> bool {
        true
    }
}

/// A kernel connection the gate refused after the first flight: held whole (its gate too,
/// so that the hold stays as the refusal left it) while its answer is read.
struct HeldKernel(nena_mptcp::AsyncClient);

impl HeldConnection for HeldKernel {
    fn answer(&mut self) -> &mut (dyn AsyncRead + Unpin + Send) {
        &mut self.0.stream
    }
}

/// connect() and the first-flight gate, on readiness (no thread blocks).
async fn dial_kernel(opts: &ClientOptions, first: &[u8]) -> Result<Dialed, DialFailure> {
    let mopts = ConnectOptions {
        policy: opts.policy.clone(),
        allow_fallback: opts.allow_fallback,
        timeout: opts.timeout,
        congestion: opts.congestion.clone(),
        metered: opts.metered.clone(),
    };
    let mut client = nena_mptcp::connect_async(opts.remote, &mopts).await?;
    if let Err(e) = client.before_first_flight() {
        // A server that speaks first makes the connection fully established early, so
        // the in-kernel PM opens the untrusted subflow before our hello: say what the
        // real problem is.
        if let Some(preview) = spoke_first(client.stream.as_fd()) {
            return Err(Error::SpokeFirst { preview }.into());
        }
        return Err(e.into());
    }
    client
        .stream
        .write_all(first)
        .await
        .during(Doing::WritingFirstFlight)?;
    client.gate_mut().set_recovery(opts.recover);
    if let Err(e) = client
        .after_first_flight(first.len() as u64, opts.timeout)
        .await
    {
        return Err(DialFailure {
            error: e.into(),
            held: Some(Box::new(HeldKernel(client))),
        });
    }
    let (stream, gate) = client.into_parts();
    let (reader, writer) = Connection::Socket(stream).into_halves()?;
    Ok(Dialed {
        reader,
        writer,
        gate: Some(gate),
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
