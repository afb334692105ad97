//! A simulated MPTCP connection on a virtual clock, for driving the sans-IO machines
//! ([`GateMachine`], [`RecoveryMachine`]) the way their drivers do, without sockets, threads
//! or sleeps (after quinn-proto's `tests/util.rs` `Pair`): the world holds what the kernel
//! would report (subflows, their byte counters, the data-level ACK, path-manager events with
//! their own delivery times), scripted actions happen at given virtual times, and the driver
//! advances the clock straight to its next wake-up (a timer, an event becoming readable, the
//! peer's first bytes). Every run is deterministic.
#![allow(dead_code)]

use nena_mptcp::gate::{
    Backoff, ConnSnapshot, GateMachine, PathEvent, Refusal, Snapshot, SubflowSnapshot, Verdict,
};
use nena_mptcp::recovery::{Command, RecoveryConfig, RecoveryEvent, RecoveryMachine};
use nena_mptcp::{PmKind, ResolvedPolicy};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// Virtual time, in microseconds since the start of the run.
pub type Micros = u64;

pub const MS: Micros = 1_000;
pub const SEC: Micros = 1_000_000;

pub const T: &str = "198.18.1.2";
pub const T2: &str = "198.18.4.2";
pub const U: &str = "198.18.2.2";
pub const REMOTE: &str = "198.18.3.2:5000";
pub const TOKEN: u32 = 0x0bad_cafe;

pub fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}
pub fn sa(s: &str, port: u16) -> SocketAddr {
    SocketAddr::new(ip(s), port)
}
pub fn remote() -> SocketAddr {
    REMOTE.parse().unwrap()
}
pub fn policy() -> ResolvedPolicy {
    ResolvedPolicy::new([ip(T), ip(T2)].into(), [ip(U)].into()).unwrap()
}
pub fn gate(pm: PmKind) -> GateMachine {
    GateMachine::new(policy(), pm, remote(), false)
}

// ---------------------------------------------------------------------------------------
// The gate's world.

/// A subflow as the kernel knows it.
#[derive(Debug, Clone)]
pub struct Subflow {
    pub local: SocketAddr,
    pub trusted: bool,
    pub sent: u64,
    pub received: u64,
    /// Listed by `MPTCP_FULL_INFO` now.
    pub listed: bool,
}

/// What happens in the world at a virtual time. Subflows are named by index: 0 is the
/// trusted initial subflow, the others are numbered in the order of their `List`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Act {
    /// A subflow from `local` appears in `MPTCP_FULL_INFO` (its join completed).
    List {
        local: SocketAddr,
        trusted: bool,
    },
    /// Subflow `i` sends `n` payload bytes (the kernel's scheduler or a reinjection).
    Send(usize, u64),
    /// Subflow `i` receives `n` payload bytes.
    Receive(usize, u64),
    /// Subflow `i` disappears from `MPTCP_FULL_INFO` (closed; counters gone with it).
    Unlist(usize),
    /// The peer's DATA_ACK now covers `n` bytes of the first flight (it cannot cross a
    /// trusted link that is down: then it arrives when the link is back).
    Ack(u64),
    /// A path-manager event becomes readable on the subscription (its own time: it may come
    /// before or after the counters show what it reports).
    Event(PathEvent),
    /// The subscription overruns: queued events are dropped, the overrun is reported.
    Overrun,
    /// The peer's first bytes arrive (the connection becomes readable; they carry a
    /// DATA_ACK covering `n` bytes).
    PeerData(u64),
    /// The trusted link goes down / comes back.
    TrustedDown,
    TrustedUp,
    /// The kernel's MPTCP-level retransmission while the trusted link is down: the unacked
    /// first flight goes out on every listed untrusted subflow (scheduled by `TrustedDown`
    /// when `Kernel::reinject_after` is set).
    Reinject,
}

