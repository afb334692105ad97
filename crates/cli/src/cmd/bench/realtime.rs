//! `nena bench realtime`: a call-like datagram flow (50 a second of 160 bytes, echoed by the
//! server host) through `nena gateway` and `nena run` against the same flow straight over
//! each single link, in the same run, with WLAN loss and an outage of either link (method in
//! `nena_bench::realtime`, figures in docs/BENCHMARKS.md); and `nena bench realtime-flow`
//! (hidden), the flow as a process of its own, which the bench runs under `nena run`.
use crate::exit::{CmdResult, Exit};
use anyhow::anyhow;
use nena_bench::realtime::{self as bench, flow::FlowSpec, RealtimeOptions};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Seconds of each flow (issue 56's scenario: 20).
    #[arg(long, default_value_t = 20)]
    pub seconds: u32,
    /// Seconds each outage lasts, in the middle of the flow.
    #[arg(long, default_value_t = 3.0)]
    pub outage_seconds: f64,
    /// Run this setting only (repeatable): loss0, loss1, loss2, loss5, wlan-outage,
    /// trusted-outage.
    #[arg(long, value_name = "SETTING")]
    pub only: Vec<String>,
    /// Passed as `--udp-redundancy MODE` to `nena gateway` and `nena run` (refused when
    /// their --help does not list it: a nena before the datagram plane).
    #[arg(long, value_name = "MODE", value_parser = ["auto", "always", "never"])]
    pub udp_redundancy: Option<String>,
    /// One more argument for `nena gateway` (repeatable, in order: `--gateway-arg=--warm
    /// --gateway-arg=0`).
    #[arg(long, value_name = "ARG", allow_hyphen_values = true)]
    pub gateway_arg: Vec<String>,
    /// One more argument for `nena run` (repeatable, in order).
    #[arg(long, value_name = "ARG", allow_hyphen_values = true)]
    pub run_arg: Vec<String>,
    /// Seconds of the bulk variant (a 50 Mbit/s UDP stream straight and through the
    /// gateway); 0 leaves it out.
    #[arg(long, default_value_t = 5)]
    pub bulk_seconds: u32,
    /// iperf3, for the bulk variant.
    #[arg(long, default_value = "iperf3")]
    pub iperf3: PathBuf,
    /// Report, but exit 0 even when a target is missed.
    #[arg(long)]
    pub no_check: bool,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// `nena bench realtime-flow`: one flow, started by "go" on standard input.
#[derive(clap::Args, Debug)]
pub struct FlowArgs {
    #[arg(long)]
    pub flow: u32,
    #[arg(long)]
    pub to: SocketAddr,
    #[arg(long)]
    pub bind: Option<SocketAddr>,
    #[arg(long)]
    pub rate: u32,
    #[arg(long)]
    pub size: usize,
    #[arg(long)]
    pub count: u32,
    #[arg(long)]
    pub drain_ms: u64,
}

pub fn run(a: Args) -> CmdResult {
    if a.bulk_seconds > 0 && nena_bench::peers::find_program(&a.iperf3).is_none() {
        return Err(Exit::usage(anyhow!(
            "iperf3 ({}) is not an executable file here; `make deps` installs it \
             (scripts/install-deps.sh), or name yours with --iperf3, or leave the bulk \
             variant out with --bulk-seconds 0",
            a.iperf3.display()
        )));
    }
    let opts = RealtimeOptions {
        seconds: a.seconds,
        outage_seconds: a.outage_seconds,
        only: a.only,
        udp_redundancy: a.udp_redundancy,
        gateway_args: a.gateway_arg,
        run_args: a.run_arg,
        with_run: cfg!(feature = "policy"),
        bulk_seconds: a.bulk_seconds,
        iperf3: a.iperf3,
        nena: std::env::current_exe().map_err(anyhow::Error::from)?,
        nena_version: format!("nena {}", env!("NENA_VERSION")),
    };
    opts.check().map_err(Exit::usage)?;
    let json = a.json;
    let r = bench::run(&opts, super::output::progress("realtime", json))?;
    super::output::report(
        &r,
        json,
        bench::table,
        r.pass,
        a.no_check,
        "a real-time target was missed",
    )
}

pub fn run_flow(a: FlowArgs) -> CmdResult {
    let spec = FlowSpec {
        flow: a.flow,
        to: a.to,
        bind: a.bind,
        rate: a.rate,
        size: a.size,
        count: a.count,
        drain: Duration::from_millis(a.drain_ms),
    };
    bench::ends::flow_child(&spec)?;
    Ok(())
}
