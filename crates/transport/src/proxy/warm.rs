//! Sessions opened ahead of the flows that will take them (`nena gateway --warm N`).
//!
//! A LAN's flows are short and many, and each is a nena session of its own: the MPTCP
//! handshake and nena's (two round trips) would sit in every flow's path. A [`Warm`] pool
//! keeps up to N sessions whose handshake is done and whose open request is not yet sent;
//! a flow takes the freshest one and sends its open request (with its first bytes) at once,
//! and one new session is opened in the taken one's place. Each is as any other session:
//! its own keys, its hello on the trusted path, one flow.
//!
//! The pool is kept fresh by a task of its own, so that no flow finds it expired: the proxy
//! server gives a client `--handshake-timeout` (10 s by default) to send its open request,
//! a session waits at most [`MAX_AGE`], and one is replaced once it is [`refresh
//! age`](Keeping::refresh_age) old (its replacement is ready before it expires; the old one
//! is then ended cleanly). Replacing costs a session's opening on the links (a resumed
//! handshake, about 4 KB on both paths together, `docs/GATEWAY.md`), so the pool keeps fresh
//! only as many sessions as flows took within the last [`IDLE_AFTER`] (all N after a burst,
//! one or two for a flow now and then), and at least [`Keeping::idle`] (`--warm-idle`, 1 by
//! default: the first flow after a pause takes it; 0 lets an idle pool lapse, for a metered
//! link, and the first flow after a pause opens its own).
//! A taken session that turns out to be gone is replaced by a new one in the flow's path
//! (`proxy_open`); so is a flow that finds the pool empty ([`Warm::missed`]).
//!
//! A session whose flow ended with flow-end records both ways (wire `OP_REUSE`, `aead`) is
//! given back ([`Warm::give_back`]) and waits for the next flow as one opened ahead does, for
//! at most [`MAX_AGE`], and is given up [`REUSE_WITHIN`] after its opening. A pool of size 0
//! (a proxy client without `--warm`) opens nothing ahead and holds only these.

use crate::conn::{self, Ahead, ClientConn, ClientOptions, END_WITHIN, REUSE_WITHIN};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// How long a session opened ahead waits for its flow at most.
pub const MAX_AGE: Duration = Duration::from_secs(5);

/// The pool keeps fresh as many sessions as flows took within this window (at least
/// [`Keeping::idle`]); after it without a flow, only [`Keeping::idle`].
pub const IDLE_AFTER: Duration = Duration::from_secs(60);

/// Sessions given back after a flow that a pool holds beyond its size at most (the oldest
/// beyond it are ended).
const KEEP_RETURNED: usize = 16;

/// The longest wait before trying again after sessions opened ahead failed to open (the
/// waits double from 1 s).
const RETRY_AT_MOST: Duration = Duration::from_secs(60);

/// How a pool keeps its sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keeping {
    /// Sessions kept ready while flows come (`--warm`).
    pub size: usize,
    /// Sessions kept ready once no flow came for `idle_after` (`--warm-idle`, at most `size`).
    pub idle: usize,
    /// How long a session may wait for its flow (below the server's handshake timeout).
    pub max_age: Duration,
    /// The window over which flows are counted: the pool keeps fresh as many sessions as
    /// flows took within it (at least `idle`, at most `size`).
    pub idle_after: Duration,
    /// How long after its opening a session given back after a flow is kept for the next
    /// one ([`REUSE_WITHIN`]); an older one is ended.
    pub reuse_within: Duration,
}

impl Keeping {
    /// `size` sessions, 1 of them kept while idle, [`MAX_AGE`], [`IDLE_AFTER`].
    pub fn new(size: usize) -> Keeping {
        Keeping {
            size,
            idle: size.min(1),
            max_age: MAX_AGE,
            idle_after: IDLE_AFTER,
            reuse_within: REUSE_WITHIN,
        }
    }

    /// The age at which a session is replaced: 70% of `max_age` (3.5 s of 5), leaving its
    /// replacement the rest to open.
    pub fn refresh_age(&self) -> Duration {
        self.max_age * 7 / 10
    }

