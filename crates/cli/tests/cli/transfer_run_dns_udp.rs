//! `nena run` carries or stops everything its command sends (issue 39, part 2), in the lab
//! with a laptop's routes (the default route on the untrusted link, no source rules) and a
//! "WLAN resolver" (198.18.2.1, the untrusted side's router) in the client's resolv.conf,
//! with captures of both client links:
//!
//! - curl fetches `http://files.example.test:8000/big.bin` (20 MB) by name: the name is
//!   answered by dnsmasq on the server host (the server's /etc/resolv.conf) through nena;
//!   neither link holds a 16-byte run of the file, and the untrusted link carried TCP
//!   payload; a DNS query over
//!   TCP to the WLAN's resolver is answered the same way; a UDP echo round trip works
//!   (`--udp carry`, IPv4 and IPv4-mapped on a dual-stack socket); an IPv6 datagram with no
//!   IPv6 relay and a raw ICMP packet are refused. Neither link shows the name ("example"),
//!   any UDP or ICMP packet but the datagram plane's sealed ones, or the echo's payload.
//! - `--udp block`: the datagram is refused with EPERM and appears on neither link, while
//!   DNS still works.
//! - IPv6 on the client's loopback: DNS to an IPv6 resolver (UDP, TCP) and to an IPv4 one
//!   from a dual-stack socket is answered through nena with the resolver as the answer's
//!   source; an IPv6 datagram goes through nena and the proxy server drops it (`--allow`);
//!   curl to the server host's IPv6 address is carried through nena (no 16-byte run leaks).
//! - control: the same name looked up without nena crosses the untrusted link in the clear,
//!   so the checks above see a leak when there is one.

