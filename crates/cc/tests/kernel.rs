//! The congestion controls in the kernel (root, BPF struct_ops, a lab of network
//! namespaces): every subflow of an MPTCP connection runs the algorithm set on its socket,
//! and the shortened shared-bottleneck check of issue 13 (LIA's share against a TCP flow's,
//! and uncoupled reno's in the same test, so the check can fail). Pins go under a directory
//! of this process; the names are global to the kernel, so the tests take turns (LOCK) and
//! unload in Drop ([`loader::Loaded`]).
use nena_cc::{fairness, loader, Algo};
use nena_lab::{unique_prefix, Host, LabConfig, LabGuard, Rate};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

static LOCK: Mutex<()> = Mutex::new(());

fn pin_root() -> PathBuf {
    PathBuf::from(format!("/sys/fs/bpf/nena-cc-test{}", std::process::id()))
}

fn lab(f: impl FnOnce(&mut LabConfig)) -> LabGuard {
    let mut cfg = LabConfig::with_prefix(unique_prefix());
    f(&mut cfg);
    LabGuard::up(&cfg).expect("lab up")
}

/// `ss -tin` in the client host: the congestion control of every TCP socket to `port`
/// (the subflows of an MPTCP connection are TCP sockets there).
fn subflow_ccs(lab: &nena_lab::Lab, port: u16) -> Vec<String> {
    let out = lab
        .command(
            Host::Client,
            "ss",
            ["-tin", "state", "established", &format!("dport = :{port}")],
        )
        .output()
        .expect("ss");
    let text = String::from_utf8_lossy(&out.stdout);
    // Each socket: an address line, then an info line starting with the cc name.
    text.lines()
        .filter(|l| l.starts_with(char::is_whitespace) && l.contains("cwnd:"))
        .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
        .collect()
}

#[test]
fn every_subflow_runs_the_algorithm_set_on_the_mptcp_socket() {
    let _l = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let root = pin_root();
    let lab = lab(|c| {
        c.server_rate = Some(Rate::mbit(50));
    });
    for algo in Algo::ALL {
        let loaded = loader::Loaded::new(algo, &root).expect("load");
        assert!(loader::is_registered(algo.name()));
        // A 2 s bulk run; look at the subflows half-way.
        let lab2 = lab.clone();
        let h = std::thread::spawn(move || {
            fairness::disjoint_paths(&lab2, algo.name(), 2.0, 1.0, 6100)
        });
        std::thread::sleep(Duration::from_millis(1200));
        let ccs = subflow_ccs(&lab, 6100);
        let (goodput, _) = h.join().unwrap().expect("run");
        assert!(goodput > 1.0, "{algo}: data moved ({goodput} Mbit/s)");
        assert_eq!(ccs.len(), 2, "{algo}: two subflows: {ccs:?}");
        assert!(
            ccs.iter().all(|c| c == algo.name()),
            "{algo}: subflows run {ccs:?}"
        );
        drop(loaded);
        assert!(
            !loader::is_registered(algo.name()),
            "{algo} unregistered on drop"
        );
        assert!(!loader::pin_path(&root, algo).exists());
    }
    assert!(!root.exists(), "the pin directory goes with its last pin");
}

