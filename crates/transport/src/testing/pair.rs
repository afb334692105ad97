//! An in-memory pair of a nena client and server session, in the manner of quinn-proto's
//! `Pair`: two ends joined by [`tokio::io::duplex`] pipes, the real nena handshake
//! ([`server_handshake`], [`client_finish_held`]) run over them in any in-band mode, and the
//! sessions' [`SecureReader`]/[`SecureWriter`] halves handed to the test. The bytes from each
//! end cross a [`Tap`]: a test reads what crossed, waits until some did, or flips a byte of
//! the next write in flight.
//!
//! With it, the proxy server's session ([`ProxyServer::serve`], the production
//! `serve_opened` behind `nena proxy server`'s accept) runs without sockets, namespaces or
//! root: its targets are in memory ([`Targets`], a connector that records what it was asked
//! to connect and echoes what it receives), its counters real ([`Metrics`]). The client's
//! side of the opening is [`open`] (the open request the proxy client sends) and of SOCKS
//! [`socks_front`] (the proxy client's SOCKS exchange, then the relay).

use crate::conn::halves::SessionSocket;
use crate::conn::ServerConn;
use crate::ops::metrics::{Metrics, Tally};
use crate::ops::stop::StopSignal;
use crate::proxy::bridge::{bridge, Bridged, Ending};
use crate::proxy::ends::ShuttingDown;
use crate::proxy::listen::{ended, ProxyStats};
use crate::proxy::server::{serve_opened, Connector, Egress};
use crate::proxy::socks::{self, Command, Rep, Target, Users};
use crate::stream::handshake::{client_finish_held, entropy, secure_pair_with, server_handshake};
use crate::stream::{SecureReader, SecureWriter, PROXY_BUF};
use crate::wire::{AccessToken, ConnectReply, ConnectRequest, Service};
use anyhow::{anyhow, Context, Result};
use nena_proto::{ClientConfig, ClientHandshake, Mode, ServerConfig};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Room of each pipe of the pair: whole records are written at once.
const PIPE: usize = 1 << 20;

/// The in-band modes (kato-mpc is negotiated on the SYN, by the kernel: not in memory).
pub fn in_band_modes() -> Vec<Mode> {
    Mode::ALL
        .iter()
        .copied()
        .filter(|m| *m != Mode::KatoMpc)
        .collect()
}

/// A direction of the pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// From the client to the server.
    ToServer,
    /// From the server to the client.
    ToClient,
}

#[derive(Debug, Default)]
struct Side {
    crossed: Vec<u8>,
    /// Flip (XOR `mask`) a byte of the next write ...
    flip: Option<Flip>,
    /// ... that begins once this many bytes crossed.
    flip_from: u64,
    flipped: Option<u64>,
    /// Writes that begin once this many bytes crossed wait ([`Tap::hold_after`]) ...
    hold_from: Option<u64>,
    /// ... these writers, until [`Tap::release`].
    held: Vec<std::task::Waker>,
}

/// Where in a write a byte is flipped, and how.
#[derive(Debug, Clone, Copy)]
struct Flip {
    /// This far from its end (`true`), or from its start.
    from_end: bool,
    at: usize,
    mask: u8,
}

impl Flip {
    /// The index in a write of `len` bytes, if it has the byte.
    fn index(&self, len: usize) -> Option<usize> {
        match self.from_end {
            true => (self.at >= 1 && self.at <= len).then(|| len - self.at),
            false => (self.at < len).then_some(self.at),
        }
    }
}

/// What crosses the pair's wire, each direction: read it, wait for it, alter it.
#[derive(Debug, Clone)]
pub struct Tap {
    sides: Arc<Mutex<[Side; 2]>>,
    counts: Arc<[watch::Sender<u64>; 2]>,
}

impl Tap {
    fn new() -> Tap {
        Tap {
            sides: Arc::default(),
            counts: Arc::new([watch::channel(0).0, watch::channel(0).0]),
        }
    }

