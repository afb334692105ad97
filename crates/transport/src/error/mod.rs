//! How a session ends when it does not end well ([`Error`]): one typed error, so that the
//! metrics ([`crate::ops::metrics::Outcome::of`]), the client's retry and the CLI's exit
//! status `match` on what happened instead of searching an error chain.
//!
//! The session path has no anyhow and no free-text context: opening and accepting sessions
//! (`conn/`: dial, accept, the accept loop, kato-mpc's setup, the client settings), the
//! protected stream and its handshake (`stream/`), the file server's sessions and the
//! client tools (`app/`) and the proxy's sessions (`proxy/`: server, client, open, SOCKS
//! UDP ASSOCIATE, `carry/`: the datagram relay and plane, the DNS resolver and responder).
//! Which variant is for what:
//!
//! - what the session was doing when it failed: [`Error::During`] with a typed [`Doing`]
//!   (`ReadingRequest`, `Listening { addr }`, `OpeningFile { path }`, ...) in front of the
//!   cause; its kind is the cause's ([`Error::kind`], [`Error::was_doing`]);
//! - the causes: [`Error::Io`] (timeouts of the socket included), [`Error::Session`] (the
//!   protected stream), [`Error::Handshake`]/[`Error::Proto`] (the nena handshake),
//!   [`Error::Mptcp`] (the gate, fallback), [`Error::Reply`], [`Error::Refused`],
//!   [`Error::Refusing`], [`Error::ShuttingDown`] (the file server's and the proxy's ends),
//!   [`Error::Transfer`] (a file transfer's or perf run's own failure: a bad name, an
//!   existing file, a truncated upload, a verdict that does not match, ...),
//!   [`Error::Unsupported`] (what this configuration cannot do), [`Error::Timeout`] (a
//!   named phase, with its limit), [`Error::Proxy`] (a proxy session's own failure),
//!   [`Error::KatoMpc`], [`Error::Socks`], [`Error::Dns`], [`Error::Seal`],
//!   [`Error::Wire`]/[`Error::Protocol`] (a message that breaks the wire format),
//!   [`Error::Entropy`], [`Error::Task`], [`Error::RefusedBothWays`], [`Error::SpokeFirst`],
//!   [`Error::Interrupted`] and [`Error::Internal`] (a bug);
//! - [`Error::Other`] (anyhow) only for what setup code outside the session path returns
//!   when it meets a session: key files and `known_servers` (`keys/`, the pinning check's
//!   file errors, the access token's file) and the kato-mpc programs' records (the CLI's
//!   `conn::MpcRecords`). Those keep anyhow, as do the gateway's host setup and its
//!   LAN datagram flows (`proxy/gateway/`), the metrics endpoint, `baseline/`, `launch/`
//!   and `testing`.
//!
//! Each value prints the line it always printed: `{}` prints the outermost message, `{:#}`
//! the whole chain on one line (`doing: cause: ...`, as anyhow prints it), and
//! [`std::error::Error::source`] walks the same chain, so that an [`Error`] turned into an
//! `anyhow::Error` prints the same text. (Display and source are written out rather than
//! derived with thiserror: a derived Display prints one level whatever the `#` flag, and a
//! transparent variant would print its chain twice.)
//!
//! The parts: [`cause`] (the typed steps and causes above), [`ends`] (how proxy sessions
//! end: refusals and aborts), [`msg`] (how reading a header message fails) and `reply` (the
//! file server's refusal of a request).

pub mod cause;
pub mod ends;
pub mod hint;
pub mod msg;
mod reply;

pub use cause::{Doing, KatoMpc, ProxyFault, Timeout, Transfer, Unsupported};
pub use ends::{Refused, Refusing, ShuttingDown};
pub use reply::ErrorReply;

use msg::{session_error_of, MsgError};
use nena_proto::{HandshakeError, SessionError};
use std::fmt;
use std::io;

