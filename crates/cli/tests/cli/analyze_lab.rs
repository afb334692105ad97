//! `nena analyze` against tshark on captures of a real nena transfer in the lab (root): a
//! file sent over both paths while the untrusted link goes down for 1.5 s and comes back.
//! Per subflow and direction the payload bytes equal tshark's sum of `tcp.len` per
//! `tcp.stream`; RTT medians are within 10% of tshark's `tcp.analysis.ack_rtt`; the data the
//! untrusted subflow had in flight is found reinjected on the trusted one, and the untrusted
//! subflow's outage is reported.

use crate::harness::*;
use nena_lab::{Host, Link, Rate};
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn analyze(caps: &[&Path]) -> Value {
    let mut args = vec!["analyze".to_string(), "--json".into()];
    args.extend(caps.iter().map(|p| p.display().to_string()));
    let out = Command::new(NENA).args(&args).output().unwrap();
    assert!(
        out.status.success(),
        "nena {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// tshark's view: per (src, dst) the sum of `tcp.len`, and the `ack_rtt` samples (ms) of
/// the ACKs going the other way (i.e. of the data sent src -> dst). Karn's rule is applied
/// to tshark's samples as nena applies it: an ACK of a frame tshark flags as a
/// retransmission gives no sample (tshark itself times those from the retransmission).
struct Shark {
    bytes: HashMap<(String, String), u64>,
    rtt: HashMap<(String, String), Vec<f64>>,
    streams: usize,
}

fn tshark(cap: &Path) -> Shark {
    let fields = [
        "frame.number",
        "tcp.stream",
        "ip.src",
        "tcp.srcport",
        "ip.dst",
        "tcp.dstport",
        "tcp.len",
        "tcp.analysis.retransmission",
        "tcp.analysis.fast_retransmission",
        "tcp.analysis.spurious_retransmission",
        "tcp.analysis.acks_frame",
        "tcp.analysis.ack_rtt",
    ];
    let mut cmd = Command::new("tshark");
    cmd.args(["-n", "-r"])
        .arg(cap)
        // An ICMP error quoting a TCP header (the untrusted link goes down in this test)
        // also matches `tcp`, with two ip.src; it is not a segment of any subflow.
        .args(["-Y", "tcp && !icmp", "-T", "fields", "-E", "separator=,"])
        .args(["-E", "occurrence=f"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd
        .output()
        .expect("tshark (scripts/install-deps.sh installs it)");
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut s = Shark {
        bytes: HashMap::new(),
        rtt: HashMap::new(),
        streams: 0,
    };
    let mut streams = std::collections::HashSet::new();
    let mut retransmitted = std::collections::HashSet::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), fields.len(), "tshark line {line:?}");
        streams.insert(f[1].to_string());
        if f[7..10].iter().any(|x| !x.is_empty()) {
            retransmitted.insert(f[0].to_string());
        }
        let src = format!("{}:{}", f[2], f[3]);
        let dst = format!("{}:{}", f[4], f[5]);
        *s.bytes.entry((src.clone(), dst.clone())).or_default() += f[6].parse::<u64>().unwrap();
        if !f[11].is_empty() && !retransmitted.contains(f[10]) {
            // An ACK from src to dst times data sent dst -> src.
            s.rtt
                .entry((dst, src))
                .or_default()
                .push(f[11].parse::<f64>().unwrap() * 1000.0);
        }
    }
    s.streams = streams.len();
    s
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Compares one capture's analysis with tshark's; returns how many RTT medians were compared.
fn compare(cap: &Path) -> usize {
    let a = analyze(&[cap]);
    let sh = tshark(cap);
    let mut ours: HashMap<(String, String), u64> = HashMap::new();
    let mut compared = 0;
    let mut subflows = 0;
    for c in a["connections"].as_array().unwrap() {
        for s in c["subflows"].as_array().unwrap() {
            subflows += 1;
            let (src, dst) = (
                s["src"].as_str().unwrap().to_string(),
                s["dst"].as_str().unwrap().to_string(),
            );
            for (d, key) in [("c2s", (src.clone(), dst.clone())), ("s2c", (dst, src))] {
                ours.insert(key.clone(), s["payload_bytes"][d].as_u64().unwrap());
                let n = s["rtt"][d]["samples"].as_u64().unwrap();
                let theirs = sh.rtt.get(&key).map(|v| v.len()).unwrap_or(0);
                if n >= 30 && theirs >= 30 {
                    let mine = s["rtt"][d]["median_ms"].as_f64().unwrap();
                    let t = median(&mut sh.rtt[&key].clone());
                    assert!(
                        (mine - t).abs() <= 0.10 * t,
                        "{}: {key:?}: RTT median {mine:.3} ms, tshark {t:.3} ms ({n} / {theirs} samples)",
                        cap.display()
                    );
                    compared += 1;
                }
            }
        }
    }
    assert_eq!(subflows, sh.streams, "{}: TCP connections", cap.display());
    // Every direction tshark saw, with the same byte count (zero-byte ones included).
    for (k, &b) in &sh.bytes {
        assert_eq!(
            ours.get(k).copied(),
            Some(b),
            "{}: payload bytes {k:?}",
            cap.display()
        );
    }
    compared
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn analyze_matches_tshark_and_finds_the_forced_reinjections() {
    // 2 x 20 Mbit/s: 12 MiB take about 2.5 s over both paths, longer with one down.
    let lab = lab_with(|c| {
        c.trusted_rate = Some(Rate::mbit(20));
        c.untrusted_rate = Some(Rate::mbit(20));
    });
    let srv = TempDir::new("anasrv");
    let dir = TempDir::new("ana");
    let _s = serve(&lab, 7000, srv.path(), &[]);
    let data = random(12 << 20, 11);
    let src = dir.join("big");
    std::fs::write(&src, &data).unwrap();
    let (cap_t, cap_u, cap_s) = (
        dir.join("trusted.pcap"),
        dir.join("untrusted.pcap"),
        dir.join("server.pcap"),
    );
    let ct = lab.capture(Link::Trusted, &cap_t).unwrap();
    let cu = lab.capture(Link::Untrusted, &cap_u).unwrap();
    let cs = lab.capture(Link::Server, &cap_s).unwrap();
    let src_s = src.display().to_string();
    let to = server(&lab, 7000);
    let mut args = vec!["send", &src_s, "--to", &to, "--json", "--timeout", "20"];
    args.extend_from_slice(&PATHS);
    let mut cmd = lab.command(Host::Client, NENA, &args);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    // The untrusted path carries the transfer (1 MiB of the 12 acknowledged on it) before
    // its link goes down for 1.5 s.
    nena_testkit::wait_until(
        "1 MiB acknowledged on the untrusted subflow (198.18.2.2)",
        Duration::from_secs(10),
        || {
            acked_from(&lab, "198.18.2.2", 7000) >= 1 << 20
                || matches!(child.try_wait(), Ok(Some(_)))
        },
    );
    assert!(
        child.try_wait().unwrap().is_none(),
        "the transfer ended before the link went down"
    );
    lab.set_link(Link::Untrusted, false).unwrap();
    // sleep: the outage itself, 1.5 s without the link.
    std::thread::sleep(Duration::from_millis(1500));
    lab.set_link(Link::Untrusted, true).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "transfer: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(srv.join("big")).unwrap(), data);
    ct.stop().unwrap();
    cu.stop().unwrap();
    cs.stop().unwrap();

    // Each capture alone against tshark.
    let mut compared = 0;
    for cap in [&cap_t, &cap_u, &cap_s] {
        compared += compare(cap);
    }
    assert!(
        compared >= 3,
        "only {compared} RTT medians could be compared"
    );

    // The two client links merged: one MPTCP connection whose subflows carried the file.
    let a = analyze(&[&cap_t, &cap_u]);
    let conns: Vec<&Value> = a["connections"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["mptcp"] == true && c["payload_bytes"]["c2s"].as_u64().unwrap() > 0)
        .collect();
    assert_eq!(conns.len(), 1, "{a:#}");
    let c = conns[0];
    let subs = c["subflows"].as_array().unwrap();
    assert!(subs.len() >= 2, "{c:#}");
    let on = |addr: &str| {
        subs.iter()
            .filter(|s| s["src"].as_str().unwrap().starts_with(addr))
            .map(|s| s["payload_bytes"]["c2s"].as_u64().unwrap())
            .sum::<u64>()
    };
    let (t, u) = (on("198.18.1.2:"), on("198.18.2.2:"));
    assert!(t > 1 << 20 && u > 1 << 20, "trusted {t} B, untrusted {u} B");
    assert!(
        t + u >= data.len() as u64,
        "the subflows carried {} B of a {} B file",
        t + u,
        data.len()
    );
    let dd = &c["data"]["c2s"];
    assert!(
        dd["bytes_covered"].as_u64().unwrap() >= data.len() as u64,
        "{dd:#}"
    );
    assert_eq!(dd["holes"], 0, "{dd:#}");
    // Reinjected: the same DSNs on both subflows. (The data stranded on the untrusted
    // subflow is mostly dropped before the capture point when the link goes down; the
    // captures then show it on the trusted subflow first and on the untrusted one again
    // when that subflow retransmits after the link is back.)
    let untrusted_ix: Vec<u64> = subs
        .iter()
        .enumerate()
        .filter(|(_, s)| s["src"].as_str().unwrap().starts_with("198.18.2.2:"))
        .map(|(i, _)| i as u64)
        .collect();
    let moved: u64 = dd["reinjections"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            untrusted_ix.contains(&r["from"].as_u64().unwrap())
                != untrusted_ix.contains(&r["to"].as_u64().unwrap())
        })
        .map(|r| r["bytes"].as_u64().unwrap())
        .sum();
    assert!(
        moved > 0,
        "no reinjection between the untrusted and the trusted subflow: {dd:#}"
    );
    // The untrusted subflow fell silent with data outstanding while its link was down.
    let outages: Vec<&Value> = subs
        .iter()
        .filter(|s| s["src"].as_str().unwrap().starts_with("198.18.2.2:"))
        .flat_map(|s| s["outages"].as_array().unwrap())
        .filter(|o| o["direction"] == "c2s")
        .collect();
    assert!(
        outages
            .iter()
            .any(|o| o["duration"].as_f64().is_none_or(|d| d >= 1.0)),
        "no outage of about 1.5 s on the untrusted subflow: {outages:?}"
    );
    assert!(
        outages.iter().any(|o| o["recovery"].as_f64().is_some()),
        "no recovery time: {outages:?}"
    );
}
