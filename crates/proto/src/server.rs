//! The server side of the handshake: reads the client's hello, picks a mode
//! and answers with no secret in the answer, sans-IO.

use crate::error::{HandshakeError, RejectReason, Rejected};
use crate::mode::{Mode, KATO_KEY_LEN};
use crate::session::{Keys, Role, Session};
use crate::wire::{self, Cursor, FrameError, FrameReader};
use crate::{Progress, ServerProgress};
use std::fmt;

/// What the server accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// Modes the server accepts, most preferred first. The server picks the
    /// first of these that the client offered. An empty list accepts nothing.
    pub accept: Vec<Mode>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            accept: Mode::ALL.to_vec(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    AwaitHello,
    Finished,
}

/// Server handshake: feed the client's bytes to [`ServerHandshake::read`]
/// until it returns `Done`, then write the reply it gives.
pub struct ServerHandshake {
    accept: Vec<Mode>,
    reader: FrameReader,
    state: State,
}

impl ServerHandshake {
    /// A server handshake that accepts the modes of `cfg`.
    pub fn new(cfg: &ServerConfig) -> Self {
        let mut accept: Vec<Mode> = Vec::with_capacity(cfg.accept.len());
        for &m in &cfg.accept {
            if !accept.contains(&m) {
                accept.push(m);
            }
        }
        ServerHandshake {
            accept,
            reader: FrameReader::new(wire::MAX_HELLO_LEN, &[wire::TYPE_HELLO]),
            state: State::AwaitHello,
        }
    }

    /// Feeds bytes received from the client.
    ///
    /// On `Done { consumed, value: (reply, session) }`: write `reply` (it holds
    /// no secret), then protect everything written after it with `session`;
    /// bytes of `input` after `consumed` are session data for
    /// [`Session::unprotect`]. On `Err(rejected)`: write `rejected.reply` if it
    /// is `Some`, then close.
    pub fn read(&mut self, input: &[u8]) -> Result<ServerProgress, Rejected> {
        if self.state == State::Finished {
            return Err(Rejected {
                reply: None,
                error: HandshakeError::AlreadyFinished,
            });
        }
        let result = self.read_inner(input);
        if !matches!(result, Ok(Progress::NeedMore { .. })) {
            self.state = State::Finished;
            self.reader.wipe();
        }
        result
    }

    fn read_inner(&mut self, input: &[u8]) -> Result<ServerProgress, Rejected> {
        let (consumed, complete) = self.reader.feed(input).map_err(|e| {
            let reply = match &e {
                FrameError::NotNena(_) => None,
                FrameError::Version(_) => Some(reject(RejectReason::UnsupportedVersion, &[])),
                FrameError::Type(_) => Some(reject(RejectReason::Malformed, &[])),
                FrameError::TooLong { .. } => Some(reject(RejectReason::TooLong, &[])),
            };
            Rejected {
                reply,
                error: e.into_error(),
            }
        })?;
        if !complete {
            return Ok(Progress::NeedMore { consumed });
        }
        let (_, body) = self.reader.frame();
        let offers = parse_hello(body).map_err(|error| Rejected {
            reply: Some(reject(RejectReason::Malformed, &[])),
            error,
        })?;
        let chosen = self
            .accept
            .iter()
            .copied()
            .find(|m| offers.iter().any(|o| o.mode == *m));
        let Some(mode) = chosen else {
            let ids: Vec<u8> = self.accept.iter().map(|m| m.wire_id()).collect();
            let mut detail = vec![ids.len() as u8];
            detail.extend_from_slice(&ids);
            return Err(Rejected {
                reply: Some(reject(RejectReason::NoCommonMode, &detail)),
                error: HandshakeError::NoCommonMode {
                    offered: offers.iter().map(|o| o.mode).collect(),
                    accepted: self.accept.clone(),
                },
            });
        };
        let offer = offers
            .iter()
            .find(|o| o.mode == mode)
            .expect("chosen from the offers");
        let keys = match mode {
            Mode::Plain => Keys::Plain,
            Mode::Kato => {
                let mut c2s = [0u8; KATO_KEY_LEN];
                let mut s2c = [0u8; KATO_KEY_LEN];
                c2s.copy_from_slice(&offer.key[..KATO_KEY_LEN]);
                s2c.copy_from_slice(&offer.key[KATO_KEY_LEN..]);
                Keys::Kato { c2s, s2c }
            }
        };
        let session = Session::new(Role::Server, &keys);
        let reply = wire::encode(
            wire::TYPE_ACCEPT,
            &[mode.wire_id(), mode.answer_param_len() as u8],
        );
        Ok(Progress::Done {
            consumed,
            value: (reply, session),
        })
    }

    /// The client closed its side before its hello was complete: the error to report.
    pub fn eof(&mut self) -> HandshakeError {
        if self.state == State::Finished {
            return HandshakeError::AlreadyFinished;
        }
        let received = self.reader.received();
        self.state = State::Finished;
        self.reader.wipe();
        HandshakeError::ClosedEarly { received }
    }
}

impl fmt::Debug for ServerHandshake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerHandshake")
            .field("accept", &self.accept)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

/// A reject message with `reason` and its detail bytes.
fn reject(reason: RejectReason, detail: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(1 + detail.len());
    body.push(reason.code());
    body.extend_from_slice(detail);
    wire::encode(wire::TYPE_REJECT, &body)
}

/// One offer of the hello that this build knows.
struct Offer<'a> {
    mode: Mode,
    key: &'a [u8],
}

/// Parses and validates a hello body. Offers of modes unknown to this build
/// are skipped (a newer client may offer them), but must still be well-formed.
fn parse_hello(body: &[u8]) -> Result<Vec<Offer<'_>>, HandshakeError> {
    let mut c = Cursor::new(body);
    let n = c.u8("empty hello")? as usize;
    if n == 0 {
        return Err(HandshakeError::Malformed("the hello offers no mode"));
    }
    if n > wire::MAX_OFFERS {
        return Err(HandshakeError::Malformed("the hello offers too many modes"));
    }
    let mut seen = Vec::with_capacity(n);
    let mut offers = Vec::with_capacity(n);
    for _ in 0..n {
        let id = c.u8("offer list overruns the hello")?;
        let klen = c.u8("offer list overruns the hello")? as usize;
        let key = c.bytes(klen, "key material overruns the hello")?;
        if seen.contains(&id) {
            return Err(HandshakeError::Malformed("the hello offers a mode twice"));
        }
        seen.push(id);
        let Some(mode) = Mode::from_wire_id(id) else {
            continue;
        };
        if klen != mode.key_material_len() {
            return Err(HandshakeError::Malformed(
                "key material has the wrong length for its mode",
            ));
        }
        if mode == Mode::Kato && key[..KATO_KEY_LEN] == key[KATO_KEY_LEN..] {
            return Err(HandshakeError::Malformed(
                "kato keys are the same in both directions",
            ));
        }
        offers.push(Offer { mode, key });
    }
    c.finish("trailing bytes after the offers")?;
    Ok(offers)
}
