//! The policy benchmark's own checks that need root and BPF (BPF_PROG_TEST_RUN, no
//! network).

use nena_bpf::{Hook, TestBed};

/// `bench::compare` of two beds with the same programs: both sides ran the chain, and the
/// ratio is near 1 (a swapped, dropped or mis-paired side would show).
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn compare_two_builds_side_by_side() {
    let mut a = TestBed::with_object(nena_bpf::BPF_OBJECT).unwrap();
    let mut b = TestBed::new().unwrap();
    let (ma, mb, ratio) = nena_bench::policy::compare(
        &mut a,
        &mut b,
        Hook::Egress,
        &["subflow", "record"],
        31,
        200,
    )
    .unwrap();
    assert!(ma > 0.0 && mb > 0.0, "{ma} {mb}");
    assert!((0.5..2.0).contains(&ratio), "same programs, ratio {ratio}");
    for bed in [&a, &b] {
        let stats = bed.stats(Hook::Egress).unwrap();
        assert_eq!(stats.len(), 2);
        assert!(stats.iter().all(|s| s.runs >= 31 * 200), "{stats:?}");
    }
    // an object that is not one fails cleanly
    assert!(TestBed::with_object(b"not an ELF object").is_err());
}

/// `bench::steps` on two builds (this one and the same object loaded from its bytes): a
/// finite figure per build and name, the dispatcher measured; an unknown name fails.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn steps_time_every_figure_on_every_build() {
    let builds = vec![
        ("this".to_string(), None),
        ("object".to_string(), Some(nena_bpf::BPF_OBJECT.to_vec())),
    ];
    let names = ["set_backup", "get_connect", "chain-8"];
    let rows = nena_bench::policy::steps(&builds, &names, Hook::Ingress, 2, 1, 50).unwrap();
    assert_eq!(
        rows.iter().map(|r| r.build.as_str()).collect::<Vec<_>>(),
        ["this", "object"]
    );
    for r in &rows {
        assert!(r.dispatcher > 0.0, "{r:?}");
        assert_eq!(
            r.figures
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>(),
            names
        );
        assert!(r.figures.iter().all(|(_, ns)| ns.is_finite()), "{r:?}");
    }
    assert!(nena_bench::policy::steps(&builds, &["nope"], Hook::Egress, 1, 1, 10).is_err());
}
