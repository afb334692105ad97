//! The policy chains (seed 003, eMPTCP, done for MPTCP v1). Chains of selectors (which
//! packets) and actors (what to do) at XDP (ingress) and TC (egress): a dispatcher parses each
//! TCP packet once, finds the chain configured for its interface and hook (and the packet's
//! tenant), evaluates the selectors inline and tail-calls each actor that has to run, one
//! small BPF program per actor (`bpf/chains/`). Chains are swapped at run time by map
//! updates; the hooks stay attached.
//!
//! - [`spec`]: the chain file format (sans-IO): the model and its serde parser with spans.
//! - [`loader`]: host plumbing, the object and its pins, attach/detach, chains, state
//!   ([`loader::Policy`]: apply, status, events), and the BPF_PROG_TEST_RUN bed
//!   ([`loader::TestBed`]).
//! - [`events`]: reports of get_connect / get_subflow / record, tokens derived in user space.
//! - [`packet`]: crafted frames for tests and the benchmark (nena-bench's `policy`).
//! - `recipes` (tests, and the `testing` feature): ready-made chains (hold an untrusted
//!   path, ...).
//! - [`abi`]: the layout shared with the C programs, and [`abi::Prog`], the selectors and
//!   actors.

pub mod abi;
#[cfg(feature = "bpf")]
pub mod events;
#[cfg(feature = "bpf")]
pub mod loader;
pub mod packet;
#[cfg(any(test, feature = "testing"))]
pub mod recipes;
pub mod spec;
