//! The datagram plane in the transport (issue 56): a datagram session's datagrams as sealed
//! UDP datagrams on each path ([`nena_proto::dgram::Plane`]), the session itself as the
//! fallback where a path's UDP is not confirmed.
//!
//! - **Negotiation** (op 8, [`crate::wire::plane`]): the client offers the plane with the
//!   session's open request (its receiver id, its paths, its redundancy); the server answers
//!   after its reply with its receiver id and UDP port, or declines (`--no-datagram-plane`,
//!   no UDP socket, a mode without datagram keys): the session then carries datagrams as op 7
//!   does. A server older than op 8 closes the session unanswered; the client then opens an
//!   op 7 session and offers that server nothing again while it runs.
//! - **The server** ([`PlaneServer`]): one UDP socket on the listener's address and port;
//!   each datagram goes, by its receiver id ([`nena_proto::dgram::receiver_of`]), to its
//!   session's queue (a bounded table; an unknown id is dropped and counted). Each session
//!   ([`serve_plane`]) opens what its queue brings with its [`Plane`], sends the payload on
//!   within `--allow` as op 7 does (the same checks and the same bound on destinations), and
//!   sends the replies through the plane: sealed to the addresses the plane learned from
//!   authenticated datagrams only, inside the session where no path is confirmed.
//! - **The client** ([`open_datagrams`], [`carry`]): one UDP socket per path, bound to its
//!   interface (`SO_BINDTODEVICE`) and address, connected to the server's UDP port; the
//!   plane's probes and keepalives on tokio's timers; each datagram classified
//!   ([`FlowClassifier`] per destination) and sent where the scheduler says; a copy the plane
//!   cannot send as UDP goes inside the session with its sequence number
//!   ([`crate::wire::carry::Frame`]), and the receiver keeps whichever copy comes first.
//!   The gateway, `nena run` and SOCKS5 UDP ASSOCIATE all carry through [`carry`].

use crate::conn::{ClientConn, ClientOptions};
use crate::error::{Context, Error};
use crate::ops::metrics::Tally;
use crate::proxy::carry::frames::{read_datagram, write_datagram, RelayCounts, DESTINATIONS, IDLE};
use crate::proxy::open::{open_plane, open_service, NO_PLANE_REPLY};
use crate::proxy::socks::{AllowList, Rep};
use crate::wire::carry::{decode_bare, encode_bare, Datagram, Frame};
use crate::wire::plane::{
    Declined, OfferedPath, PlaneAnswer, PlaneOffer, OFFER_VERSION, PATH_TRUSTED,
};
use crate::wire::{Service, WireError};
use nena_proto::dgram::{
    receiver_of, ClassifierConfig, DatagramInfo, DatagramKeys, Delivered, Dropped, FlowClassifier,
    FlowKey, LivenessConfig, PathId, Plane, ReceiverId, Redundancy, Stats, Transmit,
};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, Semaphore};

/// Plane sessions a server keeps at most (a session beyond is declined [`Declined::Full`]).
pub const MAX_PLANE_SESSIONS: usize = 65_536;
/// Datagrams waiting for one session's task at most; more are dropped (as a full router
/// queue drops them) and counted.
const SESSION_QUEUE: usize = 512;
/// Frames read from the session ahead of the task that handles them.
const FRAME_QUEUE: usize = 64;
/// How long a client's path sockets stay open after it ended its side of the session,
/// waiting for the server to end its own.
const LINGER: Duration = Duration::from_secs(1);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A fresh receiver id (random: a guess at another session's id gets its datagrams no
/// further than their failed authentication), below 2^24 as compact datagrams carry it.
fn random_id() -> std::io::Result<ReceiverId> {
    let mut b = [0u8; 4];
    getrandom::fill(&mut b).map_err(|e| std::io::Error::other(format!("getrandom: {e}")))?;
    Ok(u32::from_be_bytes(b) & nena_proto::dgram::compact::MAX_RECEIVER)
}

/// The destination (or source) and the application's bytes of a datagram the plane
/// delivered: the address is the payload's first bytes, or the flow's key when a compact
/// datagram left it out.
fn bare_of(prefix: Option<FlowKey>, payload: &[u8]) -> Result<(SocketAddr, &[u8]), WireError> {
    match prefix {
        None => decode_bare(payload),
        Some(k) => match decode_bare(k.as_slice())? {
            (addr, []) => Ok((addr, payload)),
            _ => Err(WireError::DatagramAddress(k.as_slice()[0])),
        },
    }
}

/// One frame of a plane session (either kind); `None` at a clean end before it.
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R) -> std::io::Result<Option<Frame>> {
    let invalid = |e| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
    let mut header = [0u8; 29];
    if r.read(&mut header[..1]).await? == 0 {
        return Ok(None);
    }
    let n = Frame::header_len(header[0]).map_err(invalid)?;
    r.read_exact(&mut header[1..n]).await?;
    let (seq, addr, len) = Frame::parse_header(&header[..n]).map_err(invalid)?;
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload).await?;
    Ok(Some(Frame {
        seq,
        datagram: Datagram { addr, payload },
    }))
}

/// Writes one frame (with `seq`: a copy the plane also numbered) and flushes.
pub use crate::proxy::carry::frames::write_frame;

