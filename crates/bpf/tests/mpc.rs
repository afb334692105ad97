//! The kato-mpc negotiation programs (`bpf/mpc/mpc.bpf.c`): under BPF_PROG_TEST_RUN (the marks,
//! the grown packet's checksums, the records and keys of both sides), and on a live MPTCP
//! connection between two namespaces: what this kernel does with an MP_CAPABLE flag bit D
//! (it falls back to TCP: the reason kato-mpc uses an RFC 6994 option instead), that the
//! option leaves MPTCP working and tshark decoding the handshake without errors, and that
//! both hosts record the same keys, whose tokens are the sockets' MPTCP tokens.

mod common;

use common::*;
use nena_bpf::chains::packet::{self, mp, Tcp, TCP_ACK, TCP_SYN};
use nena_bpf::mpc::{MpcBed, MpcGuard, MpcMethod, MpcRole, EXID};
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::time::Duration;

const C: &str = "198.18.2.2";
const S: &str = "198.18.3.2";

/// Linux's SYN options: MSS, SACK permitted + timestamps, NOP + window scale, MP_CAPABLE.
fn syn_opts() -> Vec<u8> {
    let mut o = vec![
        2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7,
    ];
    o.extend_from_slice(&[30, 4, 0x01, 0x01]);
    o
}

fn exp_opt(f: &[u8]) -> bool {
    packet::options(f)
        .unwrap()
        .iter()
        .any(|(k, b)| *k == 253 && b.len() == 4 && b[2..4] == EXID.to_be_bytes())
}

