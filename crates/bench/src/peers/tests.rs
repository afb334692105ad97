//! Tests of `peers`.
use super::*;

fn run(variant: Variant, mbit_s: f64, cpu_s_per_gb: f64, multipath: bool) -> Run {
    Run {
        variant,
        rep: 1,
        bytes: 1_000_000_000,
        seconds: 8000.0 / mbit_s,
        total_seconds: 8000.0 / mbit_s + 0.01,
        mbit_s,
        client_cpu_s: cpu_s_per_gb / 2.0,
        server_cpu_s: cpu_s_per_gb / 2.0,
        cpu_s_per_gb,
        host_cpu_s_per_gb: cpu_s_per_gb + 0.5,
        untrusted_share: 0.3,
        multipath,
    }
}

#[test]
fn verdicts_take_the_best_peer_for_each_figure() {
    let runs = vec![
        run(Variant::Nena, 900.0, 1.0, true),
        run(Variant::Nena, 1000.0, 1.2, true),
        run(Variant::Nena, 950.0, 1.1, true),
        // The cheapest peer is not the fastest.
        run(Variant::ShadowsocksAes, 800.0, 1.5, true),
        run(Variant::Stunnel, 990.0, 2.0, true),
    ];
    let (stats, t) = summarize(&runs, &[], &Variant::ALL);
    assert_eq!(stats.len(), 3, "the chacha variant ran nothing");
    assert_eq!(stats[0].paired_cpu_ratio, None, "nena is not its own peer");
    // Every run here is rep 1: nena's three runs against the peer's one.
    let (m, lo, hi) = stats[1].paired_cpu_ratio.unwrap();
    assert!((m - 1.1 / 1.5).abs() < 1e-9 && lo == 1.0 / 1.5 && hi == 1.2 / 1.5);
    assert_eq!(stats[0].median_mbit_s, 950.0);
    assert_eq!(stats[0].median_cpu_s_per_gb, 1.1);
    assert_eq!(t.len(), 4);
    assert!(t[0].pass && t[1].pass, "all completed, all multipath");
    // CPU: 1.1 / 1.5 (shadowsocks) = 0.733 <= 0.8.
    assert!((t[2].value - 1.1 / 1.5).abs() < 1e-9 && t[2].pass);
    assert!(t[2].name.contains("shadowsocks"));
    // Goodput: 950 / 990 (stunnel) < 1.
    assert!((t[3].value - 950.0 / 990.0).abs() < 1e-9 && !t[3].pass);
    assert!(t[3].name.contains("stunnel"));
}

#[test]
fn the_gateway_is_held_to_the_lan_proxy_clients_cpu_and_is_not_a_peer() {
    let with_client = |v, mbit_s, client: f64, server: f64| Run {
        client_cpu_s: client,
        server_cpu_s: server,
        cpu_s_per_gb: client + server,
        ..run(v, mbit_s, client + server, true)
    };
    let runs = vec![
        with_client(Variant::Nena, 900.0, 0.3, 0.6),
        with_client(Variant::NenaLan, 900.0, 0.5, 0.6),
        // Cheaper in total than the peer and faster, but a gateway is not a peer.
        with_client(Variant::Gateway, 2000.0, 0.54, 0.1),
        with_client(Variant::Stunnel, 1000.0, 1.0, 1.0),
    ];
    let (stats, t) = summarize(&runs, &[], &Variant::ALL);
    assert!(stats[1..3].iter().all(|s| s.paired_cpu_ratio.is_none()));
    let names: Vec<&str> = t.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(t.len(), 9, "{names:?}");
    // nena against stunnel, not against its own.
    assert!(t[2].name.contains("stunnel") && (t[2].value - 0.9 / 2.0).abs() < 1e-9);
    assert!(t[3].name.contains("stunnel") && !t[3].pass);
    assert_eq!(t[4].name, "every LAN-host proxy run completed");
    assert_eq!(t[6].name, "every gateway run completed");
    assert_eq!(t[7].name, "every gateway run multipath");
    // The clients' ends, both serving the LAN host: 0.54 / 0.5 = 1.08 <= 1.1 (not
    // 0.54 / 0.3 against the proxy serving its own host).
    assert!(t[8].name.contains("proxy client's for the LAN host"));
    assert!((t[8].value - 1.08).abs() < 1e-9 && t[8].pass, "{:?}", t[8]);
    let runs = vec![
        with_client(Variant::NenaLan, 900.0, 0.5, 0.6),
        with_client(Variant::Gateway, 900.0, 0.56, 0.6),
    ];
    let (_, t) = summarize(&runs, &[failure(Variant::Gateway, 2)], &Variant::ALL);
    let g: Vec<&TargetCheck> = t.iter().filter(|t| t.name.contains("gateway")).collect();
    assert!(!g[0].pass && g[0].value == 0.5, "one of two failed: {g:?}");
    assert!((g[2].value - 1.12).abs() < 1e-9 && !g[2].pass);
}

