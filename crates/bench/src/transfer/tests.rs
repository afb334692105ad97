//! Tests of `transfer`.
use super::*;

fn run(variant: Variant, rep: usize, mbit_s: f64) -> Run {
    Run {
        variant,
        rep,
        mbit_s,
        bytes: 1,
        seconds: 1.0,
        trusted_bytes: 80,
        untrusted_bytes: 20,
        multipath: true,
        subflow_bytes: vec![],
        cpu_s: 1.0,
        cpu_s_per_gb: mbit_s / 100.0,
    }
}

use Variant::*;

fn runs() -> Vec<Run> {
    vec![
        run(PlainMptcp, 1, 100.0),
        run(PlainMptcp, 2, 120.0),
        run(PlainMptcp, 3, 90.0),
        run(NenaPlain, 1, 99.0),
        run(NenaKato, 1, 97.0),
        run(NenaKato, 2, 98.0),
        run(NenaKato, 3, 50.0),
        run(NenaStream, 1, 99.5),
        run(NenaAead, 1, 98.0),
    ]
}

#[test]
fn statistics_and_check() {
    let runs = runs();
    let (stats, kato, targets) = summarize(&runs, 0.97, true, true);
    assert_eq!(stats[0].median_mbit_s, 100.0);
    assert_eq!((stats[0].min_mbit_s, stats[0].max_mbit_s), (90.0, 120.0));
    assert_eq!(stats[2].median_mbit_s, 97.0);
    assert!((kato - 0.97).abs() < 1e-12);
    assert!((stats[0].untrusted_share - 0.2).abs() < 1e-12);
    // every run multipath: that target passes; kato at 97% passes
    assert!(targets[0].pass && targets[0].name.contains("multipath"));
    assert_eq!(targets[0].value, 1.0);
    assert!(targets[1].pass);
    // Paired: 97/100, 98/120, 50/90 -> median 98/120.
    assert!((stats[2].paired_ratio - 98.0 / 120.0).abs() < 1e-12);
    assert!((stats[1].paired_ratio - 0.99).abs() < 1e-12);
    assert_eq!(stats[0].paired_ratio, 1.0);
    let (_, _, t) = summarize(&runs, 0.98, true, true);
    assert!(!t[1].pass);
    // Where the links set the pace: the crypto modes' goodput (99.5/100 passes, 98/100
    // does not); where the CPU does: their CPU per GB (0.995 and 0.98 vs 1.0).
    assert_eq!(targets.len(), 4);
    assert!(targets[2].pass && targets[2].name.contains("stream"));
    assert!(!targets[3].pass && targets[3].name.contains("aead"));
    // Where the CPU sets the pace: the crypto modes' goodput against 90% (both pass),
    // their CPU per GB, and each nena mode's median untrusted share (20% each: all fail).
    let (_, _, cpu) = summarize(&runs, 0.97, false, true);
    assert_eq!(cpu.len(), 10);
    assert!(cpu[2].name.contains("stream goodput >= 90%") && cpu[2].pass);
    assert!(cpu[3].name.contains("aead goodput >= 90%") && cpu[3].pass);
    assert!(cpu[4..6].iter().all(|t| t.pass && !t.at_least));
    assert!((cpu[4].value - 0.995).abs() < 1e-9, "{}", cpu[4].value);
    for (t, v) in cpu[6..].iter().zip(["plain", "kato", "stream", "aead"]) {
        assert!(
            t.name.starts_with(&format!("nena {v} untrusted share")),
            "{t:?}"
        );
        assert!(!t.pass && (t.value - 0.2).abs() < 1e-12, "{t:?}");
    }
    // Runs of a fixed size: no rate targets, the split still checked.
    let (_, _, split) = summarize(&runs, 0.97, false, false);
    assert_eq!(split.len(), 5, "{split:?}");
    assert!(split[0].name.contains("of nena"), "{split:?}");
    assert!(split[1..]
        .iter()
        .all(|t| t.name.contains("untrusted share")));
    let (_, _, linked) = summarize(&runs, 0.97, true, false);
    assert_eq!(linked.len(), 1, "{linked:?}");
    assert_eq!(stats[2].median_cpu_s_per_gb, 0.97);
    let mut even = [4.0, 1.0, 3.0, 2.0];
    assert_eq!(median(&mut even), 2.5);
}

