//! `nena bench sessions`: many concurrent SOCKS5 sessions through one proxy pair, what each
//! idle session costs and whether the load slows the next one down (issue 21 item 6).
//!
//! In a lab of its own the bench starts an echo target (plain TCP) in the server host,
//! `nena proxy server --allow` for it beside, and `nena proxy client --socks5` in the client
//! host. Every application connection is made by this process, on a thread inside the client
//! host: a SOCKS5 greeting and CONNECT to the echo target, then a payload distinct per
//! session, read back whole.
//!
//! 1. **Idle:** `probes` sessions opened one after another on the idle pair; the time of
//!    each from the TCP connect to its 64-byte echo coming back.
//! 2. **Load:** `sessions` sessions opened (at most `opening` at a time), each carrying its
//!    payload there and back and then staying open, idle. Then the resident memory of each
//!    proxy process (`VmRSS`) and its open descriptors, against the same read after the idle
//!    probes: the growth divided by the sessions is the memory per idle session of each side.
//! 3. **Under load:** `probes` more sessions opened one after another while all of the load
//!    stays open: the median time against the idle median is the cost of the load to a new
//!    session.
//! 4. Every load session half-closes and must see the echo side close with nothing more.
//! 5. Each proxy's counters from its `--metrics` endpoint ([`METRICS_PORT`]): the openings
//!    the client retried and the server's integrity failures (context, in the report).
//!
//! Targets (ratios in one run): at most [`TARGET_KIB_PER_SESSION`] of resident memory per idle
//! session on each side, a new session under load within [`TARGET_OPEN_RATIO`] times its idle
//! time, every session byte-exact. Each session takes a descriptor in the client proxy for the
//! application, one for its MPTCP connection and one the trusted-path gate keeps of it
//! ([`CLIENT_PROXY_FDS_PER_SESSION`]); this process holds the application's end and the
//! echo's: the bench refuses a count the host's descriptor limit cannot take, before anything
//! starts, naming the most it can.

use crate::harness::median;
use crate::host::{kernel, loadavg};
use crate::own_lab::in_own_lab;
use crate::progress::Progress;
use anyhow::{anyhow, bail, Context, Result};
use nena_lab::{start_nena, Host, Lab, LabConfig};
use nena_transport::baseline::load::{echo_server, session_payload};
use serde::Serialize;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The echo target's port on the server host.
pub const ECHO_PORT: u16 = 7400;
/// `nena proxy server`'s port on the server host.
pub const PROXY_PORT: u16 = 7401;
/// `nena proxy client`'s SOCKS5 port on the client host's loopback.
pub const SOCKS_PORT: u16 = 7402;
/// Each proxy's `--metrics` endpoint, on its host's loopback: the bench reads the retried
/// openings and the integrity failures from it at the end.
pub const METRICS_PORT: u16 = 7403;
/// Descriptors a process needs beside those of its sessions (listeners, the runtime, stdio).
pub const SPARE_FDS: u64 = 256;
/// Descriptors per session in the client proxy: the application's connection, the MPTCP
/// socket, and the trusted-path gate's own descriptor of it (kept for the session's subflow
/// reports and recovery). This process holds two: the application's end and the echo's.
pub const CLIENT_PROXY_FDS_PER_SESSION: u64 = 3;
/// Target: resident memory per idle session, each side (KiB).
pub const TARGET_KIB_PER_SESSION: f64 = 64.0;
/// Target: a new session's open time under load against an idle pair's.
pub const TARGET_OPEN_RATIO: f64 = 2.0;
/// Bytes a probe session sends and gets back.
const PROBE_PAYLOAD: usize = 64;

/// What the bench runs.
#[derive(Debug, Clone)]
pub struct SessionsOptions {
    /// The `nena` binary the proxies run as.
    pub nena: PathBuf,
    /// Sessions held open at once.
    pub sessions: usize,
    /// Bytes each load session sends and gets back before it goes idle.
    pub payload: usize,
    /// Sessions opened one at a time, on the idle pair and under load (each).
    pub probes: usize,
    /// Load sessions being opened at once.
    pub opening: usize,
    /// The proxies' mode (`aead`, `stream`, ...).
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
            sessions: 10_000,
            payload: 1024,
            probes: 21,
            opening: 256,
            mode: "aead".into(),
            timeout: Duration::from_secs(300),
            at_most_the_limit: false,
        }
    }
}

