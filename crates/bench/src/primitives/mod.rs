//! Which crate's primitives are fastest here: AES-128-GCM and ChaCha20-Poly1305 (seal +
//! open, `aead` mode) and AES-128-CTR and ChaCha20 (keystream XOR in place, `stream`
//! mode, continued and seeked), from ring, aws-lc-rs, RustCrypto and OpenSSL (the
//! reference), on messages of 1280 B, 16 KiB and 64 KiB, every figure in interleaved
//! rounds on one pinned core (`cargo run --release -p nena-bench --features
//! compare-crypto --example primitives`). Every candidate is checked against OpenSSL
//! before it is timed, and its round trips are checked after.
//!
//! Without the `compare-crypto` feature only the crates nena uses (ring, RustCrypto's
//! previous generation) and OpenSSL are built and timed.

pub mod aead;
pub mod keystream;
mod library;

pub use library::{Lib, Made, NEEDS_FEATURE};

use crate::codec::{cpu_model, pin_to_core};
use crate::harness::{self, HarnessConfig, Job, Stats};
use aead::{AeadAlg, AeadImpl};
use anyhow::{ensure, Context, Result};
use keystream::{KeystreamImpl, StreamAlg};
use nena_codec::AlignedBuf;
use serde::Serialize;
use std::fmt::Write as _;
use std::hint::black_box;

/// The default message sizes: the papers' message, a full record, a large write.
pub const DEFAULT_SIZES: [usize; 3] = [1280, 16384, 65536];

/// Where a keystream's timed messages start in the stream by default: mid-block for both
/// ciphers (13 mod 16 and mod 64), as the byte offsets of a TCP stream fall.
pub const STREAM_SKEW: u64 = 13;

/// Where the timed keystreams go back to their first offset (far below either counter's end).
const STREAM_WRAP: u64 = 1 << 32;

/// What a row times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Operation {
    /// AEAD: seal a message in place, then open it (tag verified), a fresh nonce each.
    SealOpen,
    /// Keystream: XOR the next bytes of a kept instance, sender then receiver.
    Continue,
    /// Keystream: seek to the message's byte offset, then XOR, sender then receiver.
    Seek,
}

impl Operation {
    pub fn name(self) -> &'static str {
        match self {
            Operation::SealOpen => "seal+open",
            Operation::Continue => "continue",
            Operation::Seek => "seek",
        }
    }
}

/// How to run the comparison.
#[derive(Debug, Clone)]
pub struct PrimConfig {
    pub harness: HarnessConfig,
    /// Message sizes in bytes.
    pub sizes: Vec<usize>,
    /// Pin the measuring thread to one core (`core`, or the last one).
    pub pin: bool,
    pub core: Option<usize>,
    /// Byte offset of the first timed keystream message (then `skew + k x size`).
    pub skew: u64,
}

impl Default for PrimConfig {
    fn default() -> Self {
        PrimConfig {
            harness: HarnessConfig::standard(),
            sizes: DEFAULT_SIZES.to_vec(),
            pin: true,
            core: None,
            skew: STREAM_SKEW,
        }
    }
}

/// One timed figure.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub primitive: &'static str,
    pub operation: &'static str,
    pub lib: &'static str,
    pub crates: &'static str,
    pub bytes: usize,
    /// Median nanoseconds per message, both ways (seal + open; sender + receiver XOR).
    pub ns_per_msg: f64,
    pub ns_p25: f64,
    pub ns_p75: f64,
    /// Per-direction throughput from the median, GB/s (1e9 B/s): 2 x bytes / ns_per_msg.
    pub gbps: f64,
    /// The same from the quartiles (gbps_low from ns_p75, gbps_high from ns_p25).
    pub gbps_low: f64,
    pub gbps_high: f64,
    /// OpenSSL's median time for the same primitive, operation and size divided by this
    /// row's: above 1 is faster than OpenSSL.
    pub vs_openssl: Option<f64>,
    pub stats: Stats,
}

/// A candidate that is not timed, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Missing {
    pub primitive: &'static str,
    pub lib: &'static str,
    pub reason: String,
}

/// The fastest candidate of one primitive, operation and size.
#[derive(Debug, Clone, Serialize)]
pub struct Fastest {
    pub primitive: &'static str,
    pub operation: &'static str,
    pub bytes: usize,
    pub lib: &'static str,
    pub gbps: f64,
    /// The runner-up and how much slower it is (its median time / the fastest's).
    pub second: Option<&'static str>,
    pub second_slower_by: Option<f64>,
}

