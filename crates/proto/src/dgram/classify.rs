//! Which flows are real-time, sans-IO: a flow is real-time when its datagrams are marked
//! DSCP EF or AF4x, when its destination port is one the user named, or when it looks like
//! a call or a game over the last second: small datagrams (at most 300 bytes), at least 10
//! of them, no more than 200 a second, and paced (most gaps between them near the median
//! gap, which is itself at least the gap of the highest rate). Once real-time, a flow stays
//! so for a hold time after the test last passed (a call's silence does not make it bulk),
//! unless a large datagram shows it is not. [`Redundancy`] picks between this classifier
//! and a fixed answer (`--udp-redundancy auto|always|never`).

use super::sched::Class;
use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

/// DSCP Expedited Forwarding (RFC 3246).
pub const DSCP_EF: u8 = 46;
/// DSCP AF41, AF42, AF43 (RFC 2597; RFC 4594 gives class 4 to video conferencing).
pub const DSCP_AF4X: [u8; 3] = [34, 36, 38];

/// Whether datagrams are sent on every usable path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Redundancy {
    /// Real-time flows (by the classifier) on every path, the rest on one.
    #[default]
    Auto,
    /// Every datagram on every usable path.
    Always,
    /// Every datagram on one path.
    Never,
}

impl Redundancy {
    /// The class a datagram gets, given what the classifier says (`auto`).
    pub fn class(self, auto: Class) -> Class {
        match self {
            Redundancy::Auto => auto,
            Redundancy::Always => Class::RealTime,
            Redundancy::Never => Class::Bulk,
        }
    }
}

impl fmt::Display for Redundancy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Redundancy::Auto => "auto",
            Redundancy::Always => "always",
            Redundancy::Never => "never",
        })
    }
}

/// A `--udp-redundancy` value that is none of auto, always, never.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown redundancy {0:?}: expected auto, always or never")]
pub struct ParseRedundancyError(String);

impl FromStr for Redundancy {
    type Err = ParseRedundancyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Redundancy::Auto),
            "always" => Ok(Redundancy::Always),
            "never" => Ok(Redundancy::Never),
            other => Err(ParseRedundancyError(other.to_string())),
        }
    }
}

/// The classifier's thresholds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassifierConfig {
    /// Destination ports whose flows are real-time whatever they look like.
    pub ports: Vec<u16>,
    /// Largest datagram of a call-like flow.
    pub max_size: usize,
    /// The span the pace is judged over.
    pub window: Duration,
    /// Fewest datagrams in the window to judge a pace.
    pub min_datagrams: usize,
    /// Most datagrams a second of a call-like flow.
    pub max_rate: u32,
    /// How long a flow stays real-time after the test last passed.
    pub hold: Duration,
}

impl Default for ClassifierConfig {
    fn default() -> Self {
        ClassifierConfig {
            ports: Vec::new(),
            max_size: 300,
            window: Duration::from_secs(1),
            min_datagrams: 10,
            max_rate: 200,
            hold: Duration::from_secs(5),
        }
    }
}

/// What the classifier needs to know of one datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DatagramInfo {
    /// Payload length.
    pub len: usize,
    /// Its DSCP (the upper six bits of the IPv4 TOS or IPv6 traffic class), when known.
    pub dscp: Option<u8>,
    /// Its destination port.
    pub dst_port: u16,
}

/// One flow's recent datagrams (the caller keeps one per flow: a socket, an association, a
/// 5-tuple). Memory is bounded: at most `max_rate * window + 1` entries.
#[derive(Clone, Debug, Default)]
pub struct FlowClassifier {
    recent: VecDeque<(Instant, usize)>,
    realtime_until: Option<Instant>,
    /// Datagrams seen in all (saturating): a flow is young until it has had enough to judge.
    seen: u64,
}

impl FlowClassifier {
    pub fn new() -> FlowClassifier {
        FlowClassifier::default()
    }

