//! `nena gateway --lan IFACE --via SERVER:PORT --trusted .. --untrusted ..`: argument
//! parsing and the startup lines; the work is in nena-transport's `gateway`.
use super::transfer::{
    announce_with, check_client, counters, labels, parse_addr, parse_grace, parse_server,
    start_metrics, ClientCommon, ConfigFile,
};
use crate::exit::CmdResult;
use crate::runtime::Threads;
use nena_transport::ops::metrics::Role;
use nena_transport::proxy::gateway;
use nena_transport::proxy::ProxyLimits;
use nena_transport::resolve::ServerAddr;
use std::net::SocketAddr;
use std::time::Duration;

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Udp {
    Carry,
    Block,
}

#[derive(clap::Args, Debug)]
pub struct GatewayArgs {
    /// A LAN interface whose hosts' traffic nena carries (repeatable). Nothing is forwarded
    /// from or to it around nena while the gateway runs, nor after it is killed, until the
    /// next start.
    #[arg(long = "lan", value_name = "IFACE", required = true)]
    pub lan: Vec<String>,
    /// UDP other than DNS: carry (through nena, one session per LAN socket; the proxy
    /// server sends it on within --allow) or block (refused: QUIC falls back to TCP). DNS
    /// is always answered through nena by the proxy server's resolver.
    #[arg(long, value_enum, default_value = "carry")]
    pub udp: Udp,
    /// The `nena proxy server` (run with --allow) that connects to the LAN hosts'
    /// destinations (a name is resolved only through a trusted interface).
    #[arg(long, value_name = "SERVER:PORT", value_parser = parse_server)]
    pub via: ServerAddr,
    /// Sessions carried at once (more wait in the listen backlog).
    #[arg(long, default_value = "4096")]
    pub max_sessions: usize,
    /// nena sessions being opened at once.
    #[arg(long, default_value = "64")]
    pub max_connecting: usize,
    /// nena sessions kept open ahead of the LAN's next connections (handshake done, each
    /// taken by one connection and replaced; none kept more than 5 s): a connection then
    /// waits for no handshake. 0: every connection opens its own when it comes.
    #[arg(long, value_name = "N", default_value = "8")]
    pub warm: usize,
    /// On SIGTERM or Ctrl-C, let the sessions in progress go on for up to SECS seconds;
    /// those left are then reset on both sides. Default 0: at once.
    #[arg(long, value_name = "SECS", default_value = "0", value_parser = parse_grace)]
    pub grace: Duration,
    /// Serve OpenMetrics text at http://ADDR:PORT/metrics (docs/OPERATIONS.md).
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_addr)]
    pub metrics: Option<SocketAddr>,
    #[command(flatten)]
    pub caps: super::gateway_caps::CapsArgs,
    #[command(flatten)]
    pub threads: Threads,
    #[command(flatten)]
    pub common: ClientCommon,
    #[command(flatten)]
    pub config: ConfigFile,
}

pub fn gateway(a: GatewayArgs) -> CmdResult {
    a.config.log();
    nena_transport::server_keys::first_contact_at_info();
    check_client(&a.common)?;
    let opts = a.common.options(&a.via, false)?;
    if opts.modes.contains(&nena_proto::Mode::KatoMpc) {
        return Err(crate::exit::Exit::usage(anyhow::anyhow!(
            "--mode kato-mpc is for one connection at a time (send, get, perf); the gateway \
             offers aead, stream, kato or plain"
        )));
    }
    let counters = counters(a.metrics, Role::Gateway);
    let limits = ProxyLimits {
        max_sessions: a.max_sessions,
        max_connecting: a.max_connecting,
        grace: a.grace,
        token: None,
        metrics: counters.as_ref().map(|c| c.1.clone()),
    };
    let what = format!(
        "nena gateway (LAN {}; offering {}; to {})",
        a.lan.join(", "),
        labels(&opts.modes),
        opts.remote
    );
    a.threads.block_on(async {
        let at = start_metrics(&counters).await?;
        let udp = match a.udp {
            Udp::Carry => gateway::UdpMode::Carry,
            Udp::Block => gateway::UdpMode::Block,
        };
        gateway::run(a.lan.clone(), udp, a.warm, opts, limits, a.caps.caps(), |plan| {
            let v6 = if plan.v6 { " and [::1]" } else { "" };
            announce_with(
                &what,
                SocketAddr::new([127, 0, 0, 1].into(), plan.tcp_port),
                at,
            );
            let udp = match plan.udp_port {
                Some(_) => "other UDP carried",
                None => "other UDP refused",
            };
            log::info!(
                "TCP from the LAN goes to 127.0.0.1{v6}:{}, DNS to port {} (TPROXY), {udp}; forwarding from and to the LAN is dropped",
                plan.tcp_port,
                plan.dns_port.unwrap_or(0)
            );
        })
        .await
    })??;
    Ok(())
}
