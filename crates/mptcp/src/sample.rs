//! Socket samples: every TCP socket of one host that talks to a given port, read through
//! `sock_diag` netlink (what `ss -ti` reads) at a fixed interval, with its `tcp_info`
//! (RTT, cwnd, bytes acknowledged and received, retransmissions) and congestion control.
//! An MPTCP connection's subflows are TCP sockets, so one dump sees every subflow of every
//! connection, whatever program owns them; a single-path TCP flow is one row.
//!
//! [`dump`] is one query (run it on a thread inside the host's namespace);
//! [`Sampler`] repeats it on such a thread until stopped. nena's one TCP_INFO sampler: the
//! scenario runner's per-subflow series and the congestion-control traces both read it.

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_sock_diag::{
    constants::*,
    inet::{nlas::Nla, ExtensionFlags, InetRequest, SocketId, StateFlags},
    SockDiagMessage,
};
use netlink_sys::{protocols::NETLINK_SOCK_DIAG, Socket, SocketAddr as NlAddr};
use serde::{Deserialize, Serialize};
use std::io::{self, Result};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One TCP socket (one subflow) at one instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SocketSample {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    /// TCP state (1 established, ...).
    pub state: u8,
    /// Smoothed RTT and its variation, microseconds.
    pub rtt_us: u32,
    pub rttvar_us: u32,
    /// Congestion window in segments, and the segment size.
    pub cwnd: u32,
    pub mss: u32,
    /// Slow-start threshold in segments; None while it is the initial "infinite" one
    /// (what `ss` leaves out: 0xFFFF or more).
    pub ssthresh: Option<u32>,
    /// Bytes acknowledged by the peer (the kernel counts the SYN as one) / payload bytes
    /// received / sent (retransmissions included).
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub bytes_sent: u64,
    pub total_retrans: u32,
    /// The kernel's delivery-rate estimate, bytes per second.
    pub delivery_rate: u64,
    /// Congestion control in use (e.g. "cubic").
    pub cc: Option<String>,
}

impl SocketSample {
    /// An established socket whose peer listens on `port`: a subflow of the connecting side
    /// (the dump also holds the listening side's ends when both are in one host).
    pub fn is_established_to(&self, port: u16) -> bool {
        self.state == TCP_ESTABLISHED && self.dst.port() == port
    }
}

/// One dump, `t` seconds after the sampler started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub t: f64,
    pub sockets: Vec<SocketSample>,
}

/// Which sockets a dump keeps: those whose local or remote port is `port` (listeners left
/// out), of both families: IPv4 sockets, then IPv6 ones (an MPTCP connection over IPv6 has
/// IPv6 subflows, and IPv4 ones too when its socket is dual stack). An IPv4-mapped address
/// (an IPv4 subflow of an IPv6 socket) is given as the IPv4 address it is.
pub fn dump(port: u16) -> Result<Vec<SocketSample>> {
    let mut out = dump_family(AF_INET, port)?;
    match dump_family(AF_INET6, port) {
        Ok(v6) => out.extend(v6),
        // a kernel without IPv6 has no IPv6 socket to report
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
        Err(e) => return Err(e),
    }
    Ok(out)
}

