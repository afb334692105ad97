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
//!
//! Files: `report` the options and the report's types; `tracer` the [`Tracer`] (grouping,
//! bytes, throughput); `state` its per-subflow and per-connection state; `rtt` RTT samples
//! and statistics; `dsn` the MPTCP data level (mappings, reinjections, data ACKs); `outages`
//! silences with data outstanding; `driver` the captures' reading and merging.

mod driver;
mod dsn;
mod outages;
mod report;
mod rtt;
mod state;
mod tracer;

#[cfg(test)]
pub(crate) mod fixtures;

pub use driver::{analyze_bytes, analyze_captures};
pub use report::{
    auto_bin, bin_label, CaptureInfo, Connection, DataDir, Outage, PerDir, Reinjection, RttStats,
    Subflow, TraceOptions, TraceReport, AUTO_BINS, FINE_BIN, MAX_BINS, MAX_EVENTS, MAX_POINTS,
    NICE_BINS,
};
pub use tracer::Tracer;
