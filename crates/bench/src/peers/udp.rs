//! The gateway's UDP stream (issue 39, item 6): iperf3 sends datagrams at a fixed rate from
//! the LAN host to an iperf3 server on the server host, through `nena gateway --udp carry`
//! (each datagram framed in the flow's nena session, op 7) and the gateway's proxy server,
//! which sends them on. Beside it, in the same repetition, the same stream from the client
//! host straight over the link (no nena): what the links and the receiving host drop. The
//! verdict is on what the gateway loses beyond that, from the receiver's counts. (Through
//! the gateway the links carry the datagrams inside MPTCP, which resends what a link drops:
//! a datagram lost there was dropped by a socket, the gateway or the relay.)

use anyhow::{bail, Context, Result};
use nena_lab::{Host, Lab};
use serde::Serialize;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

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
    /// Through the gateway.
    pub runs: Vec<UdpRun>,
    /// Straight from the client host over the link.
    pub direct_runs: Vec<UdpRun>,
    /// Lost over sent, over every run through the gateway, in percent.
    pub lost_percent: f64,
    /// The same straight over the link.
    pub direct_lost_percent: f64,
    /// `lost_percent - direct_lost_percent`: what the gateway loses beyond the links.
    pub beyond_percent: f64,
    pub pass: bool,
}

/// Lost over sent of `runs` together, in percent; None when nothing was sent.
fn lost_percent(runs: &[UdpRun]) -> Option<f64> {
    let sent: u64 = runs.iter().map(|r| r.packets).sum();
    let lost: u64 = runs.iter().map(|r| r.lost_packets).sum();
    (sent > 0).then(|| lost as f64 * 100.0 / sent as f64)
}

/// The verdict: what the gateway's runs lost together beyond what the direct runs lost
/// together, against [`LOSS_TARGET_PERCENT`] (percentage points). No run of either (all
/// failed) fails it.
pub fn summarize(runs: Vec<UdpRun>, direct_runs: Vec<UdpRun>) -> UdpResult {
    let (gw, direct) = (lost_percent(&runs), lost_percent(&direct_runs));
    let beyond = match (gw, direct) {
        (Some(g), Some(d)) => g - d,
        _ => 100.0,
    };
    UdpResult {
        pass: gw.is_some() && direct.is_some() && beyond < LOSS_TARGET_PERCENT,
        lost_percent: gw.unwrap_or(100.0),
        direct_lost_percent: direct.unwrap_or(100.0),
        beyond_percent: beyond,
        runs,
        direct_runs,
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

/// One stream of `seconds` at [`UDP_MBIT`] from `from` (the LAN host: through the
/// gateway; the client host: straight over the link) to the iperf3 server at `to`.
pub fn stream(
    lab: &Lab,
    from: Host,
    iperf3: &Path,
    to: SocketAddrV4,
    seconds: u32,
    rep: usize,
) -> Result<UdpRun> {
    stream_from(lab, from, None, iperf3, to, seconds, rep)
}

/// [`stream`] from the local address `bind` (iperf3's `-B`: a link's address of the
/// client host, to send over that link alone), or any with None.
pub fn stream_from(
    lab: &Lab,
    from: Host,
    bind: Option<Ipv4Addr>,
    iperf3: &Path,
    to: SocketAddrV4,
    seconds: u32,
    rep: usize,
) -> Result<UdpRun> {
    let mut args = vec![
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
    ];
    if let Some(b) = bind {
        args.extend(["-B".to_string(), b.to_string()]);
    }
    let mut child = lab
        .command(from, iperf3, args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting iperf3 in the {from:?} host"))?;
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
    fn the_verdict_is_on_every_runs_datagrams_together_beyond_the_direct_ones() {
        // 0.5% and 1.4%: 19 of 2000 together, 0.95%; nothing lost directly.
        let r = summarize(vec![run(1000, 5), run(1000, 14)], vec![run(1000, 0)]);
        assert!((r.lost_percent - 0.95).abs() < 1e-9 && r.pass, "{r:?}");
        assert!((r.beyond_percent - 0.95).abs() < 1e-9);
        // Exactly 1% beyond is not less than 1%.
        let r = summarize(vec![run(1000, 10)], vec![run(1000, 0)]);
        assert!(!r.pass);
        // 1.5% through the gateway where the link itself lost 0.7%: 0.8% beyond.
        let r = summarize(vec![run(1000, 15)], vec![run(1000, 7)]);
        assert!((r.beyond_percent - 0.8).abs() < 1e-9 && r.pass, "{r:?}");
        // Nothing measured on either side is no pass.
        let r = summarize(Vec::new(), vec![run(1000, 0)]);
        assert!(!r.pass && r.lost_percent == 100.0);
        let r = summarize(vec![run(1000, 0)], Vec::new());
        assert!(!r.pass);
    }
}
