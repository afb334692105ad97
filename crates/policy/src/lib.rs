//! nena-policy: eBPF policy chains for MPTCP (seed 003, eMPTCP), done for MPTCP v1.
//!
//! Chains of selectors (which packets) and actors (what to do) at XDP (ingress) and TC
//! (egress): a dispatcher parses each TCP packet once, finds the chain configured for its
//! interface and hook, evaluates the selectors inline and tail-calls each actor that has to
//! run, one small BPF program per actor. Chains are swapped at run time by map updates; the
//! hooks stay attached.
//!
//! - [`spec`]: the chain file format (sans-IO): the model and its serde parser with spans.
//! - [`loader`]: host plumbing, the object and its pins, attach/detach, chains, state
//!   ([`Policy`]: apply, status, events), and the BPF_PROG_TEST_RUN bed ([`TestBed`]).
//! - [`events`]: reports of get_connect / get_subflow / record, tokens derived in user space.
//! - [`packet`]: crafted frames for tests and the benchmark (nena-bench's `policy`).
//! - [`recipes`]: ready-made chains for nena's transport (hold an untrusted path, ...).
//! - [`abi`]: the layout shared with the C programs in `bpf/`, and [`abi::Prog`], the
//!   selectors and actors.
//! - [`run`]: `nena run`'s cgroup programs (TCP connects to the local proxy, or made MPTCP).
//! - [`tamper`]: the lab's active attacker (one byte of one segment altered, checksum fixed).
//! - [`mpc`]: the papers' negotiation for `--mode kato-mpc` (marks on SYN and SYN-ACK, MPTCP keys).

pub mod abi;
pub mod events;
pub mod forge;
pub mod libbpf_log;
pub mod loader;
pub mod mpc;
pub mod mpc_strip;
pub mod packet;
pub mod recipes;
pub mod run;
pub mod skel;
pub mod spec;
pub mod tamper;
pub mod tc;

pub use events::Event;
pub use loader::{Policy, TestBed, DEFAULT_PIN_DIR};
pub use spec::{Actor, ChainSpec, Hook, LinkSpec, PolicySpec, Selector};

/// The compiled BPF object (built from `bpf/` by build.rs).
pub const BPF_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/nena.bpf.o"));