    /// Sessions to keep ready at `now`: as many as flows took within the last `idle_after`
    /// (`takes`, oldest first; older ones are dropped from it), at least `idle` and at most
    /// `size` (a burst keeps the whole pool fresh for a while; a flow now and then, a
    /// session or two; none for a while, `idle`).
    fn keep_now(&self, takes: &mut VecDeque<Instant>, now: Instant) -> usize {
        while takes
            .front()
            .is_some_and(|t| now.duration_since(*t) >= self.idle_after)
        {
            takes.pop_front();
        }
        takes.len().clamp(self.idle.min(self.size), self.size)
    }
}

/// Up to `size` sessions opened ahead, kept fresh.
pub struct Warm {
    inner: Arc<Inner>,
    /// The task that keeps the pool (started by the first [`Warm::fill`] or take).
    keeper: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

struct Inner {
    keeping: Keeping,
    /// How the pool's sessions are opened (set once, by the first fill or take).
    opts: OnceLock<ClientOptions>,
    state: Mutex<State>,
    /// Sessions being opened.
    opening: AtomicUsize,
    /// Sessions taken by a flow.
    taken: AtomicUsize,
    /// Flows that found no session ready.
    missed: AtomicUsize,
    /// Sessions replaced before they expired.
    replaced: AtomicUsize,
    /// Sessions given back after a flow, for the next one.
    given_back: AtomicUsize,
    /// Tells the keeper to look again (a take, a session opened or failed).
    changed: Notify,
    /// The pool is closed: a session that finishes opening now is ended at once.
    closed: std::sync::atomic::AtomicBool,
}

struct State {
    /// Sessions ready, with when each was ready, oldest first.
    ready: Vec<(Instant, ClientConn)>,
    /// When flows took from the pool within the last `idle_after` (at most `size` kept).
    takes: VecDeque<Instant>,
    /// Failed openings in a row, and when the keeper may try again.
    failures: u32,
    retry_at: Option<Instant>,
}

impl Warm {
    pub fn new(size: usize) -> Warm {
        Warm::keeping(Keeping::new(size))
    }

    pub fn keeping(keeping: Keeping) -> Warm {
        Warm {
            inner: Arc::new(Inner {
                keeping: Keeping {
                    idle: keeping.idle.min(keeping.size),
                    ..keeping
                },
                opts: OnceLock::new(),
                state: Mutex::new(State {
                    ready: Vec::new(),
                    // It begins as after a burst: the whole pool, for `idle_after`.
                    takes: std::iter::repeat_n(Instant::now(), keeping.size).collect(),
                    failures: 0,
                    retry_at: None,
                }),
                opening: AtomicUsize::new(0),
                taken: AtomicUsize::new(0),
                missed: AtomicUsize::new(0),
                replaced: AtomicUsize::new(0),
                given_back: AtomicUsize::new(0),
                changed: Notify::new(),
                closed: std::sync::atomic::AtomicBool::new(false),
            }),
            keeper: Mutex::new(None),
        }
    }

    /// Start keeping the pool with sessions opened as `opts` says (the first call decides;
    /// later ones only wake the keeper): it opens sessions until `size` are ready or being
    /// opened, each in a task of its own.
    pub fn fill(&self, opts: &ClientOptions) {
        let _ = self.inner.opts.set(ClientOptions {
            // The pool's own sessions take nothing from it.
            warm: None,
            ..opts.clone()
        });
        let mut keeper = self.keeper.lock().unwrap_or_else(|e| e.into_inner());
        if keeper.is_none() && !self.inner.closed.load(Ordering::Relaxed) {
            *keeper = Some(tokio::spawn(self.inner.clone().keep()));
        }
        self.inner.changed.notify_one();
    }

    /// Sessions taken by flows so far.
    pub fn taken(&self) -> usize {
        self.inner.taken.load(Ordering::Relaxed)
    }

    /// Flows so far that found no session ready (each opened its own in its path).
    pub fn missed(&self) -> usize {
        self.inner.missed.load(Ordering::Relaxed)
    }

