//! `nena bench aggregation`: whether nena aggregates two link-bound paths as well as the
//! kernel's MPTCP does (issue 21, item 5). The same bytes go each way (`nena send`: client
//! to server; `nena get`: server to client) over two rate-limited, delayed lab links, once
//! through nena (aead, the default mode) and once through a bare kernel-MPTCP connection
//! ([`nena_transport::baseline::raw_mptcp`]: no handshake, no gate, no framing), back to
//! back in the same lab, in alternating order. Each transfer is timed from before its
//! connect until the receiver's confirmation (nena: the verified trailer or the server's
//! verdict; raw: the receiver's count).
//!
//! Two ratios per setting and direction, medians over the repetitions:
//! - **kernel**: nena's time over the bare kernel-MPTCP transfer's; target <= 1.05;
//! - **bound**: nena's time over what the links allow, the bytes at 90% of the summed
//!   rates plus 0.45 s (connection set-up, slow start, the last round trips); target <= 1.
//!
//! Settings: 10+10 and 15+5 Mbit/s (trusted + untrusted, tbf on both ends), each with
//! one-way delays of 0/0, 1/25 and 25/1 ms (trusted/untrusted, both directions, the lab's
//! relay). The lab brings its relay up for the delays; the 0/0 settings run through it too,
//! so that every setting crosses the same devices.

use crate::harness::median;
use crate::host::{cpu_model, kernel, loadavg};
use crate::lab_ends::{client_options, Servers};
use crate::own_lab::in_own_lab;
use anyhow::{bail, Context, Result};
use nena_lab::{
    Direction as LinkDirection, Emulation, Host, Lab, LabConfig, Link, LinkEmulation, Rate,
};
use serde::Serialize;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// nena's time may be at most this multiple of the bare kernel-MPTCP transfer's.
pub const KERNEL_TARGET: f64 = 1.05;
/// The share of the summed link rates the bound allows.
pub const RATE_SHARE: f64 = 0.9;
/// Seconds the bound adds to the bytes' time at [`RATE_SHARE`] of the summed rates.
pub const BOUND_SLACK_S: f64 = 0.45;

const PORT_NENA: u16 = 5301;
const PORT_RAW: u16 = 5302;
/// The name the served file has (for `get`).
const SERVED: &str = "aggregation.bin";

/// One link setting.
#[derive(Debug, Clone, Serialize)]
pub struct Setting {
    pub name: String,
    pub trusted_mbit: u64,
    pub untrusted_mbit: u64,
    pub trusted_delay_ms: u64,
    pub untrusted_delay_ms: u64,
}

impl Setting {
    fn new(rates: (u64, u64), delays: (u64, u64)) -> Setting {
        Setting {
            name: format!(
                "{}+{} Mbit/s, {}/{} ms",
                rates.0, rates.1, delays.0, delays.1
            ),
            trusted_mbit: rates.0,
            untrusted_mbit: rates.1,
            trusted_delay_ms: delays.0,
            untrusted_delay_ms: delays.1,
        }
    }

    /// The six settings: two rate pairs, three delay pairs.
    pub fn all() -> Vec<Setting> {
        let mut v = Vec::new();
        for rates in [(10, 10), (15, 5)] {
            for delays in [(0, 0), (1, 25), (25, 1)] {
                v.push(Setting::new(rates, delays));
            }
        }
        v
    }

    /// Seconds `bytes` take at [`RATE_SHARE`] of the summed rates, plus [`BOUND_SLACK_S`].
    pub fn bound_s(&self, bytes: u64) -> f64 {
        let bps = (self.trusted_mbit + self.untrusted_mbit) as f64 * 1e6 * RATE_SHARE;
        bytes as f64 * 8.0 / bps + BOUND_SLACK_S
    }
}

/// Which way the bytes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Way {
    /// Client to server (`nena send`).
    Send,
    /// Server to client (`nena get`).
    Get,
}

impl Way {
    pub const BOTH: [Way; 2] = [Way::Send, Way::Get];
    pub fn name(self) -> &'static str {
        match self {
            Way::Send => "send",
            Way::Get => "get",
        }
    }
}

