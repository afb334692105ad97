//! A first-time user's mistakes, each answered with one line that names the fix: a second
//! listener on a port already taken, a server that is not running (or the wrong port), a
//! proxy server without --allow, and the commands that need root started without it. These
//! need no root and no lab: loopback only (as root, the unprivileged case runs as uid 65534).
//! A `--lan` that is the WAN needs interfaces of a lab host:
//! transfer_gateway_switch.rs, `a_lan_that_is_a_path_or_the_wan_is_refused_before_anything_is_installed`.

use crate::harness::*;
use std::net::TcpListener;
use std::process::{Command, Output, Stdio};

/// A loopback port nothing listens on (bound, then let go).
pub(crate) fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// One line on stderr, exit `code`, containing every one of `want`.
fn one_line(out: &Output, code: i32, want: &[&str]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    for w in want {
        assert!(err.contains(w), "{w:?} not in: {err}");
    }
}

#[test]
fn a_second_listener_on_a_taken_port_is_told_to_stop_the_first_or_pick_another() {
    let port = closed_port();
    let listen = format!("127.0.0.1:{port}");
    let to = format!("127.0.0.1:{}", closed_port());
    // The first proxy client holds the port.
    let mut first = nena_cmd();
    first.args([
        "proxy",
        "client",
        "--to",
        &to,
        "--trusted",
        "lo",
        "--listen",
        &listen,
    ]);
    let _first = spawn_listening_cmd(first, &["proxy client --listen", &listen]);
    // A second one (SOCKS this time) on the same port.
    let out = nena(&[
        "proxy",
        "client",
        "--to",
        &to,
        "--trusted",
        "lo",
        "--socks5",
        &listen,
    ]);
    one_line(
        &out,
        1,
        &[
            &format!("cannot listen on {listen}"),
            "another program already listens there",
            "give this one another port",
        ],
    );
}

#[test]
fn a_server_that_is_not_running_or_the_wrong_port_is_named_with_the_fix() {
    let dir = TempDir::new("mistake-send");
    let file = dir.join("letter.txt");
    std::fs::write(&file, b"a letter").unwrap();
    let to = format!("127.0.0.1:{}", closed_port());
    let out = nena(&[
        "send",
        "--to",
        &to,
        "--trusted",
        "lo",
        "--no-progress",
        file.to_str().unwrap(),
    ]);
    one_line(
        &out,
        1,
        &[
            &format!("cannot connect to {to}"),
            "nothing listens there: start the nena server on that host",
        ],
    );
    // The proxy client, whose sessions fail one by one: its log line names the fix too.
    let listen = format!("127.0.0.1:{}", closed_port());
    let mut cmd = nena_cmd();
    cmd.args([
        "proxy",
        "client",
        "--to",
        &to,
        "--trusted",
        "lo",
        "--listen",
        &listen,
    ]);
    let client = spawn_listening_cmd(cmd, &["proxy client --listen", &listen]);
    let app = std::net::TcpStream::connect(&listen).unwrap();
    let err = nena_testkit::wait_for(
        "the proxy client's line for the failed session",
        std::time::Duration::from_secs(20),
        || {
            let err = client.stderr();
            err.contains("nothing listens there").then_some(err)
        },
    );
    drop(app);
    assert!(
        err.contains(&format!("cannot connect to {to}")),
        "the cause and its fix on one line: {err}"
    );
}

#[test]
fn a_proxy_server_without_allow_says_which_flag_it_lacks() {
    let listen = format!("127.0.0.1:{}", closed_port());
    let mut cmd = nena_cmd();
    cmd.args(["proxy", "server", "--listen", &listen]);
    let server = spawn_listening_cmd(cmd, &["proxy server --listen", &listen]);
    let err = server.stderr();
    assert!(
        err.contains("no --forward and no --allow: every request will be refused")
            && err.contains("give --allow PREFIX:PORTS")
            && err.contains("--forward HOST:PORT"),
        "{err}"
    );
}

/// `nena ARGS` without any capability: as it is when the test runs unprivileged, or as uid
/// 65534 (a copy of the binary it can read, setpriv) when the test runs as root.
pub(crate) fn unprivileged(args: &[&str]) -> Output {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        use std::os::unix::fs::PermissionsExt;
        let dir = TempDir::new("mistake-noroot");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let copy = dir.join("nena");
        std::fs::copy(NENA, &copy).unwrap();
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
        Command::new("setpriv")
            .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
            .arg(&copy)
            .args(args)
            .env("XDG_STATE_HOME", dir.path())
            .stdin(Stdio::null())
            .output()
            .expect("setpriv (util-linux)")
    } else {
        nena(args)
    }
}

#[test]
fn commands_that_need_root_say_so_before_touching_anything() {
    let via = format!("127.0.0.1:{}", closed_port());
    for (args, want) in [
        (
            vec!["gateway", "--lan", "lo", "--via", &via, "--trusted", "lo"],
            "nena gateway needs root (CAP_NET_ADMIN",
        ),
        (
            vec!["gateway", "open", "--lan", "lo"],
            "nena gateway needs root (CAP_NET_ADMIN",
        ),
        (
            vec!["run", "--via", &via, "--trusted", "lo", "--", "true"],
            "nena run needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN",
        ),
    ] {
        let out = unprivileged(&args);
        one_line(&out, 1, &[want, "sudo"]);
    }
}

/// `nena gateway --warm-idle` above `--warm` is refused as a usage error, root or not,
/// before anything is checked or installed.
#[test]
fn a_gateway_that_would_keep_more_sessions_idle_than_busy_is_refused() {
    let via = format!("127.0.0.1:{}", closed_port());
    let args = [
        "gateway",
        "--lan",
        "lo",
        "--via",
        &via,
        "--trusted",
        "lo",
        "--warm",
        "2",
        "--warm-idle",
        "3",
    ];
    for out in [unprivileged(&args), nena(&args)] {
        one_line(&out, 2, &["--warm-idle 3 is more than --warm 2"]);
    }
}
