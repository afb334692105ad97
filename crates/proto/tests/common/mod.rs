//! Helpers shared by the proto integration tests: move bytes through a session's halves the
//! way a transport does (payloads sealed in pieces; input opened from a buffer that grows).
#![allow(dead_code)]

use nena_proto::*;

/// Deterministic, non-constant entropy for a client (distinct kato keys).
pub fn entropy(seed: u8) -> [u8; ENTROPY_LEN] {
    std::array::from_fn(|i| {
        (i as u8)
            .wrapping_mul(29)
            .wrapping_add(seed.wrapping_mul(101))
            ^ 0x5c
    })
}

/// Seals `data` as the transport would, cut into payloads of at most `piece` bytes (and at
/// most the mode's record size); returns the bytes for the wire.
pub fn seal_all(tx: &mut Protector, data: &[u8], piece: usize) -> Vec<u8> {
    let max = tx.max_payload().unwrap_or(usize::MAX).min(piece.max(1));
    let mut wire = Vec::new();
    for chunk in data.chunks(max) {
        let mut buf = vec![0u8; tx.header_len() + chunk.len() + tx.trailer_len()];
        buf[tx.header_len()..tx.header_len() + chunk.len()].copy_from_slice(chunk);
        let n = tx.seal(&mut buf, chunk.len());
        wire.extend_from_slice(&buf[..n]);
    }
    wire
}

/// What a reader got out of some input.
#[derive(Debug, PartialEq, Eq)]
pub struct Received {
    pub data: Vec<u8>,
    pub closed: bool,
    pub error: Option<SessionError>,
    /// Input bytes not yet consumed (an incomplete unit).
    pub left: usize,
}

/// Opens `wire` arriving in the given pieces, as a reader with a growing buffer does.
pub fn open_all<'a>(rx: &mut Unprotector, pieces: impl IntoIterator<Item = &'a [u8]>) -> Received {
    let mut buf = Vec::new();
    let mut out = Received {
        data: Vec::new(),
        closed: false,
        error: None,
        left: 0,
    };
    for piece in pieces {
        buf.extend_from_slice(piece);
        while !buf.is_empty() {
            match rx.open(&mut buf) {
                Ok(Opened::NeedMore { total }) => {
                    assert!(total > buf.len());
                    break;
                }
                Ok(Opened::Data { consumed, plain }) => {
                    out.data.extend_from_slice(&buf[plain]);
                    buf.drain(..consumed);
                }
                Ok(Opened::FlowEnd { consumed }) => {
                    buf.drain(..consumed);
                }
                Ok(Opened::Close { consumed }) => {
                    buf.drain(..consumed);
                    out.closed = true;
                }
                Err(e) => {
                    out.error = Some(e);
                    out.left = buf.len();
                    return out;
                }
            }
        }
    }
    out.left = buf.len();
    out
}

/// Opens `wire` whole.
pub fn open_whole(rx: &mut Unprotector, wire: &[u8]) -> Received {
    open_all(rx, std::iter::once(wire))
}
