//! The async runtime the commands run nena's clients, servers and proxies on. The library
//! crates only hand out futures; choosing the runtime, and what Ctrl-C does to it, is the
//! command's business.

use anyhow::Result;
use std::future::Future;

/// Run a future on a fresh multi-threaded runtime (one worker per core).
pub fn block_on<F: Future>(f: F) -> Result<F::Output> {
    Ok(tokio::runtime::Runtime::new()?.block_on(f))
}

/// The threads a long-running command (the proxies) runs its sessions on (`--threads`).
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct Threads {
    /// Threads the sessions run on: 1 (the default) runs them all on one thread, 0 one
    /// thread per core. One thread costs the least CPU per byte, because no wake-up crosses
    /// from one thread to another (where the CPU set the pace, the lab's proxy pair used 16%
    /// less CPU per GB at the client and 8% at the server than with a thread per core:
    /// docs/BENCHMARKS.md), and one core seals and opens several GB/s; a proxy whose many
    /// busy sessions need more than one core at once takes more.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub threads: usize,
}

impl Threads {
    /// Run `f` on a fresh runtime with these threads.
    pub fn block_on<F: Future>(self, f: F) -> Result<F::Output> {
        let rt = match self.threads {
            // The caller's thread. (An idle session holds no buffer, so what the allocator
            // does with the main thread's freed memory does not make idle sessions big:
            // `nena bench sessions`, docs/BENCHMARKS.md.)
            1 => tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?,
            0 => tokio::runtime::Runtime::new()?,
            n => tokio::runtime::Builder::new_multi_thread()
                .worker_threads(n)
                .enable_all()
                .build()?,
        };
        Ok(rt.block_on(f))
    }
}

/// Like [`block_on`], but SIGINT (Ctrl-C) or SIGTERM cancels the future (so its temporary
/// files are removed and its connection closed) and is reported as an error naming it.
pub fn block_on_interruptible<T>(
    f: impl Future<Output = Result<T, nena_transport::Error>>,
) -> Result<T, nena_transport::Error> {
    block_on(async move {
        tokio::select! {
            r = f => r,
            sig = nena_transport::ops::stop::interrupted() => {
                Err(nena_transport::Error::Interrupted { signal: sig? })
            }
        }
    })?
}