#[test]
fn a_nena_run_on_one_path_fails_the_verdict() {
    let runs = vec![
        run(Variant::Nena, 1000.0, 1.0, true),
        run(Variant::Nena, 1000.0, 1.0, false),
        run(Variant::ShadowsocksAes, 500.0, 2.0, false),
    ];
    let (_, t) = summarize(&runs, &[], &Variant::ALL);
    assert!(t[0].pass);
    assert!(!t[1].pass);
    assert!(t[2].pass && t[3].pass);
}

#[test]
fn the_paired_ratio_compares_runs_of_the_same_repetition() {
    let at = |v, rep, cpu| Run {
        rep,
        ..run(v, 100.0, cpu, true)
    };
    // The host slows down in rep 2: each tunnel's cost doubles.
    let runs = vec![
        at(Variant::Nena, 1, 1.0),
        at(Variant::ShadowsocksAes, 1, 1.25),
        at(Variant::Nena, 2, 2.0),
        at(Variant::ShadowsocksAes, 2, 2.5),
        at(Variant::Nena, 3, 1.0),
        // No peer run in rep 3: that nena run is not paired.
    ];
    let (stats, _) = summarize(&runs, &[], &Variant::ALL);
    let (m, lo, hi) = stats[1].paired_cpu_ratio.unwrap();
    assert!((m - 0.8).abs() < 1e-9 && (lo - 0.8).abs() < 1e-9 && (hi - 0.8).abs() < 1e-9);
    assert!(table_of(stats).contains(
        "over shadowsocks aes-128-gcm's in the same repetition: median 0.800 (0.800-0.800)"
    ));
}

