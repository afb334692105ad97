//! `nena bench transfer`: goodput and CPU cost of plain MPTCP and nena in each mode (`plain`,
//! `kato`, `stream`, `aead`) over the same two lab paths, in one lab run, with the targets
//! checked: each mode's goodput against plain MPTCP where the links set the pace, and the
//! crypto modes' CPU seconds per GB against plain MPTCP's where the CPU does.
//!
//! The bench brings up its own lab (unique prefix; torn down on success, error and Ctrl-C),
//! starts `nena serve` (every mode accepted) and `nena serve --raw` (the plain-MPTCP
//! baseline: the same MPTCP sockets, trusted-path-first gate and perf protocol, without the
//! nena handshake and without any transform) in the server host, and runs `nena perf` from
//! the client host for each variant, interleaved within every repetition (the order rotates
//! so no variant always runs first). Settings: unlimited veth, then the trusted link at
//! 100 Mbit/s and the untrusted one at 20 Mbit/s (the papers' Figure 18 used 100BASE-T as
//! the trusted path and 802.11g as the untrusted one). Goodput is verified payload bytes
//! over the time from the first data byte to the receiver's confirmation.

use anyhow::{anyhow, bail, Context, Result};
use nena_lab::{Host, Lab, LabConfig, LabGuard, Link, Rate};
use serde::Serialize;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// The variants compared (the first is the baseline).
pub const VARIANTS: [&str; 5] = [
    "plain MPTCP",
    "nena plain",
    "nena kato",
    "nena stream",
    "nena aead",
];

/// Goodput the crypto modes must reach, as a fraction of plain MPTCP's, where the links set
/// the pace (a rate-limited setting).
pub const CRYPTO_GOODPUT_TARGET: f64 = 0.99;
/// CPU seconds per GB allowed, as a multiple of plain MPTCP's, where the CPU sets the pace
/// (unlimited veth): `stream` and `aead`.
pub const CPU_TARGETS: [(&str, f64); 2] = [("nena stream", 1.10), ("nena aead", 1.20)];

/// The `nena perf` arguments of a variant (which server port, which mode).
fn variant_args(variant: &str) -> (u16, &'static [&'static str]) {
    match variant {
        "plain MPTCP" => (PORT_RAW, &["--raw"]),
        "nena plain" => (PORT_NENA, &["--mode", "plain"]),
        "nena kato" => (PORT_NENA, &["--mode", "kato"]),
        "nena stream" => (PORT_NENA, &["--mode", "stream"]),
        _ => (PORT_NENA, &["--mode", "aead"]),
    }
}

const PORT_NENA: u16 = 5201;
const PORT_RAW: u16 = 5202;

/// One network setting.
#[derive(Debug, Clone, Serialize)]
pub struct Setting {
    pub name: String,
    pub trusted_rate: Option<u64>,
    pub untrusted_rate: Option<u64>,
}

/// The bench's parameters.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    pub reps: usize,
    /// Per run: this many bytes (for every setting), or else `time`.
    pub bytes: Option<u64>,
    pub time: Duration,
    /// Time runs: leave this first part of every run (slow start, the first losses at the
    /// rate limits) out of its goodput. Not used with `bytes`.
    pub omit: Option<Duration>,
    /// Server to client (the direction of the papers' file transfer) instead of client to server.
    pub reverse: bool,
    /// kato must reach this fraction of plain MPTCP's median goodput.
    pub target: f64,
    pub settings: Vec<Setting>,
    /// The `nena` binary to run in the lab hosts.
    pub nena: PathBuf,
}

impl BenchOptions {
    /// The two settings of the issue.
    pub fn default_settings() -> Vec<Setting> {
        vec![
            Setting {
                name: "veth, unlimited".into(),
                trusted_rate: None,
                untrusted_rate: None,
            },
            Setting {
                name: "100/20 Mbit/s".into(),
                trusted_rate: Some(100_000_000),
                untrusted_rate: Some(20_000_000),
            },
        ]
    }
}

/// One perf run.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub variant: &'static str,
    pub rep: usize,
    pub mbit_s: f64,
    pub bytes: u64,
    pub seconds: f64,
    pub multipath: bool,
    /// Payload bytes per subflow local address (sent + received).
    pub subflow_bytes: Vec<(String, u64)>,
    /// User + system CPU time of the two nena processes of the run (perf client and the
    /// server), seconds. Kernel work done outside them (e.g. in ksoftirqd) is not counted.
    pub cpu_s: f64,
    /// `cpu_s` per 10^9 payload bytes: the cost of a byte, much less sensitive to other
    /// load on the machine than goodput is.
    pub cpu_s_per_gb: f64,
}

