//! `nena analyze`: tcptrace and mptcptrace for today's kernels. Reads one or more captures
//! (merged by time into one view), groups TCP subflows into MPTCP connections by token
//! (MP_CAPABLE keys, MP_JOIN tokens), and measures per subflow and direction: payload
//! bytes, retransmissions, throughput over time, RTT (ACK matching with Karn's rule, and TCP
//! timestamps), outages; and per MPTCP connection the data level: DSN coverage, reinjections
//! (the same DSN range sent on two subflows), connection outages and recovery times.
//!
//! Streaming: frames are read one at a time (one reader thread per capture, a k-way merge
//! by time); no payload is kept. Memory grows with the number of subflows, with the RTT
//! samples (16 bytes per sample), with the DSN ranges that differ in owner (one entry per
//! scheduler switch between subflows) and with the throughput bins, not with the capture
//! size; sequence-graph points are decimated to at most [`MAX_POINTS`] per subflow direction.
//!
//! The measuring logic ([`Tracer`]) takes parsed segments and times and knows no files; the
//! driver ([`analyze_captures`]) reads the captures.

use crate::capture;
use crate::dss::{token_of_key, Mapping};
use crate::packet::{self, Segment};
use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver};
use std::time::Duration;

/// At most this many sequence-graph points are kept per subflow and direction (older
/// points are thinned by half each time the limit is reached).
pub const MAX_POINTS: usize = 20_000;
/// At most this many reinjection and outage events are listed per connection direction
/// (the byte counts cover all).
pub const MAX_EVENTS: usize = 1_000;
/// A throughput series is dense (zero bins included) up to this many bins.
pub const MAX_BINS: u64 = 100_000;

/// How to analyse.
#[derive(Debug, Clone, Copy)]
pub struct TraceOptions {
    /// Width of a throughput / RTT series bin.
    pub bin: Duration,
    /// A subflow or connection that sends nothing for more than this many smoothed RTTs
    /// while data is outstanding is in an outage ...
    pub outage_rtts: f64,
    /// ... and for at least this long (keeps delayed-ACK pauses and short RTOs out).
    pub min_outage: Duration,
}

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions {
            bin: Duration::from_secs(1),
            outage_rtts: 4.0,
            min_outage: Duration::from_millis(100),
        }
    }
}

/// A value for each direction of a connection: `c2s` from the side that opened it.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct PerDir<T> {
    pub c2s: T,
    pub s2c: T,
}

impl<T> PerDir<T> {
    pub fn get(&self, d: usize) -> &T {
        if d == 0 {
            &self.c2s
        } else {
            &self.s2c
        }
    }
    fn get_mut(&mut self, d: usize) -> &mut T {
        if d == 0 {
            &mut self.c2s
        } else {
            &mut self.s2c
        }
    }
}

/// Summary of RTT samples in milliseconds (`None` without samples).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct RttStats {
    pub samples: u64,
    pub min_ms: Option<f64>,
    pub median_ms: Option<f64>,
    pub mean_ms: Option<f64>,
    /// Standard deviation (the study's sigma).
    pub sigma_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

impl RttStats {
    fn of(samples: &[(f64, f64)]) -> RttStats {
        if samples.is_empty() {
            return RttStats::default();
        }
        let mut v: Vec<f64> = samples.iter().map(|s| s.1).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        RttStats {
            samples: n as u64,
            min_ms: Some(v[0]),
            median_ms: Some(median_sorted(&v)),
            mean_ms: Some(mean),
            sigma_ms: Some(var.sqrt()),
            p95_ms: Some(v[((n - 1) as f64 * 0.95).round() as usize]),
            max_ms: Some(v[n - 1]),
        }
    }
}

fn median_sorted(v: &[f64]) -> f64 {
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// A time with nothing sent while data was outstanding.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Outage {
    /// "c2s" or "s2c": the direction whose data was stuck.
    pub direction: &'static str,
    /// Seconds since the first frame: the last data segment before the silence ...
    pub start: f64,
    /// ... and the first one after it (`None`: nothing more was sent in the capture).
    pub end: Option<f64>,
    pub duration: Option<f64>,
    /// The threshold that made it an outage (seconds).
    pub threshold: f64,
    /// For a subflow: seconds from `start` until the connection's data ACK covered all data
    /// the connection had sent when the subflow fell silent (how long the connection took to
    /// get the stranded data through). For a connection: `duration`. `None`: not in the capture.
    pub recovery: Option<f64>,
}

/// The same DSN range sent on a second subflow.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Reinjection {
    /// Seconds since the first frame (of the first segment of the run).
    pub time: f64,
    /// Index of the subflow that sent it first, and of the one that sent it again.
    pub from: usize,
    pub to: usize,
    /// DSN of the first byte, relative to the first DSN seen in this direction.
    pub dsn: u64,
    pub bytes: u64,
}

/// The data level of one direction of an MPTCP connection.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct DataDir {
    /// The lowest DSN seen (absolute, as on the wire; 64-bit).
    pub first_dsn: Option<u64>,
    /// Distinct DSN bytes seen on any subflow.
    pub bytes_covered: u64,
    /// Distance from the lowest to the highest DSN seen (end exclusive).
    pub span: u64,
    /// Ranges of the span never seen in the captures (data sent on a link not captured, or lost before the capture point).
    pub holes: u64,
    /// Highest data ACK seen for this direction, relative to `first_dsn`.
    pub data_acked: Option<u64>,
    /// Bytes sent on a subflow after another subflow had sent the same DSNs.
    pub reinjected_bytes: u64,
    /// The reinjections, contiguous pieces merged (at most [`MAX_EVENTS`]).
    pub reinjections: Vec<Reinjection>,
    /// Payload bytes that could not be placed (no DSS mapping for them in the capture).
    pub unmapped_bytes: u64,
    /// DSN over time for the sequence graph: (seconds, DSN relative to `first_dsn`) per subflow.
    #[serde(skip)]
    pub points: Vec<Vec<(f64, f64)>>,
}

/// One TCP connection: a subflow of an MPTCP connection, or a plain TCP connection.
#[derive(Debug, Clone, Serialize)]
pub struct Subflow {
    /// The side that sent the SYN (or, without a SYN in the capture, the first sender seen).
    pub src: String,
    pub dst: String,
    /// The capture it was read from (a subflow seen in several captures is read from the first).
    pub capture: usize,
    pub syn_seen: bool,
    /// Opened with MP_JOIN (an additional subflow).
    pub join: bool,
    /// Backup flag (MP_JOIN or the last MP_PRIO).
    pub backup: bool,
    /// Seconds since the first frame of all captures.
    pub start: f64,
    pub end: f64,
    pub fin: bool,
    pub rst: bool,
    /// TCP payload bytes per direction, retransmissions included (tshark's `tcp.len`).
    pub payload_bytes: PerDir<u64>,
    pub segments: PerDir<u64>,
    /// Payload bytes sent again at sequence numbers already sent.
    pub retransmitted_bytes: PerDir<u64>,
    /// RTT of the data sent in each direction, from ACK matching (Karn: retransmitted
    /// segments give no sample).
    pub rtt: PerDir<RttStats>,
    /// RTT from TCP timestamps (TSval of a data segment to its first echo).
    pub rtt_ts: PerDir<RttStats>,
    /// Throughput: (bin start in seconds, Mbit/s of payload) per direction.
    pub throughput: PerDir<Vec<(f64, f64)>>,
    /// RTT series from ACK matching: (bin start, median RTT in ms of the bin's samples).
    pub rtt_series: PerDir<Vec<(f64, f64)>>,
    pub outages: Vec<Outage>,
    /// Every ACK-matched RTT sample: (seconds, ms).
    #[serde(skip)]
    pub rtt_samples: PerDir<Vec<(f64, f64)>>,
}

