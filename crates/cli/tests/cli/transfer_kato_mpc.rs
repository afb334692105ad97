//! `--mode kato-mpc`, the papers' own negotiation, in the lab (root, BPF): byte-exact
//! transfers scrambled from the first data byte with the MPTCP keys; the request (RFC 6994
//! option) on the trusted SYN and the consent on the SYN-ACK, decoded by tshark with
//! MP_CAPABLE valid and no malformed packet or MPTCP expert warning; no nena hello byte and
//! no 16-byte plaintext run on the untrusted link; each direction scrambled with its
//! sender's MPTCP key (different per direction and per connection: found in the capture);
//! without the server's or the client's programs, or with the consent removed on the trusted
//! path by a box there (`tc_mpc_strip` on the router), both sides refuse, and nothing of the
//! text crosses either link; with --allow-plain on both, plain on both sides, said so; a SYN
//! flood toward the server during connections that wait in its accept queue does not cost a
//! connection its keys; the server's table of completed handshakes, filled, neither refuses
//! a legitimate connection nor grows, and its stale records are swept; the programs are
//! gone when the tools exit (also on SIGTERM).
mod kato_mpc_fail_closed;
mod kato_mpc_state;

use crate::harness::*;
use nena_lab::{Host, Link};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

fn run_json(lab: &nena_lab::Lab, args: &[&str]) -> (serde_json::Value, String) {
    let out = client(lab, args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "nena {args:?}: {err}");
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    (v, err)
}

fn tshark(cap: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("tshark")
        .arg("-r")
        .arg(cap)
        .args(args)
        .stderr(Stdio::null())
        .output()
        .expect("tshark");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The MPTCP keys of each connection in a capture, from the MP_CAPABLE of its third ACK
/// (sender = client): (client key, server key) as on the wire.
fn keys(cap: &Path) -> Vec<([u8; 8], [u8; 8])> {
    let t = tshark(
        cap,
        &[
            "-Y",
            "tcp.options.mptcp.recvkey && tcp.flags.syn==0",
            "-T",
            "fields",
            "-e",
            "tcp.stream",
            "-e",
            "tcp.options.mptcp.sendkey",
            "-e",
            "tcp.options.mptcp.recvkey",
        ],
    );
    let mut out: Vec<(String, [u8; 8], [u8; 8])> = Vec::new();
    for l in t.lines() {
        let f: Vec<&str> = l.split('\t').collect();
        if f.len() < 3 {
            continue;
        }
        let k = |s: &str| -> [u8; 8] {
            // tshark prints the 64-bit key in decimal (hex with a 0x prefix in other versions)
            let s = s.split(',').next().unwrap();
            match s.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16),
                None => s.parse::<u64>(),
            }
            .unwrap_or_else(|e| panic!("key {s:?}: {e}"))
            .to_be_bytes()
        };
        if !out.iter().any(|(s, _, _)| s == f[0]) {
            out.push((f[0].to_string(), k(f[1]), k(f[2])));
        }
    }
    out.into_iter().map(|(_, c, s)| (c, s)).collect()
}

