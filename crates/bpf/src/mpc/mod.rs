//! The papers' negotiation for `--mode kato-mpc`: the loader of `bpf/mpc/mpc.bpf.c`, two TC
//! programs (egress and ingress of the interface that carries a connection's first subflow)
//! that mark the request on the client's SYN and the consent on the server's SYN-ACK (an
//! RFC 6994 experimental option, or for the kernel probe the MP_CAPABLE flag bit D), and
//! record per connection what was marked and both MPTCP keys as they cross in clear. The
//! client's program also confirms, on its third ACK, that it saw the consent; a server
//! records a connection only from the ACK that completes a handshake its kernel knows, in a
//! map no SYN flood can evict (`established`, bounded: full, its least recently made entry
//! goes; see `bpf/mpc/mpc.bpf.c`).
//!
//! [`MpcGuard::attach`] attaches the programs (or joins the ones another nena process in the
//! same network namespace attached there), registers a port, and on drop unregisters it and
//! detaches the programs when no port is left (and the clsact qdisc if it created it).
//! Nothing is pinned: the filters hold the programs and maps. [`MpcGuard::flow`] reads one
//! connection's record, by the 4-tuple of its first subflow as this host sees it, at once
//! (nothing here waits: the transport polls on its runtime's timer);
//! [`MpcGuard::forget`] deletes it once read, [`MpcGuard::sweep`] the server's records
//! nobody read within a minute. [`Established`] shows a server's table (its size, and for
//! tests, made-up entries that fill it). [`attachment::MpcAttachment`] holds the guards of
//! one command's interfaces with the thread that sweeps them.

pub mod attachment;
pub mod strip;

use crate::skel::mpc::{types, MpcSkel, MpcSkelBuilder};
use anyhow::{anyhow, bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle, OpenObject};
use std::mem::{size_of, MaybeUninit};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsFd;
use std::time::Duration;
use zerocopy::{FromBytes, IntoBytes};

/// tc filter handle and priority of the mpc programs (apart from the policy dispatcher's
/// and the tamper program's). A lower priority number runs first: 0x30 is ahead of the
/// policy dispatcher (0x4e), which ends the filter chain with its verdict, so the marks are
/// added (and the keys recorded) before a policy program sees the packet; the mpc programs
/// themselves return TC_ACT_UNSPEC, so the filters after them still run.
const FILTER: crate::tc::Filter = crate::tc::Filter {
    handle: 0x6d70,
    priority: 0x30,
};

/// Which end of a connection a port belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MpcRole {
    /// Connections *to* this port are ours (the port is the server's).
    Client,
    /// Connections *on* this port are ours (we listen on it).
    Server,
}

/// How the negotiation is marked on the SYN and SYN-ACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MpcMethod {
    /// An RFC 6994 experimental option (kind 253, ExID [`EXID`]) appended to the options.
    Option,
    /// MP_CAPABLE's unassigned flag bit D (RFC 8684 3.1). Linux refuses such an
    /// MP_CAPABLE (the connection falls back to TCP): kept for the test that shows it.
    FlagBit,
}

/// The ExID of nena's experimental TCP option (RFC 6994), "NE".
pub const EXID: u16 = 0x4e45;

const ROLE_CLIENT: u32 = 1;
const ROLE_SERVER: u32 = 2;
const METHOD_OPTION: u32 = 1;
const METHOD_FLAG: u32 = 2;
/// The `ports` entry of port 0 (never a real port here) remembers whether attaching created
/// the clsact qdisc (`users` = 1).
const META_PORT: u16 = 0;

const F_REQUESTED: u32 = 0x01;
const F_CONSENTED: u32 = 0x02;
const F_LOCAL_KEY: u32 = 0x04;
const F_REMOTE_KEY: u32 = 0x08;
const F_MPC_SYN: u32 = 0x10;
const F_MARK_FAILED: u32 = 0x40;
const F_CONFIRMED: u32 = 0x80;
/// `mpc_port.flags`: BPF_PROG_TEST_RUN only (no socket to check a completing ACK against).
const PORT_NO_VERIFY: u32 = 0x01;
/// A server's `established` entry not read after this long is a handshake nobody accepted.
pub const STALE: Duration = Duration::from_secs(60);

/// `struct mpc_port`.
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
struct Port {
    role: u32,
    method: u32,
    users: u32,
    flags: u32,
}
crate::chains::abi::same_layout!(Port = types::mpc_port; role => role, method => method,
    users => users, flags => flags);

