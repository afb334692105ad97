//! `nena bench policy`: per-packet cost of each eBPF selector and actor, acting and
//! skipping, and of chains whose links all act, as ns and as ratios to the dispatcher of the
//! same run (BPF_PROG_TEST_RUN; method in `nena_bench::policy`, figures in
//! docs/BENCHMARKS.md).
use crate::exit::{CmdResult, Exit};
use nena_bench::policy::{BenchReport, Figure, Measure};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Runs per BPF_PROG_TEST_RUN batch.
    #[arg(long, default_value_t = 2000)]
    repeat: u32,
    /// Rounds: one pair of batches of every batch figure per round (the median is reported).
    #[arg(long, default_value_t = 15)]
    batches: usize,
    /// Single-run pairs per round for the figures of links that rewrite frames.
    #[arg(long, default_value_t = 7)]
    singles: usize,
    /// Print a JSON object (`results`: [{name, kind, act, skip?, links?}], `targets`).
    #[arg(long)]
    json: bool,
    /// Report the targets but exit 0 even if one fails.
    #[arg(long)]
    no_check: bool,
}

pub fn run(a: Args) -> CmdResult {
    if a.repeat == 0 || a.batches == 0 || a.singles == 0 {
        return Err(Exit::usage(anyhow::anyhow!(
            "--repeat, --batches and --singles must be at least 1"
        )));
    }
    let quiet = a.json || !std::io::IsTerminal::is_terminal(&std::io::stderr());
    let r = nena_bench::policy::run(a.repeat, a.batches, a.singles, |n| {
        if !quiet {
            eprint!("\rmeasuring: {n:<20}");
        }
    })?;
    if !quiet {
        eprintln!("\r{:<32}", "");
    }
    if a.json {
        super::output::print_json(&r)?;
    } else {
        print!("{}", table(&r));
    }
    check(&r, a.no_check)
}

fn cell(f: &Figure) -> String {
    format!(
        "{:>7.1} {:>5.2}x{}",
        f.ns,
        f.ratio,
        if f.noise { "*" } else { " " }
    )
}

fn cells(m: Option<&Measure>) -> String {
    match m {
        Some(m) => format!(
            "{} {} {:<6}",
            cell(&m.ingress),
            cell(&m.egress),
            format!("{:?}", m.method).to_lowercase()
        ),
        None => format!("{:>15} {:>15} {:<6}", "-", "-", ""),
    }
}

/// The human table.
pub fn table(r: &BenchReport) -> String {
    let mut s = format!(
        "policy cost per packet, ns and x dispatcher at the same hook (batch: median of {} pairs of batches x {} runs; single: median of {} pairs of single runs; load average {} -> {})\n",
        r.batches, r.repeat, r.single_samples, r.loadavg_start, r.loadavg_end
    );
    s += &format!(
        "{:<12} {:>15} {:>15} {:<6}  {:>15} {:>15} {:<6}  links\n",
        "name", "acting in", "acting eg", "how", "skipping in", "skipping eg", "how"
    );
    for e in &r.results {
        s += &format!(
            "{:<12} {}  {}  {}\n",
            e.name,
            cells(Some(&e.act)),
            cells(e.skip.as_ref()),
            e.links
                .as_ref()
                .map(|l| l.iter().map(|l| l.name()).collect::<Vec<_>>().join(" "))
                .unwrap_or_default()
        );
    }
    if !r.noise.is_empty() {
        s += &format!(
            "* noise: the difference came out negative (below the run-to-run noise): {}\n",
            r.noise.join(", ")
        );
    }
    s += "targets (x dispatcher, the larger hook):\n";
    for t in &r.targets {
        s += &format!(
            "  {:<4} {:<22} {:>6.2} <= {}\n",
            if t.pass { "PASS" } else { "FAIL" },
            t.name,
            t.ratio,
            t.limit
        );
    }
    s
}

/// Exit status 1 when a target is missed (as the other benches), unless `--no-check`.
fn check(r: &BenchReport, no_check: bool) -> CmdResult {
    let missed = r
        .targets
        .iter()
        .filter(|t| !t.pass)
        .map(|t| t.name.as_str());
    super::output::check_targets(missed, no_check)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nena_bench::policy::{check as verdict, BenchEntry, Frame, Kind, Method};

    fn entry(name: &str, kind: Kind, ns: f64) -> BenchEntry {
        let f = |ns: f64| Figure {
            ns,
            ratio: ns / 30.0,
            noise: ns < 0.0,
            samples: 5,
        };
        BenchEntry {
            name: name.into(),
            kind,
            act: Measure {
                frame: Frame::DssAck,
                method: Method::Batch,
                ingress: f(ns),
                egress: f(ns),
            },
            skip: None,
            links: None,
        }
    }

    fn report(results: Vec<BenchEntry>) -> BenchReport {
        let targets = verdict(&results);
        BenchReport {
            method: String::new(),
            repeat: 1,
            batches: 1,
            single_samples: 1,
            targets_met: targets.iter().all(|t| t.pass),
            targets,
            results,
            noise: vec![],
            loadavg_start: String::new(),
            loadavg_end: String::new(),
        }
    }

    #[test]
    fn a_missed_target_exits_1_unless_no_check() {
        let good = report(vec![
            entry("dispatcher", Kind::Dispatcher, 30.0),
            entry("src", Kind::Selector, 20.0),
        ]);
        assert!(check(&good, false).is_ok());
        // src at 2x the dispatcher: over the 1.5x limit
        let bad = report(vec![
            entry("dispatcher", Kind::Dispatcher, 30.0),
            entry("src", Kind::Selector, 60.0),
        ]);
        let e = check(&bad, false).unwrap_err();
        assert_eq!(e.code, 1);
        assert!(format!("{}", e.error).contains("src acting"), "{}", e.error);
        assert!(check(&bad, true).is_ok());
        let t = table(&bad);
        assert!(t.contains("FAIL src acting"), "{t}");
        assert!(t.contains("2.00x"), "{t}");
    }
}
