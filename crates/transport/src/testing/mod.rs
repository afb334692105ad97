//! Load helpers for the integration tests (and for trying a proxy by hand): the plain-TCP
//! echo target and payloads of [`crate::baseline::load`], and a client that holds many
//! sessions open at once and checks every byte that comes back. Both create their sockets
//! in the calling thread's network namespace, so a test can run them on a thread inside a
//! lab host. And [`pair`]: a client and a server session joined in memory, for the proxy's
//! sessions tested without sockets or root; [`net`]: an in-memory network that the
//! production clients dial and the production servers accept from, and the servers' options
//! the tests start them with; and [`subflow`], one subflow's counters as a test writes them.

pub mod net;
pub mod pair;

pub use crate::baseline::load::{echo_server, session_payload};

use anyhow::{Context, Result};
use serde::Serialize;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What [`load`] saw.
#[derive(Debug, Clone, Serialize)]
pub struct LoadReport {
    pub sessions: usize,
    /// Sessions whose echo came back byte-exact and complete.
    pub verified: usize,
    pub failed: usize,
    /// Sessions that were connected at the same moment (every connect is done, or has
    /// failed, before any session sends).
    pub concurrent: usize,
    /// Sessions that had carried their whole payload there and back while all of them were
    /// still open (none had half-closed yet).
    pub open_at_once: usize,
    pub seconds: f64,
    /// The first few errors.
    pub errors: Vec<String>,
}

async fn one(
    addr: SocketAddr,
    i: usize,
    len: usize,
    barrier: Arc<tokio::sync::Barrier>,
    open_barrier: Arc<tokio::sync::Barrier>,
    connected: Arc<AtomicUsize>,
    open: Arc<AtomicUsize>,
) -> Result<()> {
    let conn = TcpStream::connect(addr).await;
    if conn.is_ok() {
        connected.fetch_add(1, Ordering::Relaxed);
    }
    barrier.wait().await;
    let s = conn.with_context(|| format!("session {i}: connect"))?;
    let (mut r, mut w) = s.into_split();
    let payload = session_payload(i, len);
    // Phase 1: the whole payload goes through and comes back, the session stays open.
    let writer = w.write_all(&payload);
    let reader = async {
        let mut back = vec![0u8; len];
        r.read_exact(&mut back).await?;
        Ok::<_, std::io::Error>(back)
    };
    let phase1 = tokio::try_join!(writer, reader).with_context(|| format!("session {i}"));
    if matches!(&phase1, Ok(((), back)) if *back == payload) {
        open.fetch_add(1, Ordering::Relaxed);
    }
    // Every session has a working end-to-end path at this point (or failed): all are open
    // at once.
    open_barrier.wait().await;
    let ((), back) = phase1?;
    if back != payload {
        anyhow::bail!("session {i}: echo differs");
    }
    // Phase 2: half-close; the echo side must close too, with nothing extra.
    w.shutdown().await?;
    let mut rest = Vec::new();
    r.read_to_end(&mut rest)
        .await
        .with_context(|| format!("session {i}: after half-close"))?;
    if !rest.is_empty() {
        anyhow::bail!(
            "session {i}: {} unexpected bytes after the echo",
            rest.len()
        );
    }
    Ok(())
}

/// Open `sessions` plain-TCP connections to `addr` at once (every one connected before any
/// sends), send `len` distinct bytes on each and read the echo back while every session stays
/// open (all sessions carry data end to end at the same moment), then half-close each and
/// check that the far side closes with nothing extra. Bounded by `timeout` as a whole.
pub fn load(
    addr: SocketAddr,
    sessions: usize,
    len: usize,
    timeout: Duration,
) -> Result<LoadReport> {
    crate::conn::raise_nofile_limit();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let start = Instant::now();
        let barrier = Arc::new(tokio::sync::Barrier::new(sessions));
        let open_barrier = Arc::new(tokio::sync::Barrier::new(sessions));
        let connected = Arc::new(AtomicUsize::new(0));
        let open = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..sessions)
            .map(|i| {
                tokio::spawn(one(
                    addr,
                    i,
                    len,
                    barrier.clone(),
                    open_barrier.clone(),
                    connected.clone(),
                    open.clone(),
                ))
            })
            .collect();
        let mut verified = 0;
        let mut errors = Vec::new();
        let deadline = tokio::time::Instant::now() + timeout;
        for t in tasks {
            match tokio::time::timeout_at(deadline, t).await {
                Ok(Ok(Ok(()))) => verified += 1,
                Ok(Ok(Err(e))) => errors.push(format!("{e:#}")),
                Ok(Err(e)) => errors.push(format!("task: {e}")),
                Err(_) => errors.push("timed out".into()),
            }
        }
        let failed = sessions - verified;
        errors.truncate(10);
        Ok(LoadReport {
            sessions,
            verified,
            failed,
            concurrent: connected.load(Ordering::Relaxed),
            open_at_once: open.load(Ordering::Relaxed),
            seconds: start.elapsed().as_secs_f64(),
            errors,
        })
    })
}

/// One subflow's counters from `local` to the lab server (198.18.3.2:7000): `acked` bytes
/// acknowledged (sent twice over, as a dropping rate limiter makes of it) and `received`.
pub fn subflow(local: &str, acked: u64, received: u64) -> crate::conn::SubflowBytes {
    crate::conn::SubflowBytes {
        local: Some(local.parse().expect("a socket address")),
        remote: Some("198.18.3.2:7000".parse().expect("a socket address")),
        bytes_sent: acked * 2,
        bytes_acked: acked,
        bytes_received: received,
        rtt_us: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_and_load_on_loopback() {
        let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        // Find a free port first, then serve on it.
        let port = std::net::TcpListener::bind(addr)
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            echo_server(addr, Duration::from_secs(20), move || tx.send(()).unwrap())
        });
        rx.recv_timeout(Duration::from_secs(5)).unwrap();
        let r = load(addr, 50, 10_000, Duration::from_secs(20)).unwrap();
        assert_eq!(r.verified, 50, "{:?}", r.errors);
        assert_eq!(r.open_at_once, 50);
        assert_ne!(session_payload(1, 64), session_payload(2, 64));
    }
}
