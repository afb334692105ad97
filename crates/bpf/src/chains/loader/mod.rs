//! The loader, on libbpf-rs: loads the object, pins its maps under one directory of the BPF
//! filesystem (`/sys/fs/bpf/nena` by default), fills the jump tables, attaches the dispatchers
//! (XDP on ingress, TC clsact on egress), swaps chains at run time and reads counters and
//! events back. `TestBed` runs the same object with BPF_PROG_TEST_RUN, without attaching.
//!
//! Where to start: [`Policy`] (defined in [`state`]) is the loaded policy of one pin
//! directory; [`Policy::attach`] ([`attach`]) loads and attaches it to a device and
//! [`apply`] holds what changes it: [`Policy::apply`] (a whole file), [`Policy::apply_tenant`]
//! and [`Policy::set_chain`], each a [`plan`] then a [`commit`].
//!
//! - [`apply`]: `apply`, `apply_tenant`, `set_chain`: each a plan, then a commit.
//! - [`host`]: BPF filesystem, pin directories, network namespaces, interface indices.
//! - [`object`]: the BPF object: open, reuse pinned maps, load, pin, fill the jump tables.
//! - [`attach`]: XDP and TC clsact attach/detach, the `hooks` hash and its array mirror.
//! - [`plan`]: what a load writes, computed without BPF from the file and the maps' state.
//! - [`commit`]: a plan's writes in a safe order, undone if one fails.
//! - [`keys`]: typed keys of the maps ([`DevHook`], [`TenantHook`], [`Who`]).
//! - [`error`]: [`LoadError`], why a load failed (the file's fault carries its line).
//! - [`state`]: [`Policy`], the pinned maps, and what is read back (status, metrics, events).
//! - [`tenants`]: tenants (cgroup or uid) in the maps, their chains, the per-flow cache.
//! - [`testbed`]: [`TestBed`], the object run with BPF_PROG_TEST_RUN.

pub mod apply;
pub mod attach;
pub mod commit;
pub mod error;
pub mod host;
pub mod keys;
pub mod object;
pub mod plan;
pub mod state;
pub mod tenants;
pub mod testbed;

pub use attach::detach_hooks;
pub use commit::{commit, Target};
pub use error::{LoadError, SpecFault};
pub use host::{
    default_pin_dir, ensure_bpffs, enter_netns, ifindex, ifname, remove_pins, DEFAULT_PIN_DIR,
};
pub use keys::{DevHook, TenantHook, Who};
pub use plan::{plan, plan_set_chain, plan_tenant, Current, Op, Plan, Resolve};
pub use state::{HookStatus, KeptStatus, LinkStatus, Policy, Status, TenantStatus};
pub use tenants::{cgroup2_root, cgroup_id, HostResolver};
pub use testbed::{RunOut, TestBed};
