//! Planning a load, without BPF and without root: from a file ([`PolicySpec`]), what the maps
//! hold now ([`Current`]) and a [`Resolve`] for device and cgroup names, [`plan`] (the whole
//! file), [`plan_tenant`] (one tenant's chains) and [`plan_set_chain`] (one hook) compute
//! every map write and delete the load needs, as a [`Plan`] of [`Op`]s. Every check that can
//! fail (devices attached, cgroups resolved, slots and tenant ids free) happens here, before
//! anything is written; [`super::commit`] then performs the writes in a safe order and undoes
//! them if one fails. The ops carry the value they replace, so their inverse is known.

use super::error::{LoadError, SpecFault};
use super::keys::{DevHook, TenantHook, Who};
use crate::chains::abi::{self, Chain, TenantInfo, NO_CHAIN};
use crate::chains::spec::{ChainSpec, PolicySpec, TenantMatch, TenantSpec};
use std::collections::{BTreeMap, BTreeSet};

/// What the maps hold before a load (read by `Policy::current`, or made up by a test).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Current {
    /// The attached hooks (`hooks`) and their chain slots (NO_CHAIN: none).
    pub hooks: BTreeMap<DevHook, u32>,
    /// The tenants' chains (`tenant_hooks`).
    pub tenant_hooks: BTreeMap<TenantHook, u32>,
    /// The tenants loaded (`tenants`, ids 1.., free ids left out).
    pub tenants: BTreeMap<u32, TenantInfo>,
    /// `tenant_cgroups` and `tenant_uids`: who is which tenant id.
    pub who: BTreeMap<Who, u32>,
    /// `tenant_cfg[0]`: how many tenants are defined (0: tenancy off).
    pub tenant_count: u32,
}

impl Current {
    /// Chain slots no hook and no tenant uses, in order.
    pub fn free_slots(&self) -> Vec<u32> {
        let used: BTreeSet<u32> = self
            .hooks
            .values()
            .chain(self.tenant_hooks.values())
            .copied()
            .collect();
        (0..abi::MAX_CHAINS).filter(|s| !used.contains(s)).collect()
    }
}

/// Names to numbers: interface indices and cgroup ids (the host's, or a test's).
pub trait Resolve {
    /// The index of interface `dev` (Err: why not, in one line).
    fn ifindex(&self, dev: &str) -> Result<u32, String>;
    /// The name of interface `idx` (for messages).
    fn ifname(&self, idx: u32) -> String;
    /// The id of the cgroup at `path` (Err: why not, in one line).
    fn cgroup_id(&self, path: &str) -> Result<u64, String>;
}

/// Which per-flow tenant cache entries a load forgets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flows {
    /// All of them (the tenants changed).
    All,
    /// Those cached as this tenant's or as no tenant's (one tenant's definition changed).
    TenantOrNone(u32),
}

/// One map write (or delete) of a load. `old` is what the entry holds before (None: no
/// entry), `new` what it holds after (None: deleted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Write a chain into a free slot of `chains` (the counters of its links reset first).
    Chain { slot: u32, chain: Box<Chain> },
    /// A tenant id's definition in `tenants` (TENANT_FREE: the id is free).
    Tenant {
        id: u32,
        old: TenantInfo,
        new: TenantInfo,
    },
    /// An entry of `tenant_cgroups` or `tenant_uids`.
    Who {
        who: Who,
        old: Option<u32>,
        new: Option<u32>,
    },
    /// `tenant_cfg[0]`, the number of tenants.
    TenantCount { old: u32, new: u32 },
    /// Forget cached flow tenants (a cache: not undone).
    ForgetFlows(Flows),
    /// An entry of `tenant_hooks`.
    TenantHook {
        key: TenantHook,
        old: Option<u32>,
        new: Option<u32>,
    },
    /// A hook's slot in `hooks` (and its `hook_slots` mirror); the entry must exist.
    Hook { key: DevHook, old: u32, new: u32 },
    /// Forget the MP_PRIO sent per subflow, so `set_backup` asserts it again (not undone).
    ForgetPrio,
}

impl Op {
    /// When this op runs in a commit: the new chains first (nothing points at them yet),
    /// then who the tenants are, then the tenants' chains, then the default chains, and the
    /// caches last. Entries are added before stale ones are removed.
    pub fn phase(&self) -> u8 {
        match self {
            Op::Chain { .. } => 0,
            Op::Tenant { .. } => 1,
            Op::Who { new: Some(_), .. } => 2,
            Op::Who { new: None, .. } => 3,
            Op::TenantCount { .. } => 4,
            Op::ForgetFlows(_) => 5,
            Op::TenantHook { new: Some(_), .. } => 6,
            Op::TenantHook { new: None, .. } => 7,
            Op::Hook { .. } => 8,
            Op::ForgetPrio => 9,
        }
    }

