//! `nena bench realtime` (issue 56, item 3): a call-like flow, [`RATE`] datagrams a second of
//! [`SIZE`] bytes, each stamped with its sequence number and send time and echoed by the
//! server host (behind the proxy server), so the sender measures every round trip. Four
//! subjects send it at once, in one lab of its own with a LAN host, the trusted link 30 ms
//! one way and the WLAN 10 ms one way, both with jitter (the lab's link emulator):
//!
//! - `straight-trusted`, `straight-wlan`: from the client host, bound to the link's address,
//!   straight to the echo without nena (each link alone);
//! - `gateway`: from the LAN host through `nena gateway` (today each LAN socket's datagrams
//!   ride one nena session over MPTCP);
//! - `run`: from the client host under `nena run` (the same flow as a process of its own,
//!   the hidden `nena bench realtime-flow`).
//!
//! Settings ([`SETTINGS`]): WLAN loss 0, 1, 2 and 5% each way; the WLAN down for
//! `--outage-seconds` mid-flow (with 1% loss, as issue 56 measured it); the trusted link
//! down as long (WLAN without loss, so that a single link stays a clean baseline). A link is
//! taken down and brought back as `nena lab` does it (both ends of the link down, routes
//! restored after).
//!
//! Each flow begins with a setup datagram there and back (a call's signalling: the nena
//! session is open before the measured flow; its time is reported apart, `setup_ms`). Per
//! subject and setting: p50/p95/p99 round trip over every datagram sent (a lost one counts
//! as never back), the longest round trip, lost, late (> 1 s), the longest stretch
//! without a timely echo, and bytes on the wire per link (nftables counters at the client's
//! end of each link, see [`wire`]) against the flow's payload plus IP/UDP headers.
//!
//! Targets, for the nena subjects, in every setting, computed in the same run: p99 at most
//! the better single link's p99 + [`P99_MARGIN_MS`]; in the outage settings nothing lost or
//! late; bytes on the wire at most [`WIRE_TARGET`]x the flow's payload plus headers. And
//! with `--bulk-seconds` > 0 the bulk variant ([`bulk`]).
//!
//! The datagram plane of issue 56 (items 1-2) is measured by the same bench, unchanged:
//! `--udp-redundancy MODE` is passed to the gateway and to `nena run` when their `--help`
//! lists it (refused otherwise), and `--gateway-arg` / `--run-arg` pass anything else.

pub mod bulk;
pub mod ends;
pub mod flow;
mod report;
pub mod wire;

pub use report::{table, targets};

use crate::host::{cpu_model, kernel, loadavg};
use crate::own_lab::in_own_lab;
use crate::progress::Progress;
use anyhow::{bail, Context, Result};
use flow::{Echo, FlowRecord, FlowSpec, FlowStats, IP_UDP_HEADERS};
use nena_lab::emulate::{Direction, Emulation, LinkEmulation, Loss};
use nena_lab::{Host, Lab, LabConfig, Link, LAN_HOST_ADDR, SERVER_ADDR};
use serde::Serialize;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use wire::{LinkTotal, Matcher, Wire};

/// Datagrams a second.
pub const RATE: u32 = 50;
/// Bytes of each datagram's payload.
pub const SIZE: usize = 160;
/// How long a sender waits for echoes after its last datagram.
pub const DRAIN: Duration = Duration::from_secs(3);
/// The trusted link: one-way delay and jitter (each frame's delay uniform in delay ± jitter,
/// in order), both directions.
pub const TRUSTED_DELAY: Duration = Duration::from_millis(30);
pub const TRUSTED_JITTER: Duration = Duration::from_millis(10);
/// The WLAN.
pub const WLAN_DELAY: Duration = Duration::from_millis(10);
pub const WLAN_JITTER: Duration = Duration::from_millis(5);
/// p99 of a nena subject at most the better single link's plus this.
pub const P99_MARGIN_MS: f64 = 10.0;
/// Bytes on the wire at most this times the flow's payload plus IP/UDP headers.
pub const WIRE_TARGET: f64 = 2.2;
/// The echo's port on the server host.
pub const ECHO_PORT: u16 = 7300;
/// The bulk stream's iperf3 server port on the server host.
pub const IPERF_PORT: u16 = 7309;
/// The proxy servers' ports: the gateway's and `nena run`'s.
pub const GATEWAY_PROXY_PORT: u16 = 7100;
pub const RUN_PROXY_PORT: u16 = 7101;

