//! Integration tests of the LAN host behind the client (`LabConfig::lan`, `nena lab up
//! --lan`; need root and iproute2, as CI has). Each test builds its own lab with a unique
//! prefix inside a guard that removes it, also when an assertion fails.

use nena_lab::*;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The namespaces of `prefix` in /run/netns.
fn namespaces_of(prefix: &str) -> Vec<String> {
    std::fs::read_dir("/run/netns")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with(&format!("{prefix}-")))
                .collect()
        })
        .unwrap_or_default()
}

/// `ip ARGS` inside a host; its stdout (the test fails on an error).
fn ip_in(lab: &Lab, host: Host, args: &[&str]) -> String {
    let out = lab.command(host, "ip", args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {args:?} in {host}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A TCP connection from the LAN host to a fresh listener on `addr` in the client: the
/// listener sees the LAN host's address and the bytes come back. Returns the peer address
/// the client saw.
fn round_trip_from_lan(lab: &Lab, addr: IpAddr) -> SocketAddr {
    let listener = lab
        .run_in(Host::Client, move || {
            TcpListener::bind(SocketAddr::new(addr, 0))
        })
        .unwrap()
        .unwrap();
    let dst = listener.local_addr().unwrap();
    let echo = std::thread::spawn(move || {
        let (mut s, peer) = listener.accept().unwrap();
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf).unwrap();
        s.write_all(&buf).unwrap();
        peer
    });
    let mut c = lab
        .run_in(Host::Lan, move || {
            TcpStream::connect_timeout(&dst, Duration::from_secs(3))
        })
        .unwrap()
        .unwrap_or_else(|e| panic!("connect from the LAN host to {dst}: {e}"));
    c.write_all(b"hello").unwrap();
    let mut back = [0u8; 5];
    c.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"hello");
    echo.join().unwrap()
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn the_lan_host_is_dual_stack_behind_a_client_that_does_not_forward() {
    let prefix = unique_prefix();
    {
        let lab = LabGuard::up(&LabConfig {
            lan: true,
            ..LabConfig::with_prefix(&prefix)
        })
        .unwrap();
        assert_eq!(lab.netns(Host::Lan), format!("{prefix}-lan"));

        // both addresses on eth0, both default routes via the client
        let addrs = ip_in(&lab, Host::Lan, &["addr", "show", "dev", "eth0"]);
        assert!(addrs.contains("inet 198.18.5.2/24"), "{addrs}");
        assert!(addrs.contains("inet6 2001:2:0:5::2/64"), "{addrs}");
        let r4 = ip_in(&lab, Host::Lan, &["-4", "route", "show", "default"]);
        assert!(r4.contains("default via 198.18.5.1 dev eth0"), "{r4}");
        let r6 = ip_in(&lab, Host::Lan, &["-6", "route", "show", "default"]);
        assert!(r6.contains("default via 2001:2:0:5::1 dev eth0"), "{r6}");
        let client = ip_in(&lab, Host::Client, &["addr", "show", "dev", "lan"]);
        assert!(
            client.contains("inet 198.18.5.1/24") && client.contains("inet6 2001:2:0:5::1/64"),
            "{client}"
        );
        // IPv6 stays off on the client's other links
        let trusted = ip_in(
            &lab,
            Host::Client,
            &["-6", "addr", "show", "dev", "trusted"],
        );
        assert!(trusted.trim().is_empty(), "{trusted}");

        // status reads it all back
        let st = Lab::status(&prefix).unwrap();
        assert!(st.up && !st.partial, "{st:?}");
        assert!(st.hosts.iter().any(|h| h.host == Host::Lan && h.exists));
        let link = st.links.iter().find(|l| l.link == Link::Lan).unwrap();
        assert!(link.exists && link.up, "{link:?}");
        assert_eq!(
            (
                link.edge_iface.as_str(),
                link.router_host,
                link.router_iface.as_str()
            ),
            ("lan", Host::Lan, "eth0")
        );
        let lan = st.lan.expect("the status of the LAN host");
        assert!(lan.exists);
        assert_eq!(lan.addrs, ["198.18.5.2/24", "2001:2:0:5::2/64"]);
        assert_eq!(lan.gateway.as_deref(), Some("198.18.5.1"));
        assert_eq!(lan.gateway6.as_deref(), Some("2001:2:0:5::1"));
        assert_eq!(lan.client_ip_forward, Some(false));
        assert_eq!(lan.client_ipv6_forwarding, Some(false));

        // TCP from the LAN host reaches listeners in the client, IPv4 and IPv6
        let peer = round_trip_from_lan(&lab, IpAddr::V4(LAN_GATEWAY_ADDR));
        assert_eq!(peer.ip(), IpAddr::V4(LAN_HOST_ADDR));
        let peer = round_trip_from_lan(&lab, IpAddr::V6(LAN_GATEWAY_ADDR6));
        assert_eq!(peer.ip(), IpAddr::V6(LAN_HOST_ADDR6));

        // ...but not the server: the client does not forward. For this check the router
        // knows the way back to the LAN (the lab gives it none), so the client alone stops it.
        ip_in(
            &lab,
            Host::Router,
            &[
                "route",
                "replace",
                "198.18.5.0/24",
                "via",
                "198.18.1.2",
                "dev",
                "trusted",
            ],
        );
        let server = lab.listen_on_server(0).unwrap();
        server.set_nonblocking(true).unwrap();
        let dst = server.local_addr().unwrap();
        let tried = lab
            .run_in(Host::Lan, move || {
                TcpStream::connect_timeout(&dst, Duration::from_millis(500))
            })
            .unwrap();
        assert!(tried.is_err(), "the LAN host reached the server at {dst}");
        assert_eq!(
            server.accept().map(|(_, p)| p).unwrap_err().kind(),
            ErrorKind::WouldBlock,
            "the server saw a connection from the LAN"
        );
        // the control: a client that forwarded would let the same connection through
        let forward = |on: &str| {
            let st = lab
                .command(
                    Host::Client,
                    "sysctl",
                    ["-q", "-w", &format!("net.ipv4.ip_forward={on}")],
                )
                .status()
                .unwrap();
            assert!(st.success());
        };
        forward("1");
        let through = lab
            .run_in(Host::Lan, move || {
                TcpStream::connect_timeout(&dst, Duration::from_secs(3))
            })
            .unwrap();
        forward("0");
        let through = through.expect("with forwarding on the LAN host reaches the server");
        let local = through.local_addr().unwrap();
        assert_eq!(local.ip(), IpAddr::V4(LAN_HOST_ADDR));
        let peer = nena_testkit::wait_for(
            "the server to accept the forwarded connection",
            Duration::from_secs(3),
            || server.accept().ok().map(|(_, p)| p),
        );
        assert_eq!(peer, local);
        ip_in(&lab, Host::Router, &["route", "del", "198.18.5.0/24"]);
        // the server is still reachable from the client itself
        lab.check_path(Link::Trusted, Duration::from_secs(2))
            .unwrap();

        // the LAN link goes down and comes back with its routes and IPv6 addresses
        lab.set_link(Link::Lan, false).unwrap();
        assert!(lab.check_lan(Duration::from_millis(300)).is_err());
        lab.set_link(Link::Lan, true).unwrap();
        lab.check_path(Link::Lan, Duration::from_secs(3)).unwrap();

        // a capture of the LAN link (on the client's `lan`) sees the LAN's packets
        let dir = std::env::temp_dir().join(format!("nena-lan-test-{prefix}"));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("lan.pcap");
        let cap = lab.capture(Link::Lan, &file).unwrap();
        round_trip_from_lan(&lab, IpAddr::V6(LAN_GATEWAY_ADDR6));
        let stats = cap.stop().unwrap();
        assert!(stats.captured.unwrap() >= 4, "{stats:?}");
        let pcap = std::fs::read(&file).unwrap();
        assert!(
            pcap.windows(16).any(|w| w == LAN_HOST_ADDR6.octets()),
            "no packet of 2001:2:0:5::2 in the capture of the lan link"
        );
        std::fs::remove_dir_all(&dir).unwrap();

        // no rate limit or emulation on the LAN link: refused with the reason
        let e = lab.set_rate(Link::Lan, Some(Rate::mbit(10))).unwrap_err();
        assert!(format!("{e}").contains("lan link has no rate limit"), "{e}");
    }
    // dropping the guard took the LAN host down with the rest
    assert_eq!(namespaces_of(&prefix), Vec::<String>::new());
    assert!(!state_dir(&prefix).exists());
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn up_reconciles_the_lan_host_in_and_out() {
    let prefix = unique_prefix();
    let plain = LabConfig::with_prefix(&prefix);
    let with_lan = LabConfig {
        lan: true,
        ..plain.clone()
    };
    let lab = LabGuard::up(&plain).unwrap();
    // a lab without --lan has no LAN host, and says so
    let e = lab.require_host(Host::Lan).unwrap_err();
    assert!(format!("{e}").contains("run `nena lab up --lan`"), "{e}");
    assert!(lab
        .capture(Link::Lan, &std::env::temp_dir().join("never.pcap"))
        .is_err());
    let st = Lab::status(&prefix).unwrap();
    assert!(st.lan.is_none() && st.links.len() == 3 && st.hosts.len() == 3);

    // --lan added later builds it; twice is harmless
    Lab::up(&with_lan).unwrap();
    Lab::up(&with_lan).unwrap();
    lab.check_lan(Duration::from_secs(3)).unwrap();
    let r6 = ip_in(&lab, Host::Lan, &["-6", "route", "show", "default"]);
    assert_eq!(r6.lines().count(), 1, "{r6}");
    let a6 = ip_in(
        &lab,
        Host::Client,
        &["-6", "addr", "show", "dev", "lan", "scope", "global"],
    );
    assert_eq!(a6.matches("inet6 ").count(), 1, "{a6}");
    assert!(lab.config().lan);

    // up without --lan removes it, processes inside first
    let mut sleeper = lab
        .command(Host::Lan, "sleep", ["60"])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let pid = sleeper.id();
    nena_testkit::wait_until(
        "the sleeper to run inside the LAN host",
        Duration::from_secs(5),
        || std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sleep"),
    );
    Lab::up(&plain).unwrap();
    assert!(!sleeper.wait().unwrap().success(), "the sleeper survived");
    assert!(!namespaces_of(&prefix).contains(&format!("{prefix}-lan")));
    let links = ip_in(&lab, Host::Client, &["-o", "link", "show"]);
    assert!(!links.contains(" lan@"), "{links}");
    assert!(Lab::status(&prefix).unwrap().lan.is_none());
    lab.check_path(Link::Untrusted, Duration::from_secs(2))
        .unwrap();
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn down_removes_a_half_built_lan_host() {
    /// Removes the lab even if an assertion below fails.
    struct Cleanup(String);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = Lab::down(&self.0);
        }
    }
    let prefix = unique_prefix();
    let _cleanup = Cleanup(prefix.clone());
    // what a crash during `up --lan` could leave: the client and the LAN host, half linked
    let client = format!("{prefix}-client");
    let lan = format!("{prefix}-lan");
    for ns in [&client, &lan] {
        assert!(Command::new("ip")
            .args(["netns", "add", ns])
            .status()
            .unwrap()
            .success());
    }
    assert!(Command::new("ip")
        .args([
            "-n", &client, "link", "add", "name", "lan", "type", "veth", "peer", "name", "eth0",
            "netns", &lan
        ])
        .status()
        .unwrap()
        .success());
    let st = Lab::status(&prefix).unwrap();
    assert!(st.partial && !st.up, "{st:?}");
    assert!(st.lan.is_some_and(|l| l.exists));
    Lab::down(&prefix).unwrap();
    assert_eq!(namespaces_of(&prefix), Vec::<String>::new());
    let st = Lab::status(&prefix).unwrap();
    assert!(!st.partial && !st.up && st.lan.is_none(), "{st:?}");
}
