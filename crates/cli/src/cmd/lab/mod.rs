//! `nena lab ...`: the network-namespace lab (client with a trusted and an untrusted link,
//! router, server). A thin layer over the `nena-lab` crate.
use crate::exit::{CmdResult, Exit};
use clap::Subcommand;
use nena_lab::Lab;

mod args;
mod capture;
mod exec;
pub mod run;
mod set;
mod status;
#[cfg(feature = "policy")]
mod tamper;
mod up;

use args::Common;

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("member").required(true).args(["out", "in"])))]
pub struct FleetArgs {
    #[command(flatten)]
    pub common: Common,
    /// The fleet server, 1 to N.
    pub server: u8,
    /// Take it out of the balancer.
    #[arg(long)]
    pub out: bool,
    /// Put it back.
    #[arg(long = "in")]
    pub r#in: bool,
}
use capture::{CaptureArgs, CaptureStopArgs};
use exec::ExecArgs;
use set::SetArgs;
use status::StatusArgs;
#[cfg(feature = "policy")]
use tamper::TamperArgs;
use up::UpArgs;

#[derive(Subcommand, Debug)]
pub enum LabCmd {
    /// Build the lab (again: reconciles an existing or half-built lab).
    Up(Box<UpArgs>),
    /// Remove the lab: captures and processes inside it, namespaces, veths, qdiscs, state.
    Down(Common),
    /// Show hosts, links, addresses, rates, link state, MPTCP settings and captures.
    Status(StatusArgs),
    /// Change a link: rate limit, or take it down / bring it up.
    Set(SetArgs),
    /// Capture a link to a pcap file (tcpdump in the link's namespace).
    Capture(CaptureArgs),
    /// Stop background captures (of one link, or all).
    CaptureStop(CaptureStopArgs),
    /// Run a command inside a host: `nena lab exec client -- ip addr`.
    Exec(ExecArgs),
    /// Take a fleet server out of the router's balancer (`--out`: no new connection goes to
    /// it, those it has go on) or put it back (`--in`).
    Fleet(FleetArgs),
    /// Run a scenario file (links, events, traffic runs) end to end, each run in its own
    /// lab, writing socket samples, plots, DIR/summary.json and the captures the
    /// scenario's `[capture]` section names.
    Run(run::RunArgs),
    /// The relay of the emulated links (started by `nena lab up`, stopped by `down`).
    #[command(hide = true)]
    Relay(Common),
    /// Attack simulator for tests and demonstrations: an active attacker on one link who
    /// flips one payload byte of one TCP segment (keeping the checksum valid).
    #[cfg(feature = "policy")]
    Tamper(TamperArgs),
}

pub fn run(c: LabCmd) -> CmdResult {
    let prefix = match &c {
        LabCmd::Up(a) => &a.common.prefix,
        LabCmd::Down(a) => &a.prefix,
        LabCmd::Status(a) => &a.common.prefix,
        LabCmd::Set(a) => &a.common.prefix,
        LabCmd::Capture(a) => &a.common.prefix,
        LabCmd::CaptureStop(a) => &a.common.prefix,
        LabCmd::Exec(a) => &a.common.prefix,
        LabCmd::Fleet(a) => &a.common.prefix,
        LabCmd::Relay(a) => &a.prefix,
        #[cfg(feature = "policy")]
        LabCmd::Tamper(a) => &a.common.prefix,
        LabCmd::Run(a) => &a.prefix,
    };
    nena_lab::validate_prefix(prefix).map_err(Exit::usage)?;
    match c {
        LabCmd::Up(a) => up::up(*a),
        LabCmd::Down(a) => {
            Lab::down(&a.prefix)?;
            println!("lab `{}` is down", a.prefix);
            Ok(())
        }
        LabCmd::Status(a) => status::status(a),
        LabCmd::Fleet(a) => {
            let lab = Lab::open(&a.common.prefix)?;
            lab.set_fleet_member(a.server, a.r#in)?;
            println!(
                "fleet server s{} is {} the balancer of lab `{}`",
                a.server,
                if a.r#in { "in" } else { "out of" },
                a.common.prefix
            );
            Ok(())
        }
        LabCmd::Set(a) => set::set(a),
        LabCmd::Capture(a) => capture::capture(a),
        LabCmd::CaptureStop(a) => capture::stop(a),
        LabCmd::Exec(a) => exec::exec(a),
        LabCmd::Relay(a) => Ok(nena_lab::emulate::relay_main(&a.prefix)?),
        #[cfg(feature = "policy")]
        LabCmd::Tamper(a) => tamper::tamper(a),
        LabCmd::Run(a) => run::run(&a),
    }
}
