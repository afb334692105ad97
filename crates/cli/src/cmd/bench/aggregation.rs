//! `nena bench aggregation`: nena's transfers over two link-bound paths against the bare
//! kernel's MPTCP and against what the links allow, both ways, six link settings (method in
//! `nena_bench::aggregation`, figures in docs/BENCHMARKS.md).
use crate::exit::{CmdResult, Exit};
use anyhow::anyhow;
use nena_bench::aggregation::{self as bench, AggregationOptions, Setting};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Repetitions of every transfer (nena and the kernel alternate within each).
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Bytes each transfer moves (suffixes K, M, G: powers of 1024).
    #[arg(long, default_value = "16M", value_parser = crate::cmd::parse::parse_bytes)]
    pub bytes: u64,
    /// Only the settings whose name contains this (e.g. "15+5", "25/1").
    #[arg(long)]
    pub setting: Option<String>,
    /// Report, but exit 0 even when a target is missed.
    #[arg(long)]
    pub no_check: bool,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: Args) -> CmdResult {
    if a.reps == 0 || a.bytes == 0 {
        return Err(Exit::usage(anyhow!(
            "--reps and --bytes must be more than 0"
        )));
    }
    let settings: Vec<Setting> = Setting::all()
        .into_iter()
        .filter(|s| a.setting.as_deref().is_none_or(|f| s.name.contains(f)))
        .collect();
    if settings.is_empty() {
        let names: Vec<String> = Setting::all().into_iter().map(|s| s.name).collect();
        return Err(Exit::usage(anyhow!(
            "--setting {:?} matches none of: {}",
            a.setting.unwrap_or_default(),
            names.join("; ")
        )));
    }
    let opts = AggregationOptions {
        reps: a.reps,
        bytes: a.bytes,
        settings,
        nena: std::env::current_exe().map_err(anyhow::Error::from)?,
    };
    let json = a.json;
    let r = bench::run(&opts, super::output::progress("aggregation", json))?;
    super::output::report(
        &r,
        json,
        bench::table,
        r.pass,
        a.no_check,
        "an aggregation target was missed",
    )
}
