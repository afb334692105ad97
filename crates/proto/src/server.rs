//! The server side of the handshake: reads the client's hello, picks a mode
//! and answers with no secret in the answer, sans-IO.

use crate::cipher::{Keystream, RecordCipher, Suite};
use crate::error::{HandshakeError, RejectReason, Rejected};
use crate::hybrid::{self, MLKEM_EK_LEN, MLKEM_RAND_LEN};
use crate::identity::{ServerKey, SIGNATURE_LEN};
use crate::keys::{self, Schedule, Secrets, RC_LEN, SHARE_LEN, TAG_LEN};
use crate::mode::{Mode, KATO_KEY_LEN};
use crate::resume::{Grant, ResumeRefusal, Resumption, MAX_TICKETS_PER_ANSWER, TICKETS_OFFER_ID};
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
    /// Resumed sessions: the store of the tickets this server grants and takes, at the time
    /// of this handshake. `None`: no tickets are granted and resume hellos are refused.
    pub resumption: Option<Resumption>,
}

impl ServerConfig {
    /// Accepts `modes`, most preferred first, with no key (see [`ServerConfig::with_key`])
    /// and no resumption.
    pub fn accepting(modes: &[Mode]) -> Self {
        ServerConfig {
            accept: modes.to_vec(),
            key: None,
            resumption: None,
        }
    }

