//! DNS, once for all of nena: the names resolver ([`crate::resolve`]: a server's name, asked
//! only by a trusted interface), `nena run`'s and the gateway's responder and the proxy
//! server's resolver that answers it ([`crate::proxy::carry`]) all build, check, frame and
//! exchange their messages here.
//!
//! - [`message`] (sans-IO): the query nena asks, the query a responder takes
//!   ([`check_query`]), the one answer check ([`check_answer`]: ID, question echoed, a
//!   response; its response code and TC for the caller) and the addresses an answer gives
//!   ([`addresses`]: no error code, the CNAME chain followed).
//! - [`reply`] (sans-IO): SERVFAIL, and an answer cut to what an application takes over UDP.
//! - [`conf`] (sans-IO): the nameservers of a resolv.conf.
//! - [`frame`]: messages framed as over TCP on async streams (the framing itself is the
//!   wire layer's [`DnsFrame`](crate::wire::dns_udp::DnsFrame), since a nena DNS session
//!   carries it).
//! - [`exchange`]: one query to a resolver, UDP then TCP when truncated, bound to an
//!   interface where the caller asks.
//! - [`fuzzing`]: the fuzz target's body for the parsers, also run by property tests.
//!
//! hickory-proto encodes and parses the messages; this room holds what nena decides.

pub mod conf;
pub mod exchange;
pub mod frame;
pub mod fuzzing;
pub mod message;
pub mod reply;

pub use conf::nameservers;
pub use exchange::{exchange, random_id, ExchangeError, Step, QUERY_TIMEOUT};
pub use frame::{read_frame, write_frame};
pub use message::{
    addresses, check_answer, check_query, name, query, Checked, DnsError, Family, Question,
};
pub use reply::{fit_udp, servfail, udp_limit};

#[cfg(test)]
mod tests;
