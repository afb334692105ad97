//! The lab's active attacker (`nena lab tamper`, tests): a TC program (`bpf/attack/tamper.bpf.c`)
//! that flips one payload byte of one data segment of one TCP flow and fixes the TCP
//! checksum, so that the change reaches the protocol above TCP. Attached to an interface of
//! the current network namespace, at ingress or egress; nothing is pinned: the filter keeps
//! the program and its map alive, and [`remove`] (or deleting the namespace, as
//! `nena lab down` does) ends both. [`show`] finds the map again through the filter.

use crate::skel::tamper::{types, TamperSkel, TamperSkelBuilder};
use anyhow::{anyhow, bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle, OpenObject};
use serde::Serialize;
use std::mem::{size_of, MaybeUninit};
use std::net::IpAddr;
use std::os::fd::AsFd;
use zerocopy::{FromBytes, IntoBytes};

/// tc filter handle and priority of the tamper program (apart from the policy dispatcher's).
const FILTER: crate::tc::Filter = crate::tc::Filter {
    handle: 0x7a3e,
    priority: 0x7a3e,
};

/// `struct tamper` of the C program, the value of its map: the configuration user space
/// writes and what the program did. Its layout is checked against the skeleton's
/// `types::tamper` (from the object's BTF) when this crate compiles.
#[repr(C)]
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::Immutable,
    zerocopy::KnownLayout,
)]
struct Tamper {
    port: u16,
    match_dst: u8,
    mask: u8,
    skip: u32,
    offset: u32,
    owns_clsact: u32,
    have_flow: u8,
    v6: u8,
    /// Network order.
    sport: u16,
    dport: u16,
    pad0: [u8; 2],
    saddr: [u8; 16],
    daddr: [u8; 16],
    isn: u32,
    fired: u32,
    target_seq: u32,
    rel: u32,
    altered: u64,
    seen: u64,
    old_byte: u8,
    new_byte: u8,
    pad: [u8; 6],
}
crate::chains::abi::same_layout!(Tamper = types::tamper; port => port, match_dst => match_dst,
    mask => mask, skip => skip, offset => offset, owns_clsact => owns_clsact,
    have_flow => have_flow, v6 => v6, sport => sport, dport => dport, pad0 => __pad_22,
    saddr => saddr, daddr => daddr, isn => isn, fired => fired, target_seq => target_seq,
    rel => rel, altered => altered, seen => seen, old_byte => old_byte,
    new_byte => new_byte, pad => pad);
const VALUE_LEN: usize = size_of::<Tamper>();

/// Open and load the tamper object through its skeleton, into `storage`.
fn load(storage: &mut MaybeUninit<OpenObject>) -> Result<TamperSkel<'_>> {
    let mut b = TamperSkelBuilder::default();
    b.obj_builder
        .name("nena_tamper")
        .context("naming the BPF object")?;
    b.open(storage)
        .context("opening the tamper object")?
        .load()
        .context("loading the tamper program (verifier)")
}

/// What to alter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TamperConfig {
    /// The TCP port to match.
    pub port: u16,
    /// Match it as the destination port (packets toward the server) or as the source port.
    pub match_dst: bool,
    /// Payload bytes of the flow that pass untouched first.
    pub skip: u32,
    /// Which byte of the chosen segment (its last one if the segment is shorter).
    pub offset: u32,
    /// XOR mask of the altered byte (not 0).
    pub mask: u8,
}

/// What the program did (read from its map).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TamperRecord {
    /// `src:port -> dst:port` of the watched flow, once its SYN passed.
    pub flow: Option<String>,
    /// Whether a byte was altered.
    pub fired: bool,
    /// TCP sequence number of the altered byte.
    pub seq: u32,
    /// Its offset from the flow's first payload byte.
    pub offset_in_flow: u32,
    pub old_byte: u8,
    pub new_byte: u8,
    /// Segments altered: 1, plus retransmissions of the altered byte.
    pub altered: u64,
    /// Data segments of the flow seen.
    pub seen: u64,
}

fn value(cfg: &TamperConfig, owns_clsact: bool) -> [u8; VALUE_LEN] {
    let t = Tamper {
        port: cfg.port,
        match_dst: cfg.match_dst as u8,
        mask: cfg.mask,
        skip: cfg.skip,
        offset: cfg.offset,
        owns_clsact: owns_clsact as u32,
        ..Default::default()
    };
    let mut v = [0u8; VALUE_LEN];
    v.copy_from_slice(t.as_bytes());
    v
}

