//! How reading one of the protocol's header messages (a request, a reply, an open request)
//! fails ([`MsgError`]), and the protected stream's own failure inside an I/O error
//! ([`session_error_of`]): the proxy tells the peer of an altered opening from it, and
//! [`crate::Error`] takes it out of an I/O error into its own variant (which the client's
//! retry and the metrics match on). Used by [`crate::stream::SecureReader`]'s message
//! readers.

use crate::wire::WireError;
use nena_proto::SessionError;
use std::io;

/// Reading a header message failed. Each variant prints its cause once: the message is the
/// cause's own (`Io`) or names it and does not also chain it as a source (`Wire`), so that
/// `{:#}` does not repeat it.
#[derive(Debug, thiserror::Error)]
pub enum MsgError {
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error("protocol error: {0}")]
    Wire(WireError),
}

/// The peer ended its side (cleanly: in aead mode with its closing record) before sending
/// any byte of the message awaited: a client that gave a session back unused (a session
/// opened ahead, replaced before it expired), not a broken one.
#[derive(Debug, thiserror::Error)]
#[error("connection closed while waiting for the {what}")]
pub struct EndedBefore {
    pub what: String,
}

impl MsgError {
    /// Whether the peer ended its side before any byte of the awaited message
    /// ([`EndedBefore`]).
    pub fn ended_before_any(&self) -> bool {
        matches!(self, MsgError::Io(e) if e.get_ref().is_some_and(|i| i.is::<EndedBefore>()))
    }

    /// The protected stream's own failure behind this one, if it is one.
    pub fn session_error(&self) -> Option<&SessionError> {
        match self {
            MsgError::Io(e) => session_error_of(e),
            MsgError::Wire(_) => None,
        }
    }
}

/// The protected stream's failure carried by an I/O error of a
/// [`SecureReader`](crate::stream::SecureReader), if any.
/// The one downcast of the stream layer: AsyncRead must return `io::Error`, so the
/// reader carries its [`SessionError`] inside one.
pub fn session_error_of(e: &io::Error) -> Option<&SessionError> {
    e.get_ref().and_then(|i| i.downcast_ref::<SessionError>())
}

impl From<WireError> for MsgError {
    fn from(e: WireError) -> Self {
        MsgError::Wire(e)
    }
}
