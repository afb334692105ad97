//! The scenario file: what a TOML scenario may say (serde, unknown keys refused) and the
//! checks that make a parsed scenario runnable (times in order and inside the run, values
//! in range). Parsing is pure: no lab, no I/O beyond reading the file's text.

use anyhow::{bail, Context, Result};
use nena_lab::emulate::{format_duration, parse_duration, parse_ge_loss, parse_loss};
use nena_lab::{Emulation, Family, LabConfig, Link, LinkEmulation, Loss, PmMode, Rate, RateTrace};
use serde::{de::Error as _, Deserialize, Deserializer, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A whole scenario.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// What the scenario reproduces (shown in the summary).
    #[serde(default)]
    pub description: String,
    /// Length of each run unless the run says otherwise.
    #[serde(deserialize_with = "duration", serialize_with = "ser_duration")]
    pub duration: Duration,
    /// How the lab is built.
    #[serde(default)]
    pub lab: LabSection,
    /// Per-link conditions at the start of every run.
    #[serde(default)]
    pub links: Links,
    /// What happens to the links during every run, at times from the run's start.
    #[serde(default)]
    pub events: Vec<Event>,
    /// The runs, one after the other, each in a fresh lab.
    pub runs: Vec<RunSpec>,
    /// Which links to capture (headers only unless `snaplen` says otherwise).
    #[serde(default)]
    pub capture: CaptureSpec,
    /// Socket samples (TCP_INFO of every subflow of the sending host).
    #[serde(default)]
    pub sample: SampleSpec,
}

/// `[lab]`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LabSection {
    /// Keep segmentation offloads (default false: one MSS per packet, as on a real wire).
    #[serde(default)]
    pub offload: bool,
    /// The client's path manager: "kernel" (default; the kernel adds the untrusted
    /// subflow) or "userspace" (nena opens subflows itself and recovers them after an
    /// outage; kernel MPTCP without nena then stays on one path).
    #[serde(default)]
    pub pm: PmMode,
    /// Dual stack (as `nena lab up --ipv6`): the default of both families becomes "dual".
    #[serde(default)]
    pub ipv6: bool,
    /// The families the trusted link carries: "ipv4", "ipv6" or "dual" (default: "dual"
    /// with `ipv6 = true`, else "ipv4"). The runs connect to the server's address of the
    /// trusted link's family (2001:2:0:3::2 when it carries IPv6 only).
    #[serde(default)]
    pub trusted_family: Option<Family>,
    /// The families the untrusted link carries (default as `trusted_family`).
    #[serde(default)]
    pub untrusted_family: Option<Family>,
    /// The router source-NATs the untrusted link's traffic to the server.
    #[serde(default)]
    pub untrusted_nat: bool,
    /// The router strips MPTCP options from every segment crossing the untrusted link.
    #[serde(default)]
    pub untrusted_strip_mptcp: bool,
}

impl LabSection {
    /// The families of the trusted and untrusted links ([`LabConfig::families`]).
    pub fn families(&self) -> Result<(Family, Family)> {
        LabConfig::families(self.ipv6, self.trusted_family, self.untrusted_family).context("[lab]")
    }
}

/// `[links.trusted]`, `[links.untrusted]`, `[links.server]`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Links {
    #[serde(default)]
    pub trusted: LinkSpec,
    #[serde(default)]
    pub untrusted: LinkSpec,
    #[serde(default)]
    pub server: LinkSpec,
}

impl Links {
    pub fn get(&self, link: Link) -> &LinkSpec {
        match link {
            Link::Trusted => &self.trusted,
            Link::Untrusted => &self.untrusted,
            Link::Server => &self.server,
            // Scenarios build labs without the LAN host (`validate` refuses the lan link);
            // it has no conditions of its own.
            Link::Lan => {
                static NONE: LinkSpec = LinkSpec {
                    rate: None,
                    delay: None,
                    jitter: None,
                    loss: None,
                    ge_loss: None,
                    trace: None,
                    reorder: false,
                    alias: None,
                };
                &NONE
            }
        }
    }
}