    /// Sessions replaced so far before they expired.
    pub fn replaced(&self) -> usize {
        self.inner.replaced.load(Ordering::Relaxed)
    }

    /// Sessions given back after a flow so far (each then carried the next flow that took
    /// it, or expired).
    pub fn given_back(&self) -> usize {
        self.inner.given_back.load(Ordering::Relaxed)
    }

    /// Sessions ready now.
    pub fn ready(&self) -> usize {
        self.inner.lock().ready.len()
    }

    /// Stop keeping the pool and end every ready session cleanly (the gateway's end).
    pub async fn close(&self) {
        self.inner.closed.store(true, Ordering::Relaxed);
        if let Some(k) = self.keeper.lock().unwrap_or_else(|e| e.into_inner()).take() {
            k.abort();
        }
        let ready = std::mem::take(&mut self.inner.lock().ready);
        for (_, c) in ready {
            c.end(END_WITHIN).await;
        }
    }
}

impl Drop for Warm {
    fn drop(&mut self) {
        if let Some(k) = self
            .keeper
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            k.abort();
        }
    }
}

impl std::fmt::Debug for Warm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Warm")
            .field("keeping", &self.inner.keeping)
            .field("ready", &self.ready())
            .field("opening", &self.inner.opening.load(Ordering::Relaxed))
            .finish()
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn keep_now(&self, st: &mut State, now: Instant) -> usize {
        self.keeping.keep_now(&mut st.takes, now)
    }

    /// The keeper: tends the pool, then sleeps until the next session is due for
    /// replacement (or expires, or a retry is due), or until something changed.
    async fn keep(self: Arc<Self>) {
        loop {
            let next = self.tend();
            match next {
                Some(at) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(at) => {}
                        _ = self.changed.notified() => {}
                    }
                }
                None => self.changed.notified().await,
            }
        }
    }

    /// Ends expired sessions, opens what the pool lacks (fresh sessions count; those due for
    /// replacement do not), and returns when to look again.
    fn tend(self: &Arc<Self>) -> Option<Instant> {
        let opts = self.opts.get()?;
        let now = Instant::now();
        let (refresh, max_age) = (self.keeping.refresh_age(), self.keeping.max_age);
        let mut st = self.lock();
        ClientConn::end_stale(&mut st.ready, max_age);
        let fresh = st
            .ready
            .iter()
            .filter(|(t, _)| now.duration_since(*t) < refresh)
            .count();
        let mut next = st
            .ready
            .iter()
            .map(|(t, _)| {
                if now.duration_since(*t) < refresh {
                    *t + refresh
                } else {
                    *t + max_age
                }
            })
            .min();
        let waiting = st.retry_at.filter(|at| *at > now);
        let lacking = match waiting {
            Some(at) => {
                next = Some(next.map_or(at, |n| n.min(at)));
                0
            }
            None => self
                .keep_now(&mut st, now)
                .saturating_sub(fresh + self.opening.load(Ordering::Relaxed)),
        };
        drop(st);
        for _ in 0..lacking {
            self.opening.fetch_add(1, Ordering::Relaxed);
            let (inner, opts) = (self.clone(), opts.clone());
            tokio::spawn(async move {
                let opened = conn::connect(&opts, None).await;
                inner.opening.fetch_sub(1, Ordering::Relaxed);
                inner.opened(opened);
            });
        }
        next
    }

    /// A session opened ahead is ready (the oldest ones beyond what the pool keeps now are
    /// ended: they were due for replacement), or failed (the keeper waits before trying
    /// again, from 1 s doubling to [`RETRY_AT_MOST`]).
    fn opened(&self, opened: crate::error::Result<ClientConn>) {
        let now = Instant::now();
        let mut st = self.lock();
        match opened {
            Ok(c) if self.closed.load(Ordering::Relaxed) => c.end_later(END_WITHIN),
            Ok(c) => {
                st.failures = 0;
                st.retry_at = None;
                st.ready.push((now, c));
                let keep = self.keep_now(&mut st, now).max(1);
                while st.ready.len() > keep {
                    let (_, old) = st.ready.remove(0);
                    self.replaced.fetch_add(1, Ordering::Relaxed);
                    old.end_later(END_WITHIN);
                }
            }
            Err(e) => {
                st.failures = st.failures.saturating_add(1);
                let wait = Duration::from_secs(1 << (st.failures - 1).min(6)).min(RETRY_AT_MOST);
                st.retry_at = Some(now + wait);
                log::debug!(
                    "a session opened ahead failed ({} in a row; next try in {wait:?}): {e:#}",
                    st.failures
                );
            }
        }
        drop(st);
        self.changed.notify_one();
    }
}

