//! The application and the sink the peers bench moves bytes between, the same for every
//! tunnel. The application, on a thread in the client host (in the LAN host for the
//! gateway, which takes its connection to the sink), connects to the tunnel's entry
//! (a SOCKS5 CONNECT to the sink where the entry is a SOCKS5 proxy), sends an 8-byte length
//! and then that many bytes, and waits for the sink's 8-byte count of what it received; the
//! sink, in the server host, reads the length, then the bytes, and answers with its count.
//! No half-close is needed (stunnel ends a connection on the first EOF). Also: the bytes
//! each interface of a host sent, from its /proc/net/dev.

use anyhow::{bail, Context, Result};
use nena_lab::{Host, Lab};
use std::net::SocketAddrV4;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Bytes per write of the application and per read of the sink.
const CHUNK: usize = 256 * 1024;

/// A server on a thread in a lab host (the sink here; the page bench's web server), serving
/// every connection until dropped.
pub struct Server {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<Result<()>>>>,
}

impl Server {
    /// The sink: listen on `addr` in the server host (a kernel-MPTCP listener: it takes TCP
    /// too) and serve every connection until dropped.
    pub fn sink(lab: &Lab, addr: SocketAddrV4) -> Result<Server> {
        Server::start(lab, addr, "the sink", serve_one)
    }

    /// Listen on `addr` in the server host (kernel MPTCP, which takes TCP too) and run
    /// `serve` on every connection, each a task of one current-thread runtime, until dropped.
    pub fn start<F, Fut>(
        lab: &Lab,
        addr: SocketAddrV4,
        what: &'static str,
        serve: F,
    ) -> Result<Server>
    where
        F: Fn(TcpStream) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<()>> + Send + 'static,
    {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = lab.spawn_in(Host::Server, move || -> Result<()> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async move {
                let std_listener = nena_mptcp::listen(addr.into(), None)
                    .with_context(|| format!("{what} cannot listen on {addr}"));
                let listener = match std_listener {
                    Ok(l) => {
                        l.set_nonblocking(true)?;
                        TcpListener::from_std(l)?
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("{e:#}")));
                        return Err(e);
                    }
                };
                let _ = ready_tx.send(Ok(()));
                let accept = async {
                    loop {
                        let (s, peer) = listener.accept().await?;
                        let one = serve(s);
                        tokio::spawn(async move {
                            if let Err(e) = one.await {
                                log::warn!("{what}: the connection from {peer}: {e:#}");
                            }
                        });
                    }
                };
                tokio::select! {
                    r = accept => r,
                    _ = stopped => Ok(()),
                }
            })
        });
        match ready_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => Ok(Server {
                stop: Some(stop),
                thread: Some(thread),
            }),
            Ok(Err(e)) => bail!("{e}"),
            Err(_) => bail!("{what} did not listen within 10 s"),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn serve_one(mut s: TcpStream) -> Result<()> {
    let want = s.read_u64().await.context("reading the length")?;
    let mut buf = vec![0u8; CHUNK];
    let mut got = 0u64;
    while got < want {
        let n = s.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        got += n as u64;
    }
    s.write_u64(got).await?;
    s.flush().await?;
    Ok(())
}

/// One transfer as the application saw it.
#[derive(Debug, Clone, Copy)]
pub struct Transfer {
    /// From the first payload byte written to the sink's count read.
    pub seconds: f64,
    /// From before the connect to the sink's count read (the tunnel's set-up included).
    pub total_seconds: f64,
}

/// Send `bytes` through the tunnel entry `entry` (a SOCKS5 proxy when `socks`) to the sink
/// at `sink`, on a thread in `host` (the client, or the LAN host behind the gateway, whose
/// entry is the sink itself); fails unless the sink counted them all.
pub fn send(
    lab: &Lab,
    host: Host,
    entry: SocketAddrV4,
    socks: bool,
    sink: SocketAddrV4,
    bytes: u64,
    timeout: Duration,
) -> Result<Transfer> {
    lab.run_in(host, move || -> Result<Transfer> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(async move {
            tokio::time::timeout(timeout, send_in(entry, socks, sink, bytes))
                .await
                .with_context(|| format!("the transfer did not end within {timeout:?}"))?
        })
    })?
}

async fn send_in(
    entry: SocketAddrV4,
    socks: bool,
    sink: SocketAddrV4,
    bytes: u64,
) -> Result<Transfer> {
    let t0 = Instant::now();
    let s = app_connect(entry)
        .await
        .with_context(|| format!("connecting to the tunnel entry {entry}"))?;
    let mut s = if socks {
        crate::sessions::socks_connect_on(s, sink).await?
    } else {
        s.set_nodelay(true)?;
        s
    };
    let chunk = payload_chunk();
    let t1 = Instant::now();
    s.write_u64(bytes).await?;
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        s.write_all(&chunk[..n])
            .await
            .context("sending through the tunnel")?;
        left -= n as u64;
    }
    let got = s
        .read_u64()
        .await
        .context("reading the sink's count (the tunnel closed?)")?;
    let end = Instant::now();
    if got != bytes {
        bail!("the sink received {got} bytes of {bytes}");
    }
    Ok(Transfer {
        seconds: (end - t1).as_secs_f64(),
        total_seconds: (end - t0).as_secs_f64(),
    })
}