fn sa(ip: &str, port: u16) -> SocketAddr {
    format!("{ip}:{port}").parse().unwrap()
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn option_marks_and_keys_under_test_run() {
    for (c, s) in [(C, S), ("2001:db8:2::2", "2001:db8:3::2")] {
        let client = MpcBed::new(4433, MpcRole::Client, MpcMethod::Option)
            .expect("loading the mpc programs (root and BPF needed)");
        let server = MpcBed::new(4433, MpcRole::Server, MpcMethod::Option).unwrap();
        let sa = |ip: &str, port: u16| -> SocketAddr {
            if ip.contains(':') {
                format!("[{ip}]:{port}").parse().unwrap()
            } else {
                format!("{ip}:{port}").parse().unwrap()
            }
        };
        let (cl, sl) = (sa(c, 40001), sa(s, 4433));
        let syn = Tcp::new(c, s, 40001, 4433)
            .flags(TCP_SYN)
            .opt(&syn_opts())
            .build();
        assert!(packet::checksums_ok(&syn));
        let out = client.run(&syn, true).unwrap();
        assert_eq!(out.len(), syn.len() + 4, "{c}: the SYN grows by the option");
        assert!(
            packet::checksums_ok(&out),
            "{c}: checksums of the grown SYN"
        );
        assert!(exp_opt(&out), "{c}: the option is there");
        let p = packet::parse(&out).unwrap();
        assert_eq!(p.doff, packet::parse(&syn).unwrap().doff + 4);
        // The rest of the options untouched, in order.
        assert_eq!(
            packet::options(&out).unwrap()[..packet::options(&syn).unwrap().len()],
            packet::options(&syn).unwrap()[..]
        );
        let r = client.flow(cl, sl).unwrap().unwrap();
        assert!(r.requested && !r.consented && r.local_key.is_none());

        // The server sees the request, and marks its SYN-ACK.
        assert_eq!(server.run(&out, false).unwrap(), out);
        assert!(server.flow(sl, cl).unwrap().unwrap().requested);
        let (kc, ks) = (0x1122_3344_5566_7788u64, 0x99aa_bbcc_ddee_ff00u64);
        let synack = Tcp::new(s, c, 4433, 40001)
            .flags(TCP_SYN | TCP_ACK)
            .opt(&mp::capable(&[ks]))
            .build();
        let sa_out = server.run(&synack, true).unwrap();
        assert!(
            exp_opt(&sa_out) && packet::checksums_ok(&sa_out),
            "{s}: SYN-ACK"
        );
        let r = server.flow(sl, cl).unwrap().unwrap();
        assert!(r.consented);
        assert_eq!(r.local_key, Some(ks.to_be_bytes()));
        // The client sees the consent and the server's key.
        assert_eq!(client.run(&sa_out, false).unwrap(), sa_out);
        let r = client.flow(cl, sl).unwrap().unwrap();
        assert!(r.consented);
        assert_eq!(r.remote_key, Some(ks.to_be_bytes()));
        // The third ACK: both keys, the client's first; the client confirms on it that it
        // saw the consent (the ACK grows by the option, checksums fixed).
        let ack = Tcp::new(c, s, 40001, 4433)
            .flags(TCP_ACK)
            .opt(&mp::capable(&[kc, ks]))
            .build();
        let ack_out = client.run(&ack, true).unwrap();
        assert_eq!(ack_out.len(), ack.len() + 4, "{c}: the confirmation");
        assert!(exp_opt(&ack_out) && packet::checksums_ok(&ack_out));
        assert_eq!(server.run(&ack_out, false).unwrap(), ack_out);
        let rc = client.flow(cl, sl).unwrap().unwrap();
        let rs = server.flow(sl, cl).unwrap().unwrap();
        assert!(rc.confirmed && rs.confirmed, "{rc:?} {rs:?}");
        assert!(rs.requested && rs.consented);
        assert_eq!(rc.local_key, Some(kc.to_be_bytes()));
        assert_eq!(rc.remote_key, Some(ks.to_be_bytes()));
        assert_eq!(rs.local_key, rc.remote_key);
        assert_eq!(rs.remote_key, rc.local_key);
        // The same ACK without the confirmation (stripped on the way): recorded, with the
        // keys, but not confirmed.
        let other = MpcBed::new(4433, MpcRole::Server, MpcMethod::Option).unwrap();
        assert_eq!(other.run(&ack, false).unwrap(), ack);
        let ro = other.flow(sl, cl).unwrap().unwrap();
        assert!(!ro.confirmed && ro.has_keys(), "{ro:?}");
    }
}

/// A server's table of completed handshakes filled to the brim with made-up entries (as a
/// flood of real handshakes nobody accepts would leave it): the next connection's completing
/// ACK is still recorded with its keys and marks, the table stays at its size; a sweep
/// deletes the entries older than a minute and leaves the fresh ones.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn a_full_table_of_completed_handshakes_still_records_the_next_one_and_sweeps() {
    let server = MpcBed::new(4433, MpcRole::Server, MpcMethod::Option)
        .expect("loading the mpc programs (root and BPF needed)");
    let table = server.established().unwrap();
    let cap = table.capacity();
    assert_eq!(cap, 16384);
    assert_eq!(table.fill(cap, 4433, Duration::from_secs(0)).unwrap(), cap);
    // (An LRU map may push an entry out a little before it holds its size: per-CPU free
    // lists.)
    assert!(
        table.len() >= cap as usize * 9 / 10,
        "full: {}",
        table.len()
    );
    let (kc, ks) = (0x0102_0304_0506_0708u64, 0x1112_1314_1516_1718u64);
    let syn = Tcp::new(C, S, 40009, 4433)
        .flags(TCP_SYN)
        .opt(&[&syn_opts()[..], &[253, 4, 0x4e, 0x45]].concat())
        .build();
    server.run(&syn, false).unwrap();
    let synack = Tcp::new(S, C, 4433, 40009)
        .flags(TCP_SYN | TCP_ACK)
        .opt(&mp::capable(&[ks]))
        .build();
    server.run(&synack, true).unwrap();
    let ack = Tcp::new(C, S, 40009, 4433)
        .flags(TCP_ACK)
        .opt(&[&mp::capable(&[kc, ks])[..], &[253, 4, 0x4e, 0x45]].concat())
        .build();
    server.run(&ack, false).unwrap();
    assert!(table.len() <= cap as usize, "bounded");
    let r = server
        .flow(sa(S, 4433), sa(C, 40009))
        .unwrap()
        .expect("the completed handshake is recorded in the full table");
    assert!(r.confirmed && r.requested && r.consented, "{r:?}");
    assert_eq!(r.local_key, Some(ks.to_be_bytes()));
    assert_eq!(r.remote_key, Some(kc.to_be_bytes()));
    // The sweep: 100 stale entries go, the fresh ones (and the real one) stay.
    let fresh = MpcBed::new(4433, MpcRole::Server, MpcMethod::Option).unwrap();
    let t = fresh.established().unwrap();
    assert_eq!(t.fill(100, 4433, Duration::from_secs(120)).unwrap(), 100);
    assert_eq!(t.sweep(), 100);
    assert!(t.is_empty());
    assert_eq!(
        table.sweep(),
        0,
        "nothing in the full table is a minute old"
    );
    assert!(server.flow(sa(S, 4433), sa(C, 40009)).unwrap().is_some());
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn no_confirmation_without_a_consent_and_no_record_without_a_handshake() {
    let client = MpcBed::new(4433, MpcRole::Client, MpcMethod::Option)
        .expect("loading the mpc programs (root and BPF needed)");
    let syn = Tcp::new(C, S, 40005, 4433)
        .flags(TCP_SYN)
        .opt(&syn_opts())
        .build();
    client.run(&syn, true).unwrap();
    // A SYN-ACK without the consent: the third ACK leaves unchanged, unconfirmed.
    let synack = Tcp::new(S, C, 4433, 40005)
        .flags(TCP_SYN | TCP_ACK)
        .opt(&mp::capable(&[9]))
        .build();
    client.run(&synack, false).unwrap();
    let ack = Tcp::new(C, S, 40005, 4433)
        .flags(TCP_ACK)
        .opt(&mp::capable(&[8, 9]))
        .build();
    assert_eq!(client.run(&ack, true).unwrap(), ack);
    let r = client.flow(sa(C, 40005), sa(S, 4433)).unwrap().unwrap();
    assert!(
        r.requested && !r.consented && !r.confirmed && r.has_keys(),
        "{r:?}"
    );
    // A server checking completing ACKs against its kernel's sockets: a confirmed ACK that
    // completes no handshake here (a forged one) is not recorded.
    let server = MpcBed::verifying(4433, MpcRole::Server, MpcMethod::Option).unwrap();
    let forged = Tcp::new(C, S, 40005, 4433)
        .flags(TCP_ACK)
        .opt(&[&mp::capable(&[8, 9])[..], &[253, 4, 0x4e, 0x45]].concat())
        .build();
    assert!(exp_opt(&forged));
    assert_eq!(server.run(&forged, false).unwrap(), forged);
    assert!(
        server.flow(sa(S, 4433), sa(C, 40005)).unwrap().is_none(),
        "a forged completing ACK made a record"
    );
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn no_consent_without_a_request_and_other_ports_untouched() {
    let server = MpcBed::new(4433, MpcRole::Server, MpcMethod::Option)
        .expect("loading the mpc programs (root and BPF needed)");
    // A SYN without the option: the SYN-ACK is not marked.
    let syn = Tcp::new(C, S, 40002, 4433)
        .flags(TCP_SYN)
        .opt(&syn_opts())
        .build();
    assert_eq!(server.run(&syn, false).unwrap(), syn);
    let synack = Tcp::new(S, C, 4433, 40002)
        .flags(TCP_SYN | TCP_ACK)
        .opt(&mp::capable(&[7]))
        .build();
    assert_eq!(server.run(&synack, true).unwrap(), synack);
    assert!(
        !server
            .flow(sa(S, 4433), sa(C, 40002))
            .unwrap()
            .unwrap()
            .consented
    );
    // A client's SYN to another port is not marked.
    let client = MpcBed::new(4433, MpcRole::Client, MpcMethod::Option).unwrap();
    let other = Tcp::new(C, S, 40003, 22)
        .flags(TCP_SYN)
        .opt(&syn_opts())
        .build();
    assert_eq!(client.run(&other, true).unwrap(), other);
    // A plain TCP SYN (no MP_CAPABLE) to our port is not marked either.
    let plain = Tcp::new(C, S, 40004, 4433)
        .flags(TCP_SYN)
        .opt(&[2, 4, 5, 0xb4])
        .build();
    assert_eq!(client.run(&plain, true).unwrap(), plain);
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn flag_bit_method_sets_bit_d_in_place() {
    let client = MpcBed::new(4433, MpcRole::Client, MpcMethod::FlagBit)
        .expect("loading the mpc programs (root and BPF needed)");
    let syn = Tcp::new(C, S, 40001, 4433)
        .flags(TCP_SYN)
        .opt(&syn_opts())
        .build();
    let out = client.run(&syn, true).unwrap();
    assert_eq!(out.len(), syn.len());
    assert!(packet::checksums_ok(&out));
    let m = packet::mptcp_options(&out);
    assert_eq!(m.len(), 1);
    assert_eq!(m[0][3], 0x01 | 0x10, "flags H and D");
}

/// Connects from the client namespace with the programs of `method` on the client's first
/// path, and with (or without) the server's; returns the records and whether each end fell
/// back to TCP.
struct Outcome {
    client: Option<nena_bpf::mpc::FlowRecord>,
    server: Option<nena_bpf::mpc::FlowRecord>,
    client_fallback: bool,
    server_fallback: bool,
    client_token: Option<u32>,
    server_token: Option<u32>,
    pcap: Vec<u8>,
}

fn connect_with(method: MpcMethod, server_attached: bool, port: u16) -> Outcome {
    connect_with_policy(method, server_attached, port, false)
}

/// [`connect_with`], with nena's policy dispatcher also attached to the client's first
/// path (and the server's) when `policy`.
fn connect_with_policy(
    method: MpcMethod,
    server_attached: bool,
    port: u16,
    policy: bool,
) -> Outcome {
    let net = Net::new();
    let pins = (Pins::new(), Pins::new());
    let policies = policy.then(|| {
        let (pc, ps) = (pins.0.path().to_path_buf(), pins.1.path().to_path_buf());
        (
            net.in_ns(&net.client, move || {
                nena_bpf::Policy::attach(&pc, "c1").map_err(|e| format!("{e:#}"))
            })
            .expect("policy attach (client)"),
            net.in_ns(&net.server, move || {
                nena_bpf::Policy::attach(&ps, "s1").map_err(|e| format!("{e:#}"))
            })
            .expect("policy attach (server)"),
        )
    });
    let cap_file =
        std::env::temp_dir().join(format!("nena-mpc-{}-{port}.pcap", std::process::id()));
    let mut cap = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &net.client,
            "tcpdump",
            "-U",
            "--immediate-mode",
            "-n",
            "-i",
            "c1",
            "-w",
        ])
        .arg(&cap_file)
        .arg("tcp")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("tcpdump");
    // Until tcpdump says it listens (its file exists earlier than that).
    let mut err = std::io::BufReader::new(cap.stderr.take().unwrap());
    // Killed and its file removed even if the test fails on the way.
    let mut cap = Tcpdump(cap, cap_file.clone());
    let mut line = String::new();
    use std::io::BufRead;
    while err.read_line(&mut line).unwrap_or(0) > 0 && !line.contains("listening on") {
        line.clear();
    }
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    let cg = net.in_ns(&net.client, move || {
        MpcGuard::attach("c1", port, MpcRole::Client, method).map_err(|e| format!("{e:#}"))
    });
    let cg = cg.expect("attaching in the client namespace");
    let sg = if server_attached {
        Some(
            net.in_ns(&net.server, move || {
                MpcGuard::attach("s1", port, MpcRole::Server, method).map_err(|e| format!("{e:#}"))
            })
            .expect("attaching in the server namespace"),
        )
    } else {
        None
    };
    let l = net.listen(&net.server, &format!("{SERVER}:{port}"));
    let c = net.connect(&net.client, &format!("{SERVER}:{port}"));
    let (s, _) = l.accept().unwrap();
    // Some data both ways (the keys may ride on the first data segment).
    use std::io::{Read, Write};
    let (mut c2, mut s2) = (&c, &s);
    c2.write_all(b"ping").unwrap();
    let mut b = [0u8; 4];
    s2.read_exact(&mut b).unwrap();
    s2.write_all(b"pong").unwrap();
    c2.read_exact(&mut b).unwrap();
    let (cl, cr) = (c.local_addr().unwrap(), c.peer_addr().unwrap());
    let (sl, sr) = (s.local_addr().unwrap(), s.peer_addr().unwrap());
    // (Data crossed both ways: each side's record has its keys by now.)
    let client = cg.flow(cl, cr).unwrap();
    let server = sg.as_ref().map(|g| g.flow(sl, sr).unwrap()).unwrap_or(None);
    let client_fallback = nena_mptcp::is_fallback(c.as_fd()).unwrap();
    let server_fallback = nena_mptcp::is_fallback(s.as_fd()).unwrap();
    let client_token = nena_mptcp::info(c.as_fd()).ok().map(|i| i.token);
    let server_token = nena_mptcp::info(s.as_fd()).ok().map(|i| i.token);
    drop((c, s, l));
    // tcpdump drops what it has not read when interrupted: until its file stops growing
    nena_testkit::wait_settled(Duration::from_millis(100), Duration::from_secs(2), || {
        std::fs::metadata(&cap_file).map(|m| m.len()).unwrap_or(0)
    });
    // SAFETY: signalling our own child.
    unsafe { libc::kill(cap.0.id() as i32, libc::SIGINT) };
    let _ = cap.0.wait();
    let pcap = std::fs::read(&cap_file).unwrap_or_default();
    drop(cap);
    // The guards detach in their namespaces.
    net.in_ns(&net.client, move || {
        cg.detach().map_err(|e| format!("{e:#}"))
    })
    .expect("detaching");
    if let Some(g) = sg {
        net.in_ns(&net.server, move || {
            g.detach().map_err(|e| format!("{e:#}"))
        })
        .expect("detaching");
    }
    if let Some((pc, ps)) = policies {
        net.in_ns(&net.client, move || {
            pc.detach("c1").map_err(|e| format!("{e:#}"))
        })
        .expect("policy detach");
        net.in_ns(&net.server, move || {
            ps.detach("s1").map_err(|e| format!("{e:#}"))
        })
        .expect("policy detach");
    }
    let c_ns = net.client.clone();
    assert_eq!(
        net.in_ns(&c_ns, || nena_bpf::mpc::attached("c1").unwrap()),
        (false, false),
        "detached"
    );
    Outcome {
        client,
        server,
        client_fallback,
        server_fallback,
        client_token,
        server_token,
        pcap,
    }
}

/// tcpdump, killed (and its file removed) on drop.
struct Tcpdump(std::process::Child, std::path::PathBuf);

impl Drop for Tcpdump {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_file(&self.1);
    }
}

