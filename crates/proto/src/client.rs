//! The client side of the handshake: builds the hello (the only message that
//! carries secrets) and reads the server's answer, sans-IO.

use crate::error::{HandshakeError, RejectReason};
use crate::mode::{Mode, KATO_KEY_LEN};
use crate::session::{Keys, Role, Session};
use crate::wire::{self, Cursor, FrameReader};
use crate::Progress;
use std::fmt;

/// What the client offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientConfig {
    /// Modes the client accepts, most preferred first. Non-empty, no duplicates.
    pub offer: Vec<Mode>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            offer: Mode::ALL.to_vec(),
        }
    }
}

/// Length of the caller-provided entropy.
pub const ENTROPY_LEN: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    AwaitAnswer,
    Finished,
}

/// Client handshake: write [`ClientHandshake::first_flight`], then feed the
/// server's bytes to [`ClientHandshake::read`] until it returns `Done`.
pub struct ClientHandshake {
    offer: Vec<Mode>,
    hello: Vec<u8>,
    kato: [u8; 2 * KATO_KEY_LEN],
    reader: FrameReader,
    state: State,
}

impl ClientHandshake {
    /// Builds the hello. `entropy` must be fresh random bytes for every connection
    /// (e.g. from the OS RNG); the keys are taken from it directly:
    /// kato uses bytes 0..8 as the client-to-server key and 8..16 as the
    /// server-to-client key; bytes 16..32 are reserved for later modes.
    pub fn new(cfg: &ClientConfig, entropy: [u8; ENTROPY_LEN]) -> Result<Self, HandshakeError> {
        let mut entropy = zeroize::Zeroizing::new(entropy);
        if cfg.offer.is_empty() {
            return Err(HandshakeError::Config("the client offers no mode"));
        }
        if cfg.offer.len() > wire::MAX_OFFERS {
            return Err(HandshakeError::Config("the client offers too many modes"));
        }
        for (i, m) in cfg.offer.iter().enumerate() {
            if cfg.offer[..i].contains(m) {
                return Err(HandshakeError::Config("the client offers a mode twice"));
            }
        }
        let mut kato = [0u8; 2 * KATO_KEY_LEN];
        kato.copy_from_slice(&entropy[..2 * KATO_KEY_LEN]);
        if cfg.offer.contains(&Mode::Kato) && kato[..KATO_KEY_LEN] == kato[KATO_KEY_LEN..] {
            // Probability 2^-64 with real randomness; this catches zeroed or constant "entropy".
            return Err(HandshakeError::Config(
                "entropy gives the same key in both directions; use fresh random bytes",
            ));
        }
        zeroize::Zeroize::zeroize(&mut *entropy);

        let mut body = zeroize::Zeroizing::new(Vec::with_capacity(64));
        body.push(cfg.offer.len() as u8);
        for &m in &cfg.offer {
            body.push(m.wire_id());
            body.push(m.key_material_len() as u8);
            match m {
                Mode::Plain => {}
                Mode::Kato => body.extend_from_slice(&kato),
            }
        }
        let hello = wire::encode(wire::TYPE_HELLO, &body);
        debug_assert!(hello.len() <= wire::MAX_HELLO_LEN);
        Ok(ClientHandshake {
            offer: cfg.offer.clone(),
            hello,
            kato,
            reader: FrameReader::new(
                wire::MAX_ANSWER_LEN,
                &[wire::TYPE_ACCEPT, wire::TYPE_REJECT],
            ),
            state: State::AwaitAnswer,
        })
    }

    /// The hello to write before anything else, on the trusted path.
    /// It holds every secret of the session. It is wiped (empty) once
    /// [`ClientHandshake::read`] has returned `Done` or an error.
    pub fn first_flight(&self) -> &[u8] {
        &self.hello
    }

    /// The modes this client offered, in preference order.
    pub fn offer(&self) -> &[Mode] {
        &self.offer
    }

