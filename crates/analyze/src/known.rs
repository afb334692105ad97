//! "Does the attacker see the file?": for every 16-byte window ("run") of a known file,
//! whether it appears anywhere in the reassembled streams of a capture.
//!
//! Exact (no fingerprints): windows are 128-bit keys in a hash set. Only the smaller side is
//! indexed (about 18 bytes a distinct window): when the known file is the smaller one, the
//! capture is scanned against it and only the windows found are kept, then the file is
//! scanned once more to mark them. Large inputs are split into passes by a hash of the
//! window, so memory stays bounded (a few hundred MB) whatever the sizes.

use serde::Serialize;
use std::collections::{HashMap, HashSet};
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
        if let Ok(w) = <[u8; RUN]>::try_from(bytes) {
            self.write_u128(u128::from_le_bytes(w));
            return;
        }
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_usize(&mut self, _len: usize) {
        // only ever the length prefix of a 16-byte key: nothing to mix
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

#[inline]
fn is_set(bits: &[u64], i: usize) -> bool {
    bits[i / 64] & (1 << (i % 64)) != 0
}

#[inline]
fn set(bits: &mut [u64], i: usize) {
    bits[i / 64] |= 1 << (i % 64);
}

/// Length of the common prefix of `a` and `b`.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 64 <= n && a[i..i + 64] == b[i..i + 64] {
        i += 64;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// How many passes for `n` windows, and the table size to reserve for one pass: at most
/// `part_windows` a pass, aiming at 90% of it so chance variations do not make the table
/// double.
fn passes(n: u64, part_windows: u64) -> (u64, usize) {
    let target = (part_windows.max(1) / 10).saturating_mul(9).max(1);
    let parts = n.div_ceil(target).max(1);
    (
        parts,
        (n / parts + n / parts / 50 + 16).min(part_windows.max(16)) as usize,
    )
}

/// The capture is the smaller side: index its windows (with one location each), then walk
/// the file; a hit is extended byte by byte in both directions, marking every file window
/// inside the common stretch without looking it up. Exact: every file window is either
/// looked up in its pass or proven present by an extension.
fn index_capture(known: &[u8], pieces: &[Piece<'_>], part_windows: u64, found: &mut [u64]) {
    const OFF_BITS: u32 = 40;
    let runs = known.len() + 1 - RUN;
    let capture_runs: u64 = pieces
        .iter()
        .map(|p| p.data.len().saturating_sub(RUN - 1) as u64)
        .sum();
    let (parts, reserve) = passes(capture_runs, part_windows);
    for part in 0..parts {
        // [u8; 16] keys (align 1): 24 bytes an entry instead of 32 with u128
        let mut idx: HashMap<[u8; RUN], u64, BuildHasherDefault<WindowHasher>> =
            HashMap::with_capacity_and_hasher(reserve, Default::default());
        for (pi, p) in pieces.iter().enumerate() {
            if p.data.len() >= 1 << OFF_BITS {
                continue; // a 1 TiB chunk: not a capture this tool reads into memory anyway
            }
            for (q, w) in windows(p.data).enumerate() {
                if part_of(w, parts) == part {
                    idx.entry(w.to_le_bytes())
                        .or_insert(((pi as u64) << OFF_BITS) | q as u64);
                }
            }
        }
        if idx.is_empty() {
            continue;
        }
        let mut i = 0usize;
        while i < runs {
            if is_set(found, i) {
                i += 1;
                continue;
            }
            let w = window(known, i);
            if part_of(w, parts) != part {
                i += 1;
                continue;
            }
            let Some(&loc) = idx.get(&w.to_le_bytes()) else {
                i += 1;
                continue;
            };
            let data = pieces[(loc >> OFF_BITS) as usize].data;
            let q = (loc & ((1 << OFF_BITS) - 1)) as usize;
            // backwards, until a mismatch or an already marked window
            let mut b = 0usize;
            while b < i && b < q && known[i - 1 - b] == data[q - 1 - b] && !is_set(found, i - 1 - b)
            {
                b += 1;
            }
            let len = common_prefix(&known[i..], &data[q..]);
            debug_assert!(len >= RUN);
            let last = i + len - RUN;
            for k in i - b..=last {
                set(found, k);
            }
            i = last + 1;
        }
    }
}

/// The file is the smaller side: index its windows, keep those the capture contains, then
/// mark the file offsets whose window was kept.
fn index_known(known: &[u8], pieces: &[Piece<'_>], part_windows: u64, found: &mut [u64]) {
    let runs_checked = known.len().saturating_sub(RUN - 1) as u64;
    let (parts, reserve) = passes(runs_checked, part_windows);
    for part in 0..parts {
        let mine = |w: &u128| part_of(*w, parts) == part;
        let mut k = WindowSet::with_capacity_and_hasher(reserve, Default::default());
        k.extend(windows(known).filter(mine));
        let mut present = WindowSet::default();
        for p in pieces {
            for w in windows(p.data).filter(mine) {
                if k.contains(&w) {
                    present.insert(w);
                }
            }
        }
        drop(k);
        if present.is_empty() {
            continue;
        }
        for (i, w) in windows(known).enumerate() {
            if mine(&w) && present.contains(&w) {
                set(found, i);
            }
        }
    }
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
    check_with_partition(known, pieces, max_matches, PART_WINDOWS)
}

/// Windows indexed per pass: 7/8 of 2^24, the most a hash table of 2^24 slots holds, so a
/// pass needs at most about 420 MB however large the inputs are.
pub const PART_WINDOWS: u64 = (1 << 24) * 7 / 8;

/// Which pass a window belongs to: a mix independent of the set's own hash.
#[inline]
fn part_of(w: u128, parts: u64) -> u64 {
    if parts == 1 {
        return 0;
    }
    let x = ((w as u64) ^ ((w >> 64) as u64).rotate_left(29)).wrapping_mul(0xd6e8_feb8_6659_fd93);
    (x >> 32) % parts
}

/// [`check`] with the windows split into passes of at most `part_windows` indexed windows.
/// Each pass indexes the windows of the smaller side that fall in it and looks up the
/// other side's windows of the same pass; found file offsets are marked in a bitmap.
pub fn check_with_partition(
    known: &[u8],
    pieces: &[Piece<'_>],
    max_matches: usize,
    part_windows: u64,
) -> KnownReport {
    let runs_checked = known.len().saturating_sub(RUN - 1) as u64;
    let capture_runs: u64 = pieces
        .iter()
        .map(|p| p.data.len().saturating_sub(RUN - 1) as u64)
        .sum();
    let mut found = vec![0u64; (runs_checked as usize).div_ceil(64)];
    if runs_checked > 0 && capture_runs > 0 {
        if capture_runs <= runs_checked {
            index_capture(known, pieces, part_windows, &mut found);
        } else {
            index_known(known, pieces, part_windows, &mut found);
        }
    }
    let is_found = |i: usize| is_set(&found, i);

    let mut report = KnownReport {
        file_bytes: known.len() as u64,
        runs_checked,
        runs_found: 0,
        bytes_covered: 0,
        first_matches: Vec::new(),
        stretches: 0,
    };
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
    for i in 0..runs_checked as usize {
        if is_found(i) {
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
    fn passes_give_the_same_answer() {
        let mut x = 0x2545f4914f6cdd1du64;
        let known: Vec<u8> = (0..3000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 32) as u8
            })
            .collect();
        let mut cap = known[100..900].to_vec();
        cap.extend_from_slice(&[1, 2, 3]);
        cap.extend_from_slice(&known[1500..2600]);
        let one = check_with_partition(&known, &[piece(&cap)], 10, u64::MAX);
        for part in [1u64, 7, 64, 1000] {
            assert_eq!(
                check_with_partition(&known, &[piece(&cap)], 10, part),
                one,
                "part size {part}"
            );
        }
        assert_eq!(one.runs_found, (800 - 15) + (1100 - 15));
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

    fn naive(known: &[u8], pieces: &[Piece<'_>]) -> Vec<u64> {
        let runs = known.len().saturating_sub(RUN - 1);
        let mut bits = vec![0u64; runs.div_ceil(64)];
        for i in 0..runs {
            if pieces
                .iter()
                .any(|p| memchr::memmem::find(p.data, &known[i..i + RUN]).is_some())
            {
                set(&mut bits, i);
            }
        }
        bits
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
        /// Both strategies, with any pass size, agree with a brute-force search, also on
        /// highly repetitive data (two-letter alphabet) where extensions overlap.
        #[test]
        fn strategies_match_brute_force(
            known in proptest::collection::vec(0u8..2, 0..300),
            caps in proptest::collection::vec(proptest::collection::vec(0u8..2, 0..200), 0..4),
            part in 1u64..50,
        ) {
            let known: Vec<u8> = known.iter().map(|b| b + b'a').collect();
            let caps: Vec<Vec<u8>> = caps.iter().map(|c| c.iter().map(|b| b + b'a').collect()).collect();
            let pieces: Vec<Piece<'_>> = caps.iter().map(|c| Piece { flow: "f", offset: 0, data: c }).collect();
            let want = naive(&known, &pieces);
            if known.len() >= RUN && pieces.iter().any(|p| p.data.len() >= RUN) {
                for strategy in [index_capture, index_known] {
                    let mut got = vec![0u64; want.len()];
                    strategy(&known, &pieces, part, &mut got);
                    proptest::prop_assert_eq!(&got, &want);
                }
            }
            let r = check_with_partition(&known, &pieces, 3, part);
            let n: u64 = want.iter().map(|w| w.count_ones() as u64).sum();
            proptest::prop_assert_eq!(r.runs_found, n);
        }
    }
}
