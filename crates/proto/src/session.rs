//! A negotiated session: the chosen mode and, per direction, the state that protects
//! outgoing bytes ([`Protector`]) and opens incoming ones ([`Unprotector`]), sans-IO.
//!
//! Two framings, one interface:
//! - **in place** (`plain`, `kato`, `stream`): every byte maps to one byte at the same
//!   position; [`Protector::seal`] and [`Unprotector::open`] transform the caller's buffer
//!   and nothing is added;
//! - **records** (`aead`): [`Protector::seal`] turns a payload that the caller placed after
//!   [`Protector::header_len`] bytes of room into a record in place (header before, tag after),
//!   [`Unprotector::open`] opens the record at the start of its input in place.
//!
//! A server in a cryptographic mode first reads the client's key confirmation (a 41-byte
//! handshake message): [`Unprotector::open`] consumes and checks it before any data.

use crate::cipher::{Keystream, RecordCipher, Suite};
use crate::dgram::DatagramKeys;
use crate::error::SessionError;
use crate::keys::{tags_equal, TrafficSecret, APP_MAC_KEY_LEN, TAG_LEN};
use crate::mode::{Mode, KATO_KEY_LEN};
use crate::record::{self, Opened, RecordOpener, RecordSealer};
use crate::wire;
use nena_codec::{Descrambler, Scrambler};
use serde::Serialize;
use std::fmt;

/// Which end of the connection a session belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// The side that sent the hello.
    Client,
    /// The side that answered.
    Server,
}

/// What was negotiated, for reports: the mode and, for the crypto modes, the cipher.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SessionInfo {
    pub mode: Mode,
    /// The cipher of a cryptographic mode (`aes-128-gcm`, `chacha20`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cipher: Option<&'static str>,
}

impl SessionInfo {
    /// `aead (encrypted and authenticated, aes-128-gcm)`, `kato (the papers' obfuscation,
    /// not encryption)`, ...
    pub fn describe(&self) -> String {
        match self.cipher {
            Some(c) => format!("{}, {c})", self.mode.label().trim_end_matches(')')),
            None => self.mode.label().to_string(),
        }
    }
}

impl fmt::Display for SessionInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

/// The key material of one session, per direction.
pub(crate) enum Keys {
    Plain,
    Kato {
        c2s: [u8; KATO_KEY_LEN],
        s2c: [u8; KATO_KEY_LEN],
    },
    Crypto {
        mode: Mode,
        suite: Suite,
        epoch_log2: u8,
        c2s: TrafficSecret,
        s2c: TrafficSecret,
        /// Server only: the client's key confirmation it must read first.
        expect_confirm: Option<[u8; TAG_LEN]>,
    },
}

impl Drop for Keys {
    fn drop(&mut self) {
        match self {
            Keys::Kato { c2s, s2c } => {
                zeroize::Zeroize::zeroize(c2s);
                zeroize::Zeroize::zeroize(s2c);
            }
            Keys::Crypto { expect_confirm, .. } => {
                if let Some(t) = expect_confirm {
                    zeroize::Zeroize::zeroize(t);
                }
            }
            Keys::Plain => {}
        }
    }
}

/// The outgoing half of a session.
pub struct Protector {
    info: SessionInfo,
    inner: ProtectInner,
    /// This direction's application MAC key (None: plain, no key).
    app_mac: Option<AppMacKey>,
}

/// One direction's application MAC key ([`crate::appmac`]); zeroized when dropped.
type AppMacKey = zeroize::Zeroizing<[u8; APP_MAC_KEY_LEN]>;

enum ProtectInner {
    Plain,
    Kato(Scrambler),
    Stream(Keystream),
    Aead(Box<RecordSealer>),
}

/// The incoming half of a session.
pub struct Unprotector {
    info: SessionInfo,
    /// Server in a crypto mode: the client's confirmation, until it has been read.
    confirm: Option<[u8; TAG_LEN]>,
    failed: bool,
    inner: UnprotectInner,
    /// The peer's direction's application MAC key (None: plain, no key).
    app_mac: Option<AppMacKey>,
}

