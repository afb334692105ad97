//! The programs loaded for BPF_PROG_TEST_RUN ([`TestBed`]): the same object, not attached
//! and not pinned, for the program tests and the benchmark.

use super::attach::write_hook;
use super::commit::write_slot;
use super::keys::{DevHook, TenantHook};
use super::object::{load_object_bytes, load_skel, map};
use super::state::{read_stats, watch, FlowMaps};
use crate::chains::abi::{self, Chain, LinkStats, Pod, NO_CHAIN};
use crate::chains::events::Event;
use crate::chains::spec::{ChainSpec, Hook};
use crate::skel::nena::NenaSkel;
use anyhow::{anyhow, Context, Result};
use libbpf_rs::{MapCore, MapFlags, MapHandle, Object};
use std::mem::MaybeUninit;
use std::time::Duration;

/// The programs loaded for BPF_PROG_TEST_RUN: not attached, not pinned. Chains are set for
/// the loopback interface (index 1), which is the device test runs see.
pub struct TestBed {
    loaded: Loaded,
    maps: BedMaps,
    next_slot: u32,
}

/// What holds the programs loaded.
enum Loaded {
    /// This build, through its skeleton. The skeleton borrows the storage of its object
    /// handle (one pointer), which is leaked so that the skeleton can live in the bed; the
    /// BPF object itself is closed when the bed is dropped.
    Skel(Box<NenaSkel<'static>>),
    /// Another build (`with_object`), its maps and programs found by name.
    Other(Object),
}

/// The maps the bed reads and writes, from the skeleton's fields or (another build) by name.
struct BedMaps {
    chains: MapHandle,
    hooks: MapHandle,
    /// None: an earlier build without the `hook_slots` mirror (it reads `hooks` only).
    hook_slots: Option<MapHandle>,
    stats: MapHandle,
    events: MapHandle,
    kept: FlowMaps,
    metrics: FlowMaps,
    flows: FlowMaps,
    /// None: an earlier build without tenants.
    tenants: Option<BedTenants>,
}

/// The tenant maps of the bed.
struct BedTenants {
    cfg: MapHandle,
    hooks: MapHandle,
    flows: FlowMaps,
}

fn handle<T: std::fmt::Debug>(m: &libbpf_rs::MapImpl<'_, T>) -> Result<MapHandle> {
    MapHandle::try_from(m).context("duplicating a map's fd")
}

/// The outcome of one test run.
#[derive(Debug, Clone)]
pub struct RunOut {
    pub ret: u32,
    pub data: Vec<u8>,
    /// Average time per run, as the kernel measured it.
    pub ns: f64,
}

impl TestBed {
    pub fn new() -> Result<TestBed> {
        let storage: &'static mut MaybeUninit<_> = Box::leak(Box::new(MaybeUninit::uninit()));
        let skel = load_skel(storage, None)?;
        let m = &skel.maps;
        let flow =
            |v4, v6| -> Result<FlowMaps> { Ok(FlowMaps::from_handles(handle(v4)?, handle(v6)?)) };
        let maps = BedMaps {
            chains: handle(&m.chains)?,
            hooks: handle(&m.hooks)?,
            hook_slots: Some(handle(&m.hook_slots)?),
            stats: handle(&m.link_stats)?,
            events: handle(&m.events)?,
            kept: flow(&m.kept4, &m.kept6)?,
            metrics: flow(&m.metrics4, &m.metrics6)?,
            flows: flow(&m.flows4, &m.flows6)?,
            tenants: Some(BedTenants {
                cfg: handle(&m.tenant_cfg)?,
                hooks: handle(&m.tenant_hooks)?,
                flows: flow(&m.tenant_flows4, &m.tenant_flows6)?,
            }),
        };
        Ok(TestBed {
            loaded: Loaded::Skel(Box::new(skel)),
            maps,
            next_slot: 0,
        })
    }