/// What a plane session did, for its final line (either side).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlaneCounts {
    /// Application datagrams sealed and sent as UDP on at least one path.
    pub udp: u64,
    /// Application datagrams (or copies) carried inside the session.
    pub in_session: u64,
    /// Application datagrams received from the session and delivered (the first copy).
    pub from_session: u64,
    /// Copies from the session dropped because the UDP copy came first.
    pub session_duplicates: u64,
    /// The opener's counts (delivered by UDP, and every drop by reason).
    pub stats: Stats,
}

impl PlaneCounts {
    /// The figures the metrics count ([`crate::ops::metrics::Tally::datagrams`]).
    pub fn metrics(&self) -> crate::ops::metrics::DatagramCounts {
        let s = &self.stats;
        crate::ops::metrics::DatagramCounts {
            udp_sent: self.udp,
            session_sent: self.in_session,
            udp_received: s.delivered,
            session_received: self.from_session,
            unauthentic: s.unauthentic,
            replayed: s.replayed,
            too_old: s.too_old,
            malformed: s.malformed,
            duplicate: s.duplicate + self.session_duplicates,
            unknown_flow: s.unknown_flow,
        }
    }

    pub fn describe(&self) -> String {
        let s = &self.stats;
        format!(
            "plane: {} sent as UDP, {} inside the session; received {} by UDP, {} from the \
             session; dropped: {} failed authentication, {} replayed, {} too old, {} malformed, \
             {} duplicates ({} from the session), {} of an unknown flow; {} compact",
            self.udp,
            self.in_session,
            s.delivered,
            self.from_session,
            s.unauthentic,
            s.replayed,
            s.too_old,
            s.malformed,
            s.duplicate,
            self.session_duplicates,
            s.unknown_flow,
            s.compact
        )
    }
}

/// Logs a datagram the plane dropped: the first of its kind and then one in 1000 at warn
/// (a forger must not fill the log), duplicates (redundancy's normal) at debug.
fn log_drop(side: &str, d: &Dropped, from: SocketAddr, stats: &Stats) {
    let n = match d {
        Dropped::Duplicate { .. } => {
            log::debug!("{side}: {d} from {from}");
            return;
        }
        Dropped::Unauthentic => stats.unauthentic,
        Dropped::Replayed(_) => stats.replayed,
        Dropped::TooOld(_) => stats.too_old,
        Dropped::Malformed(_) => stats.malformed,
        Dropped::UnknownReceiver(_) => stats.unknown_receiver,
        Dropped::UnknownFlow(_) => stats.unknown_flow,
    };
    if n == 1 || n.is_multiple_of(1000) {
        log::warn!("{side}: a datagram from {from} dropped: {d} ({n} so far)");
    }
}

// ---------------------------------------------------------------------------------------
// The server.

/// A datagram that came to the server's UDP socket: its bytes and source.
type Inbound = (Vec<u8>, SocketAddr);

/// Counts of the server's UDP socket.
#[derive(Debug, Default)]
pub struct PlaneServerStats {
    /// Datagrams for no session of this server (a receiver id it does not know).
    pub unknown_receiver: AtomicU64,
    /// Datagrams too short or of another type to carry a receiver id.
    pub malformed: AtomicU64,
    /// Datagrams dropped because their session's queue was full.
    pub queue_full: AtomicU64,
}

/// The proxy server's UDP socket of the datagram plane and its sessions by receiver id.
pub struct PlaneServer {
    socket: Arc<UdpSocket>,
    port: u16,
    sessions: Mutex<HashMap<ReceiverId, mpsc::Sender<Inbound>>>,
    pub stats: PlaneServerStats,
}

/// A session's place in the [`PlaneServer`]'s table, given back when dropped.
pub struct Registration {
    server: Arc<PlaneServer>,
    pub id: ReceiverId,
    rx: mpsc::Receiver<Inbound>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        lock(&self.server.sessions).remove(&self.id);
    }
}

impl PlaneServer {
    /// A UDP socket on `at` (the listener's address and port), in the runtime.
    pub fn bind(at: SocketAddr) -> std::io::Result<Arc<PlaneServer>> {
        let s = Socket::new(Domain::for_address(at), Type::DGRAM, Some(Protocol::UDP))?;
        s.set_cloexec(true)?;
        if at.is_ipv6() {
            // As the MPTCP listener on [::] takes IPv4 too.
            let _ = s.set_only_v6(false);
        }
        s.bind(&SockAddr::from(at))?;
        let _ = s.set_recv_buffer_size(4 << 20);
        s.set_nonblocking(true)?;
        let socket = UdpSocket::from_std(s.into())?;
        let port = socket.local_addr()?.port();
        Ok(Arc::new(PlaneServer {
            socket: Arc::new(socket),
            port,
            sessions: Mutex::new(HashMap::new()),
            stats: PlaneServerStats::default(),
        }))
    }

    /// The UDP port the server tells its clients.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A receiver id and queue for a new session; `None` when the table is full.
    pub fn register(self: &Arc<Self>) -> Option<Registration> {
        let mut t = lock(&self.sessions);
        if t.len() >= MAX_PLANE_SESSIONS {
            return None;
        }
        let id = loop {
            let id = random_id().ok()?;
            if !t.contains_key(&id) {
                break id;
            }
        };
        let (tx, rx) = mpsc::channel(SESSION_QUEUE);
        t.insert(id, tx);
        Some(Registration {
            server: self.clone(),
            id,
            rx,
        })
    }