/// One connection: an MPTCP connection with its subflows, or a plain TCP connection (one
/// subflow, `mptcp: false`).
#[derive(Debug, Clone, Serialize)]
pub struct Connection {
    pub mptcp: bool,
    /// The server's token (hex), which MP_JOINs name, when known.
    pub token: Option<String>,
    pub start: f64,
    pub end: f64,
    pub subflows: Vec<Subflow>,
    /// Sums over the subflows.
    pub payload_bytes: PerDir<u64>,
    /// Aggregate throughput over all subflows.
    pub throughput: PerDir<Vec<(f64, f64)>>,
    /// MPTCP only.
    pub data: Option<PerDir<DataDir>>,
    /// Times with nothing sent on any subflow while data was outstanding at the data level
    /// (MPTCP only; for plain TCP see the subflow's outages).
    pub outages: Vec<Outage>,
}

/// What was read from one capture.
#[derive(Debug, Clone, Serialize)]
pub struct CaptureInfo {
    pub path: String,
    pub format: &'static str,
    pub frames: u64,
    pub tcp_segments: u64,
    /// Segments of a subflow already read from an earlier capture (not counted again).
    pub duplicate_segments: u64,
}

/// The analysis of one or more captures.
#[derive(Debug, Clone, Serialize)]
pub struct TraceReport {
    pub captures: Vec<CaptureInfo>,
    /// Time of the first frame, seconds since the Unix epoch; all other times are relative.
    pub start_epoch: f64,
    pub duration: f64,
    /// Bin width of the series, seconds.
    pub bin: f64,
    pub connections: Vec<Connection>,
    pub warnings: Vec<String>,
}

// ---------------------------------------------------------------------------------------
// The sans-IO part: segments and times in, report out.

/// A data segment awaiting its ACK.
#[derive(Debug, Clone, Copy)]
struct Out {
    start: i64,
    end: i64,
    t: f64,
    retx: bool,
}

#[derive(Debug, Default)]
struct DirState {
    isn: Option<u32>,
    /// Unwrapping reference: (sequence number, its offset from the ISN's data start).
    last: Option<(u32, i64)>,
    max_end: Option<i64>,
    max_ack: Option<i64>,
    outstanding: VecDeque<Out>,
    payload: u64,
    segments: u64,
    retx: u64,
    /// Payload bytes per bin (sparse: a capture's times may be far apart or damaged).
    bins: BTreeMap<u64, u64>,
    rtt: Vec<(f64, f64)>,
    rtt_ts: Vec<(f64, f64)>,
    srtt: Option<f64>,
    ts_sent: VecDeque<(u32, f64)>,
    last_data: Option<f64>,
    /// When everything sent had been acknowledged (None while data is outstanding).
    all_acked: Option<f64>,
    /// The connection's highest DSN end (this direction) when this subflow last sent data.
    conn_dsn_at_last: Option<u64>,
    /// An outage in progress was already registered (at the time of its start).
    outage_open: Option<usize>,
    /// Recent DSS mappings: offset of first byte -> mapping.
    mappings: BTreeMap<i64, Mapping>,
}

impl DirState {
    /// Offset of `seq` from the first data byte (unwrapping 32-bit sequence numbers).
    fn offset(&mut self, seq: u32) -> i64 {
        let (ls, lo) = *self.last.get_or_insert((seq, 0));
        let off = lo + (seq.wrapping_sub(ls) as i32) as i64;
        self.last = Some((seq, off));
        off
    }
    /// Offset of `seq` without moving the reference.
    fn peek(&self, seq: u32) -> Option<i64> {
        self.last
            .map(|(ls, lo)| lo + (seq.wrapping_sub(ls) as i32) as i64)
    }
    fn threshold(&self, o: &TraceOptions) -> f64 {
        let min = o.min_outage.as_secs_f64();
        self.srtt.map_or(min, |s| (s * o.outage_rtts).max(min))
    }
}

#[derive(Debug)]
struct SubState {
    client: SocketAddr,
    server: SocketAddr,
    capture: usize,
    syn_seen: bool,
    join: bool,
    backup: bool,
    mptcp: bool,
    start: f64,
    end: f64,
    fin: bool,
    rst: bool,
    conn: Option<usize>,
    /// Whether c2s of this subflow is s2c of its connection (a subflow opened by the server).
    reversed: bool,
    dirs: [DirState; 2],
    outages: Vec<Outage>,
    points: [Decimator; 2],
}

#[derive(Debug, Default, Clone)]
struct Decimator {
    pts: Vec<(f64, f64)>,
    stride: usize,
    seen: usize,
}

impl Decimator {
    fn push(&mut self, p: (f64, f64)) {
        self.stride = self.stride.max(1);
        if self.seen.is_multiple_of(self.stride) {
            self.pts.push(p);
            if self.pts.len() >= MAX_POINTS {
                let mut i = 0;
                self.pts.retain(|_| {
                    i += 1;
                    i % 2 == 1
                });
                self.stride *= 2;
            }
        }
        self.seen += 1;
    }
}

#[derive(Debug, Default)]
struct ConnDir {
    /// DSN ranges and the subflow that sent them first: start -> (end, subflow).
    owners: BTreeMap<u64, (u64, usize)>,
    first: Option<u64>,
    max_end: Option<u64>,
    last_dsn: Option<u64>,
    data_ack: Option<u64>,
    /// Data ACK advances (time, ack), the last minute of them.
    ack_hist: VecDeque<(f64, u64)>,
    reinjected: u64,
    reinjections: Vec<Reinjection>,
    unmapped: u64,
    last_data: Option<f64>,
    all_acked: Option<f64>,
    /// Subflow outages waiting for the data ACK: (subflow, outage index, target DSN, start).
    pending: Vec<(usize, usize, u64, f64)>,
    outage_open: Option<usize>,
}

#[derive(Debug)]
struct ConnState {
    token: Option<u32>,
    mptcp: bool,
    subflows: Vec<usize>,
    dirs: [ConnDir; 2],
    outages: Vec<Outage>,
}

/// The measuring state machine: feed it segments in time order, then [`Tracer::finish`].
#[derive(Debug)]
pub struct Tracer {
    opts: TraceOptions,
    t0: Option<Duration>,
    now: f64,
    subs: Vec<SubState>,
    index: HashMap<(SocketAddr, SocketAddr), usize>,
    conns: Vec<ConnState>,
    /// token -> (connection, whether a join naming it is opened by the server).
    tokens: HashMap<u32, (usize, bool)>,
}

