//! `nena serve|send|get|perf|proxy` (its issue is open).
use crate::exit::CmdResult;
use clap::Subcommand;

#[derive(clap::Args, Debug)]
pub struct ServeArgs {}
#[derive(clap::Args, Debug)]
pub struct SendArgs {}
#[derive(clap::Args, Debug)]
pub struct GetArgs {}
#[derive(clap::Args, Debug)]
pub struct PerfArgs {}
#[derive(Subcommand, Debug)]
pub enum ProxyCmd {
    Client,
    Server,
}

fn todo() -> CmdResult {
    Err(anyhow::anyhow!("not implemented yet").into())
}
pub fn serve(_a: ServeArgs) -> CmdResult { todo() }
pub fn send(_a: SendArgs) -> CmdResult { todo() }
pub fn get(_a: GetArgs) -> CmdResult { todo() }
pub fn perf(_a: PerfArgs) -> CmdResult { todo() }
pub fn proxy(_c: ProxyCmd) -> CmdResult { todo() }