    fn with<T>(&self, dir: Dir, f: impl FnOnce(&mut Side) -> T) -> T {
        let mut s = self.sides.lock().expect("the tap's lock");
        f(&mut s[dir as usize])
    }

    /// Every byte that crossed in `dir` so far (as it crossed: altered where it was).
    pub fn crossed(&self, dir: Dir) -> Vec<u8> {
        self.with(dir, |s| s.crossed.clone())
    }

    /// How many bytes crossed in `dir`.
    pub fn len(&self, dir: Dir) -> u64 {
        *self.counts[dir as usize].borrow()
    }

    /// Whether nothing crossed in either direction.
    pub fn is_empty(&self) -> bool {
        self.len(Dir::ToServer) == 0 && self.len(Dir::ToClient) == 0
    }

    /// Waits until at least `n` bytes crossed in `dir`.
    pub async fn crossed_at_least(&self, dir: Dir, n: u64) {
        let mut rx = self.counts[dir as usize].subscribe();
        let _ = rx.wait_for(|c| *c >= n).await;
    }

    /// Flips one bit of the byte `from_end` bytes before the end of the next write in `dir`
    /// (`1`: its last byte; a record's tag in `aead`).
    pub fn flip_next_write(&self, dir: Dir, from_end: usize) {
        let flip = Flip {
            from_end: true,
            at: from_end.max(1),
            mask: 0x01,
        };
        self.with(dir, |s| {
            s.flip = Some(flip);
            s.flip_from = 0;
        });
    }

    /// XORs `mask` into byte `at` (from its start) of the first write in `dir` that begins
    /// once at least `after` bytes crossed and is long enough (`after` 1: the write after a
    /// first flight written whole), as `nena lab tamper --skip-bytes --offset --mask` does to
    /// a segment.
    pub fn flip_write_after(&self, dir: Dir, after: u64, at: usize, mask: u8) {
        let flip = Flip {
            from_end: false,
            at,
            mask,
        };
        self.with(dir, |s| {
            s.flip = Some(flip);
            s.flip_from = after;
        });
    }

    /// The offset in `dir`'s stream of the byte that was flipped, once it was.
    pub fn flipped(&self, dir: Dir) -> Option<u64> {
        self.with(dir, |s| s.flipped)
    }

    /// Holds `dir`: a write that begins once at least `after` bytes crossed waits until
    /// [`Tap::release`] (a transfer paused in the middle, as on a slow link, for a test to
    /// act while it is under way).
    pub fn hold_after(&self, dir: Dir, after: u64) {
        self.with(dir, |s| s.hold_from = Some(after));
    }

    /// Lets `dir`'s writes go on (the held ones included).
    pub fn release(&self, dir: Dir) {
        let held = self.with(dir, |s| {
            s.hold_from = None;
            std::mem::take(&mut s.held)
        });
        held.into_iter().for_each(std::task::Waker::wake);
    }
}

/// One end's writing half of the pair: its bytes cross the [`Tap`].
#[derive(Debug)]
pub struct Tapped {
    inner: DuplexStream,
    dir: Dir,
    tap: Tap,
}

impl AsyncWrite for Tapped {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let (dir, tap) = (self.dir, self.tap.clone());
        let held = tap.with(dir, |s| {
            let held = s.hold_from.is_some_and(|h| s.crossed.len() as u64 >= h);
            if held {
                s.held.push(cx.waker().clone());
            }
            held
        });
        if held {
            return Poll::Pending;
        }
        let flip = tap.with(dir, |s| {
            s.flip
                .filter(|_| s.crossed.len() as u64 >= s.flip_from)
                .and_then(|f| Some((f.index(buf.len())?, f.mask)))
        });
        let mut altered;
        let out = match flip {
            Some((i, mask)) => {
                altered = buf.to_vec();
                altered[i] ^= mask;
                &altered[..]
            }
            None => buf,
        };
        let n = std::task::ready!(Pin::new(&mut self.inner).poll_write(cx, out))?;
        tap.with(dir, |s| {
            if let Some((i, _)) = flip {
                if i < n {
                    s.flip = None;
                    s.flipped = Some(s.crossed.len() as u64 + i as u64);
                }
            }
            s.crossed.extend_from_slice(&out[..n]);
        });
        tap.counts[dir as usize].send_modify(|c| *c += n as u64);
        Poll::Ready(Ok(n))
    }
    fn poll_flush(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// In memory: no subflows to count, and a reset is the pipe's end.
impl SessionSocket for Tapped {
    fn socket_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }
    fn reset(self) {}
}

