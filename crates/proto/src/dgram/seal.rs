//! Sealing and opening datagrams: the [`Sealer`] numbers each datagram it seals (one
//! counter for the direction, whatever the path) and encrypts it with the clear header as
//! associated data; the [`Opener`] checks the header, the anti-replay window, the tag, then
//! the duplicate window, and says why it dropped what it dropped ([`Dropped`], counted in
//! [`Stats`]). With plane version 2 ([`Sealer::enable_compact`], [`Opener::enable_compact`])
//! they also seal and open compact datagrams ([`super::compact`]) and keep the table of
//! flows announced by kind 04.

use super::compact::{self, CompactKeys};
use super::keys::{DatagramKeys, DirectionKeys, REJECT_AFTER};
use super::window::{ReplayWindow, Seen, SeqWindow};
use super::wire::{
    self, Header, Inner, Malformed, Message, PathId, ReceiverId, HEADER_LEN, MAX_FLOW_KEY,
    MAX_PATHS, MAX_PAYLOAD,
};
use crate::cipher::AEAD_TAG_LEN;
use serde::Serialize;
use std::fmt;

/// Why a datagram could not be sealed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("datagram payload of {len} bytes: at most {max} fit one sealed datagram")]
    TooLarge { len: usize, max: usize },
    #[error("path id {0}: path ids are below {MAX_PATHS}")]
    PathId(PathId),
    #[error("this direction's datagram counter is used up: the session must end")]
    CounterExhausted,
    #[error("a compact datagram of this kind cannot be sealed (not negotiated, too large, or the sequence numbers used up)")]
    NotCompact,
}

/// A flow's key: the first bytes of its datagrams' payload (the transport's destination or
/// source address), which compact datagrams leave out.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowKey {
    len: u8,
    bytes: [u8; MAX_FLOW_KEY],
}

impl FlowKey {
    /// The key of `bytes` (1 to [`MAX_FLOW_KEY`] of them).
    pub fn new(bytes: &[u8]) -> Option<FlowKey> {
        if bytes.is_empty() || bytes.len() > MAX_FLOW_KEY {
            return None;
        }
        let mut k = FlowKey {
            len: bytes.len() as u8,
            bytes: [0; MAX_FLOW_KEY],
        };
        k.bytes[..bytes.len()].copy_from_slice(bytes);
        Some(k)
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl fmt::Debug for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FlowKey({:02x?})", self.as_slice())
    }
}

/// One sealed copy of a datagram and the path it is for.
pub type SealedCopy = (PathId, Vec<u8>);

/// Seals one direction's datagrams for the peer's receiver id.
pub struct Sealer {
    keys: DirectionKeys,
    compact: Option<CompactKeys>,
    peer: ReceiverId,
    counter: u64,
    seq: u64,
}

impl Sealer {
    /// The sealer of `keys`' outgoing direction, for datagrams the peer knows as `peer`.
    pub fn new(keys: &DatagramKeys, peer: ReceiverId) -> Sealer {
        Sealer {
            keys: keys.sending(),
            compact: None,
            peer,
            counter: 0,
            seq: 0,
        }
    }

    /// Lets this sealer seal compact datagrams (plane version 2): false, and nothing
    /// changes, unless the suite is AES-128-GCM and the peer's receiver id fits 24 bits.
    pub fn enable_compact(&mut self, keys: &DatagramKeys) -> bool {
        if self.peer > compact::MAX_RECEIVER {
            return false;
        }
        self.compact = CompactKeys::sending(keys);
        self.compact.is_some()
    }

    /// Whether compact datagrams can be sealed.
    pub fn compact_enabled(&self) -> bool {
        self.compact.is_some()
    }

    /// One compact datagram: `body` (at most [`compact::MAX_BODY`] bytes) of datagram `seq`
    /// in flow `flow` for path `path`.
    pub fn seal_compact(
        &mut self,
        path: PathId,
        seq: u64,
        flow: u8,
        body: &[u8],
    ) -> Result<Vec<u8>, SealError> {
        if usize::from(path) >= MAX_PATHS {
            return Err(SealError::PathId(path));
        }
        let Some(keys) = self.compact.as_mut() else {
            return Err(SealError::NotCompact);
        };
        if body.len() > compact::MAX_BODY
            || seq >= compact::MAX_SEQ
            || usize::from(flow) >= compact::MAX_FLOWS
        {
            return Err(SealError::NotCompact);
        }
        let header = compact::Header {
            receiver: self.peer,
            path,
            seq16: seq as u16,
            flow,
        }
        .encode();
        let mut out = Vec::with_capacity(compact::OVERHEAD + body.len());
        out.extend_from_slice(&header);
        out.extend_from_slice(body);
        let tag = keys.seal(path, seq, &header, &mut out[compact::HEADER_LEN..]);
        out.extend_from_slice(&tag);
        Ok(out)
    }

