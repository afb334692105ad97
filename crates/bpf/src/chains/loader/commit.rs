//! Committing a [`Plan`]: its writes performed in a safe order ([`Op::phase`]: new chains into
//! free slots first, then the tenants, their chains, the hooks that switch to the new chains,
//! the caches last), and, if a write fails, the writes before it undone in reverse order, so
//! that the maps hold what they held before. [`Target`] is where the writes go: [`Policy`]'s
//! pinned maps, or a test's model of them. Also [`Policy::current`], the [`Current`] state a
//! plan starts from.

use super::attach::write_hook;
use super::error::LoadError;
use super::keys::Who;
use super::plan::{Current, Flows, Op, Plan};
use super::Policy;
use crate::chains::abi::{self, Chain, LinkStats, Pod};
use libbpf_rs::{MapCore, MapFlags};

/// Where a commit writes: one op at a time.
pub trait Target {
    /// Perform `op` (its `new` side); an error leaves the entry as it was, except for a hook,
    /// whose hash entry may be written when its mirror is not.
    fn write(&self, op: &Op) -> Result<(), LoadError>;
}

/// Perform `plan` on `t`, in [`Plan::ordered`] order. If a write fails, the ones before it
/// (and a hook write that failed half way) are undone, newest first, and the error is
/// [`LoadError::RolledBack`]. Undo is best effort: an undo that fails is logged.
pub fn commit(plan: &Plan, t: &dyn Target) -> Result<(), LoadError> {
    let ops = plan.ordered();
    for (i, op) in ops.iter().enumerate() {
        let Err(e) = t.write(op) else {
            continue;
        };
        let half_done = matches!(op, Op::Hook { .. });
        let undo = if half_done { &ops[..=i] } else { &ops[..i] };
        for done in undo.iter().rev() {
            if let Some(inv) = done.inverse() {
                if let Err(u) = t.write(&inv) {
                    log::warn!("undoing {done:?}: {u}");
                }
            }
        }
        return Err(LoadError::RolledBack { cause: Box::new(e) });
    }
    Ok(())
}

impl Target for Policy {
    fn write(&self, op: &Op) -> Result<(), LoadError> {
        match op {
            Op::Chain { slot, chain } => write_slot(&self.chains, &self.stats, *slot, chain),
            Op::Tenant { id, new, .. } => self
                .tenants
                .update(&id.to_ne_bytes(), new.as_bytes(), MapFlags::ANY)
                .map_err(LoadError::map("writing the tenants")),
            Op::Who { who, new, .. } => {
                let m = match who {
                    Who::Cgroup(_) => &self.tenant_cgroups,
                    Who::Uid(_) => &self.tenant_uids,
                };
                match new {
                    Some(id) => m
                        .update(&who.key_bytes(), &id.to_ne_bytes(), MapFlags::ANY)
                        .map_err(LoadError::map("writing a tenant's cgroup or uid")),
                    None => {
                        let _ = m.delete(&who.key_bytes()); // gone already: fine
                        Ok(())
                    }
                }
            }
            Op::TenantCount { new, .. } => self
                .tenant_cfg
                .update(&0u32.to_ne_bytes(), &new.to_ne_bytes(), MapFlags::ANY)
                .map_err(LoadError::map("writing tenant_cfg")),
            Op::ForgetFlows(Flows::All) => {
                self.tenant_flows.clear();
                Ok(())
            }
            Op::ForgetFlows(Flows::TenantOrNone(id)) => {
                let id = *id;
                self.tenant_flows
                    .retain(|v| !matches!(u32::from_bytes(v), Some(t) if t == id || t == 0));
                Ok(())
            }
            Op::TenantHook { key, new, .. } => {
                let k = key.to_abi();
                match new {
                    Some(slot) => self
                        .tenant_hooks
                        .update(k.as_bytes(), &slot.to_ne_bytes(), MapFlags::ANY)
                        .map_err(LoadError::map("switching a tenant's chain")),
                    None => self
                        .tenant_hooks
                        .delete(k.as_bytes())
                        .map_err(LoadError::map("removing a tenant's chain")),
                }
            }
            Op::Hook { key, new, .. } => write_hook(
                &self.hooks,
                Some(&self.hook_slots as &dyn MapCore),
                *key,
                *new,
                MapFlags::EXIST,
            ),
            Op::ForgetPrio => {
                self.flows.forget_prio();
                Ok(())
            }
        }
    }
}

impl Policy {
    /// What the maps hold now, for a plan.
    pub fn current(&self) -> Result<Current, LoadError> {
        let mut who = std::collections::BTreeMap::new();
        for k in self.tenant_cgroups.keys() {
            if let (Some(c), Some(id)) = (
                u64::from_bytes(&k),
                self.read_u32(&self.tenant_cgroups, &k)?,
            ) {
                who.insert(Who::Cgroup(c), id);
            }
        }
        for k in self.tenant_uids.keys() {
            if let (Some(u), Some(id)) =
                (u32::from_bytes(&k), self.read_u32(&self.tenant_uids, &k)?)
            {
                who.insert(Who::Uid(u), id);
            }
        }
        Ok(Current {
            hooks: self.hook_entries()?,
            tenant_hooks: self.tenant_hook_entries()?,
            tenants: self.loaded_tenants()?.into_iter().collect(),
            who,
            tenant_count: self
                .read_u32(&self.tenant_cfg, &0u32.to_ne_bytes())?
                .unwrap_or(0),
        })
    }

    /// The u32 value of `key` in `m` (None: no entry).
    pub(super) fn read_u32(&self, m: &dyn MapCore, key: &[u8]) -> Result<Option<u32>, LoadError> {
        Ok(m.lookup(key, MapFlags::ANY)
            .map_err(LoadError::map("reading the maps"))?
            .and_then(|v| u32::from_bytes(&v)))
    }
}

fn ncpu() -> Result<usize, LoadError> {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    if let Some(n) = N.get() {
        return Ok(*n);
    }
    let n = libbpf_rs::num_possible_cpus().map_err(LoadError::map("counting the CPUs"))?;
    Ok(*N.get_or_init(|| n))
}

/// Write chain `c` into `slot`, the counters of the links it uses reset first.
pub(super) fn write_slot(
    chains: &dyn MapCore,
    stats: &dyn MapCore,
    slot: u32,
    c: &Chain,
) -> Result<(), LoadError> {
    let ncpu = ncpu()?;
    let zero = vec![LinkStats::default().as_bytes().to_vec(); ncpu];
    // the counters of the links this chain uses start from zero (the others are not read)
    for i in 0..c.len.min(abi::MAX_LINKS as u32) {
        let k = slot * abi::MAX_LINKS as u32 + i;
        stats
            .update_percpu(&k.to_ne_bytes(), &zero, MapFlags::ANY)
            .map_err(LoadError::map("resetting a chain's counters"))?;
    }
    chains
        .update(&slot.to_ne_bytes(), c.as_bytes(), MapFlags::ANY)
        .map_err(LoadError::map("writing a chain"))
}
