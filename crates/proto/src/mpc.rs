//! `kato-mpc`, the papers' own negotiation, sans-IO: from what nena's BPF programs saw of a
//! connection's handshake (whether the SYN carried the request and the SYN-ACK the consent,
//! the two MPTCP keys in clear) and what the socket says (its MPTCP token, whether it fell
//! back to TCP), decide whether the session scrambles, with which keys, or is plain on both
//! sides; and the MPTCP token of a key (RFC 8684: the most significant 32 bits of its
//! SHA-256), by which a recorded connection is matched to its socket.
//!
//! The keys, as the papers' code takes them (seed 001, Figure 14: `memcpy(&sScrBuf[56],
//! &mptcp_loc_key, 8)`): each direction's 8-byte kato key is the *sender's* MPTCP key, its
//! 8 bytes as they cross the wire. So client-to-server is the client's key and
//! server-to-client the server's: both differ per direction and per connection. (The
//! papers' text says "HMAC of the key" instead, without saying which HMAC; their code and
//! the kernel's key layout do not: docs/PROTOCOL.md, "kato-mpc".)

use crate::mode::{Mode, KATO_KEY_LEN};
use crate::session::{Keys, Role, Session};
use ring::digest;

/// One MPTCP key (64 bits) as it crosses the wire in MP_CAPABLE (big-endian).
pub type MptcpKey = [u8; 8];

/// The MPTCP token of `key`: the most significant 32 bits of SHA-256(key) (RFC 8684
/// section 3.2), as the kernel reports it in `MPTCP_INFO`'s `mptcpi_token`.
pub fn mptcp_token(key: &MptcpKey) -> u32 {
    let d = digest::digest(&digest::SHA256, key);
    u32::from_be_bytes([d.as_ref()[0], d.as_ref()[1], d.as_ref()[2], d.as_ref()[3]])
}

/// The scrambling keys of one connection, per direction.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct MpcKeys {
    /// Client to server: the client's MPTCP key.
    pub c2s: [u8; KATO_KEY_LEN],
    /// Server to client: the server's MPTCP key.
    pub s2c: [u8; KATO_KEY_LEN],
}

impl std::fmt::Debug for MpcKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MpcKeys { .. }")
    }
}

impl MpcKeys {
    /// The keys from this side's (`local`) and the peer's (`remote`) MPTCP keys.
    pub fn derive(role: Role, local: &MptcpKey, remote: &MptcpKey) -> MpcKeys {
        match role {
            Role::Client => MpcKeys {
                c2s: *local,
                s2c: *remote,
            },
            Role::Server => MpcKeys {
                c2s: *remote,
                s2c: *local,
            },
        }
    }
}

/// What one side knows of its connection when the socket is ready (client: connect()
/// returned; server: accept() returned). Its `Debug` shows each key's MPTCP token, never
/// the key.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct MpcObservation {
    /// The connection fell back to plain TCP (no MPTCP keys exist).
    pub fallback: bool,
    /// The programs saw this connection's MP_CAPABLE SYN at all.
    pub seen: bool,
    /// This side's programs are attached but hold no record of the connection (a server:
    /// none of the handshake that completed it, its table overrun or its completing ACK not
    /// checked; a client: its SYN did not cross them): what was marked is unknown, so the
    /// peer may scramble.
    pub unrecorded: bool,
    /// The SYN carried the request (the client's program added it; the server's saw it).
    pub requested: bool,
    /// The SYN-ACK carried the consent (the server's program added it; the client's saw it).
    pub consented: bool,
    /// The third ACK carried the client's confirmation that it saw the consent (the
    /// client's program added it; the server's saw it on the ACK that completed the
    /// handshake).
    pub confirmed: bool,
    /// This side's MPTCP key, if seen.
    pub local_key: Option<MptcpKey>,
    /// The peer's MPTCP key, if seen.
    pub remote_key: Option<MptcpKey>,
    /// The socket's MPTCP token (`mptcpi_token`), if the kernel reports it.
    pub socket_token: Option<u32>,
}

impl std::fmt::Debug for MpcObservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpcObservation")
            .field("fallback", &self.fallback)
            .field("seen", &self.seen)
            .field("unrecorded", &self.unrecorded)
            .field("requested", &self.requested)
            .field("consented", &self.consented)
            .field("confirmed", &self.confirmed)
            .field("local_key", &self.local_key.as_ref().map(KeyByToken))
            .field("remote_key", &self.remote_key.as_ref().map(KeyByToken))
            .field("socket_token", &self.socket_token)
            .finish()
    }
}

