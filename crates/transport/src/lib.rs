//! nena-transport: nena's tools over Multipath TCP.
//!
//! - [`wire`]: the small application protocol inside a nena session (requests, replies,
//!   SHA-256 trailers, chunked perf streams), sans-IO.
//! - [`names`]: which file names from the network the server accepts.
//! - [`stream`]: the protected halves of a session ([`SecureReader`], [`SecureWriter`]).
//! - [`handshake`]: nena-proto's handshake driven over async streams.
//! - [`files`]: PUT/GET of files with verification and write-then-rename.

pub mod files;
pub mod handshake;
pub mod names;
pub mod perf;
pub mod session;
pub mod stream;
pub mod wire;

pub use stream::{SecureReader, SecureWriter};
