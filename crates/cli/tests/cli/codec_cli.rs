//! `nena codec scramble|descramble` end to end: pipes, errors and exit statuses, and a large
//! input that must stream with bounded memory.

use nena_codec::{Descrambler, Impl, Scrambler};
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::thread;

const NENA: &str = env!("CARGO_BIN_EXE_nena");
const KEY: &str = "0123456789abcdef";
const KEY_BYTES: [u8; 8] = [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef];

/// Deterministic test bytes.
fn fill(rng: &mut nena_testkit::Prng, buf: &mut [u8]) {
    rng.fill(buf)
}

/// Run `nena args...` with `input` on stdin; returns (status code, stdout, stderr).
fn run(args: &[&str], input: &[u8]) -> (i32, Vec<u8>, String) {
    let mut child = Command::new(NENA)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn nena");
    let mut stdin = child.stdin.take().unwrap();
    let data = input.to_vec();
    // Feed from a thread so a full stdout pipe cannot deadlock us; ignore EPIPE (the child
    // may exit early on bad arguments without reading).
    let feeder = thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let out = child.wait_with_output().expect("wait nena");
    feeder.join().unwrap();
    (
        out.status.code().expect("exited normally, not by a signal"),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_one_line_error(stderr: &str) {
    assert!(stderr.starts_with("nena: "), "stderr: {stderr:?}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "stderr: {stderr:?}");
    assert!(!stderr.contains("panicked"), "stderr: {stderr:?}");
}

#[test]
fn round_trip_through_pipes_every_impl() {
    let mut st = nena_testkit::Prng::new(7);
    let mut data = vec![0u8; 300_001];
    fill(&mut st, &mut data);
    let mut want = data.clone();
    Scrambler::with_impl(KEY_BYTES, Impl::Revised).scramble_in_place(&mut want);
    for imp in ["straight", "revised", "fast"] {
        let (code, scrambled, err) =
            run(&["codec", "scramble", "--key", KEY, "--impl", imp], &data);
        assert_eq!(code, 0, "{imp}: {err}");
        assert_eq!(scrambled, want, "{imp} scramble");
        let (code, back, err) = run(
            &["codec", "descramble", "--key", KEY, "--impl", imp],
            &scrambled,
        );
        assert_eq!(code, 0, "{imp}: {err}");
        assert_eq!(back, data, "{imp} round trip");
    }
}

#[test]
fn default_impl_and_empty_input() {
    let (code, out, _) = run(&["codec", "scramble", "--key", KEY], b"");
    assert_eq!((code, out.len()), (0, 0));
    // A short message: first byte is b0 ^ (XOR of the key bytes) = b0 ^ 0x00 here
    // (0x01^0x23^0x45^0x67^0x89^0xab^0xcd^0xef == 0).
    let (code, out, _) = run(&["codec", "scramble", "--key", KEY], b"A");
    assert_eq!((code, out), (0, b"A".to_vec()));
    let (code, out, _) = run(&["codec", "scramble", "--key", "8000000000000000"], b"A");
    assert_eq!((code, out), (0, vec![b'A' ^ 0x80]));
}

#[test]
fn bad_key_is_status_2_one_line() {
    for key in [
        "0123",
        "0123456789abcdeg",
        "0123456789abcdef00",
        "",
        "-123456789abcdef",
    ] {
        for sub in ["scramble", "descramble"] {
            let (code, out, err) = run(&["codec", sub, "--key", key], b"data");
            assert_eq!(code, 2, "key {key:?}: {err}");
            assert!(out.is_empty());
            assert_one_line_error(&err);
            assert!(err.contains("key"), "{err}");
        }
    }
}

#[test]
fn bad_impl_is_status_2_one_line() {
    let (code, _, err) = run(&["codec", "scramble", "--key", KEY, "--impl", "aes"], b"x");
    assert_eq!(code, 2);
    assert_one_line_error(&err);
    assert!(err.contains("straight, revised, fast"), "{err}");
}

#[test]
fn unknown_option_and_missing_key_are_status_2() {
    let (code, _, err) = run(&["codec", "scramble", "--key", KEY, "--bogus"], b"x");
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--bogus") && !err.contains("panicked"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "one-line error: {err}");
    let (code, _, err) = run(&["codec", "descramble"], b"x");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--key") && !err.contains("panicked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one-line error: {err}");
}

#[test]
fn broken_stdout_pipe_is_status_2_no_panic() {
    let mut child = Command::new(NENA)
        .args(["codec", "scramble", "--key", KEY])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the read end of its stdout before it writes anything.
    drop(child.stdout.take());
    let mut stdin = child.stdin.take().unwrap();
    let feeder = thread::spawn(move || {
        let chunk = vec![0x5a; 1 << 16];
        for _ in 0..64 {
            if stdin.write_all(&chunk).is_err() {
                break;
            }
        }
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_one_line_error(&err);
    assert!(err.contains("writing standard output"), "{err}");
}

#[test]
fn unreadable_stdin_is_status_2() {
    // A directory as standard input: read() fails with EISDIR.
    let out = Command::new(NENA)
        .args(["codec", "descramble", "--key", KEY])
        .stdin(std::fs::File::open("/").unwrap())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_one_line_error(&err);
    assert!(err.contains("reading standard input"), "{err}");
}

/// Peak resident set of a running process in KiB (`VmHWM`), if it is still there.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// 200 MiB through `nena codec scramble`: the output is right and the process's peak RSS
/// stays small, i.e. it streams instead of reading everything first.
#[test]
fn large_input_streams_with_bounded_memory() {
    const TOTAL: usize = 200 << 20;
    const PIECE: usize = 1 << 20;
    let mut child = Command::new(NENA)
        .args(["codec", "scramble", "--key", KEY])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let feeder = thread::spawn(move || {
        let mut st = nena_testkit::Prng::new(99);
        let mut buf = vec![0u8; PIECE];
        for _ in 0..TOTAL / PIECE {
            fill(&mut st, &mut buf);
            stdin.write_all(&buf).expect("feed nena");
        }
    });
    // Check the output against the library, piece by piece, and sample the peak RSS.
    let mut stdout = child.stdout.take().unwrap();
    let mut st = nena_testkit::Prng::new(99);
    let mut reference = Scrambler::new(KEY_BYTES);
    let mut check = Descrambler::new(KEY_BYTES);
    let mut want = vec![0u8; PIECE];
    let mut got = vec![0u8; PIECE];
    let mut peak = 0;
    for i in 0..TOTAL / PIECE {
        stdout.read_exact(&mut got).expect("read nena output");
        fill(&mut st, &mut want);
        let plain = want.clone();
        reference.scramble_in_place(&mut want);
        assert!(got == want, "output differs in MiB {i}");
        check.descramble_in_place(&mut got);
        assert!(got == plain, "does not descramble back in MiB {i}");
        if i % 8 == 0 || i + 1 == TOTAL / PIECE {
            peak = peak.max(peak_rss_kib(pid).unwrap_or(0));
        }
    }
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "{} extra bytes", rest.len());
    feeder.join().unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(peak > 0, "could not read VmHWM of the child");
    assert!(peak < 64 * 1024, "peak RSS {peak} KiB: not streaming?");
    eprintln!("nena codec scramble, 200 MiB: peak RSS {peak} KiB");
}
