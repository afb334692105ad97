//! The gateway's kill switch in the lab (root), the client routed as a router is: forwarding
//! on, the default route on the WLAN (`untrusted`), and a resolver on the router itself
//! (dnsmasq on the `lan` address, forwarding to the WLAN's side) as a home router has. After
//! a failed start, SIGKILL, a restart and SIGTERM, the LAN host's DNS queries (to an off-LAN
//! resolver and to the router's own address, UDP and TCP) and its fetch around nena cross
//! neither client link and fail; the switch's table is the same one throughout (never
//! deleted and recreated). `nena gateway open --lan lan` then removes it, and the same
//! probes cross the WLAN again: the control that the probes see a leak when there is one.
//! Also: a LAN host forging a source outside the LAN's prefix gets nothing answered or
//! sent, and the drop is counted; nonexistent `--trusted`/`--untrusted` are refused.

use crate::harness::*;
use crate::transfer_gateway::{
    gateway, gateway_with, http_dual, installed, lan_fetch, lan_python, lan_udp_echo_to,
    proxy_server, route_the_lan, LAN_HOST,
};
use nena_lab::{Host, Lab, Link};
use std::process::Stdio;
use std::time::Duration;

/// Opens the kill switch when the test ends, passing or failing (the lab's namespace goes
/// with it too; this keeps the rule that a test leaves no nft table).
struct OpenOnDrop<'a>(&'a Lab);

impl Drop for OpenOnDrop<'_> {
    fn drop(&mut self) {
        let _ = self
            .0
            .command(Host::Client, NENA, ["gateway", "open", "--all"])
            .stdin(Stdio::null())
            .output();
    }
}

/// The switch's table in the client host: its kernel handle and the interfaces it holds,
/// or None when there is none.
fn switch(lab: &Lab) -> Option<(String, String)> {
    let o = lab
        .command(
            Host::Client,
            "nft",
            ["-a", "list", "table", "inet", "nena_killswitch"],
        )
        .stdin(Stdio::null())
        .output()
        .unwrap();
    if !o.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let handle = text
        .lines()
        .next()
        .and_then(|l| l.split("# handle ").nth(1))
        .unwrap_or_default()
        .trim()
        .to_string();
    let elements = text
        .split("elements = {")
        .nth(1)
        .and_then(|e| e.split('}').next())
        .unwrap_or_default()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    Some((handle, elements))
}

/// A DNS query (A) for `name` from the LAN host to `resolver`:53, over UDP or TCP, from
/// `src` if given; 3 s to answer. The answer's length, or python's error.
fn lan_query(
    lab: &Lab,
    resolver: &str,
    name: &str,
    tcp: bool,
    src: Option<&str>,
) -> Result<String, String> {
    let script = format!(
        "import socket, struct\n\
         q = struct.pack('>HHHHHH', 0x3939, 0x0100, 1, 0, 0, 0)\n\
         q += b''.join(bytes([len(l)]) + l.encode() for l in '{name}'.split('.')) + b'\\0'\n\
         q += struct.pack('>HH', 1, 1)\n\
         if {tcp}:\n\
         \x20   s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n\
         \x20   s.settimeout(3)\n\
         \x20   if '{src}': s.bind(('{src}', 0))\n\
         \x20   s.connect(('{resolver}', 53))\n\
         \x20   s.sendall(struct.pack('>H', len(q)) + q)\n\
         \x20   a = s.recv(4096)\n\
         else:\n\
         \x20   s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         \x20   s.settimeout(3)\n\
         \x20   if '{src}': s.bind(('{src}', 0))\n\
         \x20   s.sendto(q, ('{resolver}', 53))\n\
         \x20   a, _ = s.recvfrom(4096)\n\
         assert len(a) > 0, a\n\
         print(len(a))\n",
        tcp = if tcp { "True" } else { "False" },
        src = src.unwrap_or(""),
    );
    lan_python(lab, &script)
}

