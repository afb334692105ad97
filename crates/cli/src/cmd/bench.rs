//! `nena bench ...`: dispatches to the benchmark of each concern.
use crate::exit::CmdResult;
use clap::Subcommand;

#[path = "bench_codec.rs"]
mod bench_codec;
#[path = "bench_policy.rs"]
mod bench_policy;
#[path = "bench_transfer.rs"]
mod bench_transfer;

#[derive(Subcommand, Debug)]
pub enum BenchCmd {
    /// The papers' Table II on this machine, with modern baselines.
    Codec(bench_codec::Args),
    /// Goodput of plain MPTCP, nena plain and nena kato over the lab's two paths.
    Transfer(bench_transfer::Args),
    /// Per-packet cost of each eBPF selector, actor and chain.
    Policy(bench_policy::Args),
}

pub fn run(cmd: BenchCmd) -> CmdResult {
    match cmd {
        BenchCmd::Codec(a) => bench_codec::run(a),
        BenchCmd::Transfer(a) => bench_transfer::run(a),
        BenchCmd::Policy(a) => bench_policy::run(a),
    }
}
