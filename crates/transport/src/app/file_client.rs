//! The client tools of the file server (`nena serve`): `nena send`, `nena get` and `nena
//! perf`, each one session, each returning a report that says how much moved, how fast, in
//! which mode, whether the connection was really multipath and what every subflow carried
//! ([`Paths`], the connection layer's, which the proxy's client sessions report too).

use crate::app::files::{self, Progress};
use crate::app::names::FileName;
use crate::app::perf::{self, Counters, Limit, Sample};
pub use crate::conn::Paths;
use crate::conn::{self, ClientConn, ClientOptions, SubflowBytes};
use crate::error::{Result, Transfer, Unsupported};
use crate::wire::{PerfRequest, Request};
use serde::Serialize;
use std::path::Path;
use std::time::{Duration, Instant};

/// Report of `nena send` / `nena get`.
#[derive(Debug, Clone, Serialize)]
pub struct TransferReport {
    pub op: &'static str,
    pub name: String,
    pub bytes: u64,
    pub seconds: f64,
    pub mbit_s: f64,
    pub sha256: String,
    /// Always true in a report: a transfer that did not verify is an error instead.
    pub verified: bool,
    /// The negotiated mode (`aead`, `stream`, `kato`, `plain`).
    pub mode: String,
    /// The cipher of a cryptographic mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cipher: Option<&'static str>,
    /// The mode as people read it (kato labelled as the papers' obfuscation).
    pub mode_label: String,
    pub setup_ms: f64,
    pub paths: Paths,
    /// `--mode kato-mpc`: whether both sides agreed (scrambled) or why it is plain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kato_mpc: Option<conn::MpcOutcome>,
}

/// What a file transfer reports as it goes (the CLI's progress bar; `()` for nothing). Called
/// from the transfer's task: `start` once the session is up, `size` when the file's size is
/// known, `advance` for every chunk moved, `finish` when the transfer ended (verified or
/// not) before its report or error is returned; not `finish` when the transfer is dropped
/// (Ctrl-C).
pub trait TransferProgress: Sync {
    /// The session is up; the transfer begins.
    fn start(&self) {}
    /// The file's size in bytes.
    fn size(&self, _bytes: u64) {}
    /// `n` more bytes moved.
    fn advance(&self, _n: u64) {}
    /// The transfer ended.
    fn finish(&self) {}
}

/// No progress shown.
impl TransferProgress for () {}

/// (mode name, cipher, label) of a connection; "raw" for the benchmark baseline.
fn mode_of(c: &ClientConn) -> (String, Option<&'static str>, String) {
    match c.info {
        Some(i) => (i.mode.name().into(), i.cipher, i.describe()),
        None => ("raw".into(), None, "raw (plain MPTCP, no nena)".into()),
    }
}

/// The end of `send` and `get`: finish the progress, then report the verified transfer (or
/// pass its error on).
fn transfer_report(
    op: &'static str,
    out: Result<files::FileOutcome>,
    progress: &dyn TransferProgress,
    start: Instant,
    c: &ClientConn,
) -> Result<TransferReport> {
    progress.finish();
    let out = out?;
    let seconds = start.elapsed().as_secs_f64();
    Ok(TransferReport {
        op,
        name: out.name,
        bytes: out.bytes,
        seconds,
        mbit_s: perf::mbit_s(out.bytes, seconds),
        sha256: out.sha256,
        verified: true,
        mode: mode_of(c).0,
        cipher: mode_of(c).1,
        mode_label: mode_of(c).2,
        setup_ms: c.setup.as_secs_f64() * 1e3,
        paths: Paths::of(c),
        kato_mpc: c.mpc.clone(),
    })
}

/// `nena send`: PUT `path` as `name`.
pub async fn send(
    opts: &ClientOptions,
    path: &Path,
    name: &FileName,
    progress: &dyn TransferProgress,
) -> Result<TransferReport> {
    if opts.raw {
        return Err(Unsupported::RawFileTransfer.into());
    }
    let mut c = conn::connect(opts, None).await?;
    progress.start();
    let tick = |n: u64| progress.advance(n);
    let start = Instant::now();
    let ticks: Option<Progress<'_>> = Some(&tick);
    let out = files::client_put(
        &mut c.reader,
        &mut c.writer,
        path,
        name,
        opts.token.as_ref(),
        ticks,
        |size| progress.size(size),
    )
    .await;
    transfer_report("send", out, progress, start, &c)
}

