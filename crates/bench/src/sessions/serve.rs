//! `nena serve` as the server of `nena bench sessions` ([`super::Against::Serve`]): one
//! `nena serve` in the server host (one descriptor per session), the load held by `nena bench
//! sessions-worker` processes in the client host ([`super::worker`], as many as the
//! [`super::Plan`] says), the probes made by this process, as `nena perf` makes a session.

use super::measured::{
    footprint, footprints, read_counter, tcp_mem_kib, Footprint, Measured, Plan, SessionsOptions,
    METRICS_PORT, PROBE_PAYLOAD, SERVER_PORT,
};
use super::worker::{finish_held, open_held, parse_said, Said, CLOSE, OPEN};
use crate::lab_ends::{client_options_to, RemoveDir};
use anyhow::{anyhow, bail, Context, Result};
use nena_lab::{start_nena, Host, Lab};
use nena_transport::conn::ClientOptions;
use std::io::{BufRead, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a worker may take to make its warm-up session and say it is ready.
const READY_WITHIN: Duration = Duration::from_secs(60);

/// `nena serve` and the workers in `lab`, the phases run, the server's counters read.
pub(super) fn measure(
    lab: &Lab,
    opts: &SessionsOptions,
    plan: Plan,
    mut progress: impl FnMut(&str),
) -> Result<Measured> {
    let mode: nena_proto::Mode = opts
        .mode
        .parse()
        .map_err(|e| anyhow!("mode {:?}: {e}", opts.mode))?;
    let dir = std::env::temp_dir().join(format!("nena-bench-sessions-{}", lab.prefix()));
    std::fs::create_dir_all(&dir)?;
    let dir = RemoveDir(dir);
    let to = SocketAddr::new(lab.server_addr(), SERVER_PORT);
    let most = (opts.sessions + opts.probes + 64).to_string();
    let metrics = SocketAddr::from((Ipv4Addr::LOCALHOST, METRICS_PORT)).to_string();
    let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let server = start_nena(
        lab,
        Host::Server,
        &opts.nena,
        &args(&[
            "serve",
            "--listen",
            &lab.server_listen_addr(SERVER_PORT).to_string(),
            "--dir",
            &dir.0.display().to_string(),
            "--mode",
            &opts.mode,
            "--max-sessions",
            &most,
            "--metrics",
            &metrics,
            // The load is held well past the default perf cap's reach.
            "--perf-max-time",
            "3600",
        ]),
        &[("RUST_LOG", "warn")],
    )?;
    progress(&format!(
        "{} sessions against nena serve in {}, from {} worker process(es)",
        opts.sessions, opts.mode, plan.processes
    ));
    let mut workers = Vec::with_capacity(plan.processes);
    for i in 0..plan.processes {
        let n = plan.per_process.min(opts.sessions - i * plan.per_process);
        workers.push(Worker::start(lab, opts, to, n)?);
    }
    for w in &mut workers {
        match w.hear(READY_WITHIN)? {
            Said::Ready => {}
            other => bail!("worker {} said {other:?} instead of ready", w.pid()),
        }
    }
    let server_pid = server.pid();
    let probe_opts = client_options_to(to, mode);
    let run_opts = opts.clone();
    let m = lab.run_in(Host::Client, move || -> Result<Measured> {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?
            .block_on(phases(&run_opts, &probe_opts, &mut workers, server_pid))
    })??;
    let server_integrity_failures = read_counter(
        lab,
        Host::Server,
        "nena_integrity_failures_total",
        &mut progress,
    );
    drop(server);
    drop(dir);
    Ok(Measured {
        server_integrity_failures,
        ..m
    })
}

/// The phases, from inside the client host: the idle probes, the load opened by every
/// worker, the probes under load, the load's close; the footprints between.
async fn phases(
    opts: &SessionsOptions,
    probe_opts: &ClientOptions,
    workers: &mut [Worker],
    server_pid: u32,
) -> Result<Measured> {
    let pids: Vec<u32> = workers.iter().map(Worker::pid).collect();
    let both = || -> Result<[Footprint; 2]> { Ok([footprints(&pids)?, footprint(server_pid)?]) };
    // Descriptors before any session (the probes' own may still be closing after them).
    let fresh = both()?;
    let idle_opens = probe(probe_opts, opts.probes, opts.timeout)
        .await
        .context("a probe session on the idle server")?;
    let mut idle = both()?;
    for (f, before) in idle.iter_mut().zip(fresh) {
        f.fds = before.fds;
    }
    let tcp_kib_idle = tcp_mem_kib();

    let started = Instant::now();
    for w in workers.iter_mut() {
        w.tell(OPEN)?;
    }
    let (mut opened, mut errors) = (0, Vec::new());
    for w in workers.iter_mut() {
        match w.hear(opts.timeout + READY_WITHIN)? {
            Said::Opened {
                opened: n,
                errors: e,
                ..
            } => {
                opened += n;
                errors.extend(e.into_iter().map(|e| format!("worker {}: {e}", w.pid())));
            }
            other => bail!("worker {} said {other:?} instead of opened", w.pid()),
        }
    }
    let open_all = started.elapsed();
    let loaded = both()?;
    let tcp_kib_loaded = tcp_mem_kib();

    let loaded_opens = probe(probe_opts, opts.probes, opts.timeout)
        .await
        .context("a probe session with the load open")?;

    for w in workers.iter_mut() {
        w.tell(CLOSE)?;
    }
    let mut verified = 0;
    for w in workers.iter_mut() {
        match w.hear(opts.timeout + READY_WITHIN)? {
            Said::Closed {
                verified: n,
                errors: e,
            } => {
                verified += n;
                errors.extend(e.into_iter().map(|e| format!("worker {}: {e}", w.pid())));
            }
            other => bail!("worker {} said {other:?} instead of closed", w.pid()),
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
        retried_openings: None,
        server_integrity_failures: None,
    })
}

/// `n` sessions opened one after another: the time of each from before its connect to its
/// 64 bytes back from the server (its end, verdicts and close follow, not timed).
async fn probe(opts: &ClientOptions, n: usize, timeout: Duration) -> Result<Vec<Duration>> {
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        let once = async {
            let t = Instant::now();
            let (c, held) = open_held(opts, PROBE_PAYLOAD).await?;
            let took = t.elapsed();
            finish_held(c, held).await?;
            Ok::<_, anyhow::Error>(took)
        };
        let took = tokio::time::timeout(timeout, once)
            .await
            .map_err(|_| anyhow!("probe {i} took longer than {timeout:?}"))??;
        times.push(took);
    }
    Ok(times)
}