/// Kernel behaviour that is not scripted.
#[derive(Debug, Clone, Copy, Default)]
pub struct Kernel {
    /// In-kernel PM: once the connection is fully established (the first DATA_ACK), the
    /// kernel opens a subflow from the untrusted endpoint by itself, listed `join_after`
    /// later, its SUB_ESTABLISHED event `event_after` after that.
    pub in_kernel_join: Option<(Micros, Micros)>,
    /// While the trusted link is down, the unacked first flight is reinjected on every
    /// listed untrusted subflow this long after the outage began (MPTCP-level
    /// retransmission).
    pub reinject_after: Option<Micros>,
    /// A kernel before 6.5: no `mptcpi_bytes_acked`, only `snd_una`, here starting a
    /// little before the 64-bit wrap.
    pub no_bytes_acked: bool,
    /// The driver subscribes to path-manager events, and the kernel reports every untrusted
    /// join's establishment as it is listed (it emits SUB_ESTABLISHED on the SYN-ACK, before
    /// the join may carry a byte), besides any scripted event.
    pub reports_joins: bool,
}

#[derive(Debug, Clone)]
pub struct World {
    pub now: Micros,
    pub subflows: Vec<Subflow>,
    /// Bytes of the first flight written and data-acked.
    pub written: u64,
    pub acked: u64,
    /// Data-level baseline (bytes acked before the first flight: not zero on purpose).
    pub base: u64,
    /// Events readable on the subscription now.
    pub queued: Vec<PathEvent>,
    pub trusted_up: bool,
    down_since: Micros,
    /// ACKs held back by an outage (delivered when the link is back).
    held_ack: Option<u64>,
    pub peer_data: bool,
    acts: BTreeMap<(Micros, u64), Act>,
    seq: u64,
    pub kernel: Kernel,
    fully_established: bool,
    /// Ground truth: untrusted subflows sent bytes before the first flight was fully acked.
    pub violated: bool,
}

impl World {
    pub fn new(kernel: Kernel) -> Self {
        World {
            now: 0,
            subflows: vec![Subflow {
                local: sa(T, 40000),
                trusted: true,
                sent: 0,
                received: 0,
                listed: true,
            }],
            written: 0,
            acked: 0,
            base: 7_000,
            queued: Vec::new(),
            trusted_up: true,
            down_since: 0,
            held_ack: None,
            peer_data: false,
            acts: BTreeMap::new(),
            seq: 0,
            kernel,
            fully_established: false,
            violated: false,
        }
    }

    /// Schedule `act` at `at` (acts at one time happen in the order they were scheduled).
    pub fn at(&mut self, at: Micros, act: Act) -> &mut Self {
        self.seq += 1;
        self.acts.insert((at, self.seq), act);
        self
    }

    /// The next scheduled act's time.
    pub fn next_act(&self) -> Option<Micros> {
        self.acts.keys().next().map(|k| k.0)
    }

    /// When the driver would be woken after `now` (an event becoming readable, with `data`
    /// the peer's bytes), if before `until`.
    fn next_wake(&self, until: Micros, data: bool) -> Option<Micros> {
        self.acts
            .iter()
            .filter(|(_, a)| {
                matches!(a, Act::Event(_) | Act::Overrun) || (data && matches!(a, Act::PeerData(_)))
            })
            .map(|(k, _)| k.0)
            .find(|&t| t > self.now && t <= until)
    }

    /// Runs every act up to and including `t`; the clock ends at `t`.
    pub fn advance(&mut self, t: Micros) {
        while let Some((&key, _)) = self.acts.iter().next() {
            if key.0 > t {
                break;
            }
            let act = self.acts.remove(&key).unwrap();
            self.now = self.now.max(key.0);
            self.apply(act);
        }
        self.now = self.now.max(t);
    }

