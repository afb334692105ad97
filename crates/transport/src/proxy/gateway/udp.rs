//! The gateway's datagrams: what the TPROXY rules send here from the LAN (UDP to port 53,
//! and with `--udp carry` every other datagram), received with the destination the LAN host
//! addressed (`IP_RECVORIGDSTADDR`), and the answers sent back from that destination's
//! address (a transparent socket bound to it), so the LAN host sees its resolver or its
//! peer answer.
//!
//! - DNS (destination port 53): each query is answered by `nena run`'s responder
//!   ([`Responder::answer`]: one nena session per query to the proxy server, which asks its
//!   own resolver, op 6; SERVFAIL when that fails). No query leaves by any path in the clear.
//! - Other datagrams (`--udp carry`): one nena session per LAN socket (its address and
//!   port), datagrams framed with their destination (op 7, [`crate::proxy::carry::relay`]'s
//!   frames), replies framed with their source and handed back from that source's address.
//!   A flow ends after [`crate::proxy::carry::relay::IDLE`] without a datagram from the LAN.
//!
//! What a LAN host can make the gateway hold is bounded ([`super::bounds`]): flows and DNS
//! queries in flight per host and in total, the least recently used flow closed for a new
//! one, a query over a cap answered SERVFAIL at once; the datagrams queued for the flows
//! (at most [`FLOW_BYTES`] each, [`QUEUED_BYTES`] in all). Each datagram is answered only
//! when its source lies inside the prefixes of the LAN interface it came in on, and the
//! answer leaves by that interface ([`super::ingress`]).

use super::bounds::{Caps, Peaks, Table};
use super::ingress::Lans;
use super::rates::{Limits, Refused};
use crate::conn::ClientOptions;
use crate::dns;
use crate::ops::metrics::{Metrics, Tally};
use crate::proxy::carry::responder::Responder;
use crate::wire::dns_udp::Datagram;
use anyhow::{Context, Result};
use lru::LruCache;
use nix::sys::socket::{self, ControlMessageOwned, MsgFlags, SockaddrStorage};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io::IoSliceMut;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Semaphore};

/// Datagrams waiting for their flow's session at most; more are dropped, as a router's
/// full queue drops them.
const QUEUE: usize = 256;
/// Reply sockets a flow keeps open at most (one per destination it sent to that answered).
const REPLY_SOCKETS: std::num::NonZeroUsize = std::num::NonZeroUsize::new(64).unwrap();
/// Bytes of datagrams waiting for one flow's session at most (some 170 full-size ones).
pub const FLOW_BYTES: usize = 256 << 10;
/// Bytes of datagrams waiting for all flows' sessions at most.
pub const QUEUED_BYTES: usize = 32 << 20;
/// The receive buffer of the gateway's datagram sockets: what arrives while the gateway is
/// busy waits here (the kernel's default, about 200 KiB, holds some 90 full-size datagrams:
/// 20 ms of a 50 Mbit/s stream, less than a loaded host's scheduling delay).
const RCVBUF: usize = 4 << 20;

/// Counters of the gateway's datagrams (its final log line).
#[derive(Debug, Default)]
pub struct UdpStats {
    pub dns_answered: AtomicU64,
    pub sent: AtomicU64,
    pub received: AtomicU64,
    pub dropped: AtomicU64,
    /// Datagrams whose source is outside the prefixes of the LAN interface they came in on
    /// (or that came in on no LAN interface): dropped unanswered.
    pub off_lan: AtomicU64,
}

