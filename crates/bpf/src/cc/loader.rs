//! Loading and unloading the congestion controls: each algorithm's object is opened through
//! its generated skeleton (module `skel`, the bytes embedded at build time), loaded (the
//! verifier checks it), and its struct_ops map attached as a BPF link, which registers the
//! name with the kernel's TCP. The link is pinned at `ROOT/NAME` (default [`PIN_ROOT`]), so
//! the congestion control outlives the process that loaded it; removing the pin drops the
//! link and unregisters the name. Sockets that still use it keep working (the kernel holds
//! the ops until they close).
use crate::{cc::Algo, skel};
use anyhow::{bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use serde::Serialize;
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where `nena cc load` pins each algorithm's link.
pub const PIN_ROOT: &str = "/sys/fs/bpf/nena-cc";
const AVAILABLE: &str = nena_mptcp::AVAILABLE_CONGESTION_CONTROLS;

/// The congestion controls the kernel has registered (its own and BPF ones).
pub fn available() -> Result<Vec<String>> {
    nena_mptcp::available_congestion_controls().with_context(|| format!("reading {AVAILABLE}"))
}

/// Is `name` registered with the kernel?
pub fn is_registered(name: &str) -> bool {
    available()
        .map(|a| a.iter().any(|n| n == name))
        .unwrap_or(false)
}

/// One algorithm's state.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Status {
    /// The kernel name (`nena_lia`).
    pub name: String,
    /// Listed in tcp_available_congestion_control.
    pub registered: bool,
    /// Its pinned link, when nena loaded it.
    pub pin: Option<PathBuf>,
}

/// Where `algo`'s link is pinned under `root`.
pub fn pin_path(root: &Path, algo: Algo) -> PathBuf {
    root.join(algo.name())
}

/// Load `algo` and pin its link under `root`. Refuses, with one line saying so, a name the
/// kernel already has registered (by nena or anyone else).
pub fn load(algo: Algo, root: &Path) -> Result<PathBuf> {
    let pin = pin_path(root, algo);
    if is_registered(algo.name()) {
        if pin.exists() {
            bail!(
                "{} is already loaded (pinned at {}); `nena cc unload {}` first",
                algo.name(),
                pin.display(),
                &algo.name()[5..]
            );
        }
        if let Some(other) = pinned_elsewhere(algo.name(), root) {
            bail!(
                "{} is already registered by a link pinned at {} (another root than {}); \
                 `rm {}` unloads it",
                algo.name(),
                other.display(),
                root.display(),
                other.display()
            );
        }
        bail!(
            "a congestion control named {} is already registered, not by nena (no pin at {})",
            algo.name(),
            pin.display()
        );
    }
    if pin.exists() {
        // A pin whose link no longer registers the name: stale, replace it.
        std::fs::remove_file(&pin).with_context(|| format!("removing stale {}", pin.display()))?;
    }
    std::fs::create_dir_all(root).with_context(|| {
        format!(
            "creating {} (is the BPF filesystem mounted at /sys/fs/bpf?)",
            root.display()
        )
    })?;
    let mut link = match attach(algo)? {
        Ok(l) => l,
        Err(e) if is_registered(algo.name()) => {
            bail!(
                "{} is already loaded (registered while loading): {e}",
                algo.name()
            )
        }
        Err(e) => return Err(e).with_context(|| format!("registering {}", algo.name())),
    };
    link.pin(&pin)
        .with_context(|| format!("pinning the {} link at {}", algo.name(), pin.display()))?;
    if !is_registered(algo.name()) {
        let _ = std::fs::remove_file(&pin);
        bail!("{} was attached but is not in {AVAILABLE}", algo.name());
    }
    Ok(pin)
}

/// A pin of `name` in another nena root than `root` (a directory `/sys/fs/bpf/nena-cc*`,
/// such as a test's per-process root), which would explain a registered name without a pin
/// at `root`.
fn pinned_elsewhere(name: &str, root: &Path) -> Option<PathBuf> {
    let bpffs = Path::new(PIN_ROOT).parent()?;
    std::fs::read_dir(bpffs)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("nena-cc"))
        .map(|e| e.path().join(name))
        .find(|p| p.parent() != Some(root) && p.exists())
}

/// Open and load `algo`'s skeleton (the verifier checks it) and attach its struct_ops
/// map (registering the name): the outer result is loading, the inner one attaching.
fn attach(algo: Algo) -> Result<libbpf_rs::Result<libbpf_rs::Link>> {
    macro_rules! attach {
        ($builder:ty, $map:ident) => {{
            let mut storage = MaybeUninit::uninit();
            let open = <$builder>::default()
                .open(&mut storage)
                .with_context(|| format!("opening the {} object", algo.name()))?;
            let mut skel = open
                .load()
                .with_context(|| format!("loading {} (verifier; are you root?)", algo.name()))?;
            Ok(skel.maps.$map.attach_struct_ops())
        }};
    }
    match algo {
        Algo::Lia => attach!(skel::lia::LiaSkelBuilder, nena_lia),
        Algo::Olia => attach!(skel::olia::OliaSkelBuilder, nena_olia),
        Algo::Balia => attach!(skel::balia::BaliaSkelBuilder, nena_balia),
        Algo::Ewtcp => attach!(skel::ewtcp::EwtcpSkelBuilder, nena_ewtcp),
    }
}

/// Unload `algo`: remove its pin under `root` and wait (up to 5 s) until the kernel has
/// unregistered the name. Ok(false) when it was not loaded by nena.
pub fn unload(algo: Algo, root: &Path) -> Result<bool> {
    let pin = pin_path(root, algo);
    if !pin.exists() {
        return Ok(false);
    }
    std::fs::remove_file(&pin).with_context(|| format!("removing {}", pin.display()))?;
    // The link is released from a work queue after its last reference goes.
    let t0 = Instant::now();
    while is_registered(algo.name()) {
        if t0.elapsed() > Duration::from_secs(5) {
            bail!(
                "{} is still registered 5 s after its pin was removed (another process holds its link?)",
                algo.name()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // The directory goes with its last pin.
    let _ = std::fs::remove_dir(root);
    Ok(true)
}

/// The state of every algorithm under `root`.
pub fn show(root: &Path) -> Result<Vec<Status>> {
    let avail = available()?;
    Ok(Algo::ALL
        .iter()
        .map(|&a| {
            let pin = pin_path(root, a);
            Status {
                name: a.name().to_string(),
                registered: avail.iter().any(|n| n == a.name()),
                pin: pin.exists().then_some(pin),
            }
        })
        .collect())
}

/// A loaded algorithm that is unloaded when dropped (tests, experiments).
#[derive(Debug)]
pub struct Loaded {
    algo: Algo,
    root: PathBuf,
}

impl Loaded {
    /// Load `algo` with its pin under `root`.
    pub fn new(algo: Algo, root: &Path) -> Result<Loaded> {
        load(algo, root)?;
        Ok(Loaded {
            algo,
            root: root.to_path_buf(),
        })
    }
    /// The algorithm.
    pub fn algo(&self) -> Algo {
        self.algo
    }
}

impl Drop for Loaded {
    fn drop(&mut self) {
        if let Err(e) = unload(self.algo, &self.root) {
            eprintln!("nena-cc: unloading {}: {e:#}", self.algo.name());
        }
    }
}
