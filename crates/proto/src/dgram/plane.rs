//! One session's datagram plane, one end, sans-IO: the sealer, the opener, the path table
//! and the scheduler together, so the transport only moves bytes. It sends application
//! datagrams ([`Plane::send`]: sealed copies for UDP, and whether to carry the payload
//! inside the session), takes what arrived on each path's UDP socket ([`Plane::receive`]:
//! the payload, or why it was dropped), answers probes, and asks for probes and keepalives
//! when their time comes ([`Plane::poll`], [`Plane::next_timeout`]).
//!
//! A datagram carried inside the session keeps its sequence number ([`Sent::seq`]): the
//! other end's [`Plane::accept_from_session`] then drops a UDP copy of it, and the other way
//! round.
//!
//! With plane version 2 ([`Plane::enable_compact`]), a real-time datagram sent with
//! [`Plane::send_flow`] names its flow by its first bytes (the transport's address): the
//! plane numbers the flow, announces it in full datagrams (kind 04) until the peer
//! acknowledges it (kind 05), then sends it compact ([`super::compact`]).

use super::compact::{self, MAX_FLOWS};
use super::keys::DatagramKeys;
use super::path::{AddressMode, LivenessConfig, PathAction, PathTable};
use super::sched::{Class, Scheduler};
use super::seal::{Dropped, FlowKey, Opener, Received, SealError, SealedCopy, Sealer, Stats};
use super::wire::{Message, PathId, ReceiverId, MAX_FLOW_KEY};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::Instant;

/// A sealed datagram to send as UDP on `path` to `to`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    pub path: PathId,
    pub to: SocketAddr,
    pub bytes: Vec<u8>,
}

/// What to do with one application datagram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sent {
    /// Its sequence number (the same in every copy).
    pub seq: u64,
    /// The sealed copies to send as UDP, one per path chosen.
    pub udp: Vec<Transmit>,
    /// Whether to carry the payload inside the session too (with `seq`), because some
    /// path that should carry it has no confirmed UDP.
    pub stream: bool,
}

/// What a received datagram gave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivered<'a> {
    /// Application bytes, the first copy: `payload`, after `prefix` (the flow's first
    /// bytes) when a compact datagram left them out.
    Data {
        path: PathId,
        seq: u64,
        prefix: Option<FlowKey>,
        payload: &'a [u8],
    },
    /// A keepalive, a probe (its reply queued for [`Plane::poll`]) or a probe reply: nothing
    /// for the application.
    Control { path: PathId },
}

/// One end of one session's datagram plane.
#[derive(Debug)]
pub struct Plane {
    sealer: Sealer,
    opener: Opener,
    paths: PathTable,
    scheduler: Scheduler,
    /// Probe replies waiting for [`Plane::poll`].
    replies: VecDeque<(PathId, u32)>,
    /// Application datagrams from the session refused as duplicates.
    session_duplicates: u64,
    /// The flows this end numbered (version 2), by key: their id, and whether the peer
    /// acknowledged them.
    flows: HashMap<FlowKey, (u8, bool)>,
    /// Flow acknowledgements waiting for [`Plane::poll`], and whether to tell the peer
    /// that compact datagrams are refused here.
    acks: VecDeque<(PathId, u8)>,
    tell_refused: bool,
    refusal_told: Option<Instant>,
    /// The peer refused compact datagrams: full ones only from now on.
    peer_refused: bool,
}

/// Probe replies queued at most (a peer cannot make the queue grow without bound).
const MAX_QUEUED_REPLIES: usize = 64;

/// How often a receiver that refuses compact datagrams tells the peer so, at most.
const REFUSAL_AGAIN: std::time::Duration = std::time::Duration::from_secs(1);

impl Plane {
    /// The client's plane: `local` is the receiver id the client gave the server for its
    /// datagrams, `peer` the server's; add each path with [`Plane::add_path`].
    pub fn client(
        keys: &DatagramKeys,
        local: ReceiverId,
        peer: ReceiverId,
        cfg: LivenessConfig,
    ) -> Plane {
        Plane::new(keys, local, peer, AddressMode::Fixed, cfg)
    }

    /// The server's plane: it learns each path and its address from the client's
    /// authenticated datagrams.
    pub fn server(
        keys: &DatagramKeys,
        local: ReceiverId,
        peer: ReceiverId,
        cfg: LivenessConfig,
    ) -> Plane {
        Plane::new(keys, local, peer, AddressMode::Learn, cfg)
    }

    fn new(
        keys: &DatagramKeys,
        local: ReceiverId,
        peer: ReceiverId,
        mode: AddressMode,
        cfg: LivenessConfig,
    ) -> Plane {
        Plane {
            sealer: Sealer::new(keys, peer),
            opener: Opener::new(keys, local),
            paths: PathTable::new(mode, cfg),
            scheduler: Scheduler::new(),
            replies: VecDeque::new(),
            session_duplicates: 0,
            flows: HashMap::new(),
            acks: VecDeque::new(),
            tell_refused: false,
            refusal_told: None,
            peer_refused: false,
        }
    }