/// `struct mpc_flow_key`.
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
struct FlowKey {
    v6: u8,
    pad: [u8; 3],
    /// Network order.
    lport: u16,
    rport: u16,
    laddr: [u8; 16],
    raddr: [u8; 16],
}
crate::chains::abi::same_layout!(FlowKey = types::mpc_flow_key; v6 => v6, pad => pad,
    lport => lport, rport => rport, laddr => laddr, raddr => raddr);

/// `struct mpc_flow`. No `Debug`: it holds both MPTCP keys.
#[repr(C)]
#[derive(
    Clone,
    Copy,
    Default,
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::Immutable,
    zerocopy::KnownLayout,
)]
struct Flow {
    flags: u32,
    pad: u32,
    local_key: [u8; 8],
    remote_key: [u8; 8],
    born: u64,
}
crate::chains::abi::same_layout!(Flow = types::mpc_flow; flags => flags, pad => pad,
    local_key => local_key, remote_key => remote_key, born => born);

/// What the programs recorded about one connection (its first subflow). `Debug` shows
/// whether each key was seen, never the key.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct FlowRecord {
    /// The SYN carried the request (the client added it, or the server saw it).
    pub requested: bool,
    /// The SYN-ACK carried the consent (the server added it, or the client saw it).
    pub consented: bool,
    /// The third ACK carried the confirmation that the client saw the consent (the client
    /// added it, or the server saw it on the ACK that completed the handshake).
    pub confirmed: bool,
    /// A mark could not be added (no option space, or a helper failed).
    pub mark_failed: bool,
    /// The SYN carried MP_CAPABLE.
    pub mptcp_syn: bool,
    /// This host's MPTCP key, as on the wire, once seen.
    pub local_key: Option<[u8; 8]>,
    /// The peer's MPTCP key, as on the wire, once seen.
    pub remote_key: Option<[u8; 8]>,
}

impl std::fmt::Debug for FlowRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let seen = |k: &Option<[u8; 8]>| k.map(|_| crate::chains::events::Redacted);
        f.debug_struct("FlowRecord")
            .field("requested", &self.requested)
            .field("consented", &self.consented)
            .field("confirmed", &self.confirmed)
            .field("mark_failed", &self.mark_failed)
            .field("mptcp_syn", &self.mptcp_syn)
            .field("local_key", &seen(&self.local_key))
            .field("remote_key", &seen(&self.remote_key))
            .finish()
    }
}

impl FlowRecord {
    fn from_flow(f: &Flow) -> FlowRecord {
        FlowRecord {
            requested: f.flags & F_REQUESTED != 0,
            consented: f.flags & F_CONSENTED != 0,
            confirmed: f.flags & F_CONFIRMED != 0,
            mark_failed: f.flags & F_MARK_FAILED != 0,
            mptcp_syn: f.flags & F_MPC_SYN != 0,
            local_key: (f.flags & F_LOCAL_KEY != 0).then_some(f.local_key),
            remote_key: (f.flags & F_REMOTE_KEY != 0).then_some(f.remote_key),
        }
    }

    /// Whether both keys are known.
    pub fn has_keys(&self) -> bool {
        self.local_key.is_some() && self.remote_key.is_some()
    }
}

/// A server's record of (local, remote): the completed handshake's (`established`) if there
/// is one, else the handshake's in progress (`flows`); a client's: its `flows` record.
fn read_flow(
    flows: &dyn MapCore,
    established: &dyn MapCore,
    local: SocketAddr,
    remote: SocketAddr,
) -> Result<Option<FlowRecord>> {
    let k = flow_key(local, remote)?;
    for m in [established, flows] {
        if let Some(f) = m
            .lookup(k.as_bytes(), MapFlags::ANY)?
            .and_then(|v| Flow::read_from_bytes(&v).ok())
        {
            return Ok(Some(FlowRecord::from_flow(&f)));
        }
    }
    Ok(None)
}

/// CLOCK_MONOTONIC in ns (bpf_ktime_get_ns's clock).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn flow_key(local: SocketAddr, remote: SocketAddr) -> Result<FlowKey> {
    let addr = |a: IpAddr| -> [u8; 16] {
        match a {
            IpAddr::V4(v) => {
                let mut b = [0u8; 16];
                b[..4].copy_from_slice(&v.octets());
                b
            }
            IpAddr::V6(v) => match v.to_ipv4_mapped() {
                Some(v4) => addr4(v4),
                None => v.octets(),
            },
        }
    };
    let v6 = |a: IpAddr| match a {
        IpAddr::V4(_) => false,
        IpAddr::V6(v) => v.to_ipv4_mapped().is_none(),
    };
    if v6(local.ip()) != v6(remote.ip()) {
        bail!("{local} and {remote} are not of one address family");
    }
    Ok(FlowKey {
        v6: v6(local.ip()) as u8,
        pad: [0; 3],
        lport: local.port().to_be(),
        rport: remote.port().to_be(),
        laddr: addr(local.ip()),
        raddr: addr(remote.ip()),
    })
}

