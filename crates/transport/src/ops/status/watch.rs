//! A running command's figures for `nena status` ([`Snapshot`]): its counters as they stand,
//! and per path and interface the throughput over the last second and the last minute,
//! from one reading of the counters every second ([`Watch::run`]).

use super::scrape::{samples, Sample};
use crate::ops::metrics::Metrics;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How often the counters are read for throughput.
pub const EVERY: Duration = Duration::from_secs(1);
/// The longest window of throughput (and so how many readings are kept).
pub const MINUTE: Duration = Duration::from_secs(60);

/// What a path (a client's trust class, a server's local address) or a client's interface
/// carried: bytes since the command started, and bytes per second over the last second and
/// the last minute (or since the start, when it is younger).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PathFigures {
    pub name: String,
    /// Interfaces: named by `--metered`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub metered: bool,
    pub sent: u64,
    pub received: u64,
    pub sent_per_s_1s: f64,
    pub received_per_s_1s: f64,
    pub sent_per_s_1min: f64,
    pub received_per_s_1min: f64,
}

/// The answer to `nena status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The command: `serve`, `proxy_server`, `proxy_client`, `gateway`.
    pub role: String,
    pub pid: u32,
    pub version: String,
    /// Unix time the command started, and how long it has run (seconds).
    pub started_unix: u64,
    pub uptime_s: u64,
    /// What the command told about itself (where it listens, its server, the pinned key, ...).
    pub about: Vec<(String, String)>,
    pub sessions_open: u64,
    /// Sessions ended, by outcome.
    pub sessions_ended: BTreeMap<String, u64>,
    pub refusals: BTreeMap<String, u64>,
    pub integrity_failures: u64,
    pub handshakes: u64,
    /// New connections waiting now for a trusted link that is down; waits since the start;
    /// of those, the ones that gave up.
    pub waiting_for_trusted_link: u64,
    pub trusted_link_waits: u64,
    pub trusted_link_wait_timeouts: u64,
    pub paths: Vec<PathFigures>,
    pub interfaces: Vec<PathFigures>,
}

/// Per name and direction (`sent`, `received`), bytes counted so far.
type Totals = BTreeMap<(String, &'static str), u64>;

/// A reading to compare with, and the seconds since it (none: no reading old enough).
type Since = Option<(Reading, f64)>;

/// One reading: when, per path and per interface.
#[derive(Clone)]
struct Reading {
    at: Instant,
    paths: Totals,
    ifaces: Totals,
}

impl Reading {
    /// The byte totals of the samples `s` of a scrape, read now.
    fn of(s: &[Sample]) -> Reading {
        Reading {
            at: Instant::now(),
            paths: totals(s, "nena_bytes_total", "path"),
            ifaces: totals(s, "nena_interface_bytes_total", "interface"),
        }
    }
}

/// A command's counters and the readings of the last minute.
pub struct Watch {
    metrics: Arc<Metrics>,
    started: SystemTime,
    about: Mutex<Vec<(String, String)>>,
    readings: Mutex<VecDeque<Reading>>,
}

impl Watch {
    pub fn new(metrics: Arc<Metrics>) -> Arc<Watch> {
        let w = Arc::new(Watch {
            metrics,
            started: SystemTime::now(),
            about: Mutex::new(Vec::new()),
            readings: Mutex::new(VecDeque::new()),
        });
        w.read();
        w
    }

    /// Add a line of what the command is (`listen`, `server`, `pinned key`, ...).
    pub fn tell(&self, key: &str, value: impl Into<String>) {
        if let Ok(mut a) = self.about.lock() {
            a.push((key.to_string(), value.into()));
        }
    }

    /// Reads the counters every [`EVERY`], for ever (spawn it; it ends with the runtime).
    pub async fn run(self: Arc<Self>) {
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tick.tick().await;
            self.read();
        }
    }

    /// One reading now, kept with those of the last minute.
    fn read(&self) {
        let reading = Reading::of(&samples(&self.metrics.encode()));
        if let Ok(mut r) = self.readings.lock() {
            r.push_back(reading);
            while r.len() > 2 && r[1].at.elapsed() >= MINUTE {
                r.pop_front();
            }
        }
    }

    /// The figures now.
    pub fn snapshot(&self) -> Snapshot {
        let s = samples(&self.metrics.encode());
        let sum = |name: &str, keep: &dyn Fn(&Sample) -> bool| -> u64 {
            s.iter()
                .filter(|x| x.name == name && keep(x))
                .map(|x| x.value as u64)
                .sum()
        };
        let by = |name: &str, label: &str| -> BTreeMap<String, u64> {
            let mut m = BTreeMap::new();
            for x in s.iter().filter(|x| x.name == name) {
                *m.entry(x.label(label).to_string()).or_default() += x.value as u64;
            }
            m
        };
        let metered: Vec<String> = s
            .iter()
            .filter(|x| x.name == "nena_interface_bytes_total" && x.label("metered") == "true")
            .map(|x| x.label("interface").to_string())
            .collect();
        let now = Reading::of(&s);
        let (last_second, last_minute) = self.windows(&now);
        let figures = |pick: fn(&Reading) -> &Totals| -> Vec<PathFigures> {
            let names: std::collections::BTreeSet<&String> =
                pick(&now).keys().map(|(n, _)| n).collect();
            names
                .into_iter()
                .map(|name| {
                    let get = |r: &Reading, d: &'static str| -> u64 {
                        pick(r).get(&(name.clone(), d)).copied().unwrap_or(0)
                    };
                    let rate = |then: Option<&(Reading, f64)>, d: &'static str| -> f64 {
                        then.map_or(0.0, |(r, secs)| {
                            get(&now, d).saturating_sub(get(r, d)) as f64 / secs.max(1e-3)
                        })
                    };
                    PathFigures {
                        name: name.clone(),
                        metered: metered.contains(name),
                        sent: get(&now, "sent"),
                        received: get(&now, "received"),
                        sent_per_s_1s: rate(last_second.as_ref(), "sent"),
                        received_per_s_1s: rate(last_second.as_ref(), "received"),
                        sent_per_s_1min: rate(last_minute.as_ref(), "sent"),
                        received_per_s_1min: rate(last_minute.as_ref(), "received"),
                    }
                })
                .collect()
        };
        let started_unix = self
            .started
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Snapshot {
            role: self.metrics.role().label().to_string(),
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            started_unix,
            uptime_s: self.started.elapsed().map_or(0, |d| d.as_secs()),
            about: self.about.lock().map(|a| a.clone()).unwrap_or_default(),
            sessions_open: sum("nena_sessions_active", &|_| true),
            sessions_ended: by("nena_sessions_total", "outcome"),
            refusals: by("nena_refusals_total", "cause"),
            integrity_failures: sum("nena_integrity_failures_total", &|_| true),
            handshakes: sum("nena_handshake_seconds_count", &|_| true),
            waiting_for_trusted_link: sum("nena_sessions_waiting_for_trusted_link", &|_| true),
            trusted_link_waits: sum("nena_trusted_link_waits_total", &|_| true),
            trusted_link_wait_timeouts: sum("nena_trusted_link_wait_timeouts_total", &|_| true),
            paths: figures(|r| &r.paths),
            interfaces: figures(|r| &r.ifaces),
        }
    }

    /// The readings to compare `now` with for the last second and the last minute (the
    /// oldest kept), each with the seconds between them.
    fn windows(&self, now: &Reading) -> (Since, Since) {
        let Ok(r) = self.readings.lock() else {
            return (None, None);
        };
        let secs = |x: &Reading| now.at.duration_since(x.at).as_secs_f64();
        // The newest reading at least most of a second old (the sampler reads every second).
        let second = r
            .iter()
            .rev()
            .find(|x| secs(x) >= 0.5)
            .map(|x| (x.clone(), secs(x)));
        let minute = r
            .front()
            .filter(|x| secs(x) >= 0.5)
            .map(|x| (x.clone(), secs(x)));
        (second, minute)
    }
}