/// A fetch around nena with 3 s to succeed.
fn lan_fetch_quick(lab: &Lab, url: &str) -> Result<(), String> {
    let o = lab
        .command(
            Host::Lan,
            "curl",
            ["-gsS", "--max-time", "3", "-o", "/dev/null", url],
        )
        .stdin(Stdio::null())
        .output()
        .unwrap();
    if o.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&o.stderr).into_owned())
    }
}

/// dnsmasq on the router's LAN address (198.18.5.1:53, UDP and TCP), forwarding every query
/// to the WLAN's side (198.18.2.1), as a home router's resolver asks its uplink.
fn router_resolver(lab: &Lab) -> Killed {
    let mut cmd = lab.command(
        Host::Client,
        "dnsmasq",
        [
            "--keep-in-foreground",
            "--no-resolv",
            "--no-hosts",
            "--no-poll",
            "--listen-address=198.18.5.1",
            "--bind-interfaces",
            "--server=198.18.2.1",
            "--user=root",
            "--pid-file=",
        ],
    );
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let k = Killed(cmd.spawn().expect("dnsmasq"));
    nena_testkit::wait_for("dnsmasq on 198.18.5.1:53", Duration::from_secs(10), || {
        let udp = sh(lab, Host::Client, "ss -Hlnu").contains("198.18.5.1:53");
        let tcp = sh(lab, Host::Client, "ss -Hltn").contains("198.18.5.1:53");
        (udp && tcp).then_some(())
    });
    k
}

const AROUND: &str = "http://198.18.3.2:8000/letter.txt";