/// The result of a session's step.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a session failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// What the session was doing ([`Doing`]) in front of the error it met there; the kind
    /// is the source's.
    During { doing: Doing, source: Box<Error> },
    /// The nena handshake failed or was refused (mode, version, key confirmation, a peer
    /// that is no nena client, or the I/O and timeouts around it). Prints as its cause.
    Handshake(Box<Error>),
    /// nena-proto's handshake error itself (the peer's refusal or a malformed message).
    Proto(HandshakeError),
    /// The file server ended the session with an error reply (its status and log line).
    Reply(ErrorReply),
    /// The proxy server refused a session the proxy client asked it to open.
    Refused(Refused),
    /// The proxy server refuses a session (as it logs it).
    Refusing(Refusing),
    /// The proxy is stopping: the session was reset on both sides.
    ShuttingDown(ShuttingDown),
    /// The protected stream failed (integrity, confirmation, truncation, the peer's abort).
    Session(SessionError),
    /// nena-mptcp refused (the gate, a path rule, fallback).
    Mptcp(nena_mptcp::MptcpError),
    /// An I/O error (timeouts included).
    Io(io::Error),
    /// A file transfer or perf run failed for a cause of its own ([`Transfer`]).
    Transfer(Transfer),
    /// What was asked cannot be done in this configuration ([`Unsupported`]).
    Unsupported(Unsupported),
    /// A named phase did not end in time ([`Timeout`]).
    Timeout(Timeout),
    /// A proxy session's own failure ([`ProxyFault`]).
    Proxy(ProxyFault),
    /// A kato-mpc connection closed by this side's decision ([`KatoMpc`]).
    KatoMpc(KatoMpc),
    /// An application's SOCKS exchange that failed.
    Socks(crate::wire::target::SocksError),
    /// A DNS message not taken (a query, or an answer that is not the query's).
    Dns(crate::dns::message::DnsError),
    /// A datagram of the datagram plane that could not be sealed.
    Seal(nena_proto::dgram::seal::SealError),
    /// A message that breaks the wire format.
    Wire(crate::wire::WireError),
    /// A header message read that breaks the wire format (prints `protocol error: ...`).
    Protocol(crate::wire::WireError),
    /// The operating system gave no randomness.
    Entropy(getrandom::Error),
    /// A session's task failed (it panicked or was cancelled).
    Task(tokio::task::JoinError),
    /// The server answered the hello with a refusal (`answer`) and the connection was
    /// refused here as well (`refusal`, the gate's): both said, the server's first.
    RefusedBothWays {
        answer: Box<Error>,
        refusal: Box<Error>,
    },
    /// The peer spoke first (`preview`: what it sent): it is no nena server.
    SpokeFirst { preview: String },
    /// The command was interrupted by `signal` (SIGINT, SIGTERM).
    Interrupted { signal: &'static str },
    /// A bug: a state the code should never reach (what it is).
    Internal(&'static str),
    /// Anything nobody classifies: text for a person.
    Other(anyhow::Error),
}

impl Error {
    /// What the session was doing in front of this error, its kind kept.
    pub fn during(self, doing: Doing) -> Error {
        Error::During {
            doing,
            source: Box::new(self),
        }
    }

    /// This error as a failed or refused nena handshake.
    pub fn handshake(self) -> Error {
        match self {
            e @ Error::Handshake(_) => e,
            e => Error::Handshake(Box::new(e)),
        }
    }

    /// The error under its context texts and handshake marker: what kind it is.
    pub fn kind(&self) -> &Error {
        match self {
            Error::During { source, .. } | Error::Handshake(source) => source.kind(),
            e => e,
        }
    }

    /// Whether the session was `doing` this when the error arose (anywhere in its chain
    /// of steps).
    pub fn was_doing(&self, doing: &Doing) -> bool {
        match self {
            Error::During { doing: d, .. } if d == doing => true,
            Error::During { source, .. } | Error::Handshake(source) => source.was_doing(doing),
            _ => false,
        }
    }

    /// Whether the nena handshake failed (anywhere under the context texts).
    pub fn is_handshake(&self) -> bool {
        match self {
            Error::Handshake(_) => true,
            Error::During { source, .. } => source.is_handshake(),
            _ => false,
        }
    }

    /// The outermost message alone.
    fn fmt_top(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::During { doing, .. } => write!(f, "{doing}"),
            Error::Handshake(e) => e.fmt_top(f),
            Error::Proto(e) => write!(f, "{e}"),
            Error::Reply(e) => write!(f, "{e}"),
            Error::Refused(e) => write!(f, "{e}"),
            Error::Refusing(e) => write!(f, "{e}"),
            Error::ShuttingDown(e) => write!(f, "{e}"),
            Error::Session(e) => write!(f, "{e}"),
            Error::Mptcp(e) => write!(f, "{e}"),
            Error::Io(e) => write!(f, "{e}"),
            Error::Transfer(e) => write!(f, "{e}"),
            Error::Unsupported(e) => write!(f, "{e}"),
            Error::Timeout(e) => write!(f, "{e}"),
            Error::Proxy(e) => write!(f, "{e}"),
            Error::KatoMpc(e) => write!(f, "{e}"),
            Error::RefusedBothWays { answer, refusal } => {
                write!(
                    f,
                    "{answer}; and the connection was refused here: {refusal}"
                )
            }
            Error::SpokeFirst { preview } => write!(
                f,
                "peer does not speak nena: it spoke first ({preview}), a nena server waits for \
                 the client's hello; nothing was sent"
            ),
            Error::Socks(e) => write!(f, "{e}"),
            Error::Dns(e) => write!(f, "{e}"),
            Error::Seal(e) => write!(f, "{e}"),
            Error::Wire(e) => write!(f, "{e}"),
            Error::Protocol(e) => write!(f, "protocol error: {e}"),
            Error::Entropy(e) => write!(f, "no randomness from the operating system: {e}"),
            Error::Task(e) => write!(f, "{e}"),
            Error::Interrupted { signal } => write!(f, "interrupted ({signal})"),
            Error::Internal(what) => write!(f, "internal: {what}"),
            Error::Other(e) => write!(f, "{e}"),
        }
    }
}

