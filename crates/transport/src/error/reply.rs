//! The file server's refusal of a request as an error: the reply it sends and the line it
//! logs ([`ErrorReply`]), made by the access checks (`crate::ops::access`), whose module
//! re-exports it.

use crate::wire::Status;

/// A session the server ended with an error reply: the reply's status (what the session
/// counts as in `--metrics`) and the line the server logs.
#[derive(Debug)]
pub struct ErrorReply {
    pub status: Status,
    pub log: String,
}

impl ErrorReply {
    pub fn new(status: Status, log: impl Into<String>) -> ErrorReply {
        ErrorReply {
            status,
            log: log.into(),
        }
    }
}

impl std::fmt::Display for ErrorReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.log)
    }
}

impl std::error::Error for ErrorReply {}
