//! `nena gateway` against a hostile LAN host (root, a lab with `--lan`). One LAN host
//! sprays datagrams from 100,000 source ports (a raw socket: no port of its own is taken)
//! and DNS queries for random names while a second LAN host fetches 20 MB byte-exact and
//! resolves a name: both succeed, the gateway's memory peak (VmHWM) stays under the bound
//! docs/GATEWAY.md states, its flows and DNS queries in flight stay within their caps
//! (its `gateway bounds` line), and so do the proxy server's sessions for it (its metrics).
//!
//! The second host is a second address of the lab's LAN host (198.18.5.3 beside
//! 198.18.5.2), not a namespace of its own: the gateway's caps are per source address, so
//! to the gateway it is another host, and it shares the LAN link with the sprayer as a
//! host on the same switch does; a second namespace would take a second LAN interface on
//! the gateway, which the lab does not build.
//!
//! A LAN host that forges an off-LAN source gets no answer, and nothing leaves by either
//! client link: the gateway's own check drops it (counted and logged), past the kernel's.

use crate::harness::*;
use crate::transfer_gateway::{
    gateway_with, http_dual, lan_python, proxy_server_with, route_the_lan,
};
use crate::transfer_run_dns_udp::{dnsmasq, udp_echo, NetnsResolvConf};
use nena_lab::{Host, Lab, Link};
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The gateway's memory peak under the spray, at most (docs/GATEWAY.md, "Bounds").
const RSS_BOUND_KIB: u64 = 256 << 10;

/// The sprayer: from `src`, datagrams to 198.18.3.2:9 from source ports cycling through
/// 1024..65535, every 10th a DNS query for a random name to 198.18.2.1:53 (the WLAN's
/// resolver, which the gateway answers for) from a random port; about 5,000 a second, until
/// `total` are sent and the file `stop` exists. Prints "sent N" every 10,000.
fn spray_script(src: &str, total: u64, stop: &std::path::Path) -> String {
    format!(
        r#"
import os, random, socket, struct, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
s.bind(('{src}', 0))
def udp(sport, dport, payload):
    # IPv4 lets the checksum be 0 (none).
    return struct.pack('>HHHH', sport, dport, 8 + len(payload), 0) + payload
def query():
    name = ''.join(random.choice('abcdefghijklmnopqrstuvwxyz') for _ in range(12)) + '.example.test'
    q = struct.pack('>HHHHHH', random.getrandbits(16), 0x0100, 1, 0, 0, 0)
    q += b''.join(bytes([len(l)]) + l.encode() for l in name.split('.')) + b'\0'
    return q + struct.pack('>HH', 1, 1)
n, port, t0 = 0, 1024, time.monotonic()
while n < {total} or not os.path.exists('{stop}'):
    for _ in range(50):
        if n % 10 == 9:
            s.sendto(udp(random.randint(1024, 65535), 53, query()), ('198.18.2.1', 0))
        else:
            s.sendto(udp(port, 9, b'spray %d' % n), ('198.18.3.2', 0))
            port = 1024 if port == 65535 else port + 1
        n += 1
        if n % 10000 == 0:
            print('sent', n, flush=True)
    # 50 every 10 ms: about 5,000 a second, the issue's rate and some.
    ahead = t0 + n / 5000 - time.monotonic()
    if ahead > 0:
        time.sleep(ahead)
print('done', n, flush=True)
"#,
        stop = stop.display()
    )
}

