//! nena-scenario: the measurement lab's experiments as files. A scenario (TOML, see
//! `scenarios/` and docs/EXPERIMENTS.md) names the links' conditions, events at times
//! (a link down, back up, a new rate), and runs of traffic (single-path TCP, kernel MPTCP,
//! a nena perf session, a nena file transfer), each with its congestion control. `nena lab
//! run FILE --out DIR` runs each in a fresh lab with captures and socket samples
//! (TCP_INFO of every subflow every 100 ms) and writes per run `samples.json`,
//! `run.json`, the captures, `trace.json` and plots, and `DIR/summary.json`.
//!
//! Modules: `model` (the file, parsed and checked, no I/O), `sample` (sock_diag
//! samples, nena-mptcp's), `record` (what a run recorded: events as applied, the traffic's
//! outcome), `summary` (the numbers, pure: data in, data out), `run` (the lab, traffic, events), `plots`
//! (figures from the samples, and the captures analysed as `nena analyze` does).

pub mod fairness;
pub mod model;
pub mod plots;
pub mod record;
pub mod run;
/// The socket samples (nena's one TCP_INFO sampler, in nena-mptcp).
pub use nena_mptcp::sample;
pub mod summary;

pub use model::Scenario;
pub use run::{run_scenario, RunOptions, ScenarioSummary};

/// Bodies of the fuzz targets (`fuzz/fuzz_targets/scenario.rs`), also run on stable by the
/// property tests.
pub mod fuzzing {
    /// Any bytes as a scenario file: an error or a scenario, never a panic; a scenario
    /// that parses passes its checks and scales.
    pub fn scenario(data: &[u8]) {
        let Ok(text) = std::str::from_utf8(data) else {
            return;
        };
        if let Ok(s) = crate::Scenario::parse(text, "fuzz") {
            s.check().expect("a parsed scenario passes its checks");
            let _ = s.scaled(0.5);
        }
    }
}
