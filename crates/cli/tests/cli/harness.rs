//! Shared helpers of the CLI's integration tests: `nena` on this host, a lab per test,
//! `nena` processes inside its hosts (killed on drop) and their output, echo servers,
//! exchanges through a proxy, scratch directories.
#![allow(dead_code)]

use nena_lab::{unique_prefix, Host, Lab, LabConfig, LabGuard};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const NENA: &str = env!("CARGO_BIN_EXE_nena");

/// `nena ARGS` on this host (no lab), stdin closed; its output.
pub fn nena(args: &[&str]) -> Output {
    nena_cmd()
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run nena")
}

/// A `nena` command on this host, to be given arguments, environment and stdio.
pub fn nena_cmd() -> Command {
    Command::new(NENA)
}

/// `nena bench ARGS` (with `--json`) on this host, which must succeed: its report, and the
/// client namespace of the lab it built, which it names `PREFIX<its pid>` (for checking
/// that the lab is gone).
pub fn bench_json(args: &[&str], lab_prefix: &str) -> (serde_json::Value, PathBuf) {
    let child = nena_cmd()
        .arg("bench")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lab_ns = PathBuf::from(format!("/run/netns/{lab_prefix}{}-client", child.id()));
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (serde_json::from_slice(&out.stdout).unwrap(), lab_ns)
}

/// An echo server on `target` in the lab's server host for ten minutes (longer than a test
/// takes on a loaded machine; it ends with the test process at the latest); returns once it
/// listens (the handle ends with it).
pub fn echo_server(
    lab: &Lab,
    target: std::net::SocketAddr,
) -> std::thread::JoinHandle<anyhow::Result<anyhow::Result<()>>> {
    let (tx, rx) = std::sync::mpsc::channel();
    let h = lab.spawn_in(Host::Server, move || {
        nena_transport::testing::echo_server(target, Duration::from_secs(600), move || {
            tx.send(()).unwrap()
        })
    });
    rx.recv_timeout(Duration::from_secs(5))
        .expect("the echo server listens within 5 s");
    h
}

/// Two access-token files in `dir` (`--token-file`): the token the server is given, and
/// another one of the same length; their paths.
pub fn token_files(dir: &TempDir) -> (String, String) {
    let write = |name: &str, token: &str| {
        let p = dir.join(name);
        std::fs::write(&p, token).unwrap();
        p.to_str().unwrap().to_string()
    };
    (
        write("token", "0123456789abcdef0123456789abcdef\n"),
        write("other-token", "fedcba9876543210fedcba9876543210\n"),
    )
}

/// An application's exchange through a proxy entry in the client host: connect to `entry`,
/// send `payload`, end its side, read the answer to the end. The first error of any step.
pub fn exchange(
    lab: &Lab,
    entry: std::net::SocketAddr,
    payload: Vec<u8>,
) -> std::io::Result<Vec<u8>> {
    use std::io::{Read, Write};
    lab.run_in(Host::Client, move || {
        let mut s = std::net::TcpStream::connect(entry)?;
        s.set_read_timeout(Some(Duration::from_secs(20)))?;
        s.write_all(&payload)?;
        s.shutdown(std::net::Shutdown::Write)?;
        let mut answer = Vec::new();
        s.read_to_end(&mut answer)?;
        Ok(answer)
    })
    .expect("entering the client host")
}

/// The client's path options in the lab.
pub const PATHS: [&str; 4] = ["--trusted", "trusted", "--untrusted", "untrusted"];

/// A lab with a unique prefix, torn down on drop.
pub fn lab() -> LabGuard {
    lab_with(|_| {})
}

pub fn lab_with(f: impl FnOnce(&mut LabConfig)) -> LabGuard {
    let mut cfg = LabConfig::with_prefix(unique_prefix());
    f(&mut cfg);
    LabGuard::up(&cfg).expect("lab up")
}

/// A scratch directory (tempfile), removed on drop; its name says which test made it.
pub struct TempDir(tempfile::TempDir);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        TempDir(
            tempfile::Builder::new()
                .prefix(&format!("nena-t-{tag}-"))
                .tempdir()
                .unwrap(),
        )
    }
    pub fn path(&self) -> &Path {
        self.0.path()
    }
    pub fn join(&self, p: &str) -> PathBuf {
        self.0.path().join(p)
    }
}

