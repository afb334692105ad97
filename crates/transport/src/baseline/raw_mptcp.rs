//! A raw MPTCP sender and receiver: the plain-MPTCP baseline of `nena bench transfer`.
//!
//! Nothing of nena runs here: an `IPPROTO_MPTCP` socket bound to the client's trusted
//! address (the kernel's path manager adds the other subflows as for any MPTCP
//! connection), zeros written from one static buffer, received bytes counted and dropped.
//! No handshake, no gate, no chunk framing, no pattern fill and no compare. The count is
//! still checked end to end: the receiver sends back how many bytes it got, and the sender
//! fails unless that equals what it wrote.
//!
//! The exchange: the client sends a 26-byte request (direction, byte count or duration,
//! warm-up to omit, whether to wait for the second subflow); the sending end (after that
//! wait, if asked) writes its data and shuts its side down; the receiving end reads to the
//! end, answers with its count (8 bytes, big endian) and closes. Connect, accept and the
//! request are blocking with timeouts; the data moves through tokio (non-blocking, as
//! nena's own I/O), bounded by the run's length plus a timeout, so a dead peer fails the
//! run instead of hanging it.

use anyhow::{bail, Context, Result};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Size of the static buffers (as perf's chunks).
const BUF: usize = 256 * 1024;
/// Bound on every blocking step (connect, accept, a read or a write that makes no progress).
pub const TIMEOUT: Duration = Duration::from_secs(30);
/// How long a sender asked to wait for the second subflow waits at most (then it sends on
/// whatever subflows there are, and the run reports its split as it is).
pub const JOIN_WAIT: Duration = Duration::from_secs(5);

/// Which way the data goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Client to server.
    Up,
    /// Server to client.
    Down,
}

/// How much the sender sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Amount {
    Bytes(u64),
    Time(Duration),
}

/// What the client asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub direction: Direction,
    pub amount: Amount,
    /// Leave the first part of the run out of the goodput (time runs).
    pub omit: Option<Duration>,
    /// The sending end waits (up to [`JOIN_WAIT`], before its first byte and its clock) until
    /// the connection has a second established subflow. The kernel's path manager adds it
    /// only after the first data (the request), from a worker; a rate run that must measure a
    /// multipath connection asks for this, so a host that is slow to run that worker does not
    /// make the run single-path. Runs that time the whole transfer (as an application sees
    /// it) and runs meant to stay single-path do not.
    pub await_join: bool,
}

impl Request {
    const LEN: usize = 26;

    fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[0] = match self.direction {
            Direction::Up => 0,
            Direction::Down => 1,
        };
        let (bytes, millis) = match self.amount {
            Amount::Bytes(n) => (n, 0),
            Amount::Time(d) => (0, d.as_millis() as u64),
        };
        b[1..9].copy_from_slice(&bytes.to_be_bytes());
        b[9..17].copy_from_slice(&millis.to_be_bytes());
        let omit = self.omit.map_or(0, |d| d.as_millis() as u64);
        b[17..25].copy_from_slice(&omit.to_be_bytes());
        b[25] = u8::from(self.await_join);
        b
    }

    fn decode(b: &[u8; Self::LEN]) -> Result<Request> {
        let u = |r: std::ops::Range<usize>| u64::from_be_bytes(b[r].try_into().expect("8 bytes"));
        let direction = match b[0] {
            0 => Direction::Up,
            1 => Direction::Down,
            x => bail!("raw MPTCP request: unknown direction {x:#04x}"),
        };
        let amount = match (u(1..9), u(9..17)) {
            (0, 0) => bail!("raw MPTCP request: neither a byte count nor a duration"),
            (n, 0) => Amount::Bytes(n),
            (0, ms) => Amount::Time(Duration::from_millis(ms)),
            _ => bail!("raw MPTCP request: both a byte count and a duration"),
        };
        let omit = match u(17..25) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        };
        let await_join = match b[25] {
            0 => false,
            1 => true,
            x => bail!("raw MPTCP request: bad wait-for-the-join flag {x:#04x}"),
        };
        Ok(Request {
            direction,
            amount,
            omit,
            await_join,
        })
    }
}

