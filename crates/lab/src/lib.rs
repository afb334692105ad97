//! nena-lab: the papers' setting built from network namespaces on this machine.
//!
//! ```text
//!     client ──trusted link──┐
//!       │                    router ──server link── server
//!       └──untrusted link────┘
//! ```
//!
//! Hosts are namespaces `<prefix>-client`, `<prefix>-router`, `<prefix>-server`; links are
//! veth pairs, or TAP pairs joined by the lab's relay process when they are emulated (delay,
//! jitter, loss, outages, rate traces: [`Emulation`]), with addresses in 198.18.0.0/15 (see [`Link::edge`], [`Link::router`] and
//! `docs/LAB.md`). The lab is configured with the iproute2 tools (`ip`, `tc`), as the kernel's
//! own selftests do; every failure names the command and carries its stderr.
//!
//! [`Lab::up`] is idempotent (it reconciles an existing or half-built lab), [`Lab::down`]
//! removes everything with the prefix (namespaces, hence veths and qdiscs, and the processes
//! left inside them, such as captures), also after a crash. [`LabGuard`] tears the lab down
//! when dropped, for tests.
//!
//! Modules: `emulate` (link emulation: the sans-IO [`LinkModel`], parsers, the relay
//! process), `config` (how a lab is built), `state` (what it remembers between commands),
//! `build` (namespaces, links, routes, MPTCP settings, rates with iproute2), `guard`
//! ([`LabGuard`]), `capture`, `status`, `topology`, `rate`, `netns` and `run` (running
//! commands and code inside a namespace), `serve` (`nena serve` in the server host:
//! [`start_nena_serve`]), `interrupt` (Ctrl-C tears the lab down:
//! [`with_teardown_on_interrupt`], [`Interrupted`]), `hostns` (what every host's namespace gets), `direct` ([`DirectHosts`]: two hosts joined directly by
//! two paths, for tests of programs on one end's interfaces), `fleet` (`--servers N`: server hosts
//! sharing one address behind the router's nftables balancer), `lan` (`--lan`: a LAN host
//! behind the client, [`Host::Lan`] and [`Link::Lan`], for a gateway there), `family`
//! (`--ipv6`, `--trusted-family`, `--untrusted-family`: IPv6 and which families each link
//! carries, [`Family`]), `middlebox` (`--untrusted-nat`, `--untrusted-strip-mptcp`: the
//! router's nftables tables for the untrusted link); the operations on a running lab are here.

mod build;
mod capture;
mod config;
mod direct;
pub mod emulate;
mod family;
mod fleet;
mod guard;
mod handle;
mod hostns;
mod interrupt;
mod lan;
mod middlebox;
mod netns;
mod process;
mod rate;
mod run;
mod serve;
mod state;
mod status;
mod topology;

pub use capture::{Capture, CaptureOptions, CaptureRecord, CaptureStats};
pub use config::{validate_prefix, LabConfig, PmMode, NAT_TABLE, STRIP_TABLE};
pub use direct::{mptcp_socket, DirectHosts, DirectPath, DIRECT_PATHS};
pub use emulate::{
    Direction, Emulation, LinkEmulation, LinkModel, Loss, Outage, RateStep, RateTrace, Verdict,
};
pub use fleet::{validate_servers, FleetServer, FLEET_ADDR, FLEET_JOIN_PORT_BASE, MAX_FLEET};
pub use guard::LabGuard;
pub use handle::Lab;
pub use interrupt::{with_lab_teardown_on_interrupt, with_teardown_on_interrupt, Interrupted};
pub use lan::LanStatus;
pub use rate::{Rate, RateParseError};
pub use serve::{start_nena, start_nena_serve, NenaServer};
pub use state::state_dir;
pub use status::{FleetStatus, HostStatus, LabStatus, LinkStatus, MptcpStatus};
pub use topology::{
    End, Family, Host, Link, LAN_GATEWAY_ADDR, LAN_GATEWAY_ADDR6, LAN_HOST_ADDR, LAN_HOST_ADDR6,
    LAN_PREFIX6, PREFIX6, SERVER_ADDR, SERVER_ADDR6,
};

