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

/// What a figure shows besides its series: the time span it covers, spans shaded across it
/// (outages), and where lines must not join their points.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Frame {
    /// The x range drawn (e.g. the whole capture), instead of the data's own.
    pub x_range: Option<(f64, f64)>,
    /// Spans shaded across the plot, e.g. a link's outages.
    pub bands: Vec<(f64, f64)>,
    /// The legend's name of the shaded spans.
    pub band_label: String,
    /// Lines of these series (by name) break at the bands: no line between two points on
    /// either side of a band (a value sampled before a link's outage and one after it say
    /// nothing of the time between). Series of paths that stayed up are not listed.
    pub break_series: Vec<String>,
    /// Lines of those series also break where consecutive points are farther apart than
    /// this (seconds): a sampled value that stopped coming is not drawn as a slope.
    pub max_gap: Option<f64>,
}

impl Frame {
    /// Whether the line of `series` between consecutive points at `a` and `b` must break.
    fn breaks(&self, series: &str, a: f64, b: f64) -> bool {
        self.break_series.iter().any(|n| n == series)
            && (self.bands.iter().any(|&(s, e)| s < b && e > a)
                || self.max_gap.is_some_and(|g| b - a > g))
    }
}

/// A chart of named series of (x, y) points, x in seconds, written as PNG or SVG by the
/// extension of `path`.
pub fn time_series(
    title: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
    frame: &Frame,
    path: &Path,
) -> Result<()> {
    chart(
        title,
        "time (s)",
        y_label,
        series,
        Style::Lines,
        frame,
        path,
    )
}

/// [`time_series`] with a choice of style and x label.
pub fn chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
    style: Style,
    frame: &Frame,
    path: &Path,
) -> Result<()> {
    font()?;
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let f = Figure {
        title,
        x_label,
        y_label,
        series,
        style,
        frame,
    };
    let r = match ext.as_str() {
        "png" => f.draw(BitMapBackend::new(path, SIZE).into_drawing_area()),
        "svg" => f.draw(SVGBackend::new(path, SIZE).into_drawing_area()),
        _ => bail!("{}: plots are .png or .svg", path.display()),
    };
    r.with_context(|| format!("drawing {}", path.display()))
}

/// The ranges a figure's axes span: x from the frame or the data, y from 0 to 5% above
/// the highest point.
pub fn ranges(series: &[(String, Vec<(f64, f64)>)], frame: &Frame) -> ((f64, f64), f64) {
    let finite = |p: &&(f64, f64)| p.0.is_finite() && p.1.is_finite();
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0f64);
    for &(x, y) in series.iter().flat_map(|s| s.1.iter().filter(finite)) {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if let Some((a, b)) = frame.x_range {
        (x0, x1) = (a, b);
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
    ((x0, x1), y1 * 1.05)
}

/// The pieces of series `name` drawn as lines: split where the frame says a line must
/// break.
pub fn line_pieces(name: &str, data: &[(f64, f64)], frame: &Frame) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut last: Option<f64> = None;
    for &(x, y) in data {
        if !(x.is_finite() && y.is_finite()) {
            continue;
        }
        match last {
            Some(a) if !frame.breaks(name, a, x) => out.last_mut().expect("a piece").push((x, y)),
            _ => out.push(vec![(x, y)]),
        }
        last = Some(x);
    }
    out
}

/// Width of the legend panel on the right for these labels, pixels: the legend never sits
/// on the data.
fn legend_width(labels: &[&str]) -> u32 {
    let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0) as u32;
    (longest * 8 + 44).clamp(120, 380)
}

struct Figure<'a> {
    title: &'a str,
    x_label: &'a str,
    y_label: &'a str,
    series: &'a [(String, Vec<(f64, f64)>)],
    style: Style,
    frame: &'a Frame,
}

const BAND: RGBColor = RGBColor(250, 200, 200);

