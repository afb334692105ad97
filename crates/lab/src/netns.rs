//! Running Rust code inside a lab host: a thread that `setns()`-es into the host's network
//! namespace. Sockets created there stay in that namespace even when used elsewhere, so a
//! test can open a listener "on the server" and connect to it "from the client" in-process.

use anyhow::{anyhow, Context, Result};
use nix::sched::{setns, CloneFlags};
use std::fs::File;
use std::path::PathBuf;

/// Where `ip netns add NAME` binds a namespace.
pub fn netns_path(name: &str) -> PathBuf {
    PathBuf::from("/run/netns").join(name)
}

/// Whether the named namespace exists (as `ip netns` sees it).
pub fn netns_exists(name: &str) -> bool {
    netns_path(name).exists()
}

/// Move the calling thread into the named network namespace.
pub fn enter_current_thread(name: &str) -> Result<()> {
    let path = netns_path(name);
    let f = File::open(&path)
        .with_context(|| format!("cannot open network namespace {}", path.display()))?;
    setns(&f, CloneFlags::CLONE_NEWNET).with_context(|| format!("setns into {name}"))?;
    Ok(())
}

/// Run `f` on a scoped thread inside the named network namespace and return its result.
pub fn run_in<T, F>(name: &str, f: F) -> Result<T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    std::thread::scope(|s| {
        s.spawn(|| {
            enter_current_thread(name)?;
            Ok(f())
        })
        .join()
        .map_err(|_| anyhow!("thread inside {name} panicked"))?
    })
}

/// Spawn a thread inside the named network namespace running `f` (for servers in tests).
pub fn spawn_in<T, F>(name: &str, f: F) -> std::thread::JoinHandle<Result<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let name = name.to_string();
    std::thread::spawn(move || {
        enter_current_thread(&name)?;
        Ok(f())
    })
}
