//! The server side of the handshake: reads the client's hello, picks a mode
//! and answers with no secret in the answer, sans-IO.

use crate::cipher::{Keystream, RecordCipher, Suite};
use crate::error::{HandshakeError, RejectReason, Rejected};
use crate::hybrid::{self, MLKEM_EK_LEN, MLKEM_RAND_LEN};
use crate::identity::{ServerKey, SIGNATURE_LEN};
use crate::keys::{self, Schedule, Secrets, RC_LEN, SHARE_LEN, TAG_LEN};
use crate::mode::{Mode, KATO_KEY_LEN};
use crate::session::{Keys, Role, Session};
use crate::wire::{self, Cursor, FrameError, FrameReader};
use crate::{Progress, ServerProgress};
use std::fmt;
use zeroize::{Zeroize, Zeroizing};

/// What the server accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// Modes the server accepts, most preferred first. The server picks the
    /// first of these that the client offered. An empty list accepts nothing.
    pub accept: Vec<Mode>,
    /// The server's long-term key, which signs every handshake with key agreement. Without
    /// one, a hello that offers key agreement is refused (only kato and plain are served).
    pub key: Option<ServerKey>,
}

impl ServerConfig {
    /// Accepts `modes`, most preferred first, with no key (see [`ServerConfig::with_key`]).
    pub fn accepting(modes: &[Mode]) -> Self {
        ServerConfig {
            accept: modes.to_vec(),
            key: None,
        }
    }

    /// The same, signing with `key`.
    pub fn with_key(mut self, key: ServerKey) -> Self {
        self.key = Some(key);
        self
    }
}

impl Default for ServerConfig {
    /// [`Mode::DEFAULT_ACCEPT`]: the crypto modes and kato; plain only when named.
    fn default() -> Self {
        ServerConfig::accepting(Mode::DEFAULT_ACCEPT)
    }
}

/// Length of the server's entropy: its X25519 secret (32), then its ML-KEM encapsulation
/// randomness (32).
pub const SERVER_ENTROPY_LEN: usize = SHARE_LEN + MLKEM_RAND_LEN;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    AwaitHello,
    Finished,
}

/// Server handshake: feed the client's bytes to [`ServerHandshake::read`]
/// until it returns `Done`, then write the reply it gives.
pub struct ServerHandshake {
    accept: Vec<Mode>,
    key: Option<ServerKey>,
    secret: Zeroizing<[u8; SERVER_ENTROPY_LEN]>,
    reader: FrameReader,
    state: State,
}

impl ServerHandshake {
    /// A server handshake that accepts the modes of `cfg`. `entropy` must be fresh random
    /// bytes for every connection: the server's X25519 secret if a crypto mode is chosen.
    pub fn new(cfg: &ServerConfig, entropy: [u8; SERVER_ENTROPY_LEN]) -> Self {
        let mut accept: Vec<Mode> = Vec::with_capacity(cfg.accept.len());
        for &m in &cfg.accept {
            if !accept.contains(&m) {
                accept.push(m);
            }
        }
        ServerHandshake {
            accept,
            key: cfg.key.clone(),
            secret: Zeroizing::new(entropy),
            reader: FrameReader::new(wire::MAX_HELLO_LEN, &[wire::TYPE_HELLO]),
            state: State::AwaitHello,
        }
    }

