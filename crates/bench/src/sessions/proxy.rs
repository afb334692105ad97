//! The proxy pair of `nena bench sessions` ([`super::Against::Proxy`]): an echo target (plain
//! TCP) and `nena proxy server --allow` it in the server host, `nena proxy client --socks5`
//! in the client host, and every application connection made by this process on a thread
//! inside the client host: a SOCKS5 CONNECT to the echo target, then a payload distinct per
//! session, read back whole.

use super::measured::{
    footprint, gather, read_counter, start_echo, tcp_mem_kib, verify_closings, Footprint, Measured,
    SessionsOptions, ECHO_PORT, METRICS_PORT, PROBE_PAYLOAD, SERVER_PORT, SOCKS_PORT,
};
use crate::progress::Progress;
use anyhow::{anyhow, bail, Context, Result};
use nena_lab::{start_nena, Host, Lab};
use nena_transport::baseline::load::session_payload;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The proxy pair's run in `lab`: the echo target, both proxies, the application
/// connections from a thread in the client host.
pub(super) fn measure(
    lab: &Lab,
    opts: &SessionsOptions,
    mut progress: impl FnMut(&str),
) -> Result<Measured> {
    let server_ip = match lab.server_addr() {
        std::net::IpAddr::V4(a) => a,
        std::net::IpAddr::V6(_) => bail!("the bench lab's server has no IPv4 address"),
    };
    let echo = SocketAddrV4::new(server_ip, ECHO_PORT);
    let _echo = start_echo(lab, echo, opts.timeout * 3 + Duration::from_secs(120))?;

    let most = (opts.sessions + opts.probes + 64).to_string();
    let proxy = format!("{server_ip}:{SERVER_PORT}");
    let allow = format!("{server_ip}/32:{ECHO_PORT}");
    let socks = SocketAddr::from((Ipv4Addr::LOCALHOST, SOCKS_PORT));
    let quiet = [("RUST_LOG", "warn")];
    let metrics = SocketAddr::from((Ipv4Addr::LOCALHOST, METRICS_PORT)).to_string();
    let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let server = start_nena(
        lab,
        Host::Server,
        &opts.nena,
        &args(&[
            "proxy",
            "server",
            "--listen",
            &proxy,
            "--allow",
            &allow,
            "--mode",
            &opts.mode,
            "--max-sessions",
            &most,
            "--metrics",
            &metrics,
        ]),
        &quiet,
    )?;
    let client = start_nena(
        lab,
        Host::Client,
        &opts.nena,
        &args(&[
            "proxy",
            "client",
            "--socks5",
            &socks.to_string(),
            "--to",
            &proxy,
            "--trusted",
            "trusted",
            "--untrusted",
            "untrusted",
            "--mode",
            &opts.mode,
            "--max-sessions",
            &most,
            "--metrics",
            &metrics,
            // A session per application connection: the probes time a new session's
            // opening, not a session given back by the probe before.
            "--no-reuse",
        ]),
        &quiet,
    )?;
    let pids = (client.pid(), server.pid());

    progress(&format!(
        "{} sessions through a SOCKS5 proxy pair in {}",
        opts.sessions, opts.mode
    ));
    let run_opts = opts.clone();
    let m = lab.run_in(Host::Client, move || -> Result<Measured> {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?
            .block_on(load(&run_opts, socks, echo, pids))
    })??;

    // What the proxies counted, read before anything about the load is judged.
    let retried_openings = read_counter(
        lab,
        Host::Client,
        "nena_retried_openings_total",
        &mut progress,
    );
    let server_integrity_failures = read_counter(
        lab,
        Host::Server,
        "nena_integrity_failures_total",
        &mut progress,
    );
    Ok(Measured {
        retried_openings,
        server_integrity_failures,
        ..m
    })
}

