//! What the servers (`nena serve`, `nena proxy server`) and the other long-running commands
//! share: the server options ([`ServerCommon`]) and key, `--config`, `--metrics`, and the
//! startup lines.
use super::parse::{parse_addr, parse_modes, parse_secs};
use crate::exit::Exit;
use anyhow::anyhow;
use nena_proto::Mode;
use nena_transport::conn::settings::{congestion_control, dedup_modes, token_refused};
use nena_transport::conn::AcceptOptions;
use nena_transport::keys;
use nena_transport::ops::metrics::{self, Metrics, Role};
use nena_transport::ops::status::{self, ControlSocket, Watch};
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Options of the servers (`serve`, `proxy server`).
#[derive(clap::Args, Debug, Clone)]
pub struct ServerCommon {
    /// Accepted modes, most preferred first (comma-separated or repeated): aead, stream,
    /// kato (the papers' obfuscation, not encryption), plain (only when named); or kato-mpc
    /// alone (the papers' negotiation on the SYN: attaches BPF programs to the listening
    /// address's interfaces while it runs; no hello).
    #[arg(long, default_value = "aead,stream,kato", value_parser = parse_modes)]
    pub mode: Vec<Vec<Mode>>,
    /// Testing only: --mode kato-mpc without attaching the programs (this side never agrees).
    #[arg(long, hide = true)]
    pub debug_mpc_off: bool,
    /// --mode kato-mpc: serve in the clear a client whose negotiation did not complete (it
    /// did not ask, or did not confirm the consent). WARNING: its bytes then cross every
    /// path in the clear; by default such a connection is closed unread.
    #[arg(long)]
    pub allow_plain: bool,
    /// Accept clients whose connection fell back to plain TCP.
    #[arg(long)]
    pub allow_fallback: bool,
    /// Grant no tickets and resume no session: every session makes a full handshake (by
    /// default a client may resume with a ticket this process granted, for up to 10 minutes
    /// and 256 sessions after a full handshake; docs/PROTOCOL.md, "Resumed sessions").
    #[arg(long)]
    pub no_resume: bool,
    /// Sessions served at once (more wait in the listen backlog).
    #[arg(long, default_value = "4096")]
    pub max_sessions: usize,
    /// Seconds a client has to complete the nena handshake.
    #[arg(long, default_value = "10", value_parser = parse_secs)]
    pub handshake_timeout: Duration,
    /// Congestion control of this command's MPTCP sockets (every subflow): a name the
    /// kernel has registered, e.g. cubic, reno, or nena_lia / nena_olia / nena_balia /
    /// nena_ewtcp after `nena cc load` (lia, olia, balia, ewtcp are accepted for those).
    /// Default: the namespace's, except that bbr gives way to cubic (the kernel's MPTCP
    /// scheduler misjudges subflows on BBR's pacing rates; docs/BENCHMARKS.md, "Peers").
    #[arg(long, value_name = "NAME")]
    pub cc: Option<String>,
    /// Serve OpenMetrics text (sessions by mode and outcome, bytes per path, refusals,
    /// integrity failures, subflow events, handshake times) at http://ADDR:PORT/metrics
    /// for Prometheus (docs/OPERATIONS.md).
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_addr)]
    pub metrics: Option<SocketAddr>,
    #[command(flatten)]
    pub control: ControlArgs,
    /// The server's long-term key (Ed25519, PKCS#8 PEM), which signs every handshake of aead
    /// and stream and which clients pin; created (mode 0600) if missing. Servers of a fleet
    /// behind one address share one file (docs/DEPLOY.md). Default: server_key in the state
    /// directory (a systemd unit's $STATE_DIRECTORY, else $XDG_STATE_HOME/nena, else
    /// ~/.local/state/nena).
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<PathBuf>,
}

/// The server key of `--key-file FILE` (or the default file), created if missing.
pub(crate) fn server_key(key_file: &Option<PathBuf>) -> Result<nena_proto::ServerKey, Exit> {
    let path = match key_file {
        Some(p) => p.clone(),
        None => {
            keys::default_key_file().map_err(|e| Exit::usage(anyhow!("{e} (--key-file FILE)")))?
        }
    };
    let (key, made) = keys::load_or_create_key(&path).map_err(Exit::usage)?;
    let shown = nena_proto::KeyText(&key.public()).to_string();
    if made {
        log::warn!(
            "created the server key {} (public key {shown})",
            path.display()
        );
    }
    log::info!(
        "server key {shown} (from {}; clients pin it)",
        path.display()
    );
    Ok(key)
}

