//! `nena run`'s watchdog: so that CMD never outlives a `nena run` that was killed. A small
//! process (`nena run-watchdog`, hidden: `nena run` starts it) in a session of its own,
//! outside CMD's cgroup and deaf to SIGINT, SIGTERM and SIGHUP, so that a signal to `nena
//! run`'s process group does not end it too. Its standard input is a pipe whose only writer
//! is `nena run` (the write end is close-on-exec: CMD does not hold it); when `nena run`
//! ends, however it ends (SIGKILL, the OOM killer, a panic), the pipe reads EOF. A `nena
//! run` that ended cleanly has removed its cgroup by then and the watchdog just exits;
//! otherwise it kills what is left in the cgroup (`cgroup.kill`), waits until it is empty and
//! removes it (and with it the programs attached to it), then the temporary cgroup2 mount
//! and the private files it was given. Meanwhile CMD's processes have no network: the
//! cgroup's programs stay attached (nena-bpf's `run`) and the ports they send to are
//! closed.

use anyhow::Context;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The hidden subcommand of `nena` that runs [`watch`].
pub const COMMAND: &str = "run-watchdog";

/// What the watchdog removes when `nena run` ended without doing it.
#[derive(Debug, Clone)]
pub struct Leftovers {
    /// CMD's cgroup directory.
    pub cgroup: PathBuf,
    /// The temporary cgroup2 mount the cgroup is under, if `nena run` made one.
    pub mount: Option<PathBuf>,
    /// Directories of `nena run`'s own to remove.
    pub remove: Vec<PathBuf>,
}

/// The running watchdog: `nena run` holds the pipe's write end until it exits.
pub struct Watchdog {
    _pipe: std::io::PipeWriter,
    pub pid: u32,
}

/// Starts the watchdog of `cgroup` (under the temporary mount `mount`, if any), which also
/// removes `remove` if `nena run` could not: this executable again, as `nena run-watchdog`.
pub fn spawn(cgroup: &Path, mount: Option<&Path>, remove: &[&Path]) -> anyhow::Result<Watchdog> {
    // Both ends close-on-exec: only the watchdog's standard input (dup2) survives its exec.
    let (read, write) = std::io::pipe().context("a pipe for nena run's watchdog")?;
    let mut c = Command::new("/proc/self/exe");
    c.arg(COMMAND).arg("--cgroup").arg(cgroup);
    if let Some(m) = mount {
        c.arg("--mount").arg(m);
    }
    for r in remove {
        c.arg("--remove").arg(r);
    }
    c.stdin(Stdio::from(read)).stdout(Stdio::null());
    // SAFETY: setsid and signal are async-signal-safe.
    unsafe {
        c.pre_exec(|| {
            use nix::sys::signal::{signal, SigHandler, Signal};
            nix::unistd::setsid()?;
            for s in [
                Signal::SIGINT,
                Signal::SIGTERM,
                Signal::SIGHUP,
                Signal::SIGPIPE,
            ] {
                let _ = signal(s, SigHandler::SigIgn);
            }
            Ok(())
        });
    }
    let child = c.spawn().context("starting nena run's watchdog")?;
    Ok(Watchdog {
        _pipe: write,
        pid: child.id(),
    })
}

/// The watchdog itself (`nena run-watchdog`): waits for EOF on its standard input, then
/// removes what `nena run` left.
pub fn watch(l: &Leftovers) {
    let mut sink = [0u8; 64];
    let mut stdin = std::io::stdin().lock();
    loop {
        match stdin.read(&mut sink) {
            Ok(0) => break,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                log::warn!("nena run's watchdog: reading its pipe: {e}");
                break;
            }
        }
    }
    if l.cgroup.exists() {
        log::warn!(
            "nena run ended without removing its cgroup {}: what is left in it is killed and \
             the cgroup removed",
            l.cgroup.display()
        );
        nena_bpf::cgroup::kill_and_remove(&l.cgroup);
    }
    if let Some(m) = &l.mount {
        if m.exists() {
            nena_bpf::cgroup::remove_temp_mount(m);
        }
    }
    for r in &l.remove {
        let _ = std::fs::remove_dir_all(r);
    }
}