/// A transparent UDP socket on `addr` that reports each datagram's original destination.
pub fn tproxy_socket(addr: SocketAddr) -> Result<UdpSocket> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    s.set_cloexec(true)?;
    s.set_reuse_address(true)?;
    if addr.is_ipv4() {
        s.set_ip_transparent_v4(true)?;
        socket::setsockopt(&s, socket::sockopt::Ipv4OrigDstAddr, &true)?;
        socket::setsockopt(&s, socket::sockopt::Ipv4PacketInfo, &true)?;
        // Each datagram's DSCP, for the datagram plane's classifier (EF, AF4x: real-time).
        socket::setsockopt(&s, socket::sockopt::IpRecvTos, &true)?;
    } else {
        s.set_only_v6(true)?;
        s.set_ip_transparent_v6(true)?;
        socket::setsockopt(&s, socket::sockopt::Ipv6OrigDstAddr, &true)?;
        socket::setsockopt(&s, socket::sockopt::Ipv6RecvPacketInfo, &true)?;
        socket::setsockopt(&s, socket::sockopt::Ipv6RecvTClass, &true)?;
    }
    // Each datagram's arrival time from the kernel: the classifier judges a flow's pacing by
    // it, not by when this process got to read it (late and in bursts on a loaded host).
    socket::setsockopt(&s, socket::sockopt::ReceiveTimestampns, &true)?;
    s.bind(&SockAddr::from(addr))
        .with_context(|| format!("cannot bind a transparent UDP socket on {addr}"))?;
    // Past net.core.rmem_max with CAP_NET_ADMIN (which TPROXY needs anyway); else as far
    // as rmem_max allows.
    if socket::setsockopt(&s, socket::sockopt::RcvBufForce, &RCVBUF).is_err() {
        s.set_recv_buffer_size(RCVBUF)?;
    }
    s.set_nonblocking(true)?;
    Ok(s.into())
}

/// A socket bound to `from` (an address of another host: IP_TRANSPARENT) to answer a LAN
/// host as if `from` answered, and to the LAN interface `iface` (what it sends leaves by
/// that interface whatever the routes say).
fn reply_socket(from: SocketAddr, iface: &str) -> std::io::Result<UdpSocket> {
    let s = Socket::new(Domain::for_address(from), Type::DGRAM, Some(Protocol::UDP))?;
    s.set_cloexec(true)?;
    s.set_reuse_address(true)?;
    s.bind_device(Some(iface.as_bytes()))?;
    if from.is_ipv4() {
        s.set_ip_transparent_v4(true)?;
    } else {
        s.set_only_v6(true)?;
        s.set_ip_transparent_v6(true)?;
    }
    s.bind(&SockAddr::from(from))?;
    Ok(s.into())
}

/// Sends `payload` to `to` from `from`, by `iface`.
fn reply(from: SocketAddr, to: SocketAddr, iface: &str, payload: &[u8]) -> std::io::Result<()> {
    reply_socket(from, iface)?.send_to(payload, to).map(|_| ())
}

/// One datagram received: its payload length, sender, original destination, the
/// interface it came in on, its DSCP (when the kernel said) and when it arrived.
struct Received {
    len: usize,
    peer: SocketAddr,
    dst: SocketAddr,
    ifindex: u32,
    dscp: Option<u8>,
    at: Instant,
}

/// The moment of this process's clock at which the kernel stamped a datagram (`SO_TIMESTAMPNS`,
/// the realtime clock): now, less the time since the stamp.
fn arrival(stamp: &nix::sys::time::TimeSpec) -> Instant {
    let stamped = std::time::UNIX_EPOCH
        + Duration::new(stamp.tv_sec().max(0) as u64, stamp.tv_nsec().max(0) as u32);
    let age = std::time::SystemTime::now()
        .duration_since(stamped)
        .unwrap_or_default();
    let now = Instant::now();
    now.checked_sub(age).unwrap_or(now)
}

