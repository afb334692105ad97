//! Lab drivers for the congestion controls' kernel tests (crates/lab): a bulk MPTCP sender
//! in the client host, a byte-counting sink in the server host, the sink's counter and the
//! subflows' TCP_INFO (nena-mptcp's sock_diag sampler) every 100 ms.
//!
//! - [`disjoint_paths`]: one MPTCP connection over the lab's two links: its goodput.
//! - [`cwnd_trace`] and [`ca_growth_per_rtt`]: the subflows' total cwnd over time, and its
//!   growth per RTT in congestion avoidance.
//!
//! The fairness experiment against a competing TCP flow is the scenario runner's
//! (`competing` in crates/scenario, scenarios/fairness-shared.toml). The numbers come from
//! pure functions ([`Samples::goodput`], [`ca_growth_per_rtt`]) with unit tests on
//! constructed samples; the drivers only move bytes and read clocks.
use anyhow::{bail, Context, Result};
use nena_lab::{Host, Lab, Link};
use nena_mptcp::sample::{Sample, Sampler};
use serde::Serialize;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Counter samples: (seconds since the start, bytes received by the sink).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Samples {
    /// (t, MPTCP bytes).
    pub points: Vec<(f64, u64)>,
}

impl Samples {
    /// The counters at the last sample at or before `t`.
    fn at(&self, t: f64) -> Option<(f64, u64)> {
        self.points.iter().rev().find(|p| p.0 <= t + 1e-9).copied()
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

/// A bulk MPTCP sender in the client host: connects from `src` with congestion control
/// `cc`, writes until `stop`.
fn sender(
    lab: &Lab,
    src: IpAddr,
    dst: SocketAddr,
    cc: &str,
    stop: Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<Result<()>>> {
    let cc = cc.to_string();
    let s = lab.run_in(Host::Client, move || -> Result<Socket> {
        let s = Socket::new(
            Domain::for_address(dst),
            Type::STREAM,
            Some(Protocol::MPTCP),
        )
        .context("socket")?;
        nena_mptcp::set_congestion(std::os::fd::AsFd::as_fd(&s), &cc)
            .with_context(|| format!("setting congestion control {cc:?}"))?;
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

fn listener(lab: &Lab, port: u16) -> Result<TcpListener> {
    let addr = SocketAddr::new(lab.server_addr(), port);
    lab.run_in(Host::Server, move || -> Result<TcpListener> {
        Ok(nena_mptcp::listen(addr, None)?)
    })?
}

/// Run the MPTCP connection (`cc`, from the trusted address; the kernel path manager adds
/// the untrusted subflow) for `seconds`: the sink's counter, and the subflows' TCP_INFO
/// (nena-mptcp's sock_diag sampler in the client host), every 100 ms.
fn run(lab: &Lab, cc: &str, seconds: f64, port: u16) -> Result<(Samples, Vec<CwndSample>)> {
    let m = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let sk = sink(lab, listener(lab, port)?, m.clone());
    let src = lab.client_addr(Link::Trusted);
    let dst = SocketAddr::new(lab.server_addr(), port);
    let snd = sender(lab, src, dst, cc, stop.clone())?;
    let t0 = Instant::now();
    let sampler = Sampler::start(port, Duration::from_millis(100), |f| {
        lab.spawn_in(Host::Client, f)
    });
    let mut counts = Samples::default();
    loop {
        let e = t0.elapsed().as_secs_f64();
        counts.points.push((e, m.load(Ordering::Relaxed)));
        if e >= seconds {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let sampled = sampler.stop();
    stop.store(true, Ordering::Relaxed);
    snd.join()
        .map_err(|_| anyhow::anyhow!("sender panicked"))??;
    sk.join().map_err(|_| anyhow::anyhow!("sink panicked"))??;
    Ok((counts, cwnd_samples(&sampled?, port)))
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
    let (s, _) = run(lab, cc, seconds, port)?;
    let g = s.goodput(warmup, seconds).context("no samples")?;
    Ok((g, s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(rate: u64, secs: usize) -> Samples {
        Samples {
            points: (0..=secs * 10)
                .map(|i| (i as f64 / 10.0, rate * i as u64))
                .collect(),
        }
    }

    #[test]
    fn goodput_is_the_bytes_over_the_window() {
        // 125 bytes per 100 ms = 1250 B/s = 0.01 Mbit/s
        assert!((samples(125, 5).goodput(1.0, 5.0).unwrap() - 0.01).abs() < 1e-9);
        assert!(samples(125, 5).goodput(5.0, 5.0).is_none());
    }
}

/// One sample of the subflows of one connection: per subflow (cwnd, ssthresh, smoothed
/// RTT in ms), ordered by local address, at `t` seconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CwndSample {
    /// Seconds since the start.
    pub t: f64,
    /// (cwnd, ssthresh, rtt_ms) per subflow; ssthresh 0 while it is the initial one.
    pub subflows: Vec<(u32, u32, f64)>,
}

/// The client's established subflows toward `port`, per sample, ordered by local address
/// (so that consecutive samples pair the same subflows).
pub fn cwnd_samples(samples: &[Sample], port: u16) -> Vec<CwndSample> {
    samples
        .iter()
        .map(|s| {
            let mut socks: Vec<_> = s
                .sockets
                .iter()
                .filter(|x| x.is_established_to(port))
                .collect();
            socks.sort_by_key(|x| (x.src, x.dst));
            CwndSample {
                t: s.t,
                subflows: socks
                    .iter()
                    .map(|x| (x.cwnd, x.ssthresh.unwrap_or(0), x.rtt_us as f64 / 1000.0))
                    .collect(),
            }
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
/// subflows' cwnd, ssthresh and RTT read in the client host every 100 ms.
pub fn cwnd_trace(lab: &Lab, cc: &str, seconds: f64, port: u16) -> Result<Vec<CwndSample>> {
    Ok(run(lab, cc, seconds, port)?.1)
}

#[cfg(test)]
mod trace_tests {
    use super::*;

    #[test]
    fn samples_keep_the_established_subflows_toward_the_port_in_address_order() {
        use nena_mptcp::sample::SocketSample;
        let sock = |src: &str, dst: &str, state, cwnd, ssthresh, rtt_us| SocketSample {
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            state,
            rtt_us,
            rttvar_us: 0,
            cwnd,
            mss: 1448,
            ssthresh,
            bytes_acked: 0,
            bytes_received: 0,
            bytes_sent: 0,
            total_retrans: 0,
            delivery_rate: 0,
            cc: None,
        };
        let s = Sample {
            t: 0.5,
            sockets: vec![
                sock("198.18.2.2:4001", "198.18.3.2:6400", 1, 10, None, 40_500),
                sock(
                    "198.18.1.2:4000",
                    "198.18.3.2:6400",
                    1,
                    22,
                    Some(13),
                    45_268,
                ),
                // the server's end, a closing subflow, another port: left out
                sock("198.18.3.2:6400", "198.18.1.2:4000", 1, 9, None, 1),
                sock("198.18.1.2:4002", "198.18.3.2:6400", 7, 9, None, 1),
                sock("198.18.1.2:4003", "198.18.3.2:6401", 1, 9, None, 1),
            ],
        };
        assert_eq!(
            cwnd_samples(&[s], 6400),
            vec![CwndSample {
                t: 0.5,
                subflows: vec![(22, 13, 45.268), (10, 0, 40.5)],
            }]
        );
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
