//! `nena lab exec HOST -- CMD`: run a command inside one of the lab's hosts.
use super::args::{parse_host, Common};
use crate::exit::CmdResult;
use clap::Args;
use nena_lab::{Host, Lab};

#[derive(Args, Debug)]
pub struct ExecArgs {
    #[command(flatten)]
    pub common: Common,
    /// client, router, server, or lan (a lab built with `--lan`).
    #[arg(value_parser = parse_host)]
    pub host: Host,
    /// The command and its arguments (after `--`).
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub cmd: Vec<String>,
}

pub(super) fn exec(a: ExecArgs) -> CmdResult {
    use std::os::unix::process::CommandExt;
    let lab = Lab::open(&a.common.prefix)?;
    lab.require_host(a.host)?;
    let mut cmd = lab.command(a.host, &a.cmd[0], &a.cmd[1..]);
    // Replace ourselves: the command's exit status (and signals, and the terminal) are its own.
    let err = cmd.exec();
    Err(anyhow::Error::from(err)
        .context(format!("cannot run `ip netns exec {}`", lab.netns(a.host)))
        .into())
}
