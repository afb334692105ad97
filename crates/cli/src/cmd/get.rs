//! `nena get NAME --from SERVER`: its arguments and its report; the name and destination
//! are checked by nena-transport's `app::files`, the transfer is its `app::file_client`.
use super::client::{check_client, metered_guard, print_json, ClientCommon};
use super::parse::parse_server;
use super::report::{self, Bar};
use crate::exit::{CmdResult, Exit};
use nena_transport::app::{file_client, files};
use nena_transport::resolve::ServerAddr;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct GetArgs {
    /// Name of the file on the server.
    pub name: String,
    /// The nena server (a name is resolved only through a trusted interface: --resolver).
    #[arg(long, value_name = "HOST:PORT", value_parser = parse_server)]
    pub from: ServerAddr,
    /// Where to write it: a file path or an existing directory (default: ./NAME).
    #[arg(long, short)]
    pub out: Option<PathBuf>,
    /// Replace the destination if it exists.
    #[arg(long)]
    pub overwrite: bool,
    /// No progress bar.
    #[arg(long)]
    pub no_progress: bool,
    #[command(flatten)]
    pub common: ClientCommon,
}

pub fn get(a: GetArgs) -> CmdResult {
    check_client(&a.common)?;
    let (name, dest) = files::get_dest(&a.name, a.out.as_deref()).map_err(Exit::usage)?;
    let mut opts = a.common.options(&a.from, false)?;
    let _metered = metered_guard(&a.common)?;
    let _mpc = a.common.attach_mpc(&mut opts)?;
    let show = !a.no_progress && !a.common.json;
    let bar = Bar::new(show);
    let report = crate::runtime::block_on_interruptible(file_client::get(
        &opts,
        &name,
        &dest,
        a.overwrite,
        &bar,
    ))?;
    if a.common.json {
        print_json(&report)
    } else {
        println!("{} -> {}", report::transfer_line(&report), dest.display());
        Ok(())
    }
}
