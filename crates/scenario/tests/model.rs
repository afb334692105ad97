//! Scenario files: the shipped ones parse, and every kind of bad file gets one clear error
//! (no panic), including random and mutated input.
use nena_lab::Link;
use nena_scenario::model::{Action, Traffic};
use nena_scenario::Scenario;
use proptest::prelude::*;
use std::path::PathBuf;
use std::time::Duration;

fn shipped() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_shipped_scenario_parses() {
    let files = shipped();
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for want in ["lte-aggregation.toml", "lte-outages.toml", "fig18.toml"] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} missing from {names:?}"
        );
    }
    for f in files {
        Scenario::load(&f).unwrap_or_else(|e| panic!("{}: {e:#}", f.display()));
    }
}

#[test]
fn the_outage_scenario_says_what_the_study_did() {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/lte-outages.toml");
    let s = Scenario::load(&p).unwrap();
    assert_eq!(s.duration, Duration::from_secs(120));
    let downs: Vec<Duration> = s
        .events
        .iter()
        .filter(|e| e.action == Action::Down && e.link == Link::Untrusted)
        .map(|e| e.at)
        .collect();
    assert_eq!(downs, [Duration::from_secs(16), Duration::from_secs(67)]);
    assert_eq!(s.links.untrusted.alias.as_deref(), Some("ppp1"));
    // Scaling shortens runs and events alike.
    let q = s.scaled(0.25).unwrap();
    assert_eq!(q.duration, Duration::from_secs(30));
    assert_eq!(q.events[0].at, Duration::from_secs(4));
    assert!(s.scaled(0.0).is_err() && s.scaled(1.5).is_err());
}

const OK: &str = r#"
duration = "10s"
[[runs]]
name = "a"
traffic = "mptcp"
"#;

fn err(text: &str) -> String {
    match Scenario::parse(text, "t.toml") {
        Ok(s) => panic!("accepted: {s:?}"),
        Err(e) => format!("{e:#}"),
    }
}

#[test]
fn a_minimal_scenario_has_defaults() {
    let s = Scenario::parse(OK, "t").unwrap();
    assert_eq!(s.runs[0].traffic, Traffic::Mptcp);
    assert_eq!(s.sample.interval, Duration::from_millis(100));
    assert!(s.events.is_empty() && s.capture.links.is_empty());
}

