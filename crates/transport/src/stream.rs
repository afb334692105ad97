//! The two halves of a nena session's byte stream as async streams: [`SecureReader`]
//! (`AsyncRead` + `AsyncBufRead`) opens what the peer sent, [`SecureWriter`] (`AsyncWrite`)
//! protects what we send. Every mode goes through the session's sans-IO
//! [`Protector`]/[`Unprotector`] (nena-proto); a `None` one is a raw stream (the plain-MPTCP
//! baseline of the benchmark).
//!
//! **Zero copy where the mode allows it.** In place (kato, stream, raw), `poll_read` reads
//! straight into the caller's buffer and opens it there. The writer's fast path is
//! [`SecureWriter::reserve`] / [`SecureWriter::commit`]: the caller fills the writer's own
//! buffer (a file read lands there directly), and `commit` protects it in place: for `aead`
//! the space is the payload of the record being built, so the record is sealed where it lies.
//! `poll_write` in place protects the caller's bytes on their way into the buffer (one pass:
//! the keystream or the scrambling reads the source and writes the buffer, no copy first).
//! [`copy_in`] and [`copy_out`] move bytes between a plain stream and a session that way.
//!
//! **Cancel safety.** Bytes are protected exactly once, when the writer accepts them
//! (`poll_write` returning `Ok(n)`, or `commit`), and they stay in the writer's buffer until
//! the socket took them; a dropped write, flush or reserve future loses nothing and
//! transforms nothing twice. Reads open a unit (in place, a record) in one synchronous step.
//!
//! **Ends.** `poll_shutdown` seals what is pending, sends the closing record (`aead`), flushes
//! and half-closes. A reader reports end of stream only when the session says the end is
//! clean: for `aead` after the peer's closing record, else an error (truncation). An integrity
//! failure is an `InvalidData` error whose message starts with "integrity check failed", and
//! no byte of the failing record is returned.

use crate::low_water::LowWater;
pub use crate::msg_error::{session_error_of, MsgError};
use crate::wire::{Reply, RequestMsg, WireError};
use nena_codec::AlignedBuf;
use nena_proto::{Opened, Protector, SessionError, SessionInfo, Unprotector};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};

/// Buffer of one direction for bulk transfers (files, perf).
pub const BULK_BUF: usize = 256 * 1024;
/// Buffer of one proxy direction (many sessions at once; one record and change).
pub const PROXY_BUF: usize = 64 * 1024;
/// Longest header message ([`RequestMsg`] or [`Reply`]) we are willing to buffer.
const MAX_HEADER: usize = 2048;