/// A number in the gateway's `gateway bounds` line: the one after `before`.
fn bound(line: &str, before: &str) -> usize {
    line.split(before)
        .nth(1)
        .and_then(|r| {
            r.trim_start()
                .split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no {before:?} in {line:?}"))
}

/// The number just before `after` in `line`.
fn number_before(line: &str, after: &str) -> usize {
    line.split(after)
        .next()
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no number before {after:?} in {line:?}"))
}

/// The gateway's memory peak, from /proc/PID/status.
fn vm_hwm_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmHWM in {status}"))
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn a_spraying_lan_host_leaves_the_gateway_bounded_and_another_host_served() {
    let lab = lab_with(|c| c.lan = true);
    laptop_routes(&lab, true);
    route_the_lan(&lab);
    sh(&lab, Host::Client, "sysctl -qw net.ipv4.ip_forward=1");
    // The second LAN host: another address on the LAN link.
    sh(&lab, Host::Lan, "ip addr add 198.18.5.3/24 dev eth0 nodad");
    let (www, cli) = (TempDir::new("gh"), TempDir::new("ghc"));
    let data = random(20 << 20, 55);
    std::fs::write(www.join("big.bin"), &data).unwrap();
    let _http = http_dual(&lab, &www);
    let _dns = dnsmasq(&lab);
    let _srv_conf = NetnsResolvConf::new(&lab, Host::Server, "198.18.3.2");
    // The proxy server with its default --max-sessions (4096): the sprayer must not take
    // them from the other host or from the server's other users.
    let server_metrics = "198.18.3.2:9478";
    let _ps = proxy_server_with(&lab, &["--metrics", server_metrics]);
    let gw = gateway_with(&lab, &[]);

    let stop = cli.join("stop");
    let mut spray = lab
        .command(
            Host::Lan,
            "python3",
            ["-c", &spray_script("198.18.5.2", 100_000, &stop)],
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _spray_guard = KillOnDrop(spray.id());
    let mut lines = BufReader::new(spray.stdout.take().unwrap()).lines();
    // Under way: 10,000 sent (9,000 source ports, 1,000 names).
    let first = lines.next().expect("the sprayer's first line").unwrap();
    assert_eq!(first, "sent 10000");

    // The proxy server's sessions, sampled while the spray goes on.
    let spraying = Arc::new(AtomicBool::new(true));
    let most = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (spraying, most) = (spraying.clone(), most.clone());
        let ns = lab.netns(Host::Server);
        std::thread::spawn(move || {
            while spraying.load(Ordering::Relaxed) {
                let o = std::process::Command::new("ip")
                    .args(["netns", "exec", &ns, "curl", "-sS"])
                    .arg(format!("http://{server_metrics}/metrics"))
                    .output()
                    .unwrap();
                let n = String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .filter(|l| l.starts_with("nena_sessions_active{"))
                    .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                    .sum::<f64>() as u64;
                most.fetch_max(n, Ordering::Relaxed);
            }
        })
    };

    // The other host, meanwhile: 20 MB byte-exact, and a name resolved.
    let got = cli.join("big.bin");
    let o = lab
        .command(
            Host::Lan,
            "curl",
            [
                "-gsS",
                "--max-time",
                "60",
                "--interface",
                "198.18.5.3",
                "-o",
                got.to_str().unwrap(),
                "http://198.18.3.2:8000/big.bin",
            ],
        )
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "the other host's fetch: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(std::fs::read(&got).unwrap() == data, "the fetch differs");
    let answer = lan_dns_from(&lab, "198.18.5.3", "files.example.test").unwrap();
    assert_eq!(answer, "198.18.3.2");
    // Both done while the spray went on: it stops only now, and has sent 100,000 at least.
    std::fs::write(&stop, b"").unwrap();
    let last = lines
        .map(|l| l.unwrap())
        .last()
        .expect("the sprayer's last line");
    let sent: u64 = last
        .strip_prefix("done ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the sprayer ended with {last:?}"));
    assert!(sent >= 100_000, "{sent} sent");
    assert!(spray.wait().unwrap().success());
    spraying.store(false, Ordering::Relaxed);
    sampler.join().unwrap();

    let hwm = vm_hwm_kib(gw.pid());
    assert!(
        hwm <= RSS_BOUND_KIB,
        "the gateway's memory peak {hwm} KiB is over {RSS_BOUND_KIB} KiB"
    );
    let server_most = most.load(Ordering::Relaxed);
    let mut gw = gw;
    assert!(gw.terminate().success());
    let log = gw.stderr();
    let line = log
        .lines()
        .find(|l| l.contains("gateway bounds: "))
        .unwrap_or_else(|| panic!("no bounds line: {log}"));
    eprintln!("gateway VmHWM {hwm} KiB; {line}; proxy server sessions at most {server_most}");
    let (flows, cap) = (bound(line, "flows at most"), bound(line, "(cap"));
    assert!(flows <= cap, "{line}");
    // The sprayer held its cap of flows, no more; its least recently used ones were closed
    // for new ones within its rate of new flows (32 a second after a burst of 64: some
    // hundreds over the spray), and the rest of its new source ports were refused over
    // the rate before any session (how many of the datagrams the gateway read before its
    // socket's buffer overflowed depends on the machine).
    assert_eq!(bound(line, "of one LAN host"), 64, "{line}");
    let closed = number_before(line, " closed for new ones");
    assert!((100..=64 + 32 * 60).contains(&closed), "{line}");
    assert!(
        number_before(line, " refused over the rate") > 10_000,
        "{line}"
    );
    assert!(number_before(line, " over the rate (64/s") > 100, "{line}");
    let dns = bound(line, "DNS in flight at most");
    assert!(dns <= 128, "{line}");
    // The proxy server's sessions for the gateway stay within its caps: the flows (512),
    // the DNS sessions in use and kept for reuse (2 x 128) and the sessions opened ahead
    // (8), and a few for the other host. Before the DNS sessions were reused the server
    // held up to 1,955 at once under this spray.
    let bound = 512 + 2 * 128 + 8 + 16;
    assert!(
        server_most <= bound,
        "the proxy server held {server_most} sessions at once (bound {bound})"
    );
    assert!(server_most > 0, "no session sampled on the proxy server");
}

/// Kills a process by its id on drop (the sprayer, if the test fails first).
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // SAFETY: signalling our own child by its pid.
        unsafe { libc::kill(self.0 as i32, libc::SIGKILL) };
    }
}

