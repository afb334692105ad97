//! Why a handshake failed: one error type for both sides, with one-line
//! messages meant for the user, and the reasons a server sends to a client.

use crate::mode::{Mode, ModeList};
use std::fmt;

/// Why a nena handshake failed. Every variant's message is one line a user can act on.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    /// The peer's first bytes are not nena's magic: it speaks another protocol.
    #[error("peer does not speak nena (its first bytes were {}, expected {})", Hex(got), Hex(&crate::magic::MAGIC))]
    NotNena {
        /// The peer's bytes up to and including the first one that differs from the magic.
        got: Vec<u8>,
    },
    /// The peer speaks nena, but another protocol version.
    #[error("{}", version_msg(*ours, *theirs))]
    UnsupportedVersion { ours: u8, theirs: u8 },
    /// The client offers no mode the server accepts.
    #[error(
        "no common mode: the client offers {}, the server accepts {}{}",
        offer_text(offered, unknown),
        ModeList(accepted),
        unoffered_hint(offered, accepted)
    )]
    NoCommonMode {
        /// The client's offer of modes this side knows.
        offered: Vec<Mode>,
        /// Wire ids of offered modes this side does not know (a newer peer's), in the
        /// order offered. Always empty on the client, which knows what it offered.
        unknown: Vec<u8>,
        /// The server's accepted modes (modes unknown to this side are left out).
        accepted: Vec<Mode>,
    },
    /// The peer's handshake message breaks the format.
    #[error("malformed nena handshake from peer: {0}")]
    Malformed(&'static str),
    /// The peer's handshake message announces more bytes than allowed.
    #[error("nena handshake message too long: {len} bytes announced, at most {max} allowed")]
    TooLong { len: usize, max: usize },
    /// The connection ended before the peer's handshake message was complete.
    #[error("{}", closed_msg(*received))]
    ClosedEarly {
        /// How many bytes of the peer's message had arrived.
        received: usize,
    },
    /// The server refused the client's hello for a reason it stated.
    #[error("the server rejected our nena hello: {0}")]
    PeerRejected(RejectReason),
    /// The local configuration or caller input cannot make a handshake.
    #[error("invalid nena handshake configuration: {0}")]
    Config(&'static str),
    /// `read` was called after the handshake had already finished or failed.
    #[error("nena handshake already finished")]
    AlreadyFinished,
    /// We offered key agreement, but the answer carries no key confirmation: an attacker on
    /// the way may have replaced it (a downgrade), or the server predates the crypto modes.
    #[error(
        "the server's answer (mode {mode}) carries no key confirmation although we offered key \
         agreement: it may have been altered on the way (a downgrade), or the server is an \
         older nena (offer --mode {mode} alone to talk to it)"
    )]
    Unconfirmed { mode: Mode },
    /// The server's key confirmation does not match what we derived.
    #[error(
        "the server's key confirmation does not match: its answer was altered, replayed from \
         another connection, or made for another hello"
    )]
    ConfirmationFailed,
    /// The server's key share is the one we sent.
    #[error("the server's key share is our own: a reflected answer")]
    ReflectedShare,
    /// X25519 with the peer's share gives zero: the share is a low-order point.
    #[error("the peer's X25519 key share is a low-order point (the shared secret would be zero)")]
    ZeroSharedSecret,
    /// The client's ML-KEM encapsulation key is not a valid one (FIPS 203's input check).
    #[error("the client's ML-KEM-768 encapsulation key is invalid")]
    InvalidKemKey,
    /// The server's signature over the handshake does not verify with the key it names.
    #[error(
        "the server's signature over the handshake does not verify: its answer was altered on \
         the way, or the server does not hold the key it names"
    )]
    BadSignature,
    /// The server proved a key other than the one the client expects (pinned on first
    /// contact, or given by the user).
    #[error(
        "the server proves the key {} but {} was expected: an impostor, or the server's key changed",
        KeyText(got),
        KeyText(expected)
    )]
    ServerKeyMismatch {
        expected: crate::identity::PublicKey,
        got: crate::identity::PublicKey,
    },
    /// The server did not resume a session (its own error; the client sees
    /// `PeerRejected(ResumeRefused)`).
    #[error("resumption refused: {0}")]
    ResumeRefused(ResumeRefusal),
}

/// A server public key as users see it: standard base64 (44 characters, RFC 4648).
pub struct KeyText<'a>(pub &'a crate::identity::PublicKey);

