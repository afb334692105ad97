//! `nena proxy client|server`: argument parsing and output; the work is in
//! nena-transport's `proxy`. The options the proxies share with the transfer tools are in
//! [`super::client`] and [`super::server`].
use super::client::{check_client, metered_guard, ClientCommon, DatagramArgs};
use super::parse::{parse_addr, parse_grace, parse_server};
use super::server::{counters, labels, start_metrics, ConfigFile, ServerCommon};
use crate::exit::{CmdResult, Exit};
use crate::runtime::Threads;
use anyhow::anyhow;
use clap::Subcommand;
use nena_transport::ops::access;
use nena_transport::ops::metrics::Role;
use nena_transport::proxy::{self, ProxyLimits};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

// Parsed once per process: the client's many options make its variant the larger, which
// costs nothing here.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum ProxyCmd {
    /// Accept plain TCP and carry it over nena/MPTCP to a `nena proxy server`.
    Client(ProxyClientArgs),
    /// Accept nena/MPTCP from `nena proxy client` and forward it as plain TCP.
    Server(ProxyServerArgs),
}

#[derive(clap::Args, Debug)]
pub struct ProxyClientArgs {
    /// Plain TCP address applications connect to (every connection goes to the proxy
    /// server's --forward target).
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_addr,
          required_unless_present = "socks5", conflicts_with = "socks5")]
    pub listen: Option<SocketAddr>,
    /// Serve SOCKS5 (RFC 1928: CONNECT, and UDP ASSOCIATE for datagrams to IP addresses) on
    /// this address instead: each CONNECT and each UDP association becomes one nena session,
    /// and the proxy server (run with --allow) connects to the destination or sends the
    /// datagrams on. Datagrams to domain names and fragments are dropped.
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_addr)]
    pub socks5: Option<SocketAddr>,
    /// Require SOCKS5 username/password (RFC 1929) from the users in FILE (`user:password`
    /// per line).
    #[arg(long, value_name = "FILE", requires = "socks5")]
    pub socks_user_file: Option<PathBuf>,
    /// Let --listen/--socks5 take a non-loopback address. The entry has no authentication
    /// of its own (SOCKS5 only with --socks-user-file): every host that reaches it uses this
    /// proxy and its access token. For a LAN, `nena gateway` is the way.
    #[arg(long)]
    pub allow_remote_clients: bool,
    /// The `nena proxy server` (a name is resolved only through a trusted interface).
    #[arg(long, value_name = "SERVER:PORT", value_parser = parse_server)]
    pub to: nena_transport::resolve::ServerAddr,
    /// Sessions carried at once (more wait in the listen backlog).
    #[arg(long, default_value = "4096")]
    pub max_sessions: usize,
    /// nena sessions being opened at once (bursts of connects queue up; open sessions
    /// do not count).
    #[arg(long, default_value = "64")]
    pub max_connecting: usize,
    /// On SIGTERM or Ctrl-C, let the sessions in progress go on for up to SECS seconds;
    /// those left are then reset on both sides (an application sees an error, never a cut
    /// stream that looks complete). Default 0: at once.
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
    pub threads: Threads,
    #[command(flatten)]
    pub common: ClientCommon,
    #[command(flatten)]
    pub config: ConfigFile,
}

#[derive(clap::Args, Debug)]
pub struct ProxyServerArgs {
    /// Address to listen on for nena sessions (MPTCP).
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_addr)]
    pub listen: SocketAddr,
    /// Plain TCP target every session is forwarded to (for `proxy client --listen`).
    #[arg(long, value_name = "TARGET:PORT", value_parser = parse_addr, conflicts_with = "allow")]
    pub forward: Option<SocketAddr>,
    /// For `proxy client --socks5` (and `nena run`, `nena gateway`): connect to a requested
    /// destination, or send a datagram to it, only if this rule permits it (repeatable;
    /// domain names are resolved here and the address is checked).
    /// `198.18.0.0/15`, `198.18.3.2:80`, `198.18.0.0/15:8000-8100`, `[2001:db8::/32]:443`.
    /// Without --allow (and without --forward) every request is refused. This host itself
    /// (loopback, its own addresses, link-local with 169.254.169.254, multicast, broadcast)
    /// is reached only by a rule inside that range: `127.0.0.1:8080`, `198.18.3.2/32`.
    #[arg(long, value_name = "CIDR[:PORT[-PORT]]")]
    pub allow: Vec<nena_transport::proxy::socks::AllowRule>,
    /// Require the access token in FILE (16 to 255 bytes; surrounding whitespace ignored)
    /// at the start of every session, before anything is resolved or connected; proxy
    /// clients and `nena run` pass the same file with --token-file.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// On SIGTERM or Ctrl-C, let the sessions in progress go on for up to SECS seconds;
    /// those left are then reset on both sides (an application sees an error, never a cut
    /// stream that looks complete). Default 0: at once.
    #[arg(long, value_name = "SECS", default_value = "0", value_parser = parse_grace)]
    pub grace: Duration,
    /// Decline every offer of the datagram plane: datagram sessions then carry their
    /// datagrams inside the session (op 7). By default the plane answers on a UDP socket on
    /// the --listen address and port.
    #[arg(long)]
    pub no_datagram_plane: bool,
    #[command(flatten)]
    pub threads: Threads,
    #[command(flatten)]
    pub common: ServerCommon,
    #[command(flatten)]
    pub config: ConfigFile,
}

