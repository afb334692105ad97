//! The client side of the handshake: builds the hello (the only message that
//! carries secrets) and reads the server's answer, sans-IO.

use crate::cipher::{Keystream, RecordCipher, Suite};
use crate::error::{HandshakeError, RejectReason};
use crate::hybrid::{self, Decapsulator, MLKEM_CT_LEN, MLKEM_EK_LEN, MLKEM_SEED_LEN};
use crate::identity::{self, PublicKey, SERVER_KEY_LEN, SIGNATURE_LEN};
use crate::keys::{self, Schedule, Secrets, RC_LEN, SHARE_LEN, TAG_LEN};
use crate::mode::{Mode, KATO_KEY_LEN};
use crate::resume::{self, Ticket, MAX_TICKETS_PER_ANSWER, TICKETS_OFFER_ID};
use crate::session::{Keys, Role, Session};
use crate::wire::{self, Cursor, FrameReader};
use crate::Progress;
use std::fmt;
use zeroize::{Zeroize, Zeroizing};

/// What the client offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientConfig {
    /// Modes the client accepts, most preferred first. Non-empty, no duplicates.
    pub offer: Vec<Mode>,
    /// The cipher suite the client prefers for `stream` and `aead` (the server follows it).
    pub suite: Suite,
    /// Key update interval of `aead`: a new key every `2^aead_epoch_log2` records
    /// (from [`RecordCipher::MIN_OFFER_EPOCH_LOG2`] to [`RecordCipher::MAX_EPOCH_LOG2`]; smaller than the maximum only to test key updates).
    pub aead_epoch_log2: u8,
    /// Key update interval of `stream`: a new key every `2^stream_epoch_log2` bytes
    /// (between [`Keystream::MIN_OFFER_EPOCH_LOG2`] and [`Keystream::MAX_EPOCH_LOG2`]).
    pub stream_epoch_log2: u8,
    /// The server key to expect (pinned on first contact, or given by the user): an accept
    /// that proves another is refused ([`HandshakeError::ServerKeyMismatch`]). `None`:
    /// any key whose signature verifies (trust on first use; the caller pins
    /// [`ClientHandshake::server_key`]). Needs a mode with key agreement in the offer.
    pub server_key: Option<PublicKey>,
    /// Tickets to ask for (0 to [`MAX_TICKETS_PER_ANSWER`]), to resume later sessions with
    /// ([`ClientHandshake::take_tickets`]). Needs a mode with key agreement in the offer.
    pub want_tickets: u8,
    /// Resume with this ticket (one use): a resume hello of about 100 bytes offering the
    /// offer's `stream` and `aead` alone, instead of a full handshake. A server that refuses
    /// it answers [`RejectReason::ResumeRefused`]: connect again without it.
    pub resume: Option<Ticket>,
}

impl ClientConfig {
    /// The key update interval this client asks for in `mode` (`aead` or `stream`).
    fn epoch_log2(&self, mode: Mode) -> u8 {
        match mode {
            Mode::Aead => self.aead_epoch_log2,
            _ => self.stream_epoch_log2,
        }
    }

    /// Writes the offer count, the offer blocks of `modes` (kato's carry `kato`) and the
    /// tickets block when tickets are asked for: the start of a hello and of a resume hello.
    fn write_offers(&self, body: &mut Vec<u8>, modes: &[Mode], kato: &[u8]) {
        body.push((modes.len() + usize::from(self.want_tickets > 0)) as u8);
        for &m in modes {
            body.push(m.wire_id());
            body.push(m.key_material_len() as u8);
            match m {
                Mode::Plain | Mode::KatoMpc => {}
                Mode::Kato => body.extend_from_slice(kato),
                Mode::Stream | Mode::Aead => {
                    body.push(self.suite.wire_id());
                    body.push(self.epoch_log2(m));
                }
            }
        }
        if self.want_tickets > 0 {
            body.extend_from_slice(&[TICKETS_OFFER_ID, 1, self.want_tickets]);
        }
    }

    /// Offers `modes` (most preferred first) with the default suite and key update intervals.
    pub fn offering(modes: &[Mode]) -> Self {
        ClientConfig {
            offer: modes.to_vec(),
            ..ClientConfig::default()
        }
    }
}

