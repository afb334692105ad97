//! `nena bench codec`: the JSON report has the 16 rows with positive figures, the five
//! targets are ratios recomputed here from the rows of the same report (finite, positive,
//! the verdict consistent with them), and bad options are usage errors. Whether a missed
//! target exits 1 is unit-tested on synthetic figures (`cmd/bench/codec.rs`): a quick run on
//! a shared host cannot be made to miss or meet a target on demand.
use crate::harness::nena_cmd;

const NAMES: [&str; 16] = [
    "des-ecb",
    "tdea-ecb",
    "aes-128-ecb",
    "aes-192-ecb",
    "aes-256-ecb",
    "aes-128-cbc",
    "aes-128-gcm",
    "aes-256-gcm",
    "chacha20-poly1305",
    "aes-128-ctr",
    "nena-stream",
    "nena-aead",
    "kato-straight",
    "kato-revised",
    "kato-fast",
    "memcpy",
];

#[test]
fn quick_json_has_all_rows_with_positive_numbers() {
    let out = nena_cmd()
        .args([
            "bench",
            "codec",
            "--quick",
            "--json",
            "--no-check",
            "--samples",
            "3",
        ])
        .output()
        .expect("run nena");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is one JSON object");
    assert!(
        v["library"].as_str().unwrap().contains("OpenSSL"),
        "{}",
        v["library"]
    );
    assert!(!v["backend"].as_str().unwrap().is_empty());
    assert!(!v["cpu"].as_str().unwrap().is_empty());
    let results = v["results"].as_array().expect("results list");
    let names: Vec<&str> = results
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, NAMES);
    let mut available = 0;
    for r in results {
        if r["available"] == true {
            available += 1;
            for key in ["us_per_msg", "bulk_gbps", "msg_gbps", "ratio_to_fast"] {
                let x = r[key]
                    .as_f64()
                    .unwrap_or_else(|| panic!("{key} missing in {r}"));
                assert!(x > 0.0 && x.is_finite(), "{key} = {x} in {r}");
            }
        } else {
            // Only DES may be missing (OpenSSL 3 without the legacy provider), with a reason.
            assert_eq!(r["name"], "des-ecb", "{r}");
            assert!(r["reason"].as_str().is_some_and(|s| !s.is_empty()), "{r}");
        }
    }
    assert!(available >= 15);
    let targets = v["targets"].as_array().expect("targets list");
    let row = |name: &str, key: &str| {
        results
            .iter()
            .find(|r| r["name"] == name)
            .and_then(|r| r[key].as_f64())
            .unwrap_or_else(|| panic!("{name} {key}"))
    };
    let us = |name: &str| row(name, "us_per_msg");
    let extra = |name: &str| {
        v["extra_results"]
            .as_array()
            .expect("extra_results")
            .iter()
            .find(|r| r["name"] == name)
            .and_then(|r| r["bulk_gbps"].as_f64())
            .unwrap_or_else(|| panic!("{name} bulk_gbps"))
    };
    // every target is a ratio between two rows of this report
    let want = [
        (
            "fast-vs-aes-128-gcm",
            us("aes-128-gcm") / us("kato-fast"),
            ">=",
        ),
        (
            "fast-vs-revised",
            us("kato-revised") / us("kato-fast"),
            ">=",
        ),
        (
            "fast-bulk-vs-memcpy",
            row("kato-fast", "bulk_gbps") / row("memcpy", "bulk_gbps"),
            ">=",
        ),
        (
            "nena-aead-vs-aes-128-gcm",
            us("nena-aead") / us("aes-128-gcm"),
            "<=",
        ),
        (
            "nena-stream-vs-aes-128-ctr",
            us("nena-stream") / us("aes-128-ctr"),
            "<=",
        ),
        (
            "nena-ctr-bulk-vs-rustcrypto",
            extra("nena-ctr") / extra("nena-ctr-rustcrypto"),
            ">=",
        ),
    ];
    assert_eq!(targets.len(), want.len(), "{targets:?}");
    for (t, (name, value, cmp)) in targets.iter().zip(want) {
        assert_eq!(t["name"], name, "{t}");
        assert_eq!(t["comparison"], cmp, "{t}");
        assert_eq!(t["unit"], "x", "{t}");
        let got = t["value"]
            .as_f64()
            .unwrap_or_else(|| panic!("no value: {t}"));
        assert!(got.is_finite() && got > 0.0, "{t}");
        assert!((got - value).abs() <= 1e-9 * value, "{t}: want {value}");
        let limit = t["limit"].as_f64().unwrap();
        assert!(limit.is_finite() && limit > 0.0, "{t}");
        let pass = if cmp == "<=" {
            got <= limit
        } else {
            got >= limit
        };
        assert_eq!(t["pass"], pass, "{t}");
    }
    let all = targets.iter().all(|t| t["pass"] == true);
    assert_eq!(v["all_targets_pass"], all);
    // absolute figures only as context
    let context = v["context"].as_array().expect("context list");
    assert_eq!(context.len(), 2, "{context:?}");
    assert!(context[0]
        .as_str()
        .unwrap()
        .contains("us per 1280-byte message"));
    assert!(v["nena_suite"]
        .as_str()
        .unwrap()
        .contains("chosen for this CPU"));
}

#[test]
fn zero_samples_is_a_usage_error() {
    let out = nena_cmd()
        .args(["bench", "codec", "--samples", "0"])
        .output()
        .expect("run nena");
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("nena: ") && err.contains("samples"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn unknown_core_is_a_usage_error() {
    let out = nena_cmd()
        .args(["bench", "codec", "--core", "4096"])
        .output()
        .expect("run nena");
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("--core 4096"));
}
