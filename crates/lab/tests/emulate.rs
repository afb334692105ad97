//! Link emulation in a lab (needs root): delay, jitter and loss measured with TCP and UDP
//! against the configured values, outages, run-time changes, and that `down` leaves no
//! relay, namespace or TAP device behind. Each test builds its own lab with a unique prefix
//! inside a guard; the relay is this package's `nena-lab-relay` binary.

use nena_lab::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Tests that measure time run one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn config(f: impl FnOnce(&mut LabConfig)) -> LabConfig {
    let mut c = LabConfig::with_prefix(unique_prefix());
    c.relay_exe = Some(env!("CARGO_BIN_EXE_nena-lab-relay").into());
    f(&mut c);
    c
}

/// A TCP echo connection from the client's address on `link` to the server.
fn echo_pair(lab: &Lab, link: Link) -> TcpStream {
    let l: TcpListener = lab.listen_on_server(0).unwrap();
    let dst = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut e, _) = l.accept().unwrap();
        e.set_nodelay(true).unwrap();
        let mut b = [0u8; 1];
        while e.read_exact(&mut b).is_ok() && e.write_all(&b).is_ok() {}
    });
    let s = lab.connect(link, dst, Duration::from_secs(5)).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

/// `n` one-byte ping-pongs `gap` apart; the round-trip times, sorted.
fn rtts(s: &mut TcpStream, n: usize, gap: Duration) -> Vec<Duration> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let mut b = [7u8; 1];
        s.write_all(&b).unwrap();
        s.read_exact(&mut b).unwrap();
        v.push(t.elapsed());
        std::thread::sleep(gap);
    }
    v.sort();
    v
}

