//! `nena run` killed (issue 55, item 7): SIGKILL, as the OOM killer sends it. CMD leaves a
//! child behind that keeps trying to reach the server host (a TCP connect with a request
//! naming a marker, a UDP datagram holding it) on a laptop's routes (the default route on the
//! untrusted link), with captures of both client links.
//!
//! - nena run killed: the child's connects are refused from then on (the cgroup's programs
//!   stay attached, the proxy's port is closed), its watchdog kills it and removes the cgroup;
//!   the programs are unloaded, no cgroup and no temporary mount is left, and neither link
//!   ever holds the marker or a packet to the server's port 8000 or 7777 outside nena;
//! - nena run and its watchdog both killed: the child stays without network (connects
//!   refused) until the next `nena run` starts, which kills it and removes what was left.
//!
//! A test binary of its own: any `nena run` that starts while the child is left behind kills
//! it (that is the point of the second case), so no other test's `nena run` may start
//! meanwhile, and the `cli` binary's tests run in parallel; cargo runs binaries one at a time.

// The CLI tests' harness, shared with the `cli` and `meta` binaries.
#[path = "../cli/harness.rs"]
mod harness;

use crate::harness::*;
use nena_lab::{Host, Lab, Link};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

/// The child CMD leaves behind: forever, a TCP connect to 198.18.3.2:8000 with a request
/// naming the marker (argv[1]) and a datagram holding it to 198.18.3.2:7777; one line per
/// round (`tcp ok` or the connect's error).
const LOOP: &str = r#"
import socket, sys, time, errno
marker = sys.argv[1].encode()
while True:
    try:
        t = socket.create_connection(("198.18.3.2", 8000), timeout=2)
        t.sendall(b"GET /" + marker + b" HTTP/1.0\r\n\r\n")
        t.close()
        r = "ok"
    except OSError as e:
        r = errno.errorcode.get(e.errno, str(e.errno))
    try:
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(marker, ("198.18.3.2", 7777))
    except OSError:
        pass
    print("tcp", r, flush=True)
    # the loop's pace: a round every 50 ms
    time.sleep(0.05)
"#;

/// The host's cgroup2 mount.
fn host_cgroup2() -> PathBuf {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    info.lines()
        .find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            (right.split_whitespace().next()? == "cgroup2")
                .then(|| PathBuf::from(left.split_whitespace().nth(4).unwrap()))
        })
        .expect("a cgroup2 mount on the host")
}

/// A cgroup of a killed `nena run`: whatever the test saw, killed and removed on drop.
struct Leftover(PathBuf);

impl Drop for Leftover {
    fn drop(&mut self) {
        if !self.0.exists() {
            return;
        }
        let _ = std::fs::write(self.0.join("cgroup.kill"), "1");
        nena_testkit::poll_until(Duration::from_secs(10), || {
            std::fs::remove_dir(&self.0).is_ok() || !self.0.exists()
        });
    }
}

/// A process is gone (or a zombie no one reaped yet).
fn gone(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"));
    let state = stat
        .as_deref()
        .ok()
        .and_then(|s| s.rsplit(')').next())
        .and_then(|s| s.split_whitespace().next().map(str::to_string));
    matches!(state.as_deref(), None | Some("Z") | Some("X"))
}

fn program_loaded(id: u32) -> bool {
    Command::new("bpftool")
        .args(["prog", "show", "id", &id.to_string()])
        .output()
        .expect("bpftool")
        .status
        .success()
}

/// A started `nena -v run` with the loop as CMD's child: its cgroup, programs, watchdog and
/// the child's pid, and the child's output lines.
struct Started {
    nena: Killed,
    cgroup: String,
    progs: Vec<u32>,
    watchdog: u32,
    child: u32,
    /// The child's rounds, read by a thread (ends at EOF: every writer gone).
    lines: Receiver<String>,
    stderr: PathBuf,
    _leftover: Leftover,
}

impl Started {
    /// The next round the child printed, within 10 s; None at EOF.
    fn next(&self) -> Option<String> {
        match self.lines.recv_timeout(Duration::from_secs(10)) {
            Ok(l) => Some(l),
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => panic!("no round from the child in 10 s"),
        }
    }
}