enum UnprotectInner {
    Plain,
    Kato(Descrambler),
    Stream(Keystream),
    Aead(Box<RecordOpener>),
}

impl Protector {
    /// The key of this direction's application MAC ([`crate::appmac`]): None in plain mode,
    /// which has no key.
    pub fn app_mac_key(&self) -> Option<&[u8; APP_MAC_KEY_LEN]> {
        self.app_mac.as_deref()
    }

    /// The session's mode and cipher.
    pub fn info(&self) -> SessionInfo {
        self.info
    }

    /// The session's mode.
    pub fn mode(&self) -> Mode {
        self.info.mode
    }

    /// Room to leave before a payload in the buffer given to [`Protector::seal`]
    /// (0 in place, the record header for `aead`).
    pub fn header_len(&self) -> usize {
        match self.inner {
            ProtectInner::Aead(_) => record::HEADER_LEN,
            _ => 0,
        }
    }

    /// Room to leave after a payload (0 in place, the AEAD tag for `aead`).
    pub fn trailer_len(&self) -> usize {
        match self.inner {
            ProtectInner::Aead(_) => crate::cipher::AEAD_TAG_LEN,
            _ => 0,
        }
    }

    /// Most payload bytes one [`Protector::seal`] takes (`None`: no limit, in place).
    pub fn max_payload(&self) -> Option<usize> {
        match self.inner {
            ProtectInner::Aead(_) => Some(record::MAX_PAYLOAD),
            _ => None,
        }
    }

    /// Whether bytes keep their length and position (no records).
    pub fn is_in_place(&self) -> bool {
        !matches!(self.inner, ProtectInner::Aead(_))
    }

    /// Protects the payload `buf[header_len()..header_len() + n]` and returns how many bytes
    /// of `buf` are now ready to send, from its start: in place, the `n` transformed bytes;
    /// for `aead`, the record (header, ciphertext, tag). Every payload byte written to the
    /// connection goes through here exactly once, in stream order.
    ///
    /// # Panics
    /// If `buf` is shorter than `header_len() + n + trailer_len()`, `n` exceeds
    /// `max_payload()`, `n` is 0 for `aead`, or after [`Protector::close`].
    pub fn seal(&mut self, buf: &mut [u8], n: usize) -> usize {
        match &mut self.inner {
            ProtectInner::Plain => n,
            ProtectInner::Kato(s) => {
                s.scramble_in_place(&mut buf[..n]);
                n
            }
            ProtectInner::Stream(k) => {
                k.apply(&mut buf[..n]);
                n
            }
            ProtectInner::Aead(r) => r.seal(buf, n),
        }
    }

    /// In place only: protects `src` into `dst` (of the same length) in one pass, as a
    /// copy followed by [`Protector::seal`] would, without the copy.
    ///
    /// # Panics
    /// If the session is not in place ([`Protector::is_in_place`]) or the lengths differ.
    pub fn seal_from(&mut self, src: &[u8], dst: &mut [u8]) {
        match &mut self.inner {
            ProtectInner::Plain => dst.copy_from_slice(src),
            ProtectInner::Kato(s) => s.scramble(src, dst),
            ProtectInner::Stream(k) => k.apply_b2b(src, dst),
            ProtectInner::Aead(_) => panic!("seal_from on a framed session"),
        }
    }

    /// `aead` only: seals the record whose payload is `buf[header_len()..header_len() + n]`
    /// followed by `rest`, encrypting `rest` straight into `buf` (one pass over it, no copy
    /// before the cipher), and returns the record's length, as [`Protector::seal`] would
    /// after `rest` was copied behind the `n` bytes.
    ///
    /// # Panics
    /// If the session is in place, or as [`Protector::seal`] for `n + rest.len()` bytes.
    pub fn seal_joined(&mut self, buf: &mut [u8], n: usize, rest: &[u8]) -> usize {
        match &mut self.inner {
            ProtectInner::Aead(r) => r.seal_joined(buf, n, rest),
            _ => panic!("seal_joined on an in-place session"),
        }
    }

