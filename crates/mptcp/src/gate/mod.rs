//! The trusted-path-first gate of a client connection. The decisions are the sans-IO
//! [`GateMachine`] ([`machine`]); [`Gate`] is its thin driver: it reads the snapshots
//! (`MPTCP_INFO`, `MPTCP_FULL_INFO`), drains the path-manager events, feeds them to the
//! machine, and carries out a release (`SUBFLOW_CREATE` for the userspace PM). Waiting for
//! the first flight's data-level ACK comes in two forms over the same steps: blocking
//! ([`Gate::wait_first_flight_acked`], `blocking.rs`) and async on tokio
//! ([`Gate::wait_first_flight_acked_async`], [`connect_async`], `asynchronous.rs`).
//!
//! Both wake up on a path-manager event (the subscription's socket becomes readable) and on
//! the peer's first bytes (the segment that carries them carries a DATA_ACK). The data-level
//! ACK itself raises no event a socket can wait on, so between wake-ups they poll with a
//! short adaptive backoff ([`Backoff`]: 250 µs doubling to 4 ms, reset by every wake-up).

mod asynchronous;
mod blocking;
pub mod machine;

pub use asynchronous::{connect_async, AsyncClient};
pub use machine::{
    ConnSnapshot, GateMachine, PathEvent, Refusal, Snapshot, Stage, SubflowSnapshot, Verdict,
};

use crate::path::{join_target, ResolvedPolicy, Trust};
use crate::pm::{Endpoint, PmEvents, PmSocket};
use crate::recovery::{RecoveryConfig, RecoveryHandle, RecoveryMachine};
use crate::sockopt::{self, ConnInfo, SubflowInfo};
use crate::{MptcpError, PmKind};
use serde::Serialize;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

/// One subflow with its trust under the connection's policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClassifiedSubflow {
    #[serde(flatten)]
    pub subflow: SubflowInfo,
    pub trust: Trust,
    /// The interface of the subflow's local address under the policy (`None`: an address
    /// the policy does not know an interface of).
    pub iface: Option<String>,
    /// The subflow is on a metered path (`--metered`).
    pub metered: bool,
}

/// What a connection is: MPTCP or not, multipath or not, and what each subflow carried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathReport {
    /// The connection runs MPTCP (did not fall back to TCP).
    pub mptcp: bool,
    /// At least two subflows carried payload (either direction).
    pub multipath: bool,
    pub pm: PmKind,
    /// The congestion control of the connection's subflows (`getsockopt(TCP_CONGESTION)`
    /// on the MPTCP socket); `None` where the kernel does not say.
    pub congestion: Option<String>,
    pub conn: Option<ConnInfo>,
    pub subflows: Vec<ClassifiedSubflow>,
    /// Why the connection is single-path, where nena knows it: a path none of whose joins
    /// was established (a network that strips MPTCP's options), a subflow of the in-kernel
    /// path manager nena closed during the first flight. `None` when multipath.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub single_path: Option<String>,
}

/// Result of [`Gate::release_untrusted`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReleaseReport {
    /// Userspace PM: local addresses a subflow was requested from.
    pub created: Vec<IpAddr>,
    /// Userspace PM: local addresses whose SUBFLOW_CREATE failed, with the reason.
    pub failed: Vec<(IpAddr, String)>,
    /// Userspace PM: local addresses whose subflow the recovery service opens once the peer
    /// announces an address to join: it denies joins to the one it was reached at (the C
    /// flag) and had announced none at the release.
    pub awaiting: Vec<IpAddr>,
    /// In-kernel PM: the `subflow` endpoints (of the remote's family) the kernel opens
    /// subflows from, as listed when connecting; empty means the connection stays single-path.
    pub kernel_endpoints: Vec<IpAddr>,
}

/// The trusted-path-first gate of one client connection: a [`GateMachine`] and the I/O that
/// feeds it. It holds its own duplicate of the socket descriptor, so it keeps working after
/// the stream was moved (e.g. into tokio); the connection is closed only when both the
/// stream and the gate are dropped. The steps that change its state take `&mut self`; the
/// reports take `&self`.
#[derive(Debug)]
pub struct Gate {
    fd: OwnedFd,
    machine: GateMachine,
    pm_sock: Option<PmSocket>,
    kernel_endpoints: Option<Vec<Endpoint>>,
    /// The event subscription, kept only while it matters (until the first flight is
    /// settled: acked or refused).
    events: Option<PmEvents>,
    /// Recover subflows after link outages once released (userspace PM; default on).
    recover: bool,
    /// The connection's registration with the recovery service (dropped with the gate): it
    /// recovers subflows (userspace PM, `recover`), or only watches the joins (their notes),
    /// and meters (`metered`).
    recovery: Option<RecoveryHandle>,
    /// The service recovers this connection's subflows (not only watches them).
    recovering: bool,
    /// The subflow events of this connection the gate's subscription read (given to the
    /// recovery service's machine at the release: joins may fail before it is registered).
    early: Vec<crate::recovery::RecoveryEvent>,
    /// The untrusted subflows nena closed during the first flight (their closes are no
    /// failed joins).
    withdrawn: Vec<SocketAddr>,
    /// Why the connection is single-path, as far as the gate made it so (see
    /// [`PathReport::single_path`]).
    notes: Vec<String>,
    /// The connection's local token (path-manager events carry it); 0 for a fallback.
    token: u32,
    /// Addresses the peer announced (`MPTCP_EVENT_ANNOUNCED`) while the subscription ran,
    /// and whether it denies joins to the initial address (the C flag, from the created or
    /// established event): where subflows nena opens go ([`join_target`]).
    announced: Vec<SocketAddr>,
    deny_initial: bool,
    /// When the first flight was written, and how long it may go unacknowledged before
    /// untrusted subflows are withdrawn ([`first_flight_guard`]).
    flight_at: Option<std::time::Instant>,
    guard: Duration,
    /// A refusal made the socket's close abortive (`SO_LINGER` 0).
    aborted: bool,
    /// The interfaces of metered paths (`--metered IFACE`): after the release their
    /// subflows are backup while another path carries ([`crate::metered`]).
    metered: Vec<String>,
    /// In-kernel PM: the connection's payload held to its trusted interfaces until the
    /// first flight is acknowledged ([`crate::hold`]); released when dropped.
    held: Option<crate::hold::Held>,
    /// The interface each trusted-address subflow was found to leave by ([`Gate::leaves_by`]),
    /// by (local, remote): looked up once per subflow, not at every poll.
    paths: std::sync::Mutex<std::collections::HashMap<(SocketAddr, SocketAddr), Option<u32>>>,
}

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