    /// Feeds bytes received from the client.
    ///
    /// On `Done { consumed, value: (reply, session) }`: write `reply` (it holds
    /// no secret), then protect everything written after it with `session`;
    /// bytes of `input` after `consumed` are session data for the session's
    /// [`crate::Unprotector`] (in a crypto mode they begin with the client's key
    /// confirmation, which it checks). On `Err(rejected)`: write `rejected.reply` if it
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
            self.secret.zeroize();
            // The encapsulation's and the key schedule's copies (crate::stack).
            crate::stack::wipe();
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
        let malformed = |error| Rejected {
            reply: Some(reject(RejectReason::Malformed, &[])),
            error,
        };
        let hello = self.reader.message();
        let (_, body) = self.reader.frame();
        let (offers, unknown) = parse_hello(body).map_err(malformed)?;
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
                    unknown,
                    accepted: self.accept.clone(),
                },
            });
        };
        let offer = offers
            .iter()
            .find(|o| o.mode == mode)
            .expect("chosen from the offers");
        // No key agreement offered: no key share after the offers.
        if !offers.iter().any(|o| o.mode.is_cryptographic()) {
            let keys = match mode {
                Mode::Kato => kato_keys(offer.key),
                _ => Keys::Plain,
            };
            let reply = wire::encode(wire::TYPE_ACCEPT, &[mode.wire_id(), 0]);
            return Ok(Progress::Done {
                consumed,
                value: (reply, Session::new(Role::Server, keys)),
            });
        }
        let Some(server_key) = &self.key else {
            return Err(Rejected {
                reply: None,
                error: HandshakeError::Config(
                    "the server has no key, so it cannot answer key agreement",
                ),
            });
        };
        let ks = KeyShareBlock::of(share_block(body));
        let mut x_secret = Zeroizing::new([0u8; SHARE_LEN]);
        x_secret.copy_from_slice(&self.secret[..SHARE_LEN]);
        let mut m = Zeroizing::new([0u8; MLKEM_RAND_LEN]);
        m.copy_from_slice(&self.secret[SHARE_LEN..]);
        let dh = keys::x25519_agree(&x_secret, &ks.share)
            .map_err(|_| malformed(HandshakeError::ZeroSharedSecret))?;
        let (ct, kem) =
            hybrid::encapsulate(ks.ek, &m).map_err(|_| malformed(HandshakeError::InvalidKemKey))?;
        let mut body = vec![mode.wire_id(), 0];
        let crypto = mode.is_cryptographic().then(|| CryptoOffer::of(offer.key));
        if let Some(c) = &crypto {
            // Servers run both suites and follow the client's preference.
            body.push(c.suite.wire_id());
        }
        body[1] = (body.len() - 2) as u8;
        body.extend_from_slice(&ct);
        body.extend_from_slice(&keys::x25519_share(&x_secret));
        body.extend_from_slice(&server_key.public());
        body.extend_from_slice(&[0u8; SIGNATURE_LEN + TAG_LEN]);
        let mut reply = wire::encode(wire::TYPE_ACCEPT, &body);
        let tag_at = reply.len() - TAG_LEN;
        let sig_at = tag_at - SIGNATURE_LEN;
        let signature = server_key.sign(&keys::sha256(&[hello, &reply[..sig_at]]));
        reply[sig_at..tag_at].copy_from_slice(&signature);
        let secrets = Secrets {
            kem: &kem,
            dh: &dh,
            r_c: &ks.r_c,
        };
        let sched = Schedule::new(&secrets, hello, &reply[..tag_at]);
        reply[tag_at..].copy_from_slice(&sched.server_tag());
        let keys = match (mode, crypto) {
            (Mode::Stream | Mode::Aead, Some(c)) => {
                let (c2s, s2c) = sched.traffic();
                Keys::Crypto {
                    mode,
                    suite: c.suite,
                    epoch_log2: c.epoch_log2,
                    c2s,
                    s2c,
                    expect_confirm: Some(sched.client_tag(hello, &reply)),
                }
            }
            (Mode::Kato, _) => kato_keys(offer.key),
            _ => Keys::Plain,
        };
        Ok(Progress::Done {
            consumed,
            value: (reply, Session::new(Role::Server, keys)),
        })
    }

    /// A reject message with `reason` and no detail, for refusals the transport decides
    /// itself ([`RejectReason::FallbackRefused`]): write it after reading the client's hello
    /// (so that closing does not reset the connection under it), then close.
    pub fn refusal(reason: RejectReason) -> Vec<u8> {
        reject(reason, &[])
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

fn kato_keys(key: &[u8]) -> Keys {
    let mut c2s = [0u8; KATO_KEY_LEN];
    let mut s2c = [0u8; KATO_KEY_LEN];
    c2s.copy_from_slice(&key[..KATO_KEY_LEN]);
    s2c.copy_from_slice(&key[KATO_KEY_LEN..]);
    Keys::Kato { c2s, s2c }
}

/// The parameters of a `stream` or `aead` offer (already validated by [`parse_hello`]).
struct CryptoOffer {
    suite: Suite,
    epoch_log2: u8,
}

impl CryptoOffer {
    fn of(key: &[u8]) -> CryptoOffer {
        CryptoOffer {
            suite: Suite::from_wire_id(key[0]).expect("validated"),
            epoch_log2: key[1],
        }
    }
}

/// The hello's key share (after its offers, when it offers key agreement).
struct KeyShareBlock<'a> {
    ek: &'a [u8],
    share: [u8; SHARE_LEN],
    r_c: Zeroizing<[u8; RC_LEN]>,
}