    /// Records one datagram of the flow and says its class.
    pub fn observe(&mut self, cfg: &ClassifierConfig, d: DatagramInfo, now: Instant) -> Class {
        if d.dscp
            .is_some_and(|x| x == DSCP_EF || DSCP_AF4X.contains(&x))
            || cfg.ports.contains(&d.dst_port)
        {
            return Class::RealTime;
        }
        self.seen = self.seen.saturating_add(1);
        if d.len > cfg.max_size {
            self.recent.clear();
            self.realtime_until = None;
            return Class::Bulk;
        }
        while self
            .recent
            .front()
            .is_some_and(|&(t, _)| now.saturating_duration_since(t) > cfg.window)
        {
            self.recent.pop_front();
        }
        let cap = self.cap(cfg);
        if self.recent.len() >= cap {
            self.recent.pop_front();
        }
        self.recent.push_back((now, d.len));
        if self.looks_like_a_call(cfg) {
            self.realtime_until = Some(now + cfg.hold);
        }
        match self.realtime_until {
            Some(t) if now < t => Class::RealTime,
            // Too young to judge: the small datagrams of a flow that has been no faster than
            // a call so far go as a call's (a call's first second is not left to one path;
            // a bulk flow's first few small datagrams are what it costs).
            _ if self.seen < cfg.min_datagrams as u64 && self.no_faster_than_a_call(cfg) => {
                Class::RealTime
            }
            _ => Class::Bulk,
        }
    }

    /// Whether the recent datagrams are all small and came no faster than `max_rate`.
    fn no_faster_than_a_call(&self, cfg: &ClassifierConfig) -> bool {
        let n = self.recent.len();
        let (Some(first), Some(last)) = (self.recent.front(), self.recent.back()) else {
            return false;
        };
        let min_gap = Duration::from_secs(1) / cfg.max_rate.max(1);
        self.recent.iter().all(|&(_, l)| l <= cfg.max_size)
            && last.0.saturating_duration_since(first.0) >= min_gap * (n as u32 - 1)
    }

    fn cap(&self, cfg: &ClassifierConfig) -> usize {
        let per_window = u128::from(cfg.max_rate) * cfg.window.as_millis() / 1000;
        usize::try_from(per_window)
            .unwrap_or(usize::MAX)
            .saturating_add(2)
    }

