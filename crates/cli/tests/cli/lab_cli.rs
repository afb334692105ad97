//! `nena lab ...` end to end (needs root, iproute2 and tcpdump, as CI has). Each test uses
//! its own prefix and a guard that runs `nena lab down` even when the test fails.
use crate::harness::nena;

use nena_lab::{Lab, Link};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
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

/// Runs `nena lab down` for its prefix when dropped; removes its temp dir.
struct Down {
    prefix: String,
    dir: PathBuf,
}

impl Down {
    fn new() -> Down {
        let prefix = nena_lab::unique_prefix().replace("nt", "nc");
        let dir = std::env::temp_dir().join(format!("nena-labcli-{prefix}"));
        std::fs::create_dir_all(&dir).unwrap();
        Down { prefix, dir }
    }
}

impl Drop for Down {
    fn drop(&mut self) {
        let _ = nena(&["lab", "down", "--prefix", &self.prefix]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn namespaces_of(prefix: &str) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&format!("{prefix}-")))
        .map(str::to_string)
        .collect()
}

/// Send `data` from the client's address on `link` to the server; returns what arrived.
fn send(lab: &Lab, link: Link, data: &[u8]) -> Vec<u8> {
    let listener = lab.listen_on_server(0).unwrap();
    let dst = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        got
    });
    let mut c = lab.connect(link, dst, Duration::from_secs(3)).unwrap();
    c.write_all(data).unwrap();
    c.shutdown(std::net::Shutdown::Write).unwrap();
    server.join().unwrap()
}

