//! The pinned policy state ([`Policy`]): the maps `attach` pinned, opened by path, and what
//! is read back from them (status, counters, kept ADD_ADDR options, metrics, events).

use crate::chains::abi::{self, Chain, HookKey, LinkStats, Pod, NO_CHAIN};
use crate::chains::events::Event;
use crate::chains::spec::{ChainSpec, Hook};
use anyhow::{anyhow, Context, Result};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::error::LoadError;
use super::host::ifname;
use super::keys::DevHook;

/// One selector's or actor's counters in a chain.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LinkStatus {
    pub link: String,
    pub runs: u64,
    pub hits: u64,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct HookStatus {
    pub dev: String,
    pub ifindex: u32,
    pub hook: Hook,
    /// The tenant whose chain this is; None: the hook's default chain.
    pub tenant: Option<String>,
    pub chain: Option<String>,
    pub slot: Option<u32>,
    pub links: Vec<LinkStatus>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct KeptStatus {
    pub flow: String,
    pub addr_id: u8,
    pub blocked: u8,
    pub reannounced: u8,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct Status {
    pub pin_dir: String,
    pub hooks: Vec<HookStatus>,
    pub seen_ingress: u64,
    pub seen_egress: u64,
    pub malformed_ingress: u64,
    pub malformed_egress: u64,
    pub kept_add_addr: Vec<KeptStatus>,
    pub subflows_recorded: usize,
    pub tenants: Vec<TenantStatus>,
}

/// One tenant as `show` reports it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TenantStatus {
    pub name: String,
    pub id: u32,
    /// `cgroup /path` or `uid N`, as the file gave it.
    pub who: String,
    /// The cgroup's id (its inode), for a cgroup tenant.
    pub cgroup_id: Option<u64>,
}

/// The pinned policy state: what `nena policy` and nena's transport drive.
pub struct Policy {
    pub(super) dir: PathBuf,
    pub(super) chains: MapHandle,
    pub(super) hooks: MapHandle,
    pub(super) hook_slots: MapHandle,
    pub(super) stats: MapHandle,
    pub(super) events: MapHandle,
    pub(super) kept: FlowMaps,
    pub(super) metrics: FlowMaps,
    pub(super) counters: MapHandle,
    /// `struct flow_state` per flow: the window scale and set_backup's MP_PRIO.
    pub(super) flows: FlowMaps,
    pub(super) tenant_cfg: MapHandle,
    pub(super) tenant_cgroups: MapHandle,
    pub(super) tenant_uids: MapHandle,
    pub(super) tenant_hooks: MapHandle,
    pub(super) tenants: MapHandle,
    pub(super) tenant_flows: FlowMaps,
}

/// A per-flow map of the BPF side: NAME4 (IPv4 flows, 12-byte keys) and NAME6 (IPv6 flows,
/// `FlowKey`), read as one.
pub(super) struct FlowMaps {
    v4: MapHandle,
    v6: MapHandle,
}

impl FlowMaps {
    pub(super) fn open(dir: &Path, name: &str) -> Result<FlowMaps> {
        let h = |suffix: &str| -> Result<MapHandle> {
            let p = dir.join(format!("{name}{suffix}"));
            MapHandle::from_pinned_path(&p).with_context(|| format!("opening {}", p.display()))
        };
        Ok(FlowMaps {
            v4: h("4")?,
            v6: h("6")?,
        })
    }

    pub(super) fn from_handles(v4: MapHandle, v6: MapHandle) -> FlowMaps {
        FlowMaps { v4, v6 }
    }

    /// The map of `flow`'s family and its key there.
    fn of(&self, flow: &abi::FlowKey) -> (&MapHandle, Vec<u8>) {
        let (suffix, k) = flow.map_key();
        (if suffix == "4" { &self.v4 } else { &self.v6 }, k)
    }

    /// The value bytes of `flow` (None: no entry).
    pub(super) fn get(&self, flow: &abi::FlowKey) -> Result<Option<Vec<u8>>> {
        let (m, k) = self.of(flow);
        Ok(m.lookup(&k, MapFlags::ANY)?)
    }

    /// Set the value bytes of `flow`.
    pub(super) fn set(&self, flow: &abi::FlowKey, v: &[u8]) -> Result<()> {
        let (m, k) = self.of(flow);
        Ok(m.update(&k, v, MapFlags::ANY)?)
    }

    /// Every (flow, value bytes) of both maps.
    pub(super) fn entries(&self) -> Result<Vec<(abi::FlowKey, Vec<u8>)>> {
        let mut out = vec![];
        for m in [&self.v4, &self.v6] {
            for k in m.keys() {
                if let (Some(fk), Some(v)) =
                    (abi::FlowKey::from_map_key(&k), m.lookup(&k, MapFlags::ANY)?)
                {
                    out.push((fk, v));
                }
            }
        }
        Ok(out)
    }

    pub(super) fn len(&self) -> usize {
        self.v4.keys().count() + self.v6.keys().count()
    }

    /// Keep the entries whose value bytes `keep` accepts, delete the others.
    pub(super) fn retain(&self, keep: impl Fn(&[u8]) -> bool) {
        for m in [&self.v4, &self.v6] {
            let keys: Vec<Vec<u8>> = m.keys().collect();
            for k in keys {
                if let Ok(Some(v)) = m.lookup(&k, MapFlags::ANY) {
                    if !keep(&v) {
                        let _ = m.delete(&k);
                    }
                }
            }
        }
    }

    /// `flows`: forget which MP_PRIO each flow was sent (`struct flow_state`'s `backup` and
    /// `sent`, bytes 2 and 3), keep the window scales.
    pub(super) fn forget_prio(&self) {
        self.update_all(|v| {
            if let Some(p) = v.get_mut(2..4) {
                p.fill(0);
            }
        })
    }

    /// The size of the maps' values.
    pub(super) fn value_size(&self) -> usize {
        self.v4.value_size() as usize
    }

    /// Rewrite every entry's value bytes with `f`.
    pub(super) fn update_all(&self, f: impl Fn(&mut [u8])) {
        for m in [&self.v4, &self.v6] {
            let keys: Vec<Vec<u8>> = m.keys().collect();
            for k in keys {
                if let Ok(Some(mut v)) = m.lookup(&k, MapFlags::ANY) {
                    f(&mut v);
                    let _ = m.update(&k, &v, MapFlags::EXIST);
                }
            }
        }
    }

    pub(super) fn clear(&self) {
        for m in [&self.v4, &self.v6] {
            let keys: Vec<Vec<u8>> = m.keys().collect();
            for k in keys {
                let _ = m.delete(&k);
            }
        }
    }
}

impl Policy {
    /// Open the pinned state left by `attach`.
    pub fn open(dir: &Path) -> Result<Policy> {
        let h = |n: &str| -> Result<MapHandle> {
            let p = dir.join(n);
            MapHandle::from_pinned_path(&p).with_context(|| {
                format!(
                    "opening {} (is a device attached? `nena policy attach --dev DEV`)",
                    p.display()
                )
            })
        };
        Ok(Policy {
            dir: dir.to_path_buf(),
            chains: h("chains")?,
            hooks: h("hooks")?,
            hook_slots: h("hook_slots")?,
            stats: h("link_stats")?,
            events: h("events")?,
            kept: FlowMaps::open(dir, "kept")?,
            metrics: FlowMaps::open(dir, "metrics")?,
            counters: h("counters")?,
            flows: FlowMaps::open(dir, "flows")?,
            tenant_cfg: h("tenant_cfg")?,
            tenant_cgroups: h("tenant_cgroups")?,
            tenant_uids: h("tenant_uids")?,
            tenant_hooks: h("tenant_hooks")?,
            tenants: h("tenants")?,
            tenant_flows: FlowMaps::open(dir, "tenant_flows")?,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The attached hooks and their chain slots (NO_CHAIN: none).
    pub(super) fn hook_entries(&self) -> Result<BTreeMap<DevHook, u32>, LoadError> {
        let mut out = BTreeMap::new();
        for k in self.hooks.keys() {
            // a marker such as CLSACT_OWNED is not a hook
            let Some(key) = HookKey::from_bytes(&k).and_then(DevHook::from_abi) else {
                continue;
            };
            if let Some(v) = self
                .hooks
                .lookup(&k, MapFlags::ANY)
                .map_err(LoadError::map("reading the hooks"))?
            {
                out.insert(key, u32::from_bytes(&v).unwrap_or(NO_CHAIN));
            }
        }
        Ok(out)
    }

    /// Devices attached (by index).
    pub fn attached(&self) -> Result<Vec<u32>> {
        let mut v: Vec<u32> = self.hook_entries()?.keys().map(|k| k.ifindex).collect();
        v.dedup();
        Ok(v)
    }

    /// Chains, counters and what each link matched, per attached hook.
    pub fn status(&self) -> Result<Status> {
        let mut hooks = vec![];
        for (k, slot) in self.hook_entries()? {
            hooks.push(self.hook_status(k, None, slot)?);
        }
        let names: BTreeMap<u32, String> = self
            .loaded_tenants()?
            .into_iter()
            .map(|(id, t)| (id, t.name()))
            .collect();
        for (k, slot) in self.tenant_hook_entries()? {
            let t = k.tenant;
            let name = names.get(&t).cloned().unwrap_or_else(|| format!("#{t}"));
            hooks.push(self.hook_status(k.at, Some(name), slot)?);
        }
        let mut g = [0u64; 4];
        for (i, slot) in g.iter_mut().enumerate() {
            if let Some(per) = self
                .counters
                .lookup_percpu(&(i as u32).to_ne_bytes(), MapFlags::ANY)?
            {
                *slot = per
                    .iter()
                    .filter_map(|v| v.get(..8))
                    .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
                    .sum();
            }
        }
        let mut kept = vec![];
        for (fk, v) in self.kept.entries()? {
            let Some(kv) = abi::Kept::from_bytes(&v) else {
                continue;
            };
            for s in kv.slot.iter().filter(|s| s.len > 0) {
                kept.push(KeptStatus {
                    flow: crate::chains::events::flow_string(&fk),
                    addr_id: s.id,
                    blocked: s.blocked,
                    reannounced: s.reannounced,
                });
            }
        }
        Ok(Status {
            pin_dir: self.dir.display().to_string(),
            hooks,
            seen_ingress: g[0],
            seen_egress: g[1],
            malformed_ingress: g[2],
            malformed_egress: g[3],
            kept_add_addr: kept,
            subflows_recorded: self.metrics.len(),
            tenants: self.tenant_status()?,
        })
    }

    /// One hook's chain (of the default or of a tenant) and its counters.
    fn hook_status(&self, at: DevHook, tenant: Option<String>, slot: u32) -> Result<HookStatus> {
        let (idx, hook) = (at.ifindex, at.hook);
        let dev = ifname(idx);
        let mut hs = HookStatus {
            dev: dev.clone(),
            ifindex: idx,
            hook,
            tenant,
            chain: None,
            slot: None,
            links: vec![],
        };
        if slot != NO_CHAIN {
            if let Some(v) = self.chains.lookup(&slot.to_ne_bytes(), MapFlags::ANY)? {
                let c = Chain::from_bytes(&v).ok_or_else(|| anyhow!("bad chain slot {slot}"))?;
                let spec = ChainSpec::from_abi(&c, &dev, hook);
                hs.chain = Some(spec.name.clone());
                hs.slot = Some(slot);
                for (i, l) in spec.links.iter().enumerate() {
                    let s = read_stats(&self.stats, slot, i as u32)?;
                    hs.links.push(LinkStatus {
                        link: l.to_string(),
                        runs: s.runs,
                        hits: s.hits,
                    });
                }
            }
        }
        Ok(hs)
    }

    /// Per-subflow metrics recorded by `record`.
    pub fn metrics(&self) -> Result<Vec<(abi::FlowKey, abi::Metrics)>> {
        Ok(self
            .metrics
            .entries()?
            .into_iter()
            .filter_map(|(fk, v)| abi::Metrics::from_bytes(&v).map(|m| (fk, m)))
            .collect())
    }

    /// Stream events to `f` until it returns false or `timeout` passes (None: forever).
    pub fn watch_events(
        &self,
        timeout: Option<Duration>,
        f: impl FnMut(Event) -> bool,
    ) -> Result<()> {
        watch(&self.events, timeout, f)
    }
}

pub(super) fn watch(
    events: &dyn MapCore,
    timeout: Option<Duration>,
    mut f: impl FnMut(Event) -> bool,
) -> Result<()> {
    use std::cell::Cell;
    use std::rc::Rc;
    let stop = Rc::new(Cell::new(false));
    let pending: Rc<std::cell::RefCell<Vec<Event>>> = Rc::default();
    let mut b = libbpf_rs::RingBufferBuilder::new();
    let p2 = pending.clone();
    b.add(events, move |data: &[u8]| {
        if let Some(e) = abi::RawEvent::from_bytes(data) {
            p2.borrow_mut().push(Event::from_raw(&e));
        }
        0
    })?;
    let rb = b.build()?;
    let start = Instant::now();
    while !stop.get() {
        rb.poll(Duration::from_millis(100))?;
        for e in pending.borrow_mut().drain(..) {
            if !f(e) {
                stop.set(true);
                break;
            }
        }
        if timeout.is_some_and(|t| start.elapsed() >= t) {
            break;
        }
    }
    Ok(())
}

pub(super) fn read_stats(stats: &dyn MapCore, slot: u32, pos: u32) -> Result<LinkStats> {
    let k = slot * abi::MAX_LINKS as u32 + pos;
    let mut s = LinkStats::default();
    if let Some(per) = stats.lookup_percpu(&k.to_ne_bytes(), MapFlags::ANY)? {
        for v in per {
            let x = LinkStats::from_bytes(&v).unwrap_or_default();
            s.runs += x.runs;
            s.hits += x.hits;
        }
    }
    Ok(s)
}
