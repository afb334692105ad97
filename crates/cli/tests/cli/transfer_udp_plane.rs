//! The datagram plane (issue 56) in the lab (root), with captures of the links:
//!
//! - through `nena gateway` (`--udp-redundancy always`): a LAN host's UDP echo comes back
//!   byte-exact, and both client links carry the datagram plane's sealed UDP (type 0x0e to
//!   the proxy server's port) and no other UDP, no payload byte and no DNS name in the clear;
//! - an active attacker on the WLAN (a raw-socket injector in the router): a datagram of the
//!   flow altered (a fresh counter, the tag no longer matches) and one replayed, each way,
//!   are dropped and counted by the proxy server and by the client; the same datagrams sent
//!   from a spoofed address teach the server nothing: it sends no packet to that address;
//! - UDP dropped on the WLAN (nftables in the router): the flow goes on, its copies for the
//!   WLAN inside the session, no datagram lost;
//! - the WLAN taken down in the middle of a real-time flow (`--realtime-port`): no datagram
//!   lost (the trusted path's copies), and the trusted interface's bytes show in the
//!   metrics while the flow runs;
//! - a proxy server with `--no-datagram-plane`: the client's offer is declined and the
//!   datagrams ride the session (op 7), no UDP on either link.
//!
//! The flows go through SOCKS5 UDP ASSOCIATE (the client side the gateway and `nena run`
//! share, `nena_transport::proxy::carry::plane`), driven from the test with std sockets.

use crate::harness::*;
use crate::transfer_run_dns_udp::udp_echo;
use crate::transfer_socks_udp::{associate, client_socket, to, ECHO};
use nena_lab::{Host, Lab, Link};
use std::collections::BTreeSet;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// How long the test waits for an event at most.
const WAIT: Duration = Duration::from_secs(20);

/// `nena -v proxy server` on 198.18.3.2:PORT permitting the echo, with `extra`.
fn plane_server(lab: &Lab, port: u16, extra: &[&str]) -> Proc {
    let listen = server(lab, port);
    let mut args = vec![
        "-v",
        "proxy",
        "server",
        "--listen",
        &listen,
        "--allow",
        "198.18.3.2/32:7007",
    ];
    args.extend_from_slice(extra);
    spawn_listening(lab, Host::Server, &args)
}

/// A SOCKS5 UDP association through `nena proxy client --socks5 127.0.0.1:ENTRY`: the proxy
/// client, the association's socket (connected to its relay) and its control connection.
fn socks_flow(lab: &Lab, port: u16, entry: u16, extra: &[&str]) -> (Proc, UdpSocket, TcpStream) {
    let entry_at = format!("127.0.0.1:{entry}");
    let to_server = format!("198.18.3.2:{port}");
    let mut args = vec![
        "-v", "proxy", "client", "--socks5", &entry_at, "--to", &to_server,
    ];
    args.extend_from_slice(&PATHS);
    args.extend_from_slice(extra);
    let pc = spawn_listening(lab, Host::Client, &args);
    let at: SocketAddr = entry_at.parse().unwrap();
    let (code, assoc) = lab
        .run_in(Host::Client, move || associate(at, None))
        .unwrap()
        .unwrap();
    assert_eq!(code, 0, "UDP ASSOCIATE refused\n{}", pc.stderr());
    let (relay, control) = assoc.unwrap();
    (pc, client_socket(lab, relay), control)
}

