//! `nena serve`: accept many concurrent MPTCP sessions, run the nena handshake, and serve
//! PUT/GET/PERF requests (see [`crate::app::request`]). Every session is its own task; a
//! semaphore bounds how many run at once (the listen backlog holds the rest).

use crate::app::request::{serve_request, SessionConfig};
use crate::conn::{self, AcceptOptions, Acceptor, Connection};
use crate::error::Result;
use crate::ops::metrics::{Metrics, PathsUsed, Tally};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;

/// A session whose client sends nothing for this long is dropped.
pub const IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// How long a failed session's remaining input is read and dropped before the socket closes.
pub const DRAIN_AFTER_FAILURE: std::time::Duration = std::time::Duration::from_secs(5);

/// Everything `nena serve` needs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub listen: SocketAddr,
    pub accept: AcceptOptions,
    pub session: SessionConfig,
    /// Sessions served at once.
    pub max_sessions: usize,
    /// After SIGTERM/SIGINT, how long the sessions in progress may go on before they are
    /// aborted (an upload is told `server shutting down` and its partial file removed).
    pub grace: std::time::Duration,
    /// Counters for `--metrics` (None: none kept).
    pub metrics: Option<Arc<Metrics>>,
}

/// Serve until SIGINT or SIGTERM (or the future is dropped). `ready` is called with the
/// bound address once the listener is open. On a signal: no new sessions; the running ones
/// get `opts.grace` to finish; then those left are aborted (uploads are told why and their
/// partial files removed) and, [`conn::ABORT_NOTICE`] later, the function returns.
pub async fn serve(opts: ServeOptions, ready: impl FnOnce(SocketAddr)) -> Result<()> {
    conn::raise_nofile_limit();
    let listener = conn::listen(opts.listen, opts.accept.congestion.as_deref())?;
    ready(listener.local_addr()?);
    serve_on(listener, opts).await
}

/// [`serve`] on connections from any acceptor (the in-memory harness's, say): `opts.listen`
/// is not used.
pub async fn serve_on<A>(listener: A, mut opts: ServeOptions) -> Result<()>
where
    A: Acceptor,
    A::Conn: Into<Connection>,
{
    let (switch, signal) = crate::ops::stop::stop_pair();
    opts.session.files.stop = signal;
    let opts = Arc::new(opts);
    let max_sessions = opts.max_sessions;
    let sessions = conn::accept_until_interrupted(&listener, max_sessions, |stream, peer| {
        let opts = opts.clone();
        async move { handle(stream.into(), peer, &opts).await }
    })
    .await?;
    drop(listener);
    sessions.wind_down(opts.grace, &switch).await;
    Ok(())
}

async fn handle(stream: Connection, peer: SocketAddr, opts: &ServeOptions) {
    let tally = Tally::begin(opts.metrics.as_ref());
    let start = std::time::Instant::now();
    let mut c = match conn::accept(stream, peer, &opts.accept).await {
        Ok(c) => c,
        Err(e) => {
            log::warn!("{peer}: {e:#}");
            tally.finish::<()>(&Err(e.handshake()));
            return;
        }
    };
    tally.handshake(start.elapsed(), c.info, c.resumed);
    c.reader.set_idle_timeout(Some(IDLE_TIMEOUT));
    let mode = c.info.map_or("raw".to_string(), |i| i.describe());
    let fd = c.fd().map(|f| f.as_raw_fd());
    // SAFETY: `c` owns the socket and outlives the request that `live` runs the reader beside.
    let live = unsafe { PathsUsed::server_reader(fd) };
    let result = tally
        .live(
            live,
            serve_request(&mut c.reader, &mut c.writer, &opts.session),
        )
        .await;
    let subflows = c.fd().map(conn::subflow_bytes).unwrap_or_default();
    let split = conn::describe_split(&subflows);
    tally.paths_used(PathsUsed::of_server(&subflows, c.fd()));
    tally.finish(&result);
    match result {
        Ok(summary) => {
            log::info!("{peer}: {mode}: {summary}; subflows: [{split}]");
            let _ = c.writer.shutdown().await;
        }
        Err(e) => {
            log::warn!("{peer}: {mode}: {e:#}");
            // Let an answer that explains the failure reach a client that is still sending.
            let _ = c.writer.shutdown().await;
            c.reader.discard(DRAIN_AFTER_FAILURE).await;
        }
    }
}
