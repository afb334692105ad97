//! Integration tests of the lab's address families, NAT and MPTCP-option stripping on the
//! untrusted link (`LabConfig::{trusted_family, untrusted_family, untrusted_nat,
//! untrusted_strip_mptcp}`, `nena lab up --ipv6 ...`; need root, iproute2, nftables,
//! tcpdump and tshark, as `make test` installs). Each test builds its own lab with a unique
//! prefix inside a guard that removes it, also when an assertion fails.

use nena_lab::*;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn lab_with(f: impl FnOnce(&mut LabConfig)) -> LabGuard {
    let mut cfg = LabConfig::with_prefix(unique_prefix());
    f(&mut cfg);
    LabGuard::up(&cfg).expect("lab up")
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

/// A TCP connection from the client's address of `dst`'s family on `link` to a fresh
/// listener in the server at `server`; bytes go both ways. Returns the source address the
/// client used and the peer address the server saw.
fn round_trip(lab: &Lab, link: Link, server: IpAddr) -> (SocketAddr, SocketAddr) {
    let listener = lab
        .run_in(Host::Server, move || {
            TcpListener::bind(SocketAddr::new(server, 0))
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
        .connect(link, dst, Duration::from_secs(3))
        .unwrap_or_else(|e| panic!("{e:#}"));
    c.write_all(b"hello").unwrap();
    let mut back = [0u8; 5];
    c.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"hello");
    (c.local_addr().unwrap(), echo.join().unwrap())
}

/// An absolute kernel counter (`nstat -saz NAME`) in a host; 0 when it never counted.
fn counter(lab: &Lab, host: Host, name: &str) -> u64 {
    let out = lab.command(host, "nstat", ["-saz", name]).output().unwrap();
    assert!(
        out.status.success(),
        "nstat: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some(name)).then(|| w.next().unwrap().parse().unwrap())
        })
        .unwrap_or(0)
}

/// One kernel MPTCP connection from the client's trusted address to the server: `n` bytes
/// up, then `between` runs (with the connection open), then the close. Returns what the
/// server received and the peer addresses of the server's TCP sockets on the port while
/// the connection was open (its subflows).
fn mptcp_upload(
    lab: &Lab,
    server: IpAddr,
    n: usize,
    between: impl FnOnce(&str),
) -> (usize, Vec<String>) {
    let listen = SocketAddr::new(server, 0);
    let l = lab
        .run_in(
            Host::Server,
            move || -> std::io::Result<std::net::TcpListener> {
                let s = mptcp_socket(listen)?;
                s.set_reuse_address(true)?;
                s.bind(&listen.into())?;
                s.listen(8)?;
                Ok(s.into())
            },
        )
        .unwrap()
        .unwrap();
    let dst = l.local_addr().unwrap();
    let sink = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        got.len()
    });
    let src = SocketAddr::new(Link::Trusted.edge().addr_of(dst.is_ipv6()), 0);
    let mut c: std::net::TcpStream = lab
        .run_in(
            Host::Client,
            move || -> std::io::Result<std::net::TcpStream> {
                let s = mptcp_socket(dst)?;
                s.bind(&src.into())?;
                s.connect_timeout(&dst.into(), Duration::from_secs(3))?;
                Ok(s.into())
            },
        )
        .unwrap()
        .unwrap();
    c.write_all(&vec![0x42u8; n]).unwrap();
    let port = dst.port().to_string();
    between(&port);
    let subflows: Vec<String> = ip_in_ss(lab, &port);
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let got = sink.join().unwrap();
    (got, subflows)
}

/// Waits (5 s at most, naming `what`) until the server has an established subflow on
/// `port` from a peer starting with `peer`: the server's own view, read next by the test
/// (the client counts the join's SYN-ACK before the server has the join's ACK).
fn wait_server_subflow(lab: &Lab, port: &str, peer: &str, what: &str) {
    nena_testkit::wait_until(what, Duration::from_secs(5), || {
        ip_in_ss(lab, port).iter().any(|p| p.starts_with(peer))
    });
}

/// The peers of the server's established TCP sockets on `port` (`ss -tnH`).
fn ip_in_ss(lab: &Lab, port: &str) -> Vec<String> {
    let out = lab
        .command(
            Host::Server,
            "ss",
            [
                "-tnH",
                "state",
                "established",
                "sport",
                "=",
                &format!(":{port}"),
            ],
        )
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().last().map(str::to_string))
        .collect()
}

