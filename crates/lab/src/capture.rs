//! Captures of a lab link: `tcpdump` in the link's edge namespace writing a pcap file.
//! Each running capture is recorded in the lab's state directory so `down` can stop it
//! even after the process that started it crashed.

use crate::run::{netns_exec, render};
use anyhow::{bail, Context, Result};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::Link;

/// What the state directory records about a capture.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CaptureRecord {
    pub pid: u32,
    pub link: Link,
    pub file: PathBuf,
    /// tcpdump's stderr (its "listening on" line and final packet counts).
    pub log: PathBuf,
}

/// tcpdump's own counts, printed when it stops.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct CaptureStats {
    pub captured: Option<u64>,
    pub dropped_by_kernel: Option<u64>,
}

/// A running capture. [`Capture::stop`] flushes and waits; dropping it stops it too.
#[derive(Debug)]
pub struct Capture {
    child: Option<Child>,
    record: CaptureRecord,
    record_path: PathBuf,
}

/// Options for a capture.
#[derive(Debug, Clone, Default)]
pub struct CaptureOptions {
    /// Stop after this many packets (`tcpdump -c`).
    pub count: Option<u64>,
    /// Snapshot length; 0 or None means whole packets.
    pub snaplen: Option<u32>,
    /// A tcpdump filter expression (e.g. `tcp`).
    pub filter: Option<String>,
}

pub(crate) fn captures_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("captures")
}

impl Capture {
    pub(crate) fn start(
        netns: &str,
        state_dir: &Path,
        link: Link,
        iface: &str,
        file: &Path,
        opts: &CaptureOptions,
    ) -> Result<Capture> {
        let dir = captures_dir(state_dir);
        fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        // The file must be writable by us (tcpdump runs as root with -Z root); make sure its
        // directory exists and resolve it to an absolute path, since `ip netns exec` keeps the cwd
        // but the record should not depend on it.
        let file = if file.is_absolute() {
            file.to_path_buf()
        } else {
            std::env::current_dir()
                .context("current directory")?
                .join(file)
        };
        if let Some(parent) = file.parent() {
            if !parent.as_os_str().is_empty() && !parent.is_dir() {
                bail!(
                    "cannot write capture {}: directory {} does not exist",
                    file.display(),
                    parent.display()
                );
            }
        }
        let nonce = format!(
            "{}-{}-{}",
            link.name(),
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        );
        let log = dir.join(format!("{nonce}.log"));
        let logf =
            fs::File::create(&log).with_context(|| format!("cannot create {}", log.display()))?;

        let mut cmd = netns_exec(netns, "tcpdump");
        cmd.args([
            "-i",
            iface,
            "-n",
            "-U",
            "--immediate-mode",
            // a 64 MiB kernel buffer: a fast transfer (64 KiB GSO packets) is not dropped
            "-B",
            "65536",
            "-Z",
            "root",
            "-s",
        ]);
        cmd.arg(opts.snaplen.unwrap_or(0).to_string());
        cmd.arg("-w").arg(&file);
        if let Some(c) = opts.count {
            cmd.arg("-c").arg(c.to_string());
        }
        if let Some(f) = &opts.filter {
            cmd.arg(f);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(logf));
        let line = render(&cmd);
        log::debug!("lab: {line}");
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot run `{line}` (is tcpdump installed?)"))?;
        let record = CaptureRecord {
            pid: child.id(),
            link,
            file: file.clone(),
            log: log.clone(),
        };
        let record_path = dir.join(format!("{}.json", child.id()));
        fs::write(&record_path, serde_json::to_vec_pretty(&record)?)
            .with_context(|| format!("cannot write {}", record_path.display()))?;

        // Wait until tcpdump says it is listening, so no packet sent after we return is missed.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = fs::read_to_string(&log).unwrap_or_default();
            if text.contains("listening on") {
                break;
            }
            if let Some(status) = child.try_wait()? {
                let _ = fs::remove_file(&record_path);
                bail!(
                    "`{line}` exited ({status}) before capturing: {}",
                    text.trim()
                );
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                let _ = fs::remove_file(&record_path);
                bail!(
                    "`{line}` did not start listening within 10 s: {}",
                    text.trim()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Capture {
            child: Some(child),
            record,
            record_path,
        })
    }

    /// The process id of tcpdump.
    pub fn pid(&self) -> u32 {
        self.record.pid
    }

    /// The pcap file being written.
    pub fn file(&self) -> &Path {
        &self.record.file
    }

    /// The link being captured.
    pub fn link(&self) -> Link {
        self.record.link
    }

    /// Whether tcpdump already exited (e.g. after `count` packets).
    pub fn finished(&mut self) -> Result<bool> {
        match &mut self.child {
            Some(c) => Ok(c.try_wait()?.is_some()),
            None => Ok(true),
        }
    }

    /// Wait for tcpdump to exit by itself (after `count` packets), at most `timeout`.
    /// Returns true if it exited.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<bool> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.finished()? {
                return Ok(true);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.finished()
    }

    /// Stop the capture (SIGINT: tcpdump flushes and closes the file), wait for it and
    /// return tcpdump's packet counts.
    pub fn stop(mut self) -> Result<CaptureStats> {
        self.stop_inner()
    }

