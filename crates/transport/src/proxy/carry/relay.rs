//! Datagrams through nena (`nena run --udp carry`, op 7).
//!
//! `nena run`'s side ([`Relay`]): the cgroup's BPF programs send every datagram of the
//! command that is neither DNS nor to loopback to a socket of the relay on loopback, and
//! record which destination each application socket (its address and port as the relay
//! sees them) sent to. The relay keeps one nena session per application socket, opened on
//! its first datagram and ended after [`IDLE`] without one; each datagram travels framed
//! with its destination ([`Datagram`]). What the server sends back is handed to the
//! application socket from the relay's socket (the recvmsg programs make its source the
//! socket's destination again), and only when it comes from that destination.
//!
//! The proxy server's side ([`serve`]): each datagram whose destination its `--allow` rules
//! permit is sent from a UDP socket of the session's own (one per family); what arrives on
//! those sockets from a destination the session sent to is framed with its source and sent
//! back; anything from elsewhere is dropped (as a NAT that filters by address does). The
//! session remembers at most [`DESTINATIONS`] destinations, the least recently used
//! forgotten first (their replies are then dropped as strangers' until it sends there
//! again), with the `--allow` verdict of each, so that a client spraying destinations
//! cannot grow the server's memory and the host-address check runs once per destination.
//!
//! An unconnected application socket that sends to several destinations at once may see a
//! datagram attributed to the destination it sent to last (the record is per socket); such
//! a datagram still goes only where `--allow` permits, inside nena.

use crate::conn::ClientOptions;
use crate::error::{Doing, During, Error, Result};
use crate::ops::metrics::{Metrics, Tally};
use crate::proxy::carry::plane::Stamped;
use crate::proxy::socks::AllowList;
use crate::wire::dns_udp::Datagram;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, Semaphore};

/// Datagrams waiting for their flow's session at most; more are dropped, as a full queue of
/// a router drops them.
const QUEUE: usize = 256;
pub use super::frames::{read_datagram, write_datagram, RelayCounts, DESTINATIONS, IDLE};

/// Counters of a relay (either side).
#[derive(Debug, Default)]
pub struct RelayStats {
    /// Datagrams sent on (client: into a session; server: to their destination).
    pub sent: AtomicU64,
    /// Datagrams received back (client: handed to the application).
    pub received: AtomicU64,
    /// Datagrams dropped: no recorded destination, a full queue, a reply from elsewhere, or
    /// (server) a destination `--allow` does not permit.
    pub dropped: AtomicU64,
    /// Sessions opened (client).
    pub sessions: AtomicU64,
}

/// Which destination a datagram from an application socket was sent to (`nena run`: read
/// from its BPF map).
pub type DstLookup = Arc<dyn Fn(SocketAddr) -> Option<SocketAddr> + Send + Sync>;

/// `nena run`'s datagram relay toward the proxy server at `opts.remote`.
pub struct Relay {
    opts: Arc<ClientOptions>,
    connecting: Arc<Semaphore>,
    metrics: Option<Arc<Metrics>>,
    lookup: DstLookup,
    /// Flows whose task has not ended, and the signal of one ending.
    active: AtomicU64,
    ended: tokio::sync::Notify,
    pub stats: RelayStats,
}

impl Relay {
    pub fn new(
        opts: Arc<ClientOptions>,
        connecting: Arc<Semaphore>,
        metrics: Option<Arc<Metrics>>,
        lookup: DstLookup,
    ) -> Relay {
        Relay {
            opts,
            connecting,
            metrics,
            lookup,
            active: AtomicU64::new(0),
            ended: tokio::sync::Notify::new(),
            stats: RelayStats::default(),
        }
    }