/// Widen a DSN sent in 32 bits against a reference.
fn widen(v: u64, is64: bool, reference: Option<u64>) -> u64 {
    if is64 {
        return v;
    }
    match reference {
        None => v,
        Some(r) => {
            let base = r & !0xffff_ffff;
            [base.wrapping_sub(1 << 32), base, base.wrapping_add(1 << 32)]
                .into_iter()
                .map(|b| b | (v & 0xffff_ffff))
                .min_by_key(|c| c.abs_diff(r))
                .expect("three candidates")
        }
    }
}

fn dir_name(d: usize) -> &'static str {
    if d == 0 {
        "c2s"
    } else {
        "s2c"
    }
}

impl Tracer {
    pub fn new(opts: TraceOptions) -> Tracer {
        Tracer {
            opts,
            t0: None,
            now: 0.0,
            subs: Vec::new(),
            index: HashMap::new(),
            conns: Vec::new(),
            tokens: HashMap::new(),
        }
    }

    /// Which capture owns the subflow of this segment, if it is known yet.
    pub fn owner(&self, seg: &Segment) -> Option<usize> {
        self.index
            .get(&(seg.src, seg.dst))
            .or_else(|| self.index.get(&(seg.dst, seg.src)))
            .map(|&i| self.subs[i].capture)
    }

    fn new_conn(&mut self, token: Option<u32>, mptcp: bool) -> usize {
        self.conns.push(ConnState {
            token,
            mptcp,
            subflows: Vec::new(),
            dirs: Default::default(),
            outages: Vec::new(),
        });
        self.conns.len() - 1
    }

    fn attach(&mut self, si: usize, ci: usize, reversed: bool) {
        if self.subs[si].conn.is_none() {
            self.subs[si].conn = Some(ci);
            self.subs[si].reversed = reversed;
            self.conns[ci].subflows.push(si);
        }
    }

    /// Feed one segment read from capture `capture` at absolute time `ts`.
    pub fn segment(&mut self, capture: usize, ts: Duration, seg: &Segment) {
        let t0 = *self.t0.get_or_insert(ts);
        // Captures may go back in time a little; keep times monotonic per subflow use.
        let t = ts.saturating_sub(t0).as_secs_f64().max(0.0);
        self.now = self.now.max(t);
        let si = match self
            .index
            .get(&(seg.src, seg.dst))
            .or_else(|| self.index.get(&(seg.dst, seg.src)))
        {
            Some(&i) => i,
            None => {
                // The opener is the sender of a SYN without ACK; else the first sender seen,
                // or the receiver of a SYN/ACK.
                let (client, server) = if seg.flags.syn && seg.flags.ack {
                    (seg.dst, seg.src)
                } else {
                    (seg.src, seg.dst)
                };
                self.subs.push(SubState {
                    client,
                    server,
                    capture,
                    syn_seen: false,
                    join: false,
                    backup: false,
                    mptcp: false,
                    start: t,
                    end: t,
                    fin: false,
                    rst: false,
                    conn: None,
                    reversed: false,
                    dirs: Default::default(),
                    outages: Vec::new(),
                    points: Default::default(),
                });
                let i = self.subs.len() - 1;
                self.index.insert((client, server), i);
                i
            }
        };
        if self.subs[si].capture != capture {
            return;
        }
        let d = if seg.src == self.subs[si].client {
            0
        } else {
            1
        };
        let r = 1 - d;
        {
            let s = &mut self.subs[si];
            s.end = s.end.max(t);
            s.fin |= seg.flags.fin;
            s.rst |= seg.flags.rst;
            if !seg.mptcp.is_empty() {
                s.mptcp = true;
            }
            if let Some(b) = seg.mptcp.prio_backup {
                s.backup = b;
            }
        }
        self.handshake(si, d, seg);
        if self.subs[si].conn.is_none() && (seg.wire_len > 0 || seg.flags.fin || seg.flags.rst) {
            // Data before any token was learnt: a plain TCP connection, or an MPTCP subflow
            // whose handshake was not captured (it stays a connection of its own).
            let mptcp = self.subs[si].mptcp;
            let ci = self.new_conn(None, mptcp);
            self.attach(si, ci, false);
        }
        // Silences that have lasted beyond their threshold by now are outages.
        self.check_outages(si, t);

        // The ACK side: this segment acknowledges data of the reverse direction.
        if seg.flags.ack {
            self.ack(si, r, seg.ack, t);
        }
        if let Some(ts) = seg.timestamps {
            self.ts_echo(si, r, ts.1, t);
        }
        if let Some(a) = seg.mptcp.dss.and_then(|x| x.data_ack) {
            let is64 = seg.mptcp.dss.is_some_and(|x| x.ack64);
            self.data_ack(si, r, a, is64, t);
        }
        // The data side.
        let dir = &mut self.subs[si].dirs[d];
        dir.segments += 1;
        if seg.flags.syn && dir.isn.is_none() {
            dir.isn = Some(seg.seq);
            dir.last = Some((seg.seq.wrapping_add(1), 0));
        }
        if seg.wire_len == 0 {
            return;
        }
        let data_seq = if seg.flags.syn {
            seg.seq.wrapping_add(1)
        } else {
            seg.seq
        };
        let off = dir.offset(data_seq);
        let end = off + seg.wire_len as i64;
        let len = seg.wire_len as u64;
        dir.payload += len;
        let bin = (t / self.opts.bin.as_secs_f64()).max(0.0) as u64;
        let dir = &mut self.subs[si].dirs[d];
        *dir.bins.entry(bin).or_default() += len;
        let max_end = dir.max_end.unwrap_or(i64::MIN);
        if off < max_end {
            // (Partly) sent before: a retransmission. Karn: no sample from these segments.
            dir.retx += (max_end.min(end) - off) as u64;
            for o in dir.outstanding.iter_mut() {
                if o.start < end && off < o.end {
                    o.retx = true;
                }
            }
        }
        if end > max_end {
            let from = off.max(max_end);
            dir.outstanding.push_back(Out {
                start: from,
                end,
                t,
                retx: from != off,
            });
            dir.max_end = Some(end);
            dir.all_acked = None;
        }
        // TCP timestamps: the first data segment with a TSval is the one its echo times.
        if let Some((tsval, _)) = seg.timestamps {
            if dir.ts_sent.back().is_none_or(|&(v, _)| v != tsval) {
                dir.ts_sent.push_back((tsval, t));
                if dir.ts_sent.len() > 4096 {
                    dir.ts_sent.pop_front();
                }
            }
        }
        // A subflow outage ends when this direction sends again.
        let thr = dir.threshold(&self.opts);
        let open = dir.outage_open.take();
        dir.last_data = Some(t);
        if let Some(oi) = open {
            let o = &mut self.subs[si].outages[oi];
            o.end = Some(t);
            o.duration = Some(t - o.start);
            o.threshold = thr;
        }
        self.data_level(si, d, off, seg, t);
        let conn_dsn = self.subs[si]
            .conn
            .and_then(|ci| self.conns[ci].dirs[self.cdir(si, d)].max_end);
        self.subs[si].dirs[d].conn_dsn_at_last = conn_dsn;
    }

    /// The connection direction of subflow direction `d`.
    fn cdir(&self, si: usize, d: usize) -> usize {
        if self.subs[si].reversed {
            1 - d
        } else {
            d
        }
    }