    fn looks_like_a_call(&self, cfg: &ClassifierConfig) -> bool {
        let n = self.recent.len();
        if n < cfg.min_datagrams.max(2) || self.recent.iter().any(|&(_, l)| l > cfg.max_size) {
            return false;
        }
        let (first, last) = match (self.recent.front(), self.recent.back()) {
            (Some(f), Some(l)) => (f.0, l.0),
            _ => return false,
        };
        // The rate over the span the datagrams cover (n - 1 gaps).
        let span = last.saturating_duration_since(first);
        let min_gap = Duration::from_secs(1) / cfg.max_rate.max(1);
        if span < min_gap * (n as u32 - 1) {
            return false;
        }
        let mut gaps: Vec<Duration> = self
            .recent
            .iter()
            .zip(self.recent.iter().skip(1))
            .map(|(a, b)| b.0.saturating_duration_since(a.0))
            .collect();
        gaps.sort();
        let median = gaps[gaps.len() / 2];
        if median < min_gap {
            return false;
        }
        // Paced: at least 80% of the gaps within a factor of 2 of the median.
        let near = gaps
            .iter()
            .filter(|&&g| g * 2 >= median && g <= median * 2)
            .count();
        near * 5 >= gaps.len() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(len: usize) -> DatagramInfo {
        DatagramInfo {
            len,
            dscp: None,
            dst_port: 40_000,
        }
    }

    /// 50 datagrams a second of 160 bytes (a call) is real-time within its first quarter
    /// second and stays so; a bulk stream of 1,200-byte datagrams is not, nor a burst of
    /// small ones, nor small datagrams at 1,000 a second.
    #[test]
    fn a_call_is_real_time_and_a_bulk_stream_is_not() {
        let cfg = ClassifierConfig::default();
        let t0 = Instant::now();
        let mut call = FlowClassifier::new();
        let classes: Vec<Class> = (0..250u32)
            .map(|i| {
                // 20 ms apart, with up to 3 ms of jitter.
                let jitter = Duration::from_micros(u64::from(i * 7919 % 3000));
                call.observe(&cfg, info(160), t0 + Duration::from_millis(20) * i + jitter)
            })
            .collect();
        // Young and no faster than a call, then judged a call: real-time from the first.
        assert!(classes.iter().all(|&c| c == Class::RealTime), "{classes:?}");

        let mut bulk = FlowClassifier::new();
        for i in 0..5000u32 {
            let c = bulk.observe(&cfg, info(1200), t0 + Duration::from_micros(200) * i);
            assert_eq!(c, Class::Bulk);
        }

        // Small datagrams at 1,000 a second: only the first, before any pace, is given the
        // benefit of the doubt.
        let mut fast_small = FlowClassifier::new();
        for i in 0..3000u32 {
            let c = fast_small.observe(&cfg, info(100), t0 + Duration::from_millis(1) * i);
            let want = if i == 0 { Class::RealTime } else { Class::Bulk };
            assert_eq!(c, want, "datagram {i}");
        }

        // Bursts of 20 small datagrams 50 µs apart, twice a second.
        let mut bursty = FlowClassifier::new();
        for b in 0..10u32 {
            for i in 0..20u32 {
                let t = t0 + Duration::from_millis(500) * b + Duration::from_micros(50) * i;
                let want = if (b, i) == (0, 0) {
                    Class::RealTime
                } else {
                    Class::Bulk
                };
                assert_eq!(bursty.observe(&cfg, info(120), t), want);
            }
        }
    }

    /// A call's silence keeps it real-time for the hold time; a large datagram ends it.
    #[test]
    fn the_hold_and_its_end() {
        let cfg = ClassifierConfig::default();
        let t0 = Instant::now();
        let mut f = FlowClassifier::new();
        let mut t = t0;
        for _ in 0..50 {
            t += Duration::from_millis(20);
            f.observe(&cfg, info(160), t);
        }
        // Two seconds of silence, then one datagram: still real-time.
        t += Duration::from_secs(2);
        assert_eq!(f.observe(&cfg, info(160), t), Class::RealTime);
        // Ten seconds of silence: the hold is over.
        t += Duration::from_secs(10);
        assert_eq!(f.observe(&cfg, info(160), t), Class::Bulk);
        for _ in 0..50 {
            t += Duration::from_millis(20);
            f.observe(&cfg, info(160), t);
        }
        assert_eq!(f.observe(&cfg, info(160), t), Class::RealTime);
        assert_eq!(f.observe(&cfg, info(1400), t), Class::Bulk);
        assert_eq!(f.observe(&cfg, info(160), t), Class::Bulk);
    }

    #[test]
    fn marks_and_ports_make_a_flow_real_time_at_once() {
        let cfg = ClassifierConfig {
            ports: vec![3478],
            ..ClassifierConfig::default()
        };
        let now = Instant::now();
        for dscp in [46, 34, 36, 38] {
            let d = DatagramInfo {
                len: 1400,
                dscp: Some(dscp),
                dst_port: 9,
            };
            assert_eq!(FlowClassifier::new().observe(&cfg, d, now), Class::RealTime);
        }
        for dscp in [Some(0), Some(10), Some(40), None] {
            let d = DatagramInfo {
                len: 1400,
                dscp,
                dst_port: 9,
            };
            assert_eq!(FlowClassifier::new().observe(&cfg, d, now), Class::Bulk);
        }
        let d = DatagramInfo {
            len: 1400,
            dscp: None,
            dst_port: 3478,
        };
        assert_eq!(FlowClassifier::new().observe(&cfg, d, now), Class::RealTime);
    }

    #[test]
    fn redundancy_overrides_or_follows_the_classifier() {
        for c in [Class::RealTime, Class::Bulk] {
            assert_eq!(Redundancy::Auto.class(c), c);
            assert_eq!(Redundancy::Always.class(c), Class::RealTime);
            assert_eq!(Redundancy::Never.class(c), Class::Bulk);
        }
        for r in [Redundancy::Auto, Redundancy::Always, Redundancy::Never] {
            assert_eq!(r.to_string().parse::<Redundancy>(), Ok(r));
        }
        assert!("sometimes".parse::<Redundancy>().is_err());
    }
}
