//! `nena bench sessions` end to end, shortened (root), against each server in a lab of its
//! own: 60 sessions held open at once, each byte-exact and ended cleanly, the descriptors
//! each session takes on each side (a leak would show), the JSON's verdicts consistent with
//! its figures, and the lab gone afterwards. Against `nena serve` the load is spread over two
//! worker processes (`--per-process 30`), as the full count spreads it over the open-file
//! limit. The memory and time verdicts are reported, not required here (a short run on a
//! shared host; `make bench` runs the full count). A count the open-file limit cannot take
//! is refused before any lab exists.

use crate::harness::{bench_json, nena};
use serde_json::Value;

/// The checks both servers share: counts, errors, and the verdicts against the figures.
fn check_common(r: &Value) {
    assert_eq!(r["asked"], 60);
    assert_eq!(r["sessions"], 60);
    assert_eq!(r["opened"], 60, "{r}");
    assert_eq!(r["verified"], 60, "{r}");
    assert_eq!(r["errors"].as_array().unwrap().len(), 0, "{r}");
    assert_eq!(r["exact_ok"], true);
    for side in ["client", "server"] {
        let s = &r[side];
        assert!(
            s["rss_loaded_kib"].as_u64() >= s["rss_idle_kib"].as_u64(),
            "{s}"
        );
        let per =
            (s["rss_loaded_kib"].as_f64().unwrap() - s["rss_idle_kib"].as_f64().unwrap()) / 60.0;
        assert!(
            (s["kib_per_session"].as_f64().unwrap() - per).abs() < 1e-6,
            "{s}"
        );
    }
    let ratio = r["loaded_open_ms"].as_f64().unwrap() / r["idle_open_ms"].as_f64().unwrap();
    assert!(
        (r["open_ratio"].as_f64().unwrap() - ratio).abs() < 1e-9,
        "{r}"
    );
    assert_eq!(r["open_ok"], ratio <= 2.0);
    let memory = ["client", "server"]
        .iter()
        .all(|s| r[s]["kib_per_session"].as_f64().unwrap() <= 32.0);
    assert_eq!(r["memory_ok"], memory);
    assert_eq!(
        r["pass"],
        memory && r["open_ok"] == true && r["exact_ok"] == true
    );
}

/// Descriptors per session on `side`: `fds` exactly, give or take a few a process opens or
/// closes once between its idle and its loaded reading (its path-manager sockets, a probe's
/// session still closing: at most 8 per process) but not one more or less per session. (A
/// CI run read 59 more on the server for 60 sessions: one descriptor of the idle reading
/// was gone by the loaded one.)
fn check_fds(r: &Value, side: &str, fds: f64, processes: f64) {
    let per = r[side]["fds_per_session"].as_f64().unwrap();
    let once = 8.0 * processes / 60.0;
    assert!((fds - once..=fds + once).contains(&per), "{side}: {r}");
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn sixty_sessions_against_nena_serve_from_two_workers_are_byte_exact() {
    let (r, lab_ns) = bench_json(
        &[
            "sessions",
            "--sessions",
            "60",
            "--per-process",
            "30",
            "--probes",
            "3",
            "--no-check",
            "--json",
        ],
        "ns",
    );
    assert_eq!(r["against"], "serve");
    assert_eq!(r["client_processes"], 2, "{r}");
    check_common(&r);
    // No client proxy here; nena serve's integrity failures were read.
    assert!(r["retried_openings"].is_null(), "{r}");
    assert_eq!(r["server_integrity_failures"].as_u64(), Some(0), "{r}");
    // A worker holds the MPTCP socket and the gate's descriptor of it; nena serve the socket.
    check_fds(&r, "client", 2.0, 2.0);
    check_fds(&r, "server", 1.0, 1.0);
    assert!(!lab_ns.exists(), "{} left behind", lab_ns.display());
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn sixty_sessions_through_the_proxy_pair_are_carried_byte_exact_with_their_descriptors_counted() {
    let (r, lab_ns) = bench_json(
        &[
            "sessions",
            "--against",
            "proxy",
            "--sessions",
            "60",
            "--probes",
            "3",
            "--no-check",
            "--json",
        ],
        "ns",
    );
    assert_eq!(r["against"], "proxy");
    assert_eq!(r["client_processes"], 1);
    check_common(&r);
    // The proxies' own counters were read: every retried opening is an integrity failure
    // the server saw (the kernel's fault of docs/investigations/kernel-41-bytes, rare; 0
    // here nearly always), and none reached an application.
    let retried = r["retried_openings"]
        .as_u64()
        .expect("retried openings read");
    let failures = r["server_integrity_failures"]
        .as_u64()
        .expect("the server's integrity failures read");
    assert!(retried <= failures && failures <= 3, "{r}");
    // The client proxy holds the application's connection, the MPTCP socket and the gate's
    // descriptor of it per session; the server proxy the MPTCP socket and the target's.
    check_fds(&r, "client", 3.0, 1.0);
    check_fds(&r, "server", 2.0, 1.0);
    assert!(!lab_ns.exists(), "{} left behind", lab_ns.display());
}

#[test]
fn a_count_the_open_file_limit_cannot_take_is_refused_before_any_lab() {
    // One descriptor per session (and per probe) in nena serve, three per session in the
    // client proxy: no host's limit (at most 2^30) takes 2 billion.
    let out = nena(&["bench", "sessions", "--sessions", "2000000000"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("2000000000 sessions need 2000000277 open files in nena serve")
            && err.contains("at most --sessions"),
        "{err}"
    );
    assert!(!err.contains("lab"), "{err}");
    let out = nena(&[
        "bench",
        "sessions",
        "--against",
        "proxy",
        "--sessions",
        "400000000",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("400000000 sessions need 1200000256 open files in the client proxy"),
        "{err}"
    );
    for bad in [["--sessions", "0"], ["--per-process", "0"]] {
        let out = nena(&["bench", "sessions", bad[0], bad[1]]);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
    }
}