/// LIA against uncoupled reno at one shared 20 Mbit/s bottleneck (the server link): each
/// MPTCP connection (two subflows) beside one reno TCP flow started with it. Two rounds of
/// each, interleaved (LIA, reno, LIA, reno), 12 s per run with the first 4 s omitted. Two
/// measures per algorithm, pooled over its rounds: its share (goodput over the TCP flow's)
/// and the growth of its subflows' total cwnd in congestion avoidance (packets per RTT,
/// from `ss` every 100 ms).
///
/// The share varies a lot from run to run here (AIMD flows at a drop-tail queue; which flow
/// loses first shapes the next seconds): in 12 single runs of 8-14 s, LIA took 0.55-1.72x
/// the TCP flow's goodput and uncoupled reno 0.85-2.22x; pooled over this test's two
/// rounds, in four runs, LIA 0.65-1.42x and reno 0.78-1.85x (once reno below LIA). So the
/// share is checked against 1.5x (the goal, 1.2x, plus that spread; the 30 s scenario runs
/// with three repetitions in docs/EXPERIMENTS.md measure the goal itself: LIA 0.68x), and
/// reno exceeding LIA is checked on the growth, which is steady: reno grows 1.86-1.89
/// packets per RTT (1 per subflow), LIA 0.65-0.72 (between 1/2 and 1, by RFC 6356's
/// rule). The test fails if the coupling stops working (LIA then grows as reno) or
/// if LIA takes half again the TCP flow's share.
#[test]
fn lia_shares_a_bottleneck_with_tcp_where_uncoupled_reno_takes_more() {
    let _l = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let root = pin_root();
    let _lia = loader::Loaded::new(Algo::Lia, &root).expect("load lia");
    let lab = lab(|c| {
        c.server_rate = Some(Rate::mbit(20));
        c.offload = false;
    });
    let (mut lia, mut reno) = ((0.0, 0.0, vec![]), (0.0, 0.0, vec![]));
    let mut port = 6200;
    for round in 0..2 {
        for (cc, acc) in [("nena_lia", &mut lia), ("reno", &mut reno)] {
            let (s, _, trace) = fairness::shared_bottleneck(&lab, cc, "reno", 12.0, 4.0, port)
                .unwrap_or_else(|e| panic!("{cc} round {round}: {e:#}"));
            eprintln!("{cc} round {round}: {s:?}");
            acc.0 += s.mptcp_mbit;
            acc.1 += s.tcp_mbit;
            acc.2.extend(trace);
            port += 2;
        }
    }
    let growth = |t: &[fairness::CwndSample]| {
        fairness::ca_growth_per_rtt(t)
            .expect("some congestion avoidance")
            .0
    };
    let (lia_g, reno_g) = (growth(&lia.2), growth(&reno.2));
    let (lia, reno) = (lia.0 / lia.1, reno.0 / reno.1);
    eprintln!(
        "pooled: lia share {lia:.2}, growth {lia_g:.2}/RTT; reno share {reno:.2}, growth {reno_g:.2}/RTT"
    );
    assert!(lia < 1.5, "LIA takes {lia:.2}x the TCP flow's goodput");
    assert!(
        lia_g < 1.1 && reno_g > 1.5 * lia_g,
        "total window growth per RTT: reno {reno_g:.2}, LIA {lia_g:.2} (the coupling shows no effect)"
    );
}

/// A lab trace per algorithm: one MPTCP connection alone through the 20 Mbit/s server link
/// (two subflows of equal RTT), `ss -tin` every 100 ms, and the growth of the subflows'
/// total cwnd in congestion avoidance, in packets per RTT (fairness::ca_growth_per_rtt).
#[test]
fn each_algorithm_grows_the_total_window_as_its_rule_says() {
    let _l = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let root = pin_root();
    let lab = lab(|c| {
        c.server_rate = Some(Rate::mbit(20));
        c.offload = false;
    });
    let mut got = Vec::new();
    let ccs = ["reno", "nena_lia", "nena_olia", "nena_balia", "nena_ewtcp"];
    for (port, cc) in (6500..).zip(ccs) {
        let _g = Algo::parse(cc).map(|a| loader::Loaded::new(a, &root).expect("load"));
        let trace = fairness::cwnd_trace(&lab, cc, 7.0, port).expect("trace");
        let (g, rtts) = fairness::ca_growth_per_rtt(&trace).expect("some congestion avoidance");
        eprintln!("{cc}: {g:.2} packets per RTT over {rtts:.0} RTTs");
        got.push((cc, g, rtts));
    }
    // Predictions for two subflows of equal RTT: reno 2 (1 per subflow), EWTCP sqrt(2)
    // (the study's alpha = 1/sqrt(n)), LIA, OLIA and BALIA between 1/2 (equal windows) and
    // 1 (one window much larger). Measured in two runs here: reno 1.94, EWTCP 1.39, LIA
    // 0.76, OLIA 0.82, BALIA 0.81. The bounds leave about 20% each side of the prediction.
    for (cc, g, rtts) in &got {
        assert!(
            *rtts > 40.0,
            "{cc}: only {rtts:.0} RTTs of congestion avoidance"
        );
        let (lo, hi) = match *cc {
            "reno" => (1.6, 2.4),
            "nena_ewtcp" => (1.1, 1.7),
            _ => (0.4, 1.05),
        };
        assert!(
            (lo..=hi).contains(g),
            "{cc}: {g:.2} packets per RTT, expected {lo}..{hi}"
        );
    }
}
