//! `nena status` (issue 58, item 1): a running server answers on its owner-only control
//! socket with what it is doing: its sessions by outcome and, per path, the bytes it carried
//! and their throughput; as text and as JSON. Loopback only, no root.

use crate::first_mistakes::{closed_port, unprivileged};
use crate::harness::*;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

fn status(args: &[&str]) -> std::process::Output {
    let mut all = vec!["status"];
    all.extend_from_slice(args);
    nena(&all)
}

#[test]
fn nena_status_shows_a_running_servers_sessions_and_bytes_per_path() {
    let dir = TempDir::new("status");
    let files = TempDir::new("status-files");
    let size = 3_000_000usize;
    std::fs::write(files.join("big"), random(size, 58)).unwrap();
    let control = dir.join("ctl").join("serve.sock");
    let listen = format!("127.0.0.1:{}", closed_port());
    let mut cmd = nena_cmd();
    cmd.args([
        "serve",
        "--listen",
        &listen,
        "--dir",
        files.path().to_str().unwrap(),
        "--control",
        control.to_str().unwrap(),
    ]);
    let srv = spawn_listening_cmd(cmd, &["serve --listen", &listen]);
    let ctl = control.to_str().unwrap();

    // Owner-only: the socket 0600 in a directory 0700.
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&control), 0o600);
    assert_eq!(mode(control.parent().unwrap()), 0o700);

    // Before any session: the command, no paths, no sessions.
    let out = status(&["--control", ctl, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["role"], "serve", "{v}");
    assert_eq!(v[0]["sessions_open"], 0, "{v}");
    assert_eq!(v[0]["paths"].as_array().map(Vec::len), Some(0), "{v}");
    assert!(
        v[0]["about"].to_string().contains("nena serve"),
        "the command says what it is: {v}"
    );

    // A download of 3 MB.
    let got = dir.join("got");
    let out = nena(&[
        "get",
        "big",
        "--from",
        &listen,
        "--trusted",
        "lo",
        "--no-progress",
        "--out",
        got.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::metadata(&got).unwrap().len(), size as u64);

    // The server's answer once the session is counted: one session ended ok, and the 3 MB
    // sent on its one path (its local address), not more than 1% and 64 KiB over.
    let v = nena_testkit::wait_for("the download counted", Duration::from_secs(10), || {
        let out = status(&["--control", ctl, "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        (v[0]["sessions_ended"]["ok"] == 1).then_some(v)
    });
    let paths = v[0]["paths"].as_array().unwrap();
    assert_eq!(paths.len(), 1, "{v}");
    assert_eq!(paths[0]["name"], "127.0.0.1", "{v}");
    let sent = paths[0]["sent"].as_u64().unwrap();
    let max = size as u64 + size as u64 / 100 + 65536;
    assert!(
        (size as u64..=max).contains(&sent),
        "{sent} bytes sent for {size}: {v}"
    );

    // The same as text.
    let out = status(&["--control", ctl]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.starts_with("serve (pid "), "{text}");
    assert!(text.contains("ended: ok 1"), "{text}");
    assert!(text.contains("127.0.0.1") && text.contains("MiB"), "{text}");

    // Listing the socket's directory finds it too.
    let out = status(&[
        "--dir",
        control.parent().unwrap().to_str().unwrap(),
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v.as_array().map(Vec::len), Some(1), "{v}");

    // Another local user cannot ask (as root the test asks as uid 65534, through a path it
    // may walk up to the command's 0700 directory).
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let out = unprivileged(&["status", "--control", ctl, "--json"]);
        assert_eq!(out.status.code(), Some(1), "another user was answered");
        assert!(
            out.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("ermission denied"), "{err}");
    }
    drop(srv);
}

#[test]
fn nena_status_with_nothing_running_says_where_it_looked() {
    let dir = TempDir::new("status-none");
    let out = status(&["--dir", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no running nena command has a control socket in")
            && err.contains(dir.path().to_str().unwrap()),
        "{err}"
    );
    // A socket whose command is gone (killed before it could remove it) is removed.
    let stale = dir.join("serve-1.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let out = status(&["--dir", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!stale.exists(), "the stale socket was left");
    // One that is not a socket of nena's: named in the error, exit 1.
    let out = status(&["--control", dir.join("nothing.sock").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing.sock"));
}