/// Statistics of one variant in one setting.
#[derive(Debug, Clone, Serialize)]
pub struct VariantStats {
    pub variant: &'static str,
    pub median_mbit_s: f64,
    pub min_mbit_s: f64,
    pub max_mbit_s: f64,
    /// Median over the median of plain MPTCP in the same setting.
    pub ratio: f64,
    /// Median over the repetitions of (this run / the plain-MPTCP run of the same
    /// repetition): less sensitive to slow drifts of the machine's load.
    pub paired_ratio: f64,
    pub multipath_runs: usize,
    pub runs: usize,
    /// Median CPU seconds (client + server process) per 10^9 payload bytes.
    pub median_cpu_s_per_gb: f64,
}

/// One checked target of a setting.
#[derive(Debug, Clone, Serialize)]
pub struct TargetCheck {
    /// e.g. `nena aead goodput >= 99% of plain MPTCP`.
    pub name: String,
    /// The measured ratio (to plain MPTCP, same setting, same run).
    pub value: f64,
    pub limit: f64,
    /// `>=` (goodput) or `<=` (CPU per GB).
    pub at_least: bool,
    pub pass: bool,
}

/// Results of one setting.
#[derive(Debug, Clone, Serialize)]
pub struct SettingResult {
    pub setting: Setting,
    pub variants: Vec<VariantStats>,
    pub kato_ratio: f64,
    pub targets: Vec<TargetCheck>,
    pub pass: bool,
    pub runs: Vec<Run>,
}

/// The whole bench.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub reps: usize,
    pub bytes: Option<u64>,
    pub seconds_per_run: Option<f64>,
    /// Seconds at the start of each time run left out of its goodput.
    pub omitted_seconds: Option<f64>,
    pub direction: &'static str,
    pub target_ratio: f64,
    pub settings: Vec<SettingResult>,
    pub pass: bool,
    pub cpu: String,
    pub kernel: String,
    /// /proc/loadavg when the bench started and ended (other work on the machine skews
    /// the unlimited setting, which is CPU-bound).
    pub loadavg_start: String,
    pub loadavg_end: String,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Median, min, max and ratios of the runs of one setting, and its targets: kato's goodput
/// against `target` (every setting); where the links set the pace (`link_limited`) the
/// crypto modes' goodput against [`CRYPTO_GOODPUT_TARGET`]; where the CPU does, their CPU
/// per GB against [`CPU_TARGETS`].
pub fn summarize(
    runs: &[Run],
    target: f64,
    link_limited: bool,
) -> (Vec<VariantStats>, f64, Vec<TargetCheck>) {
    let mut stats = Vec::new();
    for v in VARIANTS {
        let mut xs: Vec<f64> = runs
            .iter()
            .filter(|r| r.variant == v)
            .map(|r| r.mbit_s)
            .collect();
        let mut cpu: Vec<f64> = runs
            .iter()
            .filter(|r| r.variant == v)
            .map(|r| r.cpu_s_per_gb)
            .collect();
        let multipath_runs = runs
            .iter()
            .filter(|r| r.variant == v && r.multipath)
            .count();
        let n = xs.len();
        let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        stats.push(VariantStats {
            variant: v,
            median_mbit_s: median(&mut xs),
            min_mbit_s: min,
            max_mbit_s: max,
            ratio: f64::NAN,
            paired_ratio: f64::NAN,
            multipath_runs,
            runs: n,
            median_cpu_s_per_gb: median(&mut cpu),
        });
    }
    let base = stats[0].median_mbit_s;
    for s in &mut stats {
        s.ratio = s.median_mbit_s / base;
        let mut paired: Vec<f64> = runs
            .iter()
            .filter(|r| r.variant == s.variant)
            .filter_map(|r| {
                runs.iter()
                    .find(|b| b.variant == VARIANTS[0] && b.rep == r.rep)
                    .map(|b| r.mbit_s / b.mbit_s)
            })
            .collect();
        s.paired_ratio = median(&mut paired);
    }
    let kato = stats[2].ratio;
    let by = |v: &str| {
        stats
            .iter()
            .find(|s| s.variant == v)
            .expect("every variant")
    };
    let mut targets = vec![TargetCheck {
        name: format!("nena kato goodput >= {:.0}% of plain MPTCP", target * 100.0),
        value: kato,
        limit: target,
        at_least: true,
        pass: kato >= target,
    }];
    if link_limited {
        for v in ["nena stream", "nena aead"] {
            let r = by(v).ratio;
            targets.push(TargetCheck {
                name: format!(
                    "{v} goodput >= {:.0}% of plain MPTCP",
                    CRYPTO_GOODPUT_TARGET * 100.0
                ),
                value: r,
                limit: CRYPTO_GOODPUT_TARGET,
                at_least: true,
                pass: r >= CRYPTO_GOODPUT_TARGET,
            });
        }
    } else {
        let base = stats[0].median_cpu_s_per_gb;
        for (v, limit) in CPU_TARGETS {
            let r = by(v).median_cpu_s_per_gb / base;
            targets.push(TargetCheck {
                name: format!("{v} CPU per GB <= {limit:.2} x plain MPTCP"),
                value: r,
                limit,
                at_least: false,
                pass: r <= limit,
            });
        }
    }
    (stats, kato, targets)
}