    fn handshake(&mut self, si: usize, d: usize, seg: &Segment) {
        if !seg.flags.syn {
            // The third ACK of MP_CAPABLE carries both keys: the client's names joins the
            // server opens.
            if seg.mptcp.keys.len() == 2 && d == 0 {
                if let Some(ci) = self.subs[si].conn {
                    self.tokens
                        .entry(token_of_key(seg.mptcp.keys[0]))
                        .or_insert((ci, true));
                }
            }
            return;
        }
        self.subs[si].syn_seen = true;
        if let Some(j) = seg.mptcp.join {
            self.subs[si].join = true;
            self.subs[si].mptcp = true;
            self.subs[si].backup |= j.backup;
            if let Some(tok) = j.token {
                let (ci, rev) = match self.tokens.get(&tok) {
                    Some(&x) => x,
                    None => {
                        let ci = self.new_conn(Some(tok), true);
                        self.tokens.insert(tok, (ci, false));
                        (ci, false)
                    }
                };
                self.attach(si, ci, rev);
            }
        }
        if seg.flags.ack && seg.mptcp.subtypes.contains(&crate::Subtype::MpCapable) {
            if let Some(&k) = seg.mptcp.keys.first() {
                let tok = token_of_key(k);
                let ci = match self.tokens.get(&tok) {
                    Some(&(ci, _)) => ci,
                    None => {
                        let ci = self.new_conn(Some(tok), true);
                        self.tokens.insert(tok, (ci, false));
                        ci
                    }
                };
                self.attach(si, ci, false);
            }
        }
    }

    /// An ACK `ack` for subflow direction `d` (sent by its receiver) at time `t`.
    fn ack(&mut self, si: usize, d: usize, ack: u32, t: f64) {
        let dir = &mut self.subs[si].dirs[d];
        let Some(a) = dir.peek(ack) else { return };
        if dir.max_ack.is_some_and(|m| a <= m) {
            return; // not new: duplicate ACKs give no sample
        }
        dir.max_ack = Some(a);
        let mut sample = None;
        while let Some(o) = dir.outstanding.front_mut() {
            if o.end <= a {
                if o.end == a && !o.retx {
                    sample = Some(t - o.t);
                }
                dir.outstanding.pop_front();
            } else {
                if o.start < a {
                    o.start = a;
                }
                break;
            }
        }
        if let Some(s) = sample {
            dir.rtt.push((t, s * 1000.0));
            dir.srtt = Some(dir.srtt.map_or(s, |x| 0.875 * x + 0.125 * s));
        }
        if dir.max_end.is_some_and(|e| a >= e) {
            dir.all_acked.get_or_insert(t);
        }
    }

    fn ts_echo(&mut self, si: usize, d: usize, tsecr: u32, t: f64) {
        let dir = &mut self.subs[si].dirs[d];
        // Drop what is older than the echoed value; the echoed value gives a sample once.
        while let Some(&(v, ts)) = dir.ts_sent.front() {
            let diff = tsecr.wrapping_sub(v) as i32;
            if diff < 0 {
                break;
            }
            dir.ts_sent.pop_front();
            if diff == 0 {
                dir.rtt_ts.push((t, (t - ts) * 1000.0));
                if dir.srtt.is_none() || dir.rtt.is_empty() {
                    dir.srtt = Some(t - ts);
                }
                break;
            }
        }
    }

    fn data_ack(&mut self, si: usize, d: usize, ack: u64, is64: bool, t: f64) {
        let Some(ci) = self.subs[si].conn else { return };
        let cd = self.cdir(si, d);
        let c = &mut self.conns[ci].dirs[cd];
        let a = widen(ack, is64, c.max_end.or(c.data_ack));
        if c.data_ack.is_some_and(|x| a <= x) {
            return;
        }
        c.data_ack = Some(a);
        c.ack_hist.push_back((t, a));
        while c.ack_hist.front().is_some_and(|&(x, _)| x < t - 60.0) {
            c.ack_hist.pop_front();
        }
        if c.max_end.is_some_and(|e| a >= e) {
            c.all_acked.get_or_insert(t);
        }
        let pending = std::mem::take(&mut c.pending);
        let mut keep = Vec::new();
        for p in pending {
            if a >= p.2 {
                self.subs[p.0].outages[p.1].recovery = Some(t - p.3);
            } else {
                keep.push(p);
            }
        }
        self.conns[ci].dirs[cd].pending = keep;
    }

    fn check_outages(&mut self, si: usize, t: f64) {
        self.check_outages_at(si, t, true)
    }

    /// Place the segment's bytes at their DSNs (MPTCP only).
    fn data_level(&mut self, si: usize, d: usize, off: i64, seg: &Segment, t: f64) {
        let Some(ci) = self.subs[si].conn else { return };
        if !self.conns[ci].mptcp {
            return;
        }
        let cd = self.cdir(si, d);
        let dir = &mut self.subs[si].dirs[d];
        // The ISN is needed to read mappings (relative SSNs); without the SYN, the first
        // segment that carries a mapping is taken to begin it.
        // MP_CAPABLE on the first data segment (RFC 8684 3.1): its data starts at the
        // sender's IDSN + 1 and subflow sequence number 1, without a DSS mapping.
        let capable = (seg.mptcp.dss.is_none()
            && seg.wire_len > 0
            && seg.mptcp.keys.len() == 2
            && seg.mptcp.subtypes.contains(&crate::Subtype::MpCapable))
        .then(|| Mapping {
            dsn: crate::dss::idsn_of_key(seg.mptcp.keys[0]).wrapping_add(1),
            dsn64: true,
            ssn: 1,
            len: seg.wire_len.min(u16::MAX as u32) as u16,
            checksum: None,
        });
        if let Some(m) = seg.mptcp.dss.and_then(|x| x.mapping).or(capable) {
            if dir.isn.is_none() && m.len > 0 {
                let isn = seg.seq.wrapping_sub(m.ssn);
                dir.isn = Some(isn);
                // Re-base offsets on this ISN: offset of seq is then m.ssn - 1.
                let delta = (m.ssn as i64 - 1) - off;
                dir.last = dir.last.map(|(s, o)| (s, o + delta));
                dir.max_end = dir.max_end.map(|e| e + delta);
                dir.max_ack = dir.max_ack.map(|e| e + delta);
                for o in dir.outstanding.iter_mut() {
                    o.start += delta;
                    o.end += delta;
                }
            }
            if let (true, Some(isn)) = (m.len > 0, dir.isn) {
                let rel = seg.seq.wrapping_sub(isn);
                let cur = dir.peek(seg.seq).expect("offset taken");
                // offset = relative ssn - 1
                let moff = cur + (m.ssn.wrapping_sub(rel) as i32) as i64;
                dir.mappings.insert(moff, m);
                if dir.mappings.len() > 4096 {
                    dir.mappings.pop_first();
                }
            }
        }
        let Some(off) = dir.peek(if seg.flags.syn {
            seg.seq.wrapping_add(1)
        } else {
            seg.seq
        }) else {
            return;
        };
        if dir.isn.is_none() {
            self.conns[ci].dirs[cd].unmapped += seg.wire_len as u64;
            return;
        }
        let len = seg.wire_len as i64;
        let mut pieces: Vec<(u64, u64, bool)> = Vec::new(); // (dsn, len, 64-bit)
        let mut at = off;
        let mut unmapped = 0u64;
        while at < off + len {
            let Some((&ms, m)) = dir.mappings.range(..=at).next_back() else {
                unmapped += (off + len - at) as u64;
                break;
            };
            let into = at - ms;
            if m.len == 0 || into >= m.len as i64 {
                match dir.mappings.range(at + 1..).next() {
                    Some((&next, _)) if next < off + len => {
                        unmapped += (next - at) as u64;
                        at = next;
                        continue;
                    }
                    _ => {
                        unmapped += (off + len - at) as u64;
                        break;
                    }
                }
            }
            let n = (m.len as i64 - into).min(off + len - at);
            pieces.push((m.dsn.wrapping_add(into as u64), n as u64, m.dsn64));
            at += n;
        }
        let c = &mut self.conns[ci].dirs[cd];
        c.unmapped += unmapped;
        for (dsn, n, is64) in pieces {
            let dsn = widen(dsn, is64, c.last_dsn);
            c.last_dsn = Some(dsn);
            let first = *c.first.get_or_insert(dsn);
            if dsn < first {
                c.first = Some(dsn);
            }
            let end = dsn + n;
            if c.max_end.is_none_or(|e| end > e) {
                c.max_end = Some(end);
                c.all_acked = None;
            }
            place(c, dsn, end, si, t);
            self.subs[si].points[d].push((t, dsn.wrapping_sub(first) as f64));
        }
        if c.last_data.is_some_and(|l| t >= l) || c.last_data.is_none() {
            if let Some(oi) = c.outage_open.take() {
                let o = &mut self.conns[ci].outages[oi];
                o.end = Some(t);
                o.duration = Some(t - o.start);
                o.recovery = o.duration;
            }
        }
        let c = &mut self.conns[ci].dirs[cd];
        c.last_data = Some(t);
    }