/// An error of the protected stream as an `io::Error` (`InvalidData`, the session's message).
fn session_error(e: SessionError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// The incoming half: reads and opens.
pub struct SecureReader<R> {
    inner: R,
    unprot: Option<Unprotector>,
    buf: AlignedBuf,
    /// Input not yet opened: `buf[start..end]`.
    start: usize,
    end: usize,
    /// Plaintext of the unit being delivered: `buf[plain..plain_end]`; the unit's input ends
    /// at `unit_end` (where `start` moves once the plaintext is consumed).
    plain: usize,
    plain_end: usize,
    unit_end: usize,
    /// Bytes given back by [`SecureReader::unread`], delivered first.
    pushback: Vec<u8>,
    eof: bool,
    failed: Option<(io::ErrorKind, String)>,
    received: u64,
    idle: Option<Duration>,
    idle_timer: Option<Pin<Box<tokio::time::Sleep>>>,
    low_water: Option<LowWater>,
}

impl<R: AsyncRead + Unpin> SecureReader<R> {
    /// `leftover` are bytes read together with the handshake (still protected).
    pub fn new(inner: R, unprot: Option<Unprotector>, leftover: Vec<u8>) -> Self {
        Self::with_capacity(inner, unprot, leftover, BULK_BUF)
    }

    /// Like [`SecureReader::new`] with a buffer of `cap` bytes (at least one record).
    pub fn with_capacity(
        inner: R,
        unprot: Option<Unprotector>,
        leftover: Vec<u8>,
        cap: usize,
    ) -> Self {
        let need = unprot.as_ref().map_or(1, |u| u.max_unit());
        let mut buf = AlignedBuf::new(cap.max(2 * need).max(leftover.len()));
        buf[..leftover.len()].copy_from_slice(&leftover);
        SecureReader {
            inner,
            unprot,
            buf,
            start: 0,
            end: leftover.len(),
            plain: 0,
            plain_end: 0,
            unit_end: 0,
            pushback: Vec::new(),
            eof: false,
            failed: None,
            received: 0,
            idle: None,
            idle_timer: None,
            low_water: None,
        }
    }

    /// Wake on whole records: `set` sets the socket's receive low-water mark (`SO_RCVLOWAT`)
    /// to what an incomplete record lacks before each wait ([`crate::low_water`]).
    pub fn wake_on_whole_records(
        &mut self,
        set: impl Fn(usize) -> io::Result<()> + Send + Sync + 'static,
    ) {
        self.low_water = Some(LowWater::new(set));
    }

    /// Set the low-water mark for the next wait: `missing` bytes of a record still to come.
    fn low_water_for(&mut self, missing: usize) {
        if let Some(lw) = self.low_water.as_mut() {
            if !lw.wait_for(missing) {
                self.low_water = None;
            }
        }
    }

    /// Fail a read that waits longer than `idle` for the peer (servers use it so a stalled
    /// client cannot hold a session forever).
    pub fn set_idle_timeout(&mut self, idle: Option<Duration>) {
        self.idle = idle;
        self.idle_timer = None;
    }

    /// The underlying stream.
    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    /// The session's mode and cipher (`None` for a raw stream).
    pub fn info(&self) -> Option<SessionInfo> {
        self.unprot.as_ref().map(|u| u.info())
    }

    /// Key epochs begun in this direction (crypto modes).
    pub fn key_epochs(&self) -> Option<u64> {
        self.unprot.as_ref().and_then(|u| u.key_epochs())
    }

    /// Payload bytes delivered so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Give back bytes that a caller consumed but that belong to the next reader of the
    /// stream. They are delivered before anything else.
    fn unread(&mut self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        self.received -= data.len() as u64;
        let mut merged = data.to_vec();
        merged.extend_from_slice(&self.pushback);
        self.pushback = merged;
    }

    fn fail(&mut self, e: io::Error) -> io::Error {
        self.failed = Some((e.kind(), e.to_string()));
        e
    }

    /// Reads from the socket into `dst`, with the idle timeout.
    fn poll_inner(&mut self, cx: &mut Context<'_>, dst: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        self.low_water_for(0);
        poll_read_idle(&mut self.inner, self.idle, &mut self.idle_timer, cx, dst)
    }

    /// Makes plaintext available in `buf[plain..plain_end]` (empty at a clean end).
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some((kind, msg)) = &self.failed {
            return Poll::Ready(Err(io::Error::new(*kind, msg.clone())));
        }
        loop {
            if self.plain < self.plain_end {
                return Poll::Ready(Ok(()));
            }
            self.start = self.start.max(self.unit_end);
            if self.start == self.end && self.start > 0 {
                (self.start, self.end, self.unit_end) = (0, 0, 0);
            }
            let mut want = 1;
            if self.start < self.end {
                let input = &mut self.buf[self.start..self.end];
                let opened = match self.unprot.as_mut() {
                    None => Ok(Opened::Data {
                        consumed: input.len(),
                        plain: 0..input.len(),
                    }),
                    Some(u) => u.open(input),
                };
                match opened {
                    Ok(Opened::Data { consumed, plain }) => {
                        self.plain = self.start + plain.start;
                        self.plain_end = self.start + plain.end;
                        self.unit_end = self.start + consumed;
                        continue;
                    }
                    Ok(Opened::Close { consumed }) => {
                        self.start += consumed;
                        self.unit_end = self.start;
                        continue;
                    }
                    Ok(Opened::NeedMore { total }) => want = total,
                    Err(e) => return Poll::Ready(Err(self.fail(session_error(e)))),
                }
            }
            if self.eof {
                let end = match self.unprot.as_ref().map(|u| u.eof()) {
                    Some(Err(e)) => Err(session_error(e)),
                    _ if self.start < self.end => Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the peer's stream ended in the middle of a record",
                    )),
                    _ => Ok(()),
                };
                return Poll::Ready(end.map_err(|e| self.fail(e)));
            }
            // Room for the rest of the unit: move the pending input to the front if needed.
            if self.start + want > self.buf.len() || self.end == self.buf.len() {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                (self.start, self.unit_end) = (0, 0);
            }
            // What the unit still lacks: the socket need not wake us before it is there.
            let have = self.end - self.start;
            self.low_water_for(if have > 0 {
                want.saturating_sub(have)
            } else {
                0
            });
            let end = self.end;
            let mut rb = ReadBuf::new(&mut self.buf[end..]);
            match poll_read_idle(
                &mut self.inner,
                self.idle,
                &mut self.idle_timer,
                cx,
                &mut rb,
            ) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(self.fail(e))),
                Poll::Ready(Ok(())) => {
                    let n = rb.filled().len();
                    if n == 0 {
                        self.eof = true;
                    }
                    self.end += n;
                }
            }
        }
    }

    /// Whether reads can go straight into the caller's buffer now.
    fn direct(&self) -> bool {
        self.pushback.is_empty()
            && self.plain == self.plain_end
            && self.start.max(self.unit_end) == self.end
            && !self.eof
            && self.failed.is_none()
            && !matches!(&self.unprot, Some(u) if !u.is_in_place())
    }

    /// Reads one request or reply with `decode`; bytes read past it stay for the next read.
    async fn read_msg<T>(
        &mut self,
        what: &str,
        decode: impl Fn(&[u8]) -> Result<Option<(T, usize)>, WireError>,
    ) -> Result<T, MsgError> {
        let mut acc: Vec<u8> = Vec::with_capacity(256);
        loop {
            let avail = self.fill_buf().await?;
            if avail.is_empty() {
                return Err(MsgError::Io(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    if acc.is_empty() {
                        format!("connection closed while waiting for the {what}")
                    } else {
                        format!("connection closed in the middle of the {what}")
                    },
                )));
            }
            let take = avail.len().min(MAX_HEADER + 1 - acc.len());
            acc.extend_from_slice(&avail[..take]);
            self.consume(take);
            if let Some((msg, used)) = decode(&acc)? {
                let rest = acc.split_off(used);
                self.unread(&rest);
                return Ok(msg);
            }
            if acc.len() > MAX_HEADER {
                return Err(MsgError::Io(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{what} longer than {MAX_HEADER} bytes"),
                )));
            }
        }
    }

    /// After a failure: reads and drops whatever the peer still sends, without opening it,
    /// until it ends its side or `limit` passes. A server calls it after telling the client
    /// why it stops, so that the client, still sending, gets to read that answer instead of
    /// a reset (closing a socket with unread data resets the connection).
    pub async fn discard(&mut self, limit: Duration) {
        use tokio::io::AsyncReadExt;
        let mut scratch = vec![0u8; 64 * 1024];
        let _ = tokio::time::timeout(limit, async {
            while let Ok(n) = self.inner.read(&mut scratch).await {
                if n == 0 {
                    break;
                }
            }
        })
        .await;
    }

    /// Read a request (with the access token it came with, if any).
    pub async fn read_request(&mut self) -> Result<RequestMsg, MsgError> {
        self.read_msg("request", RequestMsg::decode).await
    }

    /// Read a [`Reply`].
    pub async fn read_reply(&mut self) -> Result<Reply, MsgError> {
        self.read_msg("reply", Reply::decode).await
    }

    /// Read a connect request (the SOCKS proxy's destination) and check its tag (the
    /// peer's application MAC): an altered request is an error, never a request.
    pub async fn read_connect_request(&mut self) -> Result<crate::wire::ConnectRequest, MsgError> {
        let key = self.app_mac_key().copied().map(zeroize::Zeroizing::new);
        self.read_msg("connect request", |b| {
            crate::wire::ConnectRequest::decode_tagged(b, key.as_deref())
        })
        .await
    }

    /// The key of the peer's application MAC (file trailers, connect requests): None in
    /// plain mode or without a session.
    pub fn app_mac_key(&self) -> Option<&[u8; 32]> {
        self.unprot.as_ref().and_then(|u| u.app_mac_key())
    }

    /// Read the answer to a connect request.
    pub async fn read_connect_reply(&mut self) -> Result<crate::wire::ConnectReply, MsgError> {
        self.read_msg("connect reply", crate::wire::ConnectReply::decode)
            .await
    }
}