use anyhow::{bail, Context, Result};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use process::{netns_pids, relay_pids, terminate};
use run::{ip, netns_exec, run, run_tolerant};
use state::State;
use std::fs;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A short prefix unique to this process and call, for tests running in parallel
/// (`nt<pid>x<n>`; namespace names stay short). The first call of a process also removes the
/// labs of test processes that died without tearing theirs down (killed, or the machine's
/// session ended under them): [`reclaim_dead_test_labs`].
pub fn unique_prefix() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    static RECLAIM: std::sync::Once = std::sync::Once::new();
    RECLAIM.call_once(|| {
        for (prefix, e) in reclaim_dead_test_labs() {
            eprintln!("nena-lab: removing the lab {prefix} of a dead test process failed: {e:#}");
        }
    });
    format!(
        "nt{}x{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// The pid in a test lab's namespace name (`nt<pid>x<n>-<host>`, from [`unique_prefix`]) and
/// the lab's prefix, or None for any other name.
fn test_lab_of(netns: &str) -> Option<(u32, &str)> {
    let prefix = netns.rsplit_once('-')?.0;
    let (pid, n) = prefix.strip_prefix("nt")?.split_once('x')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((pid.parse().ok()?, prefix))
}

/// Whether no process `pid` runs (any more): what tells a dead test's leftovers (its lab
/// here, its pins elsewhere) from a live one's.
pub fn process_is_gone(pid: u32) -> bool {
    matches!(
        kill(Pid::from_raw(pid as i32), None),
        Err(nix::errno::Errno::ESRCH)
    )
}

/// Tear down every test lab (a [`unique_prefix`] name) whose process no longer runs: a test
/// binary killed with SIGKILL cannot run its [`LabGuard`]'s drop, and its namespaces would
/// stay. Labs of live processes are left alone. Returns the labs that could not be removed.
pub fn reclaim_dead_test_labs() -> Vec<(String, anyhow::Error)> {
    let Ok(dir) = fs::read_dir("/run/netns") else {
        return Vec::new();
    };
    let mut dead: Vec<String> = dir
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let (pid, prefix) = test_lab_of(&name)?;
            process_is_gone(pid).then(|| prefix.to_string())
        })
        .collect();
    dead.sort();
    dead.dedup();
    dead.into_iter()
        .filter_map(|p| Lab::down(&p).err().map(|e| (p, e)))
        .collect()
}

impl Lab {
    pub(crate) fn load_or_default(&self) -> State {
        self.load().unwrap_or_else(|_| State {
            config: LabConfig::with_prefix(&self.prefix),
            links_down: Vec::new(),
            relay_pid: None,
            generation: 0,
            fleet_out: Vec::new(),
        })
    }

    /// Build the lab (or reconcile an existing or half-built one to `cfg`).
    pub fn up(cfg: &LabConfig) -> Result<Lab> {
        validate_prefix(&cfg.prefix)?;
        let lab = Lab {
            prefix: cfg.prefix.clone(),
            state_dir: state_dir(&cfg.prefix),
        };
        fs::create_dir_all(&lab.state_dir).with_context(|| {
            format!("cannot create state directory {}", lab.state_dir.display())
        })?;
        let generation = lab.load().map_or(0, |s| s.generation) + 1;
        // With loss, outages or traces the reachability check could fail for them (an outage
        // from 0, a lost SYN): the relay starts with delay and jitter only, and the rest is
        // applied once the check passed (outages and traces count from then).
        let staged = cfg.verify
            && cfg.emulated_links().iter().any(|(_, le)| {
                Direction::BOTH.iter().any(|&d| {
                    let e = le.get(d);
                    e.loss != Loss::None || !e.outages.is_empty() || e.trace.is_some()
                })
            });
        let mut first = cfg.clone();
        if staged {
            for (link, mut le) in cfg.emulated_links() {
                for d in Direction::BOTH {
                    let e = le.get_mut(d);
                    e.loss = Loss::None;
                    e.outages.clear();
                    e.trace = None;
                }
                first.set_link_emulation(link, Some(le));
            }
        }
        let relay_pid = lab
            .build(&first, generation)
            .with_context(|| format!("building lab `{}`", cfg.prefix))?;
        let mut st = State {
            config: cfg.clone(),
            links_down: Vec::new(),
            relay_pid,
            generation,
            fleet_out: Vec::new(),
        };
        lab.save(&st)?;
        if cfg.verify {
            for link in [Link::Trusted, Link::Untrusted] {
                lab.check_path(link, Duration::from_secs(3))
                    .with_context(|| {
                        format!(
                            "lab `{}` is up but the {link} path does not work",
                            cfg.prefix
                        )
                    })?;
            }
            if cfg.lan {
                lab.check_lan(Duration::from_secs(3)).with_context(|| {
                    format!(
                        "lab `{}` is up but the LAN host does not reach the client",
                        cfg.prefix
                    )
                })?;
            }
        }
        if staged {
            st.generation += 1;
            lab.push_emulation(&st)?;
            lab.save(&st)?;
        }
        Ok(lab)
    }

