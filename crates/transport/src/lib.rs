//! nena-transport: nena's tools over Multipath TCP.
//!
//! The core of a session:
//!
//! - [`wire`]: the small application protocol inside a nena session (requests, replies,
//!   SHA-256 trailers, chunked perf streams), sans-IO.
//! - [`stream`]: the protected halves of a session ([`SecureReader`], [`SecureWriter`]);
//!   [`stream::copy`]: the copy loops between them and plain sources and sinks;
//!   [`stream::low_water`]: the socket's receive low-water mark; [`stream::handshake`]:
//!   nena-proto's handshake driven over async streams.
//! - [`error`]: how a session fails ([`Error`]), typed so that the metrics, the client's
//!   retry and the CLI's exit status match on it; startup code keeps anyhow;
//!   [`error::msg`]: how reading a header message fails.
//! - [`conn`]: opening sessions over kernel MPTCP (client gate, server accept).
//! - [`keys`]: the server's key file, the client's `known_servers` (pinning) and the access
//!   token file.
//! - [`resolve`]: server names resolved only by queries that leave by a trusted interface.
//! - [`dns`]: DNS messages (built, checked, framed), the exchange with a resolver and
//!   resolv.conf, for the names resolver, `nena run`'s and the gateway's responder and the
//!   proxy server's resolver.
//!
//! The rooms of what sessions are used for:
//!
//! - [`app`]: the tools behind `nena send|get|perf|serve`: the file server and its sessions,
//!   the client tools, file transfer (PUT/GET, file names, the receiver's verdict), perf.
//! - [`proxy`]: `nena proxy` (client, server, bridge, SOCKS5), `nena run`'s DNS responder
//!   and datagram relay ([`proxy::carry`]) and `nena gateway` ([`proxy::gateway`]).
//! - [`ops`]: running a server: access rules, `--metrics`, clean stops.
//! - `launch` (with the `launch` feature, which brings in nena-bpf): `nena run`'s launcher,
//!   a guard that runs a command in a cgroup of its own whose traffic nena carries (its
//!   mount namespace, privilege drop, watchdog and supervision).
//! - [`baseline`]: what `nena bench` runs that is part of the product: the plain-MPTCP
//!   baseline of `nena bench transfer` and of the scenario runner ([`baseline::raw_mptcp`]),
//!   the echo target and per-session payloads of `nena bench sessions` ([`baseline::load`]).
//!
//! Leaves and aids:
//!
//! - [`text`]: text as people read it, a leaf every layer may use: text from a peer with its
//!   control characters escaped ([`text::printable`]), byte counts (`human`, [`text::units`]).
//! - `testing` (with the `testing` feature, or in this crate's tests; never in the release
//!   binary): load helpers for the integration tests (many sessions at once), and
//!   `testing::pair`: a client and a server session joined in memory after the real
//!   handshake, with a tap on the wire, for the proxy's sessions tested without root.

pub mod app;
pub mod baseline;
pub mod conn;
pub mod dns;
pub mod error;
pub mod keys;
#[cfg(feature = "launch")]
pub mod launch;
pub mod ops;
pub mod proxy;
pub mod resolve;
pub mod stream;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod text;
pub mod wire;

pub use error::{Error, Result};
pub use stream::{SecureReader, SecureWriter};