/// Headless Chromium's flags for the tests (Debian's `chromium`): no sandbox inside a
/// namespace, no GPU, no first-run, no traffic of its own (background networking, component
/// updates, sync), no /dev/shm. A fresh profile (`--user-data-dir`) is the caller's.
pub const CHROMIUM_HEADLESS: [&str; 8] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
];

/// A `nena` server process in a lab host: killed on drop; its stderr is collected.
pub struct Proc {
    child: Child,
    stderr: Arc<Mutex<String>>,
}

impl Proc {
    /// The process id (`ip netns exec` executes nena in its own place).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
    /// Everything the process wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
    /// Wait until stderr contains `needle` (or panic after `timeout`).
    pub fn wait_stderr(&self, needle: &str, timeout: Duration) -> String {
        self.wait_stderr_n(needle, 1, timeout)
    }
    /// Wait until stderr contains `needle` at least `n` times (or panic after `timeout`).
    pub fn wait_stderr_n(&self, needle: &str, n: usize, timeout: Duration) -> String {
        let found =
            nena_testkit::poll_until(timeout, || self.stderr().matches(needle).count() >= n);
        let s = self.stderr();
        assert!(found, "stderr never contained {needle:?} {n} times:\n{s}");
        s
    }
}

impl Proc {
    /// SIGTERM, then wait (up to 10 s) for the process to exit; its exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        self.stop_with(libc::SIGTERM)
    }

    /// Signal `sig`, then wait (up to 10 s) for the process to exit; its exit status.
    pub fn stop_with(&mut self, sig: libc::c_int) -> std::process::ExitStatus {
        // SAFETY: signalling our own child by its pid.
        unsafe { libc::kill(self.child.id() as i32, sig) };
        nena_testkit::wait_for(
            &format!("the process to exit on signal {sig}"),
            Duration::from_secs(10),
            || self.child.try_wait().ok().flatten(),
        )
    }
}

/// Removes the control socket a killed nena left behind (`ROLE-PID.sock` in the default
/// directory: a killed process cannot remove its own).
pub fn remove_control_socket(pid: u32) {
    let dir = nena_transport::ops::status::default_dir();
    let suffix = format!("-{pid}.sock");
    if let Ok(rd) = std::fs::read_dir(&dir) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().ends_with(&suffix) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

impl Drop for Proc {
    /// Kills the process; when a test is failing, shows what it wrote on stderr (a server's
    /// side of the story: the failing test sees only its client's).
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        remove_control_socket(self.child.id());
        if std::thread::panicking() {
            let err = self.stderr();
            let tail: Vec<&str> = err.lines().rev().take(40).collect();
            eprintln!(
                "--- stderr of pid {} (last {} lines) ---",
                self.child.id(),
                tail.len()
            );
            for l in tail.iter().rev() {
                eprintln!("{l}");
            }
        }
    }
}

/// Start `nena ARGS` in `host` and wait for its "listening on" line.
pub fn spawn_listening(lab: &Lab, host: Host, args: &[&str]) -> Proc {
    spawn_listening_cmd(lab.command(host, NENA, args), args)
}

/// Start `cmd` (nena `args` in some host) and wait for its "listening on" line.
pub fn spawn_listening_cmd(mut cmd: Command, args: &[&str]) -> Proc {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn nena");
    let stderr = Arc::new(Mutex::new(String::new()));
    let mut err = child.stderr.take().unwrap();
    let sink = stderr.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = err.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(out).lines();
        if let Some(Ok(l)) = lines.next() {
            let _ = tx.send(l);
        }
        for _ in lines {}
    });
    let p = Proc { child, stderr };
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(l) if l.contains("listening on") => p,
        other => panic!(
            "nena {args:?} did not start: {other:?}; stderr: {}",
            p.stderr()
        ),
    }
}

