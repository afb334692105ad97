//! A running command's figures for `nena status` and the status page ([`Snapshot`]): its
//! counters as they stand; per path and interface the throughput over the last second and
//! the last minute and the smoothed RTT; the client's links (up or down, since when, their
//! changes); from one reading of the counters and the links every second ([`Watch::run`]),
//! kept for five minutes ([`Watch::history`]).

use super::links::{read_interfaces, LinkConf, LinkEvent, LinkStatus, LinkWatch};
use super::scrape::{samples, Sample};
use crate::ops::metrics::{Metrics, Recent};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How often the counters are read for throughput.
pub const EVERY: Duration = Duration::from_secs(1);
/// The longest window of throughput in a [`Snapshot`].
pub const MINUTE: Duration = Duration::from_secs(60);
/// How long readings are kept ([`Watch::history`]).
pub const HISTORY: Duration = Duration::from_secs(300);
/// An RTT read longer ago than this is not shown (no established subflow since).
pub const RTT_FRESH: Duration = Duration::from_secs(5);

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
    /// The smoothed RTT of its established subflows (the lowest), read within the last
    /// few seconds; none without such a subflow.
    #[serde(default)]
    pub rtt_ms: Option<f64>,
    /// Metered interfaces: bytes since the last local midnight (sent, received).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub today: Option<(u64, u64)>,
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
    /// Sessions ended, by outcome, and by mode (`aead`, ..., `none` before a handshake).
    pub sessions_ended: BTreeMap<String, u64>,
    #[serde(default)]
    pub sessions_by_mode: BTreeMap<String, u64>,
    pub refusals: BTreeMap<String, u64>,
    pub integrity_failures: u64,
    pub handshakes: u64,
    /// Of the handshakes, the sessions resumed with a ticket.
    #[serde(default)]
    pub resumed: u64,
    /// New connections waiting now for a trusted link that is down; waits since the start;
    /// of those, the ones that gave up.
    pub waiting_for_trusted_link: u64,
    pub trusted_link_waits: u64,
    pub trusted_link_wait_timeouts: u64,
    pub paths: Vec<PathFigures>,
    pub interfaces: Vec<PathFigures>,
    /// The last refusals and integrity failures, the newest last.
    #[serde(default)]
    pub recent: Vec<Recent>,
    /// Clients: the interfaces of `--trusted`, `--untrusted` and `--metered`.
    #[serde(default)]
    pub links: Vec<LinkStatus>,
    #[serde(default)]
    pub link_events: Vec<LinkEvent>,
}

/// Throughput per second over the last [`HISTORY`], for the status page's chart.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct History {
    /// Unix time (milliseconds) of the newest reading.
    pub now_unix_ms: u64,
    /// Per path and per interface: (unix ms, sent bytes/s, received bytes/s) between each
    /// reading and the one before it.
    pub paths: BTreeMap<String, Vec<(u64, f64, f64)>>,
    pub interfaces: BTreeMap<String, Vec<(u64, f64, f64)>>,
}

