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