    /// The counter the next sealed datagram gets.
    pub fn counter(&self) -> u64 {
        self.counter
    }

    /// A new data sequence number: one per application datagram, shared by its copies.
    pub fn next_seq(&mut self) -> u64 {
        let s = self.seq;
        self.seq += 1;
        s
    }

    /// Seals `msg` for path `path` into `out` (cleared first); the next counter is used.
    pub fn seal_into(
        &mut self,
        path: PathId,
        msg: Message<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), SealError> {
        if let Message::Data { payload, .. } = msg {
            if payload.len() > MAX_PAYLOAD {
                return Err(SealError::TooLarge {
                    len: payload.len(),
                    max: MAX_PAYLOAD,
                });
            }
        }
        if usize::from(path) >= MAX_PATHS {
            return Err(SealError::PathId(path));
        }
        if self.counter >= REJECT_AFTER {
            return Err(SealError::CounterExhausted);
        }
        let header = Header {
            receiver: self.peer,
            path,
            counter: self.counter,
        }
        .encode();
        out.clear();
        out.reserve(HEADER_LEN + msg.inner_len() + AEAD_TAG_LEN);
        out.extend_from_slice(&header);
        msg.encode_into(out);
        let tag = self
            .keys
            .seal(self.counter, &header, &mut out[HEADER_LEN..]);
        out.extend_from_slice(&tag);
        self.counter += 1;
        Ok(())
    }

    /// [`Sealer::seal_into`] into a new buffer.
    pub fn seal(&mut self, path: PathId, msg: Message<'_>) -> Result<Vec<u8>, SealError> {
        let mut out = Vec::new();
        self.seal_into(path, msg, &mut out)?;
        Ok(out)
    }

    /// One application datagram on each of `paths`: one sequence number, one copy per path,
    /// each with its own counter and path id. Returns the sequence number and the copies.
    pub fn seal_copies(
        &mut self,
        paths: &[PathId],
        payload: &[u8],
    ) -> Result<(u64, Vec<SealedCopy>), SealError> {
        if payload.len() > MAX_PAYLOAD {
            return Err(SealError::TooLarge {
                len: payload.len(),
                max: MAX_PAYLOAD,
            });
        }
        let seq = self.next_seq();
        let mut copies = Vec::with_capacity(paths.len());
        for &p in paths {
            let d = self.seal(p, Message::Data { seq, payload })?;
            copies.push((p, d));
        }
        Ok((seq, copies))
    }

    /// One application datagram of flow `flow` (whose key is the payload's first `key_len`
    /// bytes) on each of `paths`: compact copies of the rest when `compact`, else full
    /// copies that announce the flow (kind 04).
    pub fn seal_flow_copies(
        &mut self,
        paths: &[PathId],
        payload: &[u8],
        flow: u8,
        key_len: u8,
        compact: bool,
    ) -> Result<(u64, Vec<SealedCopy>), SealError> {
        if payload.len() + 2 > MAX_PAYLOAD {
            return Err(SealError::TooLarge {
                len: payload.len(),
                max: MAX_PAYLOAD - 2,
            });
        }
        let body = &payload[usize::from(key_len).min(payload.len())..];
        if compact && (body.len() > compact::MAX_BODY || self.seq >= compact::MAX_SEQ) {
            return Err(SealError::NotCompact);
        }
        let seq = self.next_seq();
        let mut copies = Vec::with_capacity(paths.len());
        for &p in paths {
            let d = if compact {
                self.seal_compact(p, seq, flow, body)?
            } else {
                let msg = Message::FlowData {
                    seq,
                    flow,
                    key_len,
                    payload,
                };
                self.seal(p, msg)?
            };
            copies.push((p, d));
        }
        Ok((seq, copies))
    }
}

impl fmt::Debug for Sealer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sealer")
            .field("peer", &self.peer)
            .field("counter", &self.counter)
            .field("seq", &self.seq)
            .finish_non_exhaustive()
    }
}

