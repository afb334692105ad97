//! `nena serve|send|get|perf`: argument parsing and output; the work is in nena-transport.
//! What `nena proxy` shares with them (client and server options, parsers, metrics) is
//! here too.
use crate::cmd::report::{self, Bar};
use crate::exit::{CmdResult, Exit};
use anyhow::anyhow;
use nena_mptcp::{PathPolicy, PathSpec};
use nena_proto::{Mode, Suite};
use nena_transport::app::client::{self, PerfParams};
use nena_transport::app::files::FileServerConfig;
use nena_transport::app::server::{self, ServeOptions};
use nena_transport::app::session::SessionConfig;
use nena_transport::conn::{AcceptOptions, ClientOptions};
use nena_transport::ops::access::{self, Access, Limits};
use nena_transport::ops::metrics::{self, Metrics, Role};
use nena_transport::resolve::{self, ResolverConfig, ServerAddr};
use nena_transport::server_keys::{self, KnownServers, ServerKeyCheck};
use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A server named by a client (`--to`, `--from`, `--via`): `IP:PORT` or `HOST:PORT`. A
/// name is resolved later, by [`ClientCommon::options`], only through a trusted interface.
pub(crate) fn parse_server(s: &str) -> Result<ServerAddr, String> {
    s.parse()
}

/// A local socket address (`--listen`, `--metrics`) or a server's own target: `IP:PORT`
/// or `HOST:PORT` (resolved once, by the system's resolver: no untrusted path is involved
/// on the serving side).
pub(crate) fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    s.to_socket_addrs()
        .map_err(|e| format!("`{s}` is not ADDR:PORT ({e})"))?
        .next()
        .ok_or_else(|| format!("`{s}` resolves to no address"))
}

/// Modes: `aead`, `stream`, `kato`, `plain`, or a comma-separated preference list.
fn parse_modes(s: &str) -> Result<Vec<Mode>, String> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let m: Mode = part
            .parse()
            .map_err(|e: nena_proto::ParseModeError| e.to_string())?;
        if !out.contains(&m) {
            out.push(m);
        }
    }
    Ok(out)
}

/// A cipher suite: `aes-128` (or `aes`) or `chacha20` (or `chacha`).
fn parse_suite(s: &str) -> Result<Suite, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "aes-128" | "aes128" | "aes" => Ok(Suite::Aes128),
        "chacha20" | "chacha" => Ok(Suite::ChaCha20),
        _ => Err(format!("unknown cipher `{s}` (aes-128 or chacha20)")),
    }
}

/// A byte count (`64K`, `100M`, `1G`: binary units): the one parser of sizes, shared with
/// scenario files.
pub(crate) use nena_transport::units::parse_bytes;

/// Seconds, fractional allowed, > 0.
fn parse_secs(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !(v > 0.0 && v < 1e7) {
        return Err(format!("`{s}`: seconds must be > 0"));
    }
    Ok(Duration::from_secs_f64(v))
}

/// Seconds of a grace period: 0 or more.
pub(crate) fn parse_grace(s: &str) -> Result<Duration, String> {
    match s.trim().parse::<f64>() {
        Ok(0.0) => Ok(Duration::ZERO),
        _ => parse_secs(s),
    }
}

fn dedup(v: Vec<Mode>) -> Vec<Mode> {
    let mut out: Vec<Mode> = Vec::new();
    for m in v {
        if !out.contains(&m) {
            out.push(m);
        }
    }
    out
}

