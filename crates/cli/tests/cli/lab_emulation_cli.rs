//! `nena lab up/set/status/down` with link emulation, end to end (needs root): the flags
//! reach the relay (RTT measured over TCP against the configured delay), `set` changes one
//! direction at run time, `status --json` shows the emulation, `down` leaves no relay; bad
//! values give one error line and exit 2.
use crate::harness::nena;

use nena_lab::{Lab, Link};
use std::io::{Read, Write};
use std::process::Command;
use std::time::{Duration, Instant};

fn ok(args: &[&str]) -> String {
    let out = nena(args);
    assert!(
        out.status.success(),
        "nena {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `nena lab down` for its prefix when dropped.
struct Down(String);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = nena(&["lab", "down", "--prefix", &self.0]);
    }
}

/// Median RTT of 15 one-byte TCP ping-pongs from the client's address on `link`.
/// The least of 15 one-byte round trips over `link`: the emulated delay plus the hosts' own
/// time. Load on the machine (a parallel build, other tests) only adds to a round trip, so the
/// least one is the figure that stays put; fidelity under load is `nena bench emulation`'s.
fn min_rtt(lab: &Lab, link: Link) -> Duration {
    let l = lab.listen_on_server(0).unwrap();
    let dst = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut e, _) = l.accept().unwrap();
        e.set_nodelay(true).unwrap();
        let mut b = [0u8; 1];
        while e.read_exact(&mut b).is_ok() && e.write_all(&b).is_ok() {}
    });
    let mut s = lab.connect(link, dst, Duration::from_secs(5)).unwrap();
    s.set_nodelay(true).unwrap();
    let v: Vec<Duration> = (0..15)
        .map(|_| {
            let t = Instant::now();
            let mut b = [1u8];
            s.write_all(&b).unwrap();
            s.read_exact(&mut b).unwrap();
            t.elapsed()
        })
        .collect();
    v.into_iter().min().unwrap()
}

fn relays_of(prefix: &str) -> usize {
    let out = Command::new("pgrep")
        .args(["-f", &format!("lab relay --prefix {prefix}$")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count()
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn emulation_flags_up_set_status_and_down() {
    let t0 = Instant::now();
    let prefix = nena_lab::unique_prefix().replace("nt", "ne");
    let _down = Down(prefix.clone());
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("untrusted.trace");
    // mahimahi: one opportunity per ms (about 12 Mbit/s), looped
    std::fs::write(
        &trace,
        (1..=10).map(|i| format!("{i}\n")).collect::<String>(),
    )
    .unwrap();
    ok(&[
        "lab",
        "up",
        "--prefix",
        &prefix,
        "--trusted-delay",
        "10ms",
        "--untrusted-delay",
        "20ms",
        "--untrusted-loss",
        "5%",
        "--untrusted-outage",
        "60s+1s",
        "--untrusted-trace",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(relays_of(&prefix), 1, "one relay for the lab");
    let st: serde_json::Value =
        serde_json::from_str(&ok(&["lab", "status", "--prefix", &prefix, "--json"])).unwrap();
    let link = |name: &str| {
        st["links"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["link"] == name)
            .unwrap()
            .clone()
    };
    let u = link("untrusted");
    assert_eq!(u["kind"], "tap");
    assert_eq!(u["emulation"]["to_router"]["delay"], "20ms");
    assert_eq!(u["emulation"]["from_router"]["loss"]["random"], 0.05);
    assert_eq!(
        u["emulation"]["to_router"]["outages"][0]["start"], "60s",
        "{u}"
    );
    assert_eq!(
        link("untrusted")["emulation"]["to_router"]["trace"]["deliveries"]["period_ms"],
        10
    );
    assert!(st["relay_pid"].as_u64().is_some());
    let text = ok(&["lab", "status", "--prefix", &prefix]);
    assert!(
        text.contains("delay 20ms, loss 5%, delivery trace untrusted.trace (10 opportunities per 10 ms), outage 60s+1s"),
        "{text}"
    );
    assert!(link("server")["emulation"].is_null());
    assert_eq!(link("server")["kind"], "veth");

    let lab = Lab::open(&prefix).unwrap();
    let rtt = min_rtt(&lab, Link::Trusted);
    assert!(
        rtt >= Duration::from_millis(20) && rtt < Duration::from_millis(25),
        "{rtt:?}"
    );

    let out = ok(&[
        "lab",
        "set",
        "--prefix",
        &prefix,
        "trusted",
        "--delay",
        "30ms",
        "--direction",
        "up",
    ]);
    assert!(out.contains("to-router: delay 30ms"), "{out}");
    let st: serde_json::Value =
        serde_json::from_str(&ok(&["lab", "status", "--prefix", &prefix, "--json"])).unwrap();
    let t = &st["links"][0];
    assert_eq!(t["emulation"]["to_router"]["delay"], "30ms");
    assert_eq!(t["emulation"]["from_router"]["delay"], "10ms");
    let rtt = min_rtt(&lab, Link::Trusted);
    assert!(
        rtt >= Duration::from_millis(40) && rtt < Duration::from_millis(45),
        "{rtt:?}"
    );

    ok(&["lab", "down", "--prefix", &prefix]);
    assert_eq!(relays_of(&prefix), 0, "relay left after down");
    assert!(!Lab::is_up(&prefix));
    eprintln!("test time {:?}", t0.elapsed());
}

#[test]
fn bad_emulation_values_are_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.csv");
    std::fs::write(&empty, "time_s,rate\n").unwrap();
    let unsorted = dir.path().join("unsorted.csv");
    std::fs::write(&unsorted, "0,10mbit\n5,1mbit\n2,3mbit\n").unwrap();
    let prefix = nena_lab::unique_prefix().replace("nt", "nb");
    let (e, u) = (empty.to_str().unwrap(), unsorted.to_str().unwrap());
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["up", "--trusted-delay", "-5ms"], "negative"),
        (vec!["up", "--trusted-delay", "20"], "give a unit"),
        (vec!["up", "--untrusted-loss", "150%"], "more than 100%"),
        (vec!["up", "--untrusted-loss", "-1%"], "negative"),
        (vec!["up", "--trusted-jitter", "soon"], "invalid duration"),
        (vec!["up", "--trusted-outage", "16s"], "START+DURATION"),
        (vec!["up", "--server-ge-loss", "1%"], "p,r"),
        (vec!["up", "--trusted-trace", e], "empty"),
        (vec!["up", "--trusted-trace", u], "times must increase"),
        (
            vec!["up", "--trusted-trace", "/nonexistent/t.csv"],
            "cannot read",
        ),
        (
            vec![
                "set",
                "trusted",
                "--delay",
                "1ms",
                "--direction",
                "sideways",
            ],
            "direction",
        ),
        (vec!["set", "trusted", "--loss", "101%"], "more than 100%"),
        (vec!["set", "trusted", "--outage", "1s+0"], "duration is 0"),
    ];
    for (args, why) in cases {
        let mut full = vec!["lab"];
        full.extend(&args[..1]);
        full.extend(["--prefix", &prefix]);
        full.extend(&args[1..]);
        let out = nena(&full);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{full:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{full:?}: {err}");
        assert!(err.contains(why), "{full:?}: {err} (expected `{why}`)");
    }
    assert!(!Lab::is_up(&prefix), "a refused `up` built a lab");
}