/// Per `label` value and direction, the sum of the samples named `name`.
fn totals(s: &[Sample], name: &str, label: &str) -> Totals {
    let mut t = Totals::new();
    for x in s.iter().filter(|x| x.name == name) {
        let d = match x.label("direction") {
            "sent" => "sent",
            "received" => "received",
            _ => continue,
        };
        *t.entry((x.label(label).to_string(), d)).or_default() += x.value as u64;
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::metrics::{PathsUsed, Role};

    /// Throughput over the last second comes from the reading a second ago, the minute's
    /// from the oldest: after 10 MB on the trusted path in the last second, of 20 MB in
    /// 10 s, the snapshot says about 10 MB/s and 2 MB/s (the test's clock is real: its
    /// bounds are loose).
    #[test]
    fn throughput_over_the_last_second_and_minute() {
        let m = Metrics::new(Role::ProxyClient);
        let w = Watch::new(m.clone());
        let add = |n: u64| {
            m.add_bytes(&PathsUsed {
                paths: vec![("trusted".into(), n, 0)],
                ..PathsUsed::default()
            })
        };
        // Fake the readings' times: the first 10 s ago, one 1 s ago after 10 MB more.
        add(10_000_000);
        {
            let mut r = w.readings.lock().unwrap();
            r.clear();
        }
        let base = Instant::now();
        let old = |secs: u64, sent: u64| Reading {
            at: base - Duration::from_secs(secs),
            paths: [(("trusted".to_string(), "sent"), sent)]
                .into_iter()
                .collect(),
            ifaces: Totals::new(),
        };
        w.readings.lock().unwrap().push_back(old(10, 0));
        w.readings.lock().unwrap().push_back(old(1, 10_000_000));
        add(10_000_000);
        let s = w.snapshot();
        assert_eq!(s.role, "proxy_client");
        let p = &s.paths[0];
        assert_eq!(
            (p.name.as_str(), p.sent, p.received),
            ("trusted", 20_000_000, 0)
        );
        assert!((8e6..=10.1e6).contains(&p.sent_per_s_1s), "{p:?}");
        assert!((1.8e6..=2.01e6).contains(&p.sent_per_s_1min), "{p:?}");
        assert_eq!(p.received_per_s_1s, 0.0);
    }

    #[test]
    fn a_fresh_command_has_no_paths_and_no_sessions() {
        let w = Watch::new(Metrics::new(Role::Serve));
        w.tell("listen", "198.18.3.2:7000");
        let s = w.snapshot();
        assert_eq!(s.role, "serve");
        assert!(s.paths.is_empty() && s.interfaces.is_empty());
        assert_eq!(s.sessions_open, 0);
        assert_eq!(s.about, vec![("listen".into(), "198.18.3.2:7000".into())]);
    }
}
