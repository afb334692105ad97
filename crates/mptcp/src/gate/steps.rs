//! The gate driver's steps: each reads the [`Kernel`], feeds the machine and carries out
//! what the sans-IO code answered (close a subflow, end or keep the hold, make the close
//! abortive, drop the subscription, fast close, register with the recovery service, open
//! subflows). The decisions are the machine's ([`GateMachine`](super::GateMachine)) and its
//! helpers' ([`flight`], [`release`]).

use super::release::{self, Joins, ReleasePlan};
use super::Verdict;
use super::{flight, Gate, Kernel, PathEvent, ReleaseReport, Snapshot, Stage, SubflowSnapshot};
use crate::MptcpError;
use std::net::SocketAddr;
use std::time::Duration;

impl<K: Kernel> Gate<K> {
    /// One step of the wait: read, feed, decide. True once the first flight is acked and
    /// checked. Keeps the event subscription (a waiting driver may be watching its socket).
    pub(super) fn poll_step(&mut self, len: u64) -> Result<bool, MptcpError> {
        if self.machine.stage() != Stage::FirstFlight {
            let v = self.machine.poll_first_flight(len, &Snapshot::default())?;
            return Ok(v == Verdict::Proceed);
        }
        let (snap, infos) = self.read()?;
        // Events after the snapshot: a subflow closed before it was read is reported.
        self.feed_events()?;
        let verdict = self
            .machine
            .poll_first_flight(len, &snap)
            .inspect_err(|r| {
                let now = self.kernel.now();
                let after = self.flight.map(|f| now.saturating_duration_since(f.at));
                log::debug!("refused {after:?} after the first flight was written: {r}; {snap:?}");
            })?;
        if verdict == Verdict::Proceed {
            self.end_hold();
            return Ok(true);
        }
        let now = self.kernel.now();
        let late = self.flight.is_some_and(|f| f.late(now));
        if self.machine.withdraw_due(&snap, &infos, late) {
            self.withdraw_untrusted(&snap, &infos)?;
        }
        Ok(false)
    }

    /// The first flight is acknowledged and no untrusted subflow holds bytes (the machine
    /// proceeded, which it does once only): the connection's payload may leave by any
    /// interface again ([`crate::hold`]).
    fn end_hold(&mut self) {
        if !self.machine.is_held() {
            return;
        }
        log::debug!(
            "first flight acknowledged: hold released ({} packet(s) kept off untrusted \
             interfaces)",
            self.kernel.hold_dropped().unwrap_or(0)
        );
        self.kernel.release_hold();
        self.machine.set_held(false);
        if !self.aborted {
            if let Err(e) = self.kernel.set_abortive(false) {
                log::warn!("could not make the connection's close graceful again: {e}");
            }
        }
    }

    /// Close the untrusted subflows the machine answers
    /// ([`GateMachine::withdraw_untrusted`](super::GateMachine::withdraw_untrusted)): the first
    /// flight is late, an untrusted subflow joined, or (held) one was handed payload. One that
    /// cannot be closed (`CAP_NET_ADMIN`, `sock_diag` SOCK_DESTROY) refuses the connection (and
    /// resets it).
    fn withdraw_untrusted(
        &mut self,
        snap: &Snapshot,
        infos: &[crate::sockopt::SubflowInfo],
    ) -> Result<(), MptcpError> {
        for sf in self.machine.withdraw_untrusted(snap)? {
            let remote = infos
                .iter()
                .find(|i| i.id == sf.id && i.local == sf.local)
                .and_then(|i| i.remote);
            let local = sf
                .local
                .expect("the machine answers subflows with an address");
            let now = self.kernel.now();
            let waited = self.flight.map_or(0, |f| f.waited_ms(now));
            // No remote address in MPTCP_FULL_INFO: the connection's own sockets name it.
            let found = match remote {
                Some(r) => Ok(r),
                None => self.find_remote(local),
            };
            let closed = found.and_then(|remote| {
                let held = self.machine.is_held();
                let why = flight::withdraw_reason(
                    local,
                    remote,
                    held,
                    self.kernel.hold_dropped(),
                    waited,
                );
                let r = self
                    .kernel
                    .destroy(local, remote)
                    .map_err(|e| e.to_string());
                r.map(|_| why)
            });
            match closed {
                Ok(why) => self.withdrew(local, flight::withdrawn_note(&why)),
                Err(why) => {
                    let r = self.machine.refuse_unwithdrawable(Some(local), waited, why);
                    self.settle();
                    return Err(r.into());
                }
            }
        }
        Ok(())
    }