/// A child process killed (and reaped) on drop.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_server(
    lab: &Lab,
    nena: &PathBuf,
    port: u16,
    raw: bool,
    dir: &std::path::Path,
) -> Result<Server> {
    let listen = format!("{}:{port}", lab.server_addr());
    let mut args = vec![
        "serve".to_string(),
        "--listen".into(),
        listen,
        "--dir".into(),
        dir.display().to_string(),
    ];
    if raw {
        args.push("--raw".into());
    } else {
        args.extend(["--mode".into(), "aead,stream,kato,plain".into()]);
    }
    let mut cmd = lab.command(Host::Server, nena, &args);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd.spawn().context("starting nena serve in the lab")?;
    // Wait for its "listening on" line.
    let out = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        let mut lines = std::io::BufReader::new(out).lines();
        if let Some(Ok(l)) = lines.next() {
            let _ = tx.send(l);
        }
        for _ in lines {}
    });
    let server = Server(child);
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(l) if l.contains("listening on") => Ok(server),
        Ok(l) => bail!("nena serve said {l:?} instead of listening"),
        Err(_) => bail!("nena serve did not start listening within 10s"),
    }
}

/// User + system CPU seconds of the reaped children of this process.
fn children_cpu() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return 0.0;
    }
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

/// User + system CPU seconds of a running process (from /proc/PID/stat).
fn process_cpu(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = stat.rsplit_once(')').map_or("", |x| x.1);
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (ticks(11) + ticks(12)) / hz
}

