//! `nena run` on a client set up as Fedora has it (issue 55, item 2): glibc's nsswitch.conf
//! says `hosts: resolve [!UNAVAIL=return] files dns`, systemd's nss-resolve module
//! (libnss-resolve, unpacked by scripts/install-deps.sh into a cache directory and loaded with
//! LD_LIBRARY_PATH) asks `/run/systemd/resolve/io.systemd.Resolve` over varlink, and a fake
//! systemd-resolved listens there, records every name it is asked and answers with an
//! attacker's address inside the proxy server's `--allow`. nscd's socket and the D-Bus system
//! bus are fakes too, recording what reaches them. All of it lives in a mount namespace of the
//! test's own (a tmpfs over /run, a bind mount over /etc/nsswitch.conf): the host's /run and
//! /etc are untouched.
//!
//! - control: `getent ahostsv4` in that namespace, without nena, asks the fake resolver (and
//!   nscd) and gets the attacker's address: the setup works;
//! - through `nena run` (as root, then as the sudo caller): no name reaches the fake resolver
//!   or nscd, CMD's nsswitch.conf names only local sources, the sockets are hidden (connect
//!   refused), and once a root CMD unmounts what hides them the cgroup's connect_unix program
//!   refuses them (EPERM); curl fetches the right page by name through nena;
//! - the D-Bus system bus is refused by default and reachable with `--system-bus`.

use crate::harness::*;
use crate::transfer_run_dns_udp::{dnsmasq, NetnsResolvConf};
use nena_lab::{Host, Lab};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The name: dnsmasq on the server host answers 198.18.3.2 (the right page), the fake
/// systemd-resolved the attacker's address.
const NAME: &str = "files.example.test";
const ATTACKER: &str = "198.18.3.66";

/// Where scripts/install-deps.sh unpacks systemd's nss-resolve module.
const NSS_RESOLVE_DIR: &str = "/var/cache/nena/libnss-resolve";

/// A fake systemd-resolved (varlink: NUL-terminated JSON on
/// /run/systemd/resolve/io.systemd.Resolve), nscd (/run/nscd/socket) and D-Bus system bus
/// (/run/dbus/system_bus_socket): each line of the log (argv[1]) says what reached which.
/// ResolveHostname is answered with argv[2] for IPv4 (or any family), with no record for
/// IPv6. Prints `ready` once all three listen; ends when its standard input closes.
const FAKE: &str = r#"
import socket, json, os, sys, threading, struct
log = open(sys.argv[1], "a", buffering=1)
attacker = [int(x) for x in sys.argv[2].split(".")]
def varlink(c):
    buf = b""
    while True:
        d = c.recv(4096)
        if not d:
            return
        buf += d
        while b"\0" in buf:
            msg, buf = buf.split(b"\0", 1)
            m = json.loads(msg)
            p = m.get("parameters", {})
            log.write("varlink %s %s\n" % (m.get("method"), p.get("name")))
            if m.get("method") == "io.systemd.Resolve.ResolveHostname" and p.get("family", 0) in (0, 2):
                r = {"parameters": {"addresses": [{"ifindex": 1, "family": 2, "address": attacker}],
                                    "name": p["name"], "flags": 0}}
            else:
                r = {"error": "io.systemd.Resolve.NoSuchResourceRecord", "parameters": {}}
            c.sendall(json.dumps(r).encode() + b"\0")
def nscd(c):
    h = c.recv(12)
    if len(h) == 12:
        ver, typ, n = struct.unpack("iii", h)
        key = b""
        while len(key) < n:
            d = c.recv(n - len(key))
            if not d:
                break
            key += d
        log.write("nscd %d %s\n" % (typ, key.rstrip(b"\0").decode(errors="replace")))
def bus(c):
    log.write("dbus connect\n")