    /// Hands each datagram to its session by receiver id, until the task is dropped.
    pub async fn run(self: Arc<Self>) -> std::io::Result<()> {
        let mut buf = vec![0u8; 65_535];
        loop {
            let (n, from) = match self.socket.recv_from(&mut buf).await {
                Ok(r) => r,
                // An ICMP error of an earlier send (ECONNREFUSED and the like) on Linux.
                Err(e) if e.kind() != std::io::ErrorKind::WouldBlock => {
                    log::debug!("datagram plane socket: {e}");
                    continue;
                }
                Err(e) => return Err(e),
            };
            let bytes = &buf[..n];
            let id = match receiver_of(bytes) {
                Ok(id) => id,
                Err(_) => {
                    let m = self.stats.malformed.fetch_add(1, Ordering::Relaxed) + 1;
                    if m == 1 || m.is_multiple_of(1000) {
                        log::warn!(
                            "datagram plane: a datagram from {from} that is none of the plane's; \
                             dropped ({m} so far)"
                        );
                    }
                    continue;
                }
            };
            let tx = lock(&self.sessions).get(&id).cloned();
            match tx {
                Some(tx) => {
                    if tx.try_send((bytes.to_vec(), from)).is_err() {
                        self.stats.queue_full.fetch_add(1, Ordering::Relaxed);
                    }
                }
                None => {
                    let u = self.stats.unknown_receiver.fetch_add(1, Ordering::Relaxed) + 1;
                    if u == 1 || u.is_multiple_of(1000) {
                        log::warn!(
                            "datagram plane: a datagram from {from} for receiver {id:#010x}, no \
                             session of this server; dropped ({u} so far)"
                        );
                    }
                }
            }
        }
    }

    async fn send(&self, t: &Transmit) {
        if let Err(e) = self.socket.send_to(&t.bytes, t.to).await {
            log::debug!("datagram plane: to {} (path {}): {e}", t.to, t.path);
        }
    }
}

/// The server's answer to an offer, and the registration when it accepts.
pub fn answer(
    server: Option<&Arc<PlaneServer>>,
    disabled: bool,
    keys: Option<&DatagramKeys>,
    offer: &PlaneOffer,
) -> (PlaneAnswer, Option<Registration>) {
    let declined = |d| (PlaneAnswer::Declined(d), None);
    if disabled {
        return declined(Declined::Off);
    }
    if !(1..=OFFER_VERSION).contains(&offer.version) {
        return declined(Declined::Version);
    }
    let Some(server) = server else {
        return declined(Declined::NoSocket);
    };
    let Some(keys) = keys else {
        return declined(Declined::Mode);
    };
    match server.register() {
        Some(r) => (
            PlaneAnswer::Accepted {
                receiver: r.id,
                port: server.port(),
                compact: compact_for(offer, keys),
            },
            Some(r),
        ),
        None => declined(Declined::Full),
    }
}

/// Whether a session answering `offer` sends and opens compact datagrams: a version 2
/// offer, an AES-128-GCM session, and the client's receiver id in 24 bits. `None` answers a
/// version 1 offer (whose answer has no such byte).
fn compact_for(offer: &PlaneOffer, keys: &DatagramKeys) -> Option<bool> {
    (offer.version >= 2).then(|| {
        nena_proto::dgram::compact::CompactKeys::available(keys)
            && offer.receiver <= nena_proto::dgram::compact::MAX_RECEIVER
    })
}

/// A destination a server-side session was asked to send to (as op 7's).
struct Dest {
    permitted: bool,
    sent: bool,
    /// The replies from it, classified (auto redundancy).
    class: FlowClassifier,
}

/// What a server-side plane session did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServedPlane {
    pub relay: RelayCounts,
    pub plane: PlaneCounts,
}

