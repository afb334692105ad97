//! The two ends of each tunnel the peers bench compares, in the lab: nena's SOCKS5 proxy
//! pair, shadowsocks-rust's `sslocal`/`ssserver` (MPTCP by its own `--tcp-multipath`), and
//! stunnel's TLS 1.3 tunnel (not MPTCP-aware: its sockets are made MPTCP by `nena run
//! --mptcp-only`). Each end is started in its host with its output in a log file, waited
//! for until its port listens (read from the host's /proc/net/tcp), and stopped when
//! dropped (SIGTERM, so that `nena run` passes it on and removes its cgroup; SIGKILL after
//! 5 s). Also: the CPU time of a process and its descendants.

use super::variant::Variant;
use anyhow::{anyhow, bail, Context, Result};
use nena_lab::{Host, Lab};
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// The programs the bench runs.
#[derive(Debug, Clone)]
pub struct Programs {
    /// `nena` (the proxies, and `nena run --mptcp-only` for stunnel).
    pub nena: PathBuf,
    pub sslocal: PathBuf,
    pub ssserver: PathBuf,
    pub stunnel: PathBuf,
    /// iperf3, for the gateway's UDP stream.
    pub iperf3: PathBuf,
}

impl Programs {
    /// The programs `variants` need, each checked to run (`--version`), so that a missing
    /// peer is named before any lab comes up.
    pub fn check(&self, variants: &[Variant]) -> Result<()> {
        let mut need: Vec<(&Path, &str)> = Vec::new();
        for v in variants {
            match v {
                Variant::Nena | Variant::NenaPlain | Variant::NenaLan | Variant::GatewayPlain => {}
                Variant::Gateway => need.push((&self.iperf3, "iperf3")),
                Variant::ShadowsocksAes | Variant::ShadowsocksChacha => {
                    need.push((&self.sslocal, "sslocal"));
                    need.push((&self.ssserver, "ssserver"));
                }
                Variant::Stunnel => need.push((&self.stunnel, "stunnel")),
            }
        }
        for (p, name) in need {
            if find_program(p).is_none() {
                let installs = if name == "iperf3" {
                    "`make deps` installs it (scripts/install-deps.sh)"
                } else {
                    "`make peers` installs the pinned peers (scripts/install-peers.sh)"
                };
                bail!(
                    "{name} ({}) is not an executable file here; {installs}, or name yours \
                     with --{name}",
                    p.display()
                );
            }
        }
        Ok(())
    }
}

/// `program` as a file that can be run: itself when it names a path, else the first match
/// on PATH.
pub fn find_program(program: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.components().count() > 1 {
        return runnable(program).then(|| program.to_path_buf());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| runnable(p))
}

/// One end: a process in a lab host, with its output in `log`.
pub struct Proc {
    child: Child,
    what: String,
    log: PathBuf,
}

impl Proc {
    pub(crate) fn spawn(
        lab: &Lab,
        host: Host,
        program: &Path,
        args: &[String],
        env: &[(&str, &str)],
        log: PathBuf,
        what: &str,
    ) -> Result<Proc> {
        let out =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let err = out.try_clone()?;
        let child = lab
            .command(host, program, args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("starting {what} ({})", program.display()))?;
        Ok(Proc {
            child,
            what: what.to_string(),
            log,
        })
    }

