//! The first-flight hold of the in-kernel path manager: while a connection's first flight is
//! unacknowledged, nothing of it with payload may leave by an interface that is not trusted.
//!
//! The in-kernel path manager opens subflows by itself (`subflow` endpoints, the server's
//! ADD_ADDR), and the kernel may send the first flight on an untrusted one as soon as it has
//! joined, which on a link with a round trip of tens of microseconds is sooner than the gate
//! can close it. A [`FlightHold`] closes that race in the kernel: nena-bpf's `hold` program
//! drops, at the egress of the nena process's cgroup, every payload-carrying segment of a
//! held connection that leaves by an interface outside the held set, and counts it. The
//! gate holds a connection from its connect until its first flight is acknowledged and
//! every untrusted subflow that joined meanwhile is closed (so the segments TCP still keeps
//! queued on it never leave).
//!
//! The hold ends in one of two ways. At the gate's proceed (the first flight acknowledged,
//! no untrusted subflow holding any of it) it is released at once ([`Held::release`]). On
//! any other exit (a refusal, a timeout, a cancelled wait, an I/O error, a gate dropped
//! unfinished) the gate closes the connection's untrusted subflows and resets it, and the
//! entry stays until the connection is gone from the kernel ([`Held::keep_until_gone`]): a
//! subflow nena could not close (no `CONFIG_INET_DIAG_DESTROY`), or a reset that did not
//! happen, would otherwise carry the unacknowledged first flight the moment the entry went.
//! A reaper thread looks the held tokens up (`sock_diag`, every 100 ms) and releases each
//! once its connection is gone.
//!
//! This crate cannot load BPF (nena-bpf depends on it), so the program that can is
//! [`provide`]d by the binary at start. A process that provides none (a library user) keeps
//! the gate's own, slower reaction, as before; one whose provider fails (no CAP_BPF, no
//! cgroup2) has its in-kernel-PM connections refused with the reason.

use std::sync::OnceLock;

/// Holds connections by token (see the module doc).
pub trait FlightHold: Send + Sync {
    /// From now on, payload of the connection with local `token` leaves only by the
    /// interfaces `trusted` (indexes).
    fn hold(&self, token: u32, trusted: &[u32]) -> Result<(), String>;
    /// Lets the connection's payload leave by any interface again.
    fn release(&self, token: u32);
    /// Packets of the connection the hold dropped so far (`None`: not held).
    fn dropped(&self, token: u32) -> Option<u64>;
}

type Factory = fn() -> Result<Box<dyn FlightHold>, String>;

static FACTORY: OnceLock<Factory> = OnceLock::new();
static HOLD: OnceLock<Result<Box<dyn FlightHold>, String>> = OnceLock::new();

/// Installs the process's hold, made by `factory` at the first in-kernel-PM connection (and
/// only then: a process that never needs it loads nothing). The first call wins.
pub fn provide(factory: Factory) {
    let _ = FACTORY.set(factory);
}

/// The process's hold: `None` when none was provided, `Some(Err)` when it could not be made
/// (the reason, kept for every later connection).
pub(crate) fn get() -> Option<Result<&'static dyn FlightHold, &'static str>> {
    let factory = FACTORY.get()?;
    Some(match HOLD.get_or_init(factory) {
        Ok(h) => Ok(h.as_ref()),
        Err(e) => Err(e.as_str()),
    })
}

/// One held connection. Released by [`Held::release`] (the gate proceeded); otherwise
/// kept until the connection is gone ([`Held::keep_until_gone`], also what dropping it
/// does, watching from this thread's network namespace).
pub(crate) struct Held {
    hold: &'static dyn FlightHold,
    token: u32,
    done: bool,
}

impl Held {
    pub(crate) fn new(
        hold: &'static dyn FlightHold,
        token: u32,
        trusted: &[u32],
    ) -> Result<Held, String> {
        hold.hold(token, trusted)?;
        Ok(Held {
            hold,
            token,
            done: false,
        })
    }

    /// Packets the hold dropped so far (`None`: the entry is gone).
    pub(crate) fn dropped(&self) -> Option<u64> {
        self.hold.dropped(self.token)
    }

    /// The first flight is acknowledged and nothing of it is queued off the trusted
    /// interfaces: the connection's payload may leave by any interface now.
    pub(crate) fn release(mut self) {
        self.done = true;
        self.hold.release(self.token);
    }

    /// Keep the entry until the connection is gone, as `watch` (of the connection's network
    /// namespace) sees it; with no watch, for the life of the process.
    pub(crate) fn keep_until_gone(mut self, watch: std::io::Result<crate::diag::TokenWatch>) {
        self.done = true;
        match watch {
            Ok(w) => reaper::keep(self.hold, self.token, w),
            Err(e) => log::warn!(
                "the first-flight hold of connection {:08x} stays until nena exits: nena cannot \
                 watch for the connection's end ({e})",
                self.token
            ),
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if !self.done {
            let h = Held {
                hold: self.hold,
                token: self.token,
                done: false,
            };
            self.done = true;
            h.keep_until_gone(crate::diag::TokenWatch::here());
        }
    }
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Held").field("token", &self.token).finish()
    }
}

/// The packets the process's hold dropped for the connection with local `token`, while it is
/// held (`None`: not held, or no hold in this process). For reports and tests.
pub fn held(token: u32) -> Option<u64> {
    get()?.ok()?.dropped(token)
}

/// The thread that releases the holds of connections that ended without proceeding, once
/// each is gone.
mod reaper {
    use super::FlightHold;
    use crate::diag::TokenWatch;
    use std::sync::{Condvar, Mutex};
    use std::time::Duration;

    struct Kept {
        hold: &'static dyn FlightHold,
        token: u32,
        watch: TokenWatch,
    }

    static KEPT: Mutex<Vec<Kept>> = Mutex::new(Vec::new());
    static WAKE: Condvar = Condvar::new();
    static STARTED: std::sync::Once = std::sync::Once::new();

    /// How often the kept tokens are looked up.
    const EVERY: Duration = Duration::from_millis(100);

    pub(super) fn keep(hold: &'static dyn FlightHold, token: u32, watch: TokenWatch) {
        STARTED.call_once(|| {
            let spawned = std::thread::Builder::new()
                .name("nena-hold-reaper".into())
                .spawn(run);
            if let Err(e) = spawned {
                log::warn!(
                    "no thread to release first-flight holds ({e}): they stay until nena exits"
                );
            }
        });
        KEPT.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Kept { hold, token, watch });
        WAKE.notify_one();
    }

    fn run() {
        let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            kept = if kept.is_empty() {
                WAKE.wait(kept).unwrap_or_else(|e| e.into_inner())
            } else {
                WAKE.wait_timeout(kept, EVERY)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            };
            kept.retain(|k| match k.watch.alive(k.token) {
                Ok(true) => true,
                Ok(false) => {
                    log::debug!(
                        "connection {:08x} is gone: its first-flight hold is released",
                        k.token
                    );
                    k.hold.release(k.token);
                    false
                }
                Err(e) => {
                    log::debug!("looking up connection {:08x}: {e}; its hold stays", k.token);
                    true
                }
            });
        }
    }
}
