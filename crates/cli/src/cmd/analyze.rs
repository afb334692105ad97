//! `nena eavesdrop` (its issue is open).
use crate::exit::CmdResult;

#[derive(clap::Args, Debug)]
pub struct EavesdropArgs {}

pub fn eavesdrop(_a: EavesdropArgs) -> CmdResult {
    Err(anyhow::anyhow!("not implemented yet").into())
}
