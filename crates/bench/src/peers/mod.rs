//! `nena bench peers`: nena's tunnel against the ones users run today to aggregate and
//! encrypt links, the same bytes through each in the same lab (issue 21, item 1).
//!
//! The tunnels: nena's SOCKS5 proxy pair in `aead` (its default mode); shadowsocks-rust
//! (`sslocal`/`ssserver`, the default of OpenMPTCProuter) with AES-128-GCM and with
//! ChaCha20-Poly1305, MPTCP by its own `--tcp-multipath`; and stunnel's TLS 1.3 tunnel
//! (AES-128-GCM), not MPTCP-aware, its sockets made MPTCP by `nena run --mptcp-only`. Every
//! pair runs across the lab (client end in the client host, server end in the server
//! host); the application and the sink ([`traffic`]) are the same for all of them.
//!
//! Per run, one transfer client to server of `bytes`: goodput from the first payload byte
//! to the sink's count of them all, and the CPU seconds (user + system, every thread) of the
//! tunnel's two ends over the run, per 10^9 payload bytes; the share of the client's bytes
//! that left by the untrusted interface (every run must be multipath, or the verdict fails).
//! Variants interleave within each repetition, the order rotating; medians over the
//! repetitions. Settings: bare veth (the CPU sets the pace) and 100 + 20 Mbit/s (the
//! links do). Verdicts per setting, ratios in the same run: nena's CPU per GB at most
//! [`CPU_TARGET`] times the best peer's, nena's goodput at least the best peer's.
//!
//! `nena gateway` runs beside them on the same bytes (issue 39, item 6): the application in
//! the lab's LAN host connects to the sink itself and the gateway on the client host takes
//! the connection (TPROXY) into a nena session to its own proxy server. It is nena's, not
//! a peer: its verdict is its end's CPU per GB at most [`GATEWAY_CPU_TARGET`] times that
//! of nena's proxy client serving the same LAN host (SOCKS5 on the client's LAN address:
//! the same bytes entering the client host the same way, which costs the client end more
//! than an application on its own host does). In the link-bound setting the gateway also carries a UDP stream
//! ([`udp`]: iperf3, 50 Mbit/s), which must lose less than 1% of its datagrams.

pub(crate) mod ends;
pub(crate) mod traffic;
pub mod udp;
mod variant;

pub use ends::{find_program, Programs};
pub use variant::Variant;

use crate::harness::median;
use crate::host::{cpu_model, kernel, loadavg};
use crate::own_lab::in_own_lab;
use crate::transfer::{TargetCheck, MIN_PATH_SHARE};
use anyhow::{bail, Context, Result};
use nena_lab::{Host, Lab, LabConfig, Link, Rate};
use serde::Serialize;
use std::net::SocketAddrV4;
use std::time::Duration;

/// nena's CPU per GB may be at most this multiple of the best peer's.
pub const CPU_TARGET: f64 = 0.8;
/// nena's goodput must be at least this multiple of the best peer's.
pub const GOODPUT_TARGET: f64 = 1.0;
/// The gateway's CPU per GB (its end) may be at most this multiple of the proxy client's.
pub const GATEWAY_CPU_TARGET: f64 = 1.1;
/// nena aead's CPU per GB (both ends) may be at most this multiple of its floor: the same
/// ends in `plain` mode plus the cipher primitive on the same bytes (issue 43, item 2).
pub const FLOOR_TARGET: f64 = 1.10;

