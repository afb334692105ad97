//! The loader, on libbpf-rs: loads the object, pins its maps under one directory of the BPF
//! filesystem (`/sys/fs/bpf/nena` by default), fills the jump tables, attaches the dispatchers
//! (XDP on ingress, TC clsact on egress), swaps chains at run time and reads counters and
//! events back. `TestBed` runs the same object with BPF_PROG_TEST_RUN, without attaching.

use crate::abi::{self, Chain, HookKey, LinkStats, Pod, NO_CHAIN};
use crate::events::Event;
use crate::spec::{ChainSpec, Hook, PolicySpec};
use anyhow::{anyhow, bail, Context, Result};
use libbpf_rs::{
    MapCore, MapFlags, MapHandle, Object, ObjectBuilder, TcHookBuilder, Xdp, XdpFlags,
};
use std::collections::{BTreeMap, HashSet};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The nena directory of the BPF filesystem; each network namespace gets its own
/// subdirectory in it ([`default_pin_dir`]).
pub const DEFAULT_PIN_DIR: &str = "/sys/fs/bpf/nena";

/// Where the maps of the calling thread's network namespace are pinned unless told otherwise:
/// `/sys/fs/bpf/nena/net-<inode of the namespace>`. One set of maps per namespace: the chains
/// are keyed by interface index, and indices are only unique within a namespace.
pub fn default_pin_dir() -> PathBuf {
    let ns = std::fs::read_link("/proc/thread-self/ns/net")
        .ok()
        .and_then(|l| {
            let s = l.to_string_lossy().into_owned();
            s.strip_prefix("net:[")
                .and_then(|r| r.strip_suffix(']'))
                .map(str::to_string)
        })
        .unwrap_or_else(|| "unknown".into());
    Path::new(DEFAULT_PIN_DIR).join(format!("net-{ns}"))
}
const TC_HANDLE: u32 = 0x4e4e; // "NN"
const TC_PRIORITY: u32 = 0x4e;
const BPF_FS_MAGIC: i64 = 0xcafe_4a11;

