//! `nena run [--via SERVER:PORT --trusted ..] -- CMD [ARGS...]`: CMD's TCP connections are
//! carried by nena without CMD knowing (or, with `--mptcp-only`, made MPTCP). Argument
//! parsing, whom CMD runs as, and the lines nena run logs; the launcher (CMD's cgroup, its
//! mount namespace, the BPF programs, the proxy and carriers, the privilege drop, the
//! watchdog, signals passed on, supervision) is nena-transport's `launch`.

use super::client::{check_client, metered_guard, ClientCommon, DatagramArgs};
use super::parse::parse_server;
use super::server::{counters, start_metrics, ControlArgs};
use crate::exit::Exit;
use anyhow::anyhow;
use nena_transport::launch::{self, CannotRun, Launch, Launcher, Why};
use nena_transport::ops::metrics::Role;
use std::ffi::OsString;

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The `nena proxy server` (run with --allow) that connects to CMD's destinations.
    /// A name is resolved only through a trusted interface (--resolver).
    #[arg(long, value_name = "SERVER:PORT", value_parser = parse_server,
          required_unless_present = "mptcp_only", conflicts_with = "mptcp_only")]
    pub via: Option<nena_transport::resolve::ServerAddr>,
    /// No nena session: the cgroup's TCP sockets just become MPTCP (like mptcpize).
    #[arg(long)]
    pub mptcp_only: bool,
    /// CMD's UDP datagrams other than DNS: carried through nena and sent on by the proxy
    /// server within its --allow rules (carry), or refused with EPERM (block: QUIC falls
    /// back to TCP). DNS is carried either way.
    #[arg(
        long,
        value_enum,
        default_value = "carry",
        conflicts_with = "mptcp_only"
    )]
    pub udp: UdpMode,
    /// Sessions carried at once.
    #[arg(long, default_value = "4096")]
    pub max_sessions: usize,
    /// nena sessions being opened at once.
    #[arg(long, default_value = "64")]
    pub max_connecting: usize,
    /// Let CMD reach the D-Bus system bus. Hidden and refused by default: systemd-resolved
    /// answers names there (org.freedesktop.resolve1) outside nena, by the resolvers of its
    /// links, the WLAN's included; with this flag a program that asks it itself leaks the
    /// names it asks for (glibc never does: nsswitch.conf is made local either way).
    #[arg(long, conflicts_with = "mptcp_only")]
    pub system_bus: bool,
    /// The user CMD runs as (a name, or a uid with a passwd entry): its uid, group,
    /// supplementary groups, HOME, USER, LOGNAME and SHELL. Default: under sudo the user
    /// who called sudo (SUDO_UID, SUDO_GID), else as nena itself (root: said once).
    #[arg(long, value_name = "NAME|UID")]
    pub user: Option<String>,
    #[command(flatten)]
    pub datagram: DatagramArgs,
    #[command(flatten)]
    pub common: ClientCommon,
    #[command(flatten)]
    pub control: ControlArgs,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub cmd: Vec<OsString>,
}

/// `--udp`: what becomes of CMD's datagrams other than DNS.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum UdpMode {
    /// Through a nena session to the proxy server, which sends them on within --allow.
    Carry,
    /// Refused (EPERM at sendmsg/connect).
    Block,
}

impl From<UdpMode> for launch::UdpMode {
    fn from(m: UdpMode) -> launch::UdpMode {
        match m {
            UdpMode::Carry => launch::UdpMode::Carry,
            UdpMode::Block => launch::UdpMode::Block,
        }
    }
}

