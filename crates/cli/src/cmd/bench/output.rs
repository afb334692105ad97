//! What the benches share in how they show their work: progress lines on standard error,
//! and the report as JSON with `--json`.
use crate::exit::CmdResult;

/// A bench's progress lines: each on standard error as `bench NAME: LINE`, none with
/// `--json` (the JSON is the whole output then).
pub fn progress(name: &'static str, json: bool) -> impl FnMut(&str) + Send + 'static {
    move |line| {
        if !json {
            eprintln!("bench {name}: {line}");
        }
    }
}

/// A bench's report as one pretty-printed JSON object on standard output (`--json`).
pub fn print_json<T: serde::Serialize>(report: &T) -> CmdResult {
    println!(
        "{}",
        serde_json::to_string_pretty(report).map_err(anyhow::Error::from)?
    );
    Ok(())
}
