//! kato-mpc fails closed, in the lab: the consent removed from the SYN-ACK by a box on the
//! trusted path (`tc_mpc_strip` on the router's trusted interface, overwriting the option
//! with NOPs as option-normalising middleboxes do) makes send, get, perf and the proxy
//! client refuse, and captures of both client links hold no plaintext of the text; with
//! --allow-plain on both ends it goes through plain, said so. A SYN flood from spoofed
//! addresses toward the server (a raw socket in the router namespace, bounded in count and
//! time) while real connections wait in the server's accept queue costs none of them its
//! keys: each is scrambled and byte-exact.

use super::*;
use nena_bpf::mpc::strip::{StripGuard, STRIP_SYNACK};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

/// The strip box on the router's `trusted` interface (egress, toward the client), in a
/// thread of the router's namespace; `stop` detaches it there and returns its counts.
struct Strip {
    stop: mpsc::Sender<()>,
    done: std::thread::JoinHandle<anyhow::Result<Result<(u64, u64), String>>>,
}

fn strip(lab: &nena_lab::Lab) -> Strip {
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
    let (stop, stop_rx) = mpsc::channel::<()>();
    let done = lab.spawn_in(Host::Router, move || {
        let g = match StripGuard::attach("trusted", false, 0, STRIP_SYNACK) {
            Ok(g) => g,
            Err(e) => {
                let _ = ready_tx.send(Err(format!("{e:#}")));
                return Err("attach".to_string());
            }
        };
        let _ = ready_tx.send(Ok(()));
        let _ = stop_rx.recv(); // the test's end, or its panic (the sender dropped)
        let c = g.counts().map_err(|e| format!("{e:#}"));
        g.detach().map_err(|e| format!("{e:#}"))?;
        c
    });
    ready_rx
        .recv()
        .expect("strip thread")
        .expect("attaching the strip program on the router");
    Strip { stop, done }
}

impl Strip {
    fn finish(self) -> (u64, u64) {
        let _ = self.stop.send(());
        self.done.join().unwrap().unwrap().unwrap()
    }
}

/// `nena eavesdrop --known` of a capture: the known file's 16-byte runs found in it.
fn runs_found(cap: &Path, known: &Path) -> (u64, u64) {
    let o = std::process::Command::new(NENA)
        .args(["eavesdrop", cap.to_str().unwrap(), "--known"])
        .arg(known)
        .arg("--json")
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    (
        v["known"]["runs_found"].as_u64().unwrap(),
        v["payload_bytes"].as_u64().unwrap(),
    )
}