impl Default for ClientConfig {
    /// The default offer ([`Mode::DEFAULT_OFFER`]), the suite this CPU runs fastest
    /// ([`Suite::preferred`]), the largest key update intervals.
    fn default() -> Self {
        ClientConfig {
            offer: Mode::DEFAULT_OFFER.to_vec(),
            suite: Suite::preferred(),
            aead_epoch_log2: RecordCipher::MAX_EPOCH_LOG2,
            stream_epoch_log2: Keystream::MAX_EPOCH_LOG2,
            server_key: None,
            want_tickets: 0,
            resume: None,
        }
    }
}

/// Length of the caller-provided entropy: kato keys (16), the X25519 secret (32), r_c (32),
/// the ML-KEM-768 seed `d || z` (64).
pub const ENTROPY_LEN: usize = 2 * KATO_KEY_LEN + SHARE_LEN + RC_LEN + MLKEM_SEED_LEN;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    AwaitAnswer,
    Finished,
}

/// The client's half of the key agreement (when it offers a crypto mode).
struct KeyShare {
    secret: Zeroizing<[u8; SHARE_LEN]>,
    share: [u8; SHARE_LEN],
    r_c: Zeroizing<[u8; RC_LEN]>,
    kem: Decapsulator,
}

/// What a resume hello holds that the answer's reading needs.
struct ResumeState {
    psk: Zeroizing<[u8; keys::SECRET_LEN]>,
    r_c: Zeroizing<[u8; RC_LEN]>,
    server_key: PublicKey,
}

/// Client handshake: write [`ClientHandshake::first_flight`], then feed the server's bytes
/// to [`ClientHandshake::read`] until it returns `Done { value: (confirm, session) }`, then
/// write `confirm` (empty unless the mode is cryptographic) before any session data.
pub struct ClientHandshake {
    cfg: ClientConfig,
    hello: Vec<u8>,
    kato: [u8; 2 * KATO_KEY_LEN],
    key_share: Option<KeyShare>,
    reader: FrameReader,
    state: State,
    /// The server key whose signature verified (after `Done`, with key agreement).
    server_key: Option<PublicKey>,
    /// Resuming: the ticket's secret, `r_c`, the ticket's server key.
    resume: Option<Box<ResumeState>>,
    /// The tickets the answer granted (after `Done`).
    tickets: Vec<Ticket>,
}

impl ClientHandshake {
    /// Builds the hello. `entropy` must be fresh random bytes for every connection (e.g.
    /// from the OS RNG): bytes 0..8 and 8..16 are the kato keys (client-to-server,
    /// server-to-client), 16..48 the X25519 secret, 48..80 the random `r_c`, 80..144 the
    /// ML-KEM-768 seed.
    #[inline(never)]
    pub fn new(cfg: &ClientConfig, entropy: [u8; ENTROPY_LEN]) -> Result<Self, HandshakeError> {
        let built = Self::new_below(cfg, entropy);
        // The frames below this one: the key pair's seed and keys, copied by value in the
        // calls that built the hello, and the handshake itself as it was built, before it
        // was moved out (its kato keys and `r_c` inline): crate::stack.
        crate::stack::wipe();
        built
    }

    /// [`ClientHandshake::new`]'s work, in a frame of its own below it (so that its wipe
    /// reaches this frame's copies too).
    #[inline(never)]
    fn new_below(cfg: &ClientConfig, entropy: [u8; ENTROPY_LEN]) -> Result<Self, HandshakeError> {
        let mut entropy = entropy;
        let built = Self::build(cfg, &entropy);
        entropy.zeroize();
        built
    }

