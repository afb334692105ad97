//! `nena bench metered`: a metered trusted link (issue 56, item 4): its share of a 100 MiB
//! transfer with the WLAN up, the goodput against the WLAN's alone, and the longest gap
//! when the WLAN goes mid-transfer, both ways, with either path manager (method in
//! `nena_bench::metered`, figures in docs/BENCHMARKS.md).
use crate::exit::{CmdResult, Exit};
use anyhow::anyhow;
use nena_bench::metered::{self as bench, MeteredOptions};
use nena_lab::PmMode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Bytes each transfer moves (suffixes K, M, G: powers of 1024; at least 1M).
    #[arg(long, default_value = "100M", value_parser = crate::cmd::parse::parse_bytes)]
    pub bytes: u64,
    /// The path managers to run: userspace, kernel, or both (the default).
    #[arg(long, default_value = "both", value_parser = ["userspace", "kernel", "both"])]
    pub pm: String,
    /// Report, but exit 0 even when a target is missed.
    #[arg(long)]
    pub no_check: bool,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: Args) -> CmdResult {
    if a.bytes < (1 << 20) {
        return Err(Exit::usage(anyhow!("--bytes must be at least 1M")));
    }
    let mut opts = MeteredOptions::new(std::env::current_exe().map_err(anyhow::Error::from)?);
    opts.bytes = a.bytes;
    opts.pms = match a.pm.as_str() {
        "userspace" => vec![PmMode::Userspace],
        "kernel" => vec![PmMode::Kernel],
        _ => vec![PmMode::Userspace, PmMode::Kernel],
    };
    let json = a.json;
    let r = bench::run(&opts, super::output::progress("metered", json))?;
    super::output::report(
        &r,
        json,
        bench::table,
        r.pass,
        a.no_check,
        "a metered-path target was missed",
    )
}
