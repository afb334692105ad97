//! The MPTCP data stream as a capture shows it: every captured payload byte placed at its
//! data sequence number (DSN) through the DSS mappings of its subflow, subflows grouped into
//! connections by token, and each direction's bytes merged into **runs**, maximal ranges of
//! contiguous DSNs. An eavesdropper on one path sees only that path's subflow: its runs are
//! the pieces of the data stream the scheduler sent there.
//!
//! - A subflow's sequence numbers are made relative to its initial sequence number: from
//!   its SYN when captured, else inferred from segments that begin a mapping (the most common
//!   `seq - ssn`); a subflow with no such segment cannot be placed and is reported.
//! - Mappings are collected first, then every segment is placed (a mapping may come in an
//!   earlier segment than the bytes it covers; segments may straddle mappings).
//! - 32-bit DSNs are widened against the previous mapping of the same direction.
//! - Retransmitted bytes: the first copy wins; copies that differ are counted as conflicts.
//! - nena's in-band handshake messages (magic `8b 4e 45 4e 41`) at the start of a run are
//!   taken out of it, so that a run is protected bytes only.

use crate::capture;
use crate::dss::{token_of_key, Mapping};
use crate::packet::{self, Segment};
use anyhow::Result;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::net::SocketAddr;

/// Which way bytes go in a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// From the side that opened the connection.
    ClientToServer,
    ServerToClient,
    /// The subflow's SYN was not captured.
    Unknown,
}

impl Direction {
    pub fn short(self) -> &'static str {
        match self {
            Direction::ClientToServer => "c2s",
            Direction::ServerToClient => "s2c",
            Direction::Unknown => "?",
        }
    }
}

/// A maximal range of contiguous data sequence numbers seen in the capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// DSN of the first byte.
    pub dsn: u64,
    pub bytes: Vec<u8>,
}

/// One direction of one MPTCP connection, as far as the capture shows it.
#[derive(Debug, Clone, Serialize)]
pub struct DataStream {
    /// `token 0x1234abcd` when the connection's token is known, else the subflow's addresses.
    pub connection: String,
    pub direction: Direction,
    /// The subflows (`src -> dst`) whose bytes are in it.
    pub subflows: Vec<String>,
    /// Distinct data bytes placed.
    pub bytes_seen: u64,
    /// nena handshake bytes taken out of the runs.
    pub handshake_bytes: u64,
    /// DSN of the direction's first protected byte, when a run shows it: the bytes right
    /// after the nena handshake messages that began the run (a handshake message is only
    /// ever at the start of a direction). `None` when no run began with one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protected_from: Option<u64>,
    /// Bytes of retransmitted copies that differed from the first copy.
    pub conflicting_bytes: u64,
    #[serde(skip)]
    pub runs: Vec<Run>,
}

/// The data-level view of a capture.
#[derive(Debug, Clone, Serialize)]
pub struct DataCapture {
    pub streams: Vec<DataStream>,
    /// Payload bytes of subflows that could not be placed (no mapping found), with why.
    pub unplaced: Vec<Unplaced>,
    pub warnings: Vec<String>,
}

/// Payload that could not be placed in a data stream.
#[derive(Debug, Clone, Serialize)]
pub struct Unplaced {
    pub subflow: String,
    pub bytes: u64,
    pub why: &'static str,
}

#[derive(Default)]
struct SubflowAcc {
    /// Sequence number of its SYN (the ISN).
    isn: Option<u32>,
    /// Whether the SYN was sent by this direction's source without ACK (the opener).
    opener: Option<bool>,
    /// Token of the connection (MP_JOIN on the SYN, or from a key of MP_CAPABLE).
    token: Option<u32>,
    /// Data segments: (seq, payload).
    segments: Vec<(u32, Vec<u8>)>,
    /// Mappings by absolute sequence number of their first byte when the segment carrying
    /// them is known to start there: candidates for the ISN.
    isn_votes: HashMap<u32, u32>,
    /// Mappings by relative subflow sequence number.
    mappings: BTreeMap<u32, Mapping>,
}

