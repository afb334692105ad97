//! `nena bench rate-limit`: whether the eBPF `rate_limit` actor holds the rate it is given
//! (feature `policy`). In a lab of its own, with 25 ms of delay each way on the trusted link
//! (the lab's user-space relay), a TCP download from the server to the client crosses the
//! server's `eth0`, where `rate_limit` (configured with `rate_bps` and `rtt_us`) caps the
//! window of the ACKs the server receives at rate x RTT. The target: the goodput within 10%
//! of the rate.
//!
//! A window is exact only for the RTT it was given, and the relay's timers fire late on a
//! busy host, so the RTT under load is longer than idle. So: up to `attempts` attempts. The
//! first is configured with the idle RTT (the median of one-byte ping-pongs); each measures
//! the RTT during its transfer (ping-pongs beside the capped flow, which builds no queue),
//! and the next is configured with that. The first attempt within the tolerance passes.
//! The download without a limit is measured first, for scale.
//!
//! `make test` keeps the deterministic part (crates/bpf/tests/netns.rs,
//! `rate_limit_caps_the_window_at_rate_times_rtt`): the window in the chain is rate x RTT,
//! and the capped flow stays far below the unlimited one.

use anyhow::{bail, Context, Result};
use nena_bpf::{chains::spec, Policy};
use nena_lab::{unique_prefix, Emulation, Host, Lab, LabConfig, LabGuard, Link, LinkEmulation};
use serde::Serialize;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How to run the benchmark.
#[derive(Debug, Clone)]
pub struct RateLimitOptions {
    /// The relay's executable (see [`LabConfig::relay_exe`]).
    pub relay_exe: Option<PathBuf>,
    /// The rate configured on `rate_limit`, bit/s.
    pub target_bps: u64,
    /// One-way delay of the trusted link (each direction).
    pub delay: Duration,
    /// Attempts, each configured with the RTT the one before measured under load.
    pub attempts: usize,
    /// Transfer before the measurement (slow start and the first windows).
    pub warmup: Duration,
    /// The measurement.
    pub measure: Duration,
    /// The target: |measured - target| <= tolerance x target.
    pub tolerance: f64,
}

impl Default for RateLimitOptions {
    fn default() -> Self {
        RateLimitOptions {
            relay_exe: None,
            target_bps: 8_000_000,
            delay: Duration::from_millis(25),
            attempts: 4,
            warmup: Duration::from_millis(1500),
            measure: Duration::from_secs(3),
            tolerance: 0.10,
        }
    }
}

/// One attempt.
#[derive(Debug, Clone, Serialize)]
pub struct Attempt {
    /// The RTT the window was computed for (`rtt_us`), ms.
    pub configured_rtt_ms: f64,
    /// The window in the chain, bytes (rate x RTT / 8).
    pub window: u64,
    /// The median RTT of ping-pongs beside the capped flow, ms.
    pub loaded_rtt_ms: f64,
    /// Goodput of the capped flow, bit/s.
    pub measured_bps: f64,
    /// (measured - target) / target.
    pub error: f64,
    pub within_target: bool,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct RateLimitReport {
    pub target_bps: u64,
    pub tolerance: f64,
    /// One-way delay of the path, ms.
    pub delay_ms: f64,
    /// Median idle RTT (ping-pongs), ms.
    pub idle_rtt_ms: f64,
    /// Goodput of the same download without the limit, bit/s.
    pub unlimited_bps: f64,
    pub attempts: Vec<Attempt>,
    /// An attempt was within the tolerance.
    pub ok: bool,
}

/// The pins of this run, removed on drop (the namespaces go with the lab).
struct Pins(PathBuf);

impl Drop for Pins {
    fn drop(&mut self) {
        let _ = nena_bpf::chains::loader::remove_pins(&self.0);
    }
}

/// The median RTT of `n` one-byte ping-pongs over the trusted link (plain TCP, an echo
/// server on the server host).
fn ping_rtt(lab: &Lab, n: usize) -> Result<Duration> {
    let l = lab.listen_on_server(0)?;
    let dst = l.local_addr()?;
    let echo = std::thread::spawn(move || {
        if let Ok((mut e, _)) = l.accept() {
            let _ = e.set_nodelay(true);
            let mut b = [0u8; 1];
            while e.read_exact(&mut b).is_ok() && e.write_all(&b).is_ok() {}
        }
    });
    let mut s = lab.connect(Link::Trusted, dst, Duration::from_secs(5))?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let mut b = [7u8; 1];
        s.write_all(&b)?;
        s.read_exact(&mut b)?;
        v.push(t.elapsed());
    }
    drop(s);
    let _ = echo.join();
    v.sort();
    Ok(v[v.len() / 2])
}

/// Accept one connection and send until the peer goes away.
fn source(l: TcpListener) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        if let Ok((mut s, _)) = l.accept() {
            let _ = s.set_write_timeout(Some(Duration::from_secs(2)));
            let buf = vec![0x5au8; 64 * 1024];
            while s.write_all(&buf).is_ok() {}
        }
    })
}

