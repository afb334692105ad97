//! Subflow recovery as a sans-IO state machine: [`RecoveryMachine`] is the path manager's
//! memory of one released connection. It is fed path-manager events (subflow established or
//! closed, connection closed), link events (a local address became usable or unusable) and
//! the time, and answers with [`Command`]s (`SUBFLOW_CREATE` / `SUBFLOW_DESTROY` of the
//! userspace PM). It does no I/O and reads no clock: the driver in the parent module does.
//!
//! The rules:
//! * Only the paths the gate released are recovered: the machine is built from
//!   [`GateMachine::recovery_paths`](crate::GateMachine::recovery_paths), which answers only
//!   once the first flight was acknowledged and the untrusted paths released. Any other
//!   local address is ignored, whatever happens to it.
//! * A link that goes down leaves its subflows in TCP's retransmission backoff (the kernel
//!   keeps them; measured on Linux 6.18 they come back 0.8–4.5 s after the link, depending
//!   on where the backoff stands). When the link is usable again the machine asks at once
//!   for a new subflow, whose SYN leaves immediately, and with every attempt it also closes
//!   the stale subflows, until their close is reported. The driver makes an attempt only
//!   when a route exists: closed without a route, a stale subflow would end on this side
//!   only, and the peer, still counting it, could refuse the new one for its subflow limit
//!   (seen in the lab: `MPTcpExtMPJoinRejected` on the server).
//! * A new subflow that is not established within the current wait (250 ms, doubling to
//!   4 s) is asked for again; a refused `SUBFLOW_CREATE` (no route yet, ...) is retried
//!   after the wait. While the link is down nothing is tried. A subflow that closes while its
//!   link is up (reset by the peer, ...) is replaced after the wait too. At most one subflow
//!   per path is kept: an extra one established (two attempts that both succeeded) is
//!   destroyed.
//! * A peer that denies joins to the address it was reached at (the C flag) and has not
//!   announced another yet leaves the machine without a target
//!   ([`awaiting_announcement`](RecoveryMachine::awaiting_announcement)): nothing is tried
//!   until an [`Announced`](RecoveryEvent::Announced) address gives one, and then every
//!   path without a subflow is opened to it at once. Later announcements change nothing.
//! * Paths of the other family than the connection's (an IPv4-only WLAN beside an IPv6-only
//!   LTE link, on a dual-stack socket) have a target of their own: the first address the
//!   peer announced in their family ([`with_target`](RecoveryMachine::with_target), or an
//!   [`Announced`](RecoveryEvent::Announced) address of that family); until then nothing is
//!   tried on them, and then every such path without a subflow is opened to it at once.
//! * A path whose joins never get established (each closed before its establishment: the
//!   peer's answer had no MP_JOIN, or it reset the join) is said once ([`take_notes`](RecoveryMachine::take_notes)):
//!   a network that strips MPTCP's options (hotel and captive-portal networks) or a server
//!   that refuses the join leaves the connection single-path, and the user should know why.
//!   After two such attempts (one for a [`watch_only`](RecoveryMachine::watch_only) machine:
//!   the in-kernel path manager does not try again), for a path that never had a subflow.
//! * A [`watch_only`](RecoveryMachine::watch_only) machine (the in-kernel path manager, which
//!   opens its subflows itself) answers no command; it only keeps the paths' notes.
//! * When the connection closes the machine is done: it answers nothing any more.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// Timing of the recovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryConfig {
    /// The first wait: for a new subflow to be established, or before retrying a refused
    /// create or a subflow closed while its link was up.
    pub first_wait: Duration,
    /// The wait doubles after every failed attempt up to this bound.
    pub max_wait: Duration,
}

impl Default for RecoveryConfig {
    fn default() -> Self {
        RecoveryConfig {
            first_wait: Duration::from_millis(250),
            max_wait: Duration::from_secs(4),
        }
    }
}

