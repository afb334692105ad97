//! `nena send FILE --to SERVER`: its arguments and its report; the name is checked by
//! nena-transport's `app::files`, the transfer is its `app::file_client`.
use super::client::{check_client, metered_guard, print_json, ClientCommon};
use super::parse::parse_server;
use super::report::{self, Bar};
use crate::exit::{CmdResult, Exit};
use nena_transport::app::{file_client, files};
use nena_transport::resolve::ServerAddr;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct SendArgs {
    /// The file to send.
    pub file: PathBuf,
    /// The nena server (a name is resolved only through a trusted interface: --resolver).
    #[arg(long, value_name = "HOST:PORT", value_parser = parse_server)]
    pub to: ServerAddr,
    /// Name to store the file under (default: the file's own name).
    #[arg(long)]
    pub name: Option<String>,
    /// No progress bar.
    #[arg(long)]
    pub no_progress: bool,
    #[command(flatten)]
    pub common: ClientCommon,
}

pub fn send(a: SendArgs) -> CmdResult {
    check_client(&a.common)?;
    let name = files::send_name(&a.file, a.name.as_deref()).map_err(Exit::usage)?;
    let mut opts = a.common.options(&a.to, false)?;
    let _metered = metered_guard(&a.common)?;
    let _mpc = a.common.attach_mpc(&mut opts)?;
    let show = !a.no_progress && !a.common.json;
    let bar = Bar::new(show);
    let report =
        crate::runtime::block_on_interruptible(file_client::send(&opts, &a.file, &name, &bar))?;
    if a.common.json {
        print_json(&report)
    } else {
        println!("{}", report::transfer_line(&report));
        Ok(())
    }
}
