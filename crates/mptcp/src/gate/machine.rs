//! The trusted-path-first decisions as a sans-IO state machine: [`GateMachine`] is fed
//! snapshots of the connection ([`Snapshot`]: `MPTCP_INFO`'s ack counters and token,
//! `MPTCP_FULL_INFO`'s subflows with their local address and byte counters) and
//! path-manager events ([`PathEvent`]), and answers with a [`Verdict`] or a typed
//! [`Refusal`]. It does no I/O and reads no clock: the drivers in the parent module read the
//! kernel, wait, and enforce the deadline. The trust of a local address comes from the
//! connection's [`ResolvedPolicy`].
//!
//! The sequence is `connected` → `before_first_flight` → (the caller writes the first
//! flight) → `poll_first_flight` until [`Verdict::Proceed`] → optionally `check_idle` →
//! `release`. Any refusal is final: every later call answers
//! [`Refusal::OutOfOrder`] with [`REFUSED`].

use crate::path::{ResolvedPolicy, Trust};
use crate::pm::{PmEvent, MPTCP_EVENT_SUB_CLOSED, MPTCP_EVENT_SUB_ESTABLISHED};
use crate::sockopt::{ConnInfo, SubflowInfo};
use crate::PmKind;
use std::net::{IpAddr, SocketAddr};

/// The answer to any call after a refusal.
pub const REFUSED: &str = "the connection was refused by an earlier trusted-path check";

/// Connection-level counters the gate needs (from `MPTCP_INFO`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnSnapshot {
    /// Local connection token (path-manager events carry it).
    pub token: u32,
    /// `mptcpi_bytes_acked` (None on kernels < 6.5).
    pub bytes_acked: Option<u64>,
    /// `mptcpi_snd_una`, the data-level send-unacknowledged sequence number (wraps).
    pub snd_una: u64,
}

impl From<&ConnInfo> for ConnSnapshot {
    fn from(i: &ConnInfo) -> Self {
        ConnSnapshot {
            token: i.token,
            bytes_acked: i.bytes_acked,
            snd_una: i.snd_una,
        }
    }
}

/// One subflow as the gate sees it (from `MPTCP_FULL_INFO`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubflowSnapshot {
    /// The kernel's per-connection subflow id (`MPTCP_FULL_INFO`; 0 on kernels < 6.5): two
    /// subflows from one local address and port are told apart by it.
    pub id: u32,
    /// Local address; `None` (unknown) counts as untrusted.
    pub local: Option<SocketAddr>,
    /// The interface the subflow leaves by (its bound device, else the route for its
    /// addresses), as the I/O layer found it for a subflow from a trusted address; `None`
    /// when unknown. A trusted address counts as trusted only on a trusted interface
    /// ([`ResolvedPolicy::classify_path`]).
    pub iface: Option<u32>,
    /// Payload bytes this subflow sent (`tcpi_bytes_sent`, retransmissions included).
    pub bytes_sent: u64,
    /// Payload bytes this subflow received (`tcpi_bytes_received`).
    pub bytes_received: u64,
    /// Payload bytes in its write queue not sent yet (`tcpi_notsent_bytes`).
    pub notsent_bytes: u64,
}

impl From<&SubflowInfo> for SubflowSnapshot {
    fn from(s: &SubflowInfo) -> Self {
        SubflowSnapshot {
            id: s.id,
            local: s.local,
            iface: None,
            bytes_sent: s.bytes_sent,
            bytes_received: s.bytes_received,
            notsent_bytes: u64::from(s.notsent_bytes),
        }
    }
}

/// Everything the gate reads from the socket at one moment. `conn` is read before
/// `subflows` (an ACK seen in `conn` is at least as old as the subflow counters). A
/// connection that fell back to plain TCP has no MPTCP state: pass `Snapshot::default()`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub conn: ConnSnapshot,
    /// In the kernel's order: the initial subflow first.
    pub subflows: Vec<SubflowSnapshot>,
    /// Held ([`GateMachine::set_held`]): the packets of the connection the first-flight
    /// hold dropped so far, read *after* `subflows` (a segment a subflow counts in
    /// `bytes_sent` is dropped, if it is, in the same transmit, under the subflow's lock that
    /// `MPTCP_FULL_INFO` takes to read the counter: so every drop of what `subflows` shows
    /// is counted here). `None`: not held, or the hold has no entry for the connection.
    pub dropped: Option<u64>,
}

/// A path-manager event the gate reacts to (from the `mptcp_pm_events` group).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathEvent {
    /// `MPTCP_EVENT_SUB_ESTABLISHED` of connection `token`.
    SubflowEstablished {
        token: u32,
        local: Option<SocketAddr>,
        /// The interface it leaves by, when known (see [`SubflowSnapshot::iface`]).
        iface: Option<u32>,
    },
    /// `MPTCP_EVENT_SUB_CLOSED` of connection `token`: its counters are gone with it.
    SubflowClosed {
        token: u32,
        local: Option<SocketAddr>,
        /// The interface it left by, when known (see [`SubflowSnapshot::iface`]).
        iface: Option<u32>,
    },
    /// The subscription overran (`ENOBUFS`) or could not be read: events are missing.
    Lost,
}

impl PathEvent {
    /// The same event with the interface its subflow leaves by set to `iface`.
    pub fn with_iface(self, iface: Option<u32>) -> PathEvent {
        match self {
            PathEvent::SubflowEstablished { token, local, .. } => PathEvent::SubflowEstablished {
                token,
                local,
                iface,
            },
            PathEvent::SubflowClosed { token, local, .. } => PathEvent::SubflowClosed {
                token,
                local,
                iface,
            },
            other => other,
        }
    }

    /// The gate's view of a decoded event; `None` for events it does not use (and for
    /// subflow events without a token, which cannot be attributed to a connection).
    pub fn from_pm(e: &PmEvent) -> Option<PathEvent> {
        let token = e.token?;
        match e.kind {
            MPTCP_EVENT_SUB_ESTABLISHED => Some(PathEvent::SubflowEstablished {
                token,
                local: e.local,
                iface: e.ifindex,
            }),
            MPTCP_EVENT_SUB_CLOSED => Some(PathEvent::SubflowClosed {
                token,
                local: e.local,
                iface: e.ifindex,
            }),
            _ => None,
        }
    }
}

/// What the caller may do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Go on: after `connected`/`check_idle`, the check passed; after
    /// `before_first_flight`, write the first flight now; after `poll_first_flight`, the
    /// first flight is data-acked and no untrusted subflow carried any of it.
    Proceed,
    /// The first flight is not (verifiably) data-acked yet: feed a newer snapshot later.
    /// `acked` is how much of it the peer has acknowledged.
    Wait { acked: u64 },
    /// Untrusted paths may carry data now. Userspace PM: ask the kernel for one subflow from
    /// each of `open` (`SUBFLOW_CREATE`); in-kernel PM and fallback: `open` is empty (the
    /// kernel opens its `subflow` endpoints by itself).
    Release { open: Vec<IpAddr> },
}

/// Why the gate refused the connection (or the call). Every message is one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the connection has no subflow")]
    NoSubflow,
    #[error("the initial subflow left from {} which is not trusted", show(local))]
    InitialNotTrusted { local: Option<SocketAddr> },
    #[error("trusted-path-first violated: the subflow from {} exists before the first flight is sent; refusing the connection", show(local))]
    UntrustedBeforeFirstFlight { local: Option<SocketAddr> },
    #[error("trusted-path-first violated: the subflow from {} sent data of the first flight; refusing the connection", show(local))]
    UntrustedSent { local: Option<SocketAddr> },
    #[error("trusted-path-first violated: the subflow from {} received data of the peer's first flight; refusing the connection", show(local))]
    UntrustedReceived { local: Option<SocketAddr> },
    #[error("trusted-path-first violated: the subflow from {} was closed during the first flight (what it carried cannot be checked); refusing the connection", show(local))]
    UntrustedClosed { local: Option<SocketAddr> },
    #[error("trusted-path-first: the first flight is not acknowledged after {waited_ms} ms, and the kernel could retransmit it on the subflow from {} (an untrusted path), which nena cannot close ({why}; closing one subflow needs CAP_NET_ADMIN); refusing the connection. Run with CAP_NET_ADMIN, or use the userspace path manager (sysctl net.mptcp.path_manager=userspace)", show(local))]
    Unwithdrawable {
        local: Option<SocketAddr>,
        waited_ms: u64,
        why: String,
    },
    #[error("trusted-path-first violated: the subflow from {} on an untrusted path sent {sent} bytes of the first flight while nena's first-flight hold counted {} drop(s) for the connection, so the hold (nena's BPF program on the egress of its own cgroup) was not in effect for it and those bytes may have crossed that path; the likely cause is that the nena process (or the thread that connected) was moved to another cgroup after the program was attached (by systemd, a container runtime, cgclassify): keep nena in the cgroup it started in; refusing the connection", show(local), dropped.map_or("no".to_string(), |d| d.to_string()))]
    HoldNotInEffect {
        local: Option<SocketAddr>,
        sent: u64,
        dropped: Option<u64>,
    },
    #[error("trusted-path-first unverifiable: path-manager events were lost during the first flight; refusing the connection")]
    EventsLost,
    #[error("gate used out of order: {0}")]
    OutOfOrder(&'static str),
}

use crate::path::same_addr as same;

fn show(a: &Option<SocketAddr>) -> String {
    a.map_or("?".into(), |a| a.to_string())
}

impl Refusal {
    /// The first flight could not be verified (events lost), rather than a rule being
    /// broken: a new connection with fresh keys is as safe as the refused one.
    pub fn is_unverifiable(&self) -> bool {
        matches!(self, Refusal::EventsLost)
    }
    /// The local address of the subflow that broke the rule, if the refusal names one.
    pub fn local(&self) -> Option<SocketAddr> {
        match self {
            Refusal::InitialNotTrusted { local }
            | Refusal::UntrustedBeforeFirstFlight { local }
            | Refusal::UntrustedSent { local }
            | Refusal::UntrustedReceived { local }
            | Refusal::UntrustedClosed { local }
            | Refusal::HoldNotInEffect { local, .. }
            | Refusal::Unwithdrawable { local, .. } => *local,
            _ => None,
        }
    }
}

