//! The known-plaintext attack on the papers' scrambling (mode `kato`), as an eavesdropper on
//! one path runs it: no key needed.
//!
//! The scrambling is linear: with `out` the bytes on the wire and `b` the plaintext of one
//! direction, `out[i] ^ out[i-1] = b[i] ^ b[i-65]` (docs/ATTACK.md). Over a run of contiguous
//! data sequence numbers ([`crate::datalevel`]) let `D[i] = out[i] ^ out[i-1]`. A crib `c`
//! (known plaintext, at least 66 bytes) placed at offset `s` predicts
//! `D[s+k] = c[k] ^ c[k-65]` for every `k` in `65..len(c)`: `len(c) - 65` independent byte
//! checks, so a wrong placement survives with probability `256^-(len-65)`. A confirmed
//! placement gives 65 consecutive plaintext bytes, and those give every other byte of the
//! run: forwards `b[i] = D[i] ^ b[i-65]`, backwards `b[j] = D[j+65] ^ b[j+65]`, down to 64
//! bytes *before* the run's first captured byte (plaintext that never crossed this path).
//!
//! Cribs are indexed by their first checks (8 bytes of `c[k] ^ c[k-65]`), and every run's
//! `D` is scanned once, so the cost grows with the capture, not with captures times cribs.
//! A run in which a crib appears verbatim is not scrambled at all (mode `plain`): it is
//! reported as readable in clear. With `guess_zeros`, a run where no crib matched but whose
//! scrambled bytes are `00` at least [`ZERO_STRETCH`] times in a row is guessed to hold zero
//! bytes there (padding, ELF sections), and the guess is extended. Why `00` and not any
//! repeated byte: a repeated scrambled byte (`D` = 0) only says that the plaintext is
//! 65-periodic there, and each scrambled byte is then the XOR of one period. A run of one
//! byte `c` gives `c` (65 copies); a 65-periodic pattern of several bytes (common in
//! binaries: measured, 131 of 167 such stretches in nena's own binary) gives the XOR of the
//! pattern, which is `00` by chance only once in 256. Guesses are labelled as such.

use crate::datalevel::{DataCapture, Direction, Run};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// Shortest crib that can be confirmed on its own (one check).
pub const MIN_CRIB: usize = 66;
/// Length of the index key (checks compared before a full verification).
const KEY: usize = 8;
/// Zeros in a row in `D` that make a zero-byte guess (65 to place it, 16 more to believe it).
pub const ZERO_STRETCH: usize = 81;

/// How the plaintext of a run was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "how")]
pub enum Method {
    /// A crib (its line in the crib file, 1-based) confirmed at this DSN, then extended.
    Crib { line: usize, dsn: u64 },
    /// A crib appeared verbatim: the run is not scrambled.
    Clear { line: usize, dsn: u64 },
    /// No crib: 65+ bytes guessed to be zeros at this DSN, then extended.
    ZeroGuess { dsn: u64 },
}

/// One run of a stream and what the attack did with it.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub dsn: u64,
    pub len: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<Method>,
    /// Further crib placements in this run that agreed with the recovery.
    pub agreeing: usize,
    /// Bytes where another confirmed placement disagreed with the first one's recovery.
    pub conflicting_bytes: u64,
    /// Placements disagreed (a crib fits at several places of repetitive plaintext): the
    /// run's plaintext is not determined, and nothing of it is reported as recovered.
    pub ambiguous: bool,
}

/// A contiguous range of recovered plaintext.
#[derive(Debug, Clone, Serialize)]
pub struct Chunk {
    pub dsn: u64,
    pub len: u64,
    /// Offset of its bytes in the RECOVERED file the CLI writes (set by the caller).
    pub offset: u64,
    #[serde(skip)]
    pub bytes: Vec<u8>,
}

