//! The incoming half of a session: [`SecureReader`] reads what the peer sent and opens it
//! (see the parent module for zero copy, cancel safety and ends).

use super::{session_error, BULK_BUF, MAX_HEADER};
use crate::error::msg::MsgError;
use crate::stream::low_water::LowWater;
use crate::wire::{Reply, RequestMsg, WireError};
use nena_codec::AlignedBuf;
use nena_proto::{Opened, SessionInfo, Unprotector};
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, ReadBuf};

/// The incoming half: reads and opens.
pub struct SecureReader<R> {
    pub(super) inner: R,
    pub(super) unprot: Option<Unprotector>,
    /// Empty (given back to [`super::pool`]) while nothing is buffered and the socket has
    /// nothing to give; `size` bytes while it holds input.
    buf: AlignedBuf,
    size: usize,
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
    /// The peer's flow-end record was read: reads give the end of stream until
    /// [`SecureReader::next_flow`] (a session reused flow after flow).
    flow_ended: bool,
    failed: Option<(io::ErrorKind, String)>,
    received: u64,
    idle: Option<Duration>,
    idle_timer: Option<Pin<Box<tokio::time::Sleep>>>,
    low_water: Option<LowWater>,
    /// Units opened behind the one being delivered ([`SecureReader::poll_fill_ahead`]), in
    /// order: (plain, plain_end, unit_end, whether the unit is the peer's flow end), offsets
    /// in `buf`; nothing is opened beyond a flow's end.
    ahead: VecDeque<(usize, usize, usize, bool)>,
    /// The error met opening ahead: delivered once the units before it are.
    ahead_failed: Option<io::Error>,
    /// Bytes moved to the buffer's front so far (a unit cut by the buffer's end).
    moved: u64,
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
        let mut size = cap.max(2 * need);
        if let Some(r) = unprot.as_ref().and_then(|u| u.record_len()) {
            // A whole number of full records: a bulk stream of them, read from the buffer's
            // start, ends each full read on a record's end, so none is cut by the buffer's
            // end and moved to its front (64 KiB held 3.99 records: a move of most of a
            // record per read).
            size = size.div_ceil(r) * r;
        }
        let size = size.max(leftover.len());
        let mut buf = AlignedBuf::default();
        if !leftover.is_empty() {
            super::pool::hold(&mut buf, size);
            buf[..leftover.len()].copy_from_slice(&leftover);
        }
        SecureReader {
            inner,
            unprot,
            buf,
            size,
            start: 0,
            end: leftover.len(),
            plain: 0,
            plain_end: 0,
            unit_end: 0,
            pushback: Vec::new(),
            eof: false,
            flow_ended: false,
            failed: None,
            received: 0,
            idle: None,
            idle_timer: None,
            low_water: None,
            ahead: VecDeque::new(),
            ahead_failed: None,
            moved: 0,
        }
    }

    /// Wake on whole records: `set` sets the socket's receive low-water mark (`SO_RCVLOWAT`)
    /// to what an incomplete record lacks before each wait ([`crate::stream::low_water`]).
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

    /// Whether the peer ended its flow here with a flow-end record (`aead`, a session
    /// reused flow after flow): reads give the end of stream until
    /// [`SecureReader::next_flow`]. A closing record or the transport's end is not this.
    pub fn flow_ended(&self) -> bool {
        self.flow_ended && self.pushback.is_empty()
    }

    /// Reads on into the peer's next flow, after its flow-end record.
    pub fn next_flow(&mut self) {
        debug_assert!(self.flow_ended, "next_flow before the flow's end");
        self.flow_ended = false;
    }

    /// Give back bytes that a caller consumed but that belong to the next reader of the
    /// stream. They are delivered before anything else.
    /// [`AsyncBufRead::consume`] that first zeroes the bytes consumed (a message that may hold
    /// the access token, [`SecureReader::read_msg`]), where they lie in the buffer.
    fn consume_wiping(&mut self, amt: usize) {
        use zeroize::Zeroize;
        if self.pushback.is_empty() {
            let at = self.plain;
            self.buf[at..at + amt].zeroize();
        } else {
            let n = amt.min(self.pushback.len());
            self.pushback[..n].zeroize();
        }
        Pin::new(&mut *self).consume(amt);
    }

    pub(super) fn unread(&mut self, data: &[u8]) {
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

    /// Gives the buffer back to [`super::pool`]; only when it holds nothing (no input, no
    /// plaintext, nothing opened ahead).
    fn release(&mut self) {
        debug_assert!(self.start.max(self.unit_end) == self.end && self.ahead.is_empty());
        (self.start, self.end, self.unit_end) = (0, 0, 0);
        (self.plain, self.plain_end) = (0, 0);
        super::pool::release(&mut self.buf);
    }

    /// Gives the buffer back once everything in it was consumed: a session whose reader
    /// got what it waited for (a reply, a whole message) and is not read again until later
    /// keeps no buffer meanwhile, as one waiting on its socket does not.
    fn release_if_drained(&mut self) {
        if !self.buf.is_empty()
            && self.plain == self.plain_end
            && self.ahead.is_empty()
            && self.ahead_failed.is_none()
            && self.start.max(self.unit_end) == self.end
        {
            self.release();
        }
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
            // The peer's flow ended: nothing more (an end of stream) until the next flow.
            if self.flow_ended {
                return Poll::Ready(Ok(()));
            }
            // Units opened ahead come first, then what failed behind them.
            if let Some((plain, plain_end, unit_end, ends_flow)) = self.ahead.pop_front() {
                (self.plain, self.plain_end, self.unit_end) = (plain, plain_end, unit_end);
                self.flow_ended = ends_flow;
                continue;
            }
            if let Some(e) = self.ahead_failed.take() {
                return Poll::Ready(Err(self.fail(e)));
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
                    Ok(Opened::FlowEnd { consumed }) => {
                        self.start += consumed;
                        self.unit_end = self.start;
                        self.flow_ended = true;
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
            super::pool::hold(&mut self.buf, self.size);
            // Room for the rest of the unit: move the pending input to the front if needed.
            if self.start + want > self.buf.len() || self.end == self.buf.len() {
                self.buf.copy_within(self.start..self.end, 0);
                self.moved += (self.end - self.start) as u64;
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
                Poll::Pending => {
                    if self.start == self.end {
                        // Nothing buffered while the peer is quiet: no buffer either.
                        self.release();
                    }
                    return Poll::Pending;
                }
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

    /// [`AsyncBufRead::poll_fill_buf`] for many units at once: makes plaintext available (as
    /// `poll_fill_buf`), then opens the whole units already read behind it, up to `max` in
    /// all, without reading from the socket. [`SecureReader::pending`] shows them,
    /// [`SecureReader::consume_pending`] takes them: a proxy writes them to its plain side
    /// with one vectored write instead of one write per record. A failure behind the first
    /// unit is returned once the units before it are consumed, so every good unit is
    /// delivered and no byte of a failing one.
    pub fn poll_fill_ahead(&mut self, cx: &mut Context<'_>, max: usize) -> Poll<io::Result<()>> {
        if !self.pushback.is_empty() {
            return Poll::Ready(Ok(()));
        }
        ready!(self.poll_fill(cx))?;
        let mut at = self.ahead.back().map_or(self.unit_end, |u| u.2);
        let flow_over = |r: &Self| r.flow_ended || r.ahead.back().is_some_and(|u| u.3);
        while 1 + self.ahead.len() < max
            && self.ahead_failed.is_none()
            && at < self.end
            && !flow_over(self)
        {
            let Some(u) = self.unprot.as_mut() else {
                break; // raw: the unit being delivered holds everything read
            };
            match u.open(&mut self.buf[at..self.end]) {
                Ok(Opened::Data { consumed, plain }) => {
                    self.ahead
                        .push_back((at + plain.start, at + plain.end, at + consumed, false));
                    at += consumed;
                }
                Ok(Opened::Close { consumed }) => {
                    at += consumed;
                    self.ahead.push_back((at, at, at, false));
                    break;
                }
                Ok(Opened::FlowEnd { consumed }) => {
                    at += consumed;
                    self.ahead.push_back((at, at, at, true));
                    break;
                }
                Ok(Opened::NeedMore { .. }) => break,
                Err(e) => self.ahead_failed = Some(session_error(e)),
            }
        }
        Poll::Ready(Ok(()))
    }

    /// The plaintext [`SecureReader::poll_fill_ahead`] made available, in order (nothing at
    /// a clean end).
    pub fn pending(&self) -> impl Iterator<Item = &[u8]> {
        let first: &[u8] = if self.pushback.is_empty() {
            &self.buf[self.plain..self.plain_end]
        } else {
            &self.pushback
        };
        let rest = self
            .ahead
            .iter()
            .filter(|_| self.pushback.is_empty() && !self.flow_ended)
            .take_while(|u| !u.3);
        std::iter::once(first)
            .chain(rest.map(|&(p, e, _, _)| &self.buf[p..e]))
            .filter(|s| !s.is_empty())
    }

    /// Takes the first `n` bytes of [`SecureReader::pending`].
    pub fn consume_pending(&mut self, mut n: usize) {
        while n > 0 {
            let here = if self.pushback.is_empty() {
                self.plain_end - self.plain
            } else {
                self.pushback.len()
            };
            let take = here.min(n);
            Pin::new(&mut *self).consume(take);
            n -= take;
            if n > 0 {
                let (plain, plain_end, unit_end, ends_flow) = self
                    .ahead
                    .pop_front()
                    .expect("consume_pending beyond what is pending");
                debug_assert!(!ends_flow, "consume_pending beyond the flow's end");
                (self.plain, self.plain_end, self.unit_end) = (plain, plain_end, unit_end);
            }
        }
    }

    /// Whether the reader holds a buffer now (it gives it back while idle).
    pub(super) fn holds_buffer(&self) -> bool {
        !self.buf.is_empty()
    }

    /// Bytes moved within the buffer so far, to keep a unit cut by its end whole.
    pub fn moved(&self) -> u64 {
        self.moved
    }

    /// Whether reads can go straight into the caller's buffer now.
    fn direct(&self) -> bool {
        self.pushback.is_empty()
            && self.plain == self.plain_end
            && self.ahead.is_empty()
            && self.ahead_failed.is_none()
            && self.start.max(self.unit_end) == self.end
            && !self.eof
            && !self.flow_ended
            && self.failed.is_none()
            && !matches!(&self.unprot, Some(u) if !u.is_in_place())
    }

    /// Reads one request or reply with `decode`; bytes read past it stay for the next read.
    async fn read_msg<T>(
        &mut self,
        what: &str,
        decode: impl Fn(&[u8]) -> Result<Option<(T, usize)>, WireError>,
    ) -> Result<T, MsgError> {
        // A request may carry the access token: reserved whole (no reallocation leaves a
        // copy), wiped when dropped, and the bytes taken from the buffer below are wiped there.
        let mut acc = zeroize::Zeroizing::new(Vec::with_capacity(MAX_HEADER + 1));
        loop {
            let avail = self.fill_buf().await?;
            if avail.is_empty() {
                let e = if acc.is_empty() {
                    io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        crate::error::msg::EndedBefore { what: what.into() },
                    )
                } else {
                    io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("connection closed in the middle of the {what}"),
                    )
                };
                return Err(MsgError::Io(e));
            }
            let take = avail.len().min(MAX_HEADER + 1 - acc.len());
            acc.extend_from_slice(&avail[..take]);
            self.consume_wiping(take);
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

    /// Read the proxy server's answer to a datagram plane offer of version `offered`
    /// (after its ok reply).
    pub async fn read_plane_answer(
        &mut self,
        offered: u8,
    ) -> Result<crate::wire::plane::PlaneAnswer, MsgError> {
        self.read_msg("datagram plane answer", |b| {
            Ok(crate::wire::plane::PlaneAnswer::decode(b, offered)?)
        })
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
            // Zero copy: read into the caller's buffer and open the new bytes in place. The
            // reader's own buffer holds nothing meanwhile.
            if this.holds_buffer() {
                this.release();
            }
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
        this.release_if_drained();
    }
}
