//! A simulated MPTCP connection on a virtual clock, for driving the real gate and the
//! recovery machine without sockets, threads or sleeps (after quinn-proto's `tests/util.rs`
//! `Pair`). The gate's world ([`World`]) holds what the kernel would report (subflows,
//! their byte counters, the data-level ACK, path-manager events with their own delivery
//! times) and does what the kernel would do when asked (close a subflow, fast-close the
//! connection, open a subflow); [`Sim`] is its [`Kernel`], so [`drive`] runs the real
//! [`Gate`] (its steps, its waits, its decisions) on it: the gate's waits advance the
//! virtual clock straight to the next wake-up (a timer, an event becoming readable, the
//! peer's first bytes). The recovery machine ([`RecoveryMachine`]) is driven the way its
//! service does ([`RecWorld::run`]). Every run is deterministic.
#![allow(dead_code)]

use nena_mptcp::gate::{GateMachine, Kernel, PathEvent, Refusal, Wake};
use nena_mptcp::pm::{PmEvent, MPTCP_EVENT_SUB_CLOSED, MPTCP_EVENT_SUB_ESTABLISHED};
use nena_mptcp::recovery::{Command, RecoveryConfig, RecoveryEvent, RecoveryMachine};
use nena_mptcp::{ConnInfo, Gate, MptcpError, PmKind, ReleaseReport, ResolvedPolicy, SubflowInfo};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
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
/// The decisions of a connection under [`policy`] to [`REMOTE`] (the gate over [`Sim`] sets
/// whether they count on path-manager events).
pub fn gate(pm: PmKind) -> GateMachine {
    GateMachine::new(policy(), pm, remote(), false)
}

// ---------------------------------------------------------------------------------------
// The gate's world.

/// `TCP_ESTABLISHED` and `TCP_SYN_SENT` (`tcpi_state`).
const TCP_ESTABLISHED: u8 = 1;
const TCP_SYN_SENT: u8 = 2;

/// A subflow as the kernel knows it.
#[derive(Debug, Clone)]
pub struct Subflow {
    pub local: SocketAddr,
    pub trusted: bool,
    pub sent: u64,
    pub received: u64,
    /// Listed by `MPTCP_FULL_INFO` now.
    pub listed: bool,
    /// Closed by the gate (`SOCK_DESTROY`): it sends nothing any more.
    pub destroyed: bool,
    /// Its handshake is not complete yet (`TCP_SYN_SENT`).
    pub connecting: bool,
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
    /// A join from `local` appears in `MPTCP_FULL_INFO` with its handshake under way
    /// (`TCP_SYN_SENT`); it is established (and reported) at its `List`.
    Connecting {
        local: SocketAddr,
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
    /// when `Behaviour::reinject_after` is set).
    Reinject,
}

/// Kernel behaviour that is not scripted.
#[derive(Debug, Clone, Copy, Default)]
pub struct Behaviour {
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
    /// The kernel reports every untrusted join's establishment as it is listed (it emits
    /// SUB_ESTABLISHED on the SYN-ACK, before the join may carry a byte), besides any
    /// scripted event.
    pub reports_joins: bool,
    /// The driver has no path-manager subscription (it could not subscribe): no event
    /// reaches it, and the machine does not count on them.
    pub unsubscribed: bool,
    /// The gate may not close a subflow (no `CAP_NET_ADMIN`: `SOCK_DESTROY` fails).
    pub no_destroy: bool,
    /// The trusted subflow's retransmission timeout (`tcpi_rto`, µs; 0: unknown), which
    /// sets the gate's first-flight guard.
    pub rto_us: u32,
    /// The process provided a first-flight hold ([`nena_mptcp::hold`]): the in-kernel PM's
    /// connections are held, and what an untrusted subflow sends while held is dropped
    /// (counted), not carried.
    pub hold: bool,
}

/// The first-flight hold of the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// Never held.
    Off,
    Held,
    /// Released (the gate proceeded).
    Released,
    /// Kept until the connection is gone (the gate ended otherwise).
    Kept,
}

