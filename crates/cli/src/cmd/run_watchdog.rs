//! `nena run-watchdog` (hidden: `nena run` starts it): its arguments; the watchdog itself,
//! which kills and removes CMD's cgroup if `nena run` is killed, is nena-transport's
//! `launch::watchdog`.

use crate::exit::Exit;
use nena_transport::launch::watchdog::{self, Leftovers};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct WatchdogArgs {
    /// CMD's cgroup directory.
    #[arg(long)]
    pub cgroup: PathBuf,
    /// The temporary cgroup2 mount the cgroup is under, if `nena run` made one.
    #[arg(long)]
    pub mount: Option<PathBuf>,
    /// Directories of `nena run`'s own to remove.
    #[arg(long)]
    pub remove: Vec<PathBuf>,
}

/// `nena run-watchdog`: waits for EOF, then removes what `nena run` left.
pub fn watchdog(a: WatchdogArgs) -> Result<(), Exit> {
    watchdog::watch(&Leftovers {
        cgroup: a.cgroup,
        mount: a.mount,
        remove: a.remove,
    });
    Ok(())
}