/// One datagram.
fn recv_one(fd: std::os::fd::RawFd, buf: &mut [u8]) -> std::io::Result<Received> {
    let mut iov = [IoSliceMut::new(buf)];
    let mut cmsg = nix::cmsg_space!(
        libc::sockaddr_in6,
        libc::in6_pktinfo,
        libc::c_int,
        libc::timespec
    );
    let msg = socket::recvmsg::<SockaddrStorage>(fd, &mut iov, Some(&mut cmsg), MsgFlags::empty())?;
    let peer = msg
        .address
        .as_ref()
        .and_then(|a| {
            a.as_sockaddr_in()
                .map(|v4| SocketAddr::new(IpAddr::V4(v4.ip()), v4.port()))
                .or_else(|| {
                    a.as_sockaddr_in6()
                        .map(|v6| SocketAddr::new(IpAddr::V6(v6.ip()), v6.port()))
                })
        })
        .ok_or_else(|| std::io::Error::other("a datagram without a sender"))?;
    let (mut dst, mut ifindex, mut dscp, mut at) = (None, None, None, None);
    for c in msg.cmsgs()? {
        match c {
            ControlMessageOwned::Ipv4OrigDstAddr(a) => {
                dst = Some(SocketAddr::new(
                    IpAddr::V4(Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr))),
                    u16::from_be(a.sin_port),
                ))
            }
            ControlMessageOwned::Ipv6OrigDstAddr(a) => {
                dst = Some(SocketAddr::new(
                    IpAddr::V6(Ipv6Addr::from(a.sin6_addr.s6_addr)),
                    u16::from_be(a.sin6_port),
                ))
            }
            ControlMessageOwned::Ipv4PacketInfo(i) => ifindex = u32::try_from(i.ipi_ifindex).ok(),
            ControlMessageOwned::Ipv6PacketInfo(i) => ifindex = Some(i.ipi6_ifindex),
            // The upper six bits of the TOS byte or traffic class.
            ControlMessageOwned::Ipv4Tos(t) => dscp = Some(t >> 2),
            ControlMessageOwned::Ipv6TClass(t) => dscp = Some(((t & 0xff) >> 2) as u8),
            ControlMessageOwned::ScmTimestampns(ts) => at = Some(arrival(&ts)),
            _ => {}
        }
    }
    let dst = dst.ok_or_else(|| std::io::Error::other("no original destination"))?;
    let ifindex = ifindex.ok_or_else(|| std::io::Error::other("no incoming interface"))?;
    Ok(Received {
        len: msg.bytes,
        peer,
        dst,
        ifindex,
        dscp,
        at: at.unwrap_or_else(Instant::now),
    })
}

/// A datagram waiting for its flow's session, counted in the queues' bytes until it is
/// sent or dropped.
struct Queued {
    dst: SocketAddr,
    payload: Vec<u8>,
    dscp: Option<u8>,
    at: Instant,
    _bytes: Ticket,
}

impl crate::proxy::carry::plane::Outgoing for Queued {
    fn dst(&self) -> SocketAddr {
        self.dst
    }
    fn payload(&self) -> &[u8] {
        &self.payload
    }
    fn dscp(&self) -> Option<u8> {
        self.dscp
    }
    fn received(&self) -> Option<Instant> {
        Some(self.at)
    }
}

/// Bytes counted in a flow's queue and in all queues, given back when dropped.
struct Ticket {
    n: usize,
    flow: Arc<AtomicUsize>,
    all: Arc<AtomicUsize>,
}

impl Ticket {
    /// `n` bytes more, unless the flow's or all queues would then hold more than their
    /// bound.
    fn take(n: usize, flow: &Arc<AtomicUsize>, all: &Arc<AtomicUsize>) -> Option<Ticket> {
        let fits = |bound: usize| move |q: usize| (q + n <= bound).then_some(q + n);
        flow.fetch_update(Ordering::AcqRel, Ordering::Acquire, fits(FLOW_BYTES))
            .ok()?;
        if all
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, fits(QUEUED_BYTES))
            .is_err()
        {
            flow.fetch_sub(n, Ordering::AcqRel);
            return None;
        }
        Some(Ticket {
            n,
            flow: flow.clone(),
            all: all.clone(),
        })
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.flow.fetch_sub(self.n, Ordering::AcqRel);
        self.all.fetch_sub(self.n, Ordering::AcqRel);
    }
}

/// A flow as the table holds it: its queue, and its task to close it.
struct Flow {
    tx: mpsc::Sender<Queued>,
    queued: Arc<AtomicUsize>,
    task: tokio::task::AbortHandle,
}

/// Removes a flow's entry when its task ends, however it ends.
struct Leaving {
    table: Arc<Mutex<Table<Flow>>>,
    peer: SocketAddr,
    gen: u64,
}