/// The proxy server's side of a plane session (op 8, accepted): until the client ends the
/// session or [`IDLE`] passes without a datagram from it.
pub async fn serve_plane<R, W>(
    reader: &mut R,
    writer: &mut W,
    allow: &AllowList,
    keys: &DatagramKeys,
    offer: &PlaneOffer,
    reg: Registration,
) -> Result<ServedPlane, Error>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let server = reg.server.clone();
    let mut reg = reg;
    let s4 = UdpSocket::bind("0.0.0.0:0").await.context("a UDP socket")?;
    let s6 = UdpSocket::bind("[::]:0").await.ok();
    let mut plane = Plane::server(keys, reg.id, offer.receiver, LivenessConfig::default());
    if compact_for(offer, keys) == Some(true) {
        plane.enable_compact(keys);
    }
    let cfg = ClassifierConfig {
        ports: offer.realtime_ports.clone(),
        ..ClassifierConfig::default()
    };
    let cap = std::num::NonZeroUsize::new(DESTINATIONS).expect("nonzero");
    let mut dests: lru::LruCache<SocketAddr, Dest> = lru::LruCache::new(cap);
    let mut out = ServedPlane::default();
    let (ftx, mut frx) = mpsc::channel::<Frame>(FRAME_QUEUE);
    let reading = async move {
        while let Some(f) = read_frame(reader).await.context("reading a datagram")? {
            if ftx.send(f).await.is_err() {
                break;
            }
        }
        Ok::<_, Error>(())
    };
    let main = async {
        let mut b4 = vec![0u8; 65_535];
        let mut b6 = vec![0u8; 65_535];
        let mut last_client = tokio::time::Instant::now();
        loop {
            let now = Instant::now();
            let timer = plane
                .next_timeout(now)
                .map(|t| tokio::time::Instant::from_std(t.max(now)));
            tokio::select! {
                f = frx.recv() => {
                    let Some(f) = f else { break };
                    last_client = tokio::time::Instant::now();
                    if let Some(seq) = f.seq {
                        if !plane.accept_from_session(seq, Instant::now()) {
                            out.plane.session_duplicates += 1;
                            continue;
                        }
                        out.plane.from_session += 1;
                    }
                    forward(&mut dests, allow, &s4, s6.as_ref(), f.datagram.addr, &f.datagram.payload, &mut out).await;
                }
                Some((mut bytes, from)) = reg.rx.recv() => {
                    match plane.receive(&mut bytes, from, Instant::now()) {
                        Ok(Delivered::Data { payload, prefix, .. }) => {
                            last_client = tokio::time::Instant::now();
                            match bare_of(prefix, payload) {
                                Ok((to, p)) => {
                                    forward(&mut dests, allow, &s4, s6.as_ref(), to, p, &mut out).await;
                                }
                                Err(e) => log::warn!("datagram plane: from {from}: {e}; dropped"),
                            }
                        }
                        Ok(Delivered::Control { .. }) => {}
                        Err(d) => log_drop("datagram plane", &d, from, plane.stats()),
                    }
                    for t in plane.poll(Instant::now()).map_err(|e| Error::msg(e.to_string()))? {
                        server.send(&t).await;
                    }
                }
                r = s4.recv_from(&mut b4) => {
                    let (n, from) = r?;
                    reply(&mut plane, &mut dests, &cfg, offer.redundancy, &server, writer, from, &b4[..n], &mut out).await?;
                }
                r = async {
                    match &s6 {
                        Some(s) => s.recv_from(&mut b6).await,
                        None => std::future::pending().await,
                    }
                } => {
                    let (n, from) = r?;
                    reply(&mut plane, &mut dests, &cfg, offer.redundancy, &server, writer, from, &b6[..n], &mut out).await?;
                }
                () = async {
                    match timer {
                        Some(t) => tokio::time::sleep_until(t).await,
                        None => std::future::pending().await,
                    }
                } => {
                    for t in plane.poll(Instant::now()).map_err(|e| Error::msg(e.to_string()))? {
                        server.send(&t).await;
                    }
                }
                () = tokio::time::sleep_until(last_client + IDLE) => break,
            }
        }
        Ok::<_, Error>(())
    };
    {
        tokio::pin!(reading);
        tokio::pin!(main);
        tokio::select! {
            r = &mut main => r?,
            r = &mut reading => {
                r?;
                (&mut main).await?;
            }
        }
    }
    out.plane.stats = *plane.stats();
    out.plane.session_duplicates = plane.session_duplicates();
    Ok(out)
}

/// Sends an application datagram on to `to`, within `--allow` (as op 7 does).
async fn forward(
    dests: &mut lru::LruCache<SocketAddr, Dest>,
    allow: &AllowList,
    s4: &UdpSocket,
    s6: Option<&UdpSocket>,
    to: SocketAddr,
    payload: &[u8],
    out: &mut ServedPlane,
) {
    let permitted = match dests.get(&to) {
        Some(d) => d.permitted,
        None => {
            let permitted = allow.permits(to);
            dests.put(
                to,
                Dest {
                    permitted,
                    sent: false,
                    class: FlowClassifier::new(),
                },
            );
            permitted
        }
    };
    if !permitted {
        out.relay.refused += 1;
        if out.relay.refused == 1 {
            log::warn!("datagram to {to}: not permitted by --allow; dropped");
        }
        return;
    }
    let s = match (to, s6) {
        (SocketAddr::V4(_), _) => s4,
        (SocketAddr::V6(_), Some(s6)) => s6,
        (SocketAddr::V6(_), None) => return,
    };
    if let Err(e) = s.send_to(payload, to).await {
        log::warn!("datagram to {to}: {e}");
        return;
    }
    if let Some(d) = dests.get_mut(&to) {
        d.sent = true;
    }
    out.relay.sent += 1;
}

/// A reply from a destination: through the plane (UDP where confirmed, the session where
/// not), only from a destination the session sent to.
#[allow(clippy::too_many_arguments)]
async fn reply<W: AsyncWrite + Unpin>(
    plane: &mut Plane,
    dests: &mut lru::LruCache<SocketAddr, Dest>,
    cfg: &ClassifierConfig,
    redundancy: Redundancy,
    server: &PlaneServer,
    writer: &mut W,
    from: SocketAddr,
    payload: &[u8],
    out: &mut ServedPlane,
) -> Result<(), Error> {
    // `peek_mut`: a reply does not keep a destination remembered, only sending does.
    let Some(d) = dests.peek_mut(&from).filter(|d| d.sent) else {
        return Ok(());
    };
    let now = Instant::now();
    let info = DatagramInfo {
        len: payload.len(),
        dscp: None,
        dst_port: from.port(),
    };
    let class = redundancy.class(d.class.observe(cfg, info, now));
    out.relay.received += 1;
    send_through(plane, class, from, payload, writer, &mut out.plane, |t| {
        let t = t.clone();
        async move { server.send(&t).await }
    })
    .await
}