/// The attack's result on one connection direction.
#[derive(Debug, Clone, Serialize)]
pub struct StreamResult {
    pub connection: String,
    pub direction: Direction,
    pub runs: Vec<RunResult>,
    /// Protected data bytes captured (handshake messages left out).
    pub bytes_seen: u64,
    /// Captured bytes whose plaintext was recovered (by cribs, or in clear).
    pub bytes_recovered: u64,
    /// Plaintext bytes recovered that were not captured (before the runs' starts).
    pub bytes_recovered_off_link: u64,
    /// Captured bytes recovered by a zero guess only (unconfirmed).
    pub bytes_guessed: u64,
    pub chunks: Vec<Chunk>,
}

/// The whole attack.
#[derive(Debug, Clone, Serialize)]
pub struct AttackResult {
    pub streams: Vec<StreamResult>,
    pub cribs: usize,
    /// Cribs shorter than [`MIN_CRIB`] bytes: they cannot be confirmed and were not used.
    pub cribs_too_short: usize,
    pub runs: u64,
    pub bytes_seen: u64,
    pub bytes_recovered: u64,
    pub bytes_recovered_off_link: u64,
    pub bytes_guessed: u64,
    /// What the captured bytes show without any crib (see [`Structure`]).
    pub structure: Structure,
}

/// Fewest bytes on which [`Structure`] judges (8 expected per byte value).
pub const STRUCTURE_MIN_BYTES: u64 = 2048;

/// What the captured bytes show without a crib: whether the bytes, and the differences of
/// consecutive bytes `D[i] = out[i] ^ out[i-1]`, look uniformly random.
///
/// Cipher output (`stream`, `aead`) is uniform in both. Kato makes `D[i] = b[i] ^ b[i-65]`,
/// as far from uniform as the plaintext is (text, headers, most binaries), and over text
/// its bytes keep one top bit per run: such a capture is not cipher output, whatever the
/// cribs found. Kato over already-random plaintext (compressed or encrypted files) is
/// uniform in both too: then the capture alone cannot tell kato from a cipher. The test is Pearson's chi-square over the 256 byte values (255 degrees
/// of freedom), called non-uniform beyond [`CHI2_LIMIT`] (mean + 10 standard deviations).
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Structure {
    /// Bytes the test ran on (the `D` test has one fewer per run).
    pub bytes: u64,
    /// Shannon entropy of the byte values, bits per byte (8.0 for uniform).
    pub entropy_bytes: f64,
    /// Shannon entropy of `D`, bits per byte.
    pub entropy_differences: f64,
    pub chi2_bytes: f64,
    pub chi2_differences: f64,
    pub verdict: Verdict,
}

/// Pearson's chi-square beyond which 256 byte counts are called non-uniform: 255 degrees of
/// freedom, mean 255, standard deviation sqrt(510); ten of them above the mean.
pub const CHI2_LIMIT: f64 = 255.0 + 10.0 * 22.583_179_581_272_43;

/// [`Structure`]'s reading of a capture.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Fewer than [`STRUCTURE_MIN_BYTES`] bytes: no reading.
    TooFewBytes,
    /// The bytes or their differences are far from random: not cipher output. Mode
    /// `plain`, or kato over structured plaintext (kato over text keeps the top bit of
    /// every byte of a run; its differences are the plaintext's at lag 65).
    Structured,
    /// Both look random: a cipher, or kato over random plaintext.
    Random,
}

impl Verdict {
    /// One sentence for a person.
    pub fn explain(self) -> &'static str {
        match self {
            Verdict::TooFewBytes => "too few bytes captured to tell how they were protected",
            Verdict::Structured => {
                "the captured bytes are far from random, which stream and aead output never \
                 is: this is plain or kato, and NOT safe; only these cribs missed (66 bytes \
                 known anywhere in a kato run read the whole run)"
            }
            Verdict::Random => {
                "the captured bytes and their differences look random, as stream and aead \
                 give, and as kato gives over already-random data (compressed or encrypted \
                 files): this capture alone does not tell which"
            }
        }
    }
}

