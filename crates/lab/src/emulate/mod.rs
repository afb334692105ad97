//! Link emulation for the lab, without netem (this kernel has none): what a link does to the
//! frames crossing it, per direction — one-way delay, jitter, random or Gilbert-Elliott loss,
//! scheduled outages and rate traces.
//!
//! An emulated link is a TAP device at each end and a user-space relay between their file
//! descriptors (`relay`, run as its own process: `nena lab relay`). The relay asks a
//! [`LinkModel`] (sans-IO, deterministic for a seed, in `model`) what to do with each frame:
//! drop it or deliver it at a given time. Parsers for the command line and trace files are in
//! `parse` and `values`. Which direction is which: [`Direction`].

mod model;
mod parse;
pub(crate) mod relay;
mod values;

pub use model::{DropCause, LinkModel, Verdict, OPPORTUNITY_BYTES, QUEUE_LIMIT};
pub use parse::{parse_ge_loss, parse_loss, parse_outage};
pub use relay::{realtime, relay_main, TapLink, AWAKE_LINGER};
pub use values::{format_duration, parse_duration, EmulationParseError};

use crate::Rate;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// Which way frames travel on a link. For the trusted and untrusted links `ToRouter` is the
/// client's upload (client → router) and `FromRouter` its download; for the server link
/// `ToRouter` is what the server sends (server → router) and `FromRouter` what it receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    /// From the link's edge host (client, or server for the server link) to the router.
    ToRouter,
    /// From the router to the link's edge host.
    FromRouter,
}

impl Direction {
    pub const BOTH: [Direction; 2] = [Direction::ToRouter, Direction::FromRouter];
    pub fn name(self) -> &'static str {
        match self {
            Direction::ToRouter => "to-router",
            Direction::FromRouter => "from-router",
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Direction {
    type Err = String;
    fn from_str(s: &str) -> Result<Direction, String> {
        match s.to_ascii_lowercase().as_str() {
            "to-router" | "up" => Ok(Direction::ToRouter),
            "from-router" | "down" => Ok(Direction::FromRouter),
            _ => Err(format!(
                "unknown direction `{s}` (to-router or from-router; up/down are the same)"
            )),
        }
    }
}

/// Loss of a direction of a link.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Loss {
    /// No loss.
    #[default]
    None,
    /// Each frame is lost independently with this probability (0..=1).
    Random(f64),
    /// The 4-parameter Gilbert-Elliott model (as netem's `gemodel p r 1-h 1-k`): a Markov
    /// chain with a good and a bad state. Per frame the chain first moves (good → bad with
    /// probability `p`, bad → good with `r`), then the frame is lost with `loss_bad` (1-h) in
    /// the bad state or `loss_good` (1-k) in the good one. With `loss_bad` 1 and `loss_good`
    /// 0 (Gilbert's simple model) losses come in bursts of mean length 1/r and the mean loss
    /// rate is p/(p+r).
    GilbertElliott {
        p: f64,
        r: f64,
        loss_bad: f64,
        loss_good: f64,
    },
}

impl Loss {
    /// The long-run loss probability.
    pub fn mean(&self) -> f64 {
        match *self {
            Loss::None => 0.0,
            Loss::Random(p) => p,
            Loss::GilbertElliott {
                p,
                r,
                loss_bad,
                loss_good,
            } => {
                if p + r == 0.0 {
                    loss_good
                } else {
                    let bad = p / (p + r);
                    bad * loss_bad + (1.0 - bad) * loss_good
                }
            }
        }
    }
}

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Loss::None => f.write_str("no loss"),
            Loss::Random(p) => write!(f, "loss {}%", pct(p)),
            Loss::GilbertElliott {
                p,
                r,
                loss_bad,
                loss_good,
            } => write!(
                f,
                "GE loss p {}% r {}% 1-h {}% 1-k {}% (mean {}%)",
                pct(p),
                pct(r),
                pct(loss_bad),
                pct(loss_good),
                pct(self.mean())
            ),
        }
    }
}

fn pct(p: f64) -> String {
    let s = format!("{:.4}", p * 100.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A span during which a direction drops every frame, relative to when the emulation was
/// applied (`nena lab up`, or the `nena lab set` that gave it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outage {
    #[serde(with = "dur")]
    pub start: Duration,
    #[serde(with = "dur")]
    pub duration: Duration,
}

impl Outage {
    pub fn contains(&self, t: Duration) -> bool {
        t >= self.start && t < self.start + self.duration
    }
}

impl fmt::Display for Outage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}+{}",
            format_duration(self.start),
            format_duration(self.duration)
        )
    }
}