/// One proxy's resident memory and descriptors.
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    /// After the idle probes (warm: runtime and allocator have served sessions).
    pub rss_idle_kib: u64,
    /// With every load session open and idle.
    pub rss_loaded_kib: u64,
    /// After the load closed.
    pub rss_after_kib: u64,
    /// (loaded - idle) / sessions open.
    pub kib_per_session: f64,
    /// Before any session.
    pub fds_idle: usize,
    pub fds_loaded: usize,
    /// (fds loaded - fds idle) / sessions open.
    pub fds_per_session: f64,
}

/// What the bench measured, and its verdicts.
#[derive(Debug, Clone, Serialize)]
pub struct SessionsReport {
    /// Sessions asked for.
    pub asked: usize,
    /// Sessions run: `asked`, or fewer with `at_most_the_limit` on a host whose descriptor
    /// limit cannot take them.
    pub sessions: usize,
    pub payload: usize,
    pub mode: String,
    /// Load sessions that opened and carried their payload there and back.
    pub opened: usize,
    /// Load sessions that also closed cleanly (nothing more after the echo).
    pub verified: usize,
    /// The first errors (at most 10).
    pub errors: Vec<String>,
    /// Sessions the client proxy opened again because the server found the opening altered
    /// (`nena_retried_openings_total`; docs/investigations/kernel-41-bytes); `None`: not readable.
    pub retried_openings: Option<u64>,
    /// Sessions the server proxy ended on an integrity failure
    /// (`nena_integrity_failures_total`); `None`: not readable.
    pub server_integrity_failures: Option<u64>,
    /// Time to open the whole load.
    pub open_all_seconds: f64,
    pub client_proxy: Side,
    pub server_proxy: Side,
    /// Context: the host's TCP socket memory (`/proc/net/sockstat`, every socket of the
    /// host: both proxies, the echo, the applications) grown per load session (KiB).
    pub kernel_tcp_kib_per_session: f64,
    /// Median open time of a probe session on the idle pair (ms).
    pub idle_open_ms: f64,
    /// Median open time of a probe session with the load open (ms).
    pub loaded_open_ms: f64,
    /// loaded_open_ms / idle_open_ms.
    pub open_ratio: f64,
    /// This process's descriptor limit (soft, raised to the hard one).
    pub nofile_limit: u64,
    pub target_kib_per_session: f64,
    pub target_open_ratio: f64,
    pub memory_ok: bool,
    pub open_ok: bool,
    pub exact_ok: bool,
    pub pass: bool,
    pub kernel: String,
    pub loadavg_start: String,
    pub loadavg_end: String,
}

/// The most sessions the client proxy can hold under descriptor limit `limit`
/// ([`CLIENT_PROXY_FDS_PER_SESSION`] each and [`SPARE_FDS`]); this process needs fewer.
pub fn max_sessions_for(limit: u64) -> usize {
    (limit.saturating_sub(SPARE_FDS) / CLIENT_PROXY_FDS_PER_SESSION) as usize
}

/// Raise this process's soft descriptor limit to the hard one (as the proxies do) and check
/// that `sessions` fit; the limit, or an error naming the most that fit and how to get more.
pub fn check_descriptors(sessions: usize) -> Result<u64> {
    nena_transport::conn::raise_nofile_limit();
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        bail!(
            "reading the open-file limit: {}",
            std::io::Error::last_os_error()
        );
    }
    let limit = lim.rlim_cur;
    let need = CLIENT_PROXY_FDS_PER_SESSION * sessions as u64 + SPARE_FDS;
    if need > limit {
        bail!(
            "{sessions} sessions need {need} open files in the client proxy ({} per session \
             and {SPARE_FDS} to spare), and the limit here is {limit} (hard limit {}; raising \
             it needs CAP_SYS_RESOURCE, or LimitNOFILE= in a systemd unit): at most \
             --sessions {} on this host",
            CLIENT_PROXY_FDS_PER_SESSION,
            lim.rlim_max,
            max_sessions_for(limit)
        );
    }
    Ok(limit)
}

