//! `nena bench handshake --flows N` (root: a lab of its own): the proxy server's CPU per
//! 1,000 short flows as a proxy client makes them by default (sessions reused flow after
//! flow, resumed when new) against the same with every flow a session of its own and a full
//! handshake, in one run (issue 59 item 1); resumed sessions of one flow each beside them.
//!
//! The server host runs an echo target and one `nena proxy server` (tickets on, as by
//! default); the client host runs three `nena proxy client --socks5`: one as is (it reuses
//! and resumes), one with `--no-reuse` (a resumed session per flow) and one with
//! `--no-resume --no-reuse` (a full handshake per flow, as before both). Flows are made by
//! this process, in the client host, one after another: a SOCKS5 CONNECT to the echo target,
//! 64 bytes there and back, close; that is what a gateway's or a browser's short fetch costs
//! a proxy server. In each of `rounds` rounds each client carries `N / rounds` flows, in
//! rotating order, and the server's CPU time (its CPU-time clock, every thread) is read
//! before and after each share. The target: the server's CPU per 1,000 flows by default at
//! most [`TARGET_RATIO`] of the same with full handshakes, over the whole run.

use crate::host::{kernel, loadavg, process_cpu_seconds};
use crate::own_lab::in_own_lab;
use crate::sessions::{socks_connect, start_echo, ECHO_PORT};
use anyhow::{anyhow, bail, Result};
use nena_lab::{start_nena, Host, Lab, LabConfig};
use nena_transport::baseline::load::session_payload;
use serde::Serialize;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Target: the proxy server's CPU per flow with resumption against without.
pub const TARGET_RATIO: f64 = 0.3;
/// `nena proxy server`'s port.
const PROXY_PORT: u16 = 7411;
/// The SOCKS5 ports of the three clients on the client host's loopback: as by default,
/// `--no-reuse`, `--no-resume --no-reuse`.
const SOCKS_PORTS: [u16; 3] = [7412, 7413, 7414];
/// The three clients' options beyond the common ones.
const CLIENT_EXTRA: [&[&str]; 3] = [&[], &["--no-reuse"], &["--no-resume", "--no-reuse"]];
/// Bytes each flow sends and gets back.
const PAYLOAD: usize = 64;

/// What the bench runs.
#[derive(Debug, Clone)]
pub struct FlowsOptions {
    pub nena: PathBuf,
    /// Flows through each client.
    pub flows: usize,
    /// Rounds the flows are split into (each client's share alternating first).
    pub rounds: usize,
    /// Bound on each flow.
    pub timeout: Duration,
}

/// One client's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Variant {
    pub name: &'static str,
    pub flows: usize,
    /// The proxy server's CPU seconds over this client's flows.
    pub server_cpu_s: f64,
    /// ... per 1,000 flows.
    pub server_cpu_s_per_1000: f64,
    /// Median time of one flow, from the TCP connect to the echo back (ms).
    pub median_flow_ms: f64,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct FlowsReport {
    /// The proxy client as by default: sessions reused flow after flow (resumed when new).
    pub reused: Variant,
    /// `--no-reuse`: a resumed session per flow.
    pub resumed: Variant,
    /// `--no-resume --no-reuse`: a full handshake per flow.
    pub full: Variant,
    /// reused / full, of the server's CPU per flow (the target's).
    pub ratio: f64,
    /// resumed / full (context: what resumption alone gives).
    pub resumed_ratio: f64,
    pub target: f64,
    pub pass: bool,
    pub rounds: usize,
    pub kernel: String,
    pub loadavg_start: String,
    pub loadavg_end: String,
}

/// Brings up a lab, runs the flows in it, tears it down (also on Ctrl-C).
pub fn run(
    opts: &FlowsOptions,
    progress: impl FnMut(&str) + Send + 'static,
) -> Result<FlowsReport> {
    if opts.flows == 0 || opts.rounds == 0 || opts.rounds > opts.flows {
        bail!(
            "--flows must be at least 1 and at least the rounds ({})",
            opts.rounds
        );
    }
    let cfg = LabConfig {
        verify: true,
        ..LabConfig::with_prefix(format!("nf{}", std::process::id()))
    };
    let o = opts.clone();
    in_own_lab(&cfg, move |prefix| run_on(prefix, &o, progress))
}