    fn build(cfg: &ClientConfig, entropy: &[u8; ENTROPY_LEN]) -> Result<Self, HandshakeError> {
        if cfg.offer.is_empty() {
            return Err(HandshakeError::Config("the client offers no mode"));
        }
        if cfg.offer.len() > wire::MAX_OFFERS {
            return Err(HandshakeError::Config("the client offers too many modes"));
        }
        if cfg.offer.contains(&Mode::KatoMpc) {
            return Err(HandshakeError::Config(
                "kato-mpc is negotiated on the SYN, not in a hello; it cannot be offered",
            ));
        }
        for (i, m) in cfg.offer.iter().enumerate() {
            if cfg.offer[..i].contains(m) {
                return Err(HandshakeError::Config("the client offers a mode twice"));
            }
        }
        if !(RecordCipher::MIN_OFFER_EPOCH_LOG2..=RecordCipher::MAX_EPOCH_LOG2)
            .contains(&cfg.aead_epoch_log2)
        {
            return Err(HandshakeError::Config(
                "the aead key update interval must be 2^1 to 2^23 records (servers refuse a shorter one)",
            ));
        }
        if !(Keystream::MIN_OFFER_EPOCH_LOG2..=Keystream::MAX_EPOCH_LOG2)
            .contains(&cfg.stream_epoch_log2)
        {
            return Err(HandshakeError::Config(
                "the stream key update interval must be 2^16 to 2^36 bytes (servers refuse a shorter one)",
            ));
        }
        if entropy.iter().all(|&b| b == entropy[0]) {
            return Err(HandshakeError::Config(
                "the entropy is constant; use fresh random bytes",
            ));
        }
        let mut kato = [0u8; 2 * KATO_KEY_LEN];
        kato.copy_from_slice(&entropy[..2 * KATO_KEY_LEN]);
        if cfg.offer.contains(&Mode::Kato) && kato[..KATO_KEY_LEN] == kato[KATO_KEY_LEN..] {
            // Probability 2^-64 with real randomness; this catches broken "entropy".
            return Err(HandshakeError::Config(
                "entropy gives the same key in both directions; use fresh random bytes",
            ));
        }
        let crypto = cfg.offer.iter().any(|m| m.is_cryptographic());
        if cfg.server_key.is_some() && !crypto {
            return Err(HandshakeError::Config(
                "a server key can only be checked with key agreement (offer aead or stream)",
            ));
        }
        if cfg.want_tickets > MAX_TICKETS_PER_ANSWER {
            return Err(HandshakeError::Config("a hello asks for at most 8 tickets"));
        }
        if (cfg.want_tickets > 0 || cfg.resume.is_some()) && !crypto {
            return Err(HandshakeError::Config(
                "tickets resume only sessions with key agreement (offer aead or stream)",
            ));
        }
        if cfg.offer.len() + usize::from(cfg.want_tickets > 0) > wire::MAX_OFFERS {
            return Err(HandshakeError::Config("the client offers too many modes"));
        }
        if let Some(ticket) = &cfg.resume {
            if let Some(k) = cfg
                .server_key
                .filter(|k| !keys::tags_equal(k, &ticket.server_key))
            {
                return Err(HandshakeError::ServerKeyMismatch {
                    expected: k,
                    got: ticket.server_key,
                });
            }
            return Ok(Self::build_resume(cfg, ticket, entropy));
        }
        let mut ek = [0u8; MLKEM_EK_LEN];
        let key_share = crypto.then(|| {
            let mut secret = Zeroizing::new([0u8; SHARE_LEN]);
            secret.copy_from_slice(&entropy[16..48]);
            let mut r_c = Zeroizing::new([0u8; RC_LEN]);
            r_c.copy_from_slice(&entropy[48..80]);
            let mut seed = Zeroizing::new([0u8; MLKEM_SEED_LEN]);
            seed.copy_from_slice(&entropy[80..80 + MLKEM_SEED_LEN]);
            let (kem, key) = hybrid::keypair(&seed);
            ek = key;
            KeyShare {
                share: keys::x25519_share(&secret),
                secret,
                r_c,
                kem,
            }
        });

        // Reserved whole: a growing Vec would leave copies of the keys where it was.
        let mut body = Zeroizing::new(Vec::with_capacity(wire::MAX_HELLO_LEN));
        cfg.write_offers(&mut body, &cfg.offer, &kato);
        if let Some(ks) = &key_share {
            // The one key share of the hello, after the offers (X25519MLKEM768's order).
            body.extend_from_slice(&ek);
            body.extend_from_slice(&ks.share);
            body.extend_from_slice(&ks.r_c[..]);
        }
        let hello = wire::encode(wire::TYPE_HELLO, &body);
        debug_assert!(hello.len() <= wire::MAX_HELLO_LEN);
        Ok(ClientHandshake {
            cfg: cfg.clone(),
            hello,
            kato,
            key_share,
            reader: FrameReader::new(
                wire::MAX_ANSWER_LEN,
                &[wire::TYPE_ACCEPT, wire::TYPE_REJECT],
            ),
            state: State::AwaitAnswer,
            server_key: None,
            resume: None,
            tickets: Vec::new(),
        })
    }

