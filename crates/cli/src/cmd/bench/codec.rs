//! `nena bench codec`: the papers' Table II on this machine (DES, TDEA, AES, the three
//! scrambling implementations) beside modern OpenSSL baselines and memcpy, with the
//! targets (ratios between rows of the same run) checked: exit status 1 when one fails.
use crate::exit::{CmdResult, Exit};
use anyhow::anyhow;
use nena_bench::codec::{self, CodecBenchConfig, Target};
use nena_bench::progress::Progress;
use nena_bench::HarnessConfig;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// A short run (few, short samples): for tests and demonstrations, not for records.
    #[arg(long)]
    quick: bool,
    /// Number of samples per figure (default 51; 5 with --quick).
    #[arg(long, value_name = "N")]
    samples: Option<usize>,
    /// Target duration of one sample in milliseconds (default 1).
    #[arg(long, value_name = "MS")]
    sample_ms: Option<f64>,
    /// Pin to this core (default: the last core).
    #[arg(long, value_name = "ID")]
    core: Option<usize>,
    /// Do not pin the measuring thread to one core.
    #[arg(long, conflicts_with = "core")]
    no_pin: bool,
    /// Report the targets but exit 0 even if one fails.
    #[arg(long)]
    no_check: bool,
}

pub fn run(a: Args) -> CmdResult {
    let mut harness = if a.quick {
        HarnessConfig::quick()
    } else {
        HarnessConfig::standard()
    };
    if let Some(n) = a.samples {
        harness.samples = n;
    }
    if let Some(ms) = a.sample_ms {
        if !(ms.is_finite() && ms > 0.0 && ms <= 10_000.0) {
            return Err(Exit::usage(anyhow!(
                "--sample-ms must be a number of milliseconds in (0, 10000], got {ms}"
            )));
        }
        harness.sample_time = Duration::from_secs_f64(ms / 1e3);
    }
    harness
        .validate()
        .map_err(|e| Exit::usage(anyhow!("--samples: {e}")))?;
    if let Some(c) = a.core {
        let cores = codec::available_cores();
        if !cores.contains(&c) {
            return Err(Exit::usage(anyhow!(
                "--core {c}: no such core (available: {cores:?})"
            )));
        }
    }
    let cfg = CodecBenchConfig {
        harness,
        pin: !a.no_pin,
        core: a.core,
    };

    let progress = Progress::stderr_if_tty("bench codec");
    let report = codec::run(&cfg, &mut |d, t| progress.update(d, t));
    progress.finish();
    let report = report?;

    if a.json {
        let s = serde_json::to_string_pretty(&report).map_err(anyhow::Error::from)?;
        println!("{s}");
    } else {
        print!("{}", codec::render_text(&report));
    }
    check(&report.targets, a.no_check)
}

/// Exit status 1 when a target is missed, unless `--no-check`.
fn check(targets: &[Target], no_check: bool) -> CmdResult {
    let failed = targets.iter().filter(|t| !t.pass).map(|t| t.name.as_str());
    super::output::check_targets(failed, no_check)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nena_bench::codec::{targets, Row};

    fn row(name: &str, us: f64, bulk: f64) -> Row {
        Row {
            name: name.into(),
            available: true,
            reason: None,
            us_per_msg: Some(us),
            us_per_msg_p25: None,
            us_per_msg_p75: None,
            msg_gbps: None,
            bulk_gbps: Some(bulk),
            ratio_to_fast: None,
            paper_ms: None,
            msg_stats: None,
            bulk_stats: None,
        }
    }

    #[test]
    fn a_missed_target_exits_1_unless_no_check() {
        let mut rows = vec![
            row("kato-fast", 0.05, 40.0),
            row("aes-128-gcm", 1.0, 4.0),
            row("kato-revised", 2.0, 1.5),
            row("memcpy", 0.03, 30.0),
            row("aes-128-ctr", 0.8, 6.0),
            row("nena-aead", 0.6, 3.0),
            row("nena-stream", 0.5, 5.0),
            row("nena-ctr", 0.2, 12.0),
            row("nena-ctr-rustcrypto", 0.2, 11.0),
        ];
        assert!(check(&targets(&rows, "avx2"), false).is_ok());
        // kato-fast 6x slower: below the avx2 kernel's limits against the revised loop (8x)
        // and GCM (5x); bulk unchanged
        rows[0] = row("kato-fast", 0.3, 40.0);
        let t = targets(&rows, "avx2");
        let e = check(&t, false).unwrap_err();
        assert_eq!(e.code, 1);
        assert_eq!(
            format!("{}", e.error),
            "target(s) not met: fast-vs-aes-128-gcm, fast-vs-revised (use --no-check to report only)"
        );
        assert!(check(&t, true).is_ok());
        // a missing row fails every target that needs it
        let e = check(&targets(&rows[1..], "avx2"), false).unwrap_err();
        assert!(format!("{}", e.error).contains("fast-vs-aes-128-gcm"));
    }
}
