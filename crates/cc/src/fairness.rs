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

/// Sample the counters every 100 ms for `seconds`.
fn sample(m: &AtomicU64, t: &AtomicU64, seconds: f64) -> Samples {
    let t0 = Instant::now();
    let mut out = Samples::default();
    loop {
        let e = t0.elapsed().as_secs_f64();
        out.points
            .push((e, m.load(Ordering::Relaxed), t.load(Ordering::Relaxed)));
        if e >= seconds {
            return out;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Run the MPTCP connection (`cc`) and, when `tcp_cc` is given, the TCP flow over the
/// trusted link at once for `seconds`; the counters' samples.
fn run(lab: &Lab, cc: &str, tcp_cc: Option<&str>, seconds: f64, port: u16) -> Result<Samples> {
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
    let samples = sample(&m, &t, seconds);
    stop.store(true, Ordering::Relaxed);
    for s in senders {
        s.join().map_err(|_| anyhow::anyhow!("sender panicked"))??;
    }
    for s in sinks {
        s.join().map_err(|_| anyhow::anyhow!("sink panicked"))??;
    }
    Ok(samples)
}

/// The shared-bottleneck run: its samples and the shares after `warmup` seconds. The lab
/// must have a rate on its server link (the shared bottleneck) and the kernel path manager
/// with the untrusted endpoint (the lab's default), so the MPTCP connection has two subflows.
pub fn shared_bottleneck(
    lab: &Lab,
    cc: &str,
    tcp_cc: &str,
    seconds: f64,
    warmup: f64,
    port: u16,
) -> Result<(Share, Samples)> {
    if warmup >= seconds {
        bail!("warm-up {warmup} s must be shorter than the run ({seconds} s)");
    }
    let s = run(lab, cc, Some(tcp_cc), seconds, port)?;
    let share = s
        .share(warmup, seconds)
        .context("the TCP flow moved no data in the measurement window")?;
    Ok((share, s))
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
    let s = run(lab, cc, None, seconds, port)?;
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
