//! The outgoing half of a session: [`SecureWriter`] protects what we send and writes it
//! (see the parent module for zero copy, cancel safety and ends).

use super::BULK_BUF;
use nena_codec::{AlignedBuf, BUF_ALIGN};
use nena_proto::{Protector, SessionInfo};
use std::io;
use std::io::IoSliceMut;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};

/// Reads from `src` into the first of `bufs` only, as any `AsyncRead` does: the reading
/// of [`SecureWriter::fill_slots`] for a source without `readv`.
pub(crate) fn poll_read_first<R: AsyncRead + Unpin + ?Sized>(
    src: &mut R,
    cx: &mut Context<'_>,
    bufs: &mut [IoSliceMut<'_>],
) -> Poll<io::Result<usize>> {
    let mut rb = ReadBuf::new(&mut bufs[0]);
    ready!(Pin::new(src).poll_read(cx, &mut rb))?;
    Poll::Ready(Ok(rb.filled().len()))
}

/// Whether `prot` cuts the stream into records (`aead`), rather than protecting bytes in
/// place or not at all.
fn framed(prot: Option<&Protector>) -> bool {
    prot.is_some_and(|p| !p.is_in_place())
}

/// Most buffers one read into the writer takes ([`SecureWriter::fill_slots`]): every
/// record a bulk writer's buffer holds.
const MAX_SLOTS: usize = 16;

/// Where a writer's first record starts in its (aligned) buffer: `aead`'s record header goes
/// before the boundary so that the payload begins on it, where a read from the plain side
/// lands (in place, the bytes begin on it already: no lead).
///
/// Why: the kernel copies socket data to and from user memory with `rep movsb`, which on
/// the lab's AMD EPYC (Zen 4, FSRM) runs at about 3 GB/s instead of 35-100 when the
/// destination lies 1-15 bytes past the source modulo 4096 (the short-distance case that
/// glibc's `memmove` avoids on such CPUs; `cargo run --release -p nena-bench --example
/// copy_distance`). An application's data written in aligned pieces lies on aligned places
/// in the kernel's buffers, and records starting at offset 0 put the first payload of every
/// read 3 bytes past such a place: whenever the two also shared their place in the page, the
/// first record of the read was copied at that rate (docs/benchmarks-log.md, "The floor").
fn lead(prot: Option<&Protector>) -> usize {
    match prot {
        Some(p) if framed(Some(p)) => (BUF_ALIGN - p.header_len() % BUF_ALIGN) % BUF_ALIGN,
        _ => 0,
    }
}

/// The outgoing half: protects and writes.
///
/// Its buffer holds `buf[head..tail]`, protected bytes not yet written to the socket, and
/// after them the payload being gathered: `buf[open + header_len..open + header_len + fill]`
/// (`aead`: the record being built; in place, bytes are protected as they are committed and
/// join the protected region at once).
pub struct SecureWriter<W> {
    pub(super) inner: W,
    prot: Option<Protector>,
    /// Empty (given back to [`super::pool`]) while nothing is pending and the writer waits
    /// for its source or has flushed; `size` bytes while it holds bytes.
    buf: AlignedBuf,
    size: usize,
    /// Where the buffer's bytes start when it holds nothing ([`lead`]).
    lead: usize,
    head: usize,
    tail: usize,
    /// Payload bytes in the record being built (`aead` only).
    fill: usize,
    /// The closing (or abort) record has been queued (`aead`) or nothing needs one.
    closed: bool,
    /// The flow-end record was sent: nothing more is written until
    /// [`SecureWriter::next_flow`].
    flow_over: bool,
    /// [`SecureWriter::abort`]: the shutdown ends the direction with the abort record and
    /// this reason instead of the closing record.
    aborting: Option<nena_proto::AbortReason>,
    sent: u64,
}

impl<W> SecureWriter<W> {
    /// The key of this direction's application MAC (file trailers, connect requests): None
    /// in plain mode or without a session.
    pub fn app_mac_key(&self) -> Option<&[u8; 32]> {
        self.prot.as_ref().and_then(|p| p.app_mac_key())
    }
}

impl<W: AsyncWrite + Unpin> SecureWriter<W> {
    pub fn new(inner: W, prot: Option<Protector>) -> Self {
        Self::with_capacity(inner, prot, BULK_BUF)
    }

    /// Like [`SecureWriter::new`] with a buffer of `cap` bytes (at least two records; with
    /// records, rounded up to a whole number of them).
    pub fn with_capacity(inner: W, prot: Option<Protector>, cap: usize) -> Self {
        let record = nena_proto::record::MAX_RECORD;
        let mut cap = cap.max(2 * record);
        let lead = lead(prot.as_ref());
        if framed(prot.as_ref()) {
            // A record is begun only where a full one fits, and the buffer is drained before
            // it starts over: 64 KiB took three records per write and left 16 KiB unused.
            cap = cap.div_ceil(record) * record + lead;
        }
        SecureWriter {
            inner,
            prot,
            buf: AlignedBuf::default(),
            size: cap,
            lead,
            head: lead,
            tail: lead,
            fill: 0,
            closed: false,
            flow_over: false,
            aborting: None,
            sent: 0,
        }
    }

    /// Bytes to send before the session's own, as they are (the client's key confirmation):
    /// they leave with the first write or flush, in one `write()` with what follows them.
    ///
    /// # Panics
    /// If anything was written or buffered before, or `bytes` do not fit the buffer.
    pub fn queue_raw(&mut self, bytes: &[u8]) {
        assert!(
            self.tail == self.lead && self.fill == 0 && self.sent == 0,
            "queue_raw after data"
        );
        super::pool::hold(&mut self.buf, self.size);
        self.buf[self.lead..self.lead + bytes.len()].copy_from_slice(bytes);
        self.tail = self.lead + bytes.len();
    }

    /// The underlying stream.
    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    /// The underlying stream; whatever is still buffered is dropped (a session being
    /// aborted).
    pub fn into_inner(self) -> W {
        self.inner
    }

    /// The session's mode and cipher (`None` for a raw stream).
    pub fn info(&self) -> Option<SessionInfo> {
        self.prot.as_ref().map(|p| p.info())
    }

    /// Key epochs begun in this direction (crypto modes).
    pub fn key_epochs(&self) -> Option<u64> {
        self.prot.as_ref().and_then(|p| p.key_epochs())
    }

    /// Payload bytes accepted so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    fn framing(&self) -> (usize, usize, usize) {
        match &self.prot {
            Some(p) => (
                p.header_len(),
                p.trailer_len(),
                p.max_payload().unwrap_or(usize::MAX),
            ),
            None => (0, 0, usize::MAX),
        }
    }

    /// Gives the buffer back to the pool if it holds nothing (all written, no record open).
    fn release_if_empty(&mut self) {
        if self.tail == self.lead && self.fill == 0 {
            super::pool::release(&mut self.buf);
        }
    }

    /// Free payload space at the tail without moving anything. For `aead` a record is only
    /// begun where a full one fits, so that records stay full (least expansion).
    fn space(&self) -> usize {
        let (h, t, max) = self.framing();
        let cap = self.buf.len().saturating_sub(self.tail + h + t).min(max);
        if max != usize::MAX && self.fill == 0 && cap < max {
            return 0;
        }
        cap.saturating_sub(self.fill)
    }

    /// Seals the record being built (`aead`), if it holds anything.
    fn seal_open_record(&mut self) {
        if self.fill == 0 {
            return;
        }
        let n = self
            .prot
            .as_mut()
            .expect("only framed sessions gather records")
            .seal(&mut self.buf[self.tail..], self.fill);
        self.tail += n;
        self.fill = 0;
    }

    /// Writes protected bytes to the socket until none are left.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.head < self.tail {
            let n =
                ready!(Pin::new(&mut self.inner).poll_write(cx, &self.buf[self.head..self.tail]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.head += n;
        }
        if self.fill == 0 {
            (self.head, self.tail) = (self.lead, self.lead);
        }
        Poll::Ready(Ok(()))
    }

    /// Makes payload space available (at least `min` bytes, or a whole record's worth).
    fn poll_space(&mut self, cx: &mut Context<'_>, min: usize) -> Poll<io::Result<()>> {
        if self.closed || self.flow_over {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                if self.closed {
                    "write after shutdown"
                } else {
                    "write after the flow's end"
                },
            )));
        }
        super::pool::hold(&mut self.buf, self.size);
        if self.space() >= min {
            return Poll::Ready(Ok(()));
        }
        // The record being built is full (or cannot grow): seal it and write everything.
        if framed(self.prot.as_ref()) {
            self.seal_open_record();
        }
        ready!(self.poll_drain(cx))?;
        Poll::Ready(Ok(()))
    }

    fn payload_at(&self) -> usize {
        let (h, _, _) = self.framing();
        self.tail + h + self.fill
    }

    /// Protects the next `n` payload bytes (already in the buffer at [`Self::payload_at`]).
    fn accept(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        self.sent += n as u64;
        match &mut self.prot {
            Some(p) if !p.is_in_place() => {
                self.fill += n;
                if self.fill == p.max_payload().unwrap_or(usize::MAX) {
                    self.seal_open_record();
                }
            }
            Some(p) => {
                let at = self.tail;
                p.seal(&mut self.buf[at..at + n], n);
                self.tail += n;
            }
            None => self.tail += n,
        }
    }

    /// The fast path: space in the writer's own buffer for the next payload bytes (at least
    /// 1 byte, at most one record for `aead`). Fill a prefix of it and call
    /// [`SecureWriter::commit`] with its length; the bytes are protected in place.
    pub async fn reserve(&mut self) -> io::Result<&mut [u8]> {
        std::future::poll_fn(|cx| self.poll_space(cx, 1)).await?;
        let at = self.payload_at();
        let n = self.space();
        Ok(&mut self.buf[at..at + n])
    }

    /// Reads from `src` straight into the writer's buffer (at most `max` bytes, at least 1
    /// unless `src` ended), shows the plaintext to `seen`, and protects it in place. While
    /// `src` has nothing to give, what is pending goes out (a partial record is sealed), so
    /// that interactive traffic is never held back: the behaviour of `tokio::io::copy`.
    /// Returns the bytes moved (0: `src` ended).
    pub async fn fill_from<R: AsyncRead + Unpin + ?Sized>(
        &mut self,
        src: &mut R,
        max: u64,
        seen: &mut impl FnMut(&[u8]),
    ) -> io::Result<usize> {
        self.fill(src, max, seen, 1).await
    }

    /// Whether the writer holds a buffer now (it gives it back while idle).
    #[cfg(test)]
    pub(super) fn holds_buffer(&self) -> bool {
        !self.buf.is_empty()
    }

    /// Bytes the writer's buffer holds at most.
    pub(crate) fn buffer_len(&self) -> usize {
        self.size
    }

    /// Fills from `src`; while `src` is pending, sends what is pending if it is at least
    /// `flush_at` bytes (payload and sealed records).
    pub(crate) async fn fill<R: AsyncRead + Unpin + ?Sized>(
        &mut self,
        src: &mut R,
        max: u64,
        seen: &mut impl FnMut(&[u8]),
        flush_at: usize,
    ) -> io::Result<usize> {
        let read = |cx: &mut Context<'_>, bufs: &mut [IoSliceMut<'_>]| {
            poll_read_first(&mut *src, cx, bufs)
        };
        self.fill_slots(read, max, seen, flush_at).await
    }

    /// [`SecureWriter::fill`] through `read`, which reads into several buffers at once
    /// where its source can (`readv`): in `aead`, the rest of the record being built and
    /// the payload of each whole record after it that the buffer holds, with the gaps for
    /// their headers and tags between, so that one system call fills several records.
    /// Elsewhere the free space is one slot already.
    pub(crate) async fn fill_slots(
        &mut self,
        mut read: impl FnMut(&mut Context<'_>, &mut [IoSliceMut<'_>]) -> Poll<io::Result<usize>>,
        max: u64,
        seen: &mut impl FnMut(&[u8]),
        flush_at: usize,
    ) -> io::Result<usize> {
        std::future::poll_fn(|cx| {
            ready!(self.poll_space(cx, 1))?;
            let slots = self.slots(max);
            let mut rest: &mut [u8] = &mut self.buf[..];
            let mut bufs: [IoSliceMut<'_>; MAX_SLOTS] =
                std::array::from_fn(|_| IoSliceMut::new(&mut []));
            let mut count = 0;
            let mut offset = 0;
            for &(at, len) in slots.iter().take_while(|s| s.1 > 0) {
                let (_, from) = std::mem::take(&mut rest).split_at_mut(at - offset);
                let (slot, after) = from.split_at_mut(len);
                bufs[count] = IoSliceMut::new(slot);
                (rest, offset, count) = (after, at + len, count + 1);
            }
            match read(cx, &mut bufs[..count]) {
                Poll::Ready(Ok(mut k)) => {
                    let got = k;
                    for &(at, len) in &slots[..count] {
                        let take = len.min(k);
                        if take == 0 {
                            break;
                        }
                        debug_assert_eq!(at, self.payload_at());
                        seen(&self.buf[at..at + take]);
                        self.accept(take);
                        k -= take;
                    }
                    Poll::Ready(Ok(got))
                }
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                Poll::Pending => {
                    let pending = self.tail - self.head + self.fill;
                    if pending > 0 && pending >= flush_at {
                        self.seal_open_record();
                        if let Poll::Ready(Err(e)) = self.poll_drain(cx) {
                            return Poll::Ready(Err(e));
                        }
                    }
                    // Waiting for the source with nothing left to send: no buffer either.
                    self.release_if_empty();
                    Poll::Pending
                }
            }
        })
        .await
    }

    /// Where the next `max` payload bytes may go, as (offset, length) in the buffer, unused
    /// slots empty: the free space, and in `aead`, once it reaches the end of the record
    /// being built, the payload of each whole record after it that fits the buffer.
    fn slots(&self, max: u64) -> [(usize, usize); MAX_SLOTS] {
        let mut slots = [(0, 0); MAX_SLOTS];
        let first = (self.space() as u64).min(max) as usize;
        slots[0] = (self.payload_at(), first);
        let (h, t, record) = self.framing();
        if framed(self.prot.as_ref()) && self.fill + first == record {
            let mut left = max - first as u64;
            let mut at = slots[0].0 + first + t + h;
            for slot in slots.iter_mut().skip(1) {
                if left == 0 || at + record + t > self.buf.len() {
                    break;
                }
                let len = (record as u64).min(left) as usize;
                *slot = (at, len);
                left -= len as u64;
                at += record + t + h;
            }
        }
        slots
    }

    /// Takes the first `n` bytes of the space [`SecureWriter::reserve`] gave as payload.
    pub fn commit(&mut self, n: usize) {
        assert!(n <= self.space(), "commit beyond the reserved space");
        self.accept(n);
    }

    /// Writes a header message (encoded by the caller) and flushes it.
    pub async fn write_msg(&mut self, msg: impl AsRef<[u8]>) -> io::Result<()> {
        self.write_all(msg.as_ref()).await?;
        self.flush().await
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for SecureWriter<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        src: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if src.is_empty() {
            return Poll::Ready(Ok(0));
        }
        ready!(this.poll_space(cx, 1))?;
        let n = this.space().min(src.len());
        let at = this.payload_at();
        match &mut this.prot {
            // In place: protected on the way into the buffer, one pass over the bytes.
            Some(p) if p.is_in_place() => {
                p.seal_from(&src[..n], &mut this.buf[at..at + n]);
                this.tail += n;
                this.sent += n as u64;
            }
            // The bytes that complete a record: sealed from `src` straight into the buffer
            // (the cipher's one pass, no copy before it).
            Some(p) if p.max_payload() == Some(this.fill + n) => {
                let record = p.seal_joined(&mut this.buf[this.tail..], this.fill, &src[..n]);
                this.tail += record;
                this.fill = 0;
                this.sent += n as u64;
            }
            _ => {
                this.buf[at..at + n].copy_from_slice(&src[..n]);
                this.accept(n);
            }
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.seal_open_record();
        ready!(this.poll_drain(cx))?;
        this.release_if_empty();
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.closed {
            super::pool::hold(&mut this.buf, this.size);
            this.seal_open_record();
            let (h, t, _) = this.framing();
            // The last record: the closing one (no payload), or the abort one (a reason byte).
            let last_len = h + t + usize::from(this.aborting.is_some());
            if this.buf.len() - this.tail < last_len {
                // Room for the last record first: it is made only once.
                ready!(this.poll_drain(cx))?;
            }
            if let Some(p) = this.prot.as_mut() {
                let last = match this.aborting {
                    Some(reason) => p.abort(reason),
                    None => p.close(),
                };
                this.buf[this.tail..this.tail + last.len()].copy_from_slice(&last);
                this.tail += last.len();
            }
            this.closed = true;
        }
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

impl<W: AsyncWrite + Unpin> SecureWriter<W> {
    /// Ends the flow in this direction and keeps the session (`aead` only, to a peer that
    /// asked for sessions reused flow after flow): what is buffered, then the flow-end
    /// record, flushed; no transport shutdown. The peer's reader sees the end of its flow
    /// ([`crate::stream::SecureReader::flow_ended`]); writes fail until
    /// [`SecureWriter::next_flow`].
    pub async fn end_flow(&mut self) -> io::Result<()> {
        if self.closed || self.flow_over || !framed(self.prot.as_ref()) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a flow can end apart from its session only in aead, once",
            ));
        }
        // What is buffered and the flow-end record leave in one write where they fit.
        super::pool::hold(&mut self.buf, self.size);
        self.seal_open_record();
        if self.buf.len() - self.tail < nena_proto::record::FLOW_END_LEN {
            std::future::poll_fn(|cx| self.poll_drain(cx)).await?;
        }
        let end = self
            .prot
            .as_mut()
            .and_then(|p| p.end_flow())
            .ok_or(io::ErrorKind::Unsupported)?;
        self.buf[self.tail..self.tail + end.len()].copy_from_slice(&end);
        self.tail += end.len();
        self.flow_over = true;
        self.flush().await
    }

    /// Whether this direction's flow ended ([`SecureWriter::end_flow`]).
    pub fn flow_ended(&self) -> bool {
        self.flow_over
    }

    /// Writes on in the next flow, after [`SecureWriter::end_flow`].
    pub fn next_flow(&mut self) {
        self.flow_over = false;
    }

    /// Gives the session up and tells the peer why, where the mode can (`aead`: what is
    /// buffered, then the abort record, then the transport's shutdown; the peer's reader
    /// fails with [`nena_proto::SessionError::PeerAborted`]). Returns false, writing
    /// nothing, in the modes that have no room for a message (stream, kato, plain) or once
    /// the direction has ended: the caller resets the connection instead.
    pub async fn abort(&mut self, reason: nena_proto::AbortReason) -> io::Result<bool> {
        if self.closed || !framed(self.prot.as_ref()) {
            return Ok(false);
        }
        // The shutdown's own path, with the abort record in place of the closing one.
        self.aborting = Some(reason);
        self.shutdown().await?;
        Ok(true)
    }
}