/// `Debug` of an MPTCP key that shows its token (public: it crosses in MP_JOIN), not the key.
pub struct KeyByToken<'a>(pub &'a MptcpKey);

impl std::fmt::Debug for KeyByToken<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "key(token {:#010x})", mptcp_token(self.0))
    }
}

/// Why a kato-mpc connection is plain (on both sides).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlainReason {
    /// The connection fell back to TCP.
    Fallback,
    /// Client: the SYN could not be marked (no option space; or the programs did not see
    /// it). Server: the client did not ask.
    NotRequested,
    /// Client: the server did not agree (no nena kato-mpc programs there, or a box on the
    /// path removed the consent). Server: its SYN-ACK could not be marked.
    NotConsented,
    /// Client: its third ACK could not carry the confirmation. Server: the completing ACK
    /// did not carry it (the client did not see the consent, or the mark was removed on the
    /// way, or that ACK was lost and a data segment completed the handshake).
    NotConfirmed,
}

impl PlainReason {
    /// One line for people, from `role`'s point of view.
    pub fn describe(self, role: Role) -> &'static str {
        match (self, role) {
            (PlainReason::Fallback, _) => "the connection fell back to plain TCP",
            (PlainReason::NotRequested, Role::Client) => "the SYN could not carry the request",
            (PlainReason::NotRequested, Role::Server) => "the client did not ask for kato-mpc",
            (PlainReason::NotConsented, Role::Client) => {
                "the server did not agree (no kato-mpc on its side)"
            }
            (PlainReason::NotConsented, Role::Server) => "the SYN-ACK could not carry the consent",
            (PlainReason::NotConfirmed, Role::Client) => {
                "the third ACK could not carry the confirmation"
            }
            (PlainReason::NotConfirmed, Role::Server) => {
                "the client did not confirm the consent (it did not see it)"
            }
        }
    }
}

/// The decision for one connection.
#[derive(Debug, PartialEq, Eq)]
pub enum MpcDecision {
    /// Both sides agreed: scramble from the first data byte with these keys.
    Scramble(MpcKeys),
    /// Plain on both sides, and why.
    Plain(PlainReason),
}

impl MpcDecision {
    /// The one line a side prints when it refuses a plain decision (None: it scrambles, or
    /// `allow_plain`). Nothing has been sent on the connection when a client refuses.
    pub fn refusal(&self, role: Role, allow_plain: bool) -> Option<String> {
        match self {
            MpcDecision::Plain(r) if !allow_plain => Some(match role {
                Role::Client => format!(
                    "kato-mpc refused: {}; nothing was sent (--allow-plain sends in the clear)",
                    r.describe(role)
                ),
                Role::Server => format!(
                    "kato-mpc refused: {}; connection closed unread (--allow-plain serves \
                     such clients in the clear)",
                    r.describe(role)
                ),
            }),
            _ => None,
        }
    }
}

/// Both sides agreed but this side cannot scramble as the other will: the connection must
/// be closed (never scramble on one side only).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MpcError {
    #[error("kato-mpc was agreed but the MPTCP keys were not seen on this host")]
    NoKeys,
    #[error(
        "kato-mpc: the recorded MPTCP key's token {recorded:#010x} is not the socket's \
         token {socket:#010x} (the record is of another connection)"
    )]
    TokenMismatch { recorded: u32, socket: u32 },
    #[error("kato-mpc: the two MPTCP keys are the same")]
    SameKeys,
    #[error(
        "kato-mpc: nena's programs hold no record of this connection's handshake (their table \
         was overrun, or it did not cross the interfaces they watch): what was agreed is \
         unknown, so it is neither scrambled nor plain"
    )]
    Unrecorded,
}

