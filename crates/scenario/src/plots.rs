//! A run's figures, from its socket samples (with `nena_analyze::plot`, PNG and SVG):
//! throughput per link and aggregate per 1 s bin (the LTE study's Figures 3, 4 and 6),
//! RTT per link over time (Figures 5 and 7) and the congestion window of every subflow;
//! and the capture analysis of `nena analyze` (`trace.json` and its figures) when the run
//! captured its links.

use crate::sample::Sample;
use crate::summary::{deltas, RunSummary};
use anyhow::{Context, Result};
use nena_analyze::plot::{time_series, Frame};
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

/// The frame of a run's figures: from 0 to the last sample, the links' outages (from the
/// scenario's events) shaded; the lines of `series` (name, link) on a link that went down
/// are not joined across its outages, nor across 5 sample intervals without a sample
/// (sampled values say nothing of the time between).
pub fn run_frame(s: &RunSummary, samples: &[Sample], series: &[(String, Link)]) -> Frame {
    let end = samples.iter().map(|x| x.t).fold(0f64, f64::max);
    let mut links: Vec<String> = Vec::new();
    for o in &s.outages {
        let l = label(s, o.link);
        if !links.contains(&l) {
            links.push(l);
        }
    }
    Frame {
        x_range: Some((0.0, end.max(1.0))),
        bands: s
            .outages
            .iter()
            .map(|o| (o.down_s, o.up_s.unwrap_or(end)))
            .collect(),
        band_label: format!("link down ({})", links.join(", ")),
        break_series: series
            .iter()
            .filter(|(_, l)| s.outages.iter().any(|o| o.link == *l))
            .map(|(n, _)| n.clone())
            .collect(),
        max_gap: Some(5.0 * sample_interval(samples)),
    }
}

/// The usual time between samples: the median step between distinct sample times.
fn sample_interval(samples: &[Sample]) -> f64 {
    let mut t: Vec<f64> = samples.iter().map(|x| x.t).collect();
    t.sort_by(f64::total_cmp);
    t.dedup();
    let mut steps: Vec<f64> = t.windows(2).map(|w| w[1] - w[0]).collect();
    steps.sort_by(f64::total_cmp);
    steps.get(steps.len() / 2).copied().unwrap_or(0.1)
}

/// Legend names of the subflow sockets of `rows` (in order of appearance): the link's name,
/// numbered with the time it first carried data when a link had several.
fn socket_names(
    s: &RunSummary,
    rows: &[crate::summary::Row],
) -> Vec<((Link, std::net::SocketAddr), String)> {
    let mut first: Vec<((Link, std::net::SocketAddr), f64)> = Vec::new();
    for r in rows {
        let key = (r.link, r.socket.0);
        if !first.iter().any(|(k, _)| *k == key) {
            first.push((key, r.t));
        }
    }
    first
        .iter()
        .map(|&((link, addr), t)| {
            let same: Vec<_> = first.iter().filter(|((l, _), _)| *l == link).collect();
            let name = if same.len() == 1 {
                label(s, link)
            } else {
                let n = same.iter().position(|((_, a), _)| *a == addr).unwrap_or(0) + 1;
                format!("{} #{n} (from {t:.1} s)", label(s, link))
            };
            ((link, addr), name)
        })
        .collect()
}

/// Write `throughput`, `rtt` and `cwnd` (.png and .svg) into `dir`; returns the files.
pub fn sample_figures(s: &RunSummary, samples: &[Sample], dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut put = |stem: &str,
                   title: String,
                   y: &str,
                   series: Vec<(String, Vec<(f64, f64)>)>,
                   frame: &Frame| {
        if series.iter().all(|(_, v)| v.is_empty()) {
            return Ok::<(), anyhow::Error>(());
        }
        for ext in ["png", "svg"] {
            let p = dir.join(format!("{stem}.{ext}"));
            time_series(&title, y, &series, frame, &p)?;
            files.push(p);
        }
        Ok(())
    };
    // Subflow sockets by name; the frame of every figure (computed once).
    let rows = deltas(samples, s.direction).rows;
    let order = socket_names(s, &rows);
    let on_links: Vec<(String, Link)> = order.iter().map(|((l, _), n)| (n.clone(), *l)).collect();
    let names: std::collections::HashMap<_, _> = order.into_iter().collect();
    let frame = run_frame(s, samples, &on_links);
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
        &Frame {
            // Binned throughput: its zeros during an outage are data, the line goes on.
            break_series: Vec::new(),
            ..frame.clone()
        },
    )?;
    // RTT and cwnd per socket, from the samples in which it moved data.
    let mut rtt: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    let mut cwnd: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for row in &rows {
        let name = &names[&(row.link, row.socket.0)];
        let idx = |v: &mut Vec<(String, Vec<(f64, f64)>)>| match v.iter().position(|x| &x.0 == name)
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
        &frame,
    )?;
    put(
        "cwnd",
        format!("{}: congestion window per subflow", s.name),
        "segments",
        cwnd,
        &frame,
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