/// A call-like flow through the association: `n` datagrams of 160 bytes, one every `gap`,
/// each numbered; `at(i)` runs before datagram `i` leaves. Returns the numbers whose echo
/// came back byte-exact (replies read as they come, then for up to 5 s after the last).
fn call(
    udp: &UdpSocket,
    n: u32,
    gap: Duration,
    seed: u64,
    mut at: impl FnMut(u32),
) -> BTreeSet<u32> {
    let payload = |i: u32| {
        let mut p = random(160, seed ^ u64::from(i));
        p[..4].copy_from_slice(&i.to_be_bytes());
        p
    };
    let mut got = BTreeSet::new();
    let mut b = vec![0u8; 65_535];
    // Replies read until `until`: each read waits at most until then (the socket's read
    // timeout), so the flow keeps its pace and nothing polls.
    let mut take_until = |udp: &UdpSocket, got: &mut BTreeSet<u32>, until: Instant| loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || got.len() == n as usize {
            return;
        }
        udp.set_read_timeout(Some(left)).unwrap();
        let Ok(k) = udp.recv(&mut b) else { continue };
        let d = &b[..k];
        // RSV RSV FRAG ATYP(1) ADDR(4) PORT(2) DATA
        if k == 10 + 160 && d[..10] == to(ECHO, 0, &[])[..] {
            let i = u32::from_be_bytes([d[10], d[11], d[12], d[13]]);
            if d[10..] == payload(i)[..] {
                got.insert(i);
            }
        }
    };
    let start = Instant::now();
    for i in 0..n {
        at(i);
        udp.send(&to(ECHO, 0, &payload(i))).unwrap();
        take_until(udp, &mut got, start + gap * (i + 1));
    }
    take_until(udp, &mut got, Instant::now() + Duration::from_secs(5));
    udp.set_read_timeout(None).unwrap();
    got
}

/// The association's end (its control connection closed): the proxy client's final line
/// (with the plane's counts).
fn end_flow(pc: &Proc, control: TcpStream) -> String {
    drop(control);
    let log = pc.wait_stderr("ended: the control connection closed", WAIT);
    log.lines()
        .find(|l| l.contains("ended: the control connection closed"))
        .unwrap()
        .to_string()
}

/// The OpenMetrics text `nena ... --metrics 127.0.0.1:PORT` serves in `host`.
fn scrape(lab: &Lab, host: Host, port: u16) -> String {
    let url = format!("http://127.0.0.1:{port}/metrics");
    let o = lab
        .command(host, "curl", ["-sf", "--max-time", "5", &url])
        .output()
        .unwrap();
    assert!(o.status.success(), "{url}: {o:?}");
    String::from_utf8(o.stdout).unwrap()
}

/// The value of the sample named `name` (with its labels) in OpenMetrics `text`.
fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