/// `poll_read` on `inner` that fails with `TimedOut` after `idle` without data.
fn poll_read_idle<R: AsyncRead + Unpin>(
    inner: &mut R,
    idle: Option<Duration>,
    timer: &mut Option<Pin<Box<tokio::time::Sleep>>>,
    cx: &mut Context<'_>,
    dst: &mut ReadBuf<'_>,
) -> Poll<io::Result<()>> {
    match Pin::new(inner).poll_read(cx, dst) {
        Poll::Ready(r) => {
            *timer = None;
            Poll::Ready(r)
        }
        Poll::Pending => {
            if let Some(d) = idle {
                let t = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep(d)));
                if t.as_mut().poll(cx).is_ready() {
                    *timer = None;
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("no data from the peer for {}s", d.as_secs_f64()),
                    )));
                }
            }
            Poll::Pending
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for SecureReader<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        dst: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if dst.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        if this.direct() {
            // Zero copy: read into the caller's buffer and open the new bytes in place.
            let before = dst.filled().len();
            ready!(this.poll_inner(cx, dst)).map_err(|e| this.fail(e))?;
            let n = dst.filled().len() - before;
            if n == 0 {
                this.eof = true;
                if let Some(Err(e)) = this.unprot.as_ref().map(|u| u.eof()) {
                    return Poll::Ready(Err(this.fail(session_error(e))));
                }
                return Poll::Ready(Ok(()));
            }
            if let Some(u) = this.unprot.as_mut() {
                u.open_in_place(&mut dst.filled_mut()[before..]);
            }
            this.received += n as u64;
            return Poll::Ready(Ok(()));
        }
        let avail = ready!(Pin::new(&mut *this).poll_fill_buf(cx))?;
        let n = avail.len().min(dst.remaining());
        dst.put_slice(&avail[..n]);
        Pin::new(this).consume(n);
        Poll::Ready(Ok(()))
    }
}