/// What the machine is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoveryEvent {
    /// `MPTCP_EVENT_SUB_ESTABLISHED` of this connection.
    SubflowEstablished {
        local: SocketAddr,
        remote: SocketAddr,
    },
    /// `MPTCP_EVENT_SUB_CLOSED` of this connection.
    SubflowClosed { local: SocketAddr },
    /// `MPTCP_EVENT_CLOSED` of this connection, or its owner dropped it.
    ConnectionClosed,
    /// The local address is gone or its interface is down / has no carrier.
    LinkDown { addr: IpAddr },
    /// The local address is present on an interface that is up with carrier.
    LinkUp { addr: IpAddr },
    /// The kernel refused a `SUBFLOW_CREATE` from `addr`.
    CreateFailed { addr: IpAddr },
    /// Routes or addresses changed (rtnetlink): a create refused for want of a route may
    /// succeed now, so a retry that is waiting is made at once.
    RoutesChanged,
    /// `MPTCP_EVENT_ANNOUNCED` of this connection: the peer announced `remote` (port 0:
    /// no port given).
    Announced { remote: SocketAddr },
}

/// What the driver must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `MPTCP_PM_CMD_SUBFLOW_CREATE` from `local` (port chosen by the kernel) to `remote`.
    CreateSubflow { local: IpAddr, remote: SocketAddr },
    /// `MPTCP_PM_CMD_SUBFLOW_DESTROY` of the subflow `local` -> `remote`.
    DestroySubflow {
        local: SocketAddr,
        remote: SocketAddr,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attempt {
    /// Nothing to do: the path has its subflow, or its link is down.
    Idle,
    /// A create was sent; if no subflow is established by `deadline`, send another.
    Pending { deadline: Instant },
    /// Send a create at `at`.
    Retry { at: Instant },
}

#[derive(Debug, Clone)]
struct Path {
    addr: IpAddr,
    link_up: bool,
    /// Subflows of this path (local, remote) open and usable.
    live: Vec<(SocketAddr, SocketAddr)>,
    /// Subflows that went through a link outage (they sit in TCP's backoff): closed with the
    /// next attempt, until their close is reported. Closing one while the route is still
    /// missing would not tell the peer, whose subflow limit would then refuse the new one.
    stale: Vec<(SocketAddr, SocketAddr)>,
    attempt: Attempt,
    wait: Duration,
    /// A subflow of this path was established at some time (or open at the start).
    joined: bool,
    /// Joins of this path closed before they were established.
    failed: u32,
    /// The path's [`JoinNote`] was taken.
    noted: bool,
    /// The latest subflows of this path whose close was seen (a close reported twice, by
    /// the gate's subscription and the service's, counts once).
    gone: std::collections::VecDeque<SocketAddr>,
}

/// How many closed subflows a path remembers (see `Path::gone`).
const GONE_KEPT: usize = 16;

/// A path none of whose joins was established: the reason a connection stays single-path
/// ([`RecoveryMachine::take_notes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JoinNote {
    /// The path's local address.
    pub local: IpAddr,
    /// Where its joins went (`None`: the peer's address the connection went to).
    pub target: Option<SocketAddr>,
    /// Joins closed before they were established.
    pub attempts: u32,
    /// Whether nena tries again (its own path management) or not (the in-kernel PM's join).
    pub retried: bool,
}

impl JoinNote {
    /// One line for the user, `on` naming the path's interface (e.g. "`wlan0`").
    pub fn line(&self, on: Option<&str>, remote: SocketAddr) -> String {
        let to = self.target.unwrap_or(remote);
        let on = on.map(|i| format!(" on `{i}`")).unwrap_or_default();
        format!(
            "single path: no subflow from {}{on} could join the connection to {to} ({} \
             attempt(s), none established): that network does not carry MPTCP's options (it \
             strips them, as hotel and captive-portal networks do) or the server refuses the \
             join; the connection carries on without this path{}",
            self.local,
            self.attempts,
            if self.retried {
                " (nena tries again every 4 s at most)"
            } else {
                " (no other attempt is made)"
            }
        )
    }
}

