//! An in-memory network for the real stack, in the manner of quinn's `Pair` over the
//! production endpoints: a [`MemoryNet`] is a [`Dialer`] (what `ClientOptions::dialer`
//! connects with) and hands out [`MemoryListener`]s, [`Acceptor`]s that the servers'
//! production accept loops take (`nena serve`'s [`crate::app::file_server::serve_on`], the
//! proxy server's [`crate::proxy::server::run_server_on`]). Each connection is a pair of
//! pipes whose bytes cross a [`Tap`] of its own, to read, wait for, or alter. Nothing of it
//! needs a socket, a namespace or root; there are no subflows (a session's gate is `None`).
//! The servers' options as the tests start them: [`accept_options`] (a server's handshake) and
//! [`serve_options`] (`nena serve`'s), for a test to change only what it is about.

use super::pair::{in_band_modes, wires, Tap};
use crate::app::file_server::ServeOptions;
use crate::app::files::FileServerConfig;
use crate::app::request::SessionConfig;
use crate::conn::{AcceptOptions, Acceptor, ClientOptions, Connection, DialFuture, Dialed, Dialer};
use crate::ops::access::Limits;
use nena_mptcp::PathPolicy;
use nena_proto::Mode;
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

/// A connection as a memory listener hands it out.
type Incoming = (Connection, SocketAddr);

/// What is done to the tap of the next connection, before its first byte crosses.
type Arm = Box<dyn FnOnce(&Tap) + Send>;

#[derive(Default)]
struct Inner {
    listeners: HashMap<SocketAddr, mpsc::UnboundedSender<Incoming>>,
    /// One per connection, in the order they were dialed.
    taps: Vec<Tap>,
    armed: Option<Arm>,
}

/// The in-memory network: listeners by address, and a dialer that reaches them.
#[derive(Default)]
pub struct MemoryNet {
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for MemoryNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MemoryNet")
    }
}

/// The addresses the in-memory clients dial from (198.18.255.0/24: the lab's range, never
/// on a wire here).
fn client_addr(n: usize) -> SocketAddr {
    SocketAddr::from((
        [198, 18, 255, 1 + (n / 60_000) as u8],
        1024 + (n % 60_000) as u16,
    ))
}

impl MemoryNet {
    pub fn new() -> Arc<MemoryNet> {
        Arc::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A listener on `addr` (the one before it on the same address is replaced).
    pub fn listen(&self, addr: SocketAddr) -> MemoryListener {
        let (tx, rx) = mpsc::unbounded_channel();
        self.lock().listeners.insert(addr, tx);
        MemoryListener {
            addr,
            rx: tokio::sync::Mutex::new(rx),
        }
    }

    /// Closes the listener on `addr`: its accept loop sees the end (as a server stopped by
    /// a signal would) once the connections already dialed were taken; a dial to it is
    /// refused from now on.
    pub fn close(&self, addr: SocketAddr) {
        self.lock().listeners.remove(&addr);
    }

    /// Runs `arm` on the tap of the next connection dialed (only that one), before its first
    /// flight crosses: to alter a byte of a session's opening, say
    /// ([`Tap::flip_write_after`]).
    pub fn on_next_dial(&self, arm: impl FnOnce(&Tap) + Send + 'static) {
        self.lock().armed = Some(Box::new(arm));
    }

    /// The taps of the connections dialed so far, in order.
    pub fn taps(&self) -> Vec<Tap> {
        self.lock().taps.clone()
    }

    /// Client options that reach `remote` over this network, offering `modes` (no path
    /// policy: there are no paths), everything else as `ClientOptions::new` has it.
    pub fn options(self: &Arc<Self>, remote: SocketAddr, modes: Vec<Mode>) -> ClientOptions {
        let policy = PathPolicy {
            trusted: Vec::new(),
            untrusted: Vec::new(),
        };
        let mut o = ClientOptions::new(remote, policy, modes);
        o.dialer = self.clone();
        o
    }
}

impl Dialer for MemoryNet {
    /// A connection to the listener on `opts.remote` (refused as a closed port is when there
    /// is none), the first flight written on it.
    fn dial<'a>(&'a self, opts: &'a ClientOptions, first: &'a [u8]) -> DialFuture<'a> {
        Box::pin(async move {
            let (c_in, mut c_out, s_in, s_out, tap) = wires();
            {
                let mut inner = self.lock();
                let from = client_addr(inner.taps.len());
                let Some(listener) = inner.listeners.get(&opts.remote) else {
                    return Err(crate::Error::from(io::Error::new(
                        io::ErrorKind::ConnectionRefused,
                        format!("nothing listens on {} in memory", opts.remote),
                    ))
                    .into());
                };
                let conn = Connection::Pipe(Box::new(s_in), Box::new(s_out));
                if listener.send((conn, from)).is_err() {
                    return Err(crate::Error::from(io::Error::from(
                        io::ErrorKind::ConnectionRefused,
                    ))
                    .into());
                }
                if let Some(arm) = inner.armed.take() {
                    arm(&tap);
                }
                inner.taps.push(tap);
            }
            c_out.write_all(first).await.map_err(crate::Error::from)?;
            Ok(Dialed {
                reader: crate::conn::ReadHalf::Pipe(Box::new(c_in)),
                writer: crate::conn::WriteHalf::Pipe(Box::new(c_out)),
                gate: None,
            })
        })
    }
}

/// A listener of the in-memory network: an [`Acceptor`] whose connections are pipes.
pub struct MemoryListener {
    addr: SocketAddr,
    rx: tokio::sync::Mutex<mpsc::UnboundedReceiver<Incoming>>,
}

impl Acceptor for MemoryListener {
    type Conn = Connection;
    async fn next(&self) -> Option<io::Result<Incoming>> {
        self.rx.lock().await.recv().await.map(Ok)
    }
    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.addr)
    }
}

/// A server's handshake options in the tests: every in-band mode ([`in_band_modes`]), signed
/// with [`nena_proto::test_server_key`], 10 s for a handshake, a proxy session's buffers
/// ([`crate::stream::PROXY_BUF`]); no fallback, raw, plain, kato-mpc programs or congestion
/// control of its own.
pub fn accept_options() -> AcceptOptions {
    AcceptOptions {
        modes: in_band_modes(),
        allow_fallback: false,
        raw: false,
        handshake_timeout: Duration::from_secs(10),
        buffer: crate::stream::PROXY_BUF,
        mpc: None,
        allow_plain: false,
        congestion: None,
        key: Some(nena_proto::test_server_key()),
        resumption: Some(crate::conn::ServerTickets::default()),
    }
}

/// `nena serve`'s options in the tests: on `listen`, serving `files`, the handshake of
/// [`accept_options`] with a file session's buffers ([`crate::stream::BULK_BUF`]), the
/// default limits, 8 sessions at once, 1 s of grace at a stop, no metrics.
pub fn serve_options(listen: SocketAddr, files: FileServerConfig) -> ServeOptions {
    ServeOptions {
        listen,
        accept: AcceptOptions {
            buffer: crate::stream::BULK_BUF,
            ..accept_options()
        },
        session: SessionConfig {
            files,
            perf_only: false,
            limits: Limits::default(),
        },
        max_sessions: 8,
        grace: Duration::from_secs(1),
        metrics: None,
    }
}