/// Options every client command shares.
#[derive(clap::Args, Debug, Clone)]
pub struct ClientCommon {
    /// A trusted local path: IP address or interface (repeatable). The connection's first
    /// subflow, the handshake and the first data leave from a trusted address.
    #[arg(long, value_name = "ADDR|IFACE")]
    pub trusted: Vec<PathSpec>,
    /// An untrusted local path (repeatable); it carries data only after the handshake.
    #[arg(long, value_name = "ADDR|IFACE")]
    pub untrusted: Vec<PathSpec>,
    /// A metered path: an interface of a --trusted or --untrusted path that costs per byte
    /// (LTE on a data plan; repeatable). It carries the handshake and the first flight as
    /// always, then data only while no other path can (their links down, their subflows
    /// gone or stalled): MPTCP's backup priority, on both ends. Userspace path manager: per
    /// connection; in-kernel: the host's endpoint for its address (docs/GATEWAY.md).
    #[arg(long, value_name = "IFACE")]
    pub metered: Vec<String>,
    /// Protection mode, or a comma-separated preference list: aead (encrypted and
    /// authenticated), stream (encrypted, no integrity, zero expansion), kato (the papers'
    /// obfuscation, not encryption), plain (unprotected). The default offers aead alone, so a
    /// server can never move this client to a mode without integrity; stream, kato and plain
    /// are offered only when named. Offering kato or plain beside a cryptographic mode is
    /// safe: the server's choice is authenticated. kato-mpc (alone):
    /// the papers' scrambling with their own negotiation, on the SYN, keys from MPTCP's
    /// (attaches BPF programs to the trusted interfaces while it runs; refused if the
    /// server does not agree, unless --allow-plain).
    #[arg(long, default_value = "aead", value_parser = parse_modes)]
    pub mode: Vec<Vec<Mode>>,
    /// Testing only: --mode kato-mpc without attaching the programs (this side never asks).
    #[arg(long, hide = true)]
    pub debug_mpc_off: bool,
    /// --mode kato-mpc: if the negotiation does not complete (the server did not agree, or
    /// a box on the path removed a mark), send in the clear instead of refusing. WARNING:
    /// every byte then crosses every path, untrusted ones included, readable by anyone on
    /// them; by default such a connection is refused before a byte is sent.
    #[arg(long)]
    pub allow_plain: bool,
    /// The cipher of aead and stream: aes-128 (AES-128-GCM / -CTR) or chacha20
    /// (ChaCha20-Poly1305 / ChaCha20). Default: aes-128 where the CPU has AES instructions.
    #[arg(long, value_parser = parse_suite, value_name = "aes-128|chacha20")]
    pub cipher: Option<Suite>,
    /// Testing only: a new aead key every 2^N records (default 23).
    #[arg(long, hide = true, value_name = "N")]
    pub debug_aead_rekey_log2: Option<u8>,
    /// Testing only: a new stream key every 2^N bytes (default 36).
    #[arg(long, hide = true, value_name = "N")]
    pub debug_stream_rekey_log2: Option<u8>,
    /// Accept a connection that fell back to plain TCP (otherwise refused).
    #[arg(long)]
    pub allow_fallback: bool,
    /// Seconds to wait for connect, the first flight's ACK and the server's answer.
    #[arg(long, default_value = "10", value_parser = parse_secs)]
    pub timeout: Duration,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Testing only: append each hello (it holds the session keys!) in hex to FILE. Only in
    /// builds with the non-default cargo feature `debug-dump`.
    #[cfg(feature = "debug-dump")]
    #[arg(long, hide = true, value_name = "FILE")]
    pub debug_dump_first_flight: Option<PathBuf>,
    /// Send the access token in FILE with every request, or at the start of every proxy
    /// session (the server's --token-file; it travels inside the session, protected by its
    /// mode).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Do not re-create a subflow after its link comes back from an outage (userspace PM;
    /// by default nena does, within a round trip of the link being usable again).
    #[arg(long)]
    pub no_recovery: bool,
    /// Congestion control of this command's MPTCP sockets (every subflow): a name the
    /// kernel has registered, e.g. cubic, reno, or nena_lia / nena_olia / nena_balia /
    /// nena_ewtcp after `nena cc load` (lia, olia, balia, ewtcp are accepted for those).
    /// Default: the namespace's, except that bbr gives way to cubic (the kernel's MPTCP
    /// scheduler misjudges subflows on BBR's pacing rates; docs/BENCHMARKS.md, "Peers").
    #[arg(long, value_name = "NAME")]
    pub cc: Option<String>,
    /// Resolve the server's name with this resolver (ADDR or ADDR:PORT), asked only through
    /// a trusted interface. Without it the system's resolvers (/etc/resolv.conf) are asked
    /// only when their route leaves by a trusted interface; a name is never resolved by a
    /// query that could leave by an untrusted path (docs/THREAT-MODEL.md).
    #[arg(long, value_name = "ADDR", value_parser = resolve::parse_resolver)]
    pub resolver: Option<SocketAddr>,
    /// The file of server keys pinned on first contact (trust on first use; a server that
    /// later proves another key is refused before a byte of data). Default: known_servers in
    /// the state directory (a systemd unit's $STATE_DIRECTORY, else $XDG_STATE_HOME/nena,
    /// else ~/.local/state/nena).
    #[arg(long, value_name = "FILE", conflicts_with = "server_key")]
    pub known_servers: Option<PathBuf>,
    /// Accept only this server key (base64 or hex, as `nena key show` prints it on the
    /// server) instead of the known_servers file. Needs aead or stream.
    #[arg(long, value_name = "KEY", value_parser = server_keys::parse_public_key)]
    pub server_key: Option<nena_proto::PublicKey>,
}