/// The bench's parameters.
#[derive(Debug, Clone)]
pub struct AggregationOptions {
    pub reps: usize,
    pub bytes: u64,
    pub settings: Vec<Setting>,
    /// The `nena` binary (`nena serve` and the lab's relay).
    pub nena: PathBuf,
}

/// One transfer.
#[derive(Debug, Clone, Serialize)]
pub struct Transfer {
    pub rep: usize,
    /// `nena` or `kernel`.
    pub who: &'static str,
    pub seconds: f64,
    /// The untrusted path's share of the client's subflow bytes.
    pub untrusted_share: f64,
}

/// One setting and direction.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub setting: Setting,
    pub way: Way,
    pub nena_median_s: f64,
    pub kernel_median_s: f64,
    pub bound_s: f64,
    /// `nena_median_s / kernel_median_s`.
    pub kernel_ratio: f64,
    /// `nena_median_s / bound_s`.
    pub bound_ratio: f64,
    /// The kernel's own time against the bound (context: what the links and MPTCP allow).
    pub kernel_bound_ratio: f64,
    pub pass: bool,
    pub transfers: Vec<Transfer>,
}

/// The whole bench.
#[derive(Debug, Clone, Serialize)]
pub struct AggregationReport {
    pub bytes: u64,
    pub reps: usize,
    pub kernel_target: f64,
    pub rows: Vec<Row>,
    pub pass: bool,
    pub cpu: String,
    pub kernel: String,
    pub loadavg_start: String,
    pub loadavg_end: String,
}

/// Bring up a lab with its relay, run the bench, tear the lab down (also on Ctrl-C).
pub fn run(
    opts: &AggregationOptions,
    progress: impl FnMut(&str) + Send + 'static,
) -> Result<AggregationReport> {
    if opts.reps == 0 || opts.bytes == 0 || opts.settings.is_empty() {
        bail!("reps, bytes and settings must each be at least 1");
    }
    let prefix = format!("na{}", std::process::id());
    let mut cfg = LabConfig {
        verify: true,
        relay_exe: Some(opts.nena.clone()),
        ..LabConfig::with_prefix(&prefix)
    };
    for link in [Link::Trusted, Link::Untrusted] {
        cfg.set_link_emulation(link, Some(LinkEmulation::both(Emulation::default())));
    }
    let opts = opts.clone();
    in_own_lab(&cfg, move |prefix| run_on(prefix, &opts, progress))
}

fn apply(lab: &Lab, s: &Setting) -> Result<()> {
    for (link, mbit, delay) in [
        (Link::Trusted, s.trusted_mbit, s.trusted_delay_ms),
        (Link::Untrusted, s.untrusted_mbit, s.untrusted_delay_ms),
    ] {
        lab.set_rate(link, Some(Rate::mbit(mbit)))?;
        for d in LinkDirection::BOTH {
            let e = Emulation {
                delay: Duration::from_millis(delay),
                ..Emulation::default()
            };
            lab.set_emulation(link, d, e)?;
        }
    }
    Ok(())
}