#[test]
fn one_single_path_run_fails_the_verdict() {
    let mut runs = runs();
    runs[5].multipath = false;
    runs[5].untrusted_bytes = 0;
    let (stats, _, t) = summarize(&runs, 0.5, false, true);
    assert!(!t[0].pass, "{t:?}");
    assert!((t[0].value - 8.0 / 9.0).abs() < 1e-12);
    assert_eq!((stats[2].multipath_runs, stats[2].runs), (2, 3));
    assert!((stats[2].untrusted_share - 40.0 / 280.0).abs() < 1e-12);
    // The median of the runs' shares (0.2, 0, 0.2) is not the pooled share.
    assert!((stats[2].median_untrusted_share - 0.2).abs() < 1e-12);
    // Runs of a fixed size: a single-path raw run is context, a nena one fails.
    let mut raw_single = self::tests::runs();
    raw_single[1].multipath = false;
    let (_, _, t) = summarize(&raw_single, 0.5, false, false);
    assert!(t[0].pass && t[0].value == 1.0, "{t:?}");
    let (_, _, t) = summarize(&runs, 0.5, false, false);
    assert!(
        !t[0].pass && (t[0].value - 5.0 / 6.0).abs() < 1e-12,
        "{t:?}"
    );
    // a variant with no run at all fails it too
    let runs: Vec<Run> = runs.into_iter().filter(|r| r.variant != NenaAead).collect();
    let (_, _, t) = summarize(&runs, 0.5, false, true);
    assert!(!t[0].pass);
}

#[test]
fn multipath_needs_both_paths_to_carry_a_share() {
    let a = |last: u8| SocketAddr::from(([198, 18, 1, last], 1));
    assert_eq!(
        path_split(&[(a(2), 900, false), (a(3), 100, true)]),
        (900, 100, true)
    );
    // 0.5% on the untrusted path: not multipath
    assert_eq!(
        path_split(&[(a(2), 995, false), (a(3), 5, true)]),
        (995, 5, false)
    );
    assert_eq!(path_split(&[(a(2), 1000, false)]), (1000, 0, false));
    assert_eq!(path_split(&[]), (0, 0, false));
}

#[test]
fn variants_serialise_by_name() {
    assert_eq!(
        serde_json::to_value(Variant::ALL).unwrap(),
        serde_json::json!([
            "plain MPTCP",
            "nena plain",
            "nena kato",
            "nena stream",
            "nena aead"
        ])
    );
    assert_eq!(Variant::PlainMptcp.mode(), None);
    assert_eq!(Variant::NenaKato.mode(), Some(nena_proto::Mode::Kato));
}

#[test]
fn the_aead_floor_target_is_nena_aead_over_raw_mptcp() {
    let o = |variant: &str, cpu, primitive| crate::overhead::Overhead {
        variant: variant.into(),
        primitive: "aes-128-gcm (aws-lc-rs)".into(),
        cpu_s_per_gb: cpu,
        raw_cpu_s_per_gb: 0.3,
        primitive_s_per_gb: primitive,
        check_s_per_gb: 0.02,
        beyond_s_per_gb: 0.0,
        ratio: 0.0,
    };
    let t = aead_floor_target(&[o("nena stream", 9.0, 0.2), o("nena aead", 0.51, 0.18)]).unwrap();
    assert!((t.value - 1.7).abs() < 1e-9 && t.pass, "{t:?}");
    assert!(t
        .name
        .contains("<= 1.75 x plain MPTCP (plain MPTCP + aes-128-gcm (aws-lc-rs): 1.600 x)"));
    let t = aead_floor_target(&[o("nena aead", 0.6, 0.18)]).unwrap();
    assert!(!t.pass);
    // No aead row, or its primitive not timed: no target.
    assert!(aead_floor_target(&[o("nena stream", 0.5, 0.2)]).is_none());
    assert!(aead_floor_target(&[o("nena aead", 0.5, f64::NAN)]).is_none());
}