/// `--cc NAME`: check that the kernel has it (one line naming the available ones if not)
/// and return the name the kernel knows it by, for the connect or accept options.
fn resolve_cc(cc: &Option<String>) -> Result<Option<String>, Exit> {
    let Some(name) = cc else { return Ok(None) };
    let avail = nena_mptcp::available_congestion_controls().unwrap_or_default();
    // `lia` for `nena_lia`, as `nena cc load` takes them.
    let full = if avail.contains(name) {
        name.clone()
    } else if avail.contains(&format!("nena_{name}")) {
        format!("nena_{name}")
    } else {
        return Err(Exit::usage(anyhow!(
            "--cc {name}: no congestion control of that name is registered (available: {}; `nena cc load lia|olia|balia|ewtcp` adds nena's)",
            avail.join(" ")
        )));
    };
    Ok(Some(full))
}

impl ClientCommon {
    /// `--mode kato-mpc`: the programs on the trusted interfaces, and their lookup.
    pub(super) fn attach_mpc(
        &self,
        opts: &mut ClientOptions,
    ) -> Result<Option<super::mpc::Attached>, Exit> {
        if opts.raw || !opts.modes.contains(&Mode::KatoMpc) {
            return Ok(None);
        }
        if opts.modes.len() > 1 {
            return Err(Exit::usage(anyhow!(
                "--mode kato-mpc cannot be combined with other modes (it has no hello)"
            )));
        }
        Ok(
            match super::mpc::attach_client(&self.trusted, opts.remote, self.debug_mpc_off)? {
                Some((a, l)) => {
                    opts.mpc = Some(l);
                    Some(a)
                }
                None => None,
            },
        )
    }

    /// The server's address: a literal as given; a name resolved only by queries that leave
    /// by a trusted interface (nena-transport's `resolve`), refused with the fix otherwise.
    pub(crate) fn server_addr(&self, server: &ServerAddr) -> Result<SocketAddr, Exit> {
        if let resolve::Host::Ip(ip) = server.host {
            return Ok(SocketAddr::new(ip, server.port));
        }
        let policy = nena_mptcp::PathPolicy {
            trusted: self.trusted.clone(),
            untrusted: self.untrusted.clone(),
        }
        .resolve()
        .map_err(|e| Exit::usage(anyhow!(e)))?;
        let cfg = ResolverConfig::new(self.resolver, self.timeout);
        match resolve::resolve(server, &policy, &cfg) {
            Ok(r) => {
                log::info!("{}", r.describe(server));
                Ok(r.addr)
            }
            Err(e @ resolve::ResolveError::Untrusted { .. }) => Err(Exit::usage(anyhow!(e))),
            Err(e) => Err(Exit::from(anyhow!(e))),
        }
    }