    /// The bytes that end this direction cleanly, to send before the transport's shutdown:
    /// the closing record for `aead`, nothing otherwise. Call it once.
    pub fn close(&mut self) -> Vec<u8> {
        match &mut self.inner {
            ProtectInner::Aead(r) if !r.is_closed() => {
                let mut out = [0u8; record::CLOSE_LEN];
                let n = r.close(&mut out);
                out[..n].to_vec()
            }
            _ => Vec::new(),
        }
    }

    /// The flow-end record (`aead` only; `None` in the other modes, which have no records, or
    /// once the direction ended): the flow ends in this direction and the session goes on,
    /// for a peer that reuses sessions flow after flow (docs/PROTOCOL.md, "Sessions reused").
    pub fn end_flow(&mut self) -> Option<Vec<u8>> {
        match &mut self.inner {
            ProtectInner::Aead(r) if !r.is_closed() => {
                let mut out = [0u8; record::FLOW_END_LEN];
                let n = r.end_flow(&mut out);
                Some(out[..n].to_vec())
            }
            _ => None,
        }
    }

    /// The bytes that give this direction up and tell the peer why, to send before the
    /// transport's shutdown: `aead`'s abort record; nothing in the other modes, which have
    /// no room for a message (the caller resets the connection instead). Call it once, in
    /// place of [`Protector::close`].
    pub fn abort(&mut self, reason: crate::AbortReason) -> Vec<u8> {
        match &mut self.inner {
            ProtectInner::Aead(r) if !r.is_closed() => {
                let mut out = [0u8; record::ABORT_LEN];
                let n = r.abort(reason, &mut out);
                out[..n].to_vec()
            }
            _ => Vec::new(),
        }
    }

    /// Key epochs begun in this direction (1 until the first key update), for crypto modes.
    pub fn key_epochs(&self) -> Option<u64> {
        match &self.inner {
            ProtectInner::Stream(k) => Some(k.epoch() + 1),
            ProtectInner::Aead(r) => Some(r.cipher().epoch() + 1),
            _ => None,
        }
    }
}

impl Unprotector {
    /// The key of the peer's application MAC ([`crate::appmac`]): None in plain mode.
    pub fn app_mac_key(&self) -> Option<&[u8; APP_MAC_KEY_LEN]> {
        self.app_mac.as_deref()
    }

    /// The session's mode and cipher.
    pub fn info(&self) -> SessionInfo {
        self.info
    }

    /// The session's mode.
    pub fn mode(&self) -> Mode {
        self.info.mode
    }

    /// Whether [`Unprotector::open`] now transforms its whole input in place (no records,
    /// no confirmation pending): the reader may then read straight into the caller's buffer.
    pub fn is_in_place(&self) -> bool {
        self.confirm.is_none() && !matches!(self.inner, UnprotectInner::Aead(_))
    }

    /// The most input one unit can need: the buffer a reader must be able to hold.
    pub fn max_unit(&self) -> usize {
        match self.inner {
            UnprotectInner::Aead(_) => record::MAX_RECORD,
            _ => wire::CONFIRM_LEN,
        }
    }

    /// The size of a full record when the input is cut into records (`aead`: every record
    /// of a bulk stream has this size), `None` in place. A reader that reads whole multiples
    /// of it never has to move a record cut by the end of its buffer.
    pub fn record_len(&self) -> Option<usize> {
        match self.inner {
            UnprotectInner::Aead(_) => Some(record::MAX_RECORD),
            _ => None,
        }
    }

    /// Opens the next unit at the start of `buf`, in place (see [`Opened`]). In place, the
    /// unit is the whole input. The first error is final.
    pub fn open(&mut self, buf: &mut [u8]) -> Result<Opened, SessionError> {
        if self.failed {
            return Err(SessionError::Failed);
        }
        let r = self.open_inner(buf);
        if r.is_err() {
            self.failed = true;
        }
        r
    }

