//! A run's figures, from its socket samples (with `nena_analyze::plot`, PNG and SVG):
//! throughput per link and aggregate per 1 s bin (the LTE study's Figures 3, 4 and 6),
//! RTT per link over time (Figures 5 and 7) and the congestion window of every subflow;
//! and the capture analysis of `nena analyze` (`trace.json` and its figures) when the run
//! captured its links.

use crate::model::Direction;
use crate::sample::Sample;
use crate::summary::{client_ip, RunSummary};
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

/// The link of a sampled socket (the client's end decides).
fn link_of(src: std::net::SocketAddr, dst: std::net::SocketAddr, d: Direction) -> Option<Link> {
    let ip = match d {
        Direction::Up => src.ip(),
        Direction::Down => dst.ip(),
    };
    [Link::Trusted, Link::Untrusted]
        .into_iter()
        .find(|&l| client_ip(l) == ip)
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
        let n = s
            .links
            .iter()
            .map(|l| l.series_mbit_s.len())
            .max()
            .unwrap_or(0);
        let agg = (0..n)
            .map(|i| {
                let t = s
                    .links
                    .iter()
                    .find_map(|l| l.series_mbit_s.get(i))
                    .map_or(0.0, |p| p.0);
                let v = s
                    .links
                    .iter()
                    .filter_map(|l| l.series_mbit_s.get(i))
                    .map(|p| p.1)
                    .sum();
                (t, v)
            })
            .collect();
        th.push(("aggregate".into(), agg));
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
    let mut last = std::collections::HashMap::new();
    for smp in samples {
        for k in &smp.sockets {
            let Some(l) = link_of(k.src, k.dst, s.direction) else {
                continue;
            };
            let name = format!("{} :{}", label(s, l), k.src.port());
            let prev = last.insert((k.src, k.dst), k.bytes_acked).unwrap_or(0);
            let idx =
                |v: &mut Vec<(String, Vec<(f64, f64)>)>| match v.iter().position(|x| x.0 == name) {
                    Some(i) => i,
                    None => {
                        v.push((name.clone(), Vec::new()));
                        v.len() - 1
                    }
                };
            let i = idx(&mut cwnd);
            cwnd[i].1.push((smp.t, k.cwnd as f64));
            if k.bytes_acked > prev && k.rtt_us > 0 {
                let i = idx(&mut rtt);
                rtt[i].1.push((smp.t, k.rtt_us as f64 / 1000.0));
            }
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
