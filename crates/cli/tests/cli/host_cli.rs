//! nena fits the host like other network daemons: shell completions and man pages generated
//! from the clap definitions, `--config FILE` for the long-running commands (keys = long
//! flags, the command line wins, unknown keys and bad values refused in one line), and the
//! systemd units in contrib/systemd with the example configs in contrib/config, and the
//! gateway unit's sandbox letting the first-flight hold load (root, in a lab of its own).
//! The other servers here listen on 127.0.0.1 only, on ephemeral ports.
use crate::harness::nena;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const NENA: &str = env!("CARGO_BIN_EXE_nena");
const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The subcommands listed in `nena ARGS --help` (none: an empty list).
fn listed(args: &[&str]) -> Vec<String> {
    let mut a = args.to_vec();
    a.push("--help");
    let out = nena(&a);
    assert!(out.status.success(), "{a:?}");
    let help = text(&out.stdout);
    let Some(section) = help.split("Commands:").nth(1) else {
        return Vec::new();
    };
    section
        .split("Options:")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| *w != "help")
        .map(str::to_string)
        .collect()
}

/// The top-level subcommands, from the binary's own `--help`.
fn subcommands() -> Vec<String> {
    let list = listed(&[]);
    for want in ["serve", "proxy", "lab", "completions", "man"] {
        assert!(list.iter().any(|s| s == want), "{want} not in {list:?}");
    }
    list
}

fn man_pages(dir: &Path) -> BTreeSet<String> {
    let out = nena(&["man", "--out-dir", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn completions_for_every_shell_name_every_subcommand() {
    // Every subcommand and every subcommand of one, from the binary's --help.
    let mut words: BTreeSet<String> = BTreeSet::new();
    for sub in subcommands() {
        words.extend(listed(&[&sub]));
        words.insert(sub);
    }
    assert!(
        words.contains("server") && words.contains("capture-stop"),
        "{words:?}"
    );
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = nena(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {}", text(&out.stderr));
        let script = text(&out.stdout);
        assert!(script.len() > 1000, "{shell}: {} bytes", script.len());
        let missing: Vec<&String> = words
            .iter()
            .filter(|w| {
                !script
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
                    .any(|t| t == w.as_str())
            })
            .collect();
        assert!(missing.is_empty(), "{shell} completions lack {missing:?}");
        // The config flag is completed too (fish writes it `-l config`).
        assert!(
            script.contains("--config") || script.contains("-l config"),
            "{shell}: no --config"
        );
    }
    let out = nena(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr).lines().count(),
        1,
        "{}",
        text(&out.stderr)
    );
}

/// Problems groff finds in a page with all warnings on: its stderr (empty when clean), or
/// None without groff.
fn groff_warnings(page: &Path) -> Option<String> {
    let out = Command::new("groff")
        .args(["-man", "-Tutf8", "-ww", "-z"])
        .arg(page)
        .output()
        .ok()?;
    let mut w = text(&out.stderr);
    if !out.status.success() {
        w.push_str(&format!(" (exit {:?})", out.status.code()));
    }
    Some(w)
}

#[test]
fn man_pages_one_per_subcommand_and_groff_accepts_them() {
    let dir = tempfile::tempdir().unwrap();
    let pages = man_pages(dir.path());
    assert!(pages.contains("nena.1"), "{pages:?}");
    for sub in subcommands() {
        assert!(
            pages.contains(&format!("nena-{sub}.1")),
            "no page for {sub}"
        );
    }
    for p in ["nena-serve.1", "nena-proxy-server.1", "nena-proxy-client.1"] {
        assert!(pages.contains(p), "no {p}: {pages:?}");
    }
    // The checker catches a broken page (so a clean result means something).
    let bad = dir.path().join("broken.roff");
    std::fs::write(&bad, ".TH X 1\n.SH NAME\n.nosuchmacro x\n").unwrap();
    let have_groff = match groff_warnings(&bad) {
        Some(w) => {
            assert!(w.contains("nosuchmacro"), "groff missed a bad macro: {w:?}");
            true
        }
        None => false,
    };
    for p in &pages {
        let path = dir.path().join(p);
        let roff = std::fs::read_to_string(&path).unwrap();
        assert!(
            roff.starts_with(".ie") || roff.contains("\n.TH "),
            "{p}: no .TH"
        );
        assert!(
            roff.contains(".SH NAME") && roff.contains(".SH SYNOPSIS"),
            "{p}"
        );
        if have_groff {
            let w = groff_warnings(&path).unwrap();
            assert!(w.is_empty(), "groff on {p}: {w}");
        }
    }
    // What a reader sees: the config flag and its help in nena-serve(1).
    let serve = std::fs::read_to_string(dir.path().join("nena-serve.1")).unwrap();
    assert!(
        serve.contains("config") && serve.contains("TOML"),
        "{serve}"
    );
    let out = Command::new("man")
        .arg("-l")
        .arg(dir.path().join("nena-serve.1"))
        .env("MANWIDTH", "100")
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .output();
    if let Ok(out) = out {
        assert!(out.status.success(), "man -l: {}", text(&out.stderr));
        let page = text(&out.stdout);
        assert!(
            page.contains("nena-serve") && page.contains("--listen"),
            "{page}"
        );
    }
}

/// A free port on 127.0.0.1 (bound, then released for the server to take).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `nena ARGS` and return it with the address of its "listening on" line.
fn start(args: &[&str]) -> (Running, SocketAddr) {
    let mut child = Command::new(NENA)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn nena");
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(out).lines();
        if let Some(Ok(l)) = lines.next() {
            let _ = tx.send(l);
        }
        for _ in lines {}
    });
    let line = rx.recv_timeout(Duration::from_secs(10));
    let mut running = Running(child);
    let addr = match &line {
        Ok(l) if l.contains("listening on ") => l
            .rsplit("listening on ")
            .next()
            .unwrap()
            .trim()
            .parse()
            .unwrap(),
        _ => {
            let _ = running.0.kill();
            let _ = running.0.wait();
            let mut err = String::new();
            if let Some(mut e) = running.0.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            panic!("nena {args:?} did not start: {line:?}; stderr: {err}");
        }
    };
    (running, addr)
}

fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn serve_config_file_is_the_flags_and_the_command_line_wins() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let port = free_port();
    let conf = write(
        tmp.path(),
        "serve.toml",
        &format!(
            "listen = \"127.0.0.1:{port}\"\ndir = \"{}\"\nmode = [\"stream\"]\nmax-sessions = 8\n",
            store.display()
        ),
    );
    let conf = conf.to_str().unwrap();
    // From the file alone: it listens where the file says, stores in its dir, and accepts
    // only its modes (the client names stream, which a default client never offers).
    {
        let (_srv, addr) = start(&["serve", "--config", conf]);
        assert_eq!(addr, format!("127.0.0.1:{port}").parse().unwrap());
        TcpStream::connect(addr).expect("connect where the file says");
        let payload = write(
            tmp.path(),
            "hello.txt",
            "a file sent to the configured dir\n",
        );
        let out = nena(&[
            "send",
            payload.to_str().unwrap(),
            "--to",
            &addr.to_string(),
            "--trusted",
            "127.0.0.1",
            "--mode",
            "stream",
            "--no-progress",
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(
            text(&out.stdout).contains("mode stream"),
            "{}",
            text(&out.stdout)
        );
        assert_eq!(
            std::fs::read(store.join("hello.txt")).unwrap(),
            std::fs::read(&payload).unwrap()
        );
    }
    // The command line's --listen and --mode override the file's.
    let other = free_port();
    let listen = format!("127.0.0.1:{other}");
    let (_srv, addr) = start(&[
        "serve", "--config", conf, "--listen", &listen, "--mode", "aead",
    ]);
    assert_eq!(addr.port(), other);
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the file's port is not used when --listen is given"
    );
    let payload = write(tmp.path(), "two.txt", "second\n");
    let out = nena(&[
        "send",
        payload.to_str().unwrap(),
        "--to",
        &addr.to_string(),
        "--trusted",
        "127.0.0.1",
        "--no-progress",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("mode aead"),
        "{}",
        text(&out.stdout)
    );
    assert!(store.join("two.txt").exists());
}

/// Run `nena ARGS`, expect exit 2 and exactly one line on stderr; return it.
fn refused(args: &[&str]) -> String {
    let out = nena(args);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: not one line: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn config_unknown_keys_and_bad_values_are_one_line_and_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().display().to_string();
    let base = format!("listen = \"127.0.0.1:0\"\ndir = \"{dir}\"\n");
    let cases: &[(&str, &[&str], &str)] = &[
        ("unknown.toml", &["serve"], "listn = \"127.0.0.1:1\"\n"),
        ("snake.toml", &["serve"], "max_sessions = 3\n"),
        ("badport.toml", &["serve"], "handshake-timeout = \"soon\"\n"),
        ("badaddr.toml", &["proxy", "client"], "to = \"nowhere\"\n"),
        (
            "list.toml",
            &["serve"],
            "max-file-size = [\"1G\", \"2G\"]\n",
        ),
        ("switch.toml", &["serve"], "overwrite = \"yes\"\n"),
        ("syntax.toml", &["serve"], "mode = [\"aead\"\n"),
    ];
    for (name, cmd, extra) in cases {
        // The proxy client has no --dir: its file gives only --listen beside the case's key.
        let body = if cmd[0] == "proxy" {
            format!("listen = \"127.0.0.1:0\"\n{extra}")
        } else {
            format!("{base}{extra}")
        };
        let f = write(tmp.path(), name, &body);
        let mut args: Vec<&str> = cmd.to_vec();
        args.extend(["--config", f.to_str().unwrap()]);
        let err = refused(&args);
        assert!(err.contains(name), "{err}");
        let key = extra.split([' ', '=']).next().unwrap();
        if *name != "syntax.toml" {
            assert!(
                err.contains(&format!("`{key}`")),
                "{err} does not name {key}"
            );
        } else {
            assert!(err.contains(" line "), "{err}");
        }
    }
    let err = refused(&["serve", "--config", "/nonexistent/nena.toml"]);
    assert!(err.contains("/nonexistent/nena.toml"), "{err}");
    // A key another command has is unknown to this one.
    let f = write(
        tmp.path(),
        "forward.toml",
        &format!("{base}forward = \"127.0.0.1:1\"\n"),
    );
    let err = refused(&["serve", "--config", f.to_str().unwrap()]);
    assert!(err.contains("unknown key `forward`"), "{err}");
    // A bad value in the file is refused even when the command line overrides that key.
    let f = write(
        tmp.path(),
        "bad-over.toml",
        &format!("{base}max-sessions = -1\n"),
    );
    let err = refused(&[
        "serve",
        "--config",
        f.to_str().unwrap(),
        "--max-sessions",
        "5",
    ]);
    assert!(err.contains("`max-sessions`"), "{err}");
}

/// The values of key `k` among a unit's `keys` ([`unit_keys`]), in order.
fn unit_values<'a>(keys: &'a [(String, String)], k: &str) -> Vec<&'a str> {
    keys.iter()
        .filter(|(kk, _)| kk == k)
        .map(|(_, v)| v.as_str())
        .collect()
}

