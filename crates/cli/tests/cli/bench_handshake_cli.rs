//! `nena bench handshake` (no lab, no root): it runs, its JSON holds the three handshakes with the
//! message sizes of PROTOCOL.md (version 1's hello 78 bytes and accept 76, version 2's 1,262
//! and 1,260, the confirm 41 in both), positive medians and their ratio as the medians'
//! quotient; bad input is a usage error.

use crate::harness::nena;

#[test]
fn bench_handshake_prints_both_handshakes_as_json() {
    // --no-check: the targets are a benchmark's verdict, not this test's.
    let out = nena(&[
        "bench",
        "handshake",
        "--samples",
        "5",
        "--json",
        "--no-check",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    let (b, a) = (&v["before"], &v["after"]);
    assert_eq!(b["version"], 1, "{v}");
    assert_eq!(a["version"], 2, "{v}");
    assert_eq!(b["first_flight_bytes"], 78, "{v}");
    assert_eq!(b["answer_bytes"], 76, "{v}");
    assert_eq!(a["first_flight_bytes"], 1262, "{v}");
    assert_eq!(a["answer_bytes"], 1260, "{v}");
    assert_eq!(a["confirm_bytes"], 41, "{v}");
    assert_eq!(b["confirm_bytes"], 41, "{v}");
    let med = |x: &serde_json::Value| x["handshake"]["median_ns"].as_f64().unwrap();
    assert!(med(b) > 0.0 && med(a) > 0.0, "{v}");
    assert_eq!(b["handshake"]["samples"], 5, "{v}");
    let ratio = v["time_ratio"].as_f64().unwrap();
    assert!((ratio - med(a) / med(b)).abs() < 1e-9, "{v}");
    let ff = v["first_flight_ratio"].as_f64().unwrap();
    assert!((ff - 1262.0 / 78.0).abs() < 1e-9, "{v}");
    // The resumed session: PROTOCOL.md's 97-byte resume hello and 81-byte answer, and the
    // server's ratio as the quotient of its two medians.
    let r = &v["resumed"];
    assert_eq!(r["first_flight_bytes"], 97, "{v}");
    assert_eq!(r["answer_bytes"], 81, "{v}");
    assert!(med(r) > 0.0, "{v}");
    let s = &v["server"];
    let (full, resumed) = (
        s["full_ns"].as_f64().unwrap(),
        s["resumed_ns"].as_f64().unwrap(),
    );
    assert!(full > 0.0 && resumed > 0.0, "{v}");
    assert!(
        (s["ratio"].as_f64().unwrap() - resumed / full).abs() < 1e-9,
        "{v}"
    );
    assert_eq!(v["targets"][0]["name"], "resumed-server-cpu-vs-full", "{v}");
    assert_eq!(v["targets"][1]["value"], 97.0, "{v}");

    let out = nena(&["bench", "handshake", "--samples", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--samples"));
}
