//! Where this mount namespace has the cgroup v2 file system, for the programs attached to a
//! cgroup (`nena run`'s, the first-flight hold).

use std::path::PathBuf;

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