    /// A handle on a lab that is up (all three namespaces exist).
    pub fn open(prefix: &str) -> Result<Lab> {
        validate_prefix(prefix)?;
        let lab = Lab {
            prefix: prefix.to_string(),
            state_dir: state_dir(prefix),
        };
        let missing: Vec<String> = Host::ALL
            .iter()
            .map(|&h| lab.netns(h))
            .filter(|n| !netns::netns_exists(n))
            .collect();
        if !missing.is_empty() {
            bail!(
                "lab `{prefix}` is not up (missing namespaces: {}); run `nena lab up`",
                missing.join(", ")
            );
        }
        Ok(lab)
    }

    /// Whether all three namespaces of the lab exist.
    pub fn is_up(prefix: &str) -> bool {
        validate_prefix(prefix).is_ok()
            && Host::ALL
                .iter()
                .all(|h| netns::netns_exists(&format!("{prefix}-{}", h.name())))
    }

    /// Remove everything belonging to the lab `prefix`: captures and other processes in its
    /// namespaces, the namespaces (the LAN host's and the fleet's too; hence veths and
    /// qdiscs) and the state directory.
    /// Idempotent; works on a half-built lab and after a crash.
    pub fn down(prefix: &str) -> Result<()> {
        validate_prefix(prefix)?;
        let dir = state_dir(prefix);
        // The relay of emulated links first: its TAP fds keep the namespaces alive.
        let state_pid = fs::read(dir.join("state.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<State>(&b).ok())
            .and_then(|s| s.relay_pid);
        terminate(&relay_pids(prefix, state_pid), Duration::from_secs(2));
        // Captures we recorded (tcpdump runs inside the namespace, but be thorough).
        let recorded: Vec<u32> = capture::records(&dir)
            .into_iter()
            .map(|(_, r)| r.pid)
            .filter(|&p| capture::is_live_tcpdump(p))
            .collect();
        terminate(&recorded, Duration::from_secs(3));
        let mut errors = Vec::new();
        let fleet = fleet::existing(prefix).into_iter().map(|(_, ns)| ns);
        let hosts = Host::ALL
            .iter()
            .chain([&Host::Lan])
            .map(|h| format!("{prefix}-{}", h.name()));
        let names: Vec<String> = hosts.chain(fleet).collect();
        // Tools of a `lab up` that was killed, still finishing a change: they go first, so
        // that none of them creates a namespace after this looked.
        terminate(&process::naming(&names), Duration::from_secs(2));
        for ns in names {
            if !netns::netns_exists(&ns) {
                continue;
            }
            match netns_pids(&ns) {
                Ok(pids) => terminate(&pids, Duration::from_secs(2)),
                Err(e) => errors.push(format!("{e:#}")),
            }
            if let Err(e) = run_tolerant(ip(None, &["netns", "del", &ns]), &["No such file"]) {
                errors.push(format!("{e:#}"));
            }
        }
        if dir.exists() {
            if let Err(e) = fs::remove_dir_all(&dir) {
                errors.push(format!("cannot remove {}: {e}", dir.display()));
            }
        }
        if !errors.is_empty() {
            bail!("lab `{prefix}` down: {}", errors.join("; "));
        }
        Ok(())
    }

    /// The lab's prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The lab's state directory.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The configuration the lab was last brought up or changed with.
    pub fn config(&self) -> LabConfig {
        self.load()
            .map(|s| s.config)
            .unwrap_or_else(|_| LabConfig::with_prefix(&self.prefix))
    }

    /// The network namespace name of a host.
    pub fn netns(&self, host: Host) -> String {
        format!("{}-{}", self.prefix, host.name())
    }

    /// Check that a host's namespace exists: a lab has [`Host::Lan`] only when built with
    /// `--lan`, and says so instead of a failing `ip netns exec`.
    pub fn require_host(&self, host: Host) -> Result<()> {
        let ns = self.netns(host);
        if netns::netns_exists(&ns) {
            return Ok(());
        }
        if host == Host::Lan {
            bail!(
                "lab `{}` has no LAN host (no namespace {ns}); run `nena lab up --lan`",
                self.prefix
            );
        }
        bail!(
            "lab `{}` is not up (missing namespace {ns}); run `nena lab up`",
            self.prefix
        );
    }

    /// A command that runs `program args...` inside a host (`ip netns exec`).
    pub fn command<I, S>(
        &self,
        host: Host,
        program: impl AsRef<std::ffi::OsStr>,
        args: I,
    ) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut c = netns_exec(&self.netns(host), program);
        c.args(args);
        c
    }

    /// Run `f` on a thread inside a host's network namespace; sockets it creates live there.
    pub fn run_in<T: Send, F: FnOnce() -> T + Send>(&self, host: Host, f: F) -> Result<T> {
        netns::run_in(&self.netns(host), f)
    }

    /// Spawn a thread inside a host's network namespace (e.g. a test server).
    pub fn spawn_in<T, F>(&self, host: Host, f: F) -> std::thread::JoinHandle<Result<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        netns::spawn_in(&self.netns(host), f)
    }

