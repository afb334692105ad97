//! The two halves of a nena session's byte stream as async streams: [`SecureReader`]
//! (`AsyncRead` + `AsyncBufRead`) opens what the peer sent, [`SecureWriter`] (`AsyncWrite`)
//! protects what we send. Every mode goes through the session's sans-IO
//! [`Protector`]/[`Unprotector`] (nena-proto); a `None` one is a raw stream (the plain-MPTCP
//! baseline of the benchmark).
//!
//! **Zero copy where the mode allows it.** In place (kato, stream, raw), `poll_read` reads
//! straight into the caller's buffer and opens it there. The writer's fast path is
//! [`SecureWriter::reserve`] / [`SecureWriter::commit`]: the caller fills the writer's own
//! buffer (a file read lands there directly), and `commit` protects it in place: for `aead`
//! the space is the payload of the record being built, so the record is sealed where it lies.
//! `poll_write` in place protects the caller's bytes on their way into the buffer (one pass:
//! the keystream or the scrambling reads the source and writes the buffer, no copy first).
//! [`copy_in`](copy::copy_in) and [`copy_out`](copy::copy_out) move bytes between a plain
//! stream and a session that way.
//!
//! **Cancel safety.** Bytes are protected exactly once, when the writer accepts them
//! (`poll_write` returning `Ok(n)`, or `commit`), and they stay in the writer's buffer until
//! the socket took them; a dropped write, flush or reserve future loses nothing and
//! transforms nothing twice. Reads open a unit (in place, a record) in one synchronous step.
//!
//! **Ends.** `poll_shutdown` seals what is pending, sends the closing record (`aead`), flushes
//! and half-closes. A reader reports end of stream only when the session says the end is
//! clean: for `aead` after the peer's closing record, else an error (truncation). An integrity
//! failure is an `InvalidData` error whose message starts with "integrity check failed", and
//! no byte of the failing record is returned.
//!
//! The parts: the reader and the writer (re-exported here), [`copy`] (the copy loops between
//! a session and plain sources and sinks), [`low_water`] (the socket's receive low-water
//! mark), [`handshake`] (nena-proto's handshake driven over async streams, which yields the
//! two halves); how reading a header message fails is [`crate::error::msg`]'s, re-exported
//! here.

pub mod copy;
pub mod handshake;
pub mod low_water;
mod pool;
mod reader;
mod writer;

pub use crate::error::msg::{session_error_of, MsgError};
use nena_proto::SessionError;
pub use reader::SecureReader;
use std::io;
pub(crate) use writer::poll_read_first;
pub use writer::SecureWriter;

/// Buffer of one direction for bulk transfers (files, perf).
pub const BULK_BUF: usize = 256 * 1024;
/// Buffer of one proxy direction (many sessions at once; one record and change).
pub const PROXY_BUF: usize = 64 * 1024;
/// Longest header message ([`RequestMsg`] or [`Reply`]) we are willing to buffer.
const MAX_HEADER: usize = 2048;

/// An error of the protected stream as an `io::Error` (`InvalidData`, the session's message).
fn session_error(e: SessionError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

#[cfg(test)]
mod tests;
