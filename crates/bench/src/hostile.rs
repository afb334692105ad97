//! `nena bench hostile-lan`: what a LAN host spraying source ports and DNS names costs
//! another LAN host behind `nena gateway` (issue 55, item 5). In a lab of its own (a LAN
//! host behind the client, bare veth links), the other host (a second address of the LAN
//! host, 198.18.5.3: to the gateway, whose caps are per source address, another host)
//! fetches [`FETCH_BYTES`] over TCP from the server host, every byte checked, and resolves a
//! name (DNS to the WLAN's resolver address, answered by the gateway through nena); first
//! on a calm gateway, then while the LAN host's own address (198.18.5.2) sprays datagrams
//! from source ports cycling through 1024..65535 and, every tenth, a DNS query for a random
//! name, at [`SPRAY_RATE`] a second from a raw socket.
//!
//! Each repetition is one fetch and [`LOOKUPS_PER_REP`] lookups.
//! Verdict: the other host's median fetch time and median lookup time under the spray at
//! most [`RATIO_TARGET`] times those on the calm gateway in the same run. Beside them: the
//! gateway's memory peak (VmHWM) and its `gateway bounds` line.

use crate::host::{cpu_model, kernel, loadavg};
use crate::own_lab::in_own_lab;
use crate::page::ends::{self, ResolvConf};
use crate::peers::ends::Proc;
use anyhow::{bail, Context, Result};
use nena_lab::{Host, Lab, LabConfig, SERVER_ADDR};
use serde::Serialize;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes of each fetch.
pub const FETCH_BYTES: usize = 20 << 20;
/// Datagrams the sprayer sends a second.
pub const SPRAY_RATE: u64 = 5_000;
/// The verdict: under the spray at most this times the calm time (fetch and lookup).
pub const RATIO_TARGET: f64 = 2.0;
/// Lookups of each repetition, one after another: a lookup is a sub-millisecond round trip
/// whose single times vary tenfold on a busy host, so its median is taken over all of them.
pub const LOOKUPS_PER_REP: usize = 10;
/// The fetch's port on the server host.
const FETCH_PORT: u16 = 8090;
/// The other host's address (a second address of the LAN host).
const OTHER: Ipv4Addr = Ipv4Addr::new(198, 18, 5, 3);
/// The sprayer's address (the LAN host's own).
const SPRAYER: Ipv4Addr = Ipv4Addr::new(198, 18, 5, 2);
/// The resolver the LAN hosts ask (the WLAN's, which the gateway answers for).
const RESOLVER: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 1);
/// The name the other host resolves (dnsmasq answers every example.test name).
const NAME: &str = "www.example.test";

#[derive(Debug, Clone)]
pub struct HostileOptions {
    /// Fetches and lookups of each phase (calm, under the spray).
    pub reps: usize,
    pub nena: PathBuf,
    pub dnsmasq: PathBuf,
}