    /// Open outages that have become visible by time `t` (silence beyond the threshold with
    /// data outstanding), for the subflows of `si`'s connection and the connection itself.
    ///
    /// A subflow direction is silent with data outstanding when its own data is not all
    /// acknowledged, or (MPTCP, `conn_evidence`) when its connection has data outstanding at
    /// the data level throughout: data stranded on a path that went down is often never
    /// captured (dropped before the capture point), and the connection carries on elsewhere.
    fn check_outages_at(&mut self, si: usize, t: f64, conn_evidence: bool) {
        let subs: Vec<usize> = match self.subs[si].conn {
            Some(ci) => self.conns[ci].subflows.clone(),
            None => vec![si],
        };
        for s in subs {
            for d in 0..2 {
                let thr = self.subs[s].dirs[d].threshold(&self.opts);
                let dir = &self.subs[s].dirs[d];
                let Some(last) = dir.last_data else { continue };
                if dir.outage_open.is_some() || t - last <= thr {
                    continue;
                }
                let cd = self.cdir(s, d);
                let conn_out = conn_evidence
                    && self.subs[s].conn.is_some_and(|ci| {
                        let c = &self.conns[ci].dirs[cd];
                        self.conns[ci].mptcp
                            && c.max_end.is_some()
                            && c.all_acked.is_none_or(|a| a > last + thr)
                    });
                let outstanding = dir.all_acked.is_none_or(|a| a > last + thr) || conn_out;
                if !outstanding {
                    continue;
                }
                let target = dir.conn_dsn_at_last;
                let o = Outage {
                    direction: dir_name(d),
                    start: last,
                    end: None,
                    duration: None,
                    threshold: thr,
                    recovery: None,
                };
                self.subs[s].outages.push(o);
                let oi = self.subs[s].outages.len() - 1;
                self.subs[s].dirs[d].outage_open = Some(oi);
                if let (Some(ci), Some(target)) = (self.subs[s].conn, target) {
                    let c = &mut self.conns[ci].dirs[cd];
                    // Already covered since the outage began?
                    let done = c
                        .ack_hist
                        .iter()
                        .find(|&&(at, a)| at >= last && a >= target)
                        .map(|&(at, _)| at);
                    match done {
                        Some(at) => self.subs[s].outages[oi].recovery = Some(at - last),
                        None => c.pending.push((s, oi, target, last)),
                    }
                }
            }
        }
        if let Some(ci) = self.subs[si].conn {
            if !self.conns[ci].mptcp {
                return;
            }
            let min = self.opts.min_outage.as_secs_f64();
            // The connection's threshold: its subflows' largest smoothed RTT.
            let srtt = self.conns[ci]
                .subflows
                .iter()
                .flat_map(|&s| self.subs[s].dirs.iter().filter_map(|d| d.srtt))
                .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x))));
            let thr = srtt.map_or(min, |s| (s * self.opts.outage_rtts).max(min));
            for cd in 0..2 {
                let c = &self.conns[ci].dirs[cd];
                let Some(last) = c.last_data else { continue };
                if c.outage_open.is_some() || t - last <= thr {
                    continue;
                }
                let outstanding = match (c.data_ack, c.max_end) {
                    (Some(a), Some(e)) => a < e || c.all_acked.is_some_and(|x| x > last + thr),
                    _ => false,
                };
                if !outstanding {
                    continue;
                }
                self.conns[ci].outages.push(Outage {
                    direction: dir_name(cd),
                    start: last,
                    end: None,
                    duration: None,
                    threshold: thr,
                    recovery: None,
                });
                let oi = self.conns[ci].outages.len() - 1;
                self.conns[ci].dirs[cd].outage_open = Some(oi);
            }
        }
    }

    /// The report. `captures` describes the inputs, in the order of their indices.
    pub fn finish(mut self, captures: Vec<CaptureInfo>, warnings: Vec<String>) -> TraceReport {
        let now = self.now;
        // Silences that last to the end of the capture.
        for si in 0..self.subs.len() {
            // At the end, only a subflow's own unacknowledged data counts: the connection
            // finishing on another subflow is not an outage of this one.
            self.check_outages_at(si, now, false);
        }
        let bin = self.opts.bin.as_secs_f64();
        // Dense from the first to the last bin with data (zeros between), or, when that
        // would exceed MAX_BINS, the bins with data only.
        let series = |bins: &BTreeMap<u64, u64>| -> Vec<(f64, f64)> {
            let rate = |i: u64, b: u64| (i as f64 * bin, b as f64 * 8.0 / bin / 1e6);
            match (bins.first_key_value(), bins.last_key_value()) {
                (Some((&a, _)), Some((&z, _))) if z - a < MAX_BINS => (a..=z)
                    .map(|i| rate(i, bins.get(&i).copied().unwrap_or(0)))
                    .collect(),
                _ => bins.iter().map(|(&i, &b)| rate(i, b)).collect(),
            }
        };
        let rtt_series = |samples: &[(f64, f64)]| -> Vec<(f64, f64)> {
            let mut by: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
            for &(t, v) in samples {
                by.entry((t / bin) as usize).or_default().push(v);
            }
            by.into_iter()
                .map(|(i, mut v)| {
                    v.sort_by(f64::total_cmp);
                    (i as f64 * bin, median_sorted(&v))
                })
                .collect()
        };
        // Subflows never attached (no payload at all): each its own connection.
        for si in 0..self.subs.len() {
            if self.subs[si].conn.is_none() {
                let mptcp = self.subs[si].mptcp;
                let ci = self.new_conn(None, mptcp);
                self.attach(si, ci, false);
            }
        }
        let mut connections = Vec::new();
        let mut subs: Vec<Option<SubState>> = self.subs.into_iter().map(Some).collect();
        for c in self.conns {
            if c.subflows.is_empty() {
                continue;
            }
            let mut subflows = Vec::new();
            let mut payload = PerDir::<u64>::default();
            let mut agg: [BTreeMap<u64, u64>; 2] = Default::default();
            let mut points: [Vec<Vec<(f64, f64)>>; 2] = Default::default();
            let mut start = f64::MAX;
            let mut end = 0f64;
            for &si in &c.subflows {
                let s = subs[si].take().expect("a subflow is in one connection");
                start = start.min(s.start);
                end = end.max(s.end);
                let mut sub = Subflow {
                    src: s.client.to_string(),
                    dst: s.server.to_string(),
                    capture: s.capture,
                    syn_seen: s.syn_seen,
                    join: s.join,
                    backup: s.backup,
                    start: s.start,
                    end: s.end,
                    fin: s.fin,
                    rst: s.rst,
                    payload_bytes: Default::default(),
                    segments: Default::default(),
                    retransmitted_bytes: Default::default(),
                    rtt: Default::default(),
                    rtt_ts: Default::default(),
                    throughput: Default::default(),
                    rtt_series: Default::default(),
                    outages: s.outages,
                    rtt_samples: Default::default(),
                };
                for (d, dir) in s.dirs.into_iter().enumerate() {
                    let cd = if s.reversed { 1 - d } else { d };
                    *sub.payload_bytes.get_mut(d) = dir.payload;
                    *sub.segments.get_mut(d) = dir.segments;
                    *sub.retransmitted_bytes.get_mut(d) = dir.retx;
                    *sub.rtt.get_mut(d) = RttStats::of(&dir.rtt);
                    *sub.rtt_ts.get_mut(d) = RttStats::of(&dir.rtt_ts);
                    *sub.throughput.get_mut(d) = series(&dir.bins);
                    *sub.rtt_series.get_mut(d) = rtt_series(&dir.rtt);
                    *payload.get_mut(cd) += dir.payload;
                    for (&i, &b) in &dir.bins {
                        *agg[cd].entry(i).or_default() += b;
                    }
                    *sub.rtt_samples.get_mut(d) = dir.rtt;
                }
                for (d, p) in s.points.into_iter().enumerate() {
                    let cd = if s.reversed { 1 - d } else { d };
                    points[cd].push(p.pts);
                }
                subflows.push(sub);
            }
            let data = c.mptcp.then(|| {
                let mut out = PerDir::<DataDir>::default();
                for (cd, (cdir, pts)) in c.dirs.into_iter().zip(points).enumerate() {
                    *out.get_mut(cd) = data_dir(cdir, pts, &c.subflows);
                }
                out
            });
            connections.push(Connection {
                mptcp: c.mptcp,
                token: c.token.map(|t| format!("{t:08x}")),
                start,
                end,
                subflows,
                payload_bytes: payload,
                throughput: PerDir {
                    c2s: series(&agg[0]),
                    s2c: series(&agg[1]),
                },
                data,
                outages: c.outages,
            });
        }
        connections.sort_by(|a, b| a.start.total_cmp(&b.start));
        TraceReport {
            captures,
            start_epoch: self.t0.map_or(0.0, |t| t.as_secs_f64()),
            duration: now,
            bin,
            connections,
            warnings,
        }
    }
}

