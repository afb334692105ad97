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

pub use super::snapshot::{
    ConnSnapshot, PathEvent, Refusal, Snapshot, SubflowSnapshot, Verdict, REFUSED,
};
use crate::path::same_addr as same;
use crate::path::{ResolvedPolicy, Trust};
use crate::sockopt::SubflowInfo;
use crate::PmKind;
use std::net::{IpAddr, SocketAddr};

/// `TCP_ESTABLISHED` (`tcpi_state`).
const TCP_ESTABLISHED: u8 = 1;

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
    /// Whether payload is held to trusted interfaces now ([`GateMachine::set_held`]).
    pub fn is_held(&self) -> bool {
        self.held
    }

    /// In-kernel PM, not a fallback: the connection's payload is held to its trusted
    /// interfaces until the first flight is acknowledged ([`crate::hold`]).
    pub fn needs_hold(&self) -> bool {
        self.pm() == crate::PmKind::Kernel && !self.is_fallback()
    }
    /// In-kernel PM, not held: the untrusted subflows the kernel opened before the first
    /// flight are closed before it is written (see `close_premature`).
    pub fn closes_premature(&self) -> bool {
        self.needs_hold() && !self.is_held()
    }
    /// Whether the path-manager subscription still matters: until the release, which reads
    /// it (the in-kernel PM's joins, and their failures, come with the acknowledgement of
    /// the first flight, and an address of the other family may be announced, before the
    /// recovery service watches); not after a refusal.
    pub fn keeps_events(&self) -> bool {
        matches!(
            self.stage(),
            Stage::FirstFlight | Stage::Connected | Stage::Acked
        )
    }

    /// The first flight is not acknowledged yet (the machine answered [`Wait`]): whether the
    /// driver withdraws untrusted subflows now ([`GateMachine::withdraw_untrusted`]).
    ///
    /// Held: when one holds payload ([`GateMachine::holds_back`]). One with none is safe to
    /// keep: (1) until the release no payload of the connection leaves by an untrusted
    /// interface (the hold drops it; TCP keeps it queued, so `bytes_sent` or
    /// `notsent_bytes` shows it, and both only grow until a subflow-level ACK, which cannot
    /// come for bytes that never left). (2) The machine proceeds only once the first flight
    /// is DATA_ACKed (`bytes_acked`, or `snd_una`, from MPTCP_INFO, read before
    /// MPTCP_FULL_INFO, which takes the MPTCP socket's lock, so a push or reinjection under
    /// way when the ACK was read has queued its bytes when the subflows are read) and no
    /// untrusted subflow holds payload then. (3) After that the kernel never hands
    /// first-flight bytes to a subflow again: its MPTCP-level retransmissions (timer, a
    /// closed subflow's pending data, a stale subflow) take the retransmit queue from the
    /// data-level snd_una on, trimming what the DATA_ACK covered first, and a subflow's TCP
    /// retransmits only what that subflow was handed. So a kept subflow carries only bytes
    /// written after the first flight.
    ///
    /// Not held: when an untrusted subflow has joined, a trusted one is stuck, or the
    /// guard ran out (`late`). The kernel sends what it has not had acknowledged on a
    /// subflow that has just joined (seen in the lab within half a millisecond of the
    /// join), and part of it still unsent on a trusted subflow (a local drop, a full queue)
    /// goes to the next subflow it can use at once; sent and lost, it moves when the kernel
    /// retransmits it, after an RTO. An untrusted join is reported established on its
    /// SYN-ACK, a round trip of its own path before it may carry data (the fourth ACK):
    /// closing it then is in time. `infos` are the subflows of `snap` as listed.
    ///
    /// [`Wait`]: super::Verdict::Wait
    pub fn withdraw_due(&self, snap: &Snapshot, infos: &[SubflowInfo], late: bool) -> bool {
        if self.is_held() {
            return self.holds_back(snap);
        }
        let listed = || {
            snap.subflows
                .iter()
                .zip(infos)
                .map(|(s, i)| (self.trust(s.local, s.iface).is_trusted(), i))
        };
        let joined =
            listed().any(|(t, i)| !t && i.state == TCP_ESTABLISHED) || self.joined_untrusted();
        let stuck = listed().any(|(t, i)| t && i.notsent_bytes > 0);
        joined || stuck || late
    }
}

#[cfg(test)]
#[path = "machine_tests.rs"]
mod tests;
