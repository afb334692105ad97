//! What a nena session does for `nena send|get|perf|serve`: the server ([`server`]) and what
//! it does with one session ([`session`]), the client tools ([`client`]), file transfer
//! ([`files`], with [`names`]: which file names from the network the server accepts, and
//! [`verdict`]: the tagged verdict of a file's receiver) and the perf test ([`perf`]).

pub mod client;
pub mod files;
pub mod names;
pub mod perf;
pub mod server;
pub mod session;
pub mod verdict;
#[cfg(test)]
mod verdict_forge_tests;