/// Where the machine is in the sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Connected; the initial subflow is not checked yet.
    Opened,
    /// The initial subflow is trusted; nothing written yet.
    Connected,
    /// `before_first_flight` passed: the first flight is on its way.
    FirstFlight,
    /// The first flight is data-acked and no untrusted subflow carried any of it.
    Acked,
    /// Untrusted paths released.
    Released,
    /// A check failed: the connection must not be used any more.
    Refused,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Opened,
    Connected,
    FirstFlight {
        token: u32,
        base_acked: Option<u64>,
        base_una: u64,
        /// Local addresses of untrusted subflows established during the first flight (an
        /// event without one cannot be matched; the counter check covers that subflow).
        established: Vec<SocketAddr>,
        /// Untrusted subflows some snapshot of the first flight listed, by kernel id and
        /// local address, as many times as one snapshot listed them: one missing from a
        /// later snapshot was closed, and its counters went with it (what refuses it when
        /// no path-manager event can: without CAP_NET_ADMIN). Without ids (kernels < 6.5)
        /// two subflows from one address and port are told apart by their count.
        seen: Vec<Listed>,
        /// Untrusted subflows the caller closed on the machine's word
        /// ([`GateMachine::withdraw_untrusted`]), with nothing sent: their going is expected.
        withdrawn: Vec<Listed>,
    },
    /// The first flight is acknowledged; `withdrawn` as in `FirstFlight` (a closed subflow
    /// stays listed until the MPTCP worker unlinks it).
    Acked {
        withdrawn: Vec<Listed>,
    },
    Released,
    Refused(Refusal),
}

/// An untrusted subflow as one snapshot lists it: the kernel's id and the local address.
type Listed = (u32, SocketAddr);

/// The same listed subflow: the same kernel id and the same local address ([`same`]).
fn same_listed(a: &Listed, b: &Listed) -> bool {
    a.0 == b.0 && same(a.1, b.1)
}

/// The listed subflows of `seen` that `now` is missing (a subflow of `seen` listed `n` times
/// must be listed `n` times in `now`).
fn missing(seen: &[Listed], now: &[Listed]) -> Option<Listed> {
    seen.iter().copied().find(|l| {
        let before = seen.iter().filter(|m| same_listed(l, m)).count();
        before > now.iter().filter(|m| same_listed(l, m)).count()
    })
}

/// The trusted-path-first gate of one client connection, without I/O.
#[derive(Debug, Clone)]
pub struct GateMachine {
    policy: ResolvedPolicy,
    pm: PmKind,
    remote: SocketAddr,
    fallback: bool,
    /// The caller feeds every path-manager event of the first flight (a subscription that
    /// overruns is [`PathEvent::Lost`]): a join is known to have been established only if
    /// its SUB_ESTABLISHED event came.
    events: bool,
    /// Payload of the connection leaves only by trusted interfaces until the first flight
    /// is acknowledged ([`crate::hold`]): an untrusted subflow's `bytes_sent` then counts
    /// segments the hold dropped, not bytes that crossed, so they refuse nothing; such a
    /// subflow must be withdrawn before the connection may proceed.
    held: bool,
    phase: Phase,
}

impl GateMachine {
    /// A connection to `remote` under `policy`, with path manager `pm`; `fallback`: it fell
    /// back to plain TCP (allowed by the caller), so there is nothing to check.
    pub fn new(policy: ResolvedPolicy, pm: PmKind, remote: SocketAddr, fallback: bool) -> Self {
        GateMachine {
            policy,
            pm,
            remote,
            fallback,
            events: false,
            held: false,
            phase: Phase::Opened,
        }
    }

    /// The caller feeds every path-manager event of the first flight to [`on_event`]
    /// (`MPTCP_EVENT_SUB_ESTABLISHED` comes before a join can carry a byte: the kernel
    /// emits it on the SYN-ACK, and data waits for the fourth ACK). An untrusted join
    /// that closes, or vanishes from the snapshots, without its establishment reported
    /// then carried nothing (a join the server refused, or one reset on the way), and is
    /// forgotten instead of refusing the connection. Without events every untrusted
    /// subflow that goes away during the first flight refuses it.
    ///
    /// [`on_event`]: Self::on_event
    pub fn watching_events(mut self, on: bool) -> Self {
        self.events = on;
        self
    }

    /// Whether payload is held to trusted interfaces ([`GateMachine::set_held`]).
    pub fn set_held(&mut self, on: bool) {
        self.held = on;
    }

    /// Held: an untrusted subflow not withdrawn has payload queued, sent into the hold or
    /// not sent yet. It would leave once the hold ends, so the connection waits until that
    /// subflow is withdrawn ([`GateMachine::withdraw_untrusted`]). Snapshots read the
    /// connection's ACK before the subflows, so what the kernel queued before the first
    /// flight was acknowledged is seen here.
    pub fn holds_back(&self, snap: &Snapshot) -> bool {
        self.held
            && snap.subflows.iter().any(|s| {
                !self.trusted_sf(s)
                    && (s.bytes_sent > 0 || s.notsent_bytes > 0)
                    && s.local.is_none_or(|l| !self.is_withdrawn(l))
            })
    }

    /// Held: the hold is shown to be in effect for what `snap` shows. Every untrusted
    /// subflow that sent payload while held had at least one packet of it dropped by the
    /// hold (a packet leaves by a trusted interface, or is dropped and counted), so the
    /// connection's drop count is at least the number of such subflows. Fewer drops: some
    /// payload left by an untrusted interface without the program seeing it (the process
    /// moved to another cgroup, the entry gone), and the connection is refused.
    fn hold_unproven(&self, snap: &Snapshot) -> Option<Refusal> {
        if !self.held {
            return None;
        }
        let sending: Vec<&SubflowSnapshot> = snap
            .subflows
            .iter()
            .filter(|s| !self.trusted_sf(s) && s.bytes_sent > 0)
            .collect();
        let first = sending.first()?;
        (snap.dropped.unwrap_or(0) < sending.len() as u64).then_some(Refusal::HoldNotInEffect {
            local: first.local,
            sent: first.bytes_sent,
            dropped: snap.dropped,
        })
    }

    /// The gate ends before it proceeded (a refusal, a timeout, a cancelled wait, an I/O
    /// error, or a gate dropped unfinished): the untrusted subflows of `subflows` (every
    /// subflow of the connection, however the caller found them) to close now, whatever
    /// they carry or hold, withdrawn before or not, their address unknown included (by their
    /// indexes in `subflows`). `None` once the first flight was acknowledged and checked
    /// (or for a fallback connection): the gate proceeded and has nothing to undo.
    ///
    /// Whatever is answered, a held connection stays held until it is gone (see
    /// [`crate::hold`]): the kernel may still retransmit its unacknowledged first flight on a
    /// subflow a close did not reach, or one it opens later.
    pub fn exit_withdrawals(&self, subflows: &[SubflowSnapshot]) -> Option<Vec<usize>> {
        if self.fallback || matches!(self.phase, Phase::Acked { .. } | Phase::Released) {
            return None;
        }
        Some(
            subflows
                .iter()
                .enumerate()
                .filter(|(_, s)| !self.trusted_sf(s))
                .map(|(i, _)| i)
                .collect(),
        )
    }

    /// Whether the untrusted subflow from `local` may have carried payload: its
    /// establishment was reported, or events are not watched (nothing proves it was not).
    /// Never while payload is held: nothing of it left by an untrusted interface.
    fn may_have_carried(&self, local: SocketAddr) -> bool {
        !self.held
            && (!self.events
                || match &self.phase {
                    Phase::FirstFlight { established, .. } => {
                        established.iter().any(|a| same(*a, local))
                    }
                    _ => true,
                })
    }

    pub fn policy(&self) -> &ResolvedPolicy {
        &self.policy
    }

    pub fn is_fallback(&self) -> bool {
        self.fallback
    }

    pub fn pm(&self) -> PmKind {
        self.pm
    }

    pub fn remote(&self) -> SocketAddr {
        self.remote
    }

    /// Trust of a subflow from `local` leaving by `iface` (unknown address: untrusted; a
    /// trusted address on an interface that is not trusted, or not known: untrusted).
    pub fn trust(&self, local: Option<SocketAddr>, iface: Option<u32>) -> Trust {
        local.map_or(Trust::Unlisted, |a| {
            self.policy.classify_path(a.ip(), iface)
        })
    }

    fn trusted(&self, local: Option<SocketAddr>, iface: Option<u32>) -> bool {
        self.trust(local, iface).is_trusted()
    }

    fn trusted_sf(&self, s: &SubflowSnapshot) -> bool {
        self.trusted(s.local, s.iface)
    }

    pub fn stage(&self) -> Stage {
        match self.phase {
            Phase::Opened => Stage::Opened,
            Phase::Connected => Stage::Connected,
            Phase::FirstFlight { .. } => Stage::FirstFlight,
            Phase::Acked { .. } => Stage::Acked,
            Phase::Released => Stage::Released,
            Phase::Refused(_) => Stage::Refused,
        }
    }

    /// The refusal that ended the connection, if any.
    pub fn refusal(&self) -> Option<&Refusal> {
        match &self.phase {
            Phase::Refused(r) => Some(r),
            _ => None,
        }
    }

    fn refuse(&mut self, r: Refusal) -> Result<Verdict, Refusal> {
        self.phase = Phase::Refused(r.clone());
        Err(r)
    }

    /// Out-of-order use; after a refusal, the answer to everything.
    fn out_of_order(&self, what: &'static str) -> Result<Verdict, Refusal> {
        Err(Refusal::OutOfOrder(match self.phase {
            Phase::Refused(_) => REFUSED,
            _ => what,
        }))
    }