impl fmt::Display for KeyText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&data_encoding::BASE64.encode(self.0))
    }
}

/// Which side is older, and what to do.
fn version_msg(ours: u8, theirs: u8) -> String {
    let fix = if theirs < ours {
        "the peer is an older nena: upgrade it"
    } else {
        "the peer is a newer nena: upgrade this side"
    };
    format!(
        "peer speaks nena protocol version {theirs}, we speak version {ours} ({fix}; version 2 \
         brought the hybrid X25519+ML-KEM-768 key agreement and pinned server keys, and \
         refuses version 1)"
    )
}

/// For a client that did not offer what the server accepts: the flag that would offer it
/// (modes without integrity are offered only when named).
fn unoffered_hint(offered: &[Mode], accepted: &[Mode]) -> String {
    let missing: Vec<&str> = accepted
        .iter()
        .filter(|m| !offered.contains(m))
        .map(|m| m.name())
        .collect();
    if offered.is_empty() || missing.is_empty() {
        return String::new();
    }
    format!(
        " (to allow {} pass --mode {}; modes without integrity are offered only when named)",
        missing.join(" or "),
        missing.join(",")
    )
}

/// `[plain]`, `[plain] and modes unknown to this server (ids 0x42)`, or
/// `only modes unknown to this server (ids 0x42, 0x43)`.
fn offer_text(offered: &[Mode], unknown: &[u8]) -> String {
    if unknown.is_empty() {
        return ModeList(offered).to_string();
    }
    let ids: Vec<String> = unknown.iter().map(|i| format!("{i:#04x}")).collect();
    let ids = format!("modes unknown to this server (ids {})", ids.join(", "));
    if offered.is_empty() {
        format!("only {ids}")
    } else {
        format!("{} and {ids}", ModeList(offered))
    }
}

fn closed_msg(received: usize) -> String {
    if received == 0 {
        "peer closed the connection before its nena handshake message".to_string()
    } else {
        format!("peer closed the connection in the middle of its nena handshake message (after {received} bytes)")
    }
}

/// Why a protected session stopped: the record layer of `aead` mode, and the client's key
/// confirmation that a server reads before any data of the crypto modes. Each is final.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// A record did not authenticate or its header is impossible: the bytes were altered on
    /// the way (or the peer is broken). Nothing of the record reached the application.
    #[error("integrity check failed: {detail} (record {record} of the peer's stream; altered on the way?)")]
    Integrity {
        /// Number of the record in its direction, from 0.
        record: u64,
        detail: &'static str,
    },
    /// The peer's stream ended without its closing record.
    #[error(
        "the peer's stream ended without its closing record after {records} records: \
         truncated (a forged FIN or reset?)"
    )]
    Truncated { records: u64 },
    /// Bytes followed the peer's closing record.
    #[error("integrity check failed: data after the peer's closing record")]
    AfterClose,
    /// The client's key confirmation is missing, malformed or wrong.
    #[error("the client's key confirmation failed: {0}")]
    ClientConfirm(&'static str),
    /// The connection ended before the client's key confirmation.
    #[error("the client closed the connection before its key confirmation")]
    ConfirmMissing,
    /// The peer gave the session up and said why (`aead`'s abort record; authenticated, so
    /// nobody on the path can forge one).
    #[error("the peer aborted the session: {reason}")]
    PeerAborted { reason: AbortReason },
    /// Used after an earlier failure.
    #[error("the protected stream already failed")]
    Failed,
}

impl SessionError {
    /// Whether the peer's bytes arrived altered (a record, the end of the stream after its
    /// closing record, or the key confirmation that does not check): what an abort record
    /// with [`AbortReason::Altered`] tells the peer.
    pub fn is_altered(&self) -> bool {
        matches!(
            self,
            SessionError::Integrity { .. }
                | SessionError::AfterClose
                | SessionError::ClientConfirm(_)
        )
    }
}

/// Why a peer aborted an `aead` session (the abort record's code).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AbortReason {
    /// The peer is stopping (SIGTERM, SIGINT) and its grace period is over.
    ShuttingDown,
    /// What the peer received of our direction failed its integrity check: altered on the
    /// way, or corrupted by a receiving kernel (docs/investigations/kernel-41-bytes: a new
    /// subflow's first bytes misplaced). Nothing of it reached the peer's application.
    Altered,
    /// A code this version does not know.
    Other(u8),
}

