//! The byte layout of a sealed datagram (docs/PROTOCOL.md, "Datagram plane"), without the
//! cryptography: the clear header (authenticated as the AEAD's associated data), and the
//! inner message the ciphertext holds. Parsing is strict and returns values, never panics.
//!
//! ```text
//! offset  size  field (clear, the AEAD's associated data)
//! 0       1     type 0x0e
//! 1       4     receiver id, big-endian (chosen by the receiver, conveyed in the session)
//! 5       1     path id (0..8, the sender's numbering of its paths)
//! 6       8     counter, big-endian (the nonce; one sequence per direction, all paths)
//! 14      n     ciphertext of the inner message
//! 14+n    16    AEAD tag
//!
//! inner message (encrypted)
//! 0       1     kind: 0 data, 1 keepalive, 2 probe, 3 probe reply
//! data:         seq u32 (low 32 bits of the sender's datagram sequence) | payload
//! keepalive:    nothing
//! probe:        probe id u32
//! probe reply:  probe id u32 (the probe it answers)
//! flow data:    seq u32 | flow id u8 | key length u8 (1..=32) | payload (the flow's key,
//!               its first bytes, then the rest): data that announces flow id -> key
//! flow ack:     flow id u8 (the flow announced is known)
//! compact refused: nothing (the receiver stopped opening compact datagrams)
//! ```
//!
//! Compact datagrams (plane version 2) have a layout of their own (compact.rs), and
//! `seal::receiver_of` reads the receiver id of either.

use crate::cipher::AEAD_TAG_LEN;

/// The first byte of every sealed datagram. Outside the ranges RFC 7983 and RFC 9443 give
/// STUN (0-3), ZRTP (16-19), DTLS (20-63), TURN channels (64-79), RTP (128-191) and QUIC
/// (64-127, 192-255), apart from WireGuard's message types (1-4) and from the first byte of
/// nena's handshake magic (0x8b), so one UDP port could tell them apart.
pub const TYPE_DATAGRAM: u8 = 0x0e;
/// Length of the clear header: type, receiver id, path id, counter.
pub const HEADER_LEN: usize = 1 + 4 + 1 + 8;
/// Length of the inner header of a data message: kind and sequence number.
pub const DATA_HEADER_LEN: usize = 1 + 4;
/// Bytes a data datagram adds to its payload: header, inner header, tag (35).
pub const DATA_OVERHEAD: usize = HEADER_LEN + DATA_HEADER_LEN + AEAD_TAG_LEN;
/// The largest sealed datagram: the largest UDP payload over IPv4 (65,535 - 20 - 8).
pub const MAX_DATAGRAM: usize = 65_507;
/// The largest payload of one data datagram.
pub const MAX_PAYLOAD: usize = MAX_DATAGRAM - DATA_OVERHEAD;
/// The shortest sealed datagram: a keepalive (header, kind, tag).
pub const MIN_DATAGRAM: usize = HEADER_LEN + 1 + AEAD_TAG_LEN;
/// Path ids are below this (a path table has this many slots at most).
pub const MAX_PATHS: usize = 8;

/// Who a datagram is for: the receiver's own number for the session, 4 bytes.
pub type ReceiverId = u32;
/// A path, numbered by the client (for example 0 the trusted path, 1 the WLAN); the server
/// answers each path under the number the client gave it.
pub type PathId = u8;

/// Inner message kinds.
pub const KIND_DATA: u8 = 0;
/// A datagram that asks for nothing: it keeps a NAT binding open and shows the path alive.
pub const KIND_KEEPALIVE: u8 = 1;
/// Asks the peer for a [`KIND_PROBE_REPLY`] on the same path.
pub const KIND_PROBE: u8 = 2;
/// Answers a probe on the path it came on.
pub const KIND_PROBE_REPLY: u8 = 3;
/// Data that announces a flow id for its first bytes (plane version 2).
pub const KIND_FLOW_DATA: u8 = 4;
/// The flow announced is known: the sender may send it compact.
pub const KIND_FLOW_ACK: u8 = 5;
/// The receiver opens no more compact datagrams this session (too many failed).
pub const KIND_COMPACT_REFUSED: u8 = 6;
/// Flow ids are below this; 255 means "none" and is never sent.
pub const MAX_FLOWS: usize = 255;
/// A flow's key (the first bytes of its datagrams' payload) is at most this long.
pub const MAX_FLOW_KEY: usize = 32;