fn addr4(v: std::net::Ipv4Addr) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..4].copy_from_slice(&v.octets());
    b
}

/// Open and load the object through its skeleton, into `storage`.
pub(crate) fn load(storage: &mut MaybeUninit<OpenObject>) -> Result<MpcSkel<'_>> {
    let mut b = MpcSkelBuilder::default();
    b.obj_builder
        .name("nena_mpc")
        .context("naming the BPF object")?;
    b.open(storage)
        .context("opening the mpc object")?
        .load()
        .context("loading the mpc programs (verifier)")
}

/// The maps of one attached pair of programs.
struct Maps {
    ports: MapHandle,
    flows: MapHandle,
    established: MapHandle,
}

/// The maps `ports`, `flows` and `established` of the egress program attached to the
/// interface `idx` (None: none attached).
fn attached_maps(idx: u32) -> Result<Option<Maps>> {
    if !crate::tc::has_clsact(idx).unwrap_or(true) {
        return Ok(None); // (a query would make libbpf complain of the missing qdisc)
    }
    let Some(info) = FILTER.attached(idx, false)? else {
        return Ok(None);
    };
    if info.name.to_string_lossy() != "tc_mpc_egress" {
        bail!(
            "the tc filter {:#x} on interface {idx} runs {:?}, not nena's mpc program",
            FILTER.handle,
            info.name
        );
    }
    // `established` is the ingress program's alone (the compiler drops it from egress).
    let mut map_ids = info.map_ids;
    if let Some(i) = FILTER.attached(idx, true)? {
        map_ids.extend(i.map_ids);
    }
    let (mut ports, mut flows, mut established) = (None, None, None);
    map_ids.sort_unstable();
    map_ids.dedup();
    for mid in map_ids {
        let m = MapHandle::from_map_id(mid).context("opening an mpc map")?;
        match m.name().to_string_lossy().as_ref() {
            "ports" => ports = Some(m),
            "flows" => flows = Some(m),
            "established" => established = Some(m),
            _ => {}
        }
    }
    match (ports, flows, established) {
        (Some(ports), Some(flows), Some(established)) => Ok(Some(Maps {
            ports,
            flows,
            established,
        })),
        _ => bail!("the mpc program on interface {idx} lacks its maps (another nena version's?)"),
    }
}

fn read_port(m: &MapHandle, port: u16) -> Result<Option<Port>> {
    Ok(m.lookup(&port.to_ne_bytes(), MapFlags::ANY)?
        .and_then(|v| Port::read_from_bytes(&v).ok()))
}

/// The network namespace of the calling thread (inode of its `ns/net`), if readable.
fn netns_id() -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/thread-self/ns/net")
        .ok()
        .map(|m| m.ino())
}

/// The programs attached to one interface for one port, for as long as the guard lives.
pub struct MpcGuard {
    dev: String,
    /// The network namespace it was attached in: released only from there (a guard
    /// dropped on another thread, e.g. a test's after a panic, leaves the filters to the
    /// namespace's deletion instead of touching an interface of the same index elsewhere).
    netns: Option<u64>,
    idx: u32,
    port: u16,
    role: MpcRole,
    ports: MapHandle,
    flows: MapHandle,
    established: MapHandle,
    released: bool,
}

impl std::fmt::Debug for MpcGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpcGuard")
            .field("dev", &self.dev)
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