fn run_on(
    prefix: &str,
    opts: &AggregationOptions,
    mut progress: impl FnMut(&str),
) -> Result<AggregationReport> {
    let loadavg_start = loadavg();
    let lab = Lab::open(prefix)?;
    let servers = Servers::start(&lab, &opts.nena, PORT_NENA, PORT_RAW, |dir| {
        Ok(std::fs::write(
            dir.join(SERVED),
            crate::bytes::incompressible(opts.bytes as usize),
        )?)
    })?;
    let dir = servers.dir();
    let upload = dir.join("upload.bin");
    std::fs::write(&upload, crate::bytes::incompressible(opts.bytes as usize))?;
    let mut rows = Vec::new();
    for setting in &opts.settings {
        apply(&lab, setting).with_context(|| format!("setting {}", setting.name))?;
        for way in Way::BOTH {
            let mut transfers = Vec::new();
            for rep in 1..=opts.reps {
                // Alternate who goes first, so that neither always follows the other.
                let order = if rep % 2 == 1 {
                    ["nena", "kernel"]
                } else {
                    ["kernel", "nena"]
                };
                for who in order {
                    let t = match who {
                        "nena" => nena_transfer(&lab, way, &upload, dir, opts.bytes),
                        _ => kernel_transfer(&lab, way, &servers, opts.bytes),
                    }
                    .with_context(|| {
                        format!("{}, {}, {who}, rep {rep}", setting.name, way.name())
                    })?;
                    progress(&format!(
                        "{:<22} {:<4} rep {rep:>2}  {who:<6} {:>6.2} s  ({:.0}% untrusted)",
                        setting.name,
                        way.name(),
                        t.0,
                        t.1 * 100.0
                    ));
                    transfers.push(Transfer {
                        rep,
                        who,
                        seconds: t.0,
                        untrusted_share: t.1,
                    });
                }
            }
            rows.push(row(setting, way, opts.bytes, transfers));
        }
    }
    drop(servers);
    Ok(AggregationReport {
        bytes: opts.bytes,
        reps: opts.reps,
        kernel_target: KERNEL_TARGET,
        pass: rows.iter().all(|r| r.pass),
        rows,
        cpu: cpu_model().unwrap_or_default(),
        kernel: kernel(),
        loadavg_start,
        loadavg_end: loadavg(),
    })
}

/// The medians and verdicts of one setting and direction.
pub fn row(setting: &Setting, way: Way, bytes: u64, transfers: Vec<Transfer>) -> Row {
    let times = |who: &str| {
        let mut v: Vec<f64> = transfers
            .iter()
            .filter(|t| t.who == who)
            .map(|t| t.seconds)
            .collect();
        median(&mut v)
    };
    let (n, k) = (times("nena"), times("kernel"));
    let bound_s = setting.bound_s(bytes);
    let (kernel_ratio, bound_ratio) = (n / k, n / bound_s);
    Row {
        setting: setting.clone(),
        way,
        nena_median_s: n,
        kernel_median_s: k,
        bound_s,
        kernel_ratio,
        bound_ratio,
        kernel_bound_ratio: k / bound_s,
        pass: kernel_ratio <= KERNEL_TARGET && bound_ratio <= 1.0,
        transfers,
    }
}

/// The untrusted share of subflow bytes `(local ip is untrusted, bytes)`.
fn share(subflows: impl Iterator<Item = (bool, u64)>) -> f64 {
    let (mut u, mut all) = (0u64, 0u64);
    for (untrusted, b) in subflows {
        all += b;
        if untrusted {
            u += b;
        }
    }
    u as f64 / all.max(1) as f64
}

/// One nena transfer through the library `nena send` / `nena get` use: (seconds, share).
fn nena_transfer(
    lab: &Lab,
    way: Way,
    upload: &std::path::Path,
    dir: &std::path::Path,
    bytes: u64,
) -> Result<(f64, f64)> {
    use nena_mptcp::Trust;
    use nena_transport::app::file_client;
    let copts = client_options(lab, PORT_NENA, nena_proto::Mode::Aead);
    let fetched = dir.join("fetched.bin");
    let name = |n: &str| nena_transport::app::names::FileName::new(n);
    let (uploaded, served) = (name("uploaded.bin")?, name(SERVED)?);
    let (secs, report) = lab.run_in(Host::Client, || -> Result<_> {
        let rt = tokio::runtime::Runtime::new()?;
        let t0 = Instant::now();
        let r = rt.block_on(async {
            match way {
                Way::Send => file_client::send(&copts, upload, &uploaded, &()).await,
                Way::Get => file_client::get(&copts, &served, &fetched, true, &()).await,
            }
        })?;
        Ok((t0.elapsed().as_secs_f64(), r))
    })??;
    if report.bytes != bytes {
        bail!("nena moved {} bytes, not {bytes}", report.bytes);
    }
    let _ = std::fs::remove_file(&fetched);
    let _ = std::fs::remove_file(dir.join("uploaded.bin"));
    let s = share(report.paths.subflows.iter().map(|s| {
        (
            s.trust != Trust::Trusted,
            s.subflow.bytes_sent + s.subflow.bytes_received,
        )
    }));
    Ok((secs, s))
}