fn record(v: &[u8]) -> Result<(TamperRecord, bool)> {
    let t = Tamper::read_from_bytes(v).map_err(|_| {
        anyhow!(
            "the tamper map holds {} bytes, expected {VALUE_LEN}",
            v.len()
        )
    })?;
    let addr = |a: [u8; 16]| -> IpAddr {
        if t.v6 == 1 {
            IpAddr::from(a)
        } else {
            IpAddr::from([a[0], a[1], a[2], a[3]])
        }
    };
    let flow = (t.have_flow == 1).then(|| {
        let fmt = |a: IpAddr, p: u16| match a {
            IpAddr::V6(_) => format!("[{a}]:{p}"),
            IpAddr::V4(_) => format!("{a}:{p}"),
        };
        format!(
            "{} -> {}",
            fmt(addr(t.saddr), u16::from_be(t.sport)),
            fmt(addr(t.daddr), u16::from_be(t.dport))
        )
    });
    Ok((
        TamperRecord {
            flow,
            fired: t.fired == 1,
            seq: t.target_seq,
            offset_in_flow: t.rel,
            old_byte: t.old_byte,
            new_byte: t.new_byte,
            altered: t.altered,
            seen: t.seen,
        },
        t.owns_clsact == 1,
    ))
}

/// Loads the program with `cfg` and attaches it to `dev` (current network namespace), at
/// ingress or egress, replacing an earlier tamper there.
pub fn attach(dev: &str, ingress: bool, cfg: &TamperConfig) -> Result<()> {
    if cfg.mask == 0 {
        bail!("the mask must not be 0 (it would change nothing)");
    }
    let idx = crate::chains::loader::ifindex(dev)?;
    let _lock = crate::tc::lock()?;
    // Replacing an earlier tamper: keep its note of who created the clsact qdisc.
    let earlier_owned = attached_map(dev, ingress)
        .ok()
        .flatten()
        .and_then(|m| m.lookup(&0u32.to_ne_bytes(), MapFlags::ANY).ok().flatten())
        .and_then(|v| record(&v).ok())
        .is_some_and(|(_, owned)| owned);
    let mut storage = MaybeUninit::uninit();
    let skel = load(&mut storage)?;
    let created = earlier_owned || !crate::tc::has_clsact(idx).unwrap_or(true);
    skel.maps
        .tamper
        .update(&0u32.to_ne_bytes(), &value(cfg, created), MapFlags::ANY)
        .context("configuring the tamper program")?;
    let mut h = FILTER.hook(skel.progs.tc_tamper.as_fd(), idx, ingress);
    let _ = h.create(); // the clsact qdisc, if it is not there yet
    h.attach()
        .with_context(|| format!("attaching the tamper program to {dev}"))?;
    Ok(())
}

/// Whether MPTCP's DSS checksum is on in the current network namespace (with it, MPTCP
/// itself notices an altered byte: run this in the namespaces of the MPTCP ends).
pub fn mptcp_checksum_enabled() -> bool {
    std::fs::read_to_string("/proc/sys/net/mptcp/checksum_enabled").is_ok_and(|s| s.trim() == "1")
}

/// The id of the tamper program attached to `dev` (None: none).
pub fn attached_prog_id(dev: &str, ingress: bool) -> Result<Option<u32>> {
    let idx = crate::chains::loader::ifindex(dev)?;
    FILTER.query(idx, ingress)
}

/// The map of the tamper program attached to `dev` (None: nothing attached there).
fn attached_map(dev: &str, ingress: bool) -> Result<Option<MapHandle>> {
    let idx = crate::chains::loader::ifindex(dev)?;
    FILTER.attached_map(dev, idx, ingress, "tc_tamper", "tamper")
}

/// What the tamper program attached to `dev` did (None: none attached).
pub fn show(dev: &str, ingress: bool) -> Result<Option<TamperRecord>> {
    let Some(m) = attached_map(dev, ingress)? else {
        return Ok(None);
    };
    let v = m
        .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)?
        .ok_or_else(|| anyhow!("the tamper map is empty"))?;
    Ok(Some(record(&v)?.0))
}

