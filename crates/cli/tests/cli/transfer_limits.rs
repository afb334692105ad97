//! `nena serve`'s limits and access control through the lab (root): an upload announcing
//! 2^40 bytes or more than `--max-file-size` is refused before any data, `--read-only`
//! refuses uploads, and with `--token-file` a missing or wrong token is refused ("access
//! denied") while the right one is served.

use crate::harness::*;
use std::time::{Duration, Instant};

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

#[test]
fn uploads_too_large_for_the_limit_or_the_disk_are_refused_before_any_data() {
    let lab = lab();
    let srv = TempDir::new("limits");
    let cli = TempDir::new("limitsc");
    // A sparse file of 2^40 bytes: the client announces its size, it has no data blocks.
    let huge = cli.join("huge");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(1 << 40)
        .unwrap();
    let huge_s = huge.display().to_string();
    let free = nena_transport::app::files::free_space(srv.path()).unwrap();
    assert!(
        free < 1 << 40,
        "this test needs a scratch directory with less than 1 TiB free ({free} B)"
    );

    // No limit given: the free-space check refuses it.
    let s = serve(&lab, 7400, srv.path(), &[]);
    let to = server(&lab, 7400);
    let t = Instant::now();
    let (code, _, err) = run(&lab, &["send", &huge_s, "--to", &to, "--no-progress"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("not enough space"), "{err}");
    assert!(err.contains("1.0 TiB announced"), "{err}");
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "refused before the data"
    );
    s.wait_stderr("not enough space", Duration::from_secs(5));
    no_part_files(srv.path());
    drop(s);

    // --max-file-size 1M: 1 MiB is taken, 1 MiB + 1 byte is not.
    let s = serve(&lab, 7401, srv.path(), &["--max-file-size", "1M"]);
    let to = server(&lab, 7401);
    let ok = cli.join("ok");
    std::fs::write(&ok, random(1 << 20, 3)).unwrap();
    let big = cli.join("big");
    std::fs::write(&big, random((1 << 20) + 1, 4)).unwrap();
    let (code, _, err) = run(
        &lab,
        &["send", big.to_str().unwrap(), "--to", &to, "--no-progress"],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("file too large") && err.contains("at most 1.0 MiB"),
        "{err}"
    );
    let (code, _, err) = run(&lab, &["send", &huge_s, "--to", &to, "--no-progress"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("file too large"), "{err}");
    let (code, _, err) = run(
        &lab,
        &["send", ok.to_str().unwrap(), "--to", &to, "--no-progress"],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(std::fs::read(srv.join("ok")).unwrap(), random(1 << 20, 3));
    assert!(!srv.join("big").exists() && !srv.join("huge").exists());
    no_part_files(srv.path());
    s.wait_stderr("file too large", Duration::from_secs(5));
}

#[test]
fn read_only_and_the_access_token() {
    let lab = lab();
    let srv = TempDir::new("access");
    let cli = TempDir::new("accessc");
    std::fs::write(srv.join("there"), b"served content").unwrap();
    let f = cli.join("f");
    std::fs::write(&f, b"uploaded content").unwrap();
    let f_s = f.display().to_string();
    let out = cli.path().to_str().unwrap().to_string();

    // --read-only: downloads yes, uploads no.
    let s = serve(&lab, 7410, srv.path(), &["--read-only"]);
    let to = server(&lab, 7410);
    let (code, _, err) = run(&lab, &["send", &f_s, "--to", &to, "--no-progress"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("read-only"), "{err}");
    assert!(!srv.join("f").exists());
    let (code, _, err) = run(&lab, &["get", "there", "--from", &to, "--out", &out]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(std::fs::read(cli.join("there")).unwrap(), b"served content");
    drop(s);

    // --token-file: a missing or a wrong token is "access denied", the right one works.
    let tokens = TempDir::new("tokens");
    let right = tokens.join("right");
    std::fs::write(&right, "c2VjcmV0IHRva2VuIGZvciB0aGUgbGFi\n").unwrap();
    let wrong = tokens.join("wrong");
    std::fs::write(&wrong, "c2VjcmV0IHRva2VuIGZvciB0aGUgbGFj\n").unwrap();
    let (right, wrong) = (right.display().to_string(), wrong.display().to_string());
    let s = serve(&lab, 7411, srv.path(), &["--token-file", &right]);
    let to = server(&lab, 7411);
    for extra in [&[][..], &["--token-file", wrong.as_str()][..]] {
        let mut args = vec!["send", &f_s, "--to", &to, "--no-progress"];
        args.extend_from_slice(extra);
        let (code, _, err) = run(&lab, &args);
        assert_eq!(code, Some(1), "{extra:?}: {err}");
        assert!(err.contains("access denied"), "{extra:?}: {err}");
        let mut args = vec!["get", "there", "--from", &to, "--out", &out, "--overwrite"];
        args.extend_from_slice(extra);
        let (code, _, err) = run(&lab, &args);
        assert_eq!(code, Some(1), "{extra:?}: {err}");
        assert!(err.contains("access denied"), "{extra:?}: {err}");
        let mut args = vec!["perf", "--to", &to, "--bytes", "1M"];
        args.extend_from_slice(extra);
        let (code, _, err) = run(&lab, &args);
        assert_eq!(code, Some(1), "{extra:?}: {err}");
        assert!(err.contains("access denied"), "{extra:?}: {err}");
    }
    assert!(!srv.join("f").exists());
    s.wait_stderr("access denied", Duration::from_secs(5));
    let (code, _, err) = run(
        &lab,
        &[
            "send",
            &f_s,
            "--to",
            &to,
            "--no-progress",
            "--token-file",
            &right,
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(std::fs::read(srv.join("f")).unwrap(), b"uploaded content");
    let (code, _, err) = run(
        &lab,
        &["perf", "--to", &to, "--bytes", "1M", "--token-file", &right],
    );
    assert_eq!(code, Some(0), "{err}");
    // The token never shows in the server's log.
    assert!(!s.stderr().contains("c2VjcmV0"), "{}", s.stderr());
}