fn refused(o: &std::process::Output, what: &str) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success(), "{what}: not refused: {err}");
    assert!(
        err.contains("kato-mpc refused: the server did not agree"),
        "{what}: {err}"
    );
    assert!(err.contains("nothing was sent"), "{what}: {err}");
    err
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn kato_mpc_with_the_consent_stripped_on_the_trusted_path_is_refused() {
    let lab = lab();
    let srv = TempDir::new("mpcs");
    let cli = TempDir::new("mpcsc");
    let _s = serve(&lab, 7220, srv.path(), &["--mode", "kato-mpc"]);
    let ps = serve(
        &lab,
        7221,
        srv.path(),
        &["--mode", "kato-mpc", "--allow-plain"],
    );
    let to = server(&lab, 7220);
    let to_plain = server(&lab, 7221);
    let known = cli.join("secret.txt");
    let file = text(60_000, 31);
    std::fs::write(&known, &file).unwrap();
    std::fs::write(srv.join("served.txt"), &file).unwrap();
    let needle = &file[1000..1040];

    let box_ = strip(&lab);
    let cap_u = cli.join("untrusted.pcap");
    let cap_t = cli.join("trusted.pcap");
    let cu = lab.capture(Link::Untrusted, &cap_u).unwrap();
    let ct = lab.capture(Link::Trusted, &cap_t).unwrap();

    // send, get, perf: each refused in one line, nothing stored or received.
    let known_s = known.display().to_string();
    let mut a = vec!["send", &known_s, "--to", &to, "--mode", "kato-mpc"];
    a.extend_from_slice(&PATHS);
    let err = refused(&client(&lab, &a), "send");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(!srv.join("secret.txt").exists());
    let out = cli.join("got.txt").display().to_string();
    let mut a = vec![
        "get",
        "served.txt",
        "--out",
        &out,
        "--from",
        &to,
        "--mode",
        "kato-mpc",
    ];
    a.extend_from_slice(&PATHS);
    refused(&client(&lab, &a), "get");
    assert!(!Path::new(&out).exists());
    let mut a = vec!["perf", "--to", &to, "--bytes", "1M", "--mode", "kato-mpc"];
    a.extend_from_slice(&PATHS);
    refused(&client(&lab, &a), "perf");

    // The proxy client: the application's text goes nowhere, its connection is closed.
    let target: std::net::SocketAddr = "127.0.0.1:7222".parse().unwrap();
    let _echo = echo_server(&lab, target);
    let listen = server(&lab, 7223);
    let _psrv = spawn_listening(
        &lab,
        Host::Server,
        &[
            "proxy",
            "server",
            "--listen",
            &listen,
            "--forward",
            "127.0.0.1:7222",
            "--mode",
            "kato-mpc",
        ],
    );
    let mut args = vec![
        "proxy",
        "client",
        "--listen",
        "127.0.0.1:7224",
        "--to",
        &listen,
        "--mode",
        "kato-mpc",
    ];
    args.extend_from_slice(&PATHS);
    let pc = spawn_listening(&lab, Host::Client, &args);
    let sent = file.clone();
    let echoed = lab
        .run_in(Host::Client, move || {
            use std::io::{Read, Write};
            let mut c = std::net::TcpStream::connect("127.0.0.1:7224").unwrap();
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let _ = c.write_all(&sent);
            let mut back = Vec::new();
            let _ = c.read_to_end(&mut back);
            back.len()
        })
        .unwrap();
    assert_eq!(echoed, 0, "the proxy client forwarded the text");
    pc.wait_stderr("kato-mpc refused", Duration::from_secs(5));

    cu.stop().unwrap();
    ct.stop().unwrap();
    let (stripped, seen) = box_.finish();
    assert!(
        stripped >= 4 && stripped == seen,
        "the box stripped {stripped} of {seen}"
    );
    // Neither link carried any of the text (no 16-byte run, and not the 40-byte needle).
    for cap in [&cap_t, &cap_u] {
        let (runs, _) = runs_found(cap, &known);
        assert_eq!(runs, 0, "{}: plaintext runs", cap.display());
        assert!(!contains(&std::fs::read(cap).unwrap(), needle));
    }

    // With --allow-plain on both ends: through, plain, and said so on both.
    let box_ = strip(&lab);
    let cap_p = cli.join("plain.pcap");
    let cp = lab.capture(Link::Trusted, &cap_p).unwrap();
    let mut a = vec![
        "send",
        &known_s,
        "--to",
        &to_plain,
        "--mode",
        "kato-mpc",
        "--allow-plain",
        "--json",
    ];
    a.extend_from_slice(&PATHS);
    let (r, err) = run_json(&lab, &a);
    cp.stop().unwrap();
    let (stripped, _) = box_.finish();
    assert!(stripped >= 1);
    assert_eq!(std::fs::read(srv.join("secret.txt")).unwrap(), file);
    assert_eq!(r["mode"], "plain", "{r}");
    assert!(
        err.contains("kato-mpc not negotiated (the server did not agree"),
        "{err}"
    );
    ps.wait_stderr(
        "the client did not confirm the consent",
        Duration::from_secs(5),
    );
    // ... and, being plain, readable on the wire: what the flag warns of.
    assert!(contains(&std::fs::read(&cap_p).unwrap(), needle));
}

