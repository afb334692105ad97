//! `nena lab run FILE --out DIR`: a scenario of the measurement lab run end to end (the
//! `nena-scenario` crate), with progress lines on stderr, Ctrl-C tearing the lab down, and
//! a table or `--json` of the summary.
use crate::exit::{CmdResult, Exit};
use clap::Args;
use nena_scenario::{run_scenario, RunOptions, Scenario, ScenarioSummary};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The scenario (TOML), e.g. scenarios/lte-outages.toml.
    pub file: PathBuf,
    /// Output directory: one directory per run (samples.json, run.json, plots, and a
    /// LINK.pcap per link the scenario's `[capture]` names) and summary.json.
    #[arg(long)]
    pub out: PathBuf,
    /// Only the run(s) with this name (repeatable).
    #[arg(long = "only", value_name = "NAME")]
    pub only: Vec<String>,
    /// Shorten every run and event time by this factor (0 < F <= 1), for a quick look.
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Prefix of the labs the runs build (one at a time).
    #[arg(long, default_value = "nrun")]
    pub prefix: String,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: &RunArgs) -> CmdResult {
    let sc = Scenario::load(&a.file).map_err(Exit::usage)?;
    let sc = sc.scaled(a.scale).map_err(Exit::usage)?;
    let opts = RunOptions {
        out: a.out.clone(),
        nena: std::env::current_exe().map_err(anyhow::Error::from)?,
        base: nena_scenario::model::base_dir(&a.file),
        prefix: Some(a.prefix.clone()),
        only: a.only.clone(),
    };
    if nena_lab::Lab::is_up(&a.prefix) {
        return Err(Exit::usage(anyhow::anyhow!(
            "a lab with prefix `{}` is up; take it down (`nena lab down --prefix {}`) or use --prefix",
            a.prefix,
            a.prefix
        )));
    }
    let summary: ScenarioSummary = nena_lab::with_teardown_on_interrupt(
        &a.prefix,
        nena_scenario::run::unload_after_interrupt,
        move || run_scenario(&sc, &opts, |l| eprintln!("{l}")),
    )?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&summary).map_err(anyhow::Error::from)?
        );
    } else {
        print!("{}", table(&summary));
        println!("{}", captures_line(&summary.scenario));
        println!("written: {}", a.out.join("summary.json").display());
    }
    if summary.runs.iter().any(|r| !r.outcome.verified) {
        return Err(anyhow::anyhow!("a run's data did not verify").into());
    }
    Ok(())
}

/// Which captures the runs wrote, or why there are none.
fn captures_line(sc: &Scenario) -> String {
    if sc.capture.links.is_empty() {
        "captures: none (the scenario has no [capture] section; `links = [\"untrusted\"]` \
         there captures that link in every run)"
            .to_string()
    } else {
        let files: Vec<String> = sc
            .capture
            .links
            .iter()
            .map(|l| format!("{l}.pcap"))
            .collect();
        format!(
            "captures: {} in each run's directory (first {} bytes of each packet)",
            files.join(", "),
            sc.capture.snaplen.unwrap_or(128)
        )
    }
}

/// The summary as the LTE study's tables: per run and link, throughput and RTT with sigma.
pub fn table(s: &ScenarioSummary) -> String {
    let mut out = String::new();
    if !s.scenario.description.is_empty() {
        out += &format!("{}\n", s.scenario.description);
    }
    out += &format!(
        "{:<18} {:<10} {:>10} {:>22} {:>20}\n",
        "run", "link", "goodput", "throughput (sigma)", "RTT (sigma)"
    );
    for r in &s.runs {
        out += &format!(
            "{:<18} {:<10} {:>6.2} Mbit/s\n",
            r.label(),
            "all",
            r.outcome.goodput_mbit_s
        );
        for l in &r.links {
            let name = l.alias.clone().unwrap_or_else(|| l.link.to_string());
            let th = l
                .throughput_mbit_s
                .map(|t| format!("{:.2} Mb/s ({:.2})", t.mean, t.sigma))
                .unwrap_or_else(|| "-".into());
            let rtt = l
                .rtt_ms
                .map(|t| format!("{:.1} ms ({:.1})", t.mean, t.sigma))
                .unwrap_or_else(|| "-".into());
            out += &format!(
                "{:<18} {:<10} {:>10} {:>22} {:>20}\n",
                "", name, "", th, rtt
            );
        }
        for o in &r.outages {
            out +=
                &format!(
                "{:<18} {} down at {:.1}s, up at {}: {} bytes while down, data again after {}\n",
                "",
                o.link,
                o.down_s,
                o.up_s.map(|u| format!("{u:.1}s")).unwrap_or_else(|| "-".into()),
                o.bytes_while_down,
                o.recovered_after_s
                    .map(|x| format!("{x:.2}s"))
                    .unwrap_or_else(|| "never".into())
            );
        }
    }
    if s.goodput.iter().any(|g| g.mbit_s.n > 1) {
        out += "goodput over the repetitions:\n";
        for g in &s.goodput {
            out += &format!(
                "{:<18} {:>7.2} Mbit/s (sigma {:.2}, {} runs)\n",
                g.name, g.mbit_s.mean, g.mbit_s.sigma, g.mbit_s.n
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_captures_line_names_the_files_or_says_why_there_are_none() {
        let none = Scenario::parse(
            "duration = \"1s\"\n[[runs]]\nname = \"a\"\ntraffic = \"mptcp\"\n",
            "t",
        )
        .unwrap();
        let l = captures_line(&none);
        assert!(
            l.starts_with("captures: none") && l.contains("[capture]"),
            "{l}"
        );
        let two = Scenario::parse(
            "duration = \"1s\"\n[capture]\nlinks = [\"trusted\", \"untrusted\"]\n[[runs]]\nname = \"a\"\ntraffic = \"mptcp\"\n",
            "t",
        )
        .unwrap();
        assert_eq!(
            captures_line(&two),
            "captures: trusted.pcap, untrusted.pcap in each run's directory (first 128 bytes of each packet)"
        );
        // The demo makes none, and --help no longer promises them unconditionally.
        let demo = Scenario::load(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scenarios/demo.toml"
        )))
        .unwrap();
        assert!(captures_line(&demo).starts_with("captures: none"));
    }
}