/// The LAN is cut off: `name`'s queries to an off-LAN resolver (the WLAN's side) and to
/// the router's own resolver (UDP and TCP) get no answer, and a fetch around nena fails.
fn assert_cut_off(lab: &Lab, name: &str) {
    for (resolver, tcp) in [
        ("198.18.2.1", false),
        ("198.18.5.1", false),
        ("198.18.5.1", true),
    ] {
        let r = lan_query(lab, resolver, name, tcp, None);
        assert!(
            r.is_err(),
            "{name} to {resolver} (tcp {tcp}) answered: {r:?}"
        );
    }
    assert!(
        lan_fetch_quick(lab, AROUND).is_err(),
        "{name}: fetched around nena"
    );
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn the_kill_switch_holds_through_a_failed_start_sigkill_a_restart_and_sigterm_until_opened() {
    let lab = lab_with(|c| c.lan = true);
    let _open = OpenOnDrop(&lab);
    laptop_routes(&lab, true);
    route_the_lan(&lab);
    sh(&lab, Host::Client, "sysctl -qw net.ipv4.ip_forward=1");
    let (www, cli) = (TempDir::new("ks"), TempDir::new("ksc"));
    std::fs::write(www.join("letter.txt"), b"through nena\n").unwrap();
    let _http = http_dual(&lab, &www);
    let _ps = proxy_server(&lab);
    let _resolver = router_resolver(&lab);
    // Before any gateway: the client forwards the LAN (the fetch below is the control).
    lan_fetch_quick(&lab, AROUND).unwrap();
    assert!(switch(&lab).is_none());

    let (cap_u, cap_t) = (cli.join("u.pcap"), cli.join("t.pcap"));
    let cu = lab.capture(Link::Untrusted, &cap_u).unwrap();
    let ct = lab.capture(Link::Trusted, &cap_t).unwrap();

    // A start that fails after the switch went in (its metrics address is not this host's).
    let mut args = vec!["gateway", "--lan", "lan", "--via", "198.18.3.2:7100"];
    args.extend_from_slice(&PATHS);
    args.extend_from_slice(&["--metrics", "198.18.99.99:9477"]);
    let out = client(&lab, &args);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let (handle, held) = switch(&lab).expect("no kill switch after a failed start");
    assert_eq!(held, "\"lan\"");
    assert_eq!(installed(&lab), [0; 5]);
    assert_cut_off(&lab, "after-failed-start.example");

    // SIGKILL: the carrying table stays too; the switch is the same table.
    let mut gw = gateway(&lab);
    let out = cli.join("letter.txt");
    lan_fetch(&lab, AROUND, &out).unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), b"through nena\n");
    gw.stop_with(libc::SIGKILL);
    assert_eq!(installed(&lab), [1; 5]);
    assert_eq!(switch(&lab), Some((handle.clone(), held.clone())));
    assert_cut_off(&lab, "after-sigkill.example");

    // Running: DNS over TCP to the router's own resolver is refused at once (a reset), not
    // handed to dnsmasq, which would ask by the WLAN.
    let mut gw = gateway(&lab);
    let r = lan_query(&lab, "198.18.5.1", "steady-tcp.example", true, None);
    assert!(
        r.as_ref()
            .is_err_and(|e| e.contains("ConnectionRefusedError")),
        "TCP DNS to the router: {r:?}"
    );

    // A restart (SIGTERM, then a new start at once) while the LAN host queries the WLAN's
    // resolver every 5 ms: none of them crosses in the gap.
    let mut probe = lab.command(
        Host::Lan,
        "python3",
        [
            "-c",
            "import socket, struct, time\n\
             q = struct.pack('>HHHHHH', 0x3a3a, 0x0100, 1, 0, 0, 0)\n\
             q += b'\\x0eduring-restart\\x07example\\x00' + struct.pack('>HH', 1, 1)\n\
             s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
             while True:\n\
             \x20   try: s.sendto(q, ('198.18.2.1', 53))\n\
             \x20   except OSError: pass\n\
             \x20   time.sleep(0.005)\n",
        ],
    );
    probe
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let probe = Killed(probe.spawn().unwrap());
    assert!(gw.terminate().success());
    let mut gw = gateway(&lab);
    lan_fetch(&lab, AROUND, &out).unwrap();
    drop(probe);
    assert_eq!(switch(&lab), Some((handle.clone(), held.clone())));

    // SIGTERM: the carrying table, its rules and routes are removed; the switch stays.
    assert!(gw.terminate().success());
    let log = gw.stderr();
    assert!(!log.contains("cannot remove"), "{log}");
    assert_eq!(installed(&lab), [0; 5]);
    assert_eq!(switch(&lab), Some((handle.clone(), held.clone())));
    assert_cut_off(&lab, "after-sigterm.example");

    cu.stop().unwrap();
    ct.stop().unwrap();
    for cap in [&cap_u, &cap_t] {
        let raw = std::fs::read(cap).unwrap();
        for name in [
            "after-failed-start",
            "after-sigkill",
            "steady-tcp",
            "during-restart",
            "after-sigterm",
        ] {
            assert_eq!(count(&raw, name.as_bytes()), 0, "{name} in {cap:?}");
        }
        assert_eq!(count(&raw, b"through nena"), 0, "the letter in {cap:?}");
        assert_eq!(
            packets(cap, LAN_HOST),
            0,
            "packets of the LAN host in {cap:?}"
        );
    }

    // Opened by the operator: the table is gone, and the same probes cross the WLAN again.
    let o = lab
        .command(Host::Client, NENA, ["gateway", "open", "--lan", "lan"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("kill switch opened for lan"),
        "{o:?}"
    );
    assert!(switch(&lab).is_none());
    assert!(!sh(&lab, Host::Client, "nft list tables").contains("nena_"));
    let cap_o = cli.join("o.pcap");
    let co = lab.capture(Link::Untrusted, &cap_o).unwrap();
    lan_fetch_quick(&lab, AROUND).unwrap();
    // Nothing answers on the WLAN's side: the queries' crossing is what is looked for.
    let _ = lan_query(&lab, "198.18.2.1", "opened-wlan.example", false, None);
    let _ = lan_query(&lab, "198.18.5.1", "opened-router.example", false, None);
    co.stop().unwrap();
    let raw = std::fs::read(&cap_o).unwrap();
    for name in ["opened-wlan", "opened-router"] {
        assert!(
            count(&raw, name.as_bytes()) > 0,
            "{name} did not cross: the probe sees nothing"
        );
    }
    assert!(packets(&cap_o, LAN_HOST) > 0);
}

