//! What a run of `nena bench sessions` works with, whichever the server: the options, the
//! plan of client processes, what a run measured, and how it is read (each process's
//! resident memory and descriptors, the host's TCP memory, a server's `--metrics`
//! counters). Below the two servers' runs ([`super::proxy`], [`super::serve`]) and the
//! report ([`super`]).

use anyhow::{anyhow, Context, Result};
use nena_lab::{Host, Lab};
use nena_transport::baseline::load::echo_server;
use serde::Serialize;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::time::Duration;

/// The echo target's port on the server host (`proxy`).
pub const ECHO_PORT: u16 = 7400;
/// The server's port on the server host (`nena serve` or `nena proxy server`).
pub const SERVER_PORT: u16 = 7401;
/// `nena proxy client`'s SOCKS5 port on the client host's loopback (`proxy`).
pub const SOCKS_PORT: u16 = 7402;
/// Each nena server's and proxy's `--metrics` endpoint, on its host's loopback: the bench
/// reads the retried openings and the integrity failures from it at the end.
pub const METRICS_PORT: u16 = 7403;
/// Descriptors a process needs beside those of its sessions (listeners, the runtime, stdio).
pub const SPARE_FDS: u64 = 256;
/// Bytes a probe session sends and gets back.
pub(super) const PROBE_PAYLOAD: usize = 64;
/// The server the sessions are held against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Against {
    /// `nena serve`, with `nena bench sessions-worker` processes as the clients.
    Serve,
    /// `nena proxy server` and one `nena proxy client --socks5`.
    Proxy,
}

impl Against {
    /// Descriptors one session takes in the server and in a client process. `nena serve`:
    /// its MPTCP socket; a worker: the MPTCP socket and the trusted-path gate's descriptor of
    /// it (kept for the session's subflow reports and recovery). The proxy server: the MPTCP
    /// socket and the target's; the client proxy: the application's connection, the MPTCP
    /// socket and the gate's.
    pub fn fds_per_session(self) -> (u64, u64) {
        match self {
            Against::Serve => (1, 2),
            Against::Proxy => (2, 3),
        }
    }
}

/// What the bench runs.
#[derive(Debug, Clone)]
pub struct SessionsOptions {
    /// The `nena` binary the servers, proxies and workers run as.
    pub nena: PathBuf,
    pub against: Against,
    /// Sessions held open at once.
    pub sessions: usize,
    /// Bytes each load session sends and gets back before it goes idle.
    pub payload: usize,
    /// Sessions opened one at a time, on the idle server and under load (each).
    pub probes: usize,
    /// Load sessions being opened at once (per client process).
    pub opening: usize,
    /// `serve`: at most this many sessions per worker process (`None`: as many as the
    /// descriptor limit lets one process hold).
    pub per_process: Option<usize>,
    /// The sessions' mode (`aead`, `stream`, ...).
    pub mode: String,
    /// Bound on opening the load and on closing it (each).
    pub timeout: Duration,
    /// Run as many sessions as the descriptor limit allows when `sessions` do not fit,
    /// instead of refusing (the report says so).
    pub at_most_the_limit: bool,
}

impl Default for SessionsOptions {
    fn default() -> Self {
        SessionsOptions {
            nena: PathBuf::from("nena"),
            against: Against::Serve,
            sessions: 10_000,
            payload: 1024,
            probes: 21,
            opening: 256,
            per_process: None,
            mode: "aead".into(),
            timeout: Duration::from_secs(300),
            at_most_the_limit: false,
        }
    }
}

/// How the load is spread: the sessions run and the client processes holding them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub sessions: usize,
    /// Client processes (`proxy`: 1).
    pub processes: usize,
    /// Sessions per client process (the last may hold fewer).
    pub per_process: usize,
}

/// What either variant measured.
pub(super) struct Measured {
    pub(super) idle_opens: Vec<Duration>,
    pub(super) loaded_opens: Vec<Duration>,
    /// [client side, server] before the load, loaded, after the load closed.
    pub(super) idle: [Footprint; 2],
    pub(super) loaded: [Footprint; 2],
    pub(super) after: [Footprint; 2],
    pub(super) tcp_kib_idle: u64,
    pub(super) tcp_kib_loaded: u64,
    pub(super) opened: usize,
    pub(super) verified: usize,
    pub(super) open_all: Duration,
    pub(super) errors: Vec<String>,
    pub(super) retried_openings: Option<u64>,
    pub(super) server_integrity_failures: Option<u64>,
}

/// A counter of the server's (`host`) `--metrics` endpoint, or `None` with a progress line
/// saying why it could not be read.
pub(super) fn read_counter(
    lab: &Lab,
    host: Host,
    name: &'static str,
    progress: &mut impl FnMut(&str),
) -> Option<u64> {
    lab.run_in(host, move || scrape_counter(METRICS_PORT, name))
        .and_then(|r| r)
        .map_err(|e| progress(&format!("reading {name} from {host:?}: {e:#}")))
        .ok()
}

