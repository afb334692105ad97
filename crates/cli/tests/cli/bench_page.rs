//! `nena bench page` (root): a dnsmasq that does not exist is named before any lab comes up;
//! and the bench end to end, shortened to one repetition: every load fetched every object
//! byte-exact, its times are positive and follow from its connections, the medians and the
//! ratio follow from the runs, the plain-MPTCP connections are MPTCP, and the lab is
//! gone afterwards. The verdict is reported, not required here (`make bench` runs the
//! bench with its repetitions).

use crate::harness::{bench_json, nena};

#[test]
fn a_missing_dnsmasq_is_named_before_any_lab() {
    let o = nena(&["bench", "page", "--dnsmasq", "/nonexistent/dnsmasq"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("/nonexistent/dnsmasq") && err.contains("dnsmasq-base"),
        "{err}"
    );
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn one_repetition_loads_the_whole_page_both_ways_with_figures_that_follow_from_the_runs() {
    let (r, lab_ns) = bench_json(&["page", "--reps", "1", "--no-check", "--json"], "pg");
    assert!(!lab_ns.exists(), "the bench left its lab behind");
    let f = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k}: {v}"));
    assert_eq!(r["reps"], 1);
    assert_eq!(r["objects"], 30);
    assert_eq!(f(&r, "delay_ms"), 20.0);
    let page_bytes = r["page_bytes"].as_u64().unwrap();
    // The document and 30 objects of 15-30 KiB.
    assert!(
        (30 * 15 * 1024..31 * 30 * 1024).contains(&page_bytes),
        "{r}"
    );
    assert_eq!(r["failures"].as_array().unwrap().len(), 0, "{r}");
    let runs = r["runs"].as_array().unwrap();
    let names: Vec<&str> = runs
        .iter()
        .map(|x| x["variant"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["gateway", "mptcp"], "{r}");
    for run in runs {
        assert_eq!(run["objects"], 30, "{run}");
        assert_eq!(run["bytes"].as_u64(), Some(page_bytes), "{run}");
        let seconds = f(run, "seconds");
        // At least the round trips of a lookup, a connection and a request (40 ms each).
        assert!((0.12..60.0).contains(&seconds), "{run}");
        let lookups = run["lookups"].as_array().unwrap();
        let mut looked: Vec<&str> = lookups
            .iter()
            .map(|l| l["name"].as_str().unwrap())
            .collect();
        looked.sort();
        assert_eq!(
            looked,
            ["img.example.test", "www.example.test"],
            "each name once"
        );
        assert!(lookups.iter().all(|l| f(l, "ms") > 0.0), "{run}");
        let conns = run["connections"].as_array().unwrap();
        // At most six per name; every request of the page (the document and 30 objects).
        assert!((2..=12).contains(&conns.len()), "{run}");
        let requests: u64 = conns.iter().map(|c| c["requests"].as_u64().unwrap()).sum();
        assert_eq!(requests, 31, "{run}");
        for c in conns {
            assert!(
                f(c, "first_byte_ms") > 0.0 && f(c, "connect_ms") >= 0.0,
                "{c}"
            );
            // Every connection's first byte came before the page ended.
            assert!(
                f(c, "opened_at_ms") + f(c, "first_byte_ms") < seconds * 1e3,
                "{c}"
            );
        }
        let share = f(run, "untrusted_share");
        assert!((0.0..=1.0).contains(&share), "{run}");
        match run["variant"].as_str().unwrap() {
            "gateway" => {
                // One nena session per connection and per lookup at most, each taken from
                // the sessions opened ahead (`--warm`, 8 by default) and replaced there, or
                // opened in the flow's path; lookups may reuse the warm-up's DNS sessions.
                // The pool also replaces its sessions every 3.5 s (`proxy::warm`): a load
                // this short sees at most one round of it (8 more). The handshakes the load
                // saw complete are those, and no more.
                let hs = run["handshakes"].as_u64().unwrap();
                assert!(hs <= conns.len() as u64 + 2 + 8 + 8, "{run}");
                if hs > 0 {
                    assert!(f(run, "handshake_mean_ms") > 0.0, "{run}");
                }
                assert!(
                    conns.iter().all(|c| c["subflows"].is_null()),
                    "TCP from the LAN"
                );
            }
            _ => {
                assert!(run["handshakes"].is_null(), "{run}");
                // MPTCP, not fallen back (the loader refuses that); its second subflow
                // depends on timing and is the multipath target's, checked below.
                assert!(
                    conns.iter().all(|c| c["subflows"].as_u64() >= Some(1)),
                    "every plain MPTCP connection reports its subflows: {run}"
                );
            }
        }
    }
    // One load each: the medians, least and most are its time, the ratio their quotient.
    let variants = r["variants"].as_array().unwrap();
    for (v, run) in variants.iter().zip(runs) {
        assert_eq!(v["variant"], run["variant"]);
        for k in ["median_s", "min_s", "max_s"] {
            assert_eq!(f(v, k), f(run, "seconds"), "{k}");
        }
        assert_eq!(v["runs"], 1);
    }
    let ratio = f(&r, "ratio");
    assert!((ratio - f(&runs[0], "seconds") / f(&runs[1], "seconds")).abs() < 1e-9);
    let t = r["targets"].as_array().unwrap();
    assert_eq!(t.len(), 3, "{r}");
    assert_eq!(t[0]["pass"], true, "{r}");
    assert_eq!(t[1]["pass"], runs[1]["multipath"], "{r}");
    assert_eq!(f(&t[2], "value"), ratio);
    assert_eq!(t[2]["pass"], ratio <= 1.2);
    assert_eq!(r["pass"], t.iter().all(|x| x["pass"] == true), "{r}");
}