#[derive(Debug, Clone)]
pub struct World {
    pub now: Micros,
    pub start: Instant,
    pub subflows: Vec<Subflow>,
    /// Bytes of the first flight written and data-acked.
    pub written: u64,
    pub acked: u64,
    /// Data-level baseline (bytes acked before the first flight: not zero on purpose).
    pub base: u64,
    /// Events readable on the subscription now, behind an overrun not read yet.
    pub queued: Vec<PmEvent>,
    pub overrun: bool,
    pub trusted_up: bool,
    down_since: Micros,
    /// ACKs held back by an outage (delivered when the link is back).
    held_ack: Option<u64>,
    pub peer_data: bool,
    acts: BTreeMap<(Micros, u64), Act>,
    seq: u64,
    pub kernel: Behaviour,
    fully_established: bool,
    /// Ground truth: untrusted subflows sent bytes before the first flight was fully acked.
    pub violated: bool,
    /// What the gate did: the subflows it closed (local address, when), whether the close
    /// is abortive, the fast close, the subflows it asked for.
    pub destroyed: Vec<(SocketAddr, Micros)>,
    pub abortive: bool,
    pub fast_closed: bool,
    pub created: Vec<(IpAddr, SocketAddr)>,
    /// When the driver looked (read `MPTCP_INFO` during the first flight).
    pub polls: Vec<Micros>,
    pub hold: Hold,
    /// Packets the hold dropped.
    pub dropped: u64,
    /// The subflows still open when the gate fast-closed the connection.
    pub left_at_fast_close: Vec<SocketAddr>,
}