/// Reads a capture and builds its data streams.
pub fn data_streams<R: Read>(reader: R) -> Result<DataCapture> {
    let mut flows: HashMap<(SocketAddr, SocketAddr), SubflowAcc> = HashMap::new();
    let mut order: Vec<(SocketAddr, SocketAddr)> = Vec::new();
    // MP_CAPABLE keys: (client, server) -> the server's key (in its SYN/ACK).
    let end = capture::read_frames(reader, |frame| {
        let Ok(seg) = packet::parse_frame(frame.linktype, frame.data, frame.orig_len) else {
            return;
        };
        add_segment(&mut flows, &mut order, seg);
    })?;
    let mut warnings: Vec<String> = end.warning.into_iter().collect();
    // A token learnt on one direction holds for the other.
    let tokens: Vec<((SocketAddr, SocketAddr), u32)> = flows
        .iter()
        .filter_map(|(k, f)| f.token.map(|t| (*k, t)))
        .collect();
    for ((a, b), t) in tokens {
        if let Some(r) = flows.get_mut(&(b, a)) {
            r.token.get_or_insert(t);
        }
    }
    let openers: Vec<((SocketAddr, SocketAddr), bool)> = flows
        .iter()
        .filter_map(|(k, f)| f.opener.map(|o| (*k, o)))
        .collect();
    for ((a, b), o) in openers {
        if let Some(r) = flows.get_mut(&(b, a)) {
            r.opener.get_or_insert(!o);
        }
    }

    // Place every byte: (connection, direction) -> DSN -> bytes.
    let mut placed: BTreeMap<(String, Direction), Placed> = BTreeMap::new();
    let mut unplaced = Vec::new();
    for key in order {
        let f = flows.remove(&key).expect("every key has its flow");
        let label = format!("{} -> {}", key.0, key.1);
        let payload: u64 = f.segments.iter().map(|(_, p)| p.len() as u64).sum();
        if payload == 0 {
            continue;
        }
        let isn = f.isn.or_else(|| {
            f.isn_votes
                .iter()
                .max_by_key(|(isn, n)| (**n, std::cmp::Reverse(**isn)))
                .map(|(isn, _)| *isn)
        });
        let Some(isn) = isn else {
            unplaced.push(Unplaced {
                subflow: label,
                bytes: payload,
                why: "no DSS mapping and no SYN seen: cannot place its bytes in the data stream",
            });
            continue;
        };
        let connection = match f.token {
            Some(t) => format!("token {t:08x}"),
            None => {
                let (a, b) = if key.0 <= key.1 { key } else { (key.1, key.0) };
                format!("{a} <-> {b}")
            }
        };
        let direction = match f.opener {
            Some(true) => Direction::ClientToServer,
            Some(false) => Direction::ServerToClient,
            None => Direction::Unknown,
        };
        let p = placed.entry((connection, direction)).or_default();
        p.subflows.push(label.clone());
        if f.mappings.is_empty() && f.isn.is_some() {
            // Plain TCP (or an MPTCP connection that fell back): the subflow is the stream.
            for (seq, data) in &f.segments {
                p.put(seq.wrapping_sub(isn) as u64, data);
            }
            continue;
        }
        let mut missing = 0u64;
        for (seq, data) in &f.segments {
            let rel = seq.wrapping_sub(isn);
            let mut off = 0usize;
            while off < data.len() {
                let at = rel.wrapping_add(off as u32);
                let Some((&start, m)) = f.mappings.range(..=at).next_back() else {
                    missing += (data.len() - off) as u64;
                    break;
                };
                let into = at.wrapping_sub(start);
                let covered = if m.len == 0 {
                    0
                } else {
                    (m.len as u32).saturating_sub(into)
                };
                if covered == 0 {
                    // Not covered here: try the next mapping after this byte.
                    match f.mappings.range(at.wrapping_add(1)..).next() {
                        Some((&next, _)) if next > at => {
                            let skip = ((next - at) as usize).min(data.len() - off);
                            missing += skip as u64;
                            off += skip;
                        }
                        _ => {
                            missing += (data.len() - off) as u64;
                            break;
                        }
                    }
                    continue;
                }
                let n = (covered as usize).min(data.len() - off);
                let dsn = p.widen(m) + into as u64;
                p.put(dsn, &data[off..off + n]);
                off += n;
            }
        }
        if missing > 0 {
            unplaced.push(Unplaced {
                subflow: label,
                bytes: missing,
                why: "bytes outside every DSS mapping captured",
            });
        }
    }
    let mut streams = Vec::new();
    for ((connection, direction), p) in placed {
        let (runs, bytes_seen) = p.runs();
        let mut handshake_bytes = 0;
        let mut protected_from = None;
        let runs = runs
            .into_iter()
            .filter_map(|r| {
                let (r, cut) = strip_handshake(r);
                handshake_bytes += cut;
                if let (Some(r), true, None) = (&r, cut > 0, protected_from) {
                    protected_from = Some(r.dsn);
                }
                r
            })
            .collect();
        streams.push(DataStream {
            connection,
            direction,
            subflows: p.subflows,
            bytes_seen,
            handshake_bytes,
            protected_from,
            conflicting_bytes: p.conflicts,
            runs,
        });
    }
    if !unplaced.is_empty() {
        warnings.push(format!(
            "{} bytes could not be placed in a data stream",
            unplaced.iter().map(|u| u.bytes).sum::<u64>()
        ));
    }
    Ok(DataCapture {
        streams,
        unplaced,
        warnings,
    })
}

