//! Attach and detach: the XDP dispatcher on ingress, the TC clsact filter on egress (and the
//! clsact qdisc when nena created it), and the `hooks` hash with its `hook_slots` array
//! mirror that tell the dispatchers which chain slot each hook runs.

use super::error::LoadError;
use super::host::{ensure_bpffs, ifindex, remove_pins};
use super::keys::DevHook;
use super::object::load_skel;
use super::Policy;
use crate::chains::abi::{HookKey, Pod, NO_CHAIN};
use crate::chains::spec::Hook;
use anyhow::{anyhow, Context, Result};
use libbpf_rs::{MapCore, MapFlags, Xdp, XdpFlags};
use std::os::fd::AsFd;
use std::path::Path;

/// The TC dispatcher's filter: handle "NN", priority 0x4e.
const TC_FILTER: crate::tc::Filter = crate::tc::Filter {
    handle: 0x4e4e,
    priority: 0x4e,
};

/// Key of the `hooks` map entry (ifindex, CLSACT_OWNED) that records that `attach` created
/// the device's clsact qdisc (the BPF side only looks up the two hooks).
const CLSACT_OWNED: u32 = 0x100;

impl Policy {
    /// Load the programs (reusing the pinned maps, if any) and attach the dispatchers to
    /// `dev`: XDP for ingress, TC clsact for egress. Both hooks start with no chain.
    pub fn attach(dir: &Path, dev: &str) -> Result<Policy> {
        let idx = ifindex(dev)?;
        // whether this call creates clsact, and the filters on it, are shared with other
        // nena processes on this namespace (the mpc programs)
        let _lock = crate::tc::lock()?;
        ensure_bpffs()?;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut storage = std::mem::MaybeUninit::uninit();
        let skel = load_skel(&mut storage, Some(dir))?;
        let xdp = &skel.progs.xdp_nena;
        Xdp::new(xdp.as_fd())
            .attach(idx as i32, XdpFlags::NONE)
            .with_context(|| format!("attaching XDP to {dev}"))?;
        let mut hook = TC_FILTER.hook(skel.progs.tc_nena.as_fd(), idx, false);
        // clsact may exist already (another tool's, or ours from an earlier attach); if
        // this call created it, that is recorded below, so that detach removes it again
        // (if the query fails, the qdisc is treated as someone else's: detach leaves it)
        let created_clsact = match crate::tc::has_clsact(idx) {
            Ok(had) => !had,
            Err(e) => {
                log::warn!("could not list the qdiscs of {dev}: {e:#}; detach will leave clsact");
                false
            }
        };
        let _ = hook.create();
        if let Err(e) = hook.attach() {
            let _ = Xdp::new(xdp.as_fd()).detach(idx as i32, XdpFlags::NONE);
            return Err(anyhow!(e).context(format!("attaching TC egress to {dev}")));
        }
        let p = Policy::open(dir)?;
        if created_clsact {
            let k = HookKey {
                ifindex: idx,
                hook: CLSACT_OWNED,
            };
            p.hooks
                .update(k.as_bytes(), &1u32.to_ne_bytes(), MapFlags::ANY)
                .context("recording the clsact qdisc nena created")?;
        }
        for h in [Hook::Ingress, Hook::Egress] {
            let key = DevHook::new(idx, h);
            let k = key.to_abi();
            // keep the chain if this device was attached already
            let _ = p
                .hooks
                .update(k.as_bytes(), &NO_CHAIN.to_ne_bytes(), MapFlags::NO_EXIST);
            let slot = p
                .hooks
                .lookup(k.as_bytes(), MapFlags::ANY)?
                .and_then(|v| u32::from_bytes(&v))
                .unwrap_or(NO_CHAIN);
            write_hook_slot(&p.hook_slots, key, Some(slot))?;
        }
        Ok(p)
    }

    /// Detach the dispatchers from `dev`. When no device is left, the pins are removed.
    /// Returns true if that happened.
    pub fn detach(self, dev: &str) -> Result<bool> {
        let idx = ifindex(dev)?;
        let _lock = crate::tc::lock()?;
        detach_hooks(idx)?;
        let owned = HookKey {
            ifindex: idx,
            hook: CLSACT_OWNED,
        };
        if self.hooks.delete(owned.as_bytes()).is_ok() {
            crate::tc::remove_clsact_if_empty(idx)?;
        }
        self.drop_tenant_hooks(idx)?;
        for h in [Hook::Ingress, Hook::Egress] {
            let key = DevHook::new(idx, h);
            let _ = write_hook_slot(&self.hook_slots, key, None);
            let _ = self.hooks.delete(key.to_abi().as_bytes());
        }
        if self.hook_entries()?.is_empty() {
            let dir = self.dir.clone();
            drop(self);
            remove_pins(&dir)?;
            return Ok(true);
        }
        Ok(false)
    }
}

/// Set a hook's chain slot (NO_CHAIN: attached, no chain) in the `hooks` hash, with `flags`,
/// and mirror it into the `hook_slots` array (`fast`: None for an earlier build without it).
pub(super) fn write_hook(
    hooks: &dyn MapCore,
    fast: Option<&dyn MapCore>,
    key: DevHook,
    slot: u32,
    flags: MapFlags,
) -> Result<(), LoadError> {
    hooks
        .update(key.to_abi().as_bytes(), &slot.to_ne_bytes(), flags)
        .map_err(LoadError::map("switching a hook's chain"))?;
    match fast {
        Some(f) => write_hook_slot(f, key, Some(slot)),
        None => Ok(()),
    }
}

/// Mirror a hook's entry of the `hooks` hash into the `hook_slots` array, which the
/// dispatcher reads for interfaces below FAST_IFINDEX: None = not attached (0), else the
/// chain slot + 1 (NO_CHAIN as itself).
fn write_hook_slot(fast: &dyn MapCore, key: DevHook, slot: Option<u32>) -> Result<(), LoadError> {
    let Some(i) = key.fast_index() else {
        return Ok(());
    };
    let v = match slot {
        None => 0,
        Some(NO_CHAIN) => NO_CHAIN,
        Some(s) => s + 1,
    };
    fast.update(&i.to_ne_bytes(), &v.to_ne_bytes(), MapFlags::ANY)
        .map_err(LoadError::map("updating hook_slots"))
}

/// Detach nena's XDP program and TC filter from an interface (other programs are left).
pub fn detach_hooks(idx: u32) -> Result<()> {
    // XDP: only if the attached program is ours
    let dummy = std::fs::File::open("/dev/null")?;
    let x = Xdp::new(dummy.as_fd());
    if let Ok(id) = x.query_id(idx as i32, XdpFlags::NONE) {
        if id != 0 {
            let ours = libbpf_rs::query::ProgInfoIter::default()
                .any(|p| p.id == id && p.name.to_string_lossy() == "xdp_nena");
            if ours {
                x.detach(idx as i32, XdpFlags::NONE)
                    .context("detaching XDP")?;
            }
        }
    }
    let _ = TC_FILTER.detach(idx, false); // absent already: fine
    Ok(())
}
