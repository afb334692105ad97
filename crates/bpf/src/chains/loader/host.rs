//! Host plumbing: the BPF filesystem and where the pins go (one directory per network
//! namespace), entering a named network namespace, interface names and indices.

use anyhow::{anyhow, bail, Context, Result};
use std::path::{Path, PathBuf};

/// The nena directory of the BPF filesystem; each network namespace gets its own
/// subdirectory in it ([`default_pin_dir`]).
pub const DEFAULT_PIN_DIR: &str = "/sys/fs/bpf/nena";

/// Where the maps of the calling thread's network namespace are pinned unless told otherwise:
/// `/sys/fs/bpf/nena/net-<inode of the namespace>`. One set of maps per namespace: the chains
/// are keyed by interface index, and indices are only unique within a namespace.
pub fn default_pin_dir() -> PathBuf {
    let ns = std::fs::read_link("/proc/thread-self/ns/net")
        .ok()
        .and_then(|l| {
            let s = l.to_string_lossy().into_owned();
            s.strip_prefix("net:[")
                .and_then(|r| r.strip_suffix(']'))
                .map(str::to_string)
        })
        .unwrap_or_else(|| "unknown".into());
    Path::new(DEFAULT_PIN_DIR).join(format!("net-{ns}"))
}
const BPF_FS_MAGIC: i64 = 0xcafe_4a11;

/// Mount the BPF filesystem on /sys/fs/bpf if it is not mounted yet. Refuses (fails closed)
/// where a mount would be private to this command: in a mount namespace other than its
/// parent's ([`private_mount_namespace`]), as `ip netns exec` makes (with a fresh /sys). The pins would vanish when the
/// command ends and the next command would find no policy, while the programs stayed
/// attached.
pub fn ensure_bpffs() -> Result<()> {
    let path = c"/sys/fs/bpf";
    // SAFETY: statfs on a NUL-terminated path into a zeroed struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(path.as_ptr(), &mut st) } == 0 && st.f_type as i64 == BPF_FS_MAGIC {
        return Ok(());
    }
    if private_mount_namespace() {
        bail!(
            "/sys/fs/bpf is not mounted in this command's own mount namespace (as under `ip \
             netns exec`): pins made here would vanish when it ends; run nena outside it with \
             --netns NAME instead"
        );
    }
    // SAFETY: plain mount(2) with static NUL-terminated strings.
    let r = unsafe {
        libc::mount(
            c"bpf".as_ptr(),
            path.as_ptr(),
            c"bpf".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if r != 0 {
        bail!(
            "mounting the BPF filesystem on /sys/fs/bpf: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// Whether this process's mount namespace differs from its parent's (or, where that cannot
/// be read, from pid 1's): it was started in mounts of its own (`ip netns exec`, which execs
/// the command, `unshare -m`, a sandboxed systemd unit), so what it mounts dies with it. A
/// command started from a shell in the same namespace, also in a container, is not flagged.
fn private_mount_namespace() -> bool {
    let Ok(ours) = std::fs::read_link("/proc/self/ns/mnt") else {
        return false;
    };
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() };
    [
        format!("/proc/{parent}/ns/mnt"),
        "/proc/1/ns/mnt".to_string(),
    ]
    .iter()
    .find_map(|p| std::fs::read_link(p).ok())
    .is_some_and(|other| other != ours)
}

pub(super) fn pin_name(map_name: &str) -> String {
    map_name.replace('.', "_")
}

/// Move this thread into the network namespace `name` (`/run/netns/NAME`, as `ip netns`
/// makes them), keeping the mount namespace, so the pins under /sys/fs/bpf stay shared.
/// (`ip netns exec` mounts a private /sys, where pins made by one command are gone for the
/// next.)
pub fn enter_netns(name: &str) -> Result<()> {
    if name.is_empty() || name.contains('/') {
        bail!("bad namespace name `{name}`");
    }
    let path = format!("/run/netns/{name}");
    let f = std::fs::File::open(&path)
        .with_context(|| format!("no network namespace `{name}` ({path})"))?;
    use std::os::fd::AsRawFd;
    // SAFETY: setns(2) on a namespace file we hold open.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        bail!(
            "entering network namespace {name}: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// Interface index of a name.
pub fn ifindex(dev: &str) -> Result<u32> {
    let c = std::ffi::CString::new(dev).map_err(|_| anyhow!("bad interface name `{dev}`"))?;
    // SAFETY: NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        bail!("no interface `{dev}` here");
    }
    Ok(i)
}

/// Interface name of an index (or the index as text).
pub fn ifname(index: u32) -> String {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: buffer of IF_NAMESIZE bytes, as if_indextoname requires.
    let p = unsafe { libc::if_indextoname(index, buf.as_mut_ptr()) };
    if p.is_null() {
        return format!("if{index}");
    }
    // SAFETY: if_indextoname wrote a NUL-terminated name.
    unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// Remove every pin under `dir` and the directory itself.
pub fn remove_pins(dir: &Path) -> Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        std::fs::remove_file(e.path())
            .with_context(|| format!("removing {}", e.path().display()))?;
    }
    std::fs::remove_dir(dir).with_context(|| format!("removing {}", dir.display()))?;
    // the nena directory itself goes with its last namespace
    if let Some(parent) = dir.parent() {
        if parent == Path::new(DEFAULT_PIN_DIR) {
            let _ = std::fs::remove_dir(parent);
        }
    }
    Ok(())
}
