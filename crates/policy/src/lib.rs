//! nena-policy: eBPF policy chains for MPTCP (seed 003, eMPTCP), done for MPTCP v1.
pub const BPF_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/nena.bpf.o"));
