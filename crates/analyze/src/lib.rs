//! nena-analyze: what an eavesdropper on one link sees.
//!
//! Reads a capture (pcap or pcapng, via `pcap-file`), parses each frame down to TCP (via
//! `etherparse`), notes the MPTCP options, reassembles each direction of each subflow by
//! sequence number, and answers two questions: what does the payload look like to the
//! attacker (text or hex, like the papers' Figures 13, 14, 16 and 17), and does any 16-byte
//! run of a known file appear in what crossed the link ([`known::check`]). [`trace`] is
//! `nena analyze` (tcptrace/mptcptrace: subflows, throughput, RTT, reinjections, outages
//! over one or more captures) and [`plot`] draws its figures.

pub mod attack;
pub mod capture;
/// Crafted captures for tests (the `testing` feature: other crates' tests).
#[cfg(any(test, feature = "testing"))]
pub mod craft;
pub mod datalevel;
pub mod dss;
pub mod fuzzing;
pub mod known;
pub mod mptcp;
pub mod packet;
pub mod plot;
pub mod reassembly;
pub mod render;
pub mod start;
pub mod trace;

pub use known::{KnownMatch, KnownReport};
pub use mptcp::{MptcpInfo, Subtype};
pub use packet::{Flags, Segment, Skip};

use anyhow::{Context, Result};
use reassembly::{Direction, Stream};
use serde::Serialize;
use std::collections::HashMap;
use std::io::Read;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// What to keep for display while analysing.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Keep at most this many payload-carrying segments for display.
    pub keep_segments: usize,
    /// Keep at most this many payload bytes of each kept segment.
    pub keep_bytes: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            keep_segments: usize::MAX,
            keep_bytes: usize::MAX,
        }
    }
}

/// A payload-carrying segment kept for display.
#[derive(Debug, Clone, Serialize)]
pub struct SegmentView {
    /// Frame number in the capture (1-based, as Wireshark counts).
    pub frame: u64,
    /// Seconds since the first frame.
    pub time: f64,
    pub src: SocketAddr,
    pub dst: SocketAddr,
    /// Sequence number relative to the direction's first data byte (1 = first byte).
    pub seq: u32,
    /// Acknowledgment number, relative to the other direction's first byte when its SYN or
    /// data was seen (otherwise as on the wire).
    pub ack: u32,
    pub flags: Flags,
    pub mptcp: Vec<Subtype>,
    /// Payload length on the wire (as far as captured).
    pub len: usize,
    /// The payload was cut by the snapshot length.
    pub truncated: bool,
    /// The first `keep_bytes` payload bytes.
    #[serde(serialize_with = "ser_hex")]
    pub payload: Vec<u8>,
    /// Index into [`Analysis::flows`].
    pub flow: usize,
}

fn ser_hex<S: serde::Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&b.iter().map(|x| format!("{x:02x}")).collect::<String>())
}

/// One direction of one TCP connection (for MPTCP: of one subflow).
#[derive(Debug, Clone, Serialize)]
pub struct Flow {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    /// `src -> dst`.
    pub label: String,
    /// TCP segments in this direction.
    pub segments: u64,
    /// Segments carrying payload.
    pub payload_segments: u64,
    /// Payload bytes on the wire, retransmissions included.
    pub payload_bytes: u64,
    /// Distinct stream bytes after reassembly.
    pub stream_bytes: u64,
    /// Retransmitted or overlapping payload bytes.
    pub duplicate_bytes: u64,
    /// Holes in the reassembled stream (data not captured).
    pub gaps: u64,
    /// MPTCP option subtypes seen in this direction.
    pub mptcp: Vec<Subtype>,
    /// MPTCP keys seen in clear in MP_CAPABLE (hex).
    pub mptcp_keys: Vec<String>,
    /// Whether the SYN of this direction was captured.
    pub syn_seen: bool,
}

/// Frames that yielded no TCP segment, by reason.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Skipped {
    pub not_ip: u64,
    pub not_tcp: u64,
    pub fragments: u64,
    pub malformed: u64,
}

/// The analysis of a capture.
#[derive(Debug, Clone, Serialize)]
pub struct Analysis {
    /// "pcap" or "pcapng".
    pub format: &'static str,
    pub frames: u64,
    pub tcp_segments: u64,
    /// Payload-carrying TCP segments.
    pub segments: u64,
    /// Payload bytes in those segments (retransmissions included).
    pub payload_bytes: u64,
    /// Segments whose payload was cut by the snapshot length.
    pub truncated_segments: u64,
    pub skipped: Skipped,
    pub warnings: Vec<String>,
    pub flows: Vec<Flow>,
    /// The kept payload segments (see [`Options`]).
    #[serde(skip)]
    pub shown: Vec<SegmentView>,
    /// Reassembled stream of each flow (same order as `flows`).
    #[serde(skip)]
    pub streams: Vec<Stream>,
}

impl Analysis {
    /// Check a known file against the reassembled streams of every flow.
    pub fn check_known(&self, known: &[u8], max_matches: usize) -> KnownReport {
        let mut pieces = Vec::new();
        for (f, s) in self.flows.iter().zip(&self.streams) {
            for (off, data) in &s.chunks {
                pieces.push(known::Piece {
                    flow: &f.label,
                    offset: *off,
                    data,
                });
            }
        }
        known::check(known, &pieces, max_matches)
    }
}