/// Decides one connection (see the module's documentation). Plain unless the SYN carried
/// the request, the SYN-ACK the consent *and* the third ACK the confirmation: each side
/// sees all three marks (the ones it added, the ones it received), so both decide alike,
/// and a consent removed on the way leaves both plain (the client does not confirm what it
/// did not see). Once all three crossed, missing keys or a token that does not match are
/// errors (the caller closes the connection) rather than plain, since the peer will
/// scramble; so is a connection of which this side's programs hold no record at all
/// (`unrecorded`: the peer may scramble). Plain is a decision, not a permission: the caller
/// refuses it unless the user allowed it ([`MpcDecision::refusal`]).
pub fn decide(role: Role, o: &MpcObservation) -> Result<MpcDecision, MpcError> {
    if o.fallback {
        return Ok(MpcDecision::Plain(PlainReason::Fallback));
    }
    if o.unrecorded {
        return Err(MpcError::Unrecorded);
    }
    if !o.requested {
        return Ok(MpcDecision::Plain(PlainReason::NotRequested));
    }
    if !o.consented {
        return Ok(MpcDecision::Plain(PlainReason::NotConsented));
    }
    if !o.confirmed {
        return Ok(MpcDecision::Plain(PlainReason::NotConfirmed));
    }
    let (Some(local), Some(remote)) = (o.local_key, o.remote_key) else {
        return Err(MpcError::NoKeys);
    };
    if let Some(socket) = o.socket_token {
        let recorded = mptcp_token(&local);
        if recorded != socket {
            return Err(MpcError::TokenMismatch { recorded, socket });
        }
    }
    if local == remote {
        return Err(MpcError::SameKeys);
    }
    Ok(MpcDecision::Scramble(MpcKeys::derive(
        role, &local, &remote,
    )))
}

impl Session {
    /// The session of a kato-mpc connection: kato's scrambling with `keys`, reported as
    /// `kato-mpc`. No handshake bytes: the first data byte is scrambled.
    pub fn kato_mpc(role: Role, keys: &MpcKeys) -> Session {
        let mut s = Session::new(
            role,
            Keys::Kato {
                c2s: keys.c2s,
                s2c: keys.s2c,
            },
        );
        s.set_mode(Mode::KatoMpc);
        s
    }

    /// A plain session (a kato-mpc connection that either side did not agree to).
    pub fn plain(role: Role) -> Session {
        Session::new(role, Keys::Plain)
    }

