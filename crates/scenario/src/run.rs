//! Running a scenario: each run in a fresh lab (links as the scenario says), captures and
//! socket samples started, the server end up, the events applied at their times on a
//! thread of their own while the traffic runs on a thread in the client host, then
//! everything stopped, the lab torn down (also on error: the guard) and the run's files
//! written. The numbers are computed by `summary` from what was recorded.

use crate::model::{Action, Direction, Event, RunSpec, Scenario, Traffic};
use crate::record::{Applied, TrafficOutcome};
use crate::sample::{Sample, Sampler};
use crate::summary::{self, RunSummary};
use anyhow::{anyhow, bail, Context, Result};
use nena_lab::{CaptureOptions, Host, Lab, LabConfig, LabGuard, Link};
use serde::Serialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The server port of every run.
const PORT: u16 = 5201;

/// How to run a scenario.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Where the files go (one directory per run, and `summary.json`).
    pub out: PathBuf,
    /// The nena executable (`nena serve` in the server host, the emulated links' relay).
    pub nena: PathBuf,
    /// The scenario's directory (trace files are relative to it).
    pub base: PathBuf,
    /// Lab prefix (default: one of this process).
    pub prefix: Option<String>,
    /// Only these runs (by name; empty: all).
    pub only: Vec<String>,
}

/// What a whole scenario produced.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioSummary {
    pub scenario: Scenario,
    /// Per run (name): the goodput over its repetitions.
    pub goodput: Vec<Goodput>,
    pub kernel: String,
    pub runs: Vec<RunSummary>,
}

/// A run's goodput over its repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct Goodput {
    pub name: String,
    pub mbit_s: summary::Stat,
}