/// `nena serve -v --listen 198.18.3.2:PORT --dir DIR EXTRA...` in the server host (at
/// [`Lab::server_listen_addr`]: `[::]` in a lab whose client links have different families).
pub fn serve(lab: &Lab, port: u16, dir: &Path, extra: &[&str]) -> Proc {
    let listen = lab.server_listen_addr(port).to_string();
    let dir = dir.display().to_string();
    let mut args = vec!["-v", "serve", "--listen", &listen, "--dir", &dir];
    args.extend_from_slice(extra);
    spawn_listening(lab, Host::Server, &args)
}

/// Run `nena ARGS` in the client host to completion.
pub fn client(lab: &Lab, args: &[&str]) -> Output {
    let mut cmd: Command = lab.command(Host::Client, NENA, args);
    cmd.stdin(Stdio::null()).output().expect("run nena")
}

/// `host:port` of the lab server (`[2001:2:0:3::2]:port` when the trusted link carries
/// IPv6 only).
pub fn server(lab: &Lab, port: u16) -> String {
    std::net::SocketAddr::new(lab.server_addr(), port).to_string()
}

/// Bytes the peer acknowledged on the client's established TCP sockets (MPTCP subflows)
/// from `src` (an address, or an address and port) to the server's `port`, summed
/// (nena-mptcp's sock_diag sampler; the kernel counts each SYN as one byte acknowledged).
pub fn acked_from(lab: &Lab, src: &str, port: u16) -> u64 {
    let from: Box<dyn Fn(std::net::SocketAddr) -> bool> = match src.parse() {
        Ok(sa) => Box::new(move |a| a == sa),
        Err(_) => {
            let ip: std::net::IpAddr = src.parse().expect("an address, or address:port");
            Box::new(move |a| a.ip() == ip)
        }
    };
    lab.run_in(Host::Client, move || nena_mptcp::sample::dump(port))
        .expect("entering the client host")
        .expect("sock_diag dump")
        .into_iter()
        .filter(|s| from(s.src) && s.is_established_to(port))
        .map(|s| s.bytes_acked)
        .sum()
}

/// `nena ARGS` on the client, its stdout parsed as JSON; fails the test with its stderr if
/// it failed. With `NENA_TEST_DEBUG` set, every client's stderr is printed (run with
/// `--nocapture`, and `RUST_LOG=info` for nena's own account of its decisions).
pub fn client_json(lab: &Lab, args: &[&str]) -> serde_json::Value {
    let out = client(lab, args);
    if std::env::var_os("NENA_TEST_DEBUG").is_some() {
        eprintln!(
            "DEBUG stderr {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(
        out.status.success(),
        "nena {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "nena {args:?}: not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Deterministic text-like content (words from a PRNG): no long runs of equal bytes.
pub fn text(len: usize, seed: u64) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "multipath",
        "subflow",
        "trusted",
        "untrusted",
        "scramble",
        "window",
        "kernel",
        "socket",
        "attacker",
        "capture",
        "path",
        "key",
        "data",
        "the",
        "of",
        "and",
        "a",
        "to",
        "in",
        "is",
        "network",
        "packet",
        "segment",
        "byte",
        "stream",
        "secret",
        "sharing",
        "throughput",
    ];
    let mut x = seed ^ 0x2545_F491_4F6C_DD1D;
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(WORDS[(x % WORDS.len() as u64) as usize].as_bytes());
        out.push(match x % 11 {
            0 => b'\n',
            _ => b' ',
        });
        if x % 7 < 1 {
            out.extend_from_slice(format!("{} ", x % 100_000).as_bytes());
        }
    }
    out.truncate(len);
    out
}

/// Pseudo-random bytes.
pub fn random(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Bytes per subflow trust from a report's `paths.subflows`: (trusted, untrusted) payload
/// bytes, both directions.
pub fn bytes_by_trust(report: &serde_json::Value) -> (u64, u64) {
    let mut t = 0;
    let mut u = 0;
    for s in report["paths"]["subflows"]
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        let b = s["bytes_sent"].as_u64().unwrap_or(0) + s["bytes_received"].as_u64().unwrap_or(0);
        if s["trust"] == "trusted" {
            t += b;
        } else {
            u += b;
        }
    }
    (t, u)
}

/// A child process killed (and reaped) on drop.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        remove_control_socket(self.0.id());
    }
}

