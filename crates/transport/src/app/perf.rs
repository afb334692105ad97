//! The perf test (`nena perf` against `nena serve`): chunked streams of a known pattern in one
//! or both directions at once, checked byte for byte by the receiver, with interval samples.
//!
//! Both ends run the same code: a sending half (data chunks, or just the end marker when this
//! direction carries nothing) and a receiving half, concurrently; then each writes its verdict
//! on what it received and reads the peer's verdict on what it sent (see [`crate::wire`]).

use crate::error::{Doing, During, Error, Result, Transfer};
use crate::stream::{SecureReader, SecureWriter};
use crate::wire::{
    chunk_end, chunk_header, ChunkDecoder, ChunkEvent, PatternCheck, Reply, Status, MAX_CHUNK,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt};

/// Payload bytes of one perf chunk.
pub const CHUNK: usize = 256 * 1024 - 4;
const _: () = assert!(CHUNK as u32 <= MAX_CHUNK);

/// How much one direction sends.
#[derive(Debug, Clone, Copy)]
pub enum Limit {
    /// Send nothing (only the end marker).
    Nothing,
    /// Exactly this many payload bytes.
    Bytes(u64),
    /// Until this long after the start.
    Time(Duration),
}

/// Live byte counters of a perf run (read by interval reports).
#[derive(Debug, Default)]
pub struct Counters {
    pub sent: AtomicU64,
    pub received: AtomicU64,
}

/// What one end saw.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct PerfOutcome {
    /// Payload bytes this end sent.
    pub sent: u64,
    /// Payload bytes this end received (all matched the pattern).
    pub received: u64,
    /// From the start of the data phase to the peer's verdict.
    pub seconds: f64,
    /// When this end wrote its last byte (its end marker flushed), since the start.
    pub send_seconds: f64,
    /// When this end read the peer's end marker (the last byte of the peer's data).
    pub receive_seconds: f64,
}

/// This end's data: chunks of the pattern until `limit`, without the end marker. Returns
/// the payload bytes sent.
async fn send_data<W: AsyncWrite + Unpin>(
    w: &mut SecureWriter<W>,
    limit: Limit,
    pattern: &[u8],
    counters: &Counters,
    start: Instant,
) -> Result<u64> {
    let mut off = 0usize;
    let mut total = 0u64;
    loop {
        let len = match limit {
            Limit::Nothing => 0,
            Limit::Bytes(b) => (b - total).min(CHUNK as u64) as usize,
            Limit::Time(d) => {
                if start.elapsed() >= d {
                    0
                } else {
                    CHUNK
                }
            }
        };
        if len == 0 {
            break;
        }
        w.write_all(&chunk_header(len as u32))
            .await
            .during(Doing::SendingPerfData)?;
        // The pattern goes from its own buffer into the writer's, protected on the way in
        // (in place modes: one pass, no copy before the keystream or the scrambling).
        let mut left = len;
        while left > 0 {
            let n = left.min(pattern.len() - off);
            let k = w
                .write(&pattern[off..off + n])
                .await
                .during(Doing::SendingPerfData)?;
            if k == 0 {
                return Err(Transfer::PerfWriterStuck.into());
            }
            off = (off + k) % pattern.len();
            left -= k;
            total += k as u64;
            counters.sent.fetch_add(k as u64, Ordering::Relaxed);
        }
    }
    Ok(total)
}

/// The end marker after `total` payload bytes, flushed.
async fn send_end<W: AsyncWrite + Unpin>(w: &mut SecureWriter<W>, total: u64) -> Result<()> {
    w.write_all(&chunk_end(total))
        .await
        .during(Doing::SendingPerfEnd)?;
    w.flush().await.during(Doing::SendingPerfEnd)
}

/// This end's whole direction: its data, then its end marker.
async fn send_half<W: AsyncWrite + Unpin>(
    w: &mut SecureWriter<W>,
    limit: Limit,
    pattern: &[u8],
    counters: &Counters,
    start: Instant,
) -> Result<u64> {
    let total = send_data(w, limit, pattern, counters, start).await?;
    send_end(w, total).await?;
    Ok(total)
}