/// Mount the BPF filesystem on /sys/fs/bpf if it is not mounted yet.
pub fn ensure_bpffs() -> Result<()> {
    let path = c"/sys/fs/bpf";
    // SAFETY: statfs on a NUL-terminated path into a zeroed struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(path.as_ptr(), &mut st) } == 0 && st.f_type as i64 == BPF_FS_MAGIC {
        return Ok(());
    }
    // SAFETY: plain mount(2) with static NUL-terminated strings.
    let r = unsafe {
        libc::mount(
            c"bpf".as_ptr(),
            path.as_ptr(),
            c"bpf".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if r != 0 {
        bail!(
            "mounting the BPF filesystem on /sys/fs/bpf: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

fn pin_name(map_name: &str) -> String {
    map_name.replace('.', "_")
}

/// Move this thread into the network namespace `name` (`/run/netns/NAME`, as `ip netns`
/// makes them), keeping the mount namespace, so the pins under /sys/fs/bpf stay shared.
/// (`ip netns exec` mounts a private /sys, where pins made by one command are gone for the
/// next.)
pub fn enter_netns(name: &str) -> Result<()> {
    if name.is_empty() || name.contains('/') {
        bail!("bad namespace name `{name}`");
    }
    let path = format!("/run/netns/{name}");
    let f = std::fs::File::open(&path)
        .with_context(|| format!("no network namespace `{name}` ({path})"))?;
    use std::os::fd::AsRawFd;
    // SAFETY: setns(2) on a namespace file we hold open.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        bail!(
            "entering network namespace {name}: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// Interface index of a name.
pub fn ifindex(dev: &str) -> Result<u32> {
    let c = std::ffi::CString::new(dev).map_err(|_| anyhow!("bad interface name `{dev}`"))?;
    // SAFETY: NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        bail!("no interface `{dev}` here");
    }
    Ok(i)
}

/// Interface name of an index (or the index as text).
pub fn ifname(index: u32) -> String {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: buffer of IF_NAMESIZE bytes, as if_indextoname requires.
    let p = unsafe { libc::if_indextoname(index, buf.as_mut_ptr()) };
    if p.is_null() {
        return format!("if{index}");
    }
    // SAFETY: if_indextoname wrote a NUL-terminated name.
    unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// Open and load the object. With `pins`, maps already pinned there are reused and the
/// others pinned there after loading. The jump tables are filled either way.
fn load_object(pins: Option<&Path>) -> Result<Object> {
    load_object_bytes(crate::BPF_OBJECT, pins)
}

fn load_object_bytes(bytes: &[u8], pins: Option<&Path>) -> Result<Object> {
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

fn map<'a>(obj: &'a Object, name: &str) -> Result<libbpf_rs::Map<'a>> {
    obj.maps()
        .find(|m| m.name() == name)
        .ok_or_else(|| anyhow!("map {name} missing from the object"))
}

fn prog<'a>(obj: &'a Object, name: &str) -> Result<libbpf_rs::Program<'a>> {
    obj.progs()
        .find(|p| p.name() == name)
        .ok_or_else(|| anyhow!("program {name} missing from the object"))
}

fn fill_jumps(obj: &Object) -> Result<()> {
    for (table, prefix) in [("jmp_xdp", "xdp_"), ("jmp_tc", "tc_")] {
        let t = map(obj, table)?;
        for (i, name) in abi::PROGS.iter().enumerate() {
            let p = match prog(obj, &format!("{prefix}{name}")) {
                Ok(p) => p,
                // selectors run inline (bpf/chain.h); only an earlier build, loaded to be
                // compared with this one (`examples/ab.rs`), has programs for them
                Err(_) if i < abi::FIRST_ACTOR => continue,
                Err(e) => return Err(e),
            };
            let fd = p.as_fd();
            use std::os::fd::AsRawFd;
            let v = (fd.as_raw_fd() as u32).to_ne_bytes();
            t.update(&(i as u32).to_ne_bytes(), &v, MapFlags::ANY)
                .with_context(|| format!("filling {table}[{i}]"))?;
        }
    }
    Ok(())
}

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
}

/// The pinned policy state: what `nena policy` and nena's transport drive.
pub struct Policy {
    dir: PathBuf,
    chains: MapHandle,
    hooks: MapHandle,
    hook_slots: MapHandle,
    stats: MapHandle,
    events: MapHandle,
    kept: FlowMaps,
    metrics: FlowMaps,
    counters: MapHandle,
    prio: FlowMaps,
}

/// A per-flow map of the BPF side: NAME4 (IPv4 flows, 12-byte keys) and NAME6 (IPv6 flows,
/// `FlowKey`), read as one.
struct FlowMaps {
    v4: MapHandle,
    v6: MapHandle,
}

impl FlowMaps {
    fn open(dir: &Path, name: &str) -> Result<FlowMaps> {
        let h = |suffix: &str| -> Result<MapHandle> {
            let p = dir.join(format!("{name}{suffix}"));
            MapHandle::from_pinned_path(&p).with_context(|| format!("opening {}", p.display()))
        };
        Ok(FlowMaps {
            v4: h("4")?,
            v6: h("6")?,
        })
    }

    /// Every (flow, value bytes) of both maps.
    fn entries(&self) -> Result<Vec<(abi::FlowKey, Vec<u8>)>> {
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

    fn len(&self) -> usize {
        self.v4.keys().count() + self.v6.keys().count()
    }

    fn clear(&self) {
        for m in [&self.v4, &self.v6] {
            let keys: Vec<Vec<u8>> = m.keys().collect();
            for k in keys {
                let _ = m.delete(&k);
            }
        }
    }
}

impl Policy {
    /// Load the programs (reusing the pinned maps, if any) and attach the dispatchers to
    /// `dev`: XDP for ingress, TC clsact for egress. Both hooks start with no chain.
    pub fn attach(dir: &Path, dev: &str) -> Result<Policy> {
        let idx = ifindex(dev)?;
        ensure_bpffs()?;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let obj = load_object(Some(dir))?;
        let xdp = prog(&obj, "xdp_nena")?;
        Xdp::new(xdp.as_fd())
            .attach(idx as i32, XdpFlags::NONE)
            .with_context(|| format!("attaching XDP to {dev}"))?;
        let tc = prog(&obj, "tc_nena")?;
        let mut hook = TcHookBuilder::new(tc.as_fd())
            .ifindex(idx as i32)
            .replace(true)
            .handle(TC_HANDLE)
            .priority(TC_PRIORITY)
            .hook(libbpf_rs::TC_EGRESS);
        // clsact may exist already (another tool's, or ours from an earlier attach); if
        // this call created it, that is recorded below, so that detach removes it again
        // (if the query fails, the qdisc is treated as someone else's: detach leaves it)
        let created_clsact = match crate::tc::has_clsact(idx) {
            Ok(had) => !had,
            Err(e) => {
                log::warn!("could not list the qdiscs of {dev}: {e:#}; detach will leave clsact");
                false
            }
        };
        let _ = hook.create();
        if let Err(e) = hook.attach() {
            let _ = Xdp::new(xdp.as_fd()).detach(idx as i32, XdpFlags::NONE);
            return Err(anyhow!(e).context(format!("attaching TC egress to {dev}")));
        }
        let p = Policy::open(dir)?;
        if created_clsact {
            let k = HookKey {
                ifindex: idx,
                hook: CLSACT_OWNED,
            };
            p.hooks
                .update(k.as_bytes(), &1u32.to_ne_bytes(), MapFlags::ANY)
                .context("recording the clsact qdisc nena created")?;
        }
        for h in [abi::HOOK_XDP, abi::HOOK_TC] {
            let k = HookKey {
                ifindex: idx,
                hook: h,
            };
            // keep the chain if this device was attached already
            let _ = p
                .hooks
                .update(k.as_bytes(), &NO_CHAIN.to_ne_bytes(), MapFlags::NO_EXIST);
            let slot = p
                .hooks
                .lookup(k.as_bytes(), MapFlags::ANY)?
                .and_then(|v| u32::from_bytes(&v))
                .unwrap_or(NO_CHAIN);
            write_hook_slot(&p.hook_slots, idx, h, Some(slot))?;
        }
        Ok(p)
    }

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
            prio: FlowMaps::open(dir, "prio")?,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn hook_entries(&self) -> Result<BTreeMap<(u32, u32), u32>> {
        let mut out = BTreeMap::new();
        for k in self.hooks.keys() {
            let Some(hk) = HookKey::from_bytes(&k) else {
                continue;
            };
            if hk.hook != abi::HOOK_XDP && hk.hook != abi::HOOK_TC {
                continue; // a marker such as CLSACT_OWNED, not a hook
            }
            if let Some(v) = self.hooks.lookup(&k, MapFlags::ANY)? {
                out.insert(
                    (hk.ifindex, hk.hook),
                    u32::from_bytes(&v).unwrap_or(NO_CHAIN),
                );
            }
        }
        Ok(out)
    }

    /// Devices attached (by index).
    pub fn attached(&self) -> Result<Vec<u32>> {
        let mut v: Vec<u32> = self.hook_entries()?.keys().map(|(i, _)| *i).collect();
        v.dedup();
        Ok(v)
    }

    /// Detach the dispatchers from `dev`. When no device is left, the pins are removed.
    /// Returns true if that happened.
    pub fn detach(self, dev: &str) -> Result<bool> {
        let idx = ifindex(dev)?;
        detach_hooks(idx)?;
        let owned = HookKey {
            ifindex: idx,
            hook: CLSACT_OWNED,
        };
        if self.hooks.delete(owned.as_bytes()).is_ok() {
            remove_clsact_if_empty(idx)?;
        }
        for h in [abi::HOOK_XDP, abi::HOOK_TC] {
            let _ = write_hook_slot(&self.hook_slots, idx, h, None);
            let _ = self.hooks.delete(
                HookKey {
                    ifindex: idx,
                    hook: h,
                }
                .as_bytes(),
            );
        }
        if self.hook_entries()?.is_empty() {
            let dir = self.dir.clone();
            drop(self);
            remove_pins(&dir)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Replace the whole policy: every chain of `spec` is checked first (devices exist and are
    /// attached, slots are free), then written to free slots, then swapped in; hooks that
    /// `spec` does not name get no chain. Nothing is half-applied.
    pub fn apply(&self, spec: &PolicySpec) -> Result<()> {
        let entries = self.hook_entries()?;
        let mut want: BTreeMap<(u32, u32), &ChainSpec> = BTreeMap::new();
        for c in &spec.chains {
            let at = if c.line > 0 {
                format!("line {}: ", c.line)
            } else {
                String::new()
            };
            let idx = ifindex(&c.dev).map_err(|e| anyhow!("{at}{e}"))?;
            if !entries.contains_key(&(idx, c.hook.abi())) {
                bail!(
                    "{at}{} is not attached (run `nena policy attach --dev {}` first)",
                    c.dev,
                    c.dev
                );
            }
            want.insert((idx, c.hook.abi()), c);
        }
        let used: HashSet<u32> = entries
            .values()
            .copied()
            .filter(|s| *s != NO_CHAIN)
            .collect();
        let free: Vec<u32> = (0..abi::MAX_CHAINS).filter(|s| !used.contains(s)).collect();
        if free.len() < want.len() {
            bail!("{} chains asked, {} slots free", want.len(), free.len());
        }
        let gen = gen_now();
        let mut new_slots = BTreeMap::new();
        for ((key, c), slot) in want.iter().zip(free.iter()) {
            self.write_slot(*slot, &c.to_abi(gen))?;
            new_slots.insert(*key, *slot);
        }
        // swap: one map update per hook, each atomic; roll back on failure
        let mut done: Vec<((u32, u32), u32)> = vec![];
        for (key, old) in &entries {
            let new = new_slots.get(key).copied().unwrap_or(NO_CHAIN);
            let fast = Some(&self.hook_slots as &dyn MapCore);
            if let Err(e) = write_hook(&self.hooks, fast, key.0, key.1, new, MapFlags::EXIST) {
                // this hook too: its hash entry may have been swapped already
                for (k, o) in done.into_iter().chain([(*key, *old)]) {
                    let _ = write_hook(&self.hooks, fast, k.0, k.1, o, MapFlags::ANY);
                }
                return Err(e.context("swapping chains (rolled back)"));
            }
            done.push((*key, *old));
        }
        if spec.chains.iter().any(has_set_backup) {
            self.forget_prio()?;
        }
        Ok(())
    }

    /// Set (or clear, with None) the chain of one hook of an attached device, leaving the
    /// others alone: the library call nena's transport uses.
    pub fn set_chain(&self, dev: &str, hook: Hook, chain: Option<&ChainSpec>) -> Result<()> {
        self.set_chain_ifindex(ifindex(dev)?, hook, chain)
    }

    /// `set_chain` by interface index (no name lookup, so callable from any namespace).
    pub fn set_chain_ifindex(&self, idx: u32, hook: Hook, chain: Option<&ChainSpec>) -> Result<()> {
        let entries = self.hook_entries()?;
        let key = (idx, hook.abi());
        if !entries.contains_key(&key) {
            bail!("{} is not attached", ifname(idx));
        }
        let slot = match chain {
            None => NO_CHAIN,
            Some(c) => {
                let used: HashSet<u32> = entries.values().copied().collect();
                let slot = (0..abi::MAX_CHAINS)
                    .find(|s| !used.contains(s))
                    .ok_or_else(|| anyhow!("no free chain slot"))?;
                self.write_slot(slot, &c.to_abi(gen_now()))?;
                slot
            }
        };
        write_hook(
            &self.hooks,
            Some(&self.hook_slots),
            idx,
            hook.abi(),
            slot,
            MapFlags::EXIST,
        )?;
        if chain.is_some_and(has_set_backup) {
            self.forget_prio()?;
        }
        Ok(())
    }

    /// Forget which MP_PRIO each subflow was sent, so that `set_backup` asserts its value again
    /// (up to `repeat` times) on every subflow it matches. Done by `apply` and `set_chain` when
    /// the new chains hold a `set_backup`: a new policy is re-asserted even where the flag was
    /// changed behind its back (netlink).
    pub fn forget_prio(&self) -> Result<()> {
        self.prio.clear();
        Ok(())
    }

    fn write_slot(&self, slot: u32, c: &Chain) -> Result<()> {
        write_slot(&self.chains, &self.stats, slot, c)
    }

    /// Chains, counters and what each link matched, per attached hook.
    pub fn status(&self) -> Result<Status> {
        let mut hooks = vec![];
        for ((idx, h), slot) in self.hook_entries()? {
            let dev = ifname(idx);
            let hook = Hook::from_abi(h);
            let mut hs = HookStatus {
                dev: dev.clone(),
                ifindex: idx,
                hook,
                chain: None,
                slot: None,
                links: vec![],
            };
            if slot != NO_CHAIN {
                if let Some(v) = self.chains.lookup(&slot.to_ne_bytes(), MapFlags::ANY)? {
                    let c =
                        Chain::from_bytes(&v).ok_or_else(|| anyhow!("bad chain slot {slot}"))?;
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
            hooks.push(hs);
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
                    flow: crate::events::flow_string(&fk),
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
        })
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

pub(crate) fn watch(
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

/// A chain's generation number: informational (shown as is), milliseconds of the wall clock.
fn gen_now() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u32)
        .unwrap_or(0)
}

fn has_set_backup(c: &ChainSpec) -> bool {
    c.links.iter().any(|l| {
        matches!(
            l,
            crate::spec::LinkSpec::Act(crate::spec::Actor::SetBackup { .. })
        )
    })
}

fn ncpu() -> Result<usize> {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    if let Some(n) = N.get() {
        return Ok(*n);
    }
    let n = libbpf_rs::num_possible_cpus()?;
    Ok(*N.get_or_init(|| n))
}

/// Set a hook's chain slot (NO_CHAIN: attached, no chain) in the `hooks` hash, with `flags`,
/// and mirror it into the `hook_slots` array (`fast`: None for an earlier build without it).
fn write_hook(
    hooks: &dyn MapCore,
    fast: Option<&dyn MapCore>,
    idx: u32,
    hook: u32,
    slot: u32,
    flags: MapFlags,
) -> Result<()> {
    let hk = HookKey { ifindex: idx, hook };
    hooks.update(hk.as_bytes(), &slot.to_ne_bytes(), flags)?;
    match fast {
        Some(f) => write_hook_slot(f, idx, hook, Some(slot)),
        None => Ok(()),
    }
}

/// Mirror a hook's entry of the `hooks` hash into the `hook_slots` array, which the
/// dispatcher reads for interfaces below FAST_IFINDEX: None = not attached (0), else the
/// chain slot + 1 (NO_CHAIN as itself).
fn write_hook_slot(fast: &dyn MapCore, idx: u32, hook: u32, slot: Option<u32>) -> Result<()> {
    if idx >= abi::FAST_IFINDEX {
        return Ok(());
    }
    let v = match slot {
        None => 0,
        Some(NO_CHAIN) => NO_CHAIN,
        Some(s) => s + 1,
    };
    fast.update(
        &(idx * 2 + hook).to_ne_bytes(),
        &v.to_ne_bytes(),
        MapFlags::ANY,
    )
    .context("updating hook_slots")
}

fn write_slot(chains: &dyn MapCore, stats: &dyn MapCore, slot: u32, c: &Chain) -> Result<()> {
    let ncpu = ncpu()?;
    let zero = vec![LinkStats::default().as_bytes().to_vec(); ncpu];
    // the counters of the links this chain uses start from zero (the others are not read)
    for i in 0..c.len.min(abi::MAX_LINKS as u32) {
        let k = slot * abi::MAX_LINKS as u32 + i;
        stats.update_percpu(&k.to_ne_bytes(), &zero, MapFlags::ANY)?;
    }
    chains
        .update(&slot.to_ne_bytes(), c.as_bytes(), MapFlags::ANY)
        .context("writing a chain")?;
    Ok(())
}

fn read_stats(stats: &dyn MapCore, slot: u32, pos: u32) -> Result<LinkStats> {
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

/// Detach nena's XDP program and TC filter from an interface (other programs are left).
pub fn detach_hooks(idx: u32) -> Result<()> {
    // XDP: only if the attached program is ours
    let dummy = std::fs::File::open("/dev/null")?;
    let x = Xdp::new(dummy.as_fd());
    if let Ok(id) = x.query_id(idx as i32, XdpFlags::NONE) {
        if id != 0 {
            let ours = libbpf_rs::query::ProgInfoIter::default()
                .any(|p| p.id == id && p.name.to_string_lossy() == "xdp_nena");
            if ours {
                x.detach(idx as i32, XdpFlags::NONE)
                    .context("detaching XDP")?;
            }
        }
    }
    let mut h = TcHookBuilder::new(dummy.as_fd())
        .ifindex(idx as i32)
        .handle(TC_HANDLE)
        .priority(TC_PRIORITY)
        .hook(libbpf_rs::TC_EGRESS);
    let _ = h.detach(); // absent already: fine
    Ok(())
}

/// Key of the `hooks` map entry (ifindex, CLSACT_OWNED) that records that `attach` created
/// the device's clsact qdisc (the BPF side only looks up the two hooks).
const CLSACT_OWNED: u32 = 0x100;

/// Remove the clsact qdisc of device `idx` if no filter is left on it (nena created it and
/// took its own filter off; another tool's filters keep it in place).
fn remove_clsact_if_empty(idx: u32) -> Result<()> {
    if crate::tc::clsact_filters(idx)? > 0 {
        return Ok(());
    }
    let dummy = std::fs::File::open("/dev/null")?;
    let mut h = TcHookBuilder::new(dummy.as_fd())
        .ifindex(idx as i32)
        .hook(libbpf_rs::TC_INGRESS | libbpf_rs::TC_EGRESS);
    match h.destroy() {
        Ok(()) => Ok(()),
        // gone already (removed by hand, or the device went away)
        Err(e) if matches!(e.kind(), libbpf_rs::ErrorKind::NotFound) => Ok(()),
        Err(e) => Err(anyhow!(e).context("removing the clsact qdisc nena created")),
    }
}

/// Remove every pin under `dir` and the directory itself.
pub fn remove_pins(dir: &Path) -> Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        std::fs::remove_file(e.path())
            .with_context(|| format!("removing {}", e.path().display()))?;
    }
    std::fs::remove_dir(dir).with_context(|| format!("removing {}", dir.display()))?;
    // the nena directory itself goes with its last namespace
    if let Some(parent) = dir.parent() {
        if parent == Path::new(DEFAULT_PIN_DIR) {
            let _ = std::fs::remove_dir(parent);
        }
    }
    Ok(())
}

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