impl fmt::Display for Error {
    /// `{}`: the outermost message; `{:#}`: the chain on one line, as anyhow prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_top(f)?;
        if f.alternate() {
            let mut next = std::error::Error::source(self);
            while let Some(c) = next {
                write!(f, ": {c}")?;
                next = c.source();
            }
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::During { source, .. } => Some(&**source),
            Error::Handshake(e) => e.source(),
            Error::Proto(e) => e.source(),
            Error::Reply(_) | Error::Refused(_) | Error::Refusing(_) | Error::ShuttingDown(_) => {
                None
            }
            Error::Session(e) => e.source(),
            Error::Mptcp(e) => e.source(),
            Error::Io(e) => e.source(),
            Error::Transfer(_)
            | Error::Unsupported(_)
            | Error::Timeout(_)
            | Error::Proxy(_)
            | Error::KatoMpc(_)
            | Error::RefusedBothWays { .. }
            | Error::SpokeFirst { .. }
            | Error::Protocol(_)
            | Error::Entropy(_)
            | Error::Interrupted { .. }
            | Error::Internal(_) => None,
            Error::Wire(e) => e.source(),
            Error::Socks(e) => e.source(),
            Error::Dns(e) => e.source(),
            Error::Seal(e) => e.source(),
            Error::Task(e) => e.source(),
            Error::Other(e) => e.source(),
        }
    }
}

/// An I/O error is looked into: the protected stream's readers and the proxy's relay must
/// return `io::Error` (AsyncRead, the copy loops), so they carry a [`SessionError`] or the
/// proxy's [`ShuttingDown`] inside one. This is the boundary where those become their own
/// variants (the one place that downcasts an I/O error's payload).
impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        if let Some(se) = session_error_of(&e) {
            return Error::Session(se.clone());
        }
        if ends::is_shutting_down(&e) {
            return Error::ShuttingDown(ShuttingDown);
        }
        Error::Io(e)
    }
}

impl From<anyhow::Error> for Error {
    fn from(e: anyhow::Error) -> Error {
        Error::Other(e)
    }
}

impl From<MsgError> for Error {
    fn from(e: MsgError) -> Error {
        match e {
            MsgError::Io(e) => e.into(),
            MsgError::Wire(e) => Error::Protocol(e),
        }
    }
}

impl From<crate::wire::WireError> for Error {
    fn from(e: crate::wire::WireError) -> Error {
        Error::Wire(e)
    }
}

