//! Where this mount namespace has the cgroup v2 file system, for the programs attached to a
//! cgroup (`nena run`'s, the first-flight hold): its mount point, or one mounted for the
//! purpose where there is none.

use anyhow::{anyhow, Context, Result};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The cgroup2 mount point of this mount namespace, from /proc/self/mountinfo (`None` where
/// there is none, as under `ip netns exec`, which mounts a /sys of its own).
pub fn cgroup2_mount() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    cgroup2_in(&info)
}

/// The mount point of the first cgroup2 line of a mountinfo table.
fn cgroup2_in(info: &str) -> Option<PathBuf> {
    info.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        if right.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        left.split_whitespace().nth(4).map(PathBuf::from)
    })
}

/// The root of the cgroup2 file system: the mount namespace's own, else one mounted on a new
/// temporary directory `name` (returned with it: detached and removed when dropped).
pub fn cgroup2_root(name: &str) -> Result<(PathBuf, Option<TempMount>)> {
    if let Some(root) = cgroup2_mount() {
        return Ok((root, None));
    }
    let m = TempMount::new(name)?;
    Ok((m.dir.clone(), Some(m)))
}

/// A cgroup2 file system mounted on a temporary directory of its own; detached (lazily, so
/// open descriptors stay valid) and the directory removed on drop.
#[derive(Debug)]
pub struct TempMount {
    dir: PathBuf,
}

fn cpath(p: &Path) -> Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| anyhow!("{}: NUL in path", p.display()))
}