fn pct(v: &[Duration], p: f64) -> Duration {
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// A UDP sink on the server counting datagrams; returns its address and the counter.
fn udp_sink(lab: &Lab, stop: Arc<AtomicBool>) -> (SocketAddr, Arc<AtomicU64>) {
    let sock = lab
        .run_in(Host::Server, || UdpSocket::bind((SERVER_ADDR, 0)))
        .unwrap()
        .unwrap();
    sock.set_read_timeout(Some(ms(50))).unwrap();
    let addr = sock.local_addr().unwrap();
    let n = Arc::new(AtomicU64::new(0));
    let n2 = n.clone();
    std::thread::spawn(move || {
        let mut b = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            if sock.recv(&mut b).is_ok() {
                n2.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    (addr, n)
}

/// A UDP socket in the client bound to its address on `link`.
fn udp_client(lab: &Lab, link: Link) -> UdpSocket {
    let src = lab.client_addr(link);
    lab.run_in(Host::Client, move || UdpSocket::bind((src, 0)))
        .unwrap()
        .unwrap()
}

/// Send `n` datagrams `gap` apart; how many arrived (after a settling wait).
fn udp_count(c: &UdpSocket, dst: SocketAddr, got: &AtomicU64, n: u64, gap: Duration) -> u64 {
    let before = got.load(Ordering::Relaxed);
    let start = Instant::now();
    for i in 0..n {
        let _ = c.send_to(&[0u8; 200], dst);
        let due = start + gap * (i + 1) as u32;
        if let Some(w) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(w);
        }
    }
    std::thread::sleep(ms(300));
    got.load(Ordering::Relaxed) - before
}

#[test]
fn delay_jitter_and_loss_measured_against_the_configuration() {
    let _one = serial();
    let t0 = Instant::now();
    let cfg = config(|c| {
        c.trusted_emulation = Some(LinkEmulation::both(Emulation {
            delay: ms(15),
            ..Emulation::default()
        }));
        c.untrusted_emulation = Some(LinkEmulation {
            to_router: Emulation {
                loss: Loss::Random(0.1),
                ..Emulation::default()
            },
            from_router: Emulation::default(),
        });
    });
    let lab = LabGuard::up(&cfg).unwrap();
    let st = Lab::status(lab.prefix()).unwrap();
    let t = st.links.iter().find(|l| l.link == Link::Trusted).unwrap();
    assert_eq!(t.kind.as_deref(), Some("tap"));
    assert_eq!(t.emulation.as_ref().unwrap().to_router.delay, ms(15));
    let s = st.links.iter().find(|l| l.link == Link::Server).unwrap();
    assert_eq!(
        s.kind.as_deref(),
        Some("veth"),
        "no emulation: still a veth"
    );
    assert!(st.relay_pid.is_some());

    // Delay: the RTT is twice the one-way delay (the server link adds ~0.1 ms).
    let mut s = echo_pair(&lab, Link::Trusted);
    let v = rtts(&mut s, 40, ms(5));
    let (p50, p90) = (pct(&v, 0.5), pct(&v, 0.9));
    eprintln!("delay 15 ms each way: RTT median {p50:?}, p90 {p90:?}");
    assert!(
        p50 >= ms(30) && p50 < ms(31),
        "median RTT {p50:?} for 30 ms"
    );
    assert!(p90 < ms(32), "p90 RTT {p90:?} for 30 ms");

    // Jitter ±10 ms each way at run time, on the same connection.
    lab.set_emulation(
        Link::Trusted,
        Direction::ToRouter,
        Emulation {
            delay: ms(15),
            jitter: ms(10),
            ..Emulation::default()
        },
    )
    .unwrap();
    let v = rtts(&mut s, 60, ms(30));
    let (lo, hi) = (pct(&v, 0.05), pct(&v, 0.95));
    eprintln!("jitter ±10 ms one way: RTT 5th {lo:?}, 95th {hi:?}");
    assert!(lo >= ms(20), "an RTT below delay - jitter: {lo:?}");
    assert!(lo < ms(25) && hi > ms(35), "no spread: {lo:?}..{hi:?}");
    assert!(hi < ms(41), "95th percentile above delay + jitter: {v:?}");

    // Loss 10% upstream only: UDP datagram count within the binomial 99% interval.
    let stop = Arc::new(AtomicBool::new(false));
    let (dst, got) = udp_sink(&lab, stop.clone());
    let c = udp_client(&lab, Link::Untrusted);
    let n = 3000u64;
    let arrived = udp_count(&c, dst, &got, n, Duration::from_micros(300));
    let (mean, sd) = (n as f64 * 0.9, (n as f64 * 0.9 * 0.1).sqrt());
    let (lo, hi) = (mean - 2.576 * sd, mean + 2.576 * sd);
    eprintln!("loss 10%: {arrived} of {n} arrived (99% interval {lo:.0}..{hi:.0})");
    assert!(
        (arrived as f64) >= lo && (arrived as f64) <= hi,
        "{arrived} of {n} arrived with 10% loss: outside {lo:.0}..{hi:.0}"
    );
    stop.store(true, Ordering::Relaxed);
    eprintln!("test time {:?}", t0.elapsed());
}

#[test]
fn outage_drops_everything_and_the_link_comes_back() {
    let _one = serial();
    let t0 = Instant::now();
    let cfg = config(|c| {
        c.untrusted_emulation = Some(LinkEmulation::both(Emulation::default()));
    });
    let lab = LabGuard::up(&cfg).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (dst, got) = udp_sink(&lab, stop.clone());
    let c = udp_client(&lab, Link::Untrusted);
    let gap = ms(2);
    assert_eq!(udp_count(&c, dst, &got, 100, gap), 100, "before the outage");
    lab.set_emulation(
        Link::Untrusted,
        Direction::ToRouter,
        Emulation {
            outages: vec![Outage {
                start: Duration::ZERO,
                duration: ms(1500),
            }],
            ..Emulation::default()
        },
    )
    .unwrap();
    assert_eq!(udp_count(&c, dst, &got, 300, gap), 0, "during the outage");
    std::thread::sleep(ms(800));
    assert_eq!(udp_count(&c, dst, &got, 100, gap), 100, "after the outage");
    // TCP still works over the link afterwards
    lab.check_path(Link::Untrusted, Duration::from_secs(3))
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    eprintln!("test time {:?}", t0.elapsed());
}

#[test]
fn set_changes_delay_at_run_time_without_dropping_the_connection() {
    let _one = serial();
    let t0 = Instant::now();
    let cfg = config(|c| {
        c.trusted_emulation = Some(LinkEmulation::both(Emulation {
            delay: ms(5),
            ..Emulation::default()
        }));
    });
    let lab = LabGuard::up(&cfg).unwrap();
    let mut s = echo_pair(&lab, Link::Trusted);
    let before = pct(&rtts(&mut s, 20, ms(2)), 0.5);
    for d in Direction::BOTH {
        lab.set_emulation(
            Link::Trusted,
            d,
            Emulation {
                delay: ms(25),
                ..Emulation::default()
            },
        )
        .unwrap();
    }
    let after = pct(&rtts(&mut s, 20, ms(2)), 0.5);
    eprintln!("RTT median {before:?} at 5 ms each way, {after:?} at 25 ms");
    assert!(before >= ms(10) && before < ms(11), "{before:?}");
    assert!(after >= ms(50) && after < ms(51), "{after:?}");
    assert_eq!(
        lab.config()
            .emulation(Link::Trusted)
            .unwrap()
            .from_router
            .delay,
        ms(25)
    );
    // A link that was a veth becomes an emulated TAP pair.
    lab.set_emulation(
        Link::Untrusted,
        Direction::FromRouter,
        Emulation {
            delay: ms(20),
            ..Emulation::default()
        },
    )
    .unwrap();
    let mut u = echo_pair(&lab, Link::Untrusted);
    let rtt = pct(&rtts(&mut u, 10, ms(2)), 0.5);
    assert!(rtt >= ms(20) && rtt < ms(21), "{rtt:?}");
    // and the trusted link's emulation survived the relay's restart
    let again = pct(&rtts(&mut echo_pair(&lab, Link::Trusted), 10, ms(2)), 0.5);
    assert!(again >= ms(50) && again < ms(51), "{again:?}");
    eprintln!("test time {:?}", t0.elapsed());
}

fn relays_of(prefix: &str) -> Vec<u32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(c) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = c.split(|&b| b == 0).collect();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let zombie = stat
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'));
        if !zombie
            && args.contains(&&b"relay"[..])
            && args
                .windows(2)
                .any(|w| w[0] == b"--prefix" && w[1] == prefix.as_bytes())
        {
            v.push(pid);
        }
    }
    v
}

fn taps_anywhere(prefix: &str) -> bool {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).contains(prefix)
}

