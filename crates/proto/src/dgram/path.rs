//! The path table, sans-IO: for each path the address it is answered at, whether UDP is
//! confirmed on it, its round trip, and when to probe it or keep its NAT binding open. Time
//! comes in as an argument; the table asks for probes and keepalives ([`PathAction`]) and
//! the caller seals and sends them.
//!
//! Rules (docs/PROTOCOL.md, "Datagram plane"):
//! - **Addresses** (server, [`AddressMode::Learn`]): a path's address is learned only from a
//!   datagram that authenticated, and only when its counter is newer than the counter of the
//!   datagram that last set it, so neither a forged packet nor an old one (reordered, or
//!   replayed from elsewhere within the window) moves it. A path whose address moved is
//!   unconfirmed again until a probe sent to the new address is answered: until then it gets
//!   probes, probe replies and keepalives only, so a stolen datagram re-sent from a victim's
//!   address brings the victim a few small datagrams, never the session's traffic. A
//!   client's addresses are fixed ([`AddressMode::Fixed`]).
//! - **Liveness**: a path is [`PathStatus::Up`] (UDP confirmed) once a probe sent on it is
//!   answered, [`PathStatus::Down`] after [`LivenessConfig::down_after`] probes in a row go
//!   unanswered, and up again at the next answer. Until a path is up, and again when it goes
//!   down, its datagrams travel inside the session (the stream): the fallback where a path
//!   blocks UDP.
//! - **Round trip**: each answered probe is one sample, smoothed as RFC 6298 ([`super::rtt`]).
//! - **Probes**: every [`LivenessConfig::probe_interval`] while the plane carries data
//!   (every [`LivenessConfig::alive_probe_interval`] on a path that brought an authenticated
//!   datagram within the last `probe_interval`: it shows itself alive), every
//!   [`LivenessConfig::idle_probe_interval`] when idle; a probe unanswered after the path's
//!   timeout (RFC 6298's RTO, bounded) is missed.
//! - **Keepalives**: a path on which nothing was sent for [`LivenessConfig::keepalive_after`]
//!   gets a keepalive, for the NAT bindings on the way.

use super::rtt::RttEstimator;
use super::wire::{PathId, MAX_PATHS};
use serde::Serialize;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// When to probe, when to give a path up, when to keep a NAT binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LivenessConfig {
    /// Between probes on a path while the plane carries data.
    pub probe_interval: Duration,
    /// Between probes on such a path that brought an authenticated datagram within the
    /// last `probe_interval` (a call's datagrams from the peer show the path alive; the
    /// probes then only sample its round trip).
    pub alive_probe_interval: Duration,
    /// Between probes on a path when the plane has carried no data for `idle_after`.
    pub idle_probe_interval: Duration,
    /// How long without data before the plane counts as idle.
    pub idle_after: Duration,
    /// Probes missed in a row that put a path down.
    pub down_after: u32,
    /// Silence (nothing sent) on a path after which it gets a keepalive.
    pub keepalive_after: Duration,
    /// A probe's timeout before the path has a round-trip sample (RFC 6298's initial RTO).
    pub initial_timeout: Duration,
    /// Bounds of a probe's timeout once the path has samples.
    pub min_timeout: Duration,
    pub max_timeout: Duration,
}

impl Default for LivenessConfig {
    /// A probe a second while data flows (every 2 s on a path that brings the peer's
    /// datagrams), a path down after 3 missed (about 3 to 4 s), a keepalive after 15 s of
    /// silence, a probe a minute when idle.
    fn default() -> Self {
        LivenessConfig {
            probe_interval: Duration::from_secs(1),
            alive_probe_interval: Duration::from_secs(2),
            idle_probe_interval: Duration::from_secs(60),
            idle_after: Duration::from_secs(10),
            down_after: 3,
            keepalive_after: Duration::from_secs(15),
            initial_timeout: Duration::from_secs(1),
            min_timeout: Duration::from_millis(200),
            max_timeout: Duration::from_secs(2),
        }
    }
}

/// Where a path's address comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressMode {
    /// Given by the caller (a client: the server's address on each path).
    Fixed,
    /// Learned from authenticated datagrams (a server: the client's address as its NAT
    /// shows it); paths appear with their first authenticated datagram.
    Learn,
}

/// Whether UDP works on a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PathStatus {
    /// No probe answered yet (or its address just moved): UDP not confirmed.
    Unconfirmed,
    /// A probe was answered and the last `down_after` were not all missed.
    Up,
    /// Was up, then missed `down_after` probes in a row, or its link went down.
    Down,
}

