//! What both proxy ends share: their limits ([`ProxyLimits`]) and session counters, the
//! accept loop that runs each session as a task of its own and winds them down when the
//! proxy stops, and the log line of a finished session.

use crate::conn;
use crate::error::Result;
use crate::ops::metrics::{Metrics, Outcome, Tally};
use crate::ops::stop::StopSignal;
use crate::wire::AccessToken;
use nena_proto::SessionInfo;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub(crate) fn mode_of(info: Option<SessionInfo>) -> String {
    info.map_or("?".to_string(), |i| i.describe())
}

/// Session counters of a proxy (for logs and tests).
#[derive(Debug, Default)]
pub struct ProxyStats {
    pub sessions_ok: AtomicU64,
    pub sessions_failed: AtomicU64,
}

/// Options shared by both proxy ends.
#[derive(Debug, Clone)]
pub struct ProxyLimits {
    /// Sessions served at once; further connections wait in the listen backlog.
    pub max_sessions: usize,
    /// Client end: nena sessions being opened at once (connect, first flight, handshake).
    /// Opened sessions do not count. This bounds bursts of connects: every connect in
    /// progress watches the kernel's MPTCP path-manager events, which grow with the number
    /// of connects in flight.
    pub max_connecting: usize,
    /// After SIGTERM/SIGINT, how long the sessions in progress may go on; those left are
    /// then reset on both sides (never closed cleanly: a peer must not take a cut stream
    /// for a complete one).
    pub grace: Duration,
    /// Server end: the access token every session must open with (`--token-file`),
    /// checked before anything is resolved or connected. (The client end sends
    /// [`crate::conn::ClientOptions::token`].)
    pub token: Option<AccessToken>,
    /// Counters for `--metrics` (None: none kept).
    pub metrics: Option<Arc<Metrics>>,
    /// Server end: answer offers of the datagram plane on a UDP socket on the listener's
    /// address and port (`--no-datagram-plane` turns it off: every offer is declined).
    pub datagram_plane: bool,
}

/// The log line of a finished proxy session: bytes each way, the mode, and how the nena
/// side's bytes were split across the paths.
pub(crate) fn session_line(
    inbound: u64,
    outbound: u64,
    gone: bool,
    mode: Option<SessionInfo>,
    split: &str,
) -> String {
    format!(
        "session done ({}); mode {}; subflows: {split}",
        bytes_carried(inbound, outbound, gone),
        mode_of(mode)
    )
}

/// The bytes a flow carried each way, and whether its plain side went away early: the
/// middle of [`session_line`], and of the line of each flow of a reused session.
pub(crate) fn bytes_carried(inbound: u64, outbound: u64, gone: bool) -> String {
    format!(
        "{inbound} B in, {outbound} B out{}",
        if gone {
            "; the plain side closed before reading everything"
        } else {
            ""
        }
    )
}

pub(crate) async fn accept_loop<A, F, Fut>(
    listener: A,
    limits: &ProxyLimits,
    stats: Arc<ProxyStats>,
    session: F,
) -> Result<()>
where
    A: conn::Acceptor,
    F: Fn(A::Conn, SocketAddr, StopSignal, Tally) -> Fut,
    Fut: std::future::Future<Output = Result<String, crate::Error>> + Send + 'static,
{
    let (switch, signal) = crate::ops::stop::stop_pair();
    let sessions =
        conn::accept_until_interrupted(&listener, limits.max_sessions, |stream, peer| {
            let tally = Tally::begin(limits.metrics.as_ref());
            // Boxed, as the accept loop boxes this whole future: one copy of the session's
            // state on the heap, not one per async block around it.
            let fut = Box::pin(session(stream, peer, signal.clone(), tally.clone()));
            let stats = stats.clone();
            async move { ended(fut.await, peer, &tally, &stats) }
        })
        .await?;
    drop(listener);
    sessions.wind_down(limits.grace, &switch).await;
    Ok(())
}

/// A proxy session ended: counted in `tally` and `stats`, and its line logged.
pub(crate) fn ended(
    ended: Result<String, crate::Error>,
    peer: SocketAddr,
    tally: &Tally,
    stats: &ProxyStats,
) {
    tally.finish(&ended);
    match ended {
        Ok(summary) => {
            stats.sessions_ok.fetch_add(1, Ordering::Relaxed);
            log::info!("{peer}: {summary}");
        }
        // A session given back unused: not a failure, and not worth a line at info (an idle
        // gateway gives one back every few seconds).
        Err(e) if Outcome::of(&e) == Outcome::Unused => log::debug!("{peer}: {e}"),
        Err(e) => {
            stats.sessions_failed.fetch_add(1, Ordering::Relaxed);
            let line = crate::error::hint::with_fix(&e, format!("{e:#}"));
            log::warn!("{peer}: {line}");
        }
    }
}