/// `nena get`: fetch `name` into `dest`.
pub async fn get(
    opts: &ClientOptions,
    name: &FileName,
    dest: &Path,
    overwrite: bool,
    progress: &dyn TransferProgress,
) -> Result<TransferReport> {
    if opts.raw {
        return Err(Unsupported::RawFileTransfer.into());
    }
    let mut c = conn::connect(opts, None).await?;
    progress.start();
    let tick = |n: u64| progress.advance(n);
    let start = Instant::now();
    let out = files::client_get(
        &mut c.reader,
        &mut c.writer,
        name,
        dest,
        overwrite,
        opts.token.as_ref(),
        Some(&tick),
        |size| progress.size(size),
    )
    .await;
    transfer_report("get", out, progress, start, &c)
}

/// What `nena perf` runs.
#[derive(Debug, Clone, Copy)]
pub struct PerfParams {
    /// Client to server.
    pub up: bool,
    /// Server to client.
    pub down: bool,
    /// Per direction: bytes (`Some`) or run for `time`.
    pub bytes: Option<u64>,
    pub time: Duration,
    /// Interval reports (None: none).
    pub interval: Option<Duration>,
    /// Leave the first seconds (slow start) out of the goodput (None: measure all).
    pub omit: Option<Duration>,
}

/// One interval line of `nena perf`.
#[derive(Debug, Clone, Serialize)]
pub struct IntervalReport {
    #[serde(flatten)]
    pub sample: Sample,
    pub mbit_s_sent: f64,
    pub mbit_s_received: f64,
    /// Cumulative bytes per subflow at the end of the interval.
    pub subflows: Vec<SubflowBytes>,
    /// Bytes per subflow in this interval (acknowledged by the peer / received).
    pub subflows_interval: Vec<SubflowDelta>,
    /// Bytes written to the connection and not yet acknowledged at the data level at the
    /// end of the interval (`SIOCOUTQ`): what was sent so far minus this is what the peer
    /// has received in order.
    pub unacked: u64,
}

/// What one subflow carried in one interval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SubflowDelta {
    pub local: Option<std::net::SocketAddr>,
    pub remote: Option<std::net::SocketAddr>,
    /// Bytes the peer acknowledged on this subflow in the interval.
    pub acked: u64,
    pub received: u64,
}

/// Per-subflow bytes between two snapshots (a subflow is known by its addresses; one that
/// is new since `prev` counts from 0).
pub fn subflow_deltas(prev: &[SubflowBytes], cur: &[SubflowBytes]) -> Vec<SubflowDelta> {
    cur.iter()
        .map(|c| {
            let p = prev
                .iter()
                .find(|p| (p.local, p.remote) == (c.local, c.remote));
            SubflowDelta {
                local: c.local,
                remote: c.remote,
                acked: c.bytes_acked.saturating_sub(p.map_or(0, |p| p.bytes_acked)),
                received: c
                    .bytes_received
                    .saturating_sub(p.map_or(0, |p| p.bytes_received)),
            }
        })
        .collect()
}

/// Key epochs begun per direction of a session.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct KeyEpochs {
    pub sent: u64,
    pub received: u64,
}

/// Report of `nena perf`.
#[derive(Debug, Clone, Serialize)]
pub struct PerfReport {
    /// The negotiated mode (`aead`, `stream`, `kato`, `plain`, or `raw`).
    pub mode: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cipher: Option<&'static str>,
    pub mode_label: String,
    pub sent: u64,
    pub received: u64,
    /// From the start of the data to the peer's verdict: every byte confirmed both ways.
    pub seconds: f64,
    /// When the last byte was written (`--time` ends here, up to one chunk later).
    pub send_seconds: f64,
    /// When the peer's last byte arrived.
    pub receive_seconds: f64,
    /// Goodput of the direction(s) that carried data, payload bytes only; with `--omit`,
    /// of what moved after `omitted` (the bytes and seconds above are the whole run's).
    pub mbit_s_sent: f64,
    pub mbit_s_received: f64,
    /// Where the goodput's measurement began, with `--omit`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub omitted: Option<perf::Mark>,
    /// Every byte matched the pattern and the peer confirmed the count.
    pub verified: bool,
    pub setup_ms: f64,
    pub intervals: Vec<IntervalReport>,
    /// Key epochs begun in each direction (crypto modes: more than 1 after a key update).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_epochs: Option<KeyEpochs>,
    pub paths: Paths,
    /// `--mode kato-mpc`: whether both sides agreed (scrambled) or why it is plain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kato_mpc: Option<conn::MpcOutcome>,
}

