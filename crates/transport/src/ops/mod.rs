//! How a server is run and watched: what it lets a client do ([`access`]), what it counts
//! for `--metrics` ([`metrics`], served by [`http`]), whether it holds the capabilities it needs
//! ([`privilege`]), how it stops cleanly ([`stop`]) and what `nena status` asks it
//! ([`status`]).

pub mod access;
pub mod http;
pub mod metrics;
pub mod privilege;
pub mod status;
/// How a server stops cleanly: [`crate::conn::stop`], where its accept loop waits on it.
pub use crate::conn::stop;