    /// Run in the foreground until tcpdump exits by itself (packet count reached), `limit`
    /// elapses, or this process gets SIGINT/SIGTERM (Ctrl-C); then stop cleanly.
    pub fn run_until_interrupted(mut self, limit: Option<Duration>) -> Result<CaptureStats> {
        let _guard = InterruptGuard::install()?;
        let deadline = limit.map(|d| Instant::now() + d);
        while !self.finished()? {
            if INTERRUPTED.load(Ordering::SeqCst) || deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.stop_inner()
    }

    /// Leave tcpdump running after this handle is gone (for `nena lab capture --background`).
    /// `Lab::stop_captures` or `Lab::down` stops it later. Returns its pid.
    pub fn detach(mut self) -> u32 {
        self.child = None;
        self.record.pid
    }

    fn stop_inner(&mut self) -> Result<CaptureStats> {
        let Some(mut child) = self.child.take() else {
            return Ok(CaptureStats::default());
        };
        if child.try_wait()?.is_none() {
            // tcpdump drops what it has not read yet when interrupted: let it drain first
            // (it writes each packet as it reads it, so the file stops growing when done).
            settle(&self.record.file);
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGINT);
            let deadline = Instant::now() + Duration::from_secs(5);
            while child.try_wait()?.is_none() {
                if Instant::now() > deadline {
                    log::warn!("tcpdump {} ignored SIGINT for 5 s; killing it", child.id());
                    let _ = child.kill();
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.wait();
        }
        let stats = parse_stats(&fs::read_to_string(&self.record.log).unwrap_or_default());
        let _ = fs::remove_file(&self.record_path);
        let _ = fs::remove_file(&self.record.log);
        Ok(stats)
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if let Err(e) = self.stop_inner() {
            log::warn!("stopping capture {}: {e:#}", self.record.pid);
        }
    }
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// SIGINT/SIGTERM set a flag while installed; the previous handlers come back on drop.
struct InterruptGuard {
    old: Vec<(Signal, nix::sys::signal::SigAction)>,
}

impl InterruptGuard {
    fn install() -> Result<InterruptGuard> {
        use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet};
        INTERRUPTED.store(false, Ordering::SeqCst);
        let act = SigAction::new(
            SigHandler::Handler(on_interrupt),
            SaFlags::SA_RESTART,
            SigSet::empty(),
        );
        let mut old = Vec::new();
        for sig in [Signal::SIGINT, Signal::SIGTERM] {
            // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
            let prev = unsafe { sigaction(sig, &act) }.context("installing a signal handler")?;
            old.push((sig, prev));
        }
        Ok(InterruptGuard { old })
    }
}

impl Drop for InterruptGuard {
    fn drop(&mut self) {
        for (sig, prev) in &self.old {
            // SAFETY: restoring the handler that was installed before.
            let _ = unsafe { nix::sys::signal::sigaction(*sig, prev) };
        }
    }
}

/// Wait until `file` has not grown for 100 ms (at most 2 s).
pub(crate) fn settle(file: &Path) {
    let size = || fs::metadata(file).map(|m| m.len()).unwrap_or(0);
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut last = size();
    let mut stable_since = Instant::now();
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        let now = size();
        if now != last {
            last = now;
            stable_since = Instant::now();
        } else if stable_since.elapsed() >= Duration::from_millis(100) {
            break;
        }
    }
}

/// Parse tcpdump's closing lines ("12 packets captured", "0 packets dropped by kernel").
pub fn parse_stats(text: &str) -> CaptureStats {
    let mut s = CaptureStats::default();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let (Some(n), Some(_)) = (
            words.next().and_then(|w| w.parse::<u64>().ok()),
            words.next(),
        ) else {
            continue;
        };
        let rest = line.split_once(' ').map(|x| x.1).unwrap_or("");
        let rest = rest.split_once(' ').map(|x| x.1).unwrap_or("");
        if rest == "captured" {
            s.captured = Some(n);
        } else if rest == "dropped by kernel" {
            s.dropped_by_kernel = Some(n);
        }
    }
    s
}

/// Records of captures started for the lab whose state directory is `state_dir`.
pub(crate) fn records(state_dir: &Path) -> Vec<(PathBuf, CaptureRecord)> {
    let mut out = Vec::new();
    let Ok(rd) = fs::read_dir(captures_dir(state_dir)) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "json") {
            if let Some(r) = fs::read(&p)
                .ok()
                .and_then(|b| serde_json::from_slice::<CaptureRecord>(&b).ok())
            {
                out.push((p, r));
            }
        }
    }
    out.sort_by_key(|(_, r)| r.pid);
    out
}

/// Whether `pid` is a live (non-zombie) tcpdump process.
pub(crate) fn is_live_tcpdump(pid: u32) -> bool {
    let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    comm.trim() == "tcpdump" && crate::process::process_alive(pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tcpdump_summary() {
        let t = "tcpdump: listening on trusted, link-type EN10MB (Ethernet), snapshot length 262144 bytes\n\
                 12 packets captured\n14 packets received by filter\n2 packets dropped by kernel\n";
        let s = parse_stats(t);
        assert_eq!(s.captured, Some(12));
        assert_eq!(s.dropped_by_kernel, Some(2));
        assert_eq!(parse_stats("garbage\n"), CaptureStats::default());
    }
}
