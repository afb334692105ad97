//! Sessions opened ahead of the flows that will take them (`nena gateway --warm N`).
//!
//! A LAN's flows are short and many, and each is a nena session of its own: the MPTCP
//! handshake and nena's (two round trips) would sit in every flow's path. A [`Warm`] pool
//! keeps up to N sessions whose handshake is done and whose open request is not yet sent;
//! a flow takes the freshest one and sends its open request (with its first bytes) at once,
//! and one new session is opened in the taken one's place. Each is as any other session:
//! its own keys, its hello on the trusted path, one flow. A session waits at most
//! [`MAX_AGE`] (the proxy server gives a client `--handshake-timeout`, 10 s by default, to
//! send its open request) and is then ended cleanly, so an idle gateway keeps none open for
//! long. A taken session that turns out to be gone is replaced by a new one in the flow's
//! path (`proxy_open`).

use crate::conn::{self, Ahead, ClientConn, ClientOptions, END_WITHIN};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a session opened ahead waits for its flow at most.
pub const MAX_AGE: Duration = Duration::from_secs(5);

/// Up to `size` sessions opened ahead.
pub struct Warm {
    inner: Arc<Inner>,
}

struct Inner {
    size: usize,
    /// Sessions ready, with when each was ready.
    ready: Mutex<Vec<(Instant, ClientConn)>>,
    /// Sessions being opened.
    opening: AtomicUsize,
    /// Sessions taken by a flow.
    taken: AtomicUsize,
}

impl Warm {
    pub fn new(size: usize) -> Warm {
        Warm {
            inner: Arc::new(Inner {
                size,
                ready: Mutex::new(Vec::new()),
                opening: AtomicUsize::new(0),
                taken: AtomicUsize::new(0),
            }),
        }
    }

    /// Open sessions until `size` are ready or being opened (in tasks of their own).
    pub fn fill(&self, opts: &ClientOptions) {
        let ready = self.inner.lock().len();
        let opening = self.inner.opening.load(Ordering::Relaxed);
        for _ in (ready + opening)..self.inner.size {
            let inner = self.inner.clone();
            let opts = ClientOptions {
                // The pool's own sessions take nothing from it.
                warm: None,
                ..opts.clone()
            };
            inner.opening.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                let opened = conn::connect(&opts, None).await;
                inner.opening.fetch_sub(1, Ordering::Relaxed);
                match opened {
                    Ok(c) => inner.lock().push((Instant::now(), c)),
                    Err(e) => log::debug!("a session opened ahead failed: {e:#}"),
                }
            });
        }
    }

    /// Sessions taken by flows so far.
    pub fn taken(&self) -> usize {
        self.inner.taken.load(Ordering::Relaxed)
    }

    /// End every ready session cleanly (the gateway's end).
    pub async fn close(&self) {
        let ready = std::mem::take(&mut *self.inner.lock());
        for (_, c) in ready {
            c.end(END_WITHIN).await;
        }
    }
}

impl std::fmt::Debug for Warm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Warm")
            .field("size", &self.inner.size)
            .field("ready", &self.inner.lock().len())
            .field("opening", &self.inner.opening.load(Ordering::Relaxed))
            .finish()
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Instant, ClientConn)>> {
        self.ready.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Ahead for Warm {
    fn take(&self, opts: &ClientOptions) -> Option<ClientConn> {
        // Stale ones carried nothing: the proxy server sees their end before any request.
        let got = {
            let mut ready = self.inner.lock();
            ClientConn::end_stale(&mut ready, MAX_AGE);
            ready.pop().map(|(_, c)| c)
        };
        if let Some(c) = &got {
            self.inner.taken.fetch_add(1, Ordering::Relaxed);
            // Its data begins now, after its wait: the receive buffer may grow as a new
            // session's does (`low_water::widen_for_data`).
            if let Some(g) = &c.gate {
                use std::os::fd::AsRawFd;
                crate::stream::low_water::widen_for_data(g.fd().as_raw_fd());
            }
        }
        self.fill(opts);
        got
    }
}