/// What one end did.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Sent {
        /// Bytes written, and confirmed by the receiver's count.
        bytes: u64,
        /// From the first byte written to the receiver's count read.
        seconds: f64,
        /// Goodput in Mbit/s (after the omitted warm-up, if any).
        mbit_s: f64,
        /// Asked to wait for the second subflow ([`Request::await_join`]): whether it had
        /// joined when the first byte went (`false`: [`JOIN_WAIT`] passed). `None`: not asked.
        joined: Option<bool>,
    },
    Received {
        bytes: u64,
    },
}

impl Outcome {
    pub fn bytes(&self) -> u64 {
        match self {
            Outcome::Sent { bytes, .. } | Outcome::Received { bytes } => *bytes,
        }
    }
}

/// Bytes written to a socket and not yet acknowledged (`SIOCOUTQ`; connection level for
/// MPTCP). 0 if it cannot be read.
fn unacked(fd: std::os::fd::RawFd) -> u64 {
    let mut n: libc::c_int = 0;
    // SAFETY: TIOCOUTQ (SIOCOUTQ) writes one int through the pointer it is given.
    let rc = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut n) };
    if rc < 0 {
        0
    } else {
        n.max(0) as u64
    }
}

/// `TCP_NODELAY` as nena's sockets have it (conn.rs), and non-blocking I/O through tokio as
/// nena's: the baseline differs from nena by nena's work only, not by socket options or I/O
/// model (blocking writes on an MPTCP socket measured at about half the goodput here).
fn setup(s: &TcpStream) -> Result<()> {
    s.set_read_timeout(Some(TIMEOUT))?;
    s.set_write_timeout(Some(TIMEOUT))?;
    s.set_nodelay(true)?;
    Ok(())
}

/// Run `f` on the socket, made non-blocking, on a runtime of this thread, bounded by the
/// run's length plus [`TIMEOUT`].
fn exchange<T>(
    s: TcpStream,
    amount: Amount,
    f: impl AsyncFnOnce(&mut tokio::net::TcpStream) -> Result<T>,
) -> Result<T> {
    let limit = TIMEOUT
        + match amount {
            Amount::Time(d) => d,
            Amount::Bytes(_) => Duration::ZERO,
        };
    s.set_nonblocking(true)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let mut t = tokio::net::TcpStream::from_std(s)?;
        match tokio::time::timeout(limit, f(&mut t)).await {
            Ok(r) => r,
            Err(_) => bail!("raw MPTCP: no end within {}s", limit.as_secs()),
        }
    })
}

/// Wait until the MPTCP connection `s` has at least two established subflows, or
/// [`JOIN_WAIT`] has passed (polled every millisecond: the wait is short and happens once per
/// run). Returns whether it has them; a plain-TCP socket has none to wait for.
async fn await_join(s: &tokio::net::TcpStream) -> bool {
    const TCP_ESTABLISHED: u8 = 1;
    let deadline = Instant::now() + JOIN_WAIT;
    loop {
        match nena_mptcp::subflows(std::os::fd::AsFd::as_fd(s)) {
            Ok(v) if v.iter().filter(|f| f.state == TCP_ESTABLISHED).count() >= 2 => return true,
            Ok(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(1)).await
            }
            _ => return false,
        }
    }
}

