//! `nena key show` (a server's public key, for clients' `--server-key`) and `nena
//! known-servers list|forget` (the client's pinned server keys); the files are
//! nena-transport's `keys`.

use crate::exit::{CmdResult, Exit};
use anyhow::anyhow;
use nena_proto::KeyText;
use nena_transport::keys::{self, KnownServers};
use std::path::PathBuf;

#[derive(clap::Subcommand, Debug)]
pub enum KeyCmd {
    /// Print the server's public key (base64), creating the key file if it is missing.
    Show {
        /// The server's key file (as `nena serve --key-file`; default: server_key in the
        /// state directory).
        #[arg(long, value_name = "FILE")]
        key_file: Option<PathBuf>,
    },
}

#[derive(clap::Subcommand, Debug)]
pub enum KnownServersCmd {
    /// List the pinned servers: NAME ed25519 KEY.
    List {
        #[arg(long, value_name = "FILE")]
        known_servers: Option<PathBuf>,
    },
    /// Forget the key pinned for NAME (HOST:PORT as given to --to, --from, --via), so that the
    /// next contact pins the key the server proves then. Do it only when you know the
    /// server's key changed.
    Forget {
        /// The server, HOST:PORT.
        name: String,
        #[arg(long, value_name = "FILE")]
        known_servers: Option<PathBuf>,
    },
}

pub fn key(c: KeyCmd) -> CmdResult {
    match c {
        KeyCmd::Show { key_file } => {
            let key = super::server::server_key(&key_file)?;
            println!("{}", KeyText(&key.public()));
            Ok(())
        }
    }
}

fn known(file: Option<PathBuf>) -> Result<KnownServers, Exit> {
    let path = match file {
        Some(f) => f,
        None => keys::default_known_servers()
            .map_err(|e| Exit::usage(anyhow!("{e} (--known-servers FILE)")))?,
    };
    Ok(KnownServers::new(path))
}

pub fn known_servers(c: KnownServersCmd) -> CmdResult {
    match c {
        KnownServersCmd::List { known_servers } => {
            for (name, key) in known(known_servers)?.entries()? {
                println!("{name} ed25519 {}", KeyText(&key));
            }
            Ok(())
        }
        KnownServersCmd::Forget {
            name,
            known_servers,
        } => {
            let k = known(known_servers)?;
            let name = name.to_ascii_lowercase();
            match k.forget(&name)? {
                0 => Err(Exit::usage(anyhow!(
                    "{name} is not in {}",
                    k.path().display()
                ))),
                _ => {
                    eprintln!(
                        "forgot {name} in {}: its next contact pins the key it proves then",
                        k.path().display()
                    );
                    Ok(())
                }
            }
        }
    }
}