/// Frames of a capture matching a Wireshark display filter (tshark reads the file).
fn frames(cap: &Path, filter: &str) -> usize {
    let o = Command::new("tshark")
        .args(["-n", "-r", cap.to_str().unwrap(), "-Y", filter])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "tshark {filter}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).lines().count()
}

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("nena-families-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn an_ipv6_lab_reaches_the_server_over_both_links_by_ipv6_and_ipv4() {
    let lab = lab_with(|c| {
        (c.trusted_family, c.untrusted_family) = LabConfig::families(true, None, None).unwrap();
    });
    for link in [Link::Trusted, Link::Untrusted] {
        let (src, peer) = round_trip(&lab, link, IpAddr::V6(SERVER_ADDR6));
        assert_eq!(src.ip(), IpAddr::V6(link.edge().addr6));
        assert_eq!(peer, src, "the server sees the {link} address");
        // and the packets leave by the link of their source (the IPv6 source rules)
        let route = ip_in(
            &lab,
            Host::Client,
            &[
                "-6",
                "route",
                "get",
                &SERVER_ADDR6.to_string(),
                "from",
                &src.ip().to_string(),
            ],
        );
        assert!(
            route.contains(&format!("dev {}", link.edge().iface)),
            "{route}"
        );
        let (src4, peer4) = round_trip(&lab, link, IpAddr::V4(SERVER_ADDR));
        assert_eq!((src4.ip(), peer4), (IpAddr::V4(link.edge().addr), src4));
    }
    assert_eq!(
        lab.server_addr(),
        IpAddr::V4(SERVER_ADDR),
        "dual: IPv4 first"
    );
    let st = Lab::status(lab.prefix()).unwrap();
    for l in &st.links {
        assert_eq!(l.family, Some(Family::Dual), "{:?}", l.link);
        assert_eq!(
            l.edge_addr6.as_deref(),
            Some(l.link.edge().cidr6().as_str())
        );
        assert_eq!(
            l.router_addr6.as_deref(),
            Some(l.link.router().cidr6().as_str())
        );
    }
    assert_eq!(st.router_ipv6_forwarding, Some(true));
    let eps = st.mptcp.unwrap().client_endpoints.join("\n");
    assert!(
        eps.contains("2001:2:0:2::2") && eps.contains("dev untrusted"),
        "{eps}"
    );
    // kernel MPTCP over IPv6: the in-kernel path manager joins from the untrusted IPv6
    // address
    let (got, subflows) = mptcp_upload(&lab, IpAddr::V6(SERVER_ADDR6), 100_000, |port| {
        wait_server_subflow(&lab, port, "[2001:2:0:2::2]", "the IPv6 join")
    });
    assert_eq!(got, 100_000);
    assert!(
        subflows.iter().any(|p| p.starts_with("[2001:2:0:2::2]")),
        "{subflows:?}"
    );
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn a_mixed_lab_carries_only_each_links_family() {
    let dir = Scratch::new("mixed");
    let lab = lab_with(|c| {
        c.trusted_family = Family::Ipv6;
        c.untrusted_family = Family::Ipv4;
    });
    // the trusted link: no IPv4 address at either end; the untrusted one: no global IPv6
    for host in [Host::Client, Host::Router] {
        let v4 = ip_in(&lab, host, &["-4", "-o", "addr", "show", "dev", "trusted"]);
        assert!(v4.trim().is_empty(), "{host}: {v4}");
        let v6 = ip_in(
            &lab,
            host,
            &[
                "-6",
                "-o",
                "addr",
                "show",
                "dev",
                "untrusted",
                "scope",
                "global",
            ],
        );
        assert!(v6.trim().is_empty(), "{host}: {v6}");
    }
    // the server link is dual stack; the runs' server address follows the trusted link
    assert_eq!(lab.server_addr(), IpAddr::V6(SERVER_ADDR6));
    assert_eq!(
        lab.server_addr_for(Link::Untrusted),
        IpAddr::V4(SERVER_ADDR)
    );
    assert_eq!(
        lab.server_listen_addr(4433).to_string(),
        "[::]:4433",
        "a server reachable over both links listens on both families"
    );
    // the client's IPv4 leaves by the untrusted link, its IPv6 by the trusted one
    let r4 = ip_in(
        &lab,
        Host::Client,
        &["-4", "route", "get", &SERVER_ADDR.to_string()],
    );
    assert!(r4.contains("dev untrusted"), "{r4}");
    let r6 = ip_in(
        &lab,
        Host::Client,
        &["-6", "route", "get", &SERVER_ADDR6.to_string()],
    );
    assert!(r6.contains("dev trusted"), "{r6}");
    let rules4 = ip_in(&lab, Host::Client, &["-4", "rule"]);
    assert!(
        !rules4.contains("lookup 101") && rules4.contains("from 198.18.2.2 lookup 102"),
        "{rules4}"
    );
    let rules6 = ip_in(&lab, Host::Client, &["-6", "rule"]);
    assert!(
        rules6.contains("from 2001:2:0:1::2 lookup 101") && !rules6.contains("lookup 102"),
        "{rules6}"
    );
    // a link refuses the family it does not carry
    let e = lab
        .connect(
            Link::Trusted,
            SocketAddr::new(IpAddr::V4(SERVER_ADDR), 9),
            Duration::from_secs(1),
        )
        .unwrap_err();
    assert!(format!("{e:#}").contains("carries ipv6 only"), "{e:#}");
    // traffic over both links, each captured: each link carries its family alone
    let (ct, cu) = (dir.0.join("t.pcap"), dir.0.join("u.pcap"));
    let cap_t = lab.capture(Link::Trusted, &ct).unwrap();
    let cap_u = lab.capture(Link::Untrusted, &cu).unwrap();
    let (src6, peer6) = round_trip(&lab, Link::Trusted, lab.server_addr());
    assert_eq!(
        (src6.ip(), peer6),
        (IpAddr::V6(Link::Trusted.edge().addr6), src6)
    );
    let (src4, peer4) = round_trip(&lab, Link::Untrusted, lab.server_addr_for(Link::Untrusted));
    assert_eq!(
        (src4.ip(), peer4),
        (IpAddr::V4(Link::Untrusted.edge().addr), src4)
    );
    cap_t.stop().unwrap();
    cap_u.stop().unwrap();
    assert!(
        frames(&ct, "ipv6 && tcp") >= 6,
        "the trusted link carried the IPv6 connection"
    );
    assert_eq!(frames(&ct, "ip"), 0, "no IPv4 on the trusted link");
    assert!(
        frames(&cu, "ip && tcp") >= 6,
        "the untrusted link carried the IPv4 connection"
    );
    assert_eq!(
        frames(&cu, "ipv6 && tcp"),
        0,
        "no IPv6 TCP on the untrusted link"
    );
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn behind_the_nat_the_server_sees_the_routers_address() {
    let lab = lab_with(|c| {
        c.trusted_family = Family::Dual;
        c.untrusted_family = Family::Dual;
        c.untrusted_nat = true;
    });
    let st = Lab::status(lab.prefix()).unwrap();
    assert!(st.untrusted_nat && !st.untrusted_strip_mptcp);
    for v6 in [false, true] {
        let server = Link::Server.edge().addr_of(v6);
        let (src, peer) = round_trip(&lab, Link::Untrusted, server);
        assert_eq!(src.ip(), Link::Untrusted.edge().addr_of(v6));
        assert_eq!(
            peer.ip(),
            Link::Server.router().addr_of(v6),
            "the server sees the router's address, not {src}"
        );
        // the trusted link is not NATed
        let (src, peer) = round_trip(&lab, Link::Trusted, server);
        assert_eq!(peer, src);
    }
    // kernel MPTCP joins through the NAT: the server's second subflow comes from the router
    let (got, subflows) = mptcp_upload(&lab, IpAddr::V4(SERVER_ADDR), 100_000, |port| {
        wait_server_subflow(&lab, port, "198.18.3.1:", "the join through the NAT")
    });
    assert_eq!(got, 100_000);
    assert!(
        subflows.iter().any(|p| p.starts_with("198.18.3.1:")),
        "{subflows:?}"
    );
    assert!(
        subflows.iter().any(|p| p.starts_with("198.18.1.2:")),
        "{subflows:?}"
    );
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn a_link_that_strips_mptcp_options_keeps_mptcp_on_the_trusted_link_alone() {
    let dir = Scratch::new("strip");
    let lab = lab_with(|c| c.untrusted_strip_mptcp = true);
    let st = Lab::status(lab.prefix()).unwrap();
    assert!(st.untrusted_strip_mptcp && !st.untrusted_nat);
    // checksums computed in software on every interface, so that the captures hold the
    // real ones (with offload a veth's capture shows a partial sum)
    for link in [Link::Trusted, Link::Untrusted, Link::Server] {
        for e in link.ends() {
            let o = lab
                .command(e.host, "ethtool", ["-K", e.iface, "tx", "off"])
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        }
    }
    let caps: Vec<(Link, PathBuf)> = [Link::Trusted, Link::Untrusted, Link::Server]
        .into_iter()
        .map(|l| (l, dir.0.join(format!("{l}.pcap"))))
        .collect();
    let running: Vec<Capture> = caps
        .iter()
        .map(|(l, p)| lab.capture(*l, p).unwrap())
        .collect();
    let (got, subflows) = mptcp_upload(&lab, IpAddr::V4(SERVER_ADDR), 200_000, |_| {
        // the path manager tries the untrusted address; the attempt ends with the client's
        // reset of a subflow whose SYN-ACK has no MP_JOIN
        nena_testkit::wait_until("the join attempt", Duration::from_secs(5), || {
            counter(&lab, Host::Client, "MPTcpExtMPJoinSynTx") >= 1
                && counter(&lab, Host::Client, "MPTcpExtMPRstTx") >= 1
        });
    });
    for c in running {
        c.stop().unwrap();
    }
    assert_eq!(got, 200_000, "the connection over the trusted link works");
    assert_eq!(counter(&lab, Host::Client, "MPTcpExtMPCapableSYNACKRX"), 1);
    assert_eq!(
        counter(&lab, Host::Client, "MPTcpExtMPJoinSynAckRx"),
        0,
        "no join succeeded"
    );
    assert_eq!(
        subflows,
        vec![subflows[0].clone()],
        "one subflow: {subflows:?}"
    );
    assert!(subflows[0].starts_with("198.18.1.2:"), "{subflows:?}");
    let cap = |l: Link| caps.iter().find(|c| c.0 == l).unwrap().1.clone();
    // control: the trusted link carries MPTCP options (tshark sees option 30)
    assert!(frames(&cap(Link::Trusted), "tcp.option_kind == 30") >= 3);
    // the join's SYN reached the server without option 30
    let syns = "ip.src == 198.18.2.2 && tcp.flags.syn == 1 && tcp.flags.ack == 0";
    assert!(
        frames(&cap(Link::Server), syns) >= 1,
        "the join's SYN crossed"
    );
    assert_eq!(
        frames(
            &cap(Link::Server),
            "ip.src == 198.18.2.2 && tcp.option_kind == 30"
        ),
        0,
        "no MPTCP option left the untrusted link towards the server"
    );
    // and nothing from the server crossed the untrusted link with option 30
    let from_server = "ip.src == 198.18.3.2 && tcp";
    assert!(
        frames(&cap(Link::Untrusted), from_server) >= 1,
        "the SYN-ACK came back"
    );
    assert_eq!(
        frames(
            &cap(Link::Untrusted),
            &format!("{from_server} && tcp.option_kind == 30")
        ),
        0,
        "no MPTCP option reached the client over the untrusted link"
    );
    // the client answered the stripped SYN-ACK with a reset
    assert!(
        frames(
            &cap(Link::Untrusted),
            "ip.src == 198.18.2.2 && tcp.flags.reset == 1"
        ) >= 1,
        "the client answered the stripped SYN-ACK"
    );
    // and the stripped segments' TCP checksums are right (tshark checks every one)
    for (l, p) in &caps {
        assert_eq!(checksums(p, 0), 0, "a bad TCP checksum on the {l} link");
        assert_eq!(
            checksums(p, 1),
            frames(p, "tcp"),
            "unverified checksums on {l}"
        );
    }
}

/// Frames of a capture whose TCP checksum tshark finds bad (`status` 0) or good (1).
fn checksums(cap: &Path, status: u8) -> usize {
    let o = Command::new("tshark")
        .args([
            "-n",
            "-o",
            "tcp.check_checksum:TRUE",
            "-r",
            cap.to_str().unwrap(),
        ])
        .args(["-Y", &format!("tcp.checksum.status == {status}")])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).lines().count()
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn up_again_without_the_settings_removes_them() {
    let lab = lab_with(|c| {
        c.trusted_family = Family::Dual;
        c.untrusted_family = Family::Ipv6;
        c.untrusted_nat = true;
        c.untrusted_strip_mptcp = true;
    });
    let st = Lab::status(lab.prefix()).unwrap();
    assert!(st.untrusted_nat && st.untrusted_strip_mptcp);
    assert_eq!(st.links[1].family, Some(Family::Ipv6));
    assert_eq!(st.links[1].edge_addr, None);
    Lab::up(&LabConfig::with_prefix(lab.prefix())).unwrap();
    let st = Lab::status(lab.prefix()).unwrap();
    assert!(!st.untrusted_nat && !st.untrusted_strip_mptcp);
    assert_eq!(st.router_ipv6_forwarding, Some(false));
    for l in &st.links {
        assert_eq!(l.family, Some(Family::Ipv4), "{:?}", l.link);
        assert_eq!(l.edge_addr6, None);
    }
    let rules6 = ip_in(&lab, Host::Client, &["-6", "rule"]);
    assert!(!rules6.contains("lookup 10"), "{rules6}");
    let eps = ip_in(&lab, Host::Client, &["mptcp", "endpoint", "show"]);
    assert!(
        eps.contains("198.18.2.2") && !eps.contains("2001:"),
        "{eps}"
    );
    let tables = lab
        .command(Host::Router, "nft", ["list", "tables"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&tables.stdout).trim().is_empty());
    lab.check_path(Link::Untrusted, Duration::from_secs(3))
        .unwrap();
}
