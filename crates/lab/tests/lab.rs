//! Integration tests of the namespace lab (need root, iproute2 and tcpdump, as CI has).
//! Each test builds its own lab with a unique prefix inside a guard that removes it.

use nena_lab::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn namespaces() -> String {
    String::from_utf8(
        Command::new("ip")
            .args(["netns", "list"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
}

fn assert_gone(prefix: &str) {
    let list = namespaces();
    for h in ["client", "router", "server"] {
        let ns = format!("{prefix}-{h}");
        assert!(
            !list.split_whitespace().any(|w| w == ns),
            "{ns} still exists: {list}"
        );
    }
    assert!(
        !state_dir(prefix).exists(),
        "state dir of {prefix} left behind"
    );
}

/// Send `len` bytes from `src` (client side of `link`) to a fresh listener on the server
/// and return what the server received and how long it took.
fn transfer(lab: &Lab, link: Link, data: Vec<u8>) -> (Vec<u8>, Duration) {
    let listener = lab
        .run_in(Host::Server, || TcpListener::bind((lab.server_addr(), 0)))
        .unwrap()
        .unwrap();
    let dst = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        got
    });
    let src = lab.client_addr(link);
    let start = Instant::now();
    let mut stream = lab
        .run_in(Host::Client, move || -> std::io::Result<TcpStream> {
            let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
            s.bind(&SocketAddr::new(src, 0).into())?;
            s.connect_timeout(&dst.into(), Duration::from_secs(3))?;
            Ok(s.into())
        })
        .unwrap()
        .unwrap();
    stream.write_all(&data).unwrap();
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    let got = server.join().unwrap();
    (got, start.elapsed())
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn up_status_paths_and_down() {
    let prefix = unique_prefix();
    {
        let lab = LabGuard::up(&LabConfig::with_prefix(&prefix)).unwrap();
        assert_eq!(lab.netns(Host::Client), format!("{prefix}-client"));
        let st = Lab::status(&prefix).unwrap();
        assert!(st.up && !st.partial);
        assert!(
            st.links
                .iter()
                .all(|l| l.exists && l.up && l.rate.is_none()),
            "{st:?}"
        );
        let m = st.mptcp.expect("mptcp status");
        assert!(m.client_enabled && m.server_enabled);
        assert_eq!(m.pm, Some(PmMode::Kernel));
        assert_eq!(m.client_endpoints.len(), 1, "{:?}", m.client_endpoints);
        assert!(
            m.client_endpoints[0].contains("198.18.2.2")
                && m.client_endpoints[0].contains("subflow")
        );
        for link in Link::ALL {
            lab.check_path(link, Duration::from_secs(2)).unwrap();
        }
        // the policy routing sends each source address over its own link
        let route = |src: &str| {
            let out = lab
                .command(
                    Host::Client,
                    "ip",
                    ["route", "get", "198.18.3.2", "from", src],
                )
                .output()
                .unwrap();
            String::from_utf8(out.stdout).unwrap()
        };
        assert!(
            route("198.18.1.2").contains("dev trusted"),
            "{}",
            route("198.18.1.2")
        );
        assert!(
            route("198.18.2.2").contains("dev untrusted"),
            "{}",
            route("198.18.2.2")
        );
        // exec in a host propagates the exit status
        let st = lab
            .command(Host::Server, "sh", ["-c", "exit 7"])
            .status()
            .unwrap();
        assert_eq!(st.code(), Some(7));
        // data arrives intact over both links
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        for link in [Link::Trusted, Link::Untrusted] {
            assert_eq!(transfer(&lab, link, data.clone()).0, data);
        }
    }
    assert_gone(&prefix);
    // down again is harmless
    Lab::down(&prefix).unwrap();
    let st = Lab::status(&prefix).unwrap();
    assert!(!st.up && !st.partial);
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn up_twice_reconciles() {
    let prefix = unique_prefix();
    let lab = LabGuard::up(&LabConfig::with_prefix(&prefix)).unwrap();
    let cfg = LabConfig {
        pm: PmMode::Userspace,
        untrusted_rate: Some(Rate::mbit(50)),
        ..LabConfig::with_prefix(&prefix)
    };
    Lab::up(&cfg).unwrap();
    Lab::up(&cfg).unwrap();
    let st = Lab::status(&prefix).unwrap();
    let m = st.mptcp.unwrap();
    assert_eq!(m.pm, Some(PmMode::Userspace));
    assert!(m.client_endpoints.is_empty(), "{:?}", m.client_endpoints);
    let u = st.links.iter().find(|l| l.link == Link::Untrusted).unwrap();
    assert_eq!(
        (u.rate, u.router_rate),
        (Some(Rate::mbit(50)), Some(Rate::mbit(50)))
    );
    // exactly one policy rule per client address, even after three `up`s
    let rules = lab
        .command(Host::Client, "ip", ["rule", "show"])
        .output()
        .unwrap();
    let rules = String::from_utf8(rules.stdout).unwrap();
    assert_eq!(
        rules.matches("from 198.18.2.2 lookup 102").count(),
        1,
        "{rules}"
    );
    assert_eq!(lab.config(), cfg);
    lab.check_path(Link::Untrusted, Duration::from_secs(2))
        .unwrap();
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn rate_limit_shapes_the_link() {
    let rate = Rate::mbit(16);
    let cfg = LabConfig {
        untrusted_rate: Some(rate),
        ..LabConfig::with_prefix(unique_prefix())
    };
    let lab = LabGuard::up(&cfg).unwrap();
    let data = vec![0x5a; 2_000_000]; // 1 s at 16 mbit
    let (got, took) = transfer(&lab, Link::Untrusted, data.clone());
    assert_eq!(got.len(), data.len());
    let mbit = data.len() as f64 * 8.0 / took.as_secs_f64() / 1e6;
    assert!(
        mbit < 16.0 * 1.2 && mbit > 16.0 * 0.4,
        "untrusted ran at {mbit:.1} mbit/s with a 16mbit limit"
    );
    // the unlimited trusted link is much faster
    let (_, took_t) = transfer(&lab, Link::Trusted, data.clone());
    assert!(
        took_t < took / 2,
        "trusted {took_t:?} vs untrusted {took:?}"
    );
    // removing the limit and setting another one
    lab.set_rate(Link::Untrusted, None).unwrap();
    let st = Lab::status(lab.prefix()).unwrap();
    assert_eq!(st.links[1].rate, None);
    lab.set_rate(Link::Trusted, Some(Rate::mbit(8))).unwrap();
    let st = Lab::status(lab.prefix()).unwrap();
    assert_eq!(
        (st.links[0].rate, st.links[0].router_rate),
        (Some(Rate::mbit(8)), Some(Rate::mbit(8)))
    );
    assert_eq!(lab.config().trusted_rate, Some(Rate::mbit(8)));
    assert_eq!(lab.config().untrusted_rate, None);
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn link_down_and_up() {
    let lab = LabGuard::unique().unwrap();
    lab.set_link(Link::Untrusted, false).unwrap();
    let st = Lab::status(lab.prefix()).unwrap();
    assert!(!st.links[1].up && st.links[0].up);
    assert!(lab
        .check_path(Link::Untrusted, Duration::from_millis(500))
        .is_err());
    // the trusted path is unaffected
    lab.check_path(Link::Trusted, Duration::from_secs(2))
        .unwrap();
    lab.set_link(Link::Untrusted, true).unwrap();
    lab.check_path(Link::Untrusted, Duration::from_secs(2))
        .unwrap();
    // the server link too: routes come back after up
    lab.set_link(Link::Server, false).unwrap();
    assert!(lab
        .check_path(Link::Trusted, Duration::from_millis(500))
        .is_err());
    lab.set_link(Link::Server, true).unwrap();
    lab.check_path(Link::Trusted, Duration::from_secs(2))
        .unwrap();
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn capture_writes_a_pcap_and_down_stops_captures() {
    let dir = std::env::temp_dir().join(format!("nena-lab-test-{}", unique_prefix()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("untrusted.pcap");
    let prefix;
    {
        let lab = LabGuard::unique().unwrap();
        prefix = lab.prefix().to_string();
        let cap = lab.capture(Link::Untrusted, &file).unwrap();
        assert_eq!(lab.captures().len(), 1);
        let marker = b"eavesdrop-me-0123456789".repeat(40);
        transfer(&lab, Link::Untrusted, marker.clone());
        let stats = cap.stop().unwrap();
        assert!(stats.captured.unwrap() >= 4, "{stats:?}");
        let bytes = std::fs::read(&file).unwrap();
        assert_eq!(&bytes[..4], &0xa1b2c3d4u32.to_le_bytes(), "not a pcap file");
        assert!(
            bytes.windows(23).any(|w| w == &marker[..23]),
            "payload missing from the capture"
        );
        assert!(lab.captures().is_empty());

        // a background capture (detached handle) is stopped by down
        let pid = lab
            .capture(Link::Trusted, &dir.join("bg.pcap"))
            .unwrap()
            .detach();
        assert!(Path::new(&format!("/proc/{pid}")).exists());
        assert_eq!(lab.captures()[0].pid, pid);
        drop(lab);
        let alive = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z"))
        };
        nena_testkit::poll_until(Duration::from_secs(2), || !alive());
        assert!(!alive(), "background tcpdump {pid} survived down");
    }
    assert_gone(&prefix);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn down_cleans_a_half_built_lab_with_leftover_processes() {
    /// Removes the lab even if an assertion below fails.
    struct Cleanup(String);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = Lab::down(&self.0);
        }
    }
    let prefix = unique_prefix();
    let _cleanup = Cleanup(prefix.clone());
    // what a crash during `up` could leave: two namespaces, one veth, a process inside
    let client = format!("{prefix}-client");
    let router = format!("{prefix}-router");
    for ns in [&client, &router] {
        assert!(Command::new("ip")
            .args(["netns", "add", ns])
            .status()
            .unwrap()
            .success());
    }
    assert!(Command::new("ip")
        .args([
            "-n", &client, "link", "add", "name", "trusted", "type", "veth", "peer", "name",
            "trusted", "netns", &router
        ])
        .status()
        .unwrap()
        .success());
    std::fs::create_dir_all(state_dir(&prefix)).unwrap();
    let mut sleeper = Command::new("ip")
        .args(["netns", "exec", &client, "sleep", "60"])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    // `ip netns exec` enters the namespace, then executes sleep in its own place
    let pid = sleeper.id();
    nena_testkit::wait_until(
        "the sleeper to run inside the client namespace",
        Duration::from_secs(5),
        || std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sleep"),
    );
    let st = Lab::status(&prefix).unwrap();
    assert!(st.partial && !st.up);
    assert!(Lab::open(&prefix).is_err());
    Lab::down(&prefix).unwrap();
    assert_gone(&prefix);
    let waited = sleeper.wait().unwrap();
    assert!(
        !waited.success(),
        "the process inside the namespace was not stopped"
    );
    // and the same prefix can be brought up cleanly afterwards
    let lab = LabGuard::up(&LabConfig::with_prefix(&prefix)).unwrap();
    lab.check_path(Link::Trusted, Duration::from_secs(2))
        .unwrap();
}

#[test]
fn bad_prefixes_and_missing_labs_are_clear_errors() {
    for bad in ["", "a b", "-x", "way-too-long-prefix-for-a-lab-name"] {
        let e = Lab::up(&LabConfig::with_prefix(bad)).unwrap_err();
        assert!(format!("{e:#}").contains("invalid lab prefix"), "{e:#}");
    }
    let e = Lab::open("ntnotthere").unwrap_err();
    assert!(format!("{e:#}").contains("not up"), "{e:#}");
}

/// Largest TCP payload of any segment in a capture of a 100 kB transfer over `link`.
fn largest_segment(lab: &Lab, link: Link, file: &Path) -> usize {
    let cap = lab.capture(link, file).unwrap();
    let data = vec![7u8; 100_000];
    assert_eq!(transfer(lab, link, data).0.len(), 100_000);
    cap.stop().unwrap();
    let a = nena_analyze::analyze_file(file, &nena_analyze::Options::default()).unwrap();
    assert_eq!(a.payload_bytes, 100_000, "{:?}", a.flows);
    a.shown.iter().map(|s| s.len).max().unwrap()
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn offloads_off_gives_wire_sized_segments() {
    let dir = std::env::temp_dir().join(format!("nena-lab-offload-{}", unique_prefix()));
    std::fs::create_dir_all(&dir).unwrap();
    let prefix = unique_prefix();
    let lab = LabGuard::up(&LabConfig {
        offload: false,
        ..LabConfig::with_prefix(&prefix)
    })
    .unwrap();
    let st = Lab::status(&prefix).unwrap();
    assert!(
        st.links.iter().all(|l| l.gso == Some(false)),
        "{:?}",
        st.links
    );
    let max = largest_segment(&lab, Link::Untrusted, &dir.join("a.pcap"));
    assert!(max <= 1448, "a {max}-byte segment with offloads off");
    // reconciling to the default brings GSO back: super-packets appear on the capture
    Lab::up(&LabConfig::with_prefix(&prefix)).unwrap();
    let st = Lab::status(&prefix).unwrap();
    assert!(
        st.links.iter().all(|l| l.gso == Some(true)),
        "{:?}",
        st.links
    );
    let max = largest_segment(&lab, Link::Untrusted, &dir.join("b.pcap"));
    assert!(
        max > 1448,
        "offloads on, yet the largest segment is {max} bytes"
    );
    drop(lab);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A test process killed with SIGKILL cannot tear its lab down; the next test process
/// removes it (`unique_prefix`'s first call runs `reclaim_dead_test_labs`), and leaves
/// alone the labs of processes that still run.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn labs_of_dead_test_processes_are_reclaimed_and_live_ones_kept() {
    // A pid that ran and is gone (reaped): its "lab" is three bare namespaces.
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let dead_prefix = format!("nt{dead}x0");
    let live_prefix = format!("nt{}x9999", std::process::id());
    let names: Vec<String> = ["client", "router", "server"]
        .iter()
        .map(|h| format!("{dead_prefix}-{h}"))
        .chain([format!("{live_prefix}-client")])
        .collect();
    struct Remove(Vec<String>);
    impl Drop for Remove {
        fn drop(&mut self) {
            for n in &self.0 {
                if Path::new("/run/netns").join(n).exists() {
                    let _ = Command::new("ip").args(["netns", "del", n]).status();
                }
            }
        }
    }
    let _cleanup = Remove(names.clone());
    for n in &names {
        let st = Command::new("ip")
            .args(["netns", "add", n])
            .status()
            .unwrap();
        assert!(st.success(), "ip netns add {n}");
    }
    let failed = reclaim_dead_test_labs();
    assert!(failed.is_empty(), "{failed:?}");
    assert_gone(&dead_prefix);
    assert!(
        namespaces()
            .split_whitespace()
            .any(|w| w == format!("{live_prefix}-client")),
        "the lab of a live process was removed: {}",
        namespaces()
    );
}