async fn send(s: &mut tokio::net::TcpStream, req: Request) -> Result<Outcome> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    static ZEROS: [u8; BUF] = [0; BUF];
    let (amount, omit) = (req.amount, req.omit);
    let joined = match req.await_join {
        true => Some(await_join(s).await),
        false => None,
    };
    if joined == Some(false) {
        log::warn!(
            "raw MPTCP: no second subflow within {}s; sending on one",
            JOIN_WAIT.as_secs()
        );
    }
    let start = Instant::now();
    let mut sent = 0u64;
    let mut mark: Option<(f64, u64)> = None;
    loop {
        let n = match amount {
            Amount::Bytes(b) => (b - sent).min(BUF as u64) as usize,
            Amount::Time(d) if start.elapsed() < d => BUF,
            Amount::Time(_) => 0,
        };
        if n == 0 {
            break;
        }
        s.write_all(&ZEROS[..n])
            .await
            .context("raw MPTCP: sending")?;
        sent += n as u64;
        if let (Some(o), None) = (omit, mark) {
            let t = start.elapsed();
            if t >= o {
                mark = Some((t.as_secs_f64(), sent.saturating_sub(unacked(s.as_raw_fd()))));
            }
        }
    }
    s.shutdown().await.context("raw MPTCP: ending the data")?;
    let mut count = [0u8; 8];
    s.read_exact(&mut count)
        .await
        .context("raw MPTCP: reading the receiver's count")?;
    let seconds = start.elapsed().as_secs_f64();
    let got = u64::from_be_bytes(count);
    if got != sent {
        bail!("raw MPTCP: sent {sent} bytes, the receiver counted {got}");
    }
    if omit.is_some() && mark.is_none() {
        bail!("raw MPTCP: the run ended before the omitted warm-up was over");
    }
    Ok(Outcome::Sent {
        bytes: sent,
        seconds,
        mbit_s: crate::app::perf::goodput(sent, seconds, mark),
        joined,
    })
}

async fn receive(s: &mut tokio::net::TcpStream) -> Result<Outcome> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; BUF];
    let mut got = 0u64;
    loop {
        match s.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => got += n as u64,
            Err(e) => return Err(e).context("raw MPTCP: receiving"),
        }
    }
    s.write_all(&got.to_be_bytes())
        .await
        .context("raw MPTCP: sending the count")?;
    Ok(Outcome::Received { bytes: got })
}

/// Wait up to [`TIMEOUT`] for a connection on `l` (poll(2), no busy wait) and serve it.
pub fn serve_one(l: &TcpListener) -> Result<Outcome> {
    let mut p = libc::pollfd {
        fd: l.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let rc = unsafe { libc::poll(&mut p, 1, TIMEOUT.as_millis() as libc::c_int) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error()).context("raw MPTCP: waiting for a client");
    }
    if rc == 0 {
        bail!("raw MPTCP: no client within {}s", TIMEOUT.as_secs());
    }
    let (mut s, _) = l.accept().context("raw MPTCP: accepting")?;
    setup(&s)?;
    let mut req = [0u8; Request::LEN];
    s.read_exact(&mut req)
        .context("raw MPTCP: reading the request")?;
    let req = Request::decode(&req)?;
    exchange(s, req.amount, async |t| match req.direction {
        Direction::Up => receive(t).await,
        Direction::Down => send(t, req).await,
    })
}

/// A connected client socket, with the local end's subflows read before it closes.
pub struct ClientRun {
    pub outcome: Outcome,
    pub subflows: Vec<crate::conn::SubflowBytes>,
}

/// Connect from `local` (an address of the trusted path) to `remote` over MPTCP, with
/// congestion control `congestion` (`None`: the namespace's default), and run `req`. The
/// subflows (payload bytes per local address) are read at the end.
pub fn client(
    local: SocketAddr,
    remote: SocketAddr,
    req: Request,
    congestion: Option<&str>,
) -> Result<ClientRun> {
    let s = nena_mptcp::connect_ungated(local, remote, TIMEOUT, congestion)
        .with_context(|| format!("raw MPTCP: connecting to {remote}"))?;
    if nena_mptcp::is_fallback(std::os::fd::AsFd::as_fd(&s))? {
        bail!("raw MPTCP: the connection to {remote} fell back to plain TCP");
    }
    run_client(s, req)
}