/// Record `[dsn, end)` as sent by subflow `si` at `t`: what another subflow sent before is
/// a reinjection.
fn place(c: &mut ConnDir, dsn: u64, end: u64, si: usize, t: f64) {
    // Overlapping ranges already owned.
    let mut over: Vec<(u64, u64, usize)> = Vec::new();
    if let Some((&s, &(e, o))) = c.owners.range(..dsn).next_back() {
        if e > dsn {
            over.push((s, e, o));
        }
    }
    over.extend(c.owners.range(dsn..end).map(|(&s, &(e, o))| (s, e, o)));
    let mut cur = dsn;
    let mut fresh: Vec<(u64, u64)> = Vec::new();
    for (s, e, o) in over {
        if s > cur {
            fresh.push((cur, s));
        }
        let (os, oe) = (s.max(dsn), e.min(end));
        if o != si && oe > os {
            c.reinjected += oe - os;
            let rel = os - c.first.unwrap_or(os).min(os);
            let n = c.reinjections.len();
            match c.reinjections.last_mut() {
                Some(r) if r.from == o && r.to == si && r.dsn + r.bytes == rel => {
                    r.bytes += oe - os;
                }
                _ if n < MAX_EVENTS => c.reinjections.push(Reinjection {
                    time: t,
                    from: o,
                    to: si,
                    dsn: rel,
                    bytes: oe - os,
                }),
                _ => {}
            }
        }
        cur = cur.max(e);
    }
    if cur < end {
        fresh.push((cur, end));
    }
    for (s, e) in fresh {
        // Merge with a neighbour of the same owner that ends right here.
        if let Some((&ps, &(pe, po))) = c.owners.range(..s).next_back() {
            if pe == s && po == si {
                c.owners.insert(ps, (e, si));
                continue;
            }
        }
        c.owners.insert(s, (e, si));
    }
}

fn data_dir(c: ConnDir, points: Vec<Vec<(f64, f64)>>, subflows: &[usize]) -> DataDir {
    let mut covered = 0u64;
    let mut holes = 0u64;
    let mut prev_end: Option<u64> = None;
    for (&s, &(e, _)) in &c.owners {
        covered += e - s;
        if prev_end.is_some_and(|p| s > p) {
            holes += 1;
        }
        prev_end = Some(prev_end.map_or(e, |p| p.max(e)));
    }
    let first = c.first;
    let span = match (first, c.max_end) {
        (Some(f), Some(e)) => e - f,
        _ => 0,
    };
    // Subflow numbers in events are indices into the connection's subflow list.
    let pos = |g: usize| subflows.iter().position(|&x| x == g).unwrap_or(usize::MAX);
    let reinjections = c
        .reinjections
        .into_iter()
        .map(|mut r| {
            r.from = pos(r.from);
            r.to = pos(r.to);
            r
        })
        .collect();
    DataDir {
        first_dsn: first,
        bytes_covered: covered,
        span,
        holes,
        data_acked: match (first, c.data_ack) {
            (Some(f), Some(a)) => Some(a.saturating_sub(f)),
            _ => None,
        },
        reinjected_bytes: c.reinjected,
        reinjections,
        unmapped_bytes: c.unmapped,
        points,
    }
}

// ---------------------------------------------------------------------------------------
// The driver: captures in, report out.

enum Msg {
    Seg(Duration, Box<Segment>),
    End(Result<(capture::ReadEnd, u64, u64)>),
}