/// `nena -v run` with `sh -c 'python3 LOOP & echo child $!; wait'`; returns once the child
/// reached the server through nena (`tcp ok`).
fn start(lab: &Lab, listen: &str, marker: &str, stderr: &Path) -> Started {
    let mut args = vec!["-v", "run", "--via", listen];
    args.extend_from_slice(&PATHS);
    args.extend_from_slice(&[
        "--",
        "sh",
        "-c",
        "python3 -c \"$1\" \"$2\" & echo child $!; wait",
        "sh",
        LOOP,
        marker,
    ]);
    let mut c = lab.command(Host::Client, NENA, &args);
    c.env_remove("SUDO_UID")
        .env_remove("SUDO_GID")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(std::fs::File::create(stderr).unwrap()));
    let mut nena = Killed(c.spawn().unwrap());
    let out = BufReader::new(nena.0.stdout.take().unwrap());
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in out.lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let line = || {
        lines
            .recv_timeout(Duration::from_secs(20))
            .expect("a line from CMD within 20 s")
    };
    let first = line();
    let child: u32 = first
        .strip_prefix("child ")
        .unwrap_or_else(|| panic!("{first}"))
        .parse()
        .unwrap();
    let first_round = line();
    let log = std::fs::read_to_string(stderr).unwrap();
    assert_eq!(first_round, "tcp ok", "through nena before the kill\n{log}");
    let line = log
        .lines()
        .find(|l| l.contains("nena::cmd::run] cgroup "))
        .unwrap_or_else(|| panic!("no cgroup line in {log}"));
    let rest = line.split("] cgroup ").nth(1).unwrap();
    let cgroup = rest.split_whitespace().next().unwrap().to_string();
    let progs: Vec<u32> = rest
        .split('[')
        .nth(1)
        .unwrap()
        .trim_end_matches("])")
        .split(", ")
        .map(|s| s.trim().parse().unwrap())
        .collect();
    let watchdog: u32 = log
        .lines()
        .find_map(|l| l.split("] watchdog ").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no watchdog line in {log}"))
        .parse()
        .unwrap();
    let leftover = Leftover(host_cgroup2().join(&cgroup));
    Started {
        _leftover: leftover,
        nena,
        cgroup,
        progs,
        watchdog,
        child,
        lines,
        stderr: stderr.to_path_buf(),
    }
}

fn kill9(pid: u32) {
    let ok = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(ok.success(), "kill -KILL {pid}");
}