    /// Plane version 2: compact datagrams both ways. False, and nothing changes, unless the
    /// suite is AES-128-GCM and both receiver ids fit 24 bits.
    pub fn enable_compact(&mut self, keys: &DatagramKeys) -> bool {
        if self.sealer.compact_enabled() {
            return true;
        }
        self.opener.enable_compact(keys) && self.sealer.enable_compact(keys)
    }

    /// Whether compact datagrams are on (negotiated, and not refused by the peer).
    pub fn compact(&self) -> bool {
        self.sealer.compact_enabled() && !self.peer_refused
    }

    /// Adds a path (client: the server's address on it).
    pub fn add_path(
        &mut self,
        id: PathId,
        remote: SocketAddr,
    ) -> Result<(), super::path::PathError> {
        self.paths.add_path(id, Some(remote))
    }

    /// The path table (status, round trips, counts; link and metered settings).
    pub fn paths(&self) -> &PathTable {
        &self.paths
    }

    /// The path table, to set a path's link or metered flag.
    pub fn paths_mut(&mut self) -> &mut PathTable {
        &mut self.paths
    }

    /// The receive counts.
    pub fn stats(&self) -> &Stats {
        self.opener.stats()
    }

    /// Datagrams from the session refused as already delivered by UDP.
    pub fn session_duplicates(&self) -> u64 {
        self.session_duplicates
    }

    /// Seals one application datagram of `class` for the paths the scheduler picks.
    pub fn send(&mut self, payload: &[u8], class: Class, now: Instant) -> Result<Sent, SealError> {
        self.send_with(class, now, |sealer, ids| sealer.seal_copies(ids, payload))
    }

    /// One application datagram of `class`: the paths the scheduler picks (those with an
    /// address), sealed by `seal` for their ids, each copy counted as sent on its path.
    fn send_with(
        &mut self,
        class: Class,
        now: Instant,
        seal: impl FnOnce(&mut Sealer, &[PathId]) -> Result<(u64, Vec<SealedCopy>), SealError>,
    ) -> Result<Sent, SealError> {
        let route = self.scheduler.route(&self.paths, class);
        let targets: Vec<(PathId, SocketAddr)> = route
            .udp
            .iter()
            .filter_map(|&p| Some((p, self.paths.get(p)?.remote()?)))
            .collect();
        let ids: Vec<PathId> = targets.iter().map(|t| t.0).collect();
        let (seq, copies) = seal(&mut self.sealer, &ids)?;
        let mut udp = Vec::with_capacity(copies.len());
        for ((path, bytes), (_, to)) in copies.into_iter().zip(targets) {
            self.paths.on_sent(path, bytes.len(), now);
            udp.push(Transmit { path, to, bytes });
        }
        self.paths.note_data(now);
        Ok(Sent {
            seq,
            stream: route.stream || udp.is_empty(),
            udp,
        })
    }

    /// [`Plane::send`] for a datagram whose first `key_len` bytes name its flow (the
    /// transport's address). With version 2, a real-time one goes in its flow: announced
    /// (kind 04) until the peer acknowledges the flow, compact after. Anything else, or
    /// once 255 flows are numbered, goes as [`Plane::send`] sends it.
    pub fn send_flow(
        &mut self,
        payload: &[u8],
        key_len: usize,
        class: Class,
        now: Instant,
    ) -> Result<Sent, SealError> {
        let key = match (self.compact(), class, key_len <= MAX_FLOW_KEY) {
            (true, Class::RealTime, true) => payload.get(..key_len).and_then(FlowKey::new),
            _ => None,
        };
        let Some(key) = key else {
            return self.send(payload, class, now);
        };
        let next = self.flows.len();
        let (flow, acked) = match self.flows.get(&key) {
            Some(&f) => f,
            None if next < MAX_FLOWS => *self.flows.entry(key).or_insert((next as u8, false)),
            None => return self.send(payload, class, now),
        };
        let compact = acked && payload.len() - key_len <= compact::MAX_BODY;
        let key_len = key_len as u8;
        self.send_with(class, now, |sealer, ids| {
            match sealer.seal_flow_copies(ids, payload, flow, key_len, compact) {
                Err(SealError::NotCompact) => {
                    sealer.seal_flow_copies(ids, payload, flow, key_len, false)
                }
                r => r,
            }
        })
    }