impl Ahead for Warm {
    fn take(&self, opts: &ClientOptions) -> Option<ClientConn> {
        // Expired ones carried nothing: the proxy server sees their end before any request.
        let got = {
            let mut st = self.inner.lock();
            ClientConn::end_stale(&mut st.ready, self.inner.keeping.max_age);
            if st.takes.len() >= self.inner.keeping.size.max(1) {
                st.takes.pop_front();
            }
            st.takes.push_back(Instant::now());
            st.ready.pop().map(|(_, c)| c)
        };
        match &got {
            Some(c) => {
                self.inner.taken.fetch_add(1, Ordering::Relaxed);
                // Its data begins now, after its wait: the receive buffer may grow as a new
                // session's does (`low_water::widen_for_data`).
                if let Some(g) = &c.gate {
                    use std::os::fd::AsRawFd;
                    crate::stream::low_water::widen_for_data(g.fd().as_raw_fd());
                }
            }
            None => {
                self.inner.missed.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.fill(opts);
        got
    }

    fn give_back(&self, mut c: ClientConn) {
        c.reused = true;
        if self.inner.closed.load(Ordering::Relaxed)
            || c.opened.elapsed() >= self.inner.keeping.reuse_within
        {
            c.end_later(END_WITHIN);
            return;
        }
        let mut st = self.inner.lock();
        st.ready.push((Instant::now(), c));
        while st.ready.len() > self.inner.keeping.size.max(KEEP_RETURNED) {
            let (_, old) = st.ready.remove(0);
            old.end_later(END_WITHIN);
        }
        drop(st);
        self.inner.given_back.fetch_add(1, Ordering::Relaxed);
        self.inner.changed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_keeps_as_many_as_flows_took_lately_within_its_bounds() {
        let k = Keeping {
            size: 8,
            idle: 1,
            max_age: MAX_AGE,
            idle_after: Duration::from_secs(60),
            reuse_within: REUSE_WITHIN,
        };
        let t0 = Instant::now();
        let s = Duration::from_secs;
        // None taken: the idle share.
        assert_eq!(k.keep_now(&mut VecDeque::new(), t0), 1);
        // A flow now and then: as many as took within the window.
        let mut takes: VecDeque<Instant> = [t0, t0 + s(30)].into();
        assert_eq!(k.keep_now(&mut takes, t0 + s(40)), 2);
        // The first has left the window (60 s after it): dropped, one left.
        assert_eq!(k.keep_now(&mut takes, t0 + s(60)), 1);
        assert_eq!(takes, [t0 + s(30)]);
        // A burst: at most the pool's size.
        let mut burst: VecDeque<Instant> = std::iter::repeat_n(t0, 20).collect();
        assert_eq!(k.keep_now(&mut burst, t0 + s(1)), 8);
        // Long after it: the idle share again, and with --warm-idle 0, none.
        assert_eq!(k.keep_now(&mut burst, t0 + s(61)), 1);
        assert!(burst.is_empty());
        let lapse = Keeping { idle: 0, ..k };
        assert_eq!(lapse.keep_now(&mut burst, t0 + s(61)), 0);
    }

    #[test]
    fn a_session_is_replaced_with_time_left_before_it_expires() {
        let k = Keeping::new(8);
        assert_eq!(k.refresh_age(), Duration::from_millis(3500));
        assert!(k.refresh_age() < k.max_age);
        assert_eq!((k.size, k.idle), (8, 1));
        assert_eq!(Keeping::new(0).idle, 0);
    }
}
