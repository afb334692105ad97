//! What `nena bench` runs beside nena that is part of the product (the bench is): the
//! baselines and loads it measures nena against.
//!
//! The parts: [`raw_mptcp`] (the plain-MPTCP baseline of `nena bench transfer`, nena-bench's
//! `transfer`, and of the scenario runner) and [`load`] (the echo target and per-session
//! payloads of `nena bench sessions`).

pub mod load;
pub mod raw_mptcp;