/// Read from `s` for `d`; bytes read.
fn read_for(s: &mut TcpStream, d: Duration) -> Result<u64> {
    s.set_read_timeout(Some(Duration::from_millis(100)))?;
    let start = Instant::now();
    let mut buf = vec![0u8; 64 * 1024];
    let mut n = 0u64;
    while start.elapsed() < d {
        match s.read(&mut buf) {
            Ok(0) => bail!("the sender closed the download"),
            Ok(k) => n += k as u64,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(n)
}

/// A download from the server over the trusted link: warm-up, then the goodput (bit/s)
/// over `measure`, and, when `ping`, the median RTT of ping-pongs beside it.
fn download(
    lab: &Lab,
    warmup: Duration,
    measure: Duration,
    ping: bool,
) -> Result<(f64, Option<Duration>)> {
    let l = lab.listen_on_server(0)?;
    let dst: SocketAddr = l.local_addr()?;
    let src = source(l);
    let mut c = lab.connect(Link::Trusted, dst, Duration::from_secs(5))?;
    read_for(&mut c, warmup)?;
    let r = std::thread::scope(|sc| -> Result<(f64, Option<Duration>)> {
        let pinger = ping.then(|| sc.spawn(|| ping_rtt(lab, 31)));
        let t = Instant::now();
        let n = read_for(&mut c, measure)?;
        let rate = n as f64 * 8.0 / t.elapsed().as_secs_f64();
        let rtt = match pinger {
            Some(p) => Some(p.join().expect("pinger")?),
            None => None,
        };
        Ok((rate, rtt))
    });
    drop(c);
    let _ = src.join();
    r
}

/// Load `rate_limit` with the target rate and `rtt_us` on the server's `eth0` ingress;
/// returns the window the chain holds.
fn load(lab: &Lab, pins: &Path, target_bps: u64, rtt_us: u64) -> Result<u64> {
    let text = format!(
        "[[chain]]\nname = \"bench-rate-limit\"\ndev = \"eth0\"\nhook = \"ingress\"\n\
         links = [ {{ act = \"rate_limit\", rate_bps = {target_bps}, rtt_us = {rtt_us} }} ]\n"
    );
    let s = spec::parse(&text).map_err(|e| anyhow::anyhow!("{e}"))?;
    let p = pins.to_path_buf();
    let status = lab.run_in(Host::Server, move || -> Result<_> {
        let pol = Policy::open(&p)?;
        pol.apply(&s)?;
        pol.status()
    })??;
    let link = status
        .hooks
        .iter()
        .flat_map(|h| h.links.iter())
        .find(|l| l.link.contains("rate_limit"))
        .context("no rate_limit link in the chain after loading it")?;
    link.link
        .split("window = ")
        .nth(1)
        .and_then(|w| {
            w.trim_end_matches(|c: char| !c.is_ascii_digit())
                .parse()
                .ok()
        })
        .with_context(|| format!("no window in {:?}", link.link))
}

/// Run the benchmark; `progress` gets one line per step.
pub fn run(opts: &RateLimitOptions, mut progress: impl FnMut(&str)) -> Result<RateLimitReport> {
    if opts.attempts == 0 || opts.target_bps == 0 {
        bail!("at least one attempt and a rate above 0");
    }
    let mut cfg = LabConfig::with_prefix(unique_prefix().replace("nt", "nbr"));
    cfg.relay_exe = opts.relay_exe.clone();
    cfg.trusted_emulation = Some(LinkEmulation::both(Emulation {
        delay: opts.delay,
        ..Emulation::default()
    }));
    let lab = LabGuard::up(&cfg).context("bringing up the bench lab")?;
    let pins = Pins(PathBuf::from(format!(
        "/sys/fs/bpf/nena-bench-rl-{}",
        std::process::id()
    )));
    let idle = ping_rtt(&lab, 9)?;
    progress(&format!(
        "idle RTT {:.2} ms; the download without a limit",
        idle.as_secs_f64() * 1e3
    ));
    let (unlimited_bps, _) = download(&lab, opts.warmup, opts.measure, false)?;
    let p = pins.0.clone();
    lab.run_in(Host::Server, move || Policy::attach(&p, "eth0"))?
        .context("attaching the policy on the server's eth0")?;
    let target = opts.target_bps as f64;
    let mut rtt = idle;
    let mut attempts = vec![];
    for i in 0..opts.attempts {
        let rtt_us = rtt.as_micros().max(1) as u64;
        let window = load(&lab, &pins.0, opts.target_bps, rtt_us)?;
        progress(&format!(
            "attempt {}: rate_limit {} bit/s for an RTT of {:.2} ms (window {window} bytes)",
            i + 1,
            opts.target_bps,
            rtt.as_secs_f64() * 1e3
        ));
        let (rate, loaded) = download(&lab, opts.warmup, opts.measure, true)?;
        let loaded = loaded.expect("pinged");
        let error = (rate - target) / target;
        let within = error.abs() <= opts.tolerance;
        attempts.push(Attempt {
            configured_rtt_ms: rtt.as_secs_f64() * 1e3,
            window,
            loaded_rtt_ms: loaded.as_secs_f64() * 1e3,
            measured_bps: rate,
            error,
            within_target: within,
        });
        if within {
            break;
        }
        rtt = loaded;
    }
    drop(pins);
    drop(lab);
    let ok = attempts.iter().any(|a| a.within_target);
    Ok(RateLimitReport {
        target_bps: opts.target_bps,
        tolerance: opts.tolerance,
        delay_ms: opts.delay.as_secs_f64() * 1e3,
        idle_rtt_ms: idle.as_secs_f64() * 1e3,
        unlimited_bps,
        attempts,
        ok,
    })
}