/// The clear header of a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub receiver: ReceiverId,
    pub path: PathId,
    pub counter: u64,
}

impl Header {
    /// The header's bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[0] = TYPE_DATAGRAM;
        h[1..5].copy_from_slice(&self.receiver.to_be_bytes());
        h[5] = self.path;
        h[6..14].copy_from_slice(&self.counter.to_be_bytes());
        h
    }

    /// Reads the header of a datagram and checks what can be checked without the key: the
    /// type byte, the length (at least [`MIN_DATAGRAM`], at most [`MAX_DATAGRAM`]) and the
    /// path id (below [`MAX_PATHS`]).
    pub fn parse(datagram: &[u8]) -> Result<Header, Malformed> {
        if datagram.len() < MIN_DATAGRAM {
            return Err(Malformed::TooShort);
        }
        if datagram.len() > MAX_DATAGRAM {
            return Err(Malformed::TooLong);
        }
        if datagram[0] != TYPE_DATAGRAM {
            return Err(Malformed::NotADatagram);
        }
        let path = datagram[5];
        if usize::from(path) >= MAX_PATHS {
            return Err(Malformed::PathId);
        }
        let mut r = [0u8; 4];
        r.copy_from_slice(&datagram[1..5]);
        let mut c = [0u8; 8];
        c.copy_from_slice(&datagram[6..14]);
        Ok(Header {
            receiver: u32::from_be_bytes(r),
            path,
            counter: u64::from_be_bytes(c),
        })
    }
}

/// The receiver id of a full datagram ([`Header::parse`]'s checks included).
pub fn receiver_of(datagram: &[u8]) -> Result<ReceiverId, Malformed> {
    Header::parse(datagram).map(|h| h.receiver)
}

/// What is wrong with a datagram's bytes (before or after authentication).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformed {
    /// Shorter than the shortest datagram.
    TooShort,
    /// Longer than the longest.
    TooLong,
    /// The first byte is not [`TYPE_DATAGRAM`].
    NotADatagram,
    /// The path id is [`MAX_PATHS`] or more.
    PathId,
    /// Authenticated, but the inner message has an unknown kind or a wrong length for its
    /// kind (a peer of another version).
    Inner,
}

/// An inner message to seal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    /// Application bytes with the sender's datagram sequence number (copies of one
    /// datagram on several paths share it; only its low 32 bits are sent).
    Data {
        seq: u64,
        payload: &'a [u8],
    },
    Keepalive,
    Probe {
        id: u32,
    },
    ProbeReply {
        id: u32,
    },
    /// Data whose first `key_len` bytes are the key of flow `flow` (plane version 2).
    FlowData {
        seq: u64,
        flow: u8,
        key_len: u8,
        payload: &'a [u8],
    },
    FlowAck {
        flow: u8,
    },
    CompactRefused,
}

impl Message<'_> {
    /// Length of the inner plaintext.
    pub fn inner_len(&self) -> usize {
        match self {
            Message::Data { payload, .. } => DATA_HEADER_LEN + payload.len(),
            Message::FlowData { payload, .. } => DATA_HEADER_LEN + 2 + payload.len(),
            Message::Keepalive | Message::CompactRefused => 1,
            Message::FlowAck { .. } => 2,
            Message::Probe { .. } | Message::ProbeReply { .. } => 5,
        }
    }

    /// Appends the inner plaintext to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        match self {
            Message::Data { seq, payload } => {
                out.push(KIND_DATA);
                out.extend_from_slice(&(*seq as u32).to_be_bytes());
                out.extend_from_slice(payload);
            }
            Message::Keepalive => out.push(KIND_KEEPALIVE),
            Message::Probe { id } => {
                out.push(KIND_PROBE);
                out.extend_from_slice(&id.to_be_bytes());
            }
            Message::ProbeReply { id } => {
                out.push(KIND_PROBE_REPLY);
                out.extend_from_slice(&id.to_be_bytes());
            }
            Message::FlowData {
                seq,
                flow,
                key_len,
                payload,
            } => {
                out.push(KIND_FLOW_DATA);
                out.extend_from_slice(&(*seq as u32).to_be_bytes());
                out.push(*flow);
                out.push(*key_len);
                out.extend_from_slice(payload);
            }
            Message::FlowAck { flow } => {
                out.push(KIND_FLOW_ACK);
                out.push(*flow);
            }
            Message::CompactRefused => out.push(KIND_COMPACT_REFUSED),
        }
    }
}

