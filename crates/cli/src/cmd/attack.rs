//! `nena attack`: the attacks on the papers' scrambling (mode `kato`) run on a capture of one
//! path, as an eavesdropper would: with cribs, cribs dragged over every run of the data
//! stream, each match extended through its run; without, the first bytes of each direction
//! the capture holds, read with no known plaintext. The work is in `nena_analyze::attack`
//! and `nena_analyze::start`.
use crate::exit::{CmdResult, Exit};
use anyhow::{anyhow, Context};
use nena_analyze::attack::{self, AttackOptions, AttackResult, Method, MIN_CRIB};
use nena_analyze::datalevel;
use nena_analyze::start::{self, StartRecovery};
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
#[command(after_long_help = "\
RECOVERED receives the recovered plaintext: every contiguous range of it, in data-sequence \
order, client-to-server streams first, bytes back to back with nothing in between. --json \
gives each range's direction, data sequence number (DSN), length and offset in RECOVERED. \
Guessed ranges (--guess-zeros) are included and marked as guessed in the JSON.

Without --crib-file, the first bytes of every direction whose start the capture shows (the \
run right after nena's handshake message) are read with no known plaintext: kato's initial \
window is 56 zero bytes and the key, so 56 of every 65 bytes come back. They are printed \
beside the captured bytes and appended to RECOVERED (`from_start` in the JSON).")]
pub struct AttackArgs {
    /// The capture (pcap or pcapng) of one path, e.g. from `nena lab capture untrusted FILE`.
    pub capture: PathBuf,
    /// Known plaintext, one crib per line (at least 66 bytes each; the newline is not part
    /// of it; a line `hex:HEX...` is a crib of any bytes, newlines included). Any 65 known
    /// bytes in a run give away the whole run. Without it, the start of each direction the
    /// capture holds is read with no known plaintext.
    #[arg(long, value_name = "FILE")]
    pub crib_file: Option<PathBuf>,
    /// Where to write the recovered plaintext.
    #[arg(long, value_name = "RECOVERED")]
    pub out: PathBuf,
    /// Where no crib matched: guess that 81+ scrambled zero bytes in a row are plaintext
    /// zeros (padding, binaries) and extend the guess through the run. Guesses are
    /// unconfirmed and reported apart.
    #[arg(long)]
    pub guess_zeros: bool,
    /// One JSON object for machines instead of the report.
    #[arg(long)]
    pub json: bool,
}

fn read_cribs(path: &PathBuf) -> Result<Vec<(usize, Vec<u8>)>, Exit> {
    let raw = std::fs::read(path)
        .map_err(|e| Exit::usage(anyhow!("cannot read crib file {}: {e}", path.display())))?;
    let mut cribs: Vec<(usize, Vec<u8>)> = Vec::new();
    for (i, l) in raw.split(|&b| b == b'\n').enumerate() {
        let l = l.strip_suffix(b"\r").unwrap_or(l);
        if l.is_empty() {
            continue;
        }
        let crib = match l.strip_prefix(b"hex:") {
            Some(h) => unhex(h).ok_or_else(|| {
                Exit::usage(anyhow!(
                    "{} line {}: `hex:` must be followed by pairs of hex digits",
                    path.display(),
                    i + 1
                ))
            })?,
            None => l.to_vec(),
        };
        cribs.push((i + 1, crib));
    }
    if cribs.is_empty() {
        return Err(Exit::usage(anyhow!(
            "crib file {} holds no crib (one per line)",
            path.display()
        )));
    }
    Ok(cribs)
}

fn unhex(h: &[u8]) -> Option<Vec<u8>> {
    let h: Vec<u8> = h
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    if !h.len().is_multiple_of(2) {
        return None;
    }
    h.chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).ok()?, 16).ok())
        .collect()
}