impl MpcGuard {
    /// Attaches the programs to `dev` (current network namespace), egress and ingress, or
    /// joins the ones already there, and registers `port` in `role` with `method`.
    pub fn attach(dev: &str, port: u16, role: MpcRole, method: MpcMethod) -> Result<MpcGuard> {
        if port == META_PORT {
            bail!("port 0 cannot be negotiated");
        }
        let idx = crate::chains::loader::ifindex(dev)?;
        // Other nena processes attach, register and leave on this interface too.
        let _lock = crate::tc::lock()?;
        let value = Port {
            role: match role {
                MpcRole::Client => ROLE_CLIENT,
                MpcRole::Server => ROLE_SERVER,
            },
            method: match method {
                MpcMethod::Option => METHOD_OPTION,
                MpcMethod::FlagBit => METHOD_FLAG,
            },
            users: 1,
            flags: 0,
        };
        let Maps {
            ports,
            flows,
            established,
        } = match attached_maps(idx)? {
            Some(maps) => maps,
            None => {
                let mut storage = MaybeUninit::uninit();
                let skel = load(&mut storage)?;
                let created = !crate::tc::has_clsact(idx).unwrap_or(true);
                let meta = Port {
                    users: created as u32,
                    ..Default::default()
                };
                skel.maps
                    .ports
                    .update(&META_PORT.to_ne_bytes(), meta.as_bytes(), MapFlags::ANY)
                    .context("configuring the mpc program")?;
                let mut eg = FILTER.hook(skel.progs.tc_mpc_egress.as_fd(), idx, false);
                let _ = eg.create(); // the clsact qdisc, if it is not there yet
                eg.attach()
                    .with_context(|| format!("attaching the mpc program to {dev} (egress)"))?;
                let mut ing = FILTER.hook(skel.progs.tc_mpc_ingress.as_fd(), idx, true);
                if let Err(e) = ing.attach() {
                    let _ = eg.detach();
                    return Err(anyhow!(e))
                        .with_context(|| format!("attaching the mpc program to {dev} (ingress)"));
                }
                attached_maps(idx)?.ok_or_else(|| anyhow!("the mpc program vanished from {dev}"))?
            }
        };
        let mut v = value;
        if let Some(old) = read_port(&ports, port)? {
            if old.role != v.role || old.method != v.method {
                bail!(
                    "port {port} on {dev} is already negotiated by another nena process in \
                     another role or method"
                );
            }
            v.users = old.users + 1;
        }
        ports
            .update(&port.to_ne_bytes(), v.as_bytes(), MapFlags::ANY)
            .context("registering the port with the mpc program")?;
        Ok(MpcGuard {
            dev: dev.to_string(),
            netns: netns_id(),
            idx,
            port,
            role,
            ports,
            flows,
            established,
            released: false,
        })
    }

    /// The interface.
    pub fn dev(&self) -> &str {
        &self.dev
    }

    /// The record of the connection whose first subflow is `local` - `remote`, as it is now
    /// (no waiting). A client's is its handshake record (`flows`); a server's only the record
    /// of a handshake it saw complete (`established`), the one it decides from. None: no
    /// such record (a client's SYN that did not cross this interface; on a server also a
    /// handshake whose completing ACK was not checked, or whose record was pushed out of the
    /// full table).
    pub fn flow(&self, local: SocketAddr, remote: SocketAddr) -> Result<Option<FlowRecord>> {
        let k = flow_key(local, remote)?;
        let m = match self.role {
            MpcRole::Client => &self.flows,
            MpcRole::Server => &self.established,
        };
        Ok(m.lookup(k.as_bytes(), MapFlags::ANY)?
            .and_then(|v| Flow::read_from_bytes(&v).ok())
            .map(|f| FlowRecord::from_flow(&f)))
    }

    /// Forgets one connection's records (both tables), whatever they hold: once its side
    /// has decided, nothing reads them again.
    pub fn forget(&self, local: SocketAddr, remote: SocketAddr) {
        if let Ok(k) = flow_key(local, remote) {
            let _ = self.flows.delete(k.as_bytes());
            let _ = self.established.delete(k.as_bytes());
        }
    }

    /// Deletes the `established` entries older than [`STALE`] (handshakes nobody accepted,
    /// connections that fell back to TCP and were never looked up); returns how many. One
    /// system call per entry: run it off any async runtime (the command line's sweeper
    /// thread does).
    pub fn sweep(&self) -> usize {
        sweep_stale(&self.established, monotonic_ns())
    }

