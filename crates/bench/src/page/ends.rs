//! The processes of `nena bench page` in the lab: dnsmasq answering every name under
//! `example.test` with the server's address (on the server host, which names it in its own
//! resolv.conf for the proxy server's lookups), `nena proxy server --allow` the web server
//! only, and `nena gateway` on the client for the LAN host, with its `--metrics` on the
//! client's loopback. Each is waited for by an event (its socket bound, its ready line),
//! and stopped when dropped.

use crate::peers::ends::{Proc, Proto};
use anyhow::{Context, Result};
use nena_lab::{Host, Lab};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};

/// The proxy server's port on the server host.
pub const PROXY_PORT: u16 = 7100;
/// The gateway's `--metrics` port on the client's loopback.
pub const METRICS_PORT: u16 = 9471;

/// A resolv.conf for one lab host (`ip netns exec` mounts /etc/netns/NS/resolv.conf over
/// /etc/resolv.conf for what it starts), removed with its directory when dropped.
pub struct ResolvConf(PathBuf);

impl ResolvConf {
    pub fn new(lab: &Lab, host: Host, nameserver: Ipv4Addr) -> Result<ResolvConf> {
        let dir = Path::new("/etc/netns").join(lab.netns(host));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let conf = ResolvConf(dir);
        std::fs::write(
            conf.0.join("resolv.conf"),
            format!("nameserver {nameserver}\noptions timeout:1 attempts:2\n"),
        )?;
        Ok(conf)
    }
}

impl Drop for ResolvConf {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// dnsmasq on port 53 of `server` in the server host, answering `example.test` names.
pub fn dnsmasq(lab: &Lab, program: &Path, server: Ipv4Addr, dir: &Path) -> Result<Proc> {
    let mut p = Proc::spawn(
        lab,
        Host::Server,
        program,
        &super::site::dnsmasq_args(server),
        &[],
        dir.join("dnsmasq.log"),
        "dnsmasq",
    )?;
    p.wait_bound(lab, Host::Server, SocketAddrV4::new(server, 53), Proto::Udp)?;
    Ok(p)
}

/// `nena proxy server` on [`PROXY_PORT`] of `server`, allowed to reach `web` alone.
pub fn proxy_server(
    lab: &Lab,
    nena: &Path,
    server: Ipv4Addr,
    web: SocketAddrV4,
    dir: &Path,
) -> Result<Proc> {
    let listen = SocketAddrV4::new(server, PROXY_PORT);
    let args = [
        "proxy".to_string(),
        "server".into(),
        "--listen".into(),
        listen.to_string(),
        "--allow".into(),
        format!("{}/32:{}", web.ip(), web.port()),
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

/// `nena gateway` on the client for the LAN behind `lan`, to the proxy server on `server`,
/// over the lab's trusted and untrusted links; waited for until it says it listens (its
/// nftables table is in by then); `more` is appended to its arguments.
pub fn gateway(
    lab: &Lab,
    nena: &Path,
    server: Ipv4Addr,
    more: &[String],
    dir: &Path,
) -> Result<Proc> {
    let mut args = vec![
        "gateway".to_string(),
        "--lan".into(),
        "lan".into(),
        "--via".into(),
        SocketAddrV4::new(server, PROXY_PORT).to_string(),
        "--trusted".into(),
        "trusted".into(),
        "--untrusted".into(),
        "untrusted".into(),
        "--metrics".into(),
        SocketAddrV4::new(Ipv4Addr::LOCALHOST, METRICS_PORT).to_string(),
    ];
    args.extend(more.iter().cloned());
    let mut p = Proc::spawn(
        lab,
        Host::Client,
        nena,
        &args,
        &[("RUST_LOG", "warn")],
        dir.join("gateway.log"),
        "nena gateway",
    )?;
    p.wait_output(" listening on ")?;
    Ok(p)
}

/// The gateway's completed handshakes so far and their summed seconds (its `--metrics`,
/// read in the client host).
pub fn handshakes(lab: &Lab) -> Result<(u64, f64)> {
    let text = lab.run_in(Host::Client, || {
        crate::sessions::scrape_metrics(METRICS_PORT)
    })??;
    let count = crate::sessions::metric_in(&text, "nena_handshake_seconds_count").unwrap_or(0.0);
    let sum = crate::sessions::metric_in(&text, "nena_handshake_seconds_sum").unwrap_or(0.0);
    Ok((count as u64, sum))
}
