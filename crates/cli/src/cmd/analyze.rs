//! `nena analyze`: tcptrace/mptcptrace over one or more captures (per connection its
//! subflows, bytes, throughput and RTT over time, reinjections, outages), as a table, JSON,
//! or plots. The work is in `nena_analyze::trace` and `nena_analyze::plot`.
use crate::exit::{CmdResult, Exit};
use nena_analyze::trace::{analyze_captures, RttStats, TraceOptions, TraceReport};
use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct AnalyzeArgs {
    /// Captures (pcap or pcapng), e.g. one per link from `nena lab capture`; merged by time.
    #[arg(required = true, value_name = "CAPTURE")]
    pub captures: Vec<PathBuf>,
    /// Machine-readable output (the whole report).
    #[arg(long)]
    pub json: bool,
    /// Write PNG and SVG figures (throughput, RTT, DSN sequence graph) into DIR.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Width of the throughput and RTT series bins (e.g. 1s, 250ms). Default: from the
    /// captures' length, at most 60 bins (a 2 s capture: 50ms; 30 s: 500ms; 10 min: 10s).
    #[arg(long, value_parser = parse_duration)]
    pub bin: Option<Duration>,
    /// An outage is a silence of more than N smoothed RTTs (and at least --min-outage)
    /// while data is outstanding.
    #[arg(long, value_name = "N", default_value_t = 4.0)]
    pub outage_rtts: f64,
    /// The shortest silence counted as an outage.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    pub min_outage: Duration,
}

/// `1s`, `250ms`, `0.5s`, `100us`: a positive duration.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("not a duration: {s:?} (e.g. 1s, 250ms)"))?;
    let scale = match unit {
        "s" => 1.0,
        "ms" => 1e-3,
        "us" => 1e-6,
        "m" | "min" => 60.0,
        _ => return Err(format!("unknown unit {unit:?} in {s:?} (s, ms, us, min)")),
    };
    let secs = v * scale;
    if !secs.is_finite() || secs <= 0.0 || secs > 86_400.0 {
        return Err(format!("{s:?} is not a positive duration up to a day"));
    }
    Ok(Duration::from_secs_f64(secs))
}

pub fn analyze(a: AnalyzeArgs) -> CmdResult {
    if !(a.outage_rtts.is_finite() && a.outage_rtts > 0.0) {
        return Err(Exit::usage(anyhow::anyhow!(
            "--outage-rtts must be a positive number"
        )));
    }
    let opts = TraceOptions {
        bin: a.bin,
        outage_rtts: a.outage_rtts,
        min_outage: a.min_outage,
    };
    // Unreadable, damaged or foreign files are errors of the operation: status 1.
    let report = analyze_captures(&a.captures, &opts)?;
    let mut plots = Vec::new();
    if let Some(dir) = &a.plot {
        plots = nena_analyze::plot::write_plots(&report, dir)?;
    }
    let text = if a.json {
        let mut v = serde_json::to_value(&report).map_err(anyhow::Error::from)?;
        v["plots"] = serde_json::json!(plots
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>());
        serde_json::to_string_pretty(&v).map_err(anyhow::Error::from)? + "\n"
    } else {
        let mut t = table(&report);
        for p in &plots {
            let _ = writeln!(t, "wrote {}", p.display());
        }
        t
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.map_err(|e| anyhow::Error::from(e).context("writing the output").into()),
    }
}

fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.2}"))
}

fn rtt_cell(r: &RttStats) -> String {
    if r.samples == 0 {
        return "-".into();
    }
    format!("{} ({}) n={}", ms(r.median_ms), ms(r.sigma_ms), r.samples)
}

fn mbit(bytes: u64, secs: f64) -> String {
    if secs <= 0.0 {
        return "-".into();
    }
    format!("{:.2}", bytes as f64 * 8.0 / secs / 1e6)
}

