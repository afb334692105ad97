//! What `nena run` carries besides TCP streams: its command's DNS queries and UDP datagrams.
//!
//! - [`resolver`]: the proxy server's side of a DNS session (op 6): each query forwarded to
//!   the first nameserver of its /etc/resolv.conf and the checked answer sent back.
//! - [`responder`]: `nena run`'s and the gateway's side: a DNS responder on loopback (UDP)
//!   and the answer to a redirected TCP connection to port 53, each query carried in a nena
//!   session.
//!
//! Both build, check, frame and exchange their DNS messages with [`crate::dns`].
//! - [`relay`]: datagrams (op 7): `nena run`'s relay on loopback, one nena session per
//!   application socket, and the proxy server's side, which sends each datagram on within
//!   `--allow` from a UDP socket of the session's and returns the replies.
//! - [`plane`]: the datagram plane (op 8): a datagram session's datagrams as sealed UDP on
//!   each path, the session as the fallback; the server's UDP socket and sessions, and the
//!   client's side that the gateway, `nena run` and SOCKS5 UDP ASSOCIATE carry through.

pub mod frames;
pub mod plane;
pub mod relay;
pub mod resolver;
pub mod responder;