    /// The remote address of the connection's subflow from `local`, from the kernel's own
    /// list of the connection's sockets, for a subflow `MPTCP_FULL_INFO` gave none for. The
    /// error says why it cannot be closed.
    fn find_remote(&self, local: SocketAddr) -> Result<SocketAddr, String> {
        let all = self
            .kernel
            .sockets_of(self.token)
            .map_err(|e| format!("listing the connection's subflows: {e}"))?;
        all.iter()
            .find(|s| crate::path::same_addr(s.0, local))
            .map(|s| s.1)
            .ok_or_else(|| {
                format!(
                    "its remote address is unknown and no socket of the connection is from {local}"
                )
            })
    }

    /// In-kernel PM without the first-flight hold ([`crate::hold`]; a library user that provided
    /// none): close every subflow from a non-trusted local address that exists before the first
    /// flight is written. The kernel opens them by itself as soon as the connection is fully
    /// established, which an ADD_ADDR from the server (a server with a `signal` endpoint) makes it
    /// before the client has written anything; the default scheduler, or a retransmission after a
    /// loss on the trusted path, could then put the first flight on them. Nothing has been written
    /// yet, so closing them loses nothing; the in-kernel PM does not open them again, so such a
    /// connection stays on its trusted subflows (the userspace PM has no such subflows to close:
    /// nena opens them itself after the first flight). Closing needs `CAP_NET_ADMIN` (`sock_diag`
    /// SOCK_DESTROY): without it the gate refuses, as before.
    ///
    /// Held, they stay ([`GateMachine::closes_premature`](super::GateMachine::closes_premature)):
    /// no payload of the connection leaves by an untrusted interface until the release, and one of
    /// them that is handed any is withdrawn before the release
    /// ([`GateMachine::withdraw_due`](super::GateMachine::withdraw_due)).
    pub(super) fn close_premature(&mut self) -> Result<(), MptcpError> {
        // A closed subflow stays listed until the MPTCP worker unlinks it: wait for that, so
        // that the gate's own check sees no subflow but trusted ones.
        let deadline = self.kernel.now() + Duration::from_secs(3);
        loop {
            let (subflows, infos) = self.listed()?;
            let (listed, close) = flight::premature(&self.machine, &subflows, &infos);
            if listed.is_empty() {
                return Ok(());
            }
            if self.kernel.now() > deadline {
                // still listed: let the machine refuse (it names the subflow)
                log::warn!("subflows still listed 3 s after closing them: {listed:?}");
                return Ok(());
            }
            for (local, remote, state) in close {
                match self.kernel.destroy(local, remote) {
                    Ok(false) => {
                        log::debug!("no TCP socket {local} -> {remote} to close (state {state})")
                    }
                    Ok(true) => self.withdrew(local, flight::premature_note(local, remote)),
                    Err(e) => {
                        return Err(MptcpError::Policy(flight::premature_unclosable(
                            local, remote, &e,
                        )))
                    }
                }
            }
            self.kernel.sleep(Duration::from_micros(200));
        }
    }

