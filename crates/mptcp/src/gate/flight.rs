//! The first flight's decisions besides the machine's, sans-IO: when its guard runs out
//! ([`FlightClock`], for the machine's [`GateMachine::withdraw_due`]), which premature
//! subflows to close before it is written ([`premature`]), the pause between two looks
//! ([`Backoff`]), and what the driver says when it closes a subflow or refuses.

use super::{GateMachine, Snapshot, SubflowSnapshot};
use crate::sockopt::SubflowInfo;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// `TCP_CLOSE` (`tcpi_state`).
const TCP_CLOSE: u8 = 7;

/// How long a first flight may go unacknowledged before nena closes the untrusted subflows
/// that appeared meanwhile: half the smallest retransmission timeout of the trusted
/// subflows (`tcpi_rto`), since the kernel's MPTCP-level retransmission, which may take an
/// untrusted subflow, comes no sooner than the trusted subflow's own. At least 1 ms; 100 ms
/// when no RTO is known.
pub fn first_flight_guard(trusted_rto_us: impl IntoIterator<Item = u32>) -> Duration {
    trusted_rto_us
        .into_iter()
        .filter(|&r| r > 0)
        .min()
        .map_or(Duration::from_millis(100), |r| {
            Duration::from_micros(u64::from(r) / 2).max(Duration::from_millis(1))
        })
}

/// When the first flight was written, and how long it may go unacknowledged before the
/// untrusted subflows are withdrawn ([`first_flight_guard`]).
#[derive(Debug, Clone, Copy)]
pub struct FlightClock {
    pub at: Instant,
    pub guard: Duration,
}

impl FlightClock {
    /// The first flight is written at `now`; `infos` are the subflows as listed then.
    pub fn start(
        now: Instant,
        machine: &GateMachine,
        snap: &Snapshot,
        infos: &[SubflowInfo],
    ) -> Self {
        let guard = first_flight_guard(
            snap.subflows
                .iter()
                .zip(infos)
                .filter(|(s, _)| machine.trust(s.local, s.iface).is_trusted())
                .map(|(_, i)| i.rto_us),
        );
        FlightClock { at: now, guard }
    }
    /// The guard has run out at `now`.
    pub fn late(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.at) >= self.guard
    }
    /// When the guard runs out.
    pub fn deadline(&self) -> Instant {
        self.at + self.guard
    }
    /// Milliseconds since the first flight was written.
    pub fn waited_ms(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.at).as_millis() as u64
    }
}

/// A subflow as `MPTCP_FULL_INFO` lists it: local and remote address, TCP state.
pub type Listed = (Option<SocketAddr>, Option<SocketAddr>, u8);

/// In-kernel PM without the hold, before the first flight: the untrusted subflows listed
/// still, and those of them to close (not closed yet, both addresses known).
pub fn premature(
    machine: &GateMachine,
    subflows: &[SubflowSnapshot],
    infos: &[SubflowInfo],
) -> (Vec<Listed>, Vec<(SocketAddr, SocketAddr, u8)>) {
    let untrusted: Vec<Listed> = subflows
        .iter()
        .zip(infos)
        .filter(|(s, _)| !machine.trust(s.local, s.iface).is_trusted())
        .map(|(_, i)| (i.local, i.remote, i.state))
        .collect();
    let close = untrusted
        .iter()
        .filter(|s| s.2 != TCP_CLOSE)
        .filter_map(|&(l, r, state)| Some((l?, r?, state)))
        .collect();
    (untrusted, close)
}

/// Why the connection is single-path once nena closed a premature subflow.
pub fn premature_note(local: SocketAddr, remote: SocketAddr) -> String {
    format!(
        "single path: nena closed the subflow {local} -> {remote} that the in-kernel path \
         manager opened before the first flight (the server announced an address, or the \
         connection was fully established early), and the in-kernel path manager does not \
         reopen it, so this connection stays on its trusted path; the userspace path manager \
         (sysctl net.mptcp.path_manager=userspace) opens the untrusted paths after the first \
         flight instead"
    )
}

