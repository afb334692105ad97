//! `nena bench fairness`: issue 13's shared-bottleneck share on the shipped scenario (LIA
//! within 1.2x the TCP flow's goodput, uncoupled reno above 1.3x LIA's), pooled over three
//! repetitions per run; method in `nena_bench::fairness`, figures in docs/BENCHMARKS.md.
use crate::exit::{CmdResult, Exit};
use anyhow::anyhow;
use nena_bench::fairness::{self as bench, FairnessOptions, FairnessReport};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where the runs' captures, samples and summary go.
    #[arg(long, default_value = "out/bench-fairness")]
    pub out: PathBuf,
    /// Shorten the scenario's 30 s runs by this factor (0 < F <= 1).
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Prefix of the labs the runs build (one at a time).
    #[arg(long, default_value = "nbfair")]
    pub prefix: String,
    /// Report, but exit 0 even when a target is missed.
    #[arg(long)]
    pub no_check: bool,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: Args) -> CmdResult {
    if !(a.scale > 0.0 && a.scale <= 1.0) {
        return Err(Exit::usage(anyhow!("--scale must be in (0, 1]")));
    }
    if nena_lab::Lab::is_up(&a.prefix) {
        return Err(Exit::usage(anyhow!(
            "a lab with prefix `{}` is up; take it down (`nena lab down --prefix {}`) or use --prefix",
            a.prefix,
            a.prefix
        )));
    }
    let mut opts = FairnessOptions::new(
        std::env::current_exe().map_err(anyhow::Error::from)?,
        a.out.clone(),
        a.prefix.clone(),
    );
    opts.scale = a.scale;
    let json = a.json;
    let r: FairnessReport = nena_lab::with_teardown_on_interrupt(
        &a.prefix,
        nena_scenario::run::unload_after_interrupt,
        move || bench::run(&opts, super::output::progress("fairness", json)),
    )?;
    if json {
        super::output::print_json(&r)?;
    } else {
        println!(
            "Shared 20 Mbit/s bottleneck (scenarios/fairness-shared.toml, runs x{}): an MPTCP \
             connection of two subflows against one reno TCP flow, pooled over the repetitions",
            r.scale
        );
        println!(
            "{:>5} {:>10} {:>9} {:>9} {:>7}  each",
            "run", "cc", "MPTCP", "TCP", "share"
        );
        for p in [&r.lia, &r.reno] {
            println!(
                "{:>5} {:>10} {:>7.2}Mb {:>7.2}Mb {:>6.2}x  {}",
                p.name,
                p.cc.as_deref().unwrap_or("-"),
                p.mptcp_mbit_s,
                p.tcp_mbit_s,
                p.share,
                p.each
                    .iter()
                    .map(|s| format!("{s:.2}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        }
        println!(
            "LIA {:.2}x, goal at most {:.2}x: {}",
            r.lia.share,
            r.goal,
            if r.lia_within_goal { "ok" } else { "MISSED" }
        );
        println!(
            "reno {:.2}x = {:.2} x LIA's, target above {:.2}: {}",
            r.reno.share,
            r.reno.share / r.lia.share,
            r.margin,
            if r.reno_above_margin { "ok" } else { "MISSED" }
        );
    }
    if !r.ok && !a.no_check {
        return Err(anyhow!("a fairness target was missed").into());
    }
    Ok(())
}