/// The client's end of a pair.
pub struct ClientEnd {
    pub reader: SecureReader<DuplexStream>,
    /// In the crypto modes the key confirmation is in its buffer, and leaves with the first
    /// record (as `conn::connect` leaves it).
    pub writer: SecureWriter<Tapped>,
}

/// A client and a server session joined in memory.
pub struct Pair {
    pub client: ClientEnd,
    /// The server's end, as the proxy server's accept hands it on.
    pub server: ServerConn<DuplexStream, Tapped>,
    pub tap: Tap,
}

/// The client's address the server's end reports.
pub const CLIENT_ADDR: &str = "192.0.2.7:40000";

/// The two pipes of a pair and its tap: (client's reader, client's writer, server's reader,
/// server's writer).
pub fn wires() -> (DuplexStream, Tapped, DuplexStream, Tapped, Tap) {
    let tap = Tap::new();
    let (c_out, s_in) = tokio::io::duplex(PIPE);
    let (s_out, c_in) = tokio::io::duplex(PIPE);
    let cw = Tapped {
        inner: c_out,
        dir: Dir::ToServer,
        tap: tap.clone(),
    };
    let sw = Tapped {
        inner: s_out,
        dir: Dir::ToClient,
        tap: tap.clone(),
    };
    (c_in, cw, s_in, sw, tap)
}

/// A client and a server session in `mode`, after the real nena handshake: the client
/// offers `mode` alone (as `conn::connect` builds its hello), the server accepts it with a
/// server key ([`nena_proto::test_server_key`]), both within `timeout`.
pub async fn pair(mode: Mode) -> Result<Pair> {
    let timeout = Duration::from_secs(10);
    let (mut cr, mut cw, mut sr, mut sw, tap) = wires();
    let cfg = ServerConfig::accepting(&[mode]).with_key(nena_proto::test_server_key());
    let server = async {
        let (session, leftover) = server_handshake(&cfg, &mut sr, &mut sw, timeout).await?;
        Ok::<_, anyhow::Error>((session, leftover))
    };
    let client = async {
        let mut hs = ClientHandshake::new(&ClientConfig::offering(&[mode]), entropy()?)
            .map_err(|e| anyhow!("{e}"))?;
        cw.write_all(hs.first_flight())
            .await
            .context("writing the first flight")?;
        client_finish_held(&mut hs, &mut cr, timeout).await
    };
    let (server, client) = tokio::join!(server, client);
    let (ss, sleft) = server.context("the server's handshake")?;
    let (cs, cleft, confirm) = client.context("the client's handshake")?;
    let info = Some(ss.info());
    let (reader, mut writer) = secure_pair_with(Some(cs), cleft, cr, cw, PROXY_BUF);
    writer.queue_raw(&confirm);
    let (sreader, swriter) = secure_pair_with(Some(ss), sleft, sr, sw, PROXY_BUF);
    Ok(Pair {
        client: ClientEnd { reader, writer },
        server: ServerConn {
            reader: sreader,
            writer: swriter,
            info,
            peer: CLIENT_ADDR.parse().expect("an address"),
            mpc: None,
            dgram: None,
            resumed: false,
        },
        tap,
    })
}

