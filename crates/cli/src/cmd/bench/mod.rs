//! `nena bench ...`: dispatches to the benchmark of each concern.
use crate::exit::CmdResult;
use clap::Subcommand;

#[cfg(feature = "openssl")]
mod codec;
mod emulation;
#[cfg(feature = "policy")]
mod policy;
mod transfer;

#[derive(Subcommand, Debug)]
pub enum BenchCmd {
    /// The papers' Table II on this machine, with modern baselines.
    #[cfg(feature = "openssl")]
    Codec(codec::Args),
    /// Goodput of plain MPTCP, nena plain and nena kato over the lab's two paths.
    Transfer(transfer::Args),
    /// The link emulator's fidelity: RTT against the configured delay up to 200 Mbit/s, the
    /// relay's CPU per Mbit/s, loss against the binomial 99% interval.
    Emulation(emulation::Args),
    /// Per-packet cost of each eBPF selector, actor and chain.
    #[cfg(feature = "policy")]
    Policy(policy::Args),
}

pub fn run(cmd: BenchCmd) -> CmdResult {
    match cmd {
        #[cfg(feature = "openssl")]
        BenchCmd::Codec(a) => codec::run(a),
        BenchCmd::Transfer(a) => transfer::run(a),
        BenchCmd::Emulation(a) => emulation::run(a),
        #[cfg(feature = "policy")]
        BenchCmd::Policy(a) => policy::run(a),
    }
}