/// Returns (bytes received, bytes the peer says it sent, pattern matched).
async fn recv_half<R: AsyncRead + Unpin>(
    r: &mut SecureReader<R>,
    pattern: &[u8],
    counters: &Counters,
) -> Result<(u64, u64, bool)> {
    let mut dec = ChunkDecoder::new();
    let mut check = PatternCheck::new(pattern);
    let mut total = 0u64;
    loop {
        let buf = r.fill_buf().await.during(Doing::ReceivingPerfData)?;
        if buf.is_empty() {
            return Err(Transfer::PerfCut { received: total }.into());
        }
        let n = buf.len();
        let mut pos = 0;
        while pos < n {
            let (used, ev) = dec.next(&buf[pos..n])?;
            match ev {
                ChunkEvent::Header => {}
                ChunkEvent::Data => {
                    check.feed(&buf[pos..pos + used]);
                    total += used as u64;
                    counters.received.fetch_add(used as u64, Ordering::Relaxed);
                }
                ChunkEvent::End(claimed) => {
                    r.consume(pos + used);
                    return Ok((total, claimed, check.ok()));
                }
            }
            pos += used;
        }
        r.consume(n);
    }
}

/// Run one end of a perf test on an established session (after the request and its reply).
/// Fails unless everything this end received matched, and the peer confirms that it
/// received everything this end sent.
pub async fn run<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    r: &mut SecureReader<R>,
    w: &mut SecureWriter<W>,
    limit: Limit,
    counters: &Counters,
) -> Result<PerfOutcome> {
    let pattern = crate::wire::pattern();
    let start = Instant::now();
    let ((sent, send_seconds), (received, claimed, matched, receive_seconds)) = tokio::try_join!(
        async {
            let n = send_half(w, limit, pattern, counters, start).await?;
            Ok::<_, Error>((n, start.elapsed().as_secs_f64()))
        },
        async {
            let (n, claimed, matched) = recv_half(r, pattern, counters).await?;
            Ok((n, claimed, matched, start.elapsed().as_secs_f64()))
        }
    )?;
    verdicts(r, w, sent, received, claimed, matched).await?;
    let seconds = start.elapsed().as_secs_f64();
    Ok(PerfOutcome {
        sent,
        received,
        seconds,
        send_seconds,
        receive_seconds,
    })
}

/// A perf test held in its middle: both directions' data carried and checked, this end's
/// end marker not yet sent, so the session stays open and idle until [`Held::finish`]
/// (`nena bench sessions` holds thousands of sessions this way against one `nena serve`).
#[derive(Debug)]
pub struct Held {
    sent: u64,
    received: u64,
    claimed: u64,
}

impl Held {
    /// On an established session whose perf request asked for `bytes` each way: send them
    /// and, meanwhile, receive the peer's whole direction (its end marker included). Fails
    /// when what arrived does not match the pattern or the peer's count.
    pub async fn carry<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
        r: &mut SecureReader<R>,
        w: &mut SecureWriter<W>,
        bytes: u64,
    ) -> Result<Held> {
        let pattern = crate::wire::pattern();
        let counters = Counters::default();
        let start = Instant::now();
        let (sent, (received, claimed, matched)) = tokio::try_join!(
            async {
                let n = send_data(w, Limit::Bytes(bytes), pattern, &counters, start).await?;
                w.flush().await.during(Doing::SendingPerfData)?;
                Ok::<_, Error>(n)
            },
            recv_half(r, pattern, &counters)
        )?;
        if !matched || claimed != received {
            return Err(Transfer::PerfFailed {
                msg: format!(
                    "{received} bytes arrived, the peer says {claimed}, pattern matched: {matched}"
                ),
            }
            .into());
        }
        Ok(Held {
            sent,
            received,
            claimed,
        })
    }

    /// Send the end marker and exchange the verdicts: the test ends as [`run`]'s does.
    pub async fn finish<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
        self,
        r: &mut SecureReader<R>,
        w: &mut SecureWriter<W>,
    ) -> Result<()> {
        send_end(w, self.sent).await?;
        verdicts(r, w, self.sent, self.received, self.claimed, true).await
    }
}

/// The end of a perf test, once both directions ended: this end's verdict on what it received
/// (`received` bytes, the peer's end marker claiming `claimed`, the pattern `matched`) goes
/// out, the peer's on what this end `sent` comes in. Fails unless both are good.
async fn verdicts<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    r: &mut SecureReader<R>,
    w: &mut SecureWriter<W>,
    sent: u64,
    received: u64,
    claimed: u64,
    matched: bool,
) -> Result<()> {
    let verdict = if !matched {
        Reply::err(Status::Corrupt, "perf data did not match the pattern")
    } else if claimed != received {
        Reply::err(
            Status::Corrupt,
            format!("peer says it sent {claimed} bytes, {received} arrived"),
        )
    } else {
        Reply::ok(received)
    };
    w.write_msg(verdict.encode())
        .await
        .during(Doing::SendingPerfVerdict)?;
    let peer = r.read_reply().await.during(Doing::AwaitingPerfVerdict)?;
    if !matched || claimed != received {
        return Err(Transfer::PerfFailed { msg: verdict.msg }.into());
    }
    if !peer.is_ok() {
        return Err(Transfer::PerfPeerReports {
            status: peer.status,
            msg: peer.msg,
        }
        .into());
    }
    if peer.size != sent {
        return Err(Transfer::PerfShort {
            got: peer.size,
            sent,
        }
        .into());
    }
    Ok(())
}

