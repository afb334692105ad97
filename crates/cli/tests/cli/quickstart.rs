//! The README's quickstarts (issue 58 item 5), run as written. Each recipe's commands are
//! read from README.md ([`crate::recipes`]) and run with bash in the lab host its `# on the
//! ...` comment names, as a fresh user there (a home of its own as HOME and working
//! directory, `nena` on the PATH), with nothing changed but the user's values the README
//! names (`SERVER` and the interface names, [`crate::recipes::USER_VALUES`]); the file the
//! reader is told to copy (the access token) is copied from the server's home to the
//! laptop's or router's. The lab's router plays the web: python's http.server on
//! 198.18.3.1, which the recipes' `--allow 0.0.0.0/0` reaches.
//!
//! * laptop: the shell `nena run` opens fetches a file with curl, byte-exact; the web saw
//!   the proxy server, not the laptop; the first subflow (MP_CAPABLE) crossed the trusted
//!   link and the untrusted one only joined, and carried payload, none of it plaintext.
//! * LAN: a host behind the router fetches a file with curl, byte-exact, through the
//!   gateway; the web saw the proxy server; no packet of the LAN host crossed either link,
//!   no plaintext either, and the untrusted link carried payload.
//! * both: the servers and the gateway then stop on Ctrl-C (SIGINT), with status 0.
//! * the server's recipe runs in the package test (`tests/meta/package_deb.rs`), whose root
//!   booted under systemd is where `dpkg -i` and `systemctl` can run.
//!
//! Rootless: the README keeps `make demo` and `make test` first and the three recipes on its
//! first screen, each a few commands, with the values to replace named above them.

use crate::harness::*;
use crate::recipes::{in_the_lab, recipe, Machine, Step, README, USER_VALUES};
use crate::transfer_gateway::{lan_fetch, route_the_lan, tcp_payload, LAN_HOST};
use nena_lab::{Host, Lab, Link, Rate};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The port of the recipes' proxy server (`--listen 0.0.0.0:7100`).
const PROXY_PORT: u16 = 7100;

/// Where the web's file is: python's http.server on the lab's router.
const WEB: &str = "198.18.3.1:8000";

/// A machine of a recipe in the lab: its host and its user's home.
struct Place {
    host: Host,
    home: TempDir,
}

impl Place {
    fn new(host: Host, tag: &str) -> Place {
        Place {
            host,
            home: TempDir::new(tag),
        }
    }
}

/// PATH with the built `nena` first, as an installed one would be.
fn path_with_nena() -> String {
    let dir = Path::new(NENA).parent().unwrap().display().to_string();
    match std::env::var("PATH") {
        Ok(p) => format!("{dir}:{p}"),
        Err(_) => dir,
    }
}

/// `bash -c LINE` in `place`'s host, as its user: HOME and the working directory are its
/// home, no XDG_STATE_HOME (nena's keys and pins in that home: a fresh machine's).
fn bash(lab: &Lab, place: &Place, line: &str) -> Command {
    let mut c = lab.command(place.host, "bash", ["-c", line]);
    c.current_dir(place.home.path())
        .env("HOME", place.home.path())
        .env_remove("XDG_STATE_HOME")
        .env_remove("SUDO_UID")
        .env_remove("SUDO_GID")
        .env("PATH", path_with_nena());
    c
}

/// What a recipe left running and what it printed.
#[derive(Default)]
struct Ran {
    /// The servers and gateways (bash execs a single command: the process is nena's).
    daemons: Vec<Proc>,
    /// What the shell `nena run` opened printed (the commands given to it on its input).
    shell_output: Vec<u8>,
}

/// `nena run ... -- SHELL` in the foreground: killed with SIGTERM if the test fails while
/// it runs (nena run then ends CMD and removes its cgroup and programs).
struct Foreground(Child);

impl Drop for Foreground {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            // SAFETY: signalling our own child by its pid.
            unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
            let exited = nena_testkit::poll_until(Duration::from_secs(10), || {
                matches!(self.0.try_wait(), Ok(Some(_)))
            });
            if !exited {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
    }
}