/// The receiver id of a datagram, full or compact, for a server that routes datagrams to
/// their sessions before opening them (the header's checks included).
pub fn receiver_of(datagram: &[u8]) -> Result<ReceiverId, Malformed> {
    match datagram.first() {
        Some(&b) if compact::is_compact(b) => compact::Header::parse(datagram).map(|h| h.receiver),
        _ => wire::receiver_of(datagram),
    }
}

/// Why a received datagram was dropped. Every drop is counted in [`Stats`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Dropped {
    /// Not a datagram of this plane, or not one this version reads.
    #[error("malformed datagram: {0:?}")]
    Malformed(Malformed),
    /// Its receiver id is not ours (a server that routes by receiver id counts these
    /// itself, with [`receiver_of`]).
    #[error("datagram for receiver {0:#010x}, not ours")]
    UnknownReceiver(ReceiverId),
    /// The tag did not verify: altered on the way, or forged.
    #[error("datagram failed authentication")]
    Unauthentic,
    /// Its counter was seen before (a replay, or a copy made on the way).
    #[error("replayed datagram (counter {0})")]
    Replayed(u64),
    /// Its counter lies further behind the newest than the replay window reaches.
    #[error("datagram counter {0} is older than the replay window")]
    TooOld(u64),
    /// Authentic and new, but a copy of a data datagram already received (on another path,
    /// or too far behind the newest to tell): the first copy was kept.
    #[error("duplicate datagram (sequence {seq}, path {path})")]
    Duplicate {
        path: PathId,
        /// The counter of a full datagram; none for a compact one.
        counter: Option<u64>,
        seq: u64,
    },
    /// A compact datagram, authentic, of a flow no datagram has announced.
    #[error("compact datagram of unknown flow {0}")]
    UnknownFlow(u8),
}

impl Dropped {
    /// The path and counter (none for a compact datagram) of a datagram that authenticated
    /// although it was dropped (a duplicate): it still shows its path alive, and a full one
    /// may still teach its address.
    pub fn authenticated(&self) -> Option<(PathId, Option<u64>)> {
        match *self {
            Dropped::Duplicate { path, counter, .. } => Some((path, counter)),
            _ => None,
        }
    }
}

/// What one direction's opener received and dropped, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Data datagrams delivered (first copies).
    pub delivered: u64,
    /// Payload bytes delivered.
    pub delivered_bytes: u64,
    pub keepalives: u64,
    pub probes: u64,
    pub probe_replies: u64,
    pub malformed: u64,
    pub unknown_receiver: u64,
    pub unauthentic: u64,
    pub replayed: u64,
    pub too_old: u64,
    pub duplicate: u64,
    /// Compact datagrams of a flow never announced.
    pub unknown_flow: u64,
    /// Compact datagrams delivered (also counted in `delivered`).
    pub compact: u64,
}

impl Stats {
    /// Datagrams dropped, all reasons.
    pub fn dropped(&self) -> u64 {
        self.malformed
            + self.unknown_receiver
            + self.unauthentic
            + self.replayed
            + self.too_old
            + self.duplicate
            + self.unknown_flow
    }

    fn count(&mut self, d: &Dropped) {
        match d {
            Dropped::Malformed(_) => self.malformed += 1,
            Dropped::UnknownReceiver(_) => self.unknown_receiver += 1,
            Dropped::Unauthentic => self.unauthentic += 1,
            Dropped::Replayed(_) => self.replayed += 1,
            Dropped::TooOld(_) => self.too_old += 1,
            Dropped::Duplicate { .. } => self.duplicate += 1,
            Dropped::UnknownFlow(_) => self.unknown_flow += 1,
        }
    }
}

/// What an opened datagram holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Received<'a> {
    /// Application bytes, the first copy of sequence number `seq`: `payload`, after the
    /// flow's key when a compact datagram left it out (`prefix`). `announced`: the flow id
    /// a kind 04 datagram announced (to acknowledge).
    Data {
        seq: u64,
        payload: &'a [u8],
        prefix: Option<FlowKey>,
        announced: Option<u8>,
    },
    Keepalive,
    Probe {
        id: u32,
    },
    ProbeReply {
        id: u32,
    },
    /// The peer knows flow `flow`: it may go compact.
    FlowAck {
        flow: u8,
    },
    /// The peer opens no more compact datagrams.
    CompactRefused,
}

/// An authenticated, new datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opened<'a> {
    /// The path it says it came on (authenticated).
    pub path: PathId,
    /// Its counter (authenticated, new); none for a compact datagram.
    pub counter: Option<u64>,
    pub message: Received<'a>,
}