use crate::harness::*;
use crate::transfer_gateway::{http_dual, tcp_payload, SERVER6};
use nena_lab::{Host, Lab, Link};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The name dnsmasq on the server host answers (with the server's address).
const NAME: &str = "files.example.test";

/// A resolv.conf for one lab host (`ip netns exec` mounts /etc/netns/NS/resolv.conf over
/// /etc/resolv.conf), removed with its directory on drop.
pub(crate) struct NetnsResolvConf {
    dir: PathBuf,
}

impl NetnsResolvConf {
    pub(crate) fn new(lab: &Lab, host: Host, nameserver: &str) -> NetnsResolvConf {
        let dir = Path::new("/etc/netns").join(lab.netns(host));
        std::fs::create_dir_all(&dir).unwrap();
        let g = NetnsResolvConf { dir };
        std::fs::write(
            g.dir.join("resolv.conf"),
            format!("nameserver {nameserver}\noptions timeout:1 attempts:1\n"),
        )
        .unwrap();
        g
    }
}

impl Drop for NetnsResolvConf {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether a UDP socket of the server host is bound to `port`, IPv4 or IPv6 (its network
/// namespace's /proc/net/udp and udp6, read from a thread inside it).
fn udp_bound(lab: &Lab, port: u16) -> bool {
    let needle = format!(":{port:04X} ");
    lab.run_in(Host::Server, move || {
        ["/proc/thread-self/net/udp", "/proc/thread-self/net/udp6"]
            .iter()
            .any(|f| {
                std::fs::read_to_string(f)
                    .map(|t| t.lines().skip(1).any(|l| l.contains(&needle)))
                    .unwrap_or(false)
            })
    })
    .unwrap()
}

/// `program args` in the server host, killed on drop; returns once `port` is bound (UDP).
pub(crate) fn udp_service(lab: &Lab, port: u16, program: &str, args: &[&str]) -> Killed {
    let mut c = lab.command(Host::Server, program, args);
    c.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let k = Killed(c.spawn().unwrap_or_else(|e| panic!("{program}: {e}")));
    nena_testkit::wait_until(
        &format!("{program} bound to UDP port {port}"),
        Duration::from_secs(10),
        || udp_bound(lab, port),
    );
    k
}

/// dnsmasq on 198.18.3.2:53 of the server host: `files.example.test` is 198.18.3.2; no
/// upstream (nothing it is asked leaves the lab).
pub(crate) fn dnsmasq(lab: &Lab) -> Killed {
    dnsmasq_answering(lab, &format!("/{NAME}/198.18.3.2"))
}

/// dnsmasq on 198.18.3.2:53 of the server host, answering as `--address=RULE` says
/// (`/DOMAIN/ADDR`); no upstream.
pub(crate) fn dnsmasq_answering(lab: &Lab, rule: &str) -> Killed {
    let address = format!("--address={rule}");
    udp_service(
        lab,
        53,
        "dnsmasq",
        &[
            "--keep-in-foreground",
            "--no-resolv",
            "--no-hosts",
            "--no-poll",
            "--listen-address=198.18.3.2",
            "--bind-interfaces",
            "--user=root",
            "--pid-file=",
            &address,
        ],
    )
}

/// A UDP echo on 198.18.3.2:7007 of the server host.
pub(crate) fn udp_echo(lab: &Lab) -> Killed {
    udp_echo_on(lab, 7007)
}

/// A UDP echo on 198.18.3.2:`port` of the server host.
pub(crate) fn udp_echo_on(lab: &Lab, port: u16) -> Killed {
    udp_echo_at(lab, "198.18.3.2", port)
}

/// A UDP echo on `addr`:`port` of the server host (an IPv4 or IPv6 address it has).
pub(crate) fn udp_echo_at(lab: &Lab, addr: &str, port: u16) -> Killed {
    udp_service(
        lab,
        port,
        "python3",
        &[
            "-c",
            "import socket, sys\n\
             f = socket.AF_INET6 if ':' in sys.argv[2] else socket.AF_INET\n\
             s = socket.socket(f, socket.SOCK_DGRAM)\n\
             s.bind((sys.argv[2], int(sys.argv[1])))\n\
             while True:\n\
             \x20   d, a = s.recvfrom(65535)\n\
             \x20   s.sendto(d, a)\n",
            &port.to_string(),
            addr,
        ],
    )
}

/// What the command run under `nena run` does: DNS over TCP to the WLAN's resolver, then
/// UDP to the echo (IPv4, IPv4-mapped from a dual-stack socket), an IPv6 datagram, a raw
/// ICMP echo request; one line per step. `block` expects the UDP to be refused.
const APP: &str = r#"
import socket, struct, sys, errno
block = sys.argv[1] == "block"
payload = sys.argv[2].encode()
name = sys.argv[3]
q = struct.pack(">HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
q += struct.pack(">HH", 1, 1)
t = socket.create_connection(("198.18.2.1", 53), timeout=20)
t.sendall(struct.pack(">H", len(q)) + q)
def exact(n):
    b = b""
    while len(b) < n:
        c = t.recv(n - len(b))
        if not c:
            raise SystemExit("tcp dns: connection closed")
        b += c
    return b
a = exact(struct.unpack(">H", exact(2))[0])
assert a[:2] == b"\x42\x42", a
print("tcp-dns", socket.inet_ntoa(a[-4:]) if struct.unpack(">H", a[6:8])[0] else "none")
def echo(family, dst):
    s = socket.socket(family, socket.SOCK_DGRAM)
    s.settimeout(20)
    try:
        s.sendto(payload, dst)
    except OSError as e:
        return "refused " + errno.errorcode.get(e.errno, str(e.errno))
    d, src = s.recvfrom(65535)
    return "echo %s from %s:%d" % (d.decode(), src[0], src[1])
print("udp4", echo(socket.AF_INET, ("198.18.3.2", 7007)))
print("udp-mapped", echo(socket.AF_INET6, ("::ffff:198.18.3.2", 7007)))
print("udp6", echo(socket.AF_INET6, ("2001:2::3", 7007)))
r = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
try:
    r.sendto(bytes([8, 0, 0xf7, 0xfe, 0, 1, 0, 0]), ("198.18.3.2", 0))
    print("icmp sent")
except OSError as e:
    print("icmp refused", errno.errorcode.get(e.errno, str(e.errno)))
"#;

/// The IPv6 steps (the client's loopback has ::1): a UDP query to an IPv6 resolver, one to
/// an IPv4 resolver from a dual-stack socket (each answer's source must be the resolver the
/// query went to), a query over TCP to the IPv6 resolver, an IPv6 datagram.
const APP6: &str = r#"
import socket, struct, sys
payload = sys.argv[1].encode()
name = sys.argv[2]
q = struct.pack(">HHHHHH", 0x6666, 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
q += struct.pack(">HH", 1, 1)
for what, dst in [("udp6-dns", "2001:2::53"), ("mapped-dns", "::ffff:198.18.2.1")]:
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.settimeout(20)
    s.sendto(q, (dst, 53))
    a, src = s.recvfrom(4096)
    assert a[:2] == b"\x66\x66", a
    print(what, socket.inet_ntoa(a[-4:]), "from %s:%d" % (src[0], src[1]))
t = socket.create_connection(("2001:2::53", 53), timeout=20)
t.sendall(struct.pack(">H", len(q)) + q)
n = struct.unpack(">H", t.recv(2))[0]
b = b""
while len(b) < n:
    b += t.recv(n - len(b))
print("tcp6-dns", socket.inet_ntoa(b[-4:]))
u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
u.sendto(payload, ("2001:2::3", 7007))
print("udp6 sent")
"#;

/// `nena -v run ARGS` in the client host to completion: (status ok, stdout, stderr).
fn nena_run(lab: &Lab, args: &[&str]) -> (bool, String, String) {
    let mut all = vec!["-v", "run"];
    all.extend_from_slice(args);
    let out = lab
        .command(Host::Client, NENA, &all)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The UDP and ICMP packets of a capture (`tcpdump -r`), one line each, but the datagram
/// plane's sealed ones (`plane_filter`) to or from the proxy server's port `plane`.
fn udp_and_icmp(pcap: &Path, plane: u16) -> Vec<String> {
    let out = Command::new("tcpdump")
        .args(["-nn", "-r"])
        .arg(pcap)
        .arg(format!(
            "(udp or icmp or icmp6) and not ({})",
            crate::harness::plane_filter(plane)
        ))
        .output()
        .expect("tcpdump");
    assert!(
        out.status.success(),
        "tcpdump -r {}: {}",
        pcap.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// The client as a laptop: no source rules, the default route on the untrusted link.
fn laptop(lab: &Lab) {
    laptop_routes(lab, true);
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn nena_run_carries_dns_and_udp_and_lets_nothing_else_out() {
    let lab = lab();
    laptop(&lab);
    let _server_resolv = NetnsResolvConf::new(&lab, Host::Server, "198.18.3.2");
    // The WLAN's resolver, as DHCP set it: no DNS server runs there.
    let _client_resolv = NetnsResolvConf::new(&lab, Host::Client, "198.18.2.1");
    let _dns = dnsmasq(&lab);
    let _echo = udp_echo(&lab);
    let dir = TempDir::new("run-dns-udp");
    // The issue's case: 20 MB fetched by name; and a file fetched over IPv6.
    let www = TempDir::new("run-dns-udp-www");
    let body = random(20 << 20, 39);
    std::fs::write(www.join("big.bin"), &body).unwrap();
    let body6 = random(1 << 20, 40);
    std::fs::write(www.join("v6.bin"), &body6).unwrap();
    let _http = http_dual(&lab, &www);
    let listen = server(&lab, 7621);
    let ps = spawn_listening(
        &lab,
        Host::Server,
        &[
            "-v",
            "proxy",
            "server",
            "--listen",
            &listen,
            "--allow",
            "198.18.3.2/32",
            "--allow",
            &format!("{SERVER6}/128"),
        ],
    );
    let caps = [
        (Link::Trusted, dir.join("trusted.pcap")),
        (Link::Untrusted, dir.join("untrusted.pcap")),
    ];
    let captures: Vec<_> = caps
        .iter()
        .map(|(l, f)| lab.capture(*l, f).unwrap())
        .collect();
    let session = |extra: &[&'static str]| -> Vec<String> {
        let mut v: Vec<String> = vec!["--via".into(), listen.clone()];
        v.extend(extra.iter().map(|s| s.to_string()));
        v.extend(PATHS.iter().map(|s| s.to_string()));
        v.push("--".into());
        v
    };
    let url = format!("http://{NAME}:8000/big.bin");

    // curl by name (glibc's resolver: UDP to 198.18.2.1:53), 20 MB.
    let got = dir.join("big.bin");
    let mut args = session(&[]);
    args.extend(
        [
            "curl",
            "-sS",
            "--max-time",
            "60",
            "-o",
            got.to_str().unwrap(),
            &url,
        ]
        .map(String::from),
    );
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, _out, err) = nena_run(&lab, &argv);
    assert!(ok, "curl by name through nena run: {err}");
    assert!(
        std::fs::read(&got).unwrap() == body,
        "curl by name: not the file\n{err}"
    );
    assert!(
        err.contains(&format!("DNS A {NAME}.: answered through nena")),
        "{err}"
    );
    assert!(err.contains("packets dropped at egress 0"), "{err}");

    // DNS over TCP, UDP echo (carry), IPv6 and raw ICMP refused.
    let carried = "nena-udp-carried-5f1e0c";
    let mut args = session(&[]);
    args.extend(["python3", "-c", APP, "carry", carried, NAME].map(String::from));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, out, err) = nena_run(&lab, &argv);
    assert!(ok, "{out}\n{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "tcp-dns 198.18.3.2",
            &format!("udp4 echo {carried} from 198.18.3.2:7007"),
            &format!("udp-mapped echo {carried} from ::ffff:198.18.3.2:7007"),
            "udp6 refused EPERM",
            "icmp refused EPERM",
        ],
        "{err}"
    );
    assert!(err.contains("DNS over TCP, 1 queries answered"), "{err}");
    assert!(
        err.contains(&format!("DNS A {NAME}.: answered through nena")),
        "{err}"
    );
    assert!(
        err.contains("datagrams to the relay 2 (sent on 2, replies 2, sessions 2), refused 1; packets dropped at egress 1"),
        "{err}"
    );
    let log = ps.wait_stderr_n("datagrams: 1 sent, 1 received", 2, Duration::from_secs(10));
    assert!(
        log.contains("DNS: 1 queries answered by 198.18.3.2:53"),
        "{log}"
    );

    // --udp block: the datagram is refused (EPERM), DNS still carried.
    let blocked = "nena-udp-blocked-a9c4d2";
    let mut args = session(&["--udp", "block"]);
    args.extend(["python3", "-c", APP, "block", blocked, NAME].map(String::from));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, out, err) = nena_run(&lab, &argv);
    assert!(ok, "{out}\n{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "tcp-dns 198.18.3.2",
            "udp4 refused EPERM",
            "udp-mapped refused EPERM",
            "udp6 refused EPERM",
            "icmp refused EPERM",
        ],
        "{err}"
    );
    assert!(
        err.contains("datagrams to the relay 0 (sent on 0, replies 0, sessions 0), refused 3"),
        "{err}"
    );

    // IPv6 on the client's loopback only (the lab's links stay IPv4): nena run gets its
    // IPv6 sockets on ::1, and DNS to an IPv6 resolver (UDP and TCP), DNS to an IPv4 one
    // from a dual-stack socket, and an IPv6 datagram all go through nena; the proxy
    // server drops the datagram, whose destination --allow does not permit.
    let v6 = lab
        .command(
            Host::Client,
            "sysctl",
            ["-qw", "net.ipv6.conf.lo.disable_ipv6=0"],
        )
        .status()
        .unwrap();
    assert!(v6.success());
    let ipv6 = "nena-udp-ipv6-3b7e91";
    let mut args = session(&[]);
    args.extend(["python3", "-c", APP6, ipv6, NAME].map(String::from));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, out, err) = nena_run(&lab, &argv);
    assert!(ok, "{out}\n{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "udp6-dns 198.18.3.2 from 2001:2::53:53",
            "mapped-dns 198.18.3.2 from ::ffff:198.18.2.1:53",
            "tcp6-dns 198.18.3.2",
            "udp6 sent",
        ],
        "{err}"
    );
    assert!(err.contains("proxy on 127.0.0.1:"), "{err}");
    assert!(err.contains("and [::1]:"), "{err}");
    assert!(err.contains("SERVFAIL 0"), "{err}");
    assert!(err.contains("packets dropped at egress 0"), "{err}");
    ps.wait_stderr(
        "datagram to [2001:2::3]:7007: not permitted by --allow; dropped",
        Duration::from_secs(10),
    );

    // A TCP connect to the server's IPv6 address: carried through nena (the proxy server
    // connects to it), byte-exact; the captures below show that nothing of it leaked.
    let got6 = dir.join("v6.bin");
    let url6 = format!("http://[{SERVER6}]:8000/v6.bin");
    let mut args = session(&[]);
    args.extend(
        [
            "curl",
            "-gsS",
            "--max-time",
            "30",
            "-o",
            got6.to_str().unwrap(),
            &url6,
        ]
        .map(String::from),
    );
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, _out, err) = nena_run(&lab, &argv);
    assert!(ok, "curl over IPv6 through nena run: {err}");
    assert!(
        std::fs::read(&got6).unwrap() == body6,
        "curl over IPv6: not the file\n{err}"
    );
    assert!(err.contains("packets dropped at egress 0"), "{err}");
    ps.wait_stderr(
        &format!("CONNECT [{SERVER6}]:8000"),
        Duration::from_secs(10),
    );

    for c in captures {
        c.stop().unwrap();
    }
    for (link, file) in &caps {
        let pcap = std::fs::read(file).unwrap();
        assert!(pcap.len() > 24, "{link:?}: nothing captured?");
        assert!(
            !contains(&pcap, b"example"),
            "{link:?}: the name crossed in the clear"
        );
        for p in [carried, blocked, ipv6] {
            assert!(!contains(&pcap, p.as_bytes()), "{link:?}: {p} in the clear");
        }
        let udp = udp_and_icmp(file, 7621);
        assert!(
            udp.is_empty(),
            "{link:?}: UDP or ICMP in the clear: {udp:#?}"
        );
        for known in ["big.bin", "v6.bin"] {
            assert_eq!(
                runs_found(file, &www.join(known)),
                0,
                "{link:?}: a 16-byte run of {known} in the clear"
            );
        }
    }
    // The untrusted link carried TCP payload of the 20 MB fetch, not only a join's
    // handshake and ACKs.
    let u = tcp_payload(&caps[1].1, &www.join("big.bin"));
    assert!(
        u > 512 << 10,
        "the untrusted link carried only {u} B of TCP payload"
    );
    // Nothing of the blocked run reached the server: only the carried datagrams did.
    assert_eq!(ps.stderr().matches("datagrams: 1 sent").count(), 2);

    // A proxy server with --forward carries no DNS: the command gets SERVFAIL at once (not
    // a timeout), and nena run says why in one line.
    let forward = server(&lab, 7622);
    let _fwd = spawn_listening(
        &lab,
        Host::Server,
        &[
            "proxy",
            "server",
            "--listen",
            &forward,
            "--forward",
            "198.18.3.2:8000",
        ],
    );
    let lookup = format!(
        "import socket, sys\ntry:\n    socket.getaddrinfo('{NAME}', 80)\nexcept socket.gaierror as e:\n    print('lookup failed', e.errno == socket.EAI_AGAIN)\n"
    );
    let mut args: Vec<String> = vec!["--via".into(), forward.clone()];
    args.extend(PATHS.iter().map(|s| s.to_string()));
    args.extend(["--", "python3", "-c", &lookup].map(String::from));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let started = std::time::Instant::now();
    let (ok, out, err) = nena_run(&lab, &argv);
    assert!(ok, "{out}\n{err}");
    assert_eq!(
        out.trim(),
        "lookup failed True",
        "SERVFAIL is EAI_AGAIN\n{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let refusal = err
        .lines()
        .find(|l| l.contains("answered SERVFAIL"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        refusal.contains("takes no DNS session"),
        "one line that says why: {refusal}"
    );

    // Control: the same name looked up without nena crosses the untrusted link in clear.
    let control = dir.join("control.pcap");
    let capture = lab.capture(Link::Untrusted, &control).unwrap();
    let lookup = format!(
        "import socket\ntry:\n    socket.getaddrinfo('{NAME}', 80)\nexcept OSError:\n    pass\n"
    );
    let out = lab
        .command(Host::Client, "python3", ["-c", &lookup])
        .output()
        .unwrap();
    assert!(out.status.success());
    capture.stop().unwrap();
    let pcap = std::fs::read(&control).unwrap();
    assert!(contains(&pcap, b"example"), "the control saw no query");
    assert!(!udp_and_icmp(&control, 7621).is_empty());
}
