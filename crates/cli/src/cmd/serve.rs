//! `nena serve`: its arguments, the checks of its directory and key, and its startup line;
//! the file server is nena-transport's `app::file_server`.
use super::parse::{parse_addr, parse_bytes, parse_grace};
use super::server::{counters, labels, start_metrics, ConfigFile, ServerCommon};
use crate::exit::{CmdResult, Exit};
use anyhow::anyhow;
use nena_transport::app::file_server::{self, ServeOptions};
use nena_transport::app::files::FileServerConfig;
use nena_transport::app::request::SessionConfig;
use nena_transport::keys;
use nena_transport::ops::access::{self, Access, Limits};
use nena_transport::ops::metrics::Role;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on (MPTCP).
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_addr)]
    pub listen: SocketAddr,
    /// Directory files are stored in and served from.
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// Replace existing files when a client sends one with the same name.
    #[arg(long)]
    pub overwrite: bool,
    /// Refuse uploads larger than SIZE (e.g. 100M, 4G). Uploads that do not fit in the free
    /// space of DIR are refused in any case.
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    pub max_file_size: Option<u64>,
    /// Refuse perf tests asking for more than SIZE per direction (default 100G).
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes, default_value = "100G")]
    pub perf_max_bytes: u64,
    /// Refuse perf tests asking for more than SECS seconds, and cut any perf test still
    /// running after SECS seconds (plus 5 for its end), whatever its client sends (default 600).
    #[arg(long, value_name = "SECS", default_value = "600")]
    pub perf_max_time: u64,
    /// Serve downloads only (refuse `nena send`).
    #[arg(long, conflicts_with = "write_only")]
    pub read_only: bool,
    /// Accept uploads only (refuse `nena get`).
    #[arg(long)]
    pub write_only: bool,
    /// Require the access token in FILE (16 to 255 bytes; surrounding whitespace ignored)
    /// with every request; clients pass the same file with --token-file.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Benchmark baseline: no nena handshake, no protection, perf tests only
    /// (the plain-MPTCP column of `nena bench transfer`; use `nena perf --raw`).
    #[arg(long)]
    pub raw: bool,
    /// On SIGTERM or Ctrl-C, let the transfers in progress go on for up to SECS seconds
    /// before aborting them (an aborted upload is told "server shutting down" and its
    /// partial file removed). Default 0: abort at once.
    #[arg(long, value_name = "SECS", default_value = "0", value_parser = parse_grace)]
    pub grace: Duration,
    #[command(flatten)]
    pub common: ServerCommon,
    #[command(flatten)]
    pub config: ConfigFile,
}

pub fn serve(a: ServeArgs) -> CmdResult {
    a.config.log();
    let meta = std::fs::metadata(&a.dir)
        .map_err(|e| Exit::usage(anyhow!("--dir {}: {e}", a.dir.display())))?;
    if !meta.is_dir() {
        return Err(Exit::usage(anyhow!(
            "--dir {} is not a directory",
            a.dir.display()
        )));
    }
    // Never serve the server's own key (a --dir of the state directory, or a --key-file in
    // --dir): refused before anything is read, made or bound.
    if !a.raw {
        let key = match &a.common.key_file {
            Some(p) => Some(p.clone()),
            None => keys::default_key_file().ok(),
        };
        if let Some(key) = key {
            if keys::served_within(&a.dir, &key).map_err(Exit::usage)? {
                return Err(Exit::usage(anyhow!(
                    "--dir {} holds the server key {}: the server would serve its own private \
                     key; keep the key outside the directory served (--key-file FILE)",
                    a.dir.display(),
                    key.display()
                )));
            }
        }
    }
    let token = match &a.token_file {
        Some(_) if a.raw => {
            return Err(Exit::usage(anyhow!(
            "--token-file needs nena sessions: a --raw listener would take the token in the clear"
        )))
        }
        Some(p) => Some(access::load_token(p).map_err(Exit::usage)?),
        None => None,
    };
    let access = match (a.read_only, a.write_only) {
        (true, _) => Access::ReadOnly,
        (_, true) => Access::WriteOnly,
        _ => Access::ReadWrite,
    };
    let mut rules = Vec::new();
    match access {
        Access::ReadOnly => rules.push("read-only".to_string()),
        Access::WriteOnly => rules.push("write-only".to_string()),
        Access::ReadWrite => {}
    }
    if let Some(m) = a.max_file_size {
        rules.push(format!(
            "files up to {}",
            nena_transport::text::units::human(m)
        ));
    }
    if token.is_some() {
        rules.push("access token required".to_string());
    }
    // Partial files of an earlier run that was killed (SIGKILL, a crash): no live session
    // leaves its .part untouched this long (an idle upload is dropped after IDLE_TIMEOUT).
    let stale_after = 2 * nena_transport::app::file_server::IDLE_TIMEOUT;
    match nena_transport::app::files::remove_stale_parts(&a.dir, stale_after) {
        Ok(0) => {}
        Ok(n) => log::info!(
            "removed {n} partial file(s) older than {stale_after:?} from {}",
            a.dir.display()
        ),
        Err(e) => log::warn!(
            "cannot look for stale partial files in {}: {e}",
            a.dir.display()
        ),
    }
    let mut accept = a.common.accept(a.raw, token.is_some())?;
    let _mpc = if a.raw {
        None
    } else {
        a.common.attach_mpc(&mut accept, a.listen)?
    };
    let counters = counters(a.common.metrics, &a.common.control, Role::Serve);
    let opts = ServeOptions {
        listen: a.listen,
        accept,
        session: SessionConfig {
            files: FileServerConfig {
                overwrite: a.overwrite,
                max_file_size: a.max_file_size,
                ..FileServerConfig::new(a.dir.clone())
            },
            perf_only: a.raw,
            limits: Limits {
                access,
                token,
                perf: nena_transport::ops::access::PerfCaps {
                    max_bytes: a.perf_max_bytes,
                    max_time: Duration::from_secs(a.perf_max_time),
                },
            },
        },
        max_sessions: a.common.max_sessions,
        grace: a.grace,
        metrics: counters.metrics.clone(),
    };
    let rules = if rules.is_empty() {
        String::new()
    } else {
        format!("; {}", rules.join(", "))
    };
    let what = if a.raw {
        "nena serve (raw baseline, perf only)".to_string()
    } else {
        format!("nena serve ({}{rules})", labels(&opts.accept.modes))
    };
    crate::runtime::block_on(async {
        let started = start_metrics(&counters, &what).await?;
        file_server::serve(opts, |addr| started.announce(&what, addr)).await
    })??;
    Ok(())
}