    pub(crate) fn options(&self, server: &ServerAddr, raw: bool) -> Result<ClientOptions, Exit> {
        let congestion = resolve_cc(&self.cc)?;
        let remote = self.server_addr(server)?;
        let token = match &self.token_file {
            Some(_) if raw => {
                return Err(Exit::usage(anyhow!(
                    "--token-file needs a nena session: --raw would send it in the clear"
                )))
            }
            Some(p) => {
                if let Some(e) = token_refused(&self.mode.concat()) {
                    return Err(e);
                }
                Some(access::load_token(p).map_err(Exit::usage)?)
            }
            None => None,
        };
        let modes = dedup(self.mode.concat());
        let server_key = self.server_key_check(server, &modes, raw)?;
        Ok(ClientOptions {
            token,
            server_key,
            suite: self.cipher,
            aead_epoch_log2: self.debug_aead_rekey_log2,
            stream_epoch_log2: self.debug_stream_rekey_log2,
            allow_fallback: self.allow_fallback,
            timeout: self.timeout,
            raw,
            #[cfg(feature = "debug-dump")]
            dump_first_flight: self.debug_dump_first_flight.clone(),
            recover: !self.no_recovery,
            allow_plain: self.allow_plain,
            congestion,
            metered: self.metered.clone(),
            ..ClientOptions::new(
                remote,
                PathPolicy {
                    trusted: self.trusted.clone(),
                    untrusted: self.untrusted.clone(),
                },
                modes,
            )
        })
    }

    /// Which server key to expect: `--server-key`, or the known_servers file (pinned on
    /// first contact). Only with key agreement (aead, stream); none for --raw.
    fn server_key_check(
        &self,
        server: &ServerAddr,
        modes: &[Mode],
        raw: bool,
    ) -> Result<Option<ServerKeyCheck>, Exit> {
        let crypto = !raw && modes.iter().any(|m| m.is_cryptographic());
        if let Some(k) = self.server_key {
            if !crypto {
                return Err(Exit::usage(anyhow!(
                    "--server-key needs a mode with key agreement (aead or stream): kato and \
                     plain have no server key"
                )));
            }
            return Ok(Some(ServerKeyCheck::Given(k)));
        }
        if !crypto {
            return Ok(None);
        }
        let file = match &self.known_servers {
            Some(f) => f.clone(),
            None => server_keys::default_known_servers()
                .map_err(|e| Exit::usage(anyhow!("{e} (--known-servers FILE)")))?,
        };
        Ok(Some(ServerKeyCheck::known(
            server,
            Arc::new(KnownServers::new(file)),
        )))
    }
}

