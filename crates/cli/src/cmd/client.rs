//! The options every client command shares (`nena send|get|perf`, `nena proxy client`,
//! `nena run --via`, `nena gateway`): their flags ([`ClientCommon`]), resolved into a
//! session's options by one call of nena-transport's `conn::settings`; how datagram sessions
//! carry their datagrams ([`DatagramArgs`]); `--mode kato-mpc`'s programs.
use super::parse::{parse_modes, parse_secs, parse_suite};
use crate::exit::{CmdResult, Exit};
use anyhow::anyhow;
use nena_mptcp::PathSpec;
use nena_proto::{Mode, Suite};
use nena_transport::conn::{ClientOptions, ClientSettings};
use nena_transport::keys;
use nena_transport::resolve::{self, ServerAddr};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

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
    /// Make a full handshake for every session: hold no tickets and resume none (by default
    /// a session with a server this command reached before resumes with a ticket from it:
    /// no key agreement, a first flight of about 100 bytes; docs/PROTOCOL.md).
    #[arg(long)]
    pub no_resume: bool,
    /// Give every proxied connection a nena session of its own (by default a proxy's
    /// session whose connection ended cleanly carries the next one, for up to 10 minutes:
    /// no MPTCP connection or handshake per connection; aead only; docs/PROTOCOL.md).
    #[arg(long)]
    pub no_reuse: bool,
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
    #[arg(long, value_name = "KEY", value_parser = keys::parse_public_key)]
    pub server_key: Option<nena_proto::PublicKey>,
}

impl ClientCommon {
    /// The settings as nena-transport takes them.
    pub(crate) fn settings(&self) -> ClientSettings {
        ClientSettings {
            trusted: self.trusted.clone(),
            untrusted: self.untrusted.clone(),
            metered: self.metered.clone(),
            modes: self.mode.concat(),
            suite: self.cipher,
            aead_epoch_log2: self.debug_aead_rekey_log2,
            stream_epoch_log2: self.debug_stream_rekey_log2,
            allow_fallback: self.allow_fallback,
            allow_plain: self.allow_plain,
            timeout: self.timeout,
            token_file: self.token_file.clone(),
            recover: !self.no_recovery,
            resume: !self.no_resume,
            reuse: !self.no_reuse,
            cc: self.cc.clone(),
            resolver: self.resolver,
            known_servers: self.known_servers.clone(),
            server_key: self.server_key,
            #[cfg(feature = "debug-dump")]
            dump_first_flight: self.debug_dump_first_flight.clone(),
        }
    }

    /// A session's options to `server` (`raw`: no nena session).
    pub(crate) fn options(&self, server: &ServerAddr, raw: bool) -> Result<ClientOptions, Exit> {
        Ok(self.settings().resolve(server, raw)?)
    }

    /// The interfaces of `--trusted` and `--untrusted` (addresses are not interfaces: they
    /// are not watched) with their trust and whether `--metered` names them, for
    /// `nena status`.
    pub(super) fn link_conf(&self) -> Vec<nena_transport::ops::status::LinkConf> {
        let classes = [("trusted", &self.trusted), ("untrusted", &self.untrusted)];
        classes
            .into_iter()
            .flat_map(|(trust, specs)| {
                specs.iter().filter_map(move |p| match p {
                    PathSpec::Iface(name) => Some(nena_transport::ops::status::LinkConf {
                        name: name.clone(),
                        trust: trust.to_string(),
                        metered: self.metered.contains(name),
                    }),
                    PathSpec::Addr(_) => None,
                })
            })
            .collect()
    }

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
}

/// A trusted path, interfaces that exist, metered paths that make sense (one usage line
/// otherwise).
pub(crate) fn check_client(c: &ClientCommon) -> CmdResult {
    Ok(c.settings().check()?)
}

/// The in-kernel path manager's metered paths, for as long as the command runs; `None`
/// without `--metered` or with the userspace path manager.
pub(crate) fn metered_guard(
    c: &ClientCommon,
) -> Result<Option<nena_mptcp::metered::KernelMetered>, Exit> {
    Ok(c.settings().metered_guard()?)
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

/// A client command's report as one JSON object (`--json`).
pub(super) fn print_json<T: serde::Serialize>(v: &T) -> CmdResult {
    let s = serde_json::to_string(v).map_err(|e| Exit::from(anyhow!(e)))?;
    println!("{s}");
    Ok(())
}
