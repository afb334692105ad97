//! How a session ends when it does not end well ([`Error`]): one typed error, so that the
//! metrics ([`crate::ops::metrics::Outcome::of`]), the client's retry and the CLI's exit
//! status `match` on what happened instead of searching an error chain.
//!
//! It is typed where a session's errors arise: the file server's sessions and the client
//! tools (`app/`: request, files, verdict, file_client, perf), opening and accepting sessions
//! (`conn::connect`, `conn::accept`), the handshake ([`crate::stream::handshake`]), the
//! pinning check of a server's key ([`crate::keys::ServerKeyCheck`]) and the proxy's
//! sessions (`proxy/`: server, client, open, SOCKS UDP ASSOCIATE, the datagram relay, the
//! DNS resolver and responder). What keeps anyhow is startup and helpers whose failures
//! nobody classifies: listening and the accept loop (`conn::listen`, `conn/accept_loop.rs`),
//! kato-mpc's session setup (`conn/mpc.rs`), key files and `known_servers` I/O, name
//! resolution (`resolve/`), the gateway's setup and its LAN datagram flows (counted by
//! nobody), the metrics endpoint, `baseline::raw_mptcp` and `testing`. Their errors become
//! [`Error::Other`] where they meet a session, printed as before.
//!
//! Printing is anyhow's: `{}` prints the outermost message, `{:#}` the whole chain on one
//! line (`context: cause: ...`), and [`std::error::Error::source`] walks the same chain, so
//! that an [`Error`] turned into an `anyhow::Error` prints the same text. (Display and
//! source are written out rather than derived with thiserror: a derived Display prints one
//! level whatever the `#` flag, and a transparent variant would print its chain twice.)
//!
//! The parts: [`ends`] (how proxy sessions end: refusals and aborts), [`msg`] (how reading a
//! header message fails) and `reply` (the file server's refusal of a request).

pub mod ends;
pub mod hint;
pub mod msg;
mod reply;

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
    /// `context` in front of an error (what `.context(...)` adds); the kind is the
    /// source's.
    Context { context: String, source: Box<Error> },
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
    /// Anything nobody classifies: text for a person.
    Other(anyhow::Error),
}

impl Error {
    /// `context` in front of this error, its kind kept.
    pub fn context(self, context: impl fmt::Display) -> Error {
        Error::Context {
            context: context.to_string(),
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

    /// Text for a person, of no kind of its own.
    pub fn msg(msg: impl fmt::Display + fmt::Debug + Send + Sync + 'static) -> Error {
        Error::Other(anyhow::Error::msg(msg))
    }

    /// The error under its context texts and handshake marker: what kind it is.
    pub fn kind(&self) -> &Error {
        match self {
            Error::Context { source, .. } | Error::Handshake(source) => source.kind(),
            e => e,
        }
    }

    /// Whether the nena handshake failed (anywhere under the context texts).
    pub fn is_handshake(&self) -> bool {
        match self {
            Error::Handshake(_) => true,
            Error::Context { source, .. } => source.is_handshake(),
            _ => false,
        }
    }

    /// The outermost message alone.
    fn fmt_top(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Context { context, .. } => f.write_str(context),
            Error::Handshake(e) => e.fmt_top(f),
            Error::Proto(e) => write!(f, "{e}"),
            Error::Reply(e) => write!(f, "{e}"),
            Error::Refused(e) => write!(f, "{e}"),
            Error::Refusing(e) => write!(f, "{e}"),
            Error::ShuttingDown(e) => write!(f, "{e}"),
            Error::Session(e) => write!(f, "{e}"),
            Error::Mptcp(e) => write!(f, "{e}"),
            Error::Io(e) => write!(f, "{e}"),
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
            Error::Context { source, .. } => Some(&**source),
            Error::Handshake(e) => e.source(),
            Error::Proto(e) => e.source(),
            Error::Reply(_) | Error::Refused(_) | Error::Refusing(_) | Error::ShuttingDown(_) => {
                None
            }
            Error::Session(e) => e.source(),
            Error::Mptcp(e) => e.source(),
            Error::Io(e) => e.source(),
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
            e @ MsgError::Wire(_) => Error::Other(e.into()),
        }
    }
}

impl From<crate::wire::WireError> for Error {
    fn from(e: crate::wire::WireError) -> Error {
        Error::Other(e.into())
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
        Error::Other(e.into())
    }
}

impl From<tokio::time::error::Elapsed> for Error {
    fn from(e: tokio::time::error::Elapsed) -> Error {
        Error::Io(e.into())
    }
}

/// `.context(...)` and `.with_context(...)` that keep the error's kind (anyhow's would
/// turn it into [`Error::Other`]): for any result whose error becomes an [`Error`], and
/// for an `Option` (`None` becomes [`Error::Other`] with the text).
pub trait Context<T> {
    fn context<C: fmt::Display>(self, context: C) -> Result<T>;
    fn with_context<C: fmt::Display, F: FnOnce() -> C>(self, f: F) -> Result<T>;
}

impl<T, E: Into<Error>> Context<T> for std::result::Result<T, E> {
    fn context<C: fmt::Display>(self, context: C) -> Result<T> {
        self.map_err(|e| e.into().context(context))
    }

    fn with_context<C: fmt::Display, F: FnOnce() -> C>(self, f: F) -> Result<T> {
        self.map_err(|e| e.into().context(f()))
    }
}

impl<T> Context<T> for Option<T> {
    fn context<C: fmt::Display>(self, context: C) -> Result<T> {
        self.ok_or_else(|| Error::msg(context.to_string()))
    }

    fn with_context<C: fmt::Display, F: FnOnce() -> C>(self, f: F) -> Result<T> {
        self.ok_or_else(|| Error::msg(f().to_string()))
    }
}

/// `anyhow::bail!` for a function that returns an [`Error`]: an [`Error::Other`] with the
/// text.
macro_rules! bail {
    ($($t:tt)*) => {
        return Err($crate::error::Error::Other(anyhow::anyhow!($($t)*)))
    };
}
pub(crate) use bail;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_like_anyhow() {
        let io = io::Error::new(io::ErrorKind::TimedOut, "timed out");
        let ours = Error::from(io).context("reading").context("serving");
        let theirs = anyhow::Error::new(io::Error::new(io::ErrorKind::TimedOut, "timed out"))
            .context("reading")
            .context("serving");
        assert_eq!(format!("{ours:#}"), format!("{theirs:#}"));
        assert_eq!(format!("{ours}"), format!("{theirs}"));
        assert_eq!(
            format!("{:#}", anyhow::Error::new(ours)),
            format!("{theirs:#}")
        );
        let other = Error::from(anyhow::anyhow!("inner").context("outer")).context("top");
        assert_eq!(format!("{other:#}"), "top: outer: inner");
        assert_eq!(
            format!("{:#}", anyhow::Error::new(other)),
            "top: outer: inner"
        );
    }

    #[test]
    fn io_errors_carrying_a_session_failure_are_typed() {
        let se = SessionError::AfterClose;
        let e = Error::from(io::Error::other(se.clone())).context("reading");
        assert!(matches!(e.kind(), Error::Session(s) if *s == se));
        let e = Error::from(io::Error::other(ShuttingDown));
        assert!(matches!(e.kind(), Error::ShuttingDown(_)));
    }
}
