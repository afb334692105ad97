//! Tenants in the maps: who each tenant id is (`tenants`, `tenant_cgroups`, `tenant_uids`,
//! `tenant_cfg`), the tenants' chains (`tenant_hooks`, keyed by interface, hook and tenant),
//! and the per-flow tenant cache the programs keep (`tenant_flows4/6`), cleared when the
//! tenants change. A tenant's cgroup is given as a path in the cgroup v2 hierarchy and
//! resolved here to its id (the inode number of its directory in the cgroup2 mount).

use super::state::{Policy, TenantStatus};
use crate::abi::{self, HookKey, Pod, TenantInfo};
use crate::spec::{TenantMatch, TenantSpec};
use anyhow::{anyhow, bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

/// Where the cgroup v2 hierarchy is mounted (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified`
/// on a hybrid host), from /proc/self/mountinfo.
pub fn cgroup2_root() -> Result<PathBuf> {
    let mi = std::fs::read_to_string("/proc/self/mountinfo").context("reading mountinfo")?;
    for line in mi.lines() {
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        if post.split_whitespace().next() == Some("cgroup2") {
            if let Some(mp) = pre.split_whitespace().nth(4) {
                return Ok(PathBuf::from(mp));
            }
        }
    }
    bail!("no cgroup v2 hierarchy is mounted (cgroup tenants need one)")
}

/// The id of the cgroup at `path` (from the root of the cgroup v2 hierarchy, `/a/b`).
pub fn cgroup_id(path: &str) -> Result<u64> {
    use std::os::unix::fs::MetadataExt;
    let dir = cgroup2_root()?.join(path.trim_start_matches('/'));
    let m = std::fs::metadata(&dir)
        .map_err(|e| anyhow!("no cgroup {path} ({}: {e})", dir.display()))?;
    if !m.is_dir() {
        bail!("no cgroup {path} ({} is not a directory)", dir.display());
    }
    Ok(m.ino())
}

fn c_copy(dst: &mut [u8], s: &str) {
    let n = s.len().min(dst.len() - 1);
    dst[..n].copy_from_slice(&s.as_bytes()[..n]);
}

impl Policy {
    /// A tenant's map form (its cgroup resolved: it must exist).
    pub(super) fn tenant_info(&self, t: &TenantSpec) -> Result<TenantInfo> {
        let at = if t.line > 0 {
            format!("line {}: ", t.line)
        } else {
            String::new()
        };
        let mut i = TenantInfo::default();
        c_copy(&mut i.name, &t.name);
        match &t.who {
            TenantMatch::Cgroup(p) => {
                i.kind = abi::TENANT_CGROUP;
                i.cgroup = cgroup_id(p).map_err(|e| anyhow!("{at}tenant `{}`: {e}", t.name))?;
                c_copy(&mut i.what, p);
            }
            TenantMatch::Uid(u) => {
                i.kind = abi::TENANT_UID;
                i.uid = *u;
            }
        }
        Ok(i)
    }

    /// The tenants loaded: (id, what the map holds), ids 1.., in order.
    pub fn loaded_tenants(&self) -> Result<Vec<(u32, TenantInfo)>> {
        let mut v = vec![];
        for id in 1..abi::MAX_TENANTS {
            if let Some(b) = self.tenants.lookup(&id.to_ne_bytes(), MapFlags::ANY)? {
                if let Some(t) = TenantInfo::from_bytes(&b) {
                    if t.kind != abi::TENANT_FREE {
                        v.push((id, t));
                    }
                }
            }
        }
        Ok(v)
    }

    /// Ids for the tenants of a file: a tenant loaded already keeps its id (so the flows the
    /// programs know stay right), a new one takes the lowest id left. Every cgroup is
    /// resolved here, before anything is written.
    pub(super) fn plan_tenants(
        &self,
        tenants: &[TenantSpec],
    ) -> Result<HashMap<String, (u32, TenantInfo)>> {
        let loaded = self.loaded_tenants()?;
        let mut out: HashMap<String, (u32, TenantInfo)> = HashMap::new();
        let mut taken: Vec<u32> = vec![];
        for t in tenants {
            if let Some((id, _)) = loaded.iter().find(|(_, l)| l.name() == t.name) {
                taken.push(*id);
            }
        }
        for t in tenants {
            let info = self.tenant_info(t)?;
            let id = match loaded.iter().find(|(_, l)| l.name() == t.name) {
                Some((id, _)) => *id,
                None => {
                    let id = (1..abi::MAX_TENANTS)
                        .find(|i| !taken.contains(i))
                        .ok_or_else(|| anyhow!("no tenant id left"))?;
                    taken.push(id);
                    id
                }
            };
            out.insert(t.name.clone(), (id, info));
        }
        Ok(out)
    }

    /// Make the maps hold exactly the tenants `plan` gives (ids and definitions). If any
    /// tenant's definition changed, the per-flow tenant cache is cleared (the programs fill
    /// it again at the next packet each flow sends).
    pub(super) fn write_tenants(&self, plan: &HashMap<String, (u32, TenantInfo)>) -> Result<()> {
        let old: BTreeMap<u32, TenantInfo> = self.loaded_tenants()?.into_iter().collect();
        let new: BTreeMap<u32, TenantInfo> = plan.values().map(|(i, t)| (*i, *t)).collect();
        let mut changed = false;
        for id in 1..abi::MAX_TENANTS {
            let o = old.get(&id);
            let n = new.get(&id);
            if o != n {
                changed = true;
                let v = n.copied().unwrap_or_default();
                self.tenants
                    .update(&id.to_ne_bytes(), v.as_bytes(), MapFlags::ANY)
                    .context("writing the tenants")?;
            }
        }
        self.sync_who(&new)?;
        self.tenant_cfg
            .update(
                &0u32.to_ne_bytes(),
                &(new.len() as u32).to_ne_bytes(),
                MapFlags::ANY,
            )
            .context("writing tenant_cfg")?;
        if changed {
            self.tenant_flows.clear();
        }
        Ok(())
    }

    /// Update one tenant's definition (its id stays). If it changed, the flows cached as
    /// this tenant's or as no tenant's are forgotten (the others' stay).
    pub(super) fn update_tenant(&self, id: u32, info: &TenantInfo) -> Result<()> {
        let mut all: BTreeMap<u32, TenantInfo> = self.loaded_tenants()?.into_iter().collect();
        if all.get(&id) == Some(info) {
            return Ok(());
        }
        if all.iter().any(|(i, t)| {
            *i != id && t.kind == info.kind && t.cgroup == info.cgroup && t.uid == info.uid
        }) {
            bail!(
                "tenant `{}`: another tenant has that cgroup or uid",
                info.name()
            );
        }
        all.insert(id, *info);
        self.tenants
            .update(&id.to_ne_bytes(), info.as_bytes(), MapFlags::ANY)
            .context("writing the tenants")?;
        self.sync_who(&all)?;
        self.tenant_flows
            .retain(|v| !matches!(u32::from_bytes(v), Some(t) if t == id || t == 0));
        Ok(())
    }

    /// `tenant_cgroups` and `tenant_uids` as `all` says: new entries first, stale ones after.
    fn sync_who(&self, all: &BTreeMap<u32, TenantInfo>) -> Result<()> {
        let mut cg: BTreeMap<Vec<u8>, u32> = BTreeMap::new();
        let mut uid: BTreeMap<Vec<u8>, u32> = BTreeMap::new();
        for (id, t) in all {
            match t.kind {
                abi::TENANT_CGROUP => {
                    cg.insert(t.cgroup.to_ne_bytes().to_vec(), *id);
                }
                abi::TENANT_UID => {
                    uid.insert(t.uid.to_ne_bytes().to_vec(), *id);
                }
                _ => {}
            }
        }
        for (m, want) in [(&self.tenant_cgroups, &cg), (&self.tenant_uids, &uid)] {
            for (k, id) in want {
                m.update(k, &id.to_ne_bytes(), MapFlags::ANY)
                    .context("writing a tenant's cgroup or uid")?;
            }
            let stale: Vec<Vec<u8>> = m.keys().filter(|k| !want.contains_key(k)).collect();
            for k in stale {
                let _ = m.delete(&k);
            }
        }
        Ok(())
    }

    /// The tenants' chains: (ifindex, hook, tenant id) -> slot.
    pub fn tenant_hook_entries(&self) -> Result<BTreeMap<(u32, u32, u32), u32>> {
        let mut out = BTreeMap::new();
        for k in self.tenant_hooks.keys() {
            let Some(hk) = HookKey::from_bytes(&k) else {
                continue;
            };
            if let Some(v) = self.tenant_hooks.lookup(&k, MapFlags::ANY)? {
                if let Some(slot) = u32::from_bytes(&v) {
                    out.insert(
                        (
                            hk.ifindex,
                            hk.hook & ((1 << abi::TENANT_SHIFT) - 1),
                            hk.hook >> abi::TENANT_SHIFT,
                        ),
                        slot,
                    );
                }
            }
        }
        Ok(out)
    }

    /// Point the tenants' hooks at `new` (each an atomic map update) and remove the entries
    /// of the tenants `scope` selects that `new` does not have (those hooks fall back to the
    /// default chain). Entries of tenants outside `scope` are not touched.
    pub(super) fn swap_tenant_hooks(
        &self,
        new: &BTreeMap<(u32, u32, u32), u32>,
        scope: impl Fn(u32) -> bool,
    ) -> Result<()> {
        let key = |(idx, hook, t): (u32, u32, u32)| {
            HookKey {
                ifindex: idx,
                hook: hook | (t << abi::TENANT_SHIFT),
            }
            .as_bytes()
            .to_vec()
        };
        for (k, slot) in new {
            self.tenant_hooks
                .update(&key(*k), &slot.to_ne_bytes(), MapFlags::ANY)
                .context("switching a tenant's chain")?;
        }
        for k in self.tenant_hook_entries()?.keys() {
            if scope(k.2) && !new.contains_key(k) {
                self.tenant_hooks
                    .delete(&key(*k))
                    .context("removing a tenant's chain")?;
            }
        }
        Ok(())
    }

    /// Forget the tenants' chains of device `idx` (detach).
    pub(super) fn drop_tenant_hooks(&self, idx: u32) -> Result<()> {
        let keep: BTreeMap<(u32, u32, u32), u32> = self
            .tenant_hook_entries()?
            .into_iter()
            .filter(|(k, _)| k.0 != idx)
            .collect();
        self.swap_tenant_hooks(&keep, |_| true)
    }

    /// The tenants, for `show`.
    pub fn tenant_status(&self) -> Result<Vec<TenantStatus>> {
        Ok(self
            .loaded_tenants()?
            .into_iter()
            .map(|(id, t)| TenantStatus {
                name: t.name(),
                id,
                who: match t.kind {
                    abi::TENANT_CGROUP => format!("cgroup {}", t.what()),
                    _ => format!("uid {}", t.uid),
                },
                cgroup_id: (t.kind == abi::TENANT_CGROUP).then_some(t.cgroup),
            })
            .collect())
    }

    /// The tenant cached for each flow the programs saw leave (flow as it left, tenant id).
    pub fn tenant_flows(&self) -> Result<Vec<(abi::FlowKey, u32)>> {
        Ok(self
            .tenant_flows
            .entries()?
            .into_iter()
            .filter_map(|(f, v)| u32::from_bytes(&v).map(|t| (f, t)))
            .collect())
    }
}