impl Path {
    /// One attempt: close the stale subflows, open a new one, wait for it until `now + wait`.
    /// Without a target (the peer announced nothing to join yet) nothing is tried.
    fn attempt(&mut self, remote: Option<SocketAddr>, now: Instant, out: &mut Vec<Command>) {
        let Some(remote) = remote else {
            self.attempt = Attempt::Idle;
            return;
        };
        out.extend(
            self.stale
                .iter()
                .map(|&(local, remote)| Command::DestroySubflow { local, remote }),
        );
        out.push(Command::CreateSubflow {
            local: self.addr,
            remote,
        });
        self.attempt = Attempt::Pending {
            deadline: now + self.wait,
        };
    }
}

/// Recovery of the subflows of one connection (see the module documentation).
#[derive(Debug, Clone)]
pub struct RecoveryMachine {
    /// The address and port the connection went to.
    initial: SocketAddr,
    /// Where new subflows go ([`join_target`](crate::path::join_target)); `None` while the
    /// peer denies joins to `initial` and has announced nothing else.
    target: Option<SocketAddr>,
    /// Where new subflows of the other family than `initial`'s go: the first address of that
    /// family the peer announced ([`crate::path::other_family_target`]); `None` until then.
    other: Option<SocketAddr>,
    paths: Vec<Path>,
    cfg: RecoveryConfig,
    closed: bool,
    /// No commands: the in-kernel path manager opens the subflows ([`Self::watch_only`]).
    watch: bool,
}

use crate::path::{canonical as canon, same_addr as same};

impl RecoveryMachine {
    /// A machine for the connection to `remote` whose released paths are `paths` (local
    /// addresses), with the subflows (local, remote) open now. Every link counts as up until
    /// told otherwise.
    pub fn new(
        remote: SocketAddr,
        paths: &[IpAddr],
        open: &[(SocketAddr, SocketAddr)],
        cfg: RecoveryConfig,
    ) -> Self {
        let mut m = RecoveryMachine {
            initial: remote,
            target: Some(remote),
            other: None,
            paths: Vec::new(),
            cfg,
            closed: false,
            watch: false,
        };
        for &a in paths {
            let addr = canon(a);
            if m.paths.iter().any(|p| p.addr == addr) {
                continue;
            }
            m.paths.push(Path {
                addr,
                link_up: true,
                live: Vec::new(),
                stale: Vec::new(),
                attempt: Attempt::Idle,
                wait: cfg.first_wait,
                joined: false,
                failed: 0,
                noted: false,
                gone: Default::default(),
            });
        }
        for &(l, r) in open {
            if let Some(p) = m.path_mut(l.ip()) {
                p.live.push((l, r));
                p.joined = true;
            }
        }
        m
    }

    /// The same machine answering no command: for the in-kernel path manager, which opens
    /// the subflows itself; it keeps only the paths' notes ([`Self::take_notes`]).
    pub fn watch_only(mut self) -> Self {
        self.watch = true;
        self
    }

    /// The notes not taken yet: each path with no established join after its attempts
    /// (see the module documentation), once.
    pub fn take_notes(&mut self) -> Vec<JoinNote> {
        let threshold = if self.watch { 1 } else { 2 };
        let targets: Vec<_> = self.paths.iter().map(|p| self.target_for(p.addr)).collect();
        let retried = !self.watch;
        let mut out = Vec::new();
        for (p, target) in self.paths.iter_mut().zip(targets) {
            if !p.joined && !p.noted && p.failed >= threshold {
                p.noted = true;
                out.push(JoinNote {
                    local: p.addr,
                    target,
                    attempts: p.failed,
                    retried,
                });
            }
        }
        out
    }

    /// The same machine for a peer that denies joins to `remote` and has announced nothing
    /// yet: it opens the paths once an address is [`Announced`](RecoveryEvent::Announced).
    pub fn awaiting_announcement(mut self) -> Self {
        self.target = None;
        self
    }

    /// The address and port the connection went to.
    pub fn initial(&self) -> SocketAddr {
        self.initial
    }

    /// Where new subflows go; `None` while waiting for an announcement.
    pub fn target(&self) -> Option<SocketAddr> {
        self.target
    }