fn add_segment(
    flows: &mut HashMap<(SocketAddr, SocketAddr), SubflowAcc>,
    order: &mut Vec<(SocketAddr, SocketAddr)>,
    seg: Segment,
) {
    let key = (seg.src, seg.dst);
    let f = flows.entry(key).or_insert_with(|| {
        order.push(key);
        SubflowAcc::default()
    });
    if seg.flags.syn {
        f.isn = Some(seg.seq);
        f.opener = Some(!seg.flags.ack);
        if let Some(t) = seg.mptcp.join.and_then(|j| j.token) {
            // A joining SYN names the connection by the receiver's (server's) token.
            f.token.get_or_insert(t);
        }
        // MP_CAPABLE: the SYN/ACK carries the server's key, whose token names the
        // connection (as the joins do).
        if seg.flags.ack {
            if let Some(&k) = seg.mptcp.keys.first() {
                f.token.get_or_insert(token_of_key(k));
            }
        }
    }
    // MP_CAPABLE with both keys and data (RFC 8684 3.1: a direction's first data may carry
    // it instead of a DSS): the data starts at the sender's IDSN + 1, subflow byte 1.
    let capable = match (seg.flags.syn, seg.mptcp.keys.as_slice()) {
        (false, &[sender, _]) if !seg.payload.is_empty() => Some(Mapping {
            dsn: crate::dss::idsn_of_key(sender).wrapping_add(1),
            dsn64: true,
            ssn: 1,
            len: seg.payload.len() as u16,
            checksum: None,
        }),
        _ => None,
    };
    if let Some(m) = seg.mptcp.dss.and_then(|d| d.mapping).or(capable) {
        if m.len > 0 || !seg.payload.is_empty() {
            f.mappings.entry(m.ssn).or_insert(m);
        }
        if !seg.payload.is_empty() {
            *f.isn_votes.entry(seg.seq.wrapping_sub(m.ssn)).or_default() += 1;
        }
    }
    if !seg.payload.is_empty() && !seg.truncated {
        f.segments.push((seg.seq, seg.payload));
    }
}

/// The bytes of one connection direction, by DSN.
#[derive(Default)]
struct Placed {
    subflows: Vec<String>,
    /// Non-overlapping pieces by DSN (first copy wins).
    pieces: BTreeMap<u64, Vec<u8>>,
    conflicts: u64,
    /// The last widened DSN (for 32-bit DSNs).
    last_dsn: Option<u64>,
}

impl Placed {
    /// The 64-bit DSN of a mapping: as sent, or its low 32 bits placed nearest the last one.
    fn widen(&mut self, m: &Mapping) -> u64 {
        let dsn = if m.dsn64 {
            m.dsn
        } else {
            match self.last_dsn {
                None => m.dsn,
                Some(last) => {
                    let base = last & !0xffff_ffff;
                    [base.wrapping_sub(1 << 32), base, base.wrapping_add(1 << 32)]
                        .into_iter()
                        .map(|b| b | m.dsn)
                        .min_by_key(|c| c.abs_diff(last))
                        .expect("three candidates")
                }
            }
        };
        self.last_dsn = Some(dsn);
        dsn
    }

