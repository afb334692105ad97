//! The processes of `nena bench realtime` in its lab: a `nena proxy server` per nena subject
//! (so that each subject's sessions are told apart on the wire by the server's port), `nena
//! gateway` for the LAN host, and, per setting, the flow under `nena run` (`nena run ... --
//! nena bench realtime-flow ...`), whose lines ("ready", then its record as one JSON line)
//! are read from its standard output and which starts on "go" on its standard input. Each is
//! waited for by an event (its port listening, its ready line) and stopped when dropped.

use super::flow::{FlowRecord, FlowSpec};
use crate::peers::ends::Proc;
use anyhow::{bail, Context, Result};
use nena_lab::{Host, Lab};
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Whether `nena COMMAND --help` lists `flag` (an option a newer nena has, such as
/// `--udp-redundancy`).
pub fn offers(nena: &Path, command: &[&str], flag: &str) -> Result<bool> {
    let out = std::process::Command::new(nena)
        .args(command)
        .arg("--help")
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {} {} --help", nena.display(), command.join(" ")))?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .split(|c: char| c.is_whitespace() || c == ',' || c == '=')
        .any(|w| w == flag))
}

/// `nena proxy server` on `listen` in the server host, allowed to reach the server host's
/// own address (the echo, the bulk stream's iperf3 server).
pub fn proxy_server(lab: &Lab, nena: &Path, listen: SocketAddrV4, log: PathBuf) -> Result<Proc> {
    let args = [
        "proxy".to_string(),
        "server".into(),
        "--listen".into(),
        listen.to_string(),
        "--allow".into(),
        format!("{}/32", listen.ip()),
    ];
    let mut p = Proc::spawn(
        lab,
        Host::Server,
        nena,
        &args,
        &[("RUST_LOG", "warn")],
        log,
        "nena proxy server",
    )?;
    p.wait_listening(lab, Host::Server, listen)?;
    Ok(p)
}

/// `nena gateway` on the client for the LAN behind `lan`, to the proxy server at `via`,
/// with `extra` arguments (`--udp-redundancy MODE`, `--gateway-arg`s); waited for until it
/// says it listens (its nftables table is in by then).
pub fn gateway(
    lab: &Lab,
    nena: &Path,
    via: SocketAddrV4,
    extra: &[String],
    log: PathBuf,
) -> Result<Proc> {
    let mut args = vec![
        "gateway".to_string(),
        "--lan".into(),
        "lan".into(),
        "--via".into(),
        via.to_string(),
        "--trusted".into(),
        "trusted".into(),
        "--untrusted".into(),
        "untrusted".into(),
    ];
    args.extend(extra.iter().cloned());
    let mut p = Proc::spawn(
        lab,
        Host::Client,
        nena,
        &args,
        &[("RUST_LOG", "warn")],
        log,
        "nena gateway",
    )?;
    p.wait_output(" listening on ")?;
    Ok(p)
}

/// The flow under `nena run` in the client host.
pub struct RunFlow {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    log: PathBuf,
}

impl RunFlow {
    /// Start `nena run --via VIA --trusted trusted --untrusted untrusted EXTRA -- nena bench
    /// realtime-flow SPEC` and wait for its ready line (the flow's socket bound under `nena
    /// run`, which is set up by then).
    pub fn start(
        lab: &Lab,
        nena: &Path,
        via: SocketAddrV4,
        extra: &[String],
        spec: &FlowSpec,
        log: PathBuf,
    ) -> Result<RunFlow> {
        let mut args = vec![
            "run".to_string(),
            "--via".into(),
            via.to_string(),
            "--trusted".into(),
            "trusted".into(),
            "--untrusted".into(),
            "untrusted".into(),
        ];
        args.extend(extra.iter().cloned());
        args.push("--".into());
        args.push(nena.display().to_string());
        args.extend(flow_args(spec));
        let err =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let mut child = lab
            .command(Host::Client, nena, &args)
            .env("RUST_LOG", "warn")
            .env_remove("SUDO_UID")
            .env_remove("SUDO_GID")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .context("starting nena run")?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().context("nena run's output")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let mut f = RunFlow {
            child,
            stdin,
            lines,
            log,
        };
        f.wait_line(Duration::from_secs(30), |l| l == "ready")
            .context("the flow under nena run did not get ready")?;
        Ok(f)
    }