    /// The same machine with `target` as where subflows of its family go (an address the
    /// peer announced before the registration; for the other family than the connection's,
    /// the only place they can go).
    pub fn with_target(mut self, target: SocketAddr) -> Self {
        if self.same_family(target.ip()) {
            self.target = Some(target);
        } else {
            self.other = Some(target);
        }
        self
    }

    /// Where new subflows from `addr` go: the connection's target for its family, the other
    /// family's (announced) one otherwise.
    pub fn target_for(&self, addr: IpAddr) -> Option<SocketAddr> {
        if self.same_family(addr) {
            self.target
        } else {
            self.other
        }
    }

    fn same_family(&self, addr: IpAddr) -> bool {
        canon(addr).is_ipv4() == canon(self.initial.ip()).is_ipv4()
    }

    /// The local addresses this machine recovers.
    pub fn paths(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.paths.iter().map(|p| p.addr)
    }

    /// The connection closed: nothing more will be asked.
    pub fn is_done(&self) -> bool {
        self.closed
    }

    fn path_mut(&mut self, addr: IpAddr) -> Option<&mut Path> {
        let addr = canon(addr);
        self.paths.iter_mut().find(|p| p.addr == addr)
    }

    /// The earliest time [`poll`](Self::poll) has something to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        if self.closed {
            return None;
        }
        self.paths
            .iter()
            .filter_map(|p| match p.attempt {
                Attempt::Idle => None,
                Attempt::Pending { deadline } => Some(deadline),
                Attempt::Retry { at } => Some(at),
            })
            .min()
    }

    /// Feed one event at time `now`.
    pub fn on_event(&mut self, ev: RecoveryEvent, now: Instant) -> Vec<Command> {
        let out = self.step(ev, now);
        self.answer(out)
    }

    /// A watch-only machine answers nothing and waits for nothing.
    fn answer(&mut self, out: Vec<Command>) -> Vec<Command> {
        if !self.watch {
            return out;
        }
        for p in &mut self.paths {
            p.attempt = Attempt::Idle;
        }
        Vec::new()
    }

    fn step(&mut self, ev: RecoveryEvent, now: Instant) -> Vec<Command> {
        if self.closed {
            return Vec::new();
        }
        let cfg = self.cfg;
        let mut out = Vec::new();
        match ev {
            RecoveryEvent::ConnectionClosed => {
                self.closed = true;
                for p in &mut self.paths {
                    p.attempt = Attempt::Idle;
                }
            }
            RecoveryEvent::LinkDown { addr } => {
                if let Some(p) = self.path_mut(addr) {
                    p.link_up = false;
                    let live: Vec<_> = p.live.drain(..).collect();
                    p.stale.extend(live);
                    p.attempt = Attempt::Idle;
                    p.wait = cfg.first_wait;
                }
            }
            RecoveryEvent::LinkUp { addr } => {
                let remote = self.target_for(addr);
                if let Some(p) = self.path_mut(addr) {
                    if !p.link_up {
                        p.link_up = true;
                        if p.live.is_empty() {
                            p.wait = cfg.first_wait;
                            p.attempt(remote, now, &mut out);
                        }
                    }
                }
            }
            RecoveryEvent::SubflowEstablished { local, remote: r } => {
                if let Some(p) = self.path_mut(local.ip()) {
                    let known =
                        |v: &[(SocketAddr, SocketAddr)]| v.iter().any(|&(l, _)| same(l, local));
                    if known(&p.live) || known(&p.stale) {
                        return out;
                    }
                    p.joined = true;
                    if p.gone.iter().any(|&g| same(g, local)) {
                        // Its close was seen first (events replayed out of order): gone.
                        return out;
                    }
                    if !p.live.is_empty() {
                        // A second attempt that also succeeded: one subflow per path.
                        out.push(Command::DestroySubflow { local, remote: r });
                    } else {
                        p.live.push((local, r));
                        p.attempt = Attempt::Idle;
                        p.wait = cfg.first_wait;
                        // The path works: what is still stale can be closed now.
                        out.extend(
                            p.stale
                                .iter()
                                .map(|&(local, remote)| Command::DestroySubflow { local, remote }),
                        );
                    }
                }
            }
            RecoveryEvent::SubflowClosed { local } => {
                if let Some(p) = self.path_mut(local.ip()) {
                    if p.gone.iter().any(|&g| same(g, local)) {
                        return out;
                    }
                    if p.gone.len() == GONE_KEPT {
                        p.gone.pop_front();
                    }
                    p.gone.push_back(local);
                    let known =
                        |v: &[(SocketAddr, SocketAddr)]| v.iter().any(|&(l, _)| same(l, local));
                    if !known(&p.live) && !known(&p.stale) {
                        // A join gone before it was established: the attempt failed, as if
                        // its wait had run out (the next one at the same time, waiting longer).
                        p.failed += 1;
                        if let Attempt::Pending { deadline } = p.attempt {
                            p.attempt = Attempt::Retry { at: deadline };
                            p.wait = (p.wait * 2).min(cfg.max_wait);
                        }
                    }
                    p.live.retain(|&(l, _)| !same(l, local));
                    p.stale.retain(|&(l, _)| !same(l, local));
                    if p.live.is_empty() && p.link_up && p.attempt == Attempt::Idle {
                        p.attempt = Attempt::Retry { at: now + p.wait };
                    }
                }
            }
            RecoveryEvent::RoutesChanged => {
                let targets: Vec<_> = self.paths.iter().map(|p| self.target_for(p.addr)).collect();
                for (p, remote) in self.paths.iter_mut().zip(targets) {
                    if matches!(p.attempt, Attempt::Retry { .. }) && p.link_up && p.live.is_empty()
                    {
                        p.attempt(remote, now, &mut out);
                    }
                }
            }
            RecoveryEvent::Announced { remote: announced } => {
                if !self.same_family(announced.ip()) {
                    if self.other.is_none() {
                        let v4 = canon(announced.ip()).is_ipv4();
                        self.other =
                            crate::path::other_family_target(&[announced], v4, self.initial.port());
                        let other = self.other;
                        for p in &mut self.paths {
                            if canon(p.addr).is_ipv4() == v4 && p.link_up && p.live.is_empty() {
                                p.wait = cfg.first_wait;
                                p.attempt(other, now, &mut out);
                            }
                        }
                    }
                } else if self.target.is_none() {
                    self.target = crate::path::join_target(self.initial, &[announced], true);
                    let v4 = canon(self.initial.ip()).is_ipv4();
                    for p in &mut self.paths {
                        if canon(p.addr).is_ipv4() == v4 && p.link_up && p.live.is_empty() {
                            p.wait = cfg.first_wait;
                            p.attempt(self.target, now, &mut out);
                        }
                    }
                }
            }
            RecoveryEvent::CreateFailed { addr } => {
                if let Some(p) = self.path_mut(addr) {
                    if p.link_up && p.live.is_empty() {
                        p.attempt = Attempt::Retry { at: now + p.wait };
                        p.wait = (p.wait * 2).min(cfg.max_wait);
                    }
                }
            }
        }
        out
    }

    /// The timers: attempts whose wait ran out at `now`.
    pub fn poll(&mut self, now: Instant) -> Vec<Command> {
        let out = self.timers(now);
        self.answer(out)
    }

    fn timers(&mut self, now: Instant) -> Vec<Command> {
        let mut out = Vec::new();
        if self.closed {
            return out;
        }
        let max = self.cfg.max_wait;
        let targets: Vec<_> = self.paths.iter().map(|p| self.target_for(p.addr)).collect();
        for (p, remote) in self.paths.iter_mut().zip(targets) {
            let due = match p.attempt {
                Attempt::Idle => false,
                Attempt::Pending { deadline } => deadline <= now,
                Attempt::Retry { at } => at <= now,
            };
            if !due {
                continue;
            }
            if !p.link_up || !p.live.is_empty() {
                p.attempt = Attempt::Idle;
                continue;
            }
            if matches!(p.attempt, Attempt::Pending { .. }) {
                // Not established in time: wait longer for the next one.
                p.wait = (p.wait * 2).min(max);
            }
            p.attempt(remote, now, &mut out);
        }
        out
    }
}

#[cfg(test)]
mod tests;