    /// The gate ends without having proceeded (see
    /// [`GateMachine::exit_withdrawals`](super::GateMachine::exit_withdrawals)): closes every
    /// untrusted subflow of the connection, found by its token through the kernel's socket list (so
    /// one whose addresses `MPTCP_FULL_INFO` does not give is found too), then resets the
    /// connection (the kernel's MPTCP fast close: the remaining, trusted subflows are reset and the
    /// token is gone), and keeps the hold until the kernel no longer knows the token
    /// ([`crate::hold`]). Closing first keeps the fast close's reset off the untrusted paths too.
    pub(super) fn abandon(&mut self) {
        match self.kernel.sockets_of(self.token) {
            Ok(sockets) => {
                let snaps: Vec<SubflowSnapshot> = sockets
                    .iter()
                    .map(|(l, r, _)| SubflowSnapshot {
                        id: 0,
                        local: Some(*l),
                        iface: self.leaves_by(Some(*l), Some(*r)),
                        bytes_sent: 0,
                        bytes_received: 0,
                        notsent_bytes: 0,
                    })
                    .collect();
                for i in self.machine.exit_withdrawals(&snaps).unwrap_or_default() {
                    let (local, remote, s) = &sockets[i];
                    match self.kernel.destroy_socket(s) {
                        Ok(_) => log::debug!(
                            "closed the untrusted subflow {local} -> {remote} of a connection \
                             that did not proceed"
                        ),
                        Err(e) => log::warn!(
                            "nena cannot close the untrusted subflow {local} -> {remote} of a \
                             connection whose first flight was not acknowledged ({e}): the \
                             first-flight hold stays until the connection is gone"
                        ),
                    }
                }
            }
            Err(e) => log::warn!(
                "nena cannot list the subflows of a connection whose first flight was not \
                 acknowledged ({e}): the first-flight hold stays until the connection is gone"
            ),
        }
        self.aborted = true;
        let _ = self.kernel.set_abortive(true);
        if let Err(e) = self.kernel.fast_close() {
            log::debug!("resetting a connection that did not proceed: {e}");
        }
        self.kernel.keep_hold_until_gone();
    }

    /// Nena closed the untrusted subflow from `local` during the first flight: why the
    /// connection stays single-path (in-kernel PM), logged (info) and kept for the report.
    fn withdrew(&mut self, local: SocketAddr, line: String) {
        self.withdrawn.push(local);
        log::info!("{line}");
        self.notes.push(line);
    }

    /// Feed every queued path-manager event to the machine; a failed read (overrun) is a
    /// [`PathEvent::Lost`].
    fn feed_events(&mut self) -> Result<(), MptcpError> {
        let batch: Vec<PathEvent> = match self.kernel.pm_events() {
            None => return Ok(()),
            Some(Ok(v)) => {
                self.peer.note(self.token, &v);
                v.iter()
                    .filter_map(|e| {
                        // The event names the interface only of a bound subflow; an unbound
                        // one left where the route from its address leads.
                        let iface = e.ifindex.or_else(|| self.route_of(e.local, e.remote));
                        PathEvent::from_pm(e).map(|p| p.with_iface(iface))
                    })
                    .collect()
            }
            Some(Err(e)) => {
                log::debug!("mptcp_pm events: {e}");
                vec![PathEvent::Lost]
            }
        };
        for e in batch {
            self.machine.on_event(e)?;
        }
        Ok(())
    }

    /// Forget what the subscription queued so far, losses included (before the first
    /// flight nothing was written, so nothing that happened can have carried any of it).
    pub(super) fn discard_events(&mut self) {
        // A read reports an overrun once and stops; the queue behind it is read next.
        for _ in 0..4 {
            match self.kernel.pm_events() {
                None => return,
                Some(Ok(v)) => {
                    self.peer.note(self.token, &v);
                    return;
                }
                Some(Err(e)) => log::debug!("mptcp_pm events before the first flight: {e}"),
            }
        }
    }

    /// Read the queued events for announcements only (after the first flight, when nothing
    /// else in them matters any more).
    pub(super) fn read_announcements(&mut self) {
        match self.kernel.pm_events() {
            None => {}
            Some(Ok(v)) => self.peer.note(self.token, &v),
            Some(Err(e)) => log::debug!("mptcp_pm events at the release: {e}"),
        }
    }

    /// After a step: a refused connection's close resets it (a graceful close would go on sending
    /// the unacknowledged first flight, on whatever subflow the kernel picks), and the subscription
    /// goes once it no longer matters
    /// ([`GateMachine::keeps_events`](super::GateMachine::keeps_events)): every connection of the
    /// namespace would otherwise keep queueing events in it.
    pub(super) fn settle(&mut self) {
        if self.machine.stage() == Stage::Refused && !self.aborted {
            self.aborted = true;
            if let Err(e) = self.kernel.set_abortive(true) {
                log::warn!("could not make the refused connection's close abortive: {e}");
            }
        }
        if !self.machine.keeps_events() && self.kernel.subscribed() {
            self.kernel.unsubscribe();
        }
    }