    /// The process's pid (`ip netns exec` execs the program: the same process).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// An error if the process has ended, with the end of its log.
    pub fn check_running(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!(
                "{} ended ({status}); its last lines:\n{}",
                self.what,
                self.log_tail(8)
            );
        }
        Ok(())
    }

    /// The last `n` lines of the process's output so far (for an error that needs the
    /// end's side of the story).
    pub fn log_tail(&self, n: usize) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(n).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    /// What the process is, for messages.
    pub fn what(&self) -> &str {
        &self.what
    }

    /// Wait until `addr` listens in `host` (or the process ends, or `timeout` passes).
    pub(crate) fn wait_listening(
        &mut self,
        lab: &Lab,
        host: Host,
        addr: SocketAddrV4,
    ) -> Result<()> {
        self.wait_bound(lab, host, addr, Proto::Tcp)
    }

    /// Wait until a socket of `host` listens on TCP `addr` or is bound to UDP `addr` (or
    /// the process ends, or 10 s pass).
    pub(crate) fn wait_bound(
        &mut self,
        lab: &Lab,
        host: Host,
        addr: SocketAddrV4,
        proto: Proto,
    ) -> Result<()> {
        let (table, what) = match proto {
            Proto::Tcp => ("/proc/thread-self/net/tcp", "listen on"),
            Proto::Udp => ("/proc/thread-self/net/udp", "bind UDP"),
        };
        self.wait_for(&format!("{what} {addr}"), || {
            let text = lab.run_in(host, || std::fs::read_to_string(table))??;
            Ok(bound(&text, addr, proto))
        })
    }

    /// Wait until the process's output holds `needle` (its ready line).
    pub(crate) fn wait_output(&mut self, needle: &str) -> Result<()> {
        let log = self.log.clone();
        self.wait_for(&format!("say {needle:?}"), || {
            Ok(std::fs::read_to_string(&log).is_ok_and(|l| l.contains(needle)))
        })
    }

    /// Poll `ready` until it holds, failing when the process ends or 10 s pass.
    fn wait_for(&mut self, what: &str, mut ready: impl FnMut() -> Result<bool>) -> Result<()> {
        let timeout = Duration::from_secs(10);
        let deadline = Instant::now() + timeout;
        loop {
            self.check_running()?;
            if ready()? {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("{} did not {what} within {timeout:?}", self.what);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid, which is not reaped before the wait below.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A socket table of /proc/net: `tcp` (listening sockets) or `udp` (bound ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Proto {
    Tcp,
    Udp,
}

/// Whether /proc/net/tcp or udp text `table` has a socket on `addr` (or on 0.0.0.0 and its
/// port) that listens (TCP) or is bound and unconnected (UDP).
fn bound(table: &str, addr: SocketAddrV4, proto: Proto) -> bool {
    // TCP_LISTEN is 0A; an unconnected UDP socket shows TCP_CLOSE, 07.
    let want = match proto {
        Proto::Tcp => "0A",
        Proto::Udp => "07",
    };
    table.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (Some(local), Some(state)) = (f.get(1), f.get(3)) else {
            return false;
        };
        let Some((ip, port)) = local.split_once(':') else {
            return false;
        };
        let (Ok(ip), Ok(port)) = (u32::from_str_radix(ip, 16), u16::from_str_radix(port, 16))
        else {
            return false;
        };
        // The address is the __be32 printed as a host-order number.
        let ip = Ipv4Addr::from(ip.to_ne_bytes());
        *state == want && port == addr.port() && (ip == *addr.ip() || ip.is_unspecified())
    })
}

/// A tunnel's two ends, the address the application connects to, and whether it speaks
/// SOCKS5 there (else it forwards to the sink by itself).
pub struct Tunnel {
    pub variant: Variant,
    /// None while a gateway is stopped for the other gateway's turn ([`Tunnel::stop_client`]).
    pub client: Option<Proc>,
    /// How the client end is started (again, for a gateway).
    client_start: ClientStart,
    pub server: Proc,
    pub entry: SocketAddrV4,
    pub socks: bool,
    /// The host the application runs in: the client, or the LAN host behind the gateway.
    pub app_host: Host,
}

/// What starts a pair's client end: program, arguments, log and what it is.
struct ClientStart {
    program: PathBuf,
    args: Vec<String>,
    env: &'static [(&'static str, &'static str)],
    log: PathBuf,
    what: &'static str,
}

/// How long a gateway started for its turn is left before its transfer: its sessions
/// opened ahead (`--warm`, 8 by default) are opened at its start, outside the measurement.
pub const GATEWAY_SETTLE: Duration = Duration::from_secs(1);

impl Tunnel {
    /// The running client end (an error while it is stopped).
    pub fn client(&mut self) -> Result<&mut Proc> {
        let v = self.variant;
        self.client
            .as_mut()
            .ok_or_else(|| anyhow!("{v}'s client end is not running"))
    }

    /// Stops the client end (SIGTERM, waited for: a gateway removes its table first).
    pub fn stop_client(&mut self) {
        self.client = None;
    }

    /// Starts the client end again if it is stopped, and waits until it is ready.
    pub fn start_client(&mut self, lab: &Lab) -> Result<()> {
        if self.client.is_some() {
            return Ok(());
        }
        let c = &self.client_start;
        let p = Proc::spawn(
            lab,
            Host::Client,
            &c.program,
            &c.args,
            c.env,
            c.log.clone(),
            c.what,
        )?;
        self.client = Some(p);
        self.wait_client(lab)
            .with_context(|| format!("starting {}", self.variant))?;
        if self.variant.is_gateway() {
            std::thread::sleep(GATEWAY_SETTLE);
        }
        Ok(())
    }

    fn wait_client(&mut self, lab: &Lab) -> Result<()> {
        let (gateway, entry) = (self.variant.is_gateway(), self.entry);
        let c = self.client()?;
        if gateway {
            // Its table is in place when it says where it listens.
            c.wait_output("listening on")
        } else {
            c.wait_listening(lab, Host::Client, entry)
        }
    }
}

/// Ports in the lab: the sink, then two per tunnel (server end, client entry).
pub const SINK_PORT: u16 = 7410;
/// The iperf3 server's port on the server host (TCP for its control connection, UDP for
/// the gateway's stream).
pub const IPERF_PORT: u16 = 7409;
fn ports(v: Variant) -> (u16, u16) {
    let base = 7411 + 2 * Variant::ALL.iter().position(|x| *x == v).unwrap_or(0) as u16;
    (base, base + 1)
}

/// The pre-shared password of the shadowsocks pairs (a bench lab's, nothing else's).
const SS_PASSWORD: &str = "nena-bench-peers";
/// The name in the stunnel pair's self-signed certificate.
const TLS_NAME: &str = "nena-bench";

/// Start `variant`'s pair in `lab`, forwarding to the sink on `sink`, with its files (logs,
/// configuration, certificate) in `dir`; a gateway keeps `gateway_warm` sessions opened
/// ahead.
pub fn start(
    variant: Variant,
    lab: &Lab,
    programs: &Programs,
    dir: &Path,
    sink: SocketAddrV4,
    gateway_warm: usize,
) -> Result<Tunnel> {
    let server_ip = *sink.ip();
    let (server_port, entry_port) = ports(variant);
    let server_addr = SocketAddrV4::new(server_ip, server_port);
    // The SOCKS5 entry serving the LAN host listens on the client's LAN address.
    let entry_ip = match variant {
        Variant::NenaLan => nena_lab::LAN_GATEWAY_ADDR,
        _ => Ipv4Addr::LOCALHOST,
    };
    let entry = SocketAddrV4::new(entry_ip, entry_port);
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let log = |end: &str| dir.join(format!("{}-{end}.log", variant.file_stem()));
    const QUIET: &[(&str, &str)] = &[("RUST_LOG", "warn")];
    let mode = variant.nena_mode();
    let (server, client) = match variant {
        Variant::Nena | Variant::NenaPlain | Variant::NenaLan => {
            let server = nena_server(lab, programs, server_addr, &[sink], mode, log("server"))?;
            let mut args = s(&[
                "proxy",
                "client",
                "--socks5",
                &entry.to_string(),
                "--to",
                &server_addr.to_string(),
                "--trusted",
                "trusted",
                "--untrusted",
                "untrusted",
                "--mode",
                mode,
            ]);
            if variant == Variant::NenaLan {
                // The LAN host reaches the entry on the client's LAN address.
                args.push("--allow-remote-clients".into());
            }
            let client = ClientStart {
                program: programs.nena.clone(),
                args,
                env: QUIET,
                log: log("client"),
                what: "nena proxy client",
            };
            (server, client)
        }
        Variant::Gateway | Variant::GatewayPlain => {
            // The sink, and the UDP stream's iperf3 server (its control connection and its
            // datagrams both go through the gateway).
            let iperf = SocketAddrV4::new(server_ip, IPERF_PORT);
            let allow = [sink, iperf];
            let server = nena_server(lab, programs, server_addr, &allow, mode, log("server"))?;
            let client = ClientStart {
                program: programs.nena.clone(),
                args: s(&[
                    "gateway",
                    "--lan",
                    "lan",
                    "--via",
                    &server_addr.to_string(),
                    "--trusted",
                    "trusted",
                    "--untrusted",
                    "untrusted",
                    "--mode",
                    mode,
                    "--warm",
                    &gateway_warm.to_string(),
                ]),
                env: QUIET,
                log: log("client"),
                what: "nena gateway",
            };
            (server, client)
        }
        Variant::ShadowsocksAes | Variant::ShadowsocksChacha => {
            let cipher = variant.cipher();
            let common = |listen_flag: &str, listen: &str| {
                let mut a = s(&[listen_flag, listen]);
                a.extend(s(&["-m", cipher, "-k", SS_PASSWORD, "--tcp-multipath"]));
                a
            };
            let server = Proc::spawn(
                lab,
                Host::Server,
                &programs.ssserver,
                &common("-s", &server_addr.to_string()),
                &[],
                log("server"),
                "ssserver",
            )?;
            let mut args = common("-b", &entry.to_string());
            args.extend(s(&["-s", &server_addr.to_string()]));
            let client = ClientStart {
                program: programs.sslocal.clone(),
                args,
                env: &[],
                log: log("client"),
                what: "sslocal",
            };
            (server, client)
        }
        Variant::Stunnel => {
            let (cert, key) = self_signed(dir)?;
            let server_conf = dir.join("stunnel-server.conf");
            std::fs::write(
                &server_conf,
                stunnel_conf(
                    false,
                    server_addr,
                    sink,
                    &format!("cert = {}\nkey = {}\n", cert.display(), key.display()),
                ),
            )?;
            let client_conf = dir.join("stunnel-client.conf");
            std::fs::write(
                &client_conf,
                stunnel_conf(
                    true,
                    entry,
                    server_addr,
                    &format!(
                        "verifyPeer = yes\nCAfile = {}\ncheckHost = {TLS_NAME}\n",
                        cert.display()
                    ),
                ),
            )?;
            let run = |conf: &Path| {
                let mut a = s(&["run", "--mptcp-only", "--"]);
                a.push(programs.stunnel.display().to_string());
                a.push(conf.display().to_string());
                a
            };
            let server = Proc::spawn(
                lab,
                Host::Server,
                &programs.nena,
                &run(&server_conf),
                QUIET,
                log("server"),
                "stunnel (server end, under nena run --mptcp-only)",
            )?;
            let client = ClientStart {
                program: programs.nena.clone(),
                args: run(&client_conf),
                env: QUIET,
                log: log("client"),
                what: "stunnel (client end, under nena run --mptcp-only)",
            };
            (server, client)
        }
    };
    let gateway = variant.is_gateway();
    let mut pair = Tunnel {
        variant,
        client: None,
        client_start: client,
        server,
        // The LAN host connects to the sink itself; the gateway takes the connection.
        entry: if gateway { sink } else { entry },
        socks: !gateway && variant != Variant::Stunnel,
        app_host: if variant.from_lan() {
            Host::Lan
        } else {
            Host::Client
        },
    };
    pair.server
        .wait_listening(lab, Host::Server, server_addr)
        .with_context(|| format!("starting {variant}"))?;
    // One gateway at a time: the plain one is started at its turn.
    if variant != Variant::GatewayPlain {
        pair.start_client(lab)?;
    }
    Ok(pair)
}

/// `nena proxy server` (in `mode`) listening on `listen` in the server host, allowed to connect
/// to `allow` only.
fn nena_server(
    lab: &Lab,
    programs: &Programs,
    listen: SocketAddrV4,
    allow: &[SocketAddrV4],
    mode: &str,
    log: PathBuf,
) -> Result<Proc> {
    let mut args: Vec<String> = ["proxy", "server", "--listen"].map(String::from).to_vec();
    args.push(listen.to_string());
    for a in allow {
        args.push("--allow".into());
        args.push(format!("{}/32:{}", a.ip(), a.port()));
    }
    args.extend(["--mode".into(), mode.into()]);
    Proc::spawn(
        lab,
        Host::Server,
        &programs.nena,
        &args,
        &[("RUST_LOG", "warn")],
        log,
        "nena proxy server",
    )
}

/// One stunnel service in the foreground: TLS 1.3 only, AES-128-GCM (the suite nena's aead
/// mode uses on this hardware), errors only in its log.
fn stunnel_conf(client: bool, accept: SocketAddrV4, connect: SocketAddrV4, tls: &str) -> String {
    format!(
        "foreground = yes\npid =\ndebug = 3\n\n[bench]\nclient = {}\naccept = {accept}\n\
         connect = {connect}\nsslVersionMin = TLSv1.3\n\
         ciphersuites = TLS_AES_128_GCM_SHA256\n{tls}",
        if client { "yes" } else { "no" }
    )
}

/// A self-signed P-256 certificate for [`TLS_NAME`] and its key, made by the `openssl`
/// command in `dir`.
fn self_signed(dir: &Path) -> Result<(PathBuf, PathBuf)> {
    let (cert, key) = (dir.join("stunnel-cert.pem"), dir.join("stunnel-key.pem"));
    let out = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"])
        .args(["-subj", &format!("/CN={TLS_NAME}")])
        .args(["-addext", &format!("subjectAltName=DNS:{TLS_NAME}")])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdin(Stdio::null())
        .output()
        .context("running openssl to make the stunnel pair's certificate")?;
    if !out.status.success() {
        bail!(
            "openssl req failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok((cert, key))
}

/// CPU seconds (user + system, to the nanosecond) of process `root` and every process
/// descending from it, all their threads, ended ones included: each process's CPU-time
/// clock (`clock_getcpuclockid`), not /proc's utime and stime, which count in 10 ms ticks
/// (one tick is 0.16 s per GB of a 64 MiB transfer). Children already reaped are left out:
/// the ends here do not fork per connection.
pub fn tree_cpu(root: u32) -> Result<f64> {
    let mut parent = HashMap::new();
    for e in std::fs::read_dir("/proc").context("listing /proc")? {
        let Some(pid) = e?.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        // Processes may end while we read: skip what is gone.
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some(ppid) = parse_ppid(&stat) {
            parent.insert(pid, ppid);
        }
    }
    let in_tree = |mut p: u32| loop {
        if p == root {
            return true;
        }
        match parent.get(&p) {
            Some(&pp) if pp != p && pp != 0 => p = pp,
            _ => return false,
        }
    };
    let root_cpu =
        crate::host::process_cpu_seconds(root).ok_or_else(|| anyhow!("process {root} is gone"))?;
    let others: f64 = parent
        .keys()
        .filter(|p| **p != root && in_tree(**p))
        .filter_map(|p| crate::host::process_cpu_seconds(*p))
        .sum();
    Ok(root_cpu + others)
}

/// The ppid of a /proc/PID/stat line.
fn parse_ppid(stat: &str) -> Option<u32> {
    // The command name is in parentheses and may hold spaces: fields count from its end.
    let rest = stat.rsplit_once(')')?.1;
    // After the name: state, then ppid (field 4 of the line).
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The address the application asks for (SOCKS5) or is forwarded to: the sink.
pub fn sink_addr(lab: &Lab) -> Result<SocketAddrV4> {
    match lab.server_addr() {
        std::net::IpAddr::V4(ip) => Ok(SocketAddrV4::new(ip, SINK_PORT)),
        std::net::IpAddr::V6(_) => bail!("the bench lab's server has no IPv4 address"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listening_socket_is_found_by_address_and_port_only_in_listen() {
        let tcp = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:1CF4 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0\n\
   1: 020312C6:1CF3 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0\n\
   2: 00000000:1CF5 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0\n\
   3: 0100007F:1CF6 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0\n";
        let a = |ip: [u8; 4], port| SocketAddrV4::new(Ipv4Addr::from(ip), port);
        // 0x1CF4 = 7412 on 127.0.0.1; 0x1CF3 = 7411 on 198.18.3.2 (bytes C6 12 03 02).
        assert!(bound(tcp, a([127, 0, 0, 1], 7412), Proto::Tcp));
        assert!(bound(tcp, a([198, 18, 3, 2], 7411), Proto::Tcp));
        assert!(
            !bound(tcp, a([127, 0, 0, 1], 7411), Proto::Tcp),
            "wrong address"
        );
        // 0.0.0.0:7413 listens on every address.
        assert!(bound(tcp, a([198, 18, 3, 2], 7413), Proto::Tcp));
        // Established, not listening.
        assert!(!bound(tcp, a([127, 0, 0, 1], 7414), Proto::Tcp));
        assert!(!bound("", a([127, 0, 0, 1], 7412), Proto::Tcp));
        // The same lines as a UDP table: no socket is unconnected (07) there.
        assert!(!bound(tcp, a([127, 0, 0, 1], 7412), Proto::Udp));
        let udp = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
 1234: 020312C6:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1 2 0 0\n";
        assert!(bound(udp, a([198, 18, 3, 2], 53), Proto::Udp));
        assert!(!bound(udp, a([198, 18, 3, 2], 53), Proto::Tcp));
    }

    #[test]
    fn a_stat_line_gives_the_ppid_whatever_the_name() {
        let line =
            "4242 (stunnel (x) y) S 4200 4242 4200 0 -1 4194560 100 0 0 0 37 5 0 0 20 0 3 0 1 1 1";
        assert_eq!(parse_ppid(line), Some(4200));
        assert_eq!(parse_ppid("garbage"), None);
        assert_eq!(parse_ppid("1 (x)"), None);
    }

    /// Spin until this thread has used `d` of CPU (not of wall time: a loaded host may
    /// preempt it).
    fn burn(d: Duration) {
        let thread_cpu = || {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `ts` is a valid timespec to write.
            assert_eq!(
                unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) },
                0
            );
            Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
        };
        let t0 = thread_cpu();
        let mut x = 0u64;
        while thread_cpu() - t0 < d {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
    }

    #[test]
    fn the_tree_cpu_counts_below_a_tick_and_ended_threads_and_a_gone_process_is_an_error() {
        let me = std::process::id();
        let before = tree_cpu(me).unwrap();
        // 3 ms on a thread that ends: under one clock tick, and gone before the reading.
        std::thread::spawn(|| burn(Duration::from_millis(3)))
            .join()
            .unwrap();
        let after = tree_cpu(me).unwrap();
        assert!(after - before >= 0.003, "{before} -> {after}");
        assert!(tree_cpu(u32::MAX - 1).is_err());
    }

    #[test]
    fn each_variant_has_its_own_ports() {
        let mut all: Vec<u16> = Variant::ALL
            .iter()
            .flat_map(|v| {
                let (a, b) = ports(*v);
                [a, b]
            })
            .collect();
        all.extend([SINK_PORT, IPERF_PORT]);
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n);
    }
}