/// The refusal of a premature subflow nena cannot close.
pub fn premature_unclosable(local: SocketAddr, remote: SocketAddr, e: &std::io::Error) -> String {
    format!(
        "trusted-path-first: the in-kernel path manager opened the subflow {local} -> {remote} \
         before the first flight was sent, and nena cannot close it ({e}; closing a subflow \
         needs CAP_NET_ADMIN); refusing the connection. Run with CAP_NET_ADMIN, or use the \
         userspace path manager (sysctl net.mptcp.path_manager=userspace)"
    )
}

/// Why nena closes an untrusted subflow during the first flight: held, the kernel handed it
/// bytes (`dropped` by the hold so far); else the first flight is late (`waited_ms`).
pub fn withdraw_reason(
    local: SocketAddr,
    remote: SocketAddr,
    held: bool,
    dropped: Option<u64>,
    waited_ms: u64,
) -> String {
    if held {
        format!(
            "the kernel handed the subflow {local} -> {remote} on an untrusted path bytes of the \
             first flight (the first-flight hold kept them from leaving; {} packet(s) dropped \
             so far), which TCP would send once the hold ends, so nena closed it",
            dropped.unwrap_or(0)
        )
    } else {
        format!(
            "the first flight was not acknowledged within {waited_ms} ms, so nena closed the \
             subflow {local} -> {remote} on an untrusted path before the kernel could send the \
             first flight again on it"
        )
    }
}

/// Why the connection is single-path once nena withdrew a subflow (`why`).
pub fn withdrawn_note(why: &str) -> String {
    format!(
        "single path: {why}; the in-kernel path manager does not reopen it, so this connection \
         stays on its trusted path (the userspace path manager, sysctl \
         net.mptcp.path_manager=userspace, opens the untrusted paths after the first flight \
         instead)"
    )
}

/// The refusal of an in-kernel-PM connection whose hold cannot be made (`e`).
pub fn hold_refusal(e: &str) -> String {
    format!(
        "trusted-path-first with the in-kernel path manager: nena cannot hold the first flight \
         to the trusted interfaces ({e}), and the kernel may send it on an untrusted subflow \
         it opens by itself sooner than nena can close that; refusing the connection. Run \
         nena with CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN, or use the userspace path manager \
         (sysctl net.mptcp.path_manager=userspace)"
    )
}

/// The pause between two looks at the data-level ACK, which raises no event: it starts
/// short (the ACK of a small first flight usually comes within a round trip) and doubles up
/// to a bound, so a slow path costs a few polls per RTT at most. Every wake-up on an event
/// resets it. Sans-IO: durations in, durations out.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
}

impl Backoff {
    pub const MIN: Duration = Duration::from_micros(250);
    pub const MAX: Duration = Duration::from_millis(4);

    pub fn new() -> Self {
        Backoff { next: Self::MIN }
    }
    /// The pause to take now.
    pub fn next_pause(&mut self) -> Duration {
        let d = self.next;
        self.next = (d * 2).min(Self::MAX);
        d
    }
    /// Something happened: look again soon.
    pub fn reset(&mut self) {
        self.next = Self::MIN;
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Half the smallest trusted RTO, at least 1 ms; 100 ms when none is known.
    #[test]
    fn first_flight_guard_is_half_the_smallest_trusted_rto() {
        assert_eq!(
            first_flight_guard([204_000, 300_000]),
            Duration::from_millis(102)
        );
        assert_eq!(first_flight_guard([0, 1_000]), Duration::from_millis(1));
        assert_eq!(first_flight_guard([]), Duration::from_millis(100));
        assert_eq!(first_flight_guard([0]), Duration::from_millis(100));
    }

    #[test]
    fn backoff_doubles_to_its_bound_and_resets() {
        let mut b = Backoff::new();
        let seq: Vec<u64> = (0..7).map(|_| b.next_pause().as_micros() as u64).collect();
        assert_eq!(seq, [250, 500, 1000, 2000, 4000, 4000, 4000]);
        b.reset();
        assert_eq!(b.next_pause(), Backoff::MIN);
    }
}
