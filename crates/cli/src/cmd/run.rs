//! `nena run [--via SERVER:PORT --trusted ..] -- CMD [ARGS...]`: CMD's TCP connections are
//! carried by nena without CMD knowing. CMD runs in a cgroup (v2) of its own; BPF programs
//! attached to that cgroup (nena-bpf's `run`) send its TCP connects to a proxy in this
//! process, which asks the `nena proxy server --allow ..` at SERVER for each original
//! destination exactly as the SOCKS path does (wire op 4). `--mptcp-only` instead makes the
//! cgroup's TCP sockets MPTCP (what mptcpize does) with no nena session: with the BPF hook
//! fmod_ret/update_socket_protocol, or, where the kernel refuses tracing programs, through
//! seccomp user notification (nena-mptcp's `mptcpize`).
//!
//! With `--via`, nothing of CMD's leaves outside nena but by loopback: its DNS (UDP and TCP
//! to port 53, any address) is answered by a responder in this process through nena with
//! the proxy server's resolver (op 6); every other UDP datagram is carried by a datagram
//! relay through nena (`--udp carry`, op 7) or refused with EPERM (`--udp block`); and a
//! cgroup_skb/egress program drops any packet of the cgroup to a non-loopback destination
//! (nena-transport's `carry`, nena-bpf's `run`).
//!
//! CMD's names go nowhere else: it runs in a mount namespace of its own whose nsswitch.conf
//! names only `files`, `myhostname` and `dns`, with the AF_UNIX resolvers outside nena
//! (systemd-resolved's varlink socket, nscd, avahi) and the D-Bus system bus (systemd-
//! resolved's `org.freedesktop.resolve1`; `--system-bus` allows it) hidden, and refused
//! again by the cgroup's connect_unix program (`run_ns.rs`). `--mptcp-only` carries nothing
//! through nena and changes none of this.
//!
//! Whatever ends CMD (its own exit, a signal) or this process (SIGINT, SIGTERM, SIGHUP:
//! passed on to CMD, which gets 5 s), what is left of the cgroup is killed (`cgroup.kill`),
//! then the programs are detached and the cgroup removed. The cgroup's programs are not
//! links of this process: killed (SIGKILL, the OOM killer), it leaves them attached, so CMD's
//! processes stay without network (the proxy's ports closed, the rest dropped at egress)
//! until its watchdog (`run_watchdog.rs`) kills them and removes the cgroup; a later `nena
//! run` removes whatever a killed one and its watchdog left. `nena run` exits with CMD's
//! status (128 + N when a signal N ended it).
//!
//! CMD does not run as root unless asked: under sudo it runs as the user who called sudo,
//! with `--user NAME|UID` as that user, and plain root with neither says so once
//! (`run_as.rs`). It drops its privileges after it joined the cgroup, so its traffic is
//! carried all the same.

use super::transfer::{check_client, metered_guard, parse_server, ClientCommon};
use crate::exit::Exit;
use anyhow::{anyhow, Context};
use nena_bpf::run::{MptcpOnly, Redirect};
use nena_mptcp::mptcpize::{self, Mptcpizer};
use nena_transport::proxy::carry::relay::Relay;
use nena_transport::proxy::carry::responder::Responder;
use nena_transport::proxy::{self, OriginalDst, ProxyLimits};
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
    pub datagram: super::transfer::DatagramArgs,
    #[command(flatten)]
    pub common: ClientCommon,
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

/// The loopback sockets of CMD's UDP: the DNS responder's and, with `--udp carry`, the
/// relay's, on 127.0.0.1 and (when the proxy listens there) ::1.
struct UdpSockets {
    dns4: tokio::net::UdpSocket,
    dns6: Option<tokio::net::UdpSocket>,
    relay4: Option<tokio::net::UdpSocket>,
    relay6: Option<tokio::net::UdpSocket>,
}