/// `--token-file` with modes that cannot keep the token: kato and kato-mpc (a direction's
/// first bytes, where the token is, read without the key: docs/THREAT-MODEL.md) and plain.
/// One usage line naming the mode, or `None` when every mode is aead or stream.
pub(crate) fn token_refused(modes: &[Mode]) -> Option<Exit> {
    let weak = modes
        .iter()
        .find(|m| !matches!(m, Mode::Aead | Mode::Stream))?;
    let how = match weak {
        Mode::Plain => "in the clear",
        _ => "scrambled, and kato's first bytes read without the key",
    };
    Some(Exit::usage(anyhow!(
        "--token-file is refused with --mode {weak}: the token would cross every path {how}; use aead or stream"
    )))
}

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
        None => server_keys::default_key_file()
            .map_err(|e| Exit::usage(anyhow!("{e} (--key-file FILE)")))?,
    };
    let (key, made) = server_keys::load_or_create_key(&path).map_err(Exit::usage)?;
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
        let congestion = resolve_cc(&self.cc)?;
        let mut modes = dedup(self.mode.concat());
        if token && !raw {
            if modes == [Mode::Aead, Mode::Stream, Mode::Kato] {
                modes.retain(|m| *m != Mode::Kato);
                log::info!("--token-file: kato left out of the default modes (the token would cross kato's scrambling, which reads without a key)");
            }
            if let Some(e) = token_refused(&modes) {
                return Err(e);
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

#[derive(clap::Args, Debug)]
pub struct PerfArgs {
    /// The nena server (`nena serve`; a name is resolved only through a trusted interface).
    #[arg(long, value_name = "HOST:PORT", value_parser = parse_server)]
    pub to: ServerAddr,
    /// Run for this many seconds (default 10).
    #[arg(long, value_parser = parse_secs, conflicts_with = "bytes")]
    pub time: Option<Duration>,
    /// Send this many bytes per direction instead (e.g. 100M).
    #[arg(long, value_parser = parse_bytes)]
    pub bytes: Option<u64>,
    /// The server sends, the client receives.
    #[arg(long, conflicts_with = "bidir")]
    pub reverse: bool,
    /// Both directions at once on the one connection.
    #[arg(long)]
    pub bidir: bool,
    /// Seconds between interval reports (0: none).
    #[arg(long, default_value = "1")]
    pub interval: f64,
    /// Leave the first seconds (slow start) out of the goodput, as iperf3 -O does.
    #[arg(long, value_parser = parse_secs)]
    pub omit: Option<Duration>,
    /// Benchmark baseline: plain MPTCP without nena (the server must run `serve --raw`).
    #[arg(long)]
    pub raw: bool,
    #[command(flatten)]
    pub common: ClientCommon,
}

fn print_json<T: serde::Serialize>(v: &T) -> CmdResult {
    let s = serde_json::to_string(v).map_err(|e| Exit::from(anyhow!(e)))?;
    println!("{s}");
    Ok(())
}

fn announce(what: &str, addr: SocketAddr) {
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

/// `--udp-plane on|off`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum UdpPlane {
    On,
    Off,
}

/// How datagram sessions carry their datagrams (gateway, run, proxy client).
#[derive(clap::Args, Debug, Clone)]
pub struct DatagramArgs {
    /// Carry UDP datagrams on the datagram plane (on: sealed UDP on each path, bound to its
    /// interface, after the session's handshake on the trusted path; inside the session on
    /// a path whose UDP is not confirmed; a proxy server without the plane is carried as
    /// before) or inside the nena session alone (off).
    #[arg(long, value_enum, default_value = "on", value_name = "on|off")]
    pub udp_plane: UdpPlane,
    /// Which datagrams go on every usable path, the first copy kept: auto (real-time flows:
    /// small and paced, DSCP EF/AF4x, or a --realtime-port; the rest on the lowest-latency
    /// path), always, never.
    #[arg(long, default_value = "auto", value_name = "auto|always|never")]
    pub udp_redundancy: nena_proto::dgram::Redundancy,
    /// A destination port whose UDP flows are real-time whatever they look like (repeatable,
    /// at most 16).
    #[arg(long, value_name = "PORT")]
    pub realtime_port: Vec<u16>,
}

impl DatagramArgs {
    /// Into the client's options; more than 16 ports is a usage error.
    pub(crate) fn apply(&self, opts: &mut ClientOptions) -> CmdResult {
        let max = nena_transport::wire::plane::MAX_REALTIME_PORTS;
        if self.realtime_port.len() > max {
            return Err(Exit::usage(anyhow!(
                "--realtime-port given {} times: at most {max}",
                self.realtime_port.len()
            )));
        }
        opts.datagram = nena_transport::conn::DatagramOptions {
            plane: self.udp_plane == UdpPlane::On,
            redundancy: self.udp_redundancy,
            realtime_ports: self.realtime_port.clone(),
        };
        Ok(())
    }
}

pub(crate) fn check_client(c: &ClientCommon) -> CmdResult {
    if c.trusted.is_empty() {
        return Err(Exit::usage(anyhow!(
            "no trusted path: give --trusted ADDR|IFACE (the handshake must leave from a trusted address)"
        )));
    }
    // A typo in an interface name would otherwise start a client that never finds its
    // trusted path, or never uses the untrusted one, without a word.
    for (flag, specs) in [("--trusted", &c.trusted), ("--untrusted", &c.untrusted)] {
        for spec in specs {
            if let PathSpec::Iface(name) = spec {
                if !iface_exists(name) {
                    return Err(Exit::usage(anyhow!(
                        "{flag} {name}: no such interface in this network namespace"
                    )));
                }
            }
        }
    }
    check_metered(c)
}

/// `--metered IFACE`: each an interface of this network namespace that holds a path of
/// the policy, and not every path metered (one usage line otherwise).
fn check_metered(c: &ClientCommon) -> CmdResult {
    if c.metered.is_empty() {
        return Ok(());
    }
    for name in &c.metered {
        if !iface_exists(name) {
            return Err(Exit::usage(anyhow!(
                "--metered {name}: no such interface in this network namespace"
            )));
        }
    }
    let policy = PathPolicy {
        trusted: c.trusted.clone(),
        untrusted: c.untrusted.clone(),
    }
    .resolve()
    .map_err(|e| Exit::usage(anyhow!(e)))?;
    let metered = nena_mptcp::metered::metered_addrs(&policy, &c.metered);
    for name in &c.metered {
        let holds = metered
            .iter()
            .any(|a| policy.iface(*a).is_some_and(|i| i.name == *name));
        if !holds {
            return Err(Exit::usage(anyhow!(
                "--metered {name}: no --trusted or --untrusted path is on this interface"
            )));
        }
    }
    let all = policy.trusted.len() + policy.untrusted.len();
    if metered.len() >= all {
        return Err(Exit::usage(anyhow!(
            "--metered: every path is metered, so none would be preferred; name only the paths that cost per byte"
        )));
    }
    Ok(())
}

/// The in-kernel path manager's metered paths, for as long as the command runs (the host's
/// endpoints for their addresses made backup, put back at the end); `None` without
/// `--metered` or with the userspace path manager (which meters each connection itself).
pub(crate) fn metered_guard(
    c: &ClientCommon,
) -> Result<Option<nena_mptcp::metered::KernelMetered>, Exit> {
    if c.metered.is_empty() || nena_mptcp::pm_kind().ok() != Some(nena_mptcp::PmKind::Kernel) {
        return Ok(None);
    }
    let policy = PathPolicy {
        trusted: c.trusted.clone(),
        untrusted: c.untrusted.clone(),
    };
    nena_mptcp::metered::KernelMetered::start(&c.metered, &policy)
        .map(Some)
        .map_err(|e| Exit::from(anyhow!(e)))
}

/// Whether the current network namespace has an interface called `name`.
fn iface_exists(name: &str) -> bool {
    let Ok(c) = std::ffi::CString::new(name) else {
        return false;
    };
    // SAFETY: a NUL-terminated string that lives across the call.
    unsafe { libc::if_nametoindex(c.as_ptr()) != 0 }
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
            None => server_keys::default_key_file().ok(),
        };
        if let Some(key) = key {
            if server_keys::served_within(&a.dir, &key).map_err(Exit::usage)? {
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
        rules.push(format!("files up to {}", nena_transport::units::human(m)));
    }
    if token.is_some() {
        rules.push("access token required".to_string());
    }
    // Partial files of an earlier run that was killed (SIGKILL, a crash): no live session
    // leaves its .part untouched this long (an idle upload is dropped after IDLE_TIMEOUT).
    let stale_after = 2 * nena_transport::app::server::IDLE_TIMEOUT;
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
    let counters = counters(a.common.metrics, Role::Serve);
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
        metrics: counters.as_ref().map(|c| c.1.clone()),
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
        let at = start_metrics(&counters).await?;
        server::serve(opts, |addr| announce_with(&what, addr, at)).await
    })??;
    Ok(())
}