impl From<HandshakeError> for Error {
    fn from(e: HandshakeError) -> Error {
        Error::Proto(e)
    }
}

impl From<ErrorReply> for Error {
    fn from(e: ErrorReply) -> Error {
        Error::Reply(e)
    }
}

impl From<Refused> for Error {
    fn from(e: Refused) -> Error {
        Error::Refused(e)
    }
}

impl From<Refusing> for Error {
    fn from(e: Refusing) -> Error {
        Error::Refusing(e)
    }
}

impl From<ShuttingDown> for Error {
    fn from(e: ShuttingDown) -> Error {
        Error::ShuttingDown(e)
    }
}

impl From<SessionError> for Error {
    fn from(e: SessionError) -> Error {
        Error::Session(e)
    }
}

impl From<nena_mptcp::MptcpError> for Error {
    fn from(e: nena_mptcp::MptcpError) -> Error {
        Error::Mptcp(e)
    }
}

impl From<tokio::task::JoinError> for Error {
    fn from(e: tokio::task::JoinError) -> Error {
        Error::Task(e)
    }
}

macro_rules! from_cause {
    ($($t:ident),*) => {$(
        impl From<$t> for Error {
            fn from(e: $t) -> Error {
                Error::$t(e)
            }
        }
    )*};
}
from_cause!(Transfer, Unsupported, Timeout, KatoMpc);

impl From<ProxyFault> for Error {
    fn from(e: ProxyFault) -> Error {
        Error::Proxy(e)
    }
}

impl From<crate::wire::target::SocksError> for Error {
    fn from(e: crate::wire::target::SocksError) -> Error {
        Error::Socks(e)
    }
}

impl From<crate::dns::message::DnsError> for Error {
    fn from(e: crate::dns::message::DnsError) -> Error {
        Error::Dns(e)
    }
}

impl From<nena_proto::dgram::seal::SealError> for Error {
    fn from(e: nena_proto::dgram::seal::SealError) -> Error {
        Error::Seal(e)
    }
}

impl From<getrandom::Error> for Error {
    fn from(e: getrandom::Error) -> Error {
        Error::Entropy(e)
    }
}

/// `.during(...)`: what the session was doing, in front of any error that becomes an
/// [`Error`].
pub trait During<T> {
    fn during(self, doing: Doing) -> Result<T>;
}

impl<T, E: Into<Error>> During<T> for std::result::Result<T, E> {
    fn during(self, doing: Doing) -> Result<T> {
        self.map_err(|e| e.into().during(doing))
    }
}

impl From<tokio::time::error::Elapsed> for Error {
    fn from(e: tokio::time::error::Elapsed) -> Error {
        Error::Io(e.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_like_anyhow() {
        let io = io::Error::new(io::ErrorKind::TimedOut, "timed out");
        let ours = Error::from(io)
            .during(Doing::ReceivingFileData)
            .during(Doing::ReadingRequest);
        let theirs = anyhow::Error::new(io::Error::new(io::ErrorKind::TimedOut, "timed out"))
            .context("receiving file data")
            .context("reading the request");
        assert_eq!(format!("{ours:#}"), format!("{theirs:#}"));
        assert_eq!(format!("{ours}"), format!("{theirs}"));
        assert_eq!(
            format!("{:#}", anyhow::Error::new(ours)),
            format!("{theirs:#}")
        );
        let other =
            Error::from(anyhow::anyhow!("inner").context("outer")).during(Doing::SendingRequest);
        assert_eq!(format!("{other:#}"), "sending the request: outer: inner");
        assert_eq!(
            format!("{:#}", anyhow::Error::new(other)),
            "sending the request: outer: inner"
        );
    }

    #[test]
    fn io_errors_carrying_a_session_failure_are_typed() {
        let se = SessionError::AfterClose;
        let e = Error::from(io::Error::other(se.clone())).during(Doing::ReadingVerdict);
        assert!(matches!(e.kind(), Error::Session(s) if *s == se));
        assert!(e.was_doing(&Doing::ReadingVerdict));
        let e = Error::from(io::Error::other(ShuttingDown));
        assert!(matches!(e.kind(), Error::ShuttingDown(_)));
    }
}