#[test]
fn the_floor_is_the_plain_twin_plus_the_primitive() {
    let at = |v, rep, cpu| Run {
        rep,
        ..run(v, 100.0, cpu, true)
    };
    let runs = vec![
        at(Variant::Nena, 1, 1.0),
        at(Variant::NenaPlain, 1, 0.7),
        at(Variant::Nena, 2, 1.4),
        at(Variant::NenaPlain, 2, 1.1),
        // The gateway's twin did not run: no floor for it.
        at(Variant::Gateway, 1, 1.2),
        at(Variant::Stunnel, 1, 3.0),
    ];
    let (stats, t) = summarize(&runs, &[], &Variant::ALL);
    assert!(t
        .iter()
        .any(|t| t.name == "every nena plain run multipath" && t.pass));
    // The primitive timed after repetition 1 and after repetition 2.
    let f = floors(&stats, &runs, "aes-128-gcm (aws-lc-rs)", &[0.15, 0.25]);
    assert_eq!(f.len(), 1);
    let f = &f[0];
    assert_eq!((f.variant, f.plain), (Variant::Nena, Variant::NenaPlain));
    // Medians 1.2, 0.9 and 0.2; floor 0.9 + 0.2 = 1.1.
    assert!((f.primitive_s_per_gb - 0.2).abs() < 1e-9);
    assert!((f.floor_s_per_gb - 1.1).abs() < 1e-9);
    assert!((f.ratio - 1.2 / 1.1).abs() < 1e-9);
    // By repetition, each with its own primitive: 1.0 / (0.7 + 0.15), 1.4 / (1.1 + 0.25).
    let (r1, r2) = (1.0 / 0.85, 1.4 / 1.35);
    let (m, lo, hi) = f.paired.unwrap();
    assert!((lo - r2).abs() < 1e-9 && (hi - r1).abs() < 1e-9);
    assert!((m - (r1 + r2) / 2.0).abs() < 1e-9);
    // The whole host's figures are each run's + 0.5: 1.7 over 1.4 + 0.2.
    assert!((f.host_cpu_s_per_gb - 1.7).abs() < 1e-9);
    assert!((f.host_ratio - 1.7 / 1.6).abs() < 1e-9);
    let t = floor_targets(std::slice::from_ref(f));
    assert_eq!(t.len(), 1);
    assert!(t[0]
        .name
        .contains("nena aead CPU per GB <= 1.10x its floor"));
    // The verdict is the median by repetition (1.106), not the ratio of medians (1.091).
    assert!((t[0].value - (r1 + r2) / 2.0).abs() < 1e-9);
    assert!(!t[0].pass, "1.106 > 1.10");
    // A primitive not timed: the floor is reported, no target.
    let f = floors(&stats, &runs, "not timed", &[f64::NAN, f64::NAN]);
    assert!(f[0].ratio.is_nan() && floor_targets(&f).is_empty());
    let f = floors(&stats, &runs, "not timed", &[]);
    assert!(f[0].ratio.is_nan() && floor_targets(&f).is_empty());
}

fn table_of(variants: Vec<VariantStats>) -> String {
    table(&PeersReport {
        reps: 2,
        settings: vec![SettingResult {
            setting: Setting::all().remove(0),
            variants,
            targets: Vec::new(),
            pass: true,
            runs: Vec::new(),
            failures: Vec::new(),
            udp: None,
            floors: Vec::new(),
        }],
        pass: true,
        cpu: String::new(),
        kernel: String::new(),
        loadavg_start: String::new(),
        loadavg_end: String::new(),
    })
}

fn failure(variant: Variant, rep: usize) -> Failure {
    Failure {
        variant,
        rep,
        error: "sending through the tunnel: Connection reset by peer".into(),
    }
}

#[test]
fn a_peer_failure_is_counted_and_a_nena_failure_fails_the_verdict() {
    let runs = vec![
        run(Variant::Nena, 1000.0, 1.0, true),
        run(Variant::ShadowsocksAes, 500.0, 2.0, true),
    ];
    // A peer's failed run: counted, its medians from the run that completed.
    let (stats, t) = summarize(&runs, &[failure(Variant::ShadowsocksAes, 2)], &Variant::ALL);
    assert_eq!((stats[1].runs, stats[1].failed), (1, 1));
    assert_eq!(stats[1].median_mbit_s, 500.0);
    assert!(t.iter().all(|t| t.pass), "{t:?}");
    // One of nena's two runs failed: half completed.
    let (stats, t) = summarize(&runs, &[failure(Variant::Nena, 2)], &Variant::ALL);
    assert_eq!((stats[0].runs, stats[0].failed), (1, 1));
    assert!(!t[0].pass && t[0].value == 0.5, "{t:?}");
    // Every nena run failed: no medians, and still a failed verdict.
    let peer_only = &runs[1..];
    let (stats, t) = summarize(peer_only, &[failure(Variant::Nena, 1)], &Variant::ALL);
    assert!(stats.iter().all(|s| s.variant != Variant::Nena));
    assert_eq!(t.len(), 1);
    assert!(!t[0].pass && t[0].value == 0.0);
}
