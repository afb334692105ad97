//! `nena bench peers`: a peer that is not installed is named before any lab comes up; and,
//! as root, the bench end to end against stunnel (installed by scripts/install-deps.sh;
//! shadowsocks-rust is built only by `make peers`), shortened: one setting, one small
//! transfer per tunnel (nena's proxy pair for its own host and for the LAN host, `nena
//! gateway` for the LAN host, the pair and the gateway in plain mode for the floors,
//! stunnel) and one
//! 2 s UDP stream through the gateway and one straight over the link (iperf3), every figure of the JSON consistent with its
//! runs and the lab gone afterwards. The verdicts are reported, not required here (`make bench` runs the full
//! bench).

use crate::harness::{bench_json, nena};

#[test]
fn a_peer_that_is_not_installed_is_named_before_any_lab() {
    let o = nena(&[
        "bench",
        "peers",
        "--sslocal",
        "/nonexistent/sslocal",
        "--peer",
        "shadowsocks",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("/nonexistent/sslocal") && err.contains("make peers"),
        "{err}"
    );
}

#[test]
fn filters_that_match_nothing_are_usage_errors() {
    for (flag, value, names) in [
        ("--peer", "wireguard", "stunnel TLS 1.3"),
        ("--setting", "10+10", "100+20 Mbit/s"),
    ] {
        let o = nena(&["bench", "peers", flag, value]);
        assert_eq!(o.status.code(), Some(2), "{flag}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("matches none of") && err.contains(names),
            "{err}"
        );
    }
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn nena_and_stunnel_carry_the_same_bytes_with_figures_that_follow_from_the_runs() {
    let bytes: u64 = 2 << 20;
    let (r, lab_ns) = bench_json(
        &[
            "peers",
            "--peer",
            "stunnel",
            "--setting",
            "100+20",
            "--reps",
            "1",
            "--bytes",
            "2M",
            "--udp-seconds",
            "2",
            "--no-check",
            "--json",
        ],
        "np",
    );
    assert!(!lab_ns.exists(), "the bench left its lab behind");
    let settings = r["settings"].as_array().unwrap();
    assert_eq!(settings.len(), 1, "{r}");
    let s = &settings[0];
    assert_eq!(s["setting"]["name"], "100+20 Mbit/s");
    let runs = s["runs"].as_array().unwrap();
    let names: Vec<&str> = runs
        .iter()
        .map(|x| x["variant"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "nena aead",
            "nena plain (floor)",
            "nena aead, LAN host",
            "nena gateway aead",
            "nena gateway plain (floor)",
            "stunnel TLS 1.3"
        ],
        "{s}"
    );
    let f = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap();
    for run in runs {
        assert_eq!(run["bytes"], bytes);
        // 2 MiB at the 120 Mbit/s both links allow take at least 0.14 s.
        assert!((0.13..60.0).contains(&f(run, "seconds")), "{run}");
        assert!(f(run, "total_seconds") >= f(run, "seconds"));
        let mbit = bytes as f64 * 8.0 / 1e6 / f(run, "seconds");
        assert!((f(run, "mbit_s") - mbit).abs() < 1e-6 * mbit, "{run}");
        let (c, sv) = (f(run, "client_cpu_s"), f(run, "server_cpu_s"));
        assert!(c >= 0.0 && sv >= 0.0, "{run}");
        let per_gb = (c + sv) / (bytes as f64 / 1e9);
        assert!((f(run, "cpu_s_per_gb") - per_gb).abs() < 1e-9, "{run}");
        assert!((0.0..=1.0).contains(&f(run, "untrusted_share")), "{run}");
    }
    // One run each: the medians are the runs' own figures.
    for (v, run) in s["variants"].as_array().unwrap().iter().zip(runs) {
        assert_eq!(v["variant"], run["variant"]);
        assert_eq!(f(v, "median_mbit_s"), f(run, "mbit_s"));
        assert_eq!(f(v, "median_cpu_s_per_gb"), f(run, "cpu_s_per_gb"));
        assert_eq!(v["runs"], 1);
    }
    assert_eq!(s["failures"].as_array().unwrap().len(), 0, "{s}");
    let t = s["targets"].as_array().unwrap();
    assert_eq!(t.len(), 15, "{s}");
    assert_eq!(t[0]["name"], "every nena run completed");
    assert_eq!(t[0]["pass"], true);
    let (nena_run, plain_run, lan_run) = (&runs[0], &runs[1], &runs[2]);
    let (gw_run, gw_plain_run, tls_run) = (&runs[3], &runs[4], &runs[5]);
    // One repetition: the paired ratio is that repetition's.
    let variants = s["variants"].as_array().unwrap();
    assert!(variants[0]["paired_cpu_ratio"].is_null(), "{s}");
    for own in &variants[1..5] {
        assert!(
            own["paired_cpu_ratio"].is_null(),
            "nena's own is no peer: {own}"
        );
    }
    let paired = variants[5]["paired_cpu_ratio"][0].as_f64().unwrap();
    let cpu = f(nena_run, "cpu_s_per_gb") / f(tls_run, "cpu_s_per_gb");
    assert!((paired - cpu).abs() < 1e-9, "{s}");
    let goodput = f(nena_run, "mbit_s") / f(tls_run, "mbit_s");
    assert!((f(&t[3], "value") - goodput).abs() < 1e-9, "{s}");
    assert_eq!(t[3]["pass"], goodput >= 1.0);
    assert_eq!(t[1]["pass"], nena_run["multipath"]);
    // The gateway against the proxy client serving the LAN host, client end against
    // client end.
    assert_eq!(t[4]["name"], "every nena plain run completed");
    assert_eq!(t[5]["pass"], plain_run["multipath"]);
    assert_eq!(t[6]["name"], "every gateway plain run completed");
    assert_eq!(t[7]["pass"], gw_plain_run["multipath"]);
    assert_eq!(t[8]["name"], "every LAN-host proxy run completed");
    assert_eq!(t[9]["pass"], lan_run["multipath"]);
    assert_eq!(t[10]["name"], "every gateway run completed");
    assert_eq!(t[10]["pass"], true);
    assert_eq!(t[11]["pass"], gw_run["multipath"]);
    let gw = f(gw_run, "client_cpu_s") / f(lan_run, "client_cpu_s");
    assert!((f(&t[12], "value") - gw).abs() < 1e-9, "{s}");
    assert_eq!(t[12]["pass"], gw <= 1.1);
    // The floors: each aead tunnel over its plain twin plus the primitive timed in the run.
    let floors = s["floors"].as_array().unwrap();
    assert_eq!(floors.len(), 2, "{s}");
    for (k, (floor, (aead, plain))) in floors
        .iter()
        .zip([(nena_run, plain_run), (gw_run, gw_plain_run)])
        .enumerate()
    {
        assert_eq!(floor["variant"], aead["variant"]);
        assert_eq!(floor["plain"], plain["variant"]);
        let p = f(floor, "primitive_s_per_gb");
        assert!(p > 0.0 && p < 10.0, "{floor}");
        // Timed once after each repetition: one repetition, one timing, its median.
        let by_rep = floor["primitive_by_rep"].as_array().unwrap();
        assert_eq!(by_rep.len(), 1, "{floor}");
        assert_eq!(by_rep[0].as_f64(), Some(p), "{floor}");
        let ratio = f(aead, "cpu_s_per_gb") / (f(plain, "cpu_s_per_gb") + p);
        assert!((f(floor, "ratio") - ratio).abs() < 1e-9, "{floor}");
        let target = &t[13 + k];
        assert!((f(target, "value") - ratio).abs() < 1e-9, "{target}");
        assert_eq!(target["pass"], ratio <= 1.10);
    }
    // The UDP stream through the gateway and straight over the link: one run of 2 s at
    // 50 Mbit/s each in this setting.
    let udp = &s["udp"];
    let lost_of = |key: &str| {
        let streams = udp[key]
            .as_array()
            .expect("UDP streams in a link-bound setting");
        assert_eq!(streams.len(), 1, "{udp}");
        let u = &streams[0];
        let (sent, lost) = (f(u, "packets"), f(u, "lost_packets"));
        // 2 s at 50 Mbit/s of 1400-byte datagrams: about 8,900 sent.
        assert!((4000.0..20000.0).contains(&sent), "{u}");
        lost * 100.0 / sent
    };
    let (through, direct) = (lost_of("runs"), lost_of("direct_runs"));
    assert!((f(udp, "lost_percent") - through).abs() < 1e-9, "{udp}");
    assert!(
        (f(udp, "direct_lost_percent") - direct).abs() < 1e-9,
        "{udp}"
    );
    assert!((f(udp, "beyond_percent") - (through - direct)).abs() < 1e-9);
    assert_eq!(udp["pass"], through - direct < 1.0);
    assert_eq!(
        s["pass"],
        t.iter().all(|x| x["pass"] == true) && udp["pass"] == true,
        "{s}"
    );
}