impl ServerCommon {
    /// How to accept sessions; `token`: the server requires an access token
    /// (`--token-file`), which only aead and stream may carry ([`token_refused`]): the default
    /// modes then leave kato out, and modes named with kato, kato-mpc or plain are refused.
    pub(super) fn accept(&self, raw: bool, token: bool) -> Result<AcceptOptions, Exit> {
        let congestion = congestion_control(self.cc.as_deref())?;
        let mut modes = dedup_modes(&self.mode.concat());
        if token && !raw {
            if modes == [Mode::Aead, Mode::Stream, Mode::Kato] {
                modes.retain(|m| *m != Mode::Kato);
                log::info!("--token-file: kato left out of the default modes (the token would cross kato's scrambling, which reads without a key)");
            }
            if let Some(e) = token_refused(&modes) {
                return Err(e.into());
            }
        }
        let key = match !raw && modes.iter().any(|m| m.is_cryptographic()) {
            true => Some(server_key(&self.key_file)?),
            false => None,
        };
        Ok(AcceptOptions {
            key,
            congestion,
            modes,
            allow_fallback: self.allow_fallback,
            raw,
            handshake_timeout: self.handshake_timeout,
            buffer: nena_transport::stream::BULK_BUF,
            mpc: None,
            allow_plain: self.allow_plain,
            resumption: (!self.no_resume).then(nena_transport::conn::ServerTickets::default),
        })
    }

    /// `--mode kato-mpc`: the programs on the interfaces of `listen`, and their lookup.
    pub(super) fn attach_mpc(
        &self,
        accept: &mut AcceptOptions,
        listen: SocketAddr,
    ) -> Result<Option<super::mpc::Attached>, Exit> {
        if !accept.modes.contains(&Mode::KatoMpc) {
            return Ok(None);
        }
        if accept.modes.len() > 1 {
            return Err(Exit::usage(anyhow!(
                "--mode kato-mpc cannot be combined with other modes (it has no hello)"
            )));
        }
        Ok(
            match super::mpc::attach_server(listen, self.debug_mpc_off)? {
                Some((a, l)) => {
                    accept.mpc = Some(l);
                    Some(a)
                }
                None => None,
            },
        )
    }
}

/// `--config FILE` of the long-running commands; the file is read before clap parses
/// (crate::config), so this field only documents the flag and names the file in the log.
#[derive(clap::Args, Debug, Clone)]
pub struct ConfigFile {
    /// Read options from FILE (TOML): the keys are this command's long flags without the
    /// dashes, e.g. `listen = "0.0.0.0:4433"`, `mode = ["aead", "stream"]`,
    /// `overwrite = true`. Flags on the command line override the file; an unknown key is
    /// an error.
    #[arg(long, value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub config: Option<PathBuf>,
}

impl ConfigFile {
    pub(super) fn log(&self) {
        if let Some(f) = &self.config {
            log::info!("options from {}", f.display());
        }
    }
}

pub(super) fn announce(what: &str, addr: SocketAddr) {
    println!("{what} listening on {addr}");
    let _ = std::io::stdout().flush();
}

/// The modes as people read them, for the startup line: `aead (encrypted and authenticated),
/// kato (the papers' obfuscation, not encryption)`.
pub(super) fn labels(modes: &[Mode]) -> String {
    modes
        .iter()
        .map(|m| m.label())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `--control PATH`, `--no-control`: where `nena status` asks a long-running command.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ControlArgs {
    /// The control socket `nena status` asks (owner-only). Default: ROLE-PID.sock in
    /// /run/nena/control (root), else $XDG_RUNTIME_DIR/nena, else /tmp/nena-UID.
    #[arg(long, value_name = "PATH", conflicts_with = "no_control")]
    pub control: Option<PathBuf>,
    /// No control socket (`nena status` does not see this command).
    #[arg(long)]
    pub no_control: bool,
    /// Serve a live status page at http://ADDR:PORT/ (per path throughput over the last 5
    /// minutes, RTT, links and their events, sessions, refusals). A loopback address unless
    /// --status-token-file is given.
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_addr)]
    pub status: Option<SocketAddr>,
    /// The token the status page's URL must carry (`/?token=...`), 16 bytes or more (e.g.
    /// `openssl rand -hex 24 > FILE`); needed for a --status address that is not loopback.
    #[arg(long, value_name = "FILE", requires = "status")]
    pub status_token_file: Option<PathBuf>,
}

/// A long-running command's counters, where they are served (`--metrics`), and its control
/// socket (`--control`) with what `nena status` reads of them.
pub(super) struct Counters {
    pub endpoint: Option<SocketAddr>,
    pub control: Option<PathBuf>,
    /// `--control` was given (a socket that cannot be made then fails the command; the
    /// default one is only warned about).
    pub control_given: bool,
    /// None: neither `--metrics` nor a control socket, so nothing counts.
    pub metrics: Option<Arc<Metrics>>,
    /// With a control socket or a status page.
    watch: Option<Arc<Watch>>,
    /// `--status`, and its token.
    status: Option<(SocketAddr, Option<PathBuf>)>,
}

impl Counters {
    /// What `nena status` reads (with a control socket), for the command to tell it more.
    pub fn watch(&self) -> Option<&Arc<Watch>> {
        self.watch.as_ref()
    }