impl AbortReason {
    pub fn code(self) -> u8 {
        match self {
            AbortReason::ShuttingDown => 1,
            AbortReason::Altered => 2,
            AbortReason::Other(c) => c,
        }
    }

    pub fn from_code(c: u8) -> AbortReason {
        match c {
            1 => AbortReason::ShuttingDown,
            2 => AbortReason::Altered,
            c => AbortReason::Other(c),
        }
    }
}

impl std::fmt::Display for AbortReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AbortReason::ShuttingDown => f.write_str("it is shutting down"),
            AbortReason::Altered => {
                f.write_str("what it received from us failed its integrity check there")
            }
            AbortReason::Other(c) => write!(f, "reason code {c}"),
        }
    }
}

/// A reason code in the server's reject message.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// The hello's version is not the server's.
    UnsupportedVersion,
    /// No offered mode is accepted (the client reports this as [`HandshakeError::NoCommonMode`]).
    NoCommonMode,
    /// The hello broke the format.
    Malformed,
    /// The hello announced more than the maximum length.
    TooLong,
    /// The connection reached the server as plain TCP (MPTCP fell back) and the server does
    /// not accept fallback. Sent by the transport, not by the handshake's state machine.
    FallbackRefused,
    /// The server did not resume (its ticket is unknown, used or expired, or the server
    /// keeps none): the client opens a new connection with a full handshake.
    ResumeRefused,
    /// A code this build does not know (sent by a newer server).
    Other(u8),
}

impl RejectReason {
    /// Wire code of this reason.
    pub fn code(self) -> u8 {
        match self {
            RejectReason::UnsupportedVersion => 0x01,
            RejectReason::NoCommonMode => 0x02,
            RejectReason::Malformed => 0x03,
            RejectReason::TooLong => 0x04,
            RejectReason::FallbackRefused => 0x05,
            RejectReason::ResumeRefused => 0x06,
            RejectReason::Other(c) => c,
        }
    }

    /// Reason with this wire code.
    pub fn from_code(code: u8) -> RejectReason {
        match code {
            0x01 => RejectReason::UnsupportedVersion,
            0x02 => RejectReason::NoCommonMode,
            0x03 => RejectReason::Malformed,
            0x04 => RejectReason::TooLong,
            0x05 => RejectReason::FallbackRefused,
            0x06 => RejectReason::ResumeRefused,
            c => RejectReason::Other(c),
        }
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RejectReason::UnsupportedVersion => {
                f.write_str("it does not support our protocol version")
            }
            RejectReason::NoCommonMode => f.write_str("it accepts none of the modes we offered"),
            RejectReason::Malformed => f.write_str("it found our hello malformed"),
            RejectReason::TooLong => f.write_str("our hello was too long"),
            RejectReason::FallbackRefused => f.write_str(
                "our connection reached it as plain TCP (MPTCP fell back on the way) and it \
                 refuses fallback (a server accepts it only with --allow-fallback)",
            ),
            RejectReason::ResumeRefused => f.write_str(
                "it did not resume our session (its ticket is unknown, used or expired): a full \
                 handshake follows",
            ),
            RejectReason::Other(c) => write!(f, "unknown reason code {c:#04x}"),
        }
    }
}

/// Why the server did not resume.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResumeRefusal {
    /// The server keeps no tickets (resumption off).
    NoStore,
    /// No such ticket: never granted here, used already (a replay), expired, or the server
    /// restarted.
    UnknownTicket,
    /// The binder does not match: the client does not hold the ticket's secret.
    BadBinder,
}

impl fmt::Display for ResumeRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ResumeRefusal::NoStore => "this server does not resume sessions",
            ResumeRefusal::UnknownTicket => {
                "unknown ticket (used already, expired, or granted before a restart)"
            }
            ResumeRefusal::BadBinder => "the binder does not match the ticket",
        })
    }
}

/// A failed server handshake: the error, and the answer to send (if any)
/// so that the client can tell its user why, before the server closes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{error}")]
pub struct Rejected {
    /// Bytes to write to the client before closing. `None` when the peer
    /// is not nena (we do not write into another protocol) or has gone.
    pub reply: Option<Vec<u8>>,
    /// What went wrong, for the server's own log.
    #[source]
    pub error: HandshakeError,
}