/// One sock_diag dump of the TCP sockets of one address family.
fn dump_family(family: u8, port: u16) -> Result<Vec<SocketSample>> {
    let mut sock = Socket::new(NETLINK_SOCK_DIAG).map_err(ctx("opening a sock_diag socket"))?;
    sock.bind_auto()
        .map_err(ctx("binding the sock_diag socket"))?;
    sock.connect(&NlAddr::new(0, 0))
        .map_err(ctx("connecting the sock_diag socket"))?;
    let mut hdr = NetlinkHeader::default();
    hdr.flags = NLM_F_REQUEST | NLM_F_DUMP;
    let mut states = StateFlags::all();
    states.remove(StateFlags::LISTEN);
    let mut msg = NetlinkMessage::new(
        hdr,
        SockDiagMessage::InetRequest(InetRequest {
            family,
            protocol: IPPROTO_TCP,
            extensions: ExtensionFlags::INFO | ExtensionFlags::CONG,
            states,
            socket_id: if family == AF_INET6 {
                SocketId::new_v6()
            } else {
                SocketId::new_v4()
            },
        })
        .into(),
    );
    msg.finalize();
    let mut buf = vec![0; msg.buffer_len()];
    msg.serialize(&mut buf[..]);
    sock.send(&buf, 0)
        .map_err(ctx("sending the sock_diag request"))?;

    let mut out = Vec::new();
    let mut rx = vec![0u8; 1 << 16];
    loop {
        let n = sock
            .recv(&mut &mut rx[..], 0)
            .map_err(ctx("reading the sock_diag answer"))?;
        if n == 0 {
            return Err(io::Error::other("sock_diag: the kernel closed the dump"));
        }
        let mut off = 0;
        while off < n {
            let m = <NetlinkMessage<SockDiagMessage>>::deserialize(&rx[off..n]).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("sock_diag: an answer that does not parse: {e}"),
                )
            })?;
            let len = m.header.length as usize;
            match m.payload {
                NetlinkPayload::Done(_) => return Ok(out),
                NetlinkPayload::Error(e) => {
                    return Err(match e.code {
                        Some(c) => io::Error::from_raw_os_error(-c.get()),
                        None => io::Error::other("sock_diag: an acknowledgement instead of a dump"),
                    })
                }
                NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r)) => {
                    let id = &r.header.socket_id;
                    if id.source_port != port && id.destination_port != port {
                    } else if let Some(s) = socket_sample(&r) {
                        out.push(s);
                    }
                }
                _ => {}
            }
            if len == 0 {
                break;
            }
            off += len;
        }
    }
}

fn socket_sample(r: &netlink_packet_sock_diag::inet::InetResponse) -> Option<SocketSample> {
    let id = &r.header.socket_id;
    let mut info = None;
    let mut cc = None;
    for nla in &r.nlas {
        match nla {
            Nla::TcpInfo(i) => info = Some(i.clone()),
            Nla::Congestion(c) => cc = Some(c.clone()),
            _ => {}
        }
    }
    let i = info?;
    Some(SocketSample {
        src: SocketAddr::new(unmapped(id.source_address), id.source_port),
        dst: SocketAddr::new(unmapped(id.destination_address), id.destination_port),
        state: r.header.state,
        rtt_us: i.rtt,
        rttvar_us: i.rttvar,
        cwnd: i.snd_cwnd,
        mss: i.snd_mss,
        ssthresh: (i.snd_ssthresh < 0xFFFF).then_some(i.snd_ssthresh),
        bytes_acked: i.bytes_acked,
        bytes_received: i.bytes_received,
        bytes_sent: i.bytes_sent,
        total_retrans: i.total_retrans,
        delivery_rate: i.delivery_rate,
        cc,
    })
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is; any other address unchanged.
fn unmapped(a: std::net::IpAddr) -> std::net::IpAddr {
    match a {
        std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(a, std::net::IpAddr::V4),
        v4 => v4,
    }
}

/// An error of `what` with the OS error's text after it.
fn ctx(what: &'static str) -> impl FnOnce(io::Error) -> io::Error {
    move |e| io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// The thread of a [`Sampler`]: its outer result is entering the namespace (`E`, whatever
/// the spawner reports), the inner one the sampling.
type SamplerThread<E> = std::thread::JoinHandle<std::result::Result<Result<Vec<Sample>>, E>>;

/// Samples taken on a thread until [`Sampler::stop`].
pub struct Sampler<E> {
    stop: Arc<AtomicBool>,
    thread: Option<SamplerThread<E>>,
}

impl<E: std::fmt::Display> Sampler<E> {
    /// Start sampling sockets of `port` every `interval`; `spawn` runs the loop on a thread
    /// inside the right namespace (`|f| lab.spawn_in(Host::Client, f)`; its outer result
    /// is entering the namespace).
    pub fn start<S>(port: u16, interval: Duration, spawn: S) -> Sampler<E>
    where
        S: FnOnce(Box<dyn FnOnce() -> Result<Vec<Sample>> + Send>) -> SamplerThread<E>,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = spawn(Box::new(move || {
            let t0 = Instant::now();
            let mut samples = Vec::new();
            let mut next = t0;
            while !flag.load(Ordering::Relaxed) {
                let t = t0.elapsed().as_secs_f64();
                samples.push(Sample {
                    t,
                    sockets: dump(port)?,
                });
                next += interval;
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                } else {
                    // Fell behind (a busy host): skip the missed ticks, keep the grid.
                    while next <= now {
                        next += interval;
                    }
                }
            }
            Ok(samples)
        }));
        Sampler {
            stop,
            thread: Some(thread),
        }
    }

    /// Stop and return every sample.
    pub fn stop(mut self) -> Result<Vec<Sample>> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .expect("a running sampler")
            .join()
            .map_err(|_| io::Error::other("the sampler thread panicked"))?
            .map_err(|e| io::Error::other(format!("the sampler's namespace: {e}")))?
    }
}