    /// Right after connect: the initial subflow (the first listed) must leave from a
    /// trusted address.
    pub fn connected(&mut self, snap: &Snapshot) -> Result<Verdict, Refusal> {
        if self.phase != Phase::Opened {
            return self.out_of_order("the initial subflow was already checked");
        }
        if !self.fallback {
            match snap.subflows.first() {
                None => return self.refuse(Refusal::NoSubflow),
                Some(sf) if !self.trusted_sf(sf) => {
                    return self.refuse(Refusal::InitialNotTrusted { local: sf.local })
                }
                Some(_) => {}
            }
        }
        self.phase = Phase::Connected;
        Ok(Verdict::Proceed)
    }

    /// Right before the first flight is written: refuses if any subflow whose local address
    /// is not trusted exists (unless payload is held: [`GateMachine::set_held`]), and
    /// records the data-level baseline the ACK is measured from.
    pub fn before_first_flight(&mut self, snap: &Snapshot) -> Result<Verdict, Refusal> {
        match self.phase {
            Phase::Connected => {}
            Phase::Opened => return self.out_of_order("check the initial subflow first"),
            _ => return self.out_of_order("before_first_flight called twice"),
        }
        if self.fallback {
            self.phase = Phase::Acked {
                withdrawn: Vec::new(),
            };
            return Ok(Verdict::Proceed);
        }
        // Held, an untrusted subflow may stay: nothing is written yet, and whatever the
        // kernel puts on it later is dropped by the hold and withdraws it (`holds_back`).
        if let Some(sf) = snap
            .subflows
            .iter()
            .find(|s| !self.trusted_sf(s) && !self.held)
        {
            return self.refuse(Refusal::UntrustedBeforeFirstFlight { local: sf.local });
        }
        self.phase = Phase::FirstFlight {
            token: snap.conn.token,
            base_acked: snap.conn.bytes_acked,
            base_una: snap.conn.snd_una,
            established: Vec::new(),
            seen: Vec::new(),
            withdrawn: Vec::new(),
        };
        Ok(Verdict::Proceed)
    }

