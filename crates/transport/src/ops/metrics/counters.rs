//! The counters of one command ([`Metrics`], one registry of OpenMetrics families by
//! [`Role`]) and one session's entry in them ([`Tally`]): its bytes per path counted every
//! [`LIVE_EVERY`] while it runs ([`Tally::live`]), the rest once when it ends.

use super::outcome::Outcome;
use super::paths::PathsUsed;
use anyhow::Result;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Metric, Registry};
use std::sync::Arc;
use std::time::Duration;

/// Which command counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Serve,
    ProxyServer,
    ProxyClient,
    Gateway,
    /// `nena run --via`.
    Run,
}

impl Role {
    pub fn label(self) -> &'static str {
        match self {
            Role::Serve => "serve",
            Role::ProxyServer => "proxy_server",
            Role::ProxyClient => "proxy_client",
            Role::Gateway => "gateway",
            Role::Run => "run",
        }
    }
}
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RoleLabels {
    role: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SessionLabels {
    role: &'static str,
    mode: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CauseLabels {
    role: &'static str,
    cause: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BytesLabels {
    role: &'static str,
    path: String,
    direction: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RttLabels {
    role: &'static str,
    path: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct IfaceRttLabels {
    role: &'static str,
    interface: String,
}

/// A gauge of seconds (an RTT).
type Seconds = Gauge<f64, std::sync::atomic::AtomicU64>;

/// How many refusals and integrity failures [`Metrics::recent`] keeps.
pub const RECENT: usize = 20;

/// A refusal or an integrity failure, when it happened (for `nena status`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Recent {
    pub unix_s: u64,
    /// `refused` or `integrity_failure`.
    pub outcome: String,
    /// The refusal's cause (`access_denied`, `not_allowed`, ...); empty for an integrity
    /// failure.
    pub cause: String,
}

/// The smoothed RTT of a path or interface when it was last read (for `nena status`).
#[derive(Debug, Clone, Copy)]
pub struct RttReading {
    pub rtt_us: u32,
    pub at: std::time::Instant,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct IfaceLabels {
    role: &'static str,
    interface: String,
    metered: &'static str,
    direction: &'static str,
}

/// What a datagram session's plane did, as the metrics count it: application datagrams
/// each way by the plane (`udp_*`) or inside the session (`session_*`; received: first
/// copies delivered), and the plane's drops by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DatagramCounts {
    pub udp_sent: u64,
    pub session_sent: u64,
    pub udp_received: u64,
    pub session_received: u64,
    pub unauthentic: u64,
    pub replayed: u64,
    pub too_old: u64,
    pub malformed: u64,
    pub duplicate: u64,
    pub unknown_flow: u64,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DatagramLabels {
    role: &'static str,
    /// `udp` (the datagram plane) or `session` (inside the nena session).
    way: &'static str,
    direction: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DropLabels {
    role: &'static str,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabels {
    role: &'static str,
    event: &'static str,
}

fn handshake_histogram() -> Histogram {
    // 1 ms .. about 16 s, doubling.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}
/// A family of [`Metrics`] as a scrape names it ([`Metrics::families`]): every one, even
/// those without a series yet, which a scrape leaves out (`prometheus-client` writes no
/// HELP or TYPE line for a family without one, as Go's client does not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyName {
    /// With the `nena_` prefix and without a sample's suffix: `nena_sessions`.
    pub name: String,
    /// Its OpenMetrics type, as its `# TYPE` line says it: `counter`, `gauge`, `histogram`.
    pub kind: String,
}

impl FamilyName {
    /// The names its samples have in a scrape, which queries name: `NAME_total` for a
    /// counter, `NAME_bucket`, `NAME_sum` and `NAME_count` for a histogram, `NAME` otherwise
    /// (no family of nena's has a `_created` sample).
    pub fn samples(&self) -> Vec<String> {
        let suffixes: &[&str] = match self.kind.as_str() {
            "counter" => &["_total"],
            "histogram" => &["_bucket", "_sum", "_count"],
            _ => &[""],
        };
        suffixes
            .iter()
            .map(|s| format!("{}{s}", self.name))
            .collect()
    }
}

/// The registry being filled, and the name of each family put in it.
struct Registering {
    registry: Registry,
    names: Vec<FamilyName>,
}

impl Registering {
    const PREFIX: &'static str = "nena";

    fn new() -> Registering {
        Registering {
            registry: Registry::with_prefix(Self::PREFIX),
            names: Vec::new(),
        }
    }

    /// Registers `family` as `nena_NAME`; the family, to count with.
    fn add<M: Metric + Clone>(&mut self, name: &str, help: &str, family: M) -> M {
        self.names.push(FamilyName {
            name: format!("{}_{name}", Self::PREFIX),
            kind: family.metric_type().as_str().to_string(),
        });
        self.registry.register(name, help, family.clone());
        family
    }
}

/// The counters of one command, shared by its sessions.
#[derive(Debug)]
pub struct Metrics {
    role: Role,
    pub(super) registry: Registry,
    families: Vec<FamilyName>,
    sessions: Family<SessionLabels, Counter>,
    active: Family<RoleLabels, Gauge>,
    refusals: Family<CauseLabels, Counter>,
    integrity: Family<RoleLabels, Counter>,
    bytes: Family<BytesLabels, Counter>,
    iface_bytes: Family<IfaceLabels, Counter>,
    iface_today: Family<IfaceLabels, Gauge>,
    today_start: Family<RoleLabels, Gauge>,
    /// The local day the `_today` gauges count, and every label set they have (set back
    /// to 0 when the day changes).
    day: std::sync::Mutex<(Option<super::day::Day>, Vec<IfaceLabels>)>,
    subflows: Family<EventLabels, Counter>,
    datagrams: Family<DatagramLabels, Counter>,
    datagram_drops: Family<DropLabels, Counter>,
    handshake: Family<RoleLabels, Histogram>,
    resumed: Family<RoleLabels, Counter>,
    retried: Family<RoleLabels, Counter>,
    waiting: Family<RoleLabels, Gauge>,
    waits: Family<RoleLabels, Counter>,
    wait_timeouts: Family<RoleLabels, Counter>,
    path_rtt: Family<RttLabels, Seconds>,
    iface_rtt: Family<IfaceRttLabels, Seconds>,
    /// The last RTT read per path and per interface (keyed `path`/`interface`, name).
    rtts: std::sync::Mutex<std::collections::BTreeMap<(&'static str, String), RttReading>>,
    /// The last [`RECENT`] refusals and integrity failures.
    recent: std::sync::Mutex<std::collections::VecDeque<Recent>>,
}

impl Metrics {
    /// Which command counts.
    pub fn role(&self) -> Role {
        self.role
    }

    pub fn new(role: Role) -> Arc<Metrics> {
        let mut families = Registering::new();
        let sessions = families.add(
            "sessions",
            "Sessions ended, by mode and outcome (ok, refused, integrity_failure, aborted, failed, unused)",
            Family::<SessionLabels, Counter>::default(),
        );
        let active = families.add(
            "sessions_active",
            "Sessions in progress",
            Family::<RoleLabels, Gauge>::default(),
        );
        let refusals = families.add(
            "refusals",
            "Sessions refused, by cause (access_denied, not_allowed, handshake, file_too_large, ...)",
            Family::<CauseLabels, Counter>::default(),
        );
        let integrity = families.add(
            "integrity_failures",
            "Sessions whose protected stream or file tag did not verify, or whose stream was cut",
            Family::<RoleLabels, Counter>::default(),
        );
        let bytes = families.add(
            "bytes",
            "Payload bytes per path (trust class on clients, local address on servers) and \
             direction (sent: acknowledged by the peer; received), every second while a session \
             carries data and at its end",
            Family::<BytesLabels, Counter>::default(),
        );
        let iface_bytes = families.add(
            "interface_bytes",
            "Client: payload bytes per local interface (metered: --metered) and direction \
             (sent: acknowledged by the peer; received), every second while a session carries \
             data and at its end",
            Family::<IfaceLabels, Counter>::default(),
        );
        let iface_today = families.add(
            "interface_bytes_today",
            "Client: nena_interface_bytes_total counted since the last local midnight (back \
             to 0 when the local date changes): what today cost on a data plan",
            Family::<IfaceLabels, Gauge>::default(),
        );
        let today_start = families.add(
            "interface_bytes_today_start_seconds",
            "Unix time of the local midnight nena_interface_bytes_today counts from",
            Family::<RoleLabels, Gauge>::default(),
        );
        let subflows = families.add(
            "subflow_events",
            "Subflow joins (beyond the first), closes before the session's end, and recoveries \
             after a link outage",
            Family::<EventLabels, Counter>::default(),
        );
        let datagrams = families.add(
            "datagrams",
            "Application datagrams of datagram sessions, by way (udp: sealed on the datagram \
             plane; session: inside the nena session) and direction (received: first copies \
             delivered), at each session's end",
            Family::<DatagramLabels, Counter>::default(),
        );
        let datagram_drops = families.add(
            "datagram_drops",
            "Datagrams the datagram plane dropped, by reason (unauthentic: failed the AEAD, an \
             altered or forged datagram; replayed; too_old: behind the replay window; \
             malformed; duplicate: a redundant copy after the first; unknown_flow: a compact \
             datagram of a flow never announced), at each session's end",
            Family::<DropLabels, Counter>::default(),
        );
        let handshake = families.add(
            "handshake_seconds",
            "Time from the connection to the end of the nena handshake",
            Family::<RoleLabels, Histogram>::new_with_constructor(
                handshake_histogram as fn() -> Histogram,
            ),
        );
        let resumed = families.add(
            "resumed_sessions",
            "Sessions resumed with a ticket (no key agreement; the rest of the handshakes are \
             full ones)",
            Family::<RoleLabels, Counter>::default(),
        );
        let retried = families.add(
            "retried_openings",
            "Proxy client: sessions opened again because the proxy server found the opening \
             altered (an attacker on a path, or a receiving kernel's misplaced bytes)",
            Family::<RoleLabels, Counter>::default(),
        );
        let waiting = families.add(
            "sessions_waiting_for_trusted_link",
            "New connections waiting now for a trusted interface that is down (their hello \
             goes by no other interface)",
            Family::<RoleLabels, Gauge>::default(),
        );
        let waits = families.add(
            "trusted_link_waits",
            "New connections that had to wait for a trusted interface that was down",
            Family::<RoleLabels, Counter>::default(),
        );
        let wait_timeouts = families.add(
            "trusted_link_wait_timeouts",
            "Of those, the ones that failed when their timeout ran out",
            Family::<RoleLabels, Counter>::default(),
        );
        let path_rtt = families.add(
            "path_rtt_seconds",
            "Smoothed RTT of the path's established subflows (the lowest of them) at its last \
             reading, every second while a session carries data",
            Family::<RttLabels, Seconds>::default(),
        );
        let iface_rtt = families.add(
            "interface_rtt_seconds",
            "Client: smoothed RTT of the established subflows on the local interface (the \
             lowest of them) at its last reading",
            Family::<IfaceRttLabels, Seconds>::default(),
        );
        let m = Metrics {
            role,
            path_rtt,
            iface_rtt,
            rtts: Default::default(),
            recent: Default::default(),
            waiting,
            waits,
            wait_timeouts,
            registry: families.registry,
            families: families.names,
            sessions,
            active,
            refusals,
            integrity,
            bytes,
            iface_bytes,
            iface_today,
            today_start,
            day: std::sync::Mutex::new((None, Vec::new())),
            subflows,
            datagrams,
            datagram_drops,
            handshake,
            resumed,
            retried,
        };
        // The families labelled by role alone show up from the first scrape, at 0; the others
        // once a session counts in them (`families` lists every one from the start).
        let _ = m.active.get_or_create(&m.role_labels());
        let _ = m.integrity.get_or_create(&m.role_labels());
        let _ = m.retried.get_or_create(&m.role_labels());
        m.trusted_waits(nena_mptcp::TrustedWaits::default());
        Arc::new(m)
    }

    /// Every family registered, in the order of the registry (a scrape's order).
    pub fn families(&self) -> &[FamilyName] {
        &self.families
    }

    fn role_labels(&self) -> RoleLabels {
        RoleLabels {
            role: self.role.label(),
        }
    }

    /// A session begins: counted as active until the guard is dropped.
    pub fn begin(self: &Arc<Self>) -> Active {
        self.active.get_or_create(&self.role_labels()).inc();
        Active(self.clone())
    }

    /// The handshake of a session took `d`.
    pub fn handshake(&self, d: Duration, resumed: bool) {
        self.handshake
            .get_or_create(&self.role_labels())
            .observe(d.as_secs_f64());
        if resumed {
            self.resumed.get_or_create(&self.role_labels()).inc();
        }
    }

    /// A datagram session's plane counts ([`Tally::datagrams`]).
    pub fn datagrams(&self, p: &DatagramCounts) {
        let role = self.role.label();
        for (way, direction, n) in [
            ("udp", "sent", p.udp_sent),
            ("session", "sent", p.session_sent),
            ("udp", "received", p.udp_received),
            ("session", "received", p.session_received),
        ] {
            self.datagrams
                .get_or_create(&DatagramLabels {
                    role,
                    way,
                    direction,
                })
                .inc_by(n);
        }
        for (reason, n) in [
            ("unauthentic", p.unauthentic),
            ("replayed", p.replayed),
            ("too_old", p.too_old),
            ("malformed", p.malformed),
            ("duplicate", p.duplicate),
            ("unknown_flow", p.unknown_flow),
        ] {
            self.datagram_drops
                .get_or_create(&DropLabels { role, reason })
                .inc_by(n);
        }
    }

    /// The proxy client opens a session again: the server found the opening altered.
    pub fn retried_opening(&self) {
        self.retried.get_or_create(&self.role_labels()).inc();
    }

    /// A session ended: `mode` (`aead`, ..., `none` before a handshake), how, and what it
    /// did on its paths (beyond what [`Metrics::add_bytes`] counted while it ran).
    pub fn end(&self, mode: &'static str, outcome: Outcome, used: &PathsUsed) {
        let role = self.role.label();
        self.sessions
            .get_or_create(&SessionLabels {
                role,
                mode,
                outcome: outcome.label(),
            })
            .inc();
        match outcome {
            Outcome::Refused(cause) => {
                self.refusals
                    .get_or_create(&CauseLabels { role, cause })
                    .inc();
                self.remember(outcome, cause);
            }
            Outcome::Integrity => {
                self.integrity.get_or_create(&self.role_labels()).inc();
                self.remember(outcome, "");
            }
            _ => {}
        }
        self.add_bytes(used);
        for (event, n) in [
            ("join", used.joins),
            ("close", used.closes),
            ("recovery", used.recoveries),
        ] {
            self.subflows
                .get_or_create(&EventLabels { role, event })
                .inc_by(n);
        }
    }

    /// Keep a refusal or integrity failure among the last [`RECENT`].
    fn remember(&self, outcome: Outcome, cause: &str) {
        let unix_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if let Ok(mut r) = self.recent.lock() {
            if r.len() == RECENT {
                r.pop_front();
            }
            r.push_back(Recent {
                unix_s,
                outcome: outcome.label().to_string(),
                cause: cause.to_string(),
            });
        }
    }

    /// The last [`RECENT`] refusals and integrity failures, the newest last.
    pub fn recent(&self) -> Vec<Recent> {
        self.recent
            .lock()
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The last RTT read of each path (`kind` `path`) or interface (`interface`).
    pub fn rtts(&self) -> Vec<(&'static str, String, RttReading)> {
        self.rtts
            .lock()
            .map(|r| r.iter().map(|((k, n), v)| (*k, n.clone(), *v)).collect())
            .unwrap_or_default()
    }

    /// Bytes a session carried on its paths (and per interface, with today's figures), and
    /// their RTTs: counted while it runs ([`Tally::live`]) and at its end.
    pub fn add_bytes(&self, used: &PathsUsed) {
        let role = self.role.label();
        let at = std::time::Instant::now();
        for (path, rtt_us) in &used.path_rtt_us {
            self.path_rtt
                .get_or_create(&RttLabels {
                    role,
                    path: path.clone(),
                })
                .set(f64::from(*rtt_us) / 1e6);
        }
        for (interface, rtt_us) in &used.iface_rtt_us {
            self.iface_rtt
                .get_or_create(&IfaceRttLabels {
                    role,
                    interface: interface.clone(),
                })
                .set(f64::from(*rtt_us) / 1e6);
        }
        if let Ok(mut r) = self.rtts.lock() {
            let kinds = [
                ("path", &used.path_rtt_us),
                ("interface", &used.iface_rtt_us),
            ];
            for (kind, list) in kinds {
                for (name, rtt_us) in list {
                    let rtt_us = *rtt_us;
                    r.insert((kind, name.clone()), RttReading { rtt_us, at });
                }
            }
        }
        for (path, sent, received) in &used.paths {
            for (direction, n) in [("sent", *sent), ("received", *received)] {
                self.bytes
                    .get_or_create(&BytesLabels {
                        role,
                        path: path.clone(),
                        direction,
                    })
                    .inc_by(n);
            }
        }
        let _day = self.roll_day(super::day::Day::now());
        for (iface, metered, sent, received) in &used.ifaces {
            for (direction, n) in [("sent", *sent), ("received", *received)] {
                let l = IfaceLabels {
                    role,
                    interface: iface.clone(),
                    metered: if *metered { "true" } else { "false" },
                    direction,
                };
                self.iface_bytes.get_or_create(&l).inc_by(n);
                self.iface_today.get_or_create(&l).inc_by(n as i64);
                if let Ok(mut d) = self.day.lock() {
                    if !d.1.contains(&l) {
                        d.1.push(l);
                    }
                }
            }
        }
    }

    /// The process's waits for a trusted link (they happen inside connect, before there is
    /// a session), as they stand now.
    pub(super) fn trusted_waits(&self, w: nena_mptcp::TrustedWaits) {
        let l = self.role_labels();
        self.waiting.get_or_create(&l).set(w.waiting as i64);
        for (c, total) in [(&self.waits, w.waited), (&self.wait_timeouts, w.gave_up)] {
            let c = c.get_or_create(&l);
            c.inc_by(total.saturating_sub(c.get()));
        }
    }

    /// Make the `_today` gauges count `today`: set every one back to 0 when the day they
    /// counted is another, and the start gauge to today's midnight. Returns the day.
    pub(super) fn roll_day(&self, today: super::day::Day) -> super::day::Day {
        if let Ok(mut d) = self.day.lock() {
            if d.0 != Some(today) {
                if d.0.is_some() {
                    for l in &d.1 {
                        self.iface_today.get_or_create(l).set(0);
                    }
                }
                d.0 = Some(today);
                self.today_start
                    .get_or_create(&self.role_labels())
                    .set(today.start_unix);
            }
        }
        today
    }

    /// The OpenMetrics text of every family that has a series ([`Metrics::families`] names
    /// the others too).
    pub fn encode(&self) -> String {
        self.roll_day(super::day::Day::now());
        self.trusted_waits(nena_mptcp::trusted_waits());
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String does not fail");
        out
    }
}

/// How often [`Tally::live`] reads a running session's subflows.
pub const LIVE_EVERY: Duration = Duration::from_secs(1);

/// A session in progress ([`Metrics::begin`]).
#[derive(Debug)]
pub struct Active(Arc<Metrics>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.active.get_or_create(&self.0.role_labels()).dec();
    }
}

/// One session's entry, filled in as the session learns what it is (its mode, the
/// handshake's time, what it did on its paths) and counted once, at [`Tally::finish`].
/// Without metrics it records nothing.
#[derive(Clone, Debug)]
pub struct Tally(Option<Arc<std::sync::Mutex<TallyState>>>);

#[derive(Debug)]
struct TallyState {
    metrics: Arc<Metrics>,
    mode: &'static str,
    paths_used: PathsUsed,
    /// Per path and interface, what [`Tally::live`] has counted so far.
    counted: PathsUsed,
    done: bool,
    _active: Active,
}

impl Tally {
    /// A session begins (counted as active until it finishes).
    pub fn begin(metrics: Option<&Arc<Metrics>>) -> Tally {
        Tally(metrics.map(|m| {
            Arc::new(std::sync::Mutex::new(TallyState {
                metrics: m.clone(),
                mode: "none",
                paths_used: PathsUsed::default(),
                counted: PathsUsed::default(),
                done: false,
                _active: m.begin(),
            }))
        }))
    }

    fn with(&self, f: impl FnOnce(&mut TallyState)) {
        if let Some(t) = &self.0 {
            if let Ok(mut t) = t.lock() {
                f(&mut t);
            }
        }
    }

    /// The handshake is done: its time, and the session's mode (`None`: a raw listener).
    pub fn handshake(&self, took: Duration, info: Option<nena_proto::SessionInfo>, resumed: bool) {
        self.with(|t| {
            t.metrics.handshake(took, resumed);
            t.mode = info.map_or("raw", |i| i.mode.name());
        });
    }

    /// The session's opening is tried again ([`Metrics::retried_opening`]).
    pub fn retried_opening(&self) {
        self.with(|t| t.metrics.retried_opening());
    }

    /// What a datagram session's plane did (counted at once: the session's end).
    pub fn datagrams(&self, p: &DatagramCounts) {
        self.with(|t| t.metrics.datagrams(p));
    }

    /// What the session did on its paths (read just before its socket closes).
    pub fn paths_used(&self, used: PathsUsed) {
        self.with(|t| t.paths_used = used);
    }

    /// Runs `work` (a session's bulk: a relay, a file transfer) and, every [`LIVE_EVERY`]
    /// while it runs, counts the bytes that `read` says the session's paths carried since
    /// the last count: a long session shows in `nena_bytes_total` before it ends. Without
    /// metrics it only runs `work`.
    pub async fn live<T>(
        &self,
        read: impl Fn() -> PathsUsed,
        work: impl std::future::Future<Output = T>,
    ) -> T {
        if self.0.is_none() {
            return work.await;
        }
        tokio::pin!(work);
        let start = tokio::time::Instant::now() + LIVE_EVERY;
        let mut tick = tokio::time::interval_at(start, LIVE_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            // The count first when both are ready: the same instant counts alike every run.
            tokio::select! {
                biased;
                _ = tick.tick() => self.count_now(&read()),
                out = &mut work => return out,
            }
        }
    }

    /// Counts what `now` holds beyond what was counted (nothing once the session is done).
    fn count_now(&self, now: &PathsUsed) {
        self.with(|t| {
            if !t.done {
                t.metrics.add_bytes(&now.beyond(&t.counted));
                t.counted.raise(now);
            }
        });
    }

    /// The session ended with `result`: counted (once; later calls change nothing).
    pub fn finish<T>(&self, result: &Result<T, crate::Error>) {
        let outcome = result.as_ref().map_or_else(Outcome::of, |_| Outcome::Ok);
        self.with(|t| {
            if !t.done {
                t.done = true;
                t.metrics
                    .end(t.mode, outcome, &t.paths_used.beyond(&t.counted));
            }
        });
    }
}