/// The number before `what` in a line ("... 3 sent as UDP, ..."), or 0.
fn count_before(line: &str, what: &str) -> u64 {
    line.split(what)
        .next()
        .and_then(|s| s.rsplit(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn the_gateway_carries_datagrams_sealed_on_both_links() {
    use crate::transfer_gateway::{gateway_with, lan_python, proxy_server, route_the_lan};
    let lab = lab_with(|c| c.lan = true);
    laptop_routes(&lab, true);
    route_the_lan(&lab);
    sh(&lab, Host::Client, "sysctl -qw net.ipv4.ip_forward=1");
    let dir = TempDir::new("plane-gw");
    let _echo = udp_echo(&lab);
    let _ps = proxy_server(&lab);
    let (cap_u, cap_t) = (dir.join("u.pcap"), dir.join("t.pcap"));
    let cu = lab.capture(Link::Untrusted, &cap_u).unwrap();
    let ct = lab.capture(Link::Trusted, &cap_t).unwrap();
    let gw = gateway_with(&lab, &["--udp-redundancy", "always"]);
    // 30 datagrams of random bytes (hex on the wire of the LAN only), each echoed
    // byte-exact, from one LAN socket: the first ones ride the session while the paths are
    // probed, the others are sealed UDP on both paths.
    let payload = nena_testkit::hex(&random(600, 56));
    let script = format!(
        "import socket, binascii\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         s.settimeout(10)\n\
         s.connect(('198.18.3.2', 7007))\n\
         p = binascii.unhexlify('{payload}')\n\
         for i in range(30):\n\
         \x20   m = bytes([i]) + p\n\
         \x20   s.send(m)\n\
         \x20   d = s.recv(65535)\n\
         \x20   assert d == m, (i, len(d))\n\
         print('echoed 30')\n"
    );
    let out = lan_python(&lab, &script);
    assert_eq!(out.as_deref(), Ok("echoed 30"), "{}", gw.stderr());
    cu.stop().unwrap();
    ct.stop().unwrap();
    let known = dir.join("payload.bin");
    std::fs::write(&known, random(600, 56)).unwrap();
    for cap in [&cap_u, &cap_t] {
        let raw = std::fs::read(cap).unwrap();
        assert!(
            udp_sealed(cap, 7100) >= 10,
            "{cap:?}: the plane's sealed UDP is missing ({} packets)\n{}",
            udp_sealed(cap, 7100),
            gw.stderr()
        );
        assert_eq!(udp_not_sealed(cap, 7100), 0, "UDP in the clear in {cap:?}");
        assert_eq!(
            runs_found(cap, &known),
            0,
            "the payload in the clear in {cap:?}"
        );
        assert_eq!(count(&raw, b"example"), 0, "a DNS name in {cap:?}");
    }
}

/// The injector, in the router: sniffs on its WLAN interface one compact datagram of the
/// flow each way (docs/PROTOCOL.md, "Compact real-time datagrams"), then sends toward the
/// server an altered copy (a fresh sequence number: its tag no longer matches) and the genuine one again from the client's address, the same two from a
/// spoofed address (198.18.2.99), and toward the client an altered and a replayed copy of
/// the server's.
const INJECT: &str = r#"
import socket, struct, sys
iface, port, spoof = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((iface, 0))
s.settimeout(30)
up = down = None
seen = 0
while up is None or down is None:
    try:
        f = s.recv(65535)
    except socket.timeout:
        sys.exit("no datagram of the plane each way in 30 s (%d frames seen)" % seen)
    seen += 1
    ip = f[14:]
    if f[12:14] != b"\x08\x00" or len(ip) < 20 or ip[9] != 17:
        continue
    ihl = (ip[0] & 15) * 4
    src, dst = socket.inet_ntoa(ip[12:16]), socket.inet_ntoa(ip[16:20])
    sp, dp = struct.unpack(">HH", ip[ihl:ihl + 4])
    p = bytes(ip[ihl + 8:])
    # Compact data datagrams only (the call's, once its flow is acknowledged; a probe
    # would be answered to the spoofed address's path).
    if len(p) < 100 or not 0x05 <= p[0] <= 0x0c:
        continue
    if dp == port and up is None:
        up = (src, sp, dst, dp, p)
    elif sp == port and down is None:
        down = (src, sp, dst, dp, p)
def send(src, sport, dst, dport, data):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.setsockopt(socket.SOL_IP, 19, 1)
    u.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    u.bind((src, sport))
    u.sendto(data, (dst, dport))
    u.close()
def altered(p):
    # A sequence number 1000 ahead (a copy of one seen would be a replay).
    q = (int.from_bytes(p[4:6], "big") + 1000) % 65536
    return p[:4] + q.to_bytes(2, "big") + p[6:]
src, sp, dst, dp, p = up
send(src, sp, dst, dp, altered(p))
send(src, sp, dst, dp, p)
send(spoof, 40000, dst, dp, p)
send(spoof, 40001, dst, dp, altered(p))
src, sp, dst, dp, p = down
send(src, sp, dst, dp, altered(p))
send(src, sp, dst, dp, p)
print("injected", flush=True)
"#;

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn altered_replayed_and_spoofed_datagrams_are_dropped_and_counted() {
    let lab = lab();
    let dir = TempDir::new("plane-tamper");
    let _echo = udp_echo(&lab);
    let ps = plane_server(&lab, 7451, &["--metrics", "127.0.0.1:9481"]);
    let cap_s = dir.join("server.pcap");
    let cs = lab.capture(Link::Server, &cap_s).unwrap();
    let (pc, udp, control) = socks_flow(
        &lab,
        7451,
        1095,
        &["--udp-redundancy", "always", "--metrics", "127.0.0.1:9482"],
    );
    let mut inject = lab.command(
        Host::Router,
        "python3",
        ["-c", INJECT, "untrusted", "7451", "198.18.2.99"],
    );
    let injector = inject
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The flow runs while the injector sniffs and sends; every datagram still comes back.
    let got = call(&udp, 150, Duration::from_millis(20), 7, |_| {});
    let out = injector.wait_with_output().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("injected"),
        "the injector: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        got.len(),
        150,
        "lost: {:?}",
        (0..150).filter(|i| !got.contains(i)).collect::<Vec<_>>()
    );
    ps.wait_stderr("dropped: datagram failed authentication (1 so far)", WAIT);
    ps.wait_stderr("dropped: replayed datagram", WAIT);
    pc.wait_stderr("dropped: datagram failed authentication (1 so far)", WAIT);
    pc.wait_stderr("dropped: replayed datagram", WAIT);
    // The final lines count them: on the server, two of each (one from the client's
    // address, one from the spoofed one); on the client, one of each.
    let line = end_flow(&pc, control);
    assert_eq!(count_before(&line, " failed authentication"), 1, "{line}");
    assert!(count_before(&line, " compact") >= 100, "{line}");
    assert_eq!(count_before(&line, " replayed"), 1, "{line}");
    let log = ps.wait_stderr("datagrams: ", WAIT);
    let line = log.lines().find(|l| l.contains("datagrams: ")).unwrap();
    assert_eq!(count_before(line, " failed authentication"), 2, "{line}");
    assert_eq!(count_before(line, " replayed"), 2, "{line}");
    // The operator sees them in the metrics of both ends, beside the datagrams carried.
    for (host, port, role, drops) in [
        (Host::Server, 9481, "proxy_server", 2),
        (Host::Client, 9482, "proxy_client", 1),
    ] {
        let text = scrape(&lab, host, port);
        for reason in ["unauthentic", "replayed"] {
            let want = format!(
                "nena_datagram_drops_total{{role=\"{role}\",reason=\"{reason}\"}} {drops}\n"
            );
            assert!(text.contains(&want), "{want} in\n{text}");
        }
        let udp_received = metric(
            &text,
            &format!("nena_datagrams_total{{role=\"{role}\",way=\"udp\",direction=\"received\"}}"),
        );
        assert!((1..=150).contains(&udp_received), "{text}");
    }
    cs.stop().unwrap();
    assert_eq!(
        packets(&cap_s, "dst host 198.18.2.99"),
        0,
        "the server sent to the address of an unauthenticated datagram"
    );
    assert!(udp_sealed(&cap_s, 7451) > 0, "no plane traffic captured?");
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn udp_blocked_on_the_wlan_costs_no_datagram() {
    let lab = lab();
    let _echo = udp_echo(&lab);
    let _ps = plane_server(&lab, 7452, &[]);
    // The hotel WLAN: no UDP to or from the proxy server's port crosses the router.
    let _ = sh(&lab, Host::Router, "nft add table inet hotel");
    sh(
        &lab,
        Host::Router,
        "nft 'add chain inet hotel filt { type filter hook forward priority 0; }' && \
         nft add rule inet hotel filt iifname untrusted udp dport 7452 drop && \
         nft add rule inet hotel filt oifname untrusted udp sport 7452 drop",
    );
    let (pc, udp, control) = socks_flow(&lab, 7452, 1096, &["--realtime-port", "7007"]);
    let got = call(&udp, 100, Duration::from_millis(20), 8, |_| {});
    assert_eq!(
        got.len(),
        100,
        "lost: {:?}\n{}",
        (0..100).filter(|i| !got.contains(i)).collect::<Vec<_>>(),
        pc.stderr()
    );
    let line = end_flow(&pc, control);
    // Every datagram went inside the session for the WLAN's copy (its UDP never confirmed),
    // and as sealed UDP on the trusted path.
    assert!(count_before(&line, " inside the session") >= 100, "{line}");
    assert!(count_before(&line, " sent as UDP") >= 90, "{line}");
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn a_wlan_outage_mid_call_loses_no_realtime_datagram() {
    let lab = lab();
    let _echo = udp_echo(&lab);
    let _ps = plane_server(&lab, 7453, &[]);
    let (pc, udp, control) = socks_flow(
        &lab,
        7453,
        1097,
        &["--realtime-port", "7007", "--metrics", "127.0.0.1:9467"],
    );
    // The trusted interface's bytes (sealed datagrams) in the metrics while the call runs.
    let trusted_sent = |text: &str| {
        metric(
            text,
            "nena_interface_bytes_total{role=\"proxy_client\",interface=\"trusted\",\
             metered=\"false\",direction=\"sent\"}",
        )
    };
    let mut during = None;
    let got = call(&udp, 250, Duration::from_millis(20), 9, |i| {
        if i == 50 {
            lab.set_link(Link::Untrusted, false).unwrap();
        }
        if i == 150 {
            during = Some(trusted_sent(&scrape(&lab, Host::Client, 9467)));
        }
        if i == 200 {
            lab.set_link(Link::Untrusted, true).unwrap();
        }
    });
    // 3 s in, at least a second's datagrams (50 of 160 bytes, sealed) were counted.
    let during = during.unwrap();
    assert!(
        during >= 50 * 160,
        "{during} B counted on the trusted interface mid-call"
    );
    assert_eq!(
        got.len(),
        250,
        "lost: {:?}\n{}",
        (0..250).filter(|i| !got.contains(i)).collect::<Vec<_>>(),
        pc.stderr()
    );
    // Most went as sealed UDP (the trusted path's copies through the outage); the first
    // ones, before a probe was answered, rode the session only.
    let line = end_flow(&pc, control);
    assert!(count_before(&line, " sent as UDP") >= 200, "{line}");
    let total = trusted_sent(&scrape(&lab, Host::Client, 9467));
    assert!(
        total >= 250 * 160 && total > during,
        "{total} B on the trusted interface in all, {during} mid-call"
    );
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn a_server_without_the_plane_carries_datagrams_in_the_session() {
    let lab = lab();
    let dir = TempDir::new("plane-off");
    let _echo = udp_echo(&lab);
    let ps = plane_server(&lab, 7454, &["--no-datagram-plane"]);
    let (cap_u, cap_t) = (dir.join("u.pcap"), dir.join("t.pcap"));
    let cu = lab.capture(Link::Untrusted, &cap_u).unwrap();
    let ct = lab.capture(Link::Trusted, &cap_t).unwrap();
    let (pc, udp, control) = socks_flow(&lab, 7454, 1098, &[]);
    let got = call(&udp, 20, Duration::from_millis(20), 10, |_| {});
    assert_eq!(got.len(), 20, "{}", pc.stderr());
    pc.wait_stderr(
        "datagram plane declined: the proxy server's datagram plane is off",
        WAIT,
    );
    ps.wait_stderr("datagram plane declined", WAIT);
    let line = end_flow(&pc, control);
    assert!(
        line.contains("datagrams inside the session (op 7)"),
        "{line}"
    );
    cu.stop().unwrap();
    ct.stop().unwrap();
    for cap in [&cap_u, &cap_t] {
        assert_eq!(packets(cap, "udp"), 0, "UDP on {cap:?}");
    }
    // And the client's own switch: --udp-plane off offers nothing (op 7 from the start).
    let ps2 = plane_server(&lab, 7455, &[]);
    let (pc2, udp2, control2) = socks_flow(&lab, 7455, 1099, &["--udp-plane", "off"]);
    assert_eq!(
        call(&udp2, 10, Duration::from_millis(20), 11, |_| {}).len(),
        10
    );
    let line = end_flow(&pc2, control2);
    assert!(
        line.contains("datagrams inside the session (op 7)"),
        "{line}"
    );
    assert!(
        !ps2.stderr().contains("datagram plane offered"),
        "{}",
        ps2.stderr()
    );
}