impl Gate {
    /// The gate of a connected socket: checks its initial subflow.
    pub(crate) fn open(
        fd: OwnedFd,
        machine: GateMachine,
        pm_sock: Option<PmSocket>,
        kernel_endpoints: Option<Vec<Endpoint>>,
        events: Option<PmEvents>,
    ) -> Result<Gate, MptcpError> {
        let machine = machine.watching_events(events.is_some());
        let mut gate = Gate {
            fd,
            machine,
            pm_sock,
            kernel_endpoints,
            events,
            recover: true,
            recovery: None,
            recovering: false,
            early: Vec::new(),
            withdrawn: Vec::new(),
            notes: Vec::new(),
            token: 0,
            announced: Vec::new(),
            deny_initial: false,
            flight_at: None,
            guard: Duration::ZERO,
            aborted: false,
            metered: Vec::new(),
            held: None,
            paths: Default::default(),
        };
        let snap = gate.snapshot()?;
        gate.token = snap.conn.token;
        if gate.pm() == PmKind::Kernel && !gate.is_fallback() {
            gate.hold()?;
        }
        gate.machine.connected(&snap)?;
        Ok(gate)
    }

    /// In-kernel PM: holds the connection's payload to its trusted interfaces until the
    /// first flight is acknowledged ([`crate::hold`]), before anything is written. A process
    /// that provided no hold goes without (the gate's own reaction only); one whose hold
    /// cannot be made refuses, naming why.
    fn hold(&mut self) -> Result<(), MptcpError> {
        let Some(hold) = crate::hold::get() else {
            return Ok(());
        };
        let trusted: Vec<u32> = self
            .machine
            .policy()
            .trusted_ifaces()
            .iter()
            .map(|i| i.index)
            .collect();
        let held = hold.map_err(str::to_string).and_then(|h| {
            if self.token == 0 {
                return Err("the kernel gave the connection no token".to_string());
            }
            crate::hold::Held::new(h, self.token, &trusted)
        });
        match held {
            Ok(h) => {
                self.held = Some(h);
                self.machine.set_held(true);
                // Until the release the connection's close is abortive: a process that dies
                // (its hold with it) leaves no orphan retransmitting the first flight on
                // whatever subflow the kernel picks, where the kernel resets on SO_LINGER 0.
                if let Err(e) = sockopt::set_linger_zero(self.fd()) {
                    log::warn!("could not make the held connection's close abortive: {e}");
                }
                Ok(())
            }
            Err(e) => Err(MptcpError::Policy(format!(
                "trusted-path-first with the in-kernel path manager: nena cannot hold the first \
                 flight to the trusted interfaces ({e}), and the kernel may send it on an \
                 untrusted subflow it opens by itself sooner than nena can close that; refusing \
                 the connection. Run nena with CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN, or use the userspace \
                 path manager (sysctl net.mptcp.path_manager=userspace)"
            ))),
        }
    }

    /// The socket this gate watches.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
    /// The connection fell back to plain TCP (only possible with `allow_fallback`).
    pub fn is_fallback(&self) -> bool {
        self.machine.is_fallback()
    }
    pub fn pm(&self) -> PmKind {
        self.machine.pm()
    }
    pub fn policy(&self) -> &ResolvedPolicy {
        self.machine.policy()
    }
    pub fn remote(&self) -> SocketAddr {
        self.machine.remote()
    }
    /// The decisions so far (stage, refusal).
    pub fn machine(&self) -> &GateMachine {
        &self.machine
    }

    /// Turn subflow recovery after link outages on (the default) or off; takes effect at
    /// [`release_untrusted`](Self::release_untrusted). See [`crate::recovery`].
    pub fn set_recovery(&mut self, on: bool) {
        self.recover = on;
    }

    /// The interfaces of metered paths (`--metered IFACE`); takes effect at
    /// [`release_untrusted`](Self::release_untrusted). See [`crate::metered`].
    pub fn set_metered(&mut self, ifaces: Vec<String>) {
        self.metered = ifaces;
    }

    /// The local addresses of this connection's policy that are on a metered interface.
    pub fn metered_addrs(&self) -> Vec<IpAddr> {
        crate::metered::metered_addrs(self.machine.policy(), &self.metered)
    }

    /// The connection's metered subflows are backup now (another path carries); false
    /// without metered paths.
    pub fn metered_saving(&self) -> bool {
        self.recovery.as_ref().is_some_and(|h| h.metered_saving())
    }

    /// Subflows re-created after a link outage so far (0 without recovery).
    pub fn recoveries(&self) -> u64 {
        self.recovery.as_ref().map_or(0, |r| r.recovered())
    }

    /// In-kernel PM endpoints listed when connecting (None in userspace mode or if the
    /// listing failed).
    pub fn kernel_endpoints(&self) -> Option<&[Endpoint]> {
        self.kernel_endpoints.as_deref()
    }

    /// Advisory: how many bytes the initial subflow can put on the wire at once now
    /// (`snd_cwnd × snd_mss`). With the in-kernel PM, a first flight no larger than this is
    /// entirely handed to the trusted subflow before any DATA_ACK can make the kernel open
    /// another subflow; only an MPTCP-level retransmission could then move it (and
    /// [`poll_first_flight_acked`](Self::poll_first_flight_acked) detects that).
    pub fn first_flight_budget(&self) -> Result<u64, MptcpError> {
        if self.is_fallback() {
            return Ok(u64::MAX);
        }
        Ok(sockopt::initial_window(self.fd())?)
    }

    /// All subflows with their trust, their addresses as people write them (an IPv4
    /// subflow of a dual-stack socket, which the kernel lists IPv4-mapped, as IPv4).
    pub fn classified(&self) -> Result<Vec<ClassifiedSubflow>, MptcpError> {
        let plain = |a: Option<SocketAddr>| {
            a.map(|a| SocketAddr::new(crate::path::canonical(a.ip()), a.port()))
        };
        let metered = self.metered_addrs();
        let policy = self.machine.policy();
        Ok(sockopt::subflows(self.fd())?
            .into_iter()
            .map(|s| ClassifiedSubflow {
                trust: self.trust_of(&s),
                iface: s
                    .local
                    .and_then(|a| policy.iface(crate::path::canonical(a.ip())))
                    .map(|i| i.name.clone()),
                metered: s
                    .local
                    .is_some_and(|a| metered.contains(&crate::path::canonical(a.ip()))),
                subflow: SubflowInfo {
                    local: plain(s.local),
                    remote: plain(s.remote),
                    ..s
                },
            })
            .collect())
    }

    /// What the machine is fed: `MPTCP_INFO`, then `MPTCP_FULL_INFO` (so an ACK seen is no
    /// newer than the counters). Nothing for a fallback connection.
    fn snapshot(&self) -> Result<Snapshot, MptcpError> {
        Ok(self.read()?.0)
    }

