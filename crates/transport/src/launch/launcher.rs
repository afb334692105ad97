//! The [`Launcher`] guard: CMD's cgroup, mount namespace and watchdog
//! ([`Launcher::prepare`]), what carries its traffic ([`Launcher::attach`]), CMD itself started
//! in them and supervised until it ends ([`Launcher::run`]); dropped, it kills what is left
//! in the cgroup and removes it, then lets the watchdog go.

use super::namespace::{self, Namespace};
use super::traffic::{Stats, Traffic, Via};
use super::user::RunAs;
use super::watchdog::{self, Watchdog};
use anyhow::{anyhow, Result};
use nena_bpf::cgroup::{Joiner, OwnCgroup};
use nix::sys::signal::Signal;
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long CMD has to end after nena passed it a signal, before its cgroup is killed.
pub const GRACE: Duration = Duration::from_secs(5);

/// The prefix of the cgroups (and private directories) of `nena run`.
const PREFIX: &str = "nena-run";

/// What `nena run` launches, and how.
#[derive(Debug, Clone)]
pub struct Launch {
    /// `--via`: CMD's connections carried through nena; None: `--mptcp-only`.
    pub via: Option<Via>,
    /// `--system-bus`: CMD may reach the D-Bus system bus.
    pub system_bus: bool,
    /// The user CMD runs as; None: as this process.
    pub user: Option<RunAs>,
    /// The command and its arguments.
    pub cmd: Vec<OsString>,
}

impl Launch {
    /// The program, as the log names it.
    pub fn program(&self) -> String {
        Path::new(&self.cmd[0]).display().to_string()
    }
}

/// CMD's cgroup, its mount namespace's private files and its watchdog, then what carries its
/// traffic. Dropping it (on every exit, an error's included) stops the traffic, kills what
/// is left in the cgroup and removes it, and lets the watchdog go (it reads EOF and finds
/// nothing left to do).
pub struct Launcher {
    launch: Launch,
    traffic: Option<Traffic>,
    namespace: Option<Namespace>,
    refused_unix: Vec<&'static Path>,
    cgroup: OwnCgroup,
    joiner: Joiner,
    watchdog: Watchdog,
}

/// How CMD ended, and what nena did for it meanwhile.
#[derive(Debug)]
pub struct Ended {
    pub status: std::process::ExitStatus,
    pub stats: Stats,
}

impl Ended {
    /// `nena run`'s exit status: CMD's, or 128 + N when a signal N ended it.
    pub fn code(&self) -> u8 {
        match (self.status.code(), self.status.signal()) {
            (Some(c), _) => c as u8,
            (None, Some(sig)) => (128 + sig) as u8,
            _ => 1,
        }
    }
}

/// CMD could not be started (exit status 127, as a shell says).
#[derive(Debug)]
pub struct CannotRun;

impl std::fmt::Display for CannotRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the command could not be started")
    }
}

impl std::error::Error for CannotRun {}

impl CannotRun {
    /// Whether `e` says CMD could not be started.
    pub fn is(e: &anyhow::Error) -> bool {
        e.is::<CannotRun>() || e.root_cause().is::<CannotRun>()
    }
}

impl Launcher {
    /// Removes what a killed `nena run` and its watchdog left (its cgroup, killed; its
    /// temporary mount; its private files), creates CMD's cgroup, prepares its mount
    /// namespace (with `--via`) and starts the watchdog.
    pub fn prepare(launch: Launch) -> Result<Launcher> {
        for dir in nena_bpf::cgroup::remove_leftovers(PREFIX) {
            log::warn!(
                "removed {} (and what ran in it): left by a nena run that was killed",
                dir.display()
            );
        }
        namespace::remove_leftovers();
        // CMD's cgroup: killed and removed when CMD ended, or on an error (drop).
        let cgroup = OwnCgroup::create(PREFIX)?;
        let joiner = cgroup.joiner()?;
        // CMD's mount namespace (with --via: names only through nena).
        let namespace = match launch.via {
            Some(_) => Some(Namespace::prepare(launch.system_bus)?),
            None => None,
        };
        if let Some(n) = &namespace {
            log::info!("CMD's mount namespace: {}", n.describe());
        }
        let refused_unix = namespace::refused(launch.system_bus);
        // Removes the cgroup if this process is killed (then held until it exits).
        let remove: Vec<&Path> = namespace.iter().filter_map(|n| n.dir()).collect();
        let watchdog = watchdog::spawn(cgroup.dir(), cgroup.mount_dir(), &remove)?;
        log::info!(
            "watchdog {} (kills and removes the cgroup if nena run is killed)",
            watchdog.pid
        );
        Ok(Launcher {
            launch,
            traffic: None,
            namespace,
            refused_unix,
            cgroup,
            joiner,
            watchdog,
        })
    }

