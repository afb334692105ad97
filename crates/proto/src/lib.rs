//! nena-proto: nena's in-band session handshake and the protection of the byte stream
//! after it, sans-IO (bytes in, bytes out: no sockets, no clock, no random number generator).
//!
//! Before any application byte, the client writes a hello (magic, version, the modes it
//! offers in preference order, and for each mode its key material: kato's two keys, or for
//! the cryptographic modes `stream` and `aead` one hybrid key share, an ML-KEM-768
//! encapsulation key and an X25519 share, and a random `r_c`); the server answers with the
//! chosen mode (and, when the client offered key agreement, the ML-KEM ciphertext, its
//! X25519 share, its long-term public key with its signature over the handshake, and a key
//! confirmation) or a reason for refusing. In a cryptographic mode the
//! client then sends its own key confirmation. From then on both directions go through the
//! chosen mode's [`Session`]. Wire format, key schedule, state machines and failure cases:
//! docs/PROTOCOL.md; what each mode protects against: docs/THREAT-MODEL.md.
//!
//! `kato-mpc` ([`mpc`]) has no hello: the papers' negotiation on the SYN and SYN-ACK (by
//! nena's BPF programs), the keys from MPTCP's; [`mpc::decide`] turns what the programs saw
//! into a kato session or a plain one, alike on both sides.
//!
//! What the I/O layer (the transport) must do around it:
//! - client: write [`ClientHandshake::first_flight`] first, on the trusted subflow only,
//!   and write nothing else until `read` returns `Done`; no untrusted subflow may carry
//!   data before then (docs/PROTOCOL.md, "Why no key byte can cross an untrusted path");
//!   on `Done { value: (confirm, session) }` write `confirm` first;
//! - server: feed input to [`ServerHandshake::read`]; on `Done` write the reply, on
//!   `Err(Rejected)` write `reply` if present and close;
//! - both: on `Done { consumed, .. }` the input bytes after `consumed` are session data for
//!   the [`Unprotector`]; on end of stream before `Done`, report `eof()`; bound the wait
//!   with a timeout (there is no clock here);
//! - entropy must be fresh OS randomness for every connection, on both sides.
//!
//! ```
//! use nena_proto::*;
//! // Real code takes fresh OS randomness for every connection (e.g. getrandom).
//! let entropy: [u8; ENTROPY_LEN] = std::array::from_fn(|i| (i as u8).wrapping_mul(7) ^ 0x5a);
//! let mut client = ClientHandshake::new(&ClientConfig::default(), entropy).unwrap();
//! // A server's long-term key (real servers load theirs from their key file).
//! let key = ServerKey::from_seed(&[7; 32]).unwrap();
//! let mut server = ServerHandshake::new(&ServerConfig::default().with_key(key), [9; SERVER_ENTROPY_LEN]);
//! let Ok(Progress::Done { value: (reply, s_sess), .. }) = server.read(client.first_flight()) else { panic!() };
//! let Ok(Progress::Done { value: (confirm, c_sess), .. }) = client.read(&reply) else { panic!() };
//! assert_eq!(c_sess.mode(), Mode::Aead);
//! let (mut tx, _) = c_sess.split();
//! let (_, mut rx) = s_sess.split();
//! // The client's confirmation, then one record.
//! let mut wire = confirm;
//! let mut rec = vec![0u8; tx.header_len() + 5 + tx.trailer_len()];
//! rec[tx.header_len()..tx.header_len() + 5].copy_from_slice(b"hello");
//! let n = tx.seal(&mut rec, 5);
//! wire.extend_from_slice(&rec[..n]);
//! let Ok(Opened::Data { consumed, .. }) = rx.open(&mut wire) else { panic!() };
//! let Ok(Opened::Data { plain, .. }) = rx.open(&mut wire[consumed..]) else { panic!() };
//! assert_eq!(&wire[consumed..][plain], b"hello");
//! ```

pub mod appmac;
mod cipher;
mod client;
pub mod dgram;
mod error;
mod exchange;
pub mod fuzzing;
pub mod hybrid;
pub mod identity;
pub mod keys;
mod magic;
mod mode;
pub mod mpc;
pub mod record;
pub mod resume;
mod server;
mod session;
mod stack;
pub mod v1_reference;
pub mod wire;

#[cfg(test)]
mod redaction_tests;

pub use cipher::{
    cpu_has_aes, AesCtrImpl, Keystream, RecordCipher, Suite, AEAD_TAG_LEN, AWS_LC_CTR_FROM,
};
pub use client::{ClientConfig, ClientHandshake, ENTROPY_LEN};
pub use error::{AbortReason, HandshakeError, KeyText, RejectReason, Rejected, SessionError};
pub use exchange::{exchange, exchange_in, test_server_key, Exchange};
pub use identity::{PublicKey, ServerKey, SERVER_KEY_LEN};
pub use mode::{Mode, ParseModeError, CRYPTO_OFFER_LEN, KATO_KEY_LEN};
pub use mpc::{MpcDecision, MpcKeys, MpcObservation};
pub use record::Opened;
pub use resume::{ResumeRefusal, Resumption, StoreLimits, Ticket, TicketStore};
pub use server::{ServerConfig, ServerHandshake, SERVER_ENTROPY_LEN};
pub use session::{Protector, Role, Session, SessionInfo, Unprotector};

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
