//! `nena bench peers`: nena's SOCKS5 proxy pair against shadowsocks-rust and a TLS 1.3
//! tunnel (stunnel) over the same lab paths, goodput and CPU per GB of both ends, targets
//! checked (method in `nena_bench::peers`, figures in docs/BENCHMARKS.md). The pinned peers
//! are installed by `make peers` (scripts/install-peers.sh).
use crate::exit::{CmdResult, Exit};
use anyhow::anyhow;
use nena_bench::peers::{self as bench, PeersOptions, Programs, Setting, Variant};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Repetitions of every transfer (the tunnels alternate within each).
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// Only the settings whose name contains this ("veth", "100+20").
    #[arg(long)]
    pub setting: Option<String>,
    /// Bytes of every transfer instead of each setting's own (suffixes K, M, G: powers of
    /// 1024).
    #[arg(long, value_parser = crate::cmd::parse::parse_bytes)]
    pub bytes: Option<u64>,
    /// Only nena and the tunnels whose name contains this ("shadowsocks", "stunnel").
    #[arg(long)]
    pub peer: Option<String>,
    /// shadowsocks-rust's client.
    #[arg(long, default_value = "sslocal")]
    pub sslocal: PathBuf,
    /// shadowsocks-rust's server.
    #[arg(long, default_value = "ssserver")]
    pub ssserver: PathBuf,
    /// stunnel (run under `nena run --mptcp-only`).
    #[arg(long, default_value = "stunnel")]
    pub stunnel: PathBuf,
    /// iperf3 (the gateway's UDP stream).
    #[arg(long, default_value = "iperf3")]
    pub iperf3: PathBuf,
    /// Seconds of each UDP stream through the gateway (one per repetition, in the
    /// link-bound setting).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=600))]
    pub udp_seconds: u32,
    /// The gateways' sessions opened ahead (`nena gateway --warm`), to compare with 0.
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub gateway_warm: usize,
    /// Report, but exit 0 even when a target is missed.
    #[arg(long)]
    pub no_check: bool,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: Args) -> CmdResult {
    if a.reps == 0 || a.bytes == Some(0) {
        return Err(Exit::usage(anyhow!(
            "--reps and --bytes must be more than 0"
        )));
    }
    let settings: Vec<Setting> = Setting::all()
        .into_iter()
        .filter(|s| a.setting.as_deref().is_none_or(|f| s.name.contains(f)))
        .map(|s| Setting {
            bytes: a.bytes.unwrap_or(s.bytes),
            ..s
        })
        .collect();
    if settings.is_empty() {
        let names: Vec<String> = Setting::all().into_iter().map(|s| s.name).collect();
        return Err(Exit::usage(anyhow!(
            "--setting {:?} matches none of: {}",
            a.setting.unwrap_or_default(),
            names.join("; ")
        )));
    }
    let variants: Vec<Variant> = Variant::ALL
        .into_iter()
        .filter(|v| v.is_nena() || a.peer.as_deref().is_none_or(|f| v.name().contains(f)))
        .collect();
    if variants.iter().all(|v| v.is_nena()) {
        let names: Vec<&str> = Variant::ALL
            .iter()
            .filter(|v| !v.is_nena())
            .map(|v| v.name())
            .collect();
        return Err(Exit::usage(anyhow!(
            "--peer {:?} matches none of: {}",
            a.peer.unwrap_or_default(),
            names.join("; ")
        )));
    }
    let programs = Programs {
        nena: std::env::current_exe().map_err(anyhow::Error::from)?,
        sslocal: a.sslocal,
        ssserver: a.ssserver,
        stunnel: a.stunnel,
        iperf3: a.iperf3,
    };
    programs.check(&variants).map_err(Exit::usage)?;
    let opts = PeersOptions {
        reps: a.reps,
        settings,
        variants,
        programs,
        udp_seconds: a.udp_seconds,
        gateway_warm: a.gateway_warm,
    };
    let json = a.json;
    let r = bench::run(&opts, super::output::progress("peers", json))?;
    super::output::report(
        &r,
        json,
        bench::table,
        r.pass,
        a.no_check,
        "a peers target was missed",
    )
}