fn run_on(
    prefix: &str,
    opts: &FlowsOptions,
    mut progress: impl FnMut(&str),
) -> Result<FlowsReport> {
    let lab = Lab::open(prefix)?;
    let loadavg_start = loadavg();
    let server_ip = match lab.server_addr() {
        std::net::IpAddr::V4(a) => a,
        std::net::IpAddr::V6(_) => bail!("the bench lab's server has no IPv4 address"),
    };
    let echo = SocketAddrV4::new(server_ip, ECHO_PORT);
    let lifetime = opts.timeout * (2 * opts.flows as u32) + Duration::from_secs(60);
    let _echo = start_echo(&lab, echo, lifetime)?;
    let proxy = format!("{server_ip}:{PROXY_PORT}");
    let allow = format!("{server_ip}/32:{ECHO_PORT}");
    let quiet = [("RUST_LOG", "warn")];
    let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let server = start_nena(
        &lab,
        Host::Server,
        &opts.nena,
        &args(&[
            "proxy",
            "server",
            "--listen",
            &proxy,
            "--allow",
            &allow,
            "--no-control",
        ]),
        &quiet,
    )?;
    let mut clients = Vec::new();
    for (port, extra) in SOCKS_PORTS.iter().zip(CLIENT_EXTRA) {
        let socks = SocketAddr::from((Ipv4Addr::LOCALHOST, *port)).to_string();
        let mut a = args(&[
            "proxy",
            "client",
            "--socks5",
            &socks,
            "--to",
            &proxy,
            "--trusted",
            "trusted",
            "--untrusted",
            "untrusted",
            "--no-control",
        ]);
        a.extend(extra.iter().map(|s| s.to_string()));
        clients.push(start_nena(&lab, Host::Client, &opts.nena, &a, &quiet)?);
    }
    let server_pid = server.pid();
    let cpu =
        move || process_cpu_seconds(server_pid).ok_or_else(|| anyhow!("the proxy server is gone"));
    progress(&format!(
        "{} short flows through each of three SOCKS5 clients (as by default, --no-reuse, \
         --no-resume --no-reuse), {} rounds",
        opts.flows, opts.rounds
    ));
    // One flow through each first: the resuming clients' full handshakes, which give them
    // tickets, are not counted (a client that ran before holds them).
    let timeout = opts.timeout;
    let socks = SOCKS_PORTS.map(|p| SocketAddr::from((Ipv4Addr::LOCALHOST, p)));
    let o = opts.clone();
    let measured = lab.run_in(
        Host::Client,
        move || -> Result<[(f64, Vec<Duration>); 3]> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async {
                for s in socks {
                    flows(s, echo, 0, 1, timeout).await?;
                }
                let mut out = [(0.0, Vec::new()), (0.0, Vec::new()), (0.0, Vec::new())];
                let mut done = 1;
                for round in 0..o.rounds {
                    let n = o.flows / o.rounds + usize::from(round < o.flows % o.rounds);
                    for k in 0..3 {
                        let i = (round + k) % 3;
                        let before = cpu()?;
                        let times = flows(socks[i], echo, done, n, timeout).await?;
                        out[i].0 += cpu()? - before;
                        out[i].1.extend(times);
                        done += n;
                    }
                }
                Ok(out)
            })
        },
    )??;
    drop(clients);
    drop(server);
    let variant = |name, (cpu_s, times): &(f64, Vec<Duration>)| {
        let mut ms: Vec<f64> = times.iter().map(|t| t.as_secs_f64() * 1e3).collect();
        Variant {
            name,
            flows: times.len(),
            server_cpu_s: *cpu_s,
            server_cpu_s_per_1000: cpu_s / times.len() as f64 * 1000.0,
            median_flow_ms: crate::harness::median(&mut ms),
        }
    };
    let reused = variant("as by default (reused sessions)", &measured[0]);
    let resumed = variant("a resumed session each (--no-reuse)", &measured[1]);
    let full = variant(
        "a full handshake each (--no-resume --no-reuse)",
        &measured[2],
    );
    let ratio = reused.server_cpu_s_per_1000 / full.server_cpu_s_per_1000;
    Ok(FlowsReport {
        pass: ratio <= TARGET_RATIO,
        ratio,
        resumed_ratio: resumed.server_cpu_s_per_1000 / full.server_cpu_s_per_1000,
        reused,
        target: TARGET_RATIO,
        rounds: opts.rounds,
        resumed,
        full,
        kernel: kernel(),
        loadavg_start,
        loadavg_end: loadavg(),
    })
}

/// `n` flows one after another through the SOCKS5 proxy at `socks` to `echo`: connect,
/// 64 bytes there and back (distinct per flow, from `first`), close, the echo's close read.
async fn flows(
    socks: SocketAddr,
    echo: SocketAddrV4,
    first: usize,
    n: usize,
    timeout: Duration,
) -> Result<Vec<Duration>> {
    let mut times = Vec::with_capacity(n);
    for i in first..first + n {
        let payload = session_payload(i, PAYLOAD);
        let once = async {
            let t = Instant::now();
            let mut s = socks_connect(socks, echo).await?;
            s.write_all(&payload).await?;
            let mut back = vec![0u8; PAYLOAD];
            s.read_exact(&mut back).await?;
            if back != payload {
                bail!("flow {i}: the echo differs from what was sent");
            }
            let took = t.elapsed();
            s.shutdown().await?;
            let mut rest = Vec::new();
            s.read_to_end(&mut rest).await?;
            Ok(took)
        };
        let took = tokio::time::timeout(timeout, once)
            .await
            .map_err(|_| anyhow!("flow {i} took longer than {timeout:?}"))??;
        times.push(took);
    }
    Ok(times)
}