/// Per name and direction (`sent`, `received`), bytes counted so far.
type Totals = BTreeMap<(String, &'static str), u64>;

/// A reading to compare with, and the seconds since it (none: no reading old enough).
type Since = Option<(Reading, f64)>;

/// One reading: when, per path and per interface.
#[derive(Clone)]
struct Reading {
    at: Instant,
    unix_ms: u64,
    paths: Totals,
    ifaces: Totals,
}

/// Milliseconds since the Unix epoch, now.
fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Reading {
    /// The byte totals of the samples `s` of a scrape, read now.
    fn of(s: &[Sample]) -> Reading {
        Reading {
            at: Instant::now(),
            unix_ms: unix_ms(),
            paths: totals(s, "nena_bytes_total", "path"),
            ifaces: totals(s, "nena_interface_bytes_total", "interface"),
        }
    }
}

/// A line of what a command is, read when it is asked (the pinned key, the kill switch).
type LiveLine = Box<dyn Fn() -> String + Send + Sync>;

/// A command's counters, its links, and the readings of the last [`HISTORY`].
pub struct Watch {
    metrics: Arc<Metrics>,
    started: SystemTime,
    about: Mutex<Vec<(String, String)>>,
    live: Mutex<Vec<(String, LiveLine)>>,
    links: Mutex<LinkWatch>,
    readings: Mutex<VecDeque<Reading>>,
}

impl Watch {
    pub fn new(metrics: Arc<Metrics>) -> Arc<Watch> {
        let w = Arc::new(Watch {
            metrics,
            started: SystemTime::now(),
            about: Mutex::new(Vec::new()),
            live: Mutex::new(Vec::new()),
            links: Mutex::new(LinkWatch::default()),
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

    /// Add a line whose value `f` gives each time the command is asked.
    pub fn tell_live(&self, key: &str, f: impl Fn() -> String + Send + Sync + 'static) {
        if let Ok(mut l) = self.live.lock() {
            l.push((key.to_string(), Box::new(f)));
        }
    }

    /// Watch the client's interfaces `conf` (read now, then with every reading).
    pub fn watch_links(&self, conf: &[LinkConf]) {
        if let Ok(mut l) = self.links.lock() {
            *l = LinkWatch::new(conf);
            l.poll(&read_interfaces(), unix_ms());
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

    /// One reading now, kept with those of the last [`HISTORY`]; the links read again.
    fn read(&self) {
        let reading = Reading::of(&samples(&self.metrics.encode()));
        self.poll_links(reading.unix_ms);
        if let Ok(mut r) = self.readings.lock() {
            r.push_back(reading);
            while r.len() > 2 && r[1].at.elapsed() >= HISTORY {
                r.pop_front();
            }
        }
    }

    /// Read the watched links now (none watched: nothing read).
    fn poll_links(&self, now_ms: u64) {
        if let Ok(mut l) = self.links.lock() {
            if !l.is_empty() {
                l.poll(&read_interfaces(), now_ms);
            }
        }
    }

    /// Throughput per second between consecutive readings of the last [`HISTORY`].
    pub fn history(&self) -> History {
        let Ok(r) = self.readings.lock() else {
            return History::default();
        };
        let mut h = History {
            now_unix_ms: r.back().map_or_else(unix_ms, |x| x.unix_ms),
            ..History::default()
        };
        for (a, b) in r.iter().zip(r.iter().skip(1)) {
            let secs = b.at.duration_since(a.at).as_secs_f64().max(1e-3);
            let series = [
                (&mut h.paths, &a.paths, &b.paths),
                (&mut h.interfaces, &a.ifaces, &b.ifaces),
            ];
            for (out, before, after) in series {
                let names: std::collections::BTreeSet<&String> =
                    after.keys().map(|(n, _)| n).collect();
                for name in names {
                    let rate = |d: &'static str| {
                        let key = (name.clone(), d);
                        let (x, y) = (before.get(&key), after.get(&key));
                        let x = x.copied().unwrap_or(0);
                        y.copied().unwrap_or(0).saturating_sub(x) as f64 / secs
                    };
                    let point = (b.unix_ms, rate("sent"), rate("received"));
                    out.entry(name.clone()).or_default().push(point);
                }
            }
        }
        h
    }

    /// The figures now (the links read afresh: a link that went down shows at once, not at
    /// the next reading).
    pub fn snapshot(&self) -> Snapshot {
        self.poll_links(unix_ms());
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
        let rtts = self.metrics.rtts();
        let rtt = |kind: &str, name: &str| -> Option<f64> {
            rtts.iter()
                .find(|(k, n, r)| *k == kind && n == name && r.at.elapsed() <= RTT_FRESH)
                .map(|(_, _, r)| f64::from(r.rtt_us) / 1e3)
        };
        // Metered interfaces: what today cost.
        let today = |name: &str| -> Option<(u64, u64)> {
            let of = |d: &str| -> Option<u64> {
                s.iter()
                    .find(|x| {
                        x.name == "nena_interface_bytes_today"
                            && x.label("metered") == "true"
                            && x.label("interface") == name
                            && x.label("direction") == d
                    })
                    .map(|x| x.value as u64)
            };
            match (of("sent"), of("received")) {
                (None, None) => None,
                (a, b) => Some((a.unwrap_or(0), b.unwrap_or(0))),
            }
        };
        let figures = |pick: fn(&Reading) -> &Totals, kind: &str| -> Vec<PathFigures> {
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
                        rtt_ms: rtt(kind, name),
                        today: today(name),
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
            about: self.about_now(),
            sessions_open: sum("nena_sessions_active", &|_| true),
            sessions_ended: by("nena_sessions_total", "outcome"),
            sessions_by_mode: by("nena_sessions_total", "mode"),
            refusals: by("nena_refusals_total", "cause"),
            integrity_failures: sum("nena_integrity_failures_total", &|_| true),
            handshakes: sum("nena_handshake_seconds_count", &|_| true),
            resumed: sum("nena_resumed_sessions_total", &|_| true),
            waiting_for_trusted_link: sum("nena_sessions_waiting_for_trusted_link", &|_| true),
            trusted_link_waits: sum("nena_trusted_link_waits_total", &|_| true),
            trusted_link_wait_timeouts: sum("nena_trusted_link_wait_timeouts_total", &|_| true),
            paths: figures(|r| &r.paths, "path"),
            interfaces: figures(|r| &r.ifaces, "interface"),
            recent: self.metrics.recent(),
            links: self.links.lock().map(|l| l.links()).unwrap_or_default(),
            link_events: self.links.lock().map(|l| l.events()).unwrap_or_default(),
        }
    }

    /// The lines told, then the live ones read now.
    fn about_now(&self) -> Vec<(String, String)> {
        let mut a = self.about.lock().map(|a| a.clone()).unwrap_or_default();
        if let Ok(l) = self.live.lock() {
            a.extend(l.iter().map(|(k, f)| (k.clone(), f())));
        }
        a
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
        // The oldest reading of the last minute (all readings, when the command is younger).
        let minute = r
            .iter()
            .find(|x| secs(x) <= MINUTE.as_secs_f64() + 0.5)
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
            unix_ms: 0,
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

    /// The history has one point per pair of readings with the rate between them; an RTT
    /// read just now is shown with its path, a refusal with its cause.
    #[test]
    fn history_rtt_and_recent_refusals() {
        let m = Metrics::new(Role::ProxyClient);
        let w = Watch::new(m.clone());
        let base = Instant::now();
        let at = |secs: u64, sent: u64| Reading {
            at: base - Duration::from_secs(secs),
            unix_ms: 1_000_000 - secs * 1000,
            paths: Totals::new(),
            ifaces: [(("wlan".to_string(), "sent"), sent)].into_iter().collect(),
        };
        {
            let mut r = w.readings.lock().unwrap();
            r.clear();
            r.extend([at(3, 0), at(2, 4_000), at(1, 4_000)]);
        }
        let h = w.history();
        assert_eq!(h.now_unix_ms, 999_000);
        let wlan = &h.interfaces["wlan"];
        assert_eq!(wlan.len(), 2);
        assert_eq!(wlan[0].0, 998_000);
        assert!((wlan[0].1 - 4_000.0).abs() < 1.0, "{wlan:?}");
        assert_eq!(wlan[1].1, 0.0);
        m.add_bytes(&PathsUsed {
            ifaces: vec![("wlan".into(), false, 10, 0), ("lte".into(), true, 7, 9)],
            iface_rtt_us: vec![("wlan".into(), 21_000)],
            ..PathsUsed::default()
        });
        m.end(
            "aead",
            crate::ops::metrics::Outcome::Refused("not_allowed"),
            &PathsUsed::default(),
        );
        let s = w.snapshot();
        let f = s.interfaces.iter().find(|p| p.name == "wlan").unwrap();
        assert_eq!(f.rtt_ms, Some(21.0));
        assert_eq!(f.today, None, "not metered");
        let lte = s.interfaces.iter().find(|p| p.name == "lte").unwrap();
        assert_eq!(lte.today, Some((7, 9)));
        assert_eq!(s.sessions_by_mode.get("aead"), Some(&1));
        assert_eq!(s.recent.len(), 1);
        assert_eq!(s.recent[0].cause, "not_allowed");
    }

    /// Live lines are read at each snapshot; watched links appear with their trust.
    #[test]
    fn live_lines_and_links() {
        let w = Watch::new(Metrics::new(Role::Gateway));
        let n = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let n2 = n.clone();
        w.tell_live("kill switch", move || {
            format!("{}", n2.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
        });
        w.watch_links(&[LinkConf {
            name: "lo".into(),
            trust: "trusted".into(),
            metered: false,
        }]);
        assert_eq!(w.snapshot().about, vec![("kill switch".into(), "0".into())]);
        let s = w.snapshot();
        assert_eq!(s.about, vec![("kill switch".into(), "1".into())]);
        assert_eq!(s.links.len(), 1);
        assert!(
            s.links[0].up && s.links[0].trust == "trusted",
            "{:?}",
            s.links
        );
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