fn reader(path: PathBuf) -> Receiver<Msg> {
    let (tx, rx) = sync_channel::<Msg>(4096);
    std::thread::spawn(move || {
        let r = (|| -> Result<(capture::ReadEnd, u64, u64)> {
            let f = std::fs::File::open(&path).context("cannot open it")?;
            let (mut frames, mut tcp) = (0u64, 0u64);
            let end = capture::read_frames(f, |frame| {
                frames += 1;
                if let Ok(mut seg) = packet::parse_frame(frame.linktype, frame.data, frame.orig_len)
                {
                    tcp += 1;
                    seg.payload = Vec::new(); // only its length is needed
                    let _ = tx.send(Msg::Seg(frame.ts, Box::new(seg)));
                }
            })?;
            Ok((end, frames, tcp))
        })();
        let _ = tx.send(Msg::End(r));
    });
    rx
}

/// Analyse captures (pcap or pcapng), merged by time into one view: a subflow seen in
/// several captures (e.g. on the client's link and on the server's) is read from the first
/// capture that shows it. A capture that cannot be read, or is damaged or cut off, is an
/// error naming it.
pub fn analyze_captures(paths: &[PathBuf], opts: &TraceOptions) -> Result<TraceReport> {
    if paths.is_empty() {
        bail!("no capture given");
    }
    if opts.bin.is_zero() {
        bail!("the bin width must be positive");
    }
    for p in paths {
        if !p.is_file() {
            bail!("no such capture file: {}", p.display());
        }
    }
    let rxs: Vec<Receiver<Msg>> = paths.iter().map(|p| reader(p.clone())).collect();
    let mut heads: Vec<Option<(Duration, Box<Segment>)>> = vec![None; paths.len()];
    let mut ends: Vec<Option<(capture::ReadEnd, u64, u64)>> = vec![None; paths.len()];
    let mut dups = vec![0u64; paths.len()];
    let mut tracer = Tracer::new(*opts);
    let mut fail: Option<anyhow::Error> = None;
    let pull = |i: usize,
                heads: &mut Vec<Option<(Duration, Box<Segment>)>>,
                ends: &mut Vec<Option<(capture::ReadEnd, u64, u64)>>|
     -> Result<()> {
        if heads[i].is_some() || ends[i].is_some() {
            return Ok(());
        }
        match rxs[i].recv() {
            Ok(Msg::Seg(ts, s)) => heads[i] = Some((ts, s)),
            Ok(Msg::End(Ok(e))) => ends[i] = Some(e),
            Ok(Msg::End(Err(e))) => return Err(e.context(paths[i].display().to_string())),
            Err(_) => return Err(anyhow!("{}: the reader stopped", paths[i].display())),
        }
        Ok(())
    };
    loop {
        for i in 0..paths.len() {
            if let Err(e) = pull(i, &mut heads, &mut ends) {
                fail = Some(e);
                break;
            }
        }
        if fail.is_some() {
            break;
        }
        let next = heads
            .iter()
            .enumerate()
            .filter_map(|(i, h)| h.as_ref().map(|h| (h.0, i)))
            .min();
        let Some((_, i)) = next else { break };
        let (ts, seg) = heads[i].take().expect("a head");
        if tracer.owner(&seg).is_some_and(|o| o != i) {
            dups[i] += 1;
        }
        tracer.segment(i, ts, &seg);
    }
    if let Some(e) = fail {
        // Dropping the receivers stops the other readers.
        return Err(e);
    }
    let mut captures = Vec::new();
    for (i, e) in ends.into_iter().enumerate() {
        let (end, frames, tcp) = e.expect("every reader ended");
        if let Some(w) = end.warning {
            bail!("{}: {w}", paths[i].display());
        }
        captures.push(CaptureInfo {
            path: paths[i].display().to_string(),
            format: end.format,
            frames,
            tcp_segments: tcp,
            duplicate_segments: dups[i],
        });
    }
    let mut warnings = Vec::new();
    if captures.iter().all(|c| c.tcp_segments == 0) {
        warnings.push("no TCP segment in the captures".to_string());
    }
    Ok(tracer.finish(captures, warnings))
}

