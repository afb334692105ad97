//! `nena bench ...`: dispatches to the benchmark of each concern.
use crate::exit::CmdResult;
use clap::Subcommand;

#[cfg(feature = "openssl")]
#[path = "bench_codec.rs"]
mod bench_codec;
#[path = "bench_emulation.rs"]
mod bench_emulation;
#[path = "bench_fairness.rs"]
mod bench_fairness;
#[cfg(feature = "policy")]
#[path = "bench_policy.rs"]
mod bench_policy;
#[cfg(feature = "policy")]
#[path = "bench_rate_limit.rs"]
mod bench_rate_limit;
#[path = "bench_transfer.rs"]
mod bench_transfer;

#[derive(Subcommand, Debug)]
pub enum BenchCmd {
    /// The papers' Table II on this machine, with modern baselines.
    #[cfg(feature = "openssl")]
    Codec(bench_codec::Args),
    /// Goodput of plain MPTCP, nena plain and nena kato over the lab's two paths.
    Transfer(bench_transfer::Args),
    /// The link emulator's fidelity: RTT against the configured delay up to 200 Mbit/s, the
    /// relay's CPU per Mbit/s, loss against the binomial 99% interval.
    Emulation(bench_emulation::Args),
    /// Issue 13's shared bottleneck: LIA within 1.2x a TCP flow's goodput, uncoupled reno
    /// above 1.3x LIA's (the shipped scenario, three repetitions per run).
    Fairness(bench_fairness::Args),
    /// Per-packet cost of each eBPF selector, actor and chain.
    #[cfg(feature = "policy")]
    Policy(bench_policy::Args),
    /// Whether the eBPF rate_limit actor holds its rate on a delayed path (within 10%).
    #[cfg(feature = "policy")]
    RateLimit(bench_rate_limit::Args),
}

pub fn run(cmd: BenchCmd) -> CmdResult {
    match cmd {
        #[cfg(feature = "openssl")]
        BenchCmd::Codec(a) => bench_codec::run(a),
        BenchCmd::Transfer(a) => bench_transfer::run(a),
        BenchCmd::Emulation(a) => bench_emulation::run(a),
        BenchCmd::Fairness(a) => bench_fairness::run(a),
        #[cfg(feature = "policy")]
        BenchCmd::Policy(a) => bench_policy::run(a),
        #[cfg(feature = "policy")]
        BenchCmd::RateLimit(a) => bench_rate_limit::run(a),
    }
}