    fn apply(&mut self, act: Act) {
        match act {
            Act::List { local, trusted } => {
                if self.kernel.reports_joins && !trusted {
                    self.queued.push(PathEvent::SubflowEstablished {
                        iface: None,
                        token: TOKEN,
                        local: Some(local),
                    });
                }
                self.subflows.push(Subflow {
                    local,
                    trusted,
                    sent: 0,
                    received: 0,
                    listed: true,
                })
            }
            Act::Send(i, n) => {
                if let Some(s) = self.subflows.get_mut(i).filter(|s| s.listed) {
                    s.sent += n;
                    if !s.trusted && self.written > 0 && self.acked < self.written {
                        self.violated = true;
                    }
                }
            }
            Act::Receive(i, n) => {
                if let Some(s) = self.subflows.get_mut(i).filter(|s| s.listed) {
                    s.received += n;
                }
            }
            Act::Unlist(i) => {
                if let Some(s) = self.subflows.get_mut(i) {
                    s.listed = false;
                }
            }
            Act::Ack(n) => self.ack(n),
            Act::PeerData(n) => {
                self.peer_data = true;
                self.subflows[0].received += 100;
                self.ack(n);
            }
            Act::Event(e) => self.queued.push(e),
            Act::Overrun => {
                self.queued.clear();
                self.queued.push(PathEvent::Lost);
            }
            Act::TrustedDown => {
                self.trusted_up = false;
                self.down_since = self.now;
                if let Some(after) = self.kernel.reinject_after {
                    let at = self.now + after;
                    self.seq += 1;
                    self.acts.insert((at, self.seq), Act::Reinject);
                }
            }
            Act::Reinject => {
                let unacked = self.written.saturating_sub(self.acked);
                if !self.trusted_up && unacked > 0 {
                    for s in self.subflows.iter_mut().filter(|s| s.listed && !s.trusted) {
                        s.sent += unacked;
                        self.violated = true;
                    }
                }
            }
            Act::TrustedUp => {
                self.trusted_up = true;
                if let Some(n) = self.held_ack.take() {
                    self.ack(n);
                }
            }
        }
    }

    fn ack(&mut self, n: u64) {
        if !self.trusted_up {
            self.held_ack = Some(self.held_ack.unwrap_or(0).max(n));
            return;
        }
        self.acked = self.acked.max(n.min(self.written));
        if self.acked > 0 && !self.fully_established {
            self.fully_established = true;
            if let Some((join, ev)) = self.kernel.in_kernel_join {
                let local = sa(U, 41000);
                let at = self.now + join;
                self.at(
                    at,
                    Act::List {
                        local,
                        trusted: false,
                    },
                );
                self.at(
                    at + ev,
                    Act::Event(PathEvent::SubflowEstablished {
                        iface: None,
                        token: TOKEN,
                        local: Some(local),
                    }),
                );
            }
        }
    }

    /// Writes the first flight on the trusted initial subflow.
    pub fn write_first_flight(&mut self, len: u64) {
        self.written = len;
        self.subflows[0].sent += len;
    }

    /// What `MPTCP_INFO` and `MPTCP_FULL_INFO` report now.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            conn: if self.kernel.no_bytes_acked {
                ConnSnapshot {
                    token: TOKEN,
                    bytes_acked: None,
                    snd_una: (u64::MAX - 600).wrapping_add(self.acked),
                }
            } else {
                ConnSnapshot {
                    token: TOKEN,
                    bytes_acked: Some(self.base + self.acked),
                    snd_una: self.base + self.acked + 1,
                }
            },
            subflows: self
                .subflows
                .iter()
                .enumerate()
                .filter(|(_, s)| s.listed)
                .map(|(i, s)| SubflowSnapshot {
                    iface: None,
                    // The kernel's subflow ids (from 1), none before 6.5.
                    id: if self.kernel.no_bytes_acked {
                        0
                    } else {
                        i as u32 + 1
                    },
                    local: Some(s.local),
                    bytes_sent: s.sent,
                    bytes_received: s.received,
                    notsent_bytes: 0,
                })
                .collect(),
            dropped: None,
        }
    }

    pub fn drain_events(&mut self) -> Vec<PathEvent> {
        std::mem::take(&mut self.queued)
    }
}

/// How the driver ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Released(Verdict),
    Refused(Refusal),
    Timeout,
}

/// The timing of a gated connection.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// `connect` returns (the initial subflow is checked).
    pub connect: Micros,
    /// The first flight is written (`before_first_flight` just before).
    pub flight: Micros,
    pub len: u64,
    /// The driver's deadline, from `flight`.
    pub timeout: Micros,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            connect: MS,
            flight: 2 * MS,
            len: 1200,
            timeout: SEC,
        }
    }
}

/// A run: how it ended, when, and when the driver looked.
#[derive(Debug, Clone)]
pub struct Run {
    pub outcome: Outcome,
    pub at: Micros,
    pub polls: Vec<Micros>,
    pub violated: bool,
    pub world: World,
}