impl<R: AsyncRead + Unpin> AsyncBufRead for SecureReader<R> {
    fn poll_fill_buf(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
        let this = self.get_mut();
        if !this.pushback.is_empty() {
            return Poll::Ready(Ok(&this.pushback));
        }
        ready!(this.poll_fill(cx))?;
        Poll::Ready(Ok(&this.buf[this.plain..this.plain_end]))
    }

    fn consume(self: Pin<&mut Self>, amt: usize) {
        let this = self.get_mut();
        this.received += amt as u64;
        if !this.pushback.is_empty() {
            this.pushback.drain(..amt.min(this.pushback.len()));
            return;
        }
        this.plain = (this.plain + amt).min(this.plain_end);
    }
}

/// The outgoing half: protects and writes.
///
/// Its buffer holds `buf[head..tail]`, protected bytes not yet written to the socket, and
/// after them the payload being gathered: `buf[open + header_len..open + header_len + fill]`
/// (`aead`: the record being built; in place, bytes are protected as they are committed and
/// join the protected region at once).
pub struct SecureWriter<W> {
    inner: W,
    prot: Option<Protector>,
    buf: AlignedBuf,
    head: usize,
    tail: usize,
    /// Payload bytes in the record being built (`aead` only).
    fill: usize,
    /// The closing (or abort) record has been queued (`aead`) or nothing needs one.
    closed: bool,
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