/// nena aead's CPU per GB against its floor: its ends in `plain` mode (nena's handshake,
/// then the bytes as they are over the same MPTCP) plus the cipher primitive (sealing and
/// opening a GB in 16 KiB records, timed on the bench's thread in the same run).
#[derive(Debug, Clone, Serialize)]
pub struct Floor {
    /// The aead tunnel (`nena aead`, `nena gateway aead`).
    pub variant: Variant,
    /// Its ends in `plain` mode.
    pub plain: Variant,
    /// Medians of both ends' CPU per GB.
    pub cpu_s_per_gb: f64,
    pub plain_cpu_s_per_gb: f64,
    /// The primitive and its CPU seconds per GB (seal + open): the median of its timings,
    /// one after each repetition's transfers (`primitive_by_rep`).
    pub primitive: String,
    pub primitive_s_per_gb: f64,
    pub primitive_by_rep: Vec<f64>,
    /// `plain + primitive` (medians).
    pub floor_s_per_gb: f64,
    /// `cpu / floor`, on the medians: context beside the verdict.
    pub ratio: f64,
    /// The ratio repetition by repetition (aead over plain + the primitive timed after
    /// that repetition): (median, least, most). The verdict is on its median: the host's
    /// speed drifts between repetitions on a shared machine (the primitive alone moved
    /// from 0.174 to 0.226 s/GB between two runs of the same code), and a ratio of
    /// figures taken minutes apart carries that drift.
    pub paired: Option<(f64, f64, f64)>,
    /// The same floor on the whole host's busy CPU per GB (medians): aead's, and its
    /// ratio to the plain twin's plus the primitive. Context, not the verdict: it counts
    /// the kernel's work wherever it ran, where the ends' clocks count it only when it ran
    /// in them (a busier end absorbs more of the softirqs that interrupt it).
    pub host_cpu_s_per_gb: f64,
    pub host_ratio: f64,
}

/// One network setting and the bytes of each of its transfers.
#[derive(Debug, Clone, Serialize)]
pub struct Setting {
    pub name: String,
    pub trusted_mbit: Option<u64>,
    pub untrusted_mbit: Option<u64>,
    pub bytes: u64,
}

impl Setting {
    /// Bare veth (256 MiB per transfer) and 100 + 20 Mbit/s (64 MiB: about 5 s). CPU time is
    /// read from each process's CPU-time clock in nanoseconds (`ends.rs`), so the short
    /// link-bound runs are not rounded to clock ticks.
    pub fn all() -> Vec<Setting> {
        vec![
            Setting {
                name: "veth, unlimited".into(),
                trusted_mbit: None,
                untrusted_mbit: None,
                bytes: 256 << 20,
            },
            Setting {
                name: "100+20 Mbit/s".into(),
                trusted_mbit: Some(100),
                untrusted_mbit: Some(20),
                bytes: 64 << 20,
            },
        ]
    }
}

/// What the bench runs.
#[derive(Debug, Clone)]
pub struct PeersOptions {
    pub reps: usize,
    pub settings: Vec<Setting>,
    pub variants: Vec<Variant>,
    pub programs: Programs,
    /// Seconds of each UDP stream through the gateway (in the link-bound settings, one per
    /// repetition).
    pub udp_seconds: u32,
    /// The gateways' sessions opened ahead (`nena gateway --warm`; 8, its default, unless an
    /// A/B asks otherwise).
    pub gateway_warm: usize,
}

/// One transfer.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub variant: Variant,
    pub rep: usize,
    pub bytes: u64,
    /// From the first payload byte to the sink's count.
    pub seconds: f64,
    /// From before the connect (the tunnel's set-up included) to the sink's count.
    pub total_seconds: f64,
    pub mbit_s: f64,
    /// CPU seconds of the client end and of the server end over the run.
    pub client_cpu_s: f64,
    pub server_cpu_s: f64,
    /// (client + server CPU seconds) per 10^9 payload bytes.
    pub cpu_s_per_gb: f64,
    /// The whole host's busy CPU seconds per 10^9 payload bytes over the transfer: both
    /// ends, the application's sender and sink, and the kernel's work wherever it ran
    /// (NaN where /proc/stat could not be read). Context beside the ends' figure.
    pub host_cpu_s_per_gb: f64,
    /// The untrusted interface's share of the bytes the client host sent.
    pub untrusted_share: f64,
    pub multipath: bool,
}