fn run_perf(
    lab: &Lab,
    opts: &BenchOptions,
    variant: &'static str,
    rep: usize,
    servers: (u32, u32),
) -> Result<Run> {
    let server_pid = if variant == VARIANTS[0] {
        servers.1
    } else {
        servers.0
    };
    let (port, extra) = variant_args(variant);
    let mut args: Vec<String> = vec![
        "perf".into(),
        "--to".into(),
        format!("{}:{port}", lab.server_addr()),
        "--trusted".into(),
        "trusted".into(),
        "--untrusted".into(),
        "untrusted".into(),
        "--interval".into(),
        "0".into(),
        "--json".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    match opts.bytes {
        Some(b) => args.extend(["--bytes".into(), b.to_string()]),
        None => {
            args.extend(["--time".into(), format!("{}", opts.time.as_secs_f64())]);
            if let Some(o) = opts.omit {
                args.extend(["--omit".into(), format!("{}", o.as_secs_f64())]);
            }
        }
    }
    if opts.reverse {
        args.push("--reverse".into());
    }
    let (c0, s0) = (children_cpu(), process_cpu(server_pid));
    let out = lab
        .command(Host::Client, &opts.nena, &args)
        .stdin(Stdio::null())
        .output()
        .context("running nena perf in the lab")?;
    let cpu_s = (children_cpu() - c0) + (process_cpu(server_pid) - s0);
    if !out.status.success() {
        bail!(
            "nena perf ({variant}) failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "nena perf printed no JSON: {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })?;
    let key = if opts.reverse { "received" } else { "sent" };
    let bytes = v[key]
        .as_u64()
        .ok_or_else(|| anyhow!("perf JSON without {key}"))?;
    let seconds = v["seconds"]
        .as_f64()
        .ok_or_else(|| anyhow!("perf JSON without seconds"))?;
    // the goodput perf reports (after the omitted warm-up, if any)
    let mbit_key = format!("mbit_s_{key}");
    let mbit_s = v[&mbit_key]
        .as_f64()
        .ok_or_else(|| anyhow!("perf JSON without {mbit_key}"))?;
    let multipath = v["paths"]["multipath"].as_bool().unwrap_or(false);
    let subflow_bytes = v["paths"]["subflows"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|s| {
                    let local = s["local"].as_str().unwrap_or("?").to_string();
                    let b = s["bytes_sent"].as_u64().unwrap_or(0)
                        + s["bytes_received"].as_u64().unwrap_or(0);
                    (local, b)
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Run {
        variant,
        rep,
        mbit_s,
        bytes,
        seconds,
        multipath,
        subflow_bytes,
        cpu_s,
        cpu_s_per_gb: cpu_s / (bytes.max(1) as f64 / 1e9),
    })
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn first_line(path: &str, key: &str) -> String {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default()
}

/// Run the whole bench on a lab whose guard the caller holds (so that Ctrl-C in the caller
/// tears it down). `progress` gets one line per run.
pub fn run_on(
    prefix: &str,
    opts: &BenchOptions,
    mut progress: impl FnMut(&str),
) -> Result<BenchReport> {
    let loadavg_start = loadavg();
    let lab = Lab::open(prefix)?;
    let dir = std::env::temp_dir().join(format!("nena-bench-{prefix}"));
    std::fs::create_dir_all(&dir)?;
    let srv = start_server(&lab, &opts.nena, PORT_NENA, false, &dir)?;
    let raw = start_server(&lab, &opts.nena, PORT_RAW, true, &dir)?;
    let servers = (srv.0.id(), raw.0.id());
    let mut results = Vec::new();
    for setting in &opts.settings {
        lab.set_rate(Link::Trusted, setting.trusted_rate.map(Rate))?;
        lab.set_rate(Link::Untrusted, setting.untrusted_rate.map(Rate))?;
        // One unmeasured warm-up run per setting.
        run_perf(&lab, opts, VARIANTS[2], 0, servers).context("warm-up run")?;
        let mut runs = Vec::new();
        for rep in 0..opts.reps {
            for k in 0..VARIANTS.len() {
                let variant = VARIANTS[(rep + k) % VARIANTS.len()];
                let r = run_perf(&lab, opts, variant, rep + 1, servers)?;
                progress(&format!(
                    "{:<16} rep {:>2}  {:<12} {:>9.1} Mbit/s  {:>6.2} CPU s/GB  {}",
                    setting.name,
                    rep + 1,
                    variant,
                    r.mbit_s,
                    r.cpu_s_per_gb,
                    if r.multipath {
                        "multipath"
                    } else {
                        "SINGLE PATH"
                    }
                ));
                runs.push(r);
            }
        }
        let link_limited = setting.trusted_rate.is_some() || setting.untrusted_rate.is_some();
        let (variants, kato_ratio, targets) = summarize(&runs, opts.target, link_limited);
        results.push(SettingResult {
            setting: setting.clone(),
            variants,
            kato_ratio,
            pass: targets.iter().all(|t| t.pass),
            targets,
            runs,
        });
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(BenchReport {
        reps: opts.reps,
        bytes: opts.bytes,
        seconds_per_run: opts.bytes.is_none().then_some(opts.time.as_secs_f64()),
        omitted_seconds: opts
            .omit
            .filter(|_| opts.bytes.is_none())
            .map(|o| o.as_secs_f64()),
        direction: if opts.reverse {
            "server to client"
        } else {
            "client to server"
        },
        target_ratio: opts.target,
        pass: results.iter().all(|r| r.pass),
        settings: results,
        cpu: first_line("/proc/cpuinfo", "model name"),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_string(),
        loadavg_start,
        loadavg_end: loadavg(),
    })
}

/// Bring up a lab, run the bench, tear the lab down (also on Ctrl-C: the bench runs on a
/// worker thread while this thread waits for it or for the signal).
pub fn run(opts: &BenchOptions, progress: impl FnMut(&str) + Send) -> Result<BenchReport> {
    let prefix = format!("nb{}", std::process::id());
    let cfg = LabConfig {
        verify: true,
        ..LabConfig::with_prefix(&prefix)
    };
    let started = Instant::now();
    let guard = LabGuard::up(&cfg).context("bringing up the bench lab")?;
    log::info!("lab {prefix} up in {:.1}s", started.elapsed().as_secs_f64());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = std::thread::scope(|s| {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let worker_prefix = prefix.clone();
        s.spawn(move || {
            let _ = tx.send(run_on(&worker_prefix, opts, progress));
        });
        rt.block_on(async {
            tokio::select! {
                r = rx => r.unwrap_or_else(|_| Err(anyhow!("bench thread died"))),
                _ = tokio::signal::ctrl_c() => {
                    // Tear down now: the servers and perf runs die with the namespaces.
                    let _ = Lab::down(&prefix);
                    eprintln!("nena: interrupted; lab {prefix} removed");
                    std::process::exit(130);
                }
            }
        })
    });
    drop(guard);
    result
}

/// The human table.
pub fn table(r: &BenchReport) -> String {
    let mut s = String::new();
    let what = match (r.bytes, r.seconds_per_run) {
        (Some(b), _) => format!("{b} bytes per run"),
        (None, Some(t)) => match r.omitted_seconds {
            Some(o) => format!("{t} s per run (goodput after the first {o} s)"),
            None => format!("{t} s per run"),
        },
        _ => String::new(),
    };
    s += &format!(
        "Transfer goodput, {} repetitions, {what}, {} (kernel {}, {}; load average {} -> {})\n",
        r.reps, r.direction, r.kernel, r.cpu, r.loadavg_start, r.loadavg_end
    );
    s += &format!(
        "{:<18} {:<12} {:>14} {:>10} {:>10} {:>9} {:>9} {:>10} {:>10}\n",
        "setting",
        "variant",
        "median Mbit/s",
        "min",
        "max",
        "ratio",
        "paired",
        "multipath",
        "CPU s/GB"
    );
    for set in &r.settings {
        for (i, v) in set.variants.iter().enumerate() {
            s += &format!(
                "{:<18} {:<12} {:>14.1} {:>10.1} {:>10.1} {:>8.1}% {:>8.1}% {:>6}/{:<3} {:>10.2}\n",
                if i == 0 {
                    set.setting.name.as_str()
                } else {
                    ""
                },
                v.variant,
                v.median_mbit_s,
                v.min_mbit_s,
                v.max_mbit_s,
                v.ratio * 100.0,
                v.paired_ratio * 100.0,
                v.multipath_runs,
                v.runs,
                v.median_cpu_s_per_gb
            );
        }
    }
    for set in &r.settings {
        for t in &set.targets {
            s += &format!(
                "target {}, {}: {:.3} {}\n",
                t.name,
                set.setting.name,
                t.value,
                if t.pass { "PASS" } else { "FAIL" }
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(variant: &'static str, rep: usize, mbit_s: f64) -> Run {
        Run {
            variant,
            rep,
            mbit_s,
            bytes: 1,
            seconds: 1.0,
            multipath: true,
            subflow_bytes: vec![],
            cpu_s: 1.0,
            cpu_s_per_gb: mbit_s / 100.0,
        }
    }

    #[test]
    fn statistics_and_check() {
        let runs = vec![
            run("plain MPTCP", 1, 100.0),
            run("plain MPTCP", 2, 120.0),
            run("plain MPTCP", 3, 90.0),
            run("nena plain", 1, 99.0),
            run("nena kato", 1, 97.0),
            run("nena kato", 2, 98.0),
            run("nena kato", 3, 50.0),
            run("nena stream", 1, 99.5),
            run("nena aead", 1, 98.0),
        ];
        let (stats, kato, targets) = summarize(&runs, 0.97, true);
        let pass = targets[0].pass;
        assert_eq!(stats[0].median_mbit_s, 100.0);
        assert_eq!((stats[0].min_mbit_s, stats[0].max_mbit_s), (90.0, 120.0));
        assert_eq!(stats[2].median_mbit_s, 97.0);
        assert!((kato - 0.97).abs() < 1e-12);
        assert!(pass);
        // Paired: 97/100, 98/120, 50/90 -> median 98/120.
        assert!((stats[2].paired_ratio - 98.0 / 120.0).abs() < 1e-12);
        assert!((stats[1].paired_ratio - 0.99).abs() < 1e-12);
        assert_eq!(stats[0].paired_ratio, 1.0);
        let (_, _, t) = summarize(&runs, 0.98, true);
        assert!(!t[0].pass);
        // Where the links set the pace: the crypto modes' goodput (99.5/100 passes, 98/100
        // does not); where the CPU does: their CPU per GB (0.995 and 0.98 vs 1.0).
        assert_eq!(targets.len(), 3);
        assert!(targets[1].pass && targets[1].name.contains("stream"));
        assert!(!targets[2].pass && targets[2].name.contains("aead"));
        let (_, _, cpu) = summarize(&runs, 0.97, false);
        assert_eq!(cpu.len(), 3);
        assert!(cpu[1..].iter().all(|t| t.pass && !t.at_least));
        assert!((cpu[1].value - 0.995).abs() < 1e-9, "{}", cpu[1].value);
        assert_eq!(stats[2].median_cpu_s_per_gb, 0.97);
        let mut even = [4.0, 1.0, 3.0, 2.0];
        assert_eq!(median(&mut even), 2.5);
    }
}
