//! "Does the attacker see the file?": for every 16-byte window ("run") of a known file,
//! whether it appears anywhere in the reassembled streams of a capture.
//!
//! Exact (no fingerprints): windows are 128-bit keys in a hash set. Only the smaller side is
//! indexed in full (about 18 bytes a distinct window): when the known file is the smaller
//! one, the capture is scanned against it and only the windows found are kept, then the
//! file is scanned once more to count and locate them.

use serde::Serialize;
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

/// The run length the issue asks about.
pub const RUN: usize = 16;

/// A stretch of the known file whose every 16-byte run appears in the capture.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KnownMatch {
    /// Offset in the known file of the first matching run.
    pub known_offset: u64,
    /// Length in bytes covered by consecutive matching runs (>= 16).
    pub length: u64,
    /// Where the first run of the stretch was found: flow label and offset in that
    /// direction's reassembled stream.
    pub flow: Option<String>,
    pub stream_offset: Option<u64>,
}

/// The result of the check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KnownReport {
    pub file_bytes: u64,
    /// Number of 16-byte runs of the file (file length - 15).
    pub runs_checked: u64,
    /// Runs (file offsets) whose 16 bytes appear in the capture.
    pub runs_found: u64,
    /// Bytes of the file covered by some found run.
    pub bytes_covered: u64,
    /// The first stretches of found runs, in file order (at most `max_matches`).
    pub first_matches: Vec<KnownMatch>,
    /// Number of maximal stretches of consecutive found runs.
    pub stretches: u64,
}

impl KnownReport {
    pub fn leak(&self) -> bool {
        self.runs_found > 0
    }
}

/// A hasher for 128-bit windows: folded 64x64->128 multiply (the keys are raw data, so
/// they need mixing; no adversary chooses them to slow us down beyond a capture's size).
#[derive(Default, Clone, Copy)]
pub struct WindowHasher(u64);

impl Hasher for WindowHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u128(&mut self, v: u128) {
        let lo = (v as u64) ^ 0x243f_6a88_85a3_08d3;
        let hi = ((v >> 64) as u64) ^ 0x1319_8a2e_0370_7344;
        let p = (lo as u128).wrapping_mul(hi as u128 | 1)
            ^ ((hi as u128) << 64 | lo as u128).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = (p as u64) ^ ((p >> 64) as u64);
    }
}

type WindowSet = HashSet<u128, BuildHasherDefault<WindowHasher>>;

#[inline]
fn window(b: &[u8], i: usize) -> u128 {
    let mut a = [0u8; RUN];
    a.copy_from_slice(&b[i..i + RUN]);
    u128::from_le_bytes(a)
}

fn windows(b: &[u8]) -> impl Iterator<Item = u128> + '_ {
    (0..b.len().saturating_sub(RUN - 1)).map(move |i| window(b, i))
}

/// A labelled piece of contiguous captured data (one chunk of one direction's stream).
#[derive(Debug, Clone, Copy)]
pub struct Piece<'a> {
    pub flow: &'a str,
    pub offset: u64,
    pub data: &'a [u8],
}