impl TempMount {
    fn new(name: &str) -> Result<TempMount> {
        let dir = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let dst = cpath(&dir)?;
        // SAFETY: plain C strings; no data argument.
        let r = unsafe {
            libc::mount(
                c"none".as_ptr(),
                dst.as_ptr(),
                c"cgroup2".as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        if r != 0 {
            let e = std::io::Error::last_os_error();
            let _ = std::fs::remove_dir(&dir);
            return Err(anyhow!(
                "no cgroup2 file system here and mounting one on {} failed: {e}",
                dir.display()
            ));
        }
        Ok(TempMount { dir })
    }
}

impl Drop for TempMount {
    fn drop(&mut self) {
        if let Ok(c) = cpath(&self.dir) {
            // SAFETY: a C string.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// A cgroup of its own for one process tree (`nena run`'s CMD): created under the cgroup2
/// mount (or under a [`TempMount`] of its own where the mount namespace has none, as under
/// `ip netns exec`); what is left in it killed (`cgroup.kill`) and the directory removed, the
/// temporary mount after it, by [`OwnCgroup::remove`] or on drop.
#[derive(Debug)]
pub struct OwnCgroup {
    dir: PathBuf,
    mounted: Option<TempMount>,
}

/// The name of a new cgroup directory: `PREFIX-PID-NANOS` (nanoseconds of the clock, hex).
fn cgroup_name(prefix: &str, pid: u32, nanos: u32) -> String {
    format!("{prefix}-{pid}-{nanos:08x}")
}

impl OwnCgroup {
    /// Creates the cgroup `PREFIX-PID-NANOS` (a temporary cgroup2 mount, when one is needed,
    /// on `PREFIX-cgroup2-PID` in the temporary directory).
    pub fn create(prefix: &str) -> Result<OwnCgroup> {
        let pid = std::process::id();
        let (root, mounted) = cgroup2_root(&format!("{prefix}-cgroup2-{pid}"))?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = root.join(cgroup_name(prefix, pid, nanos));
        let cg = OwnCgroup {
            dir: dir.clone(),
            mounted,
        };
        std::fs::create_dir(&dir)
            .with_context(|| format!("cannot create the cgroup {}", dir.display()))?;
        Ok(cg)
    }

    /// The cgroup's directory in the cgroup2 file system.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Some process is in the cgroup (`populated 1` in `cgroup.events`).
    pub fn populated(&self) -> bool {
        populated(&self.dir)
    }

    /// What a child needs to join the cgroup between fork and exec ([`Joiner::join`]).
    pub fn joiner(&self) -> Result<Joiner> {
        let procs = self.dir.join("cgroup.procs");
        Ok(Joiner {
            procs: cpath(&procs)?,
        })
    }

    /// The temporary cgroup2 mount this cgroup is under, if one was needed.
    pub fn mount_dir(&self) -> Option<&Path> {
        self.mounted.as_ref().map(|m| m.dir.as_path())
    }

    /// Kills every process left in the cgroup and waits (up to 5 s) until it is empty.
    pub fn empty(&self) -> bool {
        kill_and_wait(&self.dir)
    }

    /// Kills every process left in the cgroup and removes it (then the temporary mount).
    pub fn remove(&mut self) {
        if !self.dir.exists() {
            return;
        }
        kill_and_remove(&self.dir);
        // a temporary cgroup2 mount goes after the cgroup
        drop(self.mounted.take());
    }
}

/// Some process is in the cgroup `dir` (`populated 1` in `cgroup.events`).
fn populated(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.events"))
        .map(|s| s.lines().any(|l| l == "populated 1"))
        .unwrap_or(false)
}

/// Kills every process in the cgroup `dir` (`cgroup.kill`) and waits up to 5 s until it is
/// empty; false if it is not (or cannot be killed).
pub fn kill_and_wait(dir: &Path) -> bool {
    if !populated(dir) {
        return true;
    }
    if let Err(e) = std::fs::write(dir.join("cgroup.kill"), "1") {
        log::warn!("cannot kill what is left in {}: {e}", dir.display());
        return false;
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while populated(dir) {
        if std::time::Instant::now() > deadline {
            log::warn!(
                "{} still has processes 5 s after cgroup.kill",
                dir.display()
            );
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    true
}

/// Kills what is left in the cgroup `dir` and removes it (retrying for up to 5 s: the
/// kernel frees a killed cgroup's tasks a moment after they left `cgroup.procs`).
pub fn kill_and_remove(dir: &Path) {
    kill_and_wait(dir);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => break,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
            Err(e) if std::time::Instant::now() > deadline => {
                log::warn!("cannot remove the cgroup {}: {e}", dir.display());
                break;
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    }
}

/// Detaches (lazily) a temporary cgroup2 mount made by [`OwnCgroup::create`] and removes
/// its directory; for a process that outlives the one that made it.
pub fn remove_temp_mount(dir: &Path) {
    drop(TempMount {
        dir: dir.to_path_buf(),
    });
}

/// The pid in a name `PREFIX-PID-...` or `PREFIX-cgroup2-PID`.
fn pid_in(prefix: &str, name: &str) -> Option<u32> {
    let rest = name.strip_prefix(prefix)?.strip_prefix('-')?;
    let rest = rest.strip_prefix("cgroup2-").unwrap_or(rest);
    rest.split('-').next()?.parse().ok()
}

/// What a killed process left of its [`OwnCgroup`]s (`PREFIX-PID-...` whose PID no longer
/// runs): each cgroup's processes killed and the cgroup removed (and with it whatever
/// programs were attached to it); the temporary cgroup2 mounts' directories removed.
/// Returns the cgroups removed.
pub fn remove_leftovers(prefix: &str) -> Vec<PathBuf> {
    let dead = |name: &str| {
        pid_in(prefix, name).is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
    };
    let mut removed = Vec::new();
    if let Ok((root, _mount)) = cgroup2_root(&format!("{prefix}-cgroup2-{}", std::process::id())) {
        for e in std::fs::read_dir(&root).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with(&format!("{prefix}-")) || !dead(&name) {
                continue;
            }
            let dir = e.path();
            kill_and_remove(&dir);
            if !dir.exists() {
                removed.push(dir);
            }
        }
    }
    for e in std::fs::read_dir(std::env::temp_dir())
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with(&format!("{prefix}-cgroup2-")) && dead(&name) {
            remove_temp_mount(&e.path());
        }
    }
    removed
}

impl Drop for OwnCgroup {
    fn drop(&mut self) {
        self.remove();
    }
}

/// The `cgroup.procs` file of an [`OwnCgroup`], for the child that joins it.
#[derive(Debug, Clone)]
pub struct Joiner {
    procs: CString,
}

impl Joiner {
    /// Moves the calling process into the cgroup. Only system calls (open, write, close), no
    /// allocation: safe to call between fork and exec.
    pub fn join(&self) -> std::io::Result<()> {
        // SAFETY: a C string that lives through the calls; a one-byte buffer.
        unsafe {
            let fd = libc::open(self.procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // "0": the writing process itself.
            let n = libc::write(fd, b"0".as_ptr().cast(), 1);
            let e = std::io::Error::last_os_error();
            libc::close(fd);
            if n != 1 {
                return Err(e);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cgroups_name_has_its_prefix_pid_and_eight_hex_digits() {
        assert_eq!(cgroup_name("nena-run", 42, 0xabc), "nena-run-42-00000abc");
        assert_eq!(
            cgroup_name("x", 1, u32::MAX),
            format!("x-1-{:08x}", u32::MAX)
        );
    }

    #[test]
    fn a_leftovers_pid_is_read_from_either_name() {
        assert_eq!(pid_in("nena-run", "nena-run-42-00000abc"), Some(42));
        assert_eq!(pid_in("nena-run", "nena-run-cgroup2-77"), Some(77));
        assert_eq!(pid_in("nena-run", "nena-runner-1-2"), None);
        assert_eq!(pid_in("nena-run", "other-1-2"), None);
    }

    #[test]
    fn the_mount_table_parser_finds_the_cgroup2_line_or_none() {
        let proc_ = "22 28 0:20 / /proc rw,nosuid - proc proc rw";
        let cg = "30 25 0:26 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw";
        assert_eq!(cgroup2_in(proc_), None);
        assert_eq!(
            cgroup2_in(&format!("{proc_}\n{cg}\n")),
            Some(PathBuf::from("/sys/fs/cgroup"))
        );
    }
}