/// One application datagram through the plane: its sealed copies handed to `udp`, and a
/// copy inside the session when the plane says so (or when it cannot seal it).
async fn send_through<W, F, Fut>(
    plane: &mut Plane,
    class: nena_proto::dgram::Class,
    addr: SocketAddr,
    payload: &[u8],
    writer: &mut W,
    counts: &mut PlaneCounts,
    mut udp: F,
) -> Result<(), Error>
where
    W: AsyncWrite + Unpin,
    F: FnMut(&Transmit) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let bare = encode_bare(addr, payload);
    match plane.send_flow(&bare, bare.len() - payload.len(), class, Instant::now()) {
        Ok(sent) => {
            for t in &sent.udp {
                udp(t).await;
            }
            if !sent.udp.is_empty() {
                counts.udp += 1;
            }
            if sent.stream {
                write_frame(writer, Some(sent.seq), addr, payload).await?;
                counts.in_session += 1;
            }
        }
        Err(e) => {
            log::debug!("datagram plane: {e}; inside the session");
            write_frame(writer, None, addr, payload).await?;
            counts.in_session += 1;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The client.

/// Servers that closed an op 8 session unanswered (older than the plane): offered nothing
/// again while this process runs.
fn old_servers() -> &'static Mutex<HashSet<SocketAddr>> {
    static OLD: std::sync::OnceLock<Mutex<HashSet<SocketAddr>>> = std::sync::OnceLock::new();
    OLD.get_or_init(|| Mutex::new(HashSet::new()))
}

/// Servers that declined a version 2 offer (plane version 1): offered version 1 while this
/// process runs.
fn version1_servers() -> &'static Mutex<HashSet<SocketAddr>> {
    static V1: std::sync::OnceLock<Mutex<HashSet<SocketAddr>>> = std::sync::OnceLock::new();
    V1.get_or_init(|| Mutex::new(HashSet::new()))
}

/// One path's UDP socket: bound to its interface and address.
struct PathSocket {
    id: PathId,
    flags: u8,
    iface: String,
    socket: std::net::UdpSocket,
}

/// A UDP socket for each trusted, then untrusted, interface with an address of the server's
/// family (at most 8).
fn path_sockets(opts: &ClientOptions) -> anyhow::Result<Vec<PathSocket>> {
    let resolved = opts.policy.resolve()?;
    let family = |a: &IpAddr| a.is_ipv4() == opts.remote.is_ipv4();
    let mut out: Vec<PathSocket> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let listed = resolved
        .trusted
        .iter()
        .map(|a| (a, PATH_TRUSTED))
        .chain(resolved.untrusted.iter().map(|a| (a, 0)));
    for (addr, flags) in listed {
        if !family(addr) || out.len() == nena_proto::dgram::wire::MAX_PATHS {
            continue;
        }
        let Some(iface) = resolved.ifaces.get(addr) else {
            continue;
        };
        if !seen.insert(iface.name.clone()) {
            continue;
        }
        let at = SocketAddr::new(*addr, 0);
        let s = Socket::new(Domain::for_address(at), Type::DGRAM, Some(Protocol::UDP))?;
        s.set_cloexec(true)?;
        s.bind_device(Some(iface.name.as_bytes()))
            .map_err(|e| anyhow::anyhow!("binding a UDP socket to {}: {e}", iface.name))?;
        s.bind(&SockAddr::from(at))
            .map_err(|e| anyhow::anyhow!("binding a UDP socket to {at}: {e}"))?;
        s.set_nonblocking(true)?;
        out.push(PathSocket {
            id: out.len() as PathId,
            flags,
            iface: iface.name.clone(),
            socket: s.into(),
        });
    }
    Ok(out)
}

/// The client's end of an accepted plane.
struct ClientPlane {
    plane: Plane,
    /// Each path's socket, connected to `server`.
    sockets: Vec<(PathId, Arc<UdpSocket>)>,
    /// The server's plane address.
    server: SocketAddr,
}

/// A datagram session, with the datagram plane when the server accepted it.
pub struct DatagramSession {
    pub conn: ClientConn,
    plane: Option<ClientPlane>,
    redundancy: Redundancy,
    classifier: ClassifierConfig,
}

impl DatagramSession {
    /// Whether the datagram plane carries this session's datagrams.
    pub fn has_plane(&self) -> bool {
        self.plane.is_some()
    }
}