/// Opens the incoming direction's datagrams addressed to our receiver id.
pub struct Opener {
    keys: DirectionKeys,
    compact: Option<CompactKeys>,
    /// The flows the peer announced, by id.
    flows: Vec<Option<FlowKey>>,
    /// Per path, the sequence numbers of the compact datagrams opened on it: a sender puts
    /// one number on a path once, so a second arrival on the same path is a replay.
    compact_replay: Vec<ReplayWindow>,
    compact_failures: u64,
    local: ReceiverId,
    replay: ReplayWindow,
    seqs: SeqWindow,
    stats: Stats,
}

impl Opener {
    /// The opener of `keys`' incoming direction for datagrams sent to `local`.
    pub fn new(keys: &DatagramKeys, local: ReceiverId) -> Opener {
        Opener {
            keys: keys.receiving(),
            compact: None,
            flows: vec![None; compact::MAX_FLOWS],
            compact_replay: Vec::new(),
            compact_failures: 0,
            local,
            replay: ReplayWindow::default(),
            seqs: SeqWindow::default(),
            stats: Stats::default(),
        }
    }

    /// Our receiver id.
    pub fn receiver(&self) -> ReceiverId {
        self.local
    }

    /// Lets this opener open compact datagrams (plane version 2): false, and nothing
    /// changes, unless the suite is AES-128-GCM and our receiver id fits 24 bits.
    pub fn enable_compact(&mut self, keys: &DatagramKeys) -> bool {
        if self.local > compact::MAX_RECEIVER {
            return false;
        }
        self.compact = CompactKeys::receiving(keys);
        self.compact_replay = (0..MAX_PATHS).map(|_| ReplayWindow::default()).collect();
        self.compact.is_some()
    }

    /// Counts `n` failed compact openings as if they had happened (tests of the limit).
    #[cfg(test)]
    pub(crate) fn count_compact_failures(&mut self, n: u64) {
        self.compact_failures += n;
    }

    /// Whether this opener stopped opening compact datagrams after
    /// [`compact::FAILURE_LIMIT`] of them failed.
    pub fn compact_refused(&self) -> bool {
        self.compact_failures >= compact::FAILURE_LIMIT
    }

