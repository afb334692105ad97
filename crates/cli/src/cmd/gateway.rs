//! `nena gateway --lan IFACE --via SERVER:PORT --trusted .. --untrusted ..`: argument
//! parsing and the startup lines; the work is in nena-transport's `gateway`.
use super::client::{check_client, metered_guard, ClientCommon, DatagramArgs};
use super::parse::{parse_addr, parse_grace, parse_server};
use super::server::{counters, labels, start_metrics, ConfigFile};
use crate::exit::{CmdResult, Exit};
use crate::runtime::Threads;
use nena_transport::ops::metrics::Role;
use nena_transport::ops::privilege;
use nena_transport::proxy::gateway::{self, killswitch};
use nena_transport::proxy::warm::Keeping;
use nena_transport::proxy::ProxyLimits;
use nena_transport::resolve::ServerAddr;
use std::net::SocketAddr;
use std::time::Duration;

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Udp {
    Carry,
    Block,
}

/// `nena gateway [open|lock]`: the gateway itself, or its kill switch.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct GatewayCmd {
    #[command(subcommand)]
    pub action: Option<SwitchCmd>,
    #[command(flatten)]
    pub run: GatewayArgs,
}

/// The kill switch: a table of its own that drops every packet forwarded from or to the
/// LAN interfaces (and their DNS to this host), which the gateway closes at its start and
/// no exit of it removes.
#[derive(clap::Subcommand, Debug)]
pub enum SwitchCmd {
    /// Open the kill switch: the LAN interfaces are forwarded again as the host's routes and
    /// firewall say, around nena while no gateway runs. What an operator does to give up
    /// the gateway (the package's removal does it too).
    Open(OpenArgs),
    /// Close the kill switch for the LAN interfaces and exit, starting nothing: nothing of
    /// them is forwarded until `nena gateway open` (nena-gateway-lock.service runs it at
    /// boot, before the network is up). The interfaces need not exist yet.
    Lock(LockArgs),
}

#[derive(clap::Args, Debug)]
#[command(group = clap::ArgGroup::new("which").required(true))]
pub struct OpenArgs {
    /// A LAN interface to open (repeatable).
    #[arg(long = "lan", value_name = "IFACE", group = "which")]
    pub lan: Vec<String>,
    /// Every interface the switch holds (the switch's table is removed).
    #[arg(long, group = "which")]
    pub all: bool,
}

