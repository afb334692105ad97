//! The record layer of `aead` mode, sans-IO: how a direction's byte stream is cut into
//! authenticated records, sealed in place, and opened in place (docs/PROTOCOL.md, "Records").
//!
//! ```text
//! record = type u8 | length u16 (of what follows) | ciphertext | tag (16)
//!   type 0x17 data:  1..=16384 payload bytes
//!   type 0x15 close: no payload: the sender's direction ends here (truncation is detected)
//!   type 0x16 abort: 1 payload byte, a reason code: the sender gives the session up (no
//!                    clean end) and says why
//!   type 0x18 flow end: no payload: the sender's flow in this direction ends here, and
//!                    the session goes on (a proxy session reused for the next flow)
//! additional data = the 3 header bytes; nonce = epoch IV xor record number (RFC 8446 5.3)
//! ```
//!
//! Every check that the peer can make fail is an error of this module, and the first one
//! ends the direction: nothing of a record that fails reaches the application.

use crate::cipher::{RecordCipher, AEAD_TAG_LEN};
use crate::error::{AbortReason, SessionError};
use std::ops::Range;

/// Record type of application data.
pub const TYPE_DATA: u8 = 0x17;
/// Record type of the closing record.
pub const TYPE_CLOSE: u8 = 0x15;
/// Record type of the abort record (a reason code, then the sender's direction ends).
pub const TYPE_ABORT: u8 = 0x16;
/// Record type of the flow-end record: the flow ends in this direction, the session goes on
/// (only sent to a peer that asked for sessions reused flow after flow).
pub const TYPE_FLOW_END: u8 = 0x18;
/// Length of a record header.
pub const HEADER_LEN: usize = 3;
/// Most payload bytes in one record (16 KiB, as TLS).
pub const MAX_PAYLOAD: usize = 16 * 1024;
/// Longest record on the wire.
pub const MAX_RECORD: usize = HEADER_LEN + MAX_PAYLOAD + AEAD_TAG_LEN;
/// Length of the closing record.
pub const CLOSE_LEN: usize = HEADER_LEN + AEAD_TAG_LEN;
/// Length of the flow-end record.
pub const FLOW_END_LEN: usize = HEADER_LEN + AEAD_TAG_LEN;
/// Length of the abort record.
pub const ABORT_LEN: usize = HEADER_LEN + 1 + AEAD_TAG_LEN;

/// What [`RecordOpener::open`] (and the session's `open`) found at the start of its input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Opened {
    /// The next unit is not complete: it needs `total` bytes from the start of the input.
    NeedMore { total: usize },
    /// The first `consumed` input bytes were one unit; `plain` (a range of the input,
    /// possibly empty) now holds its plaintext.
    Data {
        consumed: usize,
        plain: Range<usize>,
    },
    /// The first `consumed` bytes were the peer's closing record: its direction ended cleanly.
    Close { consumed: usize },
    /// The first `consumed` bytes were the peer's flow-end record: its flow ended cleanly in
    /// this direction; the session goes on and the next records belong to the next flow.
    FlowEnd { consumed: usize },
}

/// Seals one direction's records.
#[derive(Debug)]
pub struct RecordSealer {
    cipher: RecordCipher,
    closed: bool,
}

impl RecordSealer {
    pub(crate) fn new(cipher: RecordCipher) -> Self {
        RecordSealer {
            cipher,
            closed: false,
        }
    }

    /// Seals the record whose payload is `buf[HEADER_LEN..HEADER_LEN + n]`: writes the
    /// header before it and the tag after it; returns the record's length
    /// (`n + HEADER_LEN + AEAD_TAG_LEN`).
    ///
    /// # Panics
    /// If `n` is 0 or above [`MAX_PAYLOAD`], `buf` is too short, or the direction is closed:
    /// those are bugs of the caller, not input from the network.
    pub fn seal(&mut self, buf: &mut [u8], n: usize) -> usize {
        self.seal_joined(buf, n, &[])
    }

    /// Seals the record whose payload is `buf[HEADER_LEN..HEADER_LEN + n]` followed by
    /// `rest`, encrypting `rest` straight into `buf` after the first `n` bytes (no copy of
    /// it before): the same record as copying `rest` there and calling
    /// [`RecordSealer::seal`]. Returns the record's length.
    ///
    /// # Panics
    /// As [`RecordSealer::seal`], for the payload of `n + rest.len()` bytes.
    pub fn seal_joined(&mut self, buf: &mut [u8], n: usize, rest: &[u8]) -> usize {
        assert!(!self.closed, "sealing after the closing record");
        let len = n + rest.len();
        assert!(
            (1..=MAX_PAYLOAD).contains(&len),
            "record payload of {len} bytes"
        );
        self.seal_typed(TYPE_DATA, buf, n, rest)
    }