/// The report for people: one block per connection, one line per subflow and direction.
pub fn table(r: &TraceReport) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{} capture(s), {:.3} s, {} connection(s); series in {} bins{}",
        r.captures.len(),
        r.duration,
        r.connections.len(),
        nena_analyze::trace::bin_label(r.bin),
        if r.bin_auto {
            " (chosen from the length; --bin sets them)"
        } else {
            ""
        }
    );
    for c in &r.captures {
        let _ = writeln!(
            t,
            "  {} ({}): {} frames, {} TCP segments{}",
            c.path,
            c.format,
            c.frames,
            c.tcp_segments,
            if c.duplicate_segments > 0 {
                format!(
                    ", {} already seen in an earlier capture",
                    c.duplicate_segments
                )
            } else {
                String::new()
            }
        );
    }
    for w in &r.warnings {
        let _ = writeln!(t, "warning: {w}");
    }
    for (ci, c) in r.connections.iter().enumerate() {
        let _ = writeln!(t);
        let _ = writeln!(
            t,
            "connection {ci}: {}{}, {:.3}-{:.3} s, {} subflow(s), c2s {} B, s2c {} B",
            if c.mptcp { "MPTCP" } else { "TCP" },
            c.token
                .as_ref()
                .map(|k| format!(" token {k}"))
                .unwrap_or_default(),
            c.start,
            c.end,
            c.subflows.len(),
            c.payload_bytes.c2s,
            c.payload_bytes.s2c
        );
        let _ = writeln!(
            t,
            "  {:<3} {:<44} {:<4} {:>7} {:>7} {:>12} {:>10} {:>8} {:>22} {:>22}",
            "#",
            "subflow",
            "dir",
            "start",
            "end",
            "payload B",
            "retrans B",
            "Mbit/s",
            "RTT ack ms med (sd)",
            "RTT ts ms med (sd)"
        );
        for (i, s) in c.subflows.iter().enumerate() {
            let flags = format!(
                "{}{}",
                if s.join { " join" } else { "" },
                if s.backup { " backup" } else { "" }
            );
            for d in 0..2 {
                let (dn, a, b) = if d == 0 {
                    ("c2s", &s.src, &s.dst)
                } else {
                    ("s2c", &s.dst, &s.src)
                };
                let label = format!("{a} > {b}{flags}");
                let _ = writeln!(
                    t,
                    "  {:<3} {:<44} {:<4} {:>7.3} {:>7.3} {:>12} {:>10} {:>8} {:>22} {:>22}",
                    i,
                    label,
                    dn,
                    s.start,
                    s.end,
                    s.payload_bytes.get(d),
                    s.retransmitted_bytes.get(d),
                    mbit(*s.payload_bytes.get(d), s.end - s.start),
                    rtt_cell(s.rtt.get(d)),
                    rtt_cell(s.rtt_ts.get(d))
                );
            }
            for o in &s.outages {
                let _ = writeln!(t, "      outage {}", outage(o));
            }
        }
        if let Some(data) = &c.data {
            for d in 0..2 {
                let dd = data.get(d);
                if dd.bytes_covered == 0 && dd.unmapped_bytes == 0 {
                    continue;
                }
                let _ = writeln!(
                    t,
                    "  data {}: {} B of DSN span {} B seen ({} holes), data-acked {}, reinjected {} B in {} run(s){}",
                    if d == 0 { "c2s" } else { "s2c" },
                    dd.bytes_covered,
                    dd.span,
                    dd.holes,
                    dd.data_acked.map_or("-".into(), |x| format!("{x} B")),
                    dd.reinjected_bytes,
                    dd.reinjections.len(),
                    if dd.unmapped_bytes > 0 {
                        format!(", {} B without a mapping", dd.unmapped_bytes)
                    } else {
                        String::new()
                    }
                );
            }
        }
        for o in &c.outages {
            let _ = writeln!(t, "  connection outage {}", outage(o));
        }
    }
    t
}

fn outage(o: &nena_analyze::trace::Outage) -> String {
    format!(
        "{} from {:.3} s, {}, recovery {}",
        o.direction,
        o.start,
        o.duration
            .map_or("not over at the end of the capture".into(), |d| format!(
                "{d:.3} s long"
            )),
        o.recovery.map_or("-".into(), |r| format!("{r:.3} s"))
    )
}