    /// Feeds bytes received from the server. On `Done`, bytes of `input` after
    /// `consumed` are already session data and must go through
    /// [`Session::unprotect`]. After an error the connection must be closed.
    pub fn read(&mut self, input: &[u8]) -> Result<Progress<Session>, HandshakeError> {
        if self.state == State::Finished {
            return Err(HandshakeError::AlreadyFinished);
        }
        let result = self.read_inner(input);
        if !matches!(result, Ok(Progress::NeedMore { .. })) {
            self.finish();
        }
        result
    }

    fn read_inner(&mut self, input: &[u8]) -> Result<Progress<Session>, HandshakeError> {
        let (consumed, complete) = self.reader.feed(input).map_err(|e| e.into_error())?;
        if !complete {
            return Ok(Progress::NeedMore { consumed });
        }
        let (header, body) = self.reader.frame();
        let mut c = Cursor::new(body);
        match header.msg_type {
            wire::TYPE_ACCEPT => {
                let id = c.u8("accept without a mode")?;
                let plen = c.u8("accept without a parameter length")? as usize;
                let _params = c.bytes(plen, "accept parameters overrun the message")?;
                c.finish("trailing bytes after the accept")?;
                let mode = Mode::from_wire_id(id)
                    .filter(|m| self.offer.contains(m))
                    .ok_or(HandshakeError::Malformed(
                        "the server chose a mode we did not offer",
                    ))?;
                if plen != mode.answer_param_len() {
                    return Err(HandshakeError::Malformed(
                        "accept parameters have the wrong length for the mode",
                    ));
                }
                let keys = match mode {
                    Mode::Plain => Keys::Plain,
                    Mode::Kato => {
                        let mut c2s = [0u8; KATO_KEY_LEN];
                        let mut s2c = [0u8; KATO_KEY_LEN];
                        c2s.copy_from_slice(&self.kato[..KATO_KEY_LEN]);
                        s2c.copy_from_slice(&self.kato[KATO_KEY_LEN..]);
                        Keys::Kato { c2s, s2c }
                    }
                };
                Ok(Progress::Done {
                    consumed,
                    value: Session::new(Role::Client, &keys),
                })
            }
            _ => {
                // TYPE_REJECT (the reader lets no other type through).
                let reason = RejectReason::from_code(c.u8("reject without a reason")?);
                match reason {
                    RejectReason::NoCommonMode => {
                        let n = c.u8("reject without a mode count")? as usize;
                        let ids = c.bytes(n, "reject mode list overruns the message")?;
                        c.finish("trailing bytes after the reject")?;
                        let accepted = ids
                            .iter()
                            .filter_map(|&id| Mode::from_wire_id(id))
                            .collect();
                        Err(HandshakeError::NoCommonMode {
                            offered: self.offer.clone(),
                            accepted,
                        })
                    }
                    RejectReason::Other(_) => Err(HandshakeError::PeerRejected(reason)),
                    _ => {
                        c.finish("trailing bytes after the reject")?;
                        Err(HandshakeError::PeerRejected(reason))
                    }
                }
            }
        }
    }

    /// The peer closed its side before its answer was complete: the error to report.
    pub fn eof(&mut self) -> HandshakeError {
        if self.state == State::Finished {
            return HandshakeError::AlreadyFinished;
        }
        let received = self.reader.received();
        self.finish();
        HandshakeError::ClosedEarly { received }
    }

    fn finish(&mut self) {
        self.state = State::Finished;
        self.reader.wipe();
        zeroize::Zeroize::zeroize(&mut self.hello);
        zeroize::Zeroize::zeroize(&mut self.kato);
    }
}

impl Drop for ClientHandshake {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.hello);
        zeroize::Zeroize::zeroize(&mut self.kato);
    }
}

impl fmt::Debug for ClientHandshake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientHandshake")
            .field("offer", &self.offer)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}