impl Run {
    /// The driver's first look at or after `t`.
    pub fn first_poll_from(&self, t: Micros) -> Option<Micros> {
        self.polls.iter().copied().find(|&p| p >= t)
    }
}

/// Drives `m` through a connection in `w` exactly as the gate's blocking driver does
/// (`Gate::open`, `before_first_flight`, `wait_first_flight_acked`, `release_untrusted`):
/// snapshot, then the queued events, then a poll; between polls a [`Backoff`] pause cut
/// short by an event becoming readable or the peer's first bytes; the deadline.
pub fn drive(mut m: GateMachine, mut w: World, t: Timing) -> Run {
    let mut polls = Vec::new();
    let end = |outcome, w: World, polls| Run {
        outcome,
        at: w.now,
        polls,
        violated: w.violated,
        world: w,
    };
    w.advance(t.connect);
    if let Err(r) = m.connected(&w.snapshot()) {
        return end(Outcome::Refused(r), w, polls);
    }
    w.advance(t.flight);
    // The driver forgets what happened before the first flight.
    w.drain_events();
    if let Err(r) = m.before_first_flight(&w.snapshot()) {
        return end(Outcome::Refused(r), w, polls);
    }
    w.write_first_flight(t.len);
    let deadline = t.flight + t.timeout;
    let mut backoff = Backoff::new();
    let mut data_hint = true;
    loop {
        polls.push(w.now);
        let snap = w.snapshot();
        for e in w.drain_events() {
            if let Err(r) = m.on_event(e) {
                return end(Outcome::Refused(r), w, polls);
            }
        }
        match m.poll_first_flight(t.len, &snap) {
            Ok(Verdict::Proceed) => {
                let v = m.release(&w.snapshot());
                return end(
                    match v {
                        Ok(v) => Outcome::Released(v),
                        Err(r) => Outcome::Refused(r),
                    },
                    w,
                    polls,
                );
            }
            Ok(Verdict::Wait { acked }) => {
                assert_eq!(acked, w.acked, "the ACK counted from the baseline")
            }
            Ok(v) => panic!("poll_first_flight answered {v:?}"),
            Err(r) => return end(Outcome::Refused(r), w, polls),
        }
        if w.now >= deadline {
            return end(Outcome::Timeout, w, polls);
        }
        let pause = (backoff.next_pause().as_micros() as Micros).min(deadline - w.now);
        let timer = w.now + pause;
        let wake = w.next_wake(timer, data_hint);
        let to = wake.unwrap_or(timer);
        w.advance(to);
        if wake.is_some() {
            if w.peer_data {
                data_hint = false;
            }
            backoff.reset();
        }
    }
}

// ---------------------------------------------------------------------------------------
// The recovery machine's world.

/// What the simulated kernel does with a subflow request.
#[derive(Debug, Clone)]
pub struct RecWorld {
    pub now: Micros,
    pub start: Instant,
    /// Per local address: link up, route present.
    pub links: BTreeMap<IpAddr, (bool, bool)>,
    /// Subflows (local, established) open in the kernel.
    pub subflows: Vec<(SocketAddr, bool)>,
    next_port: u16,
    /// Scheduled world changes and the kernel's answers.
    acts: BTreeMap<(Micros, u64), RecAct>,
    seq: u64,
    /// SYN-to-established time.
    pub rtt: Micros,
    /// Joins that get no answer (the peer or a middlebox drops them), per address.
    pub unanswered: BTreeMap<IpAddr, usize>,
    /// Every command the machine gave, with its time.
    pub log: Vec<(Micros, Command)>,
    /// Every event fed, with its time.
    pub fed: Vec<(Micros, RecoveryEvent)>,
    /// Creates the kernel refused, with their time.
    pub refused: Vec<(Micros, IpAddr)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecAct {
    LinkDown(IpAddr),
    /// The link is back, with its route.
    LinkUp(IpAddr),
    /// The link is back, its route not yet.
    LinkUpNoRoute(IpAddr),
    /// The route is back (rtnetlink reports a change).
    RouteUp(IpAddr),
    /// Some route or address changed elsewhere (a wake-up only).
    RoutesChanged,
    /// The peer resets the established subflow of this address (if any).
    ResetPath(IpAddr),
    /// A SYN from this port completes (if its link is still up).
    Established(SocketAddr),
    /// The kernel reports a subflow closed.
    Closed(SocketAddr),
    /// The peer resets subflow `local`.
    Reset(SocketAddr),
    ConnectionClosed,
}

impl RecWorld {
    pub fn new(addrs: &[&str]) -> Self {
        RecWorld {
            now: 0,
            start: Instant::now(),
            links: addrs.iter().map(|a| (ip(a), (true, true))).collect(),
            subflows: Vec::new(),
            next_port: 50000,
            acts: BTreeMap::new(),
            seq: 0,
            rtt: 20 * MS,
            unanswered: BTreeMap::new(),
            log: Vec::new(),
            fed: Vec::new(),
            refused: Vec::new(),
        }
    }

