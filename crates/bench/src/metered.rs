//! `nena bench metered`: a metered trusted path (issue 56, item 4). A phone's trusted path
//! is LTE on a data plan, its untrusted one a free WLAN: with `--metered` on the trusted
//! interface nena should put the handshake and the first flight on it (the gate) and the
//! rest on the WLAN while the WLAN is up, and fall back to LTE without a stall when the
//! WLAN goes.
//!
//! In a lab of its own per path manager (userspace, then in-kernel), with the trusted link
//! at [`MeteredOptions::trusted_mbit`] and `trusted_delay_ms` one way, the WLAN at
//! `untrusted_mbit` and `untrusted_delay_ms` (the lab's relay), each direction (upload:
//! the client sends; download: the server sends) runs three nena perf transfers of
//! [`MeteredOptions::bytes`] (aead):
//! - **wlan-alone**: the WLAN as the only path (`--trusted untrusted`): what it carries by
//!   itself, the baseline;
//! - **metered**: both paths, `--metered trusted`: the share of the bytes on the trusted
//!   link (every subflow's acknowledged and received payload, from the client's
//!   MPTCP_FULL_INFO), and the goodput against the baseline's;
//! - **outage**: both paths, `--metered trusted`, the WLAN taken down (`nena lab set
//!   untrusted --down`: both ends of the link) once half of the bytes crossed: the transfer
//!   must complete, on the trusted link, and the longest gap in the bytes the receiver got
//!   in order from 0.1 s before the WLAN went on is measured (upload: bytes written minus
//!   the connection's unacknowledged ones, `SIOCOUTQ`, data level; download: the bytes the
//!   client read), every 10 ms. Every transfer's longest gap over its whole length is
//!   reported too (the host's own hiccups show there, in the baseline as well).
//!
//! Targets, per path manager and direction: metered share <= [`SHARE_TARGET`], metered
//! goodput >= [`GOODPUT_TARGET`] x wlan-alone's, and in the outage completion with bytes on
//! the trusted link after the WLAN went and no gap longer than [`GAP_TARGET_S`] from then on.
//! Reported beside them, not judged: the WLAN going silent instead (its frames dropped, its
//! link up) and, with the in-kernel PM, the kernel alone (the endpoint backup, no nena).

use crate::host::{cpu_model, kernel, loadavg};
use crate::own_lab::in_own_lab;
use anyhow::{bail, Context, Result};
use nena_lab::{
    start_nena_serve, Direction as LinkDirection, Emulation, Host, Lab, LabConfig, Link,
    LinkEmulation, Outage, PmMode, Rate,
};
use nena_mptcp::{PathPolicy, PathSpec};
use nena_transport::app::file_client::{self, IntervalReport, PerfParams, PerfReport};
use serde::Serialize;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;
use std::time::UNIX_EPOCH;

/// The metered link's share of the bytes may be at most this.
pub const SHARE_TARGET: f64 = 0.02;
/// The metered transfer's goodput must be at least this times the WLAN's alone.
pub const GOODPUT_TARGET: f64 = 0.95;
/// No gap in the receiver's in-order bytes longer than this (seconds) through the outage.
pub const GAP_TARGET_S: f64 = 1.0;

const PORT: u16 = 5401;
/// Sampling interval of the transfers' progress.
const SAMPLE: Duration = Duration::from_millis(10);
/// The first moments of a transfer (connection, slow start) are left out of its gaps.
const GAPS_FROM_S: f64 = 0.5;

/// The bench's parameters.
#[derive(Debug, Clone)]
pub struct MeteredOptions {
    /// Bytes of every transfer.
    pub bytes: u64,
    pub trusted_mbit: u64,
    pub untrusted_mbit: u64,
    pub trusted_delay_ms: u64,
    pub untrusted_delay_ms: u64,
    /// The path managers to run, in order.
    pub pms: Vec<PmMode>,
    /// The `nena` binary (`nena serve` and the lab's relay).
    pub nena: PathBuf,
}

impl MeteredOptions {
    /// The defaults: 100 MiB, LTE 20 Mbit/s 20 ms, WLAN 50 Mbit/s 5 ms, both path managers.
    pub fn new(nena: PathBuf) -> MeteredOptions {
        MeteredOptions {
            bytes: 100 << 20,
            trusted_mbit: 20,
            untrusted_mbit: 50,
            trusted_delay_ms: 20,
            untrusted_delay_ms: 5,
            pms: vec![PmMode::Userspace, PmMode::Kernel],
            nena,
        }
    }
}