    /// The server's address a client reaches over the trusted link: 198.18.3.2, or
    /// 2001:2:0:3::2 when the trusted link carries IPv6 only ([`LabConfig::server_addr_for`]).
    pub fn server_addr(&self) -> IpAddr {
        self.config().server_addr_for(Link::Trusted)
    }

    /// The server's address a client reaches over `link` (198.18.3.2 when the link carries
    /// IPv4, else 2001:2:0:3::2).
    pub fn server_addr_for(&self, link: Link) -> IpAddr {
        self.config().server_addr_for(link)
    }

    /// Where a server in the server host listens to be reachable over both client links:
    /// [`server_addr`](Self::server_addr), or `[::]` (IPv4 and IPv6) when a client link does
    /// not carry that address's family (trusted IPv6 only with untrusted IPv4, say).
    pub fn server_listen_addr(&self, port: u16) -> SocketAddr {
        let cfg = self.config();
        let main = cfg.server_addr_for(Link::Trusted);
        let everywhere = [Link::Trusted, Link::Untrusted]
            .iter()
            .all(|&l| cfg.server_addr_for(l).is_ipv4() == main.is_ipv4());
        if everywhere {
            SocketAddr::new(main, port)
        } else {
            SocketAddr::new(IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED), port)
        }
    }

    /// The client's address on a link (198.18.1.2 trusted, 198.18.2.2 untrusted, or the
    /// link's IPv6 address, 2001:2:0:N::2, when it carries IPv6 only); for the server link,
    /// the server's address.
    pub fn client_addr(&self, link: Link) -> IpAddr {
        self.config().client_addr(link)
    }

    /// The client's addresses on a link, one per family it carries (IPv4 first).
    pub fn client_addrs(&self, link: Link) -> Vec<IpAddr> {
        let fam = self.config().family(link);
        let e = link.edge();
        let mut v = Vec::new();
        if fam.has_v4() {
            v.push(IpAddr::V4(e.addr));
        }
        if fam.has_v6() {
            v.push(IpAddr::V6(e.addr6));
        }
        v
    }

    /// Take a link down (both ends) or bring it back up (and restore its routes).
    pub fn set_link(&self, link: Link, up: bool) -> Result<()> {
        let state = if up { "up" } else { "down" };
        for end in link.ends() {
            self.require_host(end.host)?;
        }
        for end in link.ends() {
            run(ip(
                Some(&self.netns(end.host)),
                &["link", "set", "dev", end.iface, state],
            ))?;
        }
        if up {
            self.apply_routes(&self.config())?;
        }
        let mut st = self.load_or_default();
        st.links_down.retain(|&l| l != link);
        if !up {
            st.links_down.push(link);
        }
        self.save(&st)
    }

    /// Set (Some) or remove (None) the rate limit of a link, both directions.
    pub fn set_rate(&self, link: Link, rate: Option<Rate>) -> Result<()> {
        if link == Link::Lan {
            bail!("the lan link has no rate limit (only trusted, untrusted and server have)");
        }
        self.apply_rate(link, rate)?;
        let mut st = self.load_or_default();
        st.config.set_rate(link, rate);
        self.save(&st)
    }

    /// Change the emulation of one direction of a link at run time. An emulated link keeps
    /// running (the relay reloads its settings: no frame is dropped for it, the order of
    /// frames is kept); outages and traces are timed from this call when they change. A link
    /// that was a veth pair is rebuilt as an emulated TAP pair first (its connections see a
    /// short gap). Returns once the relay applied the change.
    pub fn set_emulation(&self, link: Link, direction: Direction, e: Emulation) -> Result<()> {
        if link == Link::Lan {
            bail!("the lan link cannot be emulated (only trusted, untrusted and server can)");
        }
        let mut st = self.load_or_default();
        let was = st.config.emulation(link).is_some();
        st.config.set_emulation(link, direction, e);
        st.generation += 1;
        let relay_alive = st
            .relay_pid
            .is_some_and(|p| relay_pids(&self.prefix, Some(p)).contains(&p));
        if !was || !relay_alive {
            st.relay_pid = self.build(&st.config, st.generation)?;
            st.links_down.clear();
        } else {
            self.push_emulation(&st)?;
        }
        self.save(&st)
    }

    /// Hand the relay the emulation of `st` (generation `st.generation`): the control file,
    /// SIGHUP, and wait until the relay acknowledged that generation.
    fn push_emulation(&self, st: &State) -> Result<()> {
        let pid = st.relay_pid.context("no relay recorded")?;
        emulate::relay::write_control(
            &self.state_dir,
            &emulate::relay::Control {
                generation: st.generation,
                links: st.config.emulated_links(),
            },
        )?;
        kill(Pid::from_raw(pid as i32), Signal::SIGHUP)
            .with_context(|| format!("signalling the relay {pid}"))?;
        let deadline = Instant::now() + Duration::from_secs(3);
        while emulate::relay::read_ack(&self.state_dir) != Some(st.generation) {
            if Instant::now() > deadline {
                bail!("the relay {pid} did not apply the new emulation within 3 s");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }

    /// The relay process of the emulated links, if one is recorded and running.
    pub fn relay_pid(&self) -> Option<u32> {
        let p = self.load().ok()?.relay_pid?;
        relay_pids(&self.prefix, Some(p)).contains(&p).then_some(p)
    }

    /// Start capturing a link (whole packets) to a pcap file; see [`Capture`].
    pub fn capture(&self, link: Link, file: &Path) -> Result<Capture> {
        self.capture_with(link, file, &CaptureOptions::default())
    }

    /// Start capturing a link with options (packet count, snaplen, filter).
    pub fn capture_with(&self, link: Link, file: &Path, opts: &CaptureOptions) -> Result<Capture> {
        let edge = link.edge();
        if link == Link::Lan {
            self.require_host(Host::Lan)?;
        }
        Capture::start(
            &self.netns(edge.host),
            &self.state_dir,
            link,
            edge.iface,
            file,
            opts,
        )
    }

    /// Captures recorded as running for this lab (started in the background or by a
    /// process that is gone).
    pub fn captures(&self) -> Vec<CaptureRecord> {
        capture::records(&self.state_dir)
            .into_iter()
            .filter(|(_, r)| capture::is_live_tcpdump(r.pid))
            .map(|(_, r)| r)
            .collect()
    }

    /// Stop recorded captures (of one link, or all): SIGINT so tcpdump flushes its file.
    /// Returns the records of the captures stopped, with tcpdump's counts.
    pub fn stop_captures(&self, link: Option<Link>) -> Result<Vec<(CaptureRecord, CaptureStats)>> {
        let mut stopped = Vec::new();
        for (path, r) in capture::records(&self.state_dir) {
            if link.is_some_and(|l| l != r.link) {
                continue;
            }
            if capture::is_live_tcpdump(r.pid) {
                capture::settle(&r.file);
                let _ = kill(Pid::from_raw(r.pid as i32), Signal::SIGINT);
                let deadline = Instant::now() + Duration::from_secs(5);
                while capture::is_live_tcpdump(r.pid) && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                }
                if capture::is_live_tcpdump(r.pid) {
                    let _ = kill(Pid::from_raw(r.pid as i32), Signal::SIGKILL);
                }
                let stats = capture::parse_stats(&fs::read_to_string(&r.log).unwrap_or_default());
                stopped.push((r.clone(), stats));
            }
            let _ = fs::remove_file(&path);
            let _ = fs::remove_file(&r.log);
        }
        Ok(stopped)
    }

    /// A plain TCP connection to `dst` from the client's address on `link` of `dst`'s family
    /// (for the server link: from the router's address on it), made inside that host's
    /// namespace. Fails when the link does not carry that family.
    pub fn connect(&self, link: Link, dst: SocketAddr, timeout: Duration) -> Result<TcpStream> {
        let v6 = dst.is_ipv6();
        let fam = self.config().family(link);
        if !(if v6 { fam.has_v6() } else { fam.has_v4() }) {
            bail!(
                "the {link} link of lab `{}` carries {fam} only: no source address for {dst}",
                self.prefix
            );
        }
        let (host, src) = match link {
            Link::Server => (Host::Router, link.router().addr_of(v6)),
            _ => (Host::Client, link.edge().addr_of(v6)),
        };
        self.run_in(host, move || -> std::io::Result<TcpStream> {
            let s = socket2::Socket::new(
                socket2::Domain::for_address(dst),
                socket2::Type::STREAM,
                None,
            )?;
            s.bind(&SocketAddr::new(src, 0).into())?;
            s.connect_timeout(&dst.into(), timeout)?;
            Ok(s.into())
        })?
        .with_context(|| format!("TCP connect {src} -> {dst} over the {link} link"))
    }

    /// A TCP listener on the server ([`server_addr`](Self::server_addr), port 0 = any).
    pub fn listen_on_server(&self, port: u16) -> Result<TcpListener> {
        let addr = SocketAddr::new(self.server_addr(), port);
        self.run_in(Host::Server, move || TcpListener::bind(addr))?
            .with_context(|| format!("cannot listen on {addr} in the server"))
    }

    /// Check with a TCP connection, for each family the link carries, that the server is
    /// reachable from the client's address of that family on `link` (for the server link:
    /// from the router) and that the server sees that address (or, behind the untrusted
    /// link's NAT, the router's). For the LAN link, which leads to no server,
    /// [`check_lan`](Self::check_lan): the LAN host reaches the client. Fails after
    /// `timeout`.
    pub fn check_path(&self, link: Link, timeout: Duration) -> Result<()> {
        if link == Link::Lan {
            return self.check_lan(timeout);
        }
        let cfg = self.config();
        let fam = cfg.family(link);
        for v6 in [false, true] {
            if !(if v6 { fam.has_v6() } else { fam.has_v4() }) {
                continue;
            }
            let server = Link::Server.edge().addr_of(v6);
            let listener = self
                .run_in(Host::Server, move || {
                    TcpListener::bind(SocketAddr::new(server, 0))
                })?
                .context("cannot listen on the server")?;
            listener.set_nonblocking(true)?;
            let dst = listener.local_addr()?;
            let stream = self.connect(link, dst, timeout)?;
            let src = stream.local_addr()?;
            // behind the NAT the server sees the router's address, with some port
            let natted = link == Link::Untrusted && cfg.untrusted_nat;
            let seen = Link::Server.router().addr_of(v6);
            let deadline = Instant::now() + timeout;
            loop {
                match listener.accept() {
                    Ok((_, peer)) if peer == src => break,
                    Ok((_, peer)) if natted && peer.ip() == seen => break,
                    Ok((_, peer)) => log::debug!("lab check: unexpected peer {peer}"),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e).context("accept on the server"),
                }
                if Instant::now() > deadline {
                    bail!("server did not see the connection from {src} within {timeout:?}");
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        Ok(())
    }

    /// The lab's current state, read from the system (namespaces, links, qdiscs, MPTCP).
    pub fn status(prefix: &str) -> Result<LabStatus> {
        validate_prefix(prefix)?;
        status::collect(prefix)
    }
}
