//! Policy: chains written into free slots of the `chains` map (their counters reset), then
//! swapped in by one update of each hook's slot id; a failed swap is rolled back.

use super::attach::write_hook;
use super::host::{ifindex, ifname};
use super::Policy;
use crate::abi::{self, Chain, LinkStats, Pod, NO_CHAIN};
use crate::spec::{ChainSpec, Hook, PolicySpec};
use anyhow::{anyhow, bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags};
use std::collections::{BTreeMap, HashSet};

impl Policy {
    /// Replace the whole policy: every chain of `spec` is checked first (devices exist and are
    /// attached, slots are free), then written to free slots, then swapped in; hooks that
    /// `spec` does not name get no chain. Nothing is half-applied.
    pub fn apply(&self, spec: &PolicySpec) -> Result<()> {
        let entries = self.hook_entries()?;
        let mut want: BTreeMap<(u32, u32), &ChainSpec> = BTreeMap::new();
        let mut want_t: Vec<(&ChainSpec, u32, u32)> = vec![]; // tenant chains: (chain, ifindex, hook)
        for c in &spec.chains {
            let idx = self.check_attached(c, &entries)?;
            if c.tenant.is_some() {
                want_t.push((c, idx, c.hook.abi()));
            } else {
                want.insert((idx, c.hook.abi()), c);
            }
        }
        // tenants: ids kept by name, cgroups resolved (a missing cgroup fails here)
        let ids = self.plan_tenants(&spec.tenants)?;
        let free = self.free_slots()?;
        if free.len() < want.len() + want_t.len() {
            bail!(
                "{} chains asked, {} slots free",
                want.len() + want_t.len(),
                free.len()
            );
        }
        let gen = gen_now();
        let mut free = free.into_iter();
        let mut new_slots = BTreeMap::new();
        for (key, c) in &want {
            let slot = free.next().expect("counted");
            self.write_slot(slot, &c.to_abi(gen))?;
            new_slots.insert(*key, slot);
        }
        let mut new_tenant_slots = BTreeMap::new();
        for (c, idx, hook) in &want_t {
            let slot = free.next().expect("counted");
            self.write_slot(slot, &c.to_abi(gen))?;
            let t = ids[c.tenant.as_deref().expect("a tenant chain")].0;
            new_tenant_slots.insert((*idx, *hook, t), slot);
        }
        // who the tenants are, then their chains, then the default chains
        self.write_tenants(&ids)?;
        self.swap_tenant_hooks(&new_tenant_slots, |_| true)?;
        // swap: one map update per hook, each atomic; roll back on failure
        let mut done: Vec<((u32, u32), u32)> = vec![];
        for (key, old) in &entries {
            let new = new_slots.get(key).copied().unwrap_or(NO_CHAIN);
            let fast = Some(&self.hook_slots as &dyn MapCore);
            if let Err(e) = write_hook(&self.hooks, fast, key.0, key.1, new, MapFlags::EXIST) {
                // this hook too: its hash entry may have been swapped already
                for (k, o) in done.into_iter().chain([(*key, *old)]) {
                    let _ = write_hook(&self.hooks, fast, k.0, k.1, o, MapFlags::ANY);
                }
                return Err(e.context("swapping chains (rolled back)"));
            }
            done.push((*key, *old));
        }
        if spec.chains.iter().any(has_set_backup) {
            self.forget_prio()?;
        }
        Ok(())
    }

    /// Replace the chains of one tenant only, with those `spec` gives it (its hooks the file
    /// does not name for it fall back to the default chain). The default chains, the other
    /// tenants' chains and their counters are not touched, nor are their flows. The tenant
    /// must be loaded already (by `apply`); its definition (cgroup or uid) is updated from
    /// `spec` if it changed.
    pub fn apply_tenant(&self, spec: &PolicySpec, name: &str) -> Result<()> {
        let Some(ts) = spec.tenant(name) else {
            let known: Vec<&str> = spec.tenants.iter().map(|t| t.name.as_str()).collect();
            bail!(
                "the file defines no tenant `{name}` (it defines: {})",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            );
        };
        let loaded = self.loaded_tenants()?;
        let Some((id, _)) = loaded.iter().find(|(_, t)| t.name() == name) else {
            bail!("tenant `{name}` is not loaded (load the whole file first, without --tenant)");
        };
        let id = *id;
        let entries = self.hook_entries()?;
        let mut want_t: Vec<(&ChainSpec, u32, u32)> = vec![];
        for c in spec
            .chains
            .iter()
            .filter(|c| c.tenant.as_deref() == Some(name))
        {
            let idx = self.check_attached(c, &entries)?;
            want_t.push((c, idx, c.hook.abi()));
        }
        let info = self.tenant_info(ts)?;
        let free = self.free_slots()?;
        if free.len() < want_t.len() {
            bail!("{} chains asked, {} slots free", want_t.len(), free.len());
        }
        let gen = gen_now();
        let mut new_tenant_slots = BTreeMap::new();
        for ((c, idx, hook), slot) in want_t.iter().zip(free) {
            self.write_slot(slot, &c.to_abi(gen))?;
            new_tenant_slots.insert((*idx, *hook, id), slot);
        }
        self.update_tenant(id, &info)?;
        self.swap_tenant_hooks(&new_tenant_slots, |t| t == id)?;
        if want_t.iter().any(|(c, _, _)| has_set_backup(c)) {
            self.forget_prio()?;
        }
        Ok(())
    }