    /// The op that undoes this one (None: nothing to undo: a chain written to a slot that
    /// was free, or a cache forgotten).
    pub fn inverse(&self) -> Option<Op> {
        Some(match self {
            Op::Chain { .. } | Op::ForgetFlows(_) | Op::ForgetPrio => return None,
            Op::Tenant { id, old, new } => Op::Tenant {
                id: *id,
                old: *new,
                new: *old,
            },
            Op::Who { who, old, new } => Op::Who {
                who: *who,
                old: *new,
                new: *old,
            },
            Op::TenantCount { old, new } => Op::TenantCount {
                old: *new,
                new: *old,
            },
            Op::TenantHook { key, old, new } => Op::TenantHook {
                key: *key,
                old: *new,
                new: *old,
            },
            Op::Hook { key, old, new } => Op::Hook {
                key: *key,
                old: *new,
                new: *old,
            },
        })
    }
}

/// Every map write a load needs, checked and resolved; [`super::commit`] performs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub ops: Vec<Op>,
}

impl Plan {
    /// The ops in the order a commit performs them (by [`Op::phase`], stable).
    pub fn ordered(&self) -> Vec<&Op> {
        let mut v: Vec<&Op> = self.ops.iter().collect();
        v.sort_by_key(|o| o.phase());
        v
    }
}

/// The prefix of a file's fault at `line`.
fn at(line: usize, fault: SpecFault) -> LoadError {
    LoadError::Spec { line, fault }
}

/// The device of chain `c` exists and is attached at its hook; that hook.
fn check_attached(c: &ChainSpec, cur: &Current, r: &dyn Resolve) -> Result<DevHook, LoadError> {
    let idx = r
        .ifindex(&c.dev)
        .map_err(|e| at(c.line, SpecFault::NoDevice(e)))?;
    let k = DevHook::new(idx, c.hook);
    if !cur.hooks.contains_key(&k) {
        return Err(at(c.line, SpecFault::NotAttached { dev: c.dev.clone() }));
    }
    Ok(k)
}

fn c_copy(dst: &mut [u8], s: &str) {
    let n = s.len().min(dst.len() - 1);
    dst[..n].copy_from_slice(&s.as_bytes()[..n]);
}

/// A tenant's map form (its cgroup resolved: it must exist).
pub fn tenant_info(t: &TenantSpec, r: &dyn Resolve) -> Result<TenantInfo, LoadError> {
    let mut i = TenantInfo::default();
    c_copy(&mut i.name, &t.name);
    match &t.who {
        TenantMatch::Cgroup(p) => {
            i.kind = abi::TENANT_CGROUP;
            i.cgroup = r.cgroup_id(p).map_err(|why| {
                at(
                    t.line,
                    SpecFault::NoCgroup {
                        tenant: t.name.clone(),
                        why,
                    },
                )
            })?;
            c_copy(&mut i.what, p);
        }
        TenantMatch::Uid(u) => {
            i.kind = abi::TENANT_UID;
            i.uid = *u;
        }
    }
    Ok(i)
}

/// Ids for the tenants of a file: a tenant loaded already keeps its id (so the flows the
/// programs know stay right), a new one takes the lowest id left. Every cgroup is resolved
/// here.
fn tenant_ids(
    tenants: &[TenantSpec],
    cur: &Current,
    r: &dyn Resolve,
) -> Result<BTreeMap<String, (u32, TenantInfo)>, LoadError> {
    let loaded = |name: &str| {
        cur.tenants
            .iter()
            .find(|(_, l)| l.name() == name)
            .map(|(id, _)| *id)
    };
    let mut taken: Vec<u32> = tenants.iter().filter_map(|t| loaded(&t.name)).collect();
    let mut out = BTreeMap::new();
    for t in tenants {
        let info = tenant_info(t, r)?;
        let id = match loaded(&t.name) {
            Some(id) => id,
            None => {
                let id = (1..abi::MAX_TENANTS)
                    .find(|i| !taken.contains(i))
                    .ok_or(LoadError::NoTenantId)?;
                taken.push(id);
                id
            }
        };
        out.insert(t.name.clone(), (id, info));
    }
    Ok(out)
}

