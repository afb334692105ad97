//! SOCKS5 for `nena proxy client --socks5` and the allow-list of `nena proxy server --allow`,
//! sans-IO (bytes in, requests, replies and decisions out).
//!
//! - [`Handshake`]: the server side of RFC 1928 (version 5, CONNECT and UDP ASSOCIATE; ATYP
//!   IPv4, domain name, IPv6) with the methods "no authentication" and username/password
//!   (RFC 1929) when [`Users`] are configured. Feed it what the application sent; it says what
//!   to answer and, at the end, which command and destination the application asked for.
//! - [`UdpPacket`]: the header of a UDP ASSOCIATE datagram (RFC 1928 section 7), parsed from
//!   what arrives from the network ([`UdpPacket::parse`]) and put in front of a reply
//!   ([`UdpPacket::encode`]).
//! - [`Target`]: a requested destination (an address or a domain name, and a port), also
//!   carried to the proxy server inside the nena session ([`crate::wire::ConnectRequest`]).
//! - [`AllowRule`] / [`AllowList`]: `CIDR[:PORT[-PORT]]` rules; the proxy server forwards to an
//!   address only if a rule permits it (domain names are resolved first; the resolved address
//!   is what is checked). An empty list permits nothing.
//! - [`Rep`]: the reply codes of RFC 1928 section 6.
//! - `associate` (private): the proxy client's UDP ASSOCIATE, its datagrams carried in a
//!   datagram session (op 7) of [`crate::proxy::carry`].
//!
//! The parts: [`message`] (constants, [`Rep`], [`Target`], [`SocksError`]), [`handshake`]
//! ([`Handshake`], [`Users`]), [`udp`] ([`UdpPacket`]), [`allow`] ([`AllowRule`],
//! [`AllowList`]), [`fuzzing`].

pub mod allow;
pub(crate) mod associate;
pub mod fuzzing;
pub mod handshake;
#[cfg(test)]
mod tests;
pub mod udp;

/// The messages both sides share: the wire's ([`crate::wire::target`]).
pub use crate::wire::target as message;

pub use allow::{AllowList, AllowRule};
pub use handshake::{Command, Handshake, Progress, Users};
pub use message::{
    reply, Host, Rep, SocksError, Target, ATYP_DOMAIN, ATYP_IPV4, ATYP_IPV6, CMD_CONNECT,
    CMD_UDP_ASSOCIATE, METHOD_NONE, METHOD_NO_ACCEPTABLE, METHOD_USERPASS, USERPASS_VERSION,
    VERSION,
};
pub use udp::{UdpError, UdpPacket, MAX_UDP_PAYLOAD};