impl Figure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, plotters::coord::Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let e = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("{e}");
        root.fill(&WHITE).map_err(e)?;
        let mut labels: Vec<&str> = self.series.iter().map(|s| s.0.as_str()).collect();
        let shaded = !self.frame.bands.is_empty();
        if shaded {
            labels.push(&self.frame.band_label);
        }
        let (w, _) = root.dim_in_pixel();
        let (plot, legend) = root.split_horizontally(w.saturating_sub(legend_width(&labels)));
        let ((x0, x1), y1) = ranges(self.series, self.frame);
        let mut c = ChartBuilder::on(&plot)
            .caption(self.title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(64)
            .build_cartesian_2d(x0..x1, 0f64..y1)
            .map_err(e)?;
        c.configure_mesh()
            .x_desc(self.x_label)
            .y_desc(self.y_label)
            .label_style(("sans-serif", 14))
            .draw()
            .map_err(e)?;
        c.draw_series(self.frame.bands.iter().filter_map(|&(a, b)| {
            let (a, b) = (a.max(x0), b.min(x1));
            (a < b).then(|| Rectangle::new([(a, 0.0), (b, y1)], BAND.mix(0.6).filled()))
        }))
        .map_err(e)?;
        for (i, (name, data)) in self.series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            match self.style {
                Style::Lines => {
                    for piece in line_pieces(name, data, self.frame) {
                        if let [p] = piece[..] {
                            // A lone value between breaks: a dot, or it would not show.
                            c.draw_series(std::iter::once(Circle::new(p, 2, color.filled())))
                                .map_err(e)?;
                        } else {
                            c.draw_series(LineSeries::new(piece, color.stroke_width(2)))
                                .map_err(e)?;
                        }
                    }
                }
                Style::Points => {
                    c.draw_series(
                        data.iter()
                            .filter(|p| p.0.is_finite() && p.1.is_finite())
                            .map(|&p| Circle::new(p, 2, color.filled())),
                    )
                    .map_err(e)?;
                }
            }
        }
        // The legend, in its own panel: a marker and the name of each series, then the bands.
        let font = ("sans-serif", 14).into_font().color(&BLACK);
        for (i, name) in labels.iter().enumerate() {
            let y = 52 + 22 * i as i32;
            if i < self.series.len() {
                let color = Palette99::pick(i).to_rgba();
                match self.style {
                    Style::Lines => legend
                        .draw(&PathElement::new(
                            vec![(6, y), (26, y)],
                            color.stroke_width(3),
                        ))
                        .map_err(e)?,
                    Style::Points => legend
                        .draw(&Circle::new((16, y), 4, color.filled()))
                        .map_err(e)?,
                }
            } else {
                legend
                    .draw(&Rectangle::new(
                        [(6, y - 6), (26, y + 6)],
                        BAND.mix(0.6).filled(),
                    ))
                    .map_err(e)?;
            }
            legend.draw_text(name, &font, (34, y - 8)).map_err(e)?;
        }
        root.present().map_err(e)?;
        Ok(())
    }
}

/// A subflow's name in a legend: its path (the stem of the capture it was read from, when
/// there are several, e.g. `trusted` or `untrusted`) and its client address, with the
/// server's when the subflows do not all go to the same one.
pub fn sub_name(r: &TraceReport, c: &Connection, i: usize, d: usize) -> String {
    let s = &c.subflows[i];
    let one_server = c.subflows.iter().all(|x| x.dst == s.dst);
    let (a, b) = if d == 0 {
        (&s.src, &s.dst)
    } else {
        (&s.dst, &s.src)
    };
    let ends = if one_server {
        s.src.clone()
    } else {
        format!("{a} > {b}")
    };
    let path = if r.captures.len() > 1 {
        r.captures
            .get(s.capture)
            .and_then(|c| Path::new(&c.path).file_stem())
            .map(|p| format!("{} ", p.to_string_lossy()))
            .unwrap_or_default()
    } else {
        String::new()
    };
    format!("#{i} {path}{ends}")
}

/// Binned values `(bin start, v)` as the steps they are: each value held over its bin.
pub fn steps(series: &[(f64, f64)], bin: f64) -> Vec<(f64, f64)> {
    series
        .iter()
        .flat_map(|&(t, v)| [(t, v), (t + bin, v)])
        .collect()
}

/// The directions (0: c2s, 1: s2c) worth a figure: those that carried at least 1% of the
/// busier one's payload (the ACK-only way of a transfer would only add flat lines).
fn busy_directions(c: &Connection) -> Vec<usize> {
    let most = c.payload_bytes.c2s.max(c.payload_bytes.s2c);
    (0..2)
        .filter(|&d| *c.payload_bytes.get(d) > 0 && *c.payload_bytes.get(d) * 100 >= most)
        .collect()
}

/// One figure of a connection: (file stem, title, y label, series, style).
pub type ConnFigure = (
    String,
    String,
    &'static str,
    Vec<(String, Vec<(f64, f64)>)>,
    Style,
);