/// `nena perf`: a throughput test against `nena serve` (or `nena serve --raw` with `opts.raw`).
pub async fn perf(
    opts: &ClientOptions,
    p: PerfParams,
    mut on_interval: impl FnMut(&IntervalReport),
) -> Result<PerfReport> {
    let millis = u32::try_from(p.time.as_millis()).unwrap_or(u32::MAX);
    let req = Request::Perf(PerfRequest {
        up: p.up,
        down: p.down,
        bytes: p.bytes.unwrap_or(0),
        millis,
    });
    let mut c = if opts.raw {
        if opts.token.is_some() {
            return Err(Unsupported::RawToken.into());
        }
        conn::connect(opts, Some(req.encode())).await?
    } else {
        let mut c = conn::connect(opts, None).await?;
        c.writer
            .write_msg(req.encode_with(opts.token.as_ref()))
            .await?;
        c
    };
    let reply = c.reader.read_reply().await?;
    if !reply.is_ok() {
        return Err(Transfer::PerfRefused {
            status: reply.status,
            msg: reply.msg,
        }
        .into());
    }
    let limit = match (p.up, p.bytes) {
        (false, _) => Limit::Nothing,
        (true, Some(b)) => Limit::Bytes(b),
        (true, None) => Limit::Time(p.time),
    };
    let counters = Counters::default();
    let mut intervals = Vec::new();
    let mut last: Vec<SubflowBytes> = Vec::new();
    let gate = c.gate.as_ref();
    let (reader, writer) = (&mut c.reader, &mut c.writer);
    let (outcome, mark) = perf::with_mark(
        perf::with_intervals(
            perf::run(reader, writer, limit, &counters),
            &counters,
            p.interval,
            |s| {
                let subflows: Vec<SubflowBytes> = gate
                    .and_then(|g| g.classified().ok())
                    .map(|v| v.iter().map(|s| SubflowBytes::from(&s.subflow)).collect())
                    .unwrap_or_default();
                let subflows_interval = subflow_deltas(&last, &subflows);
                last = subflows.clone();
                let r = IntervalReport {
                    sample: s,
                    mbit_s_sent: perf::mbit_s(s.sent, s.secs),
                    mbit_s_received: perf::mbit_s(s.received, s.secs),
                    subflows,
                    subflows_interval,
                    unacked: gate.map_or(0, |g| unacked(g.fd())),
                };
                on_interval(&r);
                intervals.push(r);
            },
        ),
        &counters,
        p.omit,
        || gate.map_or(0, |g| unacked(g.fd())),
    )
    .await;
    let outcome = outcome?;
    if p.omit.is_some() && mark.is_none() {
        return Err(Transfer::PerfOmitTooLong.into());
    }
    Ok(PerfReport {
        mode: mode_of(&c).0,
        cipher: mode_of(&c).1,
        mode_label: mode_of(&c).2,
        sent: outcome.sent,
        received: outcome.received,
        seconds: outcome.seconds,
        send_seconds: outcome.send_seconds,
        receive_seconds: outcome.receive_seconds,
        mbit_s_sent: perf::goodput(
            outcome.sent,
            outcome.seconds,
            mark.map(|m| (m.t, m.sent_acked)),
        ),
        mbit_s_received: perf::goodput(
            outcome.received,
            outcome.seconds,
            mark.map(|m| (m.t, m.received)),
        ),
        omitted: mark,
        verified: true,
        setup_ms: c.setup.as_secs_f64() * 1e3,
        intervals,
        key_epochs: c
            .writer
            .key_epochs()
            .zip(c.reader.key_epochs())
            .map(|(s, r)| KeyEpochs {
                sent: s,
                received: r,
            }),
        paths: Paths::of(&c),
        kato_mpc: c.mpc.clone(),
    })
}

/// Bytes written to a socket and not yet acknowledged by the peer (`SIOCOUTQ`; for an
/// MPTCP socket, at the connection level). 0 if it cannot be read.
fn unacked(fd: std::os::fd::BorrowedFd<'_>) -> u64 {
    use std::os::fd::AsRawFd;
    let mut n: libc::c_int = 0;
    // SAFETY: TIOCOUTQ (SIOCOUTQ) writes one int through the pointer it is given.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCOUTQ, &mut n) };
    if rc < 0 {
        0
    } else {
        n.max(0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testing::subflow as sb;

    /// The interval's bytes per subflow are acknowledged bytes (the line that shows them is
    /// the CLI's: crates/cli/src/cmd/report.rs).
    #[test]
    fn interval_deltas_count_each_interval_and_acknowledged_bytes() {
        let t1 = vec![sb("198.18.1.2:40000", 1 << 20, 10)];
        let t2 = vec![
            sb("198.18.1.2:40000", 3 << 20, 30),
            sb("198.18.2.2:40001", 1 << 20, 5),
        ];
        let d = subflow_deltas(&t1, &t2);
        assert_eq!((d[0].acked, d[0].received), (2 << 20, 20));
        // A subflow that appeared in the interval counts from zero.
        assert_eq!((d[1].acked, d[1].received), (1 << 20, 5));
        // A counter that went back (a subflow replaced by one with the same addresses) is
        // not a negative number.
        assert_eq!(subflow_deltas(&t2, &t1)[0].acked, 0);
    }
}
