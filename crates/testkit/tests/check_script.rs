//! `scripts/check-tests-ran.sh`, the judge of `make test`, on synthetic cargo logs: it must
//! fail on a failed test, an empty or crashed suite, an unexpected skip and a log with no
//! test, and count per crate (telling apart two crates' `tests/netns.rs`).
use std::path::PathBuf;
use std::process::Command;

const GOOD: &str = "     Running unittests src/lib.rs (target/release/deps/nena_codec-0123abcd)

running 2 tests
test a ... ok
test fast::x86_avx512::tests::two_step_equals_one_step ... nena-test: SKIPPED nena-codec fast::x86_avx512::tests::two_step_equals_one_step: no AVX-512 here
ok

test result: ok. 2 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s

     Running tests/netns.rs (target/release/deps/netns-aaaa)

running 1 test
test x ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

     Running tests/netns.rs (target/release/deps/netns-bbbb)

running 3 tests
test x ... ok

test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

   Doc-tests nena_codec

running 0 tests

test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

cargo test exit status: 0
";

const ONE_NETNS_TEST: &str =
    "running 1 test\ntest x ... ok\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n";

struct Run {
    ok: bool,
    out: String,
}

fn judge(name: &str, log: &str) -> Run {
    let dir = std::env::temp_dir().join(format!("nena-check-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (logf, suites) = (dir.join("test.log"), dir.join("suites.txt"));
    std::fs::write(&logf, log).unwrap();
    std::fs::write(&suites, "netns-aaaa nena-mptcp\nnetns-bbbb nena-policy\n").unwrap();
    let script: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "..",
        "..",
        "scripts",
        "check-tests-ran.sh",
    ]
    .iter()
    .collect();
    let o = Command::new("bash")
        .arg(script)
        .arg(&logf)
        .arg(&suites)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    Run {
        ok: o.status.success(),
        out: String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr),
    }
}

#[test]
fn a_good_log_passes_with_per_crate_counts_and_named_skips() {
    let r = judge("good", GOOD);
    assert!(r.ok, "{}", r.out);
    // the closing line CI reads: skipped tests are not counted as passed
    assert!(
        r.out.lines().any(|l| l == "5 passed, 0 failed, 1 skipped"),
        "{}",
        r.out
    );
    let row = |krate: &str| {
        r.out
            .lines()
            .find(|l| l.split_whitespace().next() == Some(krate))
            .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|| panic!("no row for {krate}: {}", r.out))
    };
    // suites passed failed skipped ignored
    assert_eq!(row("nena-codec"), "1 1 0 1 1");
    assert_eq!(row("nena-mptcp"), "1 1 0 0 0");
    assert_eq!(row("nena-policy"), "1 3 0 0 0");
    assert!(r.out.contains(
        "skipped: nena-codec fast::x86_avx512::tests::two_step_equals_one_step: no AVX-512 here"
    ));
}

#[test]
fn a_failed_test_fails() {
    let r = judge(
        "fail",
        &GOOD.replace("3 passed; 0 failed", "2 passed; 1 failed"),
    );
    assert!(!r.ok, "{}", r.out);
    assert!(r.out.contains("4 passed, 1 failed, 1 skipped"), "{}", r.out);
}

#[test]
fn a_suite_that_ran_nothing_fails() {
    let log = GOOD.replacen(
        ONE_NETNS_TEST,
        "running 0 tests\n\ntest result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n",
        1,
    );
    assert_ne!(log, GOOD);
    let r = judge("empty", &log);
    assert!(!r.ok, "{}", r.out);
    assert!(
        r.out
            .contains("suite ran no test: tests/netns.rs (nena-mptcp)"),
        "{}",
        r.out
    );
}

#[test]
fn a_suite_that_never_reported_fails() {
    let log = GOOD.replacen(ONE_NETNS_TEST, "running 1 test\n", 1);
    assert_ne!(log, GOOD);
    let r = judge("crash", &log);
    assert!(!r.ok, "{}", r.out);
    assert!(
        r.out
            .contains("never reported (crashed?): tests/netns.rs (nena-mptcp)"),
        "{}",
        r.out
    );
}

#[test]
fn an_unexpected_skip_fails() {
    let r = judge(
        "skip",
        &GOOD.replace("two_step_equals_one_step", "some_other_test"),
    );
    assert!(!r.ok, "{}", r.out);
    assert!(r.out.contains("unexpected skip"), "{}", r.out);
}

#[test]
fn a_log_without_tests_fails() {
    let r = judge("none", "");
    assert!(!r.ok, "{}", r.out);
    assert!(r.out.contains("no tests ran"), "{}", r.out);
}
