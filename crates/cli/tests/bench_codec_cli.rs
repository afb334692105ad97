//! `nena bench codec`: the JSON report has the 16 rows with positive figures and targets
//! consistent with them, and bad options are usage errors.

use std::process::Command;

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

fn nena() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nena"))
}

#[test]
fn quick_json_has_all_rows_with_positive_numbers() {
    let out = nena()
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
    assert_eq!(targets.len(), 6);
    let us = |name: &str| {
        results
            .iter()
            .find(|r| r["name"] == name)
            .and_then(|r| r["us_per_msg"].as_f64())
            .unwrap()
    };
    for t in targets {
        let limit = t["limit"].as_f64().unwrap();
        let value = t["value"].as_f64().unwrap();
        let pass = if t["comparison"] == "<=" {
            value <= limit
        } else {
            value >= limit
        };
        assert_eq!(t["pass"], pass, "{t}");
    }
    // nena's rows are compared with the OpenSSL rows of the same run.
    for (name, row, base) in [
        ("nena-aead-vs-aes-128-gcm", "nena-aead", "aes-128-gcm"),
        ("nena-stream-vs-aes-128-ctr", "nena-stream", "aes-128-ctr"),
    ] {
        let t = targets.iter().find(|t| t["name"] == name).unwrap();
        let want = us(row) / us(base);
        assert!((t["value"].as_f64().unwrap() - want).abs() < 1e-9, "{t}");
    }
    assert!(v["nena_suite"]
        .as_str()
        .unwrap()
        .contains("chosen for this CPU"));
}

#[test]
fn zero_samples_is_a_usage_error() {
    let out = nena()
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
    let out = nena()
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
