//! The emulator's fidelity benchmark (`nena bench emulation`): in a lab of its own, the
//! round-trip time of one-byte TCP ping-pongs over an emulated link against the configured
//! delay while a paced UDP load of 0 to 200 Mbit/s crosses the same relay (no rate limit, so
//! no queue builds: what is measured is the relay's own added latency), the relay's CPU per
//! Mbit/s of that load, and a loss rate against the binomial 99% interval.

use anyhow::{Context, Result};
use nena_lab::emulate::realtime;
use nena_lab::{
    unique_prefix, Direction, Emulation, LabConfig, LabGuard, Link, LinkEmulation, Loss,
};
use serde::Serialize;
use std::io::{Read, Write};
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How to run the benchmark.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// The relay's executable (see [`LabConfig::relay_exe`]).
    pub relay_exe: Option<PathBuf>,
    /// One-way delay configured on the link (each direction).
    pub delay: Duration,
    /// UDP loads, Mbit/s.
    pub loads_mbit: Vec<u64>,
    /// Ping-pongs per load.
    pub samples: usize,
    /// Loss probability for the loss check, and datagrams sent.
    pub loss: f64,
    pub loss_datagrams: u64,
    /// How long the idle relay's CPU is watched.
    pub idle: Duration,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            relay_exe: None,
            delay: Duration::from_millis(10),
            loads_mbit: vec![0, 50, 100, 200],
            samples: 150,
            loss: 0.05,
            loss_datagrams: 20_000,
            idle: Duration::from_secs(10),
        }
    }
}

/// The RTT at one load.
#[derive(Debug, Clone, Serialize)]
pub struct LoadResult {
    /// Offered UDP load, Mbit/s.
    pub offered_mbit: u64,
    /// What the server received, Mbit/s (UDP payload + headers as IP bytes).
    pub delivered_mbit: f64,
    pub samples: usize,
    pub configured_rtt_ms: f64,
    pub rtt_median_ms: f64,
    pub rtt_p90_ms: f64,
    pub rtt_p99_ms: f64,
    /// median - configured.
    pub excess_median_ms: f64,
    /// The relay's CPU (its frame-moving threads) as a fraction of one CPU.
    pub relay_cpu: f64,
    /// relay_cpu per Mbit/s delivered (None at no load).
    pub relay_cpu_per_mbit: Option<f64>,
    /// median within 1 ms of configured.
    pub within_target: bool,
}

/// The loss check.
#[derive(Debug, Clone, Serialize)]
pub struct LossResult {
    pub configured: f64,
    pub sent: u64,
    pub lost: u64,
    pub measured: f64,
    /// The binomial 99% interval of the lost count.
    pub interval: (f64, f64),
    pub within_target: bool,
}

/// The relay of an idle lab: no frame for longer than its keep-awake linger.
#[derive(Debug, Clone, Serialize)]
pub struct IdleResult {
    /// How long it was watched, seconds.
    pub secs: f64,
    /// The relay's CPU (every thread, the keep-awake ones included) as a fraction of one CPU.
    pub relay_cpu: f64,
    /// The first ping-pong after the idle time (the relay's threads wake for it), ms.
    pub first_rtt_ms: f64,
    /// relay_cpu <= 1% of a CPU.
    pub within_target: bool,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub delay_ms: f64,
    pub idle: IdleResult,
    pub loads: Vec<LoadResult>,
    pub loss: LossResult,
    pub ok: bool,
}

/// CPU ticks of the relay's threads: the frame-moving ones, or (`all`) every thread.
fn relay_cpu_ticks(pid: u32, all: bool) -> u64 {
    let mut t = 0;
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    for e in rd.flatten() {
        let p = e.path();
        let comm = std::fs::read_to_string(p.join("comm")).unwrap_or_default();
        if !all && comm.trim() == "keep-awake" {
            continue;
        }
        let stat = std::fs::read_to_string(p.join("stat")).unwrap_or_default();
        if let Some((_, rest)) = stat.rsplit_once(')') {
            let f: Vec<&str> = rest.split_whitespace().collect();
            // fields after comm: state is [0]; utime is field 14 of stat = [11], stime [12]
            let u: u64 = f.get(11).and_then(|x| x.parse().ok()).unwrap_or(0);
            let s: u64 = f.get(12).and_then(|x| x.parse().ok()).unwrap_or(0);
            t += u + s;
        }
    }
    t
}