/// A `nena bench sessions-worker` process in the client host, steered over its standard
/// input; what it says arrives line by line through a thread. Killed when dropped.
struct Worker {
    child: Child,
    stdin: ChildStdin,
    said: mpsc::Receiver<String>,
}

impl Worker {
    fn start(lab: &Lab, opts: &SessionsOptions, to: SocketAddr, sessions: usize) -> Result<Worker> {
        let args = [
            "bench".to_string(),
            "sessions-worker".into(),
            "--to".into(),
            to.to_string(),
            "--mode".into(),
            opts.mode.clone(),
            "--sessions".into(),
            sessions.to_string(),
            "--payload".into(),
            opts.payload.to_string(),
            "--opening".into(),
            opts.opening.to_string(),
            "--timeout".into(),
            opts.timeout.as_secs().max(1).to_string(),
        ];
        let mut child = lab
            .command(Host::Client, &opts.nena, &args)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting nena bench sessions-worker in the lab")?;
        let (stdin, out) = match (child.stdin.take(), child.stdout.take()) {
            (Some(i), Some(o)) => (i, o),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                bail!("a worker without its standard input or output");
            }
        };
        let (tx, said) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Worker { child, stdin, said })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn tell(&mut self, command: &str) -> Result<()> {
        writeln!(self.stdin, "{command}")
            .and_then(|()| self.stdin.flush())
            .with_context(|| format!("telling worker {} to {command}", self.pid()))
    }

    /// The next thing the worker says, within `within`.
    fn hear(&mut self, within: Duration) -> Result<Said> {
        match self.said.recv_timeout(within) {
            Ok(line) => parse_said(&line),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                bail!("worker {} said nothing within {within:?}", self.pid())
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = self.child.wait().map(|s| s.to_string());
                bail!(
                    "worker {} ended ({}) without a word (its error is above)",
                    self.pid(),
                    status.unwrap_or_else(|e| e.to_string())
                )
            }
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
