//! `nena run` through the lab (root): curl and python's urllib, which know nothing of nena,
//! fetch a file from python's http.server in the server host byte-exact while their
//! connects are redirected by the cgroup's BPF programs to nena's proxy; the http server
//! sees the proxy server's address, and the untrusted link's capture holds no 16-byte run
//! of the file (while a `--mode plain` control run shows the check sees plaintext when it is
//! there). An exiting CMD (status 3), a killed CMD (SIGKILL, with a child left behind) and
//! `nena run` itself getting SIGTERM leave no cgroup, no program and no process behind.
//! `--mptcp-only` makes the cgroup's TCP sockets MPTCP (MP_CAPABLE answered: MPTCP_INFO), by
//! fmod_ret or, where the kernel refuses that, by seccomp user notification. Under sudo
//! (SUDO_UID/SUDO_GID of nobody) CMD runs as that user and its fetch is still carried by
//! nena; `--user` names the user; plain root runs CMD as root and says so once.

use crate::harness::*;
use nena_lab::{Host, Link, Rate};
use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// `nena -v run ARGS` in the client host to completion (as root: not as the user who ran
/// the tests through sudo).
fn nena_run(lab: &nena_lab::Lab, args: &[&str]) -> std::process::Output {
    nena_run_env(lab, args, &[])
}

/// [`nena_run`] with SUDO_UID and SUDO_GID as `sudo` given (none: unset).
fn nena_run_env(lab: &nena_lab::Lab, args: &[&str], sudo: &[(&str, &str)]) -> std::process::Output {
    let mut all = vec!["-v", "run"];
    all.extend_from_slice(args);
    let mut c = lab.command(Host::Client, NENA, &all);
    c.env_remove("SUDO_UID").env_remove("SUDO_GID");
    c.envs(sudo.iter().copied());
    c.stdin(Stdio::null()).output().unwrap()
}

/// The cgroup name and program ids `nena -v run` logged.
fn cgroup_and_progs(stderr: &str) -> (String, Vec<u32>) {
    let line = stderr
        .lines()
        .find(|l| l.contains("nena::cmd::run] cgroup "))
        .unwrap_or_else(|| panic!("no cgroup line in {stderr}"));
    let rest = line.split("] cgroup ").nth(1).unwrap();
    let name = rest.split_whitespace().next().unwrap().to_string();
    let ids = rest
        .split('[')
        .nth(1)
        .unwrap()
        .trim_end_matches("])")
        .split(", ")
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().unwrap())
        .collect();
    (name, ids)
}

/// The host's cgroup2 mount (the lab's `ip netns exec` hides it from `nena run`, which
/// mounts its own view of the same hierarchy).
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

