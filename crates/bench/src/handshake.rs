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
//!
//! *Resumed* (issue 59): a session resumed with a ticket from the one before it (each asks
//! for one more: a chain, as a client that keeps one ticket in hand runs), timed whole the
//! same way. The server's share is timed apart ([`ServerCost`]): in rounds, the wall time of
//! the server's `ServerHandshake::new` and `read` alone for a full handshake (today's,
//! resumption off) and for a resumed one (its ticket taken, one granted), interleaved, one
//! CPU; the targets are the resumed/full ratio of the medians (<= 0.15) and the resume
//! hello's size (<= 200 B).

use crate::harness::{measure_interleaved, HarnessConfig, Stats};
use anyhow::{bail, Result};
use nena_proto::v1_reference as v1;
use nena_proto::{
    ClientConfig, ClientHandshake, Progress, Resumption, ServerConfig, ServerHandshake, ServerKey,
    StoreLimits, Suite, Ticket, ENTROPY_LEN, SERVER_ENTROPY_LEN,
};
use serde::Serialize;
use std::time::Instant;

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

/// The server's time per session, full against resumed, timed apart from the client's.
#[derive(Debug, Clone, Serialize)]
pub struct ServerCost {
    /// Median over rounds of the mean server time of a full handshake (resumption off).
    pub full_ns: f64,
    /// The same for a resumed session (a ticket taken, one granted).
    pub resumed_ns: f64,
    /// resumed / full.
    pub ratio: f64,
    /// Rounds, and handshakes of each kind per round.
    pub rounds: usize,
    pub per_round: usize,
}

/// One checked target.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    pub name: &'static str,
    pub value: f64,
    /// The value must be at most this.
    pub limit: f64,
    pub pass: bool,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub before: Variant,
    pub after: Variant,
    /// A session resumed with a ticket (one whole exchange, both sides).
    pub resumed: Variant,
    pub server: ServerCost,
    /// With `--flows`: the proxy server's CPU per 1,000 short flows, as by default (reused
    /// sessions), resumed and full (`None`: not run).
    pub flows: Option<crate::flows::FlowsReport>,
    /// `resumed-server-cpu-vs-full` (<= 0.15) and `resumed-first-flight-bytes` (<= 200);
    /// with `--flows`, `resumed-proxy-server-cpu-per-flow` (<= 0.3).
    pub targets: Vec<Target>,
    pub all_targets_pass: bool,
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
    exchange(seed, ccfg, scfg, &mut |f| f()).map(|(_, sizes)| sizes)
}

/// A store for the benchmark's chains: no lineage ends or runs out within a run (a real
/// server's bounds would turn every 256th session into a full one).
fn bench_store() -> Resumption {
    Resumption::new(StoreLimits {
        max_age_secs: u32::MAX,
        per_lineage: u32::MAX,
        capacity: 1 << 22,
    })
}

/// A chain of resumed sessions: each resumes with the ticket of the one before it and asks
/// for one more.
struct Chain {
    ccfg: ClientConfig,
    scfg: ServerConfig,
    ticket: Ticket,
}

impl Chain {
    fn new(seed: &mut u64, ccfg: &ClientConfig, key: &ServerKey) -> Result<Chain> {
        let scfg = ServerConfig::default()
            .with_key(key.clone())
            .with_resumption(bench_store());
        let asking = ClientConfig {
            want_tickets: 1,
            ..ccfg.clone()
        };
        let (mut c, _) = exchange(seed, &asking, &scfg, &mut |f| f())?;
        let ticket = c
            .take_tickets()
            .pop()
            .ok_or_else(|| anyhow::anyhow!("no ticket granted"))?;
        Ok(Chain {
            ccfg: asking,
            scfg,
            ticket,
        })
    }

    /// One resumed session; its sizes; the server's time (`timed` wraps the server's part).
    fn once(
        &mut self,
        seed: &mut u64,
        timed: &mut dyn FnMut(&mut dyn FnMut()),
    ) -> Result<(usize, usize, usize)> {
        let cfg = ClientConfig {
            resume: Some(self.ticket.clone()),
            ..self.ccfg.clone()
        };
        let (mut c, sizes) = exchange(seed, &cfg, &self.scfg, timed)?;
        if !c.resuming() {
            bail!("the session was not resumed");
        }
        self.ticket = c
            .take_tickets()
            .pop()
            .ok_or_else(|| anyhow::anyhow!("a resumed session granted no ticket"))?;
        Ok(sizes)
    }
}

/// One exchange with `ccfg` against `scfg`: the client (for its tickets) and the sizes of the
/// hello, the answer and the confirm. `timed` runs the server's part (new and read).
fn exchange(
    seed: &mut u64,
    ccfg: &ClientConfig,
    scfg: &ServerConfig,
    timed: &mut dyn FnMut(&mut dyn FnMut()),
) -> Result<(ClientHandshake, (usize, usize, usize))> {
    let mut ce = [0u8; ENTROPY_LEN];
    let mut se = [0u8; SERVER_ENTROPY_LEN];
    fill(seed, &mut ce);
    fill(seed, &mut se);
    let mut client = ClientHandshake::new(ccfg, ce)?;
    let hello = client.first_flight();
    let mut read = None;
    timed(&mut || {
        let mut server = ServerHandshake::new(scfg, se);
        read = Some(server.read(hello));
    });
    let hello_len = hello.len();
    let Some(Ok(Progress::Done {
        value: (accept, s_sess),
        ..
    })) = read
    else {
        bail!("the server did not answer the whole hello");
    };
    let Progress::Done {
        value: (confirm, c_sess),
        ..
    } = client.read(&accept)?
    else {
        bail!("the client wanted more than the whole accept");
    };
    std::hint::black_box((s_sess, c_sess));
    Ok((client, (hello_len, accept.len(), confirm.len())))
}

