//! Text as people read it, a leaf every layer may use: it imports nothing of the crate.
//!
//! The parts: [`printable`] (text from a peer with its control characters escaped, for
//! printing) and [`units`] (byte counts as people read and write them: `human`,
//! `parse_bytes`).

pub mod printable;
pub mod units;