/// One tunnel's medians in one setting.
#[derive(Debug, Clone, Serialize)]
pub struct VariantStats {
    pub variant: Variant,
    pub median_mbit_s: f64,
    pub median_cpu_s_per_gb: f64,
    pub median_client_cpu_s_per_gb: f64,
    pub median_server_cpu_s_per_gb: f64,
    /// Median of [`Run::host_cpu_s_per_gb`].
    pub median_host_cpu_s_per_gb: f64,
    pub median_untrusted_share: f64,
    pub multipath_runs: usize,
    /// Transfers that completed (the medians are theirs) and that failed.
    pub runs: usize,
    pub failed: usize,
    /// For a peer: nena's CPU per GB over this tunnel's in each repetition where both
    /// completed (the two ran minutes apart at most), as (median, least, most). Context
    /// beside the verdict, which is on the medians: it shows how much of a difference is
    /// the host's drift between repetitions.
    pub paired_cpu_ratio: Option<(f64, f64, f64)>,
}

/// A transfer that failed: reported, and for nena a failed verdict; a peer's failed
/// transfer leaves that peer's medians to its other runs.
pub type Failure = crate::harness::RunFailure<Variant>;

/// One setting's results.
#[derive(Debug, Clone, Serialize)]
pub struct SettingResult {
    pub setting: Setting,
    pub variants: Vec<VariantStats>,
    pub targets: Vec<TargetCheck>,
    pub pass: bool,
    pub runs: Vec<Run>,
    pub failures: Vec<Failure>,
    /// The gateway's UDP stream, in a link-bound setting when the gateway ran.
    pub udp: Option<udp::UdpResult>,
    /// nena aead's CPU per GB against its floor, for the proxy pair and the gateway.
    pub floors: Vec<Floor>,
}

/// The whole bench.
#[derive(Debug, Clone, Serialize)]
pub struct PeersReport {
    pub reps: usize,
    pub settings: Vec<SettingResult>,
    /// Every target of every setting met, and every run of nena multipath.
    pub pass: bool,
    pub cpu: String,
    pub kernel: String,
    pub loadavg_start: String,
    pub loadavg_end: String,
}

/// Bring up a lab, run the bench in it, tear it down (also on Ctrl-C).
pub fn run(
    opts: &PeersOptions,
    progress: impl FnMut(&str) + Send + 'static,
) -> Result<PeersReport> {
    if opts.reps == 0 || opts.variants.is_empty() || opts.settings.is_empty() {
        bail!("the bench needs at least one repetition, tunnel and setting");
    }
    opts.programs.check(&opts.variants)?;
    let prefix = format!("np{}", std::process::id());
    let cfg = LabConfig {
        verify: true,
        // The gateway's LAN host.
        lan: opts.variants.iter().any(|v| v.from_lan()),
        ..LabConfig::with_prefix(&prefix)
    };
    let opts = opts.clone();
    in_own_lab(&cfg, move |prefix| run_on(prefix, &opts, progress))
}