/// The phases, from inside the client host: the idle probes, the load, the probes under
/// load, the load's close; the proxies' footprints between.
async fn load(
    opts: &SessionsOptions,
    socks: SocketAddr,
    echo: SocketAddrV4,
    (client_pid, server_pid): (u32, u32),
) -> Result<Measured> {
    let both =
        || -> Result<[Footprint; 2]> { Ok([footprint(client_pid)?, footprint(server_pid)?]) };
    // Descriptors before any session (the probes' own may still be closing after them).
    let fresh = both()?;
    let idle_opens = probe(socks, echo, opts.probes, opts.timeout)
        .await
        .context("a probe session on the idle proxy pair")?;
    let mut idle = both()?;
    for (f, before) in idle.iter_mut().zip(fresh) {
        f.fds = before.fds;
    }
    let tcp_kib_idle = tcp_mem_kib();

    // The load: every session opened, carried there and back, then held.
    let bar = Progress::stderr_if_tty("opening sessions");
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + opts.timeout;
    let gate = Arc::new(tokio::sync::Semaphore::new(opts.opening));
    let tasks: Vec<_> = (0..opts.sessions)
        .map(|i| {
            let gate = gate.clone();
            let payload = session_payload(i, opts.payload);
            tokio::spawn(async move {
                let _turn = gate.acquire_owned().await?;
                let mut s = socks_connect(socks, echo).await?;
                round_trip(&mut s, &payload).await?;
                Ok::<_, anyhow::Error>(s)
            })
        })
        .collect();
    let (held, mut errors) = gather(
        tasks,
        deadline,
        opts.timeout,
        |i| format!("session {i}: "),
        "not open",
        |i| bar.update(i as u64 + 1, opts.sessions as u64),
    )
    .await;
    bar.finish();
    let open_all = started.elapsed();
    let opened = held.len();
    let loaded = both()?;
    let tcp_kib_loaded = tcp_mem_kib();

    let loaded_opens = probe(socks, echo, opts.probes, opts.timeout)
        .await
        .context("a probe session with the load open")?;

    // Close the load: each half-closes and must see the echo end with nothing more.
    let deadline = tokio::time::Instant::now() + opts.timeout;
    let closing: Vec<_> = held
        .into_iter()
        .map(|mut s| {
            tokio::spawn(async move {
                s.shutdown().await?;
                let mut rest = Vec::new();
                s.read_to_end(&mut rest).await?;
                if !rest.is_empty() {
                    bail!("{} bytes after the echo", rest.len());
                }
                Ok(())
            })
        })
        .collect();
    let (verified, close_errors) = verify_closings(closing, deadline, opts.timeout).await;
    errors.extend(close_errors);
    errors.truncate(10);
    let after = both()?;
    Ok(Measured {
        retried_openings: None,
        server_integrity_failures: None,
        idle_opens,
        loaded_opens,
        idle,
        loaded,
        after,
        tcp_kib_idle,
        tcp_kib_loaded,
        opened,
        verified,
        open_all,
        errors,
    })
}

/// `n` sessions opened one after another: the time of each from the TCP connect to its
/// echo's last byte (the close that follows is not timed).
async fn probe(
    socks: SocketAddr,
    echo: SocketAddrV4,
    n: usize,
    timeout: Duration,
) -> Result<Vec<Duration>> {
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        let payload = session_payload(usize::MAX - i, PROBE_PAYLOAD);
        let once = async {
            let t = Instant::now();
            let mut s = socks_connect(socks, echo).await?;
            round_trip(&mut s, &payload).await?;
            let took = t.elapsed();
            s.shutdown().await?;
            let mut rest = Vec::new();
            s.read_to_end(&mut rest).await?;
            Ok::<_, anyhow::Error>(took)
        };
        let took = tokio::time::timeout(timeout, once)
            .await
            .map_err(|_| anyhow!("probe {i} took longer than {timeout:?}"))??;
        times.push(took);
    }
    Ok(times)
}

/// An application's SOCKS5 connection through the client proxy to `dst` (no
/// authentication, CONNECT to an IPv4 address), ready for data.
pub async fn socks_connect(proxy: SocketAddr, dst: SocketAddrV4) -> Result<TcpStream> {
    let s = TcpStream::connect(proxy)
        .await
        .with_context(|| format!("connecting to the SOCKS5 proxy {proxy}"))?;
    socks_connect_on(s, dst).await
}

/// [`socks_connect`] on a connection `s` to the proxy made by the caller.
pub async fn socks_connect_on(mut s: TcpStream, dst: SocketAddrV4) -> Result<TcpStream> {
    s.set_nodelay(true)?;
    s.write_all(&[5, 1, 0]).await?;
    let mut method = [0u8; 2];
    s.read_exact(&mut method)
        .await
        .context("reading the SOCKS5 method")?;
    if method != [5, 0] {
        bail!("the SOCKS5 greeting was answered with {method:?}");
    }
    let mut req = vec![5, 1, 0, 1];
    req.extend(dst.ip().octets());
    req.extend(dst.port().to_be_bytes());
    s.write_all(&req).await?;
    let mut head = [0u8; 4];
    s.read_exact(&mut head)
        .await
        .context("reading the SOCKS5 reply")?;
    if head[1] != 0 {
        bail!("the SOCKS5 CONNECT was refused with code {}", head[1]);
    }
    let bound = match head[3] {
        1 => 4 + 2,
        4 => 16 + 2,
        3 => s.read_u8().await? as usize + 2,
        t => bail!("a SOCKS5 reply with address type {t}"),
    };
    let mut rest = vec![0u8; bound];
    s.read_exact(&mut rest).await?;
    Ok(s)
}

/// Send `payload` and read it back whole (both at once), comparing.
async fn round_trip(s: &mut TcpStream, payload: &[u8]) -> Result<()> {
    let (mut r, mut w) = s.split();
    let mut back = vec![0u8; payload.len()];
    tokio::try_join!(w.write_all(payload), r.read_exact(&mut back))
        .context("carrying the payload there and back")?;
    if back != payload {
        bail!("the echo differs from what was sent");
    }
    Ok(())
}
