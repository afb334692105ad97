//! The accept loop of the server and both proxy ends: sessions on tasks of their own, at
//! most so many at once, until SIGINT or SIGTERM, then wound down within a grace period.
//! What it accepts from is an [`Acceptor`]: a kernel listener, or the in-memory harness's.

use crate::error::{Doing, During, Error, Result};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

/// Where connections come from: a kernel listener ([`tokio::net::TcpListener`]: MPTCP for
/// nena sessions, TCP for the applications of a proxy client), or the `testing` module's
/// in-memory listener, whose connections are pipes.
pub trait Acceptor: Send + Sync {
    /// What one accepted connection is.
    type Conn: Send + 'static;
    /// The next connection and its peer's address; `None` once none can come any more (an
    /// in-memory listener whose every dialer is gone).
    fn next(&self) -> impl Future<Output = Option<io::Result<(Self::Conn, SocketAddr)>>> + Send;
    /// The address it listens on.
    fn local_addr(&self) -> io::Result<SocketAddr>;
}

impl Acceptor for tokio::net::TcpListener {
    type Conn = tokio::net::TcpStream;
    async fn next(&self) -> Option<io::Result<(Self::Conn, SocketAddr)>> {
        Some(self.accept().await)
    }
    fn local_addr(&self) -> io::Result<SocketAddr> {
        tokio::net::TcpListener::local_addr(self)
    }
}

/// Accept connections from `listener` until SIGINT (Ctrl-C) or SIGTERM (or until it can
/// give no more), running `session` for each on its own task, with at most `max_sessions`
/// running at once (further connections wait in the listen backlog). An accept error
/// (EMFILE and friends) is logged and retried after a short pause instead of spinning. The
/// server and both proxy ends use this loop. Returns the sessions still running, to wait for
/// ([`AcceptLoop::all_done`]) or to drop.
pub async fn accept_until_interrupted<A, F, Fut>(
    listener: &A,
    max_sessions: usize,
    session: F,
) -> Result<AcceptLoop>
where
    A: Acceptor,
    F: Fn(A::Conn, SocketAddr) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let max = u32::try_from(max_sessions.max(1)).unwrap_or(u32::MAX >> 3);
    let sem = std::sync::Arc::new(tokio::sync::Semaphore::new(max as usize));
    let stop = crate::conn::stop::interrupted();
    tokio::pin!(stop);
    loop {
        // A free slot, then a connection; the signals are watched through both waits (all
        // sessions running must not make the loop deaf to them).
        let next = async {
            let permit = sem
                .clone()
                .acquire_owned()
                .await
                .map_err(|_| Error::Internal("the accept loop's semaphore is closed"))?;
            Ok::<_, Error>((permit, listener.next().await))
        };
        let (permit, accepted) = tokio::select! {
            n = next => n?,
            sig = &mut stop => {
                log::info!("{}; no new sessions", sig.during(Doing::InstallingSignalHandlers)?);
                return Ok(AcceptLoop { sem, max });
            }
        };
        let (stream, peer) = match accepted {
            Some(Ok(x)) => x,
            None => {
                log::info!("the listener is closed; no new sessions");
                return Ok(AcceptLoop { sem, max });
            }
            Some(Err(e)) => {
                log::warn!("accept: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Boxed: the task then holds a pointer, not a second copy of the session's state
        // (an async block keeps a future it captured and the same future being awaited in
        // separate slots, so every wrapping doubled an idle session's memory).
        let fut = Box::pin(session(stream, peer));
        tokio::spawn(async move {
            let _permit = permit;
            fut.await;
        });
    }
}

/// An accept loop once it stopped accepting: the sessions it started, each holding one of
/// `max` permits until it ends, to wait for or wind down.
#[derive(Debug)]
pub struct AcceptLoop {
    sem: std::sync::Arc<tokio::sync::Semaphore>,
    max: u32,
}

impl AcceptLoop {
    /// How many are still running.
    pub fn running(&self) -> usize {
        (self.max as usize).saturating_sub(self.sem.available_permits())
    }

    /// Completes when every session has ended.
    pub async fn all_done(&self) {
        let _ = self.sem.acquire_many(self.max).await;
    }

    /// After the accept loop stopped: the running sessions get `grace` to end (a second
    /// SIGINT/SIGTERM cuts it short); then `switch` tells those left to abort, and they get
    /// [`ABORT_NOTICE`] to do so (tell or reset their peers) before this returns.
    pub async fn wind_down(&self, grace: Duration, switch: &crate::conn::stop::StopSwitch) {
        switch.wind_down();
        if self.running() > 0 {
            log::info!(
                "{} session(s) in progress: {grace:?} to finish",
                self.running()
            );
        }
        let finished = tokio::select! {
            r = tokio::time::timeout(grace, self.all_done()) => r.is_ok(),
            sig = crate::conn::stop::interrupted() => {
                if let Ok(sig) = sig {
                    log::info!("{sig}: not waiting any longer");
                }
                false
            }
        };
        if finished {
            return;
        }
        let after = if grace.is_zero() {
            String::new()
        } else {
            format!(" after the {grace:?} grace period")
        };
        log::warn!(
            "aborting {} session(s) still running{after}",
            self.running()
        );
        switch.stop();
        let _ = tokio::time::timeout(ABORT_NOTICE, self.all_done()).await;
    }
}

/// How long the sessions aborted at the end of a grace period get to tell or reset their
/// peers (`nena serve`: the reply `server shutting down`, or in `aead` the abort record; the
/// proxies: in `aead` the abort record, then a reset) before the
/// server or proxy exits anyway.
pub const ABORT_NOTICE: Duration = Duration::from_millis(500);
