//! The BPF object and its pins: open, reuse the maps pinned by an earlier load, load (the
//! verifier runs here), pin the rest, fill the jump tables with the actor programs.

use super::host::pin_name;
use crate::abi::Prog;
use anyhow::{anyhow, Context, Result};
use libbpf_rs::{MapCore, MapFlags, Object, ObjectBuilder};
use std::os::fd::AsFd;
use std::path::Path;

/// Open and load the object. With `pins`, maps already pinned there are reused and the
/// others pinned there after loading. The jump tables are filled either way.
pub(super) fn load_object(pins: Option<&Path>) -> Result<Object> {
    load_object_bytes(crate::BPF_OBJECT, pins)
}

pub(super) fn load_object_bytes(bytes: &[u8], pins: Option<&Path>) -> Result<Object> {
    let mut b = ObjectBuilder::default();
    b.name("nena").context("naming the BPF object")?;
    let mut open = b.open_memory(bytes).context("opening the BPF object")?;
    if let Some(dir) = pins {
        for mut m in open.maps_mut() {
            let p = dir.join(pin_name(&m.name().to_string_lossy()));
            if p.exists() {
                m.reuse_pinned_map(&p).with_context(|| {
                    format!("reusing {} (left by another nena version? run `nena policy detach` on every device)", p.display())
                })?;
            }
        }
    }
    let mut obj = open.load().context("loading the BPF programs (verifier)")?;
    if let Some(dir) = pins {
        for mut m in obj.maps_mut() {
            let p = dir.join(pin_name(&m.name().to_string_lossy()));
            if !p.exists() {
                m.pin(&p)
                    .with_context(|| format!("pinning {}", p.display()))?;
            }
        }
    }
    fill_jumps(&obj)?;
    Ok(obj)
}

pub(super) fn map<'a>(obj: &'a Object, name: &str) -> Result<libbpf_rs::Map<'a>> {
    obj.maps()
        .find(|m| m.name() == name)
        .ok_or_else(|| anyhow!("map {name} missing from the object"))
}

pub(super) fn prog<'a>(obj: &'a Object, name: &str) -> Result<libbpf_rs::Program<'a>> {
    obj.progs()
        .find(|p| p.name() == name)
        .ok_or_else(|| anyhow!("program {name} missing from the object"))
}

fn fill_jumps(obj: &Object) -> Result<()> {
    for (table, prefix) in [("jmp_xdp", "xdp_"), ("jmp_tc", "tc_")] {
        let t = map(obj, table)?;
        for pr in Prog::ALL {
            let p = match prog(obj, &format!("{prefix}{pr}")) {
                Ok(p) => p,
                // selectors run inline (bpf/chain.h); only an earlier build, loaded to be
                // compared with this one (`examples/ab.rs`), has programs for them
                Err(_) if !pr.is_actor() => continue,
                Err(e) => return Err(e),
            };
            let fd = p.as_fd();
            use std::os::fd::AsRawFd;
            let v = (fd.as_raw_fd() as u32).to_ne_bytes();
            let i = pr.index() as u32;
            t.update(&i.to_ne_bytes(), &v, MapFlags::ANY)
                .with_context(|| format!("filling {table}[{i}] ({pr})"))?;
        }
    }
    Ok(())
}