/// The directory of the ends' logs and files, removed when dropped.
struct WorkDir(std::path::PathBuf);

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run_on(
    prefix: &str,
    opts: &PeersOptions,
    mut progress: impl FnMut(&str),
) -> Result<PeersReport> {
    let loadavg_start = loadavg();
    let lab = Lab::open(prefix)?;
    let dir = WorkDir(std::env::temp_dir().join(format!("nena-bench-peers-{prefix}")));
    std::fs::create_dir_all(&dir.0)?;
    let sink_addr = ends::sink_addr(&lab)?;
    let _sink = traffic::Server::sink(&lab, sink_addr)?;
    // Declared after the sink and the directory: the ends stop first.
    let mut pairs = Vec::new();
    for v in &opts.variants {
        pairs.push(ends::start(
            *v,
            &lab,
            &opts.programs,
            &dir.0,
            sink_addr,
            opts.gateway_warm,
        )?);
    }
    let gateway = opts.variants.contains(&Variant::Gateway);
    let iperf_addr = SocketAddrV4::new(*sink_addr.ip(), ends::IPERF_PORT);
    let _iperf = if gateway {
        let log = dir.0.join("iperf3-server.log");
        Some(udp::server(&lab, &opts.programs.iperf3, iperf_addr, &log)?)
    } else {
        None
    };
    let mut results = Vec::new();
    for setting in &opts.settings {
        lab.set_rate(
            Link::Trusted,
            setting.trusted_mbit.map(|m| Rate(m * 1_000_000)),
        )?;
        lab.set_rate(
            Link::Untrusted,
            setting.untrusted_mbit.map(|m| Rate(m * 1_000_000)),
        )?;
        // Bound on one transfer: ten times what 10 Mbit/s would take, at least a minute.
        let timeout = Duration::from_secs_f64((setting.bytes as f64 * 8.0 / 1e6).max(60.0));
        // One unmeasured small transfer per tunnel first (connections, caches, TLS set-up).
        for i in 0..pairs.len() {
            take_turn(&lab, &mut pairs, i)?;
            let p = &mut pairs[i];
            transfer(&lab, p, sink_addr, 1 << 20, timeout, 0)
                .with_context(|| format!("{}, warm-up of {}", setting.name, p.variant))?;
        }
        let (mut runs, mut failures) = (Vec::new(), Vec::new());
        let (mut primitive_name, mut primitive_by_rep) = (String::new(), Vec::new());
        for rep in 0..opts.reps {
            for k in 0..pairs.len() {
                let i = (rep + k) % pairs.len();
                let r = match take_turn(&lab, &mut pairs, i).and_then(|()| {
                    transfer(
                        &lab,
                        &mut pairs[i],
                        sink_addr,
                        setting.bytes,
                        timeout,
                        rep + 1,
                    )
                }) {
                    Ok(r) => r,
                    Err(e) => {
                        let f = Failure {
                            variant: pairs[i].variant,
                            rep: rep + 1,
                            error: format!("{e:#}"),
                        };
                        progress(&format!(
                            "{:<16} rep {:>2}  {:<24} FAILED: {}",
                            setting.name, f.rep, f.variant, f.error
                        ));
                        failures.push(f);
                        continue;
                    }
                };
                progress(&format!(
                    "{:<16} rep {:>2}  {:<24} {:>8.1} Mbit/s  {:>6.2} CPU s/GB  {:>5.1}% untrusted",
                    setting.name,
                    rep + 1,
                    r.variant,
                    r.mbit_s,
                    r.cpu_s_per_gb,
                    r.untrusted_share * 100.0
                ));
                runs.push(r);
            }
            // The cipher's cost on a GB, timed now on this thread (seal and open), under
            // the host's load of this repetition: the floors.
            let (name, cost) = crate::overhead::primitive_cost(
                nena_proto::Mode::Aead,
                nena_proto::Suite::preferred(),
            )
            .context("timing the aead primitive")?;
            primitive_name = name;
            primitive_by_rep.push(cost);
        }
        let link_bound = setting.trusted_mbit.is_some() && setting.untrusted_mbit.is_some();
        if gateway && link_bound {
            // The UDP stream goes through the aead gateway.
            if let Some(g) = pairs.iter().position(|p| p.variant == Variant::Gateway) {
                take_turn(&lab, &mut pairs, g)?;
            }
        }
        let udp = (gateway && link_bound).then(|| {
            let (mut through, mut direct) = (Vec::new(), Vec::new());
            for rep in 1..=opts.reps {
                for (from, what, out) in [
                    (Host::Lan, "gateway UDP stream", &mut through),
                    (Host::Client, "UDP stream, no nena", &mut direct),
                ] {
                    let iperf3 = &opts.programs.iperf3;
                    match udp::stream(&lab, from, iperf3, iperf_addr, opts.udp_seconds, rep) {
                        Ok(r) => {
                            progress(&format!(
                                "{:<16} rep {:>2}  {what:<24} {:>8.1} Mbit/s  {} of {} datagrams lost",
                                setting.name, rep, r.received_mbit_s, r.lost_packets, r.packets
                            ));
                            out.push(r);
                        }
                        Err(e) => progress(&format!(
                            "{:<16} rep {:>2}  {what} FAILED: {e:#}",
                            setting.name, rep
                        )),
                    }
                }
            }
            udp::summarize(through, direct)
        });
        let (variants, mut targets) = summarize(&runs, &failures, &opts.variants);
        let floors = floors(&variants, &runs, &primitive_name, &primitive_by_rep);
        targets.extend(floor_targets(&floors));
        results.push(SettingResult {
            floors,
            setting: setting.clone(),
            pass: targets.iter().all(|t| t.pass) && udp.as_ref().is_none_or(|u| u.pass),
            variants,
            targets,
            runs,
            failures,
            udp,
        });
    }
    Ok(PeersReport {
        reps: opts.reps,
        pass: results.iter().all(|r| r.pass),
        settings: results,
        cpu: cpu_model().unwrap_or_default(),
        kernel: kernel(),
        loadavg_start,
        loadavg_end: loadavg(),
    })
}

