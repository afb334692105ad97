//! The datagram plane's server end: the proxy server's UDP socket, its sessions by receiver
//! id, the answer to an offer, and each session's carrying (`serve_plane`).

use super::*;

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
    let s4 = UdpSocket::bind("0.0.0.0:0")
        .await
        .during(Doing::BindingUdp)?;
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
    let (mut frx, reading) = frame_queue(reader);
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
                    for t in plane.poll(Instant::now()).map_err(Error::from)? {
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
                    for t in plane.poll(Instant::now()).map_err(Error::from)? {
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
pub(super) async fn send_through<W, F, Fut>(
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
