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
/// each, interleaved (LIA, reno, LIA, reno), 12 s per run with the first 4 s omitted; the
/// share of each algorithm is its goodput over the TCP flow's, pooled over its two rounds.
///
/// Why pooled rounds: single runs of this experiment vary a lot here (AIMD flows at a
/// drop-tail queue; which flow loses first shapes the next seconds). In 8 single runs of
/// 8-14 s, LIA took 0.62-1.11x the TCP flow's goodput and uncoupled reno 1.02-2.22x (not
/// the textbook 2x every time: the MPTCP subflows lost more segments than the TCP flow).
/// Interleaving spreads a slow spell of the host over both algorithms.
///
/// The checks: LIA's share below 1.2 (issue 13's goal itself), and reno's above LIA's, so
/// the test fails if the coupling stops working (LIA then behaves as reno) or if the lab
/// stops making a shared bottleneck.
#[test]
fn lia_shares_a_bottleneck_with_tcp_where_uncoupled_reno_takes_more() {
    let _l = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let root = pin_root();
    let _lia = loader::Loaded::new(Algo::Lia, &root).expect("load lia");
    let lab = lab(|c| {
        c.server_rate = Some(Rate::mbit(20));
        c.offload = false;
    });
    let (mut lia, mut reno) = ((0.0, 0.0), (0.0, 0.0));
    let mut port = 6200;
    for round in 0..2 {
        for (cc, acc) in [("nena_lia", &mut lia), ("reno", &mut reno)] {
            let (s, _) = fairness::shared_bottleneck(&lab, cc, "reno", 12.0, 4.0, port)
                .unwrap_or_else(|e| panic!("{cc} round {round}: {e:#}"));
            eprintln!("{cc} round {round}: {s:?}");
            acc.0 += s.mptcp_mbit;
            acc.1 += s.tcp_mbit;
            port += 2;
        }
    }
    let (lia, reno) = (lia.0 / lia.1, reno.0 / reno.1);
    eprintln!("pooled shares: lia {lia:.2}, reno {reno:.2}");
    assert!(
        lia < 1.2,
        "LIA takes {lia:.2}x the TCP flow's goodput (goal: within 1.2x)"
    );
    assert!(
        reno > lia,
        "uncoupled reno takes {reno:.2}x, LIA {lia:.2}x: the coupling shows no effect"
    );
}
