//! `nena policy ...` (its issue is open).
use crate::exit::CmdResult;
use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum PolicyCmd {
    Show,
}

pub fn run(_c: PolicyCmd) -> CmdResult {
    Err(anyhow::anyhow!("not implemented yet").into())
}