fn file_like_the_papers() -> Vec<u8> {
    // reference-list-like text with no repeated 16-byte run
    let mut rng = nena_testkit::Prng::new(0x2545f4914f6cdd1d);
    let mut out = Vec::new();
    for i in 0..3000 {
        let x = rng.next_u64();
        out.extend_from_slice(
            format!(
                "[{i}] A. Author{:x}, \"Title {:x}\", Proc. {}\n",
                x >> 40,
                x & 0xffff,
                x % 97
            )
            .as_bytes(),
        );
    }
    out
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn up_status_set_exec_capture_eavesdrop_down() {
    let d = Down::new();
    let p = d.prefix.as_str();
    let out = ok(&["lab", "up", "--prefix", p, "--untrusted-rate", "50mbit"]);
    assert!(out.contains(&format!("lab `{p}` is up")), "{out}");
    assert!(out.contains("rate 50mbit"), "{out}");
    // up twice is harmless
    let out = ok(&["lab", "up", "--prefix", p, "--untrusted-rate", "50mbit"]);
    assert!(out.contains("already up"), "{out}");

    let st: serde_json::Value =
        serde_json::from_str(&ok(&["lab", "status", "--prefix", p, "--json"])).unwrap();
    assert_eq!(st["up"], true);
    assert_eq!(st["links"][1]["link"], "untrusted");
    assert_eq!(st["links"][1]["rate"], 50_000_000);
    assert_eq!(st["links"][1]["edge_addr"], "198.18.2.2/24");
    assert_eq!(st["mptcp"]["pm"], "kernel");

    // exec: output and exit status of the command inside the host
    let out = ok(&[
        "lab", "exec", "--prefix", p, "server", "--", "ip", "-4", "-o", "addr", "show", "dev",
        "eth0",
    ]);
    assert!(out.contains("198.18.3.2/24"), "{out}");
    let out = nena(&[
        "lab", "exec", "--prefix", p, "client", "--", "sh", "-c", "exit 5",
    ]);
    assert_eq!(out.status.code(), Some(5));

    // set: down/up and rates
    ok(&["lab", "set", "--prefix", p, "untrusted", "--down"]);
    let st: serde_json::Value =
        serde_json::from_str(&ok(&["lab", "status", "--prefix", p, "--json"])).unwrap();
    assert_eq!(st["links"][1]["up"], false);
    ok(&[
        "lab",
        "set",
        "--prefix",
        p,
        "untrusted",
        "--up",
        "--no-rate",
    ]);
    let st: serde_json::Value =
        serde_json::from_str(&ok(&["lab", "status", "--prefix", p, "--json"])).unwrap();
    assert_eq!(st["links"][1]["up"], true);
    assert_eq!(st["links"][1]["rate"], serde_json::Value::Null);

    // the attacker's view of the untrusted link: a plain transfer leaks the file ...
    let lab = Lab::open(p).unwrap();
    let file = file_like_the_papers();
    let known = d.dir.join("refs.txt");
    std::fs::write(&known, &file).unwrap();
    let pcap = d.dir.join("untrusted.pcap");
    let pid: u32 = ok(&[
        "lab",
        "capture",
        "--prefix",
        p,
        "untrusted",
        pcap.to_str().unwrap(),
        "--background",
    ])
    .trim()
    .parse()
    .unwrap();
    let st: serde_json::Value =
        serde_json::from_str(&ok(&["lab", "status", "--prefix", p, "--json"])).unwrap();
    assert_eq!(st["captures"][0]["pid"], pid);
    assert_eq!(send(&lab, Link::Untrusted, &file), file);
    // ... while what crosses the trusted link is not on this capture
    let secret = b"this line only ever crosses the trusted link, 0123456789".repeat(20);
    assert_eq!(send(&lab, Link::Trusted, &secret), secret);
    let out = ok(&["lab", "capture-stop", "--prefix", p]);
    assert!(out.contains(&format!("stopped capture {pid}")), "{out}");

    let v: serde_json::Value = serde_json::from_str(&ok(&[
        "eavesdrop",
        pcap.to_str().unwrap(),
        "--known",
        known.to_str().unwrap(),
        "--json",
    ]))
    .unwrap();
    assert_eq!(
        v["known"]["runs_found"], v["known"]["runs_checked"],
        "{}",
        v["known"]
    );
    assert!(v["flows"].as_array().unwrap().iter().all(|f| f["src"]
        .as_str()
        .unwrap()
        .starts_with("198.18.2.2")
        || f["dst"].as_str().unwrap().starts_with("198.18.2.2")));
    let secret_file = d.dir.join("secret");
    std::fs::write(&secret_file, &secret).unwrap();
    let out = ok(&[
        "eavesdrop",
        pcap.to_str().unwrap(),
        "--known",
        secret_file.to_str().unwrap(),
        "--summary",
    ]);
    assert!(
        out.contains("no 16-byte run of the known file appears"),
        "{out}"
    );

    // a foreground capture with a packet count returns by itself
    let pcap2 = d.dir.join("trusted.pcap");
    let lab2 = lab.clone();
    // send until the capture has returned: tcpdump may take a while to start on a busy host,
    // and what is sent before it listens is not captured
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let done2 = done.clone();
    let sender = std::thread::spawn(move || {
        let start = std::time::Instant::now();
        while !done2.load(std::sync::atomic::Ordering::Relaxed)
            && start.elapsed() < Duration::from_secs(20)
        {
            // sleep: pacing, one message per 300 ms until the capture has counted enough
            std::thread::sleep(Duration::from_millis(300));
            assert_eq!(send(&lab2, Link::Trusted, b"count me"), b"count me");
        }
    });
    let out = nena(&[
        "lab",
        "capture",
        "--prefix",
        p,
        "trusted",
        pcap2.to_str().unwrap(),
        "--count",
        "3",
        "--seconds",
        "20",
    ]);
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("3 packets captured"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    sender.join().unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&ok(&["eavesdrop", pcap2.to_str().unwrap(), "--json"])).unwrap();
    assert_eq!(v["frames"], 3);

    // down removes everything
    let out = ok(&["lab", "down", "--prefix", p]);
    assert!(out.contains("is down"));
    assert!(namespaces_of(p).is_empty());
    assert!(!nena_lab::state_dir(p).exists());
    let st: serde_json::Value =
        serde_json::from_str(&ok(&["lab", "status", "--prefix", p, "--json"])).unwrap();
    assert_eq!(
        (st["up"].clone(), st["partial"].clone()),
        (serde_json::json!(false), serde_json::json!(false))
    );
    ok(&["lab", "down", "--prefix", p]);
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn down_after_a_crash_during_up() {
    for delay_ms in [10u64, 40, 120] {
        let d = Down::new();
        let p = d.prefix.as_str();
        let mut child = Command::new(env!("CARGO_BIN_EXE_nena"))
            .args(["lab", "up", "--prefix", p])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // sleep: the crash comes `delay_ms` into `lab up`, at a different step each time
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill(); // SIGKILL: no cleanup of its own
        let _ = child.wait();
        let t = Instant::now();
        ok(&["lab", "down", "--prefix", p]);
        assert!(
            namespaces_of(p).is_empty(),
            "after a kill at {delay_ms} ms: {:?}",
            namespaces_of(p)
        );
        assert!(!nena_lab::state_dir(p).exists());
        assert!(t.elapsed() < Duration::from_secs(10));
        // and a fresh up works on the same prefix
        ok(&["lab", "up", "--prefix", p]);
        ok(&["lab", "down", "--prefix", p]);
        assert!(namespaces_of(p).is_empty());
    }
}

#[test]
fn bad_input_and_missing_labs() {
    let out = nena(&["lab", "up", "--prefix", "x", "--trusted-rate", "10furlongs"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid rate"));
    let out = nena(&["lab", "set", "--prefix", "x", "untrusted"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a set without a change is a usage error"
    );
    let out = nena(&["lab", "set", "--prefix", "x", "wlan", "--down"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown link"));
    let out = nena(&[
        "lab",
        "exec",
        "--prefix",
        "ncnothere",
        "client",
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.starts_with("nena: lab `ncnothere` is not up"), "{err}");
    let out = nena(&["lab", "up", "--prefix", "bad prefix"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid lab prefix"));
}

/// `nena lab up --servers 3`: the fleet's hosts, its balancer in `status` (text and JSON),
/// `fleet N --out/--in`, bad fleet input, and `down` removing the fleet's namespaces too.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn a_fleet_comes_up_is_drained_and_goes_down() {
    let g = Down::new();
    let p = g.prefix.as_str();
    let text = ok(&["lab", "up", "--prefix", p, "--servers", "3", "--no-verify"]);
    assert!(text.contains("fleet: 3 servers share 198.18.4.2"), "{text}");
    assert!(text.contains("joins at 198.18.4.2:4462"), "{text}");
    for i in 1..=3 {
        assert!(
            namespaces_of(p).contains(&format!("{p}-s{i}")),
            "{:?}",
            namespaces_of(p)
        );
    }
    // The router's balancer, as loaded.
    let rules = || {
        ok(&[
            "lab",
            "exec",
            "--prefix",
            p,
            "router",
            "--",
            "nft",
            "list",
            "table",
            "ip",
            "nena_fleet",
        ])
    };
    let loaded = rules();
    assert!(
        loaded.contains("jhash ip saddr . tcp sport . ip daddr . tcp dport mod 3"),
        "{loaded}"
    );

    let said = ok(&["lab", "fleet", "--prefix", p, "2", "--out"]);
    assert!(said.contains("s2 is out of the balancer"), "{said}");
    let st: serde_json::Value =
        serde_json::from_str(&ok(&["lab", "status", "--prefix", p, "--json"])).unwrap();
    let members: Vec<bool> = st["fleet"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["member"].as_bool().unwrap())
        .collect();
    assert_eq!(members, [true, false, true], "{st}");
    let loaded = rules();
    assert!(
        loaded.contains("mod 2 seed 0x6e656e61 map { 0 : 0x00000001, 1 : 0x00000003 }"),
        "{loaded}"
    );
    ok(&["lab", "fleet", "--prefix", p, "2", "--in"]);
    assert!(ok(&["lab", "status", "--prefix", p]).contains("s2  netns"));

    // Bad input: one line, status 2 (usage) or 1 (no such server).
    let out = nena(&["lab", "up", "--prefix", p, "--servers", "9"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--servers"));
    let out = nena(&["lab", "fleet", "--prefix", p, "4", "--out"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no fleet server 4"));
    let out = nena(&["lab", "fleet", "--prefix", p, "1"]);
    assert_eq!(out.status.code(), Some(2), "--out or --in is required");

    // Back to one server: the fleet goes; then down leaves nothing.
    ok(&["lab", "up", "--prefix", p, "--no-verify"]);
    let fleet_ns = |n: &String| {
        n.strip_prefix(&format!("{p}-s"))
            .is_some_and(|i| i.parse::<u8>().is_ok())
    };
    assert!(
        !namespaces_of(p).iter().any(fleet_ns),
        "{:?}",
        namespaces_of(p)
    );
    ok(&["lab", "up", "--prefix", p, "--servers", "2", "--no-verify"]);
    ok(&["lab", "down", "--prefix", p]);
    assert!(namespaces_of(p).is_empty(), "{:?}", namespaces_of(p));
}

/// `nena lab up --lan`: the LAN host `<prefix>-lan` (checked by `up` itself: a TCP connection
/// from it to the client, IPv4 and IPv6), `exec lan`, `status` (text and JSON), `up` without
/// `--lan` removing it, and `down` leaving no namespace.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn a_lan_host_comes_up_behind_the_client_and_goes_down() {
    let g = Down::new();
    let p = g.prefix.as_str();
    let text = ok(&["lab", "up", "--prefix", p, "--lan"]);
    assert!(
        text.contains(
            "lan       client lan 198.18.5.1/24 2001:2:0:5::1/64 <-> lan eth0 198.18.5.2/24 \
             2001:2:0:5::2/64  dual  up"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "default via 198.18.5.1 and 2001:2:0:5::1  (client forwarding: ipv4 off, ipv6 off)"
        ),
        "{text}"
    );
    assert!(namespaces_of(p).contains(&format!("{p}-lan")));
    let exec = |args: &[&str]| {
        let mut a = vec!["lab", "exec", "--prefix", p, "lan", "--"];
        a.extend_from_slice(args);
        ok(&a)
    };
    let r6 = exec(&["ip", "-6", "route", "show", "default"]);
    assert!(r6.contains("default via 2001:2:0:5::1 dev eth0"), "{r6}");
    let r4 = exec(&["ip", "-4", "route", "show", "default"]);
    assert!(r4.contains("default via 198.18.5.1 dev eth0"), "{r4}");
    // running it again reconciles, harmlessly
    ok(&["lab", "up", "--prefix", p, "--lan"]);
    let st: serde_json::Value =
        serde_json::from_str(&ok(&["lab", "status", "--prefix", p, "--json"])).unwrap();
    assert_eq!(st["up"], true, "{st}");
    assert_eq!(st["lan"]["netns"], format!("{p}-lan"), "{st}");
    assert_eq!(
        st["lan"]["addrs"],
        serde_json::json!(["198.18.5.2/24", "2001:2:0:5::2/64"]),
        "{st}"
    );
    assert_eq!(st["lan"]["gateway6"], "2001:2:0:5::1", "{st}");
    assert_eq!(st["lan"]["client_ip_forward"], false, "{st}");
    let lan_link = st["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["link"] == "lan")
        .unwrap_or_else(|| panic!("no lan link in {st}"));
    assert_eq!(lan_link["up"], true, "{st}");

    // without --lan the LAN host goes, and `exec lan` says how to get it back
    ok(&["lab", "up", "--prefix", p]);
    assert!(!namespaces_of(p).contains(&format!("{p}-lan")));
    let out = nena(&["lab", "exec", "--prefix", p, "lan", "--", "true"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("has no LAN host") && err.contains("--lan"),
        "{err}"
    );

    ok(&["lab", "up", "--prefix", p, "--lan", "--no-verify"]);
    ok(&["lab", "down", "--prefix", p]);
    assert!(namespaces_of(p).is_empty(), "{:?}", namespaces_of(p));
}