/// `--metrics ADDR:PORT`: where to serve them, and the counters of a command in `role`.
pub(super) fn counters(addr: Option<SocketAddr>, role: Role) -> Option<(SocketAddr, Arc<Metrics>)> {
    addr.map(|a| (a, Metrics::new(role)))
}

/// Opens the metrics endpoint on the command's runtime (before its own listener, so that
/// a scraper can rely on it once the command says it listens); its address.
pub(super) async fn start_metrics(
    counters: &Option<(SocketAddr, Arc<Metrics>)>,
) -> anyhow::Result<Option<SocketAddr>> {
    let Some((addr, m)) = counters else {
        return Ok(None);
    };
    let listener = metrics::bind(*addr).await?;
    let at = listener.local_addr()?;
    tokio::spawn(metrics::serve(listener, m.clone()));
    Ok(Some(at))
}

/// The startup line, then where the metrics are served (if they are).
pub(super) fn announce_with(what: &str, addr: SocketAddr, metrics: Option<SocketAddr>) {
    announce(what, addr);
    if let Some(m) = metrics {
        println!("metrics (OpenMetrics) at http://{m}/metrics");
        let _ = std::io::stdout().flush();
    }
}

pub fn send(a: SendArgs) -> CmdResult {
    check_client(&a.common)?;
    let name = match &a.name {
        Some(n) => n.clone(),
        None => a
            .file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| {
                Exit::usage(anyhow!(
                    "{} has no file name; give --name",
                    a.file.display()
                ))
            })?,
    };
    nena_transport::app::names::check_name(&name)
        .map_err(|e| Exit::usage(anyhow!("name {name:?}: {e}")))?;
    match std::fs::metadata(&a.file) {
        Ok(m) if m.is_file() => {}
        Ok(_) => {
            return Err(Exit::usage(anyhow!(
                "{} is not a regular file",
                a.file.display()
            )))
        }
        Err(e) => return Err(Exit::usage(anyhow!("{}: {e}", a.file.display()))),
    }
    let mut opts = a.common.options(&a.to, false)?;
    let _metered = metered_guard(&a.common)?;
    let _mpc = a.common.attach_mpc(&mut opts)?;
    let show = !a.no_progress && !a.common.json;
    let bar = Bar::new(show);
    let report = crate::runtime::block_on_interruptible(client::send(&opts, &a.file, &name, &bar))?;
    if a.common.json {
        print_json(&report)
    } else {
        println!("{}", report::transfer_line(&report));
        Ok(())
    }
}