/// One phase's measurements.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    pub fetch_s: Vec<f64>,
    pub dns_ms: Vec<f64>,
    pub fetch_median_s: f64,
    pub dns_median_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Target {
    pub name: String,
    pub value: f64,
    pub target: f64,
    pub pass: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct HostileReport {
    pub reps: usize,
    pub fetch_bytes: usize,
    pub spray_rate: u64,
    pub calm: Phase,
    pub spray: Phase,
    /// Datagrams the sprayer sent, and over how long.
    pub sprayed: u64,
    pub spray_s: f64,
    pub fetch_ratio: f64,
    pub dns_ratio: f64,
    /// The gateway's memory peak.
    pub gateway_vm_hwm_kib: u64,
    /// The gateway's `gateway bounds` line.
    pub bounds: String,
    pub targets: Vec<Target>,
    pub pass: bool,
    pub cpu: String,
    pub kernel: String,
    pub loadavg_start: String,
    pub loadavg_end: String,
}

/// Bring up the bench's lab, run the bench in it, tear it down (also on Ctrl-C).
pub fn run(
    opts: &HostileOptions,
    progress: impl FnMut(&str) + Send + 'static,
) -> Result<HostileReport> {
    if opts.reps == 0 {
        bail!("the bench needs at least one repetition");
    }
    let cfg = LabConfig {
        verify: true,
        lan: true,
        relay_exe: Some(opts.nena.clone()),
        ..LabConfig::with_prefix(format!("hl{}", std::process::id()))
    };
    let opts = opts.clone();
    in_own_lab(&cfg, move |prefix| run_on(prefix, &opts, progress))
}

/// The byte at `i` of every fetch (incompressible enough, and checkable).
fn byte_at(i: usize) -> u8 {
    (i.wrapping_mul(2654435761) >> 13) as u8
}

fn run_on(
    prefix: &str,
    opts: &HostileOptions,
    mut progress: impl FnMut(&str),
) -> Result<HostileReport> {
    let loadavg_start = loadavg();
    let lab = Lab::open(prefix)?;
    let dir = std::env::temp_dir().join(format!("nena-bench-hostile-{prefix}"));
    std::fs::create_dir_all(&dir)?;
    let _rm = RemoveDir(dir.clone());
    lab.command(
        Host::Lan,
        "ip",
        ["addr", "add", "198.18.5.3/24", "dev", "eth0", "nodad"],
    )
    .status()
    .context("adding the other host's address")?
    .success()
    .then_some(())
    .context("ip addr add 198.18.5.3/24 in the LAN host failed")?;
    let listener = lab.run_in(Host::Server, || {
        TcpListener::bind(SocketAddrV4::new(SERVER_ADDR, FETCH_PORT))
    })??;
    std::thread::spawn(move || {
        for c in listener.incoming().flatten() {
            std::thread::spawn(move || serve_fetch(c));
        }
    });
    let _dns = ends::dnsmasq(&lab, &opts.dnsmasq, SERVER_ADDR, &dir)?;
    let _conf = ResolvConf::new(&lab, Host::Server, SERVER_ADDR)?;
    let mut proxy = proxy_server(&lab, &opts.nena, &dir)?;
    let mut gateway = gateway(&lab, &opts.nena, &dir)?;
    progress(&format!(
        "lab {prefix} up; the other host is {OTHER}, the sprayer {SPRAYER}"
    ));
    let mut phase = |what: &str, progress: &mut dyn FnMut(&str)| -> Result<Phase> {
        let (mut fetch_s, mut dns_ms) = (Vec::new(), Vec::new());
        for rep in 1..=opts.reps {
            proxy.check_running()?;
            gateway.check_running()?;
            let f = fetch(&lab).with_context(|| format!("{what}: fetch {rep}"))?;
            let mut lookups = Vec::with_capacity(LOOKUPS_PER_REP);
            for i in 1..=LOOKUPS_PER_REP {
                let d = resolve(&lab).with_context(|| format!("{what}: lookup {rep}.{i}"))?;
                lookups.push(d * 1e3);
            }
            progress(&format!(
                "{what:<6} rep {rep:>2}  fetch {f:>7.3} s  lookups {:>8.2} ms (median of {LOOKUPS_PER_REP})",
                median(&lookups)
            ));
            fetch_s.push(f);
            dns_ms.extend(lookups);
        }
        Ok(Phase {
            fetch_median_s: median(&fetch_s),
            dns_median_ms: median(&dns_ms),
            fetch_s,
            dns_ms,
        })
    };
    // Unmeasured first (neighbour tables, the processes' first sessions).
    fetch(&lab).context("the warm-up fetch")?;
    resolve(&lab).context("the warm-up lookup")?;
    let calm = phase("calm", &mut progress)?;
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let sprayer = {
        let (stop, sent) = (stop.clone(), sent.clone());
        lab.spawn_in(Host::Lan, move || spray(&stop, &sent))
    };
    let started = Instant::now();
    // Under way: 10,000 sent (9,000 source ports and 1,000 names) before measuring.
    while sent.load(Ordering::Relaxed) < 10_000 {
        if sprayer.is_finished() || started.elapsed() > Duration::from_secs(30) {
            bail!("the sprayer did not get going");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let spray = phase("spray", &mut progress);
    stop.store(true, Ordering::Relaxed);
    let spray_s = started.elapsed().as_secs_f64();
    sprayer
        .join()
        .map_err(|_| anyhow::anyhow!("the sprayer panicked"))???;
    let spray = spray?;
    let sprayed = sent.load(Ordering::Relaxed);
    let gateway_vm_hwm_kib = vm_hwm_kib(gateway.pid())?;
    drop(gateway);
    let log = std::fs::read_to_string(dir.join("gateway.log")).unwrap_or_default();
    let bounds = log
        .lines()
        .find(|l| l.contains("gateway bounds: "))
        .map(|l| l.split("gateway bounds: ").nth(1).unwrap_or(l).to_string())
        .unwrap_or_default();
    let fetch_ratio = spray.fetch_median_s / calm.fetch_median_s;
    let dns_ratio = spray.dns_median_ms / calm.dns_median_ms;
    let targets = vec![
        Target {
            name: "fetch time under the spray / calm".into(),
            value: fetch_ratio,
            target: RATIO_TARGET,
            pass: fetch_ratio <= RATIO_TARGET,
        },
        Target {
            name: "lookup time under the spray / calm".into(),
            value: dns_ratio,
            target: RATIO_TARGET,
            pass: dns_ratio <= RATIO_TARGET,
        },
    ];
    Ok(HostileReport {
        reps: opts.reps,
        fetch_bytes: FETCH_BYTES,
        spray_rate: SPRAY_RATE,
        calm,
        spray,
        sprayed,
        spray_s,
        fetch_ratio,
        dns_ratio,
        gateway_vm_hwm_kib,
        bounds,
        pass: targets.iter().all(|t| t.pass),
        targets,
        cpu: cpu_model().unwrap_or_default(),
        kernel: kernel(),
        loadavg_start,
        loadavg_end: loadavg(),
    })
}

struct RemoveDir(PathBuf);

impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `nena proxy server` on the server host, allowed to reach the server host's own
/// address (the fetch, the sprayer's datagrams).
fn proxy_server(lab: &Lab, nena: &std::path::Path, dir: &std::path::Path) -> Result<Proc> {
    let listen = SocketAddrV4::new(SERVER_ADDR, ends::PROXY_PORT);
    let args = [
        "proxy".to_string(),
        "server".into(),
        "--listen".into(),
        listen.to_string(),
        "--allow".into(),
        format!("{SERVER_ADDR}/32"),
    ];
    let mut p = Proc::spawn(
        lab,
        Host::Server,
        nena,
        &args,
        &[("RUST_LOG", "warn")],
        dir.join("proxy-server.log"),
        "nena proxy server",
    )?;
    p.wait_listening(lab, Host::Server, listen)?;
    Ok(p)
}

/// `nena gateway` on the client for the LAN behind `lan`; its log has warnings and its
/// datagram side's lines (the `gateway bounds` line at its end).
fn gateway(lab: &Lab, nena: &std::path::Path, dir: &std::path::Path) -> Result<Proc> {
    let args = [
        "gateway".to_string(),
        "--lan".into(),
        "lan".into(),
        "--via".into(),
        SocketAddrV4::new(SERVER_ADDR, ends::PROXY_PORT).to_string(),
        "--trusted".into(),
        "trusted".into(),
        "--untrusted".into(),
        "untrusted".into(),
    ];
    let mut p = Proc::spawn(
        lab,
        Host::Client,
        nena,
        &args,
        &[("RUST_LOG", "warn,nena_transport::proxy::gateway::udp=info")],
        dir.join("gateway.log"),
        "nena gateway",
    )?;
    p.wait_output(" listening on ")?;
    Ok(p)
}

/// The server's side of a fetch: [`FETCH_BYTES`] of [`byte_at`].
fn serve_fetch(mut c: TcpStream) {
    let mut buf = vec![0u8; 64 << 10];
    let mut at = 0;
    while at < FETCH_BYTES {
        let n = buf.len().min(FETCH_BYTES - at);
        for (i, b) in buf[..n].iter_mut().enumerate() {
            *b = byte_at(at + i);
        }
        if c.write_all(&buf[..n]).is_err() {
            return;
        }
        at += n;
    }
}

/// One fetch by the other host, every byte checked: its seconds.
fn fetch(lab: &Lab) -> Result<f64> {
    lab.run_in(Host::Lan, || -> Result<f64> {
        let started = Instant::now();
        let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
        s.bind(&SockAddr::from(SocketAddrV4::new(OTHER, 0)))?;
        s.set_read_timeout(Some(Duration::from_secs(60)))?;
        s.connect_timeout(
            &SockAddr::from(SocketAddrV4::new(SERVER_ADDR, FETCH_PORT)),
            Duration::from_secs(10),
        )?;
        let mut c: TcpStream = s.into();
        let mut buf = vec![0u8; 256 << 10];
        let mut at = 0;
        loop {
            let n = c.read(&mut buf)?;
            if n == 0 {
                break;
            }
            if let Some(i) = (0..n).find(|&i| buf[i] != byte_at(at + i)) {
                bail!("byte {} differs", at + i);
            }
            at += n;
        }
        if at != FETCH_BYTES {
            bail!("{at} bytes of {FETCH_BYTES}");
        }
        Ok(started.elapsed().as_secs_f64())
    })?
}

/// A DNS query (A, [`NAME`]) with `id` for `name`.
fn query(id: u16, name: &str) -> Vec<u8> {
    let mut q = Vec::with_capacity(64);
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

/// Tries of a lookup, each given [`TRY_WITHIN`] (as a stub resolver asks again).
const TRIES: u32 = 5;
const TRY_WITHIN: Duration = Duration::from_secs(1);

/// One lookup by the other host, its answer checked (ID, no error, an address): its
/// seconds from the first try. A query or answer lost (a datagram dropped under the spray)
/// is asked again after [`TRY_WITHIN`], as a stub resolver does, and its time counts.
fn resolve(lab: &Lab) -> Result<f64> {
    lab.run_in(Host::Lan, || -> Result<f64> {
        let s = UdpSocket::bind(SocketAddrV4::new(OTHER, 0))?;
        s.set_read_timeout(Some(TRY_WITHIN))?;
        let id = (std::process::id() as u16) ^ 0x5a5a;
        let started = Instant::now();
        let mut buf = [0u8; 1500];
        let mut tries = 0;
        let n = loop {
            s.send_to(&query(id, NAME), SocketAddr::from((RESOLVER, 53)))?;
            tries += 1;
            match s.recv(&mut buf) {
                Ok(n) => break n,
                Err(e) if tries < TRIES => log::info!("lookup try {tries}: {e}; asked again"),
                Err(e) => return Err(e).context(format!("no answer to {TRIES} tries")),
            }
        };
        let took = started.elapsed().as_secs_f64();
        if n < 12 || buf[..2] != id.to_be_bytes() {
            bail!("an answer that is not the query's");
        }
        if buf[3] & 0xf != 0 || u16::from_be_bytes([buf[6], buf[7]]) == 0 {
            bail!("answered rcode {} with no address", buf[3] & 0xf);
        }
        Ok(took)
    })?
}

/// The sprayer, in the LAN host: [`SPRAY_RATE`] datagrams a second from [`SPRAYER`] until
/// `stop`, counted in `sent`.
fn spray(stop: &AtomicBool, sent: &AtomicU64) -> Result<()> {
    let s = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::UDP))?;
    s.bind(&SockAddr::from(SocketAddrV4::new(SPRAYER, 0)))?;
    let (target, resolver) = (
        SockAddr::from(SocketAddrV4::new(SERVER_ADDR, 0)),
        SockAddr::from(SocketAddrV4::new(RESOLVER, 0)),
    );
    let (mut n, mut port, started) = (0u64, 1024u16, Instant::now());
    let mut rng = 0x9e3779b97f4a7c15u64;
    let mut next = || {
        // xorshift: random enough for names and ports.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..50 {
            let (sport, dport, payload, to) = if n % 10 == 9 {
                let r = next();
                let name: String = (0..12)
                    .map(|i| (b'a' + ((r >> (i * 5)) % 26) as u8) as char)
                    .collect();
                let q = query(r as u16, &format!("{name}.example.test"));
                (1024 + (r >> 40) as u16 % 64000, 53u16, q, &resolver)
            } else {
                let p = format!("spray {n}").into_bytes();
                port = if port == 65535 { 1024 } else { port + 1 };
                (port, 9, p, &target)
            };
            let mut d = Vec::with_capacity(8 + payload.len());
            d.extend_from_slice(&sport.to_be_bytes());
            d.extend_from_slice(&dport.to_be_bytes());
            d.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
            // IPv4 lets the checksum be 0 (none).
            d.extend_from_slice(&[0, 0]);
            d.extend_from_slice(&payload);
            s.send_to(&d, to)?;
            n += 1;
        }
        sent.store(n, Ordering::Relaxed);
        let ahead =
            Duration::from_secs_f64(n as f64 / SPRAY_RATE as f64).saturating_sub(started.elapsed());
        std::thread::sleep(ahead);
    }
    Ok(())
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

/// The gateway's memory peak, from /proc/PID/status.
fn vm_hwm_kib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmHWM in the gateway's status")
}

/// The human table.
pub fn table(r: &HostileReport) -> String {
    let mut s = format!(
        "the other LAN host's {} MB fetch and lookup, medians of {} and {}: calm gateway, then \
         one LAN host spraying {} datagrams a second ({} sent in {:.1} s)\n",
        r.fetch_bytes >> 20,
        r.reps,
        r.calm.dns_ms.len(),
        r.spray_rate,
        r.sprayed,
        r.spray_s
    );
    s += &format!(
        "  calm    fetch {:>7.3} s   lookup {:>8.2} ms\n  spray   fetch {:>7.3} s   lookup {:>8.2} ms\n",
        r.calm.fetch_median_s, r.calm.dns_median_ms, r.spray.fetch_median_s, r.spray.dns_median_ms
    );
    for t in &r.targets {
        s += &format!(
            "  {:<36} {:>6.3}  (target <= {})  {}\n",
            t.name,
            t.value,
            t.target,
            if t.pass { "PASS" } else { "FAIL" }
        );
    }
    s += &format!(
        "  gateway memory peak (VmHWM) {} KiB\n  gateway bounds: {}\n  {}; {}; load {} -> {}\n",
        r.gateway_vm_hwm_kib,
        r.bounds,
        r.cpu,
        r.kernel,
        r.loadavg_start.trim(),
        r.loadavg_end.trim()
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_is_a_dns_query_for_its_name() {
        let q = query(0x4242, "www.example.test");
        assert_eq!(&q[..4], &[0x42, 0x42, 0x01, 0x00]);
        assert_eq!(&q[12..16], b"\x03www");
        assert_eq!(q.len(), 12 + 18 + 4);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