/// The proxy client's side of a session's opening: the open request (for `target`, or the
/// `--forward` target with `None`; with `token`), tagged as the proxy client tags it, then
/// the server's reply.
pub async fn open(
    c: &mut ClientEnd,
    target: Option<Target>,
    token: Option<AccessToken>,
) -> crate::Result<ConnectReply> {
    let req = ConnectRequest {
        target,
        token,
        service: Service::Stream,
        plane: None,
        reuse: false,
    };
    open_request(c, req).await
}

/// [`open`] with any open request (a DNS or datagram session's, say).
pub async fn open_request(c: &mut ClientEnd, req: ConnectRequest) -> crate::Result<ConnectReply> {
    let req = req.encode_tagged(c.writer.app_mac_key());
    c.writer.write_all(&req).await?;
    c.writer.flush().await?;
    Ok(c.reader.read_connect_reply().await?)
}

/// One connection a [`Targets`] made: where to, and (once it ended) every byte it received.
pub struct TargetConn {
    pub addr: SocketAddr,
    /// The echo's task: every byte received, once its peer ended its direction.
    pub received: JoinHandle<Vec<u8>>,
}

/// In-memory targets for the proxy server: every connection is recorded and served by an
/// echo that keeps what it received (its direction is ended once the proxy ended its own);
/// addresses in `refuse` are refused as a closed port is. DNS sessions ask `resolver` (a
/// test's own, on loopback; `None`: the host's, as the proxy server does).
#[derive(Clone, Default)]
pub struct Targets {
    conns: Arc<Mutex<Vec<TargetConn>>>,
    pub refuse: Vec<SocketAddr>,
    pub resolver: Option<SocketAddr>,
    /// Instead of echoing, each connection reads until its peer's end, then answers
    /// `got N bytes` and ends its own direction (a target that sends nothing before the
    /// client's end).
    pub answer_count: bool,
}

impl Targets {
    /// The addresses connected so far, in order.
    pub fn connected(&self) -> Vec<SocketAddr> {
        self.conns
            .lock()
            .expect("the targets' lock")
            .iter()
            .map(|c| c.addr)
            .collect()
    }

    /// The connections made so far (taken: a second call returns the later ones).
    pub fn take(&self) -> Vec<TargetConn> {
        std::mem::take(&mut *self.conns.lock().expect("the targets' lock"))
    }
}

impl Connector for Targets {
    type Stream = DuplexStream;
    fn connect(&self, addr: SocketAddr) -> impl Future<Output = io::Result<DuplexStream>> + Send {
        let refused = self.refuse.contains(&addr);
        let answer_count = self.answer_count;
        let conns = self.conns.clone();
        async move {
            if refused {
                return Err(io::Error::from(io::ErrorKind::ConnectionRefused));
            }
            let (ours, theirs) = tokio::io::duplex(PIPE);
            let received = tokio::spawn(async move {
                use tokio::io::AsyncReadExt;
                let (mut r, mut w) = tokio::io::split(theirs);
                let mut got = Vec::new();
                let mut buf = vec![0u8; 16 * 1024];
                loop {
                    match r.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            got.extend_from_slice(&buf[..n]);
                            if !answer_count && w.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                    }
                }
                if answer_count {
                    let _ = w
                        .write_all(format!("got {} bytes", got.len()).as_bytes())
                        .await;
                }
                let _ = w.shutdown().await;
                got
            });
            conns
                .lock()
                .expect("the targets' lock")
                .push(TargetConn { addr, received });
            Ok(ours)
        }
    }
    /// [`bridge`] over the pipe; on a failure the pipe is dropped (its end is the closest to
    /// a reset that a pipe has).
    async fn relay<SR, SW>(
        &self,
        target: DuplexStream,
        sec_r: &mut SecureReader<SR>,
        sec_w: &mut SecureWriter<SW>,
        ending: Ending,
        stop: &StopSignal,
    ) -> io::Result<Bridged>
    where
        SR: AsyncRead + Unpin + Send,
        SW: AsyncWrite + Unpin + Send,
    {
        let (mut pr, mut pw) = tokio::io::split(target);
        tokio::select! {
            r = bridge(&mut pr, &mut pw, sec_r, sec_w, ending) => r,
            _ = stop.stopped() => Err(io::Error::other(ShuttingDown)),
        }
    }
    fn resolver(&self) -> crate::Result<crate::proxy::carry::resolver::Upstream> {
        match self.resolver {
            Some(nameserver) => Ok(crate::proxy::carry::resolver::Upstream {
                nameserver,
                timeout: crate::dns::QUERY_TIMEOUT,
            }),
            None => crate::proxy::carry::resolver::Upstream::system(),
        }
    }
}

