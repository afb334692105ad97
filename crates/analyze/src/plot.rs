//! Figures of a [`TraceReport`] with `plotters` (PNG and SVG): throughput over time per
//! subflow and aggregate, RTT over time, and the DSN-versus-time sequence graph of each
//! connection; and [`time_series`], a generic chart other code reuses for its own samples.
//!
//! Text is drawn with `ab_glyph` from a TrueType font read at run time (DejaVu Sans from
//! Debian's `fonts-dejavu-core`, or the file named by `NENA_FONT`): no fontconfig or
//! FreeType is needed.

use crate::trace::{Connection, TraceReport};
use anyhow::{anyhow, bail, Context, Result};
use plotters::prelude::*;
use plotters::style::FontStyle;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Image size of every figure, pixels (SVG: user units).
pub const SIZE: (u32, u32) = (1024, 576);
/// Figures are written for at most this many connections (the largest by payload).
pub const MAX_CONNECTIONS: usize = 16;

/// Where the font is looked for, in order (after `NENA_FONT`).
pub const FONT_PATHS: [&str; 4] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

/// Register the font once; the error says what to install.
fn font() -> Result<()> {
    static DONE: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        let env = std::env::var("NENA_FONT").ok();
        let candidates = env.iter().map(String::as_str).chain(FONT_PATHS);
        for p in candidates {
            if let Ok(bytes) = std::fs::read(p) {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok()
                {
                    return Ok(());
                }
            }
        }
        Err(format!(
            "no TrueType font for the plots: install fonts-dejavu-core (looked for {}) or set NENA_FONT",
            FONT_PATHS[0]
        ))
    })
    .clone()
    .map_err(|e| anyhow!(e))
}

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Lines,
    Points,
}

/// A chart of named series of (x, y) points, x in seconds, written as PNG or SVG by the
/// extension of `path`.
pub fn time_series(
    title: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
    path: &Path,
) -> Result<()> {
    chart(title, "time (s)", y_label, series, Style::Lines, path)
}

/// [`time_series`] with a choice of style and x label.
pub fn chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
    style: Style,
    path: &Path,
) -> Result<()> {
    font()?;
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let r = match ext.as_str() {
        "png" => {
            let root = BitMapBackend::new(path, SIZE).into_drawing_area();
            draw(root, title, x_label, y_label, series, style)
        }
        "svg" => {
            let root = SVGBackend::new(path, SIZE).into_drawing_area();
            draw(root, title, x_label, y_label, series, style)
        }
        _ => bail!("{}: plots are .png or .svg", path.display()),
    };
    r.with_context(|| format!("drawing {}", path.display()))
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
    style: Style,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("{e}");
    root.fill(&WHITE).map_err(e)?;
    let finite = |p: &&(f64, f64)| p.0.is_finite() && p.1.is_finite();
    let pts = series.iter().flat_map(|s| s.1.iter().filter(finite));
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0f64);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    if y1 <= 0.0 {
        y1 = 1.0;
    }
    let mut c = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, 0f64..y1 * 1.05)
        .map_err(e)?;
    c.configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(e)?;
    for (i, (name, data)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let data: Vec<(f64, f64)> = data.iter().filter(finite).copied().collect();
        match style {
            Style::Lines => c
                .draw_series(LineSeries::new(data, color.stroke_width(2)))
                .map_err(e)?,
            Style::Points => c
                .draw_series(
                    data.into_iter()
                        .map(move |p| Circle::new(p, 2, color.filled())),
                )
                .map_err(e)?,
        }
        .label(name.as_str())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(3)));
    }
    if !series.is_empty() {
        c.configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()
            .map_err(e)?;
    }
    root.present().map_err(e)?;
    Ok(())
}

fn sub_name(c: &Connection, i: usize, d: &str) -> String {
    let s = &c.subflows[i];
    let (a, b) = if d == "c2s" {
        (&s.src, &s.dst)
    } else {
        (&s.dst, &s.src)
    };
    format!("#{i} {a} > {b}")
}

/// The figures of one connection: (file stem, title, y label, series, style).
type Figure = (
    String,
    String,
    &'static str,
    Vec<(String, Vec<(f64, f64)>)>,
    Style,
);

fn figures(ci: usize, c: &Connection) -> Vec<Figure> {
    let mut out = Vec::new();
    let what = if c.mptcp {
        "MPTCP connection"
    } else {
        "TCP connection"
    };
    let mut tput = Vec::new();
    let mut rtt = Vec::new();
    for d in 0..2 {
        let dn = if d == 0 { "c2s" } else { "s2c" };
        // A direction that carried (next to) nothing, e.g. the ACK-only way of a transfer,
        // would only add flat lines.
        let most = c.payload_bytes.c2s.max(c.payload_bytes.s2c);
        if *c.payload_bytes.get(d) == 0 || *c.payload_bytes.get(d) * 100 < most {
            continue;
        }
        for (i, s) in c.subflows.iter().enumerate() {
            if *s.payload_bytes.get(d) > 0 {
                tput.push((sub_name(c, i, dn), s.throughput.get(d).clone()));
            }
            if !s.rtt_samples.get(d).is_empty() {
                rtt.push((sub_name(c, i, dn), s.rtt_samples.get(d).clone()));
            }
        }
        if c.subflows.len() > 1 {
            tput.push((format!("aggregate {dn}"), c.throughput.get(d).clone()));
        }
    }
    out.push((
        format!("conn{ci}-throughput"),
        format!("{what} {ci}: throughput per subflow"),
        "Mbit/s",
        tput,
        Style::Lines,
    ));
    out.push((
        format!("conn{ci}-rtt"),
        format!("{what} {ci}: RTT (ACK matching, Karn)"),
        "RTT (ms)",
        rtt,
        Style::Points,
    ));
    if let Some(data) = &c.data {
        let mut seq = Vec::new();
        for d in 0..2 {
            let dn = if d == 0 { "c2s" } else { "s2c" };
            for (i, pts) in data.get(d).points.iter().enumerate() {
                if !pts.is_empty() {
                    let mb = pts.iter().map(|&(t, v)| (t, v / 1e6)).collect();
                    seq.push((sub_name(c, i, dn), mb));
                }
            }
        }
        out.push((
            format!("conn{ci}-sequence"),
            format!("{what} {ci}: data sequence number over time"),
            "DSN - first DSN (MB)",
            seq,
            Style::Points,
        ));
    }
    out
}

/// Write the figures of every connection (at most [`MAX_CONNECTIONS`], the ones with the
/// most payload) as PNG and SVG into `dir` (created if needed). Returns the files written.
pub fn write_plots(report: &TraceReport, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut order: Vec<usize> = (0..report.connections.len()).collect();
    let total = |c: &Connection| c.payload_bytes.c2s + c.payload_bytes.s2c;
    order.sort_by_key(|&i| std::cmp::Reverse(total(&report.connections[i])));
    order.truncate(MAX_CONNECTIONS);
    order.sort();
    let mut files = Vec::new();
    for ci in order {
        let c = &report.connections[ci];
        for (stem, title, ylabel, series, style) in figures(ci, c) {
            for ext in ["png", "svg"] {
                let p = dir.join(format!("{stem}.{ext}"));
                chart(&title, "time (s)", ylabel, &series, style, &p)?;
                files.push(p);
            }
        }
    }
    Ok(files)
}
