//! `--metrics ADDR:PORT`: what `nena serve`, `nena proxy server` and `nena proxy client`
//! count, served as OpenMetrics text (`GET /metrics`, the Prometheus project's
//! `prometheus-client` encoder, HTTP/1.1 by hyper) for Prometheus and its kin.
//!
//! Every family has a `role` label (`serve`, `proxy_server`, `proxy_client`). Sessions are
//! counted when they end, with what they were (mode) and how they ended ([`Outcome`]);
//! bytes per path are read from the kernel's MPTCP_FULL_INFO every second while a session
//! carries data ([`Tally::live`]) and at its end, subflow events (MPTCP_INFO) at its end (a
//! subflow that closed between two readings took its last second's bytes along: they are
//! missing from `nena_bytes_total`, and counted in `nena_subflow_events_total{event="close"}`).
//! docs/OPERATIONS.md lists the families and the queries an operator runs on them.
//!
//! The parts: [`counters`] ([`Metrics`], [`Tally`]), [`outcome`] (how a session ended),
//! [`paths`] (what it did on its paths, [`PathsUsed`]), [`endpoint`] (the HTTP endpoint).

pub mod counters;
pub mod day;
pub mod endpoint;
pub mod outcome;
pub mod paths;
#[cfg(test)]
mod tests;

pub use counters::{
    Active, DatagramCounts, FamilyName, Metrics, Recent, Role, RttReading, Tally, LIVE_EVERY,
    RECENT,
};
pub use endpoint::{bind, serve, serve_within, EndpointLimits, CONTENT_TYPE};
pub use outcome::{refusal_cause, Outcome};
pub use paths::PathsUsed;