impl Drop for Leaving {
    fn drop(&mut self) {
        lock(&self.table).ended(&self.peer, self.gen);
    }
}

/// A DNS query's place among those in flight, given back when it ends.
struct InFlight {
    table: Arc<Mutex<Table<Flow>>>,
    host: IpAddr,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        lock(&self.table).dns_end(self.host);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The gateway's datagram side: DNS always, other datagrams when `carry`.
pub struct Datagrams {
    opts: Arc<ClientOptions>,
    connecting: Arc<Semaphore>,
    metrics: Option<Arc<Metrics>>,
    responder: Arc<Responder>,
    carry: bool,
    lans: Lans,
    table: Arc<Mutex<Table<Flow>>>,
    /// How fast new flows and queries may come ([`super::rates`]).
    limits: Mutex<Limits>,
    queued: Arc<AtomicUsize>,
    pub stats: UdpStats,
}

impl Datagrams {
    pub fn new(
        opts: Arc<ClientOptions>,
        connecting: Arc<Semaphore>,
        metrics: Option<Arc<Metrics>>,
        carry: bool,
        lan: &[String],
        caps: Caps,
    ) -> Datagrams {
        // As many sessions kept as queries may be in flight: reused, not ended and opened
        // anew for each query of a host that asks fast.
        let responder = Arc::new(
            Responder::new(opts.clone(), connecting.clone(), metrics.clone()).keeping(caps.dns),
        );
        Datagrams {
            opts,
            connecting,
            metrics,
            responder,
            carry,
            lans: Lans::new(lan),
            table: Arc::new(Mutex::new(Table::new(caps))),
            limits: Mutex::new(Limits::new(caps.rates)),
            queued: Arc::new(AtomicUsize::new(0)),
            stats: UdpStats::default(),
        }
    }

    /// The caps in force and the peaks reached under them.
    pub fn peaks(&self) -> (Caps, Peaks) {
        let t = lock(&self.table);
        (t.caps(), t.peaks())
    }

    /// New flows and queries refused over their rates.
    pub fn refused(&self) -> Refused {
        lock(&self.limits).refused()
    }

    /// Ends the DNS sessions kept for further queries cleanly.
    pub async fn close(&self, limit: std::time::Duration) {
        self.responder.close(limit).await;
    }