/// What the table asks the caller to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathAction {
    /// A probe with this id on this path (to [`Path::remote`]).
    Probe { path: PathId, id: u32 },
    /// A keepalive on this path.
    Keepalive { path: PathId },
}

/// What an authenticated datagram did to its path's address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressUpdate {
    /// Fixed addresses: nothing learned.
    Fixed,
    /// The path's first address.
    Learned,
    /// Newer than the datagram that set it, and from the same address.
    Unchanged,
    /// Newer, from another address: the path answers there now, unconfirmed until a probe
    /// to it is answered.
    Moved { from: SocketAddr },
    /// Older than the datagram that set the address: the address stays.
    Kept,
}

/// Datagrams and bytes per path (sealed datagrams, header and tag included), for metered
/// paths and reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PathCounts {
    pub sent: u64,
    pub sent_bytes: u64,
    pub received: u64,
    pub received_bytes: u64,
}

#[derive(Clone, Copy, Debug)]
struct ProbeRecord {
    id: u32,
    sent: Instant,
    deadline: Instant,
    answered: bool,
    missed: bool,
}

/// Probes remembered per path (later ones push out the oldest).
const PROBES_KEPT: usize = 8;

/// One path's state.
#[derive(Clone, Debug)]
pub struct Path {
    id: PathId,
    remote: Option<SocketAddr>,
    /// The counter of the datagram that set `remote` (Learn mode).
    addr_counter: Option<u64>,
    status: PathStatus,
    link_up: bool,
    metered: bool,
    rtt: RttEstimator,
    probes: VecDeque<ProbeRecord>,
    missed: u32,
    last_probe: Option<Instant>,
    last_sent: Option<Instant>,
    last_received: Option<Instant>,
    counts: PathCounts,
}

impl Path {
    fn new(id: PathId, remote: Option<SocketAddr>) -> Path {
        Path {
            id,
            remote,
            addr_counter: None,
            status: PathStatus::Unconfirmed,
            link_up: true,
            metered: false,
            rtt: RttEstimator::default(),
            probes: VecDeque::new(),
            missed: 0,
            last_probe: None,
            last_sent: None,
            last_received: None,
            counts: PathCounts::default(),
        }
    }

    pub fn id(&self) -> PathId {
        self.id
    }

    /// Where to send this path's datagrams (none yet: a server that has not heard from it).
    pub fn remote(&self) -> Option<SocketAddr> {
        self.remote
    }

    pub fn status(&self) -> PathStatus {
        self.status
    }

    /// Whether a probe on this path was answered and the path has not gone down since: only
    /// then do its datagrams go as UDP; otherwise they go inside the session.
    pub fn udp_confirmed(&self) -> bool {
        self.status == PathStatus::Up
    }

    /// Whether datagrams may go on this path as UDP now: confirmed, its link up, and an
    /// address to send to.
    pub fn is_usable(&self) -> bool {
        self.udp_confirmed() && self.link_up && self.remote.is_some()
    }

    /// Whether the caller says the path's link is up.
    pub fn link_up(&self) -> bool {
        self.link_up
    }

    /// Whether the path costs money per byte: used only when no other path is usable.
    pub fn metered(&self) -> bool {
        self.metered
    }

    /// The smoothed round trip, once a probe was answered.
    pub fn srtt(&self) -> Option<Duration> {
        self.rtt.srtt()
    }

    /// The round-trip estimator (smoothed, variation, last sample).
    pub fn rtt(&self) -> &RttEstimator {
        &self.rtt
    }

    /// Probes missed in a row.
    pub fn missed(&self) -> u32 {
        self.missed
    }

    /// When a datagram of this path last authenticated.
    pub fn last_received(&self) -> Option<Instant> {
        self.last_received
    }

    pub fn counts(&self) -> PathCounts {
        self.counts
    }

    /// When the next probe is due (none sent yet: none), with `interval` the table's (busy
    /// or idle): while busy, `alive_probe_interval` after the last one as long as the path
    /// brought a datagram within `interval`, else `interval` after it.
    fn probe_due(&self, interval: Duration, cfg: &LivenessConfig) -> Option<Instant> {
        let last = self.last_probe?;
        let plain = last + interval;
        match self.last_received {
            Some(r) if interval == cfg.probe_interval => {
                Some((last + cfg.alive_probe_interval).min(plain.max(r + interval)))
            }
            _ => Some(plain),
        }
    }

    fn timeout(&self, cfg: &LivenessConfig) -> Duration {
        self.rtt
            .timeout(cfg.initial_timeout, cfg.min_timeout, cfg.max_timeout)
    }

