//! `nena bench sessions-worker`: one client process of `nena bench sessions` against `nena
//! serve`. Started by the bench in the lab's client host (a process holds only as many
//! sessions as its descriptor limit lets it: the load is spread over several), it runs the
//! library's client as `nena perf` does, and is steered over its standard input and output:
//!
//! 1. It makes one whole perf session (warm: runtime, allocator, ticket jar) and says
//!    [`Said::Ready`].
//! 2. On `open`: its `sessions` perf sessions, at most `opening` at a time, each `payload`
//!    bytes each way checked against the pattern and held before its end marker
//!    ([`Held`]); then [`Said::Opened`].
//! 3. On `close`: every held session sends its end marker, both verdicts are exchanged, and
//!    the server must close with nothing more; then [`Said::Closed`].
//! 4. It exits at the end of its input (the bench gone: its sessions go with it).

use super::measured::{gather, verify_closings};
use anyhow::{anyhow, bail, Context, Result};
use nena_proto::Mode;
use nena_transport::app::perf::Held;
use nena_transport::conn::{self, ClientConn, ClientOptions};
use nena_transport::wire::{PerfRequest, Request};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;

/// What the bench tells a worker on its command line.
#[derive(Debug, Clone)]
pub struct WorkerSpec {
    /// `nena serve`'s address.
    pub to: SocketAddr,
    pub mode: Mode,
    pub sessions: usize,
    pub payload: usize,
    pub opening: usize,
    /// Bound on opening the load, and on closing it.
    pub timeout: Duration,
}

/// What a worker says: one JSON object a line on its standard output.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Said {
    /// Warm, holding no session: its footprint now is its idle one.
    Ready,
    /// The load is open: `opened` sessions carried their payload both ways and are held.
    Opened {
        opened: usize,
        errors: Vec<String>,
        seconds: f64,
    },
    /// The load ended: `verified` sessions ended with both verdicts good and a clean close.
    Closed {
        verified: usize,
        errors: Vec<String>,
    },
}

/// The commands a worker takes, one a line on its standard input.
pub const OPEN: &str = "open";
pub const CLOSE: &str = "close";

/// The most errors a worker reports per phase.
const MAX_ERRORS: usize = 10;

/// The lab's client links: the trusted one first, the untrusted one after the handshake.
fn options(spec: &WorkerSpec) -> ClientOptions {
    crate::lab_ends::client_options_to(spec.to, spec.mode)
}

/// One perf session to `opts`, `payload` bytes each way carried and checked, held.
pub async fn open_held(opts: &ClientOptions, payload: usize) -> Result<(ClientConn, Held)> {
    let mut c = conn::connect(opts, None).await?;
    let req = Request::Perf(PerfRequest {
        up: true,
        down: true,
        bytes: payload as u64,
        millis: 0,
    });
    c.writer.write_msg(req.encode()).await?;
    let reply = c.reader.read_reply().await?;
    if !reply.is_ok() {
        bail!("the server refused the perf test: {}", reply.msg);
    }
    let held = Held::carry(&mut c.reader, &mut c.writer, payload as u64).await?;
    Ok((c, held))
}

/// End a held session: the end marker, both verdicts, then the server's close with nothing
/// after it. The server closes its socket once its end went out (as for `nena perf`): this
/// end sends nothing more, which would only meet a reset.
pub async fn finish_held(mut c: ClientConn, held: Held) -> Result<()> {
    held.finish(&mut c.reader, &mut c.writer).await?;
    let mut rest = Vec::new();
    c.reader.read_to_end(&mut rest).await?;
    if !rest.is_empty() {
        bail!("{} bytes after the verdicts", rest.len());
    }
    Ok(())
}

/// Run a worker until its input ends.
pub fn worker(spec: &WorkerSpec) -> Result<()> {
    nena_transport::conn::raise_nofile_limit();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(steered(spec))
}

fn say(s: &Said) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", serde_json::to_string(s)?)?;
    out.flush()?;
    Ok(())
}

async fn steered(spec: &WorkerSpec) -> Result<()> {
    let opts = Arc::new(options(spec));
    let (c, held) = open_held(&opts, spec.payload)
        .await
        .context("the warm-up session")?;
    finish_held(c, held).await.context("the warm-up session")?;
    say(&Said::Ready)?;
    let mut input = commands();

    if input.recv().await.as_deref() != Some(OPEN) {
        return Ok(());
    }
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + spec.timeout;
    let gate = Arc::new(tokio::sync::Semaphore::new(spec.opening));
    let tasks: Vec<_> = (0..spec.sessions)
        .map(|_| {
            let (gate, opts, payload) = (gate.clone(), opts.clone(), spec.payload);
            tokio::spawn(async move {
                let _turn = gate.acquire_owned().await?;
                open_held(&opts, payload).await
            })
        })
        .collect();
    let (held, mut errors) = gather(
        tasks,
        deadline,
        spec.timeout,
        |_| String::new(),
        "not open",
        |_| {},
    )
    .await;
    errors.truncate(MAX_ERRORS);
    say(&Said::Opened {
        opened: held.len(),
        errors,
        seconds: started.elapsed().as_secs_f64(),
    })?;

    if input.recv().await.as_deref() != Some(CLOSE) {
        return Ok(());
    }
    let deadline = tokio::time::Instant::now() + spec.timeout;
    let closing: Vec<_> = held
        .into_iter()
        .map(|(c, h)| tokio::spawn(finish_held(c, h)))
        .collect();
    let (verified, mut errors) = verify_closings(closing, deadline, spec.timeout).await;
    errors.truncate(MAX_ERRORS);
    say(&Said::Closed { verified, errors })?;
    // Until the bench has read this process's footprint and lets it go.
    while input.recv().await.is_some() {}
    Ok(())
}

/// The lines of this process's standard input, read on a thread of their own (a blocking
/// read; the channel ends with the input).
fn commands() -> tokio::sync::mpsc::UnboundedReceiver<String> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Parse one line a worker said.
pub fn parse_said(line: &str) -> Result<Said> {
    serde_json::from_str(line).map_err(|e| anyhow!("a worker said {line:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_worker_says_reads_back() {
        for s in [
            Said::Ready,
            Said::Opened {
                opened: 3,
                errors: vec!["x".into()],
                seconds: 0.5,
            },
            Said::Closed {
                verified: 3,
                errors: vec![],
            },
        ] {
            let line = serde_json::to_string(&s).unwrap();
            assert!(!line.contains('\n'));
            assert_eq!(parse_said(&line).unwrap(), s);
        }
        assert!(parse_said("listening on 1.2.3.4:5").is_err());
    }
}
