//! The policy benchmark's own checks that need root and BPF (BPF_PROG_TEST_RUN, no
//! network).

use nena_bpf::{Hook, TestBed};

/// `bench::compare` of two beds with the same programs: both sides ran the chain, and the
/// ratio is near 1 (a swapped, dropped or mis-paired side would show).
#[test]
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
