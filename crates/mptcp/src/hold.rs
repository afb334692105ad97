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

/// One held connection; released when dropped.
pub(crate) struct Held {
    hold: &'static dyn FlightHold,
    token: u32,
}

impl Held {
    pub(crate) fn new(
        hold: &'static dyn FlightHold,
        token: u32,
        trusted: &[u32],
    ) -> Result<Held, String> {
        hold.hold(token, trusted)?;
        Ok(Held { hold, token })
    }

    /// Packets the hold dropped so far.
    pub(crate) fn dropped(&self) -> u64 {
        self.hold.dropped(self.token).unwrap_or(0)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.hold.release(self.token);
    }
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Held").field("token", &self.token).finish()
    }
}