pub fn attack(a: AttackArgs) -> CmdResult {
    if !a.capture.is_file() {
        return Err(Exit::usage(anyhow!(
            "no such capture file: {}",
            a.capture.display()
        )));
    }
    let cribs = match &a.crib_file {
        Some(p) => read_cribs(p)?,
        None => Vec::new(),
    };
    let file = std::fs::File::open(&a.capture)
        .map_err(|e| Exit::usage(anyhow!("cannot open {}: {e}", a.capture.display())))?;
    let progress = crate::cmd::spinner(!a.json, "reading the capture");
    let data = datalevel::data_streams(file)
        .with_context(|| format!("reading {}", a.capture.display()))
        .map_err(Exit::usage)?;
    if let Some(p) = &progress {
        p.set_message("dragging cribs");
    }
    let started = std::time::Instant::now();
    let mut result = attack::attack(
        &data,
        &cribs,
        AttackOptions {
            guess_zeros: a.guess_zeros,
        },
    );
    // No crib: what the start of each direction gives with no known plaintext.
    let mut starts = match a.crib_file {
        Some(_) => Vec::new(),
        None => start::from_starts(&data),
    };
    let seconds = started.elapsed().as_secs_f64();
    if let Some(p) = progress {
        p.finish_and_clear();
    }
    // RECOVERED: the chunks back to back, c2s streams first (the streams are in that order).
    let mut out = Vec::new();
    for s in &mut result.streams {
        for c in &mut s.chunks {
            c.offset = out.len() as u64;
            out.extend_from_slice(&c.bytes);
        }
    }
    for s in &mut starts {
        for c in &mut s.chunks {
            c.offset = out.len() as u64;
            out.extend_from_slice(&c.bytes);
        }
    }
    std::fs::write(&a.out, &out).with_context(|| format!("cannot write {}", a.out.display()))?;
    if a.json {
        let mut v = serde_json::to_value(&result).map_err(anyhow::Error::from)?;
        v["capture"] = serde_json::json!(a.capture.display().to_string());
        v["out"] = serde_json::json!(a.out.display().to_string());
        v["seconds"] = serde_json::json!(seconds);
        v["from_start"] = serde_json::to_value(&starts).map_err(anyhow::Error::from)?;
        v["unplaced"] = serde_json::to_value(&data.unplaced).map_err(anyhow::Error::from)?;
        v["warnings"] = serde_json::json!(data.warnings);
        println!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(anyhow::Error::from)?
        );
    } else {
        let stdout = std::io::stdout();
        let mut w = stdout.lock();
        report(&mut w, &a, &result, &data, &out, seconds).map_err(anyhow::Error::from)?;
        if a.crib_file.is_none() {
            report_starts(&mut w, &starts).map_err(anyhow::Error::from)?;
        }
    }
    Ok(())
}

fn pct(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        100.0 * a as f64 / b as f64
    }
}