    /// A resume hello: the offer's crypto modes, the tickets block, the ticket's id, `r_c`
    /// (entropy bytes 48..80) and the binder. No key share: nothing of ML-KEM or X25519 runs.
    fn build_resume(cfg: &ClientConfig, ticket: &Ticket, entropy: &[u8; ENTROPY_LEN]) -> Self {
        let crypto: Vec<Mode> = cfg
            .offer
            .iter()
            .copied()
            .filter(|m| m.is_cryptographic())
            .collect();
        let mut r_c = Zeroizing::new([0u8; RC_LEN]);
        r_c.copy_from_slice(&entropy[48..80]);
        let mut body = Zeroizing::new(Vec::with_capacity(wire::MAX_HELLO_LEN));
        cfg.write_offers(&mut body, &crypto, &[]);
        body.extend_from_slice(&ticket.id);
        body.extend_from_slice(&r_c[..]);
        body.extend_from_slice(&[0u8; TAG_LEN]);
        let mut hello = wire::encode(wire::TYPE_RESUME, &body);
        let at = hello.len() - TAG_LEN;
        let binder = keys::resume_binder(&ticket.secret, &hello[..at]);
        hello[at..].copy_from_slice(&binder);
        ClientHandshake {
            cfg: cfg.clone(),
            hello,
            kato: [0u8; 2 * KATO_KEY_LEN],
            key_share: None,
            reader: FrameReader::new(
                wire::MAX_ANSWER_LEN,
                &[wire::TYPE_RESUMED, wire::TYPE_REJECT],
            ),
            state: State::AwaitAnswer,
            server_key: None,
            resume: Some(Box::new(ResumeState {
                psk: ticket.secret.clone(),
                r_c,
                server_key: ticket.server_key,
            })),
            tickets: Vec::new(),
        }
    }

    /// Whether this handshake resumes with a ticket (a resume hello).
    pub fn resuming(&self) -> bool {
        self.cfg.resume.is_some()
    }

    /// The tickets the server granted (after `Done`), each for one later session with it;
    /// empty when none was asked for or the server keeps none.
    pub fn take_tickets(&mut self) -> Vec<Ticket> {
        std::mem::take(&mut self.tickets)
    }

    /// The server's public key, once `read` returned `Done` after key agreement: its
    /// signature over this handshake verified (and it is the expected key, if one was set).
    /// What a trust-on-first-use client pins.
    pub fn server_key(&self) -> Option<PublicKey> {
        self.server_key
    }

    /// The hello to write before anything else, on the trusted path.
    /// It holds every secret the hello carries (kato keys, r_c). It is wiped (empty) once
    /// [`ClientHandshake::read`] has returned `Done` or an error.
    pub fn first_flight(&self) -> &[u8] {
        &self.hello
    }

    /// The modes this client offered, in preference order.
    pub fn offer(&self) -> &[Mode] {
        &self.cfg.offer
    }

    /// Feeds bytes received from the server. On `Done { consumed, value: (confirm, session) }`
    /// write `confirm` (it holds no secret; empty unless the mode is cryptographic) before
    /// any session data; bytes of `input` after `consumed` are session data for the
    /// session's [`crate::Unprotector`]. After an error the connection must be closed.
    pub fn read(&mut self, input: &[u8]) -> Result<Progress<(Vec<u8>, Session)>, HandshakeError> {
        if self.state == State::Finished {
            return Err(HandshakeError::AlreadyFinished);
        }
        let result = self.read_inner(input);
        if !matches!(result, Ok(Progress::NeedMore { .. })) {
            self.finish();
            // The decapsulation's and the key schedule's copies (crate::stack).
            crate::stack::wipe();
        }
        result
    }