/// Analyse one capture given as bytes (for tests and fuzzing).
pub fn analyze_bytes(data: &[u8], opts: &TraceOptions) -> Result<TraceReport> {
    let mut tracer = Tracer::new(*opts);
    let (mut frames, mut tcp) = (0u64, 0u64);
    let end = capture::read_frames(data, |frame| {
        frames += 1;
        if let Ok(seg) = packet::parse_frame(frame.linktype, frame.data, frame.orig_len) {
            tcp += 1;
            tracer.segment(0, frame.ts, &seg);
        }
    })?;
    if let Some(w) = end.warning {
        bail!("{w}");
    }
    Ok(tracer.finish(
        vec![CaptureInfo {
            path: "-".into(),
            format: end.format,
            frames,
            tcp_segments: tcp,
            duplicate_segments: 0,
        }],
        Vec::new(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::craft::{self, tcp_frame, TcpFlags};
    use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
    use std::net::SocketAddrV4;

    fn pcap_at(frames: &[(f64, Vec<u8>)]) -> Vec<u8> {
        let mut w = PcapWriter::with_header(
            Vec::new(),
            PcapHeader {
                datalink: pcap_file::DataLink::ETHERNET,
                ..PcapHeader::default()
            },
        )
        .unwrap();
        for (t, f) in frames {
            let ts = Duration::from_secs_f64(1000.0 + t);
            w.write_packet(&PcapPacket::new(ts, f.len() as u32, f))
                .unwrap();
        }
        w.into_writer()
    }

    fn addrs() -> (SocketAddrV4, SocketAddrV4) {
        (
            "198.18.1.2:40000".parse().unwrap(),
            "198.18.3.2:7000".parse().unwrap(),
        )
    }

    fn ts_opt(val: u32, ecr: u32) -> Vec<u8> {
        let mut o = vec![1, 1, 8, 10];
        o.extend_from_slice(&val.to_be_bytes());
        o.extend_from_slice(&ecr.to_be_bytes());
        o
    }

    #[test]
    fn plain_tcp_bytes_rtt_and_throughput() {
        let (c, s) = addrs();
        let data = vec![7u8; 10_000];
        let pcap = craft::connection(c, s, &data, 1000);
        let r = analyze_bytes(&pcap, &TraceOptions::default()).unwrap();
        assert_eq!(r.connections.len(), 1);
        let conn = &r.connections[0];
        assert!(!conn.mptcp && conn.data.is_none());
        let sf = &conn.subflows[0];
        assert_eq!(
            (sf.src.as_str(), sf.dst.as_str()),
            ("198.18.1.2:40000", "198.18.3.2:7000")
        );
        assert_eq!(
            sf.payload_bytes,
            PerDir {
                c2s: 10_000,
                s2c: 0
            }
        );
        assert!(sf.syn_seen && sf.fin && !sf.join);
        // Every data segment is acked 1 ms later (the crafted frames are 1 ms apart).
        assert_eq!(sf.rtt.c2s.samples, 10);
        assert!(
            (sf.rtt.c2s.median_ms.unwrap() - 1.0).abs() < 1e-6,
            "{:?}",
            sf.rtt.c2s
        );
        assert_eq!(sf.rtt.s2c.samples, 0);
        let total: f64 = sf.throughput.c2s.iter().map(|p| p.1).sum();
        assert!(
            (total - 0.08).abs() < 1e-9,
            "10 kB in one 1 s bin: {total} Mbit/s"
        );
        assert!(sf.outages.is_empty(), "{:?}", sf.outages);
    }

    #[test]
    fn karn_no_sample_from_a_retransmitted_segment_and_timestamps() {
        let (c, s) = addrs();
        let f = |seq, ack, flags, opt: &[u8], p: &[u8]| tcp_frame(c, s, seq, ack, flags, opt, p);
        let b = |seq, ack, flags, opt: &[u8]| tcp_frame(s, c, seq, ack, flags, opt, &[]);
        let frames = vec![
            (0.000, f(100, 0, TcpFlags::SYN, &[], &[])),
            (0.010, b(500, 101, TcpFlags::SYN_ACK, &[])),
            (0.020, f(101, 501, TcpFlags::ACK, &ts_opt(1, 0), &[1; 100])),
            // acked after 30 ms: a sample (ACK) and an echo of TSval 1 (timestamps)
            (0.050, b(501, 201, TcpFlags::ACK, &ts_opt(9, 1))),
            (0.060, f(201, 501, TcpFlags::ACK, &ts_opt(2, 9), &[2; 100])),
            // retransmitted, then acked: Karn gives no ACK sample
            (0.300, f(201, 501, TcpFlags::ACK, &ts_opt(3, 9), &[2; 100])),
            (0.310, b(501, 301, TcpFlags::ACK, &ts_opt(10, 3))),
        ];
        let r = analyze_bytes(&pcap_at(&frames), &TraceOptions::default()).unwrap();
        let sf = &r.connections[0].subflows[0];
        assert_eq!(sf.payload_bytes.c2s, 300);
        assert_eq!(sf.retransmitted_bytes.c2s, 100);
        assert_eq!(sf.rtt.c2s.samples, 1);
        assert!((sf.rtt.c2s.median_ms.unwrap() - 30.0).abs() < 1e-6);
        // TSval 1 echoed at 0.050 (30 ms), TSval 3 echoed at 0.310 (10 ms).
        assert_eq!(sf.rtt_ts.c2s.samples, 2);
        assert!((sf.rtt_ts.c2s.max_ms.unwrap() - 30.0).abs() < 1e-6);
        assert!((sf.rtt_ts.c2s.min_ms.unwrap() - 10.0).abs() < 1e-6);
        // 240 ms of silence with 100 bytes unacknowledged: an outage of the subflow.
        assert_eq!(sf.outages.len(), 1, "{:?}", sf.outages);
        let o = &sf.outages[0];
        assert_eq!(o.direction, "c2s");
        assert!((o.start - 0.060).abs() < 1e-6 && (o.duration.unwrap() - 0.240).abs() < 1e-6);
    }

    #[test]
    fn a_silence_with_everything_acked_is_no_outage() {
        let (c, s) = addrs();
        let frames = vec![
            (0.0, tcp_frame(c, s, 1, 1, TcpFlags::ACK, &[], &[1; 10])),
            (0.001, tcp_frame(s, c, 1, 11, TcpFlags::ACK, &[], &[])),
            (5.0, tcp_frame(c, s, 11, 1, TcpFlags::ACK, &[], &[1; 10])),
            (5.001, tcp_frame(s, c, 1, 21, TcpFlags::ACK, &[], &[])),
        ];
        let r = analyze_bytes(&pcap_at(&frames), &TraceOptions::default()).unwrap();
        assert!(r.connections[0].subflows[0].outages.is_empty());
        assert_eq!(r.connections[0].subflows[0].rtt.c2s.samples, 2);
    }

    /// Two joined subflows of one connection; the second sends DSNs 1000..1500 again.
    #[test]
    fn joined_subflows_group_by_token_and_reinjections_are_found() {
        let (c1, s) = addrs();
        let c2: SocketAddrV4 = "198.18.2.2:40001".parse().unwrap();
        let data = vec![5u8; 2000];
        let a = craft::joined_subflow(c1, s, 0xabcd, &[(0, &data[..1500])], 500, true, 0);
        let b = craft::joined_subflow(c2, s, 0xabcd, &[(1000, &data[1000..])], 500, true, 0);
        let dir = std::env::temp_dir().join(format!("nena-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (pa, pb) = (dir.join("a.pcap"), dir.join("b.pcap"));
        std::fs::write(&pa, &a).unwrap();
        // The second capture 10 ms later than the first (craft's frames start at 1 s).
        let shifted: Vec<(f64, Vec<u8>)> = {
            let mut v = Vec::new();
            crate::capture::read_frames(&b[..], |f| {
                v.push((f.ts.as_secs_f64() - 1000.0 + 0.010, f.data.to_vec()))
            })
            .unwrap();
            v
        };
        std::fs::write(&pb, pcap_at(&shifted)).unwrap();
        let r = analyze_captures(&[pa.clone(), pb.clone()], &TraceOptions::default());
        // the same capture twice: its segments are counted once
        let twice = analyze_captures(&[pa.clone(), pa.clone()], &TraceOptions::default());
        std::fs::remove_dir_all(&dir).unwrap();
        let r = r.unwrap();
        assert_eq!(r.connections.len(), 1, "{r:#?}");
        let conn = &r.connections[0];
        assert!(conn.mptcp);
        assert_eq!(conn.token.as_deref(), Some("0000abcd"));
        assert_eq!(conn.subflows.len(), 2);
        assert!(conn.subflows.iter().all(|s| s.join));
        assert_eq!(conn.payload_bytes.c2s, 2500);
        let d = &conn.data.as_ref().unwrap().c2s;
        assert_eq!((d.bytes_covered, d.span, d.holes), (2000, 2000, 0));
        assert_eq!(d.reinjected_bytes, 500);
        assert_eq!(d.reinjections.len(), 1);
        let re = &d.reinjections[0];
        assert_eq!((re.from, re.to, re.dsn, re.bytes), (0, 1, 1000, 500));
        let twice = twice.unwrap();
        assert_eq!(twice.connections[0].payload_bytes.c2s, 1500);
        assert!(twice.captures[1].duplicate_segments > 0);
        assert_eq!(
            twice.connections[0]
                .data
                .as_ref()
                .unwrap()
                .c2s
                .reinjected_bytes,
            0
        );
    }

    #[test]
    fn hostile_captures_are_one_error_each() {
        let (c, s) = addrs();
        let good = craft::connection(c, s, &[1u8; 3000], 1000);
        let cut = &good[..good.len() - 7];
        let mut bad_len = good.clone();
        bad_len[24 + 8..24 + 12].copy_from_slice(&0x7fff_ffffu32.to_le_bytes()); // incl_len
        for (name, bytes) in [
            ("empty", &[][..]),
            ("garbage", &b"this is not a capture at all"[..]),
            ("cut", cut),
            ("bad length", &bad_len[..]),
        ] {
            let e = analyze_bytes(bytes, &TraceOptions::default())
                .expect_err(name)
                .to_string();
            assert!(!e.is_empty() && !e.contains('\n'), "{name}: {e}");
        }
        assert!(analyze_bytes(&good, &TraceOptions::default()).is_ok());
        assert!(analyze_captures(&[], &TraceOptions::default()).is_err());
        let e = analyze_captures(&["/nonexistent/x.pcap".into()], &TraceOptions::default())
            .unwrap_err();
        assert!(e.to_string().contains("no such capture"), "{e}");
    }
}
