//! What the production code logs, kept for the net_* tests that check a line it says (a
//! first contact said once, why a datagram was dropped): a logger for the whole test binary
//! that keeps every record at info and above, and a wait for a line that wakes on each new
//! record (no polling).

#![allow(dead_code)]

use std::sync::{Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::Notify;

/// Every record so far, as `LEVEL message`.
static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn notify() -> &'static Notify {
    static N: OnceLock<Notify> = OnceLock::new();
    N.get_or_init(Notify::new)
}

struct Keep;

impl log::Log for Keep {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.level() <= log::Level::Info
    }
    fn log(&self, r: &log::Record) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let line = format!("{} {}", r.level(), r.args());
        LINES.lock().unwrap_or_else(|e| e.into_inner()).push(line);
        notify().notify_waiters();
    }
    fn flush(&self) {}
}

/// Installs the logger (once per test binary; later calls do nothing).
pub fn keep() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        log::set_logger(&Keep).expect("no other logger in this test binary");
        log::set_max_level(log::LevelFilter::Info);
    });
}

/// The lines so far that contain `part` (tests of one binary run at once: each looks for a
/// part of its own, an address or a path).
pub fn lines_with(part: &str) -> Vec<String> {
    LINES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|l| l.contains(part))
        .cloned()
        .collect()
}

/// Waits (at most `within`) for a line that contains every one of `parts`; returns it.
pub async fn wait_for(parts: &[&str], within: Duration) -> String {
    let found = || {
        LINES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|l| parts.iter().all(|p| l.contains(p)))
            .cloned()
    };
    let wait = async {
        loop {
            let next = notify().notified();
            tokio::pin!(next);
            next.as_mut().enable();
            if let Some(l) = found() {
                return l;
            }
            next.await;
        }
    };
    match tokio::time::timeout(within, wait).await {
        Ok(l) => l,
        Err(_) => panic!(
            "no line with {parts:?} within {within:?}; lines with the first: {:?}",
            lines_with(parts[0])
        ),
    }
}

/// Waits (at most `within`) until `n` lines contain every one of `parts`; returns them.
pub async fn wait_for_n(parts: &[&str], n: usize, within: Duration) -> Vec<String> {
    let found = || {
        let l: Vec<String> = LINES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|l| parts.iter().all(|p| l.contains(p)))
            .cloned()
            .collect();
        (l.len() >= n).then_some(l)
    };
    let wait = async {
        loop {
            let next = notify().notified();
            tokio::pin!(next);
            next.as_mut().enable();
            if let Some(l) = found() {
                return l;
            }
            next.await;
        }
    };
    match tokio::time::timeout(within, wait).await {
        Ok(l) => l,
        Err(_) => panic!(
            "fewer than {n} lines with {parts:?} within {within:?}: {:?}",
            lines_with(parts[0])
        ),
    }
}