impl UdpSockets {
    async fn bind(v6: bool, mode: UdpMode) -> anyhow::Result<UdpSockets> {
        use tokio::net::UdpSocket;
        let carry = mode == UdpMode::Carry;
        let dns4 = UdpSocket::bind("127.0.0.1:0")
            .await
            .context("cannot bind the DNS responder on 127.0.0.1")?;
        let six = |what: &'static str| async move {
            if !v6 {
                return None;
            }
            UdpSocket::bind("[::1]:0")
                .await
                .map_err(|e| log::info!("no IPv6 {what} (::1: {e}): refused instead"))
                .ok()
        };
        let dns6 = six("DNS responder").await;
        let relay4 = if carry {
            Some(
                UdpSocket::bind("127.0.0.1:0")
                    .await
                    .context("cannot bind the datagram relay on 127.0.0.1")?,
            )
        } else {
            None
        };
        let relay6 = if carry {
            six("datagram relay").await
        } else {
            None
        };
        Ok(UdpSockets {
            dns4,
            dns6,
            relay4,
            relay6,
        })
    }

    fn plan(&self, mode: UdpMode) -> anyhow::Result<nena_bpf::run::Udp> {
        let addr = |s: Option<&tokio::net::UdpSocket>| s.map(|s| s.local_addr()).transpose();
        Ok(nena_bpf::run::Udp {
            dns4: Some(self.dns4.local_addr()?),
            dns6: addr(self.dns6.as_ref())?,
            relay4: addr(self.relay4.as_ref())?,
            relay6: addr(self.relay6.as_ref())?,
            block: mode == UdpMode::Block,
        })
    }
}

/// How long CMD has to end after nena passed it a signal, before its cgroup is killed.
const GRACE: Duration = Duration::from_secs(5);

/// The BPF side, kept until CMD ended.
enum Attached {
    Redirect(Arc<Redirect>),
    Mptcp(MptcpOnly),
    /// `--mptcp-only` through seccomp (the kernel refused fmod_ret): answered once CMD
    /// started.
    Seccomp(Option<Mptcpizer>),
}

impl Attached {
    fn prog_ids(&self) -> Vec<u32> {
        match self {
            Attached::Redirect(r) => r.prog_ids().to_vec(),
            Attached::Mptcp(m) => m.prog_ids().to_vec(),
            Attached::Seccomp(_) => Vec::new(),
        }
    }
    /// Detach the cgroup's programs (once the cgroup is empty).
    fn detach(&self) {
        if let Attached::Redirect(r) = self {
            r.detach();
        }
    }
    fn stats(&self) -> nena_bpf::run::RunStats {
        match self {
            Attached::Redirect(r) => r.stats(),
            Attached::Mptcp(m) => m.stats(),
            Attached::Seccomp(m) => nena_bpf::run::RunStats {
                mptcp: m.as_ref().map_or(0, Mptcpizer::made),
                ..Default::default()
            },
        }
    }
}

fn status_code(s: std::process::ExitStatus) -> u8 {
    match (s.code(), s.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(sig)) => (128 + sig) as u8,
        _ => 1,
    }
}

