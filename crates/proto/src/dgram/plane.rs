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

use super::keys::DatagramKeys;
use super::path::{AddressMode, LivenessConfig, PathAction, PathTable};
use super::sched::{Class, Scheduler};
use super::seal::{Dropped, Opener, Received, SealError, Sealer, Stats};
use super::wire::{Message, PathId, ReceiverId};
use std::collections::VecDeque;
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
    /// Application bytes, the first copy.
    Data {
        path: PathId,
        seq: u64,
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
}

/// Probe replies queued at most (a peer cannot make the queue grow without bound).
const MAX_QUEUED_REPLIES: usize = 64;

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
        }
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
        let route = self.scheduler.route(&self.paths, class);
        let targets: Vec<(PathId, SocketAddr)> = route
            .udp
            .iter()
            .filter_map(|&p| Some((p, self.paths.get(p)?.remote()?)))
            .collect();
        let ids: Vec<PathId> = targets.iter().map(|t| t.0).collect();
        let (seq, copies) = self.sealer.seal_copies(&ids, payload)?;
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
                if let Some((path, counter)) = d.authenticated() {
                    self.paths.on_authenticated(path, counter, from, len, now);
                }
                return Err(d);
            }
        };
        self.paths
            .on_authenticated(opened.path, opened.counter, from, len, now);
        match opened.message {
            Received::Data { seq, payload } => {
                self.paths.note_data(now);
                Ok(Delivered::Data {
                    path: opened.path,
                    seq,
                    payload,
                })
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
        if !self.replies.is_empty() {
            return Some(now);
        }
        self.paths.next_timeout(now)
    }
}

#[cfg(test)]
#[path = "plane_tests.rs"]
mod tests;
