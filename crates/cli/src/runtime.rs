//! The async runtime the commands run nena's clients, servers and proxies on. The library
//! crates only hand out futures; choosing the runtime, and what Ctrl-C does to it, is the
//! command's business.

use anyhow::Result;
use std::future::Future;

/// Run a future on a fresh multi-threaded runtime (one worker per core).
pub fn block_on<F: Future>(f: F) -> Result<F::Output> {
    Ok(tokio::runtime::Runtime::new()?.block_on(f))
}

/// Like [`block_on`], but SIGINT (Ctrl-C) or SIGTERM cancels the future (so its temporary
/// files are removed and its connection closed) and is reported as an error naming it.
pub fn block_on_interruptible<T>(f: impl Future<Output = Result<T>>) -> Result<T> {
    block_on(async move {
        tokio::select! {
            r = f => r,
            sig = nena_transport::stop::interrupted() => {
                Err(anyhow::anyhow!("interrupted ({})", sig?))
            }
        }
    })?
}