    /// Writes the closing record into `out` and returns its length ([`CLOSE_LEN`]).
    /// Nothing can be sealed afterwards.
    pub fn close(&mut self, out: &mut [u8; CLOSE_LEN]) -> usize {
        assert!(!self.closed, "closing twice");
        let n = self.seal_typed(TYPE_CLOSE, out, 0, &[]);
        self.closed = true;
        n
    }

    /// Writes the flow-end record into `out` and returns its length ([`FLOW_END_LEN`]): the
    /// flow ends in this direction, and records of the next flow may follow.
    pub fn end_flow(&mut self, out: &mut [u8; FLOW_END_LEN]) -> usize {
        assert!(!self.closed, "ending a flow of a closed direction");
        self.seal_typed(TYPE_FLOW_END, out, 0, &[])
    }

    /// Writes an abort record carrying `reason` into `out` and returns its length
    /// ([`ABORT_LEN`]). Like the closing record it ends the direction, but the reader takes
    /// it as the session's failure, with the reason ([`SessionError::PeerAborted`]).
    pub fn abort(&mut self, reason: AbortReason, out: &mut [u8; ABORT_LEN]) -> usize {
        assert!(!self.closed, "aborting a closed direction");
        out[HEADER_LEN] = reason.code();
        let n = self.seal_typed(TYPE_ABORT, out, 1, &[]);
        self.closed = true;
        n
    }

    /// Whether the closing (or abort) record was sealed.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Seals the record of type `ty` whose payload is `buf[HEADER_LEN..HEADER_LEN + n]`
    /// followed by `rest` (encrypted into `buf` behind them), tag last; returns its length.
    fn seal_typed(&mut self, ty: u8, buf: &mut [u8], n: usize, rest: &[u8]) -> usize {
        let len = n + rest.len();
        let total = HEADER_LEN + len + AEAD_TAG_LEN;
        assert!(buf.len() >= total, "record buffer too short");
        let header = header(ty, len);
        buf[..HEADER_LEN].copy_from_slice(&header);
        let (head, out) = buf[HEADER_LEN..total].split_at_mut(n);
        self.cipher.seal_joined(&header, head, rest, out);
        total
    }

    /// The record cipher (epochs, counts).
    pub fn cipher(&self) -> &RecordCipher {
        &self.cipher
    }
}

fn header(ty: u8, payload: usize) -> [u8; HEADER_LEN] {
    let len = (payload + AEAD_TAG_LEN) as u16;
    let l = len.to_be_bytes();
    [ty, l[0], l[1]]
}

/// Opens one direction's records.
#[derive(Debug)]
pub struct RecordOpener {
    cipher: RecordCipher,
    state: OpenState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpenState {
    Open,
    Closed,
    Failed,
}

impl RecordOpener {
    pub(crate) fn new(cipher: RecordCipher) -> Self {
        RecordOpener {
            cipher,
            state: OpenState::Open,
        }
    }

    /// Opens the record at the start of `buf` in place. Bytes after the record are left
    /// alone. The first failure is final: later calls fail too.
    pub fn open(&mut self, buf: &mut [u8]) -> Result<Opened, SessionError> {
        match self.state {
            OpenState::Open => {}
            OpenState::Closed if buf.is_empty() => return Ok(Opened::NeedMore { total: 1 }),
            OpenState::Closed => return Err(SessionError::AfterClose),
            OpenState::Failed => return Err(SessionError::Failed),
        }
        let result = self.open_inner(buf);
        match &result {
            Err(_) => self.state = OpenState::Failed,
            Ok(Opened::Close { .. }) => self.state = OpenState::Closed,
            Ok(_) => {}
        }
        result
    }