/// `nena run`: CMD's exit status, or why it could not run.
pub fn run(a: RunArgs) -> Result<u8, Exit> {
    nena_transport::server_keys::first_contact_at_info();
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
    }
    let opts = match &a.via {
        Some(via) => {
            let mut o = a.common.options(via, false)?;
            a.datagram.apply(&mut o)?;
            Some(o)
        }
        None => None,
    };
    let _metered = match &a.via {
        Some(_) => metered_guard(&a.common)?,
        None => None,
    };
    let env = |k: &str| std::env::var(k).ok();
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    let run_as = super::run_as::resolve(
        a.user.as_deref(),
        env("SUDO_UID").as_deref(),
        env("SUDO_GID").as_deref(),
        euid,
    )
    .map_err(Exit::usage)?;
    let program = std::path::Path::new(&a.cmd[0]).display().to_string();
    match &run_as {
        Some((r, why)) => log::info!(
            "{program} runs as {} (uid {}, gid {}, groups {:?}; {})",
            r.name.as_deref().unwrap_or("a user without a passwd entry"),
            r.uid,
            r.gid,
            r.groups,
            match why {
                super::run_as::Why::Named => "--user",
                super::run_as::Why::Sudo => "SUDO_UID: the user who called sudo",
            }
        ),
        // Root chose root: said in the log (-v), not as a warning on every run.
        None if euid == 0 => log::info!(
            "{program} runs as root: nena run was started as root, not through sudo \
             (--user NAME runs it as another user)"
        ),
        None => {}
    }
    let run_as = run_as.map(|(r, _)| r);
    // What a `nena run` killed with its watchdog left: its cgroup (killed, removed), its
    // temporary mount, its private files.
    for dir in nena_bpf::cgroup::remove_leftovers("nena-run") {
        log::warn!(
            "removed {} (and what ran in it): left by a nena run that was killed",
            dir.display()
        );
    }
    super::run_ns::remove_leftovers();
    // CMD's cgroup: killed and removed when CMD ended, or on an error (drop).
    let mut cgroup = nena_bpf::cgroup::OwnCgroup::create("nena-run").map_err(Exit::from)?;
    let cgroup_dir = cgroup.dir().to_path_buf();
    let joiner = cgroup.joiner().map_err(Exit::from)?;
    // CMD's mount namespace (with --via: names only through nena).
    let mut namespace = match a.via {
        Some(_) => Some(super::run_ns::Namespace::prepare(a.system_bus).map_err(Exit::from)?),
        None => None,
    };
    if let Some(n) = &namespace {
        log::info!("CMD's mount namespace: {}", n.describe());
    }
    let refused_unix = super::run_ns::refused(a.system_bus);
    // Removes the cgroup if this process is killed (then held until it exits).
    let remove: Vec<&std::path::Path> = namespace.iter().filter_map(|n| n.dir()).collect();
    let watchdog =
        super::run_watchdog::spawn(&cgroup_dir, cgroup.mount_dir(), &remove).map_err(Exit::from)?;
    log::info!(
        "watchdog {} (kills and removes the cgroup if nena run is killed)",
        watchdog.pid
    );
    // The command has ended (or been stopped) when the proxy stops: nothing to wait for.
    let limits = ProxyLimits {
        max_sessions: a.max_sessions,
        max_connecting: a.max_connecting,
        grace: std::time::Duration::ZERO,
        token: None,
        metrics: None,
        datagram_plane: false,
    };
    let cmd = a.cmd.clone();
    let udp_mode = a.udp;
    let result = crate::runtime::block_on(async move {
        // The BPF programs and, with --via, the proxy they send connects to.
        let mut seccomp = None;
        let mut carriers = Carriers::default();
        let (mut attached, proxy_task) = match opts {
            Some(opts) => {
                let v4 = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .context("cannot listen on 127.0.0.1")?;
                let v6 = match tokio::net::TcpListener::bind("[::1]:0").await {
                    Ok(l) => Some(l),
                    Err(e) => {
                        log::info!("no IPv6 proxy listener (::1: {e}): IPv6 connects are refused");
                        None
                    }
                };
                let a4 = v4.local_addr()?;
                let a6 = v6.as_ref().map(|l| l.local_addr()).transpose()?;
                let udp = UdpSockets::bind(a6.is_some(), udp_mode).await?;
                let file = std::fs::File::open(&cgroup_dir)
                    .with_context(|| format!("cannot open {}", cgroup_dir.display()))?;
                let redirect = Arc::new(Redirect::attach(
                    &file,
                    Some(a4),
                    a6,
                    udp.plan(udp_mode)?,
                    &refused_unix,
                )?);
                let lookup = {
                    let r = redirect.clone();
                    OriginalDst(Arc::new(move |peer| r.take(peer)))
                };
                let shared = Arc::new(nena_transport::conn::ClientOptions {
                    buffer: nena_transport::stream::PROXY_BUF,
                    ..opts.clone()
                });
                let connecting =
                    Arc::new(tokio::sync::Semaphore::new(limits.max_connecting.max(1)));
                let dns = Arc::new(Responder::new(shared.clone(), connecting.clone(), None));
                carriers.start_dns(&dns, udp.dns4, udp.dns6);
                if udp_mode == UdpMode::Carry {
                    let r = redirect.clone();
                    let relay = Arc::new(Relay::new(
                        shared,
                        connecting,
                        None,
                        Arc::new(move |peer| r.relay_dst(peer)),
                    ));
                    carriers.start_relay(&relay, udp.relay4, udp.relay6);
                }
                let mut listeners = vec![v4];
                listeners.extend(v6);
                log::info!(
                    "proxy on {a4}{} for the cgroup, to {}",
                    a6.map(|a| format!(" and {a}")).unwrap_or_default(),
                    opts.remote
                );
                let task = tokio::spawn(proxy::serve_client(
                    listeners,
                    proxy::Entry::Redirected { lookup, dns },
                    opts,
                    limits,
                ));
                (Attached::Redirect(redirect), Some(task))
            }
            None => match MptcpOnly::attach(&cgroup_dir) {
                Ok(m) => (Attached::Mptcp(m), None),
                Err(e) => {
                    // Not a warning: seccomp gives the same result (every socket of CMD's is
                    // MPTCP, `sockets made MPTCP N` at the end), only by another road.
                    log::info!(
                        "making the sockets MPTCP through seccomp user notification (the \
                         kernel refused the fmod_ret program: {})",
                        e.root_cause()
                    );
                    log::debug!("fmod_ret: {e:#}");
                    let (parent, child) = mptcpize::pair()?;
                    seccomp = Some((parent, child));
                    (Attached::Seccomp(None), None)
                }
            },
        };
        log::info!(
            "cgroup {} (programs {:?})",
            cgroup_dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            attached.prog_ids()
        );
        let mut command = tokio::process::Command::new(&cmd[0]);
        command.args(&cmd[1..]).kill_on_drop(true);
        if let Some(r) = &run_as {
            command.envs(r.env());
        }
        let (seccomp_parent, seccomp_child) = match seccomp {
            Some((p, c)) => (Some(p), Some(c)),
            None => (None, None),
        };
        let enter = namespace.as_ref().map(|n| n.entry());
        // SAFETY: only async-signal-safe calls (open, write, close, seccomp, sendmsg,
        // unshare, mount, setgroups, setresgid, setresuid, prctl) between fork and exec.
        unsafe {
            command.pre_exec(move || {
                joiner.join()?;
                // (As root: the filter needs no no_new_privs then, and it intercepts
                // socket() alone, not the calls below.)
                if let Some(c) = &seccomp_child {
                    c.install()?;
                }
                // Its mount namespace, while still root.
                if let Some(e) = &enter {
                    e.enter()?;
                }
                // In the cgroup: now CMD's own user (it cannot leave the cgroup as that).
                if let Some(r) = &run_as {
                    r.drop_privileges()?;
                }
                // CMD dies with nena, even if nena is killed with SIGKILL (its children
                // do not: they stay in the cgroup). After the change of user, which clears
                // it.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        // Before CMD starts: a signal from now on is passed on, not fatal to nena.
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let mut hup = signal(SignalKind::hangup())?;
        let mut child = command.spawn().map_err(|e| {
            anyhow::Error::new(CannotRun).context(format!(
                "cannot run {}: {e}",
                std::path::Path::new(&cmd[0]).display()
            ))
        })?;
        let pid = child.id().map(|p| p as i32);
        // CMD's bind mount holds the local nsswitch.conf now.
        if let Some(n) = &mut namespace {
            n.forget_file();
        }
        if let Some(p) = seccomp_parent {
            attached = Attached::Seccomp(Some(p.serve().context("the seccomp listener")?));
        }
        let status = tokio::select! {
            s = child.wait() => s?,
            sig = async {
                tokio::select! {
                    _ = term.recv() => libc::SIGTERM,
                    _ = int.recv() => libc::SIGINT,
                    _ = hup.recv() => libc::SIGHUP,
                }
            } => {
                log::info!("signal {sig}: passed on to {}", std::path::Path::new(&cmd[0]).display());
                if let Some(p) = pid {
                    // SAFETY: a signal to our own child, which has not been reaped yet.
                    unsafe { libc::kill(p, sig) };
                }
                match tokio::time::timeout(GRACE, child.wait()).await {
                    Ok(s) => s?,
                    Err(_) => {
                        log::warn!("still running {GRACE:?} after the signal: killed");
                        child.kill().await?;
                        child.wait().await?
                    }
                }
            }
        };
        // What CMD left behind in the cgroup is killed before the programs go: no process
        // of the cgroup ever runs unredirected. (Not empty after 5 s: the programs stay
        // until the cgroup is removed.)
        if nena_bpf::cgroup::kill_and_wait(&cgroup_dir) {
            attached.detach();
        }
        let stats = attached.stats();
        if let Some(t) = proxy_task {
            t.abort();
            let _ = t.await;
        }
        let carried = carriers.stop().await;
        log::info!(
            "{} ended ({status}); connects redirected {}, handed to the proxy {}, left alone {}, \
             refused {}; sockets made MPTCP {}; DNS to the responder {} (answered through nena \
             {}, SERVFAIL {}); datagrams to the relay {} (sent on {}, replies {}, sessions {}), \
             refused {}; packets dropped at egress {}; AF_UNIX connects to resolvers refused {}",
            std::path::Path::new(&cmd[0]).display(),
            stats.redirected,
            stats.handed,
            stats.local,
            stats.refused,
            stats.mptcp,
            stats.dns,
            carried.dns_answered,
            carried.dns_failed,
            stats.udp,
            carried.sent,
            carried.received,
            carried.sessions,
            stats.udp_refused,
            stats.dropped,
            stats.unix_refused
        );
        drop(attached);
        Ok::<_, anyhow::Error>(status_code(status))
    });
    cgroup.remove();
    // The watchdog reads EOF when this process exits, and finds nothing left to do.
    drop(watchdog);
    match result {
        Ok(Ok(code)) => Ok(code),
        Ok(Err(e)) if e.is::<CannotRun>() || e.root_cause().is::<CannotRun>() => Err(Exit {
            code: 127,
            error: e,
        }),
        Ok(Err(e)) => Err(Exit::from(e)),
        Err(e) => Err(Exit::from(e)),
    }
}

/// The tasks of the DNS responder and the datagram relay, stopped when CMD ended.
#[derive(Default)]
struct Carriers {
    tasks: Vec<tokio::task::JoinHandle<anyhow::Result<()>>>,
    dns: Option<Arc<Responder>>,
    relay: Option<Arc<Relay>>,
}

/// What they did (the final log line).
struct Carried {
    dns_answered: u64,
    dns_failed: u64,
    sent: u64,
    received: u64,
    sessions: u64,
}

impl Carriers {
    fn start_dns(
        &mut self,
        dns: &Arc<Responder>,
        v4: tokio::net::UdpSocket,
        v6: Option<tokio::net::UdpSocket>,
    ) {
        for s in std::iter::once(v4).chain(v6) {
            self.tasks.push(tokio::spawn(dns.clone().serve_udp(s)));
        }
        self.dns = Some(dns.clone());
    }

    fn start_relay(
        &mut self,
        relay: &Arc<Relay>,
        v4: Option<tokio::net::UdpSocket>,
        v6: Option<tokio::net::UdpSocket>,
    ) {
        for s in v4.into_iter().chain(v6) {
            self.tasks.push(tokio::spawn(relay.clone().serve(s)));
        }
        self.relay = Some(relay.clone());
    }

    async fn stop(self) -> Carried {
        for t in self.tasks {
            t.abort();
            if let Ok(Err(e)) = t.await {
                log::warn!("{e:#}");
            }
        }
        if let Some(r) = &self.relay {
            // Each flow ends its session cleanly (the proxy server logs what it carried).
            r.wind_down(Duration::from_secs(2)).await;
        }
        if let Some(d) = &self.dns {
            // So do the DNS sessions kept for further queries.
            d.close(Duration::from_secs(2)).await;
        }
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Carried {
            dns_answered: self.dns.as_ref().map_or(0, |d| n(&d.stats.answered)),
            dns_failed: self.dns.as_ref().map_or(0, |d| n(&d.stats.failed)),
            sent: self.relay.as_ref().map_or(0, |r| n(&r.stats.sent)),
            received: self.relay.as_ref().map_or(0, |r| n(&r.stats.received)),
            sessions: self.relay.as_ref().map_or(0, |r| n(&r.stats.sessions)),
        }
    }
}

/// CMD could not be started (exit status 127, as a shell says).
#[derive(Debug)]
struct CannotRun;

impl std::fmt::Display for CannotRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the command could not be started")
    }
}

impl std::error::Error for CannotRun {}