    /// The device of chain `c` is attached (`entries`: the hooks); its index.
    fn check_attached(&self, c: &ChainSpec, entries: &BTreeMap<(u32, u32), u32>) -> Result<u32> {
        let at = if c.line > 0 {
            format!("line {}: ", c.line)
        } else {
            String::new()
        };
        let idx = ifindex(&c.dev).map_err(|e| anyhow!("{at}{e}"))?;
        if !entries.contains_key(&(idx, c.hook.abi())) {
            bail!(
                "{at}{} is not attached (run `nena policy attach --dev {}` first)",
                c.dev,
                c.dev
            );
        }
        Ok(idx)
    }

    /// Chain slots no hook and no tenant uses, in order.
    fn free_slots(&self) -> Result<Vec<u32>> {
        let mut used: HashSet<u32> = self.hook_entries()?.values().copied().collect();
        used.extend(self.tenant_hook_entries()?.values().copied());
        Ok((0..abi::MAX_CHAINS).filter(|s| !used.contains(s)).collect())
    }

    /// Set (or clear, with None) the chain of one hook of an attached device, leaving the
    /// others alone: the library call nena's transport uses.
    pub fn set_chain(&self, dev: &str, hook: Hook, chain: Option<&ChainSpec>) -> Result<()> {
        self.set_chain_ifindex(ifindex(dev)?, hook, chain)
    }

    /// `set_chain` by interface index (no name lookup, so callable from any namespace).
    pub fn set_chain_ifindex(&self, idx: u32, hook: Hook, chain: Option<&ChainSpec>) -> Result<()> {
        let entries = self.hook_entries()?;
        let key = (idx, hook.abi());
        if !entries.contains_key(&key) {
            bail!("{} is not attached", ifname(idx));
        }
        let slot = match chain {
            None => NO_CHAIN,
            Some(c) => {
                let slot = *self
                    .free_slots()?
                    .first()
                    .ok_or_else(|| anyhow!("no free chain slot"))?;
                self.write_slot(slot, &c.to_abi(gen_now()))?;
                slot
            }
        };
        write_hook(
            &self.hooks,
            Some(&self.hook_slots),
            idx,
            hook.abi(),
            slot,
            MapFlags::EXIST,
        )?;
        if chain.is_some_and(has_set_backup) {
            self.forget_prio()?;
        }
        Ok(())
    }

    /// Forget which MP_PRIO each subflow was sent, so that `set_backup` asserts its value again
    /// (up to `repeat` times) on every subflow it matches. Done by `apply` and `set_chain` when
    /// the new chains hold a `set_backup`: a new policy is re-asserted even where the flag was
    /// changed behind its back (netlink).
    pub fn forget_prio(&self) -> Result<()> {
        self.prio.clear();
        Ok(())
    }

    fn write_slot(&self, slot: u32, c: &Chain) -> Result<()> {
        write_slot(&self.chains, &self.stats, slot, c)
    }
}

/// A chain's generation number: informational (shown as is), milliseconds of the wall clock.
fn gen_now() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u32)
        .unwrap_or(0)
}

fn has_set_backup(c: &ChainSpec) -> bool {
    c.links.iter().any(|l| {
        matches!(
            l,
            crate::spec::LinkSpec::Act(crate::spec::Actor::SetBackup { .. })
        )
    })
}

fn ncpu() -> Result<usize> {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    if let Some(n) = N.get() {
        return Ok(*n);
    }
    let n = libbpf_rs::num_possible_cpus()?;
    Ok(*N.get_or_init(|| n))
}

pub(super) fn write_slot(
    chains: &dyn MapCore,
    stats: &dyn MapCore,
    slot: u32,
    c: &Chain,
) -> Result<()> {
    let ncpu = ncpu()?;
    let zero = vec![LinkStats::default().as_bytes().to_vec(); ncpu];
    // the counters of the links this chain uses start from zero (the others are not read)
    for i in 0..c.len.min(abi::MAX_LINKS as u32) {
        let k = slot * abi::MAX_LINKS as u32 + i;
        stats.update_percpu(&k.to_ne_bytes(), &zero, MapFlags::ANY)?;
    }
    chains
        .update(&slot.to_ne_bytes(), c.as_bytes(), MapFlags::ANY)
        .context("writing a chain")?;
    Ok(())
}