    /// The session [`decide`] asks for.
    pub fn from_decision(role: Role, d: &MpcDecision) -> Session {
        match d {
            MpcDecision::Scramble(k) => Session::kato_mpc(role, k),
            MpcDecision::Plain(_) => Session::plain(role),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Opened;
    use nena_codec::Scrambler;

    const KC: MptcpKey = [0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88];
    const KS: MptcpKey = [0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00];

    fn agreed(local: MptcpKey, remote: MptcpKey) -> MpcObservation {
        MpcObservation {
            seen: true,
            requested: true,
            consented: true,
            confirmed: true,
            local_key: Some(local),
            remote_key: Some(remote),
            socket_token: Some(mptcp_token(&local)),
            ..Default::default()
        }
    }

    #[test]
    fn token_is_the_top_32_bits_of_sha256() {
        // SHA-256 of the 8 bytes 00..07 starts 8a851ff8 (computed independently with
        // `printf '\x00\x01\x02\x03\x04\x05\x06\x07' | sha256sum`).
        assert_eq!(mptcp_token(&[0, 1, 2, 3, 4, 5, 6, 7]), 0x8a85_1ff8);
        assert_ne!(mptcp_token(&KC), mptcp_token(&KS));
    }

    #[test]
    fn each_direction_takes_its_senders_key() {
        let c = MpcKeys::derive(Role::Client, &KC, &KS);
        let s = MpcKeys::derive(Role::Server, &KS, &KC);
        assert_eq!(c, s, "both sides derive the same pair");
        assert_eq!(c.c2s, KC);
        assert_eq!(c.s2c, KS);
        assert_ne!(c.c2s, c.s2c);
    }

    #[test]
    fn both_sides_decide_alike() {
        let dc = decide(Role::Client, &agreed(KC, KS)).unwrap();
        let ds = decide(Role::Server, &agreed(KS, KC)).unwrap();
        assert_eq!(dc, ds);
        assert!(matches!(dc, MpcDecision::Scramble(_)));
        // Without the consent, or without the request, or after a fallback: plain.
        for (f, want) in [
            (
                (|o: &mut MpcObservation| o.consented = false) as fn(&mut MpcObservation),
                PlainReason::NotConsented,
            ),
            (|o| o.requested = false, PlainReason::NotRequested),
            (|o| o.confirmed = false, PlainReason::NotConfirmed),
            (|o| o.fallback = true, PlainReason::Fallback),
        ] {
            let mut c = agreed(KC, KS);
            let mut s = agreed(KS, KC);
            f(&mut c);
            f(&mut s);
            assert_eq!(decide(Role::Client, &c), Ok(MpcDecision::Plain(want)));
            assert_eq!(decide(Role::Server, &s), Ok(MpcDecision::Plain(want)));
        }
    }

    #[test]
    fn plain_is_refused_unless_allowed_and_scrambling_never_is() {
        let mut c = agreed(KC, KS);
        c.consented = false;
        let d = decide(Role::Client, &c).unwrap();
        let line = d.refusal(Role::Client, false).expect("refused");
        assert!(
            line.starts_with("kato-mpc refused: the server did not agree"),
            "{line}"
        );
        assert!(line.contains("nothing was sent") && line.contains("--allow-plain"));
        assert!(!line.contains('\n'));
        assert_eq!(d.refusal(Role::Client, true), None);
        let mut s = agreed(KS, KC);
        s.confirmed = false;
        let d = decide(Role::Server, &s).unwrap();
        assert!(d
            .refusal(Role::Server, false)
            .unwrap()
            .contains("did not confirm"));
        let ok = decide(Role::Client, &agreed(KC, KS)).unwrap();
        assert_eq!(ok.refusal(Role::Client, false), None);
    }

    #[test]
    fn agreed_without_keys_or_with_another_token_is_an_error() {
        let mut o = agreed(KC, KS);
        o.remote_key = None;
        assert_eq!(decide(Role::Client, &o), Err(MpcError::NoKeys));
        let mut o = agreed(KC, KS);
        o.socket_token = Some(mptcp_token(&KS));
        assert!(matches!(
            decide(Role::Client, &o),
            Err(MpcError::TokenMismatch { .. })
        ));
        // No token from the kernel: the 4-tuple match stands alone.
        let mut o = agreed(KC, KS);
        o.socket_token = None;
        assert!(matches!(
            decide(Role::Client, &o),
            Ok(MpcDecision::Scramble(_))
        ));
        assert_eq!(
            decide(Role::Client, &agreed(KC, KC)),
            Err(MpcError::SameKeys)
        );
    }

    /// No record at all on a side whose programs are attached: an error whatever the user
    /// allowed (the peer may scramble), never plain; a fallback stays plain (no keys exist).
    #[test]
    fn no_record_is_an_error_never_plain() {
        let o = MpcObservation {
            unrecorded: true,
            socket_token: Some(1),
            ..Default::default()
        };
        for role in [Role::Client, Role::Server] {
            let e = decide(role, &o).unwrap_err();
            assert_eq!(e, MpcError::Unrecorded);
            assert!(e.to_string().contains("neither scrambled nor plain"), "{e}");
        }
        let o = MpcObservation {
            fallback: true,
            unrecorded: true,
            ..Default::default()
        };
        assert_eq!(
            decide(Role::Server, &o),
            Ok(MpcDecision::Plain(PlainReason::Fallback))
        );
    }

    #[test]
    fn the_session_scrambles_from_the_first_byte_with_the_senders_key() {
        let keys = MpcKeys::derive(Role::Client, &KC, &KS);
        let (mut ctx, _) = Session::kato_mpc(Role::Client, &keys).split();
        let (_, mut srx) = Session::kato_mpc(Role::Server, &keys).split();
        assert_eq!(ctx.mode(), Mode::KatoMpc);
        let plain = b"GET /etc/passwd HTTP/1.0\r\n\r\n".to_vec();
        let mut buf = plain.clone();
        let n = ctx.seal(&mut buf, plain.len());
        assert_eq!(n, plain.len(), "no expansion, no header");
        // The papers' scrambling with the client's MPTCP key, byte for byte.
        let mut want = plain.clone();
        Scrambler::new(KC).scramble_in_place(&mut want);
        assert_eq!(buf, want);
        let Ok(Opened::Data { plain: range, .. }) = srx.open(&mut buf) else {
            panic!("open")
        };
        assert_eq!(&buf[range], &plain[..]);
        // The other direction uses the server's key.
        let (mut stx, _) = Session::kato_mpc(Role::Server, &keys).split();
        let mut b2 = plain.clone();
        stx.seal(&mut b2, plain.len());
        let mut want2 = plain.clone();
        Scrambler::new(KS).scramble_in_place(&mut want2);
        assert_eq!(b2, want2);
        assert_ne!(b2, buf);
        // Plain: the bytes as they are.
        let (mut p, _) = Session::plain(Role::Client).split();
        let mut b3 = plain.clone();
        p.seal(&mut b3, plain.len());
        assert_eq!(b3, plain);
    }
}
