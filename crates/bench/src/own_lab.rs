//! A lab bench's own lab: brought up, the bench run in it on a worker thread, torn down
//! after. On Ctrl-C the lab is torn down at once and [`nena_lab::Interrupted`] returned
//! without waiting for the worker, for the caller to exit on. Used by the transfer,
//! aggregation, peers and sessions benches.

use anyhow::{Context, Result};
use nena_lab::{with_lab_teardown_on_interrupt, LabConfig, LabGuard};
use std::time::Instant;

/// Bring up the lab `cfg`, run `work` with its prefix, and tear the lab down.
pub fn in_own_lab<T: Send + 'static>(
    cfg: &LabConfig,
    work: impl FnOnce(&str) -> Result<T> + Send + 'static,
) -> Result<T> {
    let started = Instant::now();
    let guard = LabGuard::up(cfg).context("bringing up the bench lab")?;
    log::info!(
        "lab {} up in {:.1}s",
        cfg.prefix,
        started.elapsed().as_secs_f64()
    );
    let prefix = cfg.prefix.clone();
    let result = with_lab_teardown_on_interrupt(&cfg.prefix, move || work(&prefix));
    drop(guard);
    result
}