    /// Register with the recovery service before any subflow is requested, so their events
    /// are seen: to recover subflows (userspace PM), or to watch the joins only (the
    /// in-kernel PM, which opens its subflows itself; recovery off), and to meter. Then
    /// hand it what the subscription read before.
    pub(super) fn register(&mut self, plan: &ReleasePlan) -> Result<(), MptcpError> {
        let addrs = self.metered_addrs();
        let metered = if release::meters(&self.machine, &addrs) {
            let open: Vec<_> = self
                .kernel
                .subflows()?
                .iter()
                .filter_map(|s| Some((s.local?, s.remote?, false)))
                .collect();
            Some(crate::metered::MeteredMachine::new(&addrs, &open))
        } else {
            None
        };
        let eps = self.kernel_endpoints.as_deref();
        let watched = release::watched_paths(&self.machine, self.recover, eps, metered.is_some());
        if let Some(watched) = watched {
            let now: Vec<_> = self
                .kernel
                .subflows()?
                .iter()
                .filter_map(|s| Some((s.local?, s.remote?)))
                .collect();
            self.recovering = watched.1;
            let m = plan.recovery_machine(watched, &now);
            match self.kernel.register_recovery(self.token, m, metered) {
                Ok(h) => self.recovery = Some(h),
                Err(e) => log::warn!("no subflow recovery for this connection: {e}"),
            }
        }
        // What was announced (and joined, or failed to) before the registration is in this
        // subscription; what comes after it reaches the recovery service.
        self.read_announcements();
        if let Some(h) = &self.recovery {
            h.replay(self.peer.take_early(&self.withdrawn));
            if let (None, Some(t)) = (plan.target, self.join_target()) {
                h.announce(t);
            }
        }
        Ok(())
    }

    /// Carry out the release's `joins` into `report`.
    pub(super) fn carry_out(
        &mut self,
        joins: Joins,
        report: &mut ReleaseReport,
    ) -> Result<(), MptcpError> {
        match joins {
            Joins::Awaiting(a) => report.awaiting.extend(a),
            Joins::Failed(f) => report.failed.extend(f),
            Joins::Open(o) => {
                for (addr, target, iface) in o {
                    // A family the path has no route in: say so rather than pass on the
                    // kernel's errno (the route lookup, as for the handshake).
                    if let Some(i) = iface {
                        if let Ok(false) = self.kernel.has_route(target.ip(), i.index) {
                            let why = crate::path::no_route_to_announced(target, &i, addr);
                            crate::notes::say_once(&format!("no route {addr} {target}"), &why);
                            report.failed.push((addr, why));
                            continue;
                        }
                    }
                    self.open_subflow(addr, target, report)?;
                }
            }
        }
        Ok(())
    }

    /// Userspace PM: asks the kernel (`SUBFLOW_CREATE`) for a subflow from `addr`, on its
    /// interface, to `target`; what came of it goes into `report`.
    fn open_subflow(
        &mut self,
        addr: std::net::IpAddr,
        target: SocketAddr,
        report: &mut ReleaseReport,
    ) -> Result<(), MptcpError> {
        let ifindex = self.machine.policy().iface(addr).map(|i| i.index);
        // A metered path's subflow opened at the release, while another path carries
        // already (the rare metered untrusted path beside a trusted one): born backup.
        let backup = self
            .recovery
            .as_ref()
            .is_some_and(|h| h.backup_for_new(addr));
        match self
            .kernel
            .subflow_create(self.token, addr, ifindex, target, backup)?
        {
            Ok(()) => report.created.push(addr),
            Err(e) => {
                log::warn!("could not open a subflow from {addr} to {target}: {e}");
                report.failed.push((addr, e));
            }
        }
        Ok(())
    }
}