    fn open_inner(&mut self, buf: &mut [u8]) -> Result<Opened, SessionError> {
        if buf.len() < HEADER_LEN {
            return Ok(Opened::NeedMore { total: HEADER_LEN });
        }
        let record = self.cipher.records();
        let fail = |detail: &'static str| SessionError::Integrity { record, detail };
        let ty = buf[0];
        let len = u16::from_be_bytes([buf[1], buf[2]]) as usize;
        // The header is checked before its body is awaited, so a forged length can never
        // make us wait for or buffer more than one record.
        match ty {
            TYPE_DATA if len > AEAD_TAG_LEN && len <= MAX_PAYLOAD + AEAD_TAG_LEN => {}
            TYPE_DATA => return Err(fail("impossible record length")),
            TYPE_CLOSE if len == AEAD_TAG_LEN => {}
            TYPE_CLOSE => return Err(fail("impossible closing record length")),
            TYPE_FLOW_END if len == AEAD_TAG_LEN => {}
            TYPE_FLOW_END => return Err(fail("impossible flow-end record length")),
            TYPE_ABORT if len == 1 + AEAD_TAG_LEN => {}
            TYPE_ABORT => return Err(fail("impossible abort record length")),
            _ => return Err(fail("unknown record type")),
        }
        let total = HEADER_LEN + len;
        if buf.len() < total {
            return Ok(Opened::NeedMore { total });
        }
        let (hdr, rest) = buf.split_at_mut(HEADER_LEN);
        let n = self
            .cipher
            .open(hdr, &mut rest[..len])
            .map_err(|_| fail("the record does not authenticate"))?;
        if ty == TYPE_ABORT {
            debug_assert_eq!(n, 1);
            return Err(SessionError::PeerAborted {
                reason: AbortReason::from_code(rest[0]),
            });
        }
        Ok(if ty == TYPE_CLOSE {
            Opened::Close { consumed: total }
        } else if ty == TYPE_FLOW_END {
            Opened::FlowEnd { consumed: total }
        } else {
            Opened::Data {
                consumed: total,
                plain: HEADER_LEN..HEADER_LEN + n,
            }
        })
    }

    /// The transport reached the end of the peer's stream: fine only after its closing record.
    pub fn eof(&self) -> Result<(), SessionError> {
        match self.state {
            OpenState::Closed => Ok(()),
            OpenState::Failed => Err(SessionError::Failed),
            OpenState::Open => Err(SessionError::Truncated {
                records: self.cipher.records(),
            }),
        }
    }

