//! Running the iproute2 tools (`ip`, `tc`) and reporting their failures clearly:
//! every error names the full command line and carries the tool's stderr.

use anyhow::{bail, Context, Result};
use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};

/// The command line as a shell would show it, for error messages and logs.
pub fn render(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

fn output(mut cmd: Command) -> Result<(String, Output)> {
    let line = render(&cmd);
    log::debug!("lab: {line}");
    // If nena dies while the tool runs (killed during `lab up`), the tool dies too instead of
    // finishing its change after a `lab down` has already looked (seen in CI: a namespace
    // created by an orphaned `ip netns add` survived the `down` that followed the kill).
    // A parent that died between the fork and the prctl sends no signal: the child then
    // finds itself adopted and does not run the tool.
    let parent = std::process::id();
    // SAFETY: prctl and getppid are async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(std::io::Error::from)?;
            if nix::unistd::getppid().as_raw() as u32 != parent {
                return Err(std::io::Error::other("nena exited before the tool started"));
            }
            Ok(())
        });
    }
    let out = cmd.stdin(Stdio::null()).output().with_context(|| {
        format!("cannot run `{line}` (is iproute2 installed? see scripts/install-deps.sh)")
    })?;
    Ok((line, out))
}

/// Run a command; fail with `` `cmd` failed (status): stderr `` unless it exits 0. Returns stdout.
pub fn run(cmd: Command) -> Result<String> {
    let (line, out) = output(cmd)?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        bail!("`{line}` failed ({}): {}", out.status, err.trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Run a command and report only whether it exited 0 (for probes like "does this link exist").
pub fn probe(cmd: Command) -> Result<bool> {
    let (_, out) = output(cmd)?;
    Ok(out.status.success())
}

/// Run a command whose failure is acceptable when its stderr contains one of `benign`
/// (for example deleting a qdisc that is not there). Other failures are errors.
pub fn run_tolerant(cmd: Command, benign: &[&str]) -> Result<()> {
    let (line, out) = output(cmd)?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    if benign.iter().any(|b| err.contains(b)) {
        log::debug!("lab: `{line}`: tolerated: {}", err.trim());
        return Ok(());
    }
    bail!("`{line}` failed ({}): {}", out.status, err.trim())
}

/// `ip [-n NS] ARGS...`.
pub fn ip(ns: Option<&str>, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    if let Some(ns) = ns {
        c.args(["-n", ns]);
    }
    c.args(args);
    c
}

/// `tc -n NS ARGS...`.
pub fn tc(ns: &str, args: &[&str]) -> Command {
    let mut c = Command::new("tc");
    c.args(["-n", ns]);
    c.args(args);
    c
}

/// `ip netns exec NS PROGRAM ARGS...`.
pub fn netns_exec<S: AsRef<std::ffi::OsStr>>(ns: &str, program: S) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]);
    c.arg(program);
    c
}