    /// A client's lines for `nena status`: its server, its offer, the server key it
    /// expects (read at each ask: the first contact pins one) and its interfaces.
    pub fn tell_client(
        &self,
        common: &super::client::ClientCommon,
        opts: &nena_transport::conn::ClientOptions,
    ) {
        let Some(w) = &self.watch else { return };
        w.tell("server", opts.remote.to_string());
        w.tell("offering", labels(&opts.modes));
        if let Some(check) = opts.server_key.clone() {
            w.tell_live("server key", move || check.describe());
        }
        w.watch_links(&common.link_conf());
    }
}

/// The counters of a command in `role`, served at `endpoint` (if given) and to
/// `nena status` on its control socket (unless `--no-control`).
pub(super) fn counters(
    endpoint: Option<SocketAddr>,
    control: &ControlArgs,
    role: Role,
) -> Counters {
    let resolved = (!control.no_control).then(|| {
        control.control.clone().unwrap_or_else(|| {
            status::socket_path(&status::default_dir(), role.label(), std::process::id())
        })
    });
    let watched = resolved.is_some() || control.status.is_some();
    let metrics = (endpoint.is_some() || watched).then(|| Metrics::new(role));
    let watch = watched.then(|| metrics.clone().map(Watch::new)).flatten();
    Counters {
        endpoint,
        control_given: control.control.is_some(),
        control: resolved,
        metrics,
        watch,
        status: control
            .status
            .map(|a| (a, control.status_token_file.clone())),
    }
}

/// What [`start_metrics`] started: where the metrics are served, the control socket (kept
/// until the command ends).
pub(super) struct Started {
    pub at: Option<SocketAddr>,
    watch: Option<Arc<Watch>>,
    _control: Option<ControlSocket>,
    /// The status page's address, served until the command ends.
    page: Option<SocketAddr>,
    _page: Option<AbortOnDrop>,
}

/// A task aborted when this is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Started {
    /// The startup lines ([`announce_with`]); `nena status` shows the address too.
    pub fn announce(&self, what: &str, addr: SocketAddr) {
        if let Some(w) = &self.watch {
            w.tell("listening on", addr.to_string());
        }
        announce_with(what, addr, self.at);
        if let Some(p) = self.page {
            println!("status page at http://{p}/");
            let _ = std::io::stdout().flush();
        }
    }
}

/// Opens the metrics endpoint and the control socket on the command's runtime (before its
/// own listener, so that a scraper or `nena status` can rely on them once the command says
/// it listens); with a control socket, reads the counters every second for throughput.
pub(super) async fn start_metrics(c: &Counters, what: &str) -> anyhow::Result<Started> {
    let at = match (c.endpoint, &c.metrics) {
        (Some(addr), Some(m)) => {
            let listener = metrics::bind(addr).await?;
            let at = listener.local_addr()?;
            tokio::spawn(metrics::serve(listener, m.clone()));
            Some(at)
        }
        _ => None,
    };
    let control = match (&c.control, &c.watch) {
        (Some(path), Some(watch)) => match status::serve_control(path, watch.clone()).await {
            Ok(s) => {
                log::info!("status: nena status --control {}", path.display());
                Some(s)
            }
            Err(e) if !c.control_given => {
                log::warn!("no control socket ({e:#}): `nena status` will not see this command");
                None
            }
            Err(e) => return Err(e),
        },
        _ => None,
    };
    let (page, page_task) = match (&c.status, &c.watch) {
        (Some((addr, token_file)), Some(watch)) => {
            let token = match token_file {
                Some(f) => {
                    Some(keys::load_token(f).map_err(|e| anyhow!("--status-token-file: {e:#}"))?)
                }
                None => None,
            };
            let listener = status::page::bind(*addr, token.as_ref()).await?;
            let at = listener.local_addr()?;
            let task = tokio::spawn(status::page::serve(listener, watch.clone(), token));
            (Some(at), Some(AbortOnDrop(task)))
        }
        _ => (None, None),
    };
    // Read only when something serves it.
    let watch = c
        .watch
        .clone()
        .filter(|_| control.is_some() || page.is_some());
    if let Some(w) = &watch {
        w.tell("command", what);
        if let Some(at) = at {
            w.tell("metrics", format!("http://{at}/metrics"));
        }
        if let Some(p) = page {
            w.tell("status page", format!("http://{p}/"));
        }
        tokio::spawn(w.clone().run());
    }
    Ok(Started {
        at,
        watch,
        _control: control,
        page,
        _page: page_task,
    })
}

/// The startup line, then where the metrics are served (if they are).
pub(super) fn announce_with(what: &str, addr: SocketAddr, metrics: Option<SocketAddr>) {
    announce(what, addr);
    if let Some(m) = metrics {
        println!("metrics (OpenMetrics) at http://{m}/metrics");
        let _ = std::io::stdout().flush();
    }
}