/// One row of a rate trace: from `at` (relative to when applied) the link sends at `rate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateStep {
    #[serde(with = "dur")]
    pub at: Duration,
    pub rate: Rate,
}

/// How fast a direction of a link delivers over time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RateTrace {
    /// A CSV `time_s,rate`: piecewise-constant rate from each time on (the first row at 0,
    /// times increasing; the last rate holds). Rates in bit/s or with tc units (`10mbit`).
    Rates { name: String, steps: Vec<RateStep> },
    /// A mahimahi delivery trace: each line a millisecond timestamp at which one full-size
    /// frame ([`OPPORTUNITY_BYTES`]) may be delivered; the trace repeats with a period of its
    /// last timestamp.
    Deliveries {
        name: String,
        period_ms: u64,
        opportunities_ms: Vec<u64>,
    },
}

impl RateTrace {
    pub fn name(&self) -> &str {
        match self {
            RateTrace::Rates { name, .. } | RateTrace::Deliveries { name, .. } => name,
        }
    }
}

impl fmt::Display for RateTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RateTrace::Rates { name, steps } => {
                write!(f, "rate trace {name} ({} steps)", steps.len())
            }
            RateTrace::Deliveries {
                name,
                period_ms,
                opportunities_ms,
            } => write!(
                f,
                "delivery trace {name} ({} opportunities per {period_ms} ms)",
                opportunities_ms.len()
            ),
        }
    }
}

/// What one direction of a link does to frames. The default does nothing (but the link is
/// still a TAP pair with a relay).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Emulation {
    /// One-way delay added to every frame.
    #[serde(with = "dur")]
    pub delay: Duration,
    /// Each frame's delay is `delay` plus a uniform draw in [-jitter, +jitter] (at least 0).
    /// Without `reorder` a frame never leaves before the one ahead of it.
    #[serde(with = "dur")]
    pub jitter: Duration,
    pub loss: Loss,
    /// Rate over time; `None`: as fast as the relay goes (a fixed rate is tbf's job).
    pub trace: Option<RateTrace>,
    /// Spans that drop everything, relative to when applied.
    pub outages: Vec<Outage>,
    /// Let jitter reorder frames.
    pub reorder: bool,
    /// Seed of the loss and jitter draws (`None`: from the clock).
    pub seed: Option<u64>,
}

impl Emulation {
    /// Whether it changes nothing.
    pub fn is_nothing(&self) -> bool {
        self.delay.is_zero()
            && self.jitter.is_zero()
            && self.loss == Loss::None
            && self.trace.is_none()
            && self.outages.is_empty()
    }
}

impl fmt::Display for Emulation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = vec![format!("delay {}", format_duration(self.delay))];
        if !self.jitter.is_zero() {
            parts.push(format!(
                "jitter {}{}",
                format_duration(self.jitter),
                if self.reorder { " (reordering)" } else { "" }
            ));
        }
        if self.loss != Loss::None {
            parts.push(self.loss.to_string());
        }
        if let Some(t) = &self.trace {
            parts.push(t.to_string());
        }
        for o in &self.outages {
            parts.push(format!("outage {o}"));
        }
        f.write_str(&parts.join(", "))
    }
}

/// The emulation of both directions of one link.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LinkEmulation {
    pub to_router: Emulation,
    pub from_router: Emulation,
}

impl LinkEmulation {
    /// The same emulation both ways.
    pub fn both(e: Emulation) -> LinkEmulation {
        LinkEmulation {
            to_router: e.clone(),
            from_router: e,
        }
    }
    pub fn get(&self, d: Direction) -> &Emulation {
        match d {
            Direction::ToRouter => &self.to_router,
            Direction::FromRouter => &self.from_router,
        }
    }
    pub fn get_mut(&mut self, d: Direction) -> &mut Emulation {
        match d {
            Direction::ToRouter => &mut self.to_router,
            Direction::FromRouter => &mut self.from_router,
        }
    }
}

/// Durations in JSON as strings like `20ms` (parsed back with [`parse_duration`]).
mod dur {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_duration(*d))
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s = String::deserialize(d)?;
        super::parse_duration(&s).map_err(serde::de::Error::custom)
    }
}