fn counts_stats(counts: &[u64; 256]) -> (f64, f64) {
    let n: u64 = counts.iter().sum();
    if n == 0 {
        return (0.0, 0.0);
    }
    let nf = n as f64;
    let expected = nf / 256.0;
    let mut chi2 = 0.0;
    let mut h = 0.0;
    for &c in counts {
        let c = c as f64;
        chi2 += (c - expected) * (c - expected) / expected;
        if c > 0.0 {
            let p = c / nf;
            h -= p * p.log2();
        }
    }
    (h, chi2)
}

/// [`Structure`] of every run of `capture`.
pub fn structure(capture: &DataCapture) -> Structure {
    let mut bytes = [0u64; 256];
    let mut diffs = [0u64; 256];
    for run in capture.streams.iter().flat_map(|s| &s.runs) {
        for &b in &run.bytes {
            bytes[b as usize] += 1;
        }
        for w in run.bytes.windows(2) {
            diffs[(w[0] ^ w[1]) as usize] += 1;
        }
    }
    let n: u64 = bytes.iter().sum();
    let (entropy_bytes, chi2_bytes) = counts_stats(&bytes);
    let (entropy_differences, chi2_differences) = counts_stats(&diffs);
    let verdict = if n < STRUCTURE_MIN_BYTES {
        Verdict::TooFewBytes
    } else if chi2_bytes > CHI2_LIMIT || chi2_differences > CHI2_LIMIT {
        Verdict::Structured
    } else {
        Verdict::Random
    };
    Structure {
        bytes: n,
        entropy_bytes,
        entropy_differences,
        chi2_bytes,
        chi2_differences,
        verdict,
    }
}

/// Options of [`attack`].
#[derive(Debug, Clone, Copy, Default)]
pub struct AttackOptions {
    /// Guess runs of zero bytes where no crib matched.
    pub guess_zeros: bool,
}

fn key_of(b: &[u8]) -> u64 {
    let mut k = [0u8; 8];
    k[..b.len()].copy_from_slice(b);
    u64::from_le_bytes(k)
}

/// Cribs indexed by a key of `KEY` bytes (shorter cribs by shorter keys).
struct Index {
    /// key length -> key -> crib indices
    by_len: Vec<(usize, HashMap<u64, Vec<usize>>)>,
    /// A quick filter on the low 16 bits of every key of any length.
    filter: Vec<u64>,
}

impl Index {
    fn new(keys: impl Iterator<Item = (usize, Vec<u8>)>) -> Index {
        let mut by_len: Vec<(usize, HashMap<u64, Vec<usize>>)> = Vec::new();
        let mut filter = vec![0u64; 1 << 10];
        for (i, k) in keys {
            let key = key_of(&k);
            let h = (key & 0xffff) as usize;
            filter[h >> 6] |= 1 << (h & 63);
            match by_len.iter_mut().find(|(l, _)| *l == k.len()) {
                Some((_, m)) => m.entry(key).or_default().push(i),
                None => {
                    let mut m = HashMap::new();
                    m.insert(key, vec![i]);
                    by_len.push((k.len(), m));
                }
            }
        }
        Index { by_len, filter }
    }

    /// Calls `hit(crib, pos)` for every crib whose key is `seq[pos..pos + key length]`.
    fn scan(&self, seq: &[u8], mut hit: impl FnMut(usize, usize)) {
        for (len, map) in &self.by_len {
            if seq.len() < *len {
                continue;
            }
            for pos in 0..=seq.len() - len {
                let w = &seq[pos..pos + len];
                let low = w[0] as usize | (*w.get(1).unwrap_or(&0) as usize) << 8;
                if self.filter[low >> 6] & (1 << (low & 63)) == 0 {
                    continue;
                }
                if let Some(cribs) = map.get(&key_of(w)) {
                    for &c in cribs {
                        hit(c, pos);
                    }
                }
            }
        }
    }
}