/// The whole report; `--json` prints it as is.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub cpu: String,
    /// The CPU flags that select the crates' code paths.
    pub cpu_flags: Vec<String>,
    pub openssl: String,
    pub compare_crypto: bool,
    pub pinning: String,
    pub sizes: Vec<usize>,
    /// Byte offset of the first keystream message.
    pub stream_skew: u64,
    pub samples: usize,
    pub sample_ms: f64,
    pub definitions: Vec<String>,
    pub rows: Vec<Row>,
    pub missing: Vec<Missing>,
    pub fastest: Vec<Fastest>,
}

/// The CPU flags (of /proc/cpuinfo) that the crates' dispatchers look at.
pub const FLAGS_OF_INTEREST: [&str; 12] = [
    "sse4_1",
    "ssse3",
    "aes",
    "pclmulqdq",
    "avx",
    "avx2",
    "movbe",
    "bmi2",
    "vaes",
    "vpclmulqdq",
    "avx512f",
    "avx512vl",
];

/// Which of [`FLAGS_OF_INTEREST`] this CPU reports.
pub fn cpu_flags() -> Vec<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags: Vec<&str> = info
        .lines()
        .find(|l| l.starts_with("flags"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.split_whitespace().collect())
        .unwrap_or_default();
    FLAGS_OF_INTEREST
        .iter()
        .filter(|f| flags.contains(f))
        .map(|f| f.to_string())
        .collect()
}

/// Fixed, non-secret test keys and nonces.
fn key_for(len: usize) -> Vec<u8> {
    crate::ciphers::test_bytes(0x6b65_7973 + len as u64, len)
}

fn nonce_base() -> [u8; 12] {
    let mut n = [0u8; 12];
    n.copy_from_slice(&crate::ciphers::test_bytes(0x6976, 12));
    n
}

/// The AEAD candidate of `lib`, checked against OpenSSL.
pub fn checked_aead(lib: Lib, alg: AeadAlg) -> Result<Made<Box<dyn AeadImpl>>> {
    let key = key_for(alg.key_len());
    let mut imp = match aead::make(lib, alg, &key)? {
        Made::Ready(i) => i,
        m => return Ok(m),
    };
    aead::check_against_openssl(alg, &key, imp.as_mut()).with_context(|| {
        format!(
            "{} {}: differs from OpenSSL, not timing it",
            lib.name(),
            alg.name()
        )
    })?;
    Ok(Made::Ready(imp))
}

/// A fresh keystream candidate of `lib` (unchecked).
fn fresh_stream(lib: Lib, alg: StreamAlg) -> Result<Made<Box<dyn KeystreamImpl>>> {
    keystream::make(lib, alg, &key_for(alg.key_len()), &nonce_base())
}

/// Checks the keystream candidate of `lib` against OpenSSL; `Ok(Some(reason))` when
/// `lib` does not provide it.
pub fn check_stream(lib: Lib, alg: StreamAlg) -> Result<Option<String>> {
    match fresh_stream(lib, alg)? {
        Made::Unavailable(r) => Ok(Some(r)),
        Made::Ready(_) => {
            let mut fresh = || match fresh_stream(lib, alg)? {
                Made::Ready(i) => Ok(i),
                Made::Unavailable(r) => anyhow::bail!(r),
            };
            keystream::check_against_openssl(
                alg,
                &key_for(alg.key_len()),
                &nonce_base(),
                &mut fresh,
            )
            .with_context(|| {
                format!(
                    "{} {}: differs from OpenSSL, not timing it",
                    lib.name(),
                    alg.name()
                )
            })?;
            Ok(None)
        }
    }
}

/// One timed subject: a step is one message both ways.
trait Subject {
    fn step(&mut self) -> Result<()>;
    /// After timing: the buffer holds the message again.
    fn intact(&self) -> bool;
}

struct AeadSubject {
    imp: Box<dyn AeadImpl>,
    buf: AlignedBuf,
    msg: Vec<u8>,
    iv: [u8; 12],
    seq: u64,
}

/// The 5-byte record header of nena's `aead` records, as associated data.
const AAD: [u8; 5] = [0x17, 0x03, 0x03, 0x40, 0x10];

impl Subject for AeadSubject {
    fn step(&mut self) -> Result<()> {
        self.seq += 1;
        // The nonce of record `seq`: the IV XOR the sequence number (as TLS 1.3 and nena).
        let mut nonce = self.iv;
        for (n, s) in nonce[4..].iter_mut().zip(self.seq.to_be_bytes()) {
            *n ^= s;
        }
        let buf = black_box(&mut self.buf[..]);
        let tag = self.imp.seal(&nonce, &AAD, buf)?;
        self.imp.open(&nonce, &AAD, buf, &tag)
    }

