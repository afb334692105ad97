//! What `nena perf` says each path carried (root): per subflow the bytes the peer
//! acknowledged (a subflow's "sent" also counts what the local rate limiter dropped and was
//! sent again), and interval lines that show each interval, not running totals.

use crate::harness::*;
use nena_lab::Rate;

/// `12.3 MiB` -> bytes (as `human` prints them; 0.1-unit precision).
fn parse_human(num: &str, unit: &str) -> f64 {
    let v: f64 = num.parse().unwrap();
    v * match unit {
        "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        other => panic!("unit {other}"),
    }
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn per_subflow_figures_are_acknowledged_bytes_per_interval() {
    let lab = lab_with(|c| {
        c.trusted_rate = Some(Rate::mbit(20));
        c.untrusted_rate = Some(Rate::mbit(20));
    });
    let srv = TempDir::new("perfpaths");
    let _s = serve(&lab, 7500, srv.path(), &[]);
    let to = server(&lab, 7500);
    let mut args = vec![
        "perf",
        "--to",
        &to,
        "--time",
        "4",
        "--interval",
        "1",
        "--json",
    ];
    args.extend_from_slice(&PATHS);
    let r = client_json(&lab, &args);
    let sent = r["sent"].as_u64().unwrap();
    // --time bounds the writing; the seconds until every byte was confirmed are reported
    // apart (they include what was still in flight, and the verdicts' round trip).
    let (written, confirmed) = (
        r["send_seconds"].as_f64().unwrap(),
        r["seconds"].as_f64().unwrap(),
    );
    assert!((4.0..5.0).contains(&written), "written until {written} s");
    // The verdict needs at least a round trip after the last write: strictly later.
    assert!(
        confirmed > written,
        "confirmed at {confirmed} s, written until {written} s"
    );
    let subflows = r["paths"]["subflows"].as_array().unwrap().clone();
    let acked: u64 = subflows
        .iter()
        .map(|s| s["bytes_acked"].as_u64().unwrap())
        .sum();
    let handed: u64 = subflows
        .iter()
        .map(|s| s["bytes_sent"].as_u64().unwrap())
        .sum();
    eprintln!("payload {sent} B, subflows acked {acked} B, subflows sent {handed} B");
    // Everything sent was acknowledged (the verdict came back), plus framing: a few percent.
    assert!(
        acked >= sent && (acked as f64) < sent as f64 * 1.05 + 65536.0,
        "payload {sent}, acked {acked}"
    );
    // Intervals: each one's per-subflow bytes, which add up to the whole (running totals
    // would add up to about twice the whole over four intervals).
    let intervals = r["intervals"].as_array().unwrap();
    assert!(intervals.len() >= 3, "{intervals:?}");
    let per_interval: u64 = intervals
        .iter()
        .flat_map(|i| i["subflows_interval"].as_array().unwrap().clone())
        .map(|s| s["acked"].as_u64().unwrap())
        .sum();
    let last_total: u64 = intervals.last().unwrap()["subflows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["bytes_acked"].as_u64().unwrap())
        .sum();
    assert_eq!(
        per_interval, last_total,
        "intervals must add up to the total"
    );
    assert!(per_interval <= acked);

    // The text: the final line names acknowledged bytes per subflow, and they add up to what
    // the perf test sent (not to what the subflows handed to a dropping rate limiter).
    let mut args = vec!["perf", "--to", &to, "--time", "3", "--interval", "1"];
    args.extend_from_slice(&PATHS);
    let out = client(&lab, &args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = text.lines().last().unwrap();
    assert!(
        last.contains("written until 3.") && last.contains("all confirmed by the peer at"),
        "{last}"
    );
    let words: Vec<&str> = last.split_whitespace().collect();
    let mut acked_text = 0.0;
    for (i, w) in words.iter().enumerate() {
        if *w == "acked" {
            acked_text += parse_human(words[i + 1], words[i + 2].trim_end_matches(','));
        }
    }
    let sent_at = words.iter().position(|w| *w == "sent").unwrap();
    let sent_text = parse_human(words[sent_at + 1], words[sent_at + 2]);
    assert!(
        acked_text >= sent_text * 0.97 && acked_text <= sent_text * 1.08 + 65536.0,
        "{last}"
    );
    assert!(
        text.lines()
            .filter(|l| l.starts_with('['))
            .all(|l| l.contains("subflows acked/recv:")),
        "{text}"
    );
}