    fn release(&mut self) -> Result<()> {
        if self.released {
            return Ok(());
        }
        self.released = true;
        if netns_id() != self.netns {
            bail!(
                "the mpc programs on {} were attached in another network namespace: left \
                 for it (they go with it)",
                self.dev
            );
        }
        let _lock = crate::tc::lock()?;
        match read_port(&self.ports, self.port)? {
            Some(mut p) if p.users > 1 => {
                p.users -= 1;
                self.ports
                    .update(&self.port.to_ne_bytes(), p.as_bytes(), MapFlags::ANY)?;
            }
            _ => {
                let _ = self.ports.delete(&self.port.to_ne_bytes());
            }
        }
        // Any port left (besides the metadata entry)? Then another process still uses it.
        let left = self
            .ports
            .keys()
            .filter(|k| k.as_slice() != META_PORT.to_ne_bytes())
            .count();
        if left > 0 {
            return Ok(());
        }
        let owns = read_port(&self.ports, META_PORT)?.is_some_and(|m| m.users == 1);
        let e1 = FILTER.detach(self.idx, false);
        let e2 = FILTER.detach(self.idx, true);
        if owns {
            let _ = crate::tc::remove_clsact_if_empty(self.idx);
        }
        e1.and(e2)
            .with_context(|| format!("detaching the mpc programs from {}", self.dev))
    }

    /// Unregisters the port and detaches the programs if no other port uses them.
    pub fn detach(mut self) -> Result<()> {
        self.release()
    }
}

impl Drop for MpcGuard {
    fn drop(&mut self) {
        if let Err(e) = self.release() {
            log::warn!("{e:#}");
        }
    }
}

/// Whether nena's mpc programs are attached to `dev` (egress, ingress).
pub fn attached(dev: &str) -> Result<(bool, bool)> {
    let idx = crate::chains::loader::ifindex(dev)?;
    if !crate::tc::has_clsact(idx).unwrap_or(true) {
        return Ok((false, false));
    }
    Ok((
        FILTER.query(idx, false)?.is_some(),
        FILTER.query(idx, true)?.is_some(),
    ))
}

/// Counters of the programs on `dev`: requests added, consents added, requests seen,
/// consents seen, keys recorded, marks failed, confirmations added or seen, completing
/// ACKs refused or not recorded (None: nothing attached).
pub fn stats(dev: &str) -> Result<Option<[u64; 8]>> {
    let idx = crate::chains::loader::ifindex(dev)?;
    if !crate::tc::has_clsact(idx).unwrap_or(true) {
        return Ok(None);
    }
    let Some(info) = FILTER.attached(idx, false)? else {
        return Ok(None);
    };
    for mid in info.map_ids {
        let m = MapHandle::from_map_id(mid)?;
        if m.name().to_string_lossy() == "stats" {
            let mut out = [0u64; 8];
            for (i, o) in out.iter_mut().enumerate() {
                if let Some(v) = m.lookup(&(i as u32).to_ne_bytes(), MapFlags::ANY)? {
                    *o = u64::from_ne_bytes(v[..8].try_into()?);
                }
            }
            return Ok(Some(out));
        }
    }
    Ok(None)
}

/// Deletes the entries of `m` (an `established` map) older than [`STALE`] at `now`.
fn sweep_stale(m: &dyn MapCore, now: u64) -> usize {
    let stale = stale_keys(m, now);
    stale.iter().filter(|k| m.delete(k).is_ok()).count()
}

/// The keys of the entries of `m` (an `established` map) older than [`STALE`] at `now`.
fn stale_keys(m: &dyn MapCore, now: u64) -> Vec<Vec<u8>> {
    m.keys()
        .filter(|k| {
            m.lookup(k, MapFlags::ANY)
                .ok()
                .flatten()
                .and_then(|v| Flow::read_from_bytes(&v).ok())
                .is_some_and(|f| now.saturating_sub(f.born) > STALE.as_nanos() as u64)
        })
        .collect()
}

/// A server's table of completed handshakes (`established`) on one interface, as the
/// programs attached there hold it: its size, and for tests, made-up entries.
pub struct Established {
    map: MapHandle,
}

impl Established {
    /// The table of the programs attached to `dev` (None: none attached).
    pub fn of(dev: &str) -> Result<Option<Established>> {
        let idx = crate::chains::loader::ifindex(dev)?;
        Ok(attached_maps(idx)?.map(|m| Established { map: m.established }))
    }

    /// Deletes the entries older than [`STALE`], as [`MpcGuard::sweep`]; returns how many.
    pub fn sweep(&self) -> usize {
        sweep_stale(&self.map, monotonic_ns())
    }

    /// Entries older than [`STALE`] now (the sweep's to delete).
    pub fn stale(&self) -> usize {
        stale_keys(&self.map, monotonic_ns()).len()
    }

    /// Entries at most.
    pub fn capacity(&self) -> u32 {
        self.map.max_entries()
    }

    /// Entries now (one system call per entry).
    pub fn len(&self) -> usize {
        self.map.keys().count()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.map.keys().next().is_none()
    }

