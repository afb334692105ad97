//! `nena bench codec`: the papers' Table II on this machine (DES, TDEA, AES, the three
//! scrambling implementations) beside modern OpenSSL baselines and memcpy, with the
//! issue's targets for `kato-fast` checked (exit status 1 when one fails).
use crate::exit::{CmdResult, Exit};
use anyhow::anyhow;
use nena_bench::codec_table::{self, CodecBenchConfig};
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
        let cores = codec_table::available_cores();
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
    let report = codec_table::run(&cfg, &mut |d, t| progress.update(d, t));
    progress.finish();
    let report = report?;

    if a.json {
        let s = serde_json::to_string_pretty(&report).map_err(anyhow::Error::from)?;
        println!("{s}");
    } else {
        print!("{}", codec_table::render_text(&report));
    }
    if !report.all_targets_pass && !a.no_check {
        let failed: Vec<&str> = report
            .targets
            .iter()
            .filter(|t| !t.pass)
            .map(|t| t.name.as_str())
            .collect();
        return Err(anyhow!(
            "target(s) not met: {} (use --no-check to report only)",
            failed.join(", ")
        )
        .into());
    }
    Ok(())
}
