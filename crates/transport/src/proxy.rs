//! `nena proxy`: plain TCP in, nena over MPTCP between two proxies, plain TCP out.
//!
//! ```text
//! app ──TCP──> proxy client ══nena/MPTCP══> proxy server ──TCP──> target
//! ```
//!
//! Each session is one task with one fixed buffer per direction: read, (un)protect in
//! place, write everything, repeat. Nothing is queued, so a slow side slows the other down
//! (back-pressure) and memory is bounded by sessions x 2 x [`PROXY_BUF`]. When one side
//! ends its direction (EOF), the proxy ends the same direction on the other side
//! (half-close) and keeps the other direction going until it ends too. The proxy uses the
//! nena handshake and then raw bytes: no application header.

use crate::conn::{self, AcceptOptions, ClientOptions};
use crate::stream::{SecureReader, SecureWriter};
use anyhow::{Context, Result};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// Buffer of one proxy direction.
pub const PROXY_BUF: usize = 32 * 1024;

/// Plain side -> nena side until EOF, then half-close the nena side.
async fn plain_to_secure<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    mut from: R,
    to: &mut SecureWriter<W>,
) -> std::io::Result<u64> {
    let mut buf = nena_codec::AlignedBuf::new(PROXY_BUF);
    let mut total = 0;
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            to.shutdown().await?;
            return Ok(total);
        }
        to.write_all(&mut buf[..n]).await?;
        total += n as u64;
    }
}

/// Nena side -> plain side until EOF, then half-close the plain side.
async fn secure_to_plain<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    from: &mut SecureReader<R>,
    mut to: W,
) -> std::io::Result<u64> {
    let mut buf = nena_codec::AlignedBuf::new(PROXY_BUF);
    let mut total = 0;
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            to.shutdown().await?;
            return Ok(total);
        }
        to.write_all(&buf[..n]).await?;
        total += n as u64;
    }
}

/// Pump both directions until both ended. Returns (plain->nena bytes, nena->plain bytes).
/// An error in either direction ends the session (both sockets are dropped).
pub async fn bridge<PR, PW, SR, SW>(
    plain_r: PR,
    plain_w: PW,
    sec_r: &mut SecureReader<SR>,
    sec_w: &mut SecureWriter<SW>,
) -> std::io::Result<(u64, u64)>
where
    PR: AsyncRead + Unpin,
    PW: AsyncWrite + Unpin,
    SR: AsyncRead + Unpin,
    SW: AsyncWrite + Unpin,
{
    tokio::try_join!(
        plain_to_secure(plain_r, sec_w),
        secure_to_plain(sec_r, plain_w)
    )
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
}

async fn accept_loop<F, Fut>(
    listener: TcpListener,
    limits: &ProxyLimits,
    stats: Arc<ProxyStats>,
    session: F,
) -> Result<()>
where
    F: Fn(TcpStream, SocketAddr) -> Fut,
    Fut: std::future::Future<Output = Result<(u64, u64)>> + Send + 'static,
{
    conn::accept_until_interrupted(&listener, limits.max_sessions, |stream, peer| {
        let fut = session(stream, peer);
        let stats = stats.clone();
        async move {
            match fut.await {
                Ok((up, down)) => {
                    stats.sessions_ok.fetch_add(1, Ordering::Relaxed);
                    log::info!("{peer}: session done ({up} B in, {down} B out)");
                }
                Err(e) => {
                    stats.sessions_failed.fetch_add(1, Ordering::Relaxed);
                    log::warn!("{peer}: {e:#}");
                }
            }
        }
    })
    .await
}