/// One interval report.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Sample {
    /// End of the interval, seconds since the start.
    pub t: f64,
    /// Length of the interval in seconds.
    pub secs: f64,
    pub sent: u64,
    pub received: u64,
    /// Wall-clock time of the end of the interval, seconds since the Unix epoch (to line
    /// the samples up with events outside the process, e.g. a link taken down).
    pub unix: f64,
}

/// Drive `fut` and call `on_sample` every `interval` with the bytes moved in that interval.
pub async fn with_intervals<T>(
    fut: impl std::future::Future<Output = T>,
    counters: &Counters,
    interval: Option<Duration>,
    mut on_sample: impl FnMut(Sample),
) -> T {
    let Some(iv) = interval else { return fut.await };
    tokio::pin!(fut);
    let start = Instant::now();
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + iv, iv);
    let (mut last_t, mut last_s, mut last_r) = (0.0, 0, 0);
    loop {
        tokio::select! {
            out = &mut fut => return out,
            _ = ticker.tick() => {
                let t = start.elapsed().as_secs_f64();
                let s = counters.sent.load(Ordering::Relaxed);
                let r = counters.received.load(Ordering::Relaxed);
                let unix = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0.0, |d| d.as_secs_f64());
                on_sample(Sample {
                    t,
                    secs: t - last_t,
                    sent: s - last_s,
                    received: r - last_r,
                    unix,
                });
                (last_t, last_s, last_r) = (t, s, r);
            }
        }
    }
}

/// Where the measurement starts when the first seconds of a run are omitted (the warm-up:
/// slow start, the first losses at a bottleneck), as iperf3's `--omit` does.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Mark {
    /// Seconds since the start.
    pub t: f64,
    /// Bytes sent by then that the peer had acknowledged (sent minus what was still queued
    /// in the socket unacknowledged).
    pub sent_acked: u64,
    /// Bytes received by then.
    pub received: u64,
}

/// Drive `fut`; `at` after the start, take a [`Mark`] from the counters, with `unacked()`
/// giving the bytes written but not yet acknowledged at that moment. The mark is `None`
/// when `fut` ends before `at` (or `at` is `None`).
pub async fn with_mark<T>(
    fut: impl std::future::Future<Output = T>,
    counters: &Counters,
    at: Option<Duration>,
    unacked: impl FnOnce() -> u64,
) -> (T, Option<Mark>) {
    let Some(at) = at else {
        return (fut.await, None);
    };
    tokio::pin!(fut);
    let start = Instant::now();
    tokio::select! {
        out = &mut fut => return (out, None),
        _ = tokio::time::sleep(at) => {}
    }
    let sent = counters.sent.load(Ordering::Relaxed);
    let mark = Mark {
        t: start.elapsed().as_secs_f64(),
        sent_acked: sent.saturating_sub(unacked()),
        received: counters.received.load(Ordering::Relaxed),
    };
    (fut.await, Some(mark))
}

/// Goodput in Mbit/s of `bytes` moved in `seconds`, or, given a mark `(t, bytes by then)` of
/// this direction, of what moved after it.
pub fn goodput(bytes: u64, seconds: f64, mark: Option<(f64, u64)>) -> f64 {
    match mark {
        Some((t, at)) => mbit_s(bytes.saturating_sub(at), seconds - t),
        None => mbit_s(bytes, seconds),
    }
}