/// The same exchange over one plain TCP connection from `local` (single-path TCP, the
/// study's reference flow). The server end is [`serve_one`] on the same MPTCP listener
/// (an MPTCP listener accepts plain TCP). `subflows` then holds nothing.
pub fn client_tcp(local: SocketAddr, remote: SocketAddr, req: Request) -> Result<ClientRun> {
    use socket2::{Domain, Protocol, SockAddr, Socket, Type};
    let s = Socket::new(
        Domain::for_address(remote),
        Type::STREAM,
        Some(Protocol::TCP),
    )?;
    s.bind(&SockAddr::from(local))
        .with_context(|| format!("TCP: binding {local}"))?;
    s.connect_timeout(&SockAddr::from(remote), TIMEOUT)
        .with_context(|| format!("TCP: connecting to {remote} from {local}"))?;
    run_client(s.into(), req)
}

fn run_client(mut s: TcpStream, req: Request) -> Result<ClientRun> {
    setup(&s)?;
    s.write_all(&req.encode())
        .context("raw MPTCP: sending the request")?;
    exchange(s, req.amount, async |t| {
        let outcome = match req.direction {
            Direction::Up => send(t, req).await?,
            Direction::Down => receive(t).await?,
        };
        let subflows = crate::conn::subflow_bytes(std::os::fd::AsFd::as_fd(&*t));
        Ok(ClientRun { outcome, subflows })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_bad_ones_are_refused() {
        for r in [
            Request {
                direction: Direction::Up,
                amount: Amount::Bytes(12345),
                omit: None,
                await_join: false,
            },
            Request {
                direction: Direction::Down,
                amount: Amount::Time(Duration::from_millis(1500)),
                omit: Some(Duration::from_millis(300)),
                await_join: true,
            },
        ] {
            assert_eq!(Request::decode(&r.encode()).unwrap(), r);
        }
        let mut b = [0u8; Request::LEN];
        assert!(Request::decode(&b).is_err(), "no amount");
        b[8] = 1;
        b[16] = 1;
        assert!(Request::decode(&b).is_err(), "two amounts");
        b[16] = 0;
        b[0] = 7;
        assert!(Request::decode(&b).is_err(), "direction");
        b[0] = 0;
        assert!(Request::decode(&b).is_ok());
        b[25] = 2;
        assert!(Request::decode(&b).is_err(), "the join flag");
    }

    proptest::proptest! {
        /// Any 26 bytes from the network: refused with an error or decoded into a request
        /// that encodes back to the same bytes; never a panic.
        #[test]
        fn any_request_bytes_decode_or_are_refused(b in proptest::array::uniform26(0u8..)) {
            if let Ok(r) = Request::decode(&b) {
                proptest::prop_assert_eq!(r.encode(), b);
            }
        }
    }

    /// Over loopback MPTCP (or fallback, where MPTCP is off: the exchange is the same):
    /// both directions, the count checked, goodput positive.
    #[test]
    fn a_raw_exchange_counts_every_byte_both_ways() {
        let l = match nena_mptcp::listen("127.0.0.1:0".parse().unwrap(), None) {
            Ok(l) => l,
            Err(e) => panic!("MPTCP listen on loopback: {e}"),
        };
        let remote = l.local_addr().unwrap();
        for (direction, amount) in [
            (Direction::Up, Amount::Bytes(3 * BUF as u64 + 17)),
            (Direction::Down, Amount::Bytes(BUF as u64 - 1)),
            (Direction::Up, Amount::Time(Duration::from_millis(200))),
        ] {
            let server = std::thread::scope(|sc| {
                let h = sc.spawn(|| serve_one(&l));
                let c = client(
                    "127.0.0.1:0".parse().unwrap(),
                    remote,
                    Request {
                        direction,
                        amount,
                        omit: None,
                        await_join: false,
                    },
                    None,
                )
                .unwrap();
                let s = h.join().unwrap().unwrap();
                (c.outcome, s)
            });
            let (c, s) = server;
            assert_eq!(c.bytes(), s.bytes(), "{c:?} {s:?}");
            if let Amount::Bytes(n) = amount {
                assert_eq!(c.bytes(), n);
            }
            let sender = if direction == Direction::Up { &c } else { &s };
            match sender {
                Outcome::Sent {
                    mbit_s, seconds, ..
                } => {
                    assert!(*mbit_s > 0.0 && *seconds > 0.0)
                }
                other => panic!("the sender reported {other:?}"),
            }
        }
    }
}
