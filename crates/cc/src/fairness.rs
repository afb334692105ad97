//! The fairness experiment of issue 13 in the lab (crates/lab): bulk senders in the client
//! host, byte-counting sinks in the server host, the sinks' counters sampled every 100 ms.
//!
//! - [`shared_bottleneck`]: one MPTCP connection (two subflows: trusted and untrusted link)
//!   with congestion control `cc`, and one single-path TCP flow (`tcp_cc`) over the trusted
//!   link, both through the rate-limited router-server link: the MPTCP connection's share
//!   against the TCP flow's.
//! - [`disjoint_paths`]: one MPTCP connection over two rate-limited links (no shared
//!   bottleneck): its goodput against the sum of the links' rates.
//!
//! The numbers come from [`Samples`] by pure functions ([`Samples::share`],
//! [`Samples::goodput`]) with unit tests on constructed samples; the drivers only move
//! bytes and read clocks.
use anyhow::{bail, Context, Result};
use nena_lab::{Host, Lab, Link};
use serde::Serialize;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Counter samples: (seconds since the start, bytes received by each sink).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Samples {
    /// (t, MPTCP bytes, TCP bytes).
    pub points: Vec<(f64, u64, u64)>,
}

/// The shares of one shared-bottleneck run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Share {
    /// MPTCP goodput over the window, Mbit/s.
    pub mptcp_mbit: f64,
    /// TCP goodput over the window, Mbit/s.
    pub tcp_mbit: f64,
    /// MPTCP bytes / TCP bytes over the whole window.
    pub ratio: f64,
    /// Median of the per-second ratios (robust to one disturbed second).
    pub median_ratio: f64,
    /// The window, seconds.
    pub window_s: f64,
}

impl Samples {
    /// The counters at the last sample at or before `t`.
    fn at(&self, t: f64) -> Option<(f64, u64, u64)> {
        self.points.iter().rev().find(|p| p.0 <= t + 1e-9).copied()
    }

    /// Shares between `from` and `to` seconds (per-second ratios over whole seconds).
    pub fn share(&self, from: f64, to: f64) -> Option<Share> {
        let a = self.at(from)?;
        let b = self.at(to)?;
        let dt = b.0 - a.0;
        let (m, t) = (b.1 - a.1, b.2 - a.2);
        if dt <= 0.0 || t == 0 {
            return None;
        }
        let mut ratios = Vec::new();
        let mut s = from;
        while s + 1.0 <= to + 1e-9 {
            if let (Some(x), Some(y)) = (self.at(s), self.at(s + 1.0)) {
                if y.2 > x.2 {
                    ratios.push((y.1 - x.1) as f64 / (y.2 - x.2) as f64);
                }
            }
            s += 1.0;
        }
        ratios.sort_by(f64::total_cmp);
        let median_ratio = match ratios.len() {
            0 => m as f64 / t as f64,
            n if n % 2 == 1 => ratios[n / 2],
            n => (ratios[n / 2 - 1] + ratios[n / 2]) / 2.0,
        };
        Some(Share {
            mptcp_mbit: m as f64 * 8.0 / dt / 1e6,
            tcp_mbit: t as f64 * 8.0 / dt / 1e6,
            ratio: m as f64 / t as f64,
            median_ratio,
            window_s: dt,
        })
    }

    /// MPTCP goodput between `from` and `to` seconds, Mbit/s.
    pub fn goodput(&self, from: f64, to: f64) -> Option<f64> {
        let a = self.at(from)?;
        let b = self.at(to)?;
        let dt = b.0 - a.0;
        (dt > 0.0).then(|| (b.1 - a.1) as f64 * 8.0 / dt / 1e6)
    }
}

/// A sink in the server host: accepts one connection, counts its bytes until it closes.
fn sink(_lab: &Lab, l: TcpListener, count: Arc<AtomicU64>) -> std::thread::JoinHandle<Result<()>> {
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().context("accept")?;
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            match s.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => {
                    count.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Ok(()),
            }
        }
    })
}

