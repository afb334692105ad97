//! The lab's processes: whether one is alive, stopping them (SIGTERM, then SIGKILL), the
//! processes of a namespace, and the relays of a lab (a leaf: the lab's parts use it).

use crate::run::{ip, run};
use anyhow::Result;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::fs;
use std::time::{Duration, Instant};

/// Whether a process exists and is not a zombie.
pub(crate) fn process_alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // state is the field after the parenthesised comm
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next());
            !matches!(state, Some("Z") | Some("X") | None)
        }
        Err(_) => false,
    }
}

/// Terminate processes: SIGTERM, wait up to `grace`, then SIGKILL. Never signals ourselves.
pub(crate) fn terminate(pids: &[u32], grace: Duration) {
    let me = std::process::id();
    let pids: Vec<u32> = pids.iter().copied().filter(|&p| p != me && p > 1).collect();
    for &p in &pids {
        let _ = kill(Pid::from_raw(p as i32), Signal::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline && pids.iter().any(|&p| process_alive(p)) {
        std::thread::sleep(Duration::from_millis(20));
    }
    for &p in &pids {
        if process_alive(p) {
            log::warn!("lab: process {p} ignored SIGTERM; killing it");
            let _ = kill(Pid::from_raw(p as i32), Signal::SIGKILL);
        }
    }
}

/// The processes in network namespace `ns`.
pub(crate) fn netns_pids(ns: &str) -> Result<Vec<u32>> {
    let out = run(ip(None, &["netns", "pids", ns]))?;
    Ok(out
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect())
}

/// Whether a process's command line is the relay of lab `prefix` (`... relay --prefix P`).
fn is_relay_of(pid: u32, prefix: &str) -> bool {
    let Ok(b) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<&[u8]> = b.split(|&c| c == 0).collect();
    args.contains(&&b"relay"[..])
        && args
            .windows(2)
            .any(|w| w[0] == b"--prefix" && w[1] == prefix.as_bytes())
}

/// Processes whose command line names one of `names` as a whole argument (`ip netns add
/// P-client`, `ip -n P-router ...`), other than this one: what a `lab up` that was killed
/// may have left running (its tools die with it, but one still in a system call finishes
/// that call first, and may create a namespace after a `lab down` looked).
pub(crate) fn naming(names: &[String]) -> Vec<u32> {
    let me = std::process::id();
    let mut pids = Vec::new();
    let Ok(rd) = fs::read_dir("/proc") else {
        return pids;
    };
    for e in rd.flatten() {
        let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if p == me || !process_alive(p) {
            continue;
        }
        let Ok(b) = fs::read(format!("/proc/{p}/cmdline")) else {
            continue;
        };
        if b.split(|&c| c == 0)
            .any(|a| names.iter().any(|n| n.as_bytes() == a))
        {
            pids.push(p);
        }
    }
    pids
}

/// The relay processes of lab `prefix`: the recorded pid if it is one, and any other found
/// by scanning /proc (a relay left by a crash).
pub(crate) fn relay_pids(prefix: &str, recorded: Option<u32>) -> Vec<u32> {
    let mut pids: Vec<u32> = recorded
        .into_iter()
        .filter(|&p| process_alive(p) && is_relay_of(p, prefix))
        .collect();
    if let Ok(rd) = fs::read_dir("/proc") {
        for e in rd.flatten() {
            if let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) {
                if !pids.contains(&p) && process_alive(p) && is_relay_of(p, prefix) {
                    pids.push(p);
                }
            }
        }
    }
    pids.retain(|&p| p != std::process::id());
    pids
}