    /// Like [`SecureWriter::new`] with a buffer of `cap` bytes (at least two records).
    pub fn with_capacity(inner: W, prot: Option<Protector>, cap: usize) -> Self {
        let cap = cap.max(2 * nena_proto::record::MAX_RECORD);
        SecureWriter {
            inner,
            prot,
            buf: AlignedBuf::new(cap),
            head: 0,
            tail: 0,
            fill: 0,
            closed: false,
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
            self.tail == 0 && self.fill == 0 && self.sent == 0,
            "queue_raw after data"
        );
        self.buf[..bytes.len()].copy_from_slice(bytes);
        self.tail = bytes.len();
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
            (self.head, self.tail) = (0, 0);
        }
        Poll::Ready(Ok(()))
    }

    /// Makes payload space available (at least `min` bytes, or a whole record's worth).
    fn poll_space(&mut self, cx: &mut Context<'_>, min: usize) -> Poll<io::Result<()>> {
        if self.closed {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "write after shutdown",
            )));
        }
        if self.space() >= min {
            return Poll::Ready(Ok(()));
        }
        // The record being built is full (or cannot grow): seal it and write everything.
        if self.prot.as_ref().is_some_and(|p| !p.is_in_place()) {
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

    /// Bytes the writer's buffer holds at most.
    pub(crate) fn buffer_len(&self) -> usize {
        self.buf.len()
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
        std::future::poll_fn(|cx| {
            ready!(self.poll_space(cx, 1))?;
            let at = self.payload_at();
            let n = (self.space() as u64).min(max) as usize;
            let mut rb = ReadBuf::new(&mut self.buf[at..at + n]);
            match Pin::new(&mut *src).poll_read(cx, &mut rb) {
                Poll::Ready(Ok(())) => {
                    let k = rb.filled().len();
                    seen(&self.buf[at..at + k]);
                    self.accept(k);
                    Poll::Ready(Ok(k))
                }
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                Poll::Pending => {
                    let pending = self.tail - self.head + self.fill;
                    if pending > 0 && pending >= flush_at {
                        self.seal_open_record_if_framed();
                        if let Poll::Ready(Err(e)) = self.poll_drain(cx) {
                            return Poll::Ready(Err(e));
                        }
                    }
                    Poll::Pending
                }
            }
        })
        .await
    }

    /// Takes the first `n` bytes of the space [`SecureWriter::reserve`] gave as payload.
    pub fn commit(&mut self, n: usize) {
        assert!(n <= self.space(), "commit beyond the reserved space");
        self.accept(n);
    }

    /// Writes a header message (encoded by the caller) and flushes it.
    pub async fn write_msg(&mut self, msg: Vec<u8>) -> io::Result<()> {
        self.write_all(&msg).await?;
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
            _ => {
                this.buf[at..at + n].copy_from_slice(&src[..n]);
                this.accept(n);
            }
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.seal_open_record_if_framed();
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.closed {
            this.seal_open_record_if_framed();
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
    /// Gives the session up and tells the peer why, where the mode can (`aead`: what is
    /// buffered, then the abort record, then the transport's shutdown; the peer's reader
    /// fails with [`nena_proto::SessionError::PeerAborted`]). Returns false, writing
    /// nothing, in the modes that have no room for a message (stream, kato, plain) or once
    /// the direction has ended: the caller resets the connection instead.
    pub async fn abort(&mut self, reason: nena_proto::AbortReason) -> io::Result<bool> {
        let framed = self.prot.as_ref().is_some_and(|p| !p.is_in_place());
        if self.closed || !framed {
            return Ok(false);
        }
        // The shutdown's own path, with the abort record in place of the closing one.
        self.aborting = Some(reason);
        self.shutdown().await?;
        Ok(true)
    }

    fn seal_open_record_if_framed(&mut self) {
        if self.fill > 0 {
            self.seal_open_record();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::copy::{copy_in, copy_out};
    use nena_proto::Mode;
    use tokio::io::{AsyncReadExt, DuplexStream};

    /// A session in `mode` over an in-memory pipe: (client writer, server reader), with the
    /// client's confirmation already on its way.
    async fn pipe(
        mode: Mode,
        cap: usize,
    ) -> (SecureWriter<DuplexStream>, SecureReader<DuplexStream>) {
        let nena_proto::Exchange {
            client: cs,
            server: ss,
            confirm,
            ..
        } = nena_proto::exchange_in(mode);
        let (a, b) = tokio::io::duplex(cap);
        let mut a = a;
        a.write_all(&confirm).await.unwrap();
        (
            SecureWriter::new(a, Some(cs.split().0)),
            SecureReader::new(b, Some(ss.split().1), Vec::new()),
        )
    }

    fn data(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    /// Polls `fut` once: Some(output) if it is ready, None if it is pending.
    async fn poll_once<F: Future + Unpin>(fut: &mut F) -> Option<F::Output> {
        std::future::poll_fn(|cx| match Pin::new(&mut *fut).poll(cx) {
            Poll::Ready(v) => Poll::Ready(Some(v)),
            Poll::Pending => Poll::Ready(None),
        })
        .await
    }

    #[tokio::test]
    async fn an_incomplete_record_sets_the_low_water_mark_to_what_it_lacks_and_then_back_to_one() {
        let nena_proto::Exchange {
            client: cs,
            server: ss,
            confirm,
            ..
        } = nena_proto::exchange_in(Mode::Aead);
        // One sealed record of 8,000 bytes, as it goes on the wire.
        let (a, mut b) = tokio::io::duplex(1 << 16);
        let mut w = SecureWriter::new(a, Some(cs.split().0));
        let msg = data(8_000);
        w.write_all(&msg).await.unwrap();
        w.flush().await.unwrap();
        let mut record = vec![0u8; 1 << 16];
        let n = b.read(&mut record).await.unwrap();
        record.truncate(n);
        assert!(n > 8_000 && n < 8_000 + 100, "one record: {n} bytes");

        let (mut c, d) = tokio::io::duplex(1 << 16);
        let mut r = SecureReader::new(d, Some(ss.split().1), Vec::new());
        let marks = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        r.wake_on_whole_records({
            let marks = marks.clone();
            move |n| {
                marks.lock().unwrap().push(n);
                Ok(())
            }
        });
        c.write_all(&confirm).await.unwrap();
        c.write_all(&record[..1_000]).await.unwrap();
        let mut got = vec![0u8; 1 << 16];
        {
            let mut read = Box::pin(r.read(&mut got));
            assert!(
                poll_once(&mut read).await.is_none(),
                "a part of a record is not data"
            );
        }
        assert_eq!(
            *marks.lock().unwrap(),
            vec![n - 1_000],
            "what the record lacks"
        );
        c.write_all(&record[1_000..]).await.unwrap();
        let k = r.read(&mut got).await.unwrap();
        assert_eq!(&got[..k], &msg[..]);
        {
            let mut read = Box::pin(r.read(&mut got));
            assert!(
                poll_once(&mut read).await.is_none(),
                "nothing more was sent"
            );
        }
        // Before waiting with no record begun, the mark is back at 1: a small record that
        // comes next wakes the reader.
        assert_eq!(*marks.lock().unwrap(), vec![n - 1_000, 1]);
        w.write_all(b"ping").await.unwrap();
        w.flush().await.unwrap();
        let k = b.read(&mut record).await.unwrap();
        c.write_all(&record[..k]).await.unwrap();
        let k = r.read(&mut got).await.unwrap();
        assert_eq!(&got[..k], b"ping");
        // Below LOW_WATER_MIN nothing changes: no system call per small record.
        assert_eq!(*marks.lock().unwrap(), vec![n - 1_000, 1]);
    }

    #[tokio::test]
    async fn every_mode_through_every_api() {
        for mode in Mode::ALL.iter().copied() {
            let (mut w, mut r) = pipe(mode, 1 << 16).await;
            let msg = data(300_001);
            let sender = tokio::spawn({
                let msg = msg.clone();
                async move {
                    // poll_write in odd pieces, then the reserve/commit path, then shutdown.
                    for piece in msg[..100_000].chunks(4_099) {
                        w.write_all(piece).await.unwrap();
                    }
                    let mut src = &msg[100_000..];
                    copy_in(&mut src, &mut w, u64::MAX, |_| {}).await.unwrap();
                    w.shutdown().await.unwrap();
                    w.sent()
                }
            });
            // read() into a small buffer, then fill_buf/consume through copy_out.
            let mut got = vec![0u8; 50_000];
            r.read_exact(&mut got).await.unwrap();
            let mut rest = Vec::new();
            copy_out(&mut r, &mut rest, u64::MAX, |_| {}).await.unwrap();
            got.extend_from_slice(&rest);
            assert_eq!(got, msg, "{mode}");
            assert_eq!(sender.await.unwrap(), msg.len() as u64);
            assert_eq!(
                r.read(&mut [0u8; 10]).await.unwrap(),
                0,
                "{mode}: clean end"
            );
        }
    }

    #[tokio::test]
    async fn aead_truncation_is_an_error_not_an_end() {
        let (mut w, mut r) = pipe(Mode::Aead, 1 << 16).await;
        w.write_all(b"all of the file").await.unwrap();
        w.flush().await.unwrap();
        // The peer's socket closes without the closing record (a forged FIN).
        let inner = w.inner;
        drop(inner);
        let mut got = Vec::new();
        let err = r.read_to_end(&mut got).await.unwrap_err();
        assert_eq!(got, b"all of the file", "what arrived intact is delivered");
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(
            err.to_string().contains("without its closing record"),
            "{err}"
        );
        // It stays failed.
        assert!(r.read(&mut [0u8; 4]).await.is_err());
        // In place modes have no closing record: the end is just the end.
        let (w, mut r) = pipe(Mode::Stream, 1 << 16).await;
        drop(w);
        assert_eq!(r.read(&mut [0u8; 4]).await.unwrap(), 0);
    }

    #[tokio::test]
    async fn an_abort_delivers_what_came_before_then_its_reason() {
        let (mut w, mut r) = pipe(Mode::Aead, 1 << 16).await;
        // Buffered, not yet flushed: the abort sends it first.
        w.write_all(b"half of the file").await.unwrap();
        assert!(w
            .abort(nena_proto::AbortReason::ShuttingDown)
            .await
            .unwrap());
        assert!(
            w.write_all(b"more").await.is_err(),
            "nothing after the abort"
        );
        assert!(!w
            .abort(nena_proto::AbortReason::ShuttingDown)
            .await
            .unwrap());
        let mut got = Vec::new();
        let err = r.read_to_end(&mut got).await.unwrap_err();
        assert_eq!(got, b"half of the file");
        assert!(
            err.to_string()
                .contains("the peer aborted the session: it is shutting down"),
            "{err}"
        );
        // Stream mode has no room for a reason: nothing is written, the caller resets.
        let (mut w, mut r) = pipe(Mode::Stream, 1 << 16).await;
        w.write_all(b"abc").await.unwrap();
        w.flush().await.unwrap();
        assert!(!w
            .abort(nena_proto::AbortReason::ShuttingDown)
            .await
            .unwrap());
        drop(w);
        let mut got = Vec::new();
        r.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"abc");
    }

    #[tokio::test]
    async fn an_altered_record_aborts_and_delivers_nothing_of_it() {
        let (w, r) = pipe(Mode::Aead, 1 << 20).await;
        let (mut w, mut r) = (w, r);
        w.write_all(&data(40_000)).await.unwrap();
        w.flush().await.unwrap();
        drop(w);
        // Pull everything off the pipe, flip one byte in the second record, replay it.
        let mut raw = Vec::new();
        r.inner.read_to_end(&mut raw).await.unwrap();
        let first = nena_proto::wire::CONFIRM_LEN + nena_proto::record::MAX_RECORD;
        raw[first + 100] ^= 0x20;
        let (mut a, b) = tokio::io::duplex(1 << 20);
        a.write_all(&raw).await.unwrap();
        drop(a);
        let (_, ss_rx) = {
            // A fresh server reader with the same keys as `r`.
            let (_, r2) = pipe(Mode::Aead, 1024).await;
            ((), r2.unprot)
        };
        let mut r2 = SecureReader::new(b, ss_rx, Vec::new());
        let mut got = Vec::new();
        let err = r2.read_to_end(&mut got).await.unwrap_err();
        assert!(
            err.to_string().starts_with("integrity check failed"),
            "{err}"
        );
        assert_eq!(got, data(40_000)[..nena_proto::record::MAX_PAYLOAD]);
    }

    #[tokio::test]
    async fn requests_and_data_share_the_stream() {
        use crate::wire::Request;
        for mode in [Mode::Kato, Mode::Aead] {
            let (mut w, mut r) = pipe(mode, 1 << 16).await;
            w.write_all(&Request::Get { name: "x".into() }.encode())
                .await
                .unwrap();
            w.write_all(b"trailing data").await.unwrap();
            w.shutdown().await.unwrap();
            assert_eq!(
                r.read_request().await.unwrap().request,
                Request::Get { name: "x".into() }
            );
            let mut rest = Vec::new();
            r.read_to_end(&mut rest).await.unwrap();
            assert_eq!(rest, b"trailing data");
        }
    }

    #[tokio::test]
    async fn a_dropped_write_loses_and_repeats_nothing() {
        // A pipe of 1 KiB that nobody reads: writes block; cancel them mid-way.
        for mode in [Mode::Stream, Mode::Aead, Mode::Kato] {
            let (mut w, r) = pipe(mode, 1024).await;
            let msg = data(600_000);
            let mut accepted = 0usize;
            for _ in 0..20 {
                let fut = w.write(&msg[accepted..]);
                match tokio::time::timeout(Duration::from_millis(5), fut).await {
                    Ok(n) => accepted += n.unwrap(),
                    Err(_) => break, // dropped while pending
                }
            }
            assert!(accepted < msg.len());
            // Now drain the other end while finishing the write from where it stopped.
            let reader = tokio::spawn(async move {
                let mut r = r;
                let mut got = Vec::new();
                r.read_to_end(&mut got).await.map(|_| got)
            });
            w.write_all(&msg[accepted..]).await.unwrap();
            w.shutdown().await.unwrap();
            assert_eq!(reader.await.unwrap().unwrap(), msg, "{mode}");
        }
    }

    /// Records each `write()` it is given, whole.
    #[derive(Default)]
    struct Writes(Vec<Vec<u8>>);

    impl AsyncWrite for Writes {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.0.push(buf.to_vec());
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// The client's key confirmation queued in the writer leaves with the first message in
    /// one write, in front of it, and the server opens both: what keeps a small segment of its
    /// own from preceding a new subflow's first data (docs/KERNEL-41-BYTES.md).
    #[tokio::test]
    async fn a_queued_confirmation_leaves_with_the_first_record_in_one_write() {
        for mode in [Mode::Aead, Mode::Stream, Mode::Kato] {
            let x = nena_proto::exchange_in(mode);
            let mut w = SecureWriter::new(Writes::default(), Some(x.client.split().0));
            w.queue_raw(&x.confirm);
            let msg = data(300);
            w.write_msg(msg.clone()).await.unwrap();
            let writes = &w.get_ref().0;
            assert_eq!(writes.len(), 1, "{mode}: {} writes", writes.len());
            assert!(writes[0].starts_with(&x.confirm), "{mode}");
            assert!(writes[0].len() > x.confirm.len() + msg.len() - 1, "{mode}");
            let mut r = SecureReader::new(&writes[0][..], Some(x.server.split().1), Vec::new());
            let mut got = vec![0u8; msg.len()];
            r.read_exact(&mut got).await.unwrap();
            assert_eq!(got, msg, "{mode}");
        }
    }

    /// A request-response exchange through copy_in: each message goes out while the source
    /// waits, without a flush by the caller (the proxy depends on it).
    #[tokio::test]
    async fn copy_in_sends_what_it_has_when_the_source_waits() {
        for mode in [Mode::Aead, Mode::Stream] {
            let (mut w, mut r) = pipe(mode, 1 << 16).await;
            let (mut app, mut src) = tokio::io::duplex(1024);
            let pump =
                tokio::spawn(async move { copy_in(&mut src, &mut w, u64::MAX, |_| {}).await });
            for i in 0..3u8 {
                app.write_all(&[i; 10]).await.unwrap();
                let mut got = [0u8; 10];
                tokio::time::timeout(Duration::from_secs(5), r.read_exact(&mut got))
                    .await
                    .expect("the message must arrive while the source is idle")
                    .unwrap();
                assert_eq!(got, [i; 10]);
            }
            drop(app);
            assert_eq!(pump.await.unwrap().unwrap(), 30);
        }
    }

    #[tokio::test]
    async fn idle_timeout_and_unread() {
        let (a, _b) = tokio::io::duplex(1024);
        let mut r = SecureReader::new(a, None, b"left".to_vec());
        r.set_idle_timeout(Some(Duration::from_millis(50)));
        let mut buf = [0u8; 16];
        assert_eq!(r.read(&mut buf).await.unwrap(), 4);
        assert_eq!(&buf[..4], b"left");
        r.unread(b"ft");
        assert_eq!(r.read(&mut buf).await.unwrap(), 2);
        assert_eq!(r.received(), 4);
        let err = r.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    }
}
