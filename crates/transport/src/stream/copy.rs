//! The copy loops between a plain byte source or sink and a protected session: [`copy_in`]
//! (any source into a [`SecureWriter`]), [`copy_in_slots`] (a socket, several records per
//! read), [`copy_in_bulk`] (a source that is only
//! slow at times, such as a file), [`copy_out`] (a [`SecureReader`] into a sink). Used by
//! the file transfers and the proxies' bridge.

use crate::stream::{poll_read_first, SecureReader, SecureWriter};
use std::io::{self, IoSlice, IoSliceMut};
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::TcpStream;

/// A plain source that can read into several buffers with one system call (`readv`): a
/// TCP socket. The default reads into the first buffer only, as any `AsyncRead`.
pub trait ReadSlots: AsyncRead + Unpin {
    /// Reads into `bufs`, in order; `Ok(0)` at the end of the source.
    fn poll_read_slots(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
    ) -> Poll<io::Result<usize>> {
        poll_read_first(self, cx, bufs)
    }
}

/// `readv` on a socket tokio watches.
fn poll_readv(
    tcp: &TcpStream,
    cx: &mut Context<'_>,
    bufs: &mut [IoSliceMut<'_>],
) -> Poll<io::Result<usize>> {
    loop {
        ready!(tcp.poll_read_ready(cx))?;
        match tcp.try_read_vectored(bufs) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            r => return Poll::Ready(r),
        }
    }
}

impl ReadSlots for TcpStream {
    fn poll_read_slots(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
    ) -> Poll<io::Result<usize>> {
        poll_readv(self, cx, bufs)
    }
}

impl ReadSlots for OwnedReadHalf {
    fn poll_read_slots(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
    ) -> Poll<io::Result<usize>> {
        poll_readv(self.as_ref(), cx, bufs)
    }
}

impl<T: ReadSlots + ?Sized> ReadSlots for &mut T {
    fn poll_read_slots(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
    ) -> Poll<io::Result<usize>> {
        (**self).poll_read_slots(cx, bufs)
    }
}

impl<T: AsyncRead + Unpin> ReadSlots for tokio::io::ReadHalf<T> {}
impl ReadSlots for tokio::io::DuplexStream {}

/// [`copy_in`] from a source that reads into several buffers at once ([`ReadSlots`]): in
/// `aead`, one system call fills as many records as the writer's buffer holds
/// ([`SecureWriter::fill_slots`]), not one read per record.
pub async fn copy_in_slots<R: ReadSlots + ?Sized, W: AsyncWrite + Unpin>(
    src: &mut R,
    w: &mut SecureWriter<W>,
    limit: u64,
    mut seen: impl FnMut(&[u8]),
) -> io::Result<u64> {
    let mut moved = 0u64;
    while moved < limit {
        let read =
            |cx: &mut Context<'_>, bufs: &mut [IoSliceMut<'_>]| src.poll_read_slots(cx, bufs);
        let n = w.fill_slots(read, limit - moved, &mut seen, 1).await?;
        if n == 0 {
            break;
        }
        moved += n as u64;
    }
    Ok(moved)
}

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

/// Most units (records) one vectored write to `dst` takes: all a bulk reader's buffer holds.
const MAX_SLICES: usize = 16;

/// Moves up to `limit` bytes out of the session into `dst` (straight from the reader's
/// buffer), calling `seen` with each piece. Stops at the session's clean end or at `limit`;
/// returns the bytes moved. Does not flush `dst`. Where `dst` takes vectored writes (a
/// socket), every whole record already read goes out in one write
/// ([`SecureReader::poll_fill_ahead`]), not one write per record.
pub async fn copy_out<R: AsyncRead + Unpin, W: AsyncWrite + Unpin + ?Sized>(
    r: &mut SecureReader<R>,
    dst: &mut W,
    limit: u64,
    mut seen: impl FnMut(&[u8]),
) -> io::Result<u64> {
    // A sink without vectored writes would take only the first slice of each write.
    let most = if dst.is_write_vectored() {
        MAX_SLICES
    } else {
        1
    };
    let mut moved = 0u64;
    while moved < limit {
        std::future::poll_fn(|cx| r.poll_fill_ahead(cx, most)).await?;
        let mut slices = [IoSlice::new(&[]); MAX_SLICES];
        let (mut count, mut total) = (0, 0u64);
        for s in r.pending().take(most) {
            let s = &s[..(s.len() as u64).min(limit - moved - total) as usize];
            if s.is_empty() {
                break;
            }
            slices[count] = IoSlice::new(s);
            (count, total) = (count + 1, total + s.len() as u64);
        }
        if count == 0 {
            break;
        }
        let n = dst.write_vectored(&slices[..count]).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        let mut left = n;
        for s in &slices[..count] {
            let k = s.len().min(left);
            seen(&s[..k]);
            left -= k;
        }
        r.consume_pending(n);
        moved += n as u64;
    }
    Ok(moved)
}