    fn intact(&self) -> bool {
        self.buf[..] == self.msg[..]
    }
}

struct StreamSubject {
    enc: Box<dyn KeystreamImpl>,
    dec: Box<dyn KeystreamImpl>,
    seek: bool,
    buf: AlignedBuf,
    msg: Vec<u8>,
    /// Byte offset of the first message, and of the next one.
    skew: u64,
    pos: u64,
}

impl StreamSubject {
    fn new(
        mut enc: Box<dyn KeystreamImpl>,
        mut dec: Box<dyn KeystreamImpl>,
        seek: bool,
        msg: Vec<u8>,
        skew: u64,
    ) -> Result<Self> {
        enc.apply_at(skew, &mut [])?;
        dec.apply_at(skew, &mut [])?;
        Ok(StreamSubject {
            enc,
            dec,
            seek,
            buf: AlignedBuf::from_slice(&msg),
            msg,
            skew,
            pos: skew,
        })
    }
}

impl Subject for StreamSubject {
    fn step(&mut self) -> Result<()> {
        let len = self.buf.len() as u64;
        if self.pos + len > STREAM_WRAP {
            self.pos = self.skew;
            self.enc.apply_at(self.skew, &mut [])?;
            self.dec.apply_at(self.skew, &mut [])?;
        }
        let buf = black_box(&mut self.buf[..]);
        if self.seek {
            self.enc.apply_at(self.pos, buf)?;
            self.dec.apply_at(self.pos, buf)?;
        } else {
            self.enc.apply(buf)?;
            self.dec.apply(buf)?;
        }
        self.pos += len;
        Ok(())
    }

    fn intact(&self) -> bool {
        self.buf[..] == self.msg[..]
    }
}

struct Live {
    primitive: &'static str,
    op: Operation,
    lib: Lib,
    bytes: usize,
    subject: Box<dyn Subject>,
}

