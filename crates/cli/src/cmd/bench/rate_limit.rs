//! `nena bench rate-limit`: whether the eBPF `rate_limit` actor holds its rate on a delayed
//! path (within 10%, up to 4 attempts, each configured with the RTT the one before measured
//! under load); method in `nena_bench::rate_limit`, figures in docs/BENCHMARKS.md.
use crate::exit::{CmdResult, Exit};
use anyhow::anyhow;
use nena_bench::rate_limit::{self as bench, RateLimitOptions};
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The rate configured on rate_limit (bit/s).
    #[arg(long, default_value_t = 8_000_000)]
    pub rate_bps: u64,
    /// One-way delay of the path, each direction (ms).
    #[arg(long, default_value_t = 25)]
    pub delay_ms: u64,
    /// Attempts before the target counts as missed.
    #[arg(long, default_value_t = 4)]
    pub attempts: usize,
    /// Seconds of each measurement (after 1.5 s of warm-up).
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Report, but exit 0 even when the target is missed.
    #[arg(long)]
    pub no_check: bool,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: Args) -> CmdResult {
    if a.attempts == 0
        || a.rate_bps < 100_000
        || a.delay_ms == 0
        || a.delay_ms > 1000
        || !(0.5..=60.0).contains(&a.seconds)
    {
        return Err(Exit::usage(anyhow!(
            "--attempts at least 1, --rate-bps at least 100000, --delay-ms 1..1000, --seconds 0.5..60"
        )));
    }
    let opts = RateLimitOptions {
        target_bps: a.rate_bps,
        delay: Duration::from_millis(a.delay_ms),
        attempts: a.attempts,
        measure: Duration::from_secs_f64(a.seconds),
        ..RateLimitOptions::default()
    };
    let json = a.json;
    let r = bench::run(&opts, super::output::progress("rate-limit", json))?;
    if json {
        super::output::print_json(&r)?;
    } else {
        println!(
            "rate_limit at {:.2} Mbit/s on a path of {} ms each way (idle RTT {:.2} ms); \
             without the limit: {:.1} Mbit/s",
            r.target_bps as f64 / 1e6,
            r.delay_ms,
            r.idle_rtt_ms,
            r.unlimited_bps / 1e6
        );
        println!(
            "{:>7} {:>14} {:>12} {:>12} {:>9} {:>8}  target",
            "attempt", "configured RTT", "window", "loaded RTT", "measured", "error"
        );
        for (i, t) in r.attempts.iter().enumerate() {
            println!(
                "{:>7} {:>12.2}ms {:>10} B {:>10.2}ms {:>7.2}Mb {:>+7.1}%  {}",
                i + 1,
                t.configured_rtt_ms,
                t.window,
                t.loaded_rtt_ms,
                t.measured_bps / 1e6,
                t.error * 100.0,
                if t.within_target {
                    format!("ok (within {:.0}%)", r.tolerance * 100.0)
                } else {
                    format!("off by more than {:.0}%", r.tolerance * 100.0)
                }
            );
        }
        println!(
            "verdict: {}",
            if r.ok {
                "ok".to_string()
            } else {
                format!(
                    "MISSED (no attempt of {} within {:.0}% of the rate)",
                    r.attempts.len(),
                    r.tolerance * 100.0
                )
            }
        );
    }
    if !r.ok && !a.no_check {
        return Err(anyhow!("the rate_limit target was missed").into());
    }
    Ok(())
}
