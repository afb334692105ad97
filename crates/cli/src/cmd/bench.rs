//! `nena bench ...`: dispatches to the benchmark of each concern.
use crate::exit::CmdResult;
use clap::Subcommand;

#[cfg(feature = "openssl")]
#[path = "bench_codec.rs"]
mod bench_codec;
#[path = "bench_emulation.rs"]
mod bench_emulation;
#[cfg(feature = "policy")]
#[path = "bench_policy.rs"]
mod bench_policy;
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
    /// Per-packet cost of each eBPF selector, actor and chain.
    #[cfg(feature = "policy")]
    Policy(bench_policy::Args),
}

pub fn run(cmd: BenchCmd) -> CmdResult {
    match cmd {
        #[cfg(feature = "openssl")]
        BenchCmd::Codec(a) => bench_codec::run(a),
        BenchCmd::Transfer(a) => bench_transfer::run(a),
        BenchCmd::Emulation(a) => bench_emulation::run(a),
        #[cfg(feature = "policy")]
        BenchCmd::Policy(a) => bench_policy::run(a),
    }
}