    pub fn instant(&self, t: Micros) -> Instant {
        self.start + Duration::from_micros(t)
    }

    pub fn at(&mut self, t: Micros, a: RecAct) -> &mut Self {
        self.seq += 1;
        self.acts.insert((t, self.seq), a);
        self
    }

    /// An established subflow from `addr` (before the run starts).
    pub fn open(&mut self, addr: &str) -> (SocketAddr, SocketAddr) {
        let l = SocketAddr::new(ip(addr), self.next_port);
        self.next_port += 1;
        self.subflows.push((l, true));
        (l, remote())
    }

    pub fn live(&self, addr: &str) -> Vec<SocketAddr> {
        self.subflows
            .iter()
            .filter(|(l, est)| *est && l.ip() == ip(addr))
            .map(|(l, _)| *l)
            .collect()
    }

    pub fn creates(&self) -> Vec<(Micros, IpAddr)> {
        self.log
            .iter()
            .filter_map(|(t, c)| match c {
                Command::CreateSubflow { local, .. } => Some((*t, *local)),
                _ => None,
            })
            .collect()
    }

    fn carry_out(&mut self, cmds: Vec<Command>, out: &mut Vec<RecoveryEvent>) {
        for c in cmds {
            self.log.push((self.now, c));
            match c {
                Command::CreateSubflow { local, remote: r } => {
                    assert_eq!(r, remote(), "a create towards another remote");
                    let (up, route) = self.links.get(&local).copied().unwrap_or((false, false));
                    if !up || !route {
                        self.refused.push((self.now, local));
                        out.push(RecoveryEvent::CreateFailed { addr: local });
                        continue;
                    }
                    let l = SocketAddr::new(local, self.next_port);
                    self.next_port += 1;
                    self.subflows.push((l, false));
                    let drop = self.unanswered.entry(local).or_insert(0);
                    if *drop > 0 {
                        *drop -= 1;
                    } else {
                        let t = self.now + self.rtt;
                        self.at(t, RecAct::Established(l));
                    }
                }
                Command::DestroySubflow { local, .. } => {
                    if self.subflows.iter().any(|(l, _)| *l == local) {
                        let t = self.now + MS;
                        self.at(t, RecAct::Closed(local));
                    }
                }
            }
        }
    }

    fn apply(&mut self, a: RecAct, out: &mut Vec<RecoveryEvent>) {
        match a {
            RecAct::LinkDown(addr) => {
                self.links.get_mut(&addr).unwrap().0 = false;
                self.links.get_mut(&addr).unwrap().1 = false;
                out.push(RecoveryEvent::LinkDown { addr });
            }
            RecAct::LinkUp(addr) => {
                *self.links.get_mut(&addr).unwrap() = (true, true);
                out.push(RecoveryEvent::LinkUp { addr });
            }
            RecAct::LinkUpNoRoute(addr) => {
                *self.links.get_mut(&addr).unwrap() = (true, false);
                out.push(RecoveryEvent::LinkUp { addr });
            }
            RecAct::RoutesChanged => out.push(RecoveryEvent::RoutesChanged),
            RecAct::ResetPath(addr) => {
                if let Some(i) = self.subflows.iter().position(|s| s.1 && s.0.ip() == addr) {
                    let l = self.subflows.remove(i).0;
                    out.push(RecoveryEvent::SubflowClosed { local: l });
                }
            }
            RecAct::RouteUp(addr) => {
                self.links.get_mut(&addr).unwrap().1 = true;
                out.push(RecoveryEvent::RoutesChanged);
            }
            RecAct::Established(l) => {
                let up = self.links.get(&l.ip()).is_some_and(|x| x.0);
                if let Some(s) = self.subflows.iter_mut().find(|s| s.0 == l) {
                    if up {
                        s.1 = true;
                        out.push(RecoveryEvent::SubflowEstablished {
                            local: l,
                            remote: remote(),
                        });
                    }
                }
            }
            RecAct::Closed(l) | RecAct::Reset(l) => {
                if let Some(i) = self.subflows.iter().position(|s| s.0 == l) {
                    self.subflows.remove(i);
                    out.push(RecoveryEvent::SubflowClosed { local: l });
                }
            }
            RecAct::ConnectionClosed => out.push(RecoveryEvent::ConnectionClosed),
        }
    }