/// Run the comparison. `progress(done, total)` is called as it goes.
pub fn run(cfg: &PrimConfig, progress: &mut dyn FnMut(u64, u64)) -> Result<Report> {
    cfg.harness.validate()?;
    ensure!(!cfg.sizes.is_empty(), "no message sizes");
    ensure!(
        cfg.sizes.iter().all(|&s| (1..=1 << 24).contains(&s)),
        "message sizes must be 1 B to 16 MiB"
    );
    ensure!(cfg.skew < 1 << 20, "the keystream skew must be below 1 MiB");
    let pinning = if cfg.pin {
        format!(
            "pinned to core {} with sched_setaffinity",
            pin_to_core(cfg.core)?
        )
    } else {
        "not pinned".to_string()
    };

    // Check every candidate against OpenSSL, then set up its subjects, one per size and
    // operation, each with its own keys and buffers.
    let mut live: Vec<Live> = Vec::new();
    let mut missing: Vec<Missing> = Vec::new();
    for alg in AeadAlg::ALL {
        for &lib in alg.libs() {
            match checked_aead(lib, alg)? {
                Made::Unavailable(reason) => missing.push(Missing {
                    primitive: alg.name(),
                    lib: lib.name(),
                    reason,
                }),
                Made::Ready(_) => {
                    for &bytes in &cfg.sizes {
                        let Made::Ready(imp) = aead::make(lib, alg, &key_for(alg.key_len()))?
                        else {
                            unreachable!("available a moment ago")
                        };
                        let msg = crate::ciphers::test_bytes(bytes as u64, bytes);
                        live.push(Live {
                            primitive: alg.name(),
                            op: Operation::SealOpen,
                            lib,
                            bytes,
                            subject: Box::new(AeadSubject {
                                imp,
                                buf: AlignedBuf::from_slice(&msg),
                                msg,
                                iv: nonce_base(),
                                seq: 0,
                            }),
                        });
                    }
                }
            }
        }
    }
    for alg in StreamAlg::ALL {
        for &lib in alg.libs() {
            if let Some(reason) = check_stream(lib, alg)? {
                missing.push(Missing {
                    primitive: alg.name(),
                    lib: lib.name(),
                    reason,
                });
                continue;
            }
            for op in [Operation::Continue, Operation::Seek] {
                for &bytes in &cfg.sizes {
                    let make = || match fresh_stream(lib, alg)? {
                        Made::Ready(i) => Ok(i),
                        Made::Unavailable(r) => anyhow::bail!(r),
                    };
                    let msg = crate::ciphers::test_bytes(bytes as u64, bytes);
                    live.push(Live {
                        primitive: alg.name(),
                        op,
                        lib,
                        bytes,
                        subject: Box::new(StreamSubject::new(
                            make()?,
                            make()?,
                            op == Operation::Seek,
                            msg,
                            cfg.skew,
                        )?),
                    });
                }
            }
        }
    }

    // Time everything in interleaved rounds.
    let stats = {
        let mut jobs: Vec<Job> = live
            .iter_mut()
            .map(|l| {
                let s = &mut l.subject;
                Box::new(move || s.step()) as Job
            })
            .collect();
        harness::measure_interleaved(&cfg.harness, &mut jobs, progress)?
    };
    for l in &live {
        ensure!(
            l.subject.intact(),
            "{} {} {} at {} B: the round trips did not give the message back",
            l.lib.name(),
            l.primitive,
            l.op.name(),
            l.bytes
        );
    }

    let mut rows: Vec<Row> = live
        .iter()
        .zip(&stats)
        .map(|(l, s)| Row {
            primitive: l.primitive,
            operation: l.op.name(),
            lib: l.lib.name(),
            crates: l.lib.crates(l.primitive),
            bytes: l.bytes,
            ns_per_msg: s.median_ns,
            ns_p25: s.p25_ns,
            ns_p75: s.p75_ns,
            gbps: 2.0 * l.bytes as f64 / s.median_ns,
            gbps_low: 2.0 * l.bytes as f64 / s.p75_ns,
            gbps_high: 2.0 * l.bytes as f64 / s.p25_ns,
            vs_openssl: None,
            stats: *s,
        })
        .collect();
    // Report order: primitive, operation, size, then library.
    let order = |r: &Row| {
        let p = [
            "aes-128-gcm",
            "chacha20-poly1305",
            "aes-128-ctr",
            "chacha20",
        ]
        .iter()
        .position(|&x| x == r.primitive);
        let o = ["seal+open", "continue", "seek"]
            .iter()
            .position(|&x| x == r.operation);
        (p, o, r.bytes)
    };
    rows.sort_by_key(order);
    let reference: Vec<(&str, &str, usize, f64)> = rows
        .iter()
        .filter(|r| r.lib == Lib::OpenSsl.name())
        .map(|r| (r.primitive, r.operation, r.bytes, r.ns_per_msg))
        .collect();
    for r in rows.iter_mut() {
        r.vs_openssl = reference
            .iter()
            .find(|(p, o, b, _)| *p == r.primitive && *o == r.operation && *b == r.bytes)
            .map(|&(_, _, _, ns)| ns / r.ns_per_msg);
    }
    let fastest = fastest(&rows);

    Ok(Report {
        cpu: cpu_model(),
        cpu_flags: cpu_flags(),
        openssl: crate::ciphers::library_version(),
        compare_crypto: cfg!(feature = "compare-crypto"),
        pinning,
        sizes: cfg.sizes.clone(),
        stream_skew: cfg.skew,
        samples: cfg.harness.samples,
        sample_ms: cfg.harness.sample_time.as_secs_f64() * 1e3,
        definitions: definitions(cfg.skew),
        rows,
        missing,
        fastest,
    })
}

/// The fastest candidate of every primitive, operation and size, with the runner-up.
/// OpenSSL (the reference) and the informative raw-FFI row are left out: nena takes its
/// primitives from ring, aws-lc-rs or RustCrypto.
pub fn fastest(rows: &[Row]) -> Vec<Fastest> {
    let mut out: Vec<Fastest> = Vec::new();
    let mut groups: Vec<(&str, &str, usize)> = rows
        .iter()
        .map(|r| (r.primitive, r.operation, r.bytes))
        .collect();
    groups.dedup();
    for (p, o, b) in groups {
        let mut g: Vec<&Row> = rows
            .iter()
            .filter(|r| {
                r.primitive == p
                    && r.operation == o
                    && r.bytes == b
                    && r.lib != Lib::OpenSsl.name()
                    && r.lib != Lib::AwsLcSys.name()
            })
            .collect();
        g.sort_by(|x, y| x.ns_per_msg.total_cmp(&y.ns_per_msg));
        if let Some(first) = g.first() {
            out.push(Fastest {
                primitive: p,
                operation: o,
                bytes: b,
                lib: first.lib,
                gbps: first.gbps,
                second: g.get(1).map(|s| s.lib),
                second_slower_by: g.get(1).map(|s| s.ns_per_msg / first.ns_per_msg),
            });
        }
    }
    out
}

