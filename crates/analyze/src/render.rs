//! Text rendering of an analysis: a header line per segment, its payload as text (printable
//! ASCII, everything else `.`) or as a `tshark -x` style hex dump, and the summary.

use crate::{Analysis, KnownReport, SegmentView};
use std::fmt::Write;

/// `#12  0.004213  198.18.2.2:40012 -> 198.18.3.2:5201  [P.]  seq=1449 ack=1 len=1448  MPTCP: DSS`
pub fn segment_header(s: &SegmentView) -> String {
    let mut h = format!(
        "#{:<5} {:>10.6}  {} -> {}  [{}]  seq={} ack={} len={}",
        s.frame,
        s.time,
        s.src,
        s.dst,
        s.flags.short(),
        s.seq,
        s.ack,
        s.len
    );
    if !s.mptcp.is_empty() {
        let names: Vec<&str> = s.mptcp.iter().map(|m| m.name()).collect();
        let _ = write!(h, "  MPTCP: {}", names.join(","));
    }
    if s.truncated {
        h.push_str("  (cut by snaplen)");
    }
    h
}

fn printable(b: u8) -> char {
    if (0x20..0x7f).contains(&b) {
        b as char
    } else {
        '.'
    }
}

/// The payload as text, `width` characters a line, each line indented by four spaces.
pub fn text_dump(payload: &[u8], width: usize) -> String {
    let width = width.max(1);
    let mut out = String::with_capacity(payload.len() + payload.len() / width * 5 + 5);
    for line in payload.chunks(width) {
        out.push_str("    ");
        out.extend(line.iter().map(|&b| printable(b)));
        out.push('\n');
    }
    out
}

/// The payload as `tshark -x` shows it: offset, 16 bytes in hex, the same bytes as text.
pub fn hex_dump(payload: &[u8]) -> String {
    let mut out = String::with_capacity(payload.len() * 5);
    for (i, line) in payload.chunks(16).enumerate() {
        let _ = write!(out, "    {:04x}  ", i * 16);
        for j in 0..16 {
            match line.get(j) {
                Some(b) => {
                    let _ = write!(out, "{b:02x} ");
                }
                None => out.push_str("   "),
            }
            if j == 7 {
                out.push(' ');
            }
        }
        out.push_str("  ");
        out.extend(line.iter().map(|&b| printable(b)));
        out.push('\n');
    }
    out
}

fn bytes(n: u64) -> String {
    match n {
        n if n >= 10 * 1024 * 1024 => format!("{n} bytes ({:.1} MiB)", n as f64 / 1048576.0),
        n if n >= 10 * 1024 => format!("{n} bytes ({:.1} KiB)", n as f64 / 1024.0),
        n => format!("{n} bytes"),
    }
}

/// The summary: counts, the flows (subflow directions), and the known-file verdict.
pub fn summary(a: &Analysis, known: Option<(&str, &KnownReport)>) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} frames ({}), {} TCP segments, {} carry payload: {}",
        a.frames,
        a.format,
        a.tcp_segments,
        a.segments,
        bytes(a.payload_bytes)
    );
    let s = &a.skipped;
    if s.not_ip + s.not_tcp + s.fragments + s.malformed > 0 {
        let _ = writeln!(
            o,
            "skipped frames: {} not IP, {} not TCP, {} IP fragments, {} malformed",
            s.not_ip, s.not_tcp, s.fragments, s.malformed
        );
    }
    if a.truncated_segments > 0 {
        let _ = writeln!(
            o,
            "{} segments were cut by the snapshot length",
            a.truncated_segments
        );
    }
    if !a.flows.is_empty() {
        let _ = writeln!(o, "flows (one line per direction of each TCP subflow):");
    }
    for f in &a.flows {
        let _ = write!(
            o,
            "  {:<45} {:>7} segments {:>7} with payload  {}",
            f.label,
            f.segments,
            f.payload_segments,
            bytes(f.payload_bytes)
        );
        if f.duplicate_bytes > 0 || f.gaps > 0 {
            let _ = write!(
                o,
                "  ({} retransmitted, {} holes)",
                f.duplicate_bytes, f.gaps
            );
        }
        if !f.mptcp.is_empty() {
            let names: Vec<&str> = f.mptcp.iter().map(|m| m.name()).collect();
            let _ = write!(o, "  MPTCP: {}", names.join(","));
        }
        if !f.mptcp_keys.is_empty() {
            let _ = write!(o, "  keys in clear: {}", f.mptcp_keys.join(","));
        }
        o.push('\n');
    }
    for w in &a.warnings {
        let _ = writeln!(o, "warning: {w}");
    }
    if let Some((name, k)) = known {
        if k.runs_checked == 0 {
            let _ = writeln!(
                o,
                "known file {name}: {}; shorter than 16 bytes, no run to check",
                bytes(k.file_bytes)
            );
        } else if k.leak() {
            let _ = writeln!(
                o,
                "LEAK: {} of {} runs of the known file appear ({:.1}%; {} of its bytes covered, {} stretches) [{name}]",
                k.runs_found,
                k.runs_checked,
                100.0 * k.runs_found as f64 / k.runs_checked as f64,
                k.bytes_covered,
                k.stretches
            );
            for m in &k.first_matches {
                let _ = writeln!(
                    o,
                    "  known[{}..{}] seen in {} at stream offset {}",
                    m.known_offset,
                    m.known_offset + m.length,
                    m.flow.as_deref().unwrap_or("?"),
                    m.stream_offset
                        .map(|x| x.to_string())
                        .unwrap_or_else(|| "?".into())
                );
            }
        } else {
            let _ = writeln!(
                o,
                "no 16-byte run of the known file appears ({} runs checked) [{name}]",
                k.runs_checked
            );
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dumps_like_the_figures() {
        assert_eq!(text_dump(b"0123\x00\xffab", 4), "    0123\n    ..ab\n");
        let h = hex_dump(b"0123456789012345678");
        let lines: Vec<&str> = h.lines().collect();
        assert_eq!(
            lines[0],
            "    0000  30 31 32 33 34 35 36 37  38 39 30 31 32 33 34 35   0123456789012345"
        );
        assert!(lines[1].starts_with("    0010  36 37 38 "));
        assert!(lines[1].ends_with("  678"));
        assert_eq!(text_dump(b"", 64), "");
    }
}
