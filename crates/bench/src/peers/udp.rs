//! The gateway's UDP stream (issue 39, item 6): iperf3 sends datagrams at a fixed rate from
//! the LAN host to an iperf3 server on the server host, through `nena gateway --udp carry`
//! (each datagram framed in the flow's nena session, op 7) and the gateway's proxy server,
//! which sends them on. The receiver's count of lost datagrams is the verdict's figure: the
//! links carry the datagrams inside MPTCP, which resends what a link drops, so every lost
//! datagram is one the gateway, the relay or the sockets around them dropped.

use anyhow::{bail, Context, Result};
use nena_lab::{Host, Lab};
use serde::Serialize;
use std::net::SocketAddrV4;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The iperf3 server's port on the server host (TCP for its control connection, UDP for
/// the stream).
pub const IPERF_PORT: u16 = 7420;
/// The stream's rate.
pub const UDP_MBIT: u64 = 50;
/// Bytes of each datagram: fixed, so that the count does not follow the path's MSS.
pub const DATAGRAM: usize = 1400;
/// The share of datagrams the gateway may lose, in percent (the verdict is strict: less).
pub const LOSS_TARGET_PERCENT: f64 = 1.0;

/// One UDP stream, as its receiver counted it.
#[derive(Debug, Clone, Serialize)]
pub struct UdpRun {
    pub rep: usize,
    pub target_mbit_s: u64,
    pub seconds: f64,
    /// Datagrams the sender sent (as the receiver learns from their sequence numbers).
    pub packets: u64,
    pub lost_packets: u64,
    pub lost_percent: f64,
    /// The rate the receiver saw.
    pub received_mbit_s: f64,
}

/// The streams of one setting and their verdict.
#[derive(Debug, Clone, Serialize)]
pub struct UdpResult {
    pub runs: Vec<UdpRun>,
    /// Lost over sent, over every run, in percent.
    pub lost_percent: f64,
    pub pass: bool,
}

/// The runs' verdict: what every run lost together, against [`LOSS_TARGET_PERCENT`]. No
/// run (all failed) fails it.
pub fn summarize(runs: Vec<UdpRun>) -> UdpResult {
    let sent: u64 = runs.iter().map(|r| r.packets).sum();
    let lost: u64 = runs.iter().map(|r| r.lost_packets).sum();
    let lost_percent = if sent == 0 {
        100.0
    } else {
        lost as f64 * 100.0 / sent as f64
    };
    UdpResult {
        pass: sent > 0 && lost_percent < LOSS_TARGET_PERCENT,
        lost_percent,
        runs,
    }
}

/// `iperf3 -s` on `addr` in the server host, until dropped.
pub fn server(
    lab: &Lab,
    iperf3: &Path,
    addr: SocketAddrV4,
    log: &Path,
) -> Result<super::ends::Proc> {
    let args = [
        "-s".to_string(),
        "-B".into(),
        addr.ip().to_string(),
        "-p".into(),
        addr.port().to_string(),
    ];
    let mut p = super::ends::Proc::spawn(
        lab,
        Host::Server,
        iperf3,
        &args,
        &[],
        log.to_path_buf(),
        "iperf3 server",
    )?;
    p.wait_listening(lab, Host::Server, addr)?;
    Ok(p)
}

/// One stream of `seconds` at [`UDP_MBIT`] from the LAN host to the iperf3 server at `to`.
pub fn stream(
    lab: &Lab,
    iperf3: &Path,
    to: SocketAddrV4,
    seconds: u32,
    rep: usize,
) -> Result<UdpRun> {
    let mut child = lab
        .command(
            Host::Lan,
            iperf3,
            [
                "-c".to_string(),
                to.ip().to_string(),
                "-p".into(),
                to.port().to_string(),
                "-u".into(),
                "-b".into(),
                format!("{UDP_MBIT}M"),
                "-l".into(),
                DATAGRAM.to_string(),
                "-t".into(),
                seconds.to_string(),
                "--connect-timeout".into(),
                "10000".into(),
                "--json".into(),
            ],
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("starting iperf3 in the LAN host")?;
    let mut stdout = child.stdout.take().context("iperf3's output")?;
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
        s
    });
    // Bounded: a stream whose report never comes ends the run instead of the bench.
    let limit = Duration::from_secs(u64::from(seconds) + 30);
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("iperf3 did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = reader.join().unwrap_or_default();
    let json: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("iperf3 printed no JSON ({status})"))?;
    if let Some(e) = json["error"].as_str() {
        bail!("iperf3: {e}");
    }
    if !status.success() {
        bail!("iperf3 ended with {status}");
    }
    parse(&json, rep)
}

/// A stream's figures from iperf3's JSON: the receiver's sum (`end.sum_received`).
pub fn parse(json: &serde_json::Value, rep: usize) -> Result<UdpRun> {
    let r = &json["end"]["sum_received"];
    let num = |k: &str| {
        r[k].as_f64()
            .with_context(|| format!("iperf3's JSON has no end.sum_received.{k}"))
    };
    let packets = num("packets")? as u64;
    let lost_packets = num("lost_packets")? as u64;
    Ok(UdpRun {
        rep,
        target_mbit_s: UDP_MBIT,
        seconds: num("seconds")?,
        packets,
        lost_packets,
        lost_percent: num("lost_percent")?,
        received_mbit_s: num("bits_per_second")? / 1e6,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_receivers_sum_is_read_and_a_missing_field_is_an_error() {
        let j: serde_json::Value = serde_json::from_str(
            r#"{"end": {"sum": {"packets": 1, "lost_packets": 0},
                "sum_received": {"seconds": 10.01, "bytes": 62500000, "bits_per_second": 49950000,
                  "jitter_ms": 0.02, "lost_packets": 12, "packets": 44643, "lost_percent": 0.0268}}}"#,
        )
        .unwrap();
        let r = parse(&j, 3).unwrap();
        assert_eq!((r.rep, r.packets, r.lost_packets), (3, 44643, 12));
        assert!((r.received_mbit_s - 49.95).abs() < 1e-9);
        assert!((r.lost_percent - 0.0268).abs() < 1e-12);
        let no_receiver: serde_json::Value =
            serde_json::from_str(r#"{"end": {"sum": {"packets": 1}}}"#).unwrap();
        let e = parse(&no_receiver, 1).unwrap_err();
        assert!(format!("{e:#}").contains("sum_received.packets"), "{e:#}");
    }

    fn run(packets: u64, lost: u64) -> UdpRun {
        UdpRun {
            rep: 1,
            target_mbit_s: UDP_MBIT,
            seconds: 10.0,
            packets,
            lost_packets: lost,
            lost_percent: lost as f64 * 100.0 / packets as f64,
            received_mbit_s: 49.0,
        }
    }

    #[test]
    fn the_verdict_is_on_every_runs_datagrams_together() {
        // 0.5% and 1.4%: 19 of 2000 together, 0.95%.
        let r = summarize(vec![run(1000, 5), run(1000, 14)]);
        assert!((r.lost_percent - 0.95).abs() < 1e-9 && r.pass, "{r:?}");
        // Exactly 1% is not less than 1%.
        let r = summarize(vec![run(1000, 10)]);
        assert!(!r.pass);
        // Nothing measured is no pass.
        let r = summarize(Vec::new());
        assert!(!r.pass && r.lost_percent == 100.0);
    }
}