/// Makes `pairs[i]` ready for its transfer: a gateway's turn stops the other gateway (one
/// nftables table per host) and starts this one if it is stopped.
fn take_turn(lab: &Lab, pairs: &mut [ends::Tunnel], i: usize) -> Result<()> {
    if !pairs[i].variant.is_gateway() {
        return Ok(());
    }
    for (j, p) in pairs.iter_mut().enumerate() {
        if j != i && p.variant.is_gateway() {
            p.stop_client();
        }
    }
    pairs[i].start_client(lab)
}

/// One measured transfer through `pair`.
fn transfer(
    lab: &Lab,
    pair: &mut ends::Tunnel,
    sink: std::net::SocketAddrV4,
    bytes: u64,
    timeout: Duration,
    rep: usize,
) -> Result<Run> {
    pair.client()?.check_running()?;
    pair.server.check_running()?;
    let ifaces = ["trusted", "untrusted"];
    let (client, server) = (pair.client()?.pid(), pair.server.pid());
    let sent0 = traffic::sent_bytes(lab, Host::Client, &ifaces)?;
    let (c0, s0) = (ends::tree_cpu(client)?, ends::tree_cpu(server)?);
    let h0 = crate::host::host_busy_seconds();
    let t = traffic::send(
        lab,
        pair.app_host,
        pair.entry,
        pair.socks,
        sink,
        bytes,
        timeout,
    )
    .map_err(|e| {
        let ends = [pair.client.as_ref(), Some(&pair.server)].map(|p| {
            let Some(p) = p else {
                return String::new();
            };
            let tail = p.log_tail(6);
            let tail = if tail.is_empty() {
                "(nothing)".into()
            } else {
                tail
            };
            format!("\n{} said:\n{tail}", p.what())
        });
        e.context(ends.concat())
    })?;
    let (c1, s1) = (ends::tree_cpu(client)?, ends::tree_cpu(server)?);
    let host_s = match (h0, crate::host::host_busy_seconds()) {
        (Some(a), Some(b)) => b - a,
        _ => f64::NAN,
    };
    let sent1 = traffic::sent_bytes(lab, Host::Client, &ifaces)?;
    let trusted = sent1[0].saturating_sub(sent0[0]) as f64;
    let untrusted = sent1[1].saturating_sub(sent0[1]) as f64;
    let all = (trusted + untrusted).max(1.0);
    let (client_cpu_s, server_cpu_s) = (c1 - c0, s1 - s0);
    Ok(Run {
        variant: pair.variant,
        rep,
        bytes,
        seconds: t.seconds,
        total_seconds: t.total_seconds,
        mbit_s: bytes as f64 * 8.0 / 1e6 / t.seconds.max(1e-9),
        client_cpu_s,
        server_cpu_s,
        cpu_s_per_gb: (client_cpu_s + server_cpu_s) / (bytes as f64 / 1e9),
        host_cpu_s_per_gb: host_s / (bytes as f64 / 1e9),
        untrusted_share: untrusted / all,
        multipath: trusted / all >= MIN_PATH_SHARE && untrusted / all >= MIN_PATH_SHARE,
    })
}

