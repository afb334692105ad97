//! What a nena session does for `nena send|get|perf|serve`: the file server
//! ([`file_server`]: `nena serve`'s sessions on tasks of their own) and what it does with
//! one request ([`request`]), the client tools of the file server ([`file_client`]: `nena
//! send`, `nena get`, `nena perf`, and the path report every client session gives), file
//! transfer ([`files`], with [`names`]: which file names from the network the server
//! accepts, and [`verdict`]: the tagged verdict of a file's receiver) and the perf test
//! ([`perf`]).

pub mod file_client;
pub mod file_server;
pub mod files;
pub mod names;
pub mod perf;
pub mod request;
pub mod verdict;
#[cfg(test)]
mod verdict_forge_tests;
