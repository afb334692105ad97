//! `nena bench handshake`: the cost of issue 41's handshake against the one it replaced, in
//! one run. *After*: today's aead handshake (protocol version 2: X25519 and ML-KEM-768,
//! the server's Ed25519 signature over the transcript, the client's check of it), the real
//! sans-IO machines `ClientHandshake` and `ServerHandshake`. *Before*: version 1 (X25519
//! alone, no server key), rebuilt from the same primitives in nena-proto's `v1_reference`,
//! with version 1's message layout and key schedule. Each timed iteration is one whole
//! handshake on one CPU, no network: the client's key generation and hello, the server's
//! reading of it and its answer, the client's reading of the answer and its confirm, both
//! sessions built (the server's key is loaded once, outside the timing, as a server does).
//! The two are measured in interleaved rounds (nena-bench's harness), so their ratio holds
//! within the run; the first flight's size (the hello, which crosses the trusted path
//! before anything else) and the answer's come from the messages themselves.

use crate::harness::{measure_interleaved, HarnessConfig, Stats};
use anyhow::{bail, Result};
use nena_proto::v1_reference as v1;
use nena_proto::{
    ClientConfig, ClientHandshake, Progress, ServerConfig, ServerHandshake, ServerKey, Suite,
    ENTROPY_LEN, SERVER_ENTROPY_LEN,
};
use serde::Serialize;

/// One handshake variant's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Variant {
    /// What it is.
    pub name: &'static str,
    /// The protocol version its messages carry.
    pub version: u8,
    /// The client's hello: the first flight, on the trusted path (bytes, header included).
    pub first_flight_bytes: usize,
    /// The server's accept.
    pub answer_bytes: usize,
    /// The client's confirm.
    pub confirm_bytes: usize,
    /// Time of one whole handshake (both sides, one CPU).
    pub handshake: Stats,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub before: Variant,
    pub after: Variant,
    /// after / before, of the median handshake times.
    pub time_ratio: f64,
    /// after / before, of the first flights' sizes.
    pub first_flight_ratio: f64,
    /// The suite both used (AES-128 where the CPU has AES instructions).
    pub suite: Suite,
    pub cpu: Option<String>,
}

/// Cheap distinct entropy per iteration (xorshift64): both variants fill theirs alike, and
/// neither's timing depends on the values (X25519 and ML-KEM run in constant time).
fn fill(state: &mut u64, out: &mut [u8]) {
    for b in out {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *b = *state as u8;
    }
}

/// One version-1 handshake; its message sizes.
fn before_once(seed: &mut u64, suite: Suite, epoch_log2: u8) -> Result<(usize, usize, usize)> {
    let mut ce = [0u8; v1::CLIENT_ENTROPY_LEN];
    let mut se = [0u8; 32];
    fill(seed, &mut ce);
    fill(seed, &mut se);
    let client = v1::Client1::new(&ce, suite, epoch_log2);
    let (accept, s_sess) = v1::server_read(client.first_flight(), &se)?;
    let (confirm, c_sess) = client.read(&accept)?;
    std::hint::black_box((s_sess, c_sess));
    Ok((client.first_flight().len(), accept.len(), confirm.len()))
}

/// One version-2 handshake; its message sizes.
fn after_once(
    seed: &mut u64,
    ccfg: &ClientConfig,
    scfg: &ServerConfig,
) -> Result<(usize, usize, usize)> {
    let mut ce = [0u8; ENTROPY_LEN];
    let mut se = [0u8; SERVER_ENTROPY_LEN];
    fill(seed, &mut ce);
    fill(seed, &mut se);
    let mut client = ClientHandshake::new(ccfg, ce)?;
    let hello_len = client.first_flight().len();
    let mut server = ServerHandshake::new(scfg, se);
    let Progress::Done {
        value: (accept, s_sess),
        ..
    } = server
        .read(client.first_flight())
        .map_err(|r| anyhow::anyhow!("the server refused: {}", r.error))?
    else {
        bail!("the server wanted more than the whole hello");
    };
    let Progress::Done {
        value: (confirm, c_sess),
        ..
    } = client.read(&accept)?
    else {
        bail!("the client wanted more than the whole accept");
    };
    std::hint::black_box((s_sess, c_sess));
    Ok((hello_len, accept.len(), confirm.len()))
}

/// Runs the benchmark with `cfg`; `progress(done, total)` after each step.
pub fn run(cfg: &HarnessConfig, progress: &mut dyn FnMut(u64, u64)) -> Result<Report> {
    let suite = Suite::preferred();
    let key = ServerKey::from_seed(&[0x5e; 32])?;
    let scfg = ServerConfig::default().with_key(key);
    let ccfg = ClientConfig {
        suite,
        ..ClientConfig::default()
    };
    // The sizes, and a check that both complete, before any timing.
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let epoch = ccfg.aead_epoch_log2;
    let b = before_once(&mut seed, suite, epoch)?;
    let a = after_once(&mut seed, &ccfg, &scfg)?;
    let (mut s1, mut s2) = (seed, seed.rotate_left(17));
    let stats = {
        let mut jobs: Vec<crate::harness::Job<'_>> = vec![
            Box::new(|| before_once(&mut s1, suite, epoch).map(|_| ())),
            Box::new(|| after_once(&mut s2, &ccfg, &scfg).map(|_| ())),
        ];
        measure_interleaved(cfg, &mut jobs, progress)?
    };
    let variant = |name, version, (f, a, c): (usize, usize, usize), s: &Stats| Variant {
        name,
        version,
        first_flight_bytes: f,
        answer_bytes: a,
        confirm_bytes: c,
        handshake: *s,
    };
    let before = variant("version 1: X25519 alone, no server key", 1, b, &stats[0]);
    let after = variant(
        "version 2: X25519 + ML-KEM-768, Ed25519 server signature",
        nena_proto::wire::VERSION,
        a,
        &stats[1],
    );
    Ok(Report {
        time_ratio: after.handshake.median_ns / before.handshake.median_ns,
        first_flight_ratio: after.first_flight_bytes as f64 / before.first_flight_bytes as f64,
        before,
        after,
        suite,
        cpu: crate::host::cpu_model(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_handshakes_complete_with_their_documented_sizes() {
        let r = run(&HarnessConfig::quick(), &mut |_, _| {}).unwrap();
        assert_eq!(r.before.first_flight_bytes, 78);
        assert_eq!(r.before.answer_bytes, 76);
        // docs/PROTOCOL.md: a hello offering aead alone is 1,262 bytes, its accept 1,260.
        assert_eq!(r.after.first_flight_bytes, 1262);
        assert_eq!(r.after.answer_bytes, 1260);
        assert_eq!(r.after.confirm_bytes, 41);
        assert_eq!(r.before.confirm_bytes, 41);
        assert!(r.before.handshake.median_ns > 0.0 && r.after.handshake.median_ns > 0.0);
        assert!(r.time_ratio.is_finite() && r.time_ratio > 0.0);
    }
}
