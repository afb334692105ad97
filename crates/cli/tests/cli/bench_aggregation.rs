//! `nena bench aggregation` end to end, shortened (root): its own lab with the relay, one
//! setting (15+5 Mbit/s, 25/1 ms), 1 MiB each way through nena and through the bare
//! kernel's MPTCP, every transfer byte-counted by the bench; the JSON's medians, ratios and
//! verdicts consistent with its transfers, and the lab gone afterwards. The verdicts are
//! reported, not required here (`make bench` runs the full settings and sizes).

use crate::harness::{bench_json, nena};

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn one_setting_both_ways_with_ratios_that_follow_from_the_transfers() {
    let (r, lab_ns) = bench_json(
        &[
            "aggregation",
            "--setting",
            "15+5 Mbit/s, 25/1",
            "--reps",
            "1",
            "--bytes",
            "1M",
            "--no-check",
            "--json",
        ],
        "na",
    );
    assert_eq!(r["bytes"], 1 << 20);
    let rows = r["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{r}");
    let ways: Vec<&str> = rows.iter().map(|w| w["way"].as_str().unwrap()).collect();
    assert_eq!(ways, ["send", "get"]);
    for row in rows {
        assert_eq!(row["setting"]["name"], "15+5 Mbit/s, 25/1 ms");
        let t = row["transfers"].as_array().unwrap();
        let whos: Vec<&str> = t.iter().map(|x| x["who"].as_str().unwrap()).collect();
        assert_eq!(whos, ["nena", "kernel"], "{row}");
        let secs = |who: &str| {
            t.iter().find(|x| x["who"] == who).unwrap()["seconds"]
                .as_f64()
                .unwrap()
        };
        // 1 MiB at 20 Mbit/s takes at least 0.42 s; a 25 ms path adds round trips.
        for who in ["nena", "kernel"] {
            assert!((0.4..30.0).contains(&secs(who)), "{who}: {row}");
        }
        let f = |k: &str| row[k].as_f64().unwrap();
        assert_eq!(f("nena_median_s"), secs("nena"));
        assert_eq!(f("kernel_median_s"), secs("kernel"));
        let bound = (1u64 << 20) as f64 * 8.0 / (20e6 * 0.9) + 0.45;
        assert!((f("bound_s") - bound).abs() < 1e-9, "{row}");
        assert!((f("kernel_ratio") - secs("nena") / secs("kernel")).abs() < 1e-9);
        assert!((f("bound_ratio") - secs("nena") / bound).abs() < 1e-9);
        assert_eq!(
            row["pass"],
            f("kernel_ratio") <= 1.05 && f("bound_ratio") <= 1.0,
            "{row}"
        );
    }
    assert_eq!(r["pass"], rows.iter().all(|x| x["pass"] == true), "{r}");
    assert!(!lab_ns.exists(), "the bench left its lab behind");
}

#[test]
fn a_setting_that_matches_nothing_is_a_usage_error() {
    let o = nena(&["bench", "aggregation", "--setting", "100+1"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("matches none of") && err.contains("15+5 Mbit/s, 25/1 ms"),
        "{err}"
    );
}