/// Run every run of `sc` (read from `origin`), writing into `opts.out`.
pub fn run_scenario(
    sc: &Scenario,
    opts: &RunOptions,
    mut progress: impl FnMut(&str),
) -> Result<ScenarioSummary> {
    std::fs::create_dir_all(&opts.out)
        .with_context(|| format!("creating {}", opts.out.display()))?;
    for name in &opts.only {
        if !sc.runs.iter().any(|r| &r.name == name) {
            bail!("no run named {name:?} in the scenario");
        }
    }
    let mut runs = Vec::new();
    for r in &sc.runs {
        if !opts.only.is_empty() && !opts.only.contains(&r.name) {
            continue;
        }
        progress(&format!(
            "run {}: {:?}{}, {}",
            r.name,
            r.traffic,
            r.mode
                .as_deref()
                .map(|m| format!(" {m}"))
                .unwrap_or_default(),
            match r.bytes {
                Some(b) => format!("{b} bytes"),
                None => nena_lab::emulate::format_duration(sc.run_time(r)),
            }
        ));
        for rep in 1..=r.repeat {
            let s = run_one(sc, r, rep, opts)
                .with_context(|| format!("run {} (repetition {rep})", r.name))?;
            progress(&format!("run {}: {}", s.label(), s.line()));
            runs.push(s);
        }
    }
    let goodput = sc
        .runs
        .iter()
        .filter_map(|r| {
            let v: Vec<f64> = runs
                .iter()
                .filter(|s| s.name == r.name)
                .map(|s| s.outcome.goodput_mbit_s)
                .collect();
            summary::Stat::of(&v).map(|mbit_s| Goodput {
                name: r.name.clone(),
                mbit_s,
            })
        })
        .collect();
    let summary = ScenarioSummary {
        scenario: sc.clone(),
        goodput,
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_string(),
        runs,
    };
    let path = opts.out.join("summary.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&summary)?)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(summary)
}

fn lab_config(sc: &Scenario, r: &RunSpec, prefix: String, opts: &RunOptions) -> Result<LabConfig> {
    let base = &opts.base;
    let (trusted_family, untrusted_family) = sc.lab.families()?;
    Ok(LabConfig {
        prefix,
        pm: r.path_manager(sc.lab.pm),
        trusted_rate: sc.links.trusted.rate,
        untrusted_rate: sc.links.untrusted.rate,
        server_rate: sc.links.server.rate,
        offload: sc.lab.offload,
        trusted_emulation: sc.links.trusted.emulation(base)?,
        untrusted_emulation: sc.links.untrusted.emulation(base)?,
        server_emulation: sc.links.server.emulation(base)?,
        relay_exe: Some(opts.nena.clone()),
        trusted_family,
        untrusted_family,
        untrusted_nat: sc.lab.untrusted_nat,
        untrusted_strip_mptcp: sc.lab.untrusted_strip_mptcp,
        ..LabConfig::default()
    })
}

fn run_one(sc: &Scenario, r: &RunSpec, rep: u32, opts: &RunOptions) -> Result<RunSummary> {
    let dir = if r.repeat > 1 {
        opts.out.join(&r.name).join(format!("rep-{rep}"))
    } else {
        opts.out.join(&r.name)
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let prefix = opts
        .prefix
        .clone()
        .unwrap_or_else(|| format!("sc{}", std::process::id()));
    // nena's BPF congestion controls, loaded for the run when not loaded already (and
    // unloaded after it by the guards); before the lab, which needs none of them.
    let mut _loaded = Vec::new();
    for cc in
        r.cc.iter()
            .chain(r.competing.iter().filter_map(|c| c.cc.as_ref()))
    {
        if let Some(g) = CcLoaded::ensure(&opts.nena, cc)? {
            _loaded.push(g);
        }
    }
    let guard = LabGuard::up(&lab_config(sc, r, prefix.clone(), opts)?)?;
    let lab = Lab::open(&prefix)?;
    // The run's congestion control goes on every MPTCP socket this process opens for it (the
    // listener and client of mptcp runs, the client of nena and send runs: their options
    // carry it), and becomes the hosts' default where the kernel allows it: a namespace other
    // than the initial one may only make a non-restricted one its default (cubic, for one,
    // is not here). Without that default, only a run whose sender is an MPTCP socket of this
    // process can use it.
    if let Some(cc) = &r.cc {
        if let Err(e) = set_cc(&lab, cc) {
            if r.traffic == Traffic::Tcp || r.direction == Direction::Down {
                return Err(e);
            }
            log::info!("{e:#}; set on the run's MPTCP sockets instead");
        }
    }
    let mut captures = Vec::new();
    let mut capture_files = Vec::new();
    for &l in &sc.capture.links {
        let file = dir.join(format!("{l}.pcap"));
        let c = lab.capture_with(
            l,
            &file,
            &CaptureOptions {
                snaplen: Some(sc.capture.snaplen.unwrap_or(128)),
                filter: Some("tcp".into()),
                ..CaptureOptions::default()
            },
        )?;
        captures.push(c);
        capture_files.push(file);
    }
    let work = tempdir_in(&dir)?;
    let time = sc.run_time(r);
    let server = start_server(&lab, r, opts, &work)?;
    let sending = match r.direction {
        Direction::Up => Host::Client,
        Direction::Down => Host::Server,
    };
    let sampler = {
        let lab = Lab::open(&prefix)?;
        Sampler::start(PORT, sc.sample.interval, move |f| lab.spawn_in(sending, f))
    };
    // The competing flow starts half a second before the run's traffic: a flow that starts
    // while the other's slow start fills the bottleneck's queue can lose its first segments
    // and sit out seconds of RTO back-off, which would measure the start, not the sharing.
    let competing = match &r.competing {
        Some(c) => {
            let f = Competitor::start(&lab, c, r.cc.as_deref(), time + Duration::from_millis(500))?;
            std::thread::sleep(Duration::from_millis(500));
            Some(f)
        }
        None => None,
    };
    let t0 = Instant::now();
    let events = if r.no_events {
        EventThread::none()
    } else {
        EventThread::start(Lab::open(&prefix)?, sc.events.clone(), t0)
    };
    let traffic = run_traffic(&lab, r, time, &work, &server);
    let competing = competing.map(Competitor::finish);
    let applied = events.stop();
    let samples = sampler.stop();
    for c in captures {
        c.stop()?;
    }
    let server_result = server.finish();
    let _ = std::fs::remove_dir_all(&work);
    drop(guard);
    let outcome = traffic?;
    server_result?;
    let applied = applied?;
    let samples: Vec<Sample> = samples?;
    let mut s = summary::summarize(r, rep, sc, &outcome, &applied, &samples);
    if let Some(c) = competing {
        let mut c = c?;
        c.share = summary::share(outcome.goodput_mbit_s, c.goodput_mbit_s);
        s.competing = Some(c);
    }
    std::fs::write(dir.join("samples.json"), serde_json::to_vec(&samples)?)?;
    std::fs::write(dir.join("run.json"), serde_json::to_vec_pretty(&s)?)?;
    crate::plots::sample_figures(&s, &samples, &dir)?;
    crate::plots::capture_figures(&capture_files, &dir)?;
    Ok(s)
}

/// A nena congestion control (`nena_*`) that this run loaded with `nena cc load`; unloaded
/// with `nena cc unload` when dropped (or by [`unload_after_interrupt`]).
struct CcLoaded {
    nena: PathBuf,
    name: String,
}

/// The congestion controls loaded by runs in progress, for [`unload_after_interrupt`].
static LOADED: std::sync::Mutex<Vec<(PathBuf, String)>> = std::sync::Mutex::new(Vec::new());

fn cc_unload(nena: &Path, name: &str) {
    match std::process::Command::new(nena)
        .args(["cc", "unload", name])
        .output()
    {
        Ok(o) if o.status.success() => {}
        Ok(o) => log::warn!(
            "unloading {name}: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => log::warn!("unloading {name}: {e}"),
    }
}

/// Unloads every congestion control a run in progress loaded: for an interrupted scenario
/// (Ctrl-C ends the process without dropping the runs' guards).
pub fn unload_after_interrupt() {
    let loaded = std::mem::take(&mut *LOADED.lock().unwrap_or_else(|e| e.into_inner()));
    for (nena, name) in loaded {
        cc_unload(&nena, &name);
    }
}

fn registered(cc: &str) -> bool {
    nena_mptcp::available_congestion_controls()
        .unwrap_or_default()
        .iter()
        .any(|a| a == cc)
}

impl CcLoaded {
    /// Load `cc` if it is one of nena's and not registered yet.
    fn ensure(nena: &Path, cc: &str) -> Result<Option<CcLoaded>> {
        if !cc.starts_with("nena_") || registered(cc) {
            return Ok(None);
        }
        let out = std::process::Command::new(nena)
            .args(["cc", "load", cc])
            .output()
            .with_context(|| format!("running {} cc load {cc}", nena.display()))?;
        if !out.status.success() {
            bail!(
                "loading congestion control {cc}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        LOADED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((nena.to_path_buf(), cc.to_string()));
        Ok(Some(CcLoaded {
            nena: nena.to_path_buf(),
            name: cc.to_string(),
        }))
    }
}

impl Drop for CcLoaded {
    fn drop(&mut self) {
        let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
        // not in the list: already unloaded after an interrupt
        if let Some(i) = loaded.iter().position(|(_, n)| *n == self.name) {
            loaded.swap_remove(i);
            drop(loaded);
            cc_unload(&self.nena, &self.name);
        }
    }
}

/// A competing single-path TCP flow: a byte-counting sink at PORT + 1 in the server host,
/// a bulk sender from the client's link with its own congestion control.
struct Competitor {
    link: Link,
    cc: Option<String>,
    sender: std::thread::JoinHandle<Result<Result<()>>>,
    sink: std::thread::JoinHandle<Result<(u64, f64)>>,
}

impl Competitor {
    fn start(
        lab: &Lab,
        c: &crate::model::Competing,
        run_cc: Option<&str>,
        time: Duration,
    ) -> Result<Competitor> {
        use std::io::{Read, Write};
        let link = c.link.unwrap_or(Link::Trusted);
        let cc = c.cc.clone().or_else(|| run_cc.map(str::to_string));
        // the server's address of the family the competing flow's link carries
        let dst = SocketAddr::new(lab.server_addr_for(link), PORT + 1);
        let l = lab
            .run_in(Host::Server, move || std::net::TcpListener::bind(dst))?
            .with_context(|| format!("listening on {dst}"))?;
        let sink = std::thread::spawn(move || -> Result<(u64, f64)> {
            let (mut s, _) = l.accept().context("the competing flow's accept")?;
            let t0 = Instant::now();
            let mut buf = vec![0u8; 256 * 1024];
            let mut n = 0u64;
            loop {
                match s.read(&mut buf) {
                    Ok(0) => return Ok((n, t0.elapsed().as_secs_f64())),
                    Ok(k) => n += k as u64,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e).context("the competing flow's sink"),
                }
            }
        });
        let src = SocketAddr::new(lab.client_addr(link), 0);
        let cc2 = cc.clone();
        let sender = lab.spawn_in(Host::Client, move || -> Result<()> {
            use socket2::{Domain, Protocol, SockAddr, Socket, Type};
            let s = Socket::new(Domain::for_address(dst), Type::STREAM, Some(Protocol::TCP))?;
            if let Some(cc) = &cc2 {
                nena_mptcp::set_congestion(std::os::fd::AsFd::as_fd(&s), cc)
                    .with_context(|| format!("congestion control {cc} of the competing flow"))?;
            }
            s.bind(&SockAddr::from(src))?;
            s.connect_timeout(&SockAddr::from(dst), Duration::from_secs(5))
                .with_context(|| format!("the competing flow's connect to {dst}"))?;
            let mut s: std::net::TcpStream = s.into();
            s.set_write_timeout(Some(Duration::from_millis(200)))?;
            let buf = vec![0x5au8; 256 * 1024];
            let end = Instant::now() + time;
            while Instant::now() < end {
                match s.write(&buf) {
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock
                                | std::io::ErrorKind::TimedOut
                                | std::io::ErrorKind::Interrupted
                        ) => {}
                    Err(e) => return Err(e).context("the competing flow's send"),
                }
            }
            s.shutdown(std::net::Shutdown::Both)?;
            Ok(())
        });
        Ok(Competitor {
            link,
            cc,
            sender,
            sink,
        })
    }

    fn finish(self) -> Result<summary::CompetingOutcome> {
        self.sender
            .join()
            .map_err(|_| anyhow!("the competing sender panicked"))???;
        let (bytes, seconds) = self
            .sink
            .join()
            .map_err(|_| anyhow!("the competing sink panicked"))??;
        Ok(summary::CompetingOutcome {
            link: self.link,
            cc: self.cc,
            bytes,
            seconds,
            goodput_mbit_s: if seconds > 0.0 {
                bytes as f64 * 8.0 / seconds / 1e6
            } else {
                0.0
            },
            share: None,
        })
    }
}

fn set_cc(lab: &Lab, cc: &str) -> Result<()> {
    if !registered(cc) {
        bail!(
            "congestion control {cc:?} is not available here (available: {})",
            nena_mptcp::available_congestion_controls()
                .unwrap_or_default()
                .join(" ")
        );
    }
    for h in [Host::Client, Host::Server] {
        let out = lab
            .command(
                h,
                "sysctl",
                ["-qw", &format!("net.ipv4.tcp_congestion_control={cc}")],
            )
            .output()
            .context("running sysctl")?;
        if !out.status.success() {
            bail!(
                "setting congestion control {cc} in the {h}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    }
    Ok(())
}

fn tempdir_in(dir: &Path) -> Result<PathBuf> {
    let w = dir.join(".work");
    std::fs::create_dir_all(&w).with_context(|| format!("creating {}", w.display()))?;
    Ok(w)
}

/// The server end of a run.
enum ServerEnd {
    Raw(std::thread::JoinHandle<Result<Result<nena_transport::baseline::raw_mptcp::Outcome>>>),
    /// `nena serve`, killed when dropped.
    Nena {
        _server: nena_lab::NenaServer,
    },
}

impl ServerEnd {
    fn finish(self) -> Result<()> {
        match self {
            ServerEnd::Raw(t) => {
                t.join()
                    .map_err(|_| anyhow!("the server thread panicked"))???;
                Ok(())
            }
            ServerEnd::Nena { .. } => Ok(()),
        }
    }
}

fn start_server(lab: &Lab, r: &RunSpec, opts: &RunOptions, work: &Path) -> Result<ServerEnd> {
    // A tcp run's listener at the server's address of its link's family; kernel MPTCP's where
    // both client links reach it (`[::]` when their families differ, for the joins).
    let addr = match r.traffic {
        Traffic::Tcp => SocketAddr::new(lab.server_addr_for(r.link.unwrap_or(Link::Trusted)), PORT),
        _ => lab.server_listen_addr(PORT),
    };
    match r.traffic {
        Traffic::Tcp | Traffic::Mptcp => {
            let cc = r.cc.clone();
            let l = lab
                .run_in(Host::Server, move || {
                    nena_mptcp::listen(addr, cc.as_deref())
                })?
                .with_context(|| format!("listening on {addr}"))?;
            Ok(ServerEnd::Raw(lab.spawn_in(Host::Server, move || {
                nena_transport::baseline::raw_mptcp::serve_one(&l)
            })))
        }
        Traffic::Nena | Traffic::Send => {
            let store = work.join("server");
            std::fs::create_dir_all(&store)?;
            Ok(ServerEnd::Nena {
                _server: nena_lab::start_nena_serve(lab, &opts.nena, PORT, &store)?,
            })
        }
    }
}

fn run_traffic(
    lab: &Lab,
    r: &RunSpec,
    time: Duration,
    work: &Path,
    _server: &ServerEnd,
) -> Result<TrafficOutcome> {
    use nena_transport::baseline::raw_mptcp::{self, Amount, Outcome, Request};
    // The server's address the client reaches over the run's link (a tcp run's) or the
    // trusted link (where MPTCP and nena start): IPv6 when that link carries IPv6 only.
    let remote = SocketAddr::new(
        lab.server_addr_for(match r.traffic {
            Traffic::Tcp => r.link.unwrap_or(Link::Trusted),
            _ => Link::Trusted,
        }),
        PORT,
    );
    match r.traffic {
        Traffic::Tcp | Traffic::Mptcp => {
            let req = Request {
                direction: match r.direction {
                    Direction::Up => raw_mptcp::Direction::Up,
                    Direction::Down => raw_mptcp::Direction::Down,
                },
                amount: Amount::Time(time),
                omit: None,
                // kernel MPTCP as any application runs it (and `subflows = 1` has no join)
                await_join: false,
            };
            let link = r.link.unwrap_or(Link::Trusted);
            let local = SocketAddr::new(lab.client_addr(link), 0);
            let tcp = r.traffic == Traffic::Tcp;
            let cc = r.cc.clone();
            let run = lab.run_in(Host::Client, move || {
                if tcp {
                    raw_mptcp::client_tcp(local, remote, req)
                } else {
                    raw_mptcp::client(local, remote, req, cc.as_deref())
                }
            })??;
            let (bytes, seconds, mbit_s) = match run.outcome {
                Outcome::Sent {
                    bytes,
                    seconds,
                    mbit_s,
                    ..
                } => (bytes, seconds, mbit_s),
                Outcome::Received { bytes } => {
                    let s = time.as_secs_f64();
                    (bytes, s, bytes as f64 * 8.0 / s / 1e6)
                }
            };
            Ok(TrafficOutcome {
                bytes,
                seconds,
                goodput_mbit_s: mbit_s,
                mode: None,
                verified: true,
            })
        }
        Traffic::Nena => {
            use nena_transport::app::file_client::{self, PerfParams};
            let copts = client_options(remote, r)?;
            let params = PerfParams {
                up: r.direction == Direction::Up,
                down: r.direction == Direction::Down,
                bytes: None,
                time,
                interval: None,
                omit: None,
            };
            let rep = lab.run_in(Host::Client, || {
                tokio::runtime::Runtime::new()?.block_on(file_client::perf(&copts, params, |_| {}))
            })??;
            let (bytes, mbit) = match r.direction {
                Direction::Up => (rep.sent, rep.mbit_s_sent),
                Direction::Down => (rep.received, rep.mbit_s_received),
            };
            Ok(TrafficOutcome {
                bytes,
                seconds: rep.seconds,
                goodput_mbit_s: mbit,
                mode: Some(rep.mode),
                verified: rep.verified,
            })
        }
        Traffic::Send => {
            use nena_transport::app::file_client;
            if r.direction == Direction::Down {
                bail!("a send run goes up (client to server)");
            }
            let bytes = r.bytes.expect("checked: a send run has bytes");
            let file = work.join("payload.bin");
            write_payload(&file, bytes)?;
            let copts = client_options(remote, r)?;
            let name = nena_transport::app::names::FileName::new("payload.bin")?;
            let rep = lab.run_in(Host::Client, || {
                tokio::runtime::Runtime::new()?.block_on(file_client::send(
                    &copts,
                    &file,
                    &name,
                    &(),
                ))
            })??;
            Ok(TrafficOutcome {
                bytes: rep.bytes,
                seconds: rep.seconds,
                goodput_mbit_s: rep.mbit_s,
                mode: Some(rep.mode),
                verified: rep.verified,
            })
        }
    }
}

fn client_options(remote: SocketAddr, r: &RunSpec) -> Result<nena_transport::conn::ClientOptions> {
    use nena_mptcp::{PathPolicy, PathSpec};
    let mode = r
        .nena_mode()
        .ok_or_else(|| anyhow!("run {}: no nena mode", r.name))?;
    Ok(nena_transport::conn::ClientOptions {
        congestion: r.cc.clone(),
        ..nena_transport::conn::ClientOptions::new(
            remote,
            PathPolicy {
                trusted: vec![PathSpec::Iface("trusted".into())],
                untrusted: vec![PathSpec::Iface("untrusted".into())],
            },
            vec![mode],
        )
    })
}

/// A file of text-like bytes (what the papers sent), `n` bytes long.
fn write_payload(path: &Path, n: u64) -> Result<()> {
    use std::io::Write;
    let line = b"nena scenario payload: the quick brown fox jumps over the lazy dog 0123456789\n";
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
    );
    let mut left = n;
    while left > 0 {
        let k = left.min(line.len() as u64) as usize;
        f.write_all(&line[..k])?;
        left -= k as u64;
    }
    f.flush()?;
    Ok(())
}

/// Applies the events at their times; stopped early when the traffic ends first.
struct EventThread {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<std::thread::JoinHandle<Result<Vec<Applied>>>>,
}

impl EventThread {
    fn none() -> EventThread {
        EventThread {
            stop: Arc::new((Mutex::new(false), Condvar::new())),
            thread: None,
        }
    }

    fn start(lab: Lab, events: Vec<Event>, t0: Instant) -> EventThread {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut applied = Vec::new();
            for e in events {
                let (m, cv) = &*s;
                let mut stopped = m.lock().map_err(|_| anyhow!("event lock poisoned"))?;
                loop {
                    if *stopped {
                        return Ok(applied);
                    }
                    let now = t0.elapsed();
                    if now >= e.at {
                        break;
                    }
                    stopped = cv
                        .wait_timeout(stopped, e.at - now)
                        .map_err(|_| anyhow!("event lock poisoned"))?
                        .0;
                }
                drop(stopped);
                let started_s = t0.elapsed().as_secs_f64();
                match e.action {
                    Action::Down => lab.set_link(e.link, false)?,
                    Action::Up => lab.set_link(e.link, true)?,
                    Action::Rate => lab.set_rate(e.link, e.rate)?,
                }
                applied.push(Applied {
                    planned_s: e.at.as_secs_f64(),
                    started_s,
                    applied_s: t0.elapsed().as_secs_f64(),
                    link: e.link,
                    action: e.action,
                });
            }
            Ok(applied)
        });
        EventThread {
            stop,
            thread: Some(thread),
        }
    }

    fn stop(mut self) -> Result<Vec<Applied>> {
        let (m, cv) = &*self.stop;
        if let Ok(mut g) = m.lock() {
            *g = true;
        }
        cv.notify_all();
        match self.thread.take() {
            None => Ok(Vec::new()),
            Some(t) => t.join().map_err(|_| anyhow!("the event thread panicked"))?,
        }
    }
}