/// The conditions of one link (both directions).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// Rate limit, e.g. "2.8mbit" (tbf on both ends).
    #[serde(
        default,
        deserialize_with = "opt_rate",
        serialize_with = "ser_opt_display"
    )]
    pub rate: Option<Rate>,
    /// One-way delay, each direction, e.g. "20ms".
    #[serde(
        default,
        deserialize_with = "opt_duration",
        serialize_with = "ser_opt_duration"
    )]
    pub delay: Option<Duration>,
    /// Jitter added to the delay (no reordering).
    #[serde(
        default,
        deserialize_with = "opt_duration",
        serialize_with = "ser_opt_duration"
    )]
    pub jitter: Option<Duration>,
    /// Random loss, each direction, as the lab's flags write it: "5%" or "0.05".
    #[serde(
        default,
        deserialize_with = "opt_loss",
        serialize_with = "ser_opt_debug"
    )]
    pub loss: Option<Loss>,
    /// Bursty (Gilbert-Elliott) loss, "p,r[,1-h[,1-k]]" (see docs/LAB.md); not with `loss`.
    #[serde(
        default,
        deserialize_with = "opt_ge_loss",
        serialize_with = "ser_opt_debug"
    )]
    pub ge_loss: Option<Loss>,
    /// A rate trace (CSV `time_s,rate` or mahimahi), relative to the scenario's directory.
    #[serde(default)]
    pub trace: Option<PathBuf>,
    /// Let jitter reorder packets.
    #[serde(default)]
    pub reorder: bool,
    /// Informal name in the experiment being reproduced (e.g. "ppp0").
    #[serde(default)]
    pub alias: Option<String>,
}

impl LinkSpec {
    /// The link's emulation, the same both ways (`None`: a plain veth pair); `base` is the
    /// scenario's directory, against which a trace's path is read.
    pub fn emulation(&self, base: &Path) -> Result<Option<LinkEmulation>> {
        let e = Emulation {
            delay: self.delay.unwrap_or_default(),
            jitter: self.jitter.unwrap_or_default(),
            loss: self.loss.or(self.ge_loss).unwrap_or(Loss::None),
            trace: match &self.trace {
                Some(t) => Some(RateTrace::from_file(&base.join(t))?),
                None => None,
            },
            reorder: self.reorder,
            ..Emulation::default()
        };
        Ok((!e.is_nothing()).then(|| LinkEmulation::both(e)))
    }
}

/// What an event does.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// The link goes down (both ends), as a modem that loses its signal.
    Down,
    /// The link comes back.
    Up,
    /// The link's rate changes to `rate` (none: unlimited).
    Rate,
}

/// `[[events]]`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Event {
    #[serde(deserialize_with = "duration", serialize_with = "ser_duration")]
    pub at: Duration,
    pub link: Link,
    pub action: Action,
    /// For `action = "rate"`.
    #[serde(
        default,
        deserialize_with = "opt_rate",
        serialize_with = "ser_opt_display"
    )]
    pub rate: Option<Rate>,
}

/// The traffic of a run.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Traffic {
    /// One plain TCP connection over `link` (the study's single-flow reference).
    Tcp,
    /// Kernel MPTCP without nena (raw sender and receiver, counts checked).
    Mptcp,
    /// A `nena perf` session in `mode` (every byte checked).
    Nena,
    /// A `nena send` of a generated file of `bytes` in `mode` (SHA-256 checked).
    Send,
}

/// Which way the data goes.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Client to server (the study measured uploads).
    #[default]
    Up,
    /// Server to client.
    Down,
}

/// `[[runs]]`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// Name of the run (its directory under the output directory).
    pub name: String,
    pub traffic: Traffic,
    /// For `tcp`: the link it uses.
    #[serde(default)]
    pub link: Option<Link>,
    /// For `nena` and `send`: the mode (plain, kato, stream, aead).
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub direction: Direction,
    /// Congestion control of the run's TCP sockets (the hosts' default is set to it).
    #[serde(default)]
    pub cc: Option<String>,
    /// Length of the run (default: the scenario's `duration`); not for `send`.
    #[serde(
        default,
        deserialize_with = "opt_duration",
        serialize_with = "ser_opt_duration"
    )]
    pub time: Option<Duration>,
    /// For `send`: the file size, e.g. "64MiB".
    #[serde(default, deserialize_with = "opt_size")]
    pub bytes: Option<u64>,
    /// Leave the events out of this run.
    #[serde(default)]
    pub no_events: bool,
    /// The client's path manager for this run (default: `[lab] pm`).
    #[serde(default)]
    pub pm: Option<PmMode>,
    /// How many times to run it (each in a fresh lab); the summary gives the goodput's
    /// mean and sigma over the repetitions.
    #[serde(default = "one")]
    pub repeat: u32,
    /// A single-path TCP flow that runs beside this run's traffic, from the client over
    /// its own link to the server, for the fairness experiments: `competing = { link =
    /// "trusted", cc = "reno" }`. The summary gives its goodput and this run's share
    /// against it.
    #[serde(default)]
    pub competing: Option<Competing>,
    /// For `mptcp`: `subflows = 1` keeps the connection on its first subflow (the trusted
    /// link): the run's lab gets the userspace path manager, which opens no other. The
    /// single-subflow control of the fairness experiment. Default: the kernel path
    /// manager's two subflows.
    #[serde(default)]
    pub subflows: Option<u32>,
}

