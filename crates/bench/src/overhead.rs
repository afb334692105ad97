//! What nena costs beyond its primitive (issue 21, item 3): for each mode, nena's CPU
//! seconds per GB in the transfer bench minus raw MPTCP's, minus what the mode's primitive
//! costs on the same bytes (protected once by the sender, unprotected once by the
//! receiver), minus what the perf test's own check costs (the receiver compares every byte
//! with the pattern; raw MPTCP's receiver only counts). What is left is nena's own work:
//! the handshake, the gate, framing, the copy into the writer's buffer, bigger or more
//! system calls, wake-ups. The primitive and the check are timed in the same process and
//! the same bench run as the transfers, on this thread's CPU clock.
//!
//! The primitives are the ones nena uses, called as directly as their crates allow:
//! aws-lc-rs's AES-128-GCM or ChaCha20-Poly1305 on 16 KiB records (seal in place, then open
//! in place, tag verified), RustCrypto's AES-128-CTR or ChaCha20 keystream XORed twice,
//! nena-codec's scrambling and descrambling.

#[cfg(feature = "openssl")]
use crate::primitives::aead::{self, AeadAlg};
#[cfg(feature = "openssl")]
use crate::primitives::keystream::{self, StreamAlg};
#[cfg(feature = "openssl")]
use crate::primitives::{Lib, Made};
#[cfg(feature = "openssl")]
use anyhow::bail;
use anyhow::{ensure, Result};
use nena_proto::{Mode, Suite};
use serde::Serialize;
use std::hint::black_box;

/// nena's CPU per GB beyond raw MPTCP's and the primitive's, as a fraction of raw MPTCP's
/// CPU per GB, that each mode may cost where the CPU sets the pace.
pub const OVERHEAD_TARGET: f64 = 0.05;

/// Bytes each timed pass processes (per side).
const PASS_BYTES: usize = 64 << 20;
/// Timed passes; the median is kept.
const PASSES: usize = 5;
/// The record size of `aead` (nena-proto's largest record payload).
const RECORD: usize = nena_proto::record::MAX_PAYLOAD;
/// The write size of the other modes' timing (a large application write).
const WRITE: usize = 64 * 1024;

/// One mode's costs per 10^9 payload bytes, and what is left for nena.
#[derive(Debug, Clone, Serialize)]
pub struct Overhead {
    /// The transfer bench's name of the variant (`nena aead`).
    pub variant: String,
    /// The primitive nena uses in this mode (`none` for plain).
    pub primitive: String,
    /// The variant's median CPU seconds per GB in the transfers (both ends).
    pub cpu_s_per_gb: f64,
    /// Raw MPTCP's median, same setting, same run.
    pub raw_cpu_s_per_gb: f64,
    /// The primitive over a GB, both ends (protect + unprotect), this thread's CPU time.
    pub primitive_s_per_gb: f64,
    /// The perf test's pattern comparison over a GB (raw MPTCP's receiver does none).
    pub check_s_per_gb: f64,
    /// `cpu - raw - primitive - check`.
    pub beyond_s_per_gb: f64,
    /// `beyond / raw`: the figure the target bounds.
    pub ratio: f64,
}

/// CPU seconds of the calling thread (user + system), to the nanosecond (getrusage's
/// thread times move in scheduler ticks: too coarse for a pass of a few milliseconds).
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime fills the struct it is given.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// Median seconds per 10^9 bytes of `pass`, which processes [`PASS_BYTES`] bytes a call
/// (after one untimed call).
fn per_gb(mut pass: impl FnMut() -> Result<()>) -> Result<f64> {
    pass()?;
    let mut xs = Vec::with_capacity(PASSES);
    for _ in 0..PASSES {
        let t0 = thread_cpu();
        pass()?;
        xs.push((thread_cpu() - t0) / (PASS_BYTES as f64 / 1e9));
    }
    ensure!(
        xs.iter().all(|x| x.is_finite()),
        "the thread CPU clock is not readable"
    );
    Ok(crate::harness::median(&mut xs))
}

#[cfg(feature = "openssl")]
fn ready<T>(m: Made<T>) -> Result<T> {
    match m {
        Made::Ready(t) => Ok(t),
        Made::Unavailable(why) => bail!("{why}"),
    }
}