/// A bulk sender in the client host: connects from `src` with congestion control `cc`
/// (MPTCP or TCP), writes until `stop`.
fn sender(
    lab: &Lab,
    mptcp: bool,
    src: IpAddr,
    dst: SocketAddr,
    cc: &str,
    stop: Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<Result<()>>> {
    let cc = cc.to_string();
    let s = lab.run_in(Host::Client, move || -> Result<Socket> {
        let proto = if mptcp {
            Protocol::MPTCP
        } else {
            Protocol::TCP
        };
        let s = Socket::new(Domain::IPV4, Type::STREAM, Some(proto)).context("socket")?;
        crate::set_congestion(&s, &cc)?;
        s.bind(&SockAddr::from(SocketAddr::new(src, 0)))
            .context("bind")?;
        s.connect_timeout(&SockAddr::from(dst), Duration::from_secs(5))
            .with_context(|| format!("connect to {dst}"))?;
        Ok(s)
    })??;
    Ok(std::thread::spawn(move || {
        let mut s: std::net::TcpStream = s.into();
        s.set_write_timeout(Some(Duration::from_millis(200)))?;
        let buf = vec![0x5au8; 256 * 1024];
        while !stop.load(Ordering::Relaxed) {
            match s.write(&buf) {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let _ = s.shutdown(std::net::Shutdown::Both);
        Ok(())
    }))
}

fn listener(lab: &Lab, mptcp: bool, port: u16) -> Result<TcpListener> {
    let addr = SocketAddr::new(lab.server_addr(), port);
    lab.run_in(Host::Server, move || -> Result<TcpListener> {
        if mptcp {
            Ok(nena_mptcp::listen(addr)?)
        } else {
            Ok(TcpListener::bind(addr)?)
        }
    })?
}

/// Sample the counters every 100 ms for `seconds`, and the MPTCP connection's subflows
/// (`ss -tin` in the client host, to `port`).
fn sample(
    lab: &Lab,
    port: u16,
    m: &AtomicU64,
    t: &AtomicU64,
    seconds: f64,
) -> Result<(Samples, Vec<CwndSample>)> {
    let t0 = Instant::now();
    let mut out = Samples::default();
    let mut cw = Vec::new();
    let filter = format!("dport = :{port}");
    loop {
        let e = t0.elapsed().as_secs_f64();
        out.points
            .push((e, m.load(Ordering::Relaxed), t.load(Ordering::Relaxed)));
        if e >= seconds {
            return Ok((out, cw));
        }
        let o = lab
            .command(
                Host::Client,
                "ss",
                ["-tin", "state", "established", &filter],
            )
            .output()
            .context("running ss")?;
        cw.push(CwndSample {
            t: t0.elapsed().as_secs_f64(),
            subflows: parse_ss(&String::from_utf8_lossy(&o.stdout)),
        });
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Run the MPTCP connection (`cc`) and, when `tcp_cc` is given, the TCP flow over the
/// trusted link at once for `seconds`; the counters' samples.
fn run(
    lab: &Lab,
    cc: &str,
    tcp_cc: Option<&str>,
    seconds: f64,
    port: u16,
) -> Result<(Samples, Vec<CwndSample>)> {
    let m = Arc::new(AtomicU64::new(0));
    let t = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let ml = listener(lab, true, port)?;
    let mut sinks = vec![sink(lab, ml, m.clone())];
    let src = lab.client_addr(Link::Trusted);
    let dst = SocketAddr::new(lab.server_addr(), port);
    // Both flows start together (connects a few milliseconds apart): a head start for
    // either flow left its advantage visible for well over 10 s in trials here.
    let mut senders = vec![sender(lab, true, src, dst, cc, stop.clone())?];
    if let Some(tcp_cc) = tcp_cc {
        let tl = listener(lab, false, port + 1)?;
        sinks.push(sink(lab, tl, t.clone()));
        let dst = SocketAddr::new(lab.server_addr(), port + 1);
        senders.push(sender(lab, false, src, dst, tcp_cc, stop.clone())?);
    }
    let samples = sample(lab, port, &m, &t, seconds);
    stop.store(true, Ordering::Relaxed);
    for s in senders {
        s.join().map_err(|_| anyhow::anyhow!("sender panicked"))??;
    }
    for s in sinks {
        s.join().map_err(|_| anyhow::anyhow!("sink panicked"))??;
    }
    samples
}

/// The shared-bottleneck run: the shares after `warmup` seconds, the counters' samples and
/// the MPTCP subflows' cwnd trace. The lab
/// must have a rate on its server link (the shared bottleneck) and the kernel path manager
/// with the untrusted endpoint (the lab's default), so the MPTCP connection has two subflows.
pub fn shared_bottleneck(
    lab: &Lab,
    cc: &str,
    tcp_cc: &str,
    seconds: f64,
    warmup: f64,
    port: u16,
) -> Result<(Share, Samples, Vec<CwndSample>)> {
    if warmup >= seconds {
        bail!("warm-up {warmup} s must be shorter than the run ({seconds} s)");
    }
    let (s, cw) = run(lab, cc, Some(tcp_cc), seconds, port)?;
    let share = s
        .share(warmup, seconds)
        .context("the TCP flow moved no data in the measurement window")?;
    Ok((share, s, cw))
}

/// The disjoint-paths run: MPTCP goodput (Mbit/s) after `warmup` seconds, and its samples.
pub fn disjoint_paths(
    lab: &Lab,
    cc: &str,
    seconds: f64,
    warmup: f64,
    port: u16,
) -> Result<(f64, Samples)> {
    if warmup >= seconds {
        bail!("warm-up {warmup} s must be shorter than the run ({seconds} s)");
    }
    let (s, _) = run(lab, cc, None, seconds, port)?;
    let g = s.goodput(warmup, seconds).context("no samples")?;
    Ok((g, s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(rate_m: u64, rate_t: u64, secs: usize) -> Samples {
        Samples {
            points: (0..=secs * 10)
                .map(|i| (i as f64 / 10.0, rate_m * i as u64, rate_t * i as u64))
                .collect(),
        }
    }

    #[test]
    fn share_is_the_byte_ratio_over_the_window() {
        let s = samples(200, 100, 10);
        let sh = s.share(2.0, 10.0).unwrap();
        assert!((sh.ratio - 2.0).abs() < 1e-9);
        assert!((sh.median_ratio - 2.0).abs() < 1e-9);
        assert!((sh.window_s - 8.0).abs() < 1e-9);
        // 200 bytes per 100 ms = 2000 B/s = 0.016 Mbit/s
        assert!((sh.mptcp_mbit - 0.016).abs() < 1e-9);
    }

    #[test]
    fn median_ratio_ignores_one_disturbed_second() {
        let mut s = samples(100, 100, 10);
        // second 5..6: the TCP flow stalls (its counter stays)
        for p in s.points.iter_mut() {
            if p.0 > 5.0 + 1e-9 {
                p.2 -= 100 * ((p.0.min(6.0) - 5.0) * 10.0).round() as u64;
            }
        }
        let sh = s.share(1.0, 10.0).unwrap();
        assert!(
            sh.ratio > 1.1,
            "the whole-window ratio sees the stall: {}",
            sh.ratio
        );
        assert!((sh.median_ratio - 1.0).abs() < 1e-9, "{}", sh.median_ratio);
    }

    #[test]
    fn no_tcp_bytes_is_no_share() {
        assert!(samples(100, 0, 5).share(1.0, 5.0).is_none());
        assert!(samples(100, 10, 5).share(5.0, 5.0).is_none());
        assert!((samples(125, 0, 5).goodput(1.0, 5.0).unwrap() - 0.01).abs() < 1e-9);
    }
}

/// One `ss -tin` sample of the subflows of one connection: per subflow (cwnd, ssthresh,
/// smoothed RTT in ms), in `ss`'s order, at `t` seconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CwndSample {
    /// Seconds since the start.
    pub t: f64,
    /// (cwnd, ssthresh, rtt_ms) per subflow; ssthresh 0 when `ss` shows none (initial).
    pub subflows: Vec<(u32, u32, f64)>,
}

/// Parse `ss -tin` output: every socket's info line with `cwnd:` (ssthresh and rtt if shown).
pub fn parse_ss(text: &str) -> Vec<(u32, u32, f64)> {
    text.lines()
        .filter(|l| l.starts_with(char::is_whitespace) && l.contains(" cwnd:"))
        .map(|l| {
            let mut cwnd = 0;
            let mut ssthresh = 0;
            let mut rtt = 0.0;
            for w in l.split_whitespace() {
                if let Some(v) = w.strip_prefix("cwnd:") {
                    cwnd = v.parse().unwrap_or(0);
                } else if let Some(v) = w.strip_prefix("ssthresh:") {
                    ssthresh = v.parse().unwrap_or(0);
                } else if let Some(v) = w.strip_prefix("rtt:") {
                    rtt = v
                        .split('/')
                        .next()
                        .and_then(|x| x.parse().ok())
                        .unwrap_or(0.0);
                }
            }
            (cwnd, ssthresh, rtt)
        })
        .collect()
}

/// The growth of the connection's total cwnd in congestion avoidance, in packets per RTT:
/// over consecutive samples (same number of subflows) in which no subflow's cwnd fell and
/// every subflow was out of slow start (cwnd >= ssthresh > 0) and grew by at most one
/// packet per elapsed RTT plus one (no undo jump), the sum of the total's
/// increases over the sum of the elapsed RTTs (elapsed time / mean smoothed RTT). What the
/// algorithms predict for n subflows of equal RTT and window w each: Reno n (1 per
/// subflow), EWTCP sqrt(n) (alpha = 1/sqrt(n) per subflow), LIA, OLIA and BALIA 1/n (each
/// subflow gets 1/(n^2 w) per ACK, w ACKs per RTT: 1/n^2 per subflow). Returns
/// (packets per RTT, RTTs counted), None without a usable interval.
pub fn ca_growth_per_rtt(samples: &[CwndSample]) -> Option<(f64, f64)> {
    let mut grew = 0.0;
    let mut rtts = 0.0;
    for w in samples.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        if a.subflows.len() != b.subflows.len() || a.subflows.is_empty() {
            continue;
        }
        let rtt_ms = a.subflows.iter().map(|s| s.2).sum::<f64>() / a.subflows.len() as f64;
        // Congestion avoidance adds at most one packet per RTT to a subflow (Reno, the most
        // any of these does): a larger step is not growth but an undo of a reduction (cwnd
        // back to its value before a spurious loss) or the end of a recovery; left out.
        let most = 1.0 + (b.t - a.t) * 1000.0 / rtt_ms.max(1e-3);
        let steady = a.subflows.iter().zip(&b.subflows).all(|(x, y)| {
            y.0 >= x.0
                && x.1 > 0
                && x.0 >= x.1
                && y.0 >= y.1
                && x.2 > 0.0
                && (y.0 - x.0) as f64 <= most
        });
        if !steady {
            continue;
        }
        let sum = |s: &CwndSample| s.subflows.iter().map(|x| x.0 as f64).sum::<f64>();
        grew += sum(b) - sum(a);
        rtts += (b.t - a.t) * 1000.0 / rtt_ms;
    }
    (rtts > 0.0).then(|| (grew / rtts, rtts))
}

/// A lab trace: one MPTCP connection (`cc`) alone, bulk upload for `seconds`, its
/// subflows' cwnd, ssthresh and RTT read with `ss -tin` in the client host every 100 ms.
pub fn cwnd_trace(lab: &Lab, cc: &str, seconds: f64, port: u16) -> Result<Vec<CwndSample>> {
    let m = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let ml = listener(lab, true, port)?;
    let sk = sink(lab, ml, m.clone());
    let src = lab.client_addr(Link::Trusted);
    let dst = SocketAddr::new(lab.server_addr(), port);
    let snd = sender(lab, true, src, dst, cc, stop.clone())?;
    let t0 = Instant::now();
    let mut out = Vec::new();
    let filter = format!("dport = :{port}");
    while t0.elapsed().as_secs_f64() < seconds {
        let o = lab
            .command(
                Host::Client,
                "ss",
                ["-tin", "state", "established", &filter],
            )
            .output()
            .context("running ss")?;
        out.push(CwndSample {
            t: t0.elapsed().as_secs_f64(),
            subflows: parse_ss(&String::from_utf8_lossy(&o.stdout)),
        });
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    snd.join()
        .map_err(|_| anyhow::anyhow!("sender panicked"))??;
    sk.join().map_err(|_| anyhow::anyhow!("sink panicked"))??;
    Ok(out)
}

#[cfg(test)]
mod trace_tests {
    use super::*;

    #[test]
    fn ss_lines_are_parsed() {
        let text = "ESTAB 0 0 198.18.1.2:4000 198.18.3.2:6400\n\
             \t reno wscale:7,7 rto:250 rtt:45.268/1.027 mss:1448 cwnd:22 ssthresh:13 bytes_sent:1\n\
             ESTAB 0 0 198.18.2.2:4001 198.18.3.2:6400\n\
             \t nena_lia rtt:40.5/2 cwnd:10\n";
        assert_eq!(parse_ss(text), vec![(22, 13, 45.268), (10, 0, 40.5)]);
    }

    #[test]
    fn growth_counts_only_congestion_avoidance_without_losses() {
        let s = |t: f64, a: u32, b: u32| CwndSample {
            t,
            subflows: vec![(a, 10, 50.0), (b, 10, 50.0)],
        };
        // 0.5 s = 10 RTTs of 50 ms: +5 packets in total, then a loss (b halves), then +5.
        let v = vec![
            s(0.0, 20, 20),
            s(0.5, 23, 22),
            s(0.6, 23, 11),
            s(1.1, 26, 13),
        ];
        let (g, rtts) = ca_growth_per_rtt(&v).unwrap();
        assert!((rtts - 20.0).abs() < 1e-9, "{rtts}");
        assert!((g - 0.5).abs() < 1e-9, "{g}");
        // an undo (cwnd back up by 12 in 100 ms) is left out
        let undo = vec![s(0.0, 20, 20), s(0.1, 32, 20), s(0.6, 35, 22)];
        let (g, rtts) = ca_growth_per_rtt(&undo).unwrap();
        assert!(
            (rtts - 10.0).abs() < 1e-9 && (g - 0.5).abs() < 1e-9,
            "{g} over {rtts}"
        );
        // slow start (cwnd below ssthresh) is left out
        let ss = vec![
            CwndSample {
                t: 0.0,
                subflows: vec![(4, 100, 50.0)],
            },
            CwndSample {
                t: 0.1,
                subflows: vec![(8, 100, 50.0)],
            },
        ];
        assert_eq!(ca_growth_per_rtt(&ss), None);
    }
}