    /// The counts so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Opens the datagram in `buf` in place (the plaintext is left in `buf`, the payload
    /// borrowed from it). In order: the header ([`Header::parse`]), the receiver id, the
    /// replay window (before the tag, so replays cost no decryption), the tag, the inner
    /// message, then for data the duplicate window. Only a datagram that authenticated moves
    /// either window.
    pub fn open<'b>(&mut self, buf: &'b mut [u8]) -> Result<Opened<'b>, Dropped> {
        match self.open_inner(buf) {
            Ok(o) => {
                match o.message {
                    Received::Data {
                        payload, prefix, ..
                    } => {
                        self.stats.delivered += 1;
                        self.stats.delivered_bytes += payload.len() as u64;
                        if let Some(k) = prefix {
                            self.stats.compact += 1;
                            self.stats.delivered_bytes += k.as_slice().len() as u64;
                        }
                    }
                    Received::Keepalive => self.stats.keepalives += 1,
                    Received::Probe { .. } => self.stats.probes += 1,
                    Received::ProbeReply { .. } => self.stats.probe_replies += 1,
                    Received::FlowAck { .. } | Received::CompactRefused => {}
                }
                Ok(o)
            }
            Err(d) => {
                self.stats.count(&d);
                Err(d)
            }
        }
    }

    /// Marks data sequence number `seq` delivered by another way (the copy that travelled
    /// inside the session while the path's UDP was not confirmed): a UDP copy of it that
    /// arrives later is then a duplicate. False when `seq` was delivered already (or lies
    /// behind the duplicate window): drop that copy.
    pub fn accept_seq(&mut self, seq: u64) -> bool {
        self.seqs.accept(seq).is_ok()
    }

    fn open_inner<'b>(&mut self, buf: &'b mut [u8]) -> Result<Opened<'b>, Dropped> {
        if buf.first().is_some_and(|&b| compact::is_compact(b)) && self.compact.is_some() {
            return self.open_compact(buf);
        }
        let h = Header::parse(buf).map_err(Dropped::Malformed)?;
        if h.receiver != self.local {
            return Err(Dropped::UnknownReceiver(h.receiver));
        }
        if h.counter >= REJECT_AFTER {
            return Err(Dropped::TooOld(h.counter));
        }
        self.replay.check(h.counter).map_err(|s| match s {
            Seen::Again => Dropped::Replayed(h.counter),
            Seen::TooOld => Dropped::TooOld(h.counter),
        })?;
        let (aad, sealed) = buf.split_at_mut(HEADER_LEN);
        let n = self
            .keys
            .open(h.counter, aad, sealed)
            .map_err(|_| Dropped::Unauthentic)?;
        let plain = &sealed[..n];
        // Authentic: the counter is spent whatever the message holds.
        self.replay
            .accept(h.counter)
            .expect("checked above, nothing in between");
        let message = match wire::parse_inner(plain).map_err(Dropped::Malformed)? {
            Inner::Data { seq32, payload } => {
                let seq = self.accept_data(&h, seq32)?;
                Received::Data {
                    seq,
                    payload,
                    prefix: None,
                    announced: None,
                }
            }
            Inner::FlowData {
                seq32,
                flow,
                key_len,
                payload,
            } => {
                let key = FlowKey::new(&payload[..usize::from(key_len)])
                    .ok_or(Dropped::Malformed(Malformed::Inner))?;
                // A flow id names one key for the whole session: a sender never reuses one.
                let slot = &mut self.flows[usize::from(flow)];
                match slot {
                    Some(k) if *k != key => return Err(Dropped::Malformed(Malformed::Inner)),
                    Some(_) => {}
                    None => *slot = Some(key),
                }
                let seq = self.accept_data(&h, seq32)?;
                Received::Data {
                    seq,
                    payload,
                    prefix: None,
                    announced: Some(flow),
                }
            }
            Inner::Keepalive => Received::Keepalive,
            Inner::Probe { id } => Received::Probe { id },
            Inner::ProbeReply { id } => Received::ProbeReply { id },
            Inner::FlowAck { flow } => Received::FlowAck { flow },
            Inner::CompactRefused => Received::CompactRefused,
        };
        Ok(Opened {
            path: h.path,
            counter: Some(h.counter),
            message,
        })
    }

    /// The data sequence number whose low 32 bits a full datagram with header `h` carries,
    /// marked in the duplicate window; a copy already delivered is a duplicate.
    fn accept_data(&mut self, h: &Header, seq32: u32) -> Result<u64, Dropped> {
        let seq = self.seqs.widen(seq32);
        self.seqs.accept(seq).map_err(|_| Dropped::Duplicate {
            path: h.path,
            counter: Some(h.counter),
            seq,
        })?;
        Ok(seq)
    }

    /// A compact datagram: the header, the receiver id, the failure limit, its path's replay
    /// window (before the tag: a replay costs no decryption), the tag (under the sequence
    /// number widened from its 16 bits), the flow, then the duplicate window.
    fn open_compact<'b>(&mut self, buf: &'b mut [u8]) -> Result<Opened<'b>, Dropped> {
        let h = compact::Header::parse(buf).map_err(Dropped::Malformed)?;
        if h.receiver != self.local {
            return Err(Dropped::UnknownReceiver(h.receiver));
        }
        if self.compact_refused() {
            return Err(Dropped::Unauthentic);
        }
        let Some(keys) = self.compact.as_mut() else {
            return Err(Dropped::Malformed(Malformed::NotADatagram));
        };
        let seq = self.seqs.widen_bits(u64::from(h.seq16), 16);
        let replay = &mut self.compact_replay[usize::from(h.path)];
        replay.check(seq).map_err(|s| match s {
            Seen::Again => Dropped::Replayed(seq),
            Seen::TooOld => Dropped::TooOld(seq),
        })?;
        let (aad, sealed) = buf.split_at_mut(compact::HEADER_LEN);
        let Ok(n) = keys.open(h.path, seq, aad, sealed) else {
            self.compact_failures += 1;
            return Err(Dropped::Unauthentic);
        };
        replay
            .accept(seq)
            .expect("checked above, nothing in between");
        let Some(prefix) = self.flows[usize::from(h.flow)] else {
            return Err(Dropped::UnknownFlow(h.flow));
        };
        self.seqs.accept(seq).map_err(|_| Dropped::Duplicate {
            path: h.path,
            counter: None,
            seq,
        })?;
        Ok(Opened {
            path: h.path,
            counter: None,
            message: Received::Data {
                seq,
                payload: &sealed[..n],
                prefix: Some(prefix),
                announced: None,
            },
        })
    }
}

impl fmt::Debug for Opener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Opener")
            .field("local", &self.local)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
#[path = "seal_tests.rs"]
mod tests;
