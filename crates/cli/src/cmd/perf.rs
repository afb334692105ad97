//! `nena perf --to SERVER`: its arguments, its interval lines and its report; the test is
//! nena-transport's `app::file_client::perf`.
use super::client::{check_client, metered_guard, print_json, ClientCommon};
use super::parse::{parse_bytes, parse_secs, parse_server};
use super::report;
use crate::exit::{CmdResult, Exit};
use anyhow::anyhow;
use nena_transport::app::file_client::{self, PerfParams};
use nena_transport::resolve::ServerAddr;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct PerfArgs {
    /// The nena server (`nena serve`; a name is resolved only through a trusted interface).
    #[arg(long, value_name = "HOST:PORT", value_parser = parse_server)]
    pub to: ServerAddr,
    /// Run for this many seconds (default 10).
    #[arg(long, value_parser = parse_secs, conflicts_with = "bytes")]
    pub time: Option<Duration>,
    /// Send this many bytes per direction instead (e.g. 100M).
    #[arg(long, value_parser = parse_bytes)]
    pub bytes: Option<u64>,
    /// The server sends, the client receives.
    #[arg(long, conflicts_with = "bidir")]
    pub reverse: bool,
    /// Both directions at once on the one connection.
    #[arg(long)]
    pub bidir: bool,
    /// Seconds between interval reports (0: none).
    #[arg(long, default_value = "1")]
    pub interval: f64,
    /// Leave the first seconds (slow start) out of the goodput, as iperf3 -O does.
    #[arg(long, value_parser = parse_secs)]
    pub omit: Option<Duration>,
    /// Benchmark baseline: plain MPTCP without nena (the server must run `serve --raw`).
    #[arg(long)]
    pub raw: bool,
    #[command(flatten)]
    pub common: ClientCommon,
}

pub fn perf(a: PerfArgs) -> CmdResult {
    check_client(&a.common)?;
    if a.bytes == Some(0) {
        return Err(Exit::usage(anyhow!("--bytes must be more than 0")));
    }
    if !(a.interval >= 0.0 && a.interval < 1e6) {
        return Err(Exit::usage(anyhow!("--interval must be >= 0 seconds")));
    }
    let params = PerfParams {
        up: !a.reverse,
        down: a.reverse || a.bidir,
        bytes: a.bytes,
        time: a.time.unwrap_or(Duration::from_secs(10)),
        interval: (a.interval > 0.0).then(|| Duration::from_secs_f64(a.interval)),
        omit: a.omit,
    };
    if let (Some(o), None) = (a.omit, a.bytes) {
        if o >= params.time {
            return Err(Exit::usage(anyhow!("--omit must be shorter than --time")));
        }
    }
    let mut opts = a.common.options(&a.to, a.raw)?;
    let _metered = metered_guard(&a.common)?;
    let _mpc = a.common.attach_mpc(&mut opts)?;
    let json = a.common.json;
    let report = crate::runtime::block_on_interruptible(file_client::perf(&opts, params, |iv| {
        if !json {
            println!("{}", report::interval_line(iv));
        }
    }))?;
    if json {
        print_json(&report)
    } else {
        println!("{}", report::perf_line(&report));
        Ok(())
    }
}