    fn read_inner(&mut self, input: &[u8]) -> Result<Progress<(Vec<u8>, Session)>, HandshakeError> {
        let (consumed, complete) = self.reader.feed(input).map_err(|e| e.into_error())?;
        if !complete {
            return Ok(Progress::NeedMore { consumed });
        }
        let (header, body) = self.reader.frame();
        let mut c = Cursor::new(body);
        if header.msg_type == wire::TYPE_REJECT {
            return Err(self.rejected(&mut c));
        }
        if header.msg_type == wire::TYPE_RESUMED {
            return self.read_resumed(consumed);
        }
        let id = c.u8("accept without a mode")?;
        let plen = c.u8("accept without a parameter length")? as usize;
        let params = c.bytes(plen, "accept parameters overrun the message")?;
        let mode = Mode::from_wire_id(id)
            .filter(|m| self.cfg.offer.contains(m))
            .ok_or(HandshakeError::Malformed(
                "the server chose a mode we did not offer",
            ))?;
        let Some(ks) = &self.key_share else {
            // No key agreement offered: the answer without crypto modes.
            c.finish("trailing bytes after the accept")?;
            if plen != 0 {
                return Err(HandshakeError::Malformed(
                    "accept parameters have the wrong length for the mode",
                ));
            }
            let keys = match mode {
                Mode::Kato => self.kato_keys(),
                _ => Keys::Plain,
            };
            return Ok(Progress::Done {
                consumed,
                value: (Vec::new(), Session::new(Role::Client, keys)),
            });
        };
        if plen == 0 && c.finish("").is_ok() {
            return Err(HandshakeError::Unconfirmed { mode });
        }
        let suite_len = usize::from(mode.is_cryptographic());
        let asked = mode.is_cryptographic() && self.cfg.want_tickets > 0;
        if plen != suite_len && !(asked && plen == resume::TICKET_PARAMS_LEN) {
            return Err(HandshakeError::Malformed(
                "accept parameters have the wrong length for the mode",
            ));
        }
        // An older server skips the tickets block and grants none.
        let (granted, lifetime) = match plen == resume::TICKET_PARAMS_LEN {
            true => resume::granted(&params[1..], self.cfg.want_tickets)?,
            false => (0, 0),
        };
        let block = c.bytes(
            wire::SERVER_BLOCK_LEN,
            "the accept's server key block is short",
        )?;
        c.finish("trailing bytes after the accept")?;
        let suite = match mode.is_cryptographic() {
            true => Some(
                Suite::from_wire_id(params[0]).ok_or(HandshakeError::Malformed(
                    "the accept names an unknown cipher suite",
                ))?,
            ),
            false => None,
        };
        let mut b = Cursor::new(block);
        let ct: &[u8; MLKEM_CT_LEN] = b.array("ML-KEM ciphertext")?;
        let s_share: [u8; SHARE_LEN] = *b.array("X25519 share")?;
        let public: PublicKey = *b.array::<SERVER_KEY_LEN>("server key")?;
        let signature = b.bytes(SIGNATURE_LEN, "signature")?;
        let tag = b.bytes(TAG_LEN, "confirmation")?;
        if s_share == ks.share {
            return Err(HandshakeError::ReflectedShare);
        }
        let dh = keys::x25519_agree(&ks.secret, &s_share)
            .map_err(|_| HandshakeError::ZeroSharedSecret)?;
        let kem = ks.kem.decapsulate(ct);
        let accept = self.reader.message();
        let secrets = Secrets {
            kem: &kem,
            dh: &dh,
            r_c: &ks.r_c,
        };
        let sched = Schedule::new(&secrets, &self.hello, &accept[..accept.len() - TAG_LEN]);
        if !keys::tags_equal(&sched.server_tag(), tag) {
            return Err(HandshakeError::ConfirmationFailed);
        }
        // The signature covers the transcript up to and including the server's key.
        let signed_len = accept.len() - TAG_LEN - SIGNATURE_LEN;
        let th_signed = keys::sha256(&[&self.hello, &accept[..signed_len]]);
        if !identity::verify(&public, &th_signed, signature) {
            return Err(HandshakeError::BadSignature);
        }
        if let Some(expected) = self.cfg.server_key {
            if !keys::tags_equal(&expected, &public) {
                return Err(HandshakeError::ServerKeyMismatch {
                    expected,
                    got: public,
                });
            }
        }
        self.server_key = Some(public);
        self.tickets = resume::tickets_of(&sched, granted, public, lifetime);
        let (confirm, keys) = match (mode, suite) {
            (Mode::Stream | Mode::Aead, Some(suite)) => {
                crypto_keys(&self.cfg, &self.hello, accept, &sched, mode, suite)
            }
            (Mode::Kato, _) => (Vec::new(), self.kato_keys()),
            _ => (Vec::new(), Keys::Plain),
        };
        Ok(Progress::Done {
            consumed,
            value: (confirm, Session::new(Role::Client, keys)),
        })
    }

