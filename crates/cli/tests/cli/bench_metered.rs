//! `nena bench metered` end to end, shortened (root): its own lab with the relay, the
//! userspace path manager only, 4 MiB per transfer; every row's three judged transfers
//! and two reported ones present, the ratios and verdicts consistent with the transfers,
//! and the lab gone afterwards. The verdicts are reported, not required here (`make bench`
//! runs the 100 MiB transfers with both path managers).

use crate::harness::{bench_json, nena};

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn both_ways_with_verdicts_that_follow_from_the_transfers() {
    let (r, lab_ns) = bench_json(
        &[
            "metered",
            "--bytes",
            "4M",
            "--pm",
            "userspace",
            "--no-check",
            "--json",
        ],
        "nm",
    );
    assert_eq!(r["bytes"], 4 << 20);
    let rows = r["rows"].as_array().unwrap();
    let ways: Vec<&str> = rows.iter().map(|w| w["way"].as_str().unwrap()).collect();
    assert_eq!(ways, ["upload", "download"], "{r}");
    for row in rows {
        assert_eq!(row["pm"], "userspace");
        assert!(row.get("kernel_alone").is_none(), "{row}");
        let f = |t: &str, k: &str| row[t][k].as_f64().unwrap();
        for (t, run) in [
            ("wlan_alone", "wlan-alone"),
            ("metered", "metered"),
            ("outage", "outage"),
            ("silent", "silent"),
        ] {
            assert_eq!(row[t]["run"], run, "{row}");
            assert_eq!(row[t]["bytes"], 4 << 20, "{row}");
            // 4 MiB at 50 Mbit/s at the most.
            assert!((0.5..60.0).contains(&f(t, "goodput_mbit_s")), "{t}: {row}");
            let share = f(t, "trusted_share");
            let (tb, all) = (
                row[t]["trusted_bytes"].as_u64().unwrap(),
                row[t]["all_bytes"].as_u64().unwrap(),
            );
            assert!((share - tb as f64 / all as f64).abs() < 1e-9, "{t}: {row}");
        }
        // The baseline never touches the trusted link; the outages took the WLAN away.
        assert_eq!(row["wlan_alone"]["trusted_bytes"], 0, "{row}");
        for t in ["outage", "silent"] {
            assert!(row[t]["down_at_s"].as_f64().unwrap() > 0.0, "{t}: {row}");
            assert!(
                row[t]["trusted_after_down"].as_u64().is_some(),
                "{t}: {row}"
            );
            // The gap from the WLAN's loss on is one of the transfer's gaps.
            assert!(
                f(t, "gap_after_down_s") <= f(t, "longest_gap_s"),
                "{t}: {row}"
            );
        }
        let ratio = f("metered", "goodput_mbit_s") / f("wlan_alone", "goodput_mbit_s");
        assert!(
            (row["goodput_ratio"].as_f64().unwrap() - ratio).abs() < 1e-9,
            "{row}"
        );
        assert_eq!(
            row["share_ok"],
            f("metered", "trusted_share") <= 0.02,
            "{row}"
        );
        assert_eq!(row["goodput_ok"], ratio >= 0.95, "{row}");
        let outage_ok = row["outage"]["trusted_after_down"].as_u64().unwrap() > 0
            && f("outage", "gap_after_down_s") <= 1.0;
        assert_eq!(row["outage_ok"], outage_ok, "{row}");
        assert_eq!(
            row["pass"],
            row["share_ok"] == true && row["goodput_ok"] == true && outage_ok,
            "{row}"
        );
    }
    assert_eq!(r["pass"], rows.iter().all(|x| x["pass"] == true), "{r}");
    assert!(!lab_ns.exists(), "the bench left its lab behind");
}

#[test]
fn fewer_bytes_than_a_mebibyte_is_a_usage_error() {
    let o = nena(&["bench", "metered", "--bytes", "64K"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("at least 1M"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