    /// A bed with another build of the programs (an object file of `bpf/`, as build.rs
    /// makes it): for comparing two builds side by side (`examples/ab.rs`).
    pub fn with_object(bytes: &[u8]) -> Result<TestBed> {
        let obj = load_object_bytes(bytes)?;
        let h = |name: &str| handle(&map(&obj, name)?);
        let flow = |base: &str| -> Result<FlowMaps> {
            Ok(FlowMaps::from_handles(
                h(&format!("{base}4"))?,
                h(&format!("{base}6"))?,
            ))
        };
        let maps = BedMaps {
            chains: h("chains")?,
            hooks: h("hooks")?,
            hook_slots: h("hook_slots").ok(),
            stats: h("link_stats")?,
            events: h("events")?,
            kept: flow("kept")?,
            metrics: flow("metrics")?,
            // `wscale`: an earlier build, before set_backup's state joined the window scale's
            flows: flow("flows").or_else(|_| flow("wscale"))?,
            tenants: None,
        };
        Ok(TestBed {
            loaded: Loaded::Other(obj),
            maps,
            next_slot: 0,
        })
    }

    /// The loopback device's hook gets `slot`.
    fn write_hook(&self, hook: Hook, slot: u32) -> Result<()> {
        write_hook(
            &self.maps.hooks,
            self.maps.hook_slots.as_ref().map(|m| m as &dyn MapCore),
            DevHook::new(1, hook),
            slot,
            MapFlags::ANY,
        )?;
        Ok(())
    }

    /// Put `chain` on the loopback device's `hook` (a new slot each time; swapped in).
    pub fn set_chain(&mut self, hook: Hook, chain: &ChainSpec) -> Result<()> {
        let slot = self.next_slot % abi::MAX_CHAINS;
        self.next_slot += 1;
        write_slot(
            &self.maps.chains,
            &self.maps.stats,
            slot,
            &chain.to_abi(self.next_slot),
        )?;
        self.write_hook(hook, slot)
    }

    /// Put `chain` on the loopback device's `hook` for tenant `tenant` (1..16), and turn
    /// tenancy on (as if `tenant` tenants were defined).
    pub fn set_tenant_chain(&mut self, hook: Hook, tenant: u32, chain: &ChainSpec) -> Result<()> {
        let t = self
            .maps
            .tenants
            .as_ref()
            .ok_or_else(|| anyhow!("no tenants in this build"))?;
        let slot = self.next_slot % abi::MAX_CHAINS;
        self.next_slot += 1;
        write_slot(
            &self.maps.chains,
            &self.maps.stats,
            slot,
            &chain.to_abi(self.next_slot),
        )?;
        t.cfg
            .update(&0u32.to_ne_bytes(), &tenant.to_ne_bytes(), MapFlags::ANY)?;
        let k = TenantHook::new(DevHook::new(1, hook), tenant).to_abi();
        t.hooks
            .update(k.as_bytes(), &slot.to_ne_bytes(), MapFlags::ANY)?;
        Ok(())
    }

    /// The tenant the programs have for `flow` (as it leaves: egress direction), as if its
    /// first packet had left from that tenant's socket.
    pub fn set_flow_tenant(&self, flow: &abi::FlowKey, tenant: u32) -> Result<()> {
        let t = self
            .maps
            .tenants
            .as_ref()
            .ok_or_else(|| anyhow!("no tenants in this build"))?;
        t.flows.set(flow, &tenant.to_ne_bytes())
    }

    /// The tenant cached for `flow` (egress direction), if any.
    pub fn flow_tenant(&self, flow: &abi::FlowKey) -> Result<Option<u32>> {
        let t = self
            .maps
            .tenants
            .as_ref()
            .ok_or_else(|| anyhow!("no tenants in this build"))?;
        Ok(t.flows.get(flow)?.and_then(|v| u32::from_bytes(&v)))
    }

    /// Counters of the links of the chain in `slot`.
    pub fn slot_stats(&self, slot: u32) -> Result<Vec<LinkStats>> {
        let c = Chain::from_bytes(
            &self
                .maps
                .chains
                .lookup(&slot.to_ne_bytes(), MapFlags::ANY)?
                .unwrap_or_default(),
        )
        .ok_or_else(|| anyhow!("no chain"))?;
        (0..c.len)
            .map(|i| read_stats(&self.maps.stats, slot, i))
            .collect()
    }

    /// The slot the last `set_chain` / `set_tenant_chain` wrote.
    pub fn last_slot(&self) -> u32 {
        (self.next_slot + abi::MAX_CHAINS - 1) % abi::MAX_CHAINS
    }

    /// Attached, no chain.
    pub fn clear_chain(&mut self, hook: Hook) -> Result<()> {
        self.write_hook(hook, NO_CHAIN)
    }