/// `nena proxy client`: accept plain TCP on `listen`, carry each connection over nena to
/// the proxy server at `opts.remote`.
pub async fn run_client(
    listen: SocketAddr,
    opts: ClientOptions,
    limits: ProxyLimits,
    ready: impl FnOnce(SocketAddr),
) -> Result<()> {
    conn::raise_nofile_limit();
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    ready(listener.local_addr()?);
    let opts = Arc::new(opts);
    let connecting = Arc::new(Semaphore::new(limits.max_connecting.max(1)));
    accept_loop(
        listener,
        &limits,
        Arc::new(ProxyStats::default()),
        move |plain, _peer| {
            let opts = opts.clone();
            let connecting = connecting.clone();
            async move {
                plain.set_nodelay(true)?;
                let slot = connecting.acquire_owned().await?;
                let mut c = conn::connect(&opts, None)
                    .await
                    .context("opening the nena session")?;
                drop(slot);
                let (pr, pw) = plain.into_split();
                Ok(bridge(pr, pw, &mut c.reader, &mut c.writer).await?)
            }
        },
    )
    .await
}

/// `nena proxy server`: accept nena sessions on `listen`, carry each to `forward` over
/// plain TCP.
pub async fn run_server(
    listen: SocketAddr,
    forward: SocketAddr,
    accept: AcceptOptions,
    limits: ProxyLimits,
    ready: impl FnOnce(SocketAddr),
) -> Result<()> {
    conn::raise_nofile_limit();
    let listener = conn::listen(listen)?;
    ready(listener.local_addr()?);
    let accept = Arc::new(accept);
    accept_loop(
        listener,
        &limits,
        Arc::new(ProxyStats::default()),
        move |stream, peer| {
            let accept = accept.clone();
            async move {
                let mut c = conn::accept(stream, peer, &accept).await?;
                let target =
                    tokio::time::timeout(accept.handshake_timeout, TcpStream::connect(forward))
                        .await
                        .map_err(|_| anyhow::anyhow!("connecting to {forward} timed out"))?
                        .with_context(|| format!("cannot connect to {forward}"))?;
                target.set_nodelay(true)?;
                let (tr, tw) = target.into_split();
                let (to_target, from_target) = bridge(tr, tw, &mut c.reader, &mut c.writer).await?;
                Ok((from_target, to_target))
            }
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handshake::secure_pair;

    /// Two proxies' nena halves joined back to back in memory, with kato-like protection
    /// replaced by raw (protection is tested elsewhere); checks both directions and half-close.
    #[tokio::test]
    async fn bridge_carries_both_directions_and_half_close() {
        // app <-> [bridge A] <-> secure link <-> [bridge B] <-> target
        let (app, a_plain) = tokio::io::duplex(4096);
        let (a_sec, b_sec) = tokio::io::duplex(4096);
        let (b_plain, target) = tokio::io::duplex(4096);
        let a = tokio::spawn(async move {
            let (sr, sw) = tokio::io::split(a_sec);
            let (mut r, mut w) = secure_pair(None, Vec::new(), sr, sw);
            let (pr, pw) = tokio::io::split(a_plain);
            bridge(pr, pw, &mut r, &mut w).await.unwrap()
        });
        let b = tokio::spawn(async move {
            let (sr, sw) = tokio::io::split(b_sec);
            let (mut r, mut w) = secure_pair(None, Vec::new(), sr, sw);
            let (pr, pw) = tokio::io::split(b_plain);
            bridge(pr, pw, &mut r, &mut w).await.unwrap()
        });
        // Target: read everything until EOF, then answer with its reverse and close.
        let t = tokio::spawn(async move {
            let (mut tr, mut tw) = tokio::io::split(target);
            let mut got = Vec::new();
            tr.read_to_end(&mut got).await.unwrap();
            let answer: Vec<u8> = got.iter().rev().copied().collect();
            tw.write_all(&answer).await.unwrap();
            tw.shutdown().await.unwrap();
            got.len()
        });
        let (mut ar, mut aw) = tokio::io::split(app);
        let msg: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        aw.write_all(&msg).await.unwrap();
        aw.shutdown().await.unwrap(); // half-close: the answer must still arrive
        let mut back = Vec::new();
        ar.read_to_end(&mut back).await.unwrap();
        let expect: Vec<u8> = msg.iter().rev().copied().collect();
        assert_eq!(back, expect);
        assert_eq!(t.await.unwrap(), msg.len());
        assert_eq!(a.await.unwrap(), (100_000, 100_000));
        assert_eq!(b.await.unwrap(), (100_000, 100_000));
    }
}