/// The counter of the carrying table's reverse-path rule for IPv4.
fn spoofed_drops(lab: &Lab) -> u64 {
    let t = sh(lab, Host::Client, "nft list table inet nena_gateway");
    let line = t
        .lines()
        .find(|l| l.contains("ip saddr != 0.0.0.0 fib saddr . iif oif missing"))
        .unwrap_or_else(|| panic!("no reverse-path rule: {t}"));
    line.split("counter packets ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no counter: {line}"))
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn a_lan_host_forging_a_source_outside_the_lan_gets_nothing_answered_and_is_counted() {
    use crate::transfer_run_dns_udp::{dnsmasq, udp_echo, NetnsResolvConf};
    let lab = lab_with(|c| c.lan = true);
    let _open = OpenOnDrop(&lab);
    laptop_routes(&lab, true);
    route_the_lan(&lab);
    sh(&lab, Host::Client, "sysctl -qw net.ipv4.ip_forward=1");
    let _dns = dnsmasq(&lab);
    let _echo = udp_echo(&lab);
    let _srv_conf = NetnsResolvConf::new(&lab, Host::Server, "198.18.3.2");
    let _ps = proxy_server(&lab);
    let _gw = gateway_with(&lab, &["--udp", "carry"]);
    // The control: from the LAN host's own address, the echo and the name are answered
    // through nena; IPv6 (neighbour discovery, link-local) still works.
    let echoed = lan_udp_echo_to(&lab, "198.18.3.2", 7007, "from-the-lan").unwrap();
    assert_eq!(echoed, "198.18.3.2 7007 from-the-lan");
    lan_query(&lab, "198.18.2.1", "files.example.test", false, None).unwrap();
    // The router's global and link-local IPv6 addresses answer a TCP connection to a closed
    // port at once (a reset: neighbour discovery worked both ways and the reverse-path
    // rule let the LAN host's global and link-local sources through).
    let ll = sh(&lab, Host::Client, "ip -6 -o addr show dev lan scope link");
    let ll = ll
        .split_whitespace()
        .skip_while(|w| *w != "inet6")
        .nth(1)
        .and_then(|a| a.split('/').next())
        .unwrap_or_else(|| panic!("no link-local address on lan: {ll}"))
        .to_string();
    for (dst, scope) in [
        ("2001:2:0:5::1", "0"),
        (ll.as_str(), "socket.if_nametoindex('eth0')"),
    ] {
        let r = lan_python(
            &lab,
            &format!(
                "import socket\n\
                 s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)\n\
                 s.settimeout(5)\n\
                 s.connect(('{dst}', 9, 0, {scope}))\n"
            ),
        );
        assert!(
            r.as_ref()
                .is_err_and(|e| e.contains("ConnectionRefusedError")),
            "[{dst}]:9 from the LAN host: {r:?}"
        );
    }

    let cli = TempDir::new("rp");
    let caps: Vec<_> = [Link::Untrusted, Link::Trusted, Link::Lan]
        .into_iter()
        .map(|l| {
            let f = cli.join(&format!("{l:?}.pcap"));
            let c = lab.capture(l, &f).unwrap();
            (f, c)
        })
        .collect();
    let before = spoofed_drops(&lab);
    sh(&lab, Host::Lan, "ip addr add 198.18.9.9/32 dev eth0");
    let dns = lan_query(
        &lab,
        "198.18.2.1",
        "forged-source.example",
        false,
        Some("198.18.9.9"),
    );
    assert!(dns.is_err(), "a forged source's query answered: {dns:?}");
    let udp = lan_python(
        &lab,
        "import socket\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         s.bind(('198.18.9.9', 0))\n\
         s.settimeout(3)\n\
         s.sendto(b'nena-forged-marker', ('198.18.3.2', 7007))\n\
         print(s.recvfrom(4096))\n",
    );
    assert!(udp.is_err(), "a forged source's datagram answered: {udp:?}");
    let after = spoofed_drops(&lab);
    assert!(
        after >= before + 2,
        "dropped {before} before, {after} after"
    );

    for (f, c) in caps {
        c.stop().unwrap();
        // Nothing goes back to the forged address, on any link.
        assert_eq!(packets(&f, "dst host 198.18.9.9"), 0, "an answer in {f:?}");
        if f.ends_with("Lan.pcap") {
            // The forged packets themselves are on the LAN link: the probe sent them.
            assert!(
                packets(&f, "src host 198.18.9.9") >= 2,
                "no forged packet in {f:?}"
            );
            continue;
        }
        let raw = std::fs::read(&f).unwrap();
        assert_eq!(
            count(&raw, b"forged-source"),
            0,
            "the query's name in {f:?}"
        );
        assert_eq!(
            count(&raw, b"nena-forged-marker"),
            0,
            "the datagram in {f:?}"
        );
        assert_eq!(
            packets(&f, "host 198.18.9.9"),
            0,
            "the forged source in {f:?}"
        );
    }
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn nonexistent_trusted_and_untrusted_interfaces_are_refused_before_anything_is_installed() {
    let lab = lab_with(|c| c.lan = true);
    let _open = OpenOnDrop(&lab);
    for (flag, paths) in [
        (
            "--trusted",
            ["--trusted", "nosuchif", "--untrusted", "untrusted"],
        ),
        (
            "--untrusted",
            ["--trusted", "trusted", "--untrusted", "nosuchif"],
        ),
    ] {
        let mut gw = vec!["gateway", "--lan", "lan", "--via", "198.18.3.2:7100"];
        gw.extend_from_slice(&paths);
        let mut send = vec!["send", "/etc/hostname", "--to", "198.18.3.2:4433"];
        send.extend_from_slice(&paths);
        for args in [gw, send] {
            let out = client(&lab, &args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
            assert!(
                err.contains(&format!("{flag} nosuchif: no such interface")),
                "{err}"
            );
        }
        // Nothing installed: no table (not even the switch), no rule.
        assert!(!sh(&lab, Host::Client, "nft list tables").contains("nena_"));
        assert!(!sh(&lab, Host::Client, "ip rule show").contains("lookup 4710"));
    }
}

/// A `--lan` that is one of the gateway's own paths (named as an interface or by its
/// address) or that carries the host's default route (the WAN) is refused in one line with
/// status 2, before anything is installed.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn a_lan_that_is_a_path_or_the_wan_is_refused_before_anything_is_installed() {
    let lab = lab_with(|c| c.lan = true);
    let _open = OpenOnDrop(&lab);
    let trusted_addr = sh(&lab, Host::Client, "ip -4 -o addr show dev trusted")
        .split_whitespace()
        .nth(3)
        .and_then(|a| a.split('/').next().map(str::to_string))
        .expect("the trusted link's address");
    let gateway = |lan: &str, paths: &[&str], want: &str| {
        let mut args = vec!["gateway", "--lan", lan, "--via", "198.18.3.2:7100"];
        args.extend_from_slice(paths);
        let out = client(&lab, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!sh(&lab, Host::Client, "nft list tables").contains("nena_"));
        assert!(!sh(&lab, Host::Client, "ip rule show").contains("lookup 4710"));
    };
    let both = ["--trusted", "trusted", "--untrusted", "untrusted"];
    gateway(
        "untrusted",
        &both,
        "--lan untrusted is also a --untrusted path",
    );
    gateway("trusted", &both, "--lan trusted is also a --trusted path");
    gateway(
        "trusted",
        &["--trusted", &trusted_addr],
        "--lan trusted is also a --trusted path",
    );
    // The default route on the untrusted link, which the command does not name.
    laptop_routes(&lab, false);
    gateway(
        "untrusted",
        &["--trusted", "trusted"],
        "--lan untrusted carries this host's default route",
    );
}
