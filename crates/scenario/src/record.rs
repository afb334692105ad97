//! What a run recorded, as plain data: the events as they happened and what the traffic
//! reported. `run` fills these in; `summary` reads them (and knows nothing of `run`).

use crate::model::Action;
use nena_lab::Link;
use serde::Serialize;

/// An event as it happened.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Applied {
    pub planned_s: f64,
    /// When the change began, and when it was complete (the link commands take a moment).
    pub started_s: f64,
    pub applied_s: f64,
    pub link: Link,
    pub action: Action,
}

/// What the traffic reported.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TrafficOutcome {
    /// Payload bytes delivered (and checked: counts for tcp/mptcp, every byte for nena,
    /// SHA-256 for send).
    pub bytes: u64,
    pub seconds: f64,
    pub goodput_mbit_s: f64,
    /// The negotiated nena mode (nena and send runs).
    pub mode: Option<String>,
    pub verified: bool,
}