#[test]
fn down_leaves_no_relay_namespace_or_tap_also_after_a_crash() {
    let _one = serial();
    let t0 = Instant::now();
    let cfg = config(|c| {
        c.trusted_emulation = Some(LinkEmulation::both(Emulation {
            delay: ms(1),
            ..Emulation::default()
        }));
    });
    // Normal down.
    let lab = Lab::up(&cfg).unwrap();
    let pid = lab.relay_pid().expect("a relay");
    assert_eq!(relays_of(lab.prefix()), vec![pid]);
    Lab::down(lab.prefix()).unwrap();
    assert!(relays_of(lab.prefix()).is_empty(), "relay left after down");
    assert!(!taps_anywhere(lab.prefix()), "namespaces left after down");
    assert!(!state_dir(lab.prefix()).exists());

    // A crash: the state directory is lost (no pid recorded): down finds the relay by scan.
    let lab = Lab::up(&cfg).unwrap();
    let pid = lab.relay_pid().expect("a relay");
    std::fs::remove_dir_all(state_dir(lab.prefix())).unwrap();
    Lab::down(lab.prefix()).unwrap();
    assert!(
        !relays_of(lab.prefix()).contains(&pid),
        "relay {pid} left after down without state"
    );
    assert!(!taps_anywhere(lab.prefix()));

    // The namespaces deleted behind the lab's back: the relay notices and exits by itself.
    let lab = Lab::up(&cfg).unwrap();
    let pid = lab.relay_pid().expect("a relay");
    for h in ["client", "router", "server"] {
        Command::new("ip")
            .args(["netns", "del", &format!("{}-{h}", lab.prefix())])
            .status()
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    while relays_of(lab.prefix()).contains(&pid) && Instant::now() < deadline {
        std::thread::sleep(ms(50));
    }
    assert!(
        !relays_of(lab.prefix()).contains(&pid),
        "relay {pid} outlived its namespaces"
    );
    Lab::down(lab.prefix()).unwrap();
    assert!(!state_dir(lab.prefix()).exists());
    eprintln!("test time {:?}", t0.elapsed());
}
