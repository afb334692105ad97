//! `nena bench hostile-lan` (root), shortened to one repetition: the other host's fetch and
//! lookup succeeded calm and under the spray with positive times, the ratios and the
//! verdict follow from them, the sprayer sent what it says, the gateway's memory peak and
//! bounds line are there and its caps held, and the lab is gone afterwards. The verdict is
//! reported, not required here (the bench with its repetitions gives it).

use crate::harness::{bench_json, nena};

#[test]
fn a_missing_dnsmasq_is_named_before_any_lab() {
    let o = nena(&["bench", "hostile-lan", "--dnsmasq", "/nonexistent/dnsmasq"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("/nonexistent/dnsmasq"), "{err}");
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn one_repetition_measures_the_other_host_calm_and_under_the_spray() {
    let (r, lab_ns) = bench_json(
        &["hostile-lan", "--reps", "1", "--no-check", "--json"],
        "hl",
    );
    assert!(!lab_ns.exists(), "the bench left its lab behind");
    let f = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k}: {r}"));
    assert_eq!(r["reps"], 1);
    for phase in ["calm", "spray"] {
        let p = &r[phase];
        assert_eq!(p["fetch_s"].as_array().unwrap().len(), 1, "{r}");
        assert!(
            f(p, "fetch_median_s") > 0.0 && f(p, "dns_median_ms") > 0.0,
            "{r}"
        );
        assert_eq!(f(p, "fetch_median_s"), p["fetch_s"][0].as_f64().unwrap());
        // Ten lookups a repetition, their median the phase's.
        let mut d: Vec<f64> = p["dns_ms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert_eq!(d.len(), nena_bench::hostile::LOOKUPS_PER_REP, "{r}");
        d.sort_by(f64::total_cmp);
        let m = (d[d.len() / 2 - 1] + d[d.len() / 2]) / 2.0;
        assert!((f(p, "dns_median_ms") - m).abs() < 1e-9, "{r}");
    }
    let ratio = f(&r["spray"], "fetch_median_s") / f(&r["calm"], "fetch_median_s");
    assert!((f(&r, "fetch_ratio") - ratio).abs() < 1e-9, "{r}");
    let ratio = f(&r["spray"], "dns_median_ms") / f(&r["calm"], "dns_median_ms");
    assert!((f(&r, "dns_ratio") - ratio).abs() < 1e-9, "{r}");
    let t = r["targets"].as_array().unwrap();
    assert_eq!(t.len(), 2);
    assert_eq!(t[0]["pass"], f(&r, "fetch_ratio") <= 2.0);
    assert_eq!(t[1]["pass"], f(&r, "dns_ratio") <= 2.0);
    assert_eq!(r["pass"], t.iter().all(|x| x["pass"] == true), "{r}");
    // The spray ran: 10,000 before the measurements and more during them.
    assert!(r["sprayed"].as_u64().unwrap() >= 10_000, "{r}");
    let hwm = r["gateway_vm_hwm_kib"].as_u64().unwrap();
    assert!(hwm > 0 && hwm <= 256 << 10, "{r}");
    let bounds = r["bounds"].as_str().unwrap();
    assert!(bounds.contains("(cap 512), of one LAN host"), "{r}");
}
