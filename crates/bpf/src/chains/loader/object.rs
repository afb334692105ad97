//! The BPF object and its pins: open, reuse the maps pinned by an earlier load, load (the
//! verifier runs here), pin the rest, fill the jump tables with the actor programs.
//!
//! This build's object is loaded through its libbpf-cargo skeleton ([`load_skel`]): the
//! dispatchers, the actors and the jump tables are typed fields of it. Another build of
//! `bpf/` (an earlier object, compared with this one by `examples/ab.rs`) has no skeleton
//! here and is loaded by [`load_object_bytes`], which finds its maps and programs by name.

use super::host::pin_name;
use crate::chains::abi::Prog;
use crate::skel::nena::{NenaProgs, NenaSkel, NenaSkelBuilder};
use anyhow::{anyhow, Context, Result};
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, Object, ObjectBuilder, OpenObject, ProgramMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;

/// Open and load this build's object through its skeleton, into `storage` (the skeleton
/// borrows it for as long as it lives). With `pins`, maps already pinned there are reused
/// and the others pinned there after loading. The jump tables are filled either way.
pub(super) fn load_skel<'o>(
    storage: &'o mut MaybeUninit<OpenObject>,
    pins: Option<&Path>,
) -> Result<NenaSkel<'o>> {
    let mut b = NenaSkelBuilder::default();
    b.obj_builder
        .name("nena")
        .context("naming the BPF object")?;
    let mut open = b.open(storage).context("opening the BPF object")?;
    if let Some(dir) = pins {
        reuse_pins(open.open_object_mut(), dir)?;
    }
    let mut skel = open.load().context("loading the BPF programs (verifier)")?;
    if let Some(dir) = pins {
        pin_new(skel.object_mut(), dir)?;
    }
    for pr in Prog::ALL {
        let Some((xdp, tc)) = actor_progs(&skel.progs, pr) else {
            continue;
        };
        set_jump(&skel.maps.jmp_xdp, "jmp_xdp", pr, xdp)?;
        set_jump(&skel.maps.jmp_tc, "jmp_tc", pr, tc)?;
    }
    Ok(skel)
}

/// The XDP and TC programs of an actor (None for a selector: selectors run inline in the
/// dispatcher, bpf/chains/chain.h). Exhaustive over [`Prog`]: a new actor without its programs in
/// the skeleton does not compile.
pub(super) fn actor_progs<'a, 'o>(
    p: &'a NenaProgs<'o>,
    pr: Prog,
) -> Option<(&'a ProgramMut<'o>, &'a ProgramMut<'o>)> {
    Some(match pr {
        Prog::Subflow
        | Prog::IpPair
        | Prog::Src
        | Prog::Dst
        | Prog::Sequence
        | Prog::PacketType => return None,
        Prog::RateLimit => (&p.xdp_rate_limit, &p.tc_rate_limit),
        Prog::SetBackup => (&p.xdp_set_backup, &p.tc_set_backup),
        Prog::BlkSubflow => (&p.xdp_blk_subflow, &p.tc_blk_subflow),
        Prog::AddSubflow => (&p.xdp_add_subflow, &p.tc_add_subflow),
        Prog::GetConnect => (&p.xdp_get_connect, &p.tc_get_connect),
        Prog::GetSubflow => (&p.xdp_get_subflow, &p.tc_get_subflow),
        Prog::Record => (&p.xdp_record, &p.tc_record),
        Prog::Drop => (&p.xdp_drop, &p.tc_drop),
    })
}

/// Maps already pinned under `dir` are reused (the pinned state survives a reload).
fn reuse_pins(open: &mut OpenObject, dir: &Path) -> Result<()> {
    for mut m in open.maps_mut() {
        let p = dir.join(pin_name(&m.name().to_string_lossy()));
        if p.exists() {
            m.reuse_pinned_map(&p).with_context(|| {
                format!("reusing {} (left by another nena version? run `nena policy detach` on every device)", p.display())
            })?;
        }
    }
    Ok(())
}

/// The maps not pinned yet under `dir` are pinned there.
fn pin_new(obj: &mut Object, dir: &Path) -> Result<()> {
    for mut m in obj.maps_mut() {
        let p = dir.join(pin_name(&m.name().to_string_lossy()));
        if !p.exists() {
            m.pin(&p)
                .with_context(|| format!("pinning {}", p.display()))?;
        }
    }
    Ok(())
}

/// `table[pr]` = the program `p` (its fd; the kernel takes a reference).
fn set_jump(table: &dyn MapCore, name: &str, pr: Prog, p: &ProgramMut<'_>) -> Result<()> {
    let v = (p.as_fd().as_raw_fd() as u32).to_ne_bytes();
    let i = pr.index() as u32;
    table
        .update(&i.to_ne_bytes(), &v, MapFlags::ANY)
        .with_context(|| format!("filling {name}[{i}] ({pr})"))
}

/// Open and load another build of the programs (object bytes), without pins, finding its
/// maps and programs by name (it may differ from this build: no `hook_slots`, selector
/// programs): for comparing two builds side by side.
pub(super) fn load_object_bytes(bytes: &[u8]) -> Result<Object> {
    let mut b = ObjectBuilder::default();
    b.name("nena").context("naming the BPF object")?;
    let open = b.open_memory(bytes).context("opening the BPF object")?;
    let obj = open.load().context("loading the BPF programs (verifier)")?;
    for (table, prefix) in [("jmp_xdp", "xdp_"), ("jmp_tc", "tc_")] {
        let t = map(&obj, table)?;
        for pr in Prog::ALL {
            let Some(p) = obj.progs().find(|p| *p.name() == *format!("{prefix}{pr}")) else {
                // selectors run inline (bpf/chains/chain.h); only an earlier build has programs
                // for them
                if pr.is_actor() {
                    return Err(anyhow!("program {prefix}{pr} missing from the object"));
                }
                continue;
            };
            let v = (p.as_fd().as_raw_fd() as u32).to_ne_bytes();
            let i = pr.index() as u32;
            t.update(&i.to_ne_bytes(), &v, MapFlags::ANY)
                .with_context(|| format!("filling {table}[{i}] ({pr})"))?;
        }
    }
    Ok(obj)
}

/// A map of an object loaded by [`load_object_bytes`], by name.
pub(super) fn map<'a>(obj: &'a Object, name: &str) -> Result<libbpf_rs::Map<'a>> {
    obj.maps()
        .find(|m| m.name() == name)
        .ok_or_else(|| anyhow!("map {name} missing from the object"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every actor has an XDP and a TC program in the skeleton, and its jump table slots
    /// hold them after loading; no selector has one (needs root and BPF).
    #[test]
    #[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
    fn jump_tables_hold_every_actor_and_no_selector() {
        let mut storage = MaybeUninit::uninit();
        let skel = load_skel(&mut storage, None).expect("loading the object (root needed)");
        for pr in Prog::ALL {
            assert_eq!(
                actor_progs(&skel.progs, pr).is_some(),
                pr.is_actor(),
                "{pr}"
            );
            for t in [&skel.maps.jmp_xdp, &skel.maps.jmp_tc] {
                let v = t
                    .lookup(&(pr.index() as u32).to_ne_bytes(), MapFlags::ANY)
                    .unwrap();
                assert_eq!(v.is_some(), pr.is_actor(), "jump slot of {pr}");
            }
        }
    }
}
