//! `nena lab capture LINK` and `nena lab capture-stop`: tcpdump on a link, in the
//! foreground or in the background, and stopping background captures.
use super::args::{parse_link, Common};
use crate::exit::{CmdResult, Exit};
use clap::Args;
use nena_lab::{CaptureOptions, Lab, Link};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct CaptureArgs {
    #[command(flatten)]
    pub common: Common,
    /// trusted, untrusted, server, or lan (a lab built with `--lan`).
    #[arg(value_parser = parse_link)]
    pub link: Link,
    /// The pcap file to write.
    pub file: PathBuf,
    /// Stop after this many packets.
    #[arg(long)]
    pub count: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Only packets matching this tcpdump filter (e.g. "tcp").
    #[arg(long)]
    pub filter: Option<String>,
    /// Bytes to keep of each packet (default: all).
    #[arg(long)]
    pub snaplen: Option<u32>,
    /// Return at once and leave the capture running; stop it with `nena lab capture-stop`
    /// (or `nena lab down`). Prints tcpdump's pid.
    #[arg(long, conflicts_with = "seconds")]
    pub background: bool,
}

#[derive(Args, Debug)]
pub struct CaptureStopArgs {
    #[command(flatten)]
    pub common: Common,
    /// Only captures of this link.
    #[arg(value_parser = parse_link)]
    pub link: Option<Link>,
}

pub(super) fn capture(a: CaptureArgs) -> CmdResult {
    if let Some(s) = a.seconds {
        if !(s.is_finite() && s > 0.0) {
            return Err(Exit::usage(anyhow::anyhow!(
                "--seconds must be a positive number"
            )));
        }
    }
    if a.count == Some(0) {
        return Err(Exit::usage(anyhow::anyhow!("--count must be at least 1")));
    }
    let lab = Lab::open(&a.common.prefix)?;
    let opts = CaptureOptions {
        count: a.count,
        snaplen: a.snaplen,
        filter: a.filter.clone(),
    };
    let cap = lab.capture_with(a.link, &a.file, &opts)?;
    if a.background {
        let file = cap.file().display().to_string();
        let pid = cap.detach();
        println!("{pid}");
        eprintln!("capturing the {} link to {file} in the background (tcpdump pid {pid}); stop with `nena lab capture-stop`", a.link);
        return Ok(());
    }
    eprintln!(
        "capturing the {} link to {} (Ctrl-C to stop)",
        a.link,
        cap.file().display()
    );
    let file = cap.file().to_path_buf();
    let stats = cap.run_until_interrupted(a.seconds.map(Duration::from_secs_f64))?;
    eprintln!(
        "{} packets captured{} -> {}",
        stats
            .captured
            .map(|n| n.to_string())
            .unwrap_or_else(|| "?".into()),
        match stats.dropped_by_kernel {
            Some(d) if d > 0 => format!(" ({d} dropped by the kernel)"),
            _ => String::new(),
        },
        file.display()
    );
    Ok(())
}

/// Stop the background captures (of one link, or all) and say what each captured.
pub(super) fn stop(a: CaptureStopArgs) -> CmdResult {
    let lab = Lab::open(&a.common.prefix)?;
    let stopped = lab.stop_captures(a.link)?;
    for (r, st) in &stopped {
        println!(
            "stopped capture {} of the {} link: {} ({} packets{})",
            r.pid,
            r.link,
            r.file.display(),
            st.captured
                .map(|n| n.to_string())
                .unwrap_or_else(|| "?".into()),
            match st.dropped_by_kernel {
                Some(d) if d > 0 => format!(", {d} DROPPED by the kernel"),
                _ => String::new(),
            }
        );
    }
    if stopped.is_empty() {
        println!("no capture was running");
    }
    Ok(())
}
