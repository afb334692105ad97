//! `nena bench emulation`: the link emulator's fidelity and cost (the idle relay's CPU, RTT
//! against the configured delay at UDP loads up to 200 Mbit/s, the relay's CPU per Mbit/s,
//! loss against the binomial 99% interval), targets checked (see nena_bench::emulation).
use crate::exit::{CmdResult, Exit};
use anyhow::anyhow;
use nena_bench::emulation::{self as bench, BenchOptions};
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// One-way delay configured on the link, each direction (ms).
    #[arg(long, default_value = "10")]
    pub delay_ms: u64,
    /// Ping-pongs per load.
    #[arg(long, default_value = "150")]
    pub samples: usize,
    /// Report, but exit 0 even when a target is missed.
    #[arg(long)]
    pub no_check: bool,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: Args) -> CmdResult {
    if a.samples < 10 || a.delay_ms == 0 || a.delay_ms > 1000 {
        return Err(Exit::usage(anyhow!(
            "--samples must be at least 10 and --delay-ms 1..1000"
        )));
    }
    let opts = BenchOptions {
        delay: Duration::from_millis(a.delay_ms),
        samples: a.samples,
        ..BenchOptions::default()
    };
    let json = a.json;
    let r = bench::run(&opts, super::output::progress("emulation", json))?;
    if json {
        super::output::print_json(&r)?;
    } else {
        println!(
            "Link emulator fidelity: trusted link {} ms each way (RTT {} ms configured), \
             TCP ping-pong RTT while UDP load crosses the relay",
            r.delay_ms,
            2.0 * r.delay_ms
        );
        let i = &r.idle;
        println!(
            "idle relay: {:.2}% of a CPU over {:.0} s (target <= 1%: {}); first RTT after idling \
             {:.2} ms",
            i.relay_cpu * 100.0,
            i.secs,
            if i.within_target { "ok" } else { "MISSED" },
            i.first_rtt_ms
        );
        println!(
            "{:>8} {:>10} {:>8} {:>8} {:>8} {:>9} {:>9} {:>14}  target",
            "load", "delivered", "median", "p90", "p99", "excess", "relay CPU", "CPU per Mbit/s"
        );
        for l in &r.loads {
            println!(
                "{:>6}Mb {:>8.1}Mb {:>6.2}ms {:>6.2}ms {:>6.2}ms {:>+7.2}ms {:>8.1}% {:>14}  {}",
                l.offered_mbit,
                l.delivered_mbit,
                l.rtt_median_ms,
                l.rtt_p90_ms,
                l.rtt_p99_ms,
                l.excess_median_ms,
                l.relay_cpu * 100.0,
                l.relay_cpu_per_mbit
                    .map(|c| format!("{:.3}%", c * 100.0))
                    .unwrap_or_else(|| "-".into()),
                if l.within_target {
                    "ok (median within 1 ms)"
                } else {
                    "MISSED (median off by more than 1 ms)"
                }
            );
        }
        let l = &r.loss;
        println!(
            "loss {:.1}% configured: {} of {} lost ({:.2}%), binomial 99% interval {:.0}..{:.0}: {}",
            l.configured * 100.0,
            l.lost,
            l.sent,
            l.measured * 100.0,
            l.interval.0,
            l.interval.1,
            if l.within_target { "ok" } else { "MISSED" }
        );
    }
    if !r.ok && !a.no_check {
        return Err(anyhow!("a fidelity target was missed").into());
    }
    Ok(())
}