    /// Adds `data` at `dsn`, keeping what is already there where they overlap.
    fn put(&mut self, dsn: u64, data: &[u8]) {
        let end = dsn + data.len() as u64;
        let mut cur = dsn;
        // Existing pieces that overlap [dsn, end), in order.
        let mut covered: Vec<(u64, u64)> = Vec::new();
        if let Some((&s, v)) = self.pieces.range(..dsn).next_back() {
            if s + v.len() as u64 > dsn {
                covered.push((s, s + v.len() as u64));
            }
        }
        covered.extend(
            self.pieces
                .range(dsn..end)
                .map(|(&s, v)| (s, s + v.len() as u64)),
        );
        for (s, e) in covered {
            if s > cur {
                self.pieces
                    .insert(cur, data[(cur - dsn) as usize..(s - dsn) as usize].to_vec());
            }
            // Compare the overlap with what is there.
            let (os, oe) = (s.max(dsn), e.min(end));
            let existing = &self.pieces[&s][(os - s) as usize..(oe - s) as usize];
            let new = &data[(os - dsn) as usize..(oe - dsn) as usize];
            self.conflicts += existing.iter().zip(new).filter(|(a, b)| a != b).count() as u64;
            cur = cur.max(e);
        }
        if cur < end {
            self.pieces
                .insert(cur, data[(cur - dsn) as usize..].to_vec());
        }
    }

    /// Merges the pieces into runs; returns them and the bytes they hold.
    fn runs(&self) -> (Vec<Run>, u64) {
        let mut runs: Vec<Run> = Vec::new();
        let mut total = 0u64;
        for (&s, v) in &self.pieces {
            total += v.len() as u64;
            match runs.last_mut() {
                Some(r) if r.dsn + r.bytes.len() as u64 == s => r.bytes.extend_from_slice(v),
                _ => runs.push(Run {
                    dsn: s,
                    bytes: v.clone(),
                }),
            }
        }
        (runs, total)
    }
}

/// nena's handshake header: magic, version, type, length.
const NENA_MAGIC: [u8; 5] = [0x8b, b'N', b'E', b'N', b'A'];

