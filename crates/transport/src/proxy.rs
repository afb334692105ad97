//! `nena proxy`: plain TCP in, nena over MPTCP between two proxies, plain TCP out.
//!
//! ```text
//! app ──TCP──> proxy client ══nena/MPTCP══> proxy server ──TCP──> target
//! ```
//!
//! Each session is one task relaying both directions at once (copy_bidirectional style,
//! through the session's own zero-copy pumps [`copy_in`] and [`copy_out`]): nothing is
//! queued beyond the session's buffers, so a slow side slows the other down (back-pressure)
//! and memory is bounded by sessions x 2 x [`PROXY_BUF`]. When one side ends its direction
//! cleanly, the proxy ends the same direction on the other side (half-close; in `aead` mode
//! with the closing record) and keeps the other direction going until it ends too. When the
//! nena side fails (an integrity failure, a truncated `aead` stream), the plain side is
//! **reset**, not closed, so that the application sees an error instead of a short but
//! seemingly complete stream. The proxy uses the nena handshake and then raw bytes: no
//! application header.

use crate::conn::{self, AcceptOptions, ClientOptions};
use crate::stream::{copy_in, copy_out, SecureReader, SecureWriter, PROXY_BUF};
use anyhow::{Context, Result};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// Relays both directions between a plain stream and a nena session until both ended.
/// Returns (plain->nena bytes, nena->plain bytes). An error in either direction ends the
/// session; [`relay`] also resets the plain TCP side then.
pub async fn bridge<PR, PW, SR, SW>(
    mut plain_r: PR,
    mut plain_w: PW,
    sec_r: &mut SecureReader<SR>,
    sec_w: &mut SecureWriter<SW>,
) -> std::io::Result<(u64, u64)>
where
    PR: AsyncRead + Unpin,
    PW: AsyncWrite + Unpin,
    SR: AsyncRead + Unpin,
    SW: AsyncWrite + Unpin,
{
    let up = async {
        let n = copy_in(&mut plain_r, sec_w, u64::MAX, |_| {}).await?;
        sec_w.shutdown().await?;
        Ok::<_, std::io::Error>(n)
    };
    let down = async {
        let n = copy_out(sec_r, &mut plain_w, u64::MAX, |_| {}).await?;
        plain_w.shutdown().await?;
        Ok::<_, std::io::Error>(n)
    };
    tokio::try_join!(up, down)
}

/// [`bridge`] over a plain TCP connection: on failure the TCP side is reset (RST).
async fn relay<SR, SW>(
    plain: TcpStream,
    sec_r: &mut SecureReader<SR>,
    sec_w: &mut SecureWriter<SW>,
) -> std::io::Result<(u64, u64)>
where
    SR: AsyncRead + Unpin,
    SW: AsyncWrite + Unpin,
{
    plain.set_nodelay(true)?;
    let (mut pr, mut pw) = plain.into_split();
    let result = bridge(&mut pr, &mut pw, sec_r, sec_w).await;
    if result.is_err() {
        // SO_LINGER 0, then close the socket whole: a reset, which the application reads as
        // an error. (Dropping the write half alone would send a FIN first: a clean end.)
        if let Ok(tcp) = pr.reunite(pw) {
            let _ = tcp.set_zero_linger();
        }
    }
    result
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
    let opts = Arc::new(ClientOptions {
        buffer: PROXY_BUF,
        ..opts
    });
    let connecting = Arc::new(Semaphore::new(limits.max_connecting.max(1)));
    accept_loop(
        listener,
        &limits,
        Arc::new(ProxyStats::default()),
        move |plain, _peer| {
            let opts = opts.clone();
            let connecting = connecting.clone();
            async move {
                let slot = connecting.acquire_owned().await?;
                let mut c = conn::connect(&opts, None)
                    .await
                    .context("opening the nena session")?;
                drop(slot);
                if let Some(i) = c.info {
                    log::info!("session to {}: mode {i}", opts.remote);
                }
                Ok(relay(plain, &mut c.reader, &mut c.writer).await?)
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
    let accept = Arc::new(AcceptOptions {
        buffer: PROXY_BUF,
        ..accept
    });
    accept_loop(
        listener,
        &limits,
        Arc::new(ProxyStats::default()),
        move |stream, peer| {
            let accept = accept.clone();
            async move {
                let mut c = conn::accept(stream, peer, &accept).await?;
                if let Some(i) = c.info {
                    log::info!("{peer}: mode {i}");
                }
                let target =
                    tokio::time::timeout(accept.handshake_timeout, TcpStream::connect(forward))
                        .await
                        .map_err(|_| anyhow::anyhow!("connecting to {forward} timed out"))?
                        .with_context(|| format!("cannot connect to {forward}"))?;
                let (to_target, from_target) = relay(target, &mut c.reader, &mut c.writer).await?;
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
    #[allow(unused_imports)]
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

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

    /// A nena side that ends without its closing record (a forged FIN on the way) must not
    /// look like a clean end to the application: the proxy resets the TCP connection.
    #[tokio::test]
    async fn a_truncated_aead_stream_resets_the_plain_side() {
        let nena_proto::Exchange {
            client: cs,
            server: ss,
            confirm,
            ..
        } = nena_proto::exchange_in(nena_proto::Mode::Aead);
        // The proxy's nena side: the client's records arrive, then the stream just ends.
        let (mut peer, ours) = tokio::io::duplex(1 << 16);
        let (_unused, peer_w) = tokio::io::duplex(16);
        peer.write_all(&confirm).await.unwrap();
        let mut w = crate::stream::SecureWriter::new(peer, Some(cs.split().0));
        w.write_all(b"first part of the answer").await.unwrap();
        w.flush().await.unwrap();
        drop(w); // no closing record
        let (sr, _) = tokio::io::split(ours);
        let (_, sw) = tokio::io::split(peer_w);
        let (mut r, mut sw) = secure_pair(Some(ss), Vec::new(), sr, sw);

        // The plain side: an application on loopback.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut s = TcpStream::connect(addr).await.unwrap();
        let app = tokio::spawn(async move {
            let mut got = Vec::new();
            let end = s.read_to_end(&mut got).await;
            (got, end)
        });
        let (plain, _) = listener.accept().await.unwrap();
        let err = relay(plain, &mut r, &mut sw).await.unwrap_err();
        assert!(
            err.to_string().contains("without its closing record"),
            "{err}"
        );
        let (got, end) = app.await.unwrap();
        assert_eq!(got, b"first part of the answer");
        let e = end.expect_err("the application must see an error, not a clean end");
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}");
    }
}