    /// The record cipher (epochs, counts).
    pub fn cipher(&self) -> &RecordCipher {
        &self.cipher
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cipher::Suite;
    use crate::keys::Schedule;

    fn pair(epoch_log2: u8) -> (RecordSealer, RecordOpener) {
        let s = Schedule::new(
            &crate::keys::Secrets {
                kem: &[4; 32],
                dh: &[4; 32],
                r_c: &[2; 32],
            },
            b"h",
            b"a",
        )
        .traffic()
        .0;
        (
            RecordSealer::new(RecordCipher::new(Suite::Aes128, s.clone(), epoch_log2)),
            RecordOpener::new(RecordCipher::new(Suite::Aes128, s, epoch_log2)),
        )
    }

    fn seal(tx: &mut RecordSealer, payload: &[u8]) -> Vec<u8> {
        let mut buf = vec![0u8; payload.len() + HEADER_LEN + AEAD_TAG_LEN];
        buf[HEADER_LEN..HEADER_LEN + payload.len()].copy_from_slice(payload);
        let n = tx.seal(&mut buf, payload.len());
        buf.truncate(n);
        buf
    }

    #[test]
    fn records_in_a_stream_any_split() {
        let (mut tx, mut rx) = pair(1);
        let mut wire = Vec::new();
        let payloads: Vec<Vec<u8>> = [1usize, 100, MAX_PAYLOAD, 7]
            .iter()
            .map(|&n| (0..n).map(|i| (i * 13 + n) as u8).collect())
            .collect();
        for p in &payloads {
            wire.extend(seal(&mut tx, p));
        }
        let mut close = [0u8; CLOSE_LEN];
        tx.close(&mut close);
        wire.extend_from_slice(&close);
        assert!(rx.eof().is_err(), "not closed yet");
        let mut got = Vec::new();
        let mut pos = 0;
        loop {
            match rx.open(&mut wire[pos..]).unwrap() {
                Opened::Data { consumed, plain } => {
                    got.push(wire[pos + plain.start..pos + plain.end].to_vec());
                    pos += consumed;
                }
                Opened::Close { consumed } => {
                    pos += consumed;
                    break;
                }
                Opened::NeedMore { total } => panic!("need {total} at {pos}"),
                Opened::FlowEnd { .. } => panic!("no flow ended here"),
            }
        }
        assert_eq!(pos, wire.len());
        assert_eq!(got, payloads);
        assert_eq!(rx.eof(), Ok(()));
        assert_eq!(
            rx.cipher().epoch(),
            2,
            "5 records with 2 per key: 3 epochs begun"
        );
    }

    #[test]
    fn partial_records_ask_for_exactly_what_they_need() {
        let (mut tx, mut rx) = pair(23);
        let mut rec = seal(&mut tx, b"hello");
        assert_eq!(rx.open(&mut rec[..2]), Ok(Opened::NeedMore { total: 3 }));
        assert_eq!(
            rx.open(&mut rec[..10]),
            Ok(Opened::NeedMore { total: rec.len() })
        );
        assert!(matches!(rx.open(&mut rec), Ok(Opened::Data { .. })));
    }

    #[test]
    fn every_altered_byte_is_refused_and_nothing_leaks() {
        let (mut tx, _) = pair(23);
        let rec = seal(&mut tx, b"attack at dawn");
        for i in 0..rec.len() {
            let (_, mut rx) = pair(23);
            let mut bad = rec.clone();
            bad[i] ^= 0x01;
            let err = match rx.open(&mut bad) {
                Err(e) => e,
                Ok(Opened::NeedMore { .. }) => continue, // a length grown by the flip: the
                // missing bytes never come; the transport reports truncation instead
                Ok(other) => panic!("byte {i}: altered record accepted: {other:?}"),
            };
            assert!(
                err.to_string().starts_with("integrity check failed"),
                "{err}"
            );
            // The direction is dead from now on.
            assert_eq!(rx.open(&mut rec.clone()), Err(SessionError::Failed));
        }
    }

    #[test]
    fn an_abort_record_ends_the_direction_with_its_reason_and_cannot_be_forged() {
        let (mut tx, mut rx) = pair(23);
        let mut data = seal(&mut tx, b"x");
        let mut abort = [0u8; ABORT_LEN];
        assert_eq!(tx.abort(AbortReason::ShuttingDown, &mut abort), ABORT_LEN);
        assert!(tx.is_closed());
        assert_eq!(&abort[..3], &[TYPE_ABORT, 0, 17]);
        assert!(matches!(rx.open(&mut data), Ok(Opened::Data { .. })));
        let mut part = abort;
        assert_eq!(
            rx.open(&mut part[..ABORT_LEN - 1]),
            Ok(Opened::NeedMore { total: ABORT_LEN })
        );
        let mut whole = abort;
        let err = rx.open(&mut whole).unwrap_err();
        assert_eq!(
            err,
            SessionError::PeerAborted {
                reason: AbortReason::ShuttingDown
            }
        );
        assert_eq!(
            err.to_string(),
            "the peer aborted the session: it is shutting down"
        );
        // Nothing after it is read, and it is not a clean end.
        assert_eq!(rx.open(&mut data.clone()), Err(SessionError::Failed));
        assert_eq!(rx.eof(), Err(SessionError::Failed));
        // A data record of one byte retyped as an abort, or an abort with another reason
        // byte, does not authenticate: nobody on the path can end a session with a reason.
        let (mut tx, _) = pair(23);
        let mut one = seal(&mut tx, b"\x01");
        one[0] = TYPE_ABORT;
        let (_, mut rx) = pair(23);
        assert!(rx
            .open(&mut one)
            .unwrap_err()
            .to_string()
            .starts_with("integrity check failed"));
        for i in 0..ABORT_LEN {
            let (_, mut rx) = pair(23);
            let mut bad = abort;
            bad[i] ^= 0x01;
            match rx.open(&mut bad) {
                Ok(Opened::NeedMore { .. }) => {}
                Err(SessionError::Integrity { .. }) => {}
                other => panic!("byte {i} of an abort record altered: {other:?}"),
            }
        }
        // An unknown code is passed on as a number.
        let (mut tx, mut rx) = pair(23);
        let mut abort = [0u8; ABORT_LEN];
        tx.abort(AbortReason::Other(9), &mut abort);
        assert_eq!(
            rx.open(&mut abort).unwrap_err().to_string(),
            "the peer aborted the session: reason code 9"
        );
    }

    #[test]
    fn truncation_replay_and_reordering_are_detected() {
        let (mut tx, mut rx) = pair(23);
        let a = seal(&mut tx, b"first");
        let b = seal(&mut tx, b"second");
        // Reordered: b where a is expected.
        assert!(rx.open(&mut b.clone()).is_err());
        let (mut tx, mut rx) = pair(23);
        let a2 = seal(&mut tx, b"first");
        assert_eq!(a, a2);
        assert!(matches!(rx.open(&mut a.clone()), Ok(Opened::Data { .. })));
        // Replayed: a again.
        assert!(rx.open(&mut a.clone()).is_err());
        // Truncated: the stream ends without the closing record.
        let (mut tx, mut rx) = pair(23);
        let mut a = seal(&mut tx, b"first");
        rx.open(&mut a).unwrap();
        assert!(matches!(
            rx.eof(),
            Err(SessionError::Truncated { records: 1 })
        ));
        // Data after the closing record.
        let mut close = [0u8; CLOSE_LEN];
        tx.close(&mut close);
        assert!(matches!(rx.open(&mut close), Ok(Opened::Close { .. })));
        assert_eq!(rx.open(&mut [0x17]), Err(SessionError::AfterClose));
    }

    #[test]
    fn flows_end_and_the_session_goes_on_until_its_close() {
        let (mut tx, mut rx) = pair(1);
        let mut wire = seal(&mut tx, b"first flow");
        let mut end = [0u8; FLOW_END_LEN];
        assert_eq!(tx.end_flow(&mut end), FLOW_END_LEN);
        assert_eq!(&end[..3], &[TYPE_FLOW_END, 0, 16]);
        wire.extend_from_slice(&end);
        wire.extend(seal(&mut tx, b"second flow"));
        tx.end_flow(&mut end);
        wire.extend_from_slice(&end);
        let mut close = [0u8; CLOSE_LEN];
        tx.close(&mut close);
        wire.extend_from_slice(&close);
        let (mut flows, mut flow, mut pos) = (Vec::new(), Vec::new(), 0);
        loop {
            match rx.open(&mut wire[pos..]).unwrap() {
                Opened::Data { consumed, plain } => {
                    flow.extend_from_slice(&wire[pos + plain.start..pos + plain.end]);
                    pos += consumed;
                }
                Opened::FlowEnd { consumed } => {
                    assert!(rx.eof().is_err(), "a flow's end is no end of the session");
                    flows.push(std::mem::take(&mut flow));
                    pos += consumed;
                }
                Opened::Close { consumed } => {
                    pos += consumed;
                    break;
                }
                Opened::NeedMore { total } => panic!("need {total} at {pos}"),
            }
        }
        assert_eq!(pos, wire.len());
        assert_eq!(flows, [b"first flow".to_vec(), b"second flow".to_vec()]);
        assert!(rx.eof().is_ok());
    }

    #[test]
    fn a_flow_end_cannot_be_made_from_a_close_or_the_other_way_round() {
        // The type is authenticated (the header is the additional data): whoever turns a
        // session's end into a flow's end (or back) on a path fails the record's check.
        let (mut tx, mut rx) = pair(23);
        let mut end = [0u8; FLOW_END_LEN];
        tx.end_flow(&mut end);
        end[0] = TYPE_CLOSE;
        assert!(matches!(
            rx.open(&mut end),
            Err(SessionError::Integrity { .. })
        ));
        let (mut tx, mut rx) = pair(23);
        let mut close = [0u8; CLOSE_LEN];
        tx.close(&mut close);
        close[0] = TYPE_FLOW_END;
        assert!(matches!(
            rx.open(&mut close),
            Err(SessionError::Integrity { .. })
        ));
        // A flow-end record with a payload is refused before its body is awaited.
        let (_, mut rx) = pair(23);
        assert!(rx.open(&mut [TYPE_FLOW_END, 0, 17]).is_err());
    }

    #[test]
    fn oversized_and_unknown_headers_fail_before_the_body() {
        let (_, mut rx) = pair(23);
        assert!(rx.open(&mut [TYPE_DATA, 0xff, 0xff]).is_err());
        let (_, mut rx) = pair(23);
        assert!(rx.open(&mut [0x42, 0, 20]).is_err());
        let (_, mut rx) = pair(23);
        assert!(rx.open(&mut [TYPE_CLOSE, 0, 17]).is_err());
        let (_, mut rx) = pair(23);
        assert!(
            rx.open(&mut [TYPE_DATA, 0, 16]).is_err(),
            "empty data record"
        );
    }

    #[test]
    fn expansion_at_full_records_is_below_0_2_percent() {
        let (mut tx, _) = pair(23);
        let payload = vec![0x61u8; MAX_PAYLOAD];
        let wire: usize = (0..64).map(|_| seal(&mut tx, &payload).len()).sum();
        let overhead = wire as f64 / (64 * MAX_PAYLOAD) as f64 - 1.0;
        assert!(overhead > 0.0 && overhead < 0.002, "{overhead}");
    }
}
