//! `nena bench sessions`: many concurrent sessions held open against one server in a lab
//! (`nena serve` with worker processes as the clients, or a SOCKS5 proxy pair), the memory
//! each idle session costs each side and the time to open one more under that load, targets
//! checked (method in `nena_bench::sessions`, figures in docs/BENCHMARKS.md); and the hidden
//! `sessions-worker`, one of the client processes.
use crate::exit::{CmdResult, Exit};
use anyhow::anyhow;
use nena_bench::sessions::worker::{self, WorkerSpec};
use nena_bench::sessions::{self as bench, Against, SessionsOptions};
use std::net::SocketAddr;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The server: `serve` (one `nena serve`, the clients spread over as many worker
    /// processes as the open-file limit needs) or `proxy` (a SOCKS5 proxy pair, one client
    /// proxy holding every session).
    #[arg(long, default_value = "serve", value_parser = ["serve", "proxy"])]
    pub against: String,
    /// Sessions held open at once (the open-file limit of each process is checked before
    /// anything starts).
    #[arg(long, default_value_t = 10_000)]
    pub sessions: usize,
    /// `serve`: at most N sessions per worker process (default: as many as its open-file
    /// limit takes).
    #[arg(long, value_name = "N")]
    pub per_process: Option<usize>,
    /// Bytes each session sends and gets back before it goes idle.
    #[arg(long, default_value_t = 1024)]
    pub payload: usize,
    /// Sessions opened one at a time on the idle pair, and again under load.
    #[arg(long, default_value_t = 21)]
    pub probes: usize,
    /// Sessions being opened at once while the load builds up.
    #[arg(long, default_value_t = 256)]
    pub opening: usize,
    /// The sessions' mode.
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
        || a.per_process == Some(0)
        || !(1..=1 << 20).contains(&a.payload)
        || !(1..=3600).contains(&a.timeout)
    {
        return Err(Exit::usage(anyhow!(
            "--sessions, --probes, --opening and --per-process at least 1, --payload 1..1048576, \
             --timeout 1..3600"
        )));
    }
    let opts = SessionsOptions {
        nena: std::env::current_exe().map_err(anyhow::Error::from)?,
        against: if a.against == "proxy" {
            Against::Proxy
        } else {
            Against::Serve
        },
        sessions: a.sessions,
        per_process: a.per_process,
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

/// `nena bench sessions-worker` (started by `nena bench sessions`): what it is told.
#[derive(clap::Args, Debug)]
pub struct WorkerArgs {
    #[arg(long)]
    pub to: SocketAddr,
    #[arg(long)]
    pub mode: nena_proto::Mode,
    #[arg(long)]
    pub sessions: usize,
    #[arg(long)]
    pub payload: usize,
    #[arg(long)]
    pub opening: usize,
    #[arg(long)]
    pub timeout: u64,
}

pub fn run_worker(a: WorkerArgs) -> CmdResult {
    let spec = WorkerSpec {
        to: a.to,
        mode: a.mode,
        sessions: a.sessions,
        payload: a.payload,
        opening: a.opening.max(1),
        timeout: Duration::from_secs(a.timeout),
    };
    worker::worker(&spec)?;
    Ok(())
}
