//! Tests of `metered`.
use super::*;

#[test]
fn the_longest_gap_is_between_two_increases_or_to_the_end() {
    let s = [
        (0.0, 0),
        (0.1, 10),
        (0.2, 20),
        (0.3, 20),
        (0.9, 20),
        (1.0, 30),
        (1.1, 40),
    ];
    let (g, at) = longest_gap(&s, 0.0);
    assert!(
        (g - 0.8).abs() < 1e-9 && (at - 0.2).abs() < 1e-9,
        "{g} {at}"
    );
    // before `from`, gaps do not count
    let (g, _) = longest_gap(&s, 0.5);
    assert!((g - 0.1).abs() < 1e-9, "{g}");
    // a series that stops growing counts to its end
    let (g, at) = longest_gap(&[(0.0, 1), (1.0, 2), (3.5, 2)], 0.0);
    assert!(
        (g - 2.5).abs() < 1e-9 && (at - 1.0).abs() < 1e-9,
        "{g} {at}"
    );
}

fn t(run: &'static str, goodput: f64, share: f64, gap: f64, after: Option<u64>) -> Transfer {
    Transfer {
        run,
        bytes: 100,
        goodput_mbit_s: goodput,
        seconds: 1.0,
        trusted_bytes: 0,
        all_bytes: 0,
        trusted_share: share,
        longest_gap_s: gap,
        longest_gap_at_s: 0.0,
        gap_after_down_s: after.map(|_| gap),
        down_at_s: None,
        trusted_after_down: after,
    }
}

#[test]
fn a_row_passes_only_with_every_target() {
    let ok = row(
        "userspace",
        Way::Upload,
        [
            t("wlan-alone", 45.0, 0.0, 0.1, None),
            t("metered", 44.0, 0.001, 0.1, None),
            t("outage", 30.0, 0.5, 0.4, Some(1 << 20)),
            t("silent", 30.0, 0.5, 3.0, Some(1 << 20)),
        ],
        None,
    );
    assert!(ok.pass, "{ok:?}");
    assert!((ok.goodput_ratio - 44.0 / 45.0).abs() < 1e-12);
    let slow = row(
        "kernel",
        Way::Download,
        [
            t("wlan-alone", 45.0, 0.0, 0.1, None),
            t("metered", 42.0, 0.001, 0.1, None),
            t("outage", 30.0, 0.5, 0.4, Some(1)),
            t("silent", 30.0, 0.5, 0.1, None),
        ],
        None,
    );
    assert!(!slow.goodput_ok && !slow.pass, "0.933x: {slow:?}");
    let leaky = row(
        "kernel",
        Way::Download,
        [
            t("wlan-alone", 45.0, 0.0, 0.1, None),
            t("metered", 45.0, 0.021, 0.1, None),
            t("outage", 30.0, 0.5, 0.4, Some(1)),
            t("silent", 30.0, 0.5, 0.1, None),
        ],
        None,
    );
    assert!(!leaky.share_ok && !leaky.pass);
    let stalled = row(
        "kernel",
        Way::Upload,
        [
            t("wlan-alone", 45.0, 0.0, 0.1, None),
            t("metered", 45.0, 0.001, 0.1, None),
            t("outage", 30.0, 0.5, 1.2, Some(1)),
            t("silent", 30.0, 0.5, 0.1, None),
        ],
        None,
    );
    assert!(!stalled.outage_ok && !stalled.pass);
    let never = row(
        "kernel",
        Way::Upload,
        [
            t("wlan-alone", 45.0, 0.0, 0.1, None),
            t("metered", 45.0, 0.001, 0.1, None),
            t("outage", 30.0, 0.5, 0.2, Some(0)),
            t("silent", 30.0, 0.5, 0.1, None),
        ],
        None,
    );
    assert!(
        !never.outage_ok,
        "nothing on the trusted link after the WLAN went"
    );
}