/// Check every 16-byte run of `known` against the captured `pieces`.
pub fn check(known: &[u8], pieces: &[Piece<'_>], max_matches: usize) -> KnownReport {
    let runs_checked = known.len().saturating_sub(RUN - 1) as u64;
    let capture_runs: u64 = pieces
        .iter()
        .map(|p| p.data.len().saturating_sub(RUN - 1) as u64)
        .sum();
    let present: WindowSet = if runs_checked <= capture_runs {
        let k: WindowSet = windows(known).collect();
        let mut found = WindowSet::default();
        for p in pieces {
            for w in windows(p.data) {
                if k.contains(&w) {
                    found.insert(w);
                }
            }
        }
        found
    } else {
        pieces.iter().flat_map(|p| windows(p.data)).collect()
    };

    let mut report = KnownReport {
        file_bytes: known.len() as u64,
        runs_checked,
        runs_found: 0,
        bytes_covered: 0,
        first_matches: Vec::new(),
        stretches: 0,
    };
    if present.is_empty() {
        return report;
    }
    let mut stretch: Option<(usize, usize)> = None; // (first run offset, last run offset)
    let mut covered_to = 0usize; // file bytes [.., covered_to) already counted as covered
    let close = |s: (usize, usize), report: &mut KnownReport| {
        report.stretches += 1;
        if report.first_matches.len() < max_matches {
            report.first_matches.push(KnownMatch {
                known_offset: s.0 as u64,
                length: (s.1 - s.0 + RUN) as u64,
                flow: None,
                stream_offset: None,
            });
        }
    };
    for (i, w) in windows(known).enumerate() {
        if present.contains(&w) {
            report.runs_found += 1;
            let end = i + RUN;
            report.bytes_covered += (end - covered_to.max(i)) as u64;
            covered_to = end;
            stretch = match stretch {
                Some((s, last)) if last + 1 == i => Some((s, i)),
                Some(prev) => {
                    close(prev, &mut report);
                    Some((i, i))
                }
                None => Some((i, i)),
            };
        }
    }
    if let Some(s) = stretch {
        close(s, &mut report);
    }
    // locate the first run of each reported stretch in the capture
    for m in &mut report.first_matches {
        let needle = &known[m.known_offset as usize..m.known_offset as usize + RUN];
        for p in pieces {
            if let Some(pos) = memchr::memmem::find(p.data, needle) {
                m.flow = Some(p.flow.to_string());
                m.stream_offset = Some(p.offset + pos as u64);
                break;
            }
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece<'a>(data: &'a [u8]) -> Piece<'a> {
        Piece {
            flow: "f",
            offset: 100,
            data,
        }
    }

    #[test]
    fn counts_runs_and_stretches_both_ways() {
        let known: Vec<u8> = (0..200u32).map(|i| (i * 7 % 253) as u8).collect();
        // capture holds known[10..50] and known[120..140] among noise
        let mut cap = vec![0xEEu8; 5];
        cap.extend_from_slice(&known[10..50]);
        cap.extend_from_slice(&[0xEE; 7]);
        cap.extend_from_slice(&known[120..140]);
        for pad in [0usize, 10_000] {
            // pad makes the capture the larger side, so both indexing strategies run
            let mut c = cap.clone();
            c.extend_from_slice(&vec![0xEE; pad]);
            let r = check(&known, &[piece(&c)], 10);
            assert_eq!(r.runs_checked, 185);
            assert_eq!(r.runs_found, (40 - 15) + (20 - 15));
            assert_eq!(r.bytes_covered, 60);
            assert_eq!(r.stretches, 2);
            assert_eq!(r.first_matches[0].known_offset, 10);
            assert_eq!(r.first_matches[0].length, 40);
            assert_eq!(r.first_matches[0].stream_offset, Some(105));
            assert_eq!(r.first_matches[1].known_offset, 120);
            assert_eq!(r.first_matches[1].stream_offset, Some(100 + 5 + 40 + 7));
        }
    }

    #[test]
    fn repetitive_files_count_every_offset() {
        let known = b"0123456789".repeat(10);
        let mut cap = b"xx".to_vec();
        cap.extend_from_slice(&b"0123456789".repeat(3));
        cap.extend_from_slice(b"yy");
        let r = check(&known, &[piece(&cap)], 5);
        assert_eq!(r.runs_found, 85, "every offset of a periodic file matches");
        assert_eq!(r.stretches, 1);
    }

    #[test]
    fn nothing_found_and_short_inputs() {
        let r = check(
            b"abcdefghijklmnopqrstuvwxyz",
            &[piece(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")],
            5,
        );
        assert!(!r.leak());
        assert_eq!(r.runs_checked, 11);
        let r = check(b"short", &[piece(b"short")], 5);
        assert_eq!((r.runs_checked, r.runs_found), (0, 0));
        let r = check(b"0123456789abcdef", &[], 5);
        assert_eq!((r.runs_checked, r.runs_found), (1, 0));
    }

    #[test]
    fn runs_never_span_two_pieces() {
        // the halves are in different chunks (a hole between them): no run is formed across
        let known = b"AAAAAAAABBBBBBBB";
        let r = check(known, &[piece(b"AAAAAAAA"), piece(b"BBBBBBBB")], 5);
        assert_eq!(r.runs_found, 0);
        let r = check(known, &[piece(b"AAAAAAAABBBBBBBB")], 5);
        assert_eq!(r.runs_found, 1);
    }
}
