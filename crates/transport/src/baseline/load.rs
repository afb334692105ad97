//! The load of `nena bench sessions` (and of the proxy's tests): a plain-TCP echo target,
//! and a payload per session, distinct so that crossed streams are caught. Part of the
//! product because the bench is; the test-only helpers stay in `testing`.

use anyhow::{Context, Result};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

/// Serve an echo on `addr` (plain TCP) for at most `lifetime`: every connection gets back what
/// it sent, and its direction is closed (half-close) once the client closed its own.
/// `ready` is called once the listener is bound.
pub fn echo_server(addr: SocketAddr, lifetime: Duration, ready: impl FnOnce()) -> Result<()> {
    crate::conn::raise_nofile_limit();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let l = TcpListener::bind(addr)
            .await
            .with_context(|| format!("echo: cannot bind {addr}"))?;
        ready();
        let serve = async {
            loop {
                let (s, _) = match l.accept().await {
                    Ok(x) => x,
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                tokio::spawn(async move {
                    let (mut r, mut w) = s.into_split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                    let _ = w.shutdown().await;
                });
            }
        };
        tokio::select! {
            () = serve => {},
            () = tokio::time::sleep(lifetime) => {},
        }
        Ok(())
    })
}

/// The payload of session `i`: distinct per session so crossed streams are caught.
pub fn session_payload(i: usize, len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ (i as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
