//! What `nena analyze` reports: the options, the limits, and the report's types (per
//! connection, subflow and direction: bytes, RTT statistics, series, outages, the data
//! level). Plain data, serialisable; [`super::Tracer`] fills it in.

use serde::Serialize;
use std::time::Duration;

/// At most this many sequence-graph points are kept per subflow and direction (older
/// points are thinned by half each time the limit is reached).
pub const MAX_POINTS: usize = 20_000;
/// At most this many reinjection and outage events are listed per connection direction
/// (the byte counts cover all).
pub const MAX_EVENTS: usize = 1_000;
/// A throughput series is dense (zero bins included) up to this many bins.
pub const MAX_BINS: u64 = 100_000;

/// Resolution at which bytes are counted when the bin is chosen at the end
/// ([`TraceOptions::bin`] `None`): every [`NICE_BINS`] width is a multiple of it.
pub const FINE_BIN: f64 = 0.01;
/// The bin widths [`auto_bin`] chooses from, seconds.
pub const NICE_BINS: [f64; 17] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0,
    1800.0,
];
/// Bins [`auto_bin`] aims at, at most, over a capture: enough for the shape of a transfer
/// (a ramp, an outage), few enough that each bin holds many segments.
pub const AUTO_BINS: f64 = 60.0;

/// The bin width for a capture of `duration` seconds: the smallest of [`NICE_BINS`] that
/// makes at most [`AUTO_BINS`] bins (a 2 s capture: 50 ms; 30 s: 500 ms; 10 min: 10 s).
pub fn auto_bin(duration: f64) -> f64 {
    NICE_BINS
        .iter()
        .copied()
        .find(|b| duration / b <= AUTO_BINS)
        .unwrap_or(NICE_BINS[NICE_BINS.len() - 1])
}

/// A bin width for people: `50 ms`, `2 s`.
pub fn bin_label(bin: f64) -> String {
    if bin < 1.0 {
        format!("{} ms", (bin * 1e3).round())
    } else {
        format!("{bin} s")
    }
}

/// How to analyse.
#[derive(Debug, Clone, Copy)]
pub struct TraceOptions {
    /// Width of a throughput / RTT series bin; `None`: chosen from the capture's length
    /// ([`auto_bin`]).
    pub bin: Option<Duration>,
    /// A subflow or connection that sends nothing for more than this many smoothed RTTs
    /// while data is outstanding is in an outage ...
    pub outage_rtts: f64,
    /// ... and for at least this long (keeps delayed-ACK pauses and short RTOs out).
    pub min_outage: Duration,
}

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions {
            bin: None,
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
    pub(super) fn get_mut(&mut self, d: usize) -> &mut T {
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
    /// Whether `bin` was chosen from the capture's length (no `--bin`).
    pub bin_auto: bool,
    pub connections: Vec<Connection>,
    pub warnings: Vec<String>,
}