/// Which way the bytes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Way {
    Upload,
    Download,
}

impl Way {
    pub const BOTH: [Way; 2] = [Way::Upload, Way::Download];
    pub fn name(self) -> &'static str {
        match self {
            Way::Upload => "upload",
            Way::Download => "download",
        }
    }
}

/// What one transfer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Run {
    /// The WLAN as the only path: the baseline.
    WlanAlone,
    /// Both paths, the trusted one metered.
    Metered,
    /// As `Metered`, the WLAN taken down half-way (both ends of the link down).
    Outage,
    /// Reported, not judged: as `Outage`, but the WLAN goes silent instead (the relay
    /// drops every frame, the interfaces stay up: nothing tells nena but the traffic).
    Silent,
    /// Reported, not judged (in-kernel PM): as `Outage` with the trusted address's endpoint
    /// backup and no nena (no `--metered`): what the kernel's scheduler does by itself.
    KernelAlone,
}

impl Run {
    pub fn name(self) -> &'static str {
        match self {
            Run::WlanAlone => "wlan-alone",
            Run::Metered => "metered",
            Run::Outage => "outage",
            Run::Silent => "silent",
            Run::KernelAlone => "kernel-alone",
        }
    }
    /// The WLAN goes away half-way.
    fn cuts(self) -> bool {
        matches!(self, Run::Outage | Run::Silent | Run::KernelAlone)
    }
}

/// One transfer.
#[derive(Debug, Clone, Serialize)]
pub struct Transfer {
    /// [`Run::name`].
    pub run: &'static str,
    pub bytes: u64,
    /// nena perf's goodput of the direction that carried the bytes, Mbit/s.
    pub goodput_mbit_s: f64,
    pub seconds: f64,
    /// Payload bytes on the trusted link's subflows (acknowledged + received), and on all,
    /// as the subflows present at the end count them (a subflow closed before, as the
    /// WLAN's withdrawn in an outage, took its counts with it).
    pub trusted_bytes: u64,
    pub all_bytes: u64,
    /// `trusted_bytes / all_bytes`.
    pub trusted_share: f64,
    /// The longest time without a new byte in order at the receiver (after the first
    /// 0.5 s, or from the WLAN's loss on), and when it began (seconds from the start of
    /// the data).
    pub longest_gap_s: f64,
    pub longest_gap_at_s: f64,
    /// When the WLAN went away: the longest gap that began from 0.1 s before that on (the
    /// one the WLAN's loss can have caused; the whole transfer's is `longest_gap_s`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap_after_down_s: Option<f64>,
    /// Outage: seconds from the start when the WLAN was taken down, and the bytes the
    /// trusted link carried after it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub down_at_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trusted_after_down: Option<u64>,
}

/// One path manager and direction.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub pm: &'static str,
    pub way: Way,
    pub wlan_alone: Transfer,
    pub metered: Transfer,
    pub outage: Transfer,
    /// Reported, not judged: the WLAN silent instead of down; with the in-kernel PM, the
    /// kernel alone through the WLAN's loss.
    pub silent: Transfer,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_alone: Option<Transfer>,
    /// metered goodput / wlan-alone goodput.
    pub goodput_ratio: f64,
    pub share_ok: bool,
    pub goodput_ok: bool,
    pub outage_ok: bool,
    pub pass: bool,
}

/// The whole bench.
#[derive(Debug, Clone, Serialize)]
pub struct MeteredReport {
    pub bytes: u64,
    pub trusted_mbit: u64,
    pub untrusted_mbit: u64,
    pub trusted_delay_ms: u64,
    pub untrusted_delay_ms: u64,
    pub share_target: f64,
    pub goodput_target: f64,
    pub gap_target_s: f64,
    pub rows: Vec<Row>,
    pub pass: bool,
    pub cpu: String,
    pub kernel: String,
    pub loadavg_start: String,
    pub loadavg_end: String,
}

/// The longest time between two increases of the cumulative `series` (time, bytes), from
/// `from` on: (seconds, when it began). A series that ends without reaching its last value
/// earlier counts up to its end.
pub fn longest_gap(series: &[(f64, u64)], from: f64) -> (f64, f64) {
    let mut best = (0.0, 0.0);
    let mut last: Option<(f64, u64)> = None;
    for &(t, v) in series {
        match last {
            Some((lt, lv)) if v > lv => {
                if lt >= from && t - lt > best.0 {
                    best = (t - lt, lt);
                }
                last = Some((t, v));
            }
            Some(_) => {}
            None => last = Some((t, v)),
        }
    }
    if let (Some((lt, _)), Some(&(end, _))) = (last, series.last()) {
        if lt >= from && end - lt > best.0 {
            best = (end - lt, lt);
        }
    }
    best
}

