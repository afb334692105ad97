//! The first-flight hold of the in-kernel path manager (`bpf/hold/hold.bpf.c`), nena-mptcp's
//! [`FlightHold`]: a `cgroup_skb/egress` program on the nena process's own cgroup drops every
//! payload-carrying segment of a held MPTCP connection that leaves by an interface outside
//! its trusted set. The gate holds a connection (by its local token) from its connect until
//! its first flight is acknowledged and every untrusted subflow that joined meanwhile is
//! closed; see `nena_mptcp::hold` for why.
//!
//! Nothing is pinned: the link lives as long as the process (or the value), and the
//! process's cgroup is left as it was when it ends, however it ends.

use crate::skel::hold::{types, HoldSkelBuilder};
use anyhow::{anyhow, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, MapHandle};
use nena_mptcp::hold::FlightHold;
use std::mem::MaybeUninit;
use zerocopy::{FromBytes, IntoBytes};

/// How many trusted interfaces one held connection may name (`HOLD_IFACES` in C).
pub const HOLD_IFACES: usize = 8;

/// `struct hold`: the trusted interfaces (0 = unused) and the packets dropped.
#[repr(C)]
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::Immutable,
    zerocopy::KnownLayout,
)]
struct HoldEntry {
    trusted: [u32; HOLD_IFACES],
    dropped: u64,
}
crate::chains::abi::same_layout!(HoldEntry = types::hold; trusted => trusted, dropped => dropped);

/// The loaded hold: its program attached to the process's cgroup, and its map.
pub struct BpfHold {
    _link: Link,
    holds: MapHandle,
}

impl BpfHold {
    /// Loads the program and attaches it to the cgroup this process is in.
    pub fn load() -> Result<BpfHold> {
        let cgroup = own_cgroup()?;
        let mut storage = MaybeUninit::uninit();
        let mut b = HoldSkelBuilder::default();
        b.obj_builder
            .name("nena_hold")
            .context("naming the BPF object")?;
        let open = b
            .open(&mut storage)
            .context("opening the first-flight hold object")?;
        let skel = open.load().context(
            "loading the first-flight hold (cgroup_skb/egress; needs CAP_BPF, CAP_PERFMON \
                 and CAP_NET_ADMIN and the bpf() system call)",
        )?;
        use std::os::fd::AsRawFd;
        let link = skel
            .progs
            .nena_hold
            .attach_cgroup(cgroup.as_raw_fd())
            .context("attaching the first-flight hold to this process's cgroup")?;
        Ok(BpfHold {
            _link: link,
            holds: MapHandle::try_from(&skel.maps.holds)?,
        })
    }

    /// The factory nena-mptcp calls at the first in-kernel-PM connection
    /// ([`nena_mptcp::hold::provide`]).
    pub fn factory() -> std::result::Result<Box<dyn FlightHold>, String> {
        BpfHold::load()
            .map(|h| Box::new(h) as Box<dyn FlightHold>)
            .map_err(|e| format!("{e:#}"))
    }
}

impl FlightHold for BpfHold {
    fn hold(&self, token: u32, trusted: &[u32]) -> std::result::Result<(), String> {
        if trusted.is_empty() || trusted.len() > HOLD_IFACES {
            return Err(format!(
                "{} trusted interfaces: the hold takes 1 to {HOLD_IFACES}",
                trusted.len()
            ));
        }
        let mut e = HoldEntry::default();
        e.trusted[..trusted.len()].copy_from_slice(trusted);
        self.holds
            .update(&token.to_ne_bytes(), e.as_bytes(), MapFlags::ANY)
            .map_err(|e| format!("holding the connection: {e}"))
    }

    fn release(&self, token: u32) {
        let _ = self.holds.delete(&token.to_ne_bytes());
    }

    fn dropped(&self, token: u32) -> Option<u64> {
        let v = self
            .holds
            .lookup(&token.to_ne_bytes(), MapFlags::ANY)
            .ok()??;
        HoldEntry::read_from_bytes(&v).ok().map(|e| e.dropped)
    }
}

/// This process's cgroup (v2), opened: its path in /proc/self/cgroup (`0::/PATH`, relative to
/// the cgroup namespace's root) under the mount namespace's cgroup2 mount. Where there is
/// none (`ip netns exec` mounts a /sys of its own, without cgroups), one is mounted on a
/// temporary directory just for the open and detached again at once: the descriptor is all
/// the attachment needs, and nothing stays mounted.
fn own_cgroup() -> Result<std::fs::File> {
    let cg = std::fs::read_to_string("/proc/self/cgroup").context("reading /proc/self/cgroup")?;
    let rel = cg
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or_else(|| anyhow!("this process is in no cgroup v2 (/proc/self/cgroup: {cg:?})"))?;
    let rel = rel.trim().trim_start_matches('/');
    // (a temporary mount, if any, is detached once the cgroup is open)
    let (root, _mounted) =
        crate::cgroup::cgroup2_root(&format!("nena-hold-cgroup2-{}", std::process::id()))?;
    let dir = root.join(rel);
    std::fs::File::open(&dir).with_context(|| format!("cannot open the cgroup {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_s_cgroup_opens_as_a_directory() {
        let f = own_cgroup().unwrap();
        assert!(f.metadata().unwrap().is_dir());
    }
}