/// The primitive of `variant` under `suite`, and its seconds per GB (sender's protection
/// plus receiver's unprotection). Plain has none.
#[cfg(feature = "openssl")]
pub fn primitive_cost(mode: Mode, suite: Suite) -> Result<(String, f64)> {
    let key = [0x5a_u8; 32];
    let mut buf = vec![0x17_u8; WRITE];
    match mode {
        Mode::Plain => Ok(("none".into(), 0.0)),
        Mode::KatoMpc => bail!("kato-mpc scrambles in the kernel: no primitive to time here"),
        Mode::Kato => {
            let mut s = nena_codec::Scrambler::new([0x5a; nena_codec::KEY_LEN]);
            let mut d = nena_codec::Descrambler::new([0x5a; nena_codec::KEY_LEN]);
            let cost = per_gb(|| {
                for _ in 0..PASS_BYTES / WRITE {
                    s.scramble_in_place(&mut buf);
                    d.descramble_in_place(black_box(&mut buf));
                }
                Ok(())
            })?;
            Ok((format!("nena-codec {}", nena_codec::fast_backend()), cost))
        }
        Mode::Stream => {
            let alg = match suite {
                Suite::Aes128 => StreamAlg::Aes128Ctr,
                Suite::ChaCha20 => StreamAlg::ChaCha20,
            };
            let k = &key[..alg.key_len()];
            let nonce = [7u8; keystream::NONCE_LEN];
            let mut tx = ready(keystream::make(Lib::RustCryptoPrev, alg, k, &nonce)?)?;
            let mut rx = ready(keystream::make(Lib::RustCryptoPrev, alg, k, &nonce)?)?;
            let cost = per_gb(|| {
                for _ in 0..PASS_BYTES / WRITE {
                    tx.apply(&mut buf)?;
                    rx.apply(black_box(&mut buf))?;
                }
                Ok(())
            })?;
            ensure!(buf.iter().all(|&b| b == 0x17), "{}: round trip", alg.name());
            Ok((format!("{} (RustCrypto)", alg.name()), cost))
        }
        Mode::Aead => {
            let alg = match suite {
                Suite::Aes128 => AeadAlg::Aes128Gcm,
                Suite::ChaCha20 => AeadAlg::ChaCha20Poly1305,
            };
            let mut a = ready(aead::make(Lib::AwsLcRs, alg, &key[..alg.key_len()])?)?;
            let mut counter = 0u64;
            let aad = [0x17u8, 0x40, 0x00];
            let cost = per_gb(|| {
                for rec in 0..PASS_BYTES / RECORD {
                    let r = &mut buf[(rec % (WRITE / RECORD)) * RECORD..][..RECORD];
                    let mut nonce = [0u8; aead::NONCE_LEN];
                    nonce[4..].copy_from_slice(&counter.to_be_bytes());
                    counter += 1;
                    let tag = a.seal(&nonce, &aad, r)?;
                    a.open(&nonce, &aad, black_box(r), &tag)?;
                }
                Ok(())
            })?;
            ensure!(buf.iter().all(|&b| b == 0x17), "{}: round trip", alg.name());
            Ok((format!("{} (aws-lc-rs)", alg.name()), cost))
        }
        other => bail!("{other}: no primitive known to this bench"),
    }
}

/// Without the `openssl` feature the primitives are not built: only kato's codec (which
/// is nena's own) and plain can be timed.
/// Without the `openssl` feature the primitives are not built: only plain's (none) is
/// known, the others are NaN (reported as not measured, their targets left out).
#[cfg(not(feature = "openssl"))]
pub fn primitive_cost(mode: Mode, _: Suite) -> Result<(String, f64)> {
    Ok(match mode {
        Mode::Plain => ("none".into(), 0.0),
        _ => (
            "not timed (nena-bench built without `openssl`)".into(),
            f64::NAN,
        ),
    })
}

/// Seconds per GB of the perf receiver's pattern comparison.
pub fn check_cost() -> Result<f64> {
    let pattern = nena_transport::wire::pattern();
    // What arrives: the pattern, continued, in reads of the write size (a read at offset
    // `o` of the stream is `stream[o % len..][..WRITE]`).
    let stream: Vec<u8> = pattern
        .iter()
        .copied()
        .cycle()
        .take(pattern.len() + WRITE)
        .collect();
    let mut check = nena_transport::wire::PatternCheck::new(pattern);
    let mut at = 0usize;
    let cost = per_gb(|| {
        for _ in 0..PASS_BYTES / WRITE {
            check.feed(black_box(&stream[at..at + WRITE]));
            at = (at + WRITE) % pattern.len();
        }
        Ok(())
    })?;
    // A mismatch would stop the comparisons (and time nothing).
    ensure!(check.ok(), "the pattern check failed on the pattern");
    Ok(cost)
}