/// `nena run`: CMD's exit status, or why it could not run.
pub fn run(a: RunArgs) -> Result<u8, Exit> {
    // Before anything else: CMD's cgroup, its mount namespace and the BPF programs on the
    // cgroup need both; the first failing call would name a symptom (a cgroup2 mount).
    use nena_transport::ops::privilege;
    privilege::require(
        "nena run",
        &[privilege::CAP_SYS_ADMIN, privilege::CAP_NET_ADMIN],
        "CMD's own cgroup, mount namespace and BPF programs",
        "run `sudo nena run ...`: CMD itself runs as the user who called sudo",
    )
    .map_err(Exit::from_missing)?;
    nena_transport::keys::first_contact_at_info();
    if !a.mptcp_only {
        check_client(&a.common)?;
    } else if a.common.token_file.is_some() {
        return Err(Exit::usage(anyhow!(
            "--token-file is for --via: with --mptcp-only no nena session carries it"
        )));
    } else if !a.common.metered.is_empty() {
        return Err(Exit::usage(anyhow!(
            "--metered is for --via: with --mptcp-only nena opens no connection of its own"
        )));
    } else if a.control.control.is_some() || a.control.status.is_some() {
        return Err(Exit::usage(anyhow!(
            "--control and --status are for --via: with --mptcp-only nena carries nothing to \
             report"
        )));
    }
    // With --via, a control socket for `nena status` (with --mptcp-only nena carries nothing).
    let control = match a.via {
        Some(_) => a.control.clone(),
        None => ControlArgs {
            no_control: true,
            ..ControlArgs::default()
        },
    };
    let counters = counters(None, &control, Role::Run);
    let via = match &a.via {
        Some(via) => {
            let mut opts = a.common.options(via, false)?;
            a.datagram.apply(&mut opts)?;
            counters.tell_client(&a.common, &opts);
            Some(launch::Via {
                opts,
                udp: a.udp.into(),
                max_sessions: a.max_sessions,
                max_connecting: a.max_connecting,
                metrics: counters.metrics.clone(),
            })
        }
        None => None,
    };
    let _metered = match &a.via {
        Some(_) => metered_guard(&a.common)?,
        None => None,
    };
    let env = |k: &str| std::env::var(k).ok();
    let euid = launch::user::euid();
    let run_as = launch::user::resolve(
        a.user.as_deref(),
        env("SUDO_UID").as_deref(),
        env("SUDO_GID").as_deref(),
        euid,
    )
    .map_err(Exit::usage)?;
    let launch = Launch {
        via,
        system_bus: a.system_bus,
        user: run_as.as_ref().map(|(r, _)| r.clone()),
        cmd: a.cmd,
    };
    let program = launch.program();
    match &run_as {
        Some((r, why)) => log::info!(
            "{program} runs as {} (uid {}, gid {}, groups {:?}; {})",
            r.name.as_deref().unwrap_or("a user without a passwd entry"),
            r.uid,
            r.gid,
            r.groups,
            match why {
                Why::Named => "--user",
                Why::Sudo => "SUDO_UID: the user who called sudo",
            }
        ),
        // Root chose root: said in the log (-v), not as a warning on every run.
        None if euid == 0 => log::info!(
            "{program} runs as root: nena run was started as root, not through sudo \
             (--user NAME runs it as another user)"
        ),
        None => {}
    }
    // Removes its cgroup (and everything else) when dropped, after the runtime is gone.
    let mut launcher = Launcher::prepare(launch).map_err(Exit::from)?;
    let result = crate::runtime::block_on(async {
        let _started = start_metrics(&counters, &format!("nena run {program}")).await?;
        let programs = launcher.attach().await?;
        log::info!("cgroup {} (programs {programs:?})", launcher.cgroup_name());
        let ended = launcher.run().await?;
        let (s, c) = (&ended.stats.run, &ended.stats);
        log::info!(
            "{program} ended ({}); connects redirected {}, handed to the proxy {}, left alone {}, \
             refused {}; sockets made MPTCP {}; DNS to the responder {} (answered through nena \
             {}, SERVFAIL {}); datagrams to the relay {} (sent on {}, replies {}, sessions {}), \
             refused {}; packets dropped at egress {}; AF_UNIX connects to resolvers refused {}",
            ended.status,
            s.redirected,
            s.handed,
            s.local,
            s.refused,
            s.mptcp,
            s.dns,
            c.dns_answered,
            c.dns_failed,
            s.udp,
            c.sent,
            c.received,
            c.sessions,
            s.udp_refused,
            s.dropped,
            s.unix_refused
        );
        Ok::<_, anyhow::Error>(ended.code())
    });
    drop(launcher);
    match result {
        Ok(Ok(code)) => Ok(code),
        Ok(Err(e)) if CannotRun::is(&e) => Err(Exit {
            code: 127,
            error: e,
        }),
        Ok(Err(e)) => Err(Exit::from(e)),
        Err(e) => Err(Exit::from(e)),
    }
}