    /// Run the dispatcher of `hook` on a frame `repeat` times.
    pub fn run(&self, hook: Hook, frame: &[u8], repeat: u32) -> Result<RunOut> {
        let mut out = vec![0u8; frame.len() + 256];
        let mut input = libbpf_rs::ProgramInput {
            data_in: Some(frame),
            data_out: Some(&mut out),
            repeat,
            ..Default::default()
        };
        // XDP: pass a context so that the kernel reports where the data starts after the
        // metadata the dispatcher adds (the output begins with the metadata).
        let mut ctx_in = [0u8; 24];
        let mut ctx_out = [0u8; 24];
        if hook == Hook::Ingress {
            ctx_in[4..8].copy_from_slice(&(frame.len() as u32).to_ne_bytes());
            input.context_in = Some(&mut ctx_in);
            input.context_out = Some(&mut ctx_out);
        }
        let o = match &self.loaded {
            Loaded::Skel(s) => match hook {
                Hook::Ingress => s.progs.xdp_nena.test_run(input),
                Hook::Egress => s.progs.tc_nena.test_run(input),
            },
            Loaded::Other(obj) => {
                let name = match hook {
                    Hook::Ingress => "xdp_nena",
                    Hook::Egress => "tc_nena",
                };
                obj.progs_mut()
                    .find(|p| p.name() == name)
                    .ok_or_else(|| anyhow!("no {name}"))?
                    .test_run(input)
            }
        }
        .context("BPF_PROG_TEST_RUN")?;
        let mut data = o.data.map(|d| d.to_vec()).unwrap_or_default();
        if hook == Hook::Ingress {
            let meta = o
                .context
                .map(|c| u32::from_ne_bytes(c[0..4].try_into().unwrap()) as usize)
                .unwrap_or(0);
            data.drain(..meta.min(data.len()));
        }
        Ok(RunOut {
            ret: o.return_value,
            data,
            ns: o.duration.as_nanos() as f64,
        })
    }

    /// Counters of the links of the chain on `hook` (runs, hits per link).
    pub fn stats(&self, hook: Hook) -> Result<Vec<LinkStats>> {
        let hk = DevHook::new(1, hook).to_abi();
        let Some(v) = self.maps.hooks.lookup(hk.as_bytes(), MapFlags::ANY)? else {
            return Ok(vec![]);
        };
        let slot = u32::from_bytes(&v).unwrap_or(NO_CHAIN);
        if slot == NO_CHAIN {
            return Ok(vec![]);
        }
        let c = Chain::from_bytes(
            &self
                .maps
                .chains
                .lookup(&slot.to_ne_bytes(), MapFlags::ANY)?
                .unwrap_or_default(),
        )
        .ok_or_else(|| anyhow!("no chain"))?;
        (0..c.len)
            .map(|i| read_stats(&self.maps.stats, slot, i))
            .collect()
    }

    /// Events waiting in the ring buffer (does not block).
    pub fn drain_events(&self) -> Result<Vec<Event>> {
        let mut v = vec![];
        watch(&self.maps.events, Some(Duration::ZERO), |e| {
            v.push(e);
            true
        })?;
        Ok(v)
    }

    /// Kept ADD_ADDR options of a flow.
    pub fn kept(&self, flow: &abi::FlowKey) -> Result<Option<abi::Kept>> {
        Ok(self
            .maps
            .kept
            .get(flow)?
            .and_then(|v| abi::Kept::from_bytes(&v)))
    }

    /// Metrics recorded for a flow.
    pub fn metrics(&self, flow: &abi::FlowKey) -> Result<Option<abi::Metrics>> {
        Ok(self
            .maps
            .metrics
            .get(flow)?
            .and_then(|v| abi::Metrics::from_bytes(&v)))
    }

    /// Set the window scale the dispatcher would have learnt from a SYN of `flow` (and no
    /// MP_PRIO sent, as after a SYN).
    pub fn set_wscale(&self, flow: &abi::FlowKey, shift: u8) -> Result<()> {
        // offered, not yet settled by a SYN/ACK; an earlier build's entry had only these two
        let v = [shift, 0xfe, 0, 0];
        let n = self.maps.flows.value_size().min(v.len());
        self.maps.flows.set(flow, &v[..n])
    }
}