/// The echo target in the server host at `echo`, for `lifetime` at most, once it listens.
pub(crate) fn start_echo(
    lab: &Lab,
    echo: SocketAddrV4,
    lifetime: Duration,
) -> Result<std::thread::JoinHandle<Result<Result<()>>>> {
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = lab.spawn_in(Host::Server, move || {
        echo_server(SocketAddr::V4(echo), lifetime, move || {
            let _ = tx.send(());
        })
    });
    rx.recv_timeout(Duration::from_secs(10))
        .map_err(|_| anyhow!("the echo target did not listen within 10 s"))?;
    Ok(handle)
}

/// The value of counter `name` (one series, or their sum) from a `--metrics` endpoint on
/// this host's loopback at `port`.
fn scrape_counter(port: u16, name: &str) -> Result<u64> {
    let text = scrape_metrics(port)?;
    counter_in(&text, name).ok_or_else(|| anyhow!("no {name} in the proxy's metrics"))
}

/// The OpenMetrics text of a `--metrics` endpoint on this host's loopback at `port`.
pub(crate) fn scrape_metrics(port: u16) -> Result<String> {
    use std::io::{Read, Write};
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    Ok(text)
}

/// The sum of counter `name`'s series in a Prometheus text exposition.
pub(super) fn counter_in(text: &str, name: &str) -> Option<u64> {
    metric_in(text, name).map(|v| v as u64)
}

/// The sum of metric `name`'s series (each `name{...} VALUE` or `name VALUE` line) in a
/// Prometheus text exposition.
pub(crate) fn metric_in(text: &str, name: &str) -> Option<f64> {
    let values: Vec<f64> = text
        .lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

/// A process's (or several processes' summed) resident memory and open descriptors.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Footprint {
    pub(super) rss_kib: u64,
    pub(super) fds: usize,
}

pub(super) fn footprint(pid: u32) -> Result<Footprint> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status (has the proxy exited?)"))?;
    let rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| anyhow!("no VmRSS in /proc/{pid}/status"))?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .with_context(|| format!("listing /proc/{pid}/fd"))?
        .count();
    Ok(Footprint { rss_kib, fds })
}

/// The footprints of `pids`, summed.
pub(super) fn footprints(pids: &[u32]) -> Result<Footprint> {
    pids.iter().try_fold(Footprint::default(), |sum, &pid| {
        let f = footprint(pid)?;
        Ok(Footprint {
            rss_kib: sum.rss_kib + f.rss_kib,
            fds: sum.fds + f.fds,
        })
    })
}

/// The host's TCP socket memory (`mem` of the TCP line of /proc/net/sockstat, in pages), KiB.
pub(super) fn tcp_mem_kib() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let page = (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(1) as u64 / 1024;
    std::fs::read_to_string("/proc/net/sockstat")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("TCP:"))?.to_string();
            let mut it = line.split_whitespace();
            while let Some(k) = it.next() {
                if k == "mem" {
                    return it.next()?.parse::<u64>().ok();
                }
            }
            None
        })
        .map_or(0, |pages| pages * page)
}

/// Awaits each of `tasks` until `deadline`: what the tasks gave, in order, and one line per
/// failure, `label(i)` before it (the task's error, or "`not_done` within `timeout`"); `each(i)`
/// after each task (a progress bar).
pub(super) async fn gather<T>(
    tasks: Vec<tokio::task::JoinHandle<Result<T>>>,
    deadline: tokio::time::Instant,
    timeout: Duration,
    label: impl Fn(usize) -> String,
    not_done: &str,
    mut each: impl FnMut(usize),
) -> (Vec<T>, Vec<String>) {
    let mut done = Vec::with_capacity(tasks.len());
    let mut errors = Vec::new();
    for (i, t) in tasks.into_iter().enumerate() {
        match tokio::time::timeout_at(deadline, t).await {
            Ok(Ok(Ok(x))) => done.push(x),
            Ok(Ok(Err(e))) => errors.push(format!("{}{e:#}", label(i))),
            Ok(Err(e)) => errors.push(format!("{}{e}", label(i))),
            Err(_) => errors.push(format!("{}{not_done} within {timeout:?}", label(i))),
        }
        each(i);
    }
    (done, errors)
}

/// Awaits the sessions' closings (each task's verdicts read and its end seen) until
/// `deadline`: how many were verified, and one "closing: ..." line per failure.
pub(super) async fn verify_closings(
    closing: Vec<tokio::task::JoinHandle<Result<()>>>,
    deadline: tokio::time::Instant,
    timeout: Duration,
) -> (usize, Vec<String>) {
    let (closed, errors) = gather(
        closing,
        deadline,
        timeout,
        |_| "closing: ".into(),
        "not closed",
        |_| {},
    )
    .await;
    (closed.len(), errors)
}
