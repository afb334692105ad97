//! Server names on a laptop whose WLAN chooses the resolver (root): the client is routed as
//! a laptop (no source rules, the default route on the untrusted link), /etc/resolv.conf
//! names the WLAN's resolver (198.18.2.1, on the router's untrusted side), which answers
//! `srv.lab` with 198.18.3.3, where an attacker runs a nena server of its own reachable
//! through the trusted link. An honest resolver (198.18.1.1, the router's trusted side)
//! answers 198.18.3.2. Both links are captured: no query for the name may cross the
//! untrusted link, and the file must never reach the attacker's server: it is stored at
//! the right one, or refused with a message that names the resolver, the interface and the
//! fix. `nena run --via`, `nena proxy client --to` and `nena gateway --via` resolve a name
//! the same way. That a resolver lying after first contact cannot impersonate the server
//! (the pinned key decides) needs no kernel: crates/transport/tests/net_pinning.rs.

use crate::harness::*;
use nena_lab::{Host, Lab, Link};
use std::process::{Child, Stdio};
use std::time::Duration;

/// The name as it is written in a DNS message (`\x03srv\x03lab\x00`).
const WIRE_NAME: &[u8] = b"\x03srv\x03lab\x00";

/// The two resolvers on the router (dnsmasq) and the client's /etc/resolv.conf (the file
/// `ip netns exec` mounts over it); all removed on drop.
struct Resolvers {
    dnsmasq: Vec<Child>,
    netns_etc: std::path::PathBuf,
}

impl Drop for Resolvers {
    fn drop(&mut self) {
        for c in &mut self.dnsmasq {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.netns_etc);
    }
}

impl Resolvers {
    /// The honest resolver on 198.18.1.1, the WLAN's lying one on 198.18.2.1, and the
    /// client's resolv.conf naming `nameservers`.
    fn start(lab: &Lab, nameservers: &[&str]) -> Resolvers {
        Resolvers::answering(
            lab,
            nameservers,
            &[("198.18.1.1", "198.18.3.2"), ("198.18.2.1", "198.18.3.3")],
        )
    }

    /// Resolvers on the router that answer `srv.lab` with the address of each (listen,
    /// answer), and the client's resolv.conf naming `nameservers`.
    fn answering(lab: &Lab, nameservers: &[&str], answers: &[(&str, &str)]) -> Resolvers {
        let netns_etc = std::path::PathBuf::from("/etc/netns").join(lab.netns(Host::Client));
        let mut r = Resolvers {
            dnsmasq: Vec::new(),
            netns_etc,
        };
        r.set_resolv_conf(nameservers);
        for &(listen, answer) in answers {
            let child = lab
                .command(
                    Host::Router,
                    "dnsmasq",
                    [
                        "--keep-in-foreground",
                        "--conf-file=/dev/null",
                        "--no-resolv",
                        "--no-hosts",
                        "--bind-interfaces",
                        "--user=root",
                        "--pid-file=",
                        &format!("--listen-address={listen}"),
                        "--local=/lab/",
                        &format!("--address=/srv.lab/{answer}"),
                    ],
                )
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("dnsmasq (scripts/install-deps.sh installs dnsmasq-base)");
            r.dnsmasq.push(child);
            let want = format!("{listen}:53");
            nena_testkit::wait_for(
                &format!("dnsmasq listening on {want}"),
                Duration::from_secs(10),
                || {
                    sh(lab, Host::Router, "ss -Hunl")
                        .contains(&want)
                        .then_some(())
                },
            );
        }
        r
    }

