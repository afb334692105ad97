//! `nena eavesdrop`: what an attacker on one link sees in a capture of it (payload as text
//! or hex, like the papers' Figures 13, 14, 16, 17) and whether a known file leaks.
use crate::exit::{CmdResult, Exit};
use nena_analyze::{analyze_file, render, Options};
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct EavesdropArgs {
    /// The capture (pcap or pcapng), e.g. from `nena lab capture untrusted FILE`.
    pub capture: PathBuf,
    /// The original file: report whether any 16-byte run of it appears in the capture.
    #[arg(long)]
    pub known: Option<PathBuf>,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
    /// Show payloads as a hex dump (offset, hex, text) instead of text.
    #[arg(long)]
    pub hex: bool,
    /// Show at most N payload-carrying segments (the summary covers all).
    #[arg(long, value_name = "N")]
    pub max: Option<usize>,
    /// Show at most N bytes of each segment's payload (0: all).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub bytes: usize,
    /// Only the summary, no segments.
    #[arg(long, conflicts_with = "max")]
    pub summary: bool,
    /// Characters per line of the text view.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(8..=4096))]
    pub width: u16,
}

pub fn eavesdrop(a: EavesdropArgs) -> CmdResult {
    if !a.capture.is_file() {
        return Err(Exit::usage(anyhow::anyhow!(
            "no such capture file: {}",
            a.capture.display()
        )));
    }
    let known = match &a.known {
        Some(p) => Some(std::fs::read(p).map_err(|e| {
            Exit::usage(anyhow::anyhow!(
                "cannot read known file {}: {e}",
                p.display()
            ))
        })?),
        None => None,
    };
    let shown = if a.summary || (a.json && a.max.is_none()) {
        0
    } else {
        a.max.unwrap_or(usize::MAX)
    };
    let opts = Options {
        keep_segments: shown,
        keep_bytes: if a.bytes == 0 { usize::MAX } else { a.bytes },
    };
    // A file that is not a capture is bad input (status 2), like a missing one.
    let analysis = analyze_file(&a.capture, &opts).map_err(Exit::usage)?;
    let report = known.as_deref().map(|k| analysis.check_known(k, 10));

    let json = if a.json {
        let mut v = serde_json::to_value(&analysis).map_err(anyhow::Error::from)?;
        v["capture"] = serde_json::json!(a.capture.display().to_string());
        v["known"] = match (&report, &a.known) {
            (Some(r), Some(p)) => {
                let mut k = serde_json::to_value(r).map_err(anyhow::Error::from)?;
                k["file"] = serde_json::json!(p.display().to_string());
                k["leak"] = serde_json::json!(r.leak());
                k
            }
            _ => serde_json::Value::Null,
        };
        if a.max.is_some() {
            v["shown"] = serde_json::to_value(&analysis.shown).map_err(anyhow::Error::from)?;
        }
        Some(serde_json::to_string_pretty(&v).map_err(anyhow::Error::from)?)
    } else {
        None
    };
    match print(&a, &analysis, report.as_ref(), json) {
        // `nena eavesdrop big.pcap | head` is fine
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.map_err(|e| anyhow::Error::from(e).context("writing the output").into()),
    }
}

fn print(
    a: &EavesdropArgs,
    analysis: &nena_analyze::Analysis,
    report: Option<&nena_analyze::KnownReport>,
    json: Option<String>,
) -> std::io::Result<()> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if let Some(j) = json {
        writeln!(out, "{j}")?;
        return out.flush();
    }
    for s in &analysis.shown {
        writeln!(out, "{}", render::segment_header(s))?;
        let body = if a.hex {
            render::hex_dump(&s.payload)
        } else {
            render::text_dump(&s.payload, a.width as usize)
        };
        out.write_all(body.as_bytes())?;
        if s.payload.len() < s.len {
            writeln!(out, "    ... {} more bytes", s.len - s.payload.len())?;
        }
    }
    if !analysis.shown.is_empty() {
        writeln!(out)?;
    }
    if (analysis.shown.len() as u64) < analysis.segments && !a.summary {
        writeln!(
            out,
            "(showing {} of {} payload segments)",
            analysis.shown.len(),
            analysis.segments
        )?;
    }
    let name = a
        .known
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    out.write_all(render::summary(analysis, report.map(|r| (name.as_str(), r))).as_bytes())?;
    out.flush()
}