/// A DNS query (A, over UDP) from `src` in the LAN host to 198.18.2.1:53: the address of
/// the answer (its ID checked), or python's error. Asked again every 2 s up to five times,
/// as a stub resolver does (a datagram may be lost under the spray, as on any busy LAN).
fn lan_dns_from(lab: &Lab, src: &str, name: &str) -> Result<String, String> {
    let script = format!(
        "import socket, struct\n\
         q = struct.pack('>HHHHHH', 0x4242, 0x0100, 1, 0, 0, 0)\n\
         q += b''.join(bytes([len(l)]) + l.encode() for l in '{name}'.split('.')) + b'\\0'\n\
         q += struct.pack('>HH', 1, 1)\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         s.bind(('{src}', 0))\n\
         s.settimeout(2)\n\
         for i in range(5):\n\
         \x20   s.sendto(q, ('198.18.2.1', 53))\n\
         \x20   try:\n\
         \x20       a, _ = s.recvfrom(4096)\n\
         \x20       break\n\
         \x20   except socket.timeout:\n\
         \x20       if i == 4: raise\n\
         assert a[:2] == b'\\x42\\x42', a\n\
         assert a[3] & 0xf == 0, 'rcode %d' % (a[3] & 0xf)\n\
         print(socket.inet_ntoa(a[-4:]))\n"
    );
    lan_python(lab, &script)
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn a_lan_host_forging_an_off_lan_source_gets_no_answer() {
    let lab = lab_with(|c| c.lan = true);
    laptop_routes(&lab, true);
    route_the_lan(&lab);
    sh(&lab, Host::Client, "sysctl -qw net.ipv4.ip_forward=1");
    let cli = TempDir::new("gf");
    let _dns = dnsmasq(&lab);
    let _echo = udp_echo(&lab);
    let _srv_conf = NetnsResolvConf::new(&lab, Host::Server, "198.18.3.2");
    // The forged source: an address of another network on the LAN host's link. The gateway
    // has a route to it through the LAN (as it would to a subnet routed behind a LAN host),
    // so the kernel's reverse-path checks let it in: what drops it is the gateway's own.
    sh(&lab, Host::Lan, "ip addr add 198.18.9.9/32 dev eth0");
    sh(&lab, Host::Client, "ip route add 198.18.9.9/32 dev lan");
    let _ps = proxy_server_with(&lab, &[]);
    let mut gw = gateway_with(&lab, &[]);
    let (cap_u, cap_t) = (cli.join("u.pcap"), cli.join("t.pcap"));
    let cu = lab.capture(Link::Untrusted, &cap_u).unwrap();
    let ct = lab.capture(Link::Trusted, &cap_t).unwrap();

    // A DNS query and a datagram to carry from the forged source; then the same query from
    // the LAN host's own address, answered (the gateway reads its socket in order, so the
    // forged ones were handled before); then the forged source's socket holds nothing.
    let script = "import socket, struct\n\
         q = struct.pack('>HHHHHH', 0x7777, 0x0100, 1, 0, 0, 0)\n\
         q += b'\\x05files\\x07example\\x04test\\x00' + struct.pack('>HH', 1, 1)\n\
         f = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         f.bind(('198.18.9.9', 0))\n\
         f.sendto(q, ('198.18.2.1', 53))\n\
         f.sendto(b'nena-forged-echo', ('198.18.3.2', 7007))\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         s.bind(('198.18.5.2', 0))\n\
         s.settimeout(2)\n\
         for i in range(5):\n\
         \x20   s.sendto(q, ('198.18.2.1', 53))\n\
         \x20   try:\n\
         \x20       a, _ = s.recvfrom(4096)\n\
         \x20       break\n\
         \x20   except socket.timeout:\n\
         \x20       if i == 4: raise\n\
         assert a[:2] == b'\\x77\\x77', a\n\
         print(socket.inet_ntoa(a[-4:]))\n\
         f.setblocking(False)\n\
         try:\n\
         \x20   print(f.recvfrom(4096))\n\
         except BlockingIOError:\n\
         \x20   print('nothing')\n";
    let out = lan_python(&lab, script).unwrap();
    assert_eq!(out, "198.18.3.2\nnothing");
    gw.wait_stderr_n(
        "source 198.18.9.9 is outside every prefix of lan",
        1,
        Duration::from_secs(10),
    );
    assert!(gw.terminate().success());
    let log = gw.stderr();
    let line = log
        .lines()
        .find(|l| l.contains("gateway bounds: "))
        .unwrap_or_else(|| panic!("no bounds line: {log}"));
    assert!(line.ends_with("off-LAN sources dropped 2"), "{line}");
    cu.stop().unwrap();
    ct.stop().unwrap();
    for cap in [&cap_u, &cap_t] {
        assert_eq!(
            packets(cap, "host 198.18.9.9"),
            0,
            "the forged source in {cap:?}"
        );
        let raw = std::fs::read(cap).unwrap();
        assert_eq!(count(&raw, b"nena-forged-echo"), 0, "in {cap:?}");
        assert_eq!(count(&raw, b"example"), 0, "a DNS name in {cap:?}");
    }
}
