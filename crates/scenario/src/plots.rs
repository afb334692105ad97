//! A run's figures, from its socket samples (with `nena_analyze::plot`, PNG and SVG):
//! throughput per link and aggregate per 1 s bin (the LTE study's Figures 3, 4 and 6),
//! RTT per link over time (Figures 5 and 7) and the congestion window of every subflow;
//! and the capture analysis of `nena analyze` (`trace.json` and its figures) when the run
//! captured its links.

use crate::sample::Sample;
use crate::summary::{deltas, RunSummary};
use anyhow::{Context, Result};
use nena_analyze::plot::time_series;
use nena_lab::Link;
use std::path::{Path, PathBuf};

fn label(s: &RunSummary, l: Link) -> String {
    s.links
        .iter()
        .find(|x| x.link == l)
        .and_then(|x| x.alias.clone())
        .map(|a| format!("{a} ({l})"))
        .unwrap_or_else(|| l.to_string())
}

/// Write `throughput`, `rtt` and `cwnd` (.png and .svg) into `dir`; returns the files.
pub fn sample_figures(s: &RunSummary, samples: &[Sample], dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut put = |stem: &str, title: String, y: &str, series: Vec<(String, Vec<(f64, f64)>)>| {
        if series.iter().all(|(_, v)| v.is_empty()) {
            return Ok::<(), anyhow::Error>(());
        }
        for ext in ["png", "svg"] {
            let p = dir.join(format!("{stem}.{ext}"));
            time_series(&title, y, &series, &p)?;
            files.push(p);
        }
        Ok(())
    };
    // Throughput per link and the sum.
    let mut th: Vec<(String, Vec<(f64, f64)>)> = s
        .links
        .iter()
        .map(|l| (label(s, l.link), l.series_mbit_s.clone()))
        .collect();
    if s.links.len() > 1 {
        th.push(("aggregate".into(), s.aggregate_series_mbit_s.clone()));
    }
    put(
        "throughput",
        format!(
            "{}: throughput per path (1 s bins, acknowledged bytes)",
            s.name
        ),
        "Mbit/s",
        th,
    )?;
    // RTT and cwnd per socket, from the samples in which it moved data.
    let mut rtt: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    let mut cwnd: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for row in &deltas(samples, s.direction).rows {
        let name = format!("{} :{}", label(s, row.link), row.socket.0.port());
        let idx = |v: &mut Vec<(String, Vec<(f64, f64)>)>| match v.iter().position(|x| x.0 == name)
        {
            Some(i) => i,
            None => {
                v.push((name.clone(), Vec::new()));
                v.len() - 1
            }
        };
        let i = idx(&mut cwnd);
        cwnd[i].1.push((row.t, row.cwnd as f64));
        if let Some(ms) = row.rtt_ms {
            let i = idx(&mut rtt);
            rtt[i].1.push((row.t, ms));
        }
    }
    put(
        "rtt",
        format!("{}: smoothed RTT per subflow (TCP_INFO)", s.name),
        "ms",
        rtt,
    )?;
    put(
        "cwnd",
        format!("{}: congestion window per subflow", s.name),
        "segments",
        cwnd,
    )?;
    Ok(files)
}

/// Analyse the run's captures as `nena analyze` does: `trace.json` and figures under
/// `dir/trace/`.
pub fn capture_figures(captures: &[PathBuf], dir: &Path) -> Result<Vec<PathBuf>> {
    if captures.is_empty() {
        return Ok(Vec::new());
    }
    let report = nena_analyze::trace::analyze_captures(captures, &Default::default())
        .context("analysing the run's captures")?;
    let p = dir.join("trace.json");
    std::fs::write(&p, serde_json::to_vec(&report)?)
        .with_context(|| format!("writing {}", p.display()))?;
    let mut files = vec![p];
    files.extend(nena_analyze::plot::write_plots(
        &report,
        &dir.join("trace"),
    )?);
    Ok(files)
}
