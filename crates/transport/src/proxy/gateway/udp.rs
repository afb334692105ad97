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
//!   A flow ends after [`IDLE`] without a datagram from the LAN.

use crate::conn::ClientOptions;
use crate::ops::metrics::{Metrics, Tally};
use crate::proxy::carry::relay::{read_datagram, write_datagram, IDLE};
use crate::proxy::carry::responder::Responder;
use crate::proxy::open::open_service;
use crate::wire::Service;
use anyhow::{Context, Result};
use nix::sys::socket::{self, ControlMessageOwned, MsgFlags, SockaddrStorage};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::collections::HashMap;
use std::io::IoSliceMut;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, Semaphore};

/// Datagrams waiting for their flow's session at most; more are dropped, as a router's
/// full queue drops them.
const QUEUE: usize = 256;
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
}

/// A transparent UDP socket on `addr` that reports each datagram's original destination.
pub fn tproxy_socket(addr: SocketAddr) -> Result<UdpSocket> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    s.set_cloexec(true)?;
    s.set_reuse_address(true)?;
    if addr.is_ipv4() {
        s.set_ip_transparent_v4(true)?;
        socket::setsockopt(&s, socket::sockopt::Ipv4OrigDstAddr, &true)?;
    } else {
        s.set_only_v6(true)?;
        s.set_ip_transparent_v6(true)?;
        socket::setsockopt(&s, socket::sockopt::Ipv6OrigDstAddr, &true)?;
    }
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
/// host as if `from` answered.
fn reply_socket(from: SocketAddr) -> std::io::Result<UdpSocket> {
    let s = Socket::new(Domain::for_address(from), Type::DGRAM, Some(Protocol::UDP))?;
    s.set_cloexec(true)?;
    s.set_reuse_address(true)?;
    if from.is_ipv4() {
        s.set_ip_transparent_v4(true)?;
    } else {
        s.set_only_v6(true)?;
        s.set_ip_transparent_v6(true)?;
    }
    s.bind(&SockAddr::from(from))?;
    Ok(s.into())
}

/// Sends `payload` to `to` from `from`.
fn reply(from: SocketAddr, to: SocketAddr, payload: &[u8]) -> std::io::Result<()> {
    reply_socket(from)?.send_to(payload, to).map(|_| ())
}

/// One datagram: its payload length, sender and original destination.
fn recv_one(
    fd: std::os::fd::RawFd,
    buf: &mut [u8],
) -> std::io::Result<(usize, SocketAddr, SocketAddr)> {
    let mut iov = [IoSliceMut::new(buf)];
    let mut cmsg = nix::cmsg_space!(libc::sockaddr_in6);
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
    let mut dst = None;
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
            _ => {}
        }
    }
    let dst = dst.ok_or_else(|| std::io::Error::other("no original destination"))?;
    Ok((msg.bytes, peer, dst))
}

/// The gateway's datagram side: DNS always, other datagrams when `carry`.
pub struct Datagrams {
    opts: Arc<ClientOptions>,
    connecting: Arc<Semaphore>,
    metrics: Option<Arc<Metrics>>,
    responder: Arc<Responder>,
    carry: bool,
    pub stats: UdpStats,
}

impl Datagrams {
    pub fn new(
        opts: Arc<ClientOptions>,
        connecting: Arc<Semaphore>,
        metrics: Option<Arc<Metrics>>,
        carry: bool,
    ) -> Datagrams {
        let responder = Arc::new(Responder::new(
            opts.clone(),
            connecting.clone(),
            metrics.clone(),
        ));
        Datagrams {
            opts,
            connecting,
            metrics,
            responder,
            carry,
            stats: UdpStats::default(),
        }
    }

    /// Ends the DNS sessions kept for further queries cleanly.
    pub async fn close(&self, limit: std::time::Duration) {
        self.responder.close(limit).await;
    }