/// The verdicts of one path manager and direction.
pub fn row(
    pm: &'static str,
    way: Way,
    [wlan, metered, outage, silent]: [Transfer; 4],
    kernel_alone: Option<Transfer>,
) -> Row {
    let goodput_ratio = metered.goodput_mbit_s / wlan.goodput_mbit_s.max(f64::MIN_POSITIVE);
    let share_ok = metered.trusted_share <= SHARE_TARGET;
    let goodput_ok = goodput_ratio >= GOODPUT_TARGET;
    let outage_ok = outage.bytes > 0
        && outage.trusted_after_down.unwrap_or(0) > 0
        && outage.gap_after_down_s.is_some_and(|g| g <= GAP_TARGET_S);
    Row {
        pm,
        way,
        wlan_alone: wlan,
        metered,
        outage,
        silent,
        kernel_alone,
        goodput_ratio,
        share_ok,
        goodput_ok,
        outage_ok,
        pass: share_ok && goodput_ok && outage_ok,
    }
}

/// Bring up a lab per path manager (with the relay), run the transfers, tear it down (also
/// on Ctrl-C).
pub fn run(
    opts: &MeteredOptions,
    mut progress: impl FnMut(&str) + Send + 'static,
) -> Result<MeteredReport> {
    if opts.bytes < (1 << 20) || opts.pms.is_empty() {
        bail!("at least 1 MiB per transfer and one path manager");
    }
    let loadavg_start = loadavg();
    let prefix = format!("nm{}", std::process::id());
    let mut rows = Vec::new();
    for &pm in &opts.pms {
        let mut cfg = LabConfig {
            verify: true,
            pm,
            relay_exe: Some(opts.nena.clone()),
            trusted_rate: Some(Rate::mbit(opts.trusted_mbit)),
            untrusted_rate: Some(Rate::mbit(opts.untrusted_mbit)),
            ..LabConfig::with_prefix(&prefix)
        };
        for (link, ms) in [
            (Link::Trusted, opts.trusted_delay_ms),
            (Link::Untrusted, opts.untrusted_delay_ms),
        ] {
            let e = Emulation {
                delay: Duration::from_millis(ms),
                ..Emulation::default()
            };
            cfg.set_link_emulation(link, Some(LinkEmulation::both(e)));
        }
        let o = opts.clone();
        let (tx, rx) = mpsc::channel::<String>();
        let worker =
            std::thread::spawn(move || in_own_lab(&cfg, move |prefix| run_pm(prefix, pm, &o, tx)));
        for line in rx {
            progress(&line);
        }
        let mut got = worker
            .join()
            .map_err(|_| anyhow::anyhow!("the bench's worker panicked"))??;
        rows.append(&mut got);
    }
    Ok(MeteredReport {
        bytes: opts.bytes,
        trusted_mbit: opts.trusted_mbit,
        untrusted_mbit: opts.untrusted_mbit,
        trusted_delay_ms: opts.trusted_delay_ms,
        untrusted_delay_ms: opts.untrusted_delay_ms,
        share_target: SHARE_TARGET,
        goodput_target: GOODPUT_TARGET,
        gap_target_s: GAP_TARGET_S,
        pass: rows.iter().all(|r| r.pass),
        rows,
        cpu: cpu_model().unwrap_or_default(),
        kernel: kernel(),
        loadavg_start,
        loadavg_end: loadavg(),
    })
}

fn pm_name(pm: PmMode) -> &'static str {
    match pm {
        PmMode::Userspace => "userspace",
        PmMode::Kernel => "kernel",
    }
}