    fn set_resolv_conf(&self, nameservers: &[&str]) {
        std::fs::create_dir_all(&self.netns_etc).unwrap();
        let text: String = nameservers
            .iter()
            .map(|n| format!("nameserver {n}\n"))
            .collect();
        std::fs::write(self.netns_etc.join("resolv.conf"), text).unwrap();
    }
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Stops both captures: no query for srv.lab on the untrusted link, and (so that the
/// check can fail) at least three on the trusted one.
fn queries_crossed_the_trusted_link_only(
    cu: nena_lab::Capture,
    ct: nena_lab::Capture,
    cap_u: &std::path::Path,
    cap_t: &std::path::Path,
) {
    cu.stop().unwrap();
    ct.stop().unwrap();
    let (u, t) = (std::fs::read(cap_u).unwrap(), std::fs::read(cap_t).unwrap());
    assert_eq!(
        count(&u, WIRE_NAME),
        0,
        "a query for srv.lab crossed the untrusted link"
    );
    assert!(count(&t, WIRE_NAME) >= 3, "no query on the trusted link");
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn a_lying_wlan_resolver_never_chooses_the_server() {
    let lab = lab();
    laptop_routes(&lab, true);
    // The attacker's server, reachable through the trusted link like the real one.
    sh(&lab, Host::Server, "ip addr add 198.18.3.3/24 dev eth0");
    let (right, wrong, cli) = (TempDir::new("nr"), TempDir::new("nw"), TempDir::new("nc"));
    let _s = serve(&lab, 7000, right.path(), &[]);
    let wrong_dir = wrong.path().display().to_string();
    let _attacker = spawn_listening(
        &lab,
        Host::Server,
        &["serve", "--listen", "198.18.3.3:7000", "--dir", &wrong_dir],
    );
    let resolvers = Resolvers::start(&lab, &["198.18.2.1"]);
    let data = random(300_000, 41);
    let file = cli.join("letter.bin");
    std::fs::write(&file, &data).unwrap();
    let file_s = file.display().to_string();
    let (cap_u, cap_t) = (cli.join("u.pcap"), cli.join("t.pcap"));
    let cu = lab.capture(Link::Untrusted, &cap_u).unwrap();
    let ct = lab.capture(Link::Trusted, &cap_t).unwrap();
    let send = |name: &str, extra: &[&str]| {
        let mut a = vec![
            "send",
            file_s.as_str(),
            "--name",
            name,
            "--to",
            "srv.lab:7000",
        ];
        a.extend_from_slice(&PATHS);
        a.extend_from_slice(extra);
        client(&lab, &a)
    };

    // 1. The system's resolver is the WLAN's: refused before anything is sent.
    let refused = send("one", &[]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    let msg = stderr(&refused);
    assert_eq!(msg.trim().lines().count(), 1, "{msg}");
    for part in [
        "198.18.2.1 (/etc/resolv.conf)",
        "`untrusted`",
        "--resolver ADDR",
    ] {
        assert!(msg.contains(part), "`{part}` missing: {msg}");
    }

    // 2. --resolver: asked through the trusted interface, the right server stores it.
    let ok = send("two", &["--resolver", "198.18.1.1", "-v"]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    assert!(
        stderr(&ok).contains("srv.lab:7000 is 198.18.3.2 (asked 198.18.1.1:53 by `trusted`)"),
        "{}",
        stderr(&ok)
    );
    assert!(std::fs::read(right.join("two")).unwrap() == data);

    // 3. Two system resolvers, the WLAN's first: only the one behind the trusted link is
    //    asked, and `get` resolves the same way.
    resolvers.set_resolv_conf(&["198.18.2.1", "198.18.1.1"]);
    assert!(send("three", &[]).status.success());
    assert!(std::fs::read(right.join("three")).unwrap() == data);
    let back = cli.join("back.bin").display().to_string();
    let mut a = vec!["get", "three", "--out", &back, "--from", "srv.lab:7000"];
    a.extend_from_slice(&PATHS);
    let got = client(&lab, &a);
    assert!(got.status.success(), "{}", stderr(&got));
    assert!(std::fs::read(&back).unwrap() == data);

    queries_crossed_the_trusted_link_only(cu, ct, &cap_u, &cap_t);
    // Never at the attacker's.
    let stolen: Vec<_> = std::fs::read_dir(wrong.path()).unwrap().collect();
    assert!(stolen.is_empty(), "the attacker's server stored {stolen:?}");
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn a_name_the_trusted_resolver_does_not_know_fails_with_one_line() {
    let lab = lab();
    laptop_routes(&lab, true);
    let _resolvers = Resolvers::start(&lab, &["198.18.1.1"]);
    let mut a = vec!["perf", "--to", "nosuch.lab:7000", "--time", "1"];
    a.extend_from_slice(&PATHS);
    let out = client(&lab, &a);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let msg = stderr(&out);
    assert!(
        msg.contains("`nosuch.lab`: no such name (asked 198.18.1.1:53 by `trusted`)"),
        "{msg}"
    );
}

/// `nena run --via`, `nena proxy client --to` and `nena gateway --via` resolve a name the
/// same way (ClientCommon): refused while the system's resolver is the WLAN's, and with
/// `--resolver` asked through the trusted link, so the right proxy server carries them and
/// the attacker's (198.18.3.3, the WLAN resolver's answer) sees nothing.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn names_in_run_via_proxy_to_and_gateway_via_are_resolved_through_the_trusted_link() {
    let lab = lab_with(|c| c.lan = true);
    laptop_routes(&lab, true);
    sh(&lab, Host::Server, "ip addr add 198.18.3.3/24 dev eth0");
    let www = TempDir::new("nv");
    let cli = TempDir::new("nvc");
    std::fs::write(www.join("letter.txt"), b"the right proxy server\n").unwrap();
    let _http = http_server(&lab, &www, None);
    let proxy = |listen: &str| {
        spawn_listening(
            &lab,
            Host::Server,
            &[
                "-v",
                "proxy",
                "server",
                "--listen",
                listen,
                "--allow",
                "198.18.3.2/32",
            ],
        )
    };
    let right = proxy("198.18.3.2:7100");
    let attacker = proxy("198.18.3.3:7100");
    let _resolvers = Resolvers::start(&lab, &["198.18.2.1"]);
    let (cap_u, cap_t) = (cli.join("u.pcap"), cli.join("t.pcap"));
    let cu = lab.capture(Link::Untrusted, &cap_u).unwrap();
    let ct = lab.capture(Link::Trusted, &cap_t).unwrap();
    let url = "http://198.18.3.2:8000/letter.txt";
    let resolved = "srv.lab:7100 is 198.18.3.2 (asked 198.18.1.1:53 by `trusted`)";
    let run = |extra: &[&str]| {
        let mut a = vec!["-v", "run", "--via", "srv.lab:7100"];
        a.extend_from_slice(&PATHS);
        a.extend_from_slice(extra);
        a.extend_from_slice(&["--", "curl", "-sS", "--max-time", "20", url]);
        lab.command(Host::Client, NENA, &a)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };

    // The system's resolver is the WLAN's: refused before connecting, in one line.
    let refused = run(&[]);
    assert!(!refused.status.success(), "{}", stderr(&refused));
    assert!(refused.stdout.is_empty(), "the command ran");
    let msg = stderr(&refused);
    let line = msg
        .lines()
        .find(|l| l.contains("--resolver ADDR"))
        .unwrap_or_else(|| panic!("no refusal naming the fix: {msg}"));
    assert!(
        line.contains("198.18.2.1") && line.contains("`untrusted`"),
        "{line}"
    );

    // nena run --via NAME --resolver: carried by the right proxy server.
    let ok = run(&["--resolver", "198.18.1.1"]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    assert_eq!(ok.stdout, b"the right proxy server\n", "{}", stderr(&ok));
    assert!(stderr(&ok).contains(resolved), "{}", stderr(&ok));

    // nena proxy client --to NAME --resolver, its SOCKS5 endpoint used by curl.
    let mut a = vec![
        "-v",
        "proxy",
        "client",
        "--socks5",
        "127.0.0.1:1080",
        "--to",
        "srv.lab:7100",
        "--resolver",
        "198.18.1.1",
    ];
    a.extend_from_slice(&PATHS);
    let mut pc = spawn_listening(&lab, Host::Client, &a);
    let o = lab
        .command(
            Host::Client,
            "curl",
            ["-sS", "--max-time", "20", "--socks5", "127.0.0.1:1080", url],
        )
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}\n{}", stderr(&o), pc.stderr());
    assert_eq!(o.stdout, b"the right proxy server\n");
    assert!(pc.stderr().contains(resolved), "{}", pc.stderr());
    assert!(pc.terminate().success());

    // nena gateway --via NAME --resolver, fetched by the LAN host.
    let mut a = vec![
        "-v",
        "gateway",
        "--lan",
        "lan",
        "--via",
        "srv.lab:7100",
        "--resolver",
        "198.18.1.1",
    ];
    a.extend_from_slice(&PATHS);
    let mut gw = spawn_listening(&lab, Host::Client, &a);
    let o = lab
        .command(Host::Lan, "curl", ["-sS", "--max-time", "20", url])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}\n{}", stderr(&o), gw.stderr());
    assert_eq!(o.stdout, b"the right proxy server\n");
    assert!(gw.stderr().contains(resolved), "{}", gw.stderr());
    assert!(gw.terminate().success());

    // The right proxy server carried all three; the attacker's saw no one.
    right.wait_stderr_n("CONNECT 198.18.3.2:8000", 3, Duration::from_secs(10));
    assert!(
        !attacker.stderr().contains("CONNECT") && !attacker.stderr().contains(": mode "),
        "the attacker's proxy server was reached: {}",
        attacker.stderr()
    );
    queries_crossed_the_trusted_link_only(cu, ct, &cap_u, &cap_t);
}