/// Runs one recipe's steps in order: long-running nena commands (servers, the gateway)
/// until they listen, `nena run` with `shell_input` typed into its shell, the rest to
/// completion (each must succeed). Before the first step on the laptop or the router, the
/// files the server's steps made that the README says to copy (`with a copy of token`)
/// are copied there.
fn run_recipe(lab: &Lab, steps: &[Step], server: &Place, client: &Place, shell_input: &str) -> Ran {
    let mut ran = Ran::default();
    let mut copied = false;
    for step in steps {
        let place = match step.on {
            Machine::Server => server,
            Machine::Laptop | Machine::Router => client,
        };
        let line = step.in_the_lab();
        if step.on != Machine::Server && !copied && line.contains("--token-file token") {
            std::fs::copy(server.home.join("token"), client.home.join("token"))
                .expect("the server's steps made ./token");
            copied = true;
        }
        if line.starts_with("nena proxy server") || line.starts_with("nena gateway") {
            ran.daemons
                .push(spawn_listening_cmd(bash(lab, place, &line), &[&line]));
        } else if line.starts_with("nena run") {
            ran.shell_output = through_nena_run(lab, place, &line, shell_input);
        } else {
            let out = bash(lab, place, &line)
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "`{line}` failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    ran
}

/// `line` (`nena run ... -- bash`) with `input` typed into the shell it opens; the
/// shell's standard output. nena run and its shell must end with status 0 within 2 minutes.
fn through_nena_run(lab: &Lab, place: &Place, line: &str, input: &str) -> Vec<u8> {
    let mut child = Foreground(
        bash(lab, place, line)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    child
        .0
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap(); // the pipe closed: the shell reads its end and exits
    let mut out = child.0.stdout.take().unwrap();
    let mut err = child.0.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let status =
        nena_testkit::wait_for("nena run's shell to end", Duration::from_secs(120), || {
            child.0.try_wait().unwrap()
        });
    let stdout = reader.join().unwrap();
    let stderr = err_reader.join().unwrap();
    assert!(status.success(), "`{line}` ended with {status}: {stderr}");
    stdout
}

/// Stops what the recipe left running, the last started first, as its reader would with
/// Ctrl-C (SIGINT): each ends with status 0 (and removes what it set up: the gateway its
/// nftables table and routes, each its control socket).
fn stop_all(ran: &mut Ran) {
    for d in ran.daemons.iter_mut().rev() {
        let status = d.stop_with(libc::SIGINT);
        assert!(status.success(), "ended with {status}: {}", d.stderr());
    }
}

/// python's http.server on the router's 198.18.3.1:8000, serving `dir`, its log (the
/// clients' addresses) in `log`; returns once it accepts connections.
fn web(lab: &Lab, dir: &TempDir, log: &Path) -> Killed {
    let (ip, port) = WEB.split_once(':').unwrap();
    let mut cmd = lab.command(
        Host::Router,
        "python3",
        [
            "-u",
            "-m",
            "http.server",
            port,
            "--bind",
            ip,
            "--directory",
            dir.path().to_str().unwrap(),
        ],
    );
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(log).unwrap()));
    let http = Killed(cmd.spawn().expect("python3 -m http.server"));
    wait_accepts(
        lab,
        Host::Router,
        WEB.parse().unwrap(),
        "the web's http.server",
    );
    http
}

/// The web's log lines of `GET /PATH`: each from the proxy server's address (the web saw
/// nena's proxy server, never the laptop or the LAN host), `n` of them.
fn assert_fetched_by_the_proxy_server(log: &Path, path: &str, n: usize) {
    let log = std::fs::read_to_string(log).unwrap();
    let gets: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(&format!("GET {path} ")))
        .collect();
    assert_eq!(gets.len(), n, "{log}");
    assert!(
        gets.iter().all(|l| l.starts_with("198.18.3.2 ")),
        "the web saw another address than the proxy server's: {log}"
    );
}