/// `bytes` in `seconds` as Mbit/s (10^6 bits per second).
pub fn mbit_s(bytes: u64, seconds: f64) -> f64 {
    bytes as f64 * 8.0 / seconds.max(1e-9) / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::handshake::secure_pair;
    #[allow(unused_imports)]
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn pair(a: Limit, b: Limit, corrupt: bool) -> (Result<PerfOutcome>, Result<PerfOutcome>) {
        let (x, y) = tokio::io::duplex(64 * 1024);
        let (xr, xw) = tokio::io::split(x);
        let (yr, yw) = tokio::io::split(y);
        let (mut ar, mut aw) = secure_pair(None, Vec::new(), xr, xw);
        let (mut br, mut bw) = secure_pair(None, Vec::new(), yr, yw);
        let ca = Counters::default();
        let cb = Counters::default();
        if corrupt {
            // A byte that does not belong to the pattern, framed as a chunk.
            let mut bad = [0, 0, 0, 1, 0xAA];
            bad[4] ^= crate::wire::pattern()[0];
            bw.write_all(&bad).await.unwrap();
        }
        tokio::join!(run(&mut ar, &mut aw, a, &ca), run(&mut br, &mut bw, b, &cb))
    }

    #[tokio::test]
    async fn mark_after_the_warm_up() {
        let c = Counters::default();
        let (x, m) = with_mark(
            async {
                c.sent.store(1000, Ordering::Relaxed);
                c.received.store(7, Ordering::Relaxed);
                // sleep: the mark falls 20 ms into the run; the counters must change after it.
                tokio::time::sleep(Duration::from_millis(60)).await;
                c.sent.store(5000, Ordering::Relaxed);
                42
            },
            &c,
            Some(Duration::from_millis(20)),
            || 300,
        )
        .await;
        assert_eq!(x, 42);
        let m = m.expect("a mark");
        assert_eq!((m.sent_acked, m.received), (700, 7));
        assert!(m.t >= 0.02 && m.t < 0.06, "{}", m.t);
        // A run shorter than the warm-up has no mark.
        let (_, none) = with_mark(async {}, &c, Some(Duration::from_secs(5)), || 0).await;
        assert!(none.is_none());
        // Goodput over the whole run, and over what followed the mark.
        assert_eq!(goodput(1_000_000, 8.0, None), 1.0);
        assert_eq!(goodput(1_250_000, 10.0, Some((2.0, 250_000))), 1.0);
    }

    #[tokio::test]
    async fn both_directions_at_once() {
        let (a, b) = pair(Limit::Bytes(3_000_001), Limit::Bytes(1_234_567), false).await;
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!((a.sent, a.received), (3_000_001, 1_234_567));
        assert_eq!((b.sent, b.received), (1_234_567, 3_000_001));
    }

    #[tokio::test]
    async fn one_direction_and_time_limit() {
        let (a, b) = pair(
            Limit::Time(Duration::from_millis(100)),
            Limit::Nothing,
            false,
        )
        .await;
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(a.sent > 0);
        assert_eq!(a.sent, b.received);
        assert_eq!((a.received, b.sent), (0, 0));
    }

    #[tokio::test]
    async fn corrupted_data_fails_both_ends() {
        let (a, b) = pair(Limit::Nothing, Limit::Bytes(10), true).await;
        let ea = a.unwrap_err().to_string();
        assert!(ea.contains("did not match"), "{ea}");
        let eb = b.unwrap_err().to_string();
        assert!(
            eb.contains("did not match") || eb.contains("Corrupt") || eb.contains("corrupt"),
            "{eb}"
        );
    }

    #[tokio::test]
    async fn a_held_test_keeps_the_peer_waiting_until_it_finishes() {
        let (x, y) = tokio::io::duplex(64 * 1024);
        let (xr, xw) = tokio::io::split(x);
        let (yr, yw) = tokio::io::split(y);
        let (mut ar, mut aw) = secure_pair(None, Vec::new(), xr, xw);
        let (mut br, mut bw) = secure_pair(None, Vec::new(), yr, yw);
        let cb = Counters::default();
        let peer = run(&mut br, &mut bw, Limit::Bytes(5_000), &cb);
        tokio::pin!(peer);
        // The held end carries both ways while the peer runs; the peer cannot end.
        let held = tokio::select! {
            h = Held::carry(&mut ar, &mut aw, 5_000) => h.unwrap(),
            p = &mut peer => panic!("the peer ended before the held end's marker: {p:?}"),
        };
        // The peer's whole direction arrived (its end marker came after it); what the peer
        // received is judged by its verdict below.
        assert_eq!(cb.sent.load(Ordering::Relaxed), 5_000);
        let (finished, outcome) = tokio::join!(held.finish(&mut ar, &mut aw), &mut peer);
        finished.unwrap();
        let outcome = outcome.unwrap();
        assert_eq!((outcome.sent, outcome.received), (5_000, 5_000));
    }

    #[tokio::test]
    async fn a_held_test_refuses_data_off_the_pattern() {
        let (x, y) = tokio::io::duplex(64 * 1024);
        let (xr, xw) = tokio::io::split(x);
        let (yr, yw) = tokio::io::split(y);
        let (mut ar, mut aw) = secure_pair(None, Vec::new(), xr, xw);
        let (_br, mut bw) = secure_pair(None, Vec::new(), yr, yw);
        // One chunk of one byte off the pattern, and its end marker.
        let mut bad = vec![0, 0, 0, 1, crate::wire::pattern()[0] ^ 0x55];
        bad.extend_from_slice(&chunk_end(1));
        bw.write_all(&bad).await.unwrap();
        bw.flush().await.unwrap();
        let e = Held::carry(&mut ar, &mut aw, 0)
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("pattern matched: false"), "{e}");
    }
}
