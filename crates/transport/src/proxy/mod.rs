//! `nena proxy`: plain TCP in, nena over MPTCP between two proxies, plain TCP out.
//!
//! ```text
//! app ──TCP──> proxy client ══nena/MPTCP══> proxy server ──TCP──> target
//! ```
//!
//! Each session is one task relaying both directions at once (copy_bidirectional style,
//! through the session's own zero-copy pumps [`crate::stream::copy::copy_in`] and
//! [`crate::stream::copy::copy_out`]): nothing is queued beyond the session's buffers, so a
//! slow side slows the other down (back-pressure) and memory is bounded by sessions x 2 x
//! [`crate::stream::PROXY_BUF`]. When one side ends its direction cleanly, the proxy ends
//! the same direction on the other side (half-close; in `aead` mode with the closing
//! record) and keeps the other direction going until it ends too. A plain peer that goes
//! away (resets, or closes without reading the rest, as iperf3 does at the end of a test)
//! ends the session cleanly, not as a failure (see [`bridge()`]). When the nena side fails
//! (an integrity failure, a truncated `aead` stream), the plain side is **reset**, not
//! closed, so that the application sees an error instead of a short but seemingly complete
//! stream. With `--forward` the proxy uses the nena handshake and then raw bytes: no
//! application header, so a client cannot choose where the proxy server connects: every
//! session goes to its one `--forward` target. Each end logs, per session, the mode and the
//! bytes per subflow.
//!
//! SOCKS5 (`--socks5` on the client, `--allow` on the server): the client speaks SOCKS5 to
//! the application ([`crate::proxy::socks::Handshake`]), opens one nena session per CONNECT
//! and sends the destination inside it ([`crate::wire::ConnectRequest`]); the server resolves it,
//! connects only to addresses its `--allow` list permits and answers with a SOCKS reply code
//! ([`crate::wire::ConnectReply`]), which the client passes on to the application. A UDP
//! ASSOCIATE gets a UDP socket of the client's and one datagram session (op 7) for its
//! datagrams (`socks::associate`), sent on by the server within the same
//! `--allow` list. A server without `--forward` and without `--allow` refuses every request
//! (never an open relay).
//!
//! The room:
//!
//! - [`client`], [`server`]: the two proxy ends; [`listen`]: what they share (limits, the
//!   accept loop); `open` (private): the client's side of a session's opening.
//! - [`mod@bridge`]: how a proxy session carries bytes between TCP and nena, and how it ends;
//!   [`ends`]: how proxy sessions end when they do not end well, as typed errors.
//! - [`socks`]: SOCKS5 (RFC 1928/1929) for `--socks5` and the server's `--allow` list,
//!   sans-IO, and the proxy client's UDP ASSOCIATE.
//! - [`carry`]: `nena run`'s DNS responder and datagram relay, and the proxy server's side
//!   of them.
//! - [`gateway`]: `nena gateway`, a router that carries its LAN's TCP through nena
//!   (nftables TPROXY); [`warm`]: sessions it opens ahead of the flows that take them.

pub mod bridge;
pub mod carry;
pub mod client;
/// How proxy sessions end when they do not end well: [`crate::error::ends`].
pub use crate::error::ends;
pub mod gateway;
pub mod listen;
mod open;
pub mod server;
pub mod socks;
pub mod warm;

pub use bridge::{bridge, Bridged, DRAIN_AFTER_PLAIN_RESET};
pub use client::{
    run_client, run_client_with, serve_client, Entry, OriginalDst, SOCKS_HANDSHAKE_TIMEOUT,
};
pub use ends::{Refused, Refusing, ShuttingDown};
pub use listen::{ProxyLimits, ProxyStats};
pub use server::{run_server_with, Egress};