/// Each tunnel's medians over its completed runs, and the verdicts: every run of nena
/// completed and multipath, nena's CPU per GB against the best (least) peer's, nena's
/// goodput against the best (most) peer's. A tunnel with no completed run has no medians.
pub fn summarize(
    runs: &[Run],
    failures: &[Failure],
    variants: &[Variant],
) -> (Vec<VariantStats>, Vec<TargetCheck>) {
    let failed = |v: Variant| failures.iter().filter(|f| f.variant == v).count();
    let stats: Vec<VariantStats> = variants
        .iter()
        .filter_map(|v| {
            let mine: Vec<&Run> = runs.iter().filter(|r| r.variant == *v).collect();
            if mine.is_empty() {
                return None;
            }
            let med = |f: &dyn Fn(&Run) -> f64| {
                median(&mut mine.iter().map(|r| f(r)).collect::<Vec<_>>())
            };
            let per_gb = |s: f64, r: &Run| s / (r.bytes as f64 / 1e9);
            Some(VariantStats {
                variant: *v,
                median_mbit_s: med(&|r| r.mbit_s),
                median_cpu_s_per_gb: med(&|r| r.cpu_s_per_gb),
                median_client_cpu_s_per_gb: med(&|r| per_gb(r.client_cpu_s, r)),
                median_server_cpu_s_per_gb: med(&|r| per_gb(r.server_cpu_s, r)),
                median_host_cpu_s_per_gb: med(&|r| r.host_cpu_s_per_gb),
                median_untrusted_share: med(&|r| r.untrusted_share),
                multipath_runs: mine.iter().filter(|r| r.multipath).count(),
                runs: mine.len(),
                failed: failed(*v),
                paired_cpu_ratio: paired_cpu_ratio(runs, *v),
            })
        })
        .collect();
    let mut targets = Vec::new();
    // Every run of nena's own completed and multipath.
    let own = |v: Variant, what: &str, targets: &mut Vec<TargetCheck>| {
        if !variants.contains(&v) {
            return None;
        }
        let done = runs.iter().filter(|r| r.variant == v).count();
        let all = done + failed(v);
        if all == 0 {
            return None;
        }
        targets.push(TargetCheck::at_least(
            format!("every {what} run completed"),
            done as f64 / all.max(1) as f64,
            1.0,
        ));
        let s = stats.iter().find(|s| s.variant == v)?;
        targets.push(TargetCheck {
            name: format!("every {what} run multipath"),
            value: s.multipath_runs as f64 / s.runs.max(1) as f64,
            limit: 1.0,
            at_least: true,
            pass: s.multipath_runs == s.runs,
        });
        Some(s)
    };
    let nena = own(Variant::Nena, "nena", &mut targets);
    if let Some(nena) = nena {
        peer_targets(nena, &stats, &mut targets);
    }
    // The floors' transports: a run cut short or on one path is no floor.
    own(Variant::NenaPlain, "nena plain", &mut targets);
    own(Variant::GatewayPlain, "gateway plain", &mut targets);
    let lan = own(Variant::NenaLan, "LAN-host proxy", &mut targets);
    let gateway = own(Variant::Gateway, "gateway", &mut targets);
    if let (Some(g), Some(n)) = (gateway, lan) {
        let value = g.median_client_cpu_s_per_gb / n.median_client_cpu_s_per_gb.max(1e-12);
        targets.push(TargetCheck::at_most(
            format!(
                "gateway CPU per GB <= {GATEWAY_CPU_TARGET}x the proxy client's for the LAN host"
            ),
            value,
            GATEWAY_CPU_TARGET,
        ));
    }
    (stats, targets)
}