/// A proxy server's session setup, as `nena proxy server` has it after its accept.
pub struct ProxyServer {
    pub egress: Egress,
    /// `--token-file`.
    pub token: Option<AccessToken>,
    /// The handshake timeout, which bounds the wait for the open request and the connects.
    pub limit: Duration,
    pub targets: Targets,
    pub metrics: Arc<Metrics>,
    pub stats: Arc<ProxyStats>,
}

impl ProxyServer {
    /// A proxy server with `egress`, no token, a 10 s limit, in-memory targets, and counters.
    pub fn new(egress: Egress) -> ProxyServer {
        ProxyServer {
            egress,
            token: None,
            limit: Duration::from_secs(10),
            targets: Targets::default(),
            metrics: Metrics::new(crate::ops::metrics::Role::ProxyServer),
            stats: Arc::default(),
        }
    }

    /// Serves one session whose handshake is done, as the proxy server's accept loop does
    /// (its tally begun, the handshake's mode noted, the end counted and logged). Returns
    /// the session's line, or its error as the log prints it.
    pub async fn serve(
        &self,
        s: ServerConn<DuplexStream, Tapped>,
        stop: StopSignal,
    ) -> std::result::Result<String, String> {
        let tally = Tally::begin(Some(&self.metrics));
        tally.handshake(Duration::ZERO, s.info, s.resumed);
        let peer = s.peer;
        let result = serve_opened(
            s,
            &self.egress,
            self.token.as_ref(),
            &crate::proxy::server::PlaneSetting::default(),
            self.limit,
            &self.targets,
            stop,
            &tally,
        )
        .await;
        let shown = match &result {
            Ok(line) => Ok(line.clone()),
            Err(e) => Err(format!("{e:#}")),
        };
        ended(result, peer, &tally, &self.stats);
        shown
    }

    /// The value of the counter `name` (as `--metrics` serves it, e.g.
    /// `nena_refusals_total{role="proxy_server",cause="access_denied"}`); 0 when absent.
    pub fn counter(&self, name: &str) -> u64 {
        let text = self.metrics.encode();
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map_or(0, |v| v as u64)
    }
}

/// The proxy client's SOCKS side of one application connection over a pair's client end:
/// the SOCKS exchange (the proxy client's own), the open request for the destination, the
/// reply passed on as a SOCKS reply, then the relay. What the proxy client's SOCKS session
/// does, with the session already open in memory instead of over MPTCP.
pub async fn socks_front<A: AsyncRead + AsyncWrite + Unpin + Send>(
    mut app: A,
    users: Option<Users>,
    mut c: ClientEnd,
    token: Option<AccessToken>,
) -> Result<Bridged> {
    let (target, command, leftover) = crate::proxy::client::socks_accept(&mut app, users).await?;
    if command != Command::Connect {
        anyhow::bail!("only CONNECT in memory");
    }
    let reply = open(&mut c, Some(target), token).await?;
    if reply.code != Rep::Succeeded {
        let _ = app.write_all(&socks::reply(reply.code, None)).await;
        return Err(crate::proxy::ends::Refused(reply).into());
    }
    app.write_all(&socks::reply(Rep::Succeeded, None)).await?;
    if !leftover.is_empty() {
        c.writer.write_all(&leftover).await?;
    }
    let (pr, pw) = tokio::io::split(app);
    Ok(bridge(pr, pw, &mut c.reader, &mut c.writer, Ending::Session).await?)
}