/// The server's time of a full handshake and of a resumed one, interleaved in `rounds`
/// rounds of `per_round` each.
fn server_cost(
    seed: &mut u64,
    ccfg: &ClientConfig,
    key: &ServerKey,
    rounds: usize,
    per_round: usize,
    progress: &mut dyn FnMut(),
) -> Result<ServerCost> {
    let full_cfg = ServerConfig::default().with_key(key.clone());
    let mut chain = Chain::new(seed, ccfg, key)?;
    let (mut full, mut resumed) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for _ in 0..rounds {
        let mut spent = std::time::Duration::ZERO;
        let mut time = |f: &mut dyn FnMut()| {
            let t = Instant::now();
            f();
            spent += t.elapsed();
        };
        for _ in 0..per_round {
            exchange(seed, ccfg, &full_cfg, &mut time)?;
        }
        full.push(spent.as_nanos() as f64 / per_round as f64);
        let mut spent = std::time::Duration::ZERO;
        let mut time = |f: &mut dyn FnMut()| {
            let t = Instant::now();
            f();
            spent += t.elapsed();
        };
        for _ in 0..per_round {
            chain.once(seed, &mut time)?;
        }
        resumed.push(spent.as_nanos() as f64 / per_round as f64);
        progress();
    }
    let full_ns = crate::harness::median(&mut full);
    let resumed_ns = crate::harness::median(&mut resumed);
    Ok(ServerCost {
        full_ns,
        resumed_ns,
        ratio: resumed_ns / full_ns,
        rounds,
        per_round,
    })
}

impl Report {
    /// Adds the lab's flows and their target.
    pub fn with_flows(mut self, f: crate::flows::FlowsReport) -> Report {
        self.targets.push(Target {
            name: "resumed-proxy-server-cpu-per-flow",
            value: f.ratio,
            limit: f.target,
            pass: f.pass,
        });
        self.all_targets_pass = self.targets.iter().all(|t| t.pass);
        self.flows = Some(f);
        self
    }
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
    let key = ServerKey::from_seed(&[0x5e; 32])?;
    let mut chain = Chain::new(&mut seed, &ccfg, &key)?;
    let r = chain.once(&mut seed, &mut |f| f())?;
    let (mut s1, mut s2, mut s3) = (seed, seed.rotate_left(17), seed.rotate_left(31));
    // The server's share first (its rounds count as one step of the progress each).
    let rounds = cfg.samples;
    let total = (3 * (cfg.samples + 1) + rounds) as u64;
    let mut done = 0u64;
    let server = server_cost(&mut seed, &ccfg, &key, rounds, 8, &mut || {
        done += 1;
        progress(done, total);
    })?;
    let stats = {
        let mut jobs: Vec<crate::harness::Job<'_>> = vec![
            Box::new(|| before_once(&mut s1, suite, epoch).map(|_| ())),
            Box::new(|| after_once(&mut s2, &ccfg, &scfg).map(|_| ())),
            Box::new(|| chain.once(&mut s3, &mut |f| f()).map(|_| ())),
        ];
        measure_interleaved(cfg, &mut jobs, &mut |d, _| progress(done + d, total))?
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
    let resumed = variant(
        "version 2 resumed: a ticket, r_c and r_s, no key agreement",
        nena_proto::wire::VERSION,
        r,
        &stats[2],
    );
    let target = |name, value: f64, limit| Target {
        name,
        value,
        limit,
        pass: value <= limit,
    };
    let targets = vec![
        target("resumed-server-cpu-vs-full", server.ratio, 0.15),
        target(
            "resumed-first-flight-bytes",
            resumed.first_flight_bytes as f64,
            200.0,
        ),
    ];
    Ok(Report {
        flows: None,
        all_targets_pass: targets.iter().all(|t| t.pass),
        targets,
        resumed,
        server,
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
        // docs/PROTOCOL.md: the resume hello is 97 bytes, its answer 81.
        assert_eq!(r.resumed.first_flight_bytes, 97);
        assert_eq!(r.resumed.answer_bytes, 81);
        assert_eq!(r.resumed.confirm_bytes, 41);
        assert!(r.server.full_ns > 0.0 && r.server.resumed_ns > 0.0);
        assert!((r.server.ratio - r.server.resumed_ns / r.server.full_ns).abs() < 1e-12);
        let names: Vec<_> = r.targets.iter().map(|t| t.name).collect();
        assert_eq!(
            names,
            ["resumed-server-cpu-vs-full", "resumed-first-flight-bytes"]
        );
        assert!(r.targets[1].pass, "97 <= 200");
    }
}
