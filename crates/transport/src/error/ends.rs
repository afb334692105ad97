//! How proxy sessions end when they do not end well, as typed errors that the logs print and
//! `--metrics` tells apart (crate::ops::metrics::Outcome): the proxy server's refusal as it logs
//! it, the refusal as the proxy client reads it, and the abort of a stopping proxy. Causes of
//! [`crate::Error`], below the proxy that raises them (which re-exports them as `proxy::ends`).

use crate::wire::target::Rep;
use crate::wire::ConnectReply;

/// The proxy server's refusal of a session, as it logs it (the client was sent `code`
/// and `msg`).
#[derive(Debug)]
pub struct Refusing {
    pub code: Rep,
    pub msg: String,
    /// "CONNECT destination" or "session".
    pub what: String,
}

impl std::fmt::Display for Refusing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} refused: {} ({})", self.what, self.code, self.msg)
    }
}

impl std::error::Error for Refusing {}

/// The error of a session aborted because the proxy is stopping.
#[derive(Debug)]
pub struct ShuttingDown;

impl std::fmt::Display for ShuttingDown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the proxy is shutting down: session reset on both sides")
    }
}

impl std::error::Error for ShuttingDown {}

/// The proxy server refused a session it was asked to open (its [`ConnectReply`]).
#[derive(Debug)]
pub struct Refused(pub ConnectReply);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the proxy server refused the session: \"{}\" ({})",
            self.0.code, self.0.msg
        )
    }
}

impl std::error::Error for Refused {}

/// Whether an I/O error is a stopping proxy's [`ShuttingDown`].
pub(crate) fn is_shutting_down(e: &std::io::Error) -> bool {
    e.get_ref().is_some_and(|x| x.is::<ShuttingDown>())
}
