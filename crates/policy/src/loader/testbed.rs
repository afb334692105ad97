//! The programs loaded for BPF_PROG_TEST_RUN ([`TestBed`]): the same object, not attached
//! and not pinned, for the program tests and the benchmark.

use super::attach::write_hook;
use super::chains::write_slot;
use super::object::{load_object, load_object_bytes, map};
use super::state::{read_stats, watch};
use crate::abi::{self, Chain, HookKey, LinkStats, Pod, NO_CHAIN};
use crate::events::Event;
use crate::spec::{ChainSpec, Hook};
use anyhow::{anyhow, Context, Result};
use libbpf_rs::{MapCore, MapFlags, Object};
use std::time::Duration;

/// The programs loaded for BPF_PROG_TEST_RUN: not attached, not pinned. Chains are set for
/// the loopback interface (index 1), which is the device test runs see.
pub struct TestBed {
    obj: Object,
    next_slot: u32,
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
        Ok(TestBed {
            obj: load_object(None)?,
            next_slot: 0,
        })
    }

    /// A bed with another build of the programs (an object file of `bpf/`, as build.rs
    /// makes it): for comparing two builds side by side (`examples/ab.rs`).
    pub fn with_object(bytes: &[u8]) -> Result<TestBed> {
        Ok(TestBed {
            obj: load_object_bytes(bytes, None)?,
            next_slot: 0,
        })
    }

    fn m(&self, name: &str) -> Result<libbpf_rs::Map<'_>> {
        map(&self.obj, name)
    }

    /// The loopback device's hook gets `slot` (an earlier build loaded by `with_object`, to
    /// be compared with this one, may have no `hook_slots`: it reads `hooks` only).
    fn write_hook(&self, hook: Hook, slot: u32) -> Result<()> {
        let fast = self.m("hook_slots").ok();
        write_hook(
            &self.m("hooks")?,
            fast.as_ref().map(|m| m as &dyn MapCore),
            1,
            hook.abi(),
            slot,
            MapFlags::ANY,
        )
    }

    /// Put `chain` on the loopback device's `hook` (a new slot each time; swapped in).
    pub fn set_chain(&mut self, hook: Hook, chain: &ChainSpec) -> Result<()> {
        let slot = self.next_slot % abi::MAX_CHAINS;
        self.next_slot += 1;
        write_slot(
            &self.m("chains")?,
            &self.m("link_stats")?,
            slot,
            &chain.to_abi(self.next_slot),
        )?;
        self.write_hook(hook, slot)
    }

    /// Attached, no chain.
    pub fn clear_chain(&mut self, hook: Hook) -> Result<()> {
        self.write_hook(hook, NO_CHAIN)
    }

    /// Run the dispatcher of `hook` on a frame `repeat` times.
    pub fn run(&self, hook: Hook, frame: &[u8], repeat: u32) -> Result<RunOut> {
        let name = match hook {
            Hook::Ingress => "xdp_nena",
            Hook::Egress => "tc_nena",
        };
        let p = self
            .obj
            .progs_mut()
            .find(|p| p.name() == name)
            .ok_or_else(|| anyhow!("no {name}"))?;
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
        let o = p.test_run(input).context("BPF_PROG_TEST_RUN")?;
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
        let hk = HookKey {
            ifindex: 1,
            hook: hook.abi(),
        };
        let Some(v) = self.m("hooks")?.lookup(hk.as_bytes(), MapFlags::ANY)? else {
            return Ok(vec![]);
        };
        let slot = u32::from_bytes(&v).unwrap_or(NO_CHAIN);
        if slot == NO_CHAIN {
            return Ok(vec![]);
        }
        let c = Chain::from_bytes(
            &self
                .m("chains")?
                .lookup(&slot.to_ne_bytes(), MapFlags::ANY)?
                .unwrap_or_default(),
        )
        .ok_or_else(|| anyhow!("no chain"))?;
        (0..c.len)
            .map(|i| read_stats(&self.m("link_stats")?, slot, i))
            .collect()
    }

    /// Events waiting in the ring buffer (does not block).
    pub fn drain_events(&self) -> Result<Vec<Event>> {
        let mut v = vec![];
        watch(&self.m("events")?, Some(Duration::ZERO), |e| {
            v.push(e);
            true
        })?;
        Ok(v)
    }

    /// The value of `flow` in the per-flow map `base` (`base4` or `base6`, by its family).
    fn flow_value<T: Pod>(&self, base: &str, flow: &abi::FlowKey) -> Result<Option<T>> {
        let (suffix, k) = flow.map_key();
        Ok(self
            .m(&format!("{base}{suffix}"))?
            .lookup(&k, MapFlags::ANY)?
            .and_then(|v| T::from_bytes(&v)))
    }

    /// Kept ADD_ADDR options of a flow.
    pub fn kept(&self, flow: &abi::FlowKey) -> Result<Option<abi::Kept>> {
        self.flow_value("kept", flow)
    }

    /// Metrics recorded for a flow.
    pub fn metrics(&self, flow: &abi::FlowKey) -> Result<Option<abi::Metrics>> {
        self.flow_value("metrics", flow)
    }

    /// Set the window scale the dispatcher would have learnt from a SYN of `flow`.
    pub fn set_wscale(&self, flow: &abi::FlowKey, shift: u8) -> Result<()> {
        // offered, not yet settled by a SYN/ACK
        let (suffix, k) = flow.map_key();
        self.m(&format!("wscale{suffix}"))?
            .update(&k, &[shift, 0xfe], MapFlags::ANY)?;
        Ok(())
    }
}