/// Opens a datagram session: with the datagram plane's offer (op 8) unless it is off
/// (`--udp-plane off`), this process found the server older than the plane, or no path has
/// a UDP socket; else (and when the server declines) datagrams ride the session as op 7.
pub async fn open_datagrams(
    opts: &ClientOptions,
    connecting: &Semaphore,
    tally: &Tally,
) -> Result<DatagramSession, (Rep, Error)> {
    let classifier = ClassifierConfig {
        ports: opts.datagram.realtime_ports.clone(),
        ..ClassifierConfig::default()
    };
    let redundancy = opts.datagram.redundancy;
    let plain = |conn| DatagramSession {
        conn,
        plane: None,
        redundancy,
        classifier: classifier.clone(),
    };
    let op7 = || async {
        open_service(Service::Datagram, opts, connecting, tally)
            .await
            .map(plain)
    };
    if !opts.datagram.plane || lock(old_servers()).contains(&opts.remote) {
        return op7().await;
    }
    let paths = match path_sockets(opts) {
        Ok(p) if !p.is_empty() => p,
        Ok(_) => {
            log::info!("datagram plane: no path with an address of the server's family");
            return op7().await;
        }
        Err(e) => {
            log::warn!(
                "datagram plane: no UDP socket for the paths ({e:#}); datagrams inside the session"
            );
            return op7().await;
        }
    };
    let local =
        random_id().map_err(|e| (Rep::GeneralFailure, Error::from(anyhow::Error::from(e))))?;
    let mut offer = PlaneOffer {
        version: if lock(version1_servers()).contains(&opts.remote) {
            1
        } else {
            OFFER_VERSION
        },
        receiver: local,
        redundancy,
        paths: paths
            .iter()
            .map(|p| OfferedPath {
                id: p.id,
                flags: p.flags,
            })
            .collect(),
        realtime_ports: opts
            .datagram
            .realtime_ports
            .iter()
            .copied()
            .take(crate::wire::plane::MAX_REALTIME_PORTS)
            .collect(),
    };
    let (conn, answer) = loop {
        let (conn, answer) = match open_plane(&offer, opts, connecting, tally).await {
            Ok(x) => x,
            Err((_, e)) if format!("{e:#}").contains(NO_PLANE_REPLY) => {
                log::info!(
                    "datagram plane: {} closed the session without answering the offer ({e:#}): \
                     a server older than the plane; its datagrams ride the session (op 7)",
                    opts.remote
                );
                lock(old_servers()).insert(opts.remote);
                return op7().await;
            }
            Err(e) => return Err(e),
        };
        // A server of plane version 1 declines a version 2 offer: offered version 1 again
        // (in a new session), and from then on while this process runs.
        if answer == PlaneAnswer::Declined(Declined::Version) && offer.version > 1 {
            log::info!(
                "datagram plane: {} speaks version 1 (no compact datagrams); offered again",
                opts.remote
            );
            lock(version1_servers()).insert(opts.remote);
            offer.version = 1;
            continue;
        }
        break (conn, answer);
    };
    let (receiver, port, compact) = match answer {
        PlaneAnswer::Accepted {
            receiver,
            port,
            compact,
        } => (receiver, port, compact == Some(true)),
        PlaneAnswer::Declined(d) => {
            log::info!(
                "datagram plane declined: {}; datagrams ride the session (op 7)",
                d.reason()
            );
            return Ok(plain(conn));
        }
    };
    let Some(keys) = conn.dgram.clone() else {
        return Err((
            Rep::GeneralFailure,
            Error::msg("the proxy server accepted the datagram plane in a mode without its keys"),
        ));
    };
    let to = SocketAddr::new(opts.remote.ip(), port);
    let mut plane = Plane::client(&keys, local, receiver, LivenessConfig::default());
    if compact && !plane.enable_compact(&keys) {
        log::debug!("datagram plane: compact datagrams agreed but not possible here");
    }
    let mut sockets = Vec::new();
    for p in paths {
        // Connected to the server's port: the kernel keeps the route (no lookup per
        // datagram) and drops what comes from anywhere else.
        let s = match p
            .socket
            .connect(to)
            .and_then(|()| UdpSocket::from_std(p.socket))
        {
            Ok(s) => s,
            Err(e) => {
                log::warn!("datagram plane: path {} ({}): {e}", p.id, p.iface);
                continue;
            }
        };
        if let Err(e) = plane.add_path(p.id, to) {
            log::warn!("datagram plane: path {} ({}): {e}", p.id, p.iface);
            continue;
        }
        // A metered path (--metered) carries datagrams only while no other path can.
        let metered = opts.metered.contains(&p.iface);
        plane.paths_mut().set_metered(p.id, metered);
        log::debug!(
            "datagram plane: path {} by {}{} to {to}",
            p.id,
            p.iface,
            if metered { " (metered)" } else { "" }
        );
        sockets.push((p.id, Arc::new(s)));
    }
    Ok(DatagramSession {
        conn,
        plane: Some(ClientPlane {
            plane,
            sockets,
            server: to,
        }),
        redundancy,
        classifier,
    })
}

/// A datagram an application sent, to carry.
pub trait Outgoing: Send {
    fn dst(&self) -> SocketAddr;
    fn payload(&self) -> &[u8];
    /// Its DSCP, when the receiving side read it.
    fn dscp(&self) -> Option<u8> {
        None
    }
    /// When it arrived, when the receiving side knows better than the moment it is carried
    /// (the kernel's stamp): the classifier judges a flow's pacing by it.
    fn received(&self) -> Option<Instant> {
        None
    }
}

impl Outgoing for Datagram {
    fn dst(&self) -> SocketAddr {
        self.addr
    }
    fn payload(&self) -> &[u8] {
        &self.payload
    }
}

/// A datagram with the moment its reader took it from the application's socket, before
/// any queue: the classifier judges a flow's pacing by it (on a loaded host the carrying
/// task gets to datagrams late and in bursts).
pub struct Stamped {
    pub datagram: Datagram,
    pub at: Instant,
}

impl Stamped {
    /// `datagram`, read now.
    pub fn now(datagram: Datagram) -> Stamped {
        Stamped {
            datagram,
            at: Instant::now(),
        }
    }
}