pub fn get(a: GetArgs) -> CmdResult {
    check_client(&a.common)?;
    nena_transport::app::names::check_name(&a.name)
        .map_err(|e| Exit::usage(anyhow!("name {:?}: {e}", a.name)))?;
    let dest = match &a.out {
        Some(p) if p.is_dir() => p.join(&a.name),
        Some(p) => p.clone(),
        None => PathBuf::from(&a.name),
    };
    let mut opts = a.common.options(&a.from, false)?;
    let _metered = metered_guard(&a.common)?;
    let _mpc = a.common.attach_mpc(&mut opts)?;
    let show = !a.no_progress && !a.common.json;
    let bar = Bar::new(show);
    let report = crate::runtime::block_on_interruptible(client::get(
        &opts,
        &a.name,
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

pub fn perf(a: PerfArgs) -> CmdResult {
    check_client(&a.common)?;
    if a.bytes == Some(0) {
        return Err(Exit::usage(anyhow!("--bytes must be more than 0")));
    }
    if !(a.interval >= 0.0 && a.interval < 1e6) {
        return Err(Exit::usage(anyhow!("--interval must be >= 0 seconds")));
    }
    let params = PerfParams {
        up: !a.reverse,
        down: a.reverse || a.bidir,
        bytes: a.bytes,
        time: a.time.unwrap_or(Duration::from_secs(10)),
        interval: (a.interval > 0.0).then(|| Duration::from_secs_f64(a.interval)),
        omit: a.omit,
    };
    if let (Some(o), None) = (a.omit, a.bytes) {
        if o >= params.time {
            return Err(Exit::usage(anyhow!("--omit must be shorter than --time")));
        }
    }
    let mut opts = a.common.options(&a.to, a.raw)?;
    let _metered = metered_guard(&a.common)?;
    let _mpc = a.common.attach_mpc(&mut opts)?;
    let json = a.common.json;
    let report = crate::runtime::block_on_interruptible(client::perf(&opts, params, |iv| {
        if !json {
            println!("{}", report::interval_line(iv));
        }
    }))?;
    if json {
        print_json(&report)
    } else {
        println!("{}", report::perf_line(&report));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_suites_and_seconds() {
        assert_eq!(parse_modes("kato,plain"), Ok(vec![Mode::Kato, Mode::Plain]));
        assert_eq!(
            parse_modes("aead,stream,aead"),
            Ok(vec![Mode::Aead, Mode::Stream])
        );
        assert_eq!(parse_suite("ChaCha20"), Ok(Suite::ChaCha20));
        assert!(parse_suite("des").is_err());
        assert!(parse_modes("aes").is_err());
        assert!(parse_secs("0").is_err());
        assert_eq!(parse_secs("1.5"), Ok(Duration::from_millis(1500)));
    }
}
