//! The copy loops between a plain byte source or sink and a protected session: [`copy_in`]
//! (a socket or any source into a [`SecureWriter`]), [`copy_in_bulk`] (a source that is only
//! slow at times, such as a file), [`copy_out`] (a [`SecureReader`] into a sink). Used by
//! the file transfers and the proxies' bridge.

use crate::stream::{SecureReader, SecureWriter};
use std::io;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt};

/// Moves up to `limit` bytes from `src` into the session (read straight into the writer's
/// buffer, see [`SecureWriter::fill_from`]), calling `seen` with each piece of plaintext
/// before it is protected. Whenever `src` has nothing ready, what is pending is sent. Stops
/// at the end of `src` or at `limit`; returns the bytes moved. The caller flushes or shuts
/// down at the end.
pub async fn copy_in<R: AsyncRead + Unpin + ?Sized, W: AsyncWrite + Unpin>(
    src: &mut R,
    w: &mut SecureWriter<W>,
    limit: u64,
    seen: impl FnMut(&[u8]),
) -> io::Result<u64> {
    copy_flushing_at(src, w, limit, seen, 1).await
}

/// [`copy_in`] from a source that is never idle, only slow at times (a file, whose reads
/// wait for tokio's blocking pool): while it is pending, what is pending goes out only once
/// it fills half the writer's buffer, so that the socket gets large writes (the kernel's
/// scheduler spreads those over the subflows) and never one record on its own.
pub async fn copy_in_bulk<R: AsyncRead + Unpin + ?Sized, W: AsyncWrite + Unpin>(
    src: &mut R,
    w: &mut SecureWriter<W>,
    limit: u64,
    seen: impl FnMut(&[u8]),
) -> io::Result<u64> {
    let half = w.buffer_len() / 2;
    copy_flushing_at(src, w, limit, seen, half).await
}

/// The loop of [`copy_in`] and [`copy_in_bulk`]: fills until `limit` or the end of `src`,
/// sending what is pending while `src` is pending once it is `flush_at` bytes or more.
async fn copy_flushing_at<R: AsyncRead + Unpin + ?Sized, W: AsyncWrite + Unpin>(
    src: &mut R,
    w: &mut SecureWriter<W>,
    limit: u64,
    mut seen: impl FnMut(&[u8]),
    flush_at: usize,
) -> io::Result<u64> {
    let mut moved = 0u64;
    while moved < limit {
        let n = w.fill(src, limit - moved, &mut seen, flush_at).await?;
        if n == 0 {
            break;
        }
        moved += n as u64;
    }
    Ok(moved)
}

/// Moves up to `limit` bytes out of the session into `dst` (straight from the reader's
/// buffer), calling `seen` with each piece. Stops at the session's clean end or at `limit`;
/// returns the bytes moved. Does not flush `dst`.
pub async fn copy_out<R: AsyncRead + Unpin, W: AsyncWrite + Unpin + ?Sized>(
    r: &mut SecureReader<R>,
    dst: &mut W,
    limit: u64,
    mut seen: impl FnMut(&[u8]),
) -> io::Result<u64> {
    let mut moved = 0u64;
    while moved < limit {
        let avail = r.fill_buf().await?;
        if avail.is_empty() {
            break;
        }
        let n = (avail.len() as u64).min(limit - moved) as usize;
        seen(&avail[..n]);
        dst.write_all(&avail[..n]).await?;
        r.consume(n);
        moved += n as u64;
    }
    Ok(moved)
}