/// python's http.server on 0.0.0.0:8000 of the server host, serving `dir`; its log (the
/// clients' addresses, unbuffered) in `log` when given. Returns once it accepts connections.
pub fn http_server(lab: &Lab, dir: &TempDir, log: Option<&Path>) -> Killed {
    let mut cmd = lab.command(
        Host::Server,
        "python3",
        [
            "-u",
            "-m",
            "http.server",
            "8000",
            "--bind",
            "0.0.0.0",
            "--directory",
            dir.path().to_str().unwrap(),
        ],
    );
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(match log {
            Some(p) => Stdio::from(std::fs::File::create(p).unwrap()),
            None => Stdio::null(),
        });
    let http = Killed(cmd.spawn().expect("python3 -m http.server"));
    wait_accepts(
        lab,
        Host::Server,
        "127.0.0.1:8000".parse().unwrap(),
        "http.server",
    );
    http
}

/// Returns once something in `host` accepts TCP connections on `addr` (a server the test
/// started: python's http.server, a listener of its own); fails the test naming `what`
/// after 5 s.
pub fn wait_accepts(lab: &Lab, host: Host, addr: std::net::SocketAddr, what: &str) {
    let what = format!("{what} to accept connections on {addr}");
    lab.run_in(host, move || {
        nena_testkit::wait_until(&what, Duration::from_secs(5), || {
            std::net::TcpStream::connect(addr).is_ok()
        })
    })
    .expect("entering the lab host");
}

/// The client as a laptop: no source-based rules, the default route on the untrusted link
/// (metric 100) and, unless `trusted_default` is false, one on the trusted link (metric 200).
pub fn laptop_routes(lab: &Lab, trusted_default: bool) {
    let mut script = String::from(
        "set -e; ip rule del pref 1101; ip rule del pref 1102; \
         ip route del default; ip route add default via 198.18.2.1 dev untrusted metric 100;",
    );
    if trusted_default {
        script += " ip route add default via 198.18.1.1 dev trusted metric 200;";
    }
    sh(lab, Host::Client, &script);
    let rules = sh(lab, Host::Client, "ip rule show");
    assert!(!rules.contains("lookup 101"), "{rules}");
    let route = sh(lab, Host::Client, "ip route get 198.18.3.2");
    assert!(
        route.contains("dev untrusted"),
        "the host's own route: {route}"
    );
}

/// `sh -c SCRIPT` in a lab host, which must succeed; its standard output.
pub fn sh(lab: &Lab, host: Host, script: &str) -> String {
    let out = lab.command(host, "sh", ["-c", script]).output().unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// How many times `needle` occurs in `hay` (overlapping).
pub fn count(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).filter(|w| *w == needle).count()
}

/// The packets of a capture that match a tcpdump `filter` (tcpdump reads the file).
pub fn packets(cap: &Path, filter: &str) -> usize {
    let o = Command::new("tcpdump")
        .args(["-nr", cap.to_str().unwrap(), filter])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).lines().count()
}

/// The pcap filter of the datagram plane's sealed datagrams to or from the proxy server's
/// `port`: type byte 0x0e (full) or 0x05..=0x0c (compact, version 2) first.
pub fn plane_filter(port: u16) -> String {
    format!("udp port {port} and (udp[8] = 0x0e or (udp[8] >= 0x05 and udp[8] <= 0x0c))")
}

/// UDP packets of a capture that are not the datagram plane's ([`plane_filter`]).
pub fn udp_not_sealed(cap: &Path, port: u16) -> usize {
    packets(cap, "udp") - packets(cap, &plane_filter(port))
}

/// The datagram plane's sealed UDP packets of a capture (to or from `port`).
pub fn udp_sealed(cap: &Path, port: u16) -> usize {
    packets(cap, &plane_filter(port))
}

/// 16-byte runs of `known` that `nena eavesdrop` finds in a capture.
pub fn runs_found(cap: &Path, known: &Path) -> u64 {
    let out = nena(&[
        "eavesdrop",
        cap.to_str().unwrap(),
        "--known",
        known.to_str().unwrap(),
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["known"]["runs_found"].as_u64().unwrap()
}