    /// Opens a datagram that arrived from `from` (in place: the payload is borrowed from
    /// `buf`). An authenticated datagram updates its path (liveness, the address a server
    /// answers it at); a probe gets its reply queued; anything dropped is counted.
    pub fn receive<'b>(
        &mut self,
        buf: &'b mut [u8],
        from: SocketAddr,
        now: Instant,
    ) -> Result<Delivered<'b>, Dropped> {
        let len = buf.len();
        let opened = match self.opener.open(buf) {
            Ok(o) => o,
            Err(d) => {
                match d.authenticated() {
                    Some((path, Some(counter))) => {
                        self.paths.on_authenticated(path, counter, from, len, now);
                    }
                    Some((path, None)) => self.paths.on_compact(path, len, now),
                    None => {}
                }
                // Refused here: the peer is told (again, at most once a second, while its
                // compact datagrams keep coming).
                let due = self
                    .refusal_told
                    .is_none_or(|t| now.saturating_duration_since(t) >= REFUSAL_AGAIN);
                if d == Dropped::Unauthentic && self.opener.compact_refused() && due {
                    self.tell_refused = true;
                    self.refusal_told = Some(now);
                }
                return Err(d);
            }
        };
        match opened.counter {
            Some(c) => {
                self.paths.on_authenticated(opened.path, c, from, len, now);
            }
            None => self.paths.on_compact(opened.path, len, now),
        }
        match opened.message {
            Received::Data {
                seq,
                payload,
                prefix,
                announced,
            } => {
                self.paths.note_data(now);
                if let Some(flow) = announced {
                    let ack = (opened.path, flow);
                    if !self.acks.contains(&ack) {
                        if self.acks.len() == MAX_QUEUED_REPLIES {
                            self.acks.pop_front();
                        }
                        self.acks.push_back(ack);
                    }
                }
                Ok(Delivered::Data {
                    path: opened.path,
                    seq,
                    prefix,
                    payload,
                })
            }
            Received::FlowAck { flow } => {
                if let Some(f) = self.flows.values_mut().find(|f| f.0 == flow) {
                    f.1 = true;
                }
                Ok(Delivered::Control { path: opened.path })
            }
            Received::CompactRefused => {
                self.peer_refused = true;
                Ok(Delivered::Control { path: opened.path })
            }
            Received::Probe { id } => {
                if self.replies.len() == MAX_QUEUED_REPLIES {
                    self.replies.pop_front();
                }
                self.replies.push_back((opened.path, id));
                Ok(Delivered::Control { path: opened.path })
            }
            Received::ProbeReply { id } => {
                self.paths.on_probe_reply(opened.path, id, now);
                Ok(Delivered::Control { path: opened.path })
            }
            Received::Keepalive => Ok(Delivered::Control { path: opened.path }),
        }
    }

    /// An application datagram that came inside the session with sequence number `seq`:
    /// true if it is new (deliver it), false if its UDP copy was delivered already.
    pub fn accept_from_session(&mut self, seq: u64, now: Instant) -> bool {
        self.paths.note_data(now);
        let new = self.opener.accept_seq(seq);
        if !new {
            self.session_duplicates += 1;
        }
        new
    }

    /// What to send now: replies to the probes received, then the probes and keepalives the
    /// path table asks for, each sealed for its path's address.
    pub fn poll(&mut self, now: Instant) -> Result<Vec<Transmit>, SealError> {
        let mut out = Vec::new();
        while let Some((path, id)) = self.replies.pop_front() {
            self.seal_to(path, Message::ProbeReply { id }, now, &mut out)?;
        }
        while let Some((path, flow)) = self.acks.pop_front() {
            self.seal_to(path, Message::FlowAck { flow }, now, &mut out)?;
        }
        if std::mem::take(&mut self.tell_refused) {
            let ids: Vec<PathId> = self.paths.iter().map(|p| p.id()).collect();
            for path in ids {
                self.seal_to(path, Message::CompactRefused, now, &mut out)?;
            }
        }
        for action in self.paths.poll(now) {
            let (path, msg) = match action {
                PathAction::Probe { path, id } => (path, Message::Probe { id }),
                PathAction::Keepalive { path } => (path, Message::Keepalive),
            };
            self.seal_to(path, msg, now, &mut out)?;
        }
        Ok(out)
    }

    fn seal_to(
        &mut self,
        path: PathId,
        msg: Message<'_>,
        now: Instant,
        out: &mut Vec<Transmit>,
    ) -> Result<(), SealError> {
        // A path without an address (a server that has not heard from it) or with its link
        // down gets nothing.
        let Some(p) = self.paths.get(path) else {
            return Ok(());
        };
        let (Some(to), true) = (p.remote(), p.link_up()) else {
            return Ok(());
        };
        let bytes = self.sealer.seal(path, msg)?;
        self.paths.on_sent(path, bytes.len(), now);
        out.push(Transmit { path, to, bytes });
        Ok(())
    }

    /// When to call [`Plane::poll`] next (now, if a probe reply is waiting).
    pub fn next_timeout(&self, now: Instant) -> Option<Instant> {
        if !self.replies.is_empty() || !self.acks.is_empty() || self.tell_refused {
            return Some(now);
        }
        self.paths.next_timeout(now)
    }
}

#[cfg(test)]
#[path = "plane_tests.rs"]
mod tests;