fn run_pm(
    prefix: &str,
    pm: PmMode,
    opts: &MeteredOptions,
    progress: mpsc::Sender<String>,
) -> Result<Vec<Row>> {
    let lab = Lab::open(prefix)?;
    let dir = std::env::temp_dir().join(format!("nena-bench-{prefix}"));
    std::fs::create_dir_all(&dir)?;
    let _server = start_nena_serve(&lab, &opts.nena, PORT, &dir)?;
    let remote = SocketAddr::new(lab.server_addr(), PORT);
    // The in-kernel PM's metered path is the host's endpoint, for as long as the guard
    // lives (made and put back in the client's namespace).
    let kernel_guard = match pm {
        PmMode::Kernel => Some(lab.run_in(Host::Client, || {
            nena_mptcp::metered::KernelMetered::start(&["trusted".into()], &both_paths())
        })??),
        PmMode::Userspace => None,
    };
    let result = (|| -> Result<Vec<Row>> {
        let mut rows = Vec::new();
        let one = |way: Way, run: Run| -> Result<Transfer> {
            let t = transfer(&lab, remote, opts.bytes, way, run)
                .with_context(|| format!("{} {} {}", pm_name(pm), way.name(), run.name()))?;
            let _ = progress.send(format!(
                "{:<9} {:<8} {:<12} {:>7.2} Mbit/s  trusted {:>6.3}%  longest gap {:.2} s",
                pm_name(pm),
                way.name(),
                run.name(),
                t.goodput_mbit_s,
                t.trusted_share * 100.0,
                t.longest_gap_s
            ));
            Ok(t)
        };
        for way in Way::BOTH {
            wlan_route(&lab)?;
            let runs = [Run::WlanAlone, Run::Metered, Run::Outage, Run::Silent];
            let mut got = Vec::new();
            for run in runs {
                got.push(one(way, run)?);
            }
            let got: [Transfer; 4] = got.try_into().expect("four runs");
            rows.push(row(pm_name(pm), way, got, None));
        }
        if let Some(g) = kernel_guard {
            // Dropped in the client's namespace, where its endpoints are.
            lab.run_in(Host::Client, move || drop(g))?;
            // The kernel alone: the endpoint made by hand, no nena watching.
            let trusted = lab.client_addr(Link::Trusted).to_string();
            ip_mptcp(
                &lab,
                &["endpoint", "add", &trusted, "dev", "trusted", "backup"],
            )?;
            for row in rows.iter_mut() {
                row.kernel_alone = Some(one(row.way, Run::KernelAlone)?);
            }
            ip_mptcp(
                &lab,
                &["endpoint", "delete", "id", &endpoint_id(&lab, &trusted)?],
            )?;
        }
        Ok(rows)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// `ip mptcp ARGS` in the client, which must succeed.
fn ip_mptcp(lab: &Lab, args: &[&str]) -> Result<()> {
    let mut all = vec!["mptcp"];
    all.extend_from_slice(args);
    let st = lab.command(Host::Client, "ip", &all).status()?;
    if !st.success() {
        bail!("`ip {}` failed in the client", all.join(" "));
    }
    Ok(())
}

/// The id of the client's endpoint for `addr`.
fn endpoint_id(lab: &Lab, addr: &str) -> Result<String> {
    let out = lab
        .command(Host::Client, "ip", ["mptcp", "endpoint", "show"])
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find(|l| l.split_whitespace().next() == Some(addr))
        .and_then(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.iter()
                .position(|x| *x == "id")
                .and_then(|i| w.get(i + 1))
                .map(|x| x.to_string())
        })
        .ok_or_else(|| {
            anyhow::anyhow!("no endpoint for {addr} in `ip mptcp endpoint show`: {text}")
        })
}

/// The WLAN alone carries the handshake too: a route to the server through it, behind the
/// trusted link's default (a higher metric: nothing else changes). Made again before each
/// baseline: bringing the WLAN back after an outage sets the lab's routes anew.
fn wlan_route(lab: &Lab) -> Result<()> {
    let via = Link::Untrusted.router().addr.to_string();
    let st = lab
        .command(
            Host::Client,
            "ip",
            [
                "route",
                "replace",
                "default",
                "via",
                &via,
                "dev",
                "untrusted",
                "metric",
                "100",
            ],
        )
        .status()?;
    if !st.success() {
        bail!("could not add a default route through the WLAN in the client");
    }
    Ok(())
}

fn both_paths() -> PathPolicy {
    PathPolicy {
        trusted: vec![PathSpec::Iface("trusted".into())],
        untrusted: vec![PathSpec::Iface("untrusted".into())],
    }
}

/// One sample of a transfer: seconds from the start of the data, Unix time, the bytes the
/// receiver has in order, the bytes on the trusted link so far.
type Point = (f64, f64, u64, u64);

/// One nena perf transfer of `run` (see the module documentation).
fn transfer(lab: &Lab, remote: SocketAddr, bytes: u64, way: Way, run: Run) -> Result<Transfer> {
    let (policy, metered) = match run {
        Run::WlanAlone => (
            PathPolicy {
                trusted: vec![PathSpec::Iface("untrusted".into())],
                untrusted: vec![],
            },
            vec![],
        ),
        Run::KernelAlone => (both_paths(), vec![]),
        _ => (both_paths(), vec!["trusted".to_string()]),
    };
    let mut opts =
        nena_transport::conn::ClientOptions::new(remote, policy, vec![nena_proto::Mode::Aead]);
    opts.metered = metered;
    opts.timeout = Duration::from_secs(20);
    let params = PerfParams {
        up: way == Way::Upload,
        down: way == Way::Download,
        bytes: Some(bytes),
        time: Duration::from_secs(600),
        interval: Some(SAMPLE),
        omit: None,
    };
    // The outage: the WLAN goes down (or silent) from another thread once half of the
    // bytes crossed (that takes a few commands; the transfer must not wait for them).
    let (down_tx, down_rx) = mpsc::channel::<()>();
    let outage = run.cuts();
    let delay = lab.config().emulation(Link::Untrusted).cloned();
    let downer = outage.then(|| {
        let prefix = lab.prefix().to_string();
        let delay = delay.clone();
        std::thread::spawn(move || -> Result<Option<f64>> {
            if down_rx.recv().is_err() {
                return Ok(None);
            }
            let at = std::time::SystemTime::now()
                .duration_since(UNIX_EPOCH)?
                .as_secs_f64();
            let lab = Lab::open(&prefix)?;
            if run == Run::Silent {
                for d in LinkDirection::BOTH {
                    let mut e = delay.as_ref().map(|l| l.get(d).clone()).unwrap_or_default();
                    e.outages = vec![Outage {
                        start: Duration::ZERO,
                        duration: Duration::from_secs(3600),
                    }];
                    lab.set_emulation(Link::Untrusted, d, e)?;
                }
            } else {
                lab.set_link(Link::Untrusted, false)?;
            }
            Ok(Some(at))
        })
    });
    let trusted_ip = lab.client_addr(Link::Trusted);
    let (report, series) =
        lab.run_in(Host::Client, move || -> Result<(PerfReport, Vec<Point>)> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            // (seconds, Unix time, in-order bytes at the receiver, trusted bytes so far)
            let mut series = Vec::new();
            let (mut sent, mut received) = (0u64, 0u64);
            let mut signalled = false;
            let report = rt.block_on(file_client::perf(&opts, params, |r: &IntervalReport| {
                sent += r.sample.sent;
                received += r.sample.received;
                let got = match way {
                    Way::Upload => sent.saturating_sub(r.unacked),
                    Way::Download => received,
                };
                let trusted: u64 = r
                    .subflows
                    .iter()
                    .filter(|s| s.local.is_some_and(|a| a.ip() == trusted_ip))
                    .map(|s| s.bytes_acked + s.bytes_received)
                    .sum();
                series.push((r.sample.t, r.sample.unix, got, trusted));
                if outage && !signalled && got >= bytes / 2 {
                    signalled = true;
                    let _ = down_tx.send(());
                }
            }))?;
            Ok((report, series))
        })??;
    let down_at = match downer {
        Some(h) => {
            let at = h
                .join()
                .map_err(|_| anyhow::anyhow!("the thread taking the WLAN down panicked"))??;
            if run == Run::Silent {
                for d in LinkDirection::BOTH {
                    let e = delay.as_ref().map(|l| l.get(d).clone()).unwrap_or_default();
                    lab.set_emulation(Link::Untrusted, d, e)?;
                }
            } else {
                lab.set_link(Link::Untrusted, true)?;
            }
            at
        }
        None => None,
    };
    let moved = match way {
        Way::Upload => report.sent,
        Way::Download => report.received,
    };
    if moved != bytes || !report.verified {
        bail!(
            "the transfer moved {moved} of {bytes} bytes (verified: {})",
            report.verified
        );
    }
    let goodput = match way {
        Way::Upload => report.mbit_s_sent,
        Way::Download => report.mbit_s_received,
    };
    let (mut trusted, mut all) = (0u64, 0u64);
    for s in &report.paths.subflows {
        let b = s.subflow.bytes_acked + s.subflow.bytes_received;
        all += b;
        if s.subflow.local.is_some_and(|a| a.ip() == trusted_ip) {
            trusted += b;
        }
    }
    let points: Vec<(f64, u64)> = series.iter().map(|&(t, _, g, _)| (t, g)).collect();
    let (gap, gap_at) = longest_gap(&points, GAPS_FROM_S);
    // The samples' own clock starts with the data; the WLAN went down at a Unix time.
    let down_at_s = down_at.and_then(|at| {
        let &(t, unix, _, _) = series.first()?;
        Some(at - (unix - t))
    });
    let after_down = down_at_s.map(|d| longest_gap(&points, d - 0.1));
    let gap_after_down_s = after_down.map(|g| g.0);
    // A gap the WLAN's loss caused counts in the whole transfer's even in its first 0.5 s.
    let (gap, gap_at) = match after_down {
        Some(a) if a.0 > gap => a,
        _ => (gap, gap_at),
    };
    let trusted_after_down = down_at_s.map(|d| {
        let before = series.iter().rev().find(|s| s.0 <= d).map_or(0, |s| s.3);
        series.last().map_or(0, |s| s.3).saturating_sub(before)
    });
    Ok(Transfer {
        run: run.name(),
        bytes: moved,
        goodput_mbit_s: goodput,
        seconds: report.seconds,
        trusted_bytes: trusted,
        all_bytes: all,
        trusted_share: trusted as f64 / all.max(1) as f64,
        longest_gap_s: gap,
        longest_gap_at_s: gap_at,
        gap_after_down_s,
        down_at_s,
        trusted_after_down,
    })
}

/// The human table.
pub fn table(r: &MeteredReport) -> String {
    let mut s = format!(
        "Metered trusted link: {} bytes per transfer, trusted {} Mbit/s {} ms, WLAN {} Mbit/s {} ms one way (kernel {}, {}; load average {} -> {})\n",
        r.bytes, r.trusted_mbit, r.trusted_delay_ms, r.untrusted_mbit, r.untrusted_delay_ms, r.kernel, r.cpu, r.loadavg_start, r.loadavg_end
    );
    s += &format!(
        "{:<10} {:<9} {:>11} {:>11} {:>7} {:>9} {:>10} {:>13}  {:<7}  {:>10} {:>12}\n",
        "pm",
        "way",
        "WLAN alone",
        "metered",
        "ratio",
        "trusted",
        "gap after",
        "trusted after",
        "verdict",
        "silent gap",
        "kernel alone"
    );
    for row in &r.rows {
        s += &format!(
            "{:<10} {:<9} {:>7.2}Mb/s {:>7.2}Mb/s {:>6.3}x {:>8.3}% {:>9.2}s {:>13}  {:<7}  {:>9.2}s {:>12}\n",
            row.pm,
            row.way.name(),
            row.wlan_alone.goodput_mbit_s,
            row.metered.goodput_mbit_s,
            row.goodput_ratio,
            row.metered.trusted_share * 100.0,
            row.outage.gap_after_down_s.unwrap_or(f64::NAN),
            row.outage
                .trusted_after_down
                .map_or("-".into(), nena_transport::text::units::human),
            if row.pass { "PASS" } else { "FAIL" },
            row.silent.gap_after_down_s.unwrap_or(f64::NAN),
            row.kernel_alone
                .as_ref()
                .and_then(|k| k.gap_after_down_s)
                .map_or("-".into(), |g| format!("{g:.2}s")),
        );
    }
    s += "gap after: the longest gap in the receiver's in-order bytes from the WLAN's link taken \
          down half-way on (judged); silent: the same with the WLAN dropping every frame, its link \
          up, and kernel alone: the link down with the endpoint backup and no nena (both \
          reported, not judged)\n";
    let worst = r
        .rows
        .iter()
        .flat_map(|row| {
            [&row.wlan_alone, &row.metered, &row.outage, &row.silent]
                .into_iter()
                .chain(row.kernel_alone.as_ref())
                .map(move |t| (row, t))
        })
        .max_by(|a, b| a.1.longest_gap_s.total_cmp(&b.1.longest_gap_s));
    if let Some((row, t)) = worst {
        s += &format!(
            "the longest gap of any transfer, over its whole length: {:.2} s ({} {} {}, from {:.2} s)\n",
            t.longest_gap_s,
            row.pm,
            row.way.name(),
            t.run,
            t.longest_gap_at_s
        );
    }
    s += &format!(
        "targets: trusted share <= {:.0}%, metered goodput >= {:.2}x the WLAN's alone, through the WLAN's loss complete on the trusted link with no gap over {:.1} s: {}\n",
        r.share_target * 100.0,
        r.goodput_target,
        r.gap_target_s,
        if r.pass { "PASS" } else { "FAIL" }
    );
    s
}

#[cfg(test)]
mod tests;
