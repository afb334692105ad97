//! How a session ended, as `--metrics` counts it ([`Outcome`]), and the cause labels of
//! refusals.

use crate::error::Error;
use crate::wire::Status;

/// How a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Done, verified.
    Ok,
    /// Refused before any data (its cause in `nena_refusals_total`).
    Refused(&'static str),
    /// The protected stream or a file's tag did not verify, or the stream was cut
    /// (counted in `nena_integrity_failures_total` too).
    Integrity,
    /// Cut by the command's stop (SIGTERM/SIGINT beyond the grace).
    Aborted,
    /// Anything else: the peer went away, a timeout, an I/O error.
    Failed,
    /// Ended by the client before any request: a session opened ahead and given back
    /// ([`ProxyFault::Unused`](crate::error::ProxyFault::Unused)).
    Unused,
}

impl Outcome {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Refused(_) => "refused",
            Outcome::Integrity => "integrity_failure",
            Outcome::Aborted => "aborted",
            Outcome::Failed => "failed",
            Outcome::Unused => "unused",
        }
    }

    /// What a failed session's error says about how it ended: a failed handshake, an
    /// error reply the server sent ([`ErrorReply`](crate::ops::access::ErrorReply)), a
    /// refusal of the proxy server, a stop, a session failure of the protected stream, or
    /// else a plain failure.
    pub fn of(e: &Error) -> Outcome {
        if e.is_handshake() {
            return Outcome::Refused("handshake");
        }
        match e.kind() {
            Error::Reply(r) => Outcome::of_status(r.status),
            Error::Refused(r) => Outcome::Refused(refusal_cause(r.0.code, &r.0.msg)),
            Error::Refusing(r) => Outcome::Refused(refusal_cause(r.code, &r.msg)),
            Error::ShuttingDown(_) => Outcome::Aborted,
            Error::Proxy(crate::error::ProxyFault::Unused) => Outcome::Unused,
            Error::Session(se) => {
                use nena_proto::SessionError::*;
                match se {
                    Integrity { .. } | AfterClose | Truncated { .. } | ClientConfirm(_) => {
                        Outcome::Integrity
                    }
                    PeerAborted { .. } => Outcome::Aborted,
                    _ => Outcome::Failed,
                }
            }
            _ => Outcome::Failed,
        }
    }

    /// The outcome of a session the server answered with `status`.
    pub fn of_status(status: Status) -> Outcome {
        match status {
            Status::Ok => Outcome::Ok,
            Status::Corrupt => Outcome::Integrity,
            Status::ShuttingDown => Outcome::Aborted,
            Status::ServerError => Outcome::Failed,
            Status::BadName => Outcome::Refused("bad_name"),
            Status::Exists => Outcome::Refused("exists"),
            Status::NotFound => Outcome::Refused("not_found"),
            Status::Refused => Outcome::Refused("refused"),
            Status::AccessDenied => Outcome::Refused("access_denied"),
            Status::TooLarge => Outcome::Refused("file_too_large"),
            Status::NoSpace => Outcome::Refused("not_enough_space"),
        }
    }
}

/// The cause label of a proxy server's refusal (its SOCKS reply code and reason).
pub fn refusal_cause(code: crate::wire::target::Rep, msg: &str) -> &'static str {
    use crate::wire::target::Rep;
    if msg == crate::ops::access::DENIED {
        return "access_denied";
    }
    match code {
        Rep::NotAllowed => "not_allowed",
        Rep::NetworkUnreachable => "network_unreachable",
        Rep::HostUnreachable => "host_unreachable",
        Rep::ConnectionRefused => "connection_refused",
        _ => "other",
    }
}
