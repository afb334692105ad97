//! The bulk variant of `nena bench realtime`: a [`UDP_MBIT`] Mbit/s UDP stream (iperf3,
//! 1400-byte datagrams) for a few seconds from the client host straight over the trusted
//! link (bound to its address), then the same from the LAN host through `nena gateway`, in
//! the bench's lab with the WLAN at 0% loss; the receiver's loss of each, what the gateway
//! loses beyond the straight stream, and the gateway's CPU per GB carried (its process's
//! CPU clock over the stream, over the bytes the receiver got). The loss verdict is
//! `nena bench peers`' (crates/bench/src/peers/udp.rs): less than 1 point beyond.

use crate::host::process_cpu_seconds;
use crate::peers::udp::{self, UdpRun, UDP_MBIT};
use anyhow::{Context, Result};
use nena_lab::{Host, Lab, Link};
use serde::Serialize;
use std::net::SocketAddrV4;
use std::path::Path;

/// The bulk stream's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Bulk {
    pub seconds: u32,
    pub target_mbit_s: u64,
    pub straight: UdpRun,
    pub gateway: UdpRun,
    /// Lost percent through the gateway minus straight.
    pub beyond_percent: f64,
    /// The gateway's CPU seconds over its stream, and per GB the receiver got.
    pub gateway_cpu_s: f64,
    pub gateway_gb: f64,
    pub gateway_cpu_s_per_gb: f64,
    /// Beyond < [`udp::LOSS_TARGET_PERCENT`].
    pub pass: bool,
}

/// The stream straight over the trusted link, then through the gateway (`gateway_pid`).
pub fn run(
    lab: &Lab,
    iperf3: &Path,
    to: SocketAddrV4,
    seconds: u32,
    gateway_pid: u32,
    log: &Path,
) -> Result<Bulk> {
    let _server = udp::server(lab, iperf3, to, log)?;
    let trusted = Link::Trusted.edge().addr;
    let straight = udp::stream_from(lab, Host::Client, Some(trusted), iperf3, to, seconds, 1)
        .context("the bulk stream straight over the trusted link")?;
    let cpu0 = process_cpu_seconds(gateway_pid).context("the gateway's CPU clock")?;
    let gateway = udp::stream(lab, Host::Lan, iperf3, to, seconds, 1)
        .context("the bulk stream through the gateway")?;
    let cpu1 = process_cpu_seconds(gateway_pid).context("the gateway's CPU clock")?;
    let r = udp::summarize(vec![gateway.clone()], vec![straight.clone()]);
    let gateway_gb = gateway.received_mbit_s * 1e6 / 8.0 * gateway.seconds / 1e9;
    let gateway_cpu_s = cpu1 - cpu0;
    Ok(Bulk {
        seconds,
        target_mbit_s: UDP_MBIT,
        straight,
        gateway,
        beyond_percent: r.beyond_percent,
        gateway_cpu_s,
        gateway_gb,
        gateway_cpu_s_per_gb: if gateway_gb > 0.0 {
            gateway_cpu_s / gateway_gb
        } else {
            f64::NAN
        },
        pass: r.pass,
    })
}