/// Sends up to `max` SYNs (MP_CAPABLE and nena's request) from random spoofed sources in
/// 198.19.0.0/16 (no host has them; the router has no route back) to `dst`, for at most
/// `limit`, until `stop`. Returns the number sent.
fn syn_flood(
    dst: std::net::SocketAddrV4,
    max: u64,
    limit: Duration,
    stop: &AtomicBool,
) -> std::io::Result<u64> {
    // SAFETY: plain socket calls on a descriptor we own and close.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let sa = libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(*dst.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    let opts: [u8; 12] = [2, 4, 0x05, 0xb4, 30, 4, 0x01, 0x01, 253, 4, 0x4e, 0x45];
    let mut pkt = [0u8; 52];
    pkt[0] = 0x45;
    pkt[2..4].copy_from_slice(&52u16.to_be_bytes());
    pkt[8] = 64;
    pkt[9] = 6;
    pkt[16..20].copy_from_slice(&dst.ip().octets());
    pkt[22..24].copy_from_slice(&dst.port().to_be_bytes());
    pkt[32] = 8 << 4; // data offset: 32 bytes
    pkt[33] = 0x02; // SYN
    pkt[34..36].copy_from_slice(&64240u16.to_be_bytes());
    pkt[40..52].copy_from_slice(&opts);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let start = std::time::Instant::now();
    let mut n = 0u64;
    while n < max && !stop.load(Ordering::Relaxed) && start.elapsed() < limit {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let src = [198, 19, (x >> 8) as u8, (x >> 16) as u8 | 1];
        pkt[12..16].copy_from_slice(&src);
        pkt[20..22].copy_from_slice(&(((x >> 24) as u16) | 1024).to_be_bytes());
        pkt[24..28].copy_from_slice(&((x >> 32) as u32).to_be_bytes());
        pkt[36..38].copy_from_slice(&[0, 0]);
        let sum = tcp_checksum(&pkt[12..16], &pkt[16..20], &pkt[20..52]);
        pkt[36..38].copy_from_slice(&sum.to_be_bytes());
        // SAFETY: sending our buffer to our address structure.
        let r = unsafe {
            libc::sendto(
                fd,
                pkt.as_ptr().cast(),
                pkt.len(),
                0,
                (&sa as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as u32,
            )
        };
        if r > 0 {
            n += 1;
        }
    }
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::close(fd) };
    Ok(n)
}