#[derive(clap::Args, Debug)]
#[command(group = clap::ArgGroup::new("which").required(true))]
pub struct LockArgs {
    /// A LAN interface to cut off (repeatable).
    #[arg(long = "lan", value_name = "IFACE", group = "which")]
    pub lan: Vec<String>,
    /// The gateway's config file: its `lan` key names the interfaces (the other keys are
    /// not read).
    #[arg(
        long = "config",
        id = "lock_config",
        value_name = "FILE",
        group = "which"
    )]
    pub config: Option<std::path::PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct GatewayArgs {
    /// A LAN interface whose hosts' traffic nena carries (repeatable). Nothing is forwarded
    /// from or to it around nena from the gateway's start on, through its stops, restarts,
    /// failures and SIGKILL, until `nena gateway open --lan IFACE` (the kill switch).
    #[arg(long = "lan", value_name = "IFACE", required = true)]
    pub lan: Vec<String>,
    /// UDP other than DNS: carry (through nena, one session per LAN socket; the proxy
    /// server sends it on within --allow) or block (refused: QUIC falls back to TCP). DNS
    /// is always answered through nena by the proxy server's resolver.
    #[arg(long, value_enum, default_value = "carry")]
    pub udp: Udp,
    /// The `nena proxy server` (run with --allow) that connects to the LAN hosts'
    /// destinations (a name is resolved only through a trusted interface).
    // Required to run the gateway; an Option only so that `open` and `lock` need not give it.
    #[arg(long, value_name = "SERVER:PORT", value_parser = parse_server, required = true)]
    pub via: Option<ServerAddr>,
    /// Sessions carried at once (more wait in the listen backlog).
    #[arg(long, default_value = "4096")]
    pub max_sessions: usize,
    /// nena sessions being opened at once.
    #[arg(long, default_value = "64")]
    pub max_connecting: usize,
    /// nena sessions kept open ahead of the LAN's next connections (handshake done, each
    /// taken by one connection and replaced): a connection then waits for no handshake.
    /// Each is replaced after 3.5 s, so that none waits more than 5 s, and only as many are
    /// kept as connections took in the last 60 s (up to N). 0: every connection opens its
    /// own when it comes.
    #[arg(long, value_name = "N", default_value = "8")]
    pub warm: usize,
    /// Sessions opened ahead kept fresh when no connection came for 60 s (each replacement
    /// costs a resumed session's opening, about 4 KB on the links; at most --warm). 0: an
    /// idle gateway keeps none, and the first connection after a pause opens its own.
    /// Default: 1, or 0 with a --metered path.
    #[arg(long, value_name = "N")]
    pub warm_idle: Option<usize>,
    /// On SIGTERM or Ctrl-C, let the sessions in progress go on for up to SECS seconds;
    /// those left are then reset on both sides. Default 0: at once.
    #[arg(long, value_name = "SECS", default_value = "0", value_parser = parse_grace)]
    pub grace: Duration,
    /// Serve OpenMetrics text at http://ADDR:PORT/metrics (docs/OPERATIONS.md).
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_addr)]
    pub metrics: Option<SocketAddr>,
    #[command(flatten)]
    pub control: super::server::ControlArgs,
    #[command(flatten)]
    pub datagram: DatagramArgs,
    #[command(flatten)]
    pub caps: super::gateway_caps::CapsArgs,
    #[command(flatten)]
    pub threads: Threads,
    #[command(flatten)]
    pub common: ClientCommon,
    #[command(flatten)]
    pub config: ConfigFile,
}

pub fn gateway(c: GatewayCmd) -> CmdResult {
    // Arguments that contradict each other are a usage error, with or without root.
    if c.action.is_none() {
        warm_keeping(&c.run)?;
    }
    // Before anything else: without CAP_NET_ADMIN neither the kill switch nor the carrying
    // table can be installed or removed, and the first nft call would say only "Operation
    // not permitted".
    privilege::require(
        "nena gateway",
        &[privilege::CAP_NET_ADMIN],
        "its nftables tables, policy routing and transparent sockets",
        "run it with sudo, or as the packaged unit (systemctl start nena-gateway)",
    )
    .map_err(Exit::from_missing)?;
    match c.action {
        Some(SwitchCmd::Open(a)) => open(a),
        Some(SwitchCmd::Lock(a)) => lock(a),
        None => run(c.run),
    }
}

fn open(a: OpenArgs) -> CmdResult {
    let which = (!a.all).then_some(a.lan.as_slice());
    let done = killswitch::open(which).map_err(|e| {
        if e.to_string().contains("is not an interface name") {
            Exit::usage(e)
        } else {
            Exit::from(e)
        }
    })?;
    let list = |v: &[String]| v.join(", ");
    match (done.opened.is_empty(), done.still_locked.is_empty()) {
        (true, true) => println!("the kill switch holds no interface: nothing to open"),
        (true, false) => println!(
            "the kill switch does not hold {}; it still holds {}",
            list(&a.lan),
            list(&done.still_locked)
        ),
        (false, true) => println!(
            "kill switch opened for {}: the LAN is forwarded as the host's routes say \
             (around nena while no gateway runs)",
            list(&done.opened)
        ),
        (false, false) => println!(
            "kill switch opened for {}; it still holds {}",
            list(&done.opened),
            list(&done.still_locked)
        ),
    }
    Ok(())
}

fn lock(a: LockArgs) -> CmdResult {
    let lan = match &a.config {
        Some(file) => lan_of_config(file).map_err(Exit::usage)?,
        None => a.lan.clone(),
    };
    killswitch::lock(&lan).map_err(|e| {
        if e.to_string().contains("is not an interface name") {
            Exit::usage(e)
        } else {
            Exit::from(e)
        }
    })?;
    println!(
        "kill switch closed for {}: nothing is forwarded from or to it until `nena gateway open`",
        lan.join(", ")
    );
    Ok(())
}

