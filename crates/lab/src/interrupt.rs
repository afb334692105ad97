//! Ctrl-C while work runs on a lab: the lab is torn down and the caller gets
//! [`Interrupted`] at once (the work's thread is left behind, to die with the process). The
//! library never exits the process: the CLI turns [`Interrupted`] into exit status 130.

use crate::Lab;
use anyhow::{anyhow, Result};
use std::fmt;

/// Ctrl-C came before the work ended; the lab `prefix` was removed. Found in an
/// `anyhow::Error` with `downcast_ref`; its message is `interrupted; lab PREFIX removed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interrupted {
    pub prefix: String,
}

impl fmt::Display for Interrupted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "interrupted; lab {} removed", self.prefix)
    }
}

impl std::error::Error for Interrupted {}

/// Run `work` on a worker thread while this thread waits for it or for Ctrl-C; on Ctrl-C
/// the lab `prefix` is torn down (its servers and runs die with the namespaces) and
/// [`Interrupted`] is returned without waiting for the worker, which the caller is expected
/// to leave behind by exiting (the CLI: status 130).
pub fn with_lab_teardown_on_interrupt<T: Send + 'static>(
    prefix: &str,
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    with_teardown_on_interrupt(prefix, || {}, work)
}

/// [`with_lab_teardown_on_interrupt`], and `also` run after the lab is removed on Ctrl-C
/// (for what the work set up beside the lab: the scenario runner's congestion controls).
/// A panic of the worker is resumed on this thread.
pub fn with_teardown_on_interrupt<T: Send + 'static>(
    prefix: &str,
    also: impl FnOnce(),
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    let worker = std::thread::spawn(move || {
        let _ = tx.send(work());
    });
    let done = rt.block_on(async {
        tokio::select! {
            r = rx => Some(r),
            _ = tokio::signal::ctrl_c() => None,
        }
    });
    match done {
        Some(Ok(r)) => {
            let _ = worker.join();
            r
        }
        // The sender dropped without a result: the worker panicked.
        Some(Err(_)) => match worker.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => Err(anyhow!("the worker thread died")),
        },
        None => {
            let _ = Lab::down(prefix);
            also();
            Err(Interrupted {
                prefix: prefix.to_string(),
            }
            .into())
        }
    }
}