/// Bring up a lab, run the bench in it, tear it down (also on Ctrl-C).
pub fn run(
    opts: &SessionsOptions,
    progress: impl FnMut(&str) + Send + 'static,
) -> Result<SessionsReport> {
    if opts.sessions == 0 || opts.probes == 0 || opts.opening == 0 || opts.payload == 0 {
        bail!("sessions, probes, opening and payload must each be at least 1");
    }
    let (limit, sessions) = match check_descriptors(opts.sessions) {
        Ok(limit) => (limit, opts.sessions),
        Err(e) if opts.at_most_the_limit => {
            let limit = check_descriptors(0)?;
            let most = max_sessions_for(limit);
            if most == 0 {
                return Err(e);
            }
            log::warn!("{e:#}; running {most}");
            (limit, most)
        }
        Err(e) => return Err(e),
    };
    let prefix = format!("ns{}", std::process::id());
    let cfg = LabConfig {
        verify: true,
        ..LabConfig::with_prefix(&prefix)
    };
    let worker_opts = SessionsOptions {
        sessions,
        ..opts.clone()
    };
    let asked = opts.sessions;
    in_own_lab(&cfg, move |prefix| {
        run_on(prefix, &worker_opts, limit, progress)
    })
    .map(|r| SessionsReport { asked, ..r })
}