    /// The same, granting and taking tickets in `resumption`'s store.
    pub fn with_resumption(mut self, resumption: Resumption) -> Self {
        self.resumption = Some(resumption);
        self
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
    resumption: Option<Resumption>,
    secret: Zeroizing<[u8; SERVER_ENTROPY_LEN]>,
    reader: FrameReader,
    state: State,
    resumed: bool,
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
            resumption: cfg.resumption.clone(),
            secret: Zeroizing::new(entropy),
            reader: FrameReader::new(wire::MAX_HELLO_LEN, &[wire::TYPE_HELLO, wire::TYPE_RESUME]),
            state: State::AwaitHello,
            resumed: false,
        }
    }

    /// Whether the session `read` returned resumes an earlier one (a ticket, no key agreement).
    pub fn resumed(&self) -> bool {
        self.resumed
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
        let (header, body) = self.reader.frame();
        if header.msg_type == wire::TYPE_RESUME {
            let resumed = self.read_resume(consumed, hello, body)?;
            self.resumed = true;
            return Ok(resumed);
        }
        let parsed = parse_offers(body).map_err(malformed)?;
        let (offers, want) = (&parsed.offers, parsed.want);
        if offers.iter().any(|o| o.mode.is_cryptographic()) {
            // The one key share of the hello, for every crypto offer.
            if parsed.rest.len() < wire::KEY_SHARE_LEN {
                return Err(malformed(HandshakeError::Malformed(
                    "the hello's key share is short",
                )));
            }
            if parsed.rest.len() > wire::KEY_SHARE_LEN {
                return Err(malformed(HandshakeError::Malformed(
                    "trailing bytes after the offers",
                )));
            }
        } else if !parsed.rest.is_empty() {
            return Err(malformed(HandshakeError::Malformed(
                "trailing bytes after the offers",
            )));
        }
        let (mode, offer) = self.choose(&parsed)?;
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
        let mut grant = None;
        if let Some(c) = &crypto {
            // Servers run both suites and follow the client's preference.
            body.push(c.suite.wire_id());
            // Tickets for resumed sessions, when asked: a new lineage.
            if let Some(want) = want {
                let g = Grant::full(self.resumption.as_ref(), want);
                g.params(&mut body);
                grant = Some(g);
            }
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
        if let Some(g) = grant {
            g.issue(&sched);
        }
        let keys = match (mode, crypto) {
            (Mode::Stream | Mode::Aead, Some(c)) => c.keys(mode, &sched, hello, &reply),
            (Mode::Kato, _) => kato_keys(offer.key),
            _ => Keys::Plain,
        };
        Ok(Progress::Done {
            consumed,
            value: (reply, Session::new(Role::Server, keys)),
        })
    }

    /// The first mode of the server's list that the client offered, and its offer; or the
    /// refusal that says none is.
    fn choose<'a>(&self, parsed: &'a Parsed<'_>) -> Result<(Mode, &'a Offer<'a>), Rejected> {
        let offers = &parsed.offers;
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
                    unknown: parsed.unknown.clone(),
                    accepted: self.accept.clone(),
                },
            });
        };
        let offer = offers
            .iter()
            .find(|o| o.mode == mode)
            .expect("chosen from the offers");
        Ok((mode, offer))
    }

    /// A resume hello: the ticket taken (gone whatever follows), its binder checked, the
    /// answer with `r_s` and the confirmation, tickets granted from the same lineage.
    fn read_resume(
        &self,
        consumed: usize,
        hello: &[u8],
        body: &[u8],
    ) -> Result<ServerProgress, Rejected> {
        let malformed = |error| Rejected {
            reply: Some(reject(RejectReason::Malformed, &[])),
            error,
        };
        let parsed = parse_offers(body).map_err(malformed)?;
        if parsed.offers.iter().any(|o| !o.mode.is_cryptographic()) {
            return Err(malformed(HandshakeError::Malformed(
                "a resume hello offers a mode without key agreement",
            )));
        }
        if parsed.rest.len() != wire::RESUME_TAIL_LEN {
            return Err(malformed(HandshakeError::Malformed(
                "a resume hello's ticket, r_c and binder are not 80 bytes",
            )));
        }
        let refuse = |why| Rejected {
            reply: Some(reject(RejectReason::ResumeRefused, &[])),
            error: HandshakeError::ResumeRefused(why),
        };
        let mut tail = Cursor::new(parsed.rest);
        let id: [u8; keys::TICKET_ID_LEN] = *tail.array("ticket id").map_err(malformed)?;
        let mut r_c = Zeroizing::new([0u8; RC_LEN]);
        r_c.copy_from_slice(tail.bytes(RC_LEN, "r_c").map_err(malformed)?);
        let binder = tail.bytes(TAG_LEN, "binder").map_err(malformed)?;
        let Some(res) = &self.resumption else {
            return Err(refuse(ResumeRefusal::NoStore));
        };
        let Some((psk, lineage)) = res.lock().take(&id, res.now) else {
            return Err(refuse(ResumeRefusal::UnknownTicket));
        };
        let binder_ok = keys::tags_equal(
            &keys::resume_binder(&psk, &hello[..hello.len() - TAG_LEN]),
            binder,
        );
        if !binder_ok {
            return Err(refuse(ResumeRefusal::BadBinder));
        }
        let (mode, offer) = self.choose(&parsed)?;
        let c = CryptoOffer::of(offer.key);
        let mut body = vec![mode.wire_id(), 0, c.suite.wire_id()];
        let grant = parsed.want.map(|want| {
            let g = Grant::resumed(res, lineage, want);
            g.params(&mut body);
            g
        });
        body[1] = (body.len() - 2) as u8;
        body.extend_from_slice(&self.secret[..wire::RS_LEN]);
        body.extend_from_slice(&[0u8; TAG_LEN]);
        let mut reply = wire::encode(wire::TYPE_RESUMED, &body);
        let tag_at = reply.len() - TAG_LEN;
        let sched = Schedule::resumed(&psk, &r_c, hello, &reply[..tag_at]);
        reply[tag_at..].copy_from_slice(&sched.server_tag());
        if let Some(g) = grant {
            g.issue(&sched);
        }
        let keys = c.keys(mode, &sched, hello, &reply);
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

    /// The keys of a `stream` or `aead` session, full or resumed, on this offer's terms: the
    /// schedule's traffic secrets, and the client's confirmation to expect over `hello` and
    /// `reply`.
    fn keys(&self, mode: Mode, sched: &Schedule, hello: &[u8], reply: &[u8]) -> Keys {
        let (c2s, s2c) = sched.traffic();
        Keys::Crypto {
            mode,
            suite: self.suite,
            epoch_log2: self.epoch_log2,
            c2s,
            s2c,
            expect_confirm: Some(sched.client_tag(hello, reply)),
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

/// A hello's (or resume hello's) offers as parsed: those of modes this build knows, the
/// wire ids of the others, the tickets asked for (`None`: no tickets block), and the bytes
/// after the offers.
struct Parsed<'a> {
    offers: Vec<Offer<'a>>,
    unknown: Vec<u8>,
    want: Option<u8>,
    rest: &'a [u8],
}

/// Parses and validates the offers at the start of a hello body. Offers of unknown modes
/// are skipped (a newer client may offer them), but must still be well-formed; the tickets
/// block ([`TICKETS_OFFER_ID`]) is read, not a mode.
fn parse_offers(body: &[u8]) -> Result<Parsed<'_>, HandshakeError> {
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
    let mut want = None;
    for _ in 0..n {
        let id = c.u8("offer list overruns the hello")?;
        let klen = c.u8("offer list overruns the hello")? as usize;
        let key = c.bytes(klen, "key material overruns the hello")?;
        if seen.contains(&id) {
            return Err(HandshakeError::Malformed("the hello offers a mode twice"));
        }
        seen.push(id);
        if id == TICKETS_OFFER_ID {
            if klen != 1 {
                return Err(HandshakeError::Malformed(
                    "the tickets block is not one byte long",
                ));
            }
            want = Some(key[0].min(MAX_TICKETS_PER_ANSWER));
            continue;
        }
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
    Ok(Parsed {
        offers,
        unknown,
        want,
        rest: c.rest(),
    })
}