/// Send UDP at `mbit` from `c` to `dst` until `stop`; bursts every millisecond.
fn paced_sender(c: UdpSocket, dst: SocketAddr, mbit: u64, stop: Arc<AtomicBool>) {
    if mbit == 0 {
        return;
    }
    let payload = [0u8; 1400];
    let bits_per = ((payload.len() + 28) * 8) as f64;
    let per_sec = mbit as f64 * 1e6 / bits_per;
    let start = Instant::now();
    let mut sent = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let due = (start.elapsed().as_secs_f64() * per_sec) as u64;
        while sent < due {
            let _ = c.send_to(&payload, dst);
            sent += 1;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
}

/// Run the benchmark; `progress` gets one line per step.
pub fn run(opts: &BenchOptions, mut progress: impl FnMut(&str)) -> Result<BenchReport> {
    let mut cfg = LabConfig::with_prefix(unique_prefix().replace("nt", "nbe"));
    cfg.relay_exe = opts.relay_exe.clone();
    cfg.trusted_emulation = Some(LinkEmulation::both(Emulation {
        delay: opts.delay,
        ..Emulation::default()
    }));
    let lab = LabGuard::up(&cfg).context("bringing up the bench lab")?;
    let pid = lab.relay_pid().context("no relay running")?;
    let configured = 2.0 * opts.delay.as_secs_f64() * 1e3;

    // the UDP sink on the server, counting IP bytes
    let sink = lab.run_in(nena_lab::Host::Server, || {
        UdpSocket::bind((nena_lab::SERVER_ADDR, 0))
    })??;
    // A large buffer (SO_RCVBUFFORCE, as root): a sink stalled by a busy host must not drop
    // what the link delivered, or the loss measured would be the host's.
    {
        use std::os::fd::AsRawFd;
        let size: libc::c_int = 32 << 20;
        // SAFETY: setsockopt on an open socket with a c_int option value.
        unsafe {
            libc::setsockopt(
                sink.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                &size as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
    }
    sink.set_read_timeout(Some(Duration::from_millis(50)))?;
    let dst = sink.local_addr()?;
    let stop_all = Arc::new(AtomicBool::new(false));
    let (bytes, count) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let sink_t = {
        let (stop, bytes, count) = (stop_all.clone(), bytes.clone(), count.clone());
        std::thread::spawn(move || {
            realtime();
            let mut b = [0u8; 2048];
            while !stop.load(Ordering::Relaxed) {
                if let Ok(n) = sink.recv(&mut b) {
                    bytes.fetch_add(n as u64 + 28, Ordering::Relaxed);
                    count.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    let src = lab.client_addr(Link::Trusted);

    // the echo server for the ping-pongs
    let l = lab.listen_on_server(0)?;
    let echo_dst = l.local_addr()?;
    std::thread::spawn(move || {
        while let Ok((mut e, _)) = l.accept() {
            let _ = e.set_nodelay(true);
            std::thread::spawn(move || {
                realtime();
                let mut b = [0u8; 1];
                while e.read_exact(&mut b).is_ok() && e.write_all(&b).is_ok() {}
            });
        }
    });

    let tck = crate::host::clock_ticks();
    let idle = {
        progress(&format!(
            "the idle relay's CPU over {:.0} s",
            opts.idle.as_secs_f64()
        ));
        // Past the lab's own frames: its path checks at `up`, and the ARP probe each
        // neighbour sends 5 s later (delay_first_probe_time) to confirm the entry they made.
        std::thread::sleep(Duration::from_secs(6) + nena_lab::emulate::AWAKE_LINGER);
        let (cpu0, t0) = (relay_cpu_ticks(pid, true), Instant::now());
        std::thread::sleep(opts.idle);
        let secs = t0.elapsed().as_secs_f64();
        let cpu = (relay_cpu_ticks(pid, true) - cpu0) as f64 / tck / secs;
        let mut s = lab.connect(Link::Trusted, echo_dst, Duration::from_secs(5))?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        // The connection's handshake woke the relay; let it fall asleep again.
        std::thread::sleep(nena_lab::emulate::AWAKE_LINGER + Duration::from_millis(500));
        let t = Instant::now();
        let mut b = [7u8; 1];
        s.write_all(&b)?;
        s.read_exact(&mut b)
            .context("ping-pong over the emulated link")?;
        IdleResult {
            secs,
            relay_cpu: cpu,
            first_rtt_ms: t.elapsed().as_secs_f64() * 1e3,
            within_target: cpu <= 0.01,
        }
    };
    let mut loads = Vec::new();
    for &mbit in &opts.loads_mbit {
        progress(&format!("RTT at {mbit} Mbit/s of UDP load"));
        let stop = Arc::new(AtomicBool::new(false));
        let c = lab.run_in(nena_lab::Host::Client, move || UdpSocket::bind((src, 0)))??;
        let sender = {
            let stop = stop.clone();
            std::thread::spawn(move || paced_sender(c, dst, mbit, stop))
        };
        std::thread::sleep(Duration::from_millis(300));
        let (b0, cpu0, t0) = (
            bytes.load(Ordering::Relaxed),
            relay_cpu_ticks(pid, false),
            Instant::now(),
        );
        let mut s = lab.connect(Link::Trusted, echo_dst, Duration::from_secs(5))?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut v = Vec::with_capacity(opts.samples);
        // the measuring ends at the relay's priority: a normal-priority wake-up on a busy host
        // would add its wait for a CPU to the RTT (the relay is what is measured)
        std::thread::scope(|sc| {
            sc.spawn(|| -> Result<()> {
                realtime();
                for _ in 0..opts.samples {
                    let t = Instant::now();
                    let mut b = [7u8; 1];
                    s.write_all(&b)?;
                    s.read_exact(&mut b)
                        .context("ping-pong over the emulated link")?;
                    v.push(t.elapsed().as_secs_f64() * 1e3);
                    std::thread::sleep(Duration::from_millis(5));
                }
                Ok(())
            })
            .join()
            .map_err(|_| anyhow::anyhow!("the ping-pong thread panicked"))?
        })?;
        let secs = t0.elapsed().as_secs_f64();
        let (b1, cpu1) = (bytes.load(Ordering::Relaxed), relay_cpu_ticks(pid, false));
        stop.store(true, Ordering::Relaxed);
        let _ = sender.join();
        v.sort_by(|a, b| a.total_cmp(b));
        let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
        let delivered = (b1 - b0) as f64 * 8.0 / secs / 1e6;
        let cpu = (cpu1 - cpu0) as f64 / tck / secs;
        let median = q(0.5);
        loads.push(LoadResult {
            offered_mbit: mbit,
            delivered_mbit: delivered,
            samples: v.len(),
            configured_rtt_ms: configured,
            rtt_median_ms: median,
            rtt_p90_ms: q(0.9),
            rtt_p99_ms: q(0.99),
            excess_median_ms: median - configured,
            relay_cpu: cpu,
            relay_cpu_per_mbit: (mbit > 0 && delivered > 1.0).then(|| cpu / delivered),
            within_target: (median - configured).abs() <= 1.0,
        });
    }

    progress(&format!(
        "loss: {} datagrams at {}%",
        opts.loss_datagrams,
        opts.loss * 100.0
    ));
    lab.set_emulation(
        Link::Trusted,
        Direction::ToRouter,
        Emulation {
            delay: opts.delay,
            loss: Loss::Random(opts.loss),
            ..Emulation::default()
        },
    )?;
    let c = lab.run_in(nena_lab::Host::Client, move || UdpSocket::bind((src, 0)))??;
    let before = count.load(Ordering::Relaxed);
    let start = Instant::now();
    for i in 0..opts.loss_datagrams {
        c.send_to(&[0u8; 100], dst)?;
        let due = start + Duration::from_micros(100) * (i + 1) as u32;
        if let Some(w) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(w);
        }
    }
    std::thread::sleep(opts.delay * 2 + Duration::from_millis(300));
    let got = count.load(Ordering::Relaxed) - before;
    stop_all.store(true, Ordering::Relaxed);
    let _ = sink_t.join();
    let n = opts.loss_datagrams as f64;
    let lost = opts.loss_datagrams.saturating_sub(got);
    let (mean, sd) = (n * opts.loss, (n * opts.loss * (1.0 - opts.loss)).sqrt());
    let interval = (mean - 2.576 * sd, mean + 2.576 * sd);
    let loss = LossResult {
        configured: opts.loss,
        sent: opts.loss_datagrams,
        lost,
        measured: lost as f64 / n,
        interval,
        within_target: (lost as f64) >= interval.0 && (lost as f64) <= interval.1,
    };
    let ok = idle.within_target && loss.within_target && loads.iter().all(|l| l.within_target);
    Ok(BenchReport {
        delay_ms: opts.delay.as_secs_f64() * 1e3,
        idle,
        loads,
        loss,
        ok,
    })
}