    fn count_miss(&mut self, cfg: &LivenessConfig) {
        self.missed += 1;
        if self.missed >= cfg.down_after && self.status == PathStatus::Up {
            self.status = PathStatus::Down;
        }
    }
}

/// Why a path could not be added.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("path id {0}: path ids are below {MAX_PATHS}")]
    Id(PathId),
    #[error("path {0} exists already")]
    Exists(PathId),
    #[error("path {0}: a fixed path needs the address to send to")]
    NoAddress(PathId),
}

/// Every path of one session's datagram plane.
#[derive(Clone, Debug)]
pub struct PathTable {
    mode: AddressMode,
    cfg: LivenessConfig,
    paths: [Option<Path>; MAX_PATHS],
    next_probe_id: u32,
    last_data: Option<Instant>,
}

impl PathTable {
    pub fn new(mode: AddressMode, cfg: LivenessConfig) -> PathTable {
        PathTable {
            mode,
            cfg,
            paths: Default::default(),
            next_probe_id: 0,
            last_data: None,
        }
    }

    pub fn mode(&self) -> AddressMode {
        self.mode
    }

    pub fn config(&self) -> &LivenessConfig {
        &self.cfg
    }

    /// Adds path `id`; in [`AddressMode::Fixed`] `remote` is where its datagrams go. The
    /// path starts unconfirmed and is probed at the next [`PathTable::poll`].
    pub fn add_path(&mut self, id: PathId, remote: Option<SocketAddr>) -> Result<(), PathError> {
        let slot = self
            .paths
            .get_mut(usize::from(id))
            .ok_or(PathError::Id(id))?;
        if slot.is_some() {
            return Err(PathError::Exists(id));
        }
        if self.mode == AddressMode::Fixed && remote.is_none() {
            return Err(PathError::NoAddress(id));
        }
        *slot = Some(Path::new(id, remote));
        Ok(())
    }

    /// The path `id`, if known.
    pub fn get(&self, id: PathId) -> Option<&Path> {
        self.paths.get(usize::from(id)).and_then(Option::as_ref)
    }

    fn get_mut(&mut self, id: PathId) -> Option<&mut Path> {
        self.paths.get_mut(usize::from(id)).and_then(Option::as_mut)
    }

    /// The known paths, by id.
    pub fn iter(&self) -> impl Iterator<Item = &Path> {
        self.paths.iter().flatten()
    }

    /// The caller's view of the path's link (an interface down, its route gone): a path
    /// whose link is down is down at once and not probed; when the link comes back the path
    /// is unconfirmed and probed at once.
    pub fn set_link(&mut self, id: PathId, up: bool) {
        if let Some(p) = self.get_mut(id) {
            if p.link_up == up {
                return;
            }
            p.link_up = up;
            p.probes.clear();
            p.missed = 0;
            p.last_probe = None;
            p.status = if up {
                PathStatus::Unconfirmed
            } else {
                PathStatus::Down
            };
        }
    }

    /// Marks a path metered (used only when no unmetered path is usable) or not.
    pub fn set_metered(&mut self, id: PathId, metered: bool) {
        if let Some(p) = self.get_mut(id) {
            p.metered = metered;
        }
    }

    /// The plane carried data now (sent or delivered): probes keep the active interval.
    pub fn note_data(&mut self, now: Instant) {
        self.last_data = Some(now);
    }

    /// A datagram of `bytes` sealed bytes left on path `id`.
    pub fn on_sent(&mut self, id: PathId, bytes: usize, now: Instant) {
        if let Some(p) = self.get_mut(id) {
            p.last_sent = Some(now);
            p.counts.sent += 1;
            p.counts.sent_bytes += bytes as u64;
        }
    }

    /// A datagram that **authenticated** (and whose counter was new) came on path `id` from
    /// `from`. Only such datagrams may reach here: this is where a server learns addresses.
    /// In [`AddressMode::Learn`] an unknown path is added.
    pub fn on_authenticated(
        &mut self,
        id: PathId,
        counter: u64,
        from: SocketAddr,
        bytes: usize,
        now: Instant,
    ) -> AddressUpdate {
        let mode = self.mode;
        if mode == AddressMode::Learn && self.get(id).is_none() {
            // Ids were checked below MAX_PATHS by the header parser; a bad one adds nothing.
            let _ = self.add_path(id, None);
        }
        let Some(p) = self.get_mut(id) else {
            // A client's path it did not add: nothing to learn.
            return AddressUpdate::Fixed;
        };
        p.last_received = Some(now);
        p.counts.received += 1;
        p.counts.received_bytes += bytes as u64;
        if mode == AddressMode::Fixed {
            return AddressUpdate::Fixed;
        }
        if p.addr_counter.is_some_and(|c| counter <= c) {
            return AddressUpdate::Kept;
        }
        p.addr_counter = Some(counter);
        match p.remote {
            None => {
                p.remote = Some(from);
                AddressUpdate::Learned
            }
            Some(old) if old == from => AddressUpdate::Unchanged,
            Some(old) => {
                p.remote = Some(from);
                // Unconfirmed until a probe to the new address is answered; replies to the
                // probes sent to the old one prove nothing about it.
                p.status = PathStatus::Unconfirmed;
                p.probes.clear();
                p.missed = 0;
                p.last_probe = None;
                AddressUpdate::Moved { from: old }
            }
        }
    }

