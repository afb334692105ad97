//! `nena codec scramble|descramble` (being written).
use crate::exit::CmdResult;
use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum CodecCmd {
    Scramble,
    Descramble,
}

pub fn run(_c: CodecCmd) -> CmdResult {
    Err(anyhow::anyhow!("not implemented yet").into())
}
