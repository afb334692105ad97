//! How reading one of the protocol's header messages (a request, a reply, an open request)
//! fails ([`MsgError`]), and the protected stream's own failure behind an error
//! ([`session_error_of`] for an I/O error, [`session_failure`] along an error's chain): the
//! proxy tells the peer of an altered opening from it, the client retries on it, the metrics
//! classify a session's end by it. Used by [`crate::stream::SecureReader`]'s message readers.

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

impl MsgError {
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
pub fn session_error_of(e: &io::Error) -> Option<&SessionError> {
    e.get_ref().and_then(|i| i.downcast_ref::<SessionError>())
}

/// The protected stream's failure (integrity, confirmation, truncation, the peer's abort)
/// behind an error, if any: carried by an I/O error or by a [`MsgError`] in its chain.
pub fn session_failure(e: &anyhow::Error) -> Option<&SessionError> {
    e.chain().find_map(|c| {
        c.downcast_ref::<MsgError>()
            .and_then(MsgError::session_error)
            .or_else(|| c.downcast_ref::<io::Error>().and_then(session_error_of))
    })
}

impl From<WireError> for MsgError {
    fn from(e: WireError) -> Self {
        MsgError::Wire(e)
    }
}