/// The floor of each nena aead tunnel whose `plain` twin ran, with the primitive's name and
/// its seconds per GB timed after each repetition (`by_rep[rep - 1]`; NaN when not timed).
pub fn floors(stats: &[VariantStats], runs: &[Run], name: &str, by_rep: &[f64]) -> Vec<Floor> {
    // NaN when nothing was timed (`median` of no value).
    let p = median(&mut by_rep.to_vec());
    let prim_of = |rep: usize| by_rep.get(rep.wrapping_sub(1)).copied().unwrap_or(f64::NAN);
    stats
        .iter()
        .filter_map(|a| {
            let plain = a.variant.plain_twin()?;
            let b = stats.iter().find(|s| s.variant == plain)?;
            let floor = b.median_cpu_s_per_gb + p;
            let of = |v: Variant, rep: usize| runs.iter().find(|r| r.variant == v && r.rep == rep);
            let mut paired: Vec<f64> = runs
                .iter()
                .filter(|r| r.variant == a.variant)
                .filter_map(|r| {
                    Some(r.cpu_s_per_gb / (of(plain, r.rep)?.cpu_s_per_gb + prim_of(r.rep)))
                })
                .filter(|x| x.is_finite())
                .collect();
            let paired = (!paired.is_empty()).then(|| {
                let m = median(&mut paired);
                (m, paired[0], paired[paired.len() - 1])
            });
            Some(Floor {
                variant: a.variant,
                plain,
                cpu_s_per_gb: a.median_cpu_s_per_gb,
                plain_cpu_s_per_gb: b.median_cpu_s_per_gb,
                primitive: name.to_string(),
                primitive_s_per_gb: p,
                primitive_by_rep: by_rep.to_vec(),
                floor_s_per_gb: floor,
                ratio: a.median_cpu_s_per_gb / floor,
                paired,
                host_cpu_s_per_gb: a.median_host_cpu_s_per_gb,
                host_ratio: a.median_host_cpu_s_per_gb / (b.median_host_cpu_s_per_gb + p),
            })
        })
        .collect()
}

/// The floor targets: nena aead's CPU per GB <= [`FLOOR_TARGET`] times its floor, for
/// each floor whose primitive was timed.
pub fn floor_targets(floors: &[Floor]) -> Vec<TargetCheck> {
    floors
        .iter()
        .filter_map(|f| Some((f, f.paired?.0)))
        .map(|(f, by_rep)| {
            TargetCheck::at_most(
                format!(
                    "{} CPU per GB <= {FLOOR_TARGET:.2}x its floor ({} + {}), median by repetition",
                    f.variant, f.plain, f.primitive
                ),
                by_rep,
                FLOOR_TARGET,
            )
        })
        .collect()
}

/// nena's proxy pair against the best peer: CPU per GB and goodput.
fn peer_targets(nena: &VariantStats, stats: &[VariantStats], targets: &mut Vec<TargetCheck>) {
    let peers: Vec<&VariantStats> = stats.iter().filter(|s| !s.variant.is_nena()).collect();
    let best_cpu = peers
        .iter()
        .min_by(|a, b| a.median_cpu_s_per_gb.total_cmp(&b.median_cpu_s_per_gb));
    let best_goodput = peers
        .iter()
        .max_by(|a, b| a.median_mbit_s.total_cmp(&b.median_mbit_s));
    if let Some(b) = best_cpu {
        let value = nena.median_cpu_s_per_gb / b.median_cpu_s_per_gb.max(1e-12);
        let name = format!(
            "nena CPU per GB <= {CPU_TARGET}x the best peer's ({})",
            b.variant
        );
        targets.push(TargetCheck::at_most(name, value, CPU_TARGET));
    }
    if let Some(b) = best_goodput {
        let value = nena.median_mbit_s / b.median_mbit_s.max(1e-12);
        let name = format!("nena goodput >= the best peer's ({})", b.variant);
        targets.push(TargetCheck::at_least(name, value, GOODPUT_TARGET));
    }
}

/// nena's CPU per GB over `peer`'s, repetition by repetition: (median, least, most), or
/// None for nena itself or when no repetition has both.
fn paired_cpu_ratio(runs: &[Run], peer: Variant) -> Option<(f64, f64, f64)> {
    if peer.is_nena() {
        return None;
    }
    let of = |v: Variant, rep: usize| runs.iter().find(|r| r.variant == v && r.rep == rep);
    let mut ratios: Vec<f64> = runs
        .iter()
        .filter(|r| r.variant == Variant::Nena)
        .filter_map(|n| {
            let p = of(peer, n.rep)?;
            Some(n.cpu_s_per_gb / p.cpu_s_per_gb.max(1e-12))
        })
        .collect();
    if ratios.is_empty() {
        return None;
    }
    let m = median(&mut ratios);
    Some((m, ratios[0], ratios[ratios.len() - 1]))
}