    /// Let the flow start.
    pub fn go(&mut self) -> Result<()> {
        let s = self.stdin.as_mut().context("no input to the flow")?;
        s.write_all(b"go\n")?;
        s.flush()?;
        Ok(())
    }

    /// Whether the process has ended.
    pub fn ended(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// The flow's record, within `timeout`; then the process's end.
    pub fn finish(mut self, timeout: Duration) -> Result<FlowRecord> {
        let line = self.wait_line(timeout, |l| l.starts_with('{'))?;
        let r: FlowRecord = serde_json::from_str(&line).context("the flow's record")?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.child.try_wait()? {
                Some(st) if st.success() => return Ok(r),
                Some(st) => bail!("nena run ended with {st}: {}", self.log_tail()),
                None if Instant::now() > deadline => {
                    bail!("nena run did not end within 10 s after its flow")
                }
                // sleep: polling the process's end (no event to wait on without a reaper)
                None => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }

    /// Wait for a line of the flow's output that `want` accepts.
    fn wait_line(&mut self, timeout: Duration, want: impl Fn(&str) -> bool) -> Result<String> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.lines.recv_timeout(Duration::from_millis(100)) {
                Ok(l) if want(&l) => return Ok(l),
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Some(st) = self.child.try_wait()? {
                        // Its last lines may still be in the channel.
                        if let Some(l) = self.lines.try_iter().find(|l| want(l)) {
                            return Ok(l);
                        }
                        bail!("nena run ended ({st}): {}", self.log_tail());
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let _ = self.child.wait();
                    bail!("nena run closed its output: {}", self.log_tail());
                }
            }
            if Instant::now() > deadline {
                bail!("nothing within {timeout:?}: {}", self.log_tail());
            }
        }
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(8).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }
}

impl Drop for RunFlow {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            // SAFETY: kill(2) on our own child, not reaped yet: SIGTERM, which nena run
            // passes on to the flow and then removes its cgroup.
            unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(8);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                // sleep: polling the process's end after the signal
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The arguments of `nena bench realtime-flow` for `spec`.
pub fn flow_args(spec: &FlowSpec) -> Vec<String> {
    let mut v = vec![
        "bench".to_string(),
        "realtime-flow".into(),
        "--flow".into(),
        spec.flow.to_string(),
        "--to".into(),
        spec.to.to_string(),
        "--rate".into(),
        spec.rate.to_string(),
        "--size".into(),
        spec.size.to_string(),
        "--count".into(),
        spec.count.to_string(),
        "--drain-ms".into(),
        spec.drain.as_millis().to_string(),
    ];
    if let Some(b) = spec.bind {
        v.extend(["--bind".to_string(), b.to_string()]);
    }
    v
}

/// The flow run as a process of its own (`nena bench realtime-flow`): "ready" on standard
/// output once its socket is bound, then it waits for "go" on standard input, sends, and
/// prints its record as one JSON line.
pub fn flow_child(spec: &FlowSpec) -> Result<()> {
    let r = super::flow::run_flow(
        spec,
        || {
            println!("ready");
            let _ = std::io::stdout().flush();
        },
        || {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).is_ok() && line.trim() == "go"
        },
    )?;
    println!("{}", serde_json::to_string(&r)?);
    std::io::stdout().flush()?;
    Ok(())
}

/// The address of `host`'s side used by a straight flow over `link` (IPv4).
pub fn straight_source(link: nena_lab::Link) -> Ipv4Addr {
    link.edge().addr
}