    /// A compact datagram came on path `id` (authenticated): the path shows alive, but a
    /// compact datagram has no counter to order addresses by, so it neither adds a path nor
    /// moves one's address.
    pub fn on_compact(&mut self, id: PathId, bytes: usize, now: Instant) {
        if let Some(p) = self.get_mut(id) {
            p.last_received = Some(now);
            p.counts.received += 1;
            p.counts.received_bytes += bytes as u64;
        }
    }

    /// A reply to probe `probe_id` came on path `id` (authenticated): the path is up, and
    /// the round trip is one sample. Returns the sample, or `None` for a reply to a probe
    /// this table did not send on that path (it proves nothing and changes nothing).
    pub fn on_probe_reply(&mut self, id: PathId, probe_id: u32, now: Instant) -> Option<Duration> {
        let p = self.get_mut(id)?;
        let rec = p
            .probes
            .iter_mut()
            .find(|r| r.id == probe_id && !r.answered)?;
        rec.answered = true;
        let sample = now.saturating_duration_since(rec.sent);
        p.rtt.sample(sample);
        p.missed = 0;
        if p.link_up {
            p.status = PathStatus::Up;
        }
        Some(sample)
    }

    fn probe_interval(&self, now: Instant) -> Duration {
        match self.last_data {
            Some(t) if now.saturating_duration_since(t) < self.cfg.idle_after => {
                self.cfg.probe_interval
            }
            _ => self.cfg.idle_probe_interval,
        }
    }

    /// Counts missed probes (a path can go down here) and says what to send now: a probe on
    /// each path whose interval has passed, a keepalive on each path silent too long.
    /// Paths without an address or whose link is down get nothing.
    pub fn poll(&mut self, now: Instant) -> Vec<PathAction> {
        let interval = self.probe_interval(now);
        let cfg = self.cfg;
        let mut out = Vec::new();
        for p in self.paths.iter_mut().flatten() {
            let mut misses = 0;
            for r in p.probes.iter_mut() {
                if !r.answered && !r.missed && now >= r.deadline {
                    r.missed = true;
                    misses += 1;
                }
            }
            for _ in 0..misses {
                p.count_miss(&cfg);
            }
            if !p.link_up || p.remote.is_none() {
                continue;
            }
            let probe_due = p.probe_due(interval, &cfg).is_none_or(|t| now >= t);
            if probe_due {
                let id = self.next_probe_id;
                self.next_probe_id = self.next_probe_id.wrapping_add(1);
                if p.probes.len() == PROBES_KEPT {
                    if let Some(old) = p.probes.pop_front() {
                        if !old.answered && !old.missed {
                            p.count_miss(&cfg);
                        }
                    }
                }
                let deadline = now + p.timeout(&cfg);
                p.probes.push_back(ProbeRecord {
                    id,
                    sent: now,
                    deadline,
                    answered: false,
                    missed: false,
                });
                p.last_probe = Some(now);
                out.push(PathAction::Probe { path: p.id, id });
            } else if p.last_sent.is_none_or(|t| now >= t + cfg.keepalive_after) {
                out.push(PathAction::Keepalive { path: p.id });
            }
        }
        out
    }

    /// When [`PathTable::poll`] has something to do next (a probe or keepalive due, a probe's
    /// deadline), if anything.
    pub fn next_timeout(&self, now: Instant) -> Option<Instant> {
        let interval = self.probe_interval(now);
        let mut next: Option<Instant> = None;
        let mut at = |t: Instant| next = Some(next.map_or(t, |n| n.min(t)));
        for p in self.iter() {
            for r in &p.probes {
                if !r.answered && !r.missed {
                    at(r.deadline);
                }
            }
            if !p.link_up || p.remote.is_none() {
                continue;
            }
            at(p.probe_due(interval, &self.cfg).unwrap_or(now));
            at(p.last_sent.map_or(now, |t| t + self.cfg.keepalive_after));
        }
        next
    }
}

#[cfg(test)]
#[path = "path_tests.rs"]
mod tests;