fn report(
    w: &mut impl Write,
    a: &AttackArgs,
    r: &AttackResult,
    data: &datalevel::DataCapture,
    out: &[u8],
    seconds: f64,
) -> std::io::Result<()> {
    writeln!(
        w,
        "nena attack on {}: {} run(s) of contiguous data in {} stream(s), {} bytes seen; {} crib(s){}",
        a.capture.display(),
        r.runs,
        r.streams.len(),
        r.bytes_seen,
        r.cribs,
        if r.cribs_too_short > 0 {
            format!(
                " ({} shorter than {MIN_CRIB} bytes, not usable on their own)",
                r.cribs_too_short
            )
        } else {
            String::new()
        }
    )?;
    for s in &r.streams {
        let confirmed = s
            .runs
            .iter()
            .filter(|x| matches!(x.method, Some(Method::Crib { .. })))
            .count();
        let clear = s
            .runs
            .iter()
            .filter(|x| matches!(x.method, Some(Method::Clear { .. })))
            .count();
        let ambiguous = s.runs.iter().filter(|x| x.ambiguous).count();
        writeln!(
            w,
            "  {} {}: {} run(s), {} bytes seen; crib confirmed in {} run(s){}{}; recovered {} bytes ({:.1}%) + {} bytes that never crossed this path{}",
            s.connection,
            s.direction.short(),
            s.runs.len(),
            s.bytes_seen,
            confirmed,
            if clear > 0 { format!(", {clear} run(s) not scrambled at all (readable in clear)") } else { String::new() },
            if ambiguous > 0 { format!(", {ambiguous} run(s) ambiguous (cribs fit at places that disagree: not trusted)") } else { String::new() },
            s.bytes_recovered,
            pct(s.bytes_recovered, s.bytes_seen),
            s.bytes_recovered_off_link,
            if s.bytes_guessed > 0 { format!(", {} bytes guessed from zeros", s.bytes_guessed) } else { String::new() },
        )?;
    }
    for u in &data.unplaced {
        writeln!(
            w,
            "  {}: {} bytes not placed: {}",
            u.subflow, u.bytes, u.why
        )?;
    }
    if r.bytes_recovered == 0 && r.bytes_guessed == 0 {
        let st = &r.structure;
        writeln!(
            w,
            "{}: recovered 0 bytes{}",
            if a.crib_file.is_some() {
                "no crib confirmed in any run"
            } else {
                "no crib given: nothing from cribs"
            },
            if r.bytes_seen == 0 {
                " (no data stream in the capture)"
            } else {
                ""
            }
        )?;
        if r.bytes_seen > 0 {
            writeln!(
                w,
                "without cribs: {} (entropy of the bytes {:.2} bits/byte, of consecutive \
                 differences {:.2}; cipher output gives 8.00 in both)",
                st.verdict.explain(),
                st.entropy_bytes,
                st.entropy_differences
            )?;
        }
    } else {
        writeln!(
            w,
            "recovered {} of {} bytes seen ({:.1}%) plus {} bytes before the runs{}, in {:.2} s; written to {} ({} bytes)",
            r.bytes_recovered,
            r.bytes_seen,
            pct(r.bytes_recovered, r.bytes_seen),
            r.bytes_recovered_off_link,
            if r.bytes_guessed > 0 {
                format!("; {} bytes guessed from zeros ({:.1}%)", r.bytes_guessed, pct(r.bytes_guessed, r.bytes_seen))
            } else {
                String::new()
            },
            seconds,
            a.out.display(),
            out.len()
        )?;
        let preview: String = String::from_utf8_lossy(&out[..out.len().min(240)])
            .chars()
            .map(|c| if c.is_control() && c != '\n' { '.' } else { c })
            .collect();
        writeln!(w, "preview:")?;
        for line in preview.lines().take(4) {
            writeln!(w, "  | {line}")?;
        }
    }
    Ok(())
}

/// Captured bytes shown beside their recovery, per direction start.
const BESIDE_LINES: usize = 16;

/// The no-crib recovery of each direction start, the recovered text beside the captured
/// bytes (16 a line: hex, then the plaintext, `?` where unknown, `.` for a control byte).
fn report_starts(w: &mut impl Write, starts: &[StartRecovery]) -> std::io::Result<()> {
    if starts.is_empty() {
        return writeln!(
            w,
            "without a crib: no direction's first byte in this capture (none of its runs follows \
             a nena handshake message), so nothing read from a start"
        );
    }
    let (got, of) = starts
        .iter()
        .fold((0, 0), |(g, o), s| (g + s.recovered, o + s.len));
    writeln!(
        w,
        "without a crib, from the first byte of {} direction(s): recovered {got} of {of} bytes \
         (kato's initial window is 56 zero bytes and the key: 56 of every 65 bytes need no \
         known plaintext)",
        starts.len()
    )?;
    for s in starts {
        writeln!(
            w,
            "  {} {} from DSN {}: {} of {} bytes; captured | recovered",
            s.connection,
            s.direction.short(),
            s.dsn,
            s.recovered,
            s.len
        )?;
        for (line, (out, plain)) in s
            .scrambled
            .chunks(16)
            .zip(s.plain.chunks(16))
            .take(BESIDE_LINES)
            .enumerate()
        {
            let hex: Vec<String> = out.iter().map(|b| format!("{b:02x}")).collect();
            let text: String = plain
                .iter()
                .map(|p| match p {
                    None => '?',
                    Some(b) if b.is_ascii_graphic() || *b == b' ' => *b as char,
                    Some(_) => '.',
                })
                .collect();
            writeln!(w, "    {:5}  {:<47} | {text}", line * 16, hex.join(" "))?;
        }
    }
    Ok(())
}
