//! `nena bench policy`: per-packet cost of each eBPF selector, actor and chain
//! (BPF_PROG_TEST_RUN; method in `nena_policy::bench`, figures in docs/BENCHMARKS.md).
use crate::exit::{CmdResult, Exit};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Runs per BPF_PROG_TEST_RUN batch.
    #[arg(long, default_value_t = 2000)]
    repeat: u32,
    /// Batches per figure (the median is reported).
    #[arg(long, default_value_t = 15)]
    batches: usize,
    /// Print a JSON object (`results`: [{name, ns, ...}]).
    #[arg(long)]
    json: bool,
    /// Report the targets but exit 0 even if one fails.
    #[arg(long)]
    no_check: bool,
}

pub fn run(a: Args) -> CmdResult {
    if a.repeat == 0 || a.batches == 0 {
        return Err(Exit::usage(anyhow::anyhow!(
            "--repeat and --batches must be at least 1"
        )));
    }
    let quiet = a.json || !std::io::IsTerminal::is_terminal(&std::io::stderr());
    let r = nena_policy::bench::run(a.repeat, a.batches, |n| {
        if !quiet {
            eprint!("\rmeasuring: {n:<20}");
        }
    })?;
    if !quiet {
        eprintln!("\r{:<32}", "");
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&r).map_err(anyhow::Error::from)?
        );
        return check(&r, a.no_check);
    }
    println!("policy cost per packet, ns (median of {} batches x {} runs; links: marginal over the dispatcher)", r.batches, r.repeat);
    println!(
        "{:<12} {:>10} {:>10} {:>12} {:>12}  links",
        "name", "ingress", "egress", "acting in", "acting eg"
    );
    let f = |x: Option<f64>| x.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into());
    for e in &r.results {
        println!(
            "{:<12} {:>10.1} {:>10.1} {:>12} {:>12}  {}",
            e.name,
            e.ns,
            e.ns_egress,
            f(e.acting_ns),
            f(e.acting_ns_egress),
            e.links.as_deref().unwrap_or("")
        );
    }
    println!(
        "targets (<= 50 ns per link, <= 200 ns for chain-8): {}",
        if r.targets_met { "met" } else { "NOT met" }
    );
    check(&r, a.no_check)
}

/// Exit status 1 when a target is missed (as the other benches), unless `--no-check`.
fn check(r: &nena_policy::bench::BenchReport, no_check: bool) -> CmdResult {
    if r.targets_met || no_check {
        return Ok(());
    }
    let missed: Vec<&str> = r
        .results
        .iter()
        .filter(|e| !nena_policy::bench::within_target(e))
        .map(|e| e.name.as_str())
        .collect();
    Err(anyhow::anyhow!(
        "target(s) not met: {} (use --no-check to report only)",
        missed.join(", ")
    )
    .into())
}
