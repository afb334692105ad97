//! nena-transport: nena's tools over Multipath TCP.
//!
//! - [`wire`]: the small application protocol inside a nena session (requests, replies,
//!   SHA-256 trailers, chunked perf streams), sans-IO.
//! - [`names`]: which file names from the network the server accepts.
//! - [`access`]: what a server lets a client do (access token, read-only / write-only, file
//!   size and free space), sans-IO.
//! - [`stream`]: the protected halves of a session ([`SecureReader`], [`SecureWriter`]).
//! - [`handshake`]: nena-proto's handshake driven over async streams.
//! - [`conn`]: opening sessions over kernel MPTCP (client gate, server accept).
//! - [`files`], [`perf`], [`session`]: what a session does (PUT/GET, perf tests);
//!   [`verdict`]: the tagged verdict of a file's receiver.
//! - [`client`], [`server`], [`proxy`]: the tools behind `nena send|get|perf|serve|proxy`;
//!   [`bridge`]: how a proxy session carries bytes between TCP and nena, and how it ends.
//! - [`gateway`]: `nena gateway`, a router that carries its LAN's TCP through nena
//!   (nftables TPROXY) and forwards nothing of the LAN around it.
//! - [`stop`]: stopping a server cleanly (SIGINT/SIGTERM, the grace period's end).
//! - [`socks`]: SOCKS5 (RFC 1928/1929) for `nena proxy client --socks5` and the proxy
//!   server's `--allow` list, sans-IO; `socks_udp` (private): the proxy client's UDP
//!   ASSOCIATE, its datagrams carried in a datagram session (op 7) of [`carry`].
//! - [`raw_mptcp`]: the plain-MPTCP baseline of `nena bench transfer` (nena-bench's
//!   `transfer`) and of the scenario runner.
//! - [`carry`]: `nena run`'s DNS responder and datagram relay, and the proxy server's
//!   side of them (its resolver, datagrams within `--allow`).
//! - [`resolve`]: server names resolved only by queries that leave by a trusted interface.
//! - [`printable`]: text from a peer with its control characters escaped, for printing.
//! - [`server_keys`]: the server's key file and the client's `known_servers` (pinning).
//! - [`units`]: byte counts as people read them (`human`), a leaf every layer may use.
//! - [`testing`]: load helpers for the integration tests (echo target, many sessions).

pub mod access;
pub mod bridge;
pub mod carry;
pub mod client;
pub mod conn;
pub mod copy;
pub mod ends;
pub mod files;
pub mod gateway;
pub mod handshake;
pub mod low_water;
pub mod metrics;
pub mod msg_error;
pub mod names;
pub mod perf;
pub mod printable;
pub mod proxy;
mod proxy_open;
pub mod raw_mptcp;
pub mod resolve;
pub mod server;
pub mod server_keys;
pub mod session;
pub mod socks;
mod socks_udp;
pub mod stop;
pub mod stream;
pub mod testing;
pub mod units;
pub mod verdict;
#[cfg(test)]
mod verdict_forge_tests;
pub mod warm;
pub mod wire;

pub use stream::{SecureReader, SecureWriter};