#[test]
fn bad_scenarios_get_one_clear_error_each() {
    let cases: &[(&str, &str)] = &[
        (&format!("{OK}\nspeed = 3\n"), "unknown field `speed`"),
        (
            &format!("{OK}\n[links.trusted]\nrate = \"3mbit\"\nwidth = 1\n"),
            "unknown field `width`",
        ),
        (
            &format!(
                "{OK}\n[[events]]\nat = \"5s\"\nlink = \"trusted\"\naction = \"down\"\n\
                 [[events]]\nat = \"2s\"\nlink = \"trusted\"\naction = \"up\"\n"
            ),
            "comes before",
        ),
        (
            &format!("{OK}\n[[events]]\nat = \"-2s\"\nlink = \"trusted\"\naction = \"down\"\n"),
            "negative",
        ),
        (
            &format!("{OK}\n[[events]]\nat = \"12s\"\nlink = \"trusted\"\naction = \"down\"\n"),
            "not inside the run",
        ),
        (
            &format!("{OK}\n[[events]]\nat = \"1s\"\nlink = \"wifi\"\naction = \"down\"\n"),
            "wifi",
        ),
        (
            &format!("{OK}\n[[events]]\nat = \"1s\"\nlink = \"lan\"\naction = \"down\"\n"),
            "the lan link is not part of scenarios",
        ),
        (
            &format!("{OK}\n[capture]\nlinks = [\"untrusted\", \"lan\"]\n"),
            "the lan link is not part of scenarios",
        ),
        (
            &format!("{OK}\n[[events]]\nat = \"1s\"\nlink = \"trusted\"\naction = \"explode\"\n"),
            "explode",
        ),
        (
            &format!("{OK}\n[links.untrusted]\nloss = \"130%\"\n"),
            "130%",
        ),
        (&format!("{OK}\n[links.untrusted]\nloss = \"-1%\"\n"), "-1%"),
        (
            &format!("{OK}\n[links.untrusted]\nloss = \"1%\"\nge_loss = \"0.01,0.5\"\n"),
            "exclusive",
        ),
        (
            &format!("{OK}\n[links.untrusted]\nrate = \"fast\"\n"),
            "bad rate",
        ),
        (
            &format!("{OK}\n[links.untrusted]\njitter = \"2ms\"\n"),
            "jitter needs a delay",
        ),
        (
            "duration = \"0s\"\n[[runs]]\nname = \"a\"\ntraffic = \"mptcp\"\n",
            "positive",
        ),
        (
            "duration = \"ten\"\n[[runs]]\nname = \"a\"\ntraffic = \"mptcp\"\n",
            "invalid duration",
        ),
        ("duration = \"10s\"\n", "missing field `runs`"),
        ("duration = \"10s\"\nruns = []\n", "at least one"),
        (
            "duration = \"10s\"\n[[runs]]\nname = \"a\"\ntraffic = \"tcp\"\n",
            "needs link",
        ),
        (
            "duration = \"10s\"\n[[runs]]\nname = \"a\"\ntraffic = \"nena\"\n",
            "needs a mode",
        ),
        (
            "duration = \"10s\"\n[[runs]]\nname = \"a\"\ntraffic = \"nena\"\nmode = \"rot13\"\n",
            "unknown mode",
        ),
        (
            "duration = \"10s\"\n[[runs]]\nname = \"a\"\ntraffic = \"send\"\nmode = \"aead\"\n",
            "needs bytes",
        ),
        (
            "duration = \"10s\"\n[[runs]]\nname = \"a\"\ntraffic = \"mptcp\"\nbytes = 5\n",
            "only for send",
        ),
        (
            "duration = \"10s\"\n[[runs]]\nname = \"../x\"\ntraffic = \"mptcp\"\n",
            "use letters",
        ),
        (
            &format!("{OK}\n[[runs]]\nname = \"a\"\ntraffic = \"mptcp\"\n"),
            "used twice",
        ),
        (
            "duration = \"10s\"\n[[runs]]\nname = \"a\"\ntraffic = \"mptcp\"\ncc = \"x; rm\"\n",
            "congestion control",
        ),
        ("duration = \"10s\"\n[[runs]\n", "t.toml"),
    ];
    for (text, want) in cases {
        let e = err(text);
        assert!(e.contains(want), "{want:?} not in {e:?} for\n{text}");
        assert!(!e.contains('\n'), "one line: {e:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Random bytes never panic the parser.
    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..400)) {
        nena_scenario::fuzzing::scenario(&data);
    }

    /// A shipped scenario with bytes changed never panics the parser.
    #[test]
    fn mutated_scenarios_never_panic(at in 0usize..2000, byte in any::<u8>(), cut in 0usize..2000) {
        let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/lte-outages.toml");
        let mut data = std::fs::read(p).unwrap();
        let i = at % data.len();
        data[i] = byte;
        data.truncate(cut.max(i + 1).min(data.len()));
        nena_scenario::fuzzing::scenario(&data);
    }
}