/// A competing TCP flow (`competing = { ... }` of a run).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Competing {
    /// The client's link it leaves from (default trusted).
    #[serde(default)]
    pub link: Option<Link>,
    /// Its congestion control, set on its socket alone (default: the run's `cc`, or the
    /// host's default).
    #[serde(default)]
    pub cc: Option<String>,
}

/// A congestion control name as the kernel takes it (TCP_CONGESTION: at most 15 bytes).
fn valid_cc(cc: &str) -> bool {
    !cc.is_empty() && cc.len() <= 15 && cc.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn one() -> u32 {
    1
}

impl RunSpec {
    /// The nena mode of a `nena` or `send` run.
    pub fn nena_mode(&self) -> Option<nena_proto::Mode> {
        self.mode.as_deref().and_then(|m| m.parse().ok())
    }

    /// The client's path manager for this run, `default` being `[lab] pm`: the userspace
    /// one for `subflows = 1` (it opens no second subflow), else the run's own or the default.
    pub fn path_manager(&self, default: PmMode) -> PmMode {
        if self.subflows == Some(1) {
            PmMode::Userspace
        } else {
            self.pm.unwrap_or(default)
        }
    }
}

/// `[capture]`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CaptureSpec {
    #[serde(default)]
    pub links: Vec<Link>,
    /// Bytes kept of each packet (default 128: headers, enough for `nena analyze`).
    #[serde(default)]
    pub snaplen: Option<u32>,
}

/// `[sample]`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SampleSpec {
    #[serde(deserialize_with = "duration", serialize_with = "ser_duration")]
    pub interval: Duration,
}

impl Default for SampleSpec {
    fn default() -> Self {
        SampleSpec {
            interval: Duration::from_millis(100),
        }
    }
}

impl Scenario {
    /// Parse and check a scenario from its text (`origin` names it in errors).
    pub fn parse(text: &str, origin: &str) -> Result<Scenario> {
        let s: Scenario = toml::from_str(text).map_err(|e| {
            let at = e
                .span()
                .map(|sp| {
                    let before = &text.as_bytes()[..sp.start.min(text.len())];
                    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
                    let col = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
                    format!(":{line}:{col}")
                })
                .unwrap_or_default();
            anyhow::anyhow!(
                "{origin}{at}: {}",
                e.message().trim_end().replace('\n', " ")
            )
        })?;
        s.check().with_context(|| origin.to_string())?;
        Ok(s)
    }

