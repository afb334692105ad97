//! The lab's on-path box that strips kato-mpc's option: `tc_mpc_strip` of `bpf/mpc/mpc.bpf.c`,
//! attached to one interface (a router's, on the trusted path) for as long as a
//! [`StripGuard`] lives. It overwrites nena's RFC 6994 option (kind 253, ExID
//! [`crate::mpc::EXID`]) with four NOPs on the packets it is told (SYN, SYN-ACK, other ACKs)
//! and fixes the TCP checksum, as option-normalising middleboxes on cellular paths do. The
//! tools never attach it: it exists for the tests that show kato-mpc failing closed
//! (`crates/cli/tests/cli/transfer_kato_mpc.rs`). Nothing is pinned; dropping the guard detaches
//! it (and the clsact qdisc if attaching created it and no other filter is left).

use crate::skel::mpc::MpcSkel;
use anyhow::{bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags, OpenObject};
use std::mem::MaybeUninit;
use std::os::fd::AsFd;

const FILTER: crate::tc::Filter = crate::tc::Filter {
    handle: 0x7374,
    priority: 0x31,
};

/// Which packets lose the option.
pub const STRIP_SYN: u32 = 0x01;
/// SYN-ACKs (the consent).
pub const STRIP_SYNACK: u32 = 0x02;
/// Packets without SYN (the confirmation on the third ACK).
pub const STRIP_ACK: u32 = 0x04;

/// `struct strip_state`.
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
struct State {
    which: u32,
    port: u16,
    pad: u16,
    stripped: u64,
    seen: u64,
}
crate::chains::abi::same_layout!(State = crate::skel::mpc::types::strip_state; which => which,
    port => port, pad => pad, stripped => stripped, seen => seen);

/// The strip program attached to one interface; detached on drop.
pub struct StripGuard {
    skel: Box<MpcSkel<'static>>,
    dev: String,
    idx: u32,
    ingress: bool,
    created_clsact: bool,
    netns: Option<u64>,
}

fn netns_id() -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/thread-self/ns/net")
        .ok()
        .map(|m| m.ino())
}

impl StripGuard {
    /// Attaches to `dev` (current network namespace) at ingress or egress: the option is
    /// overwritten on the packets in `which` (`STRIP_*`) of TCP port `port` at either end
    /// (0: any port).
    pub fn attach(dev: &str, ingress: bool, port: u16, which: u32) -> Result<StripGuard> {
        if which & (STRIP_SYN | STRIP_SYNACK | STRIP_ACK) == 0 {
            bail!("strip: no packet kind chosen");
        }
        let idx = crate::chains::loader::ifindex(dev)?;
        let _lock = crate::tc::lock()?;
        let storage: &'static mut MaybeUninit<OpenObject> =
            Box::leak(Box::new(MaybeUninit::uninit()));
        let skel = crate::mpc::load(storage)?;
        let st = State {
            which,
            port,
            ..Default::default()
        };
        use zerocopy::IntoBytes;
        skel.maps
            .strip
            .update(&0u32.to_ne_bytes(), st.as_bytes(), MapFlags::ANY)
            .context("configuring the strip program")?;
        let created_clsact = !crate::tc::has_clsact(idx).unwrap_or(true);
        let mut h = FILTER.hook(skel.progs.tc_mpc_strip.as_fd(), idx, ingress);
        let _ = h.create();
        h.attach()
            .with_context(|| format!("attaching the strip program to {dev}"))?;
        Ok(StripGuard {
            skel: Box::new(skel),
            dev: dev.to_string(),
            idx,
            ingress,
            created_clsact,
            netns: netns_id(),
        })
    }

    /// (options overwritten, marked packets of the chosen kinds seen).
    pub fn counts(&self) -> Result<(u64, u64)> {
        use zerocopy::FromBytes;
        let v = self
            .skel
            .maps
            .strip
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)?
            .context("the strip map is empty")?;
        let s = State::read_from_bytes(&v).map_err(|_| anyhow::anyhow!("strip state size"))?;
        Ok((s.stripped, s.seen))
    }

    /// Detaches now (also on drop, from the namespace it was attached in).
    pub fn detach(mut self) -> Result<()> {
        self.release()
    }

    fn release(&mut self) -> Result<()> {
        if self.idx == 0 {
            return Ok(());
        }
        let idx = std::mem::take(&mut self.idx);
        if netns_id() != self.netns {
            bail!(
                "the strip program on {} was attached in another network namespace: left for \
                 it (it goes with it)",
                self.dev
            );
        }
        let _lock = crate::tc::lock()?;
        let r = FILTER.detach(idx, self.ingress);
        if self.created_clsact {
            let _ = crate::tc::remove_clsact_if_empty(idx);
        }
        r.with_context(|| format!("detaching the strip program from {}", self.dev))
    }
}

impl Drop for StripGuard {
    fn drop(&mut self) {
        if let Err(e) = self.release() {
            log::warn!("{e:#}");
        }
    }
}