/// The definitions printed under the table and included in the JSON.
pub fn definitions(skew: u64) -> Vec<String> {
    vec![
        "ns/msg: median over samples of the time for one message both ways: AEADs seal in place (5-byte associated data, \
         separate 16-byte tag, nonce = IV xor record number) then open in place with tag verification; keystreams XOR \
         the message in place on the sender's instance, then on the receiver's. Keys and contexts are set up once."
            .into(),
        format!(
            "continue: each instance goes on from where its last message ended; seek: each message first positions the \
             instance at its byte offset (RustCrypto seek, OpenSSL IV re-init + discard, aws-lc positioned call). Messages \
             start at byte offsets {skew} + k x size ({STREAM_SKEW}, the default, is mid-block for both ciphers, as TCP \
             byte offsets fall)."
        ),
        "GB/s: per-direction throughput, 2 x size / ns per message, 1 GB = 1e9 B; (low .. high) from the quartiles.".into(),
        "x openssl: OpenSSL's median time for the same primitive, operation and size divided by the row's (above 1 = faster than OpenSSL).".into(),
        "aws-lc-rs AES-128-CTR: `continue` and `seek` are the same positioned in-place call (its streaming API is out of place only).".into(),
        "aws-lc-sys-ffi: AWS-LC's ChaCha20 through raw unsafe FFI, informative only (no safe crate exposes it); not counted as fastest.".into(),
    ]
}

/// The human-readable report.
pub fn render_text(r: &Report) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "nena-bench primitives: crypto primitives of the aead and stream modes, per message, both ways");
    let _ = writeln!(o, "cpu:      {} ({})", r.cpu, r.pinning);
    let _ = writeln!(o, "flags:    {}", r.cpu_flags.join(" "));
    let _ = writeln!(o, "openssl:  {}", r.openssl);
    let _ = writeln!(
        o,
        "sampling: {} samples of ~{} ms per figure, all {} figures in interleaved rounds; median reported{}",
        r.samples,
        r.sample_ms,
        r.rows.len(),
        if r.compare_crypto { "" } else { " (built without compare-crypto: nena's crates and OpenSSL only)" }
    );
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "{:<18} {:<9} {:>6}  {:<16} {:>9} {:>21} {:>6} {:>15} {:>9}  crates",
        "primitive",
        "op",
        "bytes",
        "library",
        "ns/msg",
        "(p25 .. p75)",
        "GB/s",
        "(low .. high)",
        "x openssl"
    );
    let mut last = ("", "", 0);
    for row in &r.rows {
        let key = (row.primitive, row.operation, row.bytes);
        if !last.0.is_empty() && key != last {
            let _ = writeln!(o);
        }
        last = key;
        let _ = writeln!(
            o,
            "{:<18} {:<9} {:>6}  {:<16} {:>9.0} {:>21} {:>6.2} {:>15} {:>9}  {}",
            row.primitive,
            row.operation,
            row.bytes,
            row.lib,
            row.ns_per_msg,
            format!("({:.0} .. {:.0})", row.ns_p25, row.ns_p75),
            row.gbps,
            format!("({:.2} .. {:.2})", row.gbps_low, row.gbps_high),
            row.vs_openssl
                .map(|x| format!("{x:.2}"))
                .unwrap_or_else(|| "-".into()),
            row.crates
        );
    }
    if !r.missing.is_empty() {
        let _ = writeln!(o);
        let _ = writeln!(o, "not timed:");
        for m in &r.missing {
            let _ = writeln!(o, "  {:<18} {:<16} {}", m.primitive, m.lib, m.reason);
        }
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "fastest candidate here, OpenSSL and raw FFI left out (runner-up: its time / the fastest's):");
    for f in &r.fastest {
        let _ = writeln!(
            o,
            "  {:<18} {:<9} {:>6}  {:<16} {:>6.2} GB/s   {}",
            f.primitive,
            f.operation,
            f.bytes,
            f.lib,
            f.gbps,
            match (f.second, f.second_slower_by) {
                (Some(s), Some(x)) => format!("then {s} x{x:.2}"),
                _ => String::new(),
            }
        );
    }
    let _ = writeln!(o);
    for d in &r.definitions {
        let _ = writeln!(o, "  {d}");
    }
    o
}

#[cfg(test)]
mod tests;
