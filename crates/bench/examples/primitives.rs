//! Which crate's AES-128-GCM, ChaCha20-Poly1305, AES-128-CTR and ChaCha20 are fastest on
//! this machine (docs/BENCHMARKS.md, "Crypto primitives"):
//!
//! ```sh
//! cargo run --release -p nena-bench --features compare-crypto --example primitives [-- --json]
//! ```
//!
//! Options: `--json` (the whole report as JSON), `--sizes 1280,16384,65536`, `--samples N`
//! (default 51), `--sample-ms MS` (default 1), `--core N` (default: the last core),
//! `--no-pin`, `--skew B` (byte offset of the first keystream message, default 13: mid-block;
//! 0 puts every message on a block boundary), `--quick` (5 samples: a smoke test, not a
//! measurement).

use anyhow::{bail, Context, Result};
use nena_bench::harness::HarnessConfig;
use nena_bench::primitives::{self, PrimConfig};
use nena_bench::progress::Progress;
use std::time::Duration;

fn main() -> Result<()> {
    let mut cfg = PrimConfig::default();
    let mut json = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--json" => json = true,
            "--quick" => cfg.harness = HarnessConfig::quick(),
            "--no-pin" => cfg.pin = false,
            "--skew" => cfg.skew = value()?.parse().context("--skew")?,
            "--core" => cfg.core = Some(value()?.parse().context("--core")?),
            "--samples" => cfg.harness.samples = value()?.parse().context("--samples")?,
            "--sample-ms" => {
                let ms: f64 = value()?.parse().context("--sample-ms")?;
                cfg.harness.sample_time = Duration::from_secs_f64(ms / 1e3);
            }
            "--sizes" => {
                cfg.sizes = value()?
                    .split(',')
                    .map(|s| {
                        s.trim()
                            .parse::<usize>()
                            .with_context(|| format!("--sizes: {s}"))
                    })
                    .collect::<Result<_>>()?;
            }
            "-h" | "--help" => {
                println!(
                    "usage: primitives [--json] [--sizes 1280,16384,65536] [--samples N] \
                     [--sample-ms MS] [--core N] [--no-pin] [--skew B] [--quick]"
                );
                return Ok(());
            }
            other => bail!("unknown argument {other} (try --help)"),
        }
    }
    let bar = Progress::stderr_if_tty("primitives");
    let report = primitives::run(&cfg, &mut |d, t| bar.update(d, t))?;
    bar.finish();
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", primitives::render_text(&report));
    }
    Ok(())
}
