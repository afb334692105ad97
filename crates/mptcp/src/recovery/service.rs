//! The recovery service's thread, one per network namespace: it reads the path-manager
//! events and the link and address changes, feeds them to the registered connections'
//! machines and carries out their commands (`SUBFLOW_CREATE` / `SUBFLOW_DESTROY`, the
//! metered paths' backup flags). Started by [`super::register`]'s first call in a namespace.

use super::shared::*;
use super::{Command, RecoveryEvent, RecoveryMachine};
use crate::links::{drain_rtnl, usable_addresses};
use crate::metered::{MeteredCommand, MeteredEvent, MeteredMachine};
use crate::pm::{
    PmEvent, PmEvents, PmSocket, MPTCP_EVENT_ANNOUNCED, MPTCP_EVENT_CLOSED, MPTCP_EVENT_SUB_CLOSED,
    MPTCP_EVENT_SUB_ESTABLISHED,
};
use crate::MptcpError;
use netlink_sys::Socket;
use std::collections::{HashMap, HashSet};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Subscribe (in the calling thread's namespace, so that nothing is missed from now on) and
/// start the service thread, which inherits the namespace.
pub(super) fn start(ns: u64) -> Result<Arc<Shared>, MptcpError> {
    let events = PmEvents::subscribe()?;
    let pm = PmSocket::open()?;
    let rtnl = crate::links::subscribe()?;
    // SAFETY: eventfd has no memory arguments; the result is checked.
    let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if efd < 0 {
        return Err(io::Error::last_os_error().into());
    }
    // SAFETY: `efd` is a fresh descriptor owned by nothing else.
    let wake: OwnedFd = unsafe { std::os::fd::FromRawFd::from_raw_fd(efd) };
    let shared = Arc::new(Shared {
        changes: Mutex::new(Vec::new()),
        wake,
    });
    let s2 = shared.clone();
    std::thread::Builder::new()
        .name("nena-recovery".into())
        .spawn(move || {
            Service {
                ns,
                shared: s2,
                events,
                pm,
                rtnl,
                conns: HashMap::new(),
                backlog: Default::default(),
                usable: HashSet::new(),
                last_scan: None,
                looks: HashMap::new(),
                last_look: None,
            }
            .run()
        })?;
    Ok(shared)
}

struct Conn {
    token: u32,
    machine: RecoveryMachine,
    recovered: Arc<AtomicU64>,
    notes: Arc<Mutex<Vec<String>>>,
    metered: Option<(MeteredMachine, Arc<MeteredState>)>,
}

struct Service {
    ns: u64,
    shared: Arc<Shared>,
    events: PmEvents,
    pm: PmSocket,
    rtnl: Socket,
    conns: HashMap<u64, Conn>,
    /// Events of connections not registered, with when they were read (see [`BACKLOG_FOR`]).
    backlog: std::collections::VecDeque<(Instant, PmEvent)>,
    /// Local addresses usable at the last scan.
    usable: HashSet<IpAddr>,
    last_scan: Option<Instant>,
    /// The metered connections' other subflows at the last look (see
    /// [`Service::look_at_progress`]): their counters by (token, local).
    looks: HashMap<(u32, SocketAddr), (u64, u64)>,
    last_look: Option<Instant>,
}

/// How often the subflows of the metered connections' other paths are looked at for
/// progress ([`Service::look_at_progress`]).
const LOOK_EVERY: Duration = Duration::from_millis(100);

/// A subflow with bytes in flight and no ACK for this long (or its RTO, if longer) has
/// stalled.
const STALL_AT_LEAST: Duration = Duration::from_millis(300);

/// Whether a subflow has stalled: bytes in flight and no ACK for [`STALL_AT_LEAST`] or
/// its retransmission timeout, whichever is longer (TCP has then retransmitted at least
/// once without an answer).
pub fn stalled(s: &crate::diag::SubflowState) -> bool {
    let bound = (STALL_AT_LEAST.as_millis() as u32).max(s.rto_us / 1000);
    s.unacked_bytes > 0 && s.last_ack_recv_ms >= bound
}

/// A route from `local` to `remote` exists now (a UDP socket bound to `local` can be
/// connected to it: the kernel's route lookup, policy rules included, without a packet).
fn has_route(local: IpAddr, remote: SocketAddr) -> bool {
    std::net::UdpSocket::bind((local, 0))
        .and_then(|s| s.connect(remote))
        .is_ok()
}

impl Service {
    fn run(mut self) {
        let mut idle_since: Option<Instant> = None;
        loop {
            // Events first, then registrations: an event read here was raised after every
            // registration pushed before it (see `register`).
            let events = match self.events.drain() {
                Ok(v) => v,
                Err(e) => {
                    log::warn!("subflow recovery: {e}; a subflow closed meanwhile is recovered at its next outage");
                    Vec::new()
                }
            };
            let mut buf = [0u8; 8];
            // SAFETY: reads at most 8 bytes into a live buffer from our eventfd.
            let _ = unsafe { libc::read(self.shared.wake.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
            let changes = std::mem::take(&mut *self.shared.changes.lock().unwrap());
            let now = Instant::now();
            let mut fresh = Vec::new();
            for c in changes {
                match c {
                    Change::Add {
                        id,
                        token,
                        machine,
                        recovered,
                        notes,
                        metered,
                    } => {
                        self.conns.insert(
                            id,
                            Conn {
                                token,
                                machine,
                                recovered,
                                notes,
                                metered: *metered,
                            },
                        );
                        fresh.push(id);
                        let start = self
                            .conns
                            .get_mut(&id)
                            .and_then(|c| c.metered.as_mut())
                            .map(|(m, _)| m.start())
                            .unwrap_or_default();
                        self.meter(id, start);
                        let early: Vec<PmEvent> = self
                            .backlog
                            .iter()
                            .filter(|(_, ev)| ev.token == Some(token))
                            .map(|(_, ev)| ev.clone())
                            .collect();
                        for ev in &early {
                            self.on_pm_event(ev, now);
                        }
                    }
                    Change::Remove { id } => {
                        self.conns.remove(&id);
                    }
                    Change::Announced { id, remote } => {
                        self.on_announced(id, remote, now);
                    }
                    Change::Replay { id, events } => {
                        for ev in events {
                            if let Some(c) = self.conns.get_mut(&id) {
                                let cmds = c.machine.on_event(ev, now);
                                self.execute(id, cmds);
                            }
                            if let Some(mev) = metered_event(&ev, None) {
                                self.on_metered(id, mev);
                            }
                        }
                    }
                }
            }
            for ev in &events {
                self.on_pm_event(ev, now);
            }
            let woke = drain_rtnl(&self.rtnl);
            if woke || self.last_scan.is_none_or(|t| now - t >= RESCAN) || !fresh.is_empty() {
                self.rescan(now, &fresh);
            }
            if woke {
                for id in self.conns.keys().copied().collect::<Vec<_>>() {
                    let m = &mut self.conns.get_mut(&id).unwrap().machine;
                    let cmds = m.on_event(RecoveryEvent::RoutesChanged, now);
                    self.execute(id, cmds);
                }
            }
            for id in self.conns.keys().copied().collect::<Vec<_>>() {
                let cmds = self.conns.get_mut(&id).unwrap().machine.poll(now);
                self.execute(id, cmds);
            }
            let metering = self.conns.values().any(|c| c.metered.is_some());
            if metering && self.last_look.is_none_or(|t| now - t >= LOOK_EVERY) {
                self.look_at_progress(now);
            }
            self.take_notes();
            self.log_switches();
            self.conns.retain(|_, c| !c.machine.is_done());
            if !self.conns.is_empty() {
                idle_since = None;
            } else if idle_since.get_or_insert(now).elapsed() >= IDLE_STOP && self.retire() {
                return;
            }
            let timeout = self
                .conns
                .values()
                .filter_map(|c| c.machine.next_deadline())
                .min()
                .map_or(RESCAN, |d| d.saturating_duration_since(Instant::now()))
                .min(RESCAN)
                .min(if metering { LOOK_EVERY } else { RESCAN });
            self.wait(timeout);
        }
    }

    /// Stop if nothing was registered meanwhile: leave the services map (under its lock,
    /// which `register` holds while it pushes).
    fn retire(&self) -> bool {
        let Ok(mut map) = SERVICES.lock() else {
            return false;
        };
        if !self.shared.changes.lock().is_ok_and(|q| q.is_empty()) {
            return false;
        }
        if let Some(services) = map.as_mut() {
            if services
                .get(&self.ns)
                .is_some_and(|s| Arc::ptr_eq(s, &self.shared))
            {
                services.remove(&self.ns);
            }
        }
        true
    }

    fn wait(&self, timeout: Duration) {
        let mut fds = [
            libc::pollfd {
                fd: self.events.as_fd().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.rtnl.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.shared.wake.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ms = timeout.as_millis().clamp(1, 60_000) as libc::c_int;
        // SAFETY: `fds` is a live array of 3 pollfd for the call.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    }

    /// Log the machines' new notes (once per process and path) and keep them in their
    /// handles.
    fn take_notes(&mut self) {
        for c in self.conns.values_mut() {
            for n in c.machine.take_notes() {
                let remote = c.machine.initial();
                let on = crate::path::iface_of(n.local)
                    .ok()
                    .flatten()
                    .map(|i| i.name);
                let line = n.line(on.as_deref(), remote);
                let key = format!("join {} {}", n.local, n.target.unwrap_or(remote));
                crate::notes::say_once(&key, &line);
                if let Ok(mut v) = c.notes.lock() {
                    v.push(line);
                }
            }
        }
    }

    /// A path's first subflow to the address the peer announced cannot go for want of a
    /// route in its family (not a link coming back, whose routes follow): said once, and
    /// kept as why the connection is single-path.
    fn no_route_to_announced(&mut self, id: u64, local: IpAddr, target: SocketAddr) {
        let Some(iface) = crate::path::iface_of(local).ok().flatten() else {
            return;
        };
        if !matches!(
            crate::route::lookup(target.ip(), Some(iface.index)),
            Ok(None)
        ) {
            return;
        }
        let line = crate::path::no_route_to_announced(target, &iface, local);
        crate::notes::say_once(&format!("no route {local} {target}"), &line);
        if let Some(Ok(mut v)) = self.conns.get(&id).map(|c| c.notes.lock()) {
            v.push(line);
        }
    }

    /// Keep `ev` for a connection that may register soon.
    fn keep_for_later(&mut self, ev: &PmEvent, now: Instant) {
        while self
            .backlog
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) > BACKLOG_FOR)
            || self.backlog.len() >= BACKLOG_MAX
        {
            self.backlog.pop_front();
        }
        self.backlog.push_back((now, ev.clone()));
    }

    fn on_pm_event(&mut self, ev: &PmEvent, now: Instant) {
        let Some(token) = ev.token else { return };
        if self.ids_of(token).is_empty() {
            self.keep_for_later(ev, now);
            return;
        }
        let mev = match (ev.kind, ev.local, ev.remote) {
            (MPTCP_EVENT_SUB_ESTABLISHED, Some(local), Some(remote)) => {
                Some(MeteredEvent::SubflowEstablished {
                    local,
                    remote,
                    backup: ev.backup.unwrap_or(false),
                })
            }
            (MPTCP_EVENT_SUB_CLOSED, Some(local), _) => Some(MeteredEvent::SubflowClosed { local }),
            (MPTCP_EVENT_CLOSED, _, _) => Some(MeteredEvent::ConnectionClosed),
            _ => None,
        };
        if let Some(mev) = mev {
            for id in self.ids_of(token) {
                self.on_metered(id, mev);
            }
        }
        let rev = match (ev.kind, ev.local, ev.remote) {
            (MPTCP_EVENT_SUB_ESTABLISHED, Some(local), Some(remote)) => {
                RecoveryEvent::SubflowEstablished { local, remote }
            }
            (MPTCP_EVENT_SUB_CLOSED, Some(local), _) => RecoveryEvent::SubflowClosed { local },
            (MPTCP_EVENT_CLOSED, _, _) => RecoveryEvent::ConnectionClosed,
            (MPTCP_EVENT_ANNOUNCED, _, Some(remote)) => {
                for id in self.ids_of(token) {
                    self.on_announced(id, remote, now);
                }
                return;
            }
            _ => return,
        };
        for id in self.ids_of(token) {
            let cmds = self.conns.get_mut(&id).unwrap().machine.on_event(rev, now);
            self.execute(id, cmds);
        }
    }

    /// Re-read the usable addresses; tell the machines about changes (and the fresh ones
    /// about their paths that are down now).
    fn rescan(&mut self, now: Instant, fresh: &[u64]) {
        let usable = match usable_addresses() {
            Ok(u) => u,
            Err(e) => {
                log::warn!("subflow recovery: cannot list local addresses: {e}");
                return;
            }
        };
        self.last_scan = Some(now);
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for id in ids {
            let paths: Vec<IpAddr> = self.conns[&id].machine.paths().collect();
            let mut evs = Vec::new();
            for a in paths {
                let (was, is) = (self.usable.contains(&a), usable.contains(&a));
                if fresh.contains(&id) {
                    if !is {
                        evs.push(RecoveryEvent::LinkDown { addr: a });
                    }
                } else if was && !is {
                    evs.push(RecoveryEvent::LinkDown { addr: a });
                } else if !was && is {
                    evs.push(RecoveryEvent::LinkUp { addr: a });
                }
            }
            for ev in evs {
                log::debug!("subflow recovery: {ev:?}");
                let cmds = self.conns.get_mut(&id).unwrap().machine.on_event(ev, now);
                self.execute(id, cmds);
                if let Some(mev) = metered_event(&ev, None) {
                    self.on_metered(id, mev);
                }
            }
        }
        self.usable = usable;
    }

    /// Look at the subflows of the metered connections' other paths (one `sock_diag` dump
    /// of the namespace's subflows): one whose counters grew since the last look made
    /// progress, one with bytes in flight unacknowledged past its bound has stalled
    /// ([`stalled`]). A download on a path that went silent shows nothing here (the peer
    /// sends, and its scheduler's own stale detection moves the data).
    fn look_at_progress(&mut self, now: Instant) {
        self.last_look = Some(now);
        let states = match crate::diag::subflow_states() {
            Ok(s) => s,
            Err(e) => {
                log::debug!("metered: cannot read the subflows' state: {e}");
                return;
            }
        };
        let mut seen = HashMap::new();
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for id in ids {
            let Some(c) = self.conns.get(&id) else {
                continue;
            };
            let Some((m, _)) = &c.metered else { continue };
            let token = c.token;
            let mut evs = Vec::new();
            for (local, _) in m.watched() {
                let Some(st) = states
                    .iter()
                    .find(|s| s.token == token && crate::path::same_addr(s.local, local))
                else {
                    continue;
                };
                let now_counts = (st.bytes_acked, st.bytes_received);
                let grew = self
                    .looks
                    .get(&(token, local))
                    .is_some_and(|&(a, r)| st.bytes_acked > a || st.bytes_received > r);
                seen.insert((token, local), now_counts);
                if grew && !stalled(st) {
                    evs.push(MeteredEvent::Progress { local });
                } else if stalled(st) {
                    evs.push(MeteredEvent::Stalled { local });
                }
            }
            for ev in evs {
                self.on_metered(id, ev);
            }
        }
        self.looks = seen;
    }

    /// Feed a metered event to the machine of registration `id`, if it meters, and carry
    /// out its commands.
    fn on_metered(&mut self, id: u64, ev: MeteredEvent) {
        let cmds = match self.conns.get_mut(&id).and_then(|c| c.metered.as_mut()) {
            Some((m, _)) => m.on_event(ev),
            None => return,
        };
        self.meter(id, cmds);
    }

    /// Carry out a metered machine's commands (`SET_FLAGS`, MP_PRIO to the peer) and publish
    /// its state to the connection's handle.
    fn meter(&mut self, id: u64, cmds: Vec<MeteredCommand>) {
        let Some(c) = self.conns.get(&id) else { return };
        let token = c.token;
        if let Some((m, state)) = &c.metered {
            state.saving.store(m.saving(), Ordering::Relaxed);
        }
        for cmd in cmds {
            match cmd {
                MeteredCommand::SetBackup {
                    local,
                    remote,
                    backup,
                } => match self.pm.set_backup(token, local, remote, backup) {
                    Ok(()) => log::debug!(
                        "metered: the subflow {local} -> {remote} is {}",
                        if backup { "backup" } else { "regular" }
                    ),
                    Err(e) => log::warn!(
                        "metered: cannot make the subflow {local} -> {remote} {}: {e}",
                        if backup { "backup" } else { "regular" }
                    ),
                },
                MeteredCommand::Withdraw { local, remote } => {
                    // RM_ADDR first: the kernel sends it only while a subflow from the
                    // address exists. The recovery reopens the path when its link is back.
                    let id = crate::pm::local_id(crate::path::canonical(local.ip()));
                    if let Err(e) = self.pm.remove_addr(token, id) {
                        log::debug!("metered: RM_ADDR of {local} (id {id}): {e}");
                    }
                    match self.pm.subflow_destroy(token, local, remote) {
                        Ok(()) => log::debug!(
                            "metered: withdrew the subflow {local} -> {remote}, whose link is down"
                        ),
                        Err(e) => log::debug!("metered: closing {local} -> {remote}: {e}"),
                    }
                }
            }
        }
    }

    /// One line per switch of the metered paths (connections that switched together for
    /// the same reason share it).
    fn log_switches(&mut self) {
        let mut lines: Vec<(bool, String, usize)> = Vec::new();
        for c in self.conns.values_mut() {
            let Some((m, _)) = c.metered.as_mut() else {
                continue;
            };
            for sw in m.take_switches() {
                match lines.iter_mut().find(|l| l.0 == sw.backup && l.1 == sw.why) {
                    Some(l) => l.2 += 1,
                    None => lines.push((sw.backup, sw.why, 1)),
                }
            }
        }
        for (backup, why, n) in lines {
            let who = if n == 1 {
                "a connection".to_string()
            } else {
                format!("{n} connections")
            };
            if backup {
                log::info!("metered: {who}: the metered path is backup now (MP_PRIO), {why}");
            } else {
                log::info!("metered: {who}: the metered path carries data now, {why}");
            }
        }
    }

    /// The registrations of connection `token`.
    fn ids_of(&self, token: u32) -> Vec<u64> {
        self.conns
            .iter()
            .filter(|(_, c)| c.token == token)
            .map(|(id, _)| *id)
            .collect()
    }

    /// The peer announced `remote`: a machine waiting for a target opens its paths to it
    /// (first subflows, not recoveries: not counted).
    fn on_announced(&mut self, id: u64, remote: SocketAddr, now: Instant) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let cmds = c.machine.on_event(RecoveryEvent::Announced { remote }, now);
        if !cmds.is_empty() {
            log::info!(
                "opening the untrusted subflows to {remote}, the address the server announced"
            );
        }
        self.carry_out(id, cmds, false);
    }

    /// [`Service::carry_out`], counting accepted creates as recoveries.
    fn execute(&mut self, id: u64, cmds: Vec<Command>) {
        self.carry_out(id, cmds, true);
    }

    /// Carry out a machine's commands. An attempt (the closes of a path's stale subflows and
    /// the create after them) is made only if a route from the path's address to the remote
    /// exists; otherwise it is reported to the machine as a refused create. With `recovery`,
    /// each accepted create counts as a recovery.
    fn carry_out(&mut self, id: u64, cmds: Vec<Command>, recovery: bool) {
        let Some(token) = self.conns.get(&id).map(|c| c.token) else {
            return;
        };
        let creates: Vec<(IpAddr, SocketAddr)> = cmds
            .iter()
            .filter_map(|c| match *c {
                Command::CreateSubflow { local, remote } => Some((local, remote)),
                _ => None,
            })
            .collect();
        let routed: Vec<IpAddr> = creates
            .iter()
            .filter(|&&(l, r)| has_route(l, r))
            .map(|&(l, _)| l)
            .collect();
        for cmd in cmds {
            match cmd {
                Command::CreateSubflow { local, remote } => {
                    let result = if routed.contains(&local) {
                        // A metered path's, while another path carries: born backup.
                        let backup = self
                            .conns
                            .get(&id)
                            .and_then(|c| c.metered.as_ref())
                            .is_some_and(|(m, _)| m.backup_for_new(local));
                        log::info!(
                            "subflow recovery: opening a subflow from {local} to {remote}{}",
                            if backup {
                                " (backup: metered path)"
                            } else {
                                ""
                            }
                        );
                        // bound to the interface that holds the address (paths are interfaces)
                        let ifindex = crate::path::iface_of(local).ok().flatten().map(|i| i.index);
                        self.pm
                            .subflow_create_with(token, local, ifindex, remote, backup)
                            .map_err(|e| e.to_string())
                    } else {
                        if !recovery {
                            self.no_route_to_announced(id, local, remote);
                        }
                        Err(format!("no route from {local} to {remote} yet"))
                    };
                    if result.is_ok() && recovery {
                        if let Some(c) = self.conns.get(&id) {
                            c.recovered.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    if let Err(e) = result {
                        log::debug!("subflow recovery: {e}");
                        let now = Instant::now();
                        let c = self.conns.get_mut(&id).unwrap();
                        let more = c
                            .machine
                            .on_event(RecoveryEvent::CreateFailed { addr: local }, now);
                        debug_assert!(more.is_empty());
                    }
                }
                Command::DestroySubflow { local, remote } => {
                    let attempt = creates.iter().any(|&(l, _)| l == local.ip());
                    if attempt && !routed.contains(&local.ip()) {
                        continue;
                    }
                    log::info!("subflow recovery: closing the subflow {local} -> {remote}");
                    if let Err(e) = self.pm.subflow_destroy(token, local, remote) {
                        log::debug!("subflow recovery: {e}");
                    }
                }
            }
        }
    }
}