/// The application's connection to `entry`, with the congestion control nena's own sockets
/// take in this namespace ([`nena_mptcp::preferred_congestion`]: cubic in place of BBR).
///
/// Why: BBR paces, from a high-resolution timer that fires on the CPU that last sent, about
/// 12,500 times a second here; each firing sends the application's next segments and,
/// across the lab's veth, delivers them into the tunnel's socket, all in that interrupt, on
/// the account of whichever process the CPU was running: often the tunnel's end. On separate
/// machines that work would be the sender's own. In the lab it made a gateway's seal of a
/// record cost 0.18-0.21 s/GB instead of 0.11 (the cycles between two time stamps around each
/// seal: 5% of the seals were interrupted for 25-100 us) and its plain twin's end 0.86-0.94
/// s/GB instead of 0.46-0.60 (docs/benchmarks-log.md, "The floor"), alike for every tunnel.
async fn app_connect(entry: SocketAddrV4) -> Result<TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    let default = std::fs::read_to_string(nena_mptcp::DEFAULT_CONGESTION_CONTROL)?;
    if let Some(cc) = nena_mptcp::preferred_congestion(&default) {
        use std::os::fd::AsFd;
        nena_mptcp::set_congestion(socket.as_fd(), cc)
            .with_context(|| format!("congestion control {cc} for the application"))?;
    }
    Ok(socket.connect(entry.into()).await?)
}

/// A chunk of bytes no cipher or compressor gains anything on.
fn payload_chunk() -> Vec<u8> {
    crate::bytes::incompressible(CHUNK)
}

/// Bytes sent by the interfaces `names` of `host` so far, in that order.
pub fn sent_bytes(lab: &Lab, host: Host, names: &[&str]) -> Result<Vec<u64>> {
    iface_bytes(lab, host, names, tx_bytes)
}

/// Bytes sent and received by the interfaces `names` of `host` so far, in that order.
pub fn moved_bytes(lab: &Lab, host: Host, names: &[&str]) -> Result<Vec<u64>> {
    iface_bytes(lab, host, names, |dev, n| {
        Some(rx_bytes(dev, n)? + tx_bytes(dev, n)?)
    })
}

fn iface_bytes(
    lab: &Lab,
    host: Host,
    names: &[&str],
    count: impl Fn(&str, &str) -> Option<u64>,
) -> Result<Vec<u64>> {
    let dev = lab.run_in(host, || {
        std::fs::read_to_string("/proc/thread-self/net/dev")
    })??;
    names
        .iter()
        .map(|n| count(&dev, n).with_context(|| format!("no interface {n} in the {host:?} host")))
        .collect()
}

/// The transmitted bytes of interface `name` in /proc/net/dev text `dev`.
pub fn tx_bytes(dev: &str, name: &str) -> Option<u64> {
    // rx: bytes packets errs drop fifo frame compressed multicast; then tx: bytes ...
    dev_counter(dev, name, 8)
}

/// The received bytes of interface `name` in /proc/net/dev text `dev`.
pub fn rx_bytes(dev: &str, name: &str) -> Option<u64> {
    dev_counter(dev, name, 0)
}

fn dev_counter(dev: &str, name: &str, field: usize) -> Option<u64> {
    dev.lines().find_map(|l| {
        let (iface, counters) = l.split_once(':')?;
        if iface.trim() != name {
            return None;
        }
        counters.split_whitespace().nth(field)?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tx_bytes_of_an_interface_are_read_from_proc_net_dev() {
        let dev = "Inter-|   Receive                                                |  Transmit\n \
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
lo:    1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0\n\
trusted: 52345678  40000    0    0    0     0          0         0 987654321  70000    0    0    0     0       0          0\n\
untrusted:  2000      20    0    0    0     0          0         0   3000      30    0    0    0     0       0          0\n";
        assert_eq!(tx_bytes(dev, "trusted"), Some(987_654_321));
        assert_eq!(tx_bytes(dev, "untrusted"), Some(3000));
        assert_eq!(tx_bytes(dev, "lo"), Some(1000));
        assert_eq!(rx_bytes(dev, "trusted"), Some(52_345_678));
        assert_eq!(rx_bytes(dev, "untrusted"), Some(2000));
        assert_eq!(tx_bytes(dev, "eth9"), None);
        assert_eq!(
            tx_bytes(dev, "trust"),
            None,
            "a prefix is not the interface"
        );
    }

    #[test]
    fn the_payload_is_not_compressible_and_is_the_same_every_time() {
        let a = payload_chunk();
        assert_eq!(a, payload_chunk());
        let mut seen = [false; 256];
        a.iter().for_each(|b| seen[*b as usize] = true);
        assert!(seen.iter().all(|s| *s), "every byte value occurs");
        assert!(a.windows(2).filter(|w| w[0] == w[1]).count() < CHUNK / 100);
    }

    #[test]
    #[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
    fn the_application_and_the_sink_agree_on_the_count_over_loopback() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = match l.local_addr().unwrap() {
                std::net::SocketAddr::V4(a) => a,
                _ => unreachable!(),
            };
            let server = tokio::spawn(async move {
                let (s, _) = l.accept().await.unwrap();
                serve_one(s).await
            });
            let bytes = 3 * CHUNK as u64 + 17;
            let t = send_in(addr, false, addr, bytes).await.unwrap();
            assert!(t.seconds > 0.0 && t.total_seconds >= t.seconds);
            server.await.unwrap().unwrap();
        });
    }
}