    /// The answer to a resume hello: the chosen crypto mode, the tickets granted, `r_s`, the
    /// server's confirmation (which only a holder of the ticket's secret can make).
    fn read_resumed(
        &mut self,
        consumed: usize,
    ) -> Result<Progress<(Vec<u8>, Session)>, HandshakeError> {
        let Some(rs) = &self.resume else {
            return Err(HandshakeError::Malformed("unexpected message type"));
        };
        let accept = self.reader.message();
        let (_, body) = self.reader.frame();
        let mut c = Cursor::new(body);
        let id = c.u8("answer without a mode")?;
        let plen = c.u8("answer without a parameter length")? as usize;
        let params = c.bytes(plen, "answer parameters overrun the message")?;
        let mode = Mode::from_wire_id(id)
            .filter(|m| m.is_cryptographic() && self.cfg.offer.contains(m))
            .ok_or(HandshakeError::Malformed(
                "the server resumed a mode we did not offer",
            ))?;
        let asked = self.cfg.want_tickets > 0;
        let want_len = if asked { resume::TICKET_PARAMS_LEN } else { 1 };
        if plen != want_len {
            return Err(HandshakeError::Malformed(
                "answer parameters have the wrong length",
            ));
        }
        let suite = Suite::from_wire_id(params[0]).ok_or(HandshakeError::Malformed(
            "the answer names an unknown cipher suite",
        ))?;
        let (granted, lifetime) = match asked {
            true => resume::granted(&params[1..], self.cfg.want_tickets)?,
            false => (0, 0),
        };
        c.bytes(wire::RS_LEN, "the answer's r_s is short")?;
        let tag = c.bytes(TAG_LEN, "confirmation")?;
        c.finish("trailing bytes after the answer")?;
        let sched = Schedule::resumed(
            &rs.psk,
            &rs.r_c,
            &self.hello,
            &accept[..accept.len() - TAG_LEN],
        );
        if !keys::tags_equal(&sched.server_tag(), tag) {
            return Err(HandshakeError::ConfirmationFailed);
        }
        self.server_key = Some(rs.server_key);
        self.tickets = resume::tickets_of(&sched, granted, rs.server_key, lifetime);
        let (confirm, keys) = crypto_keys(&self.cfg, &self.hello, accept, &sched, mode, suite);
        Ok(Progress::Done {
            consumed,
            value: (confirm, Session::new(Role::Client, keys)),
        })
    }

    fn kato_keys(&self) -> Keys {
        let mut c2s = [0u8; KATO_KEY_LEN];
        let mut s2c = [0u8; KATO_KEY_LEN];
        c2s.copy_from_slice(&self.kato[..KATO_KEY_LEN]);
        s2c.copy_from_slice(&self.kato[KATO_KEY_LEN..]);
        Keys::Kato { c2s, s2c }
    }

    /// The error a reject message (after its type byte) stands for.
    fn rejected(&self, c: &mut Cursor<'_>) -> HandshakeError {
        let parse = |c: &mut Cursor<'_>| -> Result<HandshakeError, HandshakeError> {
            let reason = RejectReason::from_code(c.u8("reject without a reason")?);
            Ok(match reason {
                RejectReason::NoCommonMode => {
                    let n = c.u8("reject without a mode count")? as usize;
                    let ids = c.bytes(n, "reject mode list overruns the message")?;
                    c.finish("trailing bytes after the reject")?;
                    HandshakeError::NoCommonMode {
                        offered: self.cfg.offer.clone(),
                        unknown: Vec::new(),
                        accepted: ids
                            .iter()
                            .filter_map(|&id| Mode::from_wire_id(id))
                            .collect(),
                    }
                }
                RejectReason::Other(_) => HandshakeError::PeerRejected(reason),
                _ => {
                    c.finish("trailing bytes after the reject")?;
                    HandshakeError::PeerRejected(reason)
                }
            })
        };
        parse(c).unwrap_or_else(|e| e)
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
        self.hello.zeroize();
        self.kato.zeroize();
        // Drops (and so wipes) the X25519 secret and r_c, or the ticket's secret.
        self.key_share = None;
        self.resume = None;
    }
}

/// A confirmed `stream` or `aead` session's keys, full or resumed: the client's confirmation
/// message and the keys from the schedule.
fn crypto_keys(
    cfg: &ClientConfig,
    hello: &[u8],
    accept: &[u8],
    sched: &Schedule,
    mode: Mode,
    suite: Suite,
) -> (Vec<u8>, Keys) {
    let (c2s, s2c) = sched.traffic();
    let confirm = wire::encode(wire::TYPE_CONFIRM, &sched.client_tag(hello, accept));
    let keys = Keys::Crypto {
        mode,
        suite,
        epoch_log2: cfg.epoch_log2(mode),
        c2s,
        s2c,
        expect_confirm: None,
    };
    (confirm, keys)
}

impl Drop for ClientHandshake {
    fn drop(&mut self) {
        self.hello.zeroize();
        self.kato.zeroize();
    }
}

impl fmt::Debug for ClientHandshake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientHandshake")
            .field("offer", &self.cfg.offer)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}
