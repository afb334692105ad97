//! Tests of `codec`.
use super::*;
use std::time::Duration;

fn tiny() -> CodecBenchConfig {
    CodecBenchConfig {
        harness: HarnessConfig {
            samples: 2,
            sample_time: Duration::from_micros(200),
            warmup: Duration::from_micros(200),
            max_job_time: Duration::from_millis(10),
        },
        pin: false,
        core: None,
    }
}

#[test]
fn report_has_all_rows_and_serialises() {
    let r = run(&tiny(), &mut |_, _| {}).unwrap();
    let names: Vec<&str> = r.results.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(names, NAMES);
    let v = serde_json::to_value(&r).unwrap();
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 16);
    for (row, name) in results.iter().zip(NAMES) {
        assert_eq!(row["name"], name);
        if row["available"] == true {
            assert!(row["us_per_msg"].as_f64().unwrap() > 0.0, "{row}");
            assert!(row["bulk_gbps"].as_f64().unwrap() > 0.0, "{row}");
        } else {
            assert!(row["reason"].is_string(), "{row}");
        }
    }
    assert_eq!(v["targets"].as_array().unwrap().len(), 6);
    // the papers' Table II figures sit in the rows they belong to, and only there
    for row in &r.results {
        assert_eq!(row.paper_ms, paper_ms(&row.name), "{}", row.name);
    }
    let with_paper: Vec<&str> = r
        .results
        .iter()
        .filter(|x| x.paper_ms.is_some())
        .map(|x| x.name.as_str())
        .collect();
    assert_eq!(
        with_paper,
        [
            "des-ecb",
            "tdea-ecb",
            "aes-128-ecb",
            "aes-192-ecb",
            "aes-256-ecb",
            "kato-straight",
            "kato-revised"
        ]
    );
    let extra = v["extra_results"].as_array().unwrap();
    assert_eq!(extra.len(), 3);
    assert_eq!(extra[0]["name"], "paper-revised-c");
    assert_eq!(extra[1]["name"], "nena-ctr");
    assert_eq!(extra[2]["name"], "nena-ctr-rustcrypto");
    assert!(extra[1]["bulk_gbps"].as_f64().unwrap() > 0.0);
    assert!(extra[0]["us_per_msg"].as_f64().unwrap() > 0.0);
    assert!(v["fast_vs_paper_c"].as_f64().unwrap() > 0.0);
    assert!(r.row("kato-fast").unwrap().available);
    assert!((r.row("kato-fast").unwrap().ratio_to_fast.unwrap() - 1.0).abs() < 1e-12);
    let text = render_text(&r);
    for name in NAMES {
        assert!(text.contains(name), "{name} missing from text");
    }
    assert!(text.contains("OpenSSL"));
    // each paper figure printed at the end of its own row's line
    for (name, _, printed) in PAPER_TABLE_II_MS {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no line for {name}"));
        assert!(
            line.trim_end().ends_with(printed) || line.contains(&format!("(paper: {printed} ms)")),
            "{line}"
        );
    }
    assert!(text.contains("context (not targets):"));
    assert!(text.contains("paper-revised-c"));
    assert!(text.contains("ratio of kato-fast to the papers' C code"));
}

fn row(name: &str, us: f64, bulk: f64) -> Row {
    Row {
        name: name.into(),
        available: true,
        reason: None,
        us_per_msg: Some(us),
        us_per_msg_p25: Some(us),
        us_per_msg_p75: Some(us),
        msg_gbps: Some(2.0 * 1280.0 / (us * 1e3)),
        bulk_gbps: Some(bulk),
        ratio_to_fast: None,
        paper_ms: None,
        msg_stats: None,
        bulk_stats: None,
    }
}