    /// Serves the datagrams arriving on `sock` (a [`tproxy_socket`]) until the task is
    /// dropped.
    pub async fn serve(self: Arc<Self>, sock: UdpSocket) -> Result<()> {
        let sock = tokio::net::UdpSocket::from_std(sock)?;
        let fd = sock.as_raw_fd();
        let mut flows: HashMap<SocketAddr, mpsc::Sender<(SocketAddr, Vec<u8>)>> = HashMap::new();
        let mut buf = vec![0u8; 65535];
        loop {
            let got = sock
                .async_io(tokio::io::Interest::READABLE, || recv_one(fd, &mut buf))
                .await;
            let (n, peer, dst) = match got {
                Ok(r) => r,
                Err(e) => {
                    log::debug!("gateway datagram: {e}");
                    continue;
                }
            };
            let payload = buf[..n].to_vec();
            if dst.port() == 53 {
                let me = self.clone();
                tokio::spawn(async move {
                    if let Some(answer) = me.responder.answer(&payload).await {
                        match reply(dst, peer, &answer) {
                            Ok(()) => {
                                me.stats.dns_answered.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => log::warn!("cannot answer {peer} as {dst}: {e}"),
                        }
                    }
                });
                continue;
            }
            if !self.carry {
                // The nft rules send only DNS here with --udp block.
                self.stats.dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            flows.retain(|_, tx| !tx.is_closed());
            let tx = flows.entry(peer).or_insert_with(|| {
                let (tx, rx) = mpsc::channel(QUEUE);
                tokio::spawn(self.clone().flow(peer, rx));
                tx
            });
            if tx.try_send((dst, payload)).is_err() {
                self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// One LAN socket's datagrams in a nena session of their own, the replies back to it.
    async fn flow(
        self: Arc<Self>,
        peer: SocketAddr,
        mut rx: mpsc::Receiver<(SocketAddr, Vec<u8>)>,
    ) {
        let tally = Tally::begin(self.metrics.as_ref());
        let ended = async {
            let mut c = open_service(Service::Datagram, &self.opts, &self.connecting, &tally)
                .await
                .map_err(|(_, e)| e)?;
            log::info!("datagrams of {peer}: session open");
            let (reader, writer) = (&mut c.reader, &mut c.writer);
            let up = async {
                while let Ok(Some((dst, payload))) = tokio::time::timeout(IDLE, rx.recv()).await {
                    write_datagram(writer, dst, &payload).await?;
                    self.stats.sent.fetch_add(1, Ordering::Relaxed);
                }
                writer.shutdown().await?;
                Ok::<_, anyhow::Error>(())
            };
            let down = async {
                // One reply socket per source the server hands back (the destinations this
                // flow sent to: the server drops datagrams from anywhere else).
                let mut from: HashMap<SocketAddr, UdpSocket> = HashMap::new();
                while let Some(d) = read_datagram(reader).await? {
                    let s = match from.entry(d.addr) {
                        std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
                        std::collections::hash_map::Entry::Vacant(v) => {
                            match reply_socket(d.addr) {
                                Ok(s) => v.insert(s),
                                Err(e) => {
                                    log::warn!("cannot answer {peer} as {}: {e}", d.addr);
                                    self.stats.dropped.fetch_add(1, Ordering::Relaxed);
                                    continue;
                                }
                            }
                        }
                    };
                    s.send_to(&d.payload, peer)?;
                    self.stats.received.fetch_add(1, Ordering::Relaxed);
                }
                Ok::<_, anyhow::Error>(())
            };
            // The flow ends when the LAN side has been idle (up ends) and the server's side
            // has ended too, or when either fails.
            tokio::try_join!(up, down)?;
            Ok::<_, anyhow::Error>(())
        };
        if let Err(e) = ended.await {
            log::info!("datagrams of {peer}: {e:#}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As root (TPROXY's IP_TRANSPARENT needs CAP_NET_ADMIN; `make test` runs as root): the
    /// socket holds a burst of [`RCVBUF`] bytes (the kernel reports twice what was set).
    #[test]
    fn the_datagram_socket_holds_a_burst() {
        let s = tproxy_socket("127.0.0.1:0".parse().unwrap()).expect("run as root");
        let got = socket::getsockopt(&s, socket::sockopt::RcvBuf).unwrap();
        // Also where net.core.rmem_max is the kernel's default (about 200 KiB).
        assert!(got >= RCVBUF, "SO_RCVBUF {got}");
    }
}