    /// Serves the datagrams arriving on `sock` (a [`tproxy_socket`]) until the task is
    /// dropped. Each datagram costs the same however many flows there are.
    pub async fn serve(self: Arc<Self>, sock: UdpSocket) -> Result<()> {
        let sock = tokio::net::UdpSocket::from_std(sock)?;
        let fd = sock.as_raw_fd();
        let mut buf = vec![0u8; 65535];
        loop {
            let got = sock
                .async_io(tokio::io::Interest::READABLE, || recv_one(fd, &mut buf))
                .await;
            let d = match got {
                Ok(r) => r,
                Err(e) => {
                    log::debug!("gateway datagram: {e}");
                    continue;
                }
            };
            let (peer, dst) = (d.peer, d.dst);
            let iface = match self.lans.check(d.ifindex, peer.ip()) {
                Ok(i) => i,
                Err(e) => {
                    let n = self.stats.off_lan.fetch_add(1, Ordering::Relaxed);
                    // The first, then one in 1000: a forging host must not fill the log.
                    if n.is_multiple_of(1000) {
                        log::warn!(
                            "a datagram from {peer} to {dst} dropped: {e} ({} so far)",
                            n + 1
                        );
                    }
                    continue;
                }
            };
            let payload = &buf[..d.len];
            if dst.port() == 53 {
                self.query(payload, peer, dst, iface);
                continue;
            }
            if !self.carry {
                // The nft rules send only DNS here with --udp block.
                self.stats.dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            self.datagram(payload, d.dscp, d.at, peer, dst, iface);
        }
    }

    /// A DNS query: answered in a task of its own within the caps on queries in flight,
    /// else SERVFAIL at once; over the host's rate, dropped.
    fn query(self: &Arc<Self>, payload: &[u8], peer: SocketAddr, dst: SocketAddr, iface: Arc<str>) {
        // Over the rate: dropped unanswered, the cheapest refusal (a reply costs a socket of
        // its own); a stub resolver asks again, as after a lost datagram.
        if !lock(&self.limits).query(peer.ip()) {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let opening = {
            let mut table = lock(&self.table);
            if table.dns_begin(peer.ip()) {
                // (dns_begin made the host's entry: it has its permits.)
                let o = table.opening(peer.ip());
                if o.is_none() {
                    table.dns_end(peer.ip());
                }
                o
            } else {
                None
            }
        };
        let Some(opening) = opening else {
            // Over a cap: no session, no task; a stub resolver tries again or fails fast.
            if let Ok(q) = dns::check_query(payload) {
                if reply(dst, peer, &iface, &dns::servfail(&q)).is_err() {
                    self.stats.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
            return;
        };
        let slot = InFlight {
            table: self.table.clone(),
            host: peer.ip(),
        };
        let (me, payload) = (self.clone(), payload.to_vec());
        tokio::spawn(async move {
            let _slot = slot;
            if let Some(answer) = me.responder.answer_opening(&payload, Some(&opening)).await {
                match reply(dst, peer, &iface, &answer) {
                    Ok(()) => {
                        me.stats.dns_answered.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => log::warn!("cannot answer {peer} as {dst}: {e}"),
                }
            }
        });
    }

    /// A datagram to carry: queued for its LAN socket's flow, a new flow when it has none
    /// and the host is within its rate of new flows (closing the least recently used one
    /// when a cap is reached).
    fn datagram(
        self: &Arc<Self>,
        payload: &[u8],
        dscp: Option<u8>,
        at: Instant,
        peer: SocketAddr,
        dst: SocketAddr,
        iface: Arc<str>,
    ) {
        let mut table = lock(&self.table);
        let (tx, queued) = match table.get(&peer) {
            Some(f) => (f.tx.clone(), f.queued.clone()),
            // Over the rate of new flows: dropped before any task or session.
            None if !lock(&self.limits).new_flow(peer.ip()) => {
                self.stats.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
            None => {
                let (tx, rx) = mpsc::channel(QUEUE);
                let queued = Arc::new(AtomicUsize::new(0));
                let (gen, closed) = table.insert(peer, |gen, opening| {
                    let leaving = Leaving {
                        table: self.table.clone(),
                        peer,
                        gen,
                    };
                    let task = tokio::spawn(self.clone().flow(peer, iface, rx, leaving, opening));
                    Flow {
                        tx: tx.clone(),
                        queued: queued.clone(),
                        task: task.abort_handle(),
                    }
                });
                if let Some(f) = closed {
                    f.task.abort();
                }
                log::debug!("datagrams of {peer}: flow {gen}");
                (tx, queued)
            }
        };
        drop(table);
        let sent = Ticket::take(payload.len(), &queued, &self.queued).and_then(|t| {
            tx.try_send(Queued {
                dst,
                payload: payload.to_vec(),
                dscp,
                at,
                _bytes: t,
            })
            .ok()
        });
        if sent.is_none() {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// One LAN socket's datagrams in a nena session of their own, the replies back to it
    /// by the LAN interface `iface`.
    async fn flow(
        self: Arc<Self>,
        peer: SocketAddr,
        iface: Arc<str>,
        mut rx: mpsc::Receiver<Queued>,
        _leaving: Leaving,
        opening: Arc<Semaphore>,
    ) {
        let tally = Tally::begin(self.metrics.as_ref());
        let ended = async {
            let permit = opening.acquire_owned().await?;
            let mut session =
                crate::proxy::carry::plane::open_datagrams(&self.opts, &self.connecting, &tally)
                    .await
                    .map_err(|(_, e)| e)?;
            drop(permit);
            // Debug only: a spraying LAN host would otherwise write a line per source port.
            log::debug!(
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
                // One reply socket per source the server hands back (the destinations this
                // flow sent to: the server drops datagrams from anywhere else), the
                // [`REPLY_SOCKETS`] most recently used.
                let mut from: LruCache<SocketAddr, UdpSocket> = LruCache::new(REPLY_SOCKETS);
                while let Some(d) = drx.recv().await {
                    let s = match from.try_get_or_insert(d.addr, || reply_socket(d.addr, &iface)) {
                        Ok(s) => s,
                        Err(e) => {
                            log::warn!("cannot answer {peer} as {}: {e}", d.addr);
                            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                    };
                    s.send_to(&d.payload, peer)?;
                }
                Ok::<_, anyhow::Error>(())
            };
            // The flow ends when the LAN side has been idle (the session is then ended) or
            // the server's side has ended, or when either fails.
            let (carried, ()) =
                tokio::try_join!(async { carrying.await.map_err(anyhow::Error::from) }, down)?;
            tally.paths_used(session.usage_at_end());
            log::debug!("datagrams of {peer}: {}", carried.describe());
            if let Some(p) = &carried.plane {
                tally.datagrams(&p.metrics());
            }
            Ok::<_, anyhow::Error>(())
        };
        if let Err(e) = ended.await {
            log::debug!("datagrams of {peer}: {e:#}");
        }
    }
}

/// The gateway's last line on its bounds: the caps and the peaks reached, flows closed
/// for new ones, queries not carried, datagrams from off-LAN sources.
pub fn log_bounds(d: &Datagrams, tcp: &super::bounds::HostSessions) {
    let (c, p) = d.peaks();
    let (tcp_host, tcp_reset) = tcp.peaks();
    let r = d.refused();
    log::info!(
        "gateway bounds: flows at most {} (cap {}), of one LAN host {} (cap {}), {} closed for \
         new ones, {} refused over the rate ({}/s a host); DNS in flight at most {} (cap {}), of \
         one LAN host {} (cap {}), {} refused, {} over the rate ({}/s a host); TCP of one LAN \
         host at most {} (cap {}), {} reset; off-LAN sources dropped {}",
        p.flows,
        c.flows,
        p.flows_host,
        c.flows_per_host,
        p.evicted,
        r.flows,
        c.rates.flows_per_host,
        p.dns,
        c.dns,
        p.dns_host,
        c.dns_per_host,
        p.dns_refused,
        r.dns,
        c.rates.dns_per_host,
        tcp_host,
        tcp.cap(),
        tcp_reset,
        d.stats.off_lan.load(Ordering::Relaxed),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel stamp becomes the moment of this process's clock it names: 50 ms ago is
    /// at least 50 ms before now (and not seconds); a stamp from the future is now.
    #[test]
    fn a_kernel_stamp_becomes_the_moment_it_names() {
        let since_epoch = |t: std::time::SystemTime| {
            let d = t.duration_since(std::time::UNIX_EPOCH).unwrap();
            nix::sys::time::TimeSpec::from(d)
        };
        let before = std::time::SystemTime::now() - Duration::from_millis(50);
        let at = arrival(&since_epoch(before));
        let age = Instant::now().duration_since(at);
        assert!(age >= Duration::from_millis(50), "{age:?}");
        assert!(age < Duration::from_secs(5), "{age:?}");
        let later = std::time::SystemTime::now() + Duration::from_secs(60);
        assert!(arrival(&since_epoch(later)) <= Instant::now());
    }

    /// As root (TPROXY's IP_TRANSPARENT needs CAP_NET_ADMIN; `make test` runs as root): the
    /// socket holds a burst of [`RCVBUF`] bytes (the kernel reports twice what was set).
    #[test]
    #[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
    fn the_datagram_socket_holds_a_burst() {
        let s = tproxy_socket("127.0.0.1:0".parse().unwrap()).expect("run as root");
        let got = socket::getsockopt(&s, socket::sockopt::RcvBuf).unwrap();
        // Also where net.core.rmem_max is the kernel's default (about 200 KiB).
        assert!(got >= RCVBUF, "SO_RCVBUF {got}");
    }
}
