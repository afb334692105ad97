//! `nena bench page`: a page of 30 objects on two host names loaded as a browser loads it,
//! from a LAN host through `nena gateway` and from the client over plain MPTCP, in the same
//! lab with delayed links; the gateway's median page time against plain MPTCP's (method in
//! `nena_bench::page`, figures in docs/BENCHMARKS.md).
use crate::exit::{CmdResult, Exit};
use anyhow::anyhow;
use nena_bench::page::{self as bench, PageOptions, DEFAULT_DELAY_MS};
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Page loads of each variant (gateway, plain MPTCP: they alternate within each).
    #[arg(long, default_value_t = 9)]
    pub reps: usize,
    /// One-way delay of each of the client's two links, each direction, in ms.
    #[arg(long, default_value_t = DEFAULT_DELAY_MS)]
    pub delay_ms: u64,
    /// dnsmasq, the server host's DNS server (Debian's dnsmasq-base).
    #[arg(long, default_value = "dnsmasq")]
    pub dnsmasq: PathBuf,
    /// Seconds to wait before each measured load (the gateway idle: its sessions opened
    /// ahead older than they may wait); 0: the loads follow each other.
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    pub pause: u64,
    /// One more argument for `nena gateway` (repeatable, in order: `--gateway-arg=--warm-idle
    /// --gateway-arg=0`).
    #[arg(long, value_name = "ARG", allow_hyphen_values = true)]
    pub gateway_arg: Vec<String>,
    /// Report, but exit 0 even when a target is missed.
    #[arg(long)]
    pub no_check: bool,
    /// Print one JSON object (every load) instead of the table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: Args) -> CmdResult {
    if a.reps == 0 {
        return Err(Exit::usage(anyhow!("--reps must be more than 0")));
    }
    super::output::check_dnsmasq(&a.dnsmasq)?;
    let opts = PageOptions {
        reps: a.reps,
        delay: Duration::from_millis(a.delay_ms),
        nena: std::env::current_exe().map_err(anyhow::Error::from)?,
        dnsmasq: a.dnsmasq,
        pause: Duration::from_secs(a.pause),
        gateway_args: a.gateway_arg,
    };
    let json = a.json;
    let r = bench::run(&opts, super::output::progress("page", json))?;
    super::output::report(
        &r,
        json,
        bench::table,
        r.summary.pass,
        a.no_check,
        "the page target was missed",
    )
}
