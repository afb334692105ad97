//! CMD's own mount namespace (`nena run --via`): its names are looked up only where nena
//! answers them. glibc asks the resolvers that nsswitch.conf's `hosts:` line names, and some
//! of them are daemons outside CMD's cgroup reached over AF_UNIX (systemd-resolved's varlink
//! socket for `resolve`, the default on Fedora, RHEL and Arch; nscd, which glibc asks before
//! any module; avahi for `mdns*`; sssd for `sss`), which look the name up by whatever
//! resolver their host uses: the WLAN's. In CMD's namespace:
//!
//! - /etc/nsswitch.conf's `hosts:` line keeps only the sources that stay in the process or
//!   go to port 53 (`files`, `myhostname`, `dns`), so glibc's DNS goes to port 53, which the
//!   cgroup's programs send to nena's responder;
//! - the resolvers' sockets are hidden (/dev/null bound over them: a connect is refused), and
//!   so is the D-Bus system bus, where systemd-resolved answers `org.freedesktop.resolve1`,
//!   unless `--system-bus` allows it.
//!
//! The cgroup's connect_unix program refuses the same paths (nena-bpf's `run`): the second
//! layer, for a socket created after CMD started and a root CMD that unmounts. sssd's pipe
//! also serves users and groups, so it stays reachable; `sss` leaves the hosts line.
//!
//! Prepared in the parent ([`Namespace::prepare`]: the rewritten file, the paths); entered
//! by the child between fork and exec with system calls only ([`Enter::enter`]), as root,
//! before it drops its privileges.

use anyhow::{Context, Result};
use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The AF_UNIX sockets of resolvers outside nena, hidden and refused always (with the
/// `/var/run` spelling, which glibc's nscd client uses).
pub const RESOLVER_SOCKETS: &[&str] = &[
    "/run/systemd/resolve/io.systemd.Resolve",
    "/var/run/systemd/resolve/io.systemd.Resolve",
    "/run/nscd/socket",
    "/var/run/nscd/socket",
    "/run/avahi-daemon/socket",
    "/var/run/avahi-daemon/socket",
];

/// The D-Bus system bus (systemd-resolved's `org.freedesktop.resolve1`): hidden and refused
/// unless `--system-bus`.
pub const SYSTEM_BUS: &[&str] = &[
    "/run/dbus/system_bus_socket",
    "/var/run/dbus/system_bus_socket",
];

/// The hosts sources kept: they answer in the process (`files`, `myhostname`) or by DNS to
/// port 53 (`dns`), never through a daemon.
const LOCAL_SOURCES: &[&str] = &["files", "myhostname", "dns"];

/// The AF_UNIX paths CMD may not connect to.
pub fn refused(system_bus: bool) -> Vec<&'static Path> {
    let mut v: Vec<&Path> = RESOLVER_SOCKETS.iter().map(Path::new).collect();
    if !system_bus {
        v.extend(SYSTEM_BUS.iter().map(Path::new));
    }
    v
}