    /// After [`Relay::serve`]'s task was dropped (which ends every flow's queue): waits
    /// until each flow has ended its session cleanly, at most `limit`.
    pub async fn wind_down(&self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let ended = self.ended.notified();
            if self.active.load(Ordering::Acquire) == 0 {
                return;
            }
            if tokio::time::timeout_at(deadline, ended).await.is_err() {
                return;
            }
        }
    }

    /// Relays the datagrams arriving on `sock` until the task is dropped.
    pub async fn serve(self: Arc<Self>, sock: UdpSocket) -> Result<()> {
        let sock = Arc::new(sock);
        let mut flows: HashMap<SocketAddr, mpsc::Sender<Stamped>> = HashMap::new();
        let mut buf = vec![0u8; 65535];
        loop {
            let (n, peer) = sock
                .recv_from(&mut buf)
                .await
                .during(Doing::DatagramRelay)?;
            let Some(addr) = (self.lookup)(peer) else {
                self.stats.dropped.fetch_add(1, Ordering::Relaxed);
                log::warn!("datagram from {peer}: no destination recorded for it; dropped");
                continue;
            };
            let d = Stamped::now(Datagram {
                addr,
                payload: buf[..n].to_vec(),
            });
            flows.retain(|_, tx| !tx.is_closed());
            let tx = flows.entry(peer).or_insert_with(|| {
                let (tx, rx) = mpsc::channel(QUEUE);
                self.active.fetch_add(1, Ordering::AcqRel);
                tokio::spawn(self.clone().flow(peer, rx, sock.clone()));
                tx
            });
            if tx.try_send(d).is_err() {
                self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// One application socket's session: its datagrams out, the replies back to it.
    async fn flow(
        self: Arc<Self>,
        peer: SocketAddr,
        mut rx: mpsc::Receiver<Stamped>,
        sock: Arc<UdpSocket>,
    ) {
        let tally = Tally::begin(self.metrics.as_ref());
        let ended = async {
            let mut session =
                crate::proxy::carry::plane::open_datagrams(&self.opts, &self.connecting, &tally)
                    .await
                    .map_err(|(_, e)| e)?;
            self.stats.sessions.fetch_add(1, Ordering::Relaxed);
            log::info!(
                "datagrams of {peer}: session open{}",
                if session.has_plane() {
                    ", datagram plane"
                } else {
                    ""
                }
            );
            let (dtx, mut drx) = mpsc::channel::<Datagram>(QUEUE);
            let carrying = crate::proxy::carry::plane::carry(
                &mut session,
                &tally,
                None,
                &mut rx,
                dtx,
                &self.stats.sent,
                &self.stats.received,
            );
            let down = async {
                while let Some(d) = drx.recv().await {
                    // Only what comes from the socket's destination: the recvmsg program
                    // names that destination as the source.
                    if (self.lookup)(peer) != Some(d.addr) {
                        self.stats.dropped.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    sock.send_to(&d.payload, peer).await?;
                }
                Ok::<_, Error>(())
            };
            let (carried, ()) = tokio::try_join!(carrying, down)?;
            tally.paths_used(session.usage_at_end());
            log::info!("datagrams of {peer}: {}", carried.describe());
            if let Some(p) = &carried.plane {
                tally.datagrams(&p.metrics());
            }
            Ok::<_, Error>(())
        }
        .await;
        rx.close();
        match &ended {
            Ok(()) => log::info!("datagrams of {peer}: session done"),
            Err(e) => log::warn!("datagrams of {peer}: {e:#}"),
        }
        tally.finish(&ended);
        self.active.fetch_sub(1, Ordering::AcqRel);
        self.ended.notify_waiters();
    }
}

/// The proxy server's side of a datagram session, until the client ends it or [`IDLE`]
/// passes without a datagram from it. Returns the counts.
pub async fn serve<R, W>(
    reader: &mut R,
    writer: &mut W,
    allow: &AllowList,
) -> Result<RelayCounts, Error>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    serve_idle(reader, writer, allow, IDLE).await
}

/// A destination a server-side session was asked to send to.
#[derive(Debug, Clone, Copy)]
struct Dest {
    /// `--allow` permits it.
    permitted: bool,
    /// A datagram went there (its replies are taken).
    sent: bool,
}

async fn serve_idle<R, W>(
    reader: &mut R,
    writer: &mut W,
    allow: &AllowList,
    idle: Duration,
) -> Result<RelayCounts, Error>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let s4 = UdpSocket::bind("0.0.0.0:0")
        .await
        .during(Doing::BindingUdp)?;
    let s6 = UdpSocket::bind("[::]:0").await.ok();
    // Each destination's verdict, and whether the session sent there (replies are taken
    // only from those): bounded, the least recently used forgotten first.
    let cap = std::num::NonZeroUsize::new(DESTINATIONS).expect("nonzero");
    let dests: Mutex<lru::LruCache<SocketAddr, Dest>> = Mutex::new(lru::LruCache::new(cap));
    let counts = Mutex::new(RelayCounts::default());
    let up = async {
        while let Ok(d) = tokio::time::timeout(idle, read_datagram(reader)).await {
            let Some(d) = d.during(Doing::ReadingDatagram)? else {
                break;
            };
            let verdict = {
                let mut m = dests.lock().expect("dests");
                match m.get(&d.addr) {
                    Some(v) => v.permitted,
                    None => {
                        let permitted = allow.permits(d.addr);
                        m.put(
                            d.addr,
                            Dest {
                                permitted,
                                sent: false,
                            },
                        );
                        permitted
                    }
                }
            };
            if !verdict {
                let first = {
                    let mut c = counts.lock().expect("counts");
                    c.refused += 1;
                    c.refused == 1
                };
                if first {
                    log::warn!("datagram to {}: not permitted by --allow; dropped", d.addr);
                }
                continue;
            }
            let s = match (d.addr, &s6) {
                (SocketAddr::V4(_), _) => &s4,
                (SocketAddr::V6(_), Some(s6)) => s6,
                (SocketAddr::V6(_), None) => continue,
            };
            if let Err(e) = s.send_to(&d.payload, d.addr).await {
                log::warn!("datagram to {}: {e}", d.addr);
                continue;
            }
            if let Some(v) = dests.lock().expect("dests").get_mut(&d.addr) {
                v.sent = true;
            }
            counts.lock().expect("counts").sent += 1;
        }
        Ok::<_, Error>(())
    };
    let down = async {
        let mut b4 = vec![0u8; 65535];
        let mut b6 = vec![0u8; 65535];
        loop {
            let (n, from, v6) = tokio::select! {
                r = s4.recv_from(&mut b4) => { let (n, f) = r?; (n, f, false) }
                r = async {
                    match &s6 {
                        Some(s) => s.recv_from(&mut b6).await,
                        None => std::future::pending().await,
                    }
                } => { let (n, f) = r?; (n, f, true) }
            };
            // `peek`: a reply does not keep a destination remembered, only sending does.
            if !dests
                .lock()
                .expect("dests")
                .peek(&from)
                .is_some_and(|v| v.sent)
            {
                continue;
            }
            let payload = if v6 { &b6[..n] } else { &b4[..n] };
            write_datagram(writer, from, payload).await?;
            counts.lock().expect("counts").received += 1;
        }
        #[allow(unreachable_code)]
        Ok::<_, Error>(())
    };
    tokio::select! {
        r = up => r?,
        r = down => r?,
    }
    let c = *counts.lock().expect("counts");
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::socks::AllowRule;
    use tokio::io::AsyncWriteExt;

    fn allow(rule: &str) -> AllowList {
        AllowList(vec![rule.parse::<AllowRule>().unwrap()])
    }

    /// The server side: a permitted datagram reaches its echo and the echo comes back with
    /// its source; one to a destination `--allow` does not permit never leaves.
    #[tokio::test]
    async fn the_server_relays_what_allow_permits_and_returns_replies() {
        let echo = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let echo_at = echo.local_addr().unwrap();
        let other = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let other_at = other.local_addr().unwrap();
        tokio::spawn(async move {
            let mut b = [0u8; 100];
            loop {
                let (n, from) = echo.recv_from(&mut b).await.unwrap();
                echo.send_to(&b[..n], from).await.unwrap();
            }
        });
        let (client, server) = tokio::io::duplex(1 << 16);
        let (mut sr, mut sw) = tokio::io::split(server);
        let rule = allow(&format!("127.0.0.1/32:{}", echo_at.port()));
        let serving = tokio::spawn(async move { serve(&mut sr, &mut sw, &rule).await });
        let (mut cr, mut cw) = tokio::io::split(client);
        write_datagram(&mut cw, other_at, b"not for you")
            .await
            .unwrap();
        write_datagram(&mut cw, echo_at, b"ping").await.unwrap();
        let back = read_datagram(&mut cr).await.unwrap().unwrap();
        assert_eq!(back.addr, echo_at);
        assert_eq!(back.payload, b"ping");
        cw.shutdown().await.unwrap();
        let counts = serving.await.unwrap().unwrap();
        assert_eq!(
            counts,
            RelayCounts {
                sent: 1,
                received: 1,
                refused: 1
            }
        );
        let mut b = [0u8; 100];
        assert!(
            other.try_recv_from(&mut b).is_err(),
            "the refused datagram was sent"
        );
    }

    /// Who sent `want` to `sock`. Other datagrams are skipped: the test binary's other tests
    /// send to ephemeral ports too, and one may still be aimed at a port this test's socket
    /// was just given.
    async fn sender_of(sock: &UdpSocket, want: &[u8]) -> SocketAddr {
        let mut b = [0u8; 100];
        loop {
            let (n, from) = sock.recv_from(&mut b).await.unwrap();
            if &b[..n] == want {
                return from;
            }
        }
    }

    /// A session remembers [`DESTINATIONS`] destinations: after that many others, the
    /// first one's datagrams are strangers' (dropped), the latest one's still come back.
    #[tokio::test]
    async fn a_session_forgets_the_least_recently_used_destination() {
        let first = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let last = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let (client, server) = tokio::io::duplex(1 << 20);
        let (mut sr, mut sw) = tokio::io::split(server);
        let rule = allow("127.0.0.1/32");
        let serving = tokio::spawn(async move { serve(&mut sr, &mut sw, &rule).await });
        let (mut cr, mut cw) = tokio::io::split(client);
        write_datagram(&mut cw, first.local_addr().unwrap(), b"hello")
            .await
            .unwrap();
        let session = sender_of(&first, b"hello").await;
        first.send_to(b"known", session).await.unwrap();
        let back = read_datagram(&mut cr).await.unwrap().unwrap();
        assert_eq!(back.payload, b"known");
        // DESTINATIONS - 1 others (ports nobody listens on), then `last`: `first` is the
        // least recently used of DESTINATIONS + 1 and is forgotten.
        let base = first.local_addr().unwrap().port().wrapping_add(1000);
        let mut sent = 0;
        let mut port = base;
        while sent < DESTINATIONS - 1 {
            port = port.wrapping_add(1).max(1024);
            let to = SocketAddr::from(([127, 0, 0, 1], port));
            // Not `first`, not `last`, and not the session's own socket (whose datagram to
            // itself would come back as a reply).
            if to == first.local_addr().unwrap()
                || to == last.local_addr().unwrap()
                || port == session.port()
            {
                continue;
            }
            write_datagram(&mut cw, to, b"x").await.unwrap();
            sent += 1;
        }
        write_datagram(&mut cw, last.local_addr().unwrap(), b"hi")
            .await
            .unwrap();
        let session_again = sender_of(&last, b"hi").await;
        assert_eq!(session_again, session);
        // In order on the session's socket: the forgotten one first, then the latest.
        first.send_to(b"forgotten", session).await.unwrap();
        last.send_to(b"latest", session).await.unwrap();
        let back = read_datagram(&mut cr).await.unwrap().unwrap();
        assert_eq!(back.addr, last.local_addr().unwrap());
        assert_eq!(
            back.payload, b"latest",
            "a forgotten destination's reply came back"
        );
        cw.shutdown().await.unwrap();
        let counts = serving.await.unwrap().unwrap();
        assert_eq!(counts.sent, DESTINATIONS as u64 + 1);
        assert_eq!(counts.received, 2);
    }

    /// The guard of the server's own host holds for datagrams too: a rule for every IPv4
    /// address sends nothing to loopback.
    #[tokio::test]
    async fn datagrams_to_the_servers_own_host_need_a_rule_of_their_own() {
        let local = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let (client, server) = tokio::io::duplex(1 << 16);
        let (mut sr, mut sw) = tokio::io::split(server);
        let rule = allow("0.0.0.0/0");
        let serving = tokio::spawn(async move { serve(&mut sr, &mut sw, &rule).await });
        let (_cr, mut cw) = tokio::io::split(client);
        write_datagram(&mut cw, local.local_addr().unwrap(), b"metadata?")
            .await
            .unwrap();
        cw.shutdown().await.unwrap();
        let counts = serving.await.unwrap().unwrap();
        assert_eq!((counts.sent, counts.refused), (0, 1));
        let mut b = [0u8; 100];
        assert!(local.try_recv_from(&mut b).is_err(), "sent to loopback");
    }

    /// A session that stays quiet ends after its idle time; a frame that is no datagram
    /// ends it with an error.
    #[tokio::test]
    async fn idle_sessions_end_and_junk_is_refused() {
        let (_client, server) = tokio::io::duplex(1024);
        let (mut sr, mut sw) = tokio::io::split(server);
        let r = serve_idle(
            &mut sr,
            &mut sw,
            &AllowList::default(),
            Duration::from_millis(50),
        )
        .await
        .unwrap();
        assert_eq!(r, RelayCounts::default());
        let (mut client, server) = tokio::io::duplex(1024);
        let (mut sr, mut sw) = tokio::io::split(server);
        client.write_all(&[9, 1, 2, 3]).await.unwrap();
        let e = serve(&mut sr, &mut sw, &AllowList::default())
            .await
            .unwrap_err();
        assert!(format!("{e:#}").contains("address type 9"), "{e:#}");
    }
}