/// Detaches the tamper program from `dev` (and the clsact qdisc if attaching made it and
/// nothing else uses it). Returns the last record, or None if nothing was attached.
pub fn remove(dev: &str, ingress: bool) -> Result<Option<TamperRecord>> {
    let _lock = crate::tc::lock()?;
    let Some(m) = attached_map(dev, ingress)? else {
        return Ok(None);
    };
    let (rec, owns) = match m.lookup(&0u32.to_ne_bytes(), MapFlags::ANY)? {
        Some(v) => {
            let (r, o) = record(&v)?;
            (Some(r), o)
        }
        None => (None, false),
    };
    let idx = crate::chains::loader::ifindex(dev)?;
    FILTER
        .detach(idx, ingress)
        .with_context(|| format!("detaching the tamper program from {dev}"))?;
    if owns {
        crate::tc::remove_clsact_if_empty(idx)?;
    }
    Ok(rec)
}

/// The program loaded for BPF_PROG_TEST_RUN (tests): not attached, nothing pinned.
pub struct TamperBed {
    /// The skeleton borrows the storage of its object handle (one pointer), which is leaked
    /// so that the skeleton can live in the bed; the object is closed when the bed is dropped.
    skel: Box<TamperSkel<'static>>,
}

impl TamperBed {
    /// Loads the program with `cfg`.
    pub fn new(cfg: &TamperConfig) -> Result<TamperBed> {
        let storage: &'static mut MaybeUninit<_> = Box::leak(Box::new(MaybeUninit::uninit()));
        let skel = load(storage)?;
        skel.maps
            .tamper
            .update(&0u32.to_ne_bytes(), &value(cfg, false), MapFlags::ANY)?;
        Ok(TamperBed {
            skel: Box::new(skel),
        })
    }

    /// Runs the program on one Ethernet frame; returns the frame as it leaves.
    pub fn run(&self, frame: &[u8]) -> Result<Vec<u8>> {
        let mut out = vec![0u8; frame.len() + 64];
        let input = libbpf_rs::ProgramInput {
            data_in: Some(frame),
            data_out: Some(&mut out),
            repeat: 1,
            ..Default::default()
        };
        let o = self
            .skel
            .progs
            .tc_tamper
            .test_run(input)
            .context("BPF_PROG_TEST_RUN")?;
        if o.return_value != 0 {
            bail!(
                "the tamper program returned {} (not TC_ACT_OK)",
                o.return_value
            );
        }
        Ok(o.data.map(|d| d.to_vec()).unwrap_or_default())
    }

    /// What it did so far.
    pub fn record(&self) -> Result<TamperRecord> {
        let v = self
            .skel
            .maps
            .tamper
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)?
            .ok_or_else(|| anyhow!("the tamper map is empty"))?;
        Ok(record(&v)?.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_layout_round_trips() {
        let cfg = TamperConfig {
            port: 4433,
            match_dst: true,
            skip: 100_000,
            offset: 7,
            mask: 0x40,
        };
        let mut v = value(&cfg, true);
        // What the program writes: a flow, and the altered byte.
        v[16] = 1;
        v[18..20].copy_from_slice(&40001u16.to_be_bytes());
        v[20..22].copy_from_slice(&4433u16.to_be_bytes());
        v[24..28].copy_from_slice(&[198, 18, 2, 2]);
        v[40..44].copy_from_slice(&[198, 18, 3, 2]);
        v[60..64].copy_from_slice(&1u32.to_ne_bytes());
        v[88] = 0x61;
        v[89] = 0x21;
        v[64..68].copy_from_slice(&12345u32.to_ne_bytes());
        v[68..72].copy_from_slice(&100_007u32.to_ne_bytes());
        v[72..80].copy_from_slice(&2u64.to_ne_bytes());
        let (r, owns) = record(&v).unwrap();
        assert!(owns);
        assert_eq!(
            r,
            TamperRecord {
                flow: Some("198.18.2.2:40001 -> 198.18.3.2:4433".into()),
                fired: true,
                seq: 12345,
                offset_in_flow: 100_007,
                old_byte: 0x61,
                new_byte: 0x21,
                altered: 2,
                seen: 0,
            }
        );
        assert!(record(&v[..10]).is_err());
    }
}