    /// Runs the machine until `until` (virtual), the way the recovery service does: each
    /// wake-up (an act, or the machine's own deadline) feeds the events, carries out the
    /// commands (reporting refused creates back at once), then fires the timers.
    pub fn run(&mut self, m: &mut RecoveryMachine, until: Micros) {
        let mut guard = 0;
        loop {
            guard += 1;
            assert!(guard < 100_000, "the recovery run does not settle");
            let act_t = self.acts.keys().next().map(|k| k.0);
            let timer_t = m.next_deadline().map(|d| {
                let d = d.saturating_duration_since(self.start).as_micros() as Micros;
                d.max(self.now)
            });
            let next = [act_t, timer_t].into_iter().flatten().min();
            let Some(next) = next.filter(|&n| n <= until) else {
                self.now = until;
                return;
            };
            self.now = next;
            let now = self.instant(next);
            let mut evs = Vec::new();
            while let Some((&k, _)) = self.acts.iter().next() {
                if k.0 > next {
                    break;
                }
                let a = self.acts.remove(&k).unwrap();
                self.apply(a, &mut evs);
            }
            while !evs.is_empty() {
                let mut more = Vec::new();
                for e in evs {
                    self.fed.push((self.now, e));
                    let cmds = m.on_event(e, now);
                    self.carry_out(cmds, &mut more);
                }
                evs = more;
            }
            let cmds = m.poll(now);
            let mut more = Vec::new();
            self.carry_out(cmds, &mut more);
            for e in more {
                self.fed.push((self.now, e));
                let cmds = m.on_event(e, now);
                let mut again = Vec::new();
                self.carry_out(cmds, &mut again);
                assert!(again.is_empty(), "a refused create answered by a create");
            }
        }
    }
}

pub fn recovery(w: &mut RecWorld, paths: &[&str], cfg: RecoveryConfig) -> RecoveryMachine {
    let open: Vec<_> = w
        .subflows
        .iter()
        .filter(|s| s.1)
        .map(|s| (s.0, remote()))
        .collect();
    let paths: Vec<IpAddr> = paths.iter().map(|a| ip(a)).collect();
    RecoveryMachine::new(remote(), &paths, &open, cfg)
}

/// Every ordering of `items` (Heap's algorithm; small sets only).
pub fn permutations<X: Clone>(items: &[X]) -> Vec<Vec<X>> {
    fn go<X: Clone>(k: usize, a: &mut Vec<X>, out: &mut Vec<Vec<X>>) {
        if k <= 1 {
            out.push(a.clone());
            return;
        }
        for i in 0..k {
            go(k - 1, a, out);
            let j = if k.is_multiple_of(2) { i } else { 0 };
            a.swap(j, k - 1);
        }
    }
    let mut out = Vec::new();
    go(items.len(), &mut items.to_vec(), &mut out);
    out
}

/// Every subset of `items` in every order.
pub fn arrangements<X: Clone>(items: &[X]) -> Vec<Vec<X>> {
    let mut out = Vec::new();
    for mask in 0u32..(1 << items.len()) {
        let sub: Vec<X> = (0..items.len())
            .filter(|i| mask & (1 << i) != 0)
            .map(|i| items[i].clone())
            .collect();
        out.extend(permutations(&sub));
    }
    out
}

pub fn pm_kinds() -> [PmKind; 2] {
    [PmKind::Kernel, PmKind::Userspace]
}

pub fn default_recovery() -> RecoveryConfig {
    RecoveryConfig::default()
}