    /// A path-manager event. Only events during the first flight matter: an untrusted
    /// subflow of this connection closed then (its counters vanished with it, so what it
    /// carried cannot be checked: assume the worst), or lost events, refuse.
    pub fn on_event(&mut self, ev: PathEvent) -> Result<(), Refusal> {
        let Phase::FirstFlight { token, .. } = self.phase else {
            return Ok(());
        };
        match ev {
            PathEvent::Lost => self.refuse(Refusal::EventsLost).map(drop),
            PathEvent::SubflowClosed {
                token: t,
                local: Some(l),
                ..
            } if t == token && (self.is_withdrawn(l) || !self.may_have_carried(l)) => {
                // Held, it carried nothing even if established: no longer expected either.
                if let Phase::FirstFlight { established, .. } = &mut self.phase {
                    established.retain(|a| !same(*a, l));
                }
                Ok(())
            }
            PathEvent::SubflowClosed {
                token: t,
                local,
                iface,
            } if t == token && !self.held && !self.trusted(local, iface) => {
                self.refuse(Refusal::UntrustedClosed { local }).map(drop)
            }
            PathEvent::SubflowEstablished {
                token: t,
                local: Some(local),
                iface,
            } if t == token && !self.trusted(Some(local), iface) => {
                if let Phase::FirstFlight { established, .. } = &mut self.phase {
                    established.push(local);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Data-level progress of a first flight of `len` bytes. Refuses if a subflow whose local
    /// address is not trusted has sent payload: nothing but the first flight has been written,
    /// so any byte it sent is first-flight data. [`Verdict::Proceed`] once the peer's
    /// DATA_ACK covers the first flight and every untrusted subflow established meanwhile
    /// is accounted for (still listed, so its counters were checked; a closed one has
    /// refused already); [`Verdict::Wait`] before.
    pub fn poll_first_flight(&mut self, len: u64, snap: &Snapshot) -> Result<Verdict, Refusal> {
        match &self.phase {
            Phase::FirstFlight { .. } => {}
            Phase::Acked { .. } | Phase::Released => return Ok(Verdict::Proceed),
            _ => return self.out_of_order("call before_first_flight first"),
        }
        if let Some(sf) = snap
            .subflows
            .iter()
            .find(|s| !self.held && !self.trusted_sf(s) && s.bytes_sent > 0)
        {
            return self.refuse(Refusal::UntrustedSent { local: sf.local });
        }
        if let Some(r) = self.hold_unproven(snap) {
            return self.refuse(r);
        }
        let held_back = self.holds_back(snap);
        let now: Vec<Listed> = snap
            .subflows
            .iter()
            .filter(|s| !self.trusted_sf(s))
            .filter_map(|s| s.local.map(|a| (s.id, a)))
            .filter(|l| !self.withdrawn().iter().any(|w| same_listed(w, l)))
            .collect();
        // A join gone before it was established carried nothing: forget it.
        let never: Vec<Listed> = match &self.phase {
            Phase::FirstFlight { seen, .. } => seen
                .iter()
                .copied()
                .filter(|l| !self.may_have_carried(l.1))
                .collect(),
            _ => Vec::new(),
        };
        if let Phase::FirstFlight { seen, .. } = &mut self.phase {
            seen.retain(|l| {
                !never.iter().any(|n| same_listed(n, l)) || now.iter().any(|m| same_listed(m, l))
            });
            if let Some((_, gone)) = missing(seen, &now) {
                let local = Some(gone);
                return self.refuse(Refusal::UntrustedClosed { local });
            }
            // None of `seen` is missing from `now`: `now` holds them all, and the new ones.
            *seen = now;
        }
        let (base_acked, base_una, established) = match &self.phase {
            Phase::FirstFlight {
                base_acked,
                base_una,
                established,
                ..
            } => (*base_acked, *base_una, established),
            _ => unreachable!("checked above"),
        };
        let acked = match (snap.conn.bytes_acked, base_acked) {
            (Some(now), Some(base)) => now.saturating_sub(base),
            _ => snap.conn.snd_una.wrapping_sub(base_una),
        };
        // An untrusted subflow established during the first flight but no longer listed
        // was closed: its close event is on its way (and will refuse). Until then nothing
        // proves that it carried nothing.
        let unaccounted = established.iter().any(|l| {
            !self.is_withdrawn(*l)
                && !snap
                    .subflows
                    .iter()
                    .any(|s| s.local.is_some_and(|a| same(a, *l)))
        });
        if acked >= len && !unaccounted && !held_back {
            let withdrawn = match &mut self.phase {
                Phase::FirstFlight { withdrawn, .. } => std::mem::take(withdrawn),
                _ => Vec::new(),
            };
            self.phase = Phase::Acked { withdrawn };
            Ok(Verdict::Proceed)
        } else {
            Ok(Verdict::Wait { acked })
        }
    }

    /// An untrusted subflow's establishment was reported during the first flight and it
    /// has not been withdrawn.
    pub fn joined_untrusted(&self) -> bool {
        match &self.phase {
            Phase::FirstFlight { established, .. } => {
                established.iter().any(|l| !self.is_withdrawn(*l))
            }
            _ => false,
        }
    }

    /// The caller could not close a subflow [`withdraw_untrusted`](Self::withdraw_untrusted)
    /// answered: the connection is refused (the caller resets it).
    pub fn refuse_unwithdrawable(
        &mut self,
        local: Option<SocketAddr>,
        waited_ms: u64,
        why: String,
    ) -> Refusal {
        let r = Refusal::Unwithdrawable {
            local,
            waited_ms,
            why,
        };
        self.phase = Phase::Refused(r.clone());
        r
    }

    fn withdrawn(&self) -> &[Listed] {
        match &self.phase {
            Phase::FirstFlight { withdrawn, .. } | Phase::Acked { withdrawn } => withdrawn,
            _ => &[],
        }
    }

    /// Whether the subflow from `local` was withdrawn (its close is expected).
    fn is_withdrawn(&self, local: SocketAddr) -> bool {
        self.withdrawn().iter().any(|w| same(w.1, local))
    }

    /// The first flight is not data-acked yet and the kernel may soon send it again on its
    /// own (its MPTCP-level retransmission takes any usable subflow whose queues are empty,
    /// so an untrusted one the in-kernel path manager opened meanwhile, for instance on the
    /// server's ADD_ADDR). Answers the untrusted subflows of `snap` for the caller to close
    /// at once, before a retransmission is due; from then on their going (and their close
    /// events) is expected rather than refused. Refuses, as [`poll_first_flight`] does, if
    /// one of them has sent payload already. Subflows withdrawn before are not answered
    /// again. Only during the first flight; elsewhere answers nothing.
    ///
    /// Held ([`GateMachine::set_held`]), only the untrusted subflows that hold payload
    /// (`bytes_sent` or `notsent_bytes`: what [`holds_back`](Self::holds_back) looks at)
    /// are answered: one that holds none has had no byte of the first flight handed to it,
    /// and nothing handed to it while held leaves (the hold drops it, and the subflow is
    /// answered at the next look), so it may stay and carry data after the release.
    ///
    /// [`poll_first_flight`]: Self::poll_first_flight
    pub fn withdraw_untrusted(&mut self, snap: &Snapshot) -> Result<Vec<SubflowSnapshot>, Refusal> {
        if !matches!(self.phase, Phase::FirstFlight { .. }) || self.fallback {
            return Ok(Vec::new());
        }
        let untrusted: Vec<SubflowSnapshot> = snap
            .subflows
            .iter()
            .filter(|s| !self.trusted_sf(s))
            .filter(|s| !self.held || s.bytes_sent > 0 || s.notsent_bytes > 0)
            .copied()
            .collect();
        if let Some(sf) = untrusted.iter().find(|s| !self.held && s.bytes_sent > 0) {
            return self
                .refuse(Refusal::UntrustedSent { local: sf.local })
                .map(|_| vec![]);
        }
        if let Some(r) = self.hold_unproven(snap) {
            return self.refuse(r).map(|_| vec![]);
        }
        let new: Vec<SubflowSnapshot> = untrusted
            .into_iter()
            .filter(|s| {
                s.local
                    .is_some_and(|l| !self.withdrawn().iter().any(|w| same_listed(w, &(s.id, l))))
            })
            .collect();
        if let Phase::FirstFlight {
            withdrawn, seen, ..
        } = &mut self.phase
        {
            for s in &new {
                let l = (s.id, s.local.expect("filtered above"));
                withdrawn.push(l);
                // No longer expected in later snapshots.
                if let Some(i) = seen.iter().position(|m| same_listed(m, &l)) {
                    seen.remove(i);
                }
            }
        }
        Ok(new)
    }

    /// Refuses if a subflow whose local address is not trusted has sent payload (and, with
    /// `received`, received payload): e.g. after reading the peer's first flight, to check
    /// that it too arrived over trusted subflows only. Before release only.
    pub fn check_idle(&mut self, snap: &Snapshot, received: bool) -> Result<Verdict, Refusal> {
        match self.phase {
            Phase::Connected | Phase::FirstFlight { .. } | Phase::Acked { .. } => {}
            Phase::Opened => return self.out_of_order("check the initial subflow first"),
            _ => return self.out_of_order("untrusted subflows carry data once they are released"),
        }
        if self.fallback {
            return Ok(Verdict::Proceed);
        }
        for sf in snap
            .subflows
            .iter()
            .filter(|s| !self.trusted_sf(s))
            .filter(|s| s.local.is_none_or(|l| !self.is_withdrawn(l)))
        {
            if sf.bytes_sent > 0 {
                return self.refuse(Refusal::UntrustedSent { local: sf.local });
            }
            if received && sf.bytes_received > 0 {
                return self.refuse(Refusal::UntrustedReceived { local: sf.local });
            }
        }
        Ok(Verdict::Proceed)
    }

    /// After the first flight is acked: untrusted paths may carry data. Userspace PM: one
    /// subflow from every policy address (untrusted ones first) of the remote's family that
    /// no subflow of `snap` uses yet, loopback and unspecified addresses excepted. A second
    /// call releases nothing more.
    pub fn release(&mut self, snap: &Snapshot) -> Result<Verdict, Refusal> {
        match self.phase {
            Phase::Acked { .. } => {}
            Phase::Released => return Ok(Verdict::Release { open: Vec::new() }),
            _ => return self.out_of_order("the first flight is not acknowledged yet"),
        }
        self.phase = Phase::Released;
        if self.fallback || self.pm != PmKind::Userspace {
            return Ok(Verdict::Release { open: Vec::new() });
        }
        let used: Vec<IpAddr> = snap
            .subflows
            .iter()
            .filter_map(|s| s.local.map(|a| a.ip()))
            .collect();
        let open = self
            .policy
            .untrusted
            .iter()
            .chain(self.policy.trusted.iter())
            .copied()
            .filter(|a| a.is_ipv4() == self.remote.is_ipv4())
            .filter(|a| !used.contains(a) && !a.is_loopback() && !a.is_unspecified())
            .collect();
        Ok(Verdict::Release { open })
    }

    /// The local addresses whose subflows nena may recover (re-create after an outage): every
    /// policy address of the remote's family, trusted or not, but only once the untrusted
    /// paths were released, with the userspace PM (nena is the connection's path manager),
    /// and never for a refused or fallback connection. `None` otherwise.
    pub fn recovery_paths(&self) -> Option<Vec<IpAddr>> {
        if self.phase != Phase::Released || self.fallback || self.pm != PmKind::Userspace {
            return None;
        }
        Some(
            self.policy
                .untrusted
                .iter()
                .chain(self.policy.trusted.iter())
                .copied()
                .filter(|a| a.is_ipv4() == self.remote.is_ipv4())
                .filter(|a| !a.is_loopback() && !a.is_unspecified())
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const T: &str = "198.18.1.2";
    const T2: &str = "198.18.4.2";
    const U: &str = "198.18.2.2";
    const TOKEN: u32 = 0x1234_5678;
    const LEN: u64 = 1200;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }
    fn sa(s: &str, port: u16) -> Option<SocketAddr> {
        Some(SocketAddr::new(ip(s), port))
    }
    fn remote() -> SocketAddr {
        "198.18.3.2:5000".parse().unwrap()
    }
    fn policy() -> ResolvedPolicy {
        ResolvedPolicy::new(
            [ip(T), ip(T2), ip("127.0.0.1")].into(),
            [ip(U), ip("2001:db8::2")].into(),
        )
        .unwrap()
    }
    fn machine(pm: PmKind) -> GateMachine {
        GateMachine::new(policy(), pm, remote(), false)
    }
    fn sf(local: &str, port: u16, sent: u64, received: u64) -> SubflowSnapshot {
        SubflowSnapshot {
            iface: None,
            id: 0,
            local: sa(local, port),
            bytes_sent: sent,
            bytes_received: received,
            notsent_bytes: 0,
        }
    }
    fn snap(acked: u64, subflows: Vec<SubflowSnapshot>) -> Snapshot {
        Snapshot {
            conn: ConnSnapshot {
                token: TOKEN,
                bytes_acked: Some(acked),
                snd_una: 1 + acked,
            },
            subflows,
            dropped: None,
        }
    }
    /// A machine whose first flight is on its way (initial trusted subflow, nothing acked).
    fn in_flight(pm: PmKind) -> GateMachine {
        let mut m = machine(pm);
        let s = snap(0, vec![sf(T, 40000, 0, 0)]);
        assert_eq!(m.connected(&s), Ok(Verdict::Proceed));
        assert_eq!(m.before_first_flight(&s), Ok(Verdict::Proceed));
        assert_eq!(m.stage(), Stage::FirstFlight);
        m
    }
    fn assert_final(m: &mut GateMachine, s: &Snapshot) {
        assert_eq!(m.stage(), Stage::Refused);
        for r in [
            m.poll_first_flight(LEN, s),
            m.release(s),
            m.check_idle(s, false),
            m.before_first_flight(s),
        ] {
            assert_eq!(r, Err(Refusal::OutOfOrder(REFUSED)));
        }
    }

    /// The policy as `resolve` builds it on a host: each address with its interface
    /// (trusted 5, untrusted 6).
    fn policy_with_ifaces() -> ResolvedPolicy {
        let mut p = policy();
        for (a, name, index) in [(T, "trusted", 5), (U, "untrusted", 6)] {
            p.ifaces.insert(
                ip(a),
                crate::path::LocalIface {
                    name: name.into(),
                    index,
                },
            );
        }
        p
    }
    fn on(mut s: SubflowSnapshot, iface: Option<u32>) -> SubflowSnapshot {
        s.iface = iface;
        s
    }

    #[test]
    fn a_trusted_address_counts_only_on_a_trusted_interface() {
        let fresh = || GateMachine::new(policy_with_ifaces(), PmKind::Kernel, remote(), false);
        // The initial subflow from the trusted address, leaving by the untrusted interface
        // (a laptop whose default route is the WLAN, the socket bound to no device), or by
        // one nobody could tell: refused before anything is written.
        for iface in [Some(6), None] {
            let mut m = fresh();
            let s = snap(0, vec![on(sf(T, 40000, 0, 0), iface)]);
            assert_eq!(
                m.connected(&s),
                Err(Refusal::InitialNotTrusted {
                    local: sa(T, 40000)
                }),
                "{iface:?}"
            );
        }
        // On its own interface it proceeds; a second subflow from the same trusted address
        // that leaves by the untrusted interface (an endpoint without `dev`, an answer to
        // the server's ADD_ADDR) is a subflow on an untrusted path before the first flight.
        let mut m = fresh();
        let first = on(sf(T, 40000, 0, 0), Some(5));
        assert_eq!(m.connected(&snap(0, vec![first])), Ok(Verdict::Proceed));
        let s = snap(0, vec![first, on(sf(T, 40001, 0, 0), Some(6))]);
        assert_eq!(
            m.before_first_flight(&s),
            Err(Refusal::UntrustedBeforeFirstFlight {
                local: sa(T, 40001)
            })
        );
        // During the first flight: such a subflow that sent a byte is first-flight data on
        // an untrusted path; one that closed took its counters with it.
        let mut m = fresh();
        let s = snap(0, vec![first]);
        m.connected(&s).unwrap();
        m.before_first_flight(&s).unwrap();
        let s = snap(0, vec![first, on(sf(T, 40001, 100, 0), Some(6))]);
        assert_eq!(
            m.poll_first_flight(LEN, &s),
            Err(Refusal::UntrustedSent {
                local: sa(T, 40001)
            })
        );
        let mut m = fresh();
        let s = snap(0, vec![first]);
        m.connected(&s).unwrap();
        m.before_first_flight(&s).unwrap();
        let closed = |iface| PathEvent::SubflowClosed {
            token: TOKEN,
            local: sa(T, 40001),
            iface,
        };
        assert_eq!(m.on_event(closed(Some(5))), Ok(()));
        m.on_event(PathEvent::SubflowEstablished {
            token: TOKEN,
            local: sa(T, 40001),
            iface: Some(6),
        })
        .unwrap();
        assert_eq!(
            m.on_event(closed(Some(6))),
            Err(Refusal::UntrustedClosed {
                local: sa(T, 40001)
            })
        );
        // An untrusted address stays untrusted on the trusted interface.
        let p = policy_with_ifaces();
        assert_eq!(p.classify_path(ip(U), Some(5)), Trust::Untrusted);
        assert_eq!(p.classify_path(ip(T), Some(5)), Trust::Trusted);
        assert_eq!(p.classify_path(ip(T), Some(6)), Trust::Untrusted);
        assert_eq!(p.classify_path(ip(T), None), Trust::Untrusted);
    }

    #[test]
    fn the_whole_sequence_proceeds_on_a_trusted_path() {
        let mut m = in_flight(PmKind::Userspace);
        let s = snap(0, vec![sf(T, 40000, 1200, 0)]);
        assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Wait { acked: 0 }));
        let s = snap(600, vec![sf(T, 40000, 1200, 0)]);
        assert_eq!(
            m.poll_first_flight(LEN, &s),
            Ok(Verdict::Wait { acked: 600 })
        );
        let s = snap(1200, vec![sf(T, 40000, 1200, 0)]);
        assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Proceed));
        assert_eq!(m.stage(), Stage::Acked);
        // Acked stays acked, without looking at the snapshot again.
        assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Proceed));
        assert_eq!(
            m.release(&s),
            Ok(Verdict::Release {
                open: vec![ip(U), ip(T2)]
            })
        );
        assert_eq!(m.stage(), Stage::Released);
        // Releasing twice opens nothing more.
        assert_eq!(m.release(&s), Ok(Verdict::Release { open: vec![] }));
        assert_eq!(m.refusal(), None);
    }

    #[test]
    fn recovery_only_after_release_with_the_userspace_pm() {
        // Before release: nothing may be recovered (the first flight is not settled).
        let mut m = in_flight(PmKind::Userspace);
        assert_eq!(m.recovery_paths(), None);
        let s = snap(1200, vec![sf(T, 40000, 1200, 0)]);
        assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Proceed));
        assert_eq!(m.recovery_paths(), None, "acked but not released");
        m.release(&s).unwrap();
        // Released: the policy's addresses of the remote's family (not loopback).
        assert_eq!(m.recovery_paths(), Some(vec![ip(U), ip(T), ip(T2)]));
        // The in-kernel PM opens subflows itself: nena recovers nothing.
        let mut k = in_flight(PmKind::Kernel);
        k.poll_first_flight(LEN, &s).unwrap();
        k.release(&s).unwrap();
        assert_eq!(k.recovery_paths(), None);
        // A refused connection is never recovered.
        let mut r = in_flight(PmKind::Userspace);
        let bad = snap(1200, vec![sf(T, 40000, 1200, 0), sf(U, 40001, 10, 0)]);
        assert!(r.poll_first_flight(LEN, &bad).is_err());
        assert!(r.release(&bad).is_err());
        assert_eq!(r.recovery_paths(), None);
    }

    #[test]
    fn untrusted_subflow_before_the_first_flight_is_refused() {
        for local in [U, "198.18.9.9"] {
            let mut m = machine(PmKind::Kernel);
            let s = snap(0, vec![sf(T, 40000, 0, 100), sf(local, 40001, 0, 0)]);
            m.connected(&s).unwrap();
            let r = m.before_first_flight(&s).unwrap_err();
            assert_eq!(
                r,
                Refusal::UntrustedBeforeFirstFlight {
                    local: sa(local, 40001)
                }
            );
            assert!(r.to_string().contains("exists before the first flight"));
            assert!(r.to_string().contains(&format!("{local}:40001")));
            assert_final(&mut m, &s);
        }
    }

    #[test]
    fn untrusted_subflow_that_sent_first_flight_bytes_is_refused() {
        let mut m = in_flight(PmKind::Kernel);
        // The untrusted subflow exists without having sent anything: wait.
        let s = snap(100, vec![sf(T, 40000, 1200, 0), sf(U, 40001, 0, 0)]);
        assert_eq!(
            m.poll_first_flight(LEN, &s),
            Ok(Verdict::Wait { acked: 100 })
        );
        // One byte on it is one byte of the first flight, even if the ACK is complete.
        let s = snap(1200, vec![sf(T, 40000, 1200, 0), sf(U, 40001, 1, 0)]);
        let r = m.poll_first_flight(LEN, &s).unwrap_err();
        assert_eq!(
            r,
            Refusal::UntrustedSent {
                local: sa(U, 40001)
            }
        );
        assert_eq!(r.local(), sa(U, 40001));
        assert!(!r.is_unverifiable());
        assert_eq!(m.refusal(), Some(&r));
        assert_final(&mut m, &s);
    }

    /// Held ([`crate::hold`]): an untrusted subflow's sent bytes were dropped by the hold,
    /// not carried, so they refuse nothing, but the connection proceeds only once that
    /// subflow is withdrawn (its queued bytes would leave when the hold ends); its close,
    /// even one the kernel made itself, refuses nothing; and the check after the peer's
    /// first flight skips the withdrawn subflow still listed while it closes.
    #[test]
    fn held_bytes_on_an_untrusted_subflow_withdraw_it_instead_of_refusing() {
        // (the hold counted the drop of what the join sent)
        let snap = |a, v| Snapshot {
            dropped: Some(1),
            ..snap(a, v)
        };
        let mut m = in_flight(PmKind::Kernel);
        m.set_held(true);
        let join = |id, port, sent| SubflowSnapshot {
            id,
            ..sf(U, port, sent, 0)
        };
        m.on_event(PathEvent::SubflowEstablished {
            iface: None,
            token: TOKEN,
            local: sa(U, 41000),
        })
        .unwrap();
        // acknowledged, but the join holds 1200 bytes: wait for its withdrawal
        let s = snap(1200, vec![sf(T, 40000, 2400, 0), join(2, 41000, 1200)]);
        assert_eq!(
            m.poll_first_flight(LEN, &s),
            Ok(Verdict::Wait { acked: 1200 })
        );
        assert!(m.holds_back(&s));
        // bytes queued and not sent yet hold it back too
        let queued = SubflowSnapshot {
            notsent_bytes: 300,
            ..join(2, 41000, 0)
        };
        let q = snap(1200, vec![sf(T, 40000, 2400, 0), queued]);
        assert!(m.holds_back(&q));
        assert_eq!(
            m.poll_first_flight(LEN, &q),
            Ok(Verdict::Wait { acked: 1200 })
        );
        assert_eq!(m.withdraw_untrusted(&s), Ok(vec![join(2, 41000, 1200)]));
        assert!(!m.holds_back(&s));
        // withdrawn and still listed while it closes: proceed
        assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Proceed));
        assert_eq!(m.check_idle(&s, true), Ok(Verdict::Proceed));

        // a held join the kernel closed by itself carried nothing either
        let mut m = in_flight(PmKind::Kernel);
        m.set_held(true);
        m.on_event(PathEvent::SubflowEstablished {
            iface: None,
            token: TOKEN,
            local: sa(U, 41001),
        })
        .unwrap();
        let s = snap(0, vec![sf(T, 40000, 1200, 0), join(3, 41001, 600)]);
        assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Wait { acked: 0 }));
        m.on_event(PathEvent::SubflowClosed {
            iface: None,
            token: TOKEN,
            local: sa(U, 41001),
        })
        .unwrap();
        let s = snap(1200, vec![sf(T, 40000, 1200, 0)]);
        assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Proceed));

        // not held: the same bytes refuse
        let mut m = in_flight(PmKind::Kernel);
        let s = snap(1200, vec![sf(T, 40000, 2400, 0), join(2, 41000, 1200)]);
        assert!(matches!(
            m.poll_first_flight(LEN, &s),
            Err(Refusal::UntrustedSent { .. })
        ));
    }

    /// Held ([`crate::hold`]), an untrusted subflow that holds no payload stays: it may
    /// exist before the first flight (the server's ADD_ADDR beat the first write), it is
    /// not answered for withdrawal, and the connection proceeds with it listed once the
    /// first flight is acknowledged; one handed bytes is answered (alone), and the rest
    /// stay. Not held, the same subflow before the first flight refuses.
    #[test]
    fn held_untrusted_subflows_that_hold_nothing_stay() {
        let snap = |a, v| Snapshot {
            dropped: Some(1),
            ..snap(a, v)
        };
        let join = |id, port, sent, notsent| SubflowSnapshot {
            id,
            notsent_bytes: notsent,
            ..sf(U, port, sent, 0)
        };
        let mut m = machine(PmKind::Kernel);
        m.set_held(true);
        let early = snap(0, vec![sf(T, 40000, 0, 0), join(2, 41000, 0, 0)]);
        assert_eq!(m.connected(&early), Ok(Verdict::Proceed));
        assert_eq!(m.before_first_flight(&early), Ok(Verdict::Proceed));
        m.on_event(PathEvent::SubflowEstablished {
            iface: None,
            token: TOKEN,
            local: sa(U, 41001),
        })
        .unwrap();
        let s = snap(
            0,
            vec![
                sf(T, 40000, 1200, 0),
                join(2, 41000, 0, 0),
                join(3, 41001, 0, 0),
            ],
        );
        assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Wait { acked: 0 }));
        assert!(!m.holds_back(&s));
        assert_eq!(m.withdraw_untrusted(&s), Ok(vec![]));
        // the kernel hands the second join the first flight again: it alone is answered
        let s = snap(
            0,
            vec![
                sf(T, 40000, 1200, 0),
                join(2, 41000, 0, 0),
                join(3, 41001, 1200, 0),
            ],
        );
        assert!(m.holds_back(&s));
        assert_eq!(m.withdraw_untrusted(&s), Ok(vec![join(3, 41001, 1200, 0)]));
        assert!(!m.holds_back(&s));
        // acknowledged: proceed with the empty join listed (it carries data from now on)
        let s = snap(
            1200,
            vec![
                sf(T, 40000, 2400, 0),
                join(2, 41000, 0, 0),
                join(3, 41001, 1200, 0),
            ],
        );
        assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Proceed));
        m.set_held(false);
        assert_eq!(m.release(&s), Ok(Verdict::Release { open: vec![] }));

        // not held: the early subflow refuses before anything is written
        let mut m = machine(PmKind::Kernel);
        m.connected(&early).unwrap();
        assert_eq!(
            m.before_first_flight(&early),
            Err(Refusal::UntrustedBeforeFirstFlight {
                local: sa(U, 41000)
            })
        );
    }

    /// Held, an untrusted subflow that sent payload while the hold counted no drop for the
    /// connection (the program never saw its packets: the process moved to another cgroup)
    /// refuses, in one line naming the hold; as many drops as subflows that sent are
    /// needed, and a missing entry (`None`) counts as none.
    #[test]
    fn bytes_sent_while_held_without_a_counted_drop_refuse_naming_the_hold() {
        let join = |id, port, sent| SubflowSnapshot {
            id,
            ..sf(U, port, sent, 0)
        };
        for dropped in [None, Some(0)] {
            let mut m = in_flight(PmKind::Kernel);
            m.set_held(true);
            let s = Snapshot {
                dropped,
                ..snap(0, vec![sf(T, 40000, 1200, 0), join(2, 41000, 1200)])
            };
            let r = m.poll_first_flight(LEN, &s).unwrap_err();
            assert_eq!(
                r,
                Refusal::HoldNotInEffect {
                    local: sa(U, 41000),
                    sent: 1200,
                    dropped
                }
            );
            let line = r.to_string();
            assert!(!line.contains('\n'), "{line}");
            assert!(
                line.contains("first-flight hold")
                    && line.contains("another cgroup")
                    && line.contains(U),
                "{line}"
            );
            assert_final(&mut m, &s);
        }
        // two untrusted subflows sent, one drop counted: one of them was not held
        let mut m = in_flight(PmKind::Kernel);
        m.set_held(true);
        let two = vec![
            sf(T, 40000, 1200, 0),
            join(2, 41000, 600),
            join(3, 41001, 600),
        ];
        let s = Snapshot {
            dropped: Some(1),
            ..snap(0, two.clone())
        };
        assert!(matches!(
            m.withdraw_untrusted(&s),
            Err(Refusal::HoldNotInEffect { .. })
        ));
        // two drops for two: withdrawn, as before
        let mut m = in_flight(PmKind::Kernel);
        m.set_held(true);
        let s = Snapshot {
            dropped: Some(2),
            ..snap(0, two)
        };
        assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Wait { acked: 0 }));
        assert_eq!(m.withdraw_untrusted(&s).unwrap().len(), 2);
        // not held: no drop is expected, the bytes refuse as sent
        let mut m = in_flight(PmKind::Kernel);
        let s = snap(0, vec![sf(T, 40000, 1200, 0), join(2, 41000, 1200)]);
        assert!(matches!(
            m.poll_first_flight(LEN, &s),
            Err(Refusal::UntrustedSent { .. })
        ));
    }

    /// On every exit but a proceed (refused, not acknowledged in time, dropped unfinished)
    /// every untrusted subflow is answered for closing, whatever it holds, withdrawn before
    /// or not, its address unknown included; trusted ones are not. Once proceeded, or for a
    /// fallback connection, nothing.
    #[test]
    fn every_untrusted_subflow_is_closed_on_any_exit_but_a_proceed() {
        let all = vec![
            sf(T, 40000, 1200, 0),
            sf(U, 41000, 0, 0),
            SubflowSnapshot {
                local: None,
                ..sf(U, 41001, 0, 0)
            },
            sf(T2, 42000, 0, 0),
            sf(U, 41002, 600, 0),
        ];
        // not yet connected, connected, in flight
        let m = machine(PmKind::Kernel);
        assert_eq!(m.exit_withdrawals(&all), Some(vec![1, 2, 4]));
        let mut m = in_flight(PmKind::Kernel);
        m.set_held(true);
        assert_eq!(m.exit_withdrawals(&all), Some(vec![1, 2, 4]));
        // one withdrawn already is answered again (its close may not have happened)
        let s = Snapshot {
            dropped: Some(1),
            ..snap(0, all.clone())
        };
        assert_eq!(m.withdraw_untrusted(&s).unwrap().len(), 1);
        assert_eq!(m.exit_withdrawals(&all), Some(vec![1, 2, 4]));
        // refused
        let mut m = in_flight(PmKind::Kernel);
        assert!(m.poll_first_flight(LEN, &snap(0, all.clone())).is_err());
        assert_eq!(m.exit_withdrawals(&all), Some(vec![1, 2, 4]));
        // proceeded, released: nothing to undo
        let mut m = in_flight(PmKind::Kernel);
        let ok = snap(LEN, vec![sf(T, 40000, LEN, 0)]);
        assert_eq!(m.poll_first_flight(LEN, &ok), Ok(Verdict::Proceed));
        assert_eq!(m.exit_withdrawals(&all), None);
        m.release(&ok).unwrap();
        assert_eq!(m.exit_withdrawals(&all), None);
        let m = GateMachine::new(policy(), PmKind::Kernel, remote(), true);
        assert_eq!(m.exit_withdrawals(&all), None);
    }

    /// The first flight is late: the untrusted subflows listed now are answered once, for
    /// the caller to close; their going and their close events are then expected, a new one
    /// is answered at the next look, and the first flight still needs its ACK.
    #[test]
    fn late_first_flight_withdraws_untrusted_subflows_once() {
        let mut m = in_flight(PmKind::Kernel);
        let join = |id, port| SubflowSnapshot {
            id,
            ..sf(U, port, 0, 0)
        };
        let s = snap(0, vec![sf(T, 40000, 1200, 0), join(2, 41000)]);
        assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Wait { acked: 0 }));
        m.on_event(PathEvent::SubflowEstablished {
            iface: None,
            token: TOKEN,
            local: sa(U, 41000),
        })
        .unwrap();
        assert_eq!(m.withdraw_untrusted(&s), Ok(vec![join(2, 41000)]));
        assert_eq!(m.withdraw_untrusted(&s), Ok(vec![]));
        // Still listed while it closes; then gone, its close event read: no refusal.
        assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Wait { acked: 0 }));
        m.on_event(PathEvent::SubflowClosed {
            iface: None,
            token: TOKEN,
            local: sa(U, 41000),
        })
        .unwrap();
        let later = snap(0, vec![sf(T, 40000, 1200, 0), join(3, 41001)]);
        assert_eq!(
            m.poll_first_flight(LEN, &later),
            Ok(Verdict::Wait { acked: 0 })
        );
        assert_eq!(m.withdraw_untrusted(&later), Ok(vec![join(3, 41001)]));
        let acked = snap(1200, vec![sf(T, 40000, 1200, 0)]);
        assert_eq!(m.poll_first_flight(LEN, &acked), Ok(Verdict::Proceed));
        // After the first flight, nothing is withdrawn.
        assert_eq!(m.withdraw_untrusted(&later), Ok(vec![]));
    }

    /// One that sent a byte already is refused, not withdrawn; a subflow nena could not close
    /// refuses the connection, naming it.
    #[test]
    fn withdrawing_a_subflow_that_sent_or_cannot_be_closed_refuses() {
        let mut m = in_flight(PmKind::Kernel);
        let s = snap(0, vec![sf(T, 40000, 1200, 0), sf(U, 41000, 1, 0)]);
        assert_eq!(
            m.withdraw_untrusted(&s),
            Err(Refusal::UntrustedSent {
                local: sa(U, 41000)
            })
        );
        assert_final(&mut m, &s);
        let mut m = in_flight(PmKind::Kernel);
        let r = m.refuse_unwithdrawable(sa(U, 41000), 120, "Operation not permitted".into());
        assert_eq!(r.local(), sa(U, 41000));
        assert!(r.to_string().contains("after 120 ms"), "{r}");
        assert!(r.to_string().contains("CAP_NET_ADMIN"), "{r}");
        assert_final(&mut m, &snap(0, vec![sf(T, 40000, 1200, 0)]));
    }

    /// Two untrusted subflows from one local address and port (to two remote addresses);
    /// the one that sent a byte of the first flight closes, the other stays: the gate must
    /// see that one of the two is gone, by the kernel's ids or, before 6.5, by their count.
    #[test]
    fn one_of_two_subflows_from_one_address_closed_is_refused() {
        for ids in [(2, 3), (0, 0)] {
            let mut m = in_flight(PmKind::Kernel);
            let join = |id| SubflowSnapshot {
                id,
                ..sf(U, 41000, 0, 0)
            };
            let both = snap(0, vec![sf(T, 40000, 1200, 0), join(ids.0), join(ids.1)]);
            assert_eq!(
                m.poll_first_flight(LEN, &both),
                Ok(Verdict::Wait { acked: 0 })
            );
            let one = snap(1200, vec![sf(T, 40000, 1200, 0), join(ids.1)]);
            assert_eq!(
                m.poll_first_flight(LEN, &one),
                Err(Refusal::UntrustedClosed {
                    local: sa(U, 41000)
                }),
                "ids {ids:?}"
            );
        }
        // With ids, one closed and another opened from the same address between two looks.
        let mut m = in_flight(PmKind::Kernel);
        let join = |id| SubflowSnapshot {
            id,
            ..sf(U, 41000, 0, 0)
        };
        let first = snap(0, vec![sf(T, 40000, 1200, 0), join(2)]);
        assert_eq!(
            m.poll_first_flight(LEN, &first),
            Ok(Verdict::Wait { acked: 0 })
        );
        let swapped = snap(1200, vec![sf(T, 40000, 1200, 0), join(3)]);
        assert_eq!(
            m.poll_first_flight(LEN, &swapped),
            Err(Refusal::UntrustedClosed {
                local: sa(U, 41000)
            })
        );
    }

    #[test]
    fn subflow_with_unknown_address_counts_as_untrusted() {
        let mut m = in_flight(PmKind::Kernel);
        let mut s = snap(1200, vec![sf(T, 40000, 1200, 0)]);
        s.subflows.push(SubflowSnapshot {
            iface: None,
            id: 0,
            local: None,
            bytes_sent: 5,
            bytes_received: 0,
            notsent_bytes: 0,
        });
        assert_eq!(
            m.poll_first_flight(LEN, &s),
            Err(Refusal::UntrustedSent { local: None })
        );
    }

    #[test]
    fn untrusted_subflow_that_received_the_peers_first_flight_is_refused() {
        // The peer's answer came over the untrusted subflow: invisible to the sender check,
        // refused by check_idle(received = true).
        let mut m = in_flight(PmKind::Kernel);
        let s = snap(1200, vec![sf(T, 40000, 1200, 0), sf(U, 40001, 0, 300)]);
        assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Proceed));
        assert_eq!(m.check_idle(&s, false), Ok(Verdict::Proceed));
        let r = m.check_idle(&s, true).unwrap_err();
        assert_eq!(
            r,
            Refusal::UntrustedReceived {
                local: sa(U, 40001)
            }
        );
        assert!(r
            .to_string()
            .contains("received data of the peer's first flight"));
        assert_final(&mut m, &s);
        // And check_idle's sender check, on its own.
        let mut m = in_flight(PmKind::Kernel);
        let s = snap(0, vec![sf(T, 40000, 1200, 0), sf(U, 40001, 7, 0)]);
        assert_eq!(
            m.check_idle(&s, false),
            Err(Refusal::UntrustedSent {
                local: sa(U, 40001)
            })
        );
    }

    #[test]
    fn untrusted_subflow_gone_from_a_later_snapshot_is_refused_without_events() {
        let mut m = in_flight(PmKind::Kernel);
        let with = snap(0, vec![sf(T, 40000, 1200, 0), sf(U, 40001, 0, 0)]);
        assert_eq!(
            m.poll_first_flight(1200, &with).unwrap(),
            Verdict::Wait { acked: 0 }
        );
        // The next look does not list it: it was closed, what it carried is unknown.
        let without = snap(1200, vec![sf(T, 40000, 1200, 0)]);
        let r = m.poll_first_flight(1200, &without).unwrap_err();
        assert_eq!(
            r,
            Refusal::UntrustedClosed {
                local: sa(U, 40001)
            }
        );
        // Listed in both looks, with nothing sent: the first flight proceeds.
        let mut m = in_flight(PmKind::Kernel);
        m.poll_first_flight(1200, &with).unwrap();
        let acked = snap(1200, vec![sf(T, 40000, 1200, 0), sf(U, 40001, 0, 0)]);
        assert_eq!(m.poll_first_flight(1200, &acked).unwrap(), Verdict::Proceed);
    }

    #[test]
    fn untrusted_subflow_closed_during_the_first_flight_is_refused() {
        let mut m = in_flight(PmKind::Userspace);
        let quiet = snap(1200, vec![sf(T, 40000, 1200, 0)]);
        // Another connection's subflow, and a trusted subflow of ours, may close.
        m.on_event(PathEvent::SubflowClosed {
            iface: None,
            token: TOKEN ^ 1,
            local: sa(U, 40001),
        })
        .unwrap();
        m.on_event(PathEvent::SubflowClosed {
            iface: None,
            token: TOKEN,
            local: sa(T2, 40002),
        })
        .unwrap();
        assert_eq!(m.stage(), Stage::FirstFlight);
        // Ours, untrusted: the counters show nothing any more, the event refuses.
        let r = m
            .on_event(PathEvent::SubflowClosed {
                iface: None,
                token: TOKEN,
                local: sa(U, 40001),
            })
            .unwrap_err();
        assert_eq!(
            r,
            Refusal::UntrustedClosed {
                local: sa(U, 40001)
            }
        );
        assert!(r.to_string().contains("closed during the first flight"));
        assert_final(&mut m, &quiet);
    }

    #[test]
    fn untrusted_subflow_established_then_gone_is_not_acked_until_accounted_for() {
        let mut m = in_flight(PmKind::Kernel);
        m.on_event(PathEvent::SubflowEstablished {
            iface: None,
            token: TOKEN,
            local: sa(U, 40001),
        })
        .unwrap();
        // The ACK is complete but the established untrusted subflow is not listed: its close
        // event may not have been read yet.
        let gone = snap(1200, vec![sf(T, 40000, 1200, 0)]);
        assert_eq!(
            m.poll_first_flight(LEN, &gone),
            Ok(Verdict::Wait { acked: 1200 })
        );
        // Listed and idle: accounted for (also when listed as an IPv4-mapped address).
        let mut m2 = m.clone();
        let listed = snap(1200, vec![sf(T, 40000, 1200, 0), sf(U, 40001, 0, 0)]);
        assert_eq!(m2.poll_first_flight(LEN, &listed), Ok(Verdict::Proceed));
        let mut m3 = m.clone();
        let mapped = snap(
            1200,
            vec![sf(T, 40000, 1200, 0), sf("::ffff:198.18.2.2", 40001, 0, 0)],
        );
        assert_eq!(m3.poll_first_flight(LEN, &mapped), Ok(Verdict::Proceed));
        // Another port of the same address is another subflow.
        let mut m4 = m.clone();
        let other = snap(1200, vec![sf(T, 40000, 1200, 0), sf(U, 40009, 0, 0)]);
        assert_eq!(
            m4.poll_first_flight(LEN, &other),
            Ok(Verdict::Wait { acked: 1200 })
        );
        // Its close event arrives: refused.
        assert!(m
            .on_event(PathEvent::SubflowClosed {
                iface: None,
                token: TOKEN,
                local: sa(U, 40001),
            })
            .is_err());
        assert_final(&mut m, &gone);
    }

    #[test]
    fn lost_events_are_refused_as_unverifiable() {
        let mut m = in_flight(PmKind::Kernel);
        let r = m.on_event(PathEvent::Lost).unwrap_err();
        assert_eq!(r, Refusal::EventsLost);
        assert!(r.is_unverifiable());
        assert!(r.to_string().contains("events were lost"));
        assert_final(&mut m, &snap(1200, vec![sf(T, 40000, 1200, 0)]));
    }

    #[test]
    fn events_outside_the_first_flight_are_ignored() {
        // Before: the driver drains the subscription when the first flight starts, so what
        // happened while idle (nothing was written) does not count.
        let mut m = machine(PmKind::Kernel);
        let s = snap(0, vec![sf(T, 40000, 0, 0)]);
        m.connected(&s).unwrap();
        m.on_event(PathEvent::Lost).unwrap();
        m.on_event(PathEvent::SubflowClosed {
            iface: None,
            token: TOKEN,
            local: sa(U, 40001),
        })
        .unwrap();
        assert_eq!(m.before_first_flight(&s), Ok(Verdict::Proceed));
        // After the ACK: untrusted subflows may come and go.
        let s = snap(1200, vec![sf(T, 40000, 1200, 0)]);
        assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Proceed));
        m.on_event(PathEvent::Lost).unwrap();
        assert_eq!(m.stage(), Stage::Acked);
    }

    #[test]
    fn initial_subflow_not_trusted_is_refused() {
        for local in [U, "198.18.9.9"] {
            let mut m = machine(PmKind::Kernel);
            let s = snap(0, vec![sf(local, 40000, 0, 0)]);
            let r = m.connected(&s).unwrap_err();
            assert_eq!(
                r,
                Refusal::InitialNotTrusted {
                    local: sa(local, 40000)
                }
            );
            assert!(r.to_string().contains("not trusted"));
            assert_final(&mut m, &s);
        }
        // Only the first subflow is the initial one: a trusted one listed second does not
        // make an untrusted initial subflow acceptable.
        let mut m = machine(PmKind::Kernel);
        let s = snap(0, vec![sf(U, 40000, 0, 0), sf(T, 40001, 0, 0)]);
        assert!(m.connected(&s).is_err());
        let mut m = machine(PmKind::Kernel);
        assert_eq!(m.connected(&Snapshot::default()), Err(Refusal::NoSubflow));
    }

    #[test]
    fn out_of_order_use_is_refused() {
        let s = snap(1200, vec![sf(T, 40000, 1200, 0)]);
        let mut m = machine(PmKind::Userspace);
        let ooo =
            |r: Result<Verdict, Refusal>| matches!(r, Err(Refusal::OutOfOrder(w)) if w != REFUSED);
        assert!(ooo(m.before_first_flight(&s)));
        assert!(ooo(m.poll_first_flight(LEN, &s)));
        assert!(ooo(m.check_idle(&s, false)));
        m.connected(&s).unwrap();
        assert!(ooo(m.connected(&s)));
        assert!(ooo(m.poll_first_flight(LEN, &s)));
        assert!(ooo(m.release(&s)));
        m.before_first_flight(&snap(0, vec![sf(T, 40000, 0, 0)]))
            .unwrap();
        assert!(ooo(m.before_first_flight(&s)));
        // Release before the ACK: refused, and the gate is still waiting (not released).
        let r = m.release(&s).unwrap_err();
        assert_eq!(
            r.to_string(),
            "gate used out of order: the first flight is not acknowledged yet"
        );
        assert_eq!(m.stage(), Stage::FirstFlight);
        m.poll_first_flight(LEN, &s).unwrap();
        m.release(&s).unwrap();
        assert!(ooo(m.check_idle(&s, true)));
        // None of that was a refusal of the connection.
        assert_eq!(m.refusal(), None);
    }

    #[test]
    fn fallback_connection_proceeds_without_checks_and_opens_nothing() {
        let mut m = GateMachine::new(policy(), PmKind::Userspace, remote(), true);
        let none = Snapshot::default();
        assert!(m.is_fallback());
        assert_eq!(m.connected(&none), Ok(Verdict::Proceed));
        assert_eq!(m.before_first_flight(&none), Ok(Verdict::Proceed));
        assert_eq!(m.stage(), Stage::Acked);
        // Events mean nothing without MPTCP.
        m.on_event(PathEvent::Lost).unwrap();
        assert_eq!(m.poll_first_flight(LEN, &none), Ok(Verdict::Proceed));
        assert_eq!(m.check_idle(&none, true), Ok(Verdict::Proceed));
        assert_eq!(m.release(&none), Ok(Verdict::Release { open: vec![] }));
    }

    #[test]
    fn acked_via_bytes_acked_is_counted_from_the_baseline() {
        let mut m = machine(PmKind::Kernel);
        let base = Snapshot {
            conn: ConnSnapshot {
                token: TOKEN,
                bytes_acked: Some(5_000),
                snd_una: 0,
            },
            subflows: vec![sf(T, 40000, 0, 0)],
            dropped: None,
        };
        m.connected(&base).unwrap();
        m.before_first_flight(&base).unwrap();
        let at = |acked| Snapshot {
            conn: ConnSnapshot {
                bytes_acked: Some(acked),
                ..base.conn
            },
            ..base.clone()
        };
        // snd_una is ignored when bytes_acked exists.
        assert_eq!(
            m.poll_first_flight(LEN, &at(6_199)),
            Ok(Verdict::Wait { acked: 1_199 })
        );
        assert_eq!(m.poll_first_flight(LEN, &at(6_200)), Ok(Verdict::Proceed));
    }

    #[test]
    fn acked_via_snd_una_wraps_around() {
        // Kernels < 6.5: no bytes_acked; snd_una is a 64-bit sequence number that may wrap.
        let mut m = machine(PmKind::Kernel);
        let at = |una: u64| Snapshot {
            conn: ConnSnapshot {
                token: TOKEN,
                bytes_acked: None,
                snd_una: una,
            },
            subflows: vec![sf(T, 40000, 0, 0)],
            dropped: None,
        };
        let base = u64::MAX - 99;
        m.connected(&at(base)).unwrap();
        m.before_first_flight(&at(base)).unwrap();
        assert_eq!(
            m.poll_first_flight(LEN, &at(base.wrapping_add(1199))),
            Ok(Verdict::Wait { acked: 1199 })
        );
        assert_eq!(
            m.poll_first_flight(LEN, &at(base.wrapping_add(1200))),
            Ok(Verdict::Proceed)
        );
    }

    #[test]
    fn trusted_second_subflow_is_fine() {
        let mut m = in_flight(PmKind::Kernel);
        m.on_event(PathEvent::SubflowEstablished {
            iface: None,
            token: TOKEN,
            local: sa(T2, 40002),
        })
        .unwrap();
        // It carries part of the first flight and of the peer's answer: allowed.
        let s = snap(1200, vec![sf(T, 40000, 700, 0), sf(T2, 40002, 500, 90)]);
        assert_eq!(m.check_idle(&s, true), Ok(Verdict::Proceed));
        assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Proceed));
        m.on_event(PathEvent::SubflowClosed {
            iface: None,
            token: TOKEN,
            local: sa(T2, 40002),
        })
        .unwrap();
        // In-kernel PM: the kernel opens its endpoints itself; nothing to open.
        assert_eq!(m.release(&s), Ok(Verdict::Release { open: vec![] }));
    }

    #[test]
    fn release_opens_every_other_policy_address_of_the_remotes_family() {
        let mut m = in_flight(PmKind::Userspace);
        // T2 is in use already (a trusted second subflow): not opened again; loopback and
        // the IPv6 address are left out for an IPv4 remote.
        let s = snap(1200, vec![sf(T, 40000, 1200, 0), sf(T2, 40002, 0, 0)]);
        m.poll_first_flight(LEN, &s).unwrap();
        assert_eq!(m.release(&s), Ok(Verdict::Release { open: vec![ip(U)] }));
    }

    #[test]
    fn path_events_from_pm_events() {
        let e = PmEvent {
            kind: MPTCP_EVENT_SUB_CLOSED,
            token: Some(7),
            local: sa(U, 1),
            remote: None,
            backup: None,
            flags: None,
            ifindex: None,
        };
        assert_eq!(
            PathEvent::from_pm(&e),
            Some(PathEvent::SubflowClosed {
                iface: None,
                token: 7,
                local: sa(U, 1)
            })
        );
        let est = PmEvent {
            kind: MPTCP_EVENT_SUB_ESTABLISHED,
            ..e.clone()
        };
        assert_eq!(
            PathEvent::from_pm(&est),
            Some(PathEvent::SubflowEstablished {
                iface: None,
                token: 7,
                local: sa(U, 1)
            })
        );
        let no_token = PmEvent {
            token: None,
            ..e.clone()
        };
        assert_eq!(PathEvent::from_pm(&no_token), None);
        let other = PmEvent {
            kind: crate::pm::MPTCP_EVENT_CREATED,
            ..e
        };
        assert_eq!(PathEvent::from_pm(&other), None);
    }

    #[test]
    fn refusals_are_one_line() {
        let all = [
            Refusal::NoSubflow,
            Refusal::InitialNotTrusted { local: None },
            Refusal::UntrustedBeforeFirstFlight { local: sa(U, 1) },
            Refusal::UntrustedSent { local: sa(U, 1) },
            Refusal::UntrustedReceived { local: sa(U, 1) },
            Refusal::UntrustedClosed { local: sa(U, 1) },
            Refusal::HoldNotInEffect {
                local: sa(U, 1),
                sent: 1200,
                dropped: Some(0),
            },
            Refusal::EventsLost,
            Refusal::OutOfOrder(REFUSED),
        ];
        for r in all {
            let m = r.to_string();
            assert!(!m.is_empty() && !m.contains('\n'), "{m}");
            assert_eq!(r.is_unverifiable(), r == Refusal::EventsLost);
        }
    }

    /// A simulated connection during its first flight: what really happened (the ground
    /// truth) and what the gate may observe (snapshots of open subflows, events that may be
    /// lost, in which case the loss is reported).
    #[derive(Debug, Clone)]
    enum Step {
        /// The trusted initial subflow sends `n` bytes of the first flight.
        TrustedSend(u64),
        /// A new subflow is established, from a trusted address or not.
        Open { trusted: bool },
        /// Subflow `i` (modulo the number) sends `n` bytes.
        Send(usize, u64),
        /// Subflow `i` receives `n` bytes.
        Receive(usize, u64),
        /// Subflow `i` is closed (the initial one never is).
        Close(usize),
        /// The peer acknowledges `n` more bytes at the data level.
        Ack(u64),
        /// The event queue overruns: queued events are dropped, the loss is reported.
        LoseEvents,
        /// The driver reads a snapshot, feeds the events and polls.
        Observe,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (1u64..800).prop_map(Step::TrustedSend),
            any::<bool>().prop_map(|trusted| Step::Open { trusted }),
            (0usize..8, 1u64..300).prop_map(|(i, n)| Step::Send(i, n)),
            (0usize..8, 1u64..300).prop_map(|(i, n)| Step::Receive(i, n)),
            (1usize..8).prop_map(Step::Close),
            (1u64..700).prop_map(Step::Ack),
            Just(Step::LoseEvents),
            Just(Step::Observe),
            Just(Step::Observe),
        ]
    }

    struct World {
        /// (local, trusted, sent, received, open)
        subflows: Vec<(SocketAddr, bool, u64, u64, bool)>,
        acked: u64,
        events: Vec<PathEvent>,
        /// An untrusted subflow sent bytes while the first flight was not fully acked.
        violated: bool,
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Never Proceed (or Release) while any untrusted subflow has sent bytes before the
        /// first flight was acked, whatever the interleaving, even when that subflow is
        /// closed again before the gate looks; and a clean run proceeds once acked.
        #[test]
        fn never_releases_after_untrusted_bytes_before_the_ack(
            steps in proptest::collection::vec(step(), 1..60),
            pm in prop_oneof![Just(PmKind::Kernel), Just(PmKind::Userspace)],
        ) {
            let mut m = machine(pm);
            let mut w = World {
                subflows: vec![(sa(T, 40000).unwrap(), true, 0, 0, true)],
                acked: 0,
                events: vec![],
                violated: false,
            };
            let observe = |w: &World| Snapshot {
                conn: ConnSnapshot { token: TOKEN, bytes_acked: Some(w.acked), snd_una: 1 + w.acked },
                subflows: w.subflows.iter().filter(|s| s.4)
                    .map(|s| SubflowSnapshot { iface: None, id: 0, local: Some(s.0), bytes_sent: s.2, bytes_received: s.3, notsent_bytes: 0 })
                    .collect(),
                dropped: None,
            };
            let s0 = observe(&w);
            m.connected(&s0).unwrap();
            m.before_first_flight(&s0).unwrap();
            let mut proceeded = false;
            let mut untrusted_ever = false;
            let mut lost_ever = false;
            for st in steps.iter().cloned().chain([Step::Observe]) {
                match st {
                    Step::TrustedSend(n) => w.subflows[0].2 += n,
                    Step::Open { trusted } => {
                        let k = w.subflows.len() as u16;
                        let addr = if trusted { T2 } else { U };
                        let local = sa(addr, 41000 + k).unwrap();
                        w.subflows.push((local, trusted, 0, 0, true));
                        untrusted_ever |= !trusted;
                        w.events.push(PathEvent::SubflowEstablished { iface: None, token: TOKEN, local: Some(local) });
                    }
                    Step::Send(i, n) => {
                        let i = i % w.subflows.len();
                        if w.subflows[i].4 {
                            w.subflows[i].2 += n;
                            if !w.subflows[i].1 && w.acked < LEN {
                                w.violated = true;
                            }
                        }
                    }
                    Step::Receive(i, n) => {
                        let i = i % w.subflows.len();
                        if w.subflows[i].4 {
                            w.subflows[i].3 += n;
                        }
                    }
                    Step::Close(i) => {
                        let i = i % w.subflows.len();
                        if i > 0 && w.subflows[i].4 {
                            w.subflows[i].4 = false;
                            w.events.push(PathEvent::SubflowClosed { iface: None, token: TOKEN, local: Some(w.subflows[i].0) });
                        }
                    }
                    Step::Ack(n) => w.acked = (w.acked + n).min(LEN),
                    Step::LoseEvents => {
                        w.events.clear();
                        w.events.push(PathEvent::Lost);
                        lost_ever = true;
                    }
                    Step::Observe => {
                        let s = observe(&w);
                        for e in w.events.drain(..) {
                            let _ = m.on_event(e);
                        }
                        match m.poll_first_flight(LEN, &s) {
                            Ok(Verdict::Proceed) => {
                                prop_assert!(!w.violated, "proceeded after a violation");
                                proceeded = true;
                                let r = m.release(&s);
                                prop_assert!(matches!(r, Ok(Verdict::Release { .. })), "{:?}", r);
                                // After the release, everything is allowed: stop here.
                                break;
                            }
                            Ok(Verdict::Wait { acked }) => prop_assert!(acked < LEN || untrusted_ever),
                            Ok(other) => prop_assert!(false, "unexpected {other:?}"),
                            Err(_) => {
                                prop_assert_eq!(m.stage(), Stage::Refused);
                                prop_assert!(m.release(&s).is_err());
                            }
                        }
                    }
                }
            }
            // Not vacuous: a run with no untrusted subflow and no lost event proceeds as
            // soon as it is acked.
            if !untrusted_ever && !lost_ever && w.acked >= LEN {
                prop_assert!(proceeded, "a clean acked run did not proceed");
            }
            if w.violated {
                prop_assert!(!proceeded);
            }
        }
    }
}