#[test]
fn targets_pass_and_fail_at_the_limits() {
    let lim = fast_limits("avx2");
    let (gcm_x, revised_x, bulk_x) = (lim.vs_aes_gcm, lim.vs_revised, lim.bulk_vs_memcpy);
    // every ratio exactly at its limit: all pass
    let rows = vec![
        row("kato-fast", 0.1, 20.0),
        row("aes-128-gcm", 0.1 * gcm_x, 5.0),
        row("kato-revised", 0.1 * revised_x, 0.5),
        row("memcpy", 0.05, 20.0 / bulk_x),
        row("aes-128-ctr", 0.5, 5.0),
        row("nena-aead", 0.5 * TARGET_NENA_AEAD_VS_GCM, 3.0),
        row("nena-stream", 0.5 * TARGET_NENA_STREAM_VS_CTR, 4.0),
        row("nena-ctr", 0.5, 6.0),
        row(
            "nena-ctr-rustcrypto",
            0.5,
            6.0 / TARGET_CTR_BULK_VS_RUSTCRYPTO / 1.01,
        ),
    ];
    let t = targets(&rows, "avx2");
    assert_eq!(
        t.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        [
            "fast-vs-aes-128-gcm",
            "fast-vs-revised",
            "fast-bulk-vs-memcpy",
            "nena-aead-vs-aes-128-gcm",
            "nena-stream-vs-aes-128-ctr",
            "nena-ctr-bulk-vs-rustcrypto"
        ]
    );
    assert!(t.iter().all(|t| t.pass && t.unit == "x"), "{t:?}");
    // the absolute figures do not matter: a host 10x slower in every row passes too
    let slow: Vec<Row> = rows
        .iter()
        .map(|r| {
            row(
                &r.name,
                r.us_per_msg.unwrap() * 10.0,
                r.bulk_gbps.unwrap() / 10.0,
            )
        })
        .collect();
    assert!(targets(&slow, "avx2").iter().all(|t| t.pass));
    // 2% past each limit: all fail
    let rows = vec![
        row("kato-fast", 0.102, 19.6),
        row("aes-128-gcm", 0.1 * gcm_x, 5.0),
        row("kato-revised", 0.1 * revised_x, 0.5),
        row("memcpy", 0.05, 20.0 / bulk_x),
        row("aes-128-ctr", 0.5, 5.0),
        row("nena-aead", 0.51 * TARGET_NENA_AEAD_VS_GCM, 3.0),
        row("nena-stream", 0.51 * TARGET_NENA_STREAM_VS_CTR, 4.0),
        row("nena-ctr", 0.5, 6.0),
        row(
            "nena-ctr-rustcrypto",
            0.5,
            6.0 / TARGET_CTR_BULK_VS_RUSTCRYPTO * 1.02,
        ),
    ];
    let t = targets(&rows, "avx2");
    assert_eq!(t.iter().map(|t| t.pass).collect::<Vec<_>>(), [false; 6]);
    // A missing row is a failure, not a pass.
    let t = targets(&[row("kato-fast", 0.1, 30.0)], "avx2");
    assert!(t.iter().all(|t| !t.pass && t.value.is_none()));
    // so is a zero figure (an infinite ratio)
    let t = targets(
        &[row("kato-fast", 0.0, 30.0), row("aes-128-gcm", 1.0, 1.0)],
        "avx2",
    );
    assert!(!t[0].pass && t[0].value.is_none());
    // each kernel's limits lie above what the next slower kernel measures (this host,
    // 2026-11-22: avx2 7.5x / 13.7x / 0.50, portable 1.9x / 3.5x / 0.13): losing the
    // kernel fails
    let (a512, a2, p) = (
        fast_limits("avx512vbmi-gfni"),
        fast_limits("avx2"),
        fast_limits("x"),
    );
    assert!(a512.vs_aes_gcm > 7.5 && a512.vs_revised > 13.7 && a512.bulk_vs_memcpy > 0.50);
    assert!(a2.vs_aes_gcm > 1.9 && a2.vs_revised > 3.5 && a2.bulk_vs_memcpy > 0.13);
    assert!(p.vs_aes_gcm < a2.vs_aes_gcm && p.vs_revised < a2.vs_revised);
    // the context names the measured figures, not the old limits alone
    let c = context(&[row("kato-fast", 0.533, 5.16)]);
    assert!(
        c[0].contains("0.533 us") && c[1].contains("5.2 GB/s"),
        "{c:?}"
    );
    assert_eq!(
        serde_json::to_value(Comparison::AtLeast).unwrap(),
        serde_json::json!(">=")
    );
}
