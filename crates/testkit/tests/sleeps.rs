//! Tests wait on events, not on time (issue 42): every `sleep(` left in the workspace's test
//! code says on its own line or the line above, in a `// sleep:` comment, why the time
//! itself is the subject (an outage that lasts, a silent server, pacing). A wait for
//! something to happen is `nena_testkit::wait_for` and its kin instead.
//!
//! Test code here is: every `.rs` file under a crate's `tests/`, testkit's own `src/`, and
//! in a crate's `src/` the `tests.rs` files and whatever follows a file's first
//! `#[cfg(test)]`.
use std::path::{Path, PathBuf};

/// Files whose sleeps are not checked yet, each with the reason. Matched as a suffix of the
/// path from the workspace root, so that they stay matched when moved under a new parent.
const NOT_YET: &[(&str, &str)] = &[];

/// Directories not checked yet, with the reason.
const NOT_YET_DIRS: &[(&str, &str)] = &[];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// A call of a sleep on this line's code (before any `//`): `thread::sleep(`,
/// `time::sleep(`, or a bare `sleep(` (imported), but not a method such as python's
/// `time.sleep(` inside a script string.
fn sleeps(line: &str) -> bool {
    let code = line.split("//").next().unwrap_or("");
    code.match_indices("sleep(").any(|(i, _)| {
        let before = code[..i].chars().next_back();
        !before.is_some_and(|c| c == '.' || c == '_' || c.is_alphanumeric())
    })
}

fn justified(lines: &[&str], i: usize) -> bool {
    lines[i].contains("// sleep:") || (i > 0 && lines[i - 1].trim_start().starts_with("// sleep:"))
}

/// The test-code lines of `file` (1-based numbers), per the rules above.
fn test_lines(rel: &str, text: &str) -> std::ops::Range<usize> {
    let lines = text.lines().count();
    let in_src = rel.contains("/src/");
    let whole = !in_src || rel.starts_with("crates/testkit/src/") || rel.ends_with("/tests.rs");
    if whole {
        return 0..lines;
    }
    match text.lines().position(|l| l.trim() == "#[cfg(test)]") {
        Some(at) => at..lines,
        None => 0..0,
    }
}

/// `(path:line, line)` of every sleep in test code without a `// sleep:` reason, and the
/// number of sleeps seen.
fn unjustified() -> (Vec<String>, usize) {
    let root = root();
    let mut files = Vec::new();
    for krate in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        rust_files(&krate.path().join("tests"), &mut files);
        rust_files(&krate.path().join("src"), &mut files);
    }
    files.sort();
    let (mut bad, mut seen) = (Vec::new(), 0);
    for f in files {
        let rel = f
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if rel.ends_with("testkit/tests/sleeps.rs")
            || NOT_YET.iter().any(|(s, _)| rel.ends_with(s))
            || NOT_YET_DIRS.iter().any(|(d, _)| rel.starts_with(d))
        {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for i in test_lines(&rel, &text) {
            if sleeps(lines[i]) {
                seen += 1;
                if !justified(&lines, i) {
                    bad.push(format!("{rel}:{}: {}", i + 1, lines[i].trim()));
                }
            }
        }
    }
    (bad, seen)
}

#[test]
fn every_sleep_in_test_code_says_why_the_time_is_its_subject() {
    let (bad, seen) = unjustified();
    assert!(
        seen > 0,
        "no sleep found at all: is the scan looking at the tests?"
    );
    assert!(
        bad.is_empty(),
        "{} of {seen} sleeps in test code have no `// sleep: why` on their line or the one \
         above. Wait for the event instead (nena_testkit::wait_for, wait_until, \
         wait_settled, Capture::stop), or say why the time itself is the subject:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

#[test]
fn the_scan_tells_calls_from_other_text() {
    assert!(sleeps("    std::thread::sleep(Duration::from_millis(5));"));
    assert!(sleeps("        tokio::time::sleep(d).await;"));
    assert!(sleeps("    sleep(d);"));
    assert!(!sleeps("             time.sleep(30)\","));
    assert!(!sleeps("    // std::thread::sleep(d) is what we avoid"));
    assert!(!sleeps("    fn deep_sleep(x) {}"));
    let lines = ["    // sleep: the outage", "    std::thread::sleep(d);"];
    assert!(justified(&lines, 1));
    assert!(!justified(&["x", "    std::thread::sleep(d);"], 1));
    assert_eq!(
        test_lines("crates/a/src/x.rs", "a\n#[cfg(test)]\nb\n"),
        1..3
    );
    assert_eq!(test_lines("crates/a/src/x.rs", "a\nb\n"), 0..0);
    assert_eq!(test_lines("crates/a/tests/x.rs", "a\nb\n"), 0..2);
}