/// `tshark -V` of a capture, and its expert-info lines (errors and warnings).
fn tshark(pcap: &[u8], filter: &str) -> (String, String) {
    let f = std::env::temp_dir().join(format!(
        "nena-mpc-tshark-{}-{}.pcap",
        std::process::id(),
        filter.len()
    ));
    std::fs::write(&f, pcap).unwrap();
    let v = std::process::Command::new("tshark")
        .args(["-r"])
        .arg(&f)
        .args(["-o", "tcp.check_checksum:FALSE", "-V", "-Y", filter])
        .output()
        .expect("tshark");
    let e = std::process::Command::new("tshark")
        .args(["-r"])
        .arg(&f)
        .args(["-q", "-z", "expert,warn"])
        .output()
        .expect("tshark");
    let _ = std::fs::remove_file(&f);
    (
        String::from_utf8_lossy(&v.stdout).into_owned(),
        String::from_utf8_lossy(&e.stdout).into_owned(),
    )
}

fn token(key: [u8; 8]) -> u32 {
    use sha2::Digest;
    let d = sha2::Sha256::digest(key);
    u32::from_be_bytes([d[0], d[1], d[2], d[3]])
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn this_kernel_refuses_an_mp_capable_flag_bit() {
    let _s = serial();
    let o = connect_with(MpcMethod::FlagBit, false, 4491);
    // The client set bit D on its SYN ...
    assert!(o.client.is_some_and(|r| r.requested), "{:?}", o.client);
    // ... and the server's kernel took the SYN for plain TCP: both ends fell back.
    assert!(o.client_fallback && o.server_fallback);
    let (v, _) = tshark(&o.pcap, "tcp.flags.syn==1 && tcp.flags.ack==1");
    assert!(v.contains("Transmission Control Protocol"), "{v}");
    assert!(
        !v.contains("Multipath TCP"),
        "the SYN-ACK has no MPTCP option:\n{v}"
    );
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn the_option_keeps_mptcp_and_both_ends_record_the_same_keys() {
    let _s = serial();
    let o = connect_with(MpcMethod::Option, true, 4492);
    assert!(!o.client_fallback && !o.server_fallback, "MPTCP kept");
    let (c, s) = (o.client.unwrap(), o.server.unwrap());
    assert!(c.requested && c.consented && s.requested && s.consented);
    // The client confirmed on its third ACK; the server recorded the connection from that
    // ACK, checked against its kernel's request socket.
    assert!(c.confirmed && s.confirmed, "{c:?} {s:?}");
    assert!(c.has_keys() && s.has_keys(), "{c:?} {s:?}");
    assert_eq!(c.local_key, s.remote_key);
    assert_eq!(c.remote_key, s.local_key);
    assert_ne!(c.local_key, c.remote_key);
    // The tokens (SHA-256 of the local key) are the sockets' MPTCP tokens.
    assert_eq!(Some(token(c.local_key.unwrap())), o.client_token);
    assert_eq!(Some(token(s.local_key.unwrap())), o.server_token);
    // tshark: the option on the SYN and SYN-ACK, MP_CAPABLE decoded, no malformed packet,
    // no expert error or warning about MPTCP.
    let (v, expert) = tshark(&o.pcap, "tcp.flags.syn==1");
    assert!(v.contains("Multipath TCP"), "{v}");
    assert!(v.contains("Multipath Capable"), "{v}");
    assert!(
        v.matches("Kind: RFC3692-style Experiment 2 (254)").count()
            + v.matches("Kind: RFC3692-style Experiment 1 (253)").count()
            >= 2,
        "the experimental option on SYN and SYN-ACK:\n{v}"
    );
    assert!(!v.contains("Malformed"), "{v}");
    assert!(!expert.to_lowercase().contains("malformed"), "{expert}");
    assert!(!expert.contains("MPTCP"), "{expert}");
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn a_server_without_the_programs_gives_no_consent() {
    let _s = serial();
    let o = connect_with(MpcMethod::Option, false, 4493);
    assert!(
        !o.client_fallback && !o.server_fallback,
        "the option is ignored: MPTCP kept"
    );
    let c = o.client.unwrap();
    assert!(c.requested && !c.consented, "{c:?}");
    assert!(c.has_keys());
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn the_marks_are_added_ahead_of_nenas_policy_dispatcher() {
    let _s = serial();
    // The dispatcher ends the tc filter chain with its verdict: the mpc programs must run
    // before it, on both ends.
    let o = connect_with_policy(MpcMethod::Option, true, 4494, true);
    assert!(!o.client_fallback && !o.server_fallback);
    let (c, s) = (o.client.unwrap(), o.server.unwrap());
    assert!(
        c.requested && c.consented && s.requested && s.consented,
        "{c:?} {s:?}"
    );
    assert!(c.has_keys() && s.has_keys());
    assert_eq!(c.local_key, s.remote_key);
}

/// Many nena processes attach to one interface and leave it at once (six `nena send
/// --mode kato-mpc` beside a server's guard): every registration is counted under the
/// namespace's lock, so none of them takes the programs from under another. Before the
/// lock, two attaches could read the same users count and write the same next one, and
/// the last leaver then found no user left while one still ran (CI: "Parent Qdisc
/// doesn't exists" on the detach of the guard that had stayed).
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn attaches_and_detaches_at_once_never_take_the_programs_from_a_user() {
    let _s = serial();
    let net = Net::new();
    const PORT: u16 = 7311;
    const THREADS: usize = 8;
    const ROUNDS: usize = 80;
    let holder = net
        .in_ns(&net.client, || {
            MpcGuard::attach("c1", PORT, MpcRole::Client, MpcMethod::Option)
                .map_err(|e| format!("{e:#}"))
        })
        .expect("the guard that stays");
    std::thread::scope(|sc| {
        let hs: Vec<_> = (0..THREADS)
            .map(|t| {
                let net = &net;
                sc.spawn(move || {
                    // Half on the holder's port, half on ports of their own.
                    let port = if t % 2 == 0 { PORT } else { PORT + t as u16 };
                    net.in_ns(&net.client, move || {
                        for round in 0..ROUNDS {
                            let g =
                                MpcGuard::attach("c1", port, MpcRole::Client, MpcMethod::Option)
                                    .map_err(|e| format!("thread {t} round {round}: {e:#}"))?;
                            let on = nena_bpf::mpc::attached("c1").map_err(|e| e.to_string())?;
                            if on != (true, true) {
                                return Err(format!("thread {t} round {round}: attached {on:?}"));
                            }
                            g.detach()
                                .map_err(|e| format!("thread {t} round {round} detach: {e:#}"))?;
                            // The holder is still registered: its programs are there.
                            let on = nena_bpf::mpc::attached("c1").map_err(|e| e.to_string())?;
                            if on != (true, true) {
                                return Err(format!(
                                    "thread {t} round {round}: after a detach, attached {on:?} \
                                     while the holder stays"
                                ));
                            }
                        }
                        Ok::<(), String>(())
                    })
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap().unwrap();
        }
    });
    net.in_ns(&net.client, move || {
        holder.detach().map_err(|e| format!("{e:#}"))
    })
    .expect("the holder's detach, last");
    let c_ns = net.client.clone();
    assert_eq!(
        net.in_ns(&c_ns, || nena_bpf::mpc::attached("c1").unwrap()),
        (false, false),
        "the last one out took the programs"
    );
}

/// `MpcAttachment` (a command's kato-mpc programs): attached on each interface it names,
/// read through its reader (nothing recorded yet: None), and detached when it and the
/// reader are dropped, the clsact qdisc it created with them.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn an_attachment_detaches_its_programs_when_it_and_its_reader_are_dropped() {
    use nena_bpf::mpc::attachment::MpcAttachment;
    let _one = serial();
    let net = Net::new();
    net.in_ns(&net.client, || {
        let devs = ["c1".to_string(), "c2".to_string()];
        let a = MpcAttachment::attach(&devs, 7321, MpcRole::Client).unwrap();
        assert_eq!(a.devs(), ["c1", "c2"]);
        for d in &devs {
            assert_eq!(nena_bpf::mpc::attached(d).unwrap(), (true, true), "{d}");
        }
        let reader = a.reader();
        let (l, r) = (sa(C, 40000), sa(S, 7321));
        assert_eq!(reader.read(l, r).unwrap(), None);
        reader.forget(l, r);
        drop(a);
        // The reader keeps the programs (the transport may still ask).
        assert_eq!(nena_bpf::mpc::attached("c1").unwrap(), (true, true));
        drop(reader);
        for d in &devs {
            assert_eq!(nena_bpf::mpc::attached(d).unwrap(), (false, false), "{d}");
        }
    });
}