/// Hex formatting of a short byte string, e.g. `48 54 54 50`.
pub(crate) struct Hex<'a>(pub &'a [u8]);

impl fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{b:02x}")?;
        }
        if self.0.is_ascii() && !self.0.is_empty() {
            write!(f, " \"{}\"", self.0.escape_ascii())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_line_and_clear() {
        let cases: Vec<(HandshakeError, &str)> = vec![
            (
                HandshakeError::NotNena { got: b"H".to_vec() },
                "peer does not speak nena (its first bytes were 48 \"H\", expected 8b 4e 45 4e 41)",
            ),
            (
                HandshakeError::UnsupportedVersion { ours: 1, theirs: 2 },
                "peer speaks nena protocol version 2, we speak version 1 (the peer is a newer \
                 nena: upgrade this side; version 2 brought the hybrid X25519+ML-KEM-768 key \
                 agreement and pinned server keys, and refuses version 1)",
            ),
            (
                HandshakeError::UnsupportedVersion { ours: 2, theirs: 1 },
                "peer speaks nena protocol version 1, we speak version 2 (the peer is an older \
                 nena: upgrade it; version 2 brought the hybrid X25519+ML-KEM-768 key \
                 agreement and pinned server keys, and refuses version 1)",
            ),
            (
                HandshakeError::ServerKeyMismatch { expected: [0; 32], got: [0xff; 32] },
                "the server proves the key //////////////////////////////////////////8= but \
                 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= was expected: an impostor, or the \
                 server's key changed",
            ),
            (
                HandshakeError::NoCommonMode { offered: vec![Mode::Plain], unknown: vec![], accepted: vec![Mode::Kato] },
                "no common mode: the client offers [plain], the server accepts [kato] (to allow kato pass --mode kato; modes without integrity are offered only when named)",
            ),
            (
                HandshakeError::NoCommonMode { offered: vec![], unknown: vec![0x42, 0x7f], accepted: vec![Mode::Kato] },
                "no common mode: the client offers only modes unknown to this server (ids 0x42, 0x7f), the server accepts [kato]",
            ),
            (
                HandshakeError::NoCommonMode { offered: vec![Mode::Plain], unknown: vec![0x05], accepted: vec![Mode::Kato] },
                "no common mode: the client offers [plain] and modes unknown to this server (ids 0x05), the server accepts [kato] (to allow kato pass --mode kato; modes without integrity are offered only when named)",
            ),
            (
                HandshakeError::ClosedEarly { received: 0 },
                "peer closed the connection before its nena handshake message",
            ),
            (
                HandshakeError::ClosedEarly { received: 3 },
                "peer closed the connection in the middle of its nena handshake message (after 3 bytes)",
            ),
            (
                HandshakeError::PeerRejected(RejectReason::FallbackRefused),
                "the server rejected our nena hello: our connection reached it as plain TCP (MPTCP \
                 fell back on the way) and it refuses fallback (a server accepts it only with \
                 --allow-fallback)",
            ),
            (
                HandshakeError::PeerRejected(RejectReason::Other(0x7f)),
                "the server rejected our nena hello: unknown reason code 0x7f",
            ),
        ];
        for (e, want) in cases {
            assert_eq!(e.to_string(), want);
            assert!(!e.to_string().contains('\n'));
        }
        for e in [
            HandshakeError::Unconfirmed { mode: Mode::Kato },
            HandshakeError::ConfirmationFailed,
            HandshakeError::ReflectedShare,
            HandshakeError::ZeroSharedSecret,
            HandshakeError::BadSignature,
            HandshakeError::InvalidKemKey,
        ] {
            let s = e.to_string();
            assert!(!s.contains('\n') && !s.contains("  "), "{s}");
        }
        let e = SessionError::Integrity {
            record: 3,
            detail: "the record does not authenticate",
        };
        assert!(e.to_string().starts_with("integrity check failed: "));
        assert!(SessionError::Truncated { records: 9 }
            .to_string()
            .contains("without its closing record after 9 records"));
    }

    #[test]
    fn reason_codes_round_trip() {
        for c in 0..=255u8 {
            assert_eq!(RejectReason::from_code(c).code(), c);
            assert_eq!(AbortReason::from_code(c).code(), c);
        }
        assert_eq!(AbortReason::from_code(2), AbortReason::Altered);
        assert!(AbortReason::Altered.to_string().contains("integrity check"));
    }
}