impl Outgoing for Stamped {
    fn dst(&self) -> SocketAddr {
        self.datagram.addr
    }
    fn payload(&self) -> &[u8] {
        &self.datagram.payload
    }
    fn received(&self) -> Option<Instant> {
        Some(self.at)
    }
}

/// Why a carried session ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Ending {
    /// [`IDLE`] without a datagram from the application.
    Idle,
    /// The application's side closed its queue (the session then ended cleanly).
    Application,
    /// The proxy server ended the session.
    #[default]
    Server,
}

/// How a carried session ended.
#[derive(Debug, Clone, Default)]
pub struct Carried {
    pub ending: Ending,
    /// The plane's counts (`None`: datagrams rode the session, op 7).
    pub plane: Option<PlaneCounts>,
}

impl Carried {
    /// The plane's part of a session's final line.
    pub fn describe(&self) -> String {
        match &self.plane {
            Some(p) => p.describe(),
            None => "datagrams inside the session (op 7)".to_string(),
        }
    }
}

/// Aborts the tasks it holds when dropped.
struct Tasks(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// Carries a datagram session: the application's datagrams from `up` (`first` before
/// them) to the server, through the plane or inside the session; what comes back to `down`
/// (each with its source). Ends after [`IDLE`] without a datagram from the application
/// (the session is then ended cleanly) or when the server ends the session. `sent` and
/// `received` count the datagrams each way.
pub async fn carry<T: Outgoing>(
    s: &mut DatagramSession,
    first: Option<T>,
    up: &mut mpsc::Receiver<T>,
    down: mpsc::Sender<Datagram>,
    sent: &AtomicU64,
    received: &AtomicU64,
) -> Result<Carried, Error> {
    let (reader, writer) = (&mut s.conn.reader, &mut s.conn.writer);
    let Some(cp) = s.plane.as_mut() else {
        // Op 7: framed inside the session, as before the plane.
        let up_side = async {
            let mut next = first;
            let ending = loop {
                let d = match next.take() {
                    Some(d) => d,
                    None => match tokio::time::timeout(IDLE, up.recv()).await {
                        Ok(Some(d)) => d,
                        Ok(None) => break Ending::Application,
                        Err(_) => break Ending::Idle,
                    },
                };
                write_datagram(writer, d.dst(), d.payload()).await?;
                sent.fetch_add(1, Ordering::Relaxed);
            };
            writer.shutdown().await?;
            Ok::<_, Error>(ending)
        };
        let down_side = async {
            while let Some(d) = read_datagram(reader).await? {
                received.fetch_add(1, Ordering::Relaxed);
                if down.send(d).await.is_err() {
                    break;
                }
            }
            Ok::<_, Error>(())
        };
        let ending = tokio::select! {
            r = up_side => r?,
            r = down_side => { r?; Ending::Server }
        };
        return Ok(Carried {
            ending,
            plane: None,
        });
    };
    let plane = &mut cp.plane;
    let mut counts = PlaneCounts::default();
    // Each path's socket read in a task of its own, into one queue.
    let (utx, mut urx) = mpsc::channel::<(PathId, Vec<u8>, SocketAddr)>(SESSION_QUEUE);
    let mut tasks = Tasks(Vec::new());
    let by_id: HashMap<PathId, Arc<UdpSocket>> = cp.sockets.iter().cloned().collect();
    for (id, sock) in &cp.sockets {
        let (id, sock, utx) = (*id, sock.clone(), utx.clone());
        tasks.0.push(tokio::spawn(async move {
            let mut b = vec![0u8; 65_535];
            loop {
                match sock.recv_from(&mut b).await {
                    Ok((n, from)) => {
                        if utx.try_send((id, b[..n].to_vec(), from)).is_err() && utx.is_closed() {
                            return;
                        }
                    }
                    Err(e) => {
                        log::debug!("datagram plane: path {id}: {e}");
                        // An ICMP error on a connected socket: read on after a pause.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        }));
    }
    drop(utx);
    let (ftx, mut frx) = mpsc::channel::<Frame>(FRAME_QUEUE);
    let reading = async move {
        while let Some(f) = read_frame(reader).await.context("reading a datagram")? {
            if ftx.send(f).await.is_err() {
                break;
            }
        }
        Ok::<_, Error>(())
    };
    let server = cp.server;
    let send_udp = |t: &Transmit| {
        let s = by_id.get(&t.path).cloned();
        let bytes = t.bytes.clone();
        let (path, to) = (t.path, t.to);
        async move {
            if let Some(s) = s {
                // The socket is connected to the server's port, where the client sends all.
                let sent = if to == server {
                    s.send(&bytes).await
                } else {
                    s.send_to(&bytes, to).await
                };
                if let Err(e) = sent {
                    log::debug!("datagram plane: path {path} to {to}: {e}");
                }
            }
        }
    };
    let mut classes: lru::LruCache<SocketAddr, FlowClassifier> =
        lru::LruCache::new(std::num::NonZeroUsize::new(DESTINATIONS).expect("nonzero"));
    let main = async {
        let mut next = first;
        let mut last_app = tokio::time::Instant::now();
        // Probes go at once: a path is confirmed before the first datagram where it can be.
        for t in plane
            .poll(Instant::now())
            .map_err(|e| Error::msg(e.to_string()))?
        {
            send_udp(&t).await;
        }
        let ending = loop {
            if let Some(d) = next.take() {
                last_app = tokio::time::Instant::now();
                let now = Instant::now();
                let info = DatagramInfo {
                    len: d.payload().len(),
                    dscp: d.dscp(),
                    dst_port: d.dst().port(),
                };
                let auto = classes
                    .get_or_insert_mut(d.dst(), FlowClassifier::new)
                    .observe(&s.classifier, info, d.received().unwrap_or(now));
                let class = s.redundancy.class(auto);
                send_through(
                    plane,
                    class,
                    d.dst(),
                    d.payload(),
                    writer,
                    &mut counts,
                    &send_udp,
                )
                .await?;
                sent.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let now = Instant::now();
            let timer = plane
                .next_timeout(now)
                .map(|t| tokio::time::Instant::from_std(t.max(now)));
            tokio::select! {
                d = up.recv() => match d {
                    Some(d) => next = Some(d),
                    None => break Ending::Application,
                },
                Some((_, mut bytes, from)) = urx.recv() => {
                    match plane.receive(&mut bytes, from, Instant::now()) {
                        Ok(Delivered::Data { payload, prefix, .. }) => match bare_of(prefix, payload) {
                            Ok((addr, p)) => {
                                received.fetch_add(1, Ordering::Relaxed);
                                let d = Datagram { addr, payload: p.to_vec() };
                                if down.send(d).await.is_err() {
                                    break Ending::Application;
                                }
                            }
                            Err(e) => log::warn!("datagram plane: from {from}: {e}; dropped"),
                        },
                        Ok(Delivered::Control { .. }) => {}
                        Err(d) => log_drop("datagram plane (client)", &d, from, plane.stats()),
                    }
                    for t in plane.poll(Instant::now()).map_err(|e| Error::msg(e.to_string()))? {
                        send_udp(&t).await;
                    }
                }
                f = frx.recv() => {
                    let Some(f) = f else { break Ending::Server };
                    if let Some(seq) = f.seq {
                        if !plane.accept_from_session(seq, Instant::now()) {
                            continue;
                        }
                        counts.from_session += 1;
                    }
                    received.fetch_add(1, Ordering::Relaxed);
                    if down.send(f.datagram).await.is_err() {
                        break Ending::Application;
                    }
                }
                () = async {
                    match timer {
                        Some(t) => tokio::time::sleep_until(t).await,
                        None => std::future::pending().await,
                    }
                } => {
                    for t in plane.poll(Instant::now()).map_err(|e| Error::msg(e.to_string()))? {
                        send_udp(&t).await;
                    }
                }
                () = tokio::time::sleep_until(last_app + IDLE) => break Ending::Idle,
            }
        };
        writer.shutdown().await?;
        Ok::<_, Error>(ending)
    };
    let ending = {
        tokio::pin!(reading);
        tokio::pin!(main);
        tokio::select! {
            r = &mut main => {
                let ending = r?;
                // Our side is ended: the path sockets stay open until the server ends its
                // side (it sends nothing after), at most LINGER, so that a probe or reply
                // already on its way meets a socket, not an ICMP port unreachable that the
                // host's routes might send out of another interface.
                let _ = tokio::time::timeout(LINGER, &mut reading).await;
                ending
            }
            r = &mut reading => {
                r?;
                // The server ended the session: what it sent before is delivered first.
                (&mut main).await?
            }
        }
    };
    drop(tasks);
    counts.stats = *plane.stats();
    counts.session_duplicates = plane.session_duplicates();
    log::info!("datagram plane (client): {}", counts.describe());
    Ok(Carried {
        ending,
        plane: Some(counts),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nena_proto::{exchange_in, Mode};

    fn offer(version: u8, receiver: ReceiverId) -> PlaneOffer {
        PlaneOffer {
            version,
            receiver,
            redundancy: Redundancy::Auto,
            paths: vec![OfferedPath { id: 0, flags: 0 }],
            realtime_ports: vec![],
        }
    }

    /// The server answers a version 1 offer as version 1 did (no compact byte), a version 2
    /// offer with compact datagrams when the session's suite and the client's receiver id
    /// allow them, and declines a version it does not speak (a client of version 2 then
    /// offers version 1). Its receiver ids fit 24 bits.
    #[tokio::test]
    async fn the_server_answers_both_versions() {
        let server = PlaneServer::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let keys = exchange_in(Mode::Aead).server.datagram_keys().unwrap();
        let compact_of = |o: &PlaneOffer| match answer(Some(&server), false, Some(&keys), o) {
            (
                PlaneAnswer::Accepted {
                    receiver, compact, ..
                },
                Some(r),
            ) => {
                assert_eq!(receiver, r.id);
                assert!(receiver <= nena_proto::dgram::compact::MAX_RECEIVER);
                compact
            }
            other => panic!("{other:?}", other = other.0),
        };
        assert_eq!(compact_of(&offer(1, 0x0102_0304)), None);
        assert_eq!(compact_of(&offer(2, 0x02_0304)), Some(true));
        assert_eq!(compact_of(&offer(2, 0x0102_0304)), Some(false));
        assert_eq!(
            answer(Some(&server), false, Some(&keys), &offer(3, 1)).0,
            PlaneAnswer::Declined(Declined::Version)
        );
        assert_eq!(
            answer(Some(&server), false, None, &offer(2, 1)).0,
            PlaneAnswer::Declined(Declined::Mode)
        );
    }
}