/// nsswitch.conf with its `hosts:` line made local: `files`, then `myhostname` if it was
/// named, then `dns` (always: names must reach port 53); every other source and every
/// action (`[NOTFOUND=return]`) dropped. Other lines unchanged. None: no hosts line (glibc's
/// default, `dns files`, needs no change) or nothing to change.
pub fn local_hosts(conf: &str) -> Option<String> {
    let mut changed = false;
    let mut out = String::with_capacity(conf.len());
    for line in conf.lines() {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("hosts:") {
            let rest = rest.split('#').next().unwrap_or("");
            let named: Vec<&str> = rest
                .split_whitespace()
                .filter(|w| !w.starts_with('['))
                .collect();
            let kept: Vec<&str> = LOCAL_SOURCES
                .iter()
                .copied()
                .filter(|s| *s != "myhostname" || named.contains(s))
                .collect();
            let new = format!("hosts: {}", kept.join(" "));
            if rest.split_whitespace().collect::<Vec<_>>() != kept {
                changed = true;
            }
            out.push_str(&new);
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    changed.then_some(out)
}

/// CMD's namespace as the parent prepared it: what the child does ([`Enter`]) and the
/// private directory of the rewritten file.
#[derive(Debug)]
pub struct Namespace {
    enter: Enter,
    /// Removed once CMD started (the child's bind mount keeps the file).
    dir: Option<PathBuf>,
}

/// What the child does to enter its namespace: every string made in the parent.
#[derive(Debug, Clone)]
pub struct Enter {
    /// The rewritten nsswitch.conf and the file it is bound over.
    nsswitch: Option<(CString, CString)>,
    /// Existing sockets to hide, and what is bound over them.
    hide: Vec<CString>,
    null: CString,
}

fn cpath(p: &Path) -> Result<CString> {
    CString::new(p.as_os_str().as_bytes()).with_context(|| format!("{}: NUL", p.display()))
}

/// Where the rewritten nsswitch.conf of the `nena run` with this pid is kept until CMD
/// started: root's /run where there is one.
pub fn private_dir(pid: u32) -> PathBuf {
    let base = if Path::new("/run").is_dir() {
        PathBuf::from("/run")
    } else {
        std::env::temp_dir()
    };
    base.join(format!("nena-run-ns-{pid}"))
}

impl Namespace {
    /// Reads /etc/nsswitch.conf and writes the local one (if it changes anything) into a
    /// directory of its own; lists the existing sockets to hide.
    pub fn prepare(system_bus: bool) -> Result<Namespace> {
        let mut ns = Namespace {
            enter: Enter {
                nsswitch: None,
                hide: Vec::new(),
                null: c"/dev/null".to_owned(),
            },
            dir: None,
        };
        let conf = Path::new("/etc/nsswitch.conf");
        if let Some(local) = std::fs::read_to_string(conf)
            .ok()
            .and_then(|c| local_hosts(&c))
        {
            let dir = private_dir(std::process::id());
            let _ = std::fs::remove_dir_all(&dir);
            {
                use std::os::unix::fs::DirBuilderExt;
                std::fs::DirBuilder::new()
                    .mode(0o700)
                    .create(&dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
            }
            ns.dir = Some(dir.clone());
            let file = dir.join("nsswitch.conf");
            std::fs::write(&file, local)
                .with_context(|| format!("cannot write {}", file.display()))?;
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644))?;
            }
            ns.enter.nsswitch = Some((cpath(&file)?, cpath(conf)?));
        }
        for p in refused(system_bus) {
            // Only what exists can be bound over, once (/var/run is a link to /run on
            // most systems).
            if let Ok(real) = std::fs::canonicalize(p) {
                let c = cpath(&real)?;
                if !ns.enter.hide.contains(&c) {
                    ns.enter.hide.push(c);
                }
            }
        }
        Ok(ns)
    }

    /// What the log says about it.
    pub fn describe(&self) -> String {
        let hidden: Vec<String> = self
            .enter
            .hide
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect();
        format!(
            "nsswitch.conf {}; hidden: {}",
            if self.enter.nsswitch.is_some() {
                "with a local hosts line"
            } else {
                "unchanged (its hosts line is local)"
            },
            if hidden.is_empty() {
                "none present".to_string()
            } else {
                hidden.join(", ")
            }
        )
    }

    /// The private directory, if one was made (the watchdog removes it if nena is killed
    /// before it did).
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Removes the private directory (the child's bind mount keeps the file).
    pub fn forget_file(&mut self) {
        if let Some(d) = self.dir.take() {
            let _ = std::fs::remove_dir_all(d);
        }
    }

    /// What the child does (moved into its pre-exec closure).
    pub fn entry(&self) -> Enter {
        self.enter.clone()
    }
}

impl Enter {
    /// In the child between fork and exec, as root: a mount namespace of its own, whose
    /// mounts do not propagate back (slave), with the local nsswitch.conf and the sockets
    /// hidden. Only system calls, no allocation (every path was made in the parent).
    pub fn enter(&self) -> std::io::Result<()> {
        use nix::errno::Errno;
        use nix::mount::{mount, MsFlags};
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)?;
        mount(
            None::<&CStr>,
            c"/",
            None::<&CStr>,
            MsFlags::MS_REC | MsFlags::MS_SLAVE,
            None::<&CStr>,
        )?;
        let bind = |src: &CStr, dst: &CStr| {
            mount(
                Some(src),
                dst,
                None::<&CStr>,
                MsFlags::MS_BIND,
                None::<&CStr>,
            )
        };
        if let Some((src, dst)) = &self.nsswitch {
            bind(src, dst)?;
        }
        for p in &self.hide {
            // A socket gone since the parent looked needs no hiding.
            match bind(&self.null, p) {
                Ok(()) | Err(Errno::ENOENT) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        self.forget_file();
    }
}

/// Private directories left by a `nena run` that was killed before it removed its own.
pub fn remove_leftovers() {
    let base = private_dir(0);
    let Some(parent) = base.parent() else {
        return;
    };
    for e in std::fs::read_dir(parent).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix("nena-run-ns-") else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hosts_line_keeps_only_local_sources() {
        let fedora =
            "passwd: files systemd\nhosts:      files myhostname resolve [!UNAVAIL=return] dns\n";
        assert_eq!(
            local_hosts(fedora).unwrap(),
            "passwd: files systemd\nhosts: files myhostname dns\n"
        );
        let test = "hosts: resolve [!UNAVAIL=return] files dns # comment\nnetworks: files\n";
        assert_eq!(
            local_hosts(test).unwrap(),
            "hosts: files dns\nnetworks: files\n"
        );
        // dns always (names must reach port 53); sss, mdns, mymachines dropped.
        assert_eq!(
            local_hosts("hosts: files sss mdns4_minimal [NOTFOUND=return] mymachines\n").unwrap(),
            "hosts: files dns\n"
        );
        // Debian's default is already local; a file without a hosts line needs nothing.
        assert_eq!(local_hosts("hosts:          files dns\n"), None);
        assert_eq!(local_hosts("passwd: files\n"), None);
    }

    #[test]
    fn the_system_bus_is_refused_unless_allowed() {
        let strict = refused(false);
        let open = refused(true);
        assert!(strict.contains(&Path::new("/run/dbus/system_bus_socket")));
        assert!(!open.contains(&Path::new("/run/dbus/system_bus_socket")));
        for r in [&strict, &open] {
            assert!(r.contains(&Path::new("/run/systemd/resolve/io.systemd.Resolve")));
            assert!(r.contains(&Path::new("/var/run/nscd/socket")));
        }
    }
}