/// Takes nena handshake messages (hello, accept, reject, confirm) off the start of a run.
/// Returns what is left (None if nothing) and the bytes taken.
pub fn strip_handshake(mut r: Run) -> (Option<Run>, u64) {
    let mut cut = 0usize;
    loop {
        let rest = &r.bytes[cut..];
        if rest.len() < 9 || rest[..5] != NENA_MAGIC || !(1..=4).contains(&rest[6]) {
            break;
        }
        let len = 9 + u16::from_be_bytes([rest[7], rest[8]]) as usize;
        cut += len.min(rest.len());
    }
    if cut == 0 {
        return (Some(r), 0);
    }
    if cut >= r.bytes.len() {
        return (None, r.bytes.len() as u64);
    }
    r.bytes.drain(..cut);
    r.dsn += cut as u64;
    (Some(r), cut as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(dsn: u64, ssn: u32, len: u16) -> Mapping {
        Mapping {
            dsn,
            dsn64: true,
            ssn,
            len,
            checksum: None,
        }
    }

    #[test]
    fn put_keeps_the_first_copy_and_counts_conflicts() {
        let mut p = Placed::default();
        p.put(100, b"hello");
        p.put(110, b"world");
        p.put(103, b"loXXXXXwo"); // fills 105..110, overlaps both with 2 + 0 conflicts
        let (runs, total) = p.runs();
        assert_eq!(
            runs,
            vec![Run {
                dsn: 100,
                bytes: b"helloXXXXXworld".to_vec()
            }]
        );
        assert_eq!(total, 15);
        assert_eq!(p.conflicts, 0);
        p.put(100, b"jello");
        assert_eq!(p.conflicts, 1);
        p.put(90, b"0123456789");
        assert_eq!(p.runs().0[0].dsn, 90);
    }

    #[test]
    fn thirty_two_bit_dsns_are_widened_near_the_last() {
        let mut p = Placed::default();
        let mut a = m(0x1_ffff_fff0, 1, 10);
        assert_eq!(p.widen(&a), 0x1_ffff_fff0);
        a.dsn = 0x0000_0010;
        a.dsn64 = false;
        assert_eq!(p.widen(&a), 0x2_0000_0010, "wrapped forward");
        a.dsn = 0xffff_fff8;
        assert_eq!(
            p.widen(&a),
            0x1_ffff_fff8,
            "a retransmission before the wrap"
        );
    }

    #[test]
    fn handshake_messages_are_taken_off_the_start() {
        let mut bytes = NENA_MAGIC.to_vec();
        bytes.extend_from_slice(&[1, 2, 0, 2, 0x02, 0]); // accept of kato
        bytes.extend_from_slice(b"scrambled");
        let (r, cut) = strip_handshake(Run { dsn: 1, bytes });
        assert_eq!(cut, 11);
        assert_eq!(
            r,
            Some(Run {
                dsn: 12,
                bytes: b"scrambled".to_vec()
            })
        );
        let (r, cut) = strip_handshake(Run {
            dsn: 5,
            bytes: b"no handshake".to_vec(),
        });
        assert_eq!((r.unwrap().dsn, cut), (5, 0));
    }
}

#[cfg(test)]
mod capture_tests {
    use super::*;
    use crate::craft::joined_subflow;

    #[test]
    fn a_joined_subflow_places_its_bytes_at_their_dsns() {
        let c = "198.18.2.2:40001".parse().unwrap();
        let s = "198.18.3.2:4433".parse().unwrap();
        let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let base = 1_000_000u64;
        // The scheduler sent two pieces over this path; the rest went elsewhere.
        let pieces: Vec<(u64, &[u8])> = vec![
            (base + 3000, &data[3000..9000]),
            (base + 12_000, &data[12_000..16_000]),
        ];
        for syn in [true, false] {
            let pcap = joined_subflow(c, s, 0xabcd_ef01, &pieces, 1400, syn, 3);
            let d = data_streams(&pcap[..]).unwrap();
            assert!(d.unplaced.is_empty(), "{:?}", d.unplaced);
            assert_eq!(d.streams.len(), 1);
            let st = &d.streams[0];
            assert_eq!(st.runs.len(), 2);
            assert_eq!(st.runs[0].dsn, base + 3000);
            assert_eq!(st.runs[0].bytes, &data[3000..9000]);
            assert_eq!(st.runs[1].dsn, base + 12_000);
            assert_eq!(st.runs[1].bytes, &data[12_000..16_000]);
            assert_eq!(st.bytes_seen, 10_000);
            assert_eq!(st.conflicting_bytes, 0);
            if syn {
                assert_eq!(st.connection, "token abcdef01");
                assert_eq!(st.direction, Direction::ClientToServer);
            } else {
                assert_eq!(st.direction, Direction::Unknown);
            }
        }
    }

    #[test]
    fn plain_tcp_is_its_own_stream_and_unmappable_bytes_are_reported() {
        let c = "198.18.2.2:40002".parse().unwrap();
        let s = "198.18.3.2:4433".parse().unwrap();
        // Plain TCP with its SYN (no MPTCP, or a fallback): the subflow is the stream.
        let pcap = crate::craft::connection(c, s, &[7u8; 3000], 1000);
        let d = data_streams(&pcap[..]).unwrap();
        assert_eq!(d.streams.len(), 1);
        assert_eq!(
            d.streams[0].runs,
            vec![Run {
                dsn: 1,
                bytes: vec![7u8; 3000]
            }]
        );
        // A joined subflow captured without its SYN and without any mapping: unplaceable.
        let pcap = crate::craft::pcap(&[crate::craft::tcp_frame(
            c,
            s,
            5000,
            1,
            crate::craft::TcpFlags::PSH_ACK,
            &[],
            &[1u8; 700],
        )]);
        let d = data_streams(&pcap[..]).unwrap();
        assert_eq!(d.unplaced.len(), 1);
        assert_eq!(d.unplaced[0].bytes, 700);
    }
}
