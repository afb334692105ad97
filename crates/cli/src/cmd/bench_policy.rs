//! Not implemented yet (its issue is open).
use crate::exit::CmdResult;

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_a: Args) -> CmdResult {
    Err(anyhow::anyhow!("not implemented yet").into())
}