/// The `tenant_cgroups` / `tenant_uids` ops that make them say what `all` says: entries
/// that differ written, entries `all` does not have deleted.
fn sync_who(all: &BTreeMap<u32, TenantInfo>, cur: &Current, ops: &mut Vec<Op>) {
    let want: BTreeMap<Who, u32> = all
        .iter()
        .filter_map(|(id, t)| Who::of(t).map(|w| (w, *id)))
        .collect();
    for (w, id) in &want {
        let old = cur.who.get(w).copied();
        if old != Some(*id) {
            ops.push(Op::Who {
                who: *w,
                old,
                new: Some(*id),
            });
        }
    }
    for (w, id) in &cur.who {
        if !want.contains_key(w) {
            ops.push(Op::Who {
                who: *w,
                old: Some(*id),
                new: None,
            });
        }
    }
}

/// The `tenant_hooks` ops: `new` written, entries of the tenants `scope` selects that `new`
/// does not have deleted (those hooks fall back to the default chain).
fn swap_tenant_hooks(
    new: &BTreeMap<TenantHook, u32>,
    scope: impl Fn(u32) -> bool,
    cur: &Current,
    ops: &mut Vec<Op>,
) {
    for (k, slot) in new {
        ops.push(Op::TenantHook {
            key: *k,
            old: cur.tenant_hooks.get(k).copied(),
            new: Some(*slot),
        });
    }
    for (k, slot) in &cur.tenant_hooks {
        if scope(k.tenant) && !new.contains_key(k) {
            ops.push(Op::TenantHook {
                key: *k,
                old: Some(*slot),
                new: None,
            });
        }
    }
}

fn has_set_backup(c: &ChainSpec) -> bool {
    c.links.iter().any(|l| {
        matches!(
            l,
            crate::chains::spec::LinkSpec::Act(crate::chains::spec::Actor::SetBackup { .. })
        )
    })
}

fn check_free(asked: usize, cur: &Current) -> Result<Vec<u32>, LoadError> {
    let free = cur.free_slots();
    if free.len() < asked {
        return Err(LoadError::NoFreeSlots {
            asked,
            free: free.len(),
        });
    }
    Ok(free)
}

/// The whole policy of `spec` replaces the loaded one: its chains into free slots, its
/// tenants (kept ids by name), the tenants' chains, and every attached hook pointed at its
/// new chain (hooks `spec` does not name get none). `gen`: the chains' generation number.
pub fn plan(
    spec: &PolicySpec,
    cur: &Current,
    r: &dyn Resolve,
    gen: u32,
) -> Result<Plan, LoadError> {
    let mut want: BTreeMap<DevHook, &ChainSpec> = BTreeMap::new();
    let mut want_t: Vec<(&ChainSpec, DevHook)> = vec![];
    for c in &spec.chains {
        let k = check_attached(c, cur, r)?;
        if c.tenant.is_some() {
            want_t.push((c, k));
        } else {
            want.insert(k, c);
        }
    }
    let ids = tenant_ids(&spec.tenants, cur, r)?;
    let mut free = check_free(want.len() + want_t.len(), cur)?.into_iter();
    let mut ops = vec![];
    let mut new_slots = BTreeMap::new();
    for (k, c) in &want {
        let slot = free.next().expect("counted");
        ops.push(Op::Chain {
            slot,
            chain: Box::new(c.to_abi(gen)),
        });
        new_slots.insert(*k, slot);
    }
    let mut new_t = BTreeMap::new();
    for (c, k) in &want_t {
        let name = c.tenant.as_deref().expect("a tenant chain");
        let Some((t, _)) = ids.get(name) else {
            return Err(at(
                c.line,
                SpecFault::UnknownTenant {
                    chain: c.name.clone(),
                    tenant: name.to_string(),
                },
            ));
        };
        let slot = free.next().expect("counted");
        ops.push(Op::Chain {
            slot,
            chain: Box::new(c.to_abi(gen)),
        });
        new_t.insert(TenantHook::new(*k, *t), slot);
    }
    // who the tenants are
    let new: BTreeMap<u32, TenantInfo> = ids.values().copied().collect();
    let mut changed = false;
    for id in 1..abi::MAX_TENANTS {
        let o = cur.tenants.get(&id).copied().unwrap_or_default();
        let n = new.get(&id).copied().unwrap_or_default();
        if o != n {
            changed = true;
            ops.push(Op::Tenant { id, old: o, new: n });
        }
    }
    sync_who(&new, cur, &mut ops);
    if cur.tenant_count != new.len() as u32 {
        ops.push(Op::TenantCount {
            old: cur.tenant_count,
            new: new.len() as u32,
        });
    }
    if changed {
        ops.push(Op::ForgetFlows(Flows::All));
    }
    // their chains, then the default chains
    swap_tenant_hooks(&new_t, |_| true, cur, &mut ops);
    for (k, old) in &cur.hooks {
        let new = new_slots.get(k).copied().unwrap_or(NO_CHAIN);
        if new != *old {
            ops.push(Op::Hook {
                key: *k,
                old: *old,
                new,
            });
        }
    }
    if spec.chains.iter().any(has_set_backup) {
        ops.push(Op::ForgetPrio);
    }
    Ok(Plan { ops })
}