#[test]
fn a_competing_flow_is_parsed_and_checked() {
    let s = Scenario::parse(
        &format!("{OK}cc = \"nena_lia\"\ncompeting = {{ link = \"untrusted\", cc = \"reno\" }}\n"),
        "t",
    )
    .unwrap();
    let c = s.runs[0].competing.as_ref().expect("competing");
    assert_eq!(c.link, Some(nena_lab::Link::Untrusted));
    assert_eq!(c.cc.as_deref(), Some("reno"));
    for (text, want) in [
        ("competing = { cc = \"re no\" }\n", "of the competing flow"),
        (
            "competing = { cc = \"a_much_too_long_name\" }\n",
            "of the competing flow",
        ),
        ("competing = { link = \"server\" }\n", "client link"),
        ("competing = { speed = 1 }\n", "unknown field `speed`"),
        ("direction = \"down\"\ncompeting = {}\n", "goes up"),
    ] {
        let e = err(&format!("{OK}{text}"));
        assert!(e.contains(want), "{text}: {e}");
    }
}

#[test]
fn one_subflow_is_parsed_and_checked() {
    let s = Scenario::parse(&format!("{OK}subflows = 1\n"), "t").unwrap();
    assert_eq!(s.runs[0].subflows, Some(1));
    assert_eq!(s.runs[0].pm, None, "the runner picks the path manager");
    for (text, want) in [
        ("subflows = 2\n", "only 1 can be asked for"),
        ("subflows = 0\n", "only 1 can be asked for"),
        ("subflows = 1\npm = \"kernel\"\n", "leave out pm"),
        ("pm = \"userspace\"\n", "subflows = 1 says that is meant"),
    ] {
        let e = err(&format!("{OK}{text}"));
        assert!(e.contains(want), "{text}: {e}");
        assert!(!e.contains('\n'), "one line: {e:?}");
    }
    let e = err("duration = \"10s\"\n[[runs]]\nname = \"a\"\ntraffic = \"tcp\"\nlink = \"trusted\"\nsubflows = 1\n");
    assert!(e.contains("only for mptcp runs"), "{e}");
    // With the userspace path manager asked for explicitly, one subflow is what it gives.
    let s = Scenario::parse(&format!("{OK}subflows = 1\npm = \"userspace\"\n"), "t").unwrap();
    assert_eq!(s.runs[0].subflows, Some(1));
}

#[test]
fn the_lab_section_takes_families_nat_and_stripping() {
    use nena_lab::Family;
    let s = Scenario::parse(&format!("{OK}[lab]\nipv6 = true\n"), "t").unwrap();
    assert_eq!(s.lab.families().unwrap(), (Family::Dual, Family::Dual));
    let s = Scenario::parse(
        &format!(
            "{OK}[lab]\ntrusted_family = \"ipv6\"\nuntrusted_family = \"ipv4\"\n\
             untrusted_nat = true\nuntrusted_strip_mptcp = true\n"
        ),
        "t",
    )
    .unwrap();
    assert_eq!(s.lab.families().unwrap(), (Family::Ipv6, Family::Ipv4));
    assert!(s.lab.untrusted_nat && s.lab.untrusted_strip_mptcp && !s.lab.ipv6);
    // without any of them: the classic IPv4 lab
    let s = Scenario::parse(OK, "t").unwrap();
    assert_eq!(s.lab.families().unwrap(), (Family::Ipv4, Family::Ipv4));
    assert!(!s.lab.untrusted_nat && !s.lab.untrusted_strip_mptcp);
    for (text, want) in [
        ("[lab]\ntrusted_family = \"ipv5\"\n", "ipv5"),
        (
            "[lab]\nuntrusted_family = 6\n",
            "t.toml:7:20: wanted string",
        ),
        ("[lab]\nipv6 = \"yes\"\n", "t.toml:7:8: invalid type"),
        ("[lab]\nuntrusted_nat = 1\n", "t.toml:7:17: invalid type"),
        ("[lab]\nstrip_mptcp = true\n", "unknown field `strip_mptcp`"),
        (
            "[lab]\nipv6 = true\ntrusted_family = \"ipv4\"\nuntrusted_family = \"ipv4\"\n",
            "no client link would carry IPv6",
        ),
    ] {
        let e = err(&format!("{OK}{text}"));
        assert!(e.contains(want), "{text}: {e}");
        assert!(!e.contains('\n'), "one line: {e:?}");
    }
}