def serve(path, f):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(16)
    def loop():
        while True:
            c, _ = s.accept()
            def one(c=c):
                try:
                    f(c)
                finally:
                    c.close()
            threading.Thread(target=one, daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()
serve("/run/systemd/resolve/io.systemd.Resolve", varlink)
serve("/run/nscd/socket", nscd)
serve("/run/dbus/system_bus_socket", bus)
print("ready", flush=True)
sys.stdin.read()
"#;

/// The sockets CMD probes.
const SOCKETS: [&str; 3] = [
    "/run/systemd/resolve/io.systemd.Resolve",
    "/run/nscd/socket",
    "/run/dbus/system_bus_socket",
];

/// What CMD does: its hosts line, getaddrinfo of the name, a connect to each socket (saying
/// whether the path is still a socket or hidden); with `umount` (root) it then unmounts what
/// hides them and connects again. One line each.
const PROBE: &str = r#"
import socket, sys, errno, subprocess, os, stat
name, umount, paths = sys.argv[1], sys.argv[2] == "umount", sys.argv[3:]
hosts = [l.split() for l in open("/etc/nsswitch.conf") if l.strip().startswith("hosts:")]
print("nsswitch", " ".join(hosts[0]) if hosts else "none")
print("getaddrinfo", " ".join(sorted({a[4][0] for a in socket.getaddrinfo(name, 8000, socket.AF_INET, socket.SOCK_STREAM)})))
def conn(p):
    kind = "socket" if stat.S_ISSOCK(os.stat(p).st_mode) else "hidden"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(p)
        return kind + " connected"
    except OSError as e:
        return kind + " " + errno.errorcode.get(e.errno, str(e.errno))
    finally:
        s.close()
for p in paths:
    print("connect", p, conn(p))
if umount:
    for p in paths:
        while subprocess.call(["umount", p], stderr=subprocess.DEVNULL) == 0:
            pass
        print("unmounted", p, conn(p))
"#;

/// The fake Fedora host: a mount namespace (in the client's network namespace) with a tmpfs
/// over /run holding the fake daemons' sockets and the test's nsswitch.conf bound over
/// /etc/nsswitch.conf. Commands enter it with [`Fedora::command`]; dropping it ends the fake
/// daemons, and with them the namespace.
struct Fedora {
    fake: Killed,
    log: PathBuf,
}

impl Fedora {
    fn up(lab: &Lab, dir: &Path) -> Fedora {
        let nsswitch = dir.join("nsswitch.conf");
        std::fs::write(
            &nsswitch,
            "passwd: files\ngroup: files\nhosts: resolve [!UNAVAIL=return] files dns\n",
        )
        .unwrap();
        let log = dir.join("resolver.log");
        std::fs::write(&log, "").unwrap();
        let setup = "set -e; mount -t tmpfs nena-test-run /run; \
                     mkdir -p /run/systemd/resolve /run/nscd /run/dbus; \
                     mount --bind \"$1\" /etc/nsswitch.conf; \
                     exec python3 -c \"$2\" \"$3\" \"$4\"";
        let mut fake = lab
            .command(
                Host::Client,
                "unshare",
                [
                    "--mount",
                    "--propagation",
                    "private",
                    "sh",
                    "-c",
                    setup,
                    "sh",
                    nsswitch.to_str().unwrap(),
                    FAKE,
                    log.to_str().unwrap(),
                    ATTACKER,
                ],
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(fake.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert_eq!(first.trim(), "ready", "the fake resolver did not start");
        Fedora {
            fake: Killed(fake),
            log,
        }
    }

    /// `program args` in the fake host's mount namespace and the client's network namespace,
    /// with the nss-resolve module on LD_LIBRARY_PATH.
    fn command(&self, program: &str, args: &[&str]) -> Command {
        let mut c = Command::new("nsenter");
        c.args([
            "--target",
            &self.fake.0.id().to_string(),
            "--mount",
            "--net",
            "--",
        ])
        .arg(program)
        .args(args)
        .env("LD_LIBRARY_PATH", NSS_RESOLVE_DIR)
        .env_remove("SUDO_UID")
        .env_remove("SUDO_GID")
        .stdin(Stdio::null());
        c
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap()
    }
}

/// python3's http.server on `addr`:8000 of the server host, serving `dir`.
fn http_on(lab: &Lab, addr: &str, dir: &TempDir) -> Killed {
    let c = lab
        .command(
            Host::Server,
            "python3",
            [
                "-m",
                "http.server",
                "8000",
                "--bind",
                addr,
                "--directory",
                dir.path().to_str().unwrap(),
            ],
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let k = Killed(c);
    wait_accepts(
        lab,
        Host::Server,
        format!("{addr}:8000").parse().unwrap(),
        "http.server",
    );
    k
}

fn output(c: &mut Command) -> (bool, String, String) {
    let out = c.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn nena_run_names_never_reach_systemd_resolved_nscd_or_the_system_bus() {
    assert!(
        Path::new(NSS_RESOLVE_DIR)
            .join("libnss_resolve.so.2")
            .exists(),
        "no nss-resolve module in {NSS_RESOLVE_DIR}: run scripts/install-deps.sh"
    );
    let lab = lab();
    laptop_routes(&lab, true);
    let _server_resolv = NetnsResolvConf::new(&lab, Host::Server, "198.18.3.2");
    // The WLAN's resolver, as DHCP set it.
    let _client_resolv = NetnsResolvConf::new(&lab, Host::Client, "198.18.2.1");
    let _dns = dnsmasq(&lab);
    // The right page on 198.18.3.2, the attacker's on 198.18.3.66 (both inside --allow).
    let add = lab
        .command(
            Host::Server,
            "ip",
            ["addr", "add", &format!("{ATTACKER}/32"), "dev", "lo"],
        )
        .status()
        .unwrap();
    assert!(add.success());
    let right = TempDir::new("run-resolvers-right");
    std::fs::write(right.join("letter.txt"), "the right letter\n").unwrap();
    let wrong = TempDir::new("run-resolvers-attacker");
    std::fs::write(wrong.join("letter.txt"), "the attacker's letter\n").unwrap();
    let _http = http_on(&lab, "198.18.3.2", &right);
    let _evil = http_on(&lab, ATTACKER, &wrong);
    let listen = server(&lab, 7641);
    let _ps = spawn_listening(
        &lab,
        Host::Server,
        &[
            "-v",
            "proxy",
            "server",
            "--listen",
            &listen,
            // The right page and the attacker's, both on the server host: its own
            // addresses, each named (a wider rule does not reach them).
            "--allow",
            "198.18.3.2/32:8000",
            "--allow",
            "198.18.3.66/32:8000",
        ],
    );
    let dir = TempDir::new("run-resolvers");
    let fedora = Fedora::up(&lab, dir.path());

    // Control: without nena, glibc asks nscd, then the fake systemd-resolved, and takes the
    // attacker's address.
    let (ok, out, err) = output(&mut fedora.command("getent", &["ahostsv4", NAME]));
    assert!(ok, "getent: {err}");
    assert!(
        out.lines().all(|l| l.starts_with(ATTACKER)) && !out.is_empty(),
        "the control did not get the fake resolver's answer: {out}"
    );
    let control = fedora.log();
    assert!(
        control.contains(&format!(
            "varlink io.systemd.Resolve.ResolveHostname {NAME}"
        )),
        "{control}"
    );
    assert!(control.contains(&format!("nscd 14 {NAME}")), "{control}");

    let url = format!("http://{NAME}:8000/letter.txt");
    let script = "python3 -c \"$1\" \"$2\" \"$3\" \"$4\" \"$5\" \"$6\" && \
                  curl -sS --max-time 30 \"$7\"";
    let run = |extra: &[&str], umount: bool, sudo: bool| -> (bool, String, String) {
        let mut args = vec!["-v", "run", "--via", listen.as_str()];
        args.extend_from_slice(extra);
        args.extend_from_slice(&PATHS);
        args.extend_from_slice(&["--", "sh", "-c", script, "sh", PROBE, NAME]);
        args.push(if umount { "umount" } else { "no" });
        args.extend_from_slice(&SOCKETS);
        args.push(&url);
        let mut c = fedora.command(NENA, &args);
        if sudo {
            c.env("SUDO_UID", "65534").env("SUDO_GID", "65534");
        }
        output(&mut c)
    };
    // The lines CMD prints: each socket's connect (the bus's as `bus` says; the others
    // hidden by the mount namespace and refused by the connect_unix program), then with
    // `after` each one's connect once unmounted.
    let expect = |bus: &str, after: Option<&str>| -> Vec<String> {
        let mut v = vec![
            "nsswitch hosts: files dns".to_string(),
            "getaddrinfo 198.18.3.2".to_string(),
        ];
        for (i, s) in SOCKETS.iter().enumerate() {
            v.push(format!(
                "connect {s} {}",
                if i == 2 { bus } else { "hidden EPERM" }
            ));
        }
        for s in after
            .iter()
            .flat_map(|a| SOCKETS.iter().map(move |s| (s, a)))
        {
            v.push(format!("unmounted {} {}", s.0, s.1));
        }
        v.push("the right letter".to_string());
        v
    };
    let lines = |out: &str| -> Vec<String> { out.lines().map(str::to_string).collect() };

    // As root: the sockets are hidden (/dev/null over them) and refused (EPERM); unmounted,
    // the connect_unix program alone refuses them. curl fetched the right page.
    let (ok, out, err) = run(&[], true, false);
    assert!(ok, "{out}\n{err}");
    assert_eq!(
        lines(&out),
        expect("hidden EPERM", Some("socket EPERM")),
        "{err}"
    );
    assert!(
        err.contains(&format!("DNS A {NAME}.: answered through nena")),
        "{err}"
    );
    // The probe's six, and glibc's own tries of nscd's socket.
    let refused: u64 = err
        .split("AF_UNIX connects to resolvers refused ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {err}"));
    assert!(refused >= 6, "{err}");
    assert!(
        err.contains("CMD's mount namespace: nsswitch.conf with a local hosts line"),
        "{err}"
    );

    // As the sudo caller (nobody): the namespace was made before the privileges went.
    let (ok, out, err) = run(&[], false, true);
    assert!(ok, "{out}\n{err}");
    assert_eq!(lines(&out), expect("hidden EPERM", None), "{err}");
    assert!(err.contains("runs as nobody"), "{err}");

    // --system-bus: the bus is reachable (and nothing else is).
    let (ok, out, err) = run(&["--system-bus"], false, false);
    assert!(ok, "{out}\n{err}");
    assert_eq!(lines(&out), expect("socket connected", None), "{err}");

    // Since the control: no name, no hosts request to nscd (types 4-7, 13, 14) and nothing
    // on varlink; the bus reached once (--system-bus). nena's own lookup of the sudo
    // caller's passwd and group entries (outside CMD's namespace) may reach nscd.
    let log = fedora.log();
    let since: Vec<&str> = log[control.len()..].lines().collect();
    let hosts_request = |l: &&str| {
        l.starts_with("nscd ")
            && l.split_whitespace()
                .nth(1)
                .and_then(|t| t.parse::<u32>().ok())
                .is_some_and(|t| matches!(t, 4..=7 | 13 | 14))
    };
    assert!(
        since
            .iter()
            .all(|l| !l.contains(NAME) && !l.starts_with("varlink") && !hosts_request(l)),
        "a name reached the fake daemons through nena run: {since:?}"
    );
    assert_eq!(
        since.iter().filter(|l| **l == "dbus connect").count(),
        1,
        "{since:?}"
    );
}