/// The SYNs (without ACK) to the proxy server's port in a capture, as tcpdump prints them
/// (their MPTCP option: `mptcp capable` opens a connection, `mptcp join` adds a subflow).
fn syns(cap: &Path) -> Vec<String> {
    let o = Command::new("tcpdump")
        .args(["-nr", cap.to_str().unwrap()])
        .arg(format!(
            "tcp dst port {PROXY_PORT} and tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn"
        ))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// tcpdump's MPTCP option of a SYN: `mptcp 4 capable v1` (the length before the subtype).
fn mptcp_option(line: &str) -> &str {
    line.split_once("mptcp ").map(|x| x.1).unwrap_or_default()
}

fn is_capable(line: &str) -> bool {
    mptcp_option(line).contains("capable")
}

fn is_join(line: &str) -> bool {
    mptcp_option(line).contains("join")
}

/// Both client links' captures: no 16-byte run of `known` on either; every connection to
/// the proxy server opened on the trusted link (MP_CAPABLE there, only MP_JOIN on the
/// untrusted one); and the untrusted link carried payload, not only a join's handshake.
fn assert_both_paths_trusted_first(trusted: &Path, untrusted: &Path, known: &Path) {
    for cap in [trusted, untrusted] {
        assert_eq!(
            runs_found(cap, known),
            0,
            "plaintext of the file in {cap:?}"
        );
    }
    let (t, u) = (syns(trusted), syns(untrusted));
    assert!(
        t.iter().any(|l| is_capable(l)),
        "no connection opened on the trusted link: {t:#?}"
    );
    assert!(
        !u.iter().any(|l| is_capable(l)),
        "a connection opened on the untrusted link: {u:#?}"
    );
    assert!(
        u.iter().any(|l| is_join(l)),
        "no subflow joined on the untrusted link: {u:#?}"
    );
    let payload = tcp_payload(untrusted, known);
    assert!(
        payload > 256 << 10,
        "the untrusted link carried only {payload} B of TCP payload"
    );
}

/// A lab with both client links at 20 Mbit/s: a 3 MB fetch lasts over a second, long
/// enough for the untrusted subflow to join and carry its share.
fn paced(c: &mut nena_lab::LabConfig) {
    c.trusted_rate = Some(Rate::mbit(20));
    c.untrusted_rate = Some(Rate::mbit(20));
}

/// The file the web serves and its path there.
fn web_file(dir: &TempDir) -> (Vec<u8>, PathBuf) {
    let body = text(3_000_000, 58);
    let path = dir.join("page.txt");
    std::fs::write(&path, &body).unwrap();
    (body, path)
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn the_laptop_quickstart_carries_an_unmodified_programs_fetch_over_both_paths() {
    let steps = recipe("laptop");
    let lab = lab_with(paced);
    laptop_routes(&lab, true);
    let www = TempDir::new("qs-www");
    let (body, known) = web_file(&www);
    let log = www.join("http.log");
    let _web = web(&lab, &www, &log);
    let (server, laptop) = (
        Place::new(Host::Server, "qs-vps"),
        Place::new(Host::Client, "qs-laptop"),
    );
    let caps = TempDir::new("qs-caps");
    let (cap_t, cap_u) = (caps.join("trusted.pcap"), caps.join("untrusted.pcap"));
    let ct = lab.capture(Link::Trusted, &cap_t).unwrap();
    let cu = lab.capture(Link::Untrusted, &cap_u).unwrap();

    // What the reader types into the shell: a program that knows nothing of nena.
    let input = format!("curl -sS --max-time 60 http://{WEB}/page.txt\n");
    let mut ran = run_recipe(&lab, &steps, &server, &laptop, &input);
    assert_eq!(ran.daemons.len(), 1, "the recipe starts a proxy server");
    assert!(
        ran.shell_output == body,
        "the shell printed {} bytes, not the page; proxy server: {}",
        ran.shell_output.len(),
        ran.daemons[0].stderr()
    );
    ct.stop().unwrap();
    cu.stop().unwrap();
    assert_fetched_by_the_proxy_server(&log, "/page.txt", 1);
    assert_both_paths_trusted_first(&cap_t, &cap_u, &known);
    stop_all(&mut ran);
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn the_lan_quickstart_carries_a_lan_hosts_fetch_through_the_gateway() {
    let steps = recipe("lan");
    let lab = lab_with(|c| {
        paced(c);
        c.lan = true;
    });
    // The client host as a router: routed like a laptop, forwarding, and the lab's router
    // routes the LAN back to it (a LAN host's packet that went around nena would then
    // reach the web, whose log would show its address).
    laptop_routes(&lab, true);
    route_the_lan(&lab);
    sh(&lab, Host::Client, "sysctl -qw net.ipv4.ip_forward=1");
    let www = TempDir::new("qs-lan-www");
    let (body, known) = web_file(&www);
    let log = www.join("http.log");
    let _web = web(&lab, &www, &log);
    let (server, router) = (
        Place::new(Host::Server, "qs-lan-vps"),
        Place::new(Host::Client, "qs-router"),
    );
    let caps = TempDir::new("qs-lan-caps");
    let (cap_t, cap_u) = (caps.join("trusted.pcap"), caps.join("untrusted.pcap"));
    let ct = lab.capture(Link::Trusted, &cap_t).unwrap();
    let cu = lab.capture(Link::Untrusted, &cap_u).unwrap();

    let mut ran = run_recipe(&lab, &steps, &server, &router, "");
    assert_eq!(ran.daemons.len(), 2, "a proxy server and a gateway");
    let got = caps.join("page.txt");
    if let Err(e) = lan_fetch(&lab, &format!("http://{WEB}/page.txt"), &got) {
        panic!(
            "the LAN host's fetch failed: {e}\ngateway: {}",
            ran.daemons[1].stderr()
        );
    }
    assert!(
        std::fs::read(&got).unwrap() == body,
        "the LAN host's fetch differs"
    );
    ct.stop().unwrap();
    cu.stop().unwrap();
    assert_fetched_by_the_proxy_server(&log, "/page.txt", 1);
    for cap in [&cap_t, &cap_u] {
        assert_eq!(
            packets(cap, LAN_HOST),
            0,
            "packets of the LAN host in {cap:?}"
        );
    }
    assert_both_paths_trusted_first(&cap_t, &cap_u, &known);
    stop_all(&mut ran);
}

/// The README's first screen: `make demo` and `make test` first (CI runs them from there),
/// then the three recipes, each a few commands, with every value to replace named above
/// them and every machine named; no recipe names a value the tests do not map.
#[test]
fn the_readme_opens_with_the_make_commands_and_three_short_recipes() {
    let mut fenced = README.lines().skip_while(|l| !l.starts_with("```"));
    assert_eq!(fenced.next(), Some("```sh"));
    assert!(fenced.next().unwrap().starts_with("make demo "));
    assert!(fenced.next().unwrap().starts_with("make test "));

    let quick = README
        .split_once("## Quickstart")
        .expect("a Quickstart section")
        .1;
    let intro = quick.split("<!--").next().unwrap();
    for (theirs, _) in USER_VALUES {
        assert!(
            intro.contains(&format!("`{theirs}`")),
            "the Quickstart does not say to replace {theirs}"
        );
    }
    let screen: String = README.lines().take(70).collect::<Vec<_>>().join("\n");
    for (name, on) in [
        ("laptop", Machine::Laptop),
        ("lan", Machine::Router),
        ("server", Machine::Laptop),
    ] {
        let steps = recipe(name);
        assert!(
            (3..=5).contains(&steps.len()),
            "{name}: {} commands: {steps:#?}",
            steps.len()
        );
        assert!(steps.iter().any(|s| s.on == Machine::Server), "{name}");
        assert!(steps.iter().any(|s| s.on == on), "{name}");
        // On the first screen (the fence's end within the first 70 lines).
        let marker = format!("<!-- quickstart:{name} -->");
        let block = screen.split_once(&marker).map(|x| x.1).unwrap_or_default();
        assert!(
            block.matches("```").count() >= 2,
            "{name}: not on the README's first screen"
        );
        // Every nena command reaches the server by its placeholder, and the interfaces are
        // the named ones.
        for s in steps.iter().filter(|s| s.line.contains("--trusted")) {
            assert!(s.line.contains("SERVER:"), "{name}: {}", s.line);
            assert!(
                s.line.contains("--trusted wwan0") && s.line.contains("--untrusted wlan0"),
                "{name}: {}",
                s.line
            );
        }
    }
}

#[test]
fn the_user_values_are_replaced_as_words_only() {
    assert_eq!(
        in_the_lab("nena run --via SERVER:7100 --trusted wwan0 --untrusted wlan0 -- bash"),
        "nena run --via 198.18.3.2:7100 --trusted trusted --untrusted untrusted -- bash"
    );
    assert_eq!(
        in_the_lab("--lan eth1 # eth10 SERVERS"),
        "--lan lan # eth10 SERVERS"
    );
    assert_eq!(in_the_lab("SERVERSERVER eth1eth1"), "SERVERSERVER eth1eth1");
    let steps = crate::recipes::recipe_in(
        "<!-- quickstart:x -->\n\n```sh\n# on the server: a\ntrue\n# on the laptop\necho SERVER\n```\n",
        "x",
    );
    assert_eq!(
        steps,
        [
            Step {
                on: Machine::Server,
                line: "true".into()
            },
            Step {
                on: Machine::Laptop,
                line: "echo SERVER".into()
            }
        ]
    );
    assert_eq!(steps[1].in_the_lab(), "echo 198.18.3.2");
}