/// The figures of connection `ci` of `r`, and the frame they share: the whole capture's
/// time, the outages of its subflows and of the connection shaded.
pub fn figures(r: &TraceReport, ci: usize) -> (Vec<ConnFigure>, Frame) {
    let c = &r.connections[ci];
    let mut out = Vec::new();
    let what = if c.mptcp {
        "MPTCP connection"
    } else {
        "TCP connection"
    };
    let dn = |d: usize| if d == 0 { "c2s" } else { "s2c" };
    let mut tput = Vec::new();
    let mut rtt = Vec::new();
    let dirs = busy_directions(c);
    for &d in &dirs {
        for (i, s) in c.subflows.iter().enumerate() {
            if *s.payload_bytes.get(d) > 0 {
                tput.push((
                    format!("{} {}", sub_name(r, c, i, d), dn(d)),
                    steps(s.throughput.get(d), r.bin),
                ));
            }
            if !s.rtt_samples.get(d).is_empty() {
                rtt.push((
                    format!("{} {}", sub_name(r, c, i, d), dn(d)),
                    s.rtt_samples.get(d).clone(),
                ));
            }
        }
        if c.subflows.len() > 1 {
            tput.push((
                format!("aggregate {}", dn(d)),
                steps(c.throughput.get(d), r.bin),
            ));
        }
    }
    let bin = crate::trace::bin_label(r.bin);
    out.push((
        format!("conn{ci}-throughput"),
        format!("{what} {ci}: throughput per subflow ({bin} bins)"),
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
        for &d in &dirs {
            for (i, pts) in data.get(d).points.iter().enumerate() {
                if !pts.is_empty() {
                    let mb = pts.iter().map(|&(t, v)| (t, v / 1e6)).collect();
                    seq.push((format!("{} {}", sub_name(r, c, i, d), dn(d)), mb));
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
    // Outages of the connection, and of its subflows in the directions drawn; one still
    // open on a subflow that closed ends with the subflow.
    let open_to = |end: Option<f64>, until: f64| end.unwrap_or(until);
    let mut bands: Vec<(f64, f64)> = c
        .outages
        .iter()
        .map(|o| (o.start, open_to(o.end, r.duration)))
        .collect();
    for s in &c.subflows {
        let until = if s.fin || s.rst { s.end } else { r.duration };
        for o in &s.outages {
            let d = usize::from(o.direction != "c2s");
            if dirs.contains(&d) {
                bands.push((o.start, open_to(o.end, until)));
            }
        }
    }
    let frame = Frame {
        x_range: Some((0.0, r.duration.max(r.bin))),
        bands,
        band_label: "outage (silent, data outstanding)".into(),
        break_series: Vec::new(),
        max_gap: None,
    };
    (out, frame)
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
        let (figs, frame) = figures(report, ci);
        for (stem, title, ylabel, series, style) in figs {
            for ext in ["png", "svg"] {
                let p = dir.join(format!("{stem}.{ext}"));
                chart(&title, "time (s)", ylabel, &series, style, &frame, &p)?;
                files.push(p);
            }
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::craft;
    use crate::trace::{analyze_bytes, CaptureInfo, DataDir, Outage, PerDir, TraceOptions};

    #[test]
    fn lines_break_across_bands_only_when_asked_and_the_frame_sets_the_x_range() {
        let data: Vec<(f64, f64)> = (0..6).map(|i| (i as f64, 10.0)).collect();
        let mut f = Frame {
            bands: vec![(2.5, 3.5)],
            ..Frame::default()
        };
        assert_eq!(line_pieces("a", &data, &f).len(), 1);
        f.break_series = vec!["a".into()];
        assert_eq!(line_pieces("b", &data, &f).len(), 1, "b's path stayed up");
        let pieces = line_pieces("a", &data, &f);
        let xs: Vec<Vec<f64>> = pieces
            .iter()
            .map(|p| p.iter().map(|q| q.0).collect())
            .collect();
        assert_eq!(xs, [vec![0.0, 1.0, 2.0], vec![3.0], vec![4.0, 5.0]]);
        // A gap in the samples breaks it too.
        f.bands.clear();
        f.max_gap = Some(1.5);
        let gappy = [(0.0, 1.0), (1.0, 1.0), (4.0, 1.0), (5.0, 1.0)];
        assert_eq!(line_pieces("a", &gappy, &f).len(), 2);
        assert_eq!(line_pieces("b", &gappy, &f).len(), 1);
        let series = vec![("a".to_string(), vec![(0.2, 1.0), (1.5, 4.0)])];
        assert_eq!(ranges(&series, &Frame::default()), ((0.2, 1.5), 4.2));
        f.x_range = Some((0.0, 1.8));
        assert_eq!(ranges(&series, &f).0, (0.0, 1.8));
        assert_eq!(
            steps(&[(0.0, 1.0), (0.5, 2.0)], 0.5),
            [(0.0, 1.0), (0.5, 1.0), (0.5, 2.0), (1.0, 2.0)]
        );
    }

    #[test]
    fn figures_span_the_capture_name_paths_shade_outages_and_skip_idle_directions() {
        let (c, s) = crate::trace::fixtures::addrs();
        let pcap = craft::connection(c, s, &vec![7u8; 10_000], 1000);
        let mut r = analyze_bytes(&pcap, &TraceOptions::default()).unwrap();
        // Auto bins: 23 ms of capture in 10 ms bins, the last one drawn to its end.
        assert!(r.bin_auto && (r.bin - 0.01).abs() < 1e-12, "{}", r.bin);
        // Two captures, as `nena lab run` makes (one per link): names carry the path.
        let info = |p: &str| CaptureInfo {
            path: p.into(),
            format: "pcap",
            frames: 0,
            tcp_segments: 0,
            duplicate_segments: 0,
        };
        r.captures = vec![info("/x/trusted.pcap"), info("/x/untrusted.pcap")];
        let conn = &mut r.connections[0];
        conn.subflows[0].outages.push(Outage {
            direction: "c2s",
            start: 0.005,
            end: None,
            duration: None,
            threshold: 0.004,
            recovery: None,
        });
        // An outage of the direction not drawn is not shaded.
        conn.subflows[0].outages.push(Outage {
            direction: "s2c",
            start: 0.001,
            end: Some(0.004),
            duration: Some(0.003),
            threshold: 0.001,
            recovery: None,
        });
        // Some data both ways at the data level, the s2c way a trickle (under 1%).
        conn.payload_bytes.s2c = 20;
        conn.data = Some(PerDir {
            c2s: DataDir {
                points: vec![vec![(0.004, 0.0), (0.01, 5000.0)]],
                ..DataDir::default()
            },
            s2c: DataDir {
                points: vec![vec![(0.004, 0.0)]],
                ..DataDir::default()
            },
        });
        let (figs, frame) = figures(&r, 0);
        assert_eq!(frame.x_range, Some((0.0, r.duration)));
        // The open outage ends with the subflow (its FIN).
        let sf_end = r.connections[0].subflows[0].end;
        assert_eq!(frame.bands, [(0.005, sf_end)]);
        let names = |stem: &str| -> Vec<String> {
            figs.iter()
                .find(|f| f.0 == stem)
                .unwrap()
                .3
                .iter()
                .map(|s| s.0.clone())
                .collect()
        };
        // One server: the client's address names the subflow.
        let want = "#0 trusted 198.18.1.2:40000 c2s";
        assert_eq!(names("conn0-throughput"), [want]);
        assert_eq!(names("conn0-sequence"), [want]);
        // The throughput is drawn as steps up to the end of the last bin.
        let tput = &figs[0].3[0].1;
        let last = tput.last().unwrap().0;
        assert!(last >= r.duration && last < r.duration + r.bin, "{last}");
        // The bytes of the steps are the bytes captured.
        let bytes: f64 = tput
            .chunks(2)
            .map(|p| p[0].1 * (p[1].0 - p[0].0) * 1e6 / 8.0)
            .sum();
        assert!((bytes - 10_000.0).abs() < 1e-6, "{bytes}");
        // And the files come out (the PNG's signature, an SVG's root element).
        let dir = std::env::temp_dir().join(format!("nena-plot-test-{}", std::process::id()));
        let files = write_plots(&r, &dir).unwrap();
        assert_eq!(files.len(), 6, "{files:?}");
        let png = std::fs::read(dir.join("conn0-throughput.png")).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let svg = std::fs::read_to_string(dir.join("conn0-throughput.svg")).unwrap();
        assert!(
            svg.contains("<svg") && svg.contains("outage"),
            "no outage in the legend"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