    /// The cgroup's directory name (`nena-run-PID-NANOS`).
    pub fn cgroup_name(&self) -> String {
        self.cgroup
            .dir()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// The cgroup's directory.
    pub fn cgroup_dir(&self) -> PathBuf {
        self.cgroup.dir().to_path_buf()
    }

    /// The watchdog's pid.
    pub fn watchdog_pid(&self) -> u32 {
        self.watchdog.pid
    }

    /// Attaches the cgroup's programs and, with `--via`, starts the proxy, the DNS responder
    /// and the datagram relay they send to, on the caller's runtime. The ids of the programs.
    pub async fn attach(&mut self) -> Result<Vec<u32>> {
        let t = Traffic::attach(
            self.cgroup.dir(),
            self.launch.via.as_ref(),
            &self.refused_unix,
        )
        .await?;
        let ids = t.prog_ids();
        self.traffic = Some(t);
        Ok(ids)
    }

    /// Starts CMD in the cgroup (and its namespace, as its user) and waits until it ends;
    /// SIGINT, SIGTERM and SIGHUP meanwhile are passed on to it, which then has [`GRACE`]
    /// before it is killed. Then what is left in the cgroup is killed, the programs are
    /// detached (once it is empty) and the carriers stopped. Fails with [`CannotRun`] when
    /// CMD cannot be started.
    pub async fn run(&mut self) -> Result<Ended> {
        let mut traffic = self
            .traffic
            .take()
            .ok_or_else(|| anyhow!("nena run: nothing attached"))?;
        let cmd = self.launch.cmd.clone();
        let mut command = tokio::process::Command::new(&cmd[0]);
        command.args(&cmd[1..]).kill_on_drop(true);
        if let Some(r) = &self.launch.user {
            command.envs(r.env());
        }
        let joiner = self.joiner.clone();
        let seccomp = traffic.seccomp_child.take();
        let enter = self.namespace.as_ref().map(|n| n.entry());
        let user = self.launch.user.as_ref().map(RunAs::privilege_drop);
        // SAFETY: only async-signal-safe calls (open, write, close, seccomp, sendmsg,
        // unshare, mount, setgroups, setresgid, setresuid, prctl) between fork and exec.
        unsafe {
            command.pre_exec(move || {
                joiner.join()?;
                // (As root: the filter needs no no_new_privs then, and it intercepts
                // socket() alone, not the calls below.)
                if let Some(c) = &seccomp {
                    c.install()?;
                }
                // Its mount namespace, while still root.
                if let Some(e) = &enter {
                    e.enter()?;
                }
                // In the cgroup: now CMD's own user (it cannot leave the cgroup as that).
                if let Some(u) = &user {
                    u.drop_privileges()?;
                }
                // CMD dies with nena, even if nena is killed with SIGKILL (its children
                // do not: they stay in the cgroup). After the change of user, which clears
                // it.
                nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
                Ok(())
            });
        }
        // Before CMD starts: a signal from now on is passed on, not fatal to nena.
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let mut hup = signal(SignalKind::hangup())?;
        let program = self.launch.program();
        let mut child = command.spawn().map_err(|e| {
            anyhow::Error::new(CannotRun).context(format!("cannot run {program}: {e}"))
        })?;
        let pid = child.id().map(|p| nix::unistd::Pid::from_raw(p as i32));
        // CMD's bind mount holds the local nsswitch.conf now.
        if let Some(n) = &mut self.namespace {
            n.forget_file();
        }
        traffic.started()?;
        let status = tokio::select! {
            s = child.wait() => s?,
            sig = async {
                tokio::select! {
                    _ = term.recv() => Signal::SIGTERM,
                    _ = int.recv() => Signal::SIGINT,
                    _ = hup.recv() => Signal::SIGHUP,
                }
            } => {
                log::info!("signal {}: passed on to {program}", sig as i32);
                if let Some(p) = pid {
                    // A signal to our own child, which has not been reaped yet.
                    let _ = nix::sys::signal::kill(p, sig);
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
        let emptied = nena_bpf::cgroup::kill_and_wait(self.cgroup.dir());
        let stats = traffic.stop(emptied).await;
        Ok(Ended { status, stats })
    }
}

impl Drop for Launcher {
    fn drop(&mut self) {
        // The traffic first, then the namespace's files, then the cgroup (killed, removed);
        // the watchdog (a field, dropped after) then reads EOF with nothing left to do.
        drop(self.traffic.take());
        drop(self.namespace.take());
        self.cgroup.remove();
    }
}