impl World {
    pub fn new(kernel: Behaviour) -> Self {
        World {
            now: 0,
            start: Instant::now(),
            subflows: vec![Subflow {
                local: sa(T, 40000),
                trusted: true,
                sent: 0,
                received: 0,
                listed: true,
                destroyed: false,
                connecting: false,
            }],
            written: 0,
            acked: 0,
            base: 7_000,
            queued: Vec::new(),
            overrun: false,
            trusted_up: true,
            down_since: 0,
            held_ack: None,
            peer_data: false,
            acts: BTreeMap::new(),
            seq: 0,
            kernel,
            fully_established: false,
            violated: false,
            destroyed: Vec::new(),
            abortive: false,
            fast_closed: false,
            created: Vec::new(),
            polls: Vec::new(),
            hold: Hold::Off,
            dropped: 0,
            left_at_fast_close: Vec::new(),
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
    /// the peer's bytes), if before `until`, and by what.
    fn next_wake(&self, until: Micros, data: bool) -> Option<(Micros, Wake)> {
        let subscribed = !self.kernel.unsubscribed;
        let wakes = |a: &Act| Wake {
            event: subscribed && matches!(a, Act::Event(_) | Act::Overrun),
            data: data && matches!(a, Act::PeerData(_)),
        };
        let t = self
            .acts
            .iter()
            .filter(|(_, a)| wakes(a) != Wake::default())
            .map(|(k, _)| k.0)
            .find(|&t| t > self.now && t <= until)?;
        let all = self
            .acts
            .iter()
            .filter(|(k, _)| k.0 == t)
            .map(|(_, a)| wakes(a));
        let wake = all.fold(Wake::default(), |w, a| Wake {
            event: w.event || a.event,
            data: w.data || a.data,
        });
        Some((t, wake))
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

    /// A path-manager event of this connection, as the subscription reads it.
    fn event(&mut self, e: PathEvent) {
        if self.kernel.unsubscribed {
            return;
        }
        let (kind, local, iface) = match e {
            PathEvent::SubflowEstablished { local, iface, .. } => {
                (MPTCP_EVENT_SUB_ESTABLISHED, local, iface)
            }
            PathEvent::SubflowClosed { local, iface, .. } => (MPTCP_EVENT_SUB_CLOSED, local, iface),
            PathEvent::Lost => {
                self.queued.clear();
                self.overrun = true;
                return;
            }
        };
        let token = match e {
            PathEvent::SubflowEstablished { token, .. }
            | PathEvent::SubflowClosed { token, .. } => token,
            PathEvent::Lost => unreachable!(),
        };
        self.queued.push(PmEvent {
            kind,
            token: Some(token),
            local,
            remote: Some(remote()),
            ifindex: iface,
            ..Default::default()
        });
    }

    fn apply(&mut self, act: Act) {
        match act {
            Act::List { local, trusted } => {
                if self.kernel.reports_joins && !trusted {
                    self.event(PathEvent::SubflowEstablished {
                        iface: None,
                        token: TOKEN,
                        local: Some(local),
                    });
                }
                if let Some(s) = self
                    .subflows
                    .iter_mut()
                    .find(|s| s.local == local && s.connecting && !s.destroyed)
                {
                    s.connecting = false;
                    return;
                }
                self.subflows.push(Subflow {
                    local,
                    trusted,
                    sent: 0,
                    received: 0,
                    listed: true,
                    destroyed: false,
                    connecting: false,
                })
            }
            Act::Connecting { local } => self.subflows.push(Subflow {
                local,
                trusted: false,
                sent: 0,
                received: 0,
                listed: true,
                destroyed: false,
                connecting: true,
            }),
            Act::Send(i, n) => {
                if let Some(s) = self
                    .subflows
                    .get_mut(i)
                    .filter(|s| s.listed && !s.destroyed)
                {
                    s.sent += n;
                    if !s.trusted && self.hold == Hold::Held {
                        self.dropped += 1;
                    } else if !s.trusted && self.written > 0 && self.acked < self.written {
                        self.violated = true;
                    }
                }
            }
            Act::Receive(i, n) => {
                if let Some(s) = self
                    .subflows
                    .get_mut(i)
                    .filter(|s| s.listed && !s.destroyed)
                {
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
            Act::Event(e) => self.event(e),
            Act::Overrun => self.event(PathEvent::Lost),
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
                    for s in self
                        .subflows
                        .iter_mut()
                        .filter(|s| s.listed && !s.trusted && !s.destroyed)
                    {
                        s.sent += unacked;
                        if self.hold == Hold::Held {
                            self.dropped += 1;
                        } else {
                            self.violated = true;
                        }
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

    /// What `MPTCP_INFO` reports now.
    pub fn conn_info(&self) -> ConnInfo {
        let (bytes_acked, snd_una) = if self.kernel.no_bytes_acked {
            (None, (u64::MAX - 600).wrapping_add(self.acked))
        } else {
            (Some(self.base + self.acked), self.base + self.acked + 1)
        };
        ConnInfo {
            token: TOKEN,
            subflows: self.subflows.iter().filter(|s| s.listed).count() as u32,
            bytes_acked,
            snd_una,
            ..Default::default()
        }
    }

    /// What `MPTCP_FULL_INFO` reports now.
    pub fn subflow_infos(&self) -> Vec<SubflowInfo> {
        self.subflows
            .iter()
            .enumerate()
            .filter(|(_, s)| s.listed)
            .map(|(i, s)| SubflowInfo {
                // The kernel's subflow ids (from 1), none before 6.5.
                id: if self.kernel.no_bytes_acked {
                    0
                } else {
                    i as u32 + 1
                },
                local: Some(s.local),
                remote: Some(remote()),
                state: if s.connecting {
                    TCP_SYN_SENT
                } else {
                    TCP_ESTABLISHED
                },
                bytes_sent: s.sent,
                bytes_received: s.received,
                rto_us: if s.trusted { self.kernel.rto_us } else { 0 },
                ..Default::default()
            })
            .collect()
    }

    /// `SOCK_DESTROY` of the subflow from `local`: it is closed at once (no longer
    /// listed), its SUB_CLOSED event follows.
    fn destroy(&mut self, local: SocketAddr) -> std::io::Result<bool> {
        if self.kernel.no_destroy {
            return Err(std::io::Error::from_raw_os_error(libc_eperm()));
        }
        let Some(s) = self
            .subflows
            .iter_mut()
            .find(|s| s.listed && !s.destroyed && s.local == local)
        else {
            return Ok(false);
        };
        s.destroyed = true;
        s.listed = false;
        let trusted = s.trusted;
        self.destroyed.push((local, self.now));
        if !trusted {
            self.event(PathEvent::SubflowClosed {
                token: TOKEN,
                local: Some(local),
                iface: None,
            });
        }
        Ok(true)
    }

    fn instant(&self) -> Instant {
        self.start + Duration::from_micros(self.now)
    }
}

/// `EPERM`.
fn libc_eperm() -> i32 {
    1
}

/// The [`Kernel`] of a simulated connection: the real gate runs on it.
#[derive(Debug, Clone)]
pub struct Sim(pub Rc<RefCell<World>>);

impl Kernel for Sim {
    /// A subflow socket, by its local address.
    type Socket = SocketAddr;

    fn info(&self) -> std::io::Result<ConnInfo> {
        let mut w = self.0.borrow_mut();
        let now = w.now;
        if w.written > 0 && w.polls.last() != Some(&now) {
            w.polls.push(now);
        }
        Ok(w.conn_info())
    }
    fn subflows(&self) -> std::io::Result<Vec<SubflowInfo>> {
        Ok(self.0.borrow().subflow_infos())
    }
    fn bound_dev(&self, _: SocketAddr, _: SocketAddr, _: u32) -> std::io::Result<Option<u32>> {
        Ok(Some(0))
    }
    fn output_iface(&self, _: IpAddr, _: IpAddr) -> std::io::Result<Option<u32>> {
        Ok(None)
    }
    fn has_route(&self, _: IpAddr, _: u32) -> std::io::Result<bool> {
        Ok(true)
    }
    fn pm_events(&mut self) -> Option<Result<Vec<PmEvent>, String>> {
        let mut w = self.0.borrow_mut();
        if w.kernel.unsubscribed {
            return None;
        }
        if std::mem::take(&mut w.overrun) {
            return Some(Err("overrun (ENOBUFS)".into()));
        }
        Some(Ok(std::mem::take(&mut w.queued)))
    }
    fn subscribed(&self) -> bool {
        !self.0.borrow().kernel.unsubscribed
    }
    fn unsubscribe(&mut self) {
        self.0.borrow_mut().kernel.unsubscribed = true;
    }
    fn destroy(&self, local: SocketAddr, _: SocketAddr) -> std::io::Result<bool> {
        self.0.borrow_mut().destroy(local)
    }
    fn sockets_of(&self, _: u32) -> std::io::Result<Vec<(SocketAddr, SocketAddr, SocketAddr)>> {
        let w = self.0.borrow();
        Ok(w.subflows
            .iter()
            .filter(|s| s.listed && !s.destroyed)
            .map(|s| (s.local, remote(), s.local))
            .collect())
    }
    fn destroy_socket(&self, s: &SocketAddr) -> std::io::Result<bool> {
        self.0.borrow_mut().destroy(*s)
    }
    fn set_abortive(&self, on: bool) -> std::io::Result<()> {
        self.0.borrow_mut().abortive = on;
        Ok(())
    }
    fn fast_close(&self) -> std::io::Result<()> {
        let mut w = self.0.borrow_mut();
        w.fast_closed = true;
        w.left_at_fast_close = w
            .subflows
            .iter()
            .filter(|s| s.listed && !s.destroyed)
            .map(|s| s.local)
            .collect();
        for s in &mut w.subflows {
            s.listed = false;
        }
        Ok(())
    }
    fn subflow_create(
        &mut self,
        _: u32,
        local: IpAddr,
        _: Option<u32>,
        remote: SocketAddr,
        _: bool,
    ) -> Result<Result<(), String>, MptcpError> {
        self.0.borrow_mut().created.push((local, remote));
        Ok(Ok(()))
    }
    fn hold(&mut self, _: u32, _: &[u32]) -> Option<Result<(), String>> {
        let mut w = self.0.borrow_mut();
        if !w.kernel.hold {
            return None;
        }
        w.hold = Hold::Held;
        Some(Ok(()))
    }
    fn hold_dropped(&self) -> Option<u64> {
        let w = self.0.borrow();
        (w.hold == Hold::Held).then_some(w.dropped)
    }
    fn release_hold(&mut self) {
        self.0.borrow_mut().hold = Hold::Released;
    }
    fn keep_hold_until_gone(&mut self) {
        self.0.borrow_mut().hold = Hold::Kept;
    }
    fn register_recovery(
        &mut self,
        _: u32,
        _: RecoveryMachine,
        _: Option<nena_mptcp::metered::MeteredMachine>,
    ) -> Result<nena_mptcp::recovery::RecoveryHandle, MptcpError> {
        Err(MptcpError::Io(std::io::Error::other(
            "the simulated kernel has no recovery service",
        )))
    }
    fn now(&self) -> Instant {
        self.0.borrow().instant()
    }
    // sleep: the simulated kernel's sleep only moves its virtual clock; nothing waits.
    fn sleep(&mut self, d: Duration) {
        let mut w = self.0.borrow_mut();
        let t = w.now + d.as_micros() as Micros;
        w.advance(t);
    }
    fn wait(&mut self, pause: Duration, data: bool) -> std::io::Result<Wake> {
        let mut w = self.0.borrow_mut();
        let timer = w.now + pause.as_micros() as Micros;
        let (to, wake) = w.next_wake(timer, data).unwrap_or((timer, Wake::default()));
        w.advance(to);
        Ok(wake)
    }
}

/// How the driver ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Released(ReleaseReport),
    Refused(Refusal),
    Timeout,
    /// Another error (a policy refusal: a premature subflow nena cannot close).
    Failed(String),
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

/// The outcome of a gate's step that failed.
fn failed(e: MptcpError) -> Outcome {
    match e {
        MptcpError::Refused(r) => Outcome::Refused(r),
        MptcpError::Timeout(_) => Outcome::Timeout,
        other => Outcome::Failed(other.to_string()),
    }
}

/// A connection in `w` connected at `t.connect`: the real gate on it ([`Gate::with_kernel`]),
/// or how connecting ended.
pub fn connect(
    m: GateMachine,
    mut w: World,
    t: Timing,
) -> (Result<Gate<Sim>, Outcome>, Rc<RefCell<World>>) {
    w.advance(t.connect);
    let world = Rc::new(RefCell::new(w));
    let g = Gate::with_kernel(Sim(world.clone()), m, None).map_err(failed);
    (g, world)
}

/// Runs the real gate ([`Gate`] on [`Sim`]) with the decisions `m` through a connection in
/// `w`, as a client does: [`connect`] at `t.connect`, `before_first_flight` and the first
/// flight written at `t.flight`, `wait_first_flight_acked` with `t.timeout`, then
/// `release_untrusted`; the gate is dropped at the end (what it did then is in the world).
pub fn drive(m: GateMachine, w: World, t: Timing) -> Run {
    let (g, world) = connect(m, w, t);
    let outcome = match g {
        Err(o) => o,
        Ok(mut g) => {
            let o = first_flight(&mut g, &world, t)
                .and_then(|()| g.release_untrusted().map_err(failed))
                .map_or_else(|o| o, Outcome::Released);
            drop(g);
            o
        }
    };
    let w = world.borrow().clone();
    Run {
        outcome,
        at: w.now,
        polls: w.polls.clone(),
        violated: w.violated,
        world: w,
    }
}

/// `before_first_flight` at `t.flight`, the first flight written, and the wait for its ACK.
pub fn first_flight(
    g: &mut Gate<Sim>,
    world: &Rc<RefCell<World>>,
    t: Timing,
) -> Result<(), Outcome> {
    world.borrow_mut().advance(t.flight);
    g.before_first_flight().map_err(failed)?;
    world.borrow_mut().write_first_flight(t.len);
    g.wait_first_flight_acked(t.len, Duration::from_micros(t.timeout))
        .map_err(failed)
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
