//! The datagram plane's client end: one UDP socket per path, opening a datagram session
//! with the plane's offer (`open_datagrams`), and carrying an application's datagrams
//! through it (`carry`), for the gateway, `nena run` and SOCKS5 UDP ASSOCIATE.

use super::*;

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
fn path_sockets(opts: &ClientOptions) -> Result<Vec<PathSocket>, Error> {
    let resolved = opts
        .policy
        .resolve()
        .map_err(nena_mptcp::MptcpError::from)?;
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
            .during(Doing::BindingUdpTo {
                to: iface.name.clone(),
            })?;
        s.bind(&SockAddr::from(at))
            .during(Doing::BindingUdpTo { to: at.to_string() })?;
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

/// What one path of the plane carried: sealed datagram bytes sent and received on its
/// socket, counted as they go (for the metrics and `nena status` while the session runs).
#[derive(Debug)]
struct PathBytes {
    id: PathId,
    iface: String,
    trusted: bool,
    metered: bool,
    sent: AtomicU64,
    received: AtomicU64,
}

/// The client's end of an accepted plane.
struct ClientPlane {
    plane: Plane,
    /// Each path's socket, connected to `server`.
    sockets: Vec<(PathId, Arc<UdpSocket>)>,
    /// Each path's byte counts.
    bytes: Arc<Vec<PathBytes>>,
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

    /// What the session carried on its paths, read at its end: its subflows (the session's
    /// own bytes) and the plane's ([`DatagramSession::plane_usage`]).
    pub fn usage_at_end(&self) -> crate::ops::metrics::PathsUsed {
        self.usage_with(&crate::conn::Paths::of(&self.conn))
    }

    /// [`DatagramSession::usage_at_end`] with the session's subflows as `paths` read them
    /// (a caller that reads them for its own line reads them once).
    pub fn usage_with(&self, paths: &crate::conn::Paths) -> crate::ops::metrics::PathsUsed {
        crate::ops::metrics::PathsUsed::of_client(&paths.subflows, self.conn.gate.as_ref())
            .plus(&self.plane_usage()())
    }

    /// A reader of what the plane's paths carried so far, by trust class and interface
    /// (sealed datagrams' bytes: what crossed each path), for
    /// [`crate::ops::metrics::Tally::live`] in [`carry`] and for the session's end.
    /// Without the plane: nothing (datagrams inside the session).
    pub fn plane_usage(&self) -> impl Fn() -> crate::ops::metrics::PathsUsed + Send + 'static {
        let bytes = self.plane.as_ref().map(|p| p.bytes.clone());
        move || {
            let mut u = crate::ops::metrics::PathsUsed::default();
            for b in bytes.iter().flat_map(|v| v.iter()) {
                let (sent, received) = (
                    b.sent.load(Ordering::Relaxed),
                    b.received.load(Ordering::Relaxed),
                );
                let trust = if b.trusted { "trusted" } else { "untrusted" };
                match u.paths.iter_mut().find(|p| p.0 == trust) {
                    Some(p) => {
                        p.1 += sent;
                        p.2 += received;
                    }
                    None => u.paths.push((trust.to_string(), sent, received)),
                }
                u.ifaces.push((b.iface.clone(), b.metered, sent, received));
            }
            u
        }
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
    let local = random_id().map_err(|e| (Rep::GeneralFailure, Error::from(e)))?;
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
            Err((_, e)) if e.was_doing(&Doing::AwaitingPlaneAnswer) => {
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
        return Err((Rep::GeneralFailure, ProxyFault::PlaneWithoutKeys.into()));
    };
    let to = SocketAddr::new(opts.remote.ip(), port);
    let mut plane = Plane::client(&keys, local, receiver, LivenessConfig::default());
    if compact && !plane.enable_compact(&keys) {
        log::debug!("datagram plane: compact datagrams agreed but not possible here");
    }
    let mut sockets = Vec::new();
    let mut bytes = Vec::new();
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
        bytes.push(PathBytes {
            id: p.id,
            iface: p.iface.clone(),
            trusted: p.flags & PATH_TRUSTED != 0,
            metered,
            sent: AtomicU64::new(0),
            received: AtomicU64::new(0),
        });
    }
    Ok(DatagramSession {
        conn,
        plane: Some(ClientPlane {
            plane,
            sockets,
            bytes: Arc::new(bytes),
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
/// `received` count the datagrams each way; `tally` counts the plane's bytes per path every
/// second while it runs ([`DatagramSession::plane_usage`]; the session's end counts the rest:
/// [`DatagramSession::usage_at_end`]).
pub async fn carry<T: Outgoing>(
    s: &mut DatagramSession,
    tally: &crate::ops::metrics::Tally,
    first: Option<T>,
    up: &mut mpsc::Receiver<T>,
    down: mpsc::Sender<Datagram>,
    sent: &AtomicU64,
    received: &AtomicU64,
) -> Result<Carried, Error> {
    let plane = s.plane_usage();
    tally
        .live(plane, carry_datagrams(s, first, up, down, sent, received))
        .await
}

/// [`carry`] without the counting.
async fn carry_datagrams<T: Outgoing>(
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
    let path_bytes = cp.bytes.clone();
    let counted = |id: PathId| path_bytes.iter().position(|b| b.id == id);
    for (id, sock) in &cp.sockets {
        let (id, sock, utx) = (*id, sock.clone(), utx.clone());
        let (at, bytes) = (counted(id), path_bytes.clone());
        tasks.0.push(tokio::spawn(async move {
            let mut b = vec![0u8; 65_535];
            loop {
                match sock.recv_from(&mut b).await {
                    Ok((n, from)) => {
                        if let Some(i) = at {
                            bytes[i].received.fetch_add(n as u64, Ordering::Relaxed);
                        }
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
    let (mut frx, reading) = frame_queue(reader);
    let server = cp.server;
    let send_udp = |t: &Transmit| {
        let s = by_id.get(&t.path).cloned();
        let bytes = t.bytes.clone();
        let (path, to) = (t.path, t.to);
        let (at, counts) = (counted(path), path_bytes.clone());
        async move {
            if let Some(s) = s {
                // The socket is connected to the server's port, where the client sends all.
                let sent = if to == server {
                    s.send(&bytes).await
                } else {
                    s.send_to(&bytes, to).await
                };
                match (sent, at) {
                    (Ok(n), Some(i)) => {
                        counts[i].sent.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    (Ok(_), None) => {}
                    (Err(e), _) => log::debug!("datagram plane: path {path} to {to}: {e}"),
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
        for t in plane.poll(Instant::now()).map_err(Error::from)? {
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
                    for t in plane.poll(Instant::now()).map_err(Error::from)? {
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
                    for t in plane.poll(Instant::now()).map_err(Error::from)? {
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
