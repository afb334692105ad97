//! `nena bench handshake`: today's aead handshake (X25519 + ML-KEM-768, the server's
//! Ed25519 signature) against version 1's (X25519 alone, no server key), timed in one run
//! on one CPU with no network, and their first flights' sizes; a session resumed with a
//! ticket beside them, and the server's time of a resumed session against a full one, with
//! issue 59's targets (see nena_bench::handshake for exactly what is timed).
use crate::exit::{CmdResult, Exit};
use anyhow::anyhow;
use nena_bench::harness::HarnessConfig;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Timed samples of each handshake (the median is reported).
    #[arg(long, default_value = "201")]
    pub samples: usize,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also run N short SOCKS5 flows through each of three proxy clients (one as by
    /// default, reusing sessions; one with --no-reuse; one with --no-resume --no-reuse)
    /// against one proxy server in a lab of its own (root), and compare the server's CPU per
    /// 1,000 flows, the default's against full handshakes' (target <= 0.3).
    #[arg(long, value_name = "N", default_value = "0")]
    pub flows: usize,
    /// Rounds the flows are split into, the three clients taking turns to go first.
    #[arg(long, default_value = "10")]
    pub rounds: usize,
    /// Report the targets but exit 0 even if one fails.
    #[arg(long)]
    pub no_check: bool,
}

pub fn run(a: Args) -> CmdResult {
    if !(5..=10_000).contains(&a.samples) {
        return Err(Exit::usage(anyhow!("--samples must be 5..=10000")));
    }
    let cfg = HarnessConfig {
        samples: a.samples,
        // A handshake takes some 0.1 to 1 ms: samples of a few handshakes, short enough for
        // the median to escape preemption on a shared machine.
        sample_time: std::time::Duration::from_millis(2),
        warmup: std::time::Duration::from_millis(200),
        max_job_time: std::time::Duration::from_secs(30),
    };
    let mut say = super::output::progress("handshake", a.json);
    let mut last = 0;
    let r = nena_bench::handshake::run(&cfg, &mut |done, total| {
        let pct = done * 100 / total.max(1);
        if pct >= last + 25 {
            last = pct;
            say(&format!("{pct}%"));
        }
    })?;
    let r = match a.flows {
        0 => r,
        n => {
            let opts = nena_bench::flows::FlowsOptions {
                nena: std::env::current_exe().map_err(anyhow::Error::from)?,
                flows: n,
                rounds: a.rounds,
                timeout: std::time::Duration::from_secs(10),
            };
            let say = super::output::progress("handshake", a.json);
            r.with_flows(nena_bench::flows::run(&opts, say)?)
        }
    };
    if a.json {
        super::output::print_json(&r)?;
        return check(&r, a.no_check);
    }
    println!(
        "aead handshake, one whole exchange (both sides, one CPU, no network), suite {:?}; \
         median of {} samples",
        r.suite, r.after.handshake.samples
    );
    println!(
        "{:<58} {:>12} {:>10} {:>12}",
        "", "first flight", "answer", "handshake"
    );
    for v in [&r.before, &r.after, &r.resumed] {
        println!(
            "{:<58} {:>10} B {:>8} B {:>9.1} us",
            v.name,
            v.first_flight_bytes,
            v.answer_bytes,
            v.handshake.median_ns / 1000.0
        );
    }
    println!(
        "after / before: time x{:.2}, first flight x{:.2}",
        r.time_ratio, r.first_flight_ratio
    );
    println!(
        "server alone, median of {} rounds of {} each: full {:.1} us, resumed {:.1} us (x{:.3})",
        r.server.rounds,
        r.server.per_round,
        r.server.full_ns / 1000.0,
        r.server.resumed_ns / 1000.0,
        r.server.ratio
    );
    if let Some(f) = &r.flows {
        println!(
            "proxy server's CPU per 1,000 short SOCKS5 flows ({} each, {} rounds):",
            f.reused.flows, f.rounds
        );
        for v in [&f.reused, &f.resumed, &f.full] {
            println!(
                "  {:<48} {:>8.3} CPU s per 1,000 flows, median flow {:.2} ms",
                v.name, v.server_cpu_s_per_1000, v.median_flow_ms
            );
        }
        println!(
            "  a resumed session each / a full handshake each: x{:.3}",
            f.resumed_ratio
        );
    }
    for t in &r.targets {
        println!(
            "target {:<30} {:>10.3} <= {:<8} {}",
            t.name,
            t.value,
            t.limit,
            if t.pass { "PASS" } else { "FAIL" }
        );
    }
    check(&r, a.no_check)
}

/// Exit status 1 when a target is missed, unless `--no-check`.
fn check(r: &nena_bench::handshake::Report, no_check: bool) -> CmdResult {
    let missed = r.targets.iter().filter(|t| !t.pass).map(|t| t.name);
    super::output::check_targets(missed, no_check)
}