/// An inner message as read from an opened datagram: the data sequence number is the 32
/// bits on the wire (the opener widens it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inner<'a> {
    Data {
        seq32: u32,
        payload: &'a [u8],
    },
    Keepalive,
    Probe {
        id: u32,
    },
    ProbeReply {
        id: u32,
    },
    FlowData {
        seq32: u32,
        flow: u8,
        key_len: u8,
        payload: &'a [u8],
    },
    FlowAck {
        flow: u8,
    },
    CompactRefused,
}

/// Reads an inner plaintext strictly: a known kind, and exactly the length that kind has.
pub fn parse_inner(plain: &[u8]) -> Result<Inner<'_>, Malformed> {
    let (&kind, rest) = plain.split_first().ok_or(Malformed::Inner)?;
    let u32_of = |b: &[u8]| -> Result<u32, Malformed> {
        let a: [u8; 4] = b.try_into().map_err(|_| Malformed::Inner)?;
        Ok(u32::from_be_bytes(a))
    };
    match kind {
        KIND_DATA if rest.len() >= 4 => Ok(Inner::Data {
            seq32: u32_of(&rest[..4])?,
            payload: &rest[4..],
        }),
        KIND_KEEPALIVE if rest.is_empty() => Ok(Inner::Keepalive),
        KIND_PROBE => Ok(Inner::Probe { id: u32_of(rest)? }),
        KIND_PROBE_REPLY => Ok(Inner::ProbeReply { id: u32_of(rest)? }),
        KIND_FLOW_DATA if rest.len() >= 6 => {
            let (flow, key_len, payload) = (rest[4], rest[5], &rest[6..]);
            let key_ok = (1..=MAX_FLOW_KEY).contains(&usize::from(key_len));
            if usize::from(flow) >= MAX_FLOWS || !key_ok || payload.len() < usize::from(key_len) {
                return Err(Malformed::Inner);
            }
            Ok(Inner::FlowData {
                seq32: u32_of(&rest[..4])?,
                flow,
                key_len,
                payload,
            })
        }
        KIND_FLOW_ACK if rest.len() == 1 && usize::from(rest[0]) < MAX_FLOWS => {
            Ok(Inner::FlowAck { flow: rest[0] })
        }
        KIND_COMPACT_REFUSED if rest.is_empty() => Ok(Inner::CompactRefused),
        _ => Err(Malformed::Inner),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_layout() {
        let h = Header {
            receiver: 0x0102_0304,
            path: 1,
            counter: 0x0a0b_0c0d_0e0f_1011,
        };
        let b = h.encode();
        assert_eq!(
            b,
            [0x0e, 1, 2, 3, 4, 1, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11]
        );
        let mut d = b.to_vec();
        d.extend_from_slice(&[0u8; 17]);
        assert_eq!(Header::parse(&d), Ok(h));
        assert_eq!(receiver_of(&d), Ok(0x0102_0304));
    }

    #[test]
    fn header_checks_refuse_before_the_key() {
        let h = Header {
            receiver: 7,
            path: 0,
            counter: 0,
        };
        let mut d = h.encode().to_vec();
        d.extend_from_slice(&[0u8; 17]);
        assert_eq!(d.len(), MIN_DATAGRAM);
        assert_eq!(
            Header::parse(&d[..MIN_DATAGRAM - 1]),
            Err(Malformed::TooShort)
        );
        assert_eq!(Header::parse(&[]), Err(Malformed::TooShort));
        let mut t = d.clone();
        t[0] = 0x8b;
        assert_eq!(Header::parse(&t), Err(Malformed::NotADatagram));
        let mut p = d.clone();
        p[5] = MAX_PATHS as u8;
        assert_eq!(Header::parse(&p), Err(Malformed::PathId));
        let long = vec![TYPE_DATAGRAM; MAX_DATAGRAM + 1];
        assert_eq!(Header::parse(&long), Err(Malformed::TooLong));
    }

    #[test]
    fn inner_messages_round_trip_and_wrong_lengths_are_refused() {
        let msgs = [
            Message::Data {
                seq: 0x1_0000_0005,
                payload: b"voice",
            },
            Message::Data {
                seq: 9,
                payload: b"",
            },
            Message::Keepalive,
            Message::Probe { id: 77 },
            Message::ProbeReply { id: u32::MAX },
            Message::FlowData {
                seq: 3,
                flow: 254,
                key_len: 7,
                payload: b"\x01\xc6\x12\x00\x02\x1b\x5fvoice",
            },
            Message::FlowAck { flow: 0 },
            Message::CompactRefused,
        ];
        for m in msgs {
            let mut b = Vec::new();
            m.encode_into(&mut b);
            assert_eq!(b.len(), m.inner_len());
            let back = parse_inner(&b).unwrap();
            let same = match (m, back) {
                (Message::Data { seq, payload }, Inner::Data { seq32, payload: p }) => {
                    seq as u32 == seq32 && payload == p
                }
                (Message::Keepalive, Inner::Keepalive) => true,
                (Message::Probe { id }, Inner::Probe { id: j }) => id == j,
                (Message::ProbeReply { id }, Inner::ProbeReply { id: j }) => id == j,
                (
                    Message::FlowData {
                        seq,
                        flow,
                        key_len,
                        payload,
                    },
                    Inner::FlowData {
                        seq32,
                        flow: f,
                        key_len: k,
                        payload: p,
                    },
                ) => seq as u32 == seq32 && flow == f && key_len == k && payload == p,
                (Message::FlowAck { flow }, Inner::FlowAck { flow: f }) => flow == f,
                (Message::CompactRefused, Inner::CompactRefused) => true,
                _ => false,
            };
            assert!(same, "{m:?} came back as {back:?}");
        }
        for bad in [
            &[][..],
            &[KIND_DATA, 0, 0, 0],
            &[KIND_KEEPALIVE, 0],
            &[KIND_PROBE, 0, 0, 0],
            &[KIND_PROBE_REPLY, 0, 0, 0, 0, 0],
            &[KIND_FLOW_DATA, 0, 0, 0, 0],
            // Flow 255 (none), a key of 0 or 33 bytes, a payload shorter than its key.
            &[KIND_FLOW_DATA, 0, 0, 0, 0, 255, 1, 9],
            &[KIND_FLOW_DATA, 0, 0, 0, 0, 1, 0, 9],
            &[KIND_FLOW_DATA, 0, 0, 0, 0, 1, 33, 9],
            &[KIND_FLOW_DATA, 0, 0, 0, 0, 1, 2, 9],
            &[KIND_FLOW_ACK],
            &[KIND_FLOW_ACK, 255],
            &[KIND_FLOW_ACK, 1, 1],
            &[KIND_COMPACT_REFUSED, 0],
            &[7],
            &[0xff],
        ] {
            assert_eq!(parse_inner(bad), Err(Malformed::Inner), "{bad:?}");
        }
    }

    #[test]
    fn the_overhead_is_35_bytes() {
        assert_eq!(DATA_OVERHEAD, 35);
        assert_eq!(MIN_DATAGRAM, 31);
        assert_eq!(MAX_PAYLOAD + DATA_OVERHEAD, MAX_DATAGRAM);
    }
}