#[derive(Default)]
struct FlowAcc {
    dir: Direction,
    segments: u64,
    payload_segments: u64,
    mptcp: Vec<Subtype>,
    keys: Vec<u64>,
    syn_seen: bool,
}

/// Analyse a capture from a reader.
pub fn analyze_reader<R: Read>(reader: R, opts: &Options) -> Result<Analysis> {
    let mut a = Analysis {
        format: "pcap",
        frames: 0,
        tcp_segments: 0,
        segments: 0,
        payload_bytes: 0,
        truncated_segments: 0,
        skipped: Skipped::default(),
        warnings: Vec::new(),
        flows: Vec::new(),
        shown: Vec::new(),
        streams: Vec::new(),
    };
    let mut index: HashMap<(SocketAddr, SocketAddr), usize> = HashMap::new();
    let mut accs: Vec<FlowAcc> = Vec::new();
    let mut keys: Vec<(SocketAddr, SocketAddr)> = Vec::new();
    let mut t0: Option<Duration> = None;
    let end = capture::read_frames(reader, |frame| {
        a.frames += 1;
        let t0 = *t0.get_or_insert(frame.ts);
        let seg = match packet::parse_frame(frame.linktype, frame.data, frame.orig_len) {
            Ok(s) => s,
            Err(Skip::NotIp) => return a.skipped.not_ip += 1,
            Err(Skip::NotTcp) => return a.skipped.not_tcp += 1,
            Err(Skip::Fragment) => return a.skipped.fragments += 1,
            Err(Skip::Malformed) => return a.skipped.malformed += 1,
        };
        a.tcp_segments += 1;
        let key = (seg.src, seg.dst);
        let fi = *index.entry(key).or_insert_with(|| {
            accs.push(FlowAcc::default());
            keys.push(key);
            accs.len() - 1
        });
        let acc = &mut accs[fi];
        acc.segments += 1;
        acc.syn_seen |= seg.flags.syn;
        for st in &seg.mptcp.subtypes {
            if !acc.mptcp.contains(st) {
                acc.mptcp.push(*st);
            }
        }
        for k in &seg.mptcp.keys {
            if !acc.keys.contains(k) {
                acc.keys.push(*k);
            }
        }
        // Only what was captured goes into the stream; a cut payload leaves a hole.
        acc.dir.add(seg.seq, seg.flags.syn, &seg.payload);
        if seg.payload.is_empty() {
            return;
        }
        a.segments += 1;
        a.payload_bytes += seg.payload.len() as u64;
        a.truncated_segments += seg.truncated as u64;
        acc.payload_segments += 1;
        if a.shown.len() < opts.keep_segments {
            let data_seq = if seg.flags.syn {
                seg.seq.wrapping_add(1)
            } else {
                seg.seq
            };
            let keep = seg.payload.len().min(opts.keep_bytes);
            let ack = match index.get(&(seg.dst, seg.src)) {
                Some(&ri) if seg.flags.ack => accs[ri].dir.relative_ack(seg.ack).unwrap_or(seg.ack),
                _ => seg.ack,
            };
            let acc = &accs[fi];
            a.shown.push(SegmentView {
                frame: a.frames,
                time: frame.ts.saturating_sub(t0).as_secs_f64(),
                src: seg.src,
                dst: seg.dst,
                seq: acc.dir.relative(data_seq),
                ack,
                flags: seg.flags,
                mptcp: seg.mptcp.subtypes.clone(),
                len: seg.payload.len(),
                truncated: seg.truncated,
                payload: seg.payload[..keep].to_vec(),
                flow: fi,
            });
        }
    })?;
    a.format = end.format;
    if let Some(w) = end.warning {
        a.warnings.push(w);
    }
    if a.skipped.malformed > 0 {
        a.warnings.push(format!(
            "{} frames had malformed or cut-off headers and were skipped",
            a.skipped.malformed
        ));
    }
    for ((src, dst), acc) in keys.into_iter().zip(accs) {
        let payload_bytes = acc.dir.payload_bytes();
        let stream = acc.dir.reassemble();
        a.flows.push(Flow {
            src,
            dst,
            label: format!("{src} -> {dst}"),
            segments: acc.segments,
            payload_segments: acc.payload_segments,
            payload_bytes,
            stream_bytes: stream.len(),
            duplicate_bytes: stream.duplicate_bytes,
            gaps: stream.gaps,
            mptcp: acc.mptcp,
            mptcp_keys: acc.keys.iter().map(|k| format!("{k:016x}")).collect(),
            syn_seen: acc.syn_seen,
        });
        a.streams.push(stream);
    }
    Ok(a)
}

/// Analyse a capture file.
pub fn analyze_file(path: &Path, opts: &Options) -> Result<Analysis> {
    let f = std::fs::File::open(path)
        .with_context(|| format!("cannot open capture {}", path.display()))?;
    analyze_reader(f, opts).with_context(|| format!("reading {}", path.display()))
}