/// One setting of the links.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Setting {
    pub name: &'static str,
    /// Random loss of the WLAN, each direction (0..1).
    pub wlan_loss: f64,
    /// The link taken down mid-flow.
    pub outage: Option<Link>,
}

pub const SETTINGS: [Setting; 6] = [
    Setting {
        name: "loss0",
        wlan_loss: 0.0,
        outage: None,
    },
    Setting {
        name: "loss1",
        wlan_loss: 0.01,
        outage: None,
    },
    Setting {
        name: "loss2",
        wlan_loss: 0.02,
        outage: None,
    },
    Setting {
        name: "loss5",
        wlan_loss: 0.05,
        outage: None,
    },
    Setting {
        name: "wlan-outage",
        wlan_loss: 0.01,
        outage: Some(Link::Untrusted),
    },
    Setting {
        name: "trusted-outage",
        wlan_loss: 0.0,
        outage: Some(Link::Trusted),
    },
];

/// The subjects, in the report's order: the two single links, then nena's.
pub const STRAIGHT_TRUSTED: &str = "straight-trusted";
pub const STRAIGHT_WLAN: &str = "straight-wlan";
pub const GATEWAY: &str = "gateway";
pub const RUN: &str = "run";

#[derive(Debug, Clone)]
pub struct RealtimeOptions {
    /// Seconds of each flow.
    pub seconds: u32,
    /// Seconds of each outage (less than `seconds`).
    pub outage_seconds: f64,
    /// The settings to run (names of [`SETTINGS`]; empty: all).
    pub only: Vec<String>,
    /// `--udp-redundancy MODE` for the gateway and `nena run` (None: not passed).
    pub udp_redundancy: Option<String>,
    /// More arguments for the gateway and for `nena run`.
    pub gateway_args: Vec<String>,
    pub run_args: Vec<String>,
    /// Whether `nena run` is there (the binary's `policy` feature): else no `run` subject.
    pub with_run: bool,
    /// Seconds of the bulk stream (0: none).
    pub bulk_seconds: u32,
    pub iperf3: PathBuf,
    pub nena: PathBuf,
    /// `nena --version`, for the report.
    pub nena_version: String,
}

impl RealtimeOptions {
    /// The settings chosen, in [`SETTINGS`]' order; an unknown name is an error.
    pub fn settings(&self) -> Result<Vec<Setting>> {
        for n in &self.only {
            if !SETTINGS.iter().any(|s| s.name == n) {
                bail!(
                    "no setting `{n}` (settings: {})",
                    SETTINGS.map(|s| s.name).join(", ")
                );
            }
        }
        Ok(SETTINGS
            .into_iter()
            .filter(|s| self.only.is_empty() || self.only.iter().any(|n| n == s.name))
            .collect())
    }

    /// Check what can be checked before any lab: the durations, the settings' names, and
    /// that the gateway and `nena run` take `--udp-redundancy` when it is asked for.
    pub fn check(&self) -> Result<()> {
        if self.seconds == 0 {
            bail!("--seconds must be more than 0");
        }
        if !(self.outage_seconds > 0.0 && self.outage_seconds < f64::from(self.seconds)) {
            bail!(
                "--outage-seconds must be more than 0 and less than --seconds ({})",
                self.seconds
            );
        }
        self.settings()?;
        if self.udp_redundancy.is_some() {
            let mut commands = vec![vec!["gateway"]];
            if self.with_run {
                commands.push(vec!["run"]);
            }
            for c in commands {
                if !ends::offers(&self.nena, &c, "--udp-redundancy")? {
                    bail!(
                        "--udp-redundancy: `nena {}` has no such option here (this nena \
                         predates the datagram plane); leave it out to measure it as it is",
                        c.join(" ")
                    );
                }
            }
        }
        Ok(())
    }

    fn extra(&self, own: &[String]) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(m) = &self.udp_redundancy {
            v.extend(["--udp-redundancy".to_string(), m.clone()]);
        }
        v.extend(own.iter().cloned());
        v
    }
}