    /// Read, parse and check a scenario file.
    pub fn load(path: &Path) -> Result<Scenario> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the scenario {}", path.display()))?;
        let s = Scenario::parse(&text, &path.display().to_string())?;
        let base = base_dir(path);
        for (name, l) in [
            ("trusted", &s.links.trusted),
            ("untrusted", &s.links.untrusted),
            ("server", &s.links.server),
        ] {
            l.emulation(&base)
                .with_context(|| format!("{}: links.{name}", path.display()))?;
        }
        Ok(s)
    }

    /// Every run shortened by `factor` (0 < factor <= 1): durations and event times scale,
    /// so a test can run the same scenario in a fraction of the time.
    pub fn scaled(&self, factor: f64) -> Result<Scenario> {
        if !(factor > 0.0 && factor <= 1.0) {
            bail!("the scale factor must be in (0, 1], not {factor}");
        }
        let sc = |d: Duration| d.mul_f64(factor);
        let mut s = self.clone();
        s.duration = sc(s.duration);
        for e in &mut s.events {
            e.at = sc(e.at);
        }
        for r in &mut s.runs {
            r.time = r.time.map(sc);
        }
        Ok(s)
    }

    /// The checks serde cannot make.
    pub fn check(&self) -> Result<()> {
        if self.duration.is_zero() {
            bail!("duration must be positive");
        }
        if self.runs.is_empty() {
            bail!("a scenario needs at least one [[runs]]");
        }
        self.lab.families()?;
        if self.sample.interval < Duration::from_millis(10) {
            bail!("sample.interval must be at least 10ms");
        }
        for (name, l) in [
            ("trusted", &self.links.trusted),
            ("untrusted", &self.links.untrusted),
            ("server", &self.links.server),
        ] {
            if l.loss.is_some() && l.ge_loss.is_some() {
                bail!("links.{name}: loss and ge_loss are exclusive");
            }
            if l.jitter.is_some() && l.delay.is_none() {
                bail!("links.{name}: jitter needs a delay");
            }
        }
        let lan_named = self.events.iter().any(|e| e.link == Link::Lan)
            || self.capture.links.contains(&Link::Lan)
            || self.runs.iter().any(|r| {
                r.link == Some(Link::Lan)
                    || r.competing
                        .as_ref()
                        .is_some_and(|c| c.link == Some(Link::Lan))
            });
        if lan_named {
            bail!("the lan link is not part of scenarios (their labs have no LAN host)");
        }
        let mut last = Duration::ZERO;
        for (i, e) in self.events.iter().enumerate() {
            if e.at < last {
                bail!(
                    "events[{i}] at {} comes before the event ahead of it ({}): list events in time order",
                    format_duration(e.at),
                    format_duration(last)
                );
            }
            last = e.at;
            if e.at >= self.duration {
                bail!(
                    "events[{i}] at {} is not inside the run ({})",
                    format_duration(e.at),
                    format_duration(self.duration)
                );
            }
            match (e.action, e.rate.is_some()) {
                (Action::Rate, _) => {}
                (_, true) => bail!("events[{i}]: `rate` only goes with action = \"rate\""),
                _ => {}
            }
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, r) in self.runs.iter().enumerate() {
            if r.name.is_empty()
                || !r
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
                || r.name.starts_with('.')
            {
                bail!(
                    "runs[{i}].name {:?}: use letters, digits, '-', '_' and '.'",
                    r.name
                );
            }
            if !names.insert(&r.name) {
                bail!("runs[{i}].name {:?} is used twice", r.name);
            }
            if !(1..=100).contains(&r.repeat) {
                bail!(
                    "runs[{i}] ({}): repeat must be 1 to 100, not {}",
                    r.name,
                    r.repeat
                );
            }
            if r.time.is_some_and(|t| t.is_zero()) {
                bail!("runs[{i}] ({}): time must be positive", r.name);
            }
            match r.traffic {
                Traffic::Tcp => {
                    if r.link.is_none() || r.link == Some(Link::Server) {
                        bail!(
                            "runs[{i}] ({}): a tcp run needs link = \"trusted\" or \"untrusted\"",
                            r.name
                        );
                    }
                }
                Traffic::Nena | Traffic::Send => match &r.mode {
                    None => bail!("runs[{i}] ({}): a {:?} run needs a mode", r.name, r.traffic),
                    Some(m) if r.nena_mode().is_none() => {
                        bail!(
                            "runs[{i}] ({}): unknown mode {m:?} (plain, kato, stream, aead)",
                            r.name
                        )
                    }
                    _ => {}
                },
                Traffic::Mptcp => {}
            }
            if let Some(n) = r.subflows {
                if r.traffic != Traffic::Mptcp {
                    bail!("runs[{i}] ({}): `subflows` is only for mptcp runs", r.name);
                }
                if n != 1 {
                    bail!(
                        "runs[{i}] ({}): subflows = {n}: only 1 can be asked for (two, over both links, is the default)",
                        r.name
                    );
                }
                if r.pm == Some(PmMode::Kernel) {
                    bail!(
                        "runs[{i}] ({}): subflows = 1 runs with the userspace path manager; leave out pm = \"kernel\"",
                        r.name
                    );
                }
            }
            if r.traffic == Traffic::Mptcp
                && r.subflows != Some(1)
                && r.path_manager(self.lab.pm) == PmMode::Userspace
            {
                bail!(
                    "runs[{i}] ({}): kernel MPTCP without nena needs pm = \"kernel\" (with the userspace path manager nothing opens its second subflow; subflows = 1 says that is meant)",
                    r.name
                );
            }
            if r.traffic != Traffic::Tcp && r.link.is_some() {
                bail!("runs[{i}] ({}): `link` is only for tcp runs", r.name);
            }
            if r.traffic != Traffic::Nena && r.traffic != Traffic::Send && r.mode.is_some() {
                bail!(
                    "runs[{i}] ({}): `mode` is only for nena and send runs",
                    r.name
                );
            }
            match (r.traffic, r.bytes) {
                (Traffic::Send, None) => bail!("runs[{i}] ({}): a send run needs bytes", r.name),
                (Traffic::Send, Some(0)) => bail!("runs[{i}] ({}): bytes must be positive", r.name),
                (Traffic::Send, Some(_)) if r.time.is_some() => {
                    bail!("runs[{i}] ({}): a send run has bytes, not a time", r.name)
                }
                (t, Some(_)) if t != Traffic::Send => {
                    bail!("runs[{i}] ({}): `bytes` is only for send runs", r.name)
                }
                _ => {}
            }
            if let Some(cc) = &r.cc {
                if !valid_cc(cc) {
                    bail!("runs[{i}] ({}): bad congestion control name {cc:?}", r.name);
                }
            }
            if let Some(c) = &r.competing {
                if r.direction != Direction::Up {
                    bail!(
                        "runs[{i}] ({}): a competing flow goes up (client to server), as the run must",
                        r.name
                    );
                }
                if c.link == Some(Link::Server) {
                    bail!("runs[{i}] ({}): a competing flow leaves from a client link (trusted or untrusted)", r.name);
                }
                if let Some(cc) = &c.cc {
                    if !valid_cc(cc) {
                        bail!("runs[{i}] ({}): bad congestion control name {cc:?} of the competing flow", r.name);
                    }
                }
            }
        }
        Ok(())
    }

    /// The length of run `r`.
    pub fn run_time(&self, r: &RunSpec) -> Duration {
        r.time.unwrap_or(self.duration)
    }
}