/// The `lan` key of a gateway config file.
fn lan_of_config(file: &std::path::Path) -> anyhow::Result<Vec<String>> {
    let shown = file.display();
    let text =
        std::fs::read_to_string(file).map_err(|e| anyhow::anyhow!("--config {shown}: {e}"))?;
    let table: toml::Table =
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("--config {shown}: {}", e.message()))?;
    let lan = match table.get("lan") {
        Some(toml::Value::Array(a)) => a
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<String>>>(),
        Some(toml::Value::String(s)) => Some(vec![s.clone()]),
        _ => None,
    };
    match lan {
        Some(l) if !l.is_empty() => Ok(l),
        _ => anyhow::bail!("--config {shown}: no `lan = [\"IFACE\", ..]` key"),
    }
}

/// `--warm N --warm-idle K`: K at most N; without --warm-idle, 1 kept fresh while idle, or
/// none when a path is metered (its replacements would cross it).
fn warm_keeping(a: &GatewayArgs) -> Result<Keeping, Exit> {
    let idle = a
        .warm_idle
        .unwrap_or(if a.common.metered.is_empty() { 1 } else { 0 });
    if idle > a.warm {
        return Err(Exit::usage(anyhow::anyhow!(
            "--warm-idle {idle} is more than --warm {}: an idle gateway keeps at most the \
             sessions it keeps while busy",
            a.warm
        )));
    }
    Ok(Keeping {
        idle,
        ..Keeping::new(a.warm)
    })
}

fn run(a: GatewayArgs) -> CmdResult {
    a.config.log();
    nena_transport::keys::first_contact_at_info();
    let Some(via) = &a.via else {
        return Err(Exit::usage(anyhow::anyhow!("no --via SERVER:PORT")));
    };
    // The interfaces are checked before anything is installed; the kill switch is closed
    // before anything else that can fail (a bad --via, a busy --metrics address, the
    // carrying table): from here on no exit leaves the LAN forwarded around nena.
    gateway::host::check_lan(&a.lan).map_err(Exit::usage)?;
    check_client(&a.common)?;
    gateway::host::check_lan_is_not_a_path(&a.lan, &a.common.trusted, &a.common.untrusted)
        .map_err(Exit::usage)?;
    let warm = warm_keeping(&a)?;
    killswitch::lock(&a.lan)?;
    let mut opts = a.common.options(via, false)?;
    a.datagram.apply(&mut opts)?;
    let _metered = metered_guard(&a.common)?;
    if opts.modes.contains(&nena_proto::Mode::KatoMpc) {
        return Err(crate::exit::Exit::usage(anyhow::anyhow!(
            "--mode kato-mpc is for one connection at a time (send, get, perf); the gateway \
             offers aead, stream, kato or plain"
        )));
    }
    let counters = counters(a.metrics, &a.control, Role::Gateway);
    counters.tell_client(&a.common, &opts);
    if let Some(w) = counters.watch() {
        w.tell("LAN", a.lan.join(", "));
        let lan = a.lan.clone();
        w.tell_live("kill switch", move || killswitch::state(&lan));
    }
    let limits = ProxyLimits {
        max_sessions: a.max_sessions,
        max_connecting: a.max_connecting,
        grace: a.grace,
        token: None,
        metrics: counters.metrics.clone(),
        datagram_plane: false,
    };
    let what = format!(
        "nena gateway (LAN {}; offering {}; to {})",
        a.lan.join(", "),
        labels(&opts.modes),
        opts.remote
    );
    a.threads.block_on(async {
        let started = start_metrics(&counters, &what).await?;
        let udp = match a.udp {
            Udp::Carry => gateway::UdpMode::Carry,
            Udp::Block => gateway::UdpMode::Block,
        };
        gateway::run(a.lan.clone(), udp, warm, opts, limits, a.caps.caps(), |plan| {
            let v6 = if plan.v6 { " and [::1]" } else { "" };
            started.announce(&what, SocketAddr::new([127, 0, 0, 1].into(), plan.tcp_port));
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