/// One subject's flow in one setting.
#[derive(Debug, Clone, Serialize)]
pub struct SubjectResult {
    pub subject: String,
    pub flow: FlowStats,
    pub wire: Wire,
    pub wire_bytes: u64,
    /// (sent + echoed) x (payload + IP/UDP headers).
    pub flow_bytes: u64,
    pub wire_ratio: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SettingResult {
    pub name: String,
    pub wlan_loss_percent: f64,
    /// The link taken down (trusted, untrusted), when it went down and came back (seconds
    /// from the flows' start, as done).
    pub outage: Option<String>,
    pub outage_down_s: Option<f64>,
    pub outage_up_s: Option<f64>,
    pub subjects: Vec<SubjectResult>,
    /// The single link with the lower p99 (None: neither delivered 99%).
    pub better_single: Option<String>,
    pub better_single_p99_ms: Option<f64>,
    pub links: Vec<LinkTotal>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Target {
    pub setting: String,
    pub subject: String,
    pub name: String,
    /// The figure (None: a p99 on lost datagrams).
    pub value: Option<f64>,
    /// The bound (None: nothing to judge against).
    pub limit: Option<f64>,
    /// None: not judged (no single link delivered 99% of its datagrams).
    pub pass: Option<bool>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RealtimeReport {
    pub seconds: u32,
    pub rate: u32,
    pub size: usize,
    pub drain_s: f64,
    pub outage_seconds: f64,
    pub trusted_delay_ms: f64,
    pub trusted_jitter_ms: f64,
    pub wlan_delay_ms: f64,
    pub wlan_jitter_ms: f64,
    pub udp_redundancy: Option<String>,
    pub gateway_args: Vec<String>,
    pub run_args: Vec<String>,
    pub settings: Vec<SettingResult>,
    pub bulk: Option<bulk::Bulk>,
    pub targets: Vec<Target>,
    /// Every judged target passed.
    pub pass: bool,
    pub nena_version: String,
    pub cpu: String,
    pub kernel: String,
    pub loadavg_start: String,
    pub loadavg_end: String,
}

/// Bring up the bench's lab, run the bench in it, tear it down (also on Ctrl-C).
pub fn run(
    opts: &RealtimeOptions,
    progress: impl FnMut(&str) + Send + 'static,
) -> Result<RealtimeReport> {
    opts.check()?;
    let both = |delay, jitter| {
        Some(LinkEmulation::both(Emulation {
            delay,
            jitter,
            ..Emulation::default()
        }))
    };
    let cfg = LabConfig {
        verify: true,
        lan: true,
        relay_exe: Some(opts.nena.clone()),
        trusted_emulation: both(TRUSTED_DELAY, TRUSTED_JITTER),
        untrusted_emulation: both(WLAN_DELAY, WLAN_JITTER),
        ..LabConfig::with_prefix(format!("rt{}", std::process::id()))
    };
    let opts = opts.clone();
    in_own_lab(&cfg, move |prefix| run_on(prefix, &opts, progress))
}

/// The subjects' counters on the wire.
fn matchers(with_run: bool) -> Vec<Matcher> {
    let straight = |subject: &str, link: Link| {
        let a = ends::straight_source(link);
        Matcher {
            subject: subject.into(),
            up: format!("ip saddr {a} udp dport {ECHO_PORT}"),
            down: format!("ip daddr {a} udp sport {ECHO_PORT}"),
        }
    };
    let nena = |subject: &str, port: u16| Matcher {
        subject: subject.into(),
        // The session (TCP) and the datagram plane (sealed UDP) on the proxy server's port.
        up: format!("meta l4proto {{ tcp, udp }} th dport {port}"),
        down: format!("meta l4proto {{ tcp, udp }} th sport {port}"),
    };
    let mut v = vec![
        straight(STRAIGHT_TRUSTED, Link::Trusted),
        straight(STRAIGHT_WLAN, Link::Untrusted),
        nena(GATEWAY, GATEWAY_PROXY_PORT),
    ];
    if with_run {
        v.push(nena(RUN, RUN_PROXY_PORT));
    }
    v
}

struct RemoveDir(PathBuf);

impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Brings a link taken down back up when dropped (an error mid-outage).
struct LinkBack<'a> {
    lab: &'a Lab,
    link: Option<Link>,
}

impl LinkBack<'_> {
    fn up(&mut self) -> Result<()> {
        if let Some(l) = self.link.take() {
            self.lab.set_link(l, true)?;
        }
        Ok(())
    }
}

impl Drop for LinkBack<'_> {
    fn drop(&mut self) {
        let _ = self.up();
    }
}

/// What a setting's run needs from the bench's ends.
struct Ends<'a> {
    lab: &'a Lab,
    opts: &'a RealtimeOptions,
    echo: &'a Echo,
    dir: &'a std::path::Path,
}

