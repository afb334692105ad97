//! `nena lab ...` (its issue is open).
use crate::exit::CmdResult;
use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum LabCmd {
    Up,
    Down,
    Status,
}

pub fn run(_c: LabCmd) -> CmdResult {
    Err(anyhow::anyhow!("not implemented yet").into())
}