/// `KEY=VALUE` lines of a unit's section (comments and blank lines left out).
fn unit_keys(unit: &str) -> Vec<(String, String)> {
    unit.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('['))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

const UNITS: [(&str, &str); 2] = [
    ("nena-serve.service", "serve.toml"),
    ("nena-proxy-server.service", "proxy-server.toml"),
];

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn units_are_sandboxed_and_their_exec_start_accepts_the_example_config() {
    let tmp = tempfile::tempdir().unwrap();
    for (unit, conf) in UNITS {
        let body = std::fs::read_to_string(format!("{ROOT}/contrib/systemd/{unit}")).unwrap();
        let keys = unit_keys(&body);
        let get = |k: &str| unit_values(&keys, k);
        for (k, v) in [
            ("DynamicUser", "yes"),
            ("ProtectSystem", "strict"),
            ("ProtectHome", "yes"),
            ("PrivateTmp", "yes"),
            ("NoNewPrivileges", "yes"),
            (
                "RestrictAddressFamilies",
                "AF_INET AF_INET6 AF_NETLINK AF_UNIX",
            ),
            ("SystemCallFilter", "@system-service"),
        ] {
            assert_eq!(get(k), [v], "{unit}: {k}");
        }
        // No capability at all (a port below 1024 would need CAP_NET_BIND_SERVICE only).
        assert_eq!(get("CapabilityBoundingSet"), [""], "{unit}");
        assert_eq!(get("AmbientCapabilities"), [""], "{unit}");
        assert_eq!(get("StateDirectory").len(), 1, "{unit}: StateDirectory");
        // Sessions are logged (one info line each), not only problems.
        assert_eq!(get("Environment"), ["RUST_LOG=info"], "{unit}");

        // ExecStart: the installed binary, a subcommand, --control in the unit's runtime
        // directory, --config /etc/nena/CONF.
        let exec = get("ExecStart");
        assert_eq!(exec.len(), 1, "{unit}");
        let argv: Vec<&str> = exec[0].split_whitespace().collect();
        assert_eq!(argv[0], "/usr/bin/nena", "{unit}");
        let n = argv.len();
        assert_eq!(argv[n - 2], "--config", "{unit}");
        assert_eq!(argv[n - 1], format!("/etc/nena/{conf}"), "{unit}");
        // Run the same command with the example config: every key is accepted (the listen
        // address and the directory are moved to a free port and a temporary directory
        // by flags, which checks the file's values and then overrides them).
        let example = format!("{ROOT}/contrib/config/{conf}");
        // The unit's control socket lies in its runtime directory: here, none.
        let mut args: Vec<String> = Vec::new();
        let mut rest = argv[1..n - 2].iter();
        while let Some(a) = rest.next() {
            if *a == "--control" {
                assert!(
                    rest.next()
                        .is_some_and(|p| p.starts_with("/run/nena/control/")),
                    "{unit}: --control outside /run/nena/control"
                );
                args.push("--no-control".into());
            } else {
                args.push(a.to_string());
            }
        }
        args.extend(["--config".into(), example.clone()]);
        args.extend(["--listen".into(), "127.0.0.1:0".into()]);
        if argv[1] == "serve" {
            args.extend(["--dir".into(), tmp.path().display().to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (_srv, addr) = start(&args);
        assert_eq!(addr.ip().to_string(), "127.0.0.1");
    }
    // The proxy client's example config is accepted the same way.
    let example = format!("{ROOT}/contrib/config/proxy-client.toml");
    let (_c, addr) = start(&[
        "proxy",
        "client",
        "--config",
        &example,
        "--listen",
        "127.0.0.1:0",
        "--trusted",
        "127.0.0.1",
        "--untrusted",
        "127.0.0.1",
    ]);
    assert_eq!(addr.ip().to_string(), "127.0.0.1");
}

/// A proxy client's entry has no authentication of its own: a non-loopback address is
/// refused (one line, status 2) unless --allow-remote-clients says so (issue 41, finding 6).
#[test]
fn a_proxy_entry_on_a_non_loopback_address_needs_allow_remote_clients() {
    for (flag, addr) in [
        ("--listen", "0.0.0.0:0"),
        ("--socks5", "[::]:0"),
        ("--listen", "198.18.0.1:0"),
    ] {
        let err = refused(&[
            "proxy",
            "client",
            flag,
            addr,
            "--to",
            "127.0.0.1:9",
            "--trusted",
            "127.0.0.1",
        ]);
        assert!(
            err.contains("is not a loopback address") && err.contains("--allow-remote-clients"),
            "{err}"
        );
    }
    let (_c, addr) = start(&[
        "proxy",
        "client",
        "--listen",
        "0.0.0.0:0",
        "--allow-remote-clients",
        "--to",
        "127.0.0.1:9",
        "--trusted",
        "127.0.0.1",
        "--untrusted",
        "127.0.0.1",
    ]);
    assert!(addr.ip().is_unspecified(), "{addr}");
}

#[test]
fn systemd_analyze_verifies_the_units() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        nena_testkit::skip!("systemd-analyze is not installed");
    }
    let tmp = tempfile::tempdir().unwrap();
    for (unit, conf) in UNITS {
        // The unit as installed, with the binary and config at this checkout's paths (verify
        // checks that ExecStart's binary exists and is executable).
        let body = std::fs::read_to_string(format!("{ROOT}/contrib/systemd/{unit}")).unwrap();
        let body = body.replace("/usr/bin/nena", NENA).replace(
            &format!("/etc/nena/{conf}"),
            &format!("{ROOT}/contrib/config/{conf}"),
        );
        let path = tmp.path().join(unit);
        std::fs::write(&path, &body).unwrap();
        let out = Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(&path)
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert!(
            out.status.success() && err.trim().is_empty(),
            "{unit}: {err}"
        );
        // The checker is not blind: a misspelt key is reported.
        let typo = tmp.path().join(format!("typo-{unit}"));
        std::fs::write(&typo, body.replace("ProtectHome=yes", "ProtectHome=yess")).unwrap();
        let out = Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(&typo)
            .output()
            .unwrap();
        assert!(
            text(&out.stderr).contains("yess") || !out.status.success(),
            "verify missed a bad value"
        );
        // systemd's own exposure score: 1.7 ("OK") for both when written; fail above 2.5.
        let out = Command::new("systemd-analyze")
            .args(["security", "--offline=yes", "--threshold=25", "--no-pager"])
            .arg(&path)
            .output()
            .unwrap();
        let report = text(&out.stdout);
        assert!(
            out.status.success(),
            "{unit}: exposure above 2.5: {}",
            report.lines().last().unwrap_or_default()
        );
        assert!(report.contains("Overall exposure level"), "{report}");
    }
}

/// The gateway's unit: systemd's verify and exposure score (with the four capabilities it
/// needs, and no others), and its example config, whose every key `nena gateway` accepts
/// (the run then stops at the example's LAN interface, which this host does not have,
/// before anything is installed).
#[test]
fn the_gateway_unit_and_its_example_config() {
    let unit = "nena-gateway.service";
    let body = std::fs::read_to_string(format!("{ROOT}/contrib/systemd/{unit}")).unwrap();
    let caps: Vec<&str> = body
        .lines()
        .filter(|l| {
            l.starts_with("CapabilityBoundingSet=") || l.starts_with("AmbientCapabilities=")
        })
        .collect();
    assert_eq!(
        caps,
        [
            "CapabilityBoundingSet=CAP_NET_ADMIN CAP_NET_RAW CAP_BPF CAP_PERFMON",
            "AmbientCapabilities=CAP_NET_ADMIN CAP_NET_RAW CAP_BPF CAP_PERFMON"
        ]
    );
    // the first-flight hold's system call (not in @system-service), and the cgroups kept
    // read-only (the hold only opens its cgroup)
    let keys = unit_keys(&body);
    let get = |k: &str| unit_values(&keys, k);
    assert_eq!(get("SystemCallFilter"), ["@system-service bpf"]);
    assert_eq!(get("ProtectControlGroups"), ["yes"]);
    let example = format!("{ROOT}/contrib/config/gateway.toml");
    let out = Command::new(NENA)
        .args(["gateway", "--config", &example])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--lan lan0: no such interface"), "{err}");
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        nena_testkit::skip!("systemd-analyze is not installed");
    }
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(unit);
    let body = body
        .replace("/usr/bin/nena", NENA)
        .replace("/etc/nena/gateway.toml", &example);
    std::fs::write(&path, &body).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&path)
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(
        out.status.success() && err.trim().is_empty(),
        "{unit}: {err}"
    );
    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=yes", "--no-pager"])
        .arg(&path)
        .output()
        .unwrap();
    let report = text(&out.stdout);
    let last = report.lines().last().unwrap_or_default().to_string();
    eprintln!("{unit}: {last}");
    assert!(report.contains("Overall exposure level"), "{report}");

    // The kill switch's boot unit: CAP_NET_ADMIN alone, ordered after nftables.service
    // (whose ruleset flushes every table) and before the network, and pulled in by the
    // gateway's unit.
    let lock = "nena-gateway-lock.service";
    let lock_body = std::fs::read_to_string(format!("{ROOT}/contrib/systemd/{lock}")).unwrap();
    let lkeys = unit_keys(&lock_body);
    let lget = |k: &str| unit_values(&lkeys, k);
    assert_eq!(lget("CapabilityBoundingSet"), ["CAP_NET_ADMIN"]);
    assert_eq!(lget("Before"), ["network-pre.target shutdown.target"]);
    assert_eq!(lget("After"), ["local-fs.target nftables.service"]);
    assert_eq!(
        lget("ExecStart"),
        ["/usr/bin/nena gateway lock --config /etc/nena/gateway.toml"]
    );
    assert!(get("Wants").iter().any(|w| w.contains(lock)), "{body}");
    assert!(get("After").iter().any(|w| w.contains(lock)), "{body}");
    // systemd's judgment of it, with the example config.
    let path = tmp.path().join(lock);
    std::fs::write(
        &path,
        lock_body
            .replace("/usr/bin/nena", NENA)
            .replace("/etc/nena/gateway.toml", &example),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&path)
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(
        out.status.success() && err.trim().is_empty(),
        "{lock}: {err}"
    );
    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=yes", "--no-pager", "--threshold=25"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{lock}: {}", text(&out.stdout));
}