    /// [`snapshot`](Self::snapshot) with the subflows as the kernel listed them (their
    /// remote addresses and timers).
    fn read(&self) -> Result<(Snapshot, Vec<SubflowInfo>), MptcpError> {
        if self.is_fallback() {
            return Ok((Snapshot::default(), Vec::new()));
        }
        let conn = ConnSnapshot::from(&sockopt::info(self.fd())?);
        let infos = sockopt::subflows(self.fd())?;
        let subflows = infos
            .iter()
            .map(|s| SubflowSnapshot {
                iface: self.leaves_by(s.local, s.remote),
                ..SubflowSnapshot::from(s)
            })
            .collect();
        // After the subflows: every drop of what they show is counted by now (see
        // `Snapshot::dropped`).
        let dropped = self.held.as_ref().and_then(|h| h.dropped());
        Ok((
            Snapshot {
                conn,
                subflows,
                dropped,
            },
            infos,
        ))
    }

    /// The trust of a subflow as the kernel lists it: its address and the interface it
    /// leaves by.
    fn trust_of(&self, s: &SubflowInfo) -> Trust {
        self.machine
            .trust(s.local, self.leaves_by(s.local, s.remote))
    }

    /// The interface a subflow `local` -> `remote` from a *trusted* address leaves by (the
    /// trust of other addresses does not depend on it: `None`): the device the socket is
    /// bound to, else, for a socket bound to none, the route from its address. `None` when
    /// it cannot be told (a socket gone, or bound to a device that is not the address's
    /// own): the machine then counts the subflow untrusted.
    fn leaves_by(&self, local: Option<SocketAddr>, remote: Option<SocketAddr>) -> Option<u32> {
        let (l, r) = (local?, remote?);
        if !self.machine.policy().classify(l.ip()).is_trusted() {
            return None;
        }
        let mut paths = self.paths.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&known) = paths.get(&(l, r)) {
            return known;
        }
        let found = self.find_path(l, r);
        // A socket not found yet (or any more) is looked up again next time.
        if found.is_some() {
            paths.insert((l, r), found);
        }
        found
    }

    /// [`Gate::leaves_by`]'s lookup, uncached: `sock_diag`'s exact lookup through the
    /// address's own interface finds the socket if it is bound there or to no device.
    fn find_path(&self, l: SocketAddr, r: SocketAddr) -> Option<u32> {
        let own = self.machine.policy().iface(l.ip())?.index;
        match crate::diag::bound_dev(l, r, own) {
            Ok(Some(0)) => self.route_of(Some(l), Some(r)),
            Ok(Some(dev)) => Some(dev),
            // Not found through its own device: gone (a closed subflow's route is what it
            // used, unless it was bound elsewhere) or bound to another device.
            Ok(None) => None,
            Err(e) => {
                log::debug!("sock_diag lookup of {l} -> {r}: {e}");
                None
            }
        }
    }

    /// For a subflow from a trusted address bound to no device: the interface the route
    /// from its address leads to (see [`Gate::leaves_by`]).
    fn route_of(&self, local: Option<SocketAddr>, remote: Option<SocketAddr>) -> Option<u32> {
        let (l, r) = (local?, remote?);
        if !self.machine.policy().classify(l.ip()).is_trusted() {
            return None;
        }
        crate::route::output_iface(l.ip(), r.ip()).ok().flatten()
    }

    /// Feed every queued path-manager event to the machine; a failed read (overrun) is a
    /// [`PathEvent::Lost`].
    fn feed_events(&mut self) -> Result<(), MptcpError> {
        let Some(ev) = self.events.as_mut() else {
            return Ok(());
        };
        let batch: Vec<PathEvent> = match ev.drain() {
            Ok(v) => {
                self.note_announced(&v);
                v.iter()
                    .filter_map(|e| {
                        // The event names the interface only of a bound subflow; an unbound
                        // one left where the route from its address leads.
                        let iface = e.ifindex.or_else(|| self.route_of(e.local, e.remote));
                        PathEvent::from_pm(e).map(|p| p.with_iface(iface))
                    })
                    .collect()
            }
            Err(e) => {
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
    fn discard_events(&mut self) {
        if let Some(ev) = self.events.as_mut() {
            // A read reports an overrun once and stops; the queue behind it is read next.
            for _ in 0..4 {
                match ev.drain() {
                    Ok(v) => {
                        self.note_announced(&v);
                        break;
                    }
                    Err(e) => log::debug!("mptcp_pm events before the first flight: {e}"),
                }
            }
        }
    }

    /// Keep what the peer said of joins to this connection: the addresses it announced (a
    /// server's ADD_ADDR arrives right after the handshake, before the first flight) and
    /// whether it denies joins to the initial address.
    fn note_announced(&mut self, events: &[crate::pm::PmEvent]) {
        use crate::pm::{
            MPTCP_EVENT_ANNOUNCED, MPTCP_EVENT_CREATED, MPTCP_EVENT_ESTABLISHED,
            MPTCP_EVENT_SUB_CLOSED, MPTCP_EVENT_SUB_ESTABLISHED, MPTCP_PM_EV_FLAG_DENY_JOIN_ID0,
        };
        use crate::recovery::RecoveryEvent;
        for e in events.iter().filter(|e| e.token == Some(self.token)) {
            match (e.kind, e.local, e.remote) {
                (MPTCP_EVENT_SUB_ESTABLISHED, Some(local), Some(remote)) => self
                    .early
                    .push(RecoveryEvent::SubflowEstablished { local, remote }),
                (MPTCP_EVENT_SUB_CLOSED, Some(local), _) => {
                    self.early.push(RecoveryEvent::SubflowClosed { local })
                }
                _ => {}
            }
            let denies = e
                .flags
                .is_some_and(|f| f & MPTCP_PM_EV_FLAG_DENY_JOIN_ID0 != 0);
            match e.kind {
                MPTCP_EVENT_ANNOUNCED => {
                    if let Some(a) = e.remote.filter(|a| !self.announced.contains(a)) {
                        self.announced.push(a);
                    }
                }
                MPTCP_EVENT_CREATED | MPTCP_EVENT_ESTABLISHED if denies => {
                    self.deny_initial = true;
                }
                _ => {}
            }
        }
    }

    /// Drop the subscription once it no longer matters: at a refusal, and at the release
    /// (which reads it one last time: announcements, and joins of the in-kernel PM, come
    /// after the first flight's ACK too); every connection of the namespace would otherwise
    /// keep queueing events in it.
    fn settle(&mut self) {
        if self.machine.stage() == Stage::Refused && !self.aborted {
            // Closing a refused connection resets it: a graceful close would go on sending
            // the unacknowledged first flight, on whatever subflow the kernel picks.
            self.aborted = true;
            if let Err(e) = sockopt::set_linger_zero(self.fd()) {
                log::warn!("could not make the refused connection's close abortive: {e}");
            }
        }
        let keep = match self.machine.stage() {
            Stage::FirstFlight | Stage::Connected => true,
            // Until the release, which reads it: the in-kernel PM's joins (and their
            // failures) come with the acknowledgement of the first flight, and an address of
            // the other family may be announced, before the recovery service watches.
            Stage::Acked => true,
            _ => false,
        };
        if !keep {
            self.events = None;
        }
    }

    /// Read the queued events for announcements only (after the first flight, when nothing
    /// else in them matters any more).
    fn read_announcements(&mut self) {
        if let Some(ev) = self.events.as_mut() {
            match ev.drain() {
                Ok(v) => self.note_announced(&v),
                Err(e) => log::debug!("mptcp_pm events at the release: {e}"),
            }
        }
    }

    /// Call right before writing the first flight. Fails closed if any subflow whose local
    /// address is not trusted exists already, and records the data-level baseline.
    pub fn before_first_flight(&mut self) -> Result<(), MptcpError> {
        if self.machine.stage() == Stage::Connected {
            // Held, the kernel's early subflows stay: see `close_premature`.
            if self.pm() == PmKind::Kernel && !self.is_fallback() && self.held.is_none() {
                self.close_premature()?;
            }
            self.discard_events();
            let (snap, infos) = self.read()?;
            self.machine.before_first_flight(&snap)?;
            self.flight_at = Some(std::time::Instant::now());
            self.guard = first_flight_guard(
                infos
                    .iter()
                    .filter(|s| self.trust_of(s).is_trusted())
                    .map(|s| s.rto_us),
            );
        } else {
            self.machine.before_first_flight(&Snapshot::default())?;
        }
        self.settle();
        Ok(())
    }

    /// In-kernel PM without the first-flight hold ([`crate::hold`]; a library user that
    /// provided none): close every subflow from a non-trusted local address that exists
    /// before the first flight is written. The kernel opens them by itself as soon as the
    /// connection is fully established, which an ADD_ADDR from the server (a server with a
    /// `signal` endpoint) makes it before the client has written anything; the default
    /// scheduler, or a retransmission after a loss on the trusted path, could then put the
    /// first flight on them. Nothing has been written yet, so closing them loses nothing;
    /// the in-kernel PM does not open them again, so such a connection stays on its trusted
    /// subflows (the userspace PM has no such subflows to close: nena opens them itself
    /// after the first flight). Closing needs `CAP_NET_ADMIN` (`sock_diag` SOCK_DESTROY):
    /// without it the gate refuses, as before.
    ///
    /// Held, they stay: no payload of the connection leaves by an untrusted interface until
    /// the release, and one of them that is handed any (queued or sent into the hold) is
    /// withdrawn before the release ([`GateMachine::holds_back`]); one handed nothing
    /// carries data after the release (see `poll_step`).
    fn close_premature(&mut self) -> Result<(), MptcpError> {
        const TCP_CLOSE: u8 = 7;
        // A closed subflow stays listed until the MPTCP worker unlinks it: wait for that, so
        // that the gate's own check sees no subflow but trusted ones.
        let deadline = std::time::Instant::now() + Duration::from_secs(3);
        loop {
            let premature: Vec<SubflowInfo> = sockopt::subflows(self.fd())?
                .into_iter()
                .filter(|s| !self.trust_of(s).is_trusted())
                .collect();
            if premature.is_empty() {
                return Ok(());
            }
            if std::time::Instant::now() > deadline {
                // still listed: let the machine refuse (it names the subflow)
                log::warn!(
                    "subflows still listed 3 s after closing them: {:?}",
                    premature
                        .iter()
                        .map(|s| (s.local, s.remote, s.state))
                        .collect::<Vec<_>>()
                );
                return Ok(());
            }
            for sf in premature.iter().filter(|s| s.state != TCP_CLOSE) {
                let (Some(local), Some(remote)) = (sf.local, sf.remote) else {
                    continue;
                };
                match crate::diag::destroy(local, remote) {
                    Ok(false) => log::debug!(
                        "no TCP socket {local} -> {remote} to close (state {})",
                        sf.state
                    ),
                    Ok(true) => self.withdrew(
                        local,
                        format!(
                            "single path: nena closed the subflow {local} -> {remote} that the \
                             in-kernel path manager opened before the first flight (the server \
                             announced an address, or the connection was fully established \
                             early), and the in-kernel path manager does not reopen it, so this \
                             connection stays on its trusted path; the userspace path manager \
                             (sysctl net.mptcp.path_manager=userspace) opens the untrusted paths \
                             after the first flight instead"
                        ),
                    ),
                    Err(e) => {
                        return Err(MptcpError::Policy(format!(
                            "trusted-path-first: the in-kernel path manager opened the subflow \
                             {local} -> {remote} before the first flight was sent, and nena cannot \
                             close it ({e}; closing a subflow needs CAP_NET_ADMIN); refusing the \
                             connection. Run with CAP_NET_ADMIN, or use the userspace path manager \
                             (sysctl net.mptcp.path_manager=userspace)"
                        )));
                    }
                }
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// One step of the wait: read, feed, decide. True once the first flight is acked and
    /// checked. Keeps the event subscription (a waiting driver may be watching its socket).
    fn poll_step(&mut self, len: u64) -> Result<bool, MptcpError> {
        if self.machine.stage() == Stage::FirstFlight {
            let (snap, infos) = self.read()?;
            // Events after the snapshot: a subflow closed before it was read is reported.
            self.feed_events()?;
            let verdict = self
                .machine
                .poll_first_flight(len, &snap)
                .inspect_err(|r| {
                    let after = self.flight_at.map(|t| t.elapsed());
                    log::debug!(
                        "refused {after:?} after the first flight was written: {r}; {snap:?}"
                    );
                })?;
            if verdict == Verdict::Proceed {
                self.end_hold();
                return Ok(true);
            }
            // Held: an untrusted subflow with payload queued is closed before the hold ends;
            // one with none stays (the machine answers only those that hold payload).
            //
            // Why one with none is safe to keep: (1) until the release no payload of the
            // connection leaves by an untrusted interface (the hold drops it; TCP keeps it
            // queued, so `bytes_sent` or `notsent_bytes` shows it, and both only grow until
            // a subflow-level ACK, which cannot come for bytes that never left). (2) The
            // machine proceeds only once the first flight is DATA_ACKed (`bytes_acked`, or
            // `snd_una`, from MPTCP_INFO, read before MPTCP_FULL_INFO, which takes the MPTCP
            // socket's lock, so a push or reinjection under way when the ACK was read has
            // queued its bytes when the subflows are read) and no untrusted subflow holds
            // payload then. (3) After that the kernel never hands first-flight bytes to a
            // subflow again: its MPTCP-level retransmissions (timer, a closed subflow's
            // pending data, a stale subflow) take the retransmit queue from the data-level
            // snd_una on, trimming what the DATA_ACK covered first, and a subflow's TCP
            // retransmits only what that subflow was handed. So a kept subflow carries only
            // bytes written after the first flight.
            if self.held.is_some() {
                if self.machine.holds_back(&snap) {
                    self.withdraw_untrusted(&snap, &infos)?;
                }
                return Ok(false);
            }
            // Not acked yet. The kernel sends what it has not had acknowledged on a subflow
            // that has just joined (seen in the lab within half a millisecond of the join),
            // and part of it still unsent on a trusted subflow (a local drop, a full queue)
            // goes to the next subflow it can use at once; sent and lost, it moves when the
            // kernel retransmits it, after an RTO. An untrusted join is reported established
            // on its SYN-ACK, a round trip of its own path before it may carry data (the
            // fourth ACK): closing it then is in time.
            const TCP_ESTABLISHED: u8 = 1;
            let joined = infos
                .iter()
                .any(|i| i.state == TCP_ESTABLISHED && !self.trust_of(i).is_trusted())
                || self.machine.joined_untrusted();
            let stuck = infos
                .iter()
                .any(|i| i.notsent_bytes > 0 && self.trust_of(i).is_trusted());
            let late = self.flight_at.is_some_and(|t| t.elapsed() >= self.guard);
            if joined || stuck || late {
                self.withdraw_untrusted(&snap, &infos)?;
            }
            Ok(false)
        } else {
            Ok(self.machine.poll_first_flight(len, &Snapshot::default())? == Verdict::Proceed)
        }
    }

    /// The first flight is acknowledged and no untrusted subflow holds bytes (the machine
    /// proceeded, which it does once only): the connection's payload may leave by any
    /// interface again ([`crate::hold`]).
    fn end_hold(&mut self) {
        if let Some(h) = self.held.take() {
            log::debug!(
                "first flight acknowledged: hold released ({} packet(s) kept off untrusted \
                 interfaces)",
                h.dropped().unwrap_or(0)
            );
            h.release();
            self.machine.set_held(false);
            if !self.aborted {
                if let Err(e) = sockopt::set_linger_off(self.fd()) {
                    log::warn!("could not make the connection's close graceful again: {e}");
                }
            }
        }
    }

    /// The first flight is still unacknowledged after [`first_flight_guard`]: close every
    /// untrusted subflow that appeared meanwhile (an in-kernel path manager opens them on
    /// the server's ADD_ADDR, or once the first bytes are acked), before the kernel's own
    /// retransmission could put the first flight on one. Held, only those the kernel
    /// handed payload ([`GateMachine::withdraw_untrusted`]). Closing one subflow needs
    /// `CAP_NET_ADMIN` (`sock_diag` SOCK_DESTROY): without it the connection is refused
    /// (and reset) instead.
    fn withdraw_untrusted(
        &mut self,
        snap: &Snapshot,
        infos: &[SubflowInfo],
    ) -> Result<(), MptcpError> {
        for sf in self.machine.withdraw_untrusted(snap)? {
            let remote = infos
                .iter()
                .find(|i| i.id == sf.id && i.local == sf.local)
                .and_then(|i| i.remote);
            let local = sf
                .local
                .expect("the machine answers subflows with an address");
            let waited = self.flight_at.map_or(0, |t| t.elapsed().as_millis());
            // No remote address in MPTCP_FULL_INFO: the connection's own sockets name it.
            let remote = match remote {
                Some(r) => r,
                None => match self.find_remote(local) {
                    Ok(r) => r,
                    Err(why) => {
                        let r = self
                            .machine
                            .refuse_unwithdrawable(Some(local), waited as u64, why);
                        self.settle();
                        return Err(r.into());
                    }
                },
            };
            let why = match &self.held {
                Some(h) => format!(
                    "the kernel handed the subflow {local} -> {remote} on an untrusted path \
                     bytes of the first flight (the first-flight hold kept them from leaving; \
                     {} packet(s) dropped so far), which TCP would send once the hold ends, so \
                     nena closed it",
                    h.dropped().unwrap_or(0)
                ),
                None => format!(
                    "the first flight was not acknowledged within {waited} ms, so nena closed \
                     the subflow {local} -> {remote} on an untrusted path before the kernel \
                     could send the first flight again on it"
                ),
            };
            match crate::diag::destroy(local, remote) {
                Ok(_) => self.withdrew(
                    local,
                    format!(
                        "single path: {why}; the in-kernel path manager does not reopen it, so \
                         this connection stays on its trusted path (the userspace path manager, \
                         sysctl net.mptcp.path_manager=userspace, opens the untrusted paths \
                         after the first flight instead)"
                    ),
                ),
                Err(e) => {
                    let r = self.machine.refuse_unwithdrawable(
                        Some(local),
                        waited as u64,
                        format!("{e}"),
                    );
                    self.settle();
                    return Err(r.into());
                }
            }
        }
        Ok(())
    }

    /// The remote address of the connection's subflow from `local`, from `sock_diag` (the
    /// kernel's own list of the connection's sockets), for a subflow `MPTCP_FULL_INFO` gave
    /// none for. The error says why it cannot be closed.
    fn find_remote(&self, local: SocketAddr) -> Result<SocketAddr, String> {
        let all = crate::diag::subflows_of(self.token)
            .map_err(|e| format!("listing the connection's subflows: {e}"))?;
        all.iter()
            .find(|s| crate::path::same_addr(s.local, local))
            .map(|s| s.remote)
            .ok_or_else(|| {
                format!(
                    "its remote address is unknown and no socket of the connection is from {local}"
                )
            })
    }

    /// The gate ends without having proceeded (see [`GateMachine::exit_withdrawals`]):
    /// closes every untrusted subflow of the connection, found by its token through
    /// `sock_diag` (so one whose addresses `MPTCP_FULL_INFO` does not give is found too),
    /// then resets the connection (`connect(AF_UNSPEC)`, the kernel's MPTCP fast close: the
    /// remaining, trusted subflows are reset and the token is gone), and keeps the hold
    /// until the kernel no longer knows the token ([`crate::hold`]). Closing first keeps
    /// the fast close's reset off the untrusted paths too.
    fn abandon(&mut self, held: crate::hold::Held) {
        let token = self.token;
        let listed = crate::diag::subflows_of(token);
        match &listed {
            Ok(subflows) => {
                let snaps: Vec<SubflowSnapshot> = subflows
                    .iter()
                    .map(|s| SubflowSnapshot {
                        id: 0,
                        local: Some(s.local),
                        iface: self.leaves_by(Some(s.local), Some(s.remote)),
                        bytes_sent: 0,
                        bytes_received: 0,
                        notsent_bytes: 0,
                    })
                    .collect();
                for i in self.machine.exit_withdrawals(&snaps).unwrap_or_default() {
                    let sf = &subflows[i];
                    match crate::diag::destroy_subflow(sf) {
                        Ok(_) => log::debug!(
                            "closed the untrusted subflow {} -> {} of a connection that did \
                             not proceed",
                            sf.local,
                            sf.remote
                        ),
                        Err(e) => log::warn!(
                            "nena cannot close the untrusted subflow {} -> {} of a connection \
                             whose first flight was not acknowledged ({e}): the first-flight \
                             hold stays until the connection is gone",
                            sf.local,
                            sf.remote
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
        let _ = sockopt::set_linger_zero(self.fd());
        if let Err(e) = sockopt::disconnect(self.fd()) {
            log::debug!("resetting a connection that did not proceed: {e}");
        }
        held.keep_until_gone(crate::diag::TokenWatch::of_socket(self.fd()));
    }

    /// Nena closed the untrusted subflow from `local` during the first flight: why the
    /// connection stays single-path (in-kernel PM), logged (info) and kept for the report.
    fn withdrew(&mut self, local: SocketAddr, line: String) {
        self.withdrawn.push(local);
        log::info!("{line}");
        self.notes.push(line);
    }

    /// Non-blocking: true once the peer has DATA-ACKed the `len` bytes written after
    /// [`before_first_flight`](Self::before_first_flight). Fails closed if a subflow with an
    /// untrusted local address has sent any payload, or one was closed (or events were
    /// lost) during the first flight.
    pub fn poll_first_flight_acked(&mut self, len: u64) -> Result<bool, MptcpError> {
        let r = self.poll_step(len);
        self.settle();
        r
    }

    /// Fails if a subflow whose local address is not trusted has sent payload (and, with
    /// `received`, received payload). Callers may use it after reading the peer's first
    /// flight to check that it too arrived over trusted subflows only (before releasing).
    pub fn check_untrusted_idle(&mut self, received: bool) -> Result<(), MptcpError> {
        let snap = match self.machine.stage() {
            Stage::Connected | Stage::FirstFlight | Stage::Acked => self.snapshot()?,
            _ => Snapshot::default(),
        };
        let r = self.machine.check_idle(&snap, received);
        self.settle();
        r.map(drop).map_err(Into::into)
    }

    /// After the first flight is acked: let untrusted paths carry data. Userspace PM: asks the
    /// kernel (genl `SUBFLOW_CREATE`) for one subflow from every policy address of the
    /// remote's family other than those in use. In-kernel PM: the kernel opens its `subflow`
    /// endpoints by itself; the report lists them.
    pub fn release_untrusted(&mut self) -> Result<ReleaseReport, MptcpError> {
        let first = self.machine.stage() == Stage::Acked;
        let snap = if first {
            self.snapshot()?
        } else {
            Snapshot::default()
        };
        // Announced since the last poll (the subscription is still there only if needed).
        self.read_announcements();
        let open = match self.machine.release(&snap)? {
            Verdict::Release { open } => open,
            other => {
                return Err(MptcpError::Io(std::io::Error::other(format!(
                    "internal: the gate answered a release with {other:?}"
                ))))
            }
        };
        let mut report = ReleaseReport::default();
        if !first || self.is_fallback() {
            self.settle();
            return Ok(report);
        }
        // An IPv4 connection on a dual-stack socket lists its subflows' addresses
        // IPv4-mapped: an address in use is one whichever way it is spelt.
        let used: Vec<IpAddr> = snap
            .subflows
            .iter()
            .filter_map(|s| s.local.map(|a| crate::path::canonical(a.ip())))
            .collect();
        let open: Vec<IpAddr> = open
            .into_iter()
            .filter(|a| !used.contains(&crate::path::canonical(*a)))
            .collect();
        // Userspace PM: the policy's paths of the other family than the remote's (an
        // IPv6-only trusted link beside an IPv4-only untrusted one) join the address the
        // server announced in their family, if it announced one.
        let (cross, cross_v4) = {
            let remote_ip = self.remote().ip();
            let cross: Vec<IpAddr> = if self.pm() == PmKind::Userspace {
                self.machine
                    .policy()
                    .other_family_sources(remote_ip)
                    .into_iter()
                    .filter(|a| !used.contains(a))
                    .collect()
            } else {
                Vec::new()
            };
            (cross, !crate::path::is_ipv4(remote_ip))
        };
        let cross_target =
            crate::path::other_family_target(&self.announced, cross_v4, self.remote().port());
        let target = self.join_target();
        // Register with the recovery service before any subflow is requested, so their
        // events are seen: to recover subflows (userspace PM), or to watch the joins only
        // (the in-kernel PM, which opens its subflows itself; recovery off).
        let metered = self.metered_machine()?;
        let watched = match (self.watched_paths(), &metered) {
            (Some(w), _) => Some(w),
            // Metered without recovery: the service watches (no command) and meters.
            (None, Some(_)) => self.machine.recovery_paths().map(|p| (p, false)),
            (None, None) => None,
        };
        if let Some((mut paths, active)) = watched {
            let now: Vec<_> = sockopt::subflows(self.fd())?
                .iter()
                .filter_map(|s| Some((s.local?, s.remote?)))
                .collect();
            paths.extend(cross.iter().copied());
            let m = RecoveryMachine::new(self.remote(), &paths, &now, RecoveryConfig::default());
            let m = if active { m } else { m.watch_only() };
            let m = if target.is_some() {
                m
            } else {
                m.awaiting_announcement()
            };
            let m = match cross_target {
                Some(t) => m.with_target(t),
                None => m,
            };
            self.recovering = active;
            match crate::recovery::register_metered(snap.conn.token, m, metered) {
                Ok(h) => self.recovery = Some(h),
                Err(e) => log::warn!("no subflow recovery for this connection: {e}"),
            }
        }
        // What was announced (and joined, or failed to) before the registration is in this
        // subscription; what comes after it reaches the recovery service.
        self.read_announcements();
        if let Some(h) = &self.recovery {
            let withdrawn = &self.withdrawn;
            h.replay(
                self.early
                    .drain(..)
                    .filter(|e| {
                        !matches!(e, crate::recovery::RecoveryEvent::SubflowClosed { local }
                            if withdrawn.contains(local))
                    })
                    .collect(),
            );
            if let (None, Some(t)) = (target, self.join_target()) {
                h.announce(t);
            }
        }
        self.settle();
        if !open.is_empty() {
            match (target, self.recovery.as_ref().filter(|_| self.recovering)) {
                (Some(target), _) => {
                    if target != self.remote() {
                        log::info!("joining {target}, the address the server announced");
                    }
                    for addr in open {
                        self.open_subflow(snap.conn.token, addr, target, &mut report)?;
                    }
                }
                (None, Some(_)) => {
                    log::info!(
                        "the server denies joins to {} and has announced no other address yet: \
                         the untrusted subflows open when it does",
                        self.remote()
                    );
                    report.awaiting = open;
                }
                (None, None) => {
                    let why = format!(
                        "the server denies joins to {} and has announced no other address; \
                         without subflow recovery nena does not wait for one",
                        self.remote()
                    );
                    log::warn!("no untrusted subflow: {why}");
                    report.failed = open.into_iter().map(|a| (a, why.clone())).collect();
                }
            }
        }
        if !cross.is_empty() {
            // Said out loud only when it costs the connection its untrusted path: a dual-stack
            // host whose untrusted link has the server's family too loses nothing.
            let policy = self.machine.policy();
            let untrusted = |a: &IpAddr| !policy.classify(*a).is_trusted();
            let matters = cross.iter().any(untrusted)
                && !report.created.iter().chain(&report.awaiting).any(untrusted);
            let level = if matters {
                log::Level::Info
            } else {
                log::Level::Debug
            };
            let fam = crate::path::family_name(cross_v4);
            let list = cross
                .iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(", ");
            match (
                cross_target,
                self.recovery.as_ref().filter(|_| self.recovering),
            ) {
                (Some(t), _) => {
                    log::info!("joining {t}, the {fam} address the server announced, from {list}");
                    for addr in cross {
                        let iface = self.machine.policy().iface(addr).cloned();
                        // A family the path has no route in: say so rather than pass on
                        // the kernel's errno (the route lookup, as for the handshake).
                        if let Some(i) = &iface {
                            if let Ok(None) = crate::route::lookup(t.ip(), Some(i.index)) {
                                let why = crate::path::no_route_to_announced(t, i, addr);
                                crate::notes::say_once(&format!("no route {addr} {t}"), &why);
                                report.failed.push((addr, why));
                                continue;
                            }
                        }
                        self.open_subflow(snap.conn.token, addr, t, &mut report)?;
                    }
                }
                (None, Some(_)) => {
                    log::log!(
                        level,
                        "the server has announced no {fam} address yet, so the {fam} path(s) \
                         {list} cannot join this connection to {} now: they join when it \
                         announces one",
                        self.remote()
                    );
                    report.awaiting.extend(cross);
                }
                (None, None) => {
                    let why = format!(
                        "the server announced no {fam} address, so the {fam} path(s) {list} \
                         cannot join this connection to {} (a subflow of another family than \
                         the connection's can only go to an address the server announces: a \
                         `signal` endpoint of that family on the server)",
                        self.remote()
                    );
                    let level = if matters { log::Level::Warn } else { level };
                    log::log!(level, "{why}");
                    report
                        .failed
                        .extend(cross.into_iter().map(|a| (a, why.clone())));
                }
            }
        }
        if self.pm() == PmKind::Kernel {
            if let Some(eps) = &self.kernel_endpoints {
                let v4 = crate::path::is_ipv4(self.remote().ip());
                let subflow_eps = || {
                    eps.iter()
                        .filter(|e| e.is_subflow())
                        .filter_map(|e| e.addr)
                        .filter(|a| !crate::path::is_link_local(*a))
                };
                report.kernel_endpoints = subflow_eps()
                    .filter(|a| crate::path::is_ipv4(*a) == v4)
                    .collect();
                let other_eps: Vec<IpAddr> = subflow_eps()
                    .filter(|a| crate::path::is_ipv4(*a) != v4)
                    .collect();
                for line in endpoint_notes(eps, self.machine.policy(), v4) {
                    log::warn!("{line}");
                }
                let other_subflow = sockopt::subflows(self.fd())?
                    .iter()
                    .any(|s| s.local.is_some_and(|a| crate::path::is_ipv4(a.ip()) != v4));
                let other_sources: Vec<IpAddr> = self
                    .machine
                    .policy()
                    .other_family_sources(self.remote().ip())
                    .into_iter()
                    .filter(|a| !self.machine.policy().classify(*a).is_trusted())
                    .collect();
                if let Some(line) = crate::path::kernel_pm_family_note(
                    self.remote(),
                    &report.kernel_endpoints,
                    &other_eps,
                    &other_sources,
                    &self.announced,
                    other_subflow,
                ) {
                    log::warn!("{line}");
                }
            }
        }
        Ok(report)
    }

    /// The metered decisions of this connection, for the recovery service: with the
    /// userspace PM (per connection, MP_PRIO by `SET_FLAGS`) and a metered path among the
    /// policy's; `None` otherwise (the in-kernel PM's metered paths are the host's endpoint
    /// flags, [`crate::metered::KernelMetered`]).
    fn metered_machine(&self) -> Result<Option<crate::metered::MeteredMachine>, MptcpError> {
        let addrs = self.metered_addrs();
        if addrs.is_empty() || self.pm() != PmKind::Userspace || self.is_fallback() {
            return Ok(None);
        }
        let open: Vec<_> = sockopt::subflows(self.fd())?
            .iter()
            .filter_map(|s| Some((s.local?, s.remote?, false)))
            .collect();
        Ok(Some(crate::metered::MeteredMachine::new(&addrs, &open)))
    }

    /// The paths the recovery service takes care of at the release, and whether it recovers
    /// them (`true`) or only watches their joins: the userspace PM's released paths
    /// (recovered unless recovery is off), the in-kernel PM's `subflow` endpoints (watched).
    fn watched_paths(&self) -> Option<(Vec<IpAddr>, bool)> {
        match self.pm() {
            // Without recovery nothing waits for an announcement or watches: as before.
            PmKind::Userspace => {
                Some((self.machine.recovery_paths()?, true)).filter(|_| self.recover)
            }
            PmKind::Kernel => {
                let eps: Vec<IpAddr> = self
                    .kernel_endpoints
                    .as_deref()?
                    .iter()
                    .filter(|e| e.is_subflow())
                    .filter_map(|e| e.addr)
                    .filter(|a| !crate::path::is_link_local(*a))
                    .collect();
                (!eps.is_empty()).then_some((eps, false))
            }
        }
    }

    /// Userspace PM: asks the kernel (`SUBFLOW_CREATE`) for a subflow from `addr`, on its
    /// interface, to `target`; what came of it goes into `report`.
    fn open_subflow(
        &mut self,
        token: u32,
        addr: IpAddr,
        target: SocketAddr,
        report: &mut ReleaseReport,
    ) -> Result<(), MptcpError> {
        let ifindex = self.machine.policy().iface(addr).map(|i| i.index);
        if self.pm_sock.is_none() {
            self.pm_sock = Some(PmSocket::open().map_err(MptcpError::Netlink)?);
        }
        // A metered path's subflow opened at the release, while another path carries
        // already (the rare metered untrusted path beside a trusted one): born backup.
        let backup = self
            .recovery
            .as_ref()
            .is_some_and(|h| h.backup_for_new(addr));
        let pm = self.pm_sock.as_mut().expect("opened above");
        match pm.subflow_create_with(token, addr, ifindex, target, backup) {
            Ok(()) => report.created.push(addr),
            Err(e) => {
                log::warn!("could not open a subflow from {addr} to {target}: {e}");
                report.failed.push((addr, e.to_string()));
            }
        }
        Ok(())
    }

    /// Where the subflows nena opens go: [`join_target`] of what the peer announced
    /// (`None`: it denies joins to the initial address and has announced no other yet).
    pub fn join_target(&self) -> Option<SocketAddr> {
        join_target(self.remote(), &self.announced, self.deny_initial)
    }

    /// Why the connection is single-path, where nena knows it (the notes of the gate, then
    /// of the recovery service's machine, without their "single path: ", joined).
    pub fn single_path(&self) -> Option<String> {
        let mut all = self.notes.clone();
        if let Some(h) = &self.recovery {
            all.extend(h.notes());
        }
        let all: Vec<&str> = all
            .iter()
            .map(|l| l.trim_start_matches("single path: "))
            .collect();
        (!all.is_empty()).then(|| all.join("; "))
    }

    /// What the connection is now.
    pub fn report(&self) -> Result<PathReport, MptcpError> {
        if self.is_fallback() {
            return Ok(PathReport {
                mptcp: false,
                multipath: false,
                pm: self.pm(),
                congestion: sockopt::congestion(self.fd()).ok(),
                conn: None,
                subflows: vec![],
                single_path: None,
            });
        }
        let subflows = self.classified()?;
        let carrying = subflows
            .iter()
            .filter(|s| s.subflow.bytes_sent + s.subflow.bytes_received > 0)
            .count();
        Ok(PathReport {
            mptcp: true,
            multipath: carrying >= 2,
            pm: self.pm(),
            congestion: sockopt::congestion(self.fd()).ok(),
            conn: Some(sockopt::info(self.fd())?),
            subflows,
            single_path: (carrying < 2).then(|| self.single_path()).flatten(),
        })
    }
}

impl Drop for Gate {
    /// Still held: the gate ends without having proceeded ([`Gate::abandon`]).
    fn drop(&mut self) {
        if let Some(h) = self.held.take() {
            self.abandon(h);
        }
    }
}

/// What the in-kernel path manager's `subflow` endpoints (of the remote's family) will do
/// that the user did not ask for, one line each: an endpoint whose address `--untrusted`
/// (or `--trusted`) does not name carries data all the same, and one without `dev` (or
/// with another interface than the one that holds its address) leaves by whatever
/// interface routing picks. Pure: for the release report and its tests.
pub fn endpoint_notes(eps: &[Endpoint], policy: &ResolvedPolicy, v4: bool) -> Vec<String> {
    let mut out = Vec::new();
    for e in eps.iter().filter(|e| e.is_subflow()) {
        let Some(addr) = e.addr.filter(|a| a.is_ipv4() == v4) else {
            continue;
        };
        let trust = policy.classify(addr);
        if trust == Trust::Unlisted {
            out.push(format!(
                "the in-kernel path manager's endpoint {addr} (id {}) is named by neither \
                 --trusted nor --untrusted, yet it will carry this connection's data (protected, \
                 after the first flight): name it with --untrusted {addr}, or remove it with \
                 `ip mptcp endpoint delete id {}`",
                e.id, e.id
            ));
            continue;
        }
        let want = policy.iface(addr);
        if e.ifindex <= 0 {
            out.push(format!(
                "the in-kernel path manager's endpoint {addr} (id {}) has no `dev`: routing, not \
                 nena, picks the interface its subflow leaves by; re-add it with `dev {}`",
                e.id,
                want.map_or("IFACE", |i| i.name.as_str())
            ));
        } else if let Some(w) = want.filter(|w| w.index as i32 != e.ifindex) {
            out.push(format!(
                "the in-kernel path manager's endpoint {addr} (id {}) is bound to interface index \
                 {}, not to {w} which holds the address: its subflow leaves by that other \
                 interface",
                e.id, e.ifindex
            ));
        }
    }
    out
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
    use crate::path::LocalIface;

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

    fn ep(id: u8, addr: &str, ifindex: i32) -> Endpoint {
        Endpoint {
            id,
            addr: Some(addr.parse().unwrap()),
            port: 0,
            flags: crate::pm::MPTCP_PM_ADDR_FLAG_SUBFLOW,
            ifindex,
        }
    }

    /// Endpoints the user did not name, without `dev`, or on another interface than the
    /// one holding their address each get their line; a named, bound one gets none.
    #[test]
    fn endpoint_notes_name_what_the_user_did_not_ask_for() {
        let t: IpAddr = "198.18.1.2".parse().unwrap();
        let u: IpAddr = "198.18.2.2".parse().unwrap();
        let mut p = ResolvedPolicy::new([t].into(), [u].into()).unwrap();
        p.ifaces.insert(
            t,
            LocalIface {
                name: "trusted".into(),
                index: 2,
            },
        );
        p.ifaces.insert(
            u,
            LocalIface {
                name: "untrusted".into(),
                index: 3,
            },
        );
        assert!(endpoint_notes(&[ep(1, "198.18.2.2", 3)], &p, true).is_empty());
        let n = endpoint_notes(&[ep(1, "198.18.2.2", 0)], &p, true);
        assert_eq!(n.len(), 1);
        assert!(
            n[0].contains("has no `dev`") && n[0].contains("dev untrusted"),
            "{n:?}"
        );
        let n = endpoint_notes(&[ep(1, "198.18.2.2", 2)], &p, true);
        assert!(n[0].contains("not to `untrusted`"), "{n:?}");
        let n = endpoint_notes(&[ep(4, "198.18.9.2", 5)], &p, true);
        assert!(
            n[0].contains("neither --trusted nor --untrusted") && n[0].contains("id 4"),
            "{n:?}"
        );
        // another family, or a signal-only endpoint: nothing to say for this connection
        assert!(endpoint_notes(&[ep(4, "198.18.9.2", 5)], &p, false).is_empty());
        let mut sig = ep(4, "198.18.9.2", 5);
        sig.flags = 1;
        assert!(endpoint_notes(&[sig], &p, true).is_empty());
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
