//! Tests of `stream`.
use super::*;
use crate::stream::copy::{copy_in, copy_out};
use nena_proto::Mode;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncReadExt, DuplexStream};
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// A session in `mode` over an in-memory pipe: (client writer, server reader), with the
/// client's confirmation already on its way.
async fn pipe(mode: Mode, cap: usize) -> (SecureWriter<DuplexStream>, SecureReader<DuplexStream>) {
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

/// Where reads from the plain side land (the writer's payload space) is on the buffer's
/// alignment in every mode, at a session's start and after the buffer was drained and
/// given back: the kernel's copies into it are then never at a short distance from an
/// aligned source (see `writer::lead`).
#[tokio::test]
async fn the_payload_space_starts_on_the_buffers_alignment_in_every_mode() {
    for mode in [Mode::Aead, Mode::Stream, Mode::Kato, Mode::Plain] {
        let (mut w, mut r) = pipe(mode, 1 << 20).await;
        let aligned = |p: *const u8| (p as usize).is_multiple_of(nena_codec::BUF_ALIGN);
        let space = w.reserve().await.unwrap();
        assert!(aligned(space.as_ptr()), "{mode}: at the start");
        space[..1000].copy_from_slice(&data(1000));
        w.commit(1000);
        let space = w.reserve().await.unwrap();
        assert!(!aligned(space.as_ptr()), "{mode}: after 1000 bytes, not");
        w.flush().await.unwrap();
        let space = w.reserve().await.unwrap();
        assert!(aligned(space.as_ptr()), "{mode}: after a flush");
        w.write_all(&data(40_000)).await.unwrap();
        w.shutdown().await.unwrap();
        let mut got = Vec::new();
        r.read_to_end(&mut got).await.unwrap();
        let mut want = data(1000);
        want.extend(data(40_000));
        assert!(got == want, "{mode}: every byte through");
    }
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
/// own from preceding a new subflow's first data (docs/investigations/kernel-41-bytes).
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
        let pump = tokio::spawn(async move { copy_in(&mut src, &mut w, u64::MAX, |_| {}).await });
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

/// An idle session holds no buffer (they go back to the thread's pool): the writer once
/// it has flushed, or once its source waits with nothing left to send; the reader once
/// it has delivered everything and the peer is quiet. A part of a record keeps the
/// reader's buffer, and the bytes after a release arrive whole.
#[tokio::test]
async fn idle_halves_give_their_buffers_back() {
    for mode in [Mode::Aead, Mode::Stream, Mode::Kato, Mode::Plain] {
        let (mut w, mut r) = pipe(mode, 1 << 20).await;
        assert!(
            !w.holds_buffer() && !r.holds_buffer(),
            "{mode}: before any data"
        );
        w.write_all(&data(5000)).await.unwrap();
        assert!(w.holds_buffer(), "{mode}: unsent bytes");
        w.flush().await.unwrap();
        assert!(!w.holds_buffer(), "{mode}: flushed");
        let mut got = vec![0u8; 5000];
        r.read_exact(&mut got).await.unwrap();
        assert_eq!(got, data(5000), "{mode}");
        let mut one = [0u8; 1];
        {
            let mut read = Box::pin(r.read(&mut one));
            assert!(poll_once(&mut read).await.is_none(), "{mode}: peer quiet");
        }
        assert!(!r.holds_buffer(), "{mode}: all delivered, peer quiet");
        // The proxy's way in: a source that gives 10 bytes, then waits.
        let (mut app, mut src) = tokio::io::duplex(1024);
        app.write_all(&[7; 10]).await.unwrap();
        let mut seen = |_: &[u8]| {};
        assert_eq!(
            w.fill_from(&mut src, u64::MAX, &mut seen).await.unwrap(),
            10
        );
        {
            let mut fill = Box::pin(w.fill_from(&mut src, u64::MAX, &mut seen));
            assert!(poll_once(&mut fill).await.is_none(), "{mode}: source waits");
        }
        assert!(!w.holds_buffer(), "{mode}: sent while the source waits");
        let mut ten = [0u8; 10];
        r.read_exact(&mut ten).await.unwrap();
        assert_eq!(ten, [7; 10], "{mode}");
        if mode == Mode::Aead {
            // A part of a record stays buffered until the rest comes.
            w.write_all(&data(3000)).await.unwrap();
            w.flush().await.unwrap();
            let (mut wire, b) = tokio::io::duplex(1 << 16);
            let mut whole = vec![0u8; 1 << 16];
            let n = r.inner.read(&mut whole).await.unwrap();
            wire.write_all(&whole[..n / 2]).await.unwrap();
            let mut r2 = SecureReader::new(b, r.unprot.take(), Vec::new());
            let mut got = vec![0u8; 3000];
            {
                let mut read = Box::pin(r2.read_exact(&mut got));
                assert!(poll_once(&mut read).await.is_none(), "half a record");
            }
            assert!(r2.holds_buffer(), "half a record is kept");
            wire.write_all(&whole[n / 2..n]).await.unwrap();
            r2.read_exact(&mut got).await.unwrap();
            assert_eq!(got, data(3000));
        }
    }
}

/// A sink that takes writes of at most `cap` bytes and records each one: (slices,
/// bytes). It says it takes vectored writes when `vectored` is set.
struct VecSink {
    got: Vec<u8>,
    writes: Vec<(usize, usize)>,
    cap: usize,
    vectored: bool,
}

fn sink(cap: usize) -> VecSink {
    VecSink {
        got: Vec::new(),
        writes: Vec::new(),
        cap,
        vectored: true,
    }
}

impl AsyncWrite for VecSink {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let k = buf.len().min(self.cap);
        self.got.extend_from_slice(&buf[..k]);
        self.writes.push((1, k));
        Poll::Ready(Ok(k))
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut n = 0;
        for b in bufs {
            let k = b.len().min(self.cap - n);
            self.got.extend_from_slice(&b[..k]);
            n += k;
        }
        self.writes.push((bufs.len(), n));
        Poll::Ready(Ok(n))
    }
    fn is_write_vectored(&self) -> bool {
        self.vectored
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[tokio::test]
async fn copy_out_writes_the_records_already_read_together_and_every_byte_once() {
    let payload = nena_proto::record::MAX_PAYLOAD;
    let n = 6 * payload + 100;
    for mode in [Mode::Aead, Mode::Stream, Mode::Kato] {
        let (mut w, mut r) = pipe(mode, 1 << 20).await;
        w.write_all(&data(n)).await.unwrap();
        w.shutdown().await.unwrap();
        let mut sink = sink(40_000);
        let moved = copy_out(&mut r, &mut sink, u64::MAX, |_| {}).await.unwrap();
        assert_eq!(moved, n as u64, "{mode:?}");
        assert!(sink.got == data(n), "{mode:?}: the bytes differ");
        if mode == Mode::Aead {
            // Seven records, all in the buffer: the first write carries several.
            assert!(sink.writes[0].0 > 1, "{:?}", sink.writes);
        }
        assert!(sink.writes.iter().all(|w| w.1 <= 40_000));
    }
    // A limit in the middle of a record stops there, and the rest is still readable.
    let (mut w, mut r) = pipe(Mode::Aead, 1 << 20).await;
    w.write_all(&data(n)).await.unwrap();
    w.shutdown().await.unwrap();
    let mut sink = sink(40_000);
    let cut = 2 * payload + 7;
    assert_eq!(
        copy_out(&mut r, &mut sink, cut as u64, |_| {})
            .await
            .unwrap(),
        cut as u64
    );
    let mut rest = Vec::new();
    r.read_to_end(&mut rest).await.unwrap();
    sink.got.extend_from_slice(&rest);
    assert!(sink.got == data(n));
}

/// A bulk stream of full records through the proxy's 64 KiB buffers, which hold a whole
/// number of records: the writer sends four per write, and at the reader no record is cut
/// by the buffer's end and moved to its front, but for the one move that aligns the stream
/// after the short units at its start (the key confirmation and a first message). With
/// 65,536 bytes (3.99 records) the writer sent three per write and nearly every read
/// moved most of a record.
#[tokio::test]
async fn full_records_are_read_whole_and_not_moved() {
    let payload = nena_proto::record::MAX_PAYLOAD;
    let record = nena_proto::record::MAX_RECORD;
    let x = nena_proto::exchange_in(Mode::Aead);
    let mut w = SecureWriter::with_capacity(Writes::default(), Some(x.client.split().0), PROXY_BUF);
    w.queue_raw(&x.confirm);
    w.write_msg(data(300)).await.unwrap();
    let n = 40 * payload;
    w.write_all(&data(n)).await.unwrap();
    w.shutdown().await.unwrap();
    let writes = &w.get_ref().0;
    let four = writes.iter().filter(|w| w.len() == 4 * record).count();
    assert!(
        four >= 9,
        "writes of four records: {four} of {}",
        writes.len()
    );
    let wire: Vec<u8> = writes.concat();
    let mut r =
        SecureReader::with_capacity(&wire[..], Some(x.server.split().1), Vec::new(), PROXY_BUF);
    let mut first = vec![0u8; 300];
    r.read_exact(&mut first).await.unwrap();
    assert_eq!(first, data(300));
    let mut out = sink(usize::MAX);
    assert_eq!(
        copy_out(&mut r, &mut out, u64::MAX, |_| {}).await.unwrap(),
        n as u64
    );
    assert!(out.got == data(n), "the bytes differ");
    assert!(
        r.moved() <= record as u64,
        "{} bytes moved for 40 records (at most one record's alignment)",
        r.moved()
    );
}

#[tokio::test]
async fn a_failure_behind_good_records_is_reported_after_them() {
    let payload = nena_proto::record::MAX_PAYLOAD;
    let (mut w, mut r) = pipe(Mode::Aead, 1 << 20).await;
    w.write_all(&data(5 * payload)).await.unwrap();
    w.shutdown().await.unwrap();
    drop(w);
    let mut raw = Vec::new();
    r.inner.read_to_end(&mut raw).await.unwrap();
    // Flip a byte of the fourth record.
    let at = nena_proto::wire::CONFIRM_LEN + 3 * nena_proto::record::MAX_RECORD + 50;
    raw[at] ^= 1;
    let (mut a, b) = tokio::io::duplex(1 << 20);
    a.write_all(&raw).await.unwrap();
    drop(a);
    let mut r2 = SecureReader::new(b, r.unprot.take(), Vec::new());
    let mut sink = sink(40_000);
    let err = copy_out(&mut r2, &mut sink, u64::MAX, |_| {})
        .await
        .unwrap_err();
    assert!(
        err.to_string().starts_with("integrity check failed"),
        "{err}"
    );
    assert!(
        sink.got == data(3 * payload),
        "exactly the three good records"
    );
    // The failure stays: the reader does not go on past it.
    let mut buf = [0u8; 8];
    assert!(r2.read(&mut buf).await.is_err());
}

/// A source that fills every buffer it is given, like `readv` on a socket with a full
/// receive queue, at most `caps[i % caps.len()]` bytes in its i-th call, and counts
/// its calls.
struct Slots {
    data: Vec<u8>,
    at: usize,
    calls: usize,
    caps: Vec<usize>,
}

impl Slots {
    fn new(data: Vec<u8>, caps: Vec<usize>) -> Self {
        Slots {
            data,
            at: 0,
            calls: 0,
            caps,
        }
    }

    /// What the next call may give.
    fn cap(&self) -> usize {
        let c = self.caps[self.calls % self.caps.len()];
        c.min(self.data.len() - self.at)
    }
}

impl tokio::io::AsyncRead for Slots {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let k = buf.remaining().min(self.cap());
        let at = self.at;
        buf.put_slice(&self.data[at..at + k]);
        self.at += k;
        self.calls += 1;
        Poll::Ready(Ok(()))
    }
}

impl crate::stream::copy::ReadSlots for Slots {
    fn poll_read_slots(
        &mut self,
        _: &mut Context<'_>,
        bufs: &mut [io::IoSliceMut<'_>],
    ) -> Poll<io::Result<usize>> {
        let (mut n, cap) = (0, self.cap());
        for b in bufs.iter_mut() {
            let k = b.len().min(cap - n);
            b[..k].copy_from_slice(&self.data[self.at..self.at + k]);
            (self.at, n) = (self.at + k, n + k);
        }
        self.calls += 1;
        Poll::Ready(Ok(n))
    }
}

#[tokio::test]
async fn copy_in_slots_fills_several_records_per_read_and_keeps_the_stream() {
    use crate::stream::copy::copy_in_slots;
    let payload = nena_proto::record::MAX_PAYLOAD;
    let n = 9 * payload + 1234;
    for (mode, limit) in [
        (Mode::Aead, u64::MAX),
        (Mode::Aead, 4 * payload as u64 + 9),
        (Mode::Stream, u64::MAX),
        (Mode::Kato, u64::MAX),
    ] {
        let (mut w, mut r) = pipe(mode, 4 << 20).await;
        let mut src = Slots::new(data(n), vec![usize::MAX]);
        let mut seen = Vec::new();
        let moved = copy_in_slots(&mut src, &mut w, limit, |b| seen.extend_from_slice(b))
            .await
            .unwrap();
        let want = limit.min(n as u64) as usize;
        assert_eq!(moved, want as u64, "{mode:?}");
        assert!(seen == data(want), "{mode:?}: seen differs");
        w.shutdown().await.unwrap();
        let mut got = Vec::new();
        r.read_to_end(&mut got).await.unwrap();
        assert!(got == data(want), "{mode:?}: the stream differs");
        if mode == Mode::Aead && limit == u64::MAX {
            // Ten records through a 256 KiB buffer: far fewer reads than records.
            assert!(src.calls < 6, "{} reads", src.calls);
        }
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

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// `aead` writes of any sizes, some completing a record (sealed from the caller's
    /// bytes straight into the buffer) and some not (copied in): the reader gets every
    /// byte in order, and the writer's records are full but for the last.
    #[test]
    fn aead_writes_of_any_size_keep_the_stream(
        sizes in proptest::collection::vec(1usize..40_000, 1..12),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (got, want) = rt.block_on(async move {
            let (mut w, mut r) = pipe(Mode::Aead, 1 << 22).await;
            let input = data(sizes.iter().sum());
            let mut at = 0;
            for n in sizes {
                let mut piece = &input[at..at + n];
                while !piece.is_empty() {
                    let k = w.write(piece).await.unwrap();
                    piece = &piece[k..];
                }
                at += n;
            }
            w.shutdown().await.unwrap();
            assert_eq!(w.sent(), input.len() as u64);
            let mut got = Vec::new();
            r.read_to_end(&mut got).await.unwrap();
            (got, input)
        });
        proptest::prop_assert!(got == want, "{} bytes out, {} in", got.len(), want.len());
    }

    /// Whatever the source gives per read, the sink takes per write (vectored or not),
    /// a partial record before and a limit: the bytes that come out are the bytes that
    /// went in.
    #[test]
    fn slots_and_vectored_writes_keep_the_stream(
        mode in proptest::sample::select(vec![Mode::Aead, Mode::Stream, Mode::Kato]),
        prefix in 0usize..40_000,
        n in 0usize..200_000,
        limit in proptest::option::of(0u64..200_000),
        caps in proptest::collection::vec(1usize..70_000, 1..5),
        sink_cap in 1usize..70_000,
        vectored in proptest::bool::ANY,
    ) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (got, want) = rt.block_on(async move {
            let (mut w, mut r) = pipe(mode, 1 << 22).await;
            let input = data(prefix + n);
            w.write_all(&input[..prefix]).await.unwrap();
            let mut src = Slots::new(input[prefix..].to_vec(), caps);
            let limit = limit.unwrap_or(u64::MAX);
            let moved = crate::stream::copy::copy_in_slots(&mut src, &mut w, limit, |_| {})
                .await
                .unwrap();
            assert_eq!(moved, limit.min(n as u64));
            w.shutdown().await.unwrap();
            let mut out = VecSink { vectored, ..sink(sink_cap) };
            let total = copy_out(&mut r, &mut out, u64::MAX, |_| {}).await.unwrap();
            assert_eq!(total as usize, out.got.len());
            // A sink without vectored writes is given one unit at a time.
            assert!(vectored || out.writes.iter().all(|w| w.0 == 1));
            (out.got, input[..prefix + moved as usize].to_vec())
        });
        proptest::prop_assert!(got == want, "{} bytes out, {} in", got.len(), want.len());
    }
}