/// The chains of tenant `name` only are replaced by those `spec` gives it (its hooks the file
/// does not name for it fall back to the default chain); its definition is updated if it
/// changed. The tenant must be loaded already. Nothing else is touched.
pub fn plan_tenant(
    spec: &PolicySpec,
    name: &str,
    cur: &Current,
    r: &dyn Resolve,
    gen: u32,
) -> Result<Plan, LoadError> {
    let Some(ts) = spec.tenant(name) else {
        let known: Vec<&str> = spec.tenants.iter().map(|t| t.name.as_str()).collect();
        return Err(LoadError::NoSuchTenant {
            name: name.to_string(),
            known: if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            },
        });
    };
    let Some(id) = cur
        .tenants
        .iter()
        .find(|(_, t)| t.name() == name)
        .map(|(id, _)| *id)
    else {
        return Err(LoadError::TenantNotLoaded(name.to_string()));
    };
    let mut want_t: Vec<(&ChainSpec, DevHook)> = vec![];
    for c in spec
        .chains
        .iter()
        .filter(|c| c.tenant.as_deref() == Some(name))
    {
        want_t.push((c, check_attached(c, cur, r)?));
    }
    let info = tenant_info(ts, r)?;
    let free = check_free(want_t.len(), cur)?;
    let mut ops = vec![];
    let mut new_t = BTreeMap::new();
    for ((c, k), slot) in want_t.iter().zip(free) {
        ops.push(Op::Chain {
            slot,
            chain: Box::new(c.to_abi(gen)),
        });
        new_t.insert(TenantHook::new(*k, id), slot);
    }
    let old = cur.tenants.get(&id).copied().unwrap_or_default();
    if old != info {
        if cur.tenants.iter().any(|(i, t)| {
            *i != id && t.kind == info.kind && t.cgroup == info.cgroup && t.uid == info.uid
        }) {
            return Err(LoadError::TenantClash(info.name()));
        }
        ops.push(Op::Tenant { id, old, new: info });
        let mut all = cur.tenants.clone();
        all.insert(id, info);
        sync_who(&all, cur, &mut ops);
        ops.push(Op::ForgetFlows(Flows::TenantOrNone(id)));
    }
    swap_tenant_hooks(&new_t, |t| t == id, cur, &mut ops);
    if want_t.iter().any(|(c, _)| has_set_backup(c)) {
        ops.push(Op::ForgetPrio);
    }
    Ok(Plan { ops })
}

/// One hook's chain set (or cleared, with None), the others left alone.
pub fn plan_set_chain(
    key: DevHook,
    chain: Option<&ChainSpec>,
    cur: &Current,
    r: &dyn Resolve,
    gen: u32,
) -> Result<Plan, LoadError> {
    let Some(old) = cur.hooks.get(&key).copied() else {
        return Err(LoadError::NotAttached {
            dev: r.ifname(key.ifindex),
        });
    };
    let mut ops = vec![];
    let new = match chain {
        None => NO_CHAIN,
        Some(c) => {
            let slot = *check_free(1, cur)?.first().expect("counted");
            ops.push(Op::Chain {
                slot,
                chain: Box::new(c.to_abi(gen)),
            });
            slot
        }
    };
    if new != old {
        ops.push(Op::Hook { key, old, new });
    }
    if chain.is_some_and(has_set_backup) {
        ops.push(Op::ForgetPrio);
    }
    Ok(Plan { ops })
}

/// The tenants' chains of device `ifindex` removed (it is being detached).
pub fn plan_drop_device(ifindex: u32, cur: &Current) -> Plan {
    let ops = cur
        .tenant_hooks
        .iter()
        .filter(|(k, _)| k.at.ifindex == ifindex)
        .map(|(k, slot)| Op::TenantHook {
            key: *k,
            old: Some(*slot),
            new: None,
        })
        .collect();
    Plan { ops }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
