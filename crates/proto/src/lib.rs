//! nena-proto: nena's in-band session handshake, sans-IO (bytes in, bytes out).
//!
//! Before any application byte, the client writes a hello (magic, version, the
//! modes it offers in preference order, and for each mode the key material it
//! needs, one key per direction); the server answers with the chosen mode or a
//! reason for refusing, and no secret. From the next byte on, both directions
//! go through the chosen mode's [`Session`]. Wire format, state machines and
//! failure cases: docs/PROTOCOL.md.
//!
//! What the I/O layer (the transport) must do around it:
//! - client: write [`ClientHandshake::first_flight`] first, on the trusted
//!   subflow only, and write nothing else until `read` returns `Done`; no
//!   untrusted subflow may carry data before then (docs/PROTOCOL.md, "Why no
//!   key byte can cross an untrusted path");
//! - server: feed input to [`ServerHandshake::read`]; on `Done` write the reply,
//!   on `Err(Rejected)` write `reply` if present and close;
//! - both: on `Done { consumed, .. }` the input bytes after `consumed` are
//!   session data for [`Session::unprotect`]; on end of stream before `Done`,
//!   report `eof()`; bound the wait with a timeout (there is no clock here);
//! - `entropy` must be fresh OS randomness for every connection.
//!
//! ```
//! use nena_proto::*;
//! // Real code takes fresh OS randomness for every connection (e.g. getrandom).
//! let entropy: [u8; 32] = std::array::from_fn(|i| i as u8 * 7 + 1);
//! let mut client = ClientHandshake::new(&ClientConfig::default(), entropy).unwrap();
//! let mut server = ServerHandshake::new(&ServerConfig::default());
//! let Ok(Progress::Done { value: (reply, mut s_sess), .. }) = server.read(client.first_flight()) else { panic!() };
//! let Ok(Progress::Done { value: mut c_sess, .. }) = client.read(&reply) else { panic!() };
//! let mut msg = *b"hello";
//! c_sess.protect(&mut msg);
//! s_sess.unprotect(&mut msg);
//! assert_eq!(&msg, b"hello");
//! ```

mod client;
mod error;
pub mod fuzzing;
mod mode;
mod server;
mod session;
pub mod wire;

pub use client::{ClientConfig, ClientHandshake, ENTROPY_LEN};
pub use error::{HandshakeError, RejectReason, Rejected};
pub use mode::{Mode, ParseModeError, KATO_KEY_LEN};
pub use server::{ServerConfig, ServerHandshake};
pub use session::{Protector, Role, Session, Unprotector};

/// What [`ServerHandshake::read`] returns on success: the reply to write and the session.
pub type ServerProgress = Progress<(Vec<u8>, Session)>;

/// Result of feeding bytes to a handshake.
#[derive(Debug, PartialEq, Eq)]
pub enum Progress<T> {
    /// The message is not complete yet; all `consumed` (= every input byte) were buffered.
    NeedMore { consumed: usize },
    /// The message is complete. The first `consumed` input bytes belonged to the
    /// handshake; any further input bytes are session data (to unprotect).
    Done { consumed: usize, value: T },
}