pub fn proxy(c: ProxyCmd) -> CmdResult {
    match c {
        ProxyCmd::Client(a) => {
            a.config.log();
            nena_transport::keys::first_contact_at_info();
            check_client(&a.common)?;
            let mut opts = a.common.options(&a.to, false)?;
            a.datagram.apply(&mut opts)?;
            let _metered = metered_guard(&a.common)?;
            let _mpc = a.common.attach_mpc(&mut opts)?;
            let limits = ProxyLimits {
                max_sessions: a.max_sessions,
                max_connecting: a.max_connecting,
                grace: a.grace,
                token: None,
                metrics: None,
                datagram_plane: false,
            };
            let (listen, entry, kind) = match (a.listen, a.socks5) {
                (Some(l), _) => (l, proxy::Entry::Plain, ""),
                (None, Some(l)) => {
                    let users = match &a.socks_user_file {
                        None => None,
                        Some(f) => {
                            let text = std::fs::read_to_string(f).map_err(|e| {
                                Exit::usage(anyhow!("cannot read {}: {e}", f.display()))
                            })?;
                            Some(
                                nena_transport::proxy::socks::Users::parse(&text)
                                    .map_err(|e| Exit::usage(anyhow!("{}: {e}", f.display())))?,
                            )
                        }
                    };
                    (l, proxy::Entry::Socks5 { users }, "SOCKS5, ")
                }
                (None, None) => unreachable!("clap requires --listen or --socks5"),
            };
            check_entry(listen, a.allow_remote_clients)?;
            let what = format!("nena proxy client ({kind}offering {})", labels(&opts.modes));
            let counters = counters(a.metrics, &a.control, Role::ProxyClient);
            counters.tell_client(&a.common, &opts);
            let limits = ProxyLimits {
                metrics: counters.metrics.clone(),
                ..limits
            };
            a.threads.block_on(async {
                let started = start_metrics(&counters, &what).await?;
                proxy::run_client_with(listen, entry, opts, limits, |addr| {
                    started.announce(&what, addr)
                })
                .await
            })??;
        }
        ProxyCmd::Server(a) => {
            a.config.log();
            let limits = ProxyLimits {
                max_sessions: a.common.max_sessions,
                max_connecting: a.common.max_sessions,
                grace: a.grace,
                token: match &a.token_file {
                    Some(p) => Some(access::load_token(p).map_err(Exit::usage)?),
                    None => None,
                },
                metrics: None,
                datagram_plane: !a.no_datagram_plane,
            };
            let counters = counters(a.common.metrics, &a.common.control, Role::ProxyServer);
            let limits = ProxyLimits {
                metrics: counters.metrics.clone(),
                ..limits
            };
            let mut accept = a.common.accept(false, limits.token.is_some())?;
            let _mpc = a.common.attach_mpc(&mut accept, a.listen)?;
            let egress = match a.forward {
                Some(f) => proxy::Egress::Forward(f),
                None => {
                    if a.allow.is_empty() {
                        log::warn!(
                            "no --forward and no --allow: every request will be refused; give \
                             --allow PREFIX:PORTS for the destinations clients may reach (e.g. \
                             --allow 0.0.0.0/0:80,443), or --forward HOST:PORT for one target"
                        );
                    }
                    proxy::Egress::Allow(nena_transport::proxy::socks::AllowList(a.allow.clone()))
                }
            };
            let what = format!("nena proxy server ({})", labels(&accept.modes));
            a.threads.block_on(async {
                let started = start_metrics(&counters, &what).await?;
                proxy::run_server_with(a.listen, egress, accept, limits, |addr| {
                    started.announce(&what, addr)
                })
                .await
            })??;
        }
    }
    Ok(())
}

/// A proxy client's entry on a non-loopback address is refused unless
/// `--allow-remote-clients` says so, and then warned about once: it has no authentication of
/// its own, so every host that reaches it would use the user's proxy and token.
fn check_entry(listen: SocketAddr, allowed: bool) -> Result<(), Exit> {
    if listen.ip().to_canonical().is_loopback() {
        return Ok(());
    }
    if !allowed {
        return Err(Exit::usage(anyhow!(
            "{listen} is not a loopback address: every host that reaches it would use this proxy \
             (and its access token) without authentication; listen on 127.0.0.1 or ::1, use \
             `nena gateway` for a LAN, or pass --allow-remote-clients"
        )));
    }
    log::warn!(
        "--allow-remote-clients: {listen} accepts connections from other hosts, without \
         authentication (SOCKS5: unless --socks-user-file); they use this proxy and its token"
    );
    Ok(())
}