/// Runs the attack with `cribs` on every run of `capture`.
pub fn attack(
    capture: &DataCapture,
    cribs: &[(usize, Vec<u8>)],
    opts: AttackOptions,
) -> AttackResult {
    let usable: Vec<&(usize, Vec<u8>)> =
        cribs.iter().filter(|(_, c)| c.len() >= MIN_CRIB).collect();
    // The checks of each crib: E[k] = c[k] ^ c[k-65] for k >= 65.
    let checks: Vec<Vec<u8>> = usable
        .iter()
        .map(|(_, c)| (65..c.len()).map(|k| c[k] ^ c[k - 65]).collect())
        .collect();
    let linear = Index::new(
        checks
            .iter()
            .enumerate()
            .map(|(i, e)| (i, e[..e.len().min(KEY)].to_vec())),
    );
    let clear = Index::new(
        usable
            .iter()
            .enumerate()
            .map(|(i, (_, c))| (i, c[..KEY].to_vec())),
    );
    let mut out = AttackResult {
        streams: Vec::new(),
        cribs: cribs.len(),
        cribs_too_short: cribs.len() - usable.len(),
        runs: 0,
        bytes_seen: 0,
        bytes_recovered: 0,
        bytes_recovered_off_link: 0,
        bytes_guessed: 0,
        structure: structure(capture),
    };
    for s in &capture.streams {
        let mut sr = StreamResult {
            connection: s.connection.clone(),
            direction: s.direction,
            runs: Vec::new(),
            bytes_seen: s.runs.iter().map(|r| r.bytes.len() as u64).sum(),
            bytes_recovered: 0,
            bytes_recovered_off_link: 0,
            bytes_guessed: 0,
            chunks: Vec::new(),
        };
        let mut pieces: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
        for run in &s.runs {
            let (rr, recovered) = attack_run(run, &usable, &checks, &linear, &clear, opts);
            if let Some((start, bytes)) = recovered {
                let before = run.dsn - start;
                let on_link = bytes.len() as u64 - before;
                if matches!(rr.method, Some(Method::ZeroGuess { .. })) {
                    sr.bytes_guessed += on_link;
                } else {
                    sr.bytes_recovered += on_link;
                    sr.bytes_recovered_off_link += before;
                }
                pieces.insert(start, bytes);
            }
            sr.runs.push(rr);
        }
        sr.chunks = merge(pieces);
        out.runs += s.runs.len() as u64;
        out.bytes_seen += sr.bytes_seen;
        out.bytes_recovered += sr.bytes_recovered;
        out.bytes_recovered_off_link += sr.bytes_recovered_off_link;
        out.bytes_guessed += sr.bytes_guessed;
        out.streams.push(sr);
    }
    out
}

/// Positions of a direction's first 65 bytes that need no crib: `1..=56` (see
/// [`recover_from_start`]).
pub const FROM_START: std::ops::RangeInclusive<usize> = 1..=56;

/// What a direction's scrambled bytes give away **with no crib**, when `out` starts at the
/// direction's first scrambled byte: the plaintext of every position `k` with `k mod 65` in
/// `1..=56`, `None` elsewhere.
///
/// The scrambler's initial window is 56 zero bytes and the 8-byte key (BRIEF.md, the
/// codec), so with `x` the plaintext preceded by that window, `out[k] ^ out[k-1] =
/// b[k] ^ x[k-65]`, and `x[k-65]` is a zero byte for `k` in `1..=56`: there
/// `b[k] = out[k] ^ out[k-1]`. Then `b[k] = out[k] ^ out[k-1] ^ b[k-65]` carries every such
/// position on, 65 bytes at a time. Position 0 (`b[0]` XOR all 8 key bytes) and `57..=64`
/// (each `b[k]` XOR one key byte), and their 65-byte successors, stay unknown: 9 of every
/// 65 bytes, until a crib or a guess gives one of them (a known `b[57..=64]` gives away the
/// key byte).
pub fn recover_from_start(out: &[u8]) -> Vec<Option<u8>> {
    let mut b: Vec<Option<u8>> = vec![None; out.len()];
    for k in 1..out.len() {
        let d = out[k] ^ out[k - 1];
        b[k] = if FROM_START.contains(&k) {
            Some(d)
        } else if k >= 65 {
            b[k - 65].map(|p| d ^ p)
        } else {
            None
        };
    }
    b
}