impl<E> Drop for Sampler<E> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// A loopback TCP connection is seen with its addresses, RTT and the bytes it moved.
    #[test]
    fn a_dump_sees_a_connection_and_its_counters() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (mut s, _) = l.accept().unwrap();
        c.write_all(&[7u8; 100_000]).unwrap();
        let mut got = vec![0u8; 100_000];
        s.read_exact(&mut got).unwrap();
        // The ACKs of the last bytes may still be on their way.
        let f = nena_testkit::wait_for(
            "a client socket with 100000 bytes acknowledged",
            Duration::from_secs(1),
            || {
                dump(port)
                    .unwrap()
                    .into_iter()
                    .find(|x| x.src == c.local_addr().unwrap() && x.bytes_acked >= 100_000)
            },
        );
        assert_eq!(f.dst.port(), port);
        assert_eq!(f.state, 1, "established");
        assert!(f.rtt_us > 0 && f.cwnd > 0, "{f:?}");
        assert!(f.cc.is_some(), "{f:?}");
        // The server's end is there too, with what it received.
        let d = dump(port).unwrap();
        assert!(d
            .iter()
            .any(|x| x.src.port() == port && x.bytes_received == 100_000));
    }

    /// A connection of `client` to a listener on `listen`: the client's socket as a dump
    /// sees it once the peer acknowledged 50,000 bytes (waits on the acknowledgement).
    fn seen(listen: &str, to: SocketAddr) -> (SocketSample, SocketAddr) {
        let l = std::net::TcpListener::bind(listen).unwrap();
        let to = SocketAddr::new(to.ip(), l.local_addr().unwrap().port());
        let mut c = std::net::TcpStream::connect(to).unwrap();
        let (mut s, _) = l.accept().unwrap();
        c.write_all(&[9u8; 50_000]).unwrap();
        let mut got = vec![0u8; 50_000];
        s.read_exact(&mut got).unwrap();
        let port = to.port();
        let f = nena_testkit::wait_for(
            &format!("a client socket to {to} with 50000 bytes acknowledged"),
            Duration::from_secs(2),
            || {
                dump(port)
                    .unwrap()
                    .into_iter()
                    .find(|x| x.is_established_to(port) && x.bytes_acked > 50_000)
            },
        );
        (f, c.local_addr().unwrap())
    }

    /// IPv6 sockets are dumped too, and an IPv4 connection of a dual-stack socket shows its
    /// IPv4 addresses (not the mapped ones).
    #[test]
    fn a_dump_sees_ipv6_and_ipv4_mapped_connections() {
        if std::net::TcpListener::bind("[::1]:0").is_err() {
            eprintln!("no IPv6 loopback here: nothing to check");
            return;
        }
        let (f, local) = seen("[::1]:0", "[::1]:1".parse().unwrap());
        assert_eq!(f.src, local);
        assert!(f.src.is_ipv6() && f.dst.ip() == "::1".parse::<std::net::IpAddr>().unwrap());
        assert!(f.rtt_us > 0 && f.cwnd > 0, "{f:?}");
        // a dual-stack listener reached over IPv4: its accepted socket is IPv6 with mapped
        // addresses; the dump gives them as IPv4
        let l = std::net::TcpListener::bind("[::]:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (mut s, _) = l.accept().unwrap();
        s.write_all(&[5u8; 30_000]).unwrap();
        let mut got = vec![0u8; 30_000];
        c.read_exact(&mut got).unwrap();
        let e = nena_testkit::wait_for(
            "the accepted socket with 30000 bytes acknowledged",
            Duration::from_secs(2),
            || {
                dump(port)
                    .unwrap()
                    .into_iter()
                    .find(|x| x.src.port() == port && x.bytes_acked >= 30_000)
            },
        );
        assert_eq!(e.src, SocketAddr::new("127.0.0.1".parse().unwrap(), port));
        assert_eq!(e.dst, c.local_addr().unwrap());
    }
}
