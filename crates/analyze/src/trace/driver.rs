//! The driver: captures in, report out. One reader thread per capture, a k-way merge by
//! time into one [`Tracer`]; or one capture given as bytes.

use super::report::{CaptureInfo, TraceOptions, TraceReport};
use super::tracer::Tracer;
use crate::capture;
use crate::packet::{self, Segment};
use anyhow::{anyhow, bail, Context, Result};
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver};
use std::time::Duration;

enum Msg {
    Seg(Duration, Box<Segment>),
    End(Result<(capture::ReadEnd, u64, u64)>),
}

fn reader(path: PathBuf) -> Receiver<Msg> {
    let (tx, rx) = sync_channel::<Msg>(4096);
    std::thread::spawn(move || {
        let r = (|| -> Result<(capture::ReadEnd, u64, u64)> {
            let f = std::fs::File::open(&path).context("cannot open it")?;
            let (mut frames, mut tcp) = (0u64, 0u64);
            let end = capture::read_frames(f, |frame| {
                frames += 1;
                if let Ok(mut seg) = packet::parse_frame(frame.linktype, frame.data, frame.orig_len)
                {
                    tcp += 1;
                    seg.payload = Vec::new(); // only its length is needed
                    let _ = tx.send(Msg::Seg(frame.ts, Box::new(seg)));
                }
            })?;
            Ok((end, frames, tcp))
        })();
        let _ = tx.send(Msg::End(r));
    });
    rx
}

/// Analyse captures (pcap or pcapng), merged by time into one view: a subflow seen in
/// several captures (e.g. on the client's link and on the server's) is read from the first
/// capture that shows it. A capture that cannot be read, or is damaged or cut off, is an
/// error naming it.
pub fn analyze_captures(paths: &[PathBuf], opts: &TraceOptions) -> Result<TraceReport> {
    if paths.is_empty() {
        bail!("no capture given");
    }
    if opts.bin.is_some_and(|b| b.is_zero()) {
        bail!("the bin width must be positive");
    }
    for p in paths {
        if !p.is_file() {
            bail!("no such capture file: {}", p.display());
        }
    }
    let rxs: Vec<Receiver<Msg>> = paths.iter().map(|p| reader(p.clone())).collect();
    let mut heads: Vec<Option<(Duration, Box<Segment>)>> = vec![None; paths.len()];
    let mut ends: Vec<Option<(capture::ReadEnd, u64, u64)>> = vec![None; paths.len()];
    let mut dups = vec![0u64; paths.len()];
    let mut tracer = Tracer::new(*opts);
    let mut fail: Option<anyhow::Error> = None;
    let pull = |i: usize,
                heads: &mut Vec<Option<(Duration, Box<Segment>)>>,
                ends: &mut Vec<Option<(capture::ReadEnd, u64, u64)>>|
     -> Result<()> {
        if heads[i].is_some() || ends[i].is_some() {
            return Ok(());
        }
        match rxs[i].recv() {
            Ok(Msg::Seg(ts, s)) => heads[i] = Some((ts, s)),
            Ok(Msg::End(Ok(e))) => ends[i] = Some(e),
            Ok(Msg::End(Err(e))) => return Err(e.context(paths[i].display().to_string())),
            Err(_) => return Err(anyhow!("{}: the reader stopped", paths[i].display())),
        }
        Ok(())
    };
    loop {
        for i in 0..paths.len() {
            if let Err(e) = pull(i, &mut heads, &mut ends) {
                fail = Some(e);
                break;
            }
        }
        if fail.is_some() {
            break;
        }
        let next = heads
            .iter()
            .enumerate()
            .filter_map(|(i, h)| h.as_ref().map(|h| (h.0, i)))
            .min();
        let Some((_, i)) = next else { break };
        let (ts, seg) = heads[i].take().expect("a head");
        if tracer.owner(&seg).is_some_and(|o| o != i) {
            dups[i] += 1;
        }
        tracer.segment(i, ts, &seg);
    }
    if let Some(e) = fail {
        // Dropping the receivers stops the other readers.
        return Err(e);
    }
    let mut captures = Vec::new();
    for (i, e) in ends.into_iter().enumerate() {
        let (end, frames, tcp) = e.expect("every reader ended");
        if let Some(w) = end.warning {
            bail!("{}: {w}", paths[i].display());
        }
        captures.push(CaptureInfo {
            path: paths[i].display().to_string(),
            format: end.format,
            frames,
            tcp_segments: tcp,
            duplicate_segments: dups[i],
        });
    }
    let mut warnings = Vec::new();
    if captures.iter().all(|c| c.tcp_segments == 0) {
        warnings.push("no TCP segment in the captures".to_string());
    }
    Ok(tracer.finish(captures, warnings))
}

/// Analyse one capture given as bytes (for tests and fuzzing).
pub fn analyze_bytes(data: &[u8], opts: &TraceOptions) -> Result<TraceReport> {
    let mut tracer = Tracer::new(*opts);
    let (mut frames, mut tcp) = (0u64, 0u64);
    let end = capture::read_frames(data, |frame| {
        frames += 1;
        if let Ok(seg) = packet::parse_frame(frame.linktype, frame.data, frame.orig_len) {
            tcp += 1;
            tracer.segment(0, frame.ts, &seg);
        }
    })?;
    if let Some(w) = end.warning {
        bail!("{w}");
    }
    Ok(tracer.finish(
        vec![CaptureInfo {
            path: "-".into(),
            format: end.format,
            frames,
            tcp_segments: tcp,
            duplicate_segments: 0,
        }],
        Vec::new(),
    ))
}

#[cfg(test)]
mod tests {
    use crate::craft;
    use crate::trace::fixtures::addrs;
    use crate::trace::{analyze_bytes, analyze_captures, TraceOptions};

    #[test]
    fn hostile_captures_are_one_error_each() {
        let (c, s) = addrs();
        let good = craft::connection(c, s, &[1u8; 3000], 1000);
        let cut = &good[..good.len() - 7];
        let mut bad_len = good.clone();
        bad_len[24 + 8..24 + 12].copy_from_slice(&0x7fff_ffffu32.to_le_bytes()); // incl_len
        for (name, bytes) in [
            ("empty", &[][..]),
            ("garbage", &b"this is not a capture at all"[..]),
            ("cut", cut),
            ("bad length", &bad_len[..]),
        ] {
            let e = analyze_bytes(bytes, &TraceOptions::default())
                .expect_err(name)
                .to_string();
            assert!(!e.is_empty() && !e.contains('\n'), "{name}: {e}");
        }
        assert!(analyze_bytes(&good, &TraceOptions::default()).is_ok());
        assert!(analyze_captures(&[], &TraceOptions::default()).is_err());
        let e = analyze_captures(&["/nonexistent/x.pcap".into()], &TraceOptions::default())
            .unwrap_err();
        assert!(e.to_string().contains("no such capture"), "{e}");
    }
}
