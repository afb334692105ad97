//! The Debian package on a clean root (issue 22 item 5), installed and started by the
//! README's quickstart for the server (issue 58 item 5). `scripts/build-deb.sh --no-build`
//! packages this build (what `make deb` does after its build); debootstrap makes a minimal
//! Debian of the host's release with systemd and the package's `Depends` (nothing of this
//! machine's), which boots under systemd (systemd-nspawn) inside the lab's server host. Then
//! the recipe's commands run as written (`crate::recipes`): `dpkg -i` in the booted root,
//! after which the binary, man pages, completions, conffiles and units are checked as
//! installed and `systemd-analyze verify` and `security` judge the units where they are;
//! `systemctl enable --now nena-serve` starts the server as a transient user with no
//! capability; the laptop's `nena send` (the lab's client) stores a file over MPTCP; and
//! `journalctl -u nena-serve` shows its line. A restart keeps the server's key, and
//! `systemctl stop` ends it cleanly. Needs root, debootstrap, systemd-nspawn
//! (scripts/install-deps.sh installs them) and Debian's mirror (`NENA_DEBIAN_MIRROR`,
//! default deb.debian.org).

use crate::harness::*;
use crate::recipes::{self, Machine, Step};
use nena_lab::Host;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn out_text(o: &Output) -> String {
    format!(
        "status {}; stdout: {}; stderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Run a command to completion; it must succeed. Returns its stdout.
fn ok(cmd: &mut Command) -> String {
    let o = cmd.stdin(Stdio::null()).output().expect("spawn");
    assert!(o.status.success(), "{cmd:?}: {}", out_text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The value of `Key:` in a `/proc/PID/status` text, trimmed.
fn status_field<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .map(str::trim)
}

/// `chroot ROOT ARGS...`.
fn chroot(root: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("chroot");
    c.arg(root).args(args);
    c
}

/// A root directory made by debootstrap: removed on drop, but only once nothing is mounted
/// under it (a bind mount left behind would make the removal reach the host's files).
struct Rootfs(PathBuf);

impl Rootfs {
    /// A new empty directory of its own (not inside a TempDir, whose removal would not
    /// look for mounts).
    fn new() -> Rootfs {
        let dir = tempfile::Builder::new()
            .prefix("nena-t-deb-root-")
            .tempdir()
            .unwrap();
        Rootfs(dir.keep())
    }

    fn mounts_under(&self) -> Vec<String> {
        let prefix = format!("{}/", self.0.display());
        std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_whitespace().nth(4).map(str::to_string))
            .filter(|m| m.starts_with(&prefix) || *m == prefix.trim_end_matches('/'))
            .collect()
    }
}

impl Drop for Rootfs {
    fn drop(&mut self) {
        for m in self.mounts_under().iter().rev() {
            let _ = Command::new("umount").args(["-l", m]).status();
        }
        let left = self.mounts_under();
        if left.is_empty() {
            let _ = std::fs::remove_dir_all(&self.0);
        } else {
            eprintln!("not removing {}: still mounted: {left:?}", self.0.display());
        }
    }
}

/// A root booted under systemd by systemd-nspawn: powered off on drop (SIGTERM to nspawn,
/// which asks the container's systemd to shut down), killed if that takes over 30 s.
struct Booted {
    nspawn: Child,
    machine: String,
    log: PathBuf,
}

impl Booted {
    fn boot(root: &Path, machine: &str, netns: &str, log: &Path) -> Booted {
        let logf = std::fs::File::create(log).unwrap();
        let nspawn = Command::new("systemd-nspawn")
            .arg("--directory")
            .arg(root)
            .args([
                "--boot",
                "--register=no",
                "--keep-unit",
                "--link-journal=no",
                "--resolv-conf=off",
                "--timezone=off",
                "--console=pipe",
                &format!("--machine={machine}"),
                &format!("--network-namespace-path=/run/netns/{netns}"),
            ])
            .stdin(Stdio::null())
            .stdout(logf.try_clone().unwrap())
            .stderr(logf)
            .spawn()
            .expect("systemd-nspawn");
        Booted {
            nspawn,
            machine: machine.to_string(),
            log: log.to_path_buf(),
        }
    }

    /// The container's init (its PID 1), as a PID of this host.
    fn init_pid(&mut self) -> u32 {
        let parent = self.nspawn.id();
        let log = self.log.clone();
        let nspawn = &mut self.nspawn;
        nena_testkit::wait_for("the container's init", Duration::from_secs(60), || {
            if let Ok(Some(st)) = nspawn.try_wait() {
                panic!(
                    "systemd-nspawn exited ({st}): {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            // A process whose parent is nspawn and which is PID 1 of its own namespace.
            std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
                let pid: u32 = e.file_name().to_str()?.parse().ok()?;
                let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
                let ppid: u32 = status_field(&status, "PPid:")?.parse().ok()?;
                let nspid = status_field(&status, "NSpid:")?;
                (ppid == parent && nspid.split_whitespace().last() == Some("1")).then_some(pid)
            })
        })
    }
}

impl Drop for Booted {
    fn drop(&mut self) {
        unsafe { libc::kill(self.nspawn.id() as i32, libc::SIGTERM) };
        nena_testkit::poll_until(Duration::from_secs(30), || {
            matches!(self.nspawn.try_wait(), Ok(Some(_)))
        });
        if let Ok(None) = self.nspawn.try_wait() {
            let _ = self.nspawn.kill();
            let _ = self.nspawn.wait();
        }
        // nspawn leaves its (empty) mount-propagation directory when the host's /run is not
        // its own tmpfs: "Attempted to remove disk file system ..., and we can't allow that".
        let _ = std::fs::remove_dir_all(format!("/run/systemd/nspawn/propagate/{}", self.machine));
    }
}

/// `nsenter` into every namespace of the container's init, at its root.
fn inside(init: u32, args: &[&str]) -> Command {
    nsenter(init, "--wd", args)
}

/// [`inside`], with the working directory `dir` of the container (not its init's).
fn inside_at(init: u32, dir: &str, args: &[&str]) -> Command {
    nsenter(init, &format!("--wdns={dir}"), args)
}

/// `nsenter` into every namespace of `init`, at its root, with the working directory that
/// `wd` (an nsenter flag) names.
fn nsenter(init: u32, wd: &str, args: &[&str]) -> Command {
    let mut c = Command::new("nsenter");
    c.args(["--target", &init.to_string(), "--all", "--root", wd, "--"])
        .args(args);
    c
}

/// A quickstart step on the laptop: `bash -c LINE` in the lab's client, as a fresh user
/// whose home (HOME and the working directory) is `home`, with this build's `nena` on the
/// PATH; its output.
fn on_laptop(lab: &nena_lab::Lab, home: &Path, step: &Step) -> Output {
    let path = format!(
        "{}:{}",
        Path::new(NENA).parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    lab.command(Host::Client, "bash", ["-c", &step.in_the_lab()])
        .current_dir(home)
        .env("HOME", home)
        .env_remove("XDG_STATE_HOME")
        .env("PATH", path)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The host's Debian release (VERSION_CODENAME), which the package's Depends were computed
/// against.
fn codename() -> String {
    std::fs::read_to_string("/etc/os-release")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VERSION_CODENAME="))
        .map(|v| v.trim_matches('"').to_string())
        .expect("VERSION_CODENAME in /etc/os-release")
}

/// The package names of a Depends field ("libc6 (>= 2.34), a | b" → libc6, a).
fn depends_names(field: &str) -> Vec<String> {
    field
        .split(',')
        .filter_map(|d| d.split('|').next())
        .filter_map(|d| d.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn the_package_installs_on_a_clean_root_and_its_unit_serves_under_systemd() {
    // 1. The package, from this build.
    let target = Path::new(NENA).parent().unwrap().parent().unwrap();
    let built = ok(Command::new("bash")
        .arg(format!("{ROOT}/scripts/build-deb.sh"))
        .arg("--no-build")
        .env("CARGO_TARGET_DIR", target));
    let deb = PathBuf::from(built.lines().last().unwrap_or_default().trim());
    assert!(
        deb.extension().is_some_and(|e| e == "deb") && deb.is_file(),
        "build-deb.sh's last line is not a package: {built}"
    );
    let field = |f: &str| ok(Command::new("dpkg-deb").arg("--field").arg(&deb).arg(f));
    assert_eq!(field("Package").trim(), "nena");
    let depends = depends_names(&field("Depends"));
    // The binary links libc and libelf (the BPF loader); the units' scripts need
    // deb-systemd-helper.
    for d in ["libc6", "libelf1", "init-system-helpers"] {
        assert!(
            depends.iter().any(|x| x == d),
            "Depends lacks {d}: {depends:?}"
        );
    }

    // 2. A clean root: a minimal Debian with systemd and the Depends, nothing else.
    let tmp = TempDir::new("deb");
    let rootfs = Rootfs::new();
    let root = rootfs.0.clone();
    let mirror = std::env::var("NENA_DEBIAN_MIRROR")
        .unwrap_or_else(|_| "http://deb.debian.org/debian".to_string());
    let include = ["systemd", "dbus"]
        .into_iter()
        .map(str::to_string)
        .chain(depends.iter().cloned())
        .collect::<Vec<_>>()
        .join(",");
    let boot_log = tmp.join("debootstrap.log");
    let st = Command::new("timeout")
        .args(["900", "debootstrap", "--variant=minbase"])
        .arg(format!("--include={include}"))
        .arg(codename())
        .arg(&root)
        .arg(&mirror)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&boot_log).unwrap())
        .stderr(Stdio::inherit())
        .status()
        .expect("debootstrap");
    assert!(
        st.success(),
        "debootstrap from {mirror} failed ({st}): {}",
        std::fs::read_to_string(&boot_log).unwrap_or_default()
    );
    assert!(
        rootfs.mounts_under().is_empty(),
        "debootstrap left mounts: {:?}",
        rootfs.mounts_under()
    );

    // 3. Boot the root under systemd, in the lab's server host.
    let lab = lab();
    let machine = format!("nena-deb-{}", std::process::id());
    let mut booted = Booted::boot(
        &root,
        &machine,
        &lab.netns(Host::Server),
        &tmp.join("nspawn.log"),
    );
    let init = booted.init_pid();
    // `--wait` waits for the boot to finish once the manager answers; "offline" is said
    // before it does (the init found may not have become systemd yet).
    let mut state = String::new();
    nena_testkit::wait_until("systemd in the container", Duration::from_secs(120), || {
        let o = inside(init, &["systemctl", "is-system-running", "--wait"])
            .output()
            .unwrap();
        state = String::from_utf8_lossy(&o.stdout).trim().to_string();
        state != "offline" && !state.is_empty()
    });
    assert!(
        state == "running" || state == "degraded",
        "the container did not boot ({state}): {}",
        std::fs::read_to_string(&booted.log).unwrap_or_default()
    );

    // 4. The README's quickstart for the server, its commands as written (crate::recipes):
    // those on the server run with bash in the booted root, in /root, where the package is
    // copied; the one on the laptop in the lab's client, as a fresh user there.
    let steps = recipes::recipe("server");
    let shape: Vec<(Machine, &str)> = steps
        .iter()
        .map(|s| (s.on, s.line.split_whitespace().next().unwrap_or_default()))
        .collect();
    assert_eq!(
        shape,
        [
            (Machine::Server, "dpkg"),
            (Machine::Server, "systemctl"),
            (Machine::Laptop, "nena"),
            (Machine::Server, "journalctl"),
        ],
        "the server's quickstart is not the steps this test checks: {steps:#?}"
    );
    let on_server = |step: &Step| {
        ok(&mut inside_at(
            init,
            "/root",
            &["bash", "-c", &step.in_the_lab()],
        ))
    };

    // `dpkg -i nena_*_amd64.deb`, the package next to it.
    std::fs::copy(&deb, root.join("root").join(deb.file_name().unwrap())).unwrap();
    let installed = on_server(&steps[0]);
    assert!(installed.contains("Setting up nena ("), "{installed}");
    // The packaged binary runs there (every library it links is in its Depends) and names
    // the commit it was built from, as this build does.
    let version = ok(&mut chroot(&root, &["nena", "--version"]));
    assert_eq!(version, ok(Command::new(NENA).arg("--version")));
    assert!(version.contains("(commit "), "{version}");
    assert!(!version.contains("commit unknown"), "{version}");

    let files = ok(&mut chroot(&root, &["dpkg", "-L", "nena"]));
    let files: Vec<&str> = files.lines().collect();
    for f in [
        "/usr/bin/nena",
        "/usr/share/man/man1/nena.1.gz",
        "/usr/share/man/man1/nena-serve.1.gz",
        "/usr/share/man/man1/nena-proxy-server.1.gz",
        "/usr/share/bash-completion/completions/nena",
        "/usr/share/zsh/vendor-completions/_nena",
        "/usr/share/fish/vendor_completions.d/nena.fish",
        "/etc/nena/serve.toml",
        "/etc/nena/proxy-server.toml",
        "/etc/nena/proxy-client.toml",
        "/etc/nena/gateway.toml",
        "/usr/share/doc/nena/grafana/nena-dashboard.json",
    ] {
        assert!(files.contains(&f), "{f} not installed: {files:?}");
    }
    for unit in [
        "nena-serve.service",
        "nena-proxy-server.service",
        "nena-gateway.service",
        "nena-gateway-lock.service",
    ] {
        assert!(
            files
                .iter()
                .any(|f| f.ends_with(&format!("/systemd/system/{unit}"))),
            "{unit} not installed: {files:?}"
        );
        // Installed disabled: the example configs want an operator's choices first.
        let o = chroot(&root, &["systemctl", "is-enabled", unit])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&o.stdout).trim(),
            "disabled",
            "{unit}"
        );
    }
    // The package's removal (not an upgrade) opens the gateway's kill switch, after the
    // units' own steps.
    let prerm = std::fs::read_to_string(root.join("var/lib/dpkg/info/nena.prerm")).unwrap();
    let open = prerm
        .find("/usr/bin/nena gateway open --all")
        .unwrap_or_else(|| panic!("the prerm does not open the kill switch: {prerm}"));
    assert!(prerm[..open].contains("\"$1\" = \"remove\""), "{prerm}");
    // The configs are conffiles (an upgrade keeps an operator's edits).
    let conffiles = ok(&mut chroot(
        &root,
        &["dpkg-query", "-W", "-f=${Conffiles}", "nena"],
    ));
    for c in ["serve.toml", "proxy-server.toml", "proxy-client.toml"] {
        assert!(
            conffiles.contains(&format!("/etc/nena/{c} ")),
            "{conffiles}"
        );
    }
    // A man page is a roff page of its subcommand; the completions load.
    let page = ok(&mut chroot(
        &root,
        &["zcat", "/usr/share/man/man1/nena-serve.1.gz"],
    ));
    assert!(
        page.contains(".TH nena-serve 1") && page.contains("\\-\\-listen"),
        "{page}"
    );
    let complete = ok(&mut chroot(
        &root,
        &[
            "bash",
            "-c",
            ". /usr/share/bash-completion/completions/nena && complete -p nena",
        ],
    ));
    assert!(complete.trim_end().ends_with(" nena"), "{complete}");
    let zsh = std::fs::read_to_string(root.join("usr/share/zsh/vendor-completions/_nena")).unwrap();
    assert!(
        zsh.starts_with("#compdef nena"),
        "{}",
        &zsh[..zsh.len().min(80)]
    );
    let fish = std::fs::read_to_string(root.join("usr/share/fish/vendor_completions.d/nena.fish"))
        .unwrap();
    assert!(fish.contains("complete -c nena"));

    // systemd's own judgment of the units where the package put them.
    let verify = inside(
        init,
        &[
            "systemd-analyze",
            "verify",
            "--man=no",
            "nena-serve.service",
            "nena-proxy-server.service",
            "nena-gateway.service",
            "nena-gateway-lock.service",
        ],
    )
    .output()
    .unwrap();
    assert!(
        verify.status.success() && verify.stderr.is_empty(),
        "systemd-analyze verify: {}",
        out_text(&verify)
    );
    for unit in ["nena-serve.service", "nena-proxy-server.service"] {
        let sec = inside(
            init,
            &[
                "systemd-analyze",
                "security",
                "--threshold=25",
                "--no-pager",
                unit,
            ],
        )
        .output()
        .unwrap();
        assert!(
            sec.status.success(),
            "{unit}: exposure above 2.5: {}",
            out_text(&sec)
        );
    }

    // `systemctl enable --now nena-serve`: the server announces itself in the journal.
    assert!(
        steps[1].line.contains("enable --now nena-serve"),
        "{steps:#?}"
    );
    on_server(&steps[1]);
    let journal = || {
        ok(&mut inside(
            init,
            &[
                "journalctl",
                "--unit=nena-serve",
                "--no-pager",
                "--output=cat",
            ],
        ))
    };
    let listening = nena_testkit::poll_until(Duration::from_secs(30), || {
        journal().contains("listening on 0.0.0.0:4433")
    });
    assert!(
        listening,
        "nena-serve did not listen within 30 s; its journal:\n{}",
        journal()
    );
    // A transient user, no capability.
    let pid = ok(&mut inside(
        init,
        &[
            "systemctl",
            "show",
            "--property=MainPID",
            "--value",
            "nena-serve",
        ],
    ));
    let status = ok(&mut inside(
        init,
        &["cat", &format!("/proc/{}/status", pid.trim())],
    ));
    // The first value (Uid: lists real, effective, saved and filesystem ids).
    let field = |k: &str| {
        status_field(&status, k)
            .and_then(|v| v.split_whitespace().next())
            .unwrap_or_default()
    };
    assert_ne!(field("Uid:"), "0", "{status}");
    assert_eq!(field("CapEff:"), "0000000000000000", "{status}");
    assert_eq!(field("NoNewPrivs:"), "1", "{status}");

    // The laptop's `nena send FILE --to SERVER:4433 ...`, from the lab's client as a fresh
    // user (a home of its own: the unit's key pinned there on this first contact, not among
    // the test run's pins), over MPTCP with the default mode: the file lands in the unit's
    // StateDirectory.
    let laptop = TempDir::new("deb-laptop");
    let name = steps[2].line.split_whitespace().nth(2).unwrap_or_default();
    assert!(steps[2].line.starts_with("nena send "), "{steps:#?}");
    let payload = text(300_000, 22);
    std::fs::write(laptop.join(name), &payload).unwrap();
    let out = on_laptop(&lab, laptop.path(), &steps[2]);
    assert!(out.status.success(), "nena send: {}", out_text(&out));
    let stored = std::fs::read(root.join("var/lib/private/nena").join(name)).unwrap();
    assert!(
        stored == payload,
        "the stored file differs from the one sent"
    );
    assert!(out_text(&out).contains("aead"), "{}", out_text(&out));
    // `journalctl -u nena-serve`: the unit logs sessions (RUST_LOG=info), the upload's line
    // among them.
    nena_testkit::wait_until("the upload logged", Duration::from_secs(10), || {
        on_server(&steps[3]).contains(&format!("stored {name}"))
    });
    let known = laptop.join(".local/state/nena/known_servers");
    assert!(known.is_file(), "the laptop pinned no key");
    let to = server(&lab, 4433);

    // The unit's server key: created on first start in its own state directory, private,
    // not among the files it serves, and the same after a restart (the client's pin of the
    // first start still holds).
    use std::os::unix::fs::PermissionsExt;
    let key = root.join("var/lib/private/nena-key/server_key");
    let mode = std::fs::metadata(&key)
        .unwrap_or_else(|e| panic!("the unit's key {}: {e}", key.display()))
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "the unit's key has mode {mode:o}");
    assert!(
        !root.join("var/lib/private/nena/server_key").exists(),
        "a server key lies in the directory the unit serves"
    );
    let key_before = std::fs::read(&key).unwrap();
    ok(&mut inside(
        init,
        &["systemctl", "restart", "nena-serve.service"],
    ));
    let relistening = nena_testkit::poll_until(Duration::from_secs(30), || {
        journal().matches("listening on 0.0.0.0:4433").count() >= 2
    });
    assert!(
        relistening,
        "nena-serve did not listen again after its restart:\n{}",
        journal()
    );
    assert_eq!(
        std::fs::read(&key).unwrap(),
        key_before,
        "the restart made a new key"
    );
    // `nena status` as root on the host of the unit finds its control socket (in the
    // unit's runtime directory, /run/nena/control/serve/) and tells what it serves.
    let status = ok(&mut inside(init, &["nena", "status", "--json"]));
    assert!(
        status.contains("\"role\": \"serve\"") && status.contains("0.0.0.0:4433"),
        "nena status in the booted root: {status}"
    );
    let src2 = tmp.join("letter2.txt");
    std::fs::write(&src2, &payload).unwrap();
    let out = client(
        &lab,
        &[
            "send",
            src2.to_str().unwrap(),
            "--to",
            &to,
            "--known-servers",
            known.to_str().unwrap(),
            PATHS[0],
            PATHS[1],
            PATHS[2],
            PATHS[3],
        ],
    );
    assert!(
        out.status.success(),
        "nena send after the restart, with the key pinned at the first start: {}",
        out_text(&out)
    );

    // 6. `systemctl stop`: the server ends on SIGTERM, with status 0.
    ok(&mut inside(
        init,
        &["systemctl", "stop", "nena-serve.service"],
    ));
    let show = ok(&mut inside(
        init,
        &[
            "systemctl",
            "show",
            "--property=ActiveState,Result,ExecMainStatus",
            "nena-serve",
        ],
    ));
    for want in ["ActiveState=inactive", "Result=success", "ExecMainStatus=0"] {
        assert!(show.lines().any(|l| l == want), "{want}: {show}");
    }
    drop(booted);
    drop(lab);
    drop(rootfs);
}
