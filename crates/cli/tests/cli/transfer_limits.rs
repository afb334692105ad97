//! `nena serve`'s limit and access flags through the lab (root): that `--max-file-size`,
//! `--read-only` and `--token-file` reach the server (and `--token-file` the client). What
//! the limits do (the free space, the limit's edge, every refusal) is tested over the
//! in-memory network: crates/transport/tests/net_file_limits.rs.

use crate::harness::*;
use std::time::Duration;

/// `nena ARGS PATHS...` in the client host: (exit code, stdout, stderr). A client still
/// running after 30 s (a server that took a 1 TiB upload) is killed and fails the test.
fn run(lab: &nena_lab::Lab, args: &[&str]) -> (Option<i32>, String, String) {
    let mut a = args.to_vec();
    a.extend_from_slice(&PATHS);
    let mut cmd = lab.command(nena_lab::Host::Client, NENA, &a);
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    if !nena_testkit::poll_until(Duration::from_secs(30), || {
        child.try_wait().unwrap().is_some()
    }) {
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        panic!(
            "nena {a:?} still running after 30 s: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn no_part_files(dir: &std::path::Path) {
    let names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.ends_with(".part")),
        "partial uploads left behind: {names:?}"
    );
}

/// The flags reach the server's limits and the client's request: `--max-file-size`,
/// `--read-only` and `--token-file` on `nena serve`, `--token-file` on `nena send`. (What
/// the limits do, each case: crates/transport/tests/net_file_limits.rs, over the in-memory
/// network.)
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn serve_flags_set_the_limits() {
    let lab = lab();
    let srv = TempDir::new("limits");
    let cli = TempDir::new("limitsc");
    let tokens = TempDir::new("tokens");
    let right = tokens.join("right");
    std::fs::write(&right, "c2VjcmV0IHRva2VuIGZvciB0aGUgbGFi\n").unwrap();
    let right = right.display().to_string();
    let ok = cli.join("ok");
    std::fs::write(&ok, random(1 << 20, 3)).unwrap();
    let big = cli.join("big");
    std::fs::write(&big, random((1 << 20) + 1, 4)).unwrap();
    let (ok, big) = (ok.display().to_string(), big.display().to_string());

    let s = serve(
        &lab,
        7401,
        srv.path(),
        &["--max-file-size", "1M", "--token-file", &right],
    );
    let to = server(&lab, 7401);
    // No token: refused.
    let (code, _, err) = run(&lab, &["send", &ok, "--to", &to, "--no-progress"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("access denied"), "{err}");
    // The token, a file over the limit: refused for its size.
    let with_token = |file: &str| {
        run(
            &lab,
            &[
                "send",
                file,
                "--to",
                &to,
                "--no-progress",
                "--token-file",
                &right,
            ],
        )
    };
    let (code, _, err) = with_token(&big);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("file too large") && err.contains("at most 1.0 MiB"),
        "{err}"
    );
    // The token, a file within it: stored.
    let (code, _, err) = with_token(&ok);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(std::fs::read(srv.join("ok")).unwrap(), random(1 << 20, 3));
    assert!(!srv.join("big").exists());
    no_part_files(srv.path());
    s.wait_stderr("file too large", Duration::from_secs(5));
    // The token never shows in the server's log.
    assert!(!s.stderr().contains("c2VjcmV0"), "{}", s.stderr());
    drop(s);

    let _s = serve(&lab, 7410, srv.path(), &["--read-only"]);
    let to = server(&lab, 7410);
    let (code, _, err) = run(&lab, &["send", &big, "--to", &to, "--no-progress"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("read-only"), "{err}");
    assert!(!srv.join("big").exists());
}