/// Nothing of one `nena run` is left: its cgroup, its programs (a link left attached would
/// keep its program loaded), the cgroup2 mount point it made.
fn assert_nothing_left(stderr: &str) {
    let (name, ids) = cgroup_and_progs(stderr);
    assert_eq!(
        ids.len(),
        10,
        "egress, connect4/6, sendmsg4/6, recvmsg4/6, sockops, connect_unix, sendmsg_unix: \
         {ids:?}"
    );
    let dir = host_cgroup2().join(&name);
    assert!(!dir.exists(), "{} is still there", dir.display());
    for id in ids {
        let out = Command::new("bpftool")
            .args(["prog", "show", "id", &id.to_string()])
            .output()
            .expect("bpftool");
        assert!(
            !out.status.success(),
            "program {id} is still loaded: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let pid = name.split('-').nth(2).unwrap();
    let mnt = std::env::temp_dir().join(format!("nena-run-cgroup2-{pid}"));
    assert!(!mnt.exists(), "{} is still there", mnt.display());
}

/// Every 16-byte piece of `body` at a multiple of 16: a plaintext run of 31 bytes or more in
/// the capture holds one of them.
fn leaked_pieces(capture: &[u8], body: &[u8]) -> usize {
    let windows: HashSet<&[u8]> = capture.windows(16).collect();
    body.chunks_exact(16)
        .filter(|c| windows.contains(c))
        .count()
}

fn session_args<'a>(via: &'a str, mode: &'a str, token: Option<&'a str>) -> Vec<&'a str> {
    let mut v = vec!["--via", via, "--mode", mode];
    if let Some(t) = token {
        v.extend_from_slice(&["--token-file", t]);
    }
    v.extend_from_slice(&PATHS);
    v.push("--");
    v
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn curl_and_urllib_through_nena_run_byte_exact_and_no_plaintext_on_the_untrusted_link() {
    // 2 x 20 Mbit/s: a fetch lasts long enough (about 0.3 s) for the untrusted subflow to
    // join and carry its share (unlimited veths finish before it does, now and then).
    let lab = lab_with(|c| {
        c.trusted_rate = Some(Rate::mbit(20));
        c.untrusted_rate = Some(Rate::mbit(20));
    });
    let dir = TempDir::new("run");
    let body = text(1_500_000, 7);
    std::fs::write(dir.join("blob.txt"), &body).unwrap();
    let http_log = dir.join("http.log");
    let _http = http_server(&lab, &dir, Some(&http_log));
    // The proxy server wants an access token: every run below sends it, but one.
    let (token, _) = token_files(&dir);
    let token = token.as_str();
    let listen = server(&lab, 7601);
    let ps = spawn_listening(
        &lab,
        Host::Server,
        &[
            "-v",
            "proxy",
            "server",
            "--listen",
            &listen,
            "--mode",
            "aead,stream",
            "--allow",
            "198.18.3.2:8000",
            "--token-file",
            token,
        ],
    );
    let url = "http://198.18.3.2:8000/blob.txt";
    let cap = dir.join("untrusted.pcap");
    let capture = lab.capture(Link::Untrusted, &cap).unwrap();
    let script = format!(
        "import urllib.request,sys; \
         sys.stdout.buffer.write(urllib.request.urlopen('{url}', timeout=30).read())"
    );
    let mut curl = session_args(&listen, "aead", Some(token));
    curl.extend_from_slice(&["curl", "-sS", "--max-time", "30", url]);
    let mut py = session_args(&listen, "stream", Some(token));
    py.extend_from_slice(&["python3", "-c", &script]);
    let mut logs = String::new();
    for (what, args) in [("curl", &curl), ("urllib", &py)] {
        let out = nena_run(&lab, args);
        let err = String::from_utf8_lossy(&out.stderr);
        logs.push_str(&err);
        assert!(
            out.status.success(),
            "{what} through nena run failed: {err}\nproxy server: {}",
            ps.stderr()
        );
        assert!(
            out.stdout == body,
            "{what}: {} bytes, not the file\n{err}",
            out.stdout.len()
        );
        assert!(
            err.contains("connects redirected 1, handed to the proxy 1"),
            "{err}"
        );
        assert_nothing_left(&err);
    }
    capture.stop().unwrap();
    let pcap = std::fs::read(&cap).unwrap();
    // The untrusted path carried the file's bytes (protected), and none of them in clear.
    assert!(
        pcap.len() > 256 * 1024,
        "the untrusted capture holds only {} bytes\n{logs}",
        pcap.len()
    );
    assert_eq!(
        leaked_pieces(&pcap, &body),
        0,
        "plaintext on the untrusted link"
    );
    // The http server saw the proxy server (its own address), never the client's.
    let log = std::fs::read_to_string(&http_log).unwrap();
    let gets: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("GET /blob.txt"))
        .collect();
    assert_eq!(gets.len(), 2, "{log}");
    assert!(gets.iter().all(|l| l.starts_with("198.18.3.2 ")), "{log}");
    assert_eq!(ps.stderr().matches("CONNECT 198.18.3.2:8000").count(), 2);

    // Without the token: refused before the proxy server connects anywhere; curl sees its
    // connection reset, and nena run's log says why.
    let mut args = session_args(&listen, "aead", None);
    args.extend_from_slice(&["curl", "-sS", "--max-time", "30", url]);
    let out = nena_run(&lab, &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && out.stdout.is_empty(), "{err}");
    assert!(err.contains("a valid access token is required"), "{err}");
    assert_nothing_left(&err);
    let log = ps.wait_stderr("CONNECT 198.18.3.2:8000 refused", Duration::from_secs(10));
    assert!(log.contains("a valid access token is required"), "{log}");
    let connected = log
        .lines()
        .filter(|l| l.ends_with(": CONNECT 198.18.3.2:8000"))
        .count();
    assert_eq!(connected, 2, "{log}");

    // Control: the same fetch in `plain` mode puts the file on the untrusted link in clear,
    // and the check above finds it.
    let cap2 = dir.join("control.pcap");
    let capture = lab.capture(Link::Untrusted, &cap2).unwrap();
    // (a token is refused with plain: a proxy server of its own, without one)
    let plain_listen = server(&lab, 7605);
    let _plain_ps = spawn_listening(
        &lab,
        Host::Server,
        &[
            "proxy",
            "server",
            "--listen",
            &plain_listen,
            "--mode",
            "plain",
            "--allow",
            "198.18.3.2:8000",
        ],
    );
    let mut plain = session_args(&plain_listen, "plain", None);
    plain.extend_from_slice(&["curl", "-sS", "--max-time", "30", url]);
    let out = nena_run(&lab, &plain);
    assert!(out.status.success() && out.stdout == body);
    capture.stop().unwrap();
    let leaked = leaked_pieces(&std::fs::read(&cap2).unwrap(), &body);
    assert!(leaked > 1000, "the control run shows only {leaked} pieces");

    // `nena run --control`: CMD itself asks `nena status` after its fetch; the answer is
    // nena run's, with its server, its links and the fetch's session (open or ended).
    let sock = dir.join("run.sock");
    let shell = format!(
        "curl -sS --max-time 30 {url} -o /dev/null && exec {NENA} status --control {} --json",
        sock.display()
    );
    let mut st = vec!["--control", sock.to_str().unwrap()];
    st.extend(session_args(&listen, "aead", Some(token)));
    st.extend_from_slice(&["sh", "-c", &shell]);
    let out = nena_run(&lab, &st);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    let s = &v[0];
    assert_eq!(s["role"], "run", "{s}");
    let about = s["about"].to_string();
    assert!(about.contains(&format!("[\"server\",\"{listen}\"]")), "{s}");
    let links = s["links"].as_array().unwrap();
    assert_eq!(links.len(), 2, "{s}");
    assert!(links.iter().all(|l| l["up"] == true), "{s}");
    let ended: u64 = s["sessions_ended"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(|n| n.as_u64())
        .sum();
    assert!(
        s["sessions_open"].as_u64().unwrap() + ended >= 1,
        "the fetch's session is missing: {s}"
    );
    assert!(!sock.exists(), "nena run left its control socket");
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn nena_run_passes_on_the_exit_status_and_leaves_nothing_behind() {
    let lab = lab();
    let dir = TempDir::new("run-exit");
    let listen = server(&lab, 7611);
    let _ps = spawn_listening(
        &lab,
        Host::Server,
        &[
            "proxy",
            "server",
            "--listen",
            &listen,
            "--allow",
            "198.18.3.2:8000",
        ],
    );
    // CMD exits 3.
    let mut args = session_args(&listen, "aead", None);
    args.extend_from_slice(&["sh", "-c", "exit 3"]);
    let out = nena_run(&lab, &args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert_nothing_left(&err);

    // CMD killed by SIGKILL, a child of it still running in the cgroup.
    let pidfile = dir.join("child.pid");
    let script = format!("sleep 300 & echo $! > {}; kill -9 $$", pidfile.display());
    let mut args = session_args(&listen, "aead", None);
    args.extend_from_slice(&["sh", "-c", &script]);
    let out = nena_run(&lab, &args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(128 + 9), "{err}");
    assert_nothing_left(&err);
    let orphan = std::fs::read_to_string(&pidfile).unwrap();
    // Gone, or dead and not yet reaped by whoever inherited it (state Z).
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", orphan.trim()));
    let state = stat
        .as_deref()
        .ok()
        .and_then(|s| s.rsplit(')').next())
        .and_then(|s| s.split_whitespace().next());
    assert!(
        matches!(state, None | Some("Z") | Some("X")),
        "the child CMD left behind ({}) still runs: {stat:?}",
        orphan.trim()
    );

    // nena run itself gets SIGTERM while CMD runs: CMD gets it too, nena exits with CMD's
    // status (143) and removes everything.
    let mut all = vec!["-v", "run"];
    let mut args = session_args(&listen, "aead", None);
    args.extend_from_slice(&["sh", "-c", "echo started; exec sleep 300"]);
    all.extend_from_slice(&args);
    let mut child = lab
        .command(Host::Client, NENA, &all)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first.trim(), "started");
    // `ip netns exec` execs nena: the child's pid is nena's.
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = nena_testkit::wait_for(
        "nena run to end on SIGTERM",
        Duration::from_secs(15),
        || child.try_wait().unwrap(),
    );
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(128 + 15), "{err}");
    assert!(err.contains("signal 15: passed on"), "{err}");
    assert_nothing_left(&err);
}

/// A python client: creates a plain `socket(AF_INET, SOCK_STREAM)`, connects to the MPTCP
/// listener in the server host and prints its SO_PROTOCOL and MPTCP_INFO's flags (-1 when
/// the socket has no MPTCP_INFO).
const MPTCP_CLIENT: &str = "\
import socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
proto = s.getsockopt(socket.SOL_SOCKET, socket.SO_PROTOCOL)
s.connect(('198.18.3.2', 8100))
data = s.recv(100)
try:
    flags = struct.unpack_from('I', s.getsockopt(284, 1, 64), 8)[0]
except OSError:
    flags = -1
print(proto, flags, data.decode().strip())
";

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn nena_run_mptcp_only_makes_the_cgroups_sockets_mptcp() {
    let lab = lab();
    // An MPTCP listener in the server host, answering every connection with one line.
    let server = "\
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('198.18.3.2', 8100)); s.listen(8)
while True:
    c, _ = s.accept(); c.sendall(b'hello\\n'); c.close()
";
    let _srv = Killed(
        lab.command(Host::Server, "python3", ["-c", server])
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    nena_testkit::wait_until(
        "the MPTCP listener on 198.18.3.2:8100",
        Duration::from_secs(10),
        || {
            let ss = lab
                .command(Host::Server, "ss", ["-Hltn", "src", "198.18.3.2:8100"])
                .output()
                .unwrap();
            !ss.stdout.is_empty()
        },
    );
    // Without nena run: a TCP socket (6), no MPTCP_INFO.
    let out = lab
        .command(Host::Client, "python3", ["-c", MPTCP_CLIENT])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "6 -1 hello");
    let child = lab
        .command(
            Host::Client,
            NENA,
            [
                "-v",
                "run",
                "--mptcp-only",
                "--",
                "python3",
                "-c",
                MPTCP_CLIENT,
            ],
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // `ip netns exec` execs nena: its cgroup is nena-run-<this pid>-<random>.
    let prefix = format!("nena-run-{}-", child.id());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let left: Vec<String> = std::fs::read_dir(host_cgroup2())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "cgroups left: {left:?}\n{err}");
    // Through nena run: the same code gets an MPTCP socket (262) whose peer answered
    // MP_CAPABLE (MPTCP_INFO_FLAG_REMOTE_KEY_RECEIVED, bit 1; not fallen back, bit 0).
    assert!(out.status.success(), "{err}");
    let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let f: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(f[0], "262", "{line}\n{err}");
    let flags: i64 = f[1].parse().unwrap();
    assert!(flags >= 0 && flags & 2 == 2 && flags & 1 == 0, "{line}");
    assert_eq!(f[2], "hello");
    assert!(err.contains("sockets made MPTCP 1"), "{err}");
    let (name, ids) = cgroup_and_progs(&err);
    // The fmod_ret program, or none where the kernel refuses it and seccomp did the work
    // (then said so).
    if ids.is_empty() {
        assert!(err.contains("through seccomp user notification"), "{err}");
        eprintln!("--mptcp-only ran through seccomp here: the kernel refuses fmod_ret");
    } else {
        assert_eq!(ids.len(), 1, "{err}");
    }
    assert!(!host_cgroup2().join(name).exists());
    // Without -v, whichever road it took, it says nothing (no warning for a working path).
    let out = lab
        .command(Host::Client, NENA, ["run", "--mptcp-only", "--", "true"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn nena_run_starts_cmd_as_the_sudo_caller_or_the_named_user_and_still_carries_it() {
    let lab = lab();
    let dir = TempDir::new("run-user");
    let body = text(200_000, 11);
    std::fs::write(dir.join("blob.txt"), &body).unwrap();
    let _http = http_server(&lab, &dir, None);
    let listen = server(&lab, 7621);
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
    let url = "http://198.18.3.2:8000/blob.txt";
    let script = format!("id -u; id -g; id -G; echo \"HOME=$HOME\"; curl -sS --max-time 30 {url}");
    // CMD's identity lines, then the file it fetched.
    let split = |out: &[u8]| -> (Vec<String>, Vec<u8>) {
        let mut lines = Vec::new();
        let mut rest = out;
        for _ in 0..4 {
            let n = rest
                .iter()
                .position(|b| *b == b'\n')
                .expect("an identity line");
            lines.push(String::from_utf8_lossy(&rest[..n]).into_owned());
            rest = &rest[n + 1..];
        }
        (lines, rest.to_vec())
    };
    let nobody = ("65534", "65534");
    // (what, nena run's own arguments, SUDO_UID and SUDO_GID)
    let cases = [
        (
            "under sudo",
            vec![],
            vec![("SUDO_UID", nobody.0), ("SUDO_GID", nobody.1)],
        ),
        // --user wins over SUDO_UID (here root's).
        (
            "--user nobody",
            vec!["--user", "nobody"],
            vec![("SUDO_UID", "0")],
        ),
    ];
    for (what, user, sudo) in cases {
        let mut args = user.clone();
        args.extend(session_args(&listen, "aead", None));
        args.extend_from_slice(&["sh", "-c", &script]);
        let out = nena_run_env(&lab, &args, &sudo);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.success(),
            "{what}: {err}\nproxy server: {}",
            ps.stderr()
        );
        let (ids, fetched) = split(&out.stdout);
        assert_eq!(ids[0], "65534", "{what}: uid: {ids:?}");
        assert_eq!(ids[1], "65534", "{what}: gid: {ids:?}");
        assert!(
            !ids[2].split_whitespace().any(|g| g == "0"),
            "{what}: a group of root's left: {ids:?}"
        );
        assert_eq!(
            ids[3], "HOME=/nonexistent",
            "{what}: nobody's home: {ids:?}"
        );
        // The dropped process's connect was still caught and carried by nena.
        assert!(
            fetched == body,
            "{what}: {} bytes, not the file\n{err}",
            fetched.len()
        );
        assert!(
            err.contains("connects redirected 1, handed to the proxy 1"),
            "{what}: {err}"
        );
        assert!(err.contains("runs as nobody (uid 65534"), "{what}: {err}");
        assert!(!err.contains("runs as root"), "{what}: {err}");
        assert_nothing_left(&err);
    }
    assert_eq!(ps.stderr().matches("CONNECT 198.18.3.2:8000").count(), 2);

    // Plain root, neither sudo nor --user: CMD runs as root, said once.
    let mut args = session_args(&listen, "aead", None);
    args.extend_from_slice(&["sh", "-c", "id -u"]);
    let out = nena_run_env(&lab, &args, &[]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0");
    assert_eq!(err.matches("runs as root").count(), 1, "{err}");
    assert!(err.contains("--user NAME"), "{err}");

    // Bad input: one line, status 2, nothing run.
    for (bad, sudo, says) in [
        (vec!["--user", "no-such-user-nena"], vec![], "no such user"),
        (vec![], vec![("SUDO_UID", "x1")], "SUDO_UID"),
    ] {
        let mut args = bad.clone();
        args.extend(session_args(&listen, "aead", None));
        args.extend_from_slice(&["sh", "-c", "echo ran"]);
        let out = nena_run_env(&lab, &args, &sudo);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {err}");
        assert!(err.contains(says), "{err}");
        assert!(out.stdout.is_empty(), "CMD ran: {err}");
    }
}