fn scrambled(key: [u8; 8], plain: &[u8]) -> Vec<u8> {
    let mut b = plain.to_vec();
    nena_codec::Scrambler::new(key).scramble_in_place(&mut b);
    b
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Whether nena's mpc programs are on any interface of `host` (tc filters by name).
fn programs_in(lab: &nena_lab::Lab, host: Host) -> String {
    let out = lab
        .command(
            host,
            "sh",
            [
                "-c",
                "for d in $(ls /sys/class/net); do tc filter show dev $d egress; tc filter show dev $d ingress; done 2>/dev/null",
            ],
        )
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("tc_mpc"))
        .map(str::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn kato_mpc_transfers_are_scrambled_from_the_first_byte_with_the_mptcp_keys() {
    let lab = lab();
    let srv = TempDir::new("mpc");
    let cli = TempDir::new("mpcc");
    let s = serve(&lab, 7200, srv.path(), &["--mode", "kato-mpc"]);
    assert!(
        programs_in(&lab, Host::Server).contains("tc_mpc"),
        "serve attached its programs"
    );
    let to = server(&lab, 7200);
    let known = cli.join("known.txt");
    // Random bytes, not text: kato sends a string that repeats 64 bytes later XORed with
    // one constant byte, in clear when that byte is 0 (docs/THREAT-MODEL.md, kato-mpc),
    // which the generated text of `text()` does now and then over megabytes; this test is
    // about the negotiation, not that known weakness.
    let file = random(2_000_000, 7);
    std::fs::write(&known, &file).unwrap();
    std::fs::copy(&known, srv.join("served.txt")).unwrap();
    let cap_u = cli.join("untrusted.pcap");
    let cap_t = cli.join("trusted.pcap");
    let cu = lab.capture(Link::Untrusted, &cap_u).unwrap();
    let ct = lab.capture(Link::Trusted, &cap_t).unwrap();

    let known_s = known.display().to_string();
    let mut a = vec!["send", &known_s, "--name", "up.txt", "--to", &to, "--json"];
    a.extend_from_slice(&["--mode", "kato-mpc"]);
    a.extend_from_slice(&PATHS);
    let (up, up_err) = run_json(&lab, &a);
    let out = cli.join("down.txt").display().to_string();
    let mut a = vec!["get", "served.txt", "--out", &out, "--from", &to, "--json"];
    a.extend_from_slice(&["--mode", "kato-mpc"]);
    a.extend_from_slice(&PATHS);
    let (down, _) = run_json(&lab, &a);
    cu.stop().unwrap();
    ct.stop().unwrap();

    // Byte-exact both ways, in kato-mpc, said so.
    assert_eq!(std::fs::read(srv.join("up.txt")).unwrap(), file);
    assert_eq!(std::fs::read(&out).unwrap(), file);
    for r in [&up, &down] {
        assert_eq!(r["mode"], "kato-mpc", "{r}");
        assert_eq!(r["kato_mpc"]["scrambled"], true, "{r}");
    }
    assert!(!up_err.contains("not negotiated"), "{up_err}");
    s.wait_stderr("kato-mpc", Duration::from_secs(5));
    assert!(!s.stderr().contains("not negotiated"), "{}", s.stderr());

    // The request on the trusted SYN and the consent on the SYN-ACK (RFC 6994, ExID "NE"),
    // MP_CAPABLE decoded, nothing malformed, no MPTCP expert warning.
    let syns = tshark(
        &cap_t,
        &[
            "-Y",
            "tcp.flags.syn==1 && tcp.options.experimental.exid == 0x4e45 && tcp.options.mptcp.subtype == 0",
            "-T",
            "fields",
            "-e",
            "tcp.flags.ack",
        ],
    );
    let (n_syn, n_synack) = syns.lines().fold((0, 0), |(a, b), l| {
        if l.trim() == "0" || l.trim() == "False" {
            (a + 1, b)
        } else {
            (a, b + 1)
        }
    });
    assert!(
        n_syn >= 2 && n_synack >= 2,
        "marked SYN {n_syn}, SYN-ACK {n_synack}:\n{syns}"
    );
    let v = tshark(&cap_t, &["-V", "-Y", "tcp.flags.syn==1"]);
    assert!(v.contains("Multipath Capable"), "{v}");
    assert!(!v.contains("Malformed"), "{v}");
    for cap in [&cap_t, &cap_u] {
        let e = tshark(cap, &["-q", "-z", "expert,warn"]);
        assert!(!e.to_lowercase().contains("malformed"), "{e}");
        assert!(!e.contains("MPTCP"), "{e}");
        assert!(!e.contains("mptcp"), "{e}");
    }

    // No nena hello and no plaintext run on the untrusted link, which did carry data.
    let raw_u = std::fs::read(&cap_u).unwrap();
    let raw_t = std::fs::read(&cap_t).unwrap();
    for raw in [&raw_u, &raw_t] {
        assert!(
            !contains(raw, &nena_proto::wire::MAGIC),
            "a nena hello on a link"
        );
        assert!(
            !contains(raw, &nena_transport::wire::MAGIC),
            "a request in clear"
        );
    }
    let eu = {
        let o = std::process::Command::new(NENA)
            .args(["eavesdrop", cap_u.to_str().unwrap(), "--known"])
            .arg(&known)
            .arg("--json")
            .output()
            .unwrap();
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    assert!(
        eu["payload_bytes"].as_u64().unwrap() > 50_000,
        "the untrusted link carried little: {}; paths: {} / {}",
        eu["payload_bytes"],
        up["paths"],
        down["paths"]
    );
    assert_eq!(eu["known"]["runs_found"], 0, "{}", eu["known"]);
    // The MPTCP keys (the scrambling keys) never cross the untrusted link.
    for f in eu["flows"].as_array().unwrap() {
        assert!(
            f["mptcp_keys"].as_array().unwrap().is_empty(),
            "MPTCP key on the untrusted link: {f}"
        );
    }

    // Each direction scrambled with its sender's MPTCP key, from the first byte: the
    // client's first message under the client's key, the server's first under the
    // server's; four different keys over the two connections.
    let ks = keys(&cap_t);
    assert_eq!(ks.len(), 2, "{ks:02x?}");
    let mut all: Vec<[u8; 8]> = ks.iter().flat_map(|(c, s)| [*c, *s]).collect();
    all.sort();
    all.dedup();
    assert_eq!(
        all.len(),
        4,
        "the keys differ per direction and per connection"
    );
    use nena_transport::wire::{Reply, Request};
    let size = file.len() as u64;
    let firsts: [(Vec<u8>, Vec<u8>); 2] = [
        (
            Request::Put {
                name: "up.txt".into(),
                size,
            }
            .encode(),
            Reply::ok(0).encode(),
        ),
        (
            Request::Get {
                name: "served.txt".into(),
            }
            .encode(),
            Reply::ok(size).encode(),
        ),
    ];
    let raw = [raw_t.as_slice(), raw_u.as_slice()].concat();
    // (The server's first message of the upload, Reply::ok(0), is mostly zero bytes, which
    // kato turns into a run of one repeated byte: too weak a needle. Its request, and both
    // messages of the download, are not.)
    let (put, _) = &firsts[0];
    let (get, get_reply) = &firsts[1];
    // Within the first 56 bytes kato's output depends on the key only through the XOR of
    // its eight bytes (the window holds the whole key there), so a message this short comes
    // out the same under two keys whose bytes XOR alike (1 in 256 pairs): the check that the
    // wrong key does not produce it means something only where the folds differ.
    let fold = |k: &[u8; 8]| k.iter().fold(0u8, |a, b| a ^ b);
    let mut found = [false; 2];
    for (kc, kserv) in &ks {
        let tells = fold(kc) != fold(kserv);
        if contains(&raw, &scrambled(*kc, put)) {
            found[0] = true;
            assert!(!tells || !contains(&raw, &scrambled(*kserv, put)));
        }
        if contains(&raw, &scrambled(*kc, get)) {
            found[1] = true;
            assert!(!tells || !contains(&raw, &scrambled(*kserv, get)));
            assert!(
                contains(&raw, &scrambled(*kserv, get_reply)),
                "the download's reply under the server's key"
            );
            // (Not checked since application protocol 2: the reply's needle under the
            // client's key, mostly one repeated byte, was found at a segment start in the
            // capture; the positive check above shows the reply under the server's key.)
        }
    }
    assert_eq!(
        found,
        [true, true],
        "each request scrambled with its connection's client key"
    );

    // perf both ways, every byte verified; a mode list with kato-mpc in it is refused.
    let mut a = vec!["perf", "--to", &to, "--bytes", "2M", "--bidir", "--json"];
    a.extend_from_slice(&["--mode", "kato-mpc", "--interval", "0"]);
    a.extend_from_slice(&PATHS);
    let (p, _) = run_json(&lab, &a);
    assert_eq!(p["mode"], "kato-mpc", "{p}");
    assert_eq!(p["verified"], true, "{p}");
    assert_eq!(p["received"], 2 << 20, "{p}");
    let mut a = vec![
        "perf",
        "--to",
        &to,
        "--bytes",
        "1M",
        "--mode",
        "kato,kato-mpc",
    ];
    a.extend_from_slice(&PATHS);
    let o = client(&lab, &a);
    assert_eq!(o.status.code(), Some(2), "usage error");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("cannot be combined"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn kato_mpc_without_the_servers_programs_is_refused_unless_both_allow_plain() {
    let lab = lab();
    let srv = TempDir::new("mpcn");
    let cli = TempDir::new("mpcnc");
    // A server without the programs never agrees; it serves plain only with --allow-plain.
    let s = serve(
        &lab,
        7201,
        srv.path(),
        &["--mode", "kato-mpc", "--debug-mpc-off", "--allow-plain"],
    );
    assert_eq!(programs_in(&lab, Host::Server), "", "nothing attached");
    let to = server(&lab, 7201);
    let known = cli.join("k.txt");
    let file = text(100_000, 8);
    std::fs::write(&known, &file).unwrap();
    let known_s = known.display().to_string();
    let mut a = vec![
        "send", &known_s, "--to", &to, "--json", "--mode", "kato-mpc",
    ];
    a.extend_from_slice(&PATHS);
    // By default the client refuses: one line, non-zero exit, nothing stored.
    let o = client(&lab, &a);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("kato-mpc refused: the server did not agree"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(!srv.join("k.txt").exists(), "nothing stored");
    // With --allow-plain: plain on both sides, said so.
    a.push("--allow-plain");
    let (r, err) = run_json(&lab, &a);
    // Byte-exact: the server did not descramble what the client sent in clear.
    assert_eq!(std::fs::read(srv.join("k.txt")).unwrap(), file);
    assert_eq!(r["mode"], "plain", "{r}");
    assert_eq!(r["kato_mpc"]["scrambled"], false, "{r}");
    assert!(
        r["kato_mpc"]["plain_because"]
            .as_str()
            .unwrap()
            .contains("server did not agree"),
        "{r}"
    );
    assert_eq!(
        err.matches("kato-mpc not negotiated").count(),
        1,
        "one line on stderr: {err}"
    );
    s.wait_stderr("kato-mpc not negotiated", Duration::from_secs(5));
    // The client's programs are gone with it.
    assert_eq!(programs_in(&lab, Host::Client), "");
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn kato_mpc_without_the_clients_programs_is_refused_by_the_server_and_serve_cleans_up() {
    let lab = lab();
    let srv = TempDir::new("mpcx");
    let cli = TempDir::new("mpcxc");
    let mut s = serve(&lab, 7202, srv.path(), &["--mode", "kato-mpc"]);
    let to = server(&lab, 7202);
    std::fs::write(srv.join("f.txt"), text(100_000, 9)).unwrap();
    let out = cli.join("f.txt").display().to_string();
    // A client that does not ask (and allows plain on its side): the server, which does
    // not allow plain, closes the connection unread and says why.
    let mut a = vec![
        "get",
        "f.txt",
        "--out",
        &out,
        "--from",
        &to,
        "--json",
        "--mode",
        "kato-mpc",
        "--debug-mpc-off",
        "--allow-plain",
    ];
    a.extend_from_slice(&PATHS);
    let o = client(&lab, &a);
    assert!(
        !o.status.success(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!Path::new(&out).exists(), "nothing received");
    s.wait_stderr(
        "kato-mpc refused: the client did not ask",
        Duration::from_secs(5),
    );
    // SIGTERM: serve stops and takes its programs with it.
    assert!(programs_in(&lab, Host::Server).contains("tc_mpc"));
    s.terminate();
    assert_eq!(
        programs_in(&lab, Host::Server),
        "",
        "programs left after SIGTERM"
    );
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn kato_mpc_through_the_proxies_echoes_byte_exact() {
    let lab = lab();
    let target: std::net::SocketAddr = "127.0.0.1:7210".parse().unwrap();
    let _echo = echo_server(&lab, target);
    let listen = server(&lab, 7211);
    let ps = spawn_listening(
        &lab,
        Host::Server,
        &[
            "-v",
            "proxy",
            "server",
            "--listen",
            &listen,
            "--forward",
            "127.0.0.1:7210",
            "--mode",
            "kato-mpc",
        ],
    );
    let mut args = vec![
        "proxy",
        "client",
        "--listen",
        "127.0.0.1:7212",
        "--to",
        &listen,
        "--mode",
        "kato-mpc",
    ];
    args.extend_from_slice(&PATHS);
    let pc = spawn_listening(&lab, Host::Client, &args);
    let entry: std::net::SocketAddr = "127.0.0.1:7212".parse().unwrap();
    let report = lab
        .run_in(Host::Client, move || {
            nena_transport::testing::load(entry, 20, 64 * 1024, Duration::from_secs(60))
        })
        .unwrap()
        .unwrap();
    assert_eq!(
        report.verified,
        20,
        "{report:?}\nproxy client: {}\nproxy server: {}",
        pc.stderr(),
        ps.stderr()
    );
    let log = ps.wait_stderr("mode kato-mpc", Duration::from_secs(5));
    assert!(!log.contains("not negotiated"), "{log}");
    assert!(!pc.stderr().contains("not negotiated"), "{}", pc.stderr());
}
