//! Tenants in the maps: who each tenant id is (`tenants`, `tenant_cgroups`, `tenant_uids`,
//! `tenant_cfg`), the tenants' chains (`tenant_hooks`, keyed by interface, hook and tenant),
//! and the per-flow tenant cache the programs keep (`tenant_flows4/6`), cleared when the
//! tenants change. A tenant's cgroup is given as a path in the cgroup v2 hierarchy and
//! resolved to its id (the inode number of its directory in the cgroup2 mount) by
//! [`HostResolver`], the host's names for a [`super::plan`]. The writes are planned in
//! `plan.rs` and performed by `commit.rs`.

use super::commit::commit;
use super::error::LoadError;
use super::keys::TenantHook;
use super::plan::plan_drop_device;
use super::state::{Policy, TenantStatus};
use crate::chains::abi::{self, HookKey, Pod, TenantInfo};
use anyhow::{anyhow, bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags};
use std::collections::BTreeMap;
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
    let m = std::fs::metadata(&dir).map_err(|e| match e.kind() {
        // the usual case, a cgroup not made yet: say how to make it
        std::io::ErrorKind::NotFound => anyhow!(
            "no cgroup {path} (make it: mkdir -p {}; a process joins it by writing its pid to cgroup.procs there)",
            dir.display()
        ),
        _ => anyhow!("no cgroup {path} ({}: {e})", dir.display()),
    })?;
    if !m.is_dir() {
        bail!("no cgroup {path} ({} is not a directory)", dir.display());
    }
    Ok(m.ino())
}

impl Policy {
    /// The tenants loaded: (id, what the map holds), ids 1.., in order.
    pub fn loaded_tenants(&self) -> Result<Vec<(u32, TenantInfo)>, LoadError> {
        let mut v = vec![];
        for id in 1..abi::MAX_TENANTS {
            let b = self
                .tenants
                .lookup(&id.to_ne_bytes(), MapFlags::ANY)
                .map_err(LoadError::map("reading the tenants"))?;
            if let Some(b) = b {
                if let Some(t) = TenantInfo::from_bytes(&b) {
                    if t.kind != abi::TENANT_FREE {
                        v.push((id, t));
                    }
                }
            }
        }
        Ok(v)
    }

    /// The tenants' chains: (device, hook, tenant id) -> slot.
    pub fn tenant_hook_entries(&self) -> Result<BTreeMap<TenantHook, u32>, LoadError> {
        let mut out = BTreeMap::new();
        for k in self.tenant_hooks.keys() {
            let Some(key) = HookKey::from_bytes(&k).and_then(TenantHook::from_abi) else {
                continue;
            };
            if let Some(slot) = self.read_u32(&self.tenant_hooks, &k)? {
                out.insert(key, slot);
            }
        }
        Ok(out)
    }

    /// Forget the tenants' chains of device `idx` (detach).
    pub(super) fn drop_tenant_hooks(&self, idx: u32) -> Result<(), LoadError> {
        commit(&plan_drop_device(idx, &self.current()?), self)
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

/// The host's names, for a plan: interfaces of the calling thread's namespace, cgroups of
/// the cgroup v2 hierarchy.
pub struct HostResolver;

impl super::plan::Resolve for HostResolver {
    fn ifindex(&self, dev: &str) -> std::result::Result<u32, String> {
        super::host::ifindex(dev).map_err(|e| e.to_string())
    }
    fn ifname(&self, idx: u32) -> String {
        super::host::ifname(idx)
    }
    fn cgroup_id(&self, path: &str) -> std::result::Result<u64, String> {
        cgroup_id(path).map_err(|e| e.to_string())
    }
}