/// Recovered pieces (by DSN) as contiguous chunks; where pieces overlap the first wins
/// (they agree: each is the plaintext of the same bytes).
fn merge(pieces: BTreeMap<u64, Vec<u8>>) -> Vec<Chunk> {
    let mut chunks: Vec<Chunk> = Vec::new();
    for (dsn, bytes) in pieces {
        match chunks.last_mut() {
            Some(c) if c.dsn + c.len >= dsn => {
                let skip = (c.dsn + c.len - dsn) as usize;
                if skip < bytes.len() {
                    c.bytes.extend_from_slice(&bytes[skip..]);
                    c.len = c.bytes.len() as u64;
                }
            }
            _ => chunks.push(Chunk {
                dsn,
                len: bytes.len() as u64,
                offset: 0,
                bytes,
            }),
        }
    }
    chunks
}

/// The attack on one run: what happened, and the recovered plaintext with its first DSN.
fn attack_run(
    run: &Run,
    cribs: &[&(usize, Vec<u8>)],
    checks: &[Vec<u8>],
    linear: &Index,
    clear: &Index,
    opts: AttackOptions,
) -> (RunResult, Option<(u64, Vec<u8>)>) {
    let b = &run.bytes;
    let n = b.len();
    let mut rr = RunResult {
        dsn: run.dsn,
        len: n as u64,
        method: None,
        agreeing: 0,
        conflicting_bytes: 0,
        ambiguous: false,
    };
    if n < 2 {
        return (rr, None);
    }
    // Positions j in -64..n are stored at j + 64; None: unknown.
    let back = (run.dsn.min(64)) as usize;
    let mut plain: Option<Vec<u8>> = None;
    // D[i] for i >= 1 (D[0] is meaningless: the byte before the run was not captured).
    let d: Vec<u8> = std::iter::once(0)
        .chain(b.windows(2).map(|w| w[0] ^ w[1]))
        .collect();

    // A crib in clear: the run is not scrambled.
    let mut in_clear = None;
    clear.scan(b, |ci, pos| {
        let c = &cribs[ci].1;
        if in_clear.is_none() && pos + c.len() <= n && &b[pos..pos + c.len()] == c.as_slice() {
            in_clear = Some((cribs[ci].0, pos));
        }
    });
    if let Some((line, pos)) = in_clear {
        rr.method = Some(Method::Clear {
            line,
            dsn: run.dsn + pos as u64,
        });
        return (rr, Some((run.dsn, b.clone())));
    }

    // Placements: the key of crib `ci` found at D[pos..], so the crib starts at pos - 65.
    let mut placements: Vec<(usize, i64)> = Vec::new();
    linear.scan(&d[1..], |ci, pos| {
        let i = pos as i64 + 1; // index into d
        let s = i - 65;
        let e = &checks[ci];
        if s < -(back as i64) || s + cribs[ci].1.len() as i64 > n as i64 {
            return;
        }
        let at = i as usize;
        if d[at..at + e.len()] == e[..] {
            placements.push((ci, s));
        }
    });
    placements.sort_by_key(|&(ci, s)| (s, ci));
    for (ci, s) in placements {
        let c = &cribs[ci].1;
        match &plain {
            None => {
                plain = Some(extend(&d, n, back, s, c));
                rr.method = Some(Method::Crib {
                    line: cribs[ci].0,
                    dsn: (run.dsn as i64 + s) as u64,
                });
            }
            Some(p) => {
                let at = (s + back as i64) as usize;
                let diff = p[at..at + c.len()]
                    .iter()
                    .zip(c)
                    .filter(|(x, y)| x != y)
                    .count() as u64;
                if diff == 0 {
                    rr.agreeing += 1;
                } else {
                    rr.conflicting_bytes += diff;
                }
            }
        }
    }
    if rr.conflicting_bytes > 0 {
        // Every placement determines the whole run, so two that disagree cannot both be
        // right: repetitive plaintext lets a crib fit where it does not belong. Trust none.
        rr.ambiguous = true;
        rr.method = None;
        plain = None;
    }

    if plain.is_none() && opts.guess_zeros {
        // ZERO_STRETCH scrambled zeros in a row ending at i: D is 0 from `start`, so the
        // plaintext is 65-periodic there, and a period XORs to 0: guess zeros,
        // b[start..start + 65] = 0 (and so b[start-65..start] = 0 too).
        let mut runlen = 0usize;
        for (i, &bi) in b.iter().enumerate() {
            runlen = if bi == 0 { runlen + 1 } else { 0 };
            if runlen == ZERO_STRETCH {
                let start = i + 2 - ZERO_STRETCH; // D is 0 from here to i (80 bytes)
                plain = Some(extend(&d, n, back, start as i64, &[0; 65]));
                rr.method = Some(Method::ZeroGuess {
                    dsn: run.dsn + start as u64,
                });
                break;
            }
        }
    }
    let recovered = plain.map(|p| (run.dsn - back as u64, p));
    (rr, recovered)
}