    fn open_inner(&mut self, buf: &mut [u8]) -> Result<Opened, SessionError> {
        if let Some(expect) = &self.confirm {
            if buf.len() < wire::CONFIRM_LEN {
                return Ok(Opened::NeedMore {
                    total: wire::CONFIRM_LEN,
                });
            }
            check_confirm(&buf[..wire::CONFIRM_LEN], expect)?;
            zeroize::Zeroize::zeroize(&mut self.confirm);
            self.confirm = None;
            return Ok(Opened::Data {
                consumed: wire::CONFIRM_LEN,
                plain: wire::CONFIRM_LEN..wire::CONFIRM_LEN,
            });
        }
        let n = buf.len();
        match &mut self.inner {
            UnprotectInner::Plain => {}
            UnprotectInner::Kato(d) => d.descramble_in_place(buf),
            UnprotectInner::Stream(k) => k.apply(buf),
            UnprotectInner::Aead(r) => return r.open(buf),
        }
        Ok(Opened::Data {
            consumed: n,
            plain: 0..n,
        })
    }

    /// In place only: unprotects all of `buf` (a shortcut for [`Unprotector::open`] when
    /// [`Unprotector::is_in_place`]).
    ///
    /// # Panics
    /// If the session is not in place now.
    pub fn open_in_place(&mut self, buf: &mut [u8]) {
        assert!(self.is_in_place(), "open_in_place on a framed session");
        match self.open(buf) {
            Ok(Opened::Data { consumed, .. }) if consumed == buf.len() => {}
            other => unreachable!("in-place open gave {other:?}"),
        }
    }

    /// The peer's stream ended (the transport read end of stream): is that a clean end?
    /// For `aead` only after the closing record; a server still waiting for the client's
    /// confirmation reports that it is missing.
    pub fn eof(&self) -> Result<(), SessionError> {
        if self.failed {
            return Err(SessionError::Failed);
        }
        if self.confirm.is_some() {
            return Err(SessionError::ConfirmMissing);
        }
        match &self.inner {
            UnprotectInner::Aead(r) => r.eof(),
            _ => Ok(()),
        }
    }

    /// Key epochs begun in this direction, for crypto modes.
    pub fn key_epochs(&self) -> Option<u64> {
        match &self.inner {
            UnprotectInner::Stream(k) => Some(k.epoch() + 1),
            UnprotectInner::Aead(r) => Some(r.cipher().epoch() + 1),
            _ => None,
        }
    }
}

impl Drop for Unprotector {
    fn drop(&mut self) {
        if let Some(t) = &mut self.confirm {
            zeroize::Zeroize::zeroize(t);
        }
    }
}

/// Checks the client's confirmation message: header `magic | version | 04 | 00 20` and the tag.
fn check_confirm(msg: &[u8], expect: &[u8; TAG_LEN]) -> Result<(), SessionError> {
    let header = wire::header(wire::TYPE_CONFIRM, TAG_LEN);
    if msg[..wire::HEADER_LEN] != header {
        return Err(SessionError::ClientConfirm(
            "its first bytes are not a nena confirmation message",
        ));
    }
    if !tags_equal(&msg[wire::HEADER_LEN..], expect) {
        return Err(SessionError::ClientConfirm(
            "the tag does not match (altered on the way, or not derived from our answer)",
        ));
    }
    Ok(())
}

impl fmt::Debug for Protector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Protector")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for Unprotector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Unprotector")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

/// A negotiated session: [`Session::split`] gives the outgoing and incoming halves.
pub struct Session {
    role: Role,
    tx: Protector,
    rx: Unprotector,
    /// The datagram plane's keys (the cryptographic modes only).
    dgram: Option<DatagramKeys>,
}