fn run_on(
    prefix: &str,
    opts: &SessionsOptions,
    limit: u64,
    mut progress: impl FnMut(&str),
) -> Result<SessionsReport> {
    let lab = Lab::open(prefix)?;
    let loadavg_start = loadavg();
    let server_ip = match lab.server_addr() {
        std::net::IpAddr::V4(a) => a,
        std::net::IpAddr::V6(_) => bail!("the bench lab's server has no IPv4 address"),
    };
    let echo = SocketAddrV4::new(server_ip, ECHO_PORT);
    let _echo = start_echo(&lab, echo, opts.timeout * 3 + Duration::from_secs(120))?;

    let most = (opts.sessions + opts.probes + 64).to_string();
    let proxy = format!("{server_ip}:{PROXY_PORT}");
    let allow = format!("{server_ip}/32:{ECHO_PORT}");
    let socks = SocketAddr::from((Ipv4Addr::LOCALHOST, SOCKS_PORT));
    let quiet = [("RUST_LOG", "warn")];
    let metrics = SocketAddr::from((Ipv4Addr::LOCALHOST, METRICS_PORT)).to_string();
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
            "--mode",
            &opts.mode,
            "--max-sessions",
            &most,
            "--metrics",
            &metrics,
        ]),
        &quiet,
    )?;
    let client = start_nena(
        &lab,
        Host::Client,
        &opts.nena,
        &args(&[
            "proxy",
            "client",
            "--socks5",
            &socks.to_string(),
            "--to",
            &proxy,
            "--trusted",
            "trusted",
            "--untrusted",
            "untrusted",
            "--mode",
            &opts.mode,
            "--max-sessions",
            &most,
            "--metrics",
            &metrics,
        ]),
        &quiet,
    )?;
    let pids = (client.pid(), server.pid());

    progress(&format!(
        "{} sessions through a SOCKS5 proxy pair in {}",
        opts.sessions, opts.mode
    ));
    let run_opts = opts.clone();
    let m = lab.run_in(Host::Client, move || -> Result<Measured> {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?
            .block_on(measure(&run_opts, socks, echo, pids))
    })??;

    // What the proxies counted, read before anything about the load is judged.
    let mut counter = |host: Host, name: &'static str| {
        lab.run_in(host, move || scrape_counter(METRICS_PORT, name))
            .and_then(|r| r)
            .map_err(|e| progress(&format!("reading {name} from the proxy: {e:#}")))
            .ok()
    };
    let retried_openings = counter(Host::Client, "nena_retried_openings_total");
    let server_integrity_failures = counter(Host::Server, "nena_integrity_failures_total");
    let per =
        |before: u64, after: u64| after.saturating_sub(before) as f64 / m.opened.max(1) as f64;
    let side = |i: usize| Side {
        rss_idle_kib: m.idle[i].rss_kib,
        rss_loaded_kib: m.loaded[i].rss_kib,
        rss_after_kib: m.after[i].rss_kib,
        kib_per_session: per(m.idle[i].rss_kib, m.loaded[i].rss_kib),
        fds_idle: m.idle[i].fds,
        fds_loaded: m.loaded[i].fds,
        fds_per_session: per(m.idle[i].fds as u64, m.loaded[i].fds as u64),
    };
    let (client_proxy, server_proxy) = (side(0), side(1));
    let idle_open_ms = median_ms(&m.idle_opens);
    let loaded_open_ms = median_ms(&m.loaded_opens);
    let open_ratio = loaded_open_ms / idle_open_ms.max(1e-9);
    let memory_ok = client_proxy.kib_per_session <= TARGET_KIB_PER_SESSION
        && server_proxy.kib_per_session <= TARGET_KIB_PER_SESSION;
    let open_ok = open_ratio <= TARGET_OPEN_RATIO;
    let exact_ok = m.verified == opts.sessions;
    Ok(SessionsReport {
        asked: opts.sessions,
        sessions: opts.sessions,
        payload: opts.payload,
        mode: opts.mode.clone(),
        opened: m.opened,
        verified: m.verified,
        errors: m.errors,
        retried_openings,
        server_integrity_failures,
        open_all_seconds: m.open_all.as_secs_f64(),
        client_proxy,
        server_proxy,
        kernel_tcp_kib_per_session: per(m.tcp_kib_idle, m.tcp_kib_loaded),
        idle_open_ms,
        loaded_open_ms,
        open_ratio,
        nofile_limit: limit,
        target_kib_per_session: TARGET_KIB_PER_SESSION,
        target_open_ratio: TARGET_OPEN_RATIO,
        memory_ok,
        open_ok,
        exact_ok,
        pass: memory_ok && open_ok && exact_ok,
        kernel: kernel(),
        loadavg_start,
        loadavg_end: loadavg(),
    })
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
fn counter_in(text: &str, name: &str) -> Option<u64> {
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

/// A process's resident memory and open descriptors.
#[derive(Debug, Clone, Copy, Default)]
struct Footprint {
    rss_kib: u64,
    fds: usize,
}

fn footprint(pid: u32) -> Result<Footprint> {
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

/// The host's TCP socket memory (`mem` of the TCP line of /proc/net/sockstat, in pages), KiB.
fn tcp_mem_kib() -> u64 {
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

struct Measured {
    idle_opens: Vec<Duration>,
    loaded_opens: Vec<Duration>,
    /// [client proxy, server proxy] after the idle probes, loaded, after the load closed.
    idle: [Footprint; 2],
    loaded: [Footprint; 2],
    after: [Footprint; 2],
    tcp_kib_idle: u64,
    tcp_kib_loaded: u64,
    opened: usize,
    verified: usize,
    open_all: Duration,
    errors: Vec<String>,
}

async fn measure(
    opts: &SessionsOptions,
    socks: SocketAddr,
    echo: SocketAddrV4,
    (client_pid, server_pid): (u32, u32),
) -> Result<Measured> {
    let both =
        || -> Result<[Footprint; 2]> { Ok([footprint(client_pid)?, footprint(server_pid)?]) };
    // Descriptors before any session (the probes' own may still be closing after them).
    let fresh = both()?;
    let idle_opens = probe(socks, echo, opts.probes, opts.timeout)
        .await
        .context("a probe session on the idle proxy pair")?;
    let mut idle = both()?;
    for (f, before) in idle.iter_mut().zip(fresh) {
        f.fds = before.fds;
    }
    let tcp_kib_idle = tcp_mem_kib();

    // The load: every session opened, carried there and back, then held.
    let bar = Progress::stderr_if_tty("opening sessions");
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + opts.timeout;
    let gate = Arc::new(tokio::sync::Semaphore::new(opts.opening));
    let tasks: Vec<_> = (0..opts.sessions)
        .map(|i| {
            let gate = gate.clone();
            let payload = session_payload(i, opts.payload);
            tokio::spawn(async move {
                let _turn = gate.acquire_owned().await?;
                let mut s = socks_connect(socks, echo).await?;
                round_trip(&mut s, &payload).await?;
                Ok::<_, anyhow::Error>(s)
            })
        })
        .collect();
    let mut held = Vec::with_capacity(opts.sessions);
    let mut errors = Vec::new();
    for (i, t) in tasks.into_iter().enumerate() {
        match tokio::time::timeout_at(deadline, t).await {
            Ok(Ok(Ok(s))) => held.push(s),
            Ok(Ok(Err(e))) => errors.push(format!("session {i}: {e:#}")),
            Ok(Err(e)) => errors.push(format!("session {i}: {e}")),
            Err(_) => errors.push(format!("session {i}: not open within {:?}", opts.timeout)),
        }
        bar.update(i as u64 + 1, opts.sessions as u64);
    }
    bar.finish();
    let open_all = started.elapsed();
    let opened = held.len();
    let loaded = both()?;
    let tcp_kib_loaded = tcp_mem_kib();

    let loaded_opens = probe(socks, echo, opts.probes, opts.timeout)
        .await
        .context("a probe session with the load open")?;

    // Close the load: each half-closes and must see the echo end with nothing more.
    let deadline = tokio::time::Instant::now() + opts.timeout;
    let closing: Vec<_> = held
        .into_iter()
        .map(|mut s| {
            tokio::spawn(async move {
                s.shutdown().await?;
                let mut rest = Vec::new();
                s.read_to_end(&mut rest).await?;
                if !rest.is_empty() {
                    bail!("{} bytes after the echo", rest.len());
                }
                Ok(())
            })
        })
        .collect();
    let mut verified = 0;
    for t in closing {
        match tokio::time::timeout_at(deadline, t).await {
            Ok(Ok(Ok(()))) => verified += 1,
            Ok(Ok(Err(e))) => errors.push(format!("closing: {e:#}")),
            Ok(Err(e)) => errors.push(format!("closing: {e}")),
            Err(_) => errors.push(format!("closing: not closed within {:?}", opts.timeout)),
        }
    }
    errors.truncate(10);
    let after = both()?;
    Ok(Measured {
        idle_opens,
        loaded_opens,
        idle,
        loaded,
        after,
        tcp_kib_idle,
        tcp_kib_loaded,
        opened,
        verified,
        open_all,
        errors,
    })
}

/// `n` sessions opened one after another: the time of each from the TCP connect to its
/// echo's last byte (the close that follows is not timed).
async fn probe(
    socks: SocketAddr,
    echo: SocketAddrV4,
    n: usize,
    timeout: Duration,
) -> Result<Vec<Duration>> {
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        let payload = session_payload(usize::MAX - i, PROBE_PAYLOAD);
        let once = async {
            let t = Instant::now();
            let mut s = socks_connect(socks, echo).await?;
            round_trip(&mut s, &payload).await?;
            let took = t.elapsed();
            s.shutdown().await?;
            let mut rest = Vec::new();
            s.read_to_end(&mut rest).await?;
            Ok::<_, anyhow::Error>(took)
        };
        let took = tokio::time::timeout(timeout, once)
            .await
            .map_err(|_| anyhow!("probe {i} took longer than {timeout:?}"))??;
        times.push(took);
    }
    Ok(times)
}

/// An application's SOCKS5 connection through the client proxy to `dst` (no
/// authentication, CONNECT to an IPv4 address), ready for data.
pub async fn socks_connect(proxy: SocketAddr, dst: SocketAddrV4) -> Result<TcpStream> {
    let s = TcpStream::connect(proxy)
        .await
        .with_context(|| format!("connecting to the SOCKS5 proxy {proxy}"))?;
    socks_connect_on(s, dst).await
}

/// [`socks_connect`] on a connection `s` to the proxy made by the caller.
pub async fn socks_connect_on(mut s: TcpStream, dst: SocketAddrV4) -> Result<TcpStream> {
    s.set_nodelay(true)?;
    s.write_all(&[5, 1, 0]).await?;
    let mut method = [0u8; 2];
    s.read_exact(&mut method)
        .await
        .context("reading the SOCKS5 method")?;
    if method != [5, 0] {
        bail!("the SOCKS5 greeting was answered with {method:?}");
    }
    let mut req = vec![5, 1, 0, 1];
    req.extend(dst.ip().octets());
    req.extend(dst.port().to_be_bytes());
    s.write_all(&req).await?;
    let mut head = [0u8; 4];
    s.read_exact(&mut head)
        .await
        .context("reading the SOCKS5 reply")?;
    if head[1] != 0 {
        bail!("the SOCKS5 CONNECT was refused with code {}", head[1]);
    }
    let bound = match head[3] {
        1 => 4 + 2,
        4 => 16 + 2,
        3 => s.read_u8().await? as usize + 2,
        t => bail!("a SOCKS5 reply with address type {t}"),
    };
    let mut rest = vec![0u8; bound];
    s.read_exact(&mut rest).await?;
    Ok(s)
}

/// Send `payload` and read it back whole (both at once), comparing.
async fn round_trip(s: &mut TcpStream, payload: &[u8]) -> Result<()> {
    let (mut r, mut w) = s.split();
    let mut back = vec![0u8; payload.len()];
    tokio::try_join!(w.write_all(payload), r.read_exact(&mut back))
        .context("carrying the payload there and back")?;
    if back != payload {
        bail!("the echo differs from what was sent");
    }
    Ok(())
}

fn median_ms(v: &[Duration]) -> f64 {
    let mut ms: Vec<f64> = v.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    median(&mut ms)
}

/// The human table.
pub fn table(r: &SessionsReport) -> String {
    let mut s = format!(
        "{} SOCKS5 sessions through one proxy pair ({}, {} B there and back each), open at once; \
         kernel {}, load {} -> {}\n",
        r.sessions, r.mode, r.payload, r.kernel, r.loadavg_start, r.loadavg_end
    );
    if r.sessions < r.asked {
        s += &format!(
            "{} sessions were asked for; this host's descriptor limit ({}) takes at most {} \
             (the client proxy needs {} per session)\n",
            r.asked, r.nofile_limit, r.sessions, CLIENT_PROXY_FDS_PER_SESSION
        );
    }
    s += &format!(
        "opened {} in {:.1} s, closed cleanly {}; descriptor limit {}\n",
        r.opened, r.open_all_seconds, r.verified, r.nofile_limit
    );
    s += &format!(
        "{:<14} {:>10} {:>12} {:>10} {:>12} {:>9} {:>10} {:>12}\n",
        "",
        "RSS idle",
        "RSS loaded",
        "RSS after",
        "KiB/session",
        "fds idle",
        "fds loaded",
        "fds/session"
    );
    for (name, side) in [
        ("client proxy", &r.client_proxy),
        ("server proxy", &r.server_proxy),
    ] {
        s += &format!(
            "{:<14} {:>7} KiB {:>9} KiB {:>7} KiB {:>12.1} {:>9} {:>10} {:>12.2}\n",
            name,
            side.rss_idle_kib,
            side.rss_loaded_kib,
            side.rss_after_kib,
            side.kib_per_session,
            side.fds_idle,
            side.fds_loaded,
            side.fds_per_session
        );
    }
    s += &format!(
        "kernel TCP memory (whole host) per session: {:.1} KiB (context)\n",
        r.kernel_tcp_kib_per_session
    );
    s += &format!(
        "a new session (median of the probes): idle {:.2} ms, under load {:.2} ms: {:.2}x\n",
        r.idle_open_ms, r.loaded_open_ms, r.open_ratio
    );
    let known = |v: Option<u64>| v.map_or("unknown".to_string(), |n| n.to_string());
    s += &format!(
        "openings retried by the client proxy: {} (the server found them altered: \
         docs/investigations/kernel-41-bytes); integrity failures at the server proxy: {}\n",
        known(r.retried_openings),
        known(r.server_integrity_failures)
    );
    let mark = |ok: bool| if ok { "ok" } else { "MISSED" };
    s += &format!(
        "verdicts: memory per idle session <= {:.0} KiB each side: {}; new session under load \
         <= {:.1}x idle: {}; every session byte-exact and closed cleanly: {}\n",
        r.target_kib_per_session,
        mark(r.memory_ok),
        r.target_open_ratio,
        mark(r.open_ok),
        mark(r.exact_ok)
    );
    for e in &r.errors {
        s += &format!("  error: {e}\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_budget_leaves_room_for_the_client_proxys_descriptors() {
        assert_eq!(max_sessions_for(20_000), 6_581);
        assert_eq!(max_sessions_for(100), 0);
        let most = max_sessions_for(1_048_576) as u64;
        assert!(CLIENT_PROXY_FDS_PER_SESSION * most + SPARE_FDS <= 1_048_576);
        assert!(CLIENT_PROXY_FDS_PER_SESSION * (most + 1) + SPARE_FDS > 1_048_576);
    }

    #[test]
    fn counters_are_read_from_the_exposition() {
        let text = "# HELP nena_retried_openings_total Sessions opened again.\n\
                    # TYPE nena_retried_openings_total counter\n\
                    nena_retried_openings_total{role=\"proxy_client\"} 3\n\
                    nena_retried_openings_total_created{role=\"proxy_client\"} 1.7e9\n\
                    nena_integrity_failures_total{role=\"a\"} 1\n\
                    nena_integrity_failures_total{role=\"b\"} 2\n";
        assert_eq!(counter_in(text, "nena_retried_openings_total"), Some(3));
        assert_eq!(counter_in(text, "nena_integrity_failures_total"), Some(3));
        assert_eq!(counter_in(text, "nena_sessions_total"), None);
    }

    #[test]
    fn medians() {
        let d = |ms: u64| Duration::from_millis(ms);
        assert_eq!(median_ms(&[d(3), d(1), d(2)]), 2.0);
        assert_eq!(median_ms(&[d(4), d(1), d(2), d(3)]), 2.5);
        assert!(median_ms(&[]).is_nan());
    }
}