/// The plaintext of positions `-back..n` from the known bytes `known` at `s`.
fn extend(d: &[u8], n: usize, back: usize, s: i64, known: &[u8]) -> Vec<u8> {
    let base = back as i64;
    let mut p = vec![0u8; n + back];
    let at = (s + base) as usize;
    p[at..at + known.len()].copy_from_slice(known);
    // Forwards: b[i] = D[i] ^ b[i-65].
    let first = (s + known.len() as i64) as usize;
    for (i, &di) in d.iter().enumerate().take(n).skip(first) {
        let j = (i as i64 + base) as usize;
        p[j] = di ^ p[j - 65];
    }
    // Backwards: b[j] = D[j+65] ^ b[j+65], down to -back.
    let mut j = s - 1;
    while j >= -base {
        let idx = (j + base) as usize;
        p[idx] = d[(j + 65) as usize] ^ p[idx + 65];
        j -= 1;
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datalevel::{DataCapture, DataStream};
    use nena_codec::Scrambler;

    fn text(n: usize) -> Vec<u8> {
        let words = [
            "alpha ",
            "meeting ",
            "door ",
            "Thursday ",
            "code ",
            "4711 ",
            "Bob ",
            "Alice ",
            "is ",
            "the ",
            "of ",
            "moves ",
            "key ",
            "under ",
            "mat ",
            "\n",
        ];
        let mut x = 12345u64;
        let mut v = Vec::new();
        while v.len() < n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v.extend_from_slice(words[(x % words.len() as u64) as usize].as_bytes());
        }
        v.truncate(n);
        v
    }

    fn scrambled(plain: &[u8]) -> Vec<u8> {
        let mut out = plain.to_vec();
        Scrambler::new([1, 2, 3, 4, 5, 6, 7, 8]).scramble_in_place(&mut out);
        out
    }

    fn capture(runs: Vec<Run>) -> DataCapture {
        DataCapture {
            streams: vec![DataStream {
                connection: "t".into(),
                direction: Direction::ClientToServer,
                subflows: vec![],
                bytes_seen: runs.iter().map(|r| r.bytes.len() as u64).sum(),
                handshake_bytes: 0,
                protected_from: None,
                conflicting_bytes: 0,
                runs,
            }],
            unplaced: vec![],
            warnings: vec![],
        }
    }

    fn one_run(bytes: Vec<u8>) -> DataCapture {
        capture(vec![Run { dsn: 0, bytes }])
    }

    #[test]
    fn structure_tells_kato_over_text_from_cipher_output_without_a_crib() {
        let p = text(20_000);
        let kato = structure(&one_run(scrambled(&p)));
        let plain = structure(&one_run(p.clone()));
        // Cipher output: uniform bytes (what stream and aead put on the wire).
        let cipher = structure(&one_run(nena_testkit::random_bytes(7, 20_000)));
        // Kato over random plaintext is as uniform as a cipher.
        let kato_random = structure(&one_run(scrambled(&nena_testkit::random_bytes(9, 20_000))));
        assert_eq!(kato.verdict, Verdict::Structured, "{kato:?}");
        assert_eq!(plain.verdict, Verdict::Structured, "{plain:?}");
        assert_eq!(cipher.verdict, Verdict::Random, "{cipher:?}");
        assert_eq!(kato_random.verdict, Verdict::Random, "{kato_random:?}");
        assert!(cipher.entropy_bytes > 7.9 && cipher.entropy_differences > 7.9);
        assert!(kato.entropy_differences < 7.0, "{kato:?}");
        // Too little to judge.
        let short = structure(&one_run(scrambled(&p[..1000])));
        assert_eq!(short.verdict, Verdict::TooFewBytes);
        assert_eq!(short.bytes, 1000);
        // The attack reports it, cribs or none.
        let r = attack(&one_run(scrambled(&p)), &[], AttackOptions::default());
        assert_eq!(r.structure, kato);
        assert_eq!(r.bytes_recovered, 0);
    }

    #[test]
    fn one_crib_recovers_its_run_and_64_bytes_before_it() {
        let p = text(20_000);
        let w = scrambled(&p);
        // The eavesdropper saw two runs of the stream: 1000..8000 and 12000..20000.
        let cap = capture(vec![
            Run {
                dsn: 1000,
                bytes: w[1000..8000].to_vec(),
            },
            Run {
                dsn: 12000,
                bytes: w[12000..20000].to_vec(),
            },
        ]);
        // A crib from inside the second run only.
        let cribs = vec![(1, p[15000..15100].to_vec())];
        let r = attack(&cap, &cribs, AttackOptions::default());
        let s = &r.streams[0];
        assert!(s.runs[0].method.is_none());
        assert_eq!(
            s.runs[1].method,
            Some(Method::Crib {
                line: 1,
                dsn: 15000
            })
        );
        assert_eq!(s.bytes_recovered, 8000);
        assert_eq!(s.bytes_recovered_off_link, 64);
        assert_eq!(s.chunks.len(), 1);
        assert_eq!(s.chunks[0].dsn, 12000 - 64);
        assert_eq!(s.chunks[0].bytes, p[12000 - 64..20000]);
        assert_eq!(r.bytes_seen, 15000);
    }

    #[test]
    fn cribs_at_the_edges_and_agreeing_placements() {
        let p = text(5000);
        let w = scrambled(&p);
        let cap = capture(vec![Run {
            dsn: 300,
            bytes: w[300..5000].to_vec(),
        }]);
        // A crib that starts 40 bytes before the run (only its checks must be inside), one
        // that ends at the run's end, and one in the middle.
        let cribs = vec![
            (1, p[260..360].to_vec()),
            (2, p[4900..5000].to_vec()),
            (3, p[2000..2070].to_vec()),
        ];
        let r = attack(&cap, &cribs, AttackOptions::default());
        let run = &r.streams[0].runs[0];
        assert_eq!(run.method, Some(Method::Crib { line: 1, dsn: 260 }));
        assert_eq!((run.agreeing, run.conflicting_bytes), (2, 0));
        assert_eq!(r.streams[0].chunks[0].bytes, p[236..5000]);
    }

    #[test]
    fn wrong_short_and_unscrambled() {
        let p = text(5000);
        let w = scrambled(&p);
        let cap = capture(vec![Run {
            dsn: 0,
            bytes: w.clone(),
        }]);
        let other = text(9000)[8000..8100].to_vec();
        let mut altered = p[1000..1100].to_vec();
        altered[80] ^= 1;
        let cribs = vec![(1, other), (2, altered), (3, p[100..150].to_vec())];
        let r = attack(&cap, &cribs, AttackOptions::default());
        assert_eq!(r.bytes_recovered, 0, "{:?}", r.streams[0].runs);
        assert_eq!(r.cribs_too_short, 1);
        // The same text unscrambled: the crib is there in clear.
        let cap = capture(vec![Run {
            dsn: 7,
            bytes: p.clone(),
        }]);
        let r = attack(
            &cap,
            &[(1, p[3000..3100].to_vec())],
            AttackOptions::default(),
        );
        assert!(matches!(
            r.streams[0].runs[0].method,
            Some(Method::Clear { line: 1, dsn: 3007 })
        ));
        assert_eq!(r.bytes_recovered, 5000);
    }

    #[test]
    fn conflicting_placements_are_reported() {
        // Plaintext with a 65-periodic stretch: two different cribs fit the same D there.
        let mut p = text(3000);
        let pattern: Vec<u8> = (0..65u8).map(|i| b'a' + i % 26).collect();
        for k in 0..10 {
            p[1000 + 65 * k..1065 + 65 * k].copy_from_slice(&pattern);
        }
        let w = scrambled(&p);
        let cap = capture(vec![Run { dsn: 0, bytes: w }]);
        // Right: the real text; wrong: another 65-periodic text (all checks are zeros too).
        let right = p[1100..1300].to_vec();
        let wrong: Vec<u8> = (0..200).map(|i| b'A' + (i % 65) as u8 % 26).collect();
        let r = attack(&cap, &[(1, right), (2, wrong)], AttackOptions::default());
        let run = &r.streams[0].runs[0];
        assert!(run.conflicting_bytes > 0, "{run:?}");
        assert!(run.ambiguous && run.method.is_none(), "{run:?}");
        assert_eq!(r.bytes_recovered, 0, "an ambiguous run is not claimed");
    }

    #[test]
    fn zeros_are_guessed_only_when_asked_and_other_repeats_are_not() {
        let mut p = text(4000);
        p[2000..2300].fill(0);
        // A 65-periodic pattern elsewhere: its scrambled bytes repeat too, but are not 00.
        let pattern: Vec<u8> = (0..65u8).map(|i| b'A' + i % 26).collect();
        for k in 0..3 {
            p[500 + 65 * k..565 + 65 * k].copy_from_slice(&pattern);
        }
        let w = scrambled(&p);
        let cap = capture(vec![Run { dsn: 0, bytes: w }]);
        let r = attack(&cap, &[], AttackOptions::default());
        assert_eq!(r.bytes_recovered + r.bytes_guessed, 0);
        let r = attack(&cap, &[], AttackOptions { guess_zeros: true });
        assert!(matches!(
            r.streams[0].runs[0].method,
            Some(Method::ZeroGuess { dsn }) if dsn > 2000
        ));
        assert_eq!(r.bytes_guessed, 4000);
        assert_eq!(r.bytes_recovered, 0, "guesses are not counted as recovered");
        assert_eq!(r.streams[0].chunks[0].bytes, p[..], "the guess was right");
    }

    /// A run that holds the first scrambled byte of a direction gives away its key: the 64
    /// "plaintext" bytes before it are the scrambler's initial window, 56 zeros and the key.
    #[test]
    fn the_first_run_of_a_direction_gives_away_the_key() {
        let p = text(3000);
        let w = scrambled(&p);
        let cap = capture(vec![Run {
            dsn: 1_000_000,
            bytes: w,
        }]);
        let r = attack(
            &cap,
            &[(1, p[2000..2100].to_vec())],
            AttackOptions::default(),
        );
        let chunk = &r.streams[0].chunks[0];
        assert_eq!(chunk.dsn, 1_000_000 - 64);
        assert_eq!(chunk.bytes[..56], [0u8; 56]);
        assert_eq!(
            chunk.bytes[56..64],
            [1, 2, 3, 4, 5, 6, 7, 8],
            "the kato key"
        );
        assert_eq!(chunk.bytes[64..], p[..]);
    }
}