impl<'a> KeyShareBlock<'a> {
    fn of(block: &'a [u8]) -> KeyShareBlock<'a> {
        let mut share = [0u8; SHARE_LEN];
        share.copy_from_slice(&block[MLKEM_EK_LEN..MLKEM_EK_LEN + SHARE_LEN]);
        let mut r_c = Zeroizing::new([0u8; RC_LEN]);
        r_c.copy_from_slice(&block[MLKEM_EK_LEN + SHARE_LEN..]);
        KeyShareBlock {
            ek: &block[..MLKEM_EK_LEN],
            share,
            r_c,
        }
    }
}

/// The key share block of a hello body that [`parse_hello`] accepted with a crypto offer:
/// its last [`wire::KEY_SHARE_LEN`] bytes.
fn share_block(body: &[u8]) -> &[u8] {
    &body[body.len() - wire::KEY_SHARE_LEN..]
}

/// Parses and validates a hello body: the offers of modes this build knows, and the wire ids
/// of the others. Offers of unknown modes are skipped (a newer client may offer them), but
/// must still be well-formed.
fn parse_hello(body: &[u8]) -> Result<(Vec<Offer<'_>>, Vec<u8>), HandshakeError> {
    let mut c = Cursor::new(body);
    let n = c.u8("empty hello")? as usize;
    if n == 0 {
        return Err(HandshakeError::Malformed("the hello offers no mode"));
    }
    if n > wire::MAX_OFFERS {
        return Err(HandshakeError::Malformed("the hello offers too many modes"));
    }
    let mut seen = Vec::with_capacity(n);
    let mut offers: Vec<Offer<'_>> = Vec::with_capacity(n);
    let mut unknown = Vec::new();
    for _ in 0..n {
        let id = c.u8("offer list overruns the hello")?;
        let klen = c.u8("offer list overruns the hello")? as usize;
        let key = c.bytes(klen, "key material overruns the hello")?;
        if seen.contains(&id) {
            return Err(HandshakeError::Malformed("the hello offers a mode twice"));
        }
        seen.push(id);
        let Some(mode) = Mode::from_wire_id(id) else {
            unknown.push(id);
            continue;
        };
        if klen != mode.key_material_len() {
            return Err(HandshakeError::Malformed(
                "key material has the wrong length for its mode",
            ));
        }
        match mode {
            Mode::Kato if key[..KATO_KEY_LEN] == key[KATO_KEY_LEN..] => {
                return Err(HandshakeError::Malformed(
                    "kato keys are the same in both directions",
                ));
            }
            Mode::Stream | Mode::Aead => {
                if Suite::from_wire_id(key[0]).is_none() {
                    return Err(HandshakeError::Malformed(
                        "a crypto offer names an unknown cipher suite",
                    ));
                }
                // The floor keeps a client from making the server update keys every record
                // (aead) or every 256 bytes (stream).
                let (floor, max) = match mode {
                    Mode::Aead => (
                        RecordCipher::MIN_OFFER_EPOCH_LOG2,
                        RecordCipher::MAX_EPOCH_LOG2,
                    ),
                    _ => (Keystream::MIN_OFFER_EPOCH_LOG2, Keystream::MAX_EPOCH_LOG2),
                };
                if key[1] < floor {
                    return Err(HandshakeError::Malformed(
                        "a crypto offer's key update interval is below the server's floor (aead: 2^1 records, stream: 2^16 bytes)",
                    ));
                }
                if key[1] > max {
                    return Err(HandshakeError::Malformed(
                        "a crypto offer's key update interval is out of range",
                    ));
                }
            }
            _ => {}
        }
        offers.push(Offer { mode, key });
    }
    if offers.iter().any(|o| o.mode.is_cryptographic()) {
        // The one key share of the hello, for every crypto offer.
        c.bytes(wire::KEY_SHARE_LEN, "the hello's key share is short")?;
    }
    c.finish("trailing bytes after the offers")?;
    Ok((offers, unknown))
}