/// The packets of a capture to the server's ports 8000 and 7777 (nena's own sessions go to
/// the proxy server's port).
fn direct_packets(pcap: &Path) -> Vec<String> {
    let out = Command::new("tcpdump")
        .args(["-nn", "-r"])
        .arg(pcap)
        .args(["port 8000 or port 7777"])
        .output()
        .expect("tcpdump");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn nena_run_killed_leaves_cmd_without_network_and_its_watchdog_or_the_next_run_removes_it() {
    let lab = lab();
    laptop_routes(&lab, true);
    let dir = TempDir::new("run-killed");
    let www = TempDir::new("run-killed-www");
    let _http = http_server(&lab, &www, None);
    let listen = server(&lab, 7651);
    let ps = spawn_listening(
        &lab,
        Host::Server,
        &[
            "-v",
            "proxy",
            "server",
            "--listen",
            &listen,
            "--allow",
            "198.18.3.2:8000",
        ],
    );
    let caps = [
        (Link::Trusted, dir.join("trusted.pcap")),
        (Link::Untrusted, dir.join("untrusted.pcap")),
    ];
    let captures: Vec<_> = caps
        .iter()
        .map(|(l, f)| lab.capture(*l, f).unwrap())
        .collect();
    let marker = "nena-run-killed-7c1f93";

    // 1. nena run killed; its watchdog is not.
    let mut s = start(&lab, &listen, marker, &dir.join("first.log"));
    // A session crossed the trusted link before the kill (the child's "tcp ok" is its
    // connect to nena run's local proxy): the capture's check below then has something to
    // hold, whatever the race between the session's opening and the SIGKILL.
    nena_testkit::wait_until(
        "a session of the child's through nena on the proxy server",
        Duration::from_secs(10),
        || ps.stderr().contains("CONNECT 198.18.3.2:8000"),
    );
    kill9(s.nena.0.id());
    let status = nena_testkit::wait_for(
        "nena run to die of SIGKILL",
        Duration::from_secs(10),
        || s.nena.0.try_wait().unwrap(),
    );
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    // The child's rounds until the watchdog killed it (EOF): once one failed (nena gone;
    // the round in flight may see its connection reset), none connected again.
    let mut after = Vec::new();
    while let Some(l) = s.next() {
        after.push(l);
    }
    if let Some(first) = after.iter().position(|l| l != "tcp ok") {
        assert!(
            after[first..].iter().all(|l| l != "tcp ok"),
            "a connect got through after nena run was killed: {after:?}"
        );
    }
    nena_testkit::wait_until(
        "the child CMD left behind to be killed",
        Duration::from_secs(10),
        || gone(s.child),
    );
    nena_testkit::wait_until(
        "the watchdog to remove the cgroup and end",
        Duration::from_secs(10),
        || !host_cgroup2().join(&s.cgroup).exists() && gone(s.watchdog),
    );
    nena_testkit::wait_until(
        "the programs to be unloaded with the cgroup",
        Duration::from_secs(10),
        || !s.progs.iter().any(|id| program_loaded(*id)),
    );
    let log = std::fs::read_to_string(&s.stderr).unwrap();
    assert!(log.contains("ended without removing its cgroup"), "{log}");
    let pid = s.nena.0.id();
    let mnt = std::env::temp_dir().join(format!("nena-run-cgroup2-{pid}"));
    assert!(!mnt.exists(), "{} is still there", mnt.display());
    assert!(!Path::new(&format!("/run/nena-run-ns-{pid}")).exists());

    // 2. nena run and its watchdog killed: the child stays in the cgroup, without network,
    // until the next nena run.
    let mut s = start(&lab, &listen, marker, &dir.join("second.log"));
    kill9(s.watchdog);
    nena_testkit::wait_until("the watchdog to die", Duration::from_secs(10), || {
        gone(s.watchdog)
    });
    kill9(s.nena.0.id());
    nena_testkit::wait_for(
        "nena run to die of SIGKILL",
        Duration::from_secs(10),
        || s.nena.0.try_wait().unwrap(),
    );
    // Ten rounds after nena died, each refused (the rounds from before the kill, and the
    // one in flight, skipped; none of them connected once one failed).
    let mut first = s.next().expect("the child's rounds");
    while first == "tcp ok" {
        first = s.next().expect("the child's rounds");
    }
    while first != "tcp ECONNREFUSED" {
        assert_ne!(
            first, "tcp ok",
            "a connect got through after nena run was killed"
        );
        first = s.next().expect("the child's rounds");
    }
    let mut rounds = vec![first];
    rounds.extend((0..9).map(|_| s.next().expect("the child's rounds")));
    assert_eq!(
        rounds,
        vec!["tcp ECONNREFUSED".to_string(); 10],
        "the child's connects after nena run and its watchdog were killed"
    );
    assert!(
        !gone(s.child),
        "the child should still be there, without network"
    );
    assert!(host_cgroup2().join(&s.cgroup).exists());
    // The next nena run removes it.
    let mut args = vec!["-v", "run", "--via", listen.as_str()];
    args.extend_from_slice(&PATHS);
    args.extend_from_slice(&["--", "true"]);
    let out = lab
        .command(Host::Client, NENA, &args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&s.cgroup) && err.contains("left by a nena run that was killed"),
        "{err}"
    );
    nena_testkit::wait_until(
        "the child to be killed by the next nena run",
        Duration::from_secs(10),
        || gone(s.child),
    );
    assert!(!host_cgroup2().join(&s.cgroup).exists());
    nena_testkit::wait_until(
        "the programs to be unloaded with the cgroup",
        Duration::from_secs(10),
        || !s.progs.iter().any(|id| program_loaded(*id)),
    );
    let pid = s.nena.0.id();
    let mnt = std::env::temp_dir().join(format!("nena-run-cgroup2-{pid}"));
    assert!(!mnt.exists(), "{} is still there", mnt.display());
    drop(s);

    for c in captures {
        c.stop().unwrap();
    }
    for (link, file) in &caps {
        let pcap = std::fs::read(file).unwrap();
        // nena's sessions open on the trusted link (the untrusted one may carry nothing
        // of rounds this short).
        if matches!(link, Link::Trusted) {
            assert!(pcap.len() > 24, "{link:?}: nothing captured?");
        }
        assert!(
            !pcap.windows(marker.len()).any(|w| w == marker.as_bytes()),
            "{link:?}: the marker crossed in the clear"
        );
        let direct = direct_packets(file);
        assert!(direct.is_empty(), "{link:?}: outside nena: {direct:#?}");
    }
    // Only the rounds before each kill reached the server, through nena.
    assert!(ps.stderr().contains("CONNECT 198.18.3.2:8000"));
}
