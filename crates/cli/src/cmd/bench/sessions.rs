//! `nena bench sessions`: many concurrent SOCKS5 sessions through one proxy pair in a lab,
//! the memory each idle session costs each proxy and the time to open one more under that
//! load, targets checked (method in `nena_bench::sessions`, figures in docs/BENCHMARKS.md).
use crate::exit::{CmdResult, Exit};
use anyhow::anyhow;
use nena_bench::sessions::{self as bench, SessionsOptions};
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Sessions held open at once (each takes two open files in the client proxy and two
    /// in this process: the limit is checked before anything starts).
    #[arg(long, default_value_t = 10_000)]
    pub sessions: usize,
    /// Bytes each session sends and gets back before it goes idle.
    #[arg(long, default_value_t = 1024)]
    pub payload: usize,
    /// Sessions opened one at a time on the idle pair, and again under load.
    #[arg(long, default_value_t = 21)]
    pub probes: usize,
    /// Sessions being opened at once while the load builds up.
    #[arg(long, default_value_t = 256)]
    pub opening: usize,
    /// The proxies' mode.
    #[arg(long, default_value = "aead", value_parser = ["aead", "stream", "kato", "plain"])]
    pub mode: String,
    /// Seconds allowed for opening the whole load, and again for closing it.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
    /// When the host's open-file limit cannot take --sessions, run as many as it can (the
    /// report says so) instead of refusing.
    #[arg(long)]
    pub at_most_the_limit: bool,
    /// Report, but exit 0 even when a target is missed.
    #[arg(long)]
    pub no_check: bool,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: Args) -> CmdResult {
    if a.sessions == 0
        || a.probes == 0
        || a.opening == 0
        || !(1..=1 << 20).contains(&a.payload)
        || !(1..=3600).contains(&a.timeout)
    {
        return Err(Exit::usage(anyhow!(
            "--sessions, --probes and --opening at least 1, --payload 1..1048576, --timeout 1..3600"
        )));
    }
    let opts = SessionsOptions {
        nena: std::env::current_exe().map_err(anyhow::Error::from)?,
        sessions: a.sessions,
        payload: a.payload,
        probes: a.probes,
        opening: a.opening,
        mode: a.mode,
        timeout: Duration::from_secs(a.timeout),
        at_most_the_limit: a.at_most_the_limit,
    };
    let json = a.json;
    let r = bench::run(&opts, super::output::progress("sessions", json))?;
    super::output::report(
        &r,
        json,
        bench::table,
        r.pass,
        a.no_check,
        "a sessions target was missed",
    )
}
