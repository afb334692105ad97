//! `nena bench hostile-lan`: another LAN host's fetch and lookup through `nena gateway`,
//! calm and while one LAN host sprays source ports and DNS names; the times under the
//! spray against the calm ones (method in `nena_bench::hostile`, figures in
//! docs/BENCHMARKS.md).
use crate::exit::{CmdResult, Exit};
use anyhow::anyhow;
use nena_bench::hostile::{self as bench, HostileOptions};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Fetches and lookups of each phase (calm, under the spray).
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// dnsmasq, the server host's DNS server (Debian's dnsmasq-base).
    #[arg(long, default_value = "dnsmasq")]
    pub dnsmasq: PathBuf,
    /// Report, but exit 0 even when a target is missed.
    #[arg(long)]
    pub no_check: bool,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: Args) -> CmdResult {
    if a.reps == 0 {
        return Err(Exit::usage(anyhow!("--reps must be more than 0")));
    }
    super::output::check_dnsmasq(&a.dnsmasq)?;
    let opts = HostileOptions {
        reps: a.reps,
        nena: std::env::current_exe().map_err(anyhow::Error::from)?,
        dnsmasq: a.dnsmasq,
    };
    let json = a.json;
    let r = bench::run(&opts, super::output::progress("hostile-lan", json))?;
    super::output::report(
        &r,
        json,
        bench::table,
        r.pass,
        a.no_check,
        "the other host's fetch or lookup took more than 2x its calm time under the spray",
    )
}
