//! Tests of `realtime`.
use super::*;

fn subject(name: &str, p99: Option<f64>, lost_or_late: u32, ratio: f64) -> SubjectResult {
    SubjectResult {
        subject: name.into(),
        flow: FlowStats {
            sent: 100,
            echoed: 100,
            received: 100,
            lost: lost_or_late,
            late: 0,
            lost_or_late,
            lost_or_late_percent: f64::from(lost_or_late),
            p50_ms: p99,
            p95_ms: p99,
            p99_ms: p99,
            max_ms: p99,
            longest_gap_ms: 0.0,
            duplicates: 0,
            foreign: 0,
            send_errors: 0,
            send_late_max_ms: 0.0,
            setup_ms: 0.0,
        },
        wire: Wire::default(),
        wire_bytes: 0,
        flow_bytes: 0,
        wire_ratio: ratio,
    }
}

fn setting(name: &str, outage: Option<String>, subjects: Vec<SubjectResult>) -> SettingResult {
    let (better_single, better_single_p99_ms) = better_single(&subjects);
    SettingResult {
        name: name.into(),
        wlan_loss_percent: 1.0,
        outage,
        outage_down_s: None,
        outage_up_s: None,
        subjects,
        better_single,
        better_single_p99_ms,
        links: Vec::new(),
    }
}

#[test]
fn the_better_single_link_is_the_lower_p99_and_a_lost_p99_is_never_better() {
    let s = setting(
        "x",
        None,
        vec![
            subject(STRAIGHT_TRUSTED, Some(78.0), 0, 1.0),
            subject(STRAIGHT_WLAN, None, 30, 1.0),
            subject(GATEWAY, Some(88.0), 0, 1.9),
            subject(RUN, Some(88.1), 0, 2.3),
        ],
    );
    assert_eq!(s.better_single.as_deref(), Some(STRAIGHT_TRUSTED));
    let t = targets(&[s], None);
    // p99 and wire for each nena subject; no outage target without an outage.
    assert_eq!(t.len(), 4);
    assert_eq!((t[0].subject.as_str(), t[0].pass), (GATEWAY, Some(true)));
    assert_eq!(t[0].limit, Some(88.0));
    assert_eq!(t[1].pass, Some(true));
    assert_eq!((t[2].subject.as_str(), t[2].pass), (RUN, Some(false)));
    assert_eq!(t[3].pass, Some(false), "2.3x is more than 2.2x");
}

#[test]
fn an_outage_asks_for_nothing_lost_and_a_lost_p99_fails() {
    let s = setting(
        "wlan-outage",
        Some("untrusted".into()),
        vec![
            subject(STRAIGHT_TRUSTED, Some(78.0), 0, 1.0),
            subject(STRAIGHT_WLAN, None, 150, 1.0),
            subject(GATEWAY, None, 139, 1.5),
        ],
    );
    let t = targets(&[s], None);
    assert_eq!(t.len(), 3);
    assert_eq!((t[0].value, t[0].pass), (None, Some(false)));
    assert_eq!((t[1].value, t[1].pass), (Some(139.0), Some(false)));
    assert_eq!(t[2].pass, Some(true));
    // Neither single link delivered 99%: the p99 target is not judged.
    let s = setting(
        "x",
        None,
        vec![
            subject(STRAIGHT_TRUSTED, None, 5, 1.0),
            subject(STRAIGHT_WLAN, None, 5, 1.0),
            subject(GATEWAY, Some(50.0), 0, 1.5),
        ],
    );
    let t = targets(&[s], None);
    assert_eq!((t[0].limit, t[0].pass), (None, None));
}

#[test]
fn settings_are_chosen_by_name_and_options_are_checked() {
    let mut o = RealtimeOptions {
        seconds: 20,
        outage_seconds: 3.0,
        only: vec!["trusted-outage".into(), "loss1".into()],
        udp_redundancy: None,
        gateway_args: vec!["--warm".into(), "0".into()],
        run_args: Vec::new(),
        with_run: true,
        bulk_seconds: 0,
        iperf3: "iperf3".into(),
        nena: "/nonexistent/nena".into(),
        nena_version: String::new(),
    };
    let names: Vec<&str> = o.settings().unwrap().iter().map(|s| s.name).collect();
    assert_eq!(names, ["loss1", "trusted-outage"]);
    o.check().unwrap();
    assert_eq!(o.extra(&o.gateway_args), ["--warm", "0"]);
    o.udp_redundancy = Some("always".into());
    assert_eq!(
        o.extra(&o.gateway_args),
        ["--udp-redundancy", "always", "--warm", "0"]
    );
    o.udp_redundancy = None;
    o.only = vec!["loss3".into()];
    assert!(format!("{:#}", o.check().unwrap_err()).contains("loss0, loss1"));
    o.only.clear();
    o.outage_seconds = 20.0;
    assert!(o.check().is_err());
    o.outage_seconds = 3.0;
    o.seconds = 0;
    assert!(o.check().is_err());
    assert_eq!(SETTINGS.len(), 6);
    assert_eq!(
        SETTINGS.iter().filter(|s| s.outage.is_some()).count(),
        2,
        "an outage of each link"
    );
}