/// The human table.
pub fn table(r: &PeersReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    for st in &r.settings {
        let _ = writeln!(
            s,
            "\n{}: {} MiB per transfer, client to server, medians of {}",
            st.setting.name,
            st.setting.bytes >> 20,
            r.reps
        );
        let _ = writeln!(
            s,
            "  {:<24} {:>10} {:>10} {:>8} {:>8} {:>10} {:>10}",
            "tunnel", "Mbit/s", "CPU s/GB", "client", "server", "untrusted", "multipath"
        );
        for v in &st.variants {
            let _ = writeln!(
                s,
                "  {:<24} {:>10.1} {:>10.3} {:>8.3} {:>8.3} {:>9.1}% {:>6}/{}",
                v.variant,
                v.median_mbit_s,
                v.median_cpu_s_per_gb,
                v.median_client_cpu_s_per_gb,
                v.median_server_cpu_s_per_gb,
                v.median_untrusted_share * 100.0,
                v.multipath_runs,
                v.runs
            );
        }
        for v in &st.variants {
            if let Some((m, lo, hi)) = v.paired_cpu_ratio {
                let _ = writeln!(
                    s,
                    "  nena's CPU per GB over {}'s in the same repetition: median {m:.3} ({lo:.3}-{hi:.3})",
                    v.variant
                );
            }
        }
        for f in &st.floors {
            let _ = writeln!(
                s,
                "  floor of {}: {} {:.3} + {} {:.3} (median of the repetitions') = {:.3} CPU s/GB; {} {:.3}: {:.3}x{}",
                f.variant,
                f.plain,
                f.plain_cpu_s_per_gb,
                f.primitive,
                f.primitive_s_per_gb,
                f.floor_s_per_gb,
                f.variant,
                f.cpu_s_per_gb,
                f.ratio,
                f.paired.map_or(String::new(), |(m, lo, hi)| format!(
                    "; by repetition (the verdict): median {m:.3}, {lo:.3}-{hi:.3}"
                ))
            );
            if f.host_ratio.is_finite() {
                let _ = writeln!(
                    s,
                    "    the whole host's busy CPU (every process and softirq): {} {:.3} s/GB, {:.3}x its plain twin's + the primitive",
                    f.variant, f.host_cpu_s_per_gb, f.host_ratio
                );
            }
        }
        for f in &st.failures {
            let _ = writeln!(s, "  {} rep {} failed: {}", f.variant, f.rep, f.error);
        }
        for t in &st.targets {
            let _ = writeln!(s, "  {t}");
        }
        if let Some(u) = &st.udp {
            for (what, runs, pct) in [
                ("through the gateway", &u.runs, u.lost_percent),
                (
                    "straight over the link",
                    &u.direct_runs,
                    u.direct_lost_percent,
                ),
            ] {
                let (sent, lost) = runs
                    .iter()
                    .fold((0, 0), |(s, l), r| (s + r.packets, l + r.lost_packets));
                let _ = writeln!(
                    s,
                    "  UDP stream {what} ({} Mbit/s of {}-byte datagrams, {} run(s)): {lost} of {sent} lost ({pct:.3}%)",
                    udp::UDP_MBIT,
                    udp::DATAGRAM,
                    runs.len()
                );
            }
            let _ = writeln!(
                s,
                "  {} gateway UDP loss beyond the link's < {} point: {:.3}",
                if u.pass { "PASS" } else { "FAIL" },
                udp::LOSS_TARGET_PERCENT,
                u.beyond_percent
            );
        }
    }
    let _ = writeln!(
        s,
        "\n{} ({}; {}; load {} -> {})",
        if r.pass { "PASS" } else { "FAIL" },
        r.cpu,
        r.kernel,
        r.loadavg_start.trim(),
        r.loadavg_end.trim()
    );
    s
}

#[cfg(test)]
mod tests;
