//! The tracer's state per subflow direction ([`DirState`]: sequence unwrapping,
//! outstanding data, bins, RTT samples), per subflow ([`SubState`]), and per MPTCP
//! connection direction ([`ConnDir`]: who sent which DSN range first, data ACKs).

use super::report::{Outage, Reinjection, TraceOptions, MAX_POINTS};
use crate::dss::Mapping;
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;

/// A data segment awaiting its ACK.
#[derive(Debug, Clone, Copy)]
pub(super) struct Out {
    pub(super) start: i64,
    pub(super) end: i64,
    pub(super) t: f64,
    pub(super) retx: bool,
}

/// One direction of one subflow.
#[derive(Debug, Default)]
pub(super) struct DirState {
    pub(super) isn: Option<u32>,
    /// Unwrapping reference: (sequence number, its offset from the ISN's data start).
    pub(super) last: Option<(u32, i64)>,
    pub(super) max_end: Option<i64>,
    pub(super) max_ack: Option<i64>,
    pub(super) outstanding: VecDeque<Out>,
    pub(super) payload: u64,
    pub(super) segments: u64,
    pub(super) retx: u64,
    /// Payload bytes per bin (sparse: a capture's times may be far apart or damaged).
    pub(super) bins: BTreeMap<u64, u64>,
    pub(super) rtt: Vec<(f64, f64)>,
    pub(super) rtt_ts: Vec<(f64, f64)>,
    pub(super) srtt: Option<f64>,
    pub(super) ts_sent: VecDeque<(u32, f64)>,
    pub(super) last_data: Option<f64>,
    /// When everything sent had been acknowledged (None while data is outstanding).
    pub(super) all_acked: Option<f64>,
    /// The connection's highest DSN end (this direction) when this subflow last sent data.
    pub(super) conn_dsn_at_last: Option<u64>,
    /// An outage in progress was already registered (at the time of its start).
    pub(super) outage_open: Option<usize>,
    /// Recent DSS mappings: offset of first byte -> mapping.
    pub(super) mappings: BTreeMap<i64, Mapping>,
}

impl DirState {
    /// Offset of `seq` from the first data byte (unwrapping 32-bit sequence numbers).
    pub(super) fn offset(&mut self, seq: u32) -> i64 {
        let (ls, lo) = *self.last.get_or_insert((seq, 0));
        let off = lo + (seq.wrapping_sub(ls) as i32) as i64;
        self.last = Some((seq, off));
        off
    }
    /// Offset of `seq` without moving the reference.
    pub(super) fn peek(&self, seq: u32) -> Option<i64> {
        self.last
            .map(|(ls, lo)| lo + (seq.wrapping_sub(ls) as i32) as i64)
    }
    pub(super) fn threshold(&self, o: &TraceOptions) -> f64 {
        let min = o.min_outage.as_secs_f64();
        self.srtt.map_or(min, |s| (s * o.outage_rtts).max(min))
    }
}

/// One subflow (a TCP connection), both directions.
#[derive(Debug)]
pub(super) struct SubState {
    pub(super) client: SocketAddr,
    pub(super) server: SocketAddr,
    pub(super) capture: usize,
    pub(super) syn_seen: bool,
    pub(super) join: bool,
    pub(super) backup: bool,
    pub(super) mptcp: bool,
    pub(super) start: f64,
    pub(super) end: f64,
    pub(super) fin: bool,
    pub(super) rst: bool,
    pub(super) conn: Option<usize>,
    /// Whether c2s of this subflow is s2c of its connection (a subflow opened by the server).
    pub(super) reversed: bool,
    pub(super) dirs: [DirState; 2],
    pub(super) outages: Vec<Outage>,
    pub(super) points: [Decimator; 2],
}

impl SubState {
    /// The connection direction of subflow direction `d`.
    pub(super) fn cdir(&self, d: usize) -> usize {
        if self.reversed {
            1 - d
        } else {
            d
        }
    }
}

/// Sequence-graph points of one subflow direction, thinned to at most [`MAX_POINTS`].
#[derive(Debug, Default, Clone)]
pub(super) struct Decimator {
    pub(super) pts: Vec<(f64, f64)>,
    pub(super) stride: usize,
    pub(super) seen: usize,
}

impl Decimator {
    pub(super) fn push(&mut self, p: (f64, f64)) {
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

/// One direction of a connection at the data level (MPTCP).
#[derive(Debug, Default)]
pub(super) struct ConnDir {
    /// DSN ranges and the subflow that sent them first: start -> (end, subflow).
    pub(super) owners: BTreeMap<u64, (u64, usize)>,
    pub(super) first: Option<u64>,
    pub(super) max_end: Option<u64>,
    pub(super) last_dsn: Option<u64>,
    pub(super) data_ack: Option<u64>,
    /// Data ACK advances (time, ack), the last minute of them.
    pub(super) ack_hist: VecDeque<(f64, u64)>,
    pub(super) reinjected: u64,
    pub(super) reinjections: Vec<Reinjection>,
    pub(super) unmapped: u64,
    pub(super) last_data: Option<f64>,
    pub(super) all_acked: Option<f64>,
    /// Subflow outages waiting for the data ACK: (subflow, outage index, target DSN, start).
    pub(super) pending: Vec<(usize, usize, u64, f64)>,
    pub(super) outage_open: Option<usize>,
}

/// One connection: its subflows (indices into the tracer's list) and data level.
#[derive(Debug)]
pub(super) struct ConnState {
    pub(super) token: Option<u32>,
    pub(super) mptcp: bool,
    pub(super) subflows: Vec<usize>,
    pub(super) dirs: [ConnDir; 2],
    pub(super) outages: Vec<Outage>,
}

/// The name of direction `d` in the report.
pub(super) fn dir_name(d: usize) -> &'static str {
    if d == 0 {
        "c2s"
    } else {
        "s2c"
    }
}