/// One bare kernel-MPTCP transfer: (seconds, share).
fn kernel_transfer(lab: &Lab, way: Way, servers: &Servers, bytes: u64) -> Result<(f64, f64)> {
    use nena_transport::baseline::raw_mptcp::{Amount, Direction, Request};
    let req = Request {
        direction: match way {
            Way::Send => Direction::Up,
            Way::Get => Direction::Down,
        },
        amount: Amount::Bytes(bytes),
        omit: None,
        // timed as an application sees it: from its connect, the join as the kernel makes it
        await_join: false,
    };
    let untrusted_ip = lab.client_addr(Link::Untrusted);
    let (client, _, secs) = servers.raw_exchange(lab, req)?;
    if client.outcome.bytes() != bytes {
        bail!(
            "kernel MPTCP: both ends counted {} bytes, of {bytes}",
            client.outcome.bytes()
        );
    }
    let s = share(client.subflows.iter().map(|s| {
        (
            s.local.map(|a| a.ip()) == Some(untrusted_ip),
            s.bytes_sent + s.bytes_received,
        )
    }));
    Ok((secs, s))
}

/// The human table.
pub fn table(r: &AggregationReport) -> String {
    let mut s = format!(
        "Aggregation, {} bytes each way, {} repetitions, medians (kernel {}, {}; load average {} -> {})\n",
        r.bytes, r.reps, r.kernel, r.cpu, r.loadavg_start, r.loadavg_end
    );
    s += &format!(
        "{:<24} {:<5} {:>8} {:>8} {:>8} {:>10} {:>9} {:>13}  verdict\n",
        "setting", "way", "nena s", "kernel s", "bound s", "vs kernel", "vs bound", "kernel/bound"
    );
    for row in &r.rows {
        s += &format!(
            "{:<24} {:<5} {:>8.2} {:>8.2} {:>8.2} {:>9.3}x {:>8.3}x {:>12.3}x  {}\n",
            row.setting.name,
            row.way.name(),
            row.nena_median_s,
            row.kernel_median_s,
            row.bound_s,
            row.kernel_ratio,
            row.bound_ratio,
            row.kernel_bound_ratio,
            if row.pass { "PASS" } else { "FAIL" }
        );
    }
    s += &format!(
        "targets: nena <= {KERNEL_TARGET:.2}x the kernel's time, and <= the bound (the bytes at {:.0}% of the summed rates + {BOUND_SLACK_S} s): {}\n",
        RATE_SHARE * 100.0,
        if r.pass { "PASS" } else { "FAIL" }
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn six_settings_and_their_bounds() {
        let all = Setting::all();
        assert_eq!(all.len(), 6);
        // 16 MiB at 90% of 20 Mbit/s: 7.456 s, plus 0.45 s.
        let b = all[0].bound_s(16 << 20);
        assert!(
            (b - (16.0 * 1048576.0 * 8.0 / 18e6 + 0.45)).abs() < 1e-9,
            "{b}"
        );
        assert_eq!(all[4].name, "15+5 Mbit/s, 1/25 ms");
    }

    #[test]
    fn a_row_takes_medians_and_checks_both_ratios() {
        let s = Setting::new((10, 10), (0, 0));
        let t = |who, seconds| Transfer {
            rep: 1,
            who,
            seconds,
            untrusted_share: 0.5,
        };
        let bound = s.bound_s(16 << 20);
        let r = row(
            &s,
            Way::Send,
            16 << 20,
            vec![
                t("nena", 7.5),
                t("nena", 7.6),
                t("nena", 9.0),
                t("kernel", 7.4),
                t("kernel", 7.3),
                t("kernel", 7.45),
            ],
        );
        assert_eq!(r.nena_median_s, 7.6);
        assert_eq!(r.kernel_median_s, 7.4);
        assert!((r.kernel_ratio - 7.6 / 7.4).abs() < 1e-12);
        assert!((r.bound_ratio - 7.6 / bound).abs() < 1e-12);
        assert!(r.pass, "{r:?}");
        let slow = row(
            &s,
            Way::Get,
            16 << 20,
            vec![t("nena", 7.9), t("kernel", 7.4)],
        );
        assert!(!slow.pass, "1.068x the kernel's time: {slow:?}");
    }
}