impl Session {
    pub(crate) fn new(role: Role, keys: Keys) -> Session {
        // The application MAC keys, (c2s, s2c), then ours and the peer's.
        let macs = match &keys {
            Keys::Plain => None,
            Keys::Kato { c2s, s2c } => Some(crate::keys::kato_app_mac_keys(c2s, s2c)),
            Keys::Crypto { c2s, s2c, .. } => {
                Some((crate::keys::app_mac_key(c2s), crate::keys::app_mac_key(s2c)))
            }
        };
        let dgram = match &keys {
            Keys::Crypto {
                suite, c2s, s2c, ..
            } => Some(match role {
                Role::Client => DatagramKeys::client(*suite, c2s, s2c),
                Role::Server => DatagramKeys::server(*suite, c2s, s2c),
            }),
            _ => None,
        };
        let (out_mac, in_mac) = match (macs, role) {
            (None, _) => (None, None),
            (Some((c, s)), Role::Client) => (Some(c), Some(s)),
            (Some((c, s)), Role::Server) => (Some(s), Some(c)),
        };
        let (info, tx, rx, confirm) = match &keys {
            Keys::Plain => (
                SessionInfo {
                    mode: Mode::Plain,
                    cipher: None,
                },
                ProtectInner::Plain,
                UnprotectInner::Plain,
                None,
            ),
            Keys::Kato { c2s, s2c } => {
                let (out_key, in_key) = match role {
                    Role::Client => (*c2s, *s2c),
                    Role::Server => (*s2c, *c2s),
                };
                (
                    SessionInfo {
                        mode: Mode::Kato,
                        cipher: None,
                    },
                    ProtectInner::Kato(Scrambler::new(out_key)),
                    UnprotectInner::Kato(Descrambler::new(in_key)),
                    None,
                )
            }
            Keys::Crypto {
                mode,
                suite,
                epoch_log2,
                c2s,
                s2c,
                expect_confirm,
            } => {
                let (out, inc) = match role {
                    Role::Client => (c2s.clone(), s2c.clone()),
                    Role::Server => (s2c.clone(), c2s.clone()),
                };
                let (tx, rx, cipher) = if *mode == Mode::Aead {
                    (
                        ProtectInner::Aead(Box::new(RecordSealer::new(RecordCipher::new(
                            *suite,
                            out,
                            *epoch_log2,
                        )))),
                        UnprotectInner::Aead(Box::new(RecordOpener::new(RecordCipher::new(
                            *suite,
                            inc,
                            *epoch_log2,
                        )))),
                        suite.aead_name(),
                    )
                } else {
                    (
                        ProtectInner::Stream(Keystream::new(*suite, out, *epoch_log2)),
                        UnprotectInner::Stream(Keystream::new(*suite, inc, *epoch_log2)),
                        suite.stream_name(),
                    )
                };
                (
                    SessionInfo {
                        mode: *mode,
                        cipher: Some(cipher),
                    },
                    tx,
                    rx,
                    *expect_confirm,
                )
            }
        };
        Session {
            role,
            dgram,
            tx: Protector {
                info,
                inner: tx,
                app_mac: out_mac,
            },
            rx: Unprotector {
                info,
                confirm,
                failed: false,
                inner: rx,
                app_mac: in_mac,
            },
        }
    }

    /// The negotiated mode.
    pub fn mode(&self) -> Mode {
        self.tx.info.mode
    }

    /// Reports the session as `mode` (kato-mpc: kato's protection, negotiated otherwise).
    pub(crate) fn set_mode(&mut self, mode: Mode) {
        self.tx.info.mode = mode;
        self.rx.info.mode = mode;
    }

    /// The negotiated mode and cipher.
    pub fn info(&self) -> SessionInfo {
        self.tx.info
    }

    /// Which end this session is.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The outgoing half.
    pub fn protector(&mut self) -> &mut Protector {
        &mut self.tx
    }

    /// The incoming half.
    pub fn unprotector(&mut self) -> &mut Unprotector {
        &mut self.rx
    }

    /// This end's keys of the session's datagram plane ([`crate::dgram`]), derived from the
    /// session's first traffic secrets with labels of their own: `None` in plain and kato,
    /// whose keys an attacker on the trusted path knows (their datagrams stay inside the
    /// session). In `stream` too the datagrams are sealed with the suite's AEAD. Take them
    /// before [`Session::split`].
    pub fn datagram_keys(&self) -> Option<DatagramKeys> {
        self.dgram.clone()
    }

    /// Splits into the outgoing and incoming halves (each `Send`), for full-duplex I/O.
    pub fn split(self) -> (Protector, Unprotector) {
        (self.tx, self.rx)
    }
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("role", &self.role)
            .field("info", &self.info())
            .finish_non_exhaustive()
    }
}