/// The overhead of each `(variant name, mode, its median CPU s/GB)` against raw MPTCP's
/// median `raw`, with the primitives and the check timed now.
pub fn overheads(
    variants: &[(String, Mode, f64)],
    raw: f64,
    suite: Suite,
) -> Result<Vec<Overhead>> {
    let check = check_cost()?;
    let mut out = Vec::new();
    for (name, mode, c) in variants {
        let (primitive, p) = primitive_cost(*mode, suite)?;
        let beyond = c - raw - p - check;
        out.push(Overhead {
            variant: name.clone(),
            primitive,
            cpu_s_per_gb: *c,
            raw_cpu_s_per_gb: raw,
            primitive_s_per_gb: p,
            check_s_per_gb: check,
            beyond_s_per_gb: beyond,
            ratio: beyond / raw,
        });
    }
    Ok(out)
}

/// Whether `o` meets [`OVERHEAD_TARGET`] (`None`: its primitive was not timed).
pub fn meets_target(o: &Overhead) -> Option<bool> {
    o.ratio.is_finite().then_some(o.ratio <= OVERHEAD_TARGET)
}

/// The table of one setting's overheads.
pub fn table(setting: &str, o: &[Overhead]) -> String {
    let mut s = format!(
        "Beyond the primitive, {setting} (CPU s/GB, both ends; primitive and pattern check timed in this run):\n"
    );
    s += &format!(
        "{:<12} {:>8} {:>8} {:>10} {:>8} {:>8} {:>9} {:>7} {:>11}  {}\n",
        "variant",
        "nena",
        "raw",
        "primitive",
        "check",
        "beyond",
        "% of raw",
        "x raw",
        "raw+prim x",
        "primitive"
    );
    for x in o {
        let raw = x.raw_cpu_s_per_gb;
        s += &format!(
            "{:<12} {:>8.3} {:>8.3} {:>10.3} {:>8.3} {:>8.3} {:>8.1}% {:>7.3} {:>11.3}  {}\n",
            x.variant,
            x.cpu_s_per_gb,
            raw,
            x.primitive_s_per_gb,
            x.check_s_per_gb,
            x.beyond_s_per_gb,
            x.ratio * 100.0,
            x.cpu_s_per_gb / raw,
            (raw + x.primitive_s_per_gb) / raw,
            x.primitive
        );
    }
    s
}

#[cfg(all(test, feature = "openssl"))]
mod tests {
    use super::*;

    #[test]
    fn every_mode_has_a_cost_and_plain_has_none() {
        let suite = Suite::preferred();
        assert_eq!(primitive_cost(Mode::Plain, suite).unwrap().1, 0.0);
        for m in [Mode::Kato, Mode::Stream, Mode::Aead] {
            let (name, s) = primitive_cost(m, suite).unwrap();
            assert!(s > 0.0 && s.is_finite(), "{m}: {name}: {s}");
        }
        assert!(primitive_cost(Mode::KatoMpc, suite).is_err());
        assert!(check_cost().unwrap() > 0.0);
    }

    #[test]
    fn what_is_left_is_the_difference() {
        let v = |name: &str, mode, cpu| (name.to_string(), mode, cpu);
        let o = overheads(
            &[
                v("nena plain", Mode::Plain, 1.2),
                v("nena kato", Mode::Kato, 5.0),
                v("nena stream", Mode::Stream, 5.0),
                v("nena aead", Mode::Aead, 5.0),
            ],
            1.0,
            Suite::preferred(),
        )
        .unwrap();
        assert_eq!(o.len(), 4);
        for x in &o {
            let sum =
                x.raw_cpu_s_per_gb + x.primitive_s_per_gb + x.check_s_per_gb + x.beyond_s_per_gb;
            assert!((sum - x.cpu_s_per_gb).abs() < 1e-9, "{x:?}");
            assert!(
                (x.ratio - x.beyond_s_per_gb).abs() < 1e-9,
                "raw is 1: {x:?}"
            );
        }
        // plain: 1.2 - 1 - check, far over 5% of 1; the others far over too.
        assert!(o.iter().all(|x| meets_target(x) == Some(false)), "{o:?}");
        let mut fine = o[0].clone();
        fine.ratio = 0.049;
        assert_eq!(meets_target(&fine), Some(true));
        fine.ratio = f64::NAN;
        assert_eq!(meets_target(&fine), None);
    }
}