/// Where a scenario's relative paths point (its directory).
pub fn base_dir(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_default()
}

fn duration<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    parse_duration(&s).map_err(|e| D::Error::custom(e.to_string()))
}

fn opt_duration<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<Duration>, D::Error> {
    duration(d).map(Some)
}

fn opt_loss<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<Loss>, D::Error> {
    let s = String::deserialize(d)?;
    parse_loss(&s)
        .map(Some)
        .map_err(|e| D::Error::custom(e.to_string()))
}

fn opt_ge_loss<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<Loss>, D::Error> {
    let s = String::deserialize(d)?;
    parse_ge_loss(&s)
        .map(Some)
        .map_err(|e| D::Error::custom(e.to_string()))
}

fn ser_opt_debug<S: serde::Serializer, T: Serialize>(
    v: &Option<T>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    v.serialize(s)
}

fn opt_rate<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<Rate>, D::Error> {
    let s = String::deserialize(d)?;
    s.parse::<Rate>()
        .map(Some)
        .map_err(|e| D::Error::custom(format!("bad rate {s:?}: {e}")))
}

fn opt_size<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum N {
        Int(u64),
        Text(String),
    }
    match N::deserialize(d)? {
        N::Int(n) => Ok(Some(n)),
        // The command line's parser: "100M" is 100 MiB here too.
        N::Text(s) => nena_transport::text::units::parse_bytes(&s)
            .map(Some)
            .map_err(|e| D::Error::custom(format!("bad size {s:?}: {e}"))),
    }
}

fn ser_duration<S: serde::Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&format_duration(*d))
}

fn ser_opt_duration<S: serde::Serializer>(
    d: &Option<Duration>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    match d {
        Some(d) => ser_duration(d, s),
        None => s.serialize_none(),
    }
}

fn ser_opt_display<S: serde::Serializer, T: std::fmt::Display>(
    v: &Option<T>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.serialize_str(&v.to_string()),
        None => s.serialize_none(),
    }
}