/// A mistyped subcommand or flag gets clap's "did you mean", still on one line.
#[test]
fn a_typo_is_told_the_command_it_resembles() {
    let e = refused(&["sned", "f", "--to", "198.18.3.2:7000"]);
    assert!(
        e.contains("unrecognized subcommand 'sned'") && e.contains("'send'"),
        "{e}"
    );
    let e = refused(&["send", "f", "--to", "198.18.3.2:7000", "--trustd", "x"]);
    assert!(e.contains("'--trustd'") && e.contains("'--trusted'"), "{e}");
}

/// The capability names of a unit's `CapabilityBoundingSet=` line, as setpriv takes them
/// (`+net_admin,+net_raw,...`).
fn setpriv_caps(unit: &str) -> String {
    let line = unit
        .lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .expect("a CapabilityBoundingSet line");
    line.split_whitespace()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect::<Vec<_>>()
        .join(",")
}

/// The gateway's sandbox lets the first-flight hold load (root; needs setpriv, nsenter and
/// unshare from util-linux): a `nena send` in a lab's client network namespace, with the
/// in-kernel path manager, run as an unprivileged user with only the capabilities of
/// contrib/systemd/nena-gateway.service (bounding, inheritable and ambient sets, as
/// `DynamicUser=` with `AmbientCapabilities=` gives), in the host's mount namespace with
/// its cgroup v2 file system remounted read-only (`ProtectControlGroups=yes`): the hold
/// loads and attaches to the process's cgroup, and the file goes through over both links.
/// The same without CAP_BPF and CAP_PERFMON (the unit before) is refused, naming the hold.
/// The unit's system call filter is checked by `the_gateway_unit_and_its_example_config`
/// (`bpf` is in no group of @system-service, `systemd-analyze syscall-filter`); this test
/// does not apply it (no systemd as PID 1 here).
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn the_gateway_units_sandbox_lets_the_first_flight_hold_load() {
    use crate::harness::{lab_with, serve, server, TempDir, PATHS};
    use std::os::unix::fs::PermissionsExt;
    for tool in ["setpriv", "nsenter", "unshare"] {
        if Command::new(tool).arg("--version").output().is_err() {
            nena_testkit::skip!("{tool} is not installed");
        }
    }
    let Some(cgroup2) = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            (right.split_whitespace().next()? == "cgroup2")
                .then(|| left.split_whitespace().nth(4).map(str::to_string))?
        })
    else {
        nena_testkit::skip!("this host has no cgroup v2 file system");
    };
    let unit =
        std::fs::read_to_string(format!("{ROOT}/contrib/systemd/nena-gateway.service")).unwrap();
    let caps = setpriv_caps(&unit);
    assert!(caps.contains("+bpf") && caps.contains("+perfmon"), "{caps}");
    let lab = lab_with(|c| c.pm = nena_lab::PmMode::Kernel);
    let srv = TempDir::new("unit-hold");
    let _s = serve(&lab, 7000, srv.path(), &[]);
    let to = server(&lab, 7000);
    // what the unprivileged user reads and writes: the file, its state directory
    let dir = TempDir::new("unit-hold-c");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let f = dir.join("f.bin");
    std::fs::write(&f, crate::harness::random(300_000, 11)).unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
    let state = dir.join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o777)).unwrap();
    // The binary as the unprivileged user can run it: a copy in the scratch directory (a
    // clone in a directory only root can enter, as root's 0700 home is, keeps target/ from
    // uid 65534).
    let nena = dir.join("nena");
    std::fs::copy(NENA, &nena).unwrap();
    std::fs::set_permissions(&nena, std::fs::Permissions::from_mode(0o755)).unwrap();
    let netns = format!("/run/netns/{}", lab.netns(nena_lab::Host::Client));
    let send = |caps: &str, name: &str| {
        let mut argv = vec![
            "env".to_string(),
            format!("XDG_STATE_HOME={}", state.display()),
            nena.display().to_string(),
            "send".into(),
            f.display().to_string(),
            "--name".into(),
            name.into(),
            "--to".into(),
            to.clone(),
            "--json".into(),
        ];
        argv.extend(PATHS.iter().map(|s| s.to_string()));
        // a mount namespace of its own (the remount stays in it), the cgroups read-only,
        // then the user and the capabilities of the unit
        let script = format!(
            "mount -o remount,bind,ro {cgroup2} && exec setpriv --reuid 65534 --regid 65534 \
             --clear-groups --inh-caps -all,{caps} --ambient-caps -all,{caps} \
             --bounding-set -all,{caps} \"$@\""
        );
        Command::new("nsenter")
            .arg(format!("--net={netns}"))
            .args(["unshare", "-m", "--propagation", "private", "sh", "-c"])
            .arg(script)
            .arg("sh")
            .args(&argv)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = send(&caps, "held");
    let err = text(&out.stderr);
    assert!(out.status.success(), "with the unit's capabilities: {err}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["verified"], true, "{report}");
    assert_eq!(report["paths"]["path_manager"], "kernel", "{report}");
    assert_eq!(
        std::fs::read(srv.join("held")).unwrap(),
        std::fs::read(&f).unwrap()
    );
    // Not blind: the capabilities of the unit before the hold are refused, naming it.
    let out = send("+net_admin,+net_raw", "refused");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("nena cannot hold the first flight") && err.contains("CAP_PERFMON"),
        "{err}"
    );
    assert!(!srv.join("refused").exists());
}