fn run_on(
    prefix: &str,
    opts: &RealtimeOptions,
    mut progress: impl FnMut(&str),
) -> Result<RealtimeReport> {
    let loadavg_start = loadavg();
    let lab = Lab::open(prefix)?;
    let dir = std::env::temp_dir().join(format!("nena-bench-realtime-{prefix}"));
    std::fs::create_dir_all(&dir)?;
    let _rm = RemoveDir(dir.clone());
    let echo_at = SocketAddrV4::new(SERVER_ADDR, ECHO_PORT);
    let sock = lab
        .run_in(Host::Server, move || UdpSocket::bind(echo_at))?
        .with_context(|| format!("binding the echo on {echo_at}"))?;
    let mut echo = Echo::serve(sock)?;
    let gw_via = SocketAddrV4::new(SERVER_ADDR, GATEWAY_PROXY_PORT);
    let run_via = SocketAddrV4::new(SERVER_ADDR, RUN_PROXY_PORT);
    let mut gw_server =
        ends::proxy_server(&lab, &opts.nena, gw_via, dir.join("proxy-gateway.log"))?;
    let mut run_server = if opts.with_run {
        Some(ends::proxy_server(
            &lab,
            &opts.nena,
            run_via,
            dir.join("proxy-run.log"),
        )?)
    } else {
        None
    };
    let mut gateway = ends::gateway(
        &lab,
        &opts.nena,
        gw_via,
        &opts.extra(&opts.gateway_args),
        dir.join("gateway.log"),
    )?;
    let matchers = matchers(opts.with_run);
    wire::install(&lab, &matchers)?;
    progress(&format!(
        "lab {prefix} up: trusted {} ms ±{}, WLAN {} ms ±{} one way; {} s flows of {RATE} \
         datagrams/s x {SIZE} B",
        TRUSTED_DELAY.as_millis(),
        TRUSTED_JITTER.as_millis(),
        WLAN_DELAY.as_millis(),
        WLAN_JITTER.as_millis(),
        opts.seconds
    ));
    let ends = Ends {
        lab: &lab,
        opts,
        echo: &echo,
        dir: &dir,
    };
    let mut settings = Vec::new();
    for (i, s) in opts.settings()?.into_iter().enumerate() {
        gw_server.check_running()?;
        gateway.check_running()?;
        if let Some(p) = &mut run_server {
            p.check_running()?;
        }
        let r = run_setting(&ends, &s, i as u32).with_context(|| format!("setting {}", s.name))?;
        progress(&setting_line(&r));
        settings.push(r);
    }
    let bulk = if opts.bulk_seconds > 0 {
        wlan_emulation(&lab, 0.0)?;
        let b = bulk::run(
            &lab,
            &opts.iperf3,
            SocketAddrV4::new(SERVER_ADDR, IPERF_PORT),
            opts.bulk_seconds,
            gateway.pid(),
            &dir.join("iperf3.log"),
        )?;
        progress(&format!(
            "bulk {} Mbit/s: lost {:.3}% straight, {:.3}% through the gateway; gateway CPU \
             {:.2} s/GB",
            b.target_mbit_s,
            b.straight.lost_percent,
            b.gateway.lost_percent,
            b.gateway_cpu_s_per_gb
        ));
        Some(b)
    } else {
        None
    };
    echo.stop();
    let targets = targets(&settings, bulk.as_ref());
    let judged: Vec<bool> = targets.iter().filter_map(|t| t.pass).collect();
    Ok(RealtimeReport {
        seconds: opts.seconds,
        rate: RATE,
        size: SIZE,
        drain_s: DRAIN.as_secs_f64(),
        outage_seconds: opts.outage_seconds,
        trusted_delay_ms: ms(TRUSTED_DELAY),
        trusted_jitter_ms: ms(TRUSTED_JITTER),
        wlan_delay_ms: ms(WLAN_DELAY),
        wlan_jitter_ms: ms(WLAN_JITTER),
        udp_redundancy: opts.udp_redundancy.clone(),
        gateway_args: opts.gateway_args.clone(),
        run_args: opts.run_args.clone(),
        settings,
        bulk,
        pass: !judged.is_empty() && judged.iter().all(|&p| p),
        targets,
        nena_version: opts.nena_version.clone(),
        cpu: cpu_model().unwrap_or_default(),
        kernel: kernel(),
        loadavg_start,
        loadavg_end: loadavg(),
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The WLAN's delay and jitter with `loss` each way.
fn wlan_emulation(lab: &Lab, loss: f64) -> Result<()> {
    let e = Emulation {
        delay: WLAN_DELAY,
        jitter: WLAN_JITTER,
        loss: if loss > 0.0 {
            Loss::Random(loss)
        } else {
            Loss::None
        },
        ..Emulation::default()
    };
    for d in Direction::BOTH {
        lab.set_emulation(Link::Untrusted, d, e.clone())?;
    }
    Ok(())
}

/// A sender thread's handle: its go signal and its end.
struct Sender {
    subject: &'static str,
    flow: u32,
    go: mpsc::Sender<bool>,
    done: std::thread::JoinHandle<Result<Result<FlowRecord>>>,
}

/// Start `spec` on a thread in `host`; returns once its socket is bound.
fn sender(lab: &Lab, host: Host, subject: &'static str, spec: FlowSpec) -> Result<Sender> {
    let (ready_tx, ready_rx) = mpsc::channel();
    let (go, go_rx) = mpsc::channel();
    let flow = spec.flow;
    let done = lab.spawn_in(host, move || {
        flow::run_flow(
            &spec,
            move || {
                let _ = ready_tx.send(());
            },
            move || go_rx.recv().unwrap_or(false),
        )
    });
    if ready_rx.recv_timeout(Duration::from_secs(20)).is_err() {
        let e = match done.join() {
            Ok(Ok(Err(e))) => e,
            Ok(Err(e)) => e,
            _ => anyhow::anyhow!("the sender thread ended"),
        };
        return Err(e.context(format!("the {subject} flow did not get ready")));
    }
    Ok(Sender {
        subject,
        flow,
        go,
        done,
    })
}

/// The four flows of one setting at once, the outage in their middle, and their figures.
fn run_setting(ends: &Ends<'_>, s: &Setting, index: u32) -> Result<SettingResult> {
    let (lab, opts) = (ends.lab, ends.opts);
    wlan_emulation(lab, s.wlan_loss)?;
    let count = opts.seconds * RATE;
    let to = SocketAddr::V4(SocketAddrV4::new(SERVER_ADDR, ECHO_PORT));
    let spec = |subject: u32, bind: Option<std::net::Ipv4Addr>| FlowSpec {
        flow: (index + 1) * 10 + subject,
        to,
        bind: bind.map(|a| SocketAddr::V4(SocketAddrV4::new(a, 0))),
        rate: RATE,
        size: SIZE,
        count,
        drain: DRAIN,
    };
    // The flow under nena run first (its setup is the longest), then the threads.
    let mut run_flow = if opts.with_run {
        Some(ends::RunFlow::start(
            lab,
            &opts.nena,
            SocketAddrV4::new(SERVER_ADDR, RUN_PROXY_PORT),
            &opts.extra(&opts.run_args),
            &spec(3, None),
            ends.dir.join(format!("run-{}.log", s.name)),
        )?)
    } else {
        None
    };
    let run_id = spec(3, None).flow;
    let senders = vec![
        sender(
            lab,
            Host::Client,
            STRAIGHT_TRUSTED,
            spec(0, Some(ends::straight_source(Link::Trusted))),
        )?,
        sender(
            lab,
            Host::Client,
            STRAIGHT_WLAN,
            spec(1, Some(ends::straight_source(Link::Untrusted))),
        )?,
        sender(lab, Host::Lan, GATEWAY, spec(2, Some(LAN_HOST_ADDR)))?,
    ];
    // The links' totals outside the counters' readings (before first, after last): a
    // packet between two readings is then left unattributed, never claimed twice.
    let links_before = wire::read_links(lab)?;
    let counters_before = wire::read_counters(lab)?;
    // Go: every flow starts now.
    for x in &senders {
        let _ = x.go.send(true);
    }
    if let Some(f) = &mut run_flow {
        f.go()?;
    }
    let t0 = Instant::now();
    let flow_time = Duration::from_secs(u64::from(opts.seconds));
    let outage = Duration::from_secs_f64(opts.outage_seconds);
    let down_at = (flow_time - outage) / 2;
    let mut back = LinkBack { lab, link: None };
    let (mut down_s, mut up_s) = (None, None);
    let bar = Progress::stderr_if_tty(&format!("realtime {}", s.name));
    let total = flow_time + DRAIN;
    let deadline = total + Duration::from_secs(60);
    loop {
        let now = t0.elapsed();
        bar.update(
            now.as_millis().min(total.as_millis()) as u64 / 100,
            total.as_millis() as u64 / 100,
        );
        if let Some(link) = s.outage {
            if down_s.is_none() && now >= down_at {
                lab.set_link(link, false)?;
                back.link = Some(link);
                down_s = Some(now.as_secs_f64());
            } else if down_s.is_some() && up_s.is_none() && now >= down_at + outage {
                back.up()?;
                up_s = Some(t0.elapsed().as_secs_f64());
            }
        }
        let outage_done = s.outage.is_none() || up_s.is_some();
        let run_done = run_flow.as_mut().is_none_or(|f| f.ended());
        if outage_done && run_done && senders.iter().all(|x| x.done.is_finished()) {
            break;
        }
        if now > deadline {
            bail!("the flows did not end within {deadline:?}");
        }
        // sleep: the flows run for their time; the bar and the outage follow the clock
        std::thread::sleep(Duration::from_millis(50));
    }
    bar.finish();
    let counters_after = wire::read_counters(lab)?;
    let links_after = wire::read_links(lab)?;
    let mut records: Vec<(&str, u32, FlowRecord)> = Vec::new();
    for x in senders {
        let r = x
            .done
            .join()
            .map_err(|_| anyhow::anyhow!("the {} sender panicked", x.subject))???;
        records.push((x.subject, x.flow, r));
    }
    if let Some(f) = run_flow {
        records.push((RUN, run_id, f.finish(Duration::from_secs(30))?));
    }
    let subjects: Vec<SubjectResult> = records
        .iter()
        .map(|(subject, flow, r)| {
            let stats = FlowStats::of(r, ends.echo.echoed(*flow));
            let wire = Wire::between(subject, &counters_before, &counters_after);
            let flow_bytes =
                (u64::from(stats.sent) + stats.echoed) * (SIZE as u64 + IP_UDP_HEADERS);
            let wire_bytes = wire.total();
            SubjectResult {
                subject: subject.to_string(),
                flow: stats,
                wire_ratio: if flow_bytes > 0 {
                    wire_bytes as f64 / flow_bytes as f64
                } else {
                    f64::NAN
                },
                wire,
                wire_bytes,
                flow_bytes,
            }
        })
        .collect();
    let links = links_before
        .iter()
        .zip(&links_after)
        .map(|((link, up0, down0), (_, up1, down1))| {
            let (up, down) = (up1.saturating_sub(*up0), down1.saturating_sub(*down0));
            let claimed: u64 = subjects
                .iter()
                .map(|x| match link.as_str() {
                    "trusted" => x.wire.trusted_up + x.wire.trusted_down,
                    _ => x.wire.wlan_up + x.wire.wlan_down,
                })
                .sum();
            LinkTotal {
                link: link.clone(),
                up,
                down,
                unattributed: (up + down) as i64 - claimed as i64,
            }
        })
        .collect();
    let (better_single, better_single_p99_ms) = better_single(&subjects);
    Ok(SettingResult {
        name: s.name.to_string(),
        wlan_loss_percent: s.wlan_loss * 100.0,
        outage: s.outage.map(|l| l.name().to_string()),
        outage_down_s: down_s,
        outage_up_s: up_s,
        subjects,
        better_single,
        better_single_p99_ms,
        links,
    })
}

/// The single link whose straight flow had the lower p99 (a p99 on lost datagrams is no
/// better than any), and that p99.
fn better_single(subjects: &[SubjectResult]) -> (Option<String>, Option<f64>) {
    subjects
        .iter()
        .filter(|x| x.subject == STRAIGHT_TRUSTED || x.subject == STRAIGHT_WLAN)
        .filter_map(|x| x.flow.p99_ms.map(|p| (x.subject.clone(), p)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map_or((None, None), |(s, p)| (Some(s), Some(p)))
}

pub(super) fn opt_ms(x: Option<f64>) -> String {
    x.map_or("lost".to_string(), |v| format!("{v:.1}"))
}

/// One setting's summary line (progress).
fn setting_line(r: &SettingResult) -> String {
    let each: Vec<String> = r
        .subjects
        .iter()
        .map(|x| {
            format!(
                "{} p99 {} lost+late {}",
                x.subject,
                opt_ms(x.flow.p99_ms),
                x.flow.lost_or_late
            )
        })
        .collect();
    format!("{}: {}", r.name, each.join("; "))
}

#[cfg(test)]
mod tests;