fn tcp_checksum(src: &[u8], dst: &[u8], seg: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut add = |b: &[u8]| {
        for c in b.chunks(2) {
            sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        }
    };
    add(src);
    add(dst);
    add(&[0, 6]);
    add(&(seg.len() as u16).to_be_bytes());
    add(seg);
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The server's mpc counters (requests seen, keys recorded, completing ACKs refused).
fn server_stats(lab: &nena_lab::Lab) -> [u64; 8] {
    lab.run_in(Host::Server, || nena_bpf::mpc::stats("eth0").unwrap())
        .unwrap()
        .expect("the server's programs")
}

/// A kato-mpc connection from the client's trusted address that negotiates (the client's
/// programs, attached here) and then sends nothing: it holds the server's only session slot
/// until closed. Returns its descriptor (close it to release the slot).
fn holder(lab: &nena_lab::Lab, to: std::net::SocketAddrV4) -> i32 {
    lab.run_in(Host::Client, move || {
        // SAFETY: socket calls on a descriptor we own; the caller closes it.
        unsafe {
            let fd = libc::socket(
                libc::AF_INET,
                libc::SOCK_STREAM,
                262, /* IPPROTO_MPTCP */
            );
            assert!(fd >= 0, "MPTCP socket: {}", std::io::Error::last_os_error());
            let sin = |ip: std::net::Ipv4Addr, port: u16| libc::sockaddr_in {
                sin_family: libc::AF_INET as u16,
                sin_port: port.to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(ip).to_be(),
                },
                sin_zero: [0; 8],
            };
            let len = std::mem::size_of::<libc::sockaddr_in>() as u32;
            let local = sin("198.18.1.2".parse().unwrap(), 0);
            assert_eq!(
                libc::bind(fd, (&local as *const libc::sockaddr_in).cast(), len),
                0
            );
            let remote = sin(*to.ip(), to.port());
            assert_eq!(
                libc::connect(fd, (&remote as *const libc::sockaddr_in).cast(), len),
                0,
                "connect: {}",
                std::io::Error::last_os_error()
            );
            fd
        }
    })
    .unwrap()
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn kato_mpc_connections_keep_their_keys_during_a_syn_flood() {
    const CLIENTS: usize = 6;
    const LRU: u64 = 16384; // the handshake map's size (bpf/mpc/mpc.bpf.c `flows`)
    let lab = lab();
    let srv = TempDir::new("mpcf");
    let cli = TempDir::new("mpcfc");
    // One session at a time, held by an idle connection: the real connections wait in the
    // accept queue, their handshakes done, while the flood goes on.
    let s = serve(
        &lab,
        7230,
        srv.path(),
        &["--mode", "kato-mpc", "--max-sessions", "1"],
    );
    let to = server(&lab, 7230);
    let dst: std::net::SocketAddrV4 = to.parse().unwrap();
    let guard = lab
        .run_in(Host::Client, move || {
            nena_bpf::mpc::MpcGuard::attach(
                "trusted",
                dst.port(),
                nena_bpf::mpc::MpcRole::Client,
                nena_bpf::mpc::MpcMethod::Option,
            )
        })
        .unwrap()
        .expect("the client's programs");
    let base = server_stats(&lab);
    let hold = holder(&lab, dst);
    let stop = Arc::new(AtomicBool::new(false));
    let flood = {
        let stop = stop.clone();
        lab.spawn_in(Host::Router, move || {
            syn_flood(dst, 3_000_000, Duration::from_secs(60), &stop)
        })
    };
    let wait = |what: &str, f: &dyn Fn([u64; 8]) -> bool| {
        nena_testkit::wait_until(what, Duration::from_secs(30), || f(server_stats(&lab)));
    };
    let files: Vec<Vec<u8>> = (0..CLIENTS)
        .map(|i| random(1_000_000, 100 + i as u64))
        .collect();
    let mut at_connect = [0u64; 8];
    let outs: Vec<std::process::Output> = std::thread::scope(|sc| {
        let hs: Vec<_> = files
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let p = cli.join(&format!("f{i}.bin"));
                std::fs::write(&p, f).unwrap();
                let (lab, to) = (&lab, &to);
                sc.spawn(move || {
                    let ps = p.display().to_string();
                    let mut a = vec![
                        "send",
                        &ps,
                        "--to",
                        to,
                        "--mode",
                        "kato-mpc",
                        "--json",
                        "--timeout",
                        "60",
                    ];
                    a.extend_from_slice(&PATHS);
                    client(lab, &a)
                })
            })
            .collect();
        // All handshakes done (the holder's and the six: their completing ACKs recorded),
        // none accepted yet; then three handshake maps' worth of flood before the holder
        // lets go.
        wait("the handshakes", &|st| {
            st[4] >= base[4] + 1 + CLIENTS as u64
        });
        at_connect = server_stats(&lab);
        wait("the flood", &|st| st[2] >= at_connect[2] + 3 * LRU);
        // SAFETY: closing the holder's descriptor, ours.
        unsafe { libc::close(hold) };
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let end = server_stats(&lab);
    stop.store(true, Ordering::Relaxed);
    let sent = flood.join().unwrap().unwrap().expect("raw socket");
    lab.run_in(Host::Client, move || guard.detach())
        .unwrap()
        .unwrap();
    let seen = end[2] - at_connect[2];
    eprintln!(
        "flood: {sent} SYNs sent; {seen} requests seen by the server between the handshakes \
         and the end of the {CLIENTS} transfers; completing ACKs refused {}; server stderr:\n{}",
        end[7] - base[7],
        s.stderr()
    );
    assert!(seen >= 3 * LRU && sent <= 3_000_000);
    // Every real connection kept its keys through the flood: scrambled, byte-exact.
    for (i, o) in outs.iter().enumerate() {
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success(),
            "client {i}: {err}\nserver: {}",
            s.stderr()
        );
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(r["kato_mpc"]["scrambled"], true, "{r}");
        assert_eq!(
            std::fs::read(srv.join(&format!("f{i}.bin"))).unwrap(),
            files[i],
            "file {i}"
        );
    }
    assert!(!s.stderr().contains("refused"), "{}", s.stderr());
}
