//! `nena bench outage`: issue 40's LTE dropout on the shipped scenario (the trusted link down
//! from 3 s to 6 s of a 12 s upload): nena with either path manager within 10% of raw
//! MPTCP's goodput, the trusted link back in every repetition; method in
//! `nena_bench::outage`, figures in docs/BENCHMARKS.md.
use crate::exit::{CmdResult, Exit};
use anyhow::anyhow;
use nena_bench::outage::{self as bench, OutageOptions, OutageReport};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where the runs' samples, plots and summary go.
    #[arg(long, default_value = "out/bench-outage")]
    pub out: PathBuf,
    /// Prefix of the labs the runs build (one at a time).
    #[arg(long, default_value = "nbout")]
    pub prefix: String,
    /// Report, but exit 0 even when a target is missed.
    #[arg(long)]
    pub no_check: bool,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: Args) -> CmdResult {
    if nena_lab::Lab::is_up(&a.prefix) {
        return Err(Exit::usage(anyhow!(
            "a lab with prefix `{}` is up; take it down (`nena lab down --prefix {}`) or use --prefix",
            a.prefix,
            a.prefix
        )));
    }
    let opts = OutageOptions::new(
        std::env::current_exe().map_err(anyhow::Error::from)?,
        a.out.clone(),
        a.prefix.clone(),
    );
    let json = a.json;
    let r: OutageReport = nena_lab::with_teardown_on_interrupt(
        &a.prefix,
        nena_scenario::run::unload_after_interrupt,
        move || bench::run(&opts, super::output::progress("outage", json)),
    )?;
    if json {
        super::output::print_json(&r)?;
    } else {
        println!(
            "Trusted link down from 3 s to 6 s of a 12 s upload (scenarios/trusted-outage.toml, \
             20+20 Mbit/s, 10 ms), three repetitions per run"
        );
        let each = |g: &[f64]| {
            g.iter()
                .map(|g| format!("{g:.2}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let backs = |b: &[Option<f64>]| {
            b.iter()
                .map(|x| x.map_or("never".to_string(), |s| format!("{s:.2}s")))
                .collect::<Vec<_>>()
                .join(" ")
        };
        println!(
            "{:<15} {:>9} {:>7}  {:<22} each",
            "run", "goodput", "ratio", "trusted back after"
        );
        println!(
            "{:<15} {:>6.2}Mb {:>7}  {:<22} {}",
            r.control.name,
            r.control.goodput_mbit_s,
            "1.00x",
            backs(&r.control.back_after_s),
            each(&r.control.each_mbit_s)
        );
        for j in &r.judged {
            println!(
                "{:<15} {:>6.2}Mb {:>6.3}x  {:<22} {}  {}",
                j.run.name,
                j.run.goodput_mbit_s,
                j.ratio,
                backs(&j.run.back_after_s),
                each(&j.run.each_mbit_s),
                if j.within_target && j.back_every_time {
                    "PASS"
                } else if !j.back_every_time {
                    "FAIL (the trusted link did not come back)"
                } else {
                    "FAIL (goodput)"
                }
            );
        }
        println!(
            "target: each nena run at least {:.2}x raw MPTCP's goodput, the trusted link back in \
             every repetition: {}",
            r.target,
            if r.ok { "PASS" } else { "FAIL" }
        );
    }
    if !r.ok && !a.no_check {
        return Err(anyhow!("an outage target was missed").into());
    }
    Ok(())
}
