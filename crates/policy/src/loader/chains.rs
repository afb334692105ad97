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
        for c in &spec.chains {
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
            want.insert((idx, c.hook.abi()), c);
        }
        let used: HashSet<u32> = entries
            .values()
            .copied()
            .filter(|s| *s != NO_CHAIN)
            .collect();
        let free: Vec<u32> = (0..abi::MAX_CHAINS).filter(|s| !used.contains(s)).collect();
        if free.len() < want.len() {
            bail!("{} chains asked, {} slots free", want.len(), free.len());
        }
        let gen = gen_now();
        let mut new_slots = BTreeMap::new();
        for ((key, c), slot) in want.iter().zip(free.iter()) {
            self.write_slot(*slot, &c.to_abi(gen))?;
            new_slots.insert(*key, *slot);
        }
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
                let used: HashSet<u32> = entries.values().copied().collect();
                let slot = (0..abi::MAX_CHAINS)
                    .find(|s| !used.contains(s))
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