    /// Testing aid: writes `n` made-up records of completed handshakes, made `age` ago,
    /// as real handshakes nobody accepted would leave them: peers 198.19.0.0/16 (no lab
    /// host has them) to `port`, with keys and all three marks. Returns how many were
    /// written.
    pub fn fill(&self, n: u32, port: u16, age: Duration) -> Result<u32> {
        let born = monotonic_ns().saturating_sub(age.as_nanos() as u64);
        let mut written = 0;
        for i in 0..n {
            let mut laddr = [0u8; 16];
            laddr[..4].copy_from_slice(&[198, 18, 255, 1]);
            let mut raddr = [0u8; 16];
            raddr[..4].copy_from_slice(&[198, 19, (i >> 8) as u8, i as u8]);
            let k = FlowKey {
                v6: 0,
                pad: [0; 3],
                lport: port.to_be(),
                rport: (1024 + (i >> 16) as u16).to_be(),
                laddr,
                raddr,
            };
            let v = Flow {
                flags: F_MPC_SYN
                    | F_REQUESTED
                    | F_CONSENTED
                    | F_CONFIRMED
                    | F_LOCAL_KEY
                    | F_REMOTE_KEY,
                pad: 0,
                local_key: (u64::from(i) | 1 << 40).to_be_bytes(),
                remote_key: (u64::from(i) | 2 << 40).to_be_bytes(),
                born,
            };
            self.map
                .update(k.as_bytes(), v.as_bytes(), MapFlags::ANY)
                .context("writing a made-up entry")?;
            written += 1;
        }
        Ok(written)
    }
}

/// The program loaded for BPF_PROG_TEST_RUN (tests): not attached, nothing pinned.
pub struct MpcBed {
    skel: Box<MpcSkel<'static>>,
}

impl MpcBed {
    /// Loads the programs with `port` registered in `role` with `method`. A server's
    /// completing ACK is recorded without the socket check (no socket exists here).
    pub fn new(port: u16, role: MpcRole, method: MpcMethod) -> Result<MpcBed> {
        Self::build(port, role, method, PORT_NO_VERIFY)
    }

    /// [`MpcBed::new`], with the server's check of a completing ACK against the kernel's
    /// sockets (of the calling thread's network namespace) as when attached.
    pub fn verifying(port: u16, role: MpcRole, method: MpcMethod) -> Result<MpcBed> {
        Self::build(port, role, method, 0)
    }

    fn build(port: u16, role: MpcRole, method: MpcMethod, flags: u32) -> Result<MpcBed> {
        let storage: &'static mut MaybeUninit<_> = Box::leak(Box::new(MaybeUninit::uninit()));
        let skel = load(storage)?;
        let v = Port {
            role: if role == MpcRole::Client {
                ROLE_CLIENT
            } else {
                ROLE_SERVER
            },
            method: if method == MpcMethod::Option {
                METHOD_OPTION
            } else {
                METHOD_FLAG
            },
            users: 1,
            flags,
        };
        skel.maps
            .ports
            .update(&port.to_ne_bytes(), v.as_bytes(), MapFlags::ANY)?;
        Ok(MpcBed {
            skel: Box::new(skel),
        })
    }

    /// Runs the egress (or ingress) program on one Ethernet frame; returns the frame as
    /// it leaves.
    pub fn run(&self, frame: &[u8], egress: bool) -> Result<Vec<u8>> {
        let mut out = vec![0u8; frame.len() + 64];
        let input = libbpf_rs::ProgramInput {
            data_in: Some(frame),
            data_out: Some(&mut out),
            repeat: 1,
            ..Default::default()
        };
        let p = if egress {
            &self.skel.progs.tc_mpc_egress
        } else {
            &self.skel.progs.tc_mpc_ingress
        };
        let o = p.test_run(input).context("BPF_PROG_TEST_RUN")?;
        if o.return_value as i32 != -1 {
            bail!(
                "the mpc program returned {} (not TC_ACT_UNSPEC)",
                o.return_value
            );
        }
        Ok(o.data.map(|d| d.to_vec()).unwrap_or_default())
    }

    /// The server's table of completed handshakes.
    pub fn established(&self) -> Result<Established> {
        Ok(Established {
            map: MapHandle::try_from(&self.skel.maps.established)?,
        })
    }

    /// The record of one connection.
    pub fn flow(&self, local: SocketAddr, remote: SocketAddr) -> Result<Option<FlowRecord>> {
        read_flow(
            &self.skel.maps.flows,
            &self.skel.maps.established,
            local,
            remote,
        )
    }
}

#[cfg(test)]
mod tests;
