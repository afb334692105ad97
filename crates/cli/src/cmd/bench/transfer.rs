//! `nena bench transfer`: goodput and CPU per GB of plain MPTCP (a raw MPTCP sender and
//! receiver) and nena in every mode over the lab's two paths, every run required to be
//! multipath, targets checked (see nena_bench::transfer).
use crate::exit::{CmdResult, Exit};
use anyhow::anyhow;
use nena_bench::transfer::{self as bench, BenchOptions, BenchReport};
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Repetitions per setting and variant.
    #[arg(long, default_value = "5")]
    pub reps: usize,
    /// Bytes per run (e.g. 2M, 100M) instead of a fixed time: the runs' path split is
    /// checked, not their rate (a short transfer is mostly its handshake).
    #[arg(long, conflicts_with = "time", value_parser = crate::cmd::parse::parse_bytes)]
    pub bytes: Option<u64>,
    /// Seconds per run (default 10, or 3 with --quick).
    #[arg(long)]
    pub time: Option<f64>,
    /// Seconds at the start of each run left out of its goodput (slow start and the first
    /// losses at the rate limits, as iperf3 -O; default a fifth of the run, at most 2; 0: none).
    #[arg(long, conflicts_with = "bytes")]
    pub omit: Option<f64>,
    /// Fewer and shorter runs (3 repetitions of 3 s) for a quick look, not for records.
    #[arg(long)]
    pub quick: bool,
    /// Measure server to client (the papers' file-transfer direction).
    #[arg(long)]
    pub reverse: bool,
    /// Required kato goodput as a fraction of plain MPTCP.
    #[arg(long, default_value = "0.97")]
    pub target: f64,
    /// Report, but exit 0 even when the target is missed.
    #[arg(long)]
    pub no_check: bool,
    /// Only these settings: `veth` (unlimited) and/or `fig18` (trusted 100 Mbit/s,
    /// untrusted 20 Mbit/s). Default: both.
    #[arg(long = "setting", value_name = "veth|fig18")]
    pub settings: Vec<String>,
    /// Print one JSON object (all runs and statistics) instead of the table.
    #[arg(long)]
    pub json: bool,
}

fn pick_settings(names: &[String]) -> Result<Vec<bench::Setting>, Exit> {
    let all = BenchOptions::default_settings();
    if names.is_empty() {
        return Ok(all);
    }
    let mut out = Vec::new();
    for n in names {
        let i = match n.as_str() {
            "veth" | "unlimited" => 0,
            "fig18" | "100/20" => 1,
            other => {
                return Err(Exit::usage(anyhow!(
                    "unknown setting `{other}` (veth or fig18)"
                )))
            }
        };
        out.push(all[i].clone());
    }
    Ok(out)
}

pub fn run(a: Args) -> CmdResult {
    if a.bytes == Some(0) {
        return Err(Exit::usage(anyhow!("--bytes must be more than 0")));
    }
    if a.reps == 0 {
        return Err(Exit::usage(anyhow!("--reps must be at least 1")));
    }
    if !(a.target > 0.0 && a.target <= 2.0) {
        return Err(Exit::usage(anyhow!("--target must be in (0, 2]")));
    }
    let time = match a.time {
        Some(t) if t > 0.0 && t < 3600.0 => t,
        Some(_) => return Err(Exit::usage(anyhow!("--time must be in (0, 3600) seconds"))),
        None if a.quick => 3.0,
        None => 10.0,
    };
    let omit = match a.omit {
        Some(o) if (0.0..time).contains(&o) => o,
        Some(_) => {
            return Err(Exit::usage(anyhow!(
                "--omit must be in [0, --time) seconds"
            )))
        }
        None => (time / 5.0).min(2.0),
    };
    let nena = std::env::current_exe()
        .map_err(|e| Exit::from(anyhow!("cannot find the nena binary: {e}")))?;
    let opts = BenchOptions {
        reps: if a.quick && a.reps == 5 { 3 } else { a.reps },
        bytes: a.bytes,
        time: Duration::from_secs_f64(time),
        omit: (omit > 0.0).then(|| Duration::from_secs_f64(omit)),
        reverse: a.reverse,
        target: a.target,
        settings: pick_settings(&a.settings)?,
        nena,
    };
    let json = a.json;
    let report = bench::run(&opts, move |line| {
        if !json {
            eprintln!("{line}");
        }
    })?;
    if json {
        println!(
            "{}",
            serde_json::to_string(&report).map_err(|e| Exit::from(anyhow!(e)))?
        );
    } else {
        print!("{}", bench::table(&report));
    }
    check(&report, a.no_check)
}

/// Exit status 1 when a target is missed (a single-path run among them), unless `--no-check`.
fn check(report: &BenchReport, no_check: bool) -> CmdResult {
    if report.pass || no_check {
        return Ok(());
    }
    let missed: Vec<String> = report
        .settings
        .iter()
        .flat_map(|s| {
            s.targets
                .iter()
                .filter(|t| !t.pass)
                .map(move |t| format!("{} ({})", t.name, s.setting.name))
        })
        .collect();
    Err(anyhow!(
        "target(s) missed: {} (use --no-check to report only)",
        missed.join("; ")
    )
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nena_bench::transfer::{summarize, Run, SettingResult, Variant};

    fn report(multipath: bool) -> BenchReport {
        let runs: Vec<Run> = Variant::ALL
            .iter()
            .map(|&variant| Run {
                variant,
                rep: 1,
                mbit_s: 100.0,
                bytes: 1_000_000,
                seconds: 1.0,
                trusted_bytes: 800_000,
                untrusted_bytes: if multipath { 200_000 } else { 0 },
                multipath,
                subflow_bytes: vec![],
                cpu_s: 0.1,
                cpu_s_per_gb: 100.0,
            })
            .collect();
        let setting = BenchOptions::default_settings().remove(1);
        let (variants, kato_ratio, targets) = summarize(&runs, 0.97, true, true);
        let pass = targets.iter().all(|t| t.pass);
        BenchReport {
            reps: 1,
            bytes: None,
            seconds_per_run: Some(1.0),
            omitted_seconds: None,
            direction: "client to server",
            target_ratio: 0.97,
            settings: vec![SettingResult {
                setting,
                variants,
                kato_ratio,
                targets,
                pass,
                beyond_the_primitive: Vec::new(),
                runs,
            }],
            pass,
            cpu: String::new(),
            kernel: String::new(),
            loadavg_start: String::new(),
            loadavg_end: String::new(),
        }
    }

    #[test]
    fn single_path_runs_exit_1_unless_no_check() {
        assert!(check(&report(true), false).is_ok());
        let r = report(false);
        let e = check(&r, false).unwrap_err();
        assert_eq!(e.code, 1);
        let msg = format!("{}", e.error);
        assert!(msg.contains("every run multipath"), "{msg}");
        assert!(check(&r, true).is_ok());
        let t = bench::table(&r);
        assert!(t.contains("FAIL") && t.contains("0.0%"), "{t}");
    }
}
