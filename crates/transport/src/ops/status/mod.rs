//! `nena status`: what a running server, proxy client or gateway is doing now, asked over a
//! local control socket that only its owner (and root) may use.
//!
//! The parts: [`scrape`] reads the command's own counters (the OpenMetrics text of
//! [`crate::ops::metrics::Metrics`]), [`watch`] samples them every second into per-path
//! throughput over the last second and minute and builds a [`Snapshot`], [`control`] serves
//! the snapshot as one JSON line on a Unix socket and asks one, [`links`] watches a client's
//! interfaces (up, down, addresses, their changes), [`page`] serves the status page
//! (`--status`).

pub mod control;
pub mod links;
pub mod page;
pub mod scrape;
pub mod watch;

pub use control::{ask, default_dir, serve_control, socket_path, ControlSocket};
pub use links::{LinkConf, LinkEvent, LinkStatus};
pub use watch::{History, PathFigures, Snapshot, Watch};
