//! The options every client command shares (`nena send|get|perf`, `nena proxy client`,
//! `nena run --via`, `nena gateway`), as the user gave them ([`ClientSettings`]): checked
//! ([`ClientSettings::check`]: a trusted path, interfaces that exist, metered paths that
//! make sense) and resolved into a session's [`ClientOptions`] by one call
//! ([`ClientSettings::resolve`]: the congestion control the kernel knows, the server's
//! address through a trusted interface only, the access token, the server key to expect).
//! Each refusal says whether the settings were wrong ([`SettingsError::Invalid`]: the
//! command line's usage error) or resolving them failed ([`SettingsError::Failed`]).

use super::dial::ClientOptions;

use crate::keys::{self, KnownServers, ServerKeyCheck};
use crate::resolve::{self, ResolverConfig, ServerAddr};
use nena_mptcp::{PathPolicy, PathSpec};
use nena_proto::{Mode, PublicKey, Suite};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Why settings were refused.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The settings themselves are wrong (bad input: the command line's usage error).
    #[error(transparent)]
    Invalid(Invalid),
    /// They are right, but resolving them failed (e.g. the resolver did not answer).
    #[error(transparent)]
    Failed(Failed),
}

/// How the settings are wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Invalid {
    /// `--cc NAME` that the kernel has not registered (`avail`: those it has).
    #[error(
        "--cc {name}: no congestion control of that name is registered (available: {}; `nena cc load lia|olia|balia|ewtcp` adds nena's)",
        avail.join(" ")
    )]
    UnknownCc { name: String, avail: Vec<String> },
    /// `--token-file` with a mode that cannot keep the token.
    #[error(
        "--token-file is refused with --mode {mode}: the token would cross every path {}; use aead or stream",
        if matches!(mode, Mode::Plain) { "in the clear" } else { "scrambled, and kato's first bytes read without the key" }
    )]
    TokenMode { mode: Mode },
    /// `--token-file` with `--raw`.
    #[error("--token-file needs a nena session: --raw would send it in the clear")]
    TokenRaw,
    /// No `--trusted` path.
    #[error("no trusted path: give --trusted ADDR|IFACE (the handshake must leave from a trusted address)")]
    NoTrusted,
    /// `flag NAME` names no interface of this network namespace.
    #[error("{flag} {name}: no such interface in this network namespace")]
    NoSuchIface { flag: &'static str, name: String },
    /// `--metered NAME` holds no path of the policy.
    #[error("--metered {name}: no --trusted or --untrusted path is on this interface")]
    MeteredNoPath { name: String },
    /// Every path metered.
    #[error("--metered: every path is metered, so none would be preferred; name only the paths that cost per byte")]
    AllMetered,
    /// `--server-key` with modes that have no key agreement.
    #[error(
        "--server-key needs a mode with key agreement (aead or stream): kato and plain have no \
         server key"
    )]
    ServerKeyNoAgreement,
    /// The path policy does not resolve.
    #[error(transparent)]
    Policy(nena_mptcp::PolicyError),
    /// The server's name would be resolved through an untrusted path.
    #[error(transparent)]
    Untrusted(resolve::ResolveError),
    /// The access token's file cannot be used.
    #[error(transparent)]
    Token(crate::Error),
    /// No default known_servers file (no state directory).
    #[error("{0} (--known-servers FILE)")]
    KnownServers(crate::Error),
}

/// How resolving right settings failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Failed {
    /// The server's name did not resolve.
    #[error(transparent)]
    Resolve(resolve::ResolveError),
    /// The in-kernel path manager's metered endpoints could not be set.
    #[error(transparent)]
    Metered(nena_mptcp::MptcpError),
}

/// The options every client command shares, as given.
#[derive(Debug, Clone)]
pub struct ClientSettings {
    /// Trusted local paths (the first subflow, the handshake and the first data).
    pub trusted: Vec<PathSpec>,
    /// Untrusted local paths (data only after the handshake).
    pub untrusted: Vec<PathSpec>,
    /// Metered interfaces (backup priority).
    pub metered: Vec<String>,
    /// The modes offered, most preferred first (duplicates are dropped).
    pub modes: Vec<Mode>,
    pub suite: Option<Suite>,
    pub aead_epoch_log2: Option<u8>,
    pub stream_epoch_log2: Option<u8>,
    pub allow_fallback: bool,
    pub allow_plain: bool,
    pub timeout: Duration,
    /// The access token's file.
    pub token_file: Option<PathBuf>,
    /// Re-create a subflow after its link's outage.
    pub recover: bool,
    /// Resume sessions with tickets (`--no-resume` turns it off).
    pub resume: bool,
    /// Reuse a proxy's sessions flow after flow (`--no-reuse` turns it off).
    pub reuse: bool,
    /// A congestion control by name (`lia` for `nena_lia`).
    pub cc: Option<String>,
    /// The resolver of the server's name (asked through a trusted interface only).
    pub resolver: Option<SocketAddr>,
    /// The known_servers file (default: the state directory's).
    pub known_servers: Option<PathBuf>,
    /// The one server key accepted, instead of known_servers.
    pub server_key: Option<PublicKey>,
    /// Testing only: where each hello is appended (feature `debug-dump`).
    #[cfg(feature = "debug-dump")]
    pub dump_first_flight: Option<PathBuf>,
}

fn invalid(e: Invalid) -> SettingsError {
    SettingsError::Invalid(e)
}

/// Whether the current network namespace has an interface called `name`.
pub fn iface_exists(name: &str) -> bool {
    nix::net::if_::if_nametoindex(name).is_ok_and(|i| i != 0)
}

/// A congestion control by name: the name the kernel knows it by (`lia` for `nena_lia`, as
/// `nena cc load` takes them); one line naming the available ones if it has none such.
pub fn congestion_control(cc: Option<&str>) -> Result<Option<String>, SettingsError> {
    let Some(name) = cc else { return Ok(None) };
    let avail = nena_mptcp::available_congestion_controls().unwrap_or_default();
    if avail.iter().any(|a| a == name) {
        return Ok(Some(name.to_string()));
    }
    let full = format!("nena_{name}");
    if avail.contains(&full) {
        return Ok(Some(full));
    }
    Err(invalid(Invalid::UnknownCc {
        name: name.to_string(),
        avail,
    }))
}

/// `--token-file` with modes that cannot keep the token: kato and kato-mpc (a direction's
/// first bytes, where the token is, read without the key: docs/THREAT-MODEL.md) and plain.
/// The refusal naming the mode, or `None` when every mode is aead or stream.
pub fn token_refused(modes: &[Mode]) -> Option<SettingsError> {
    let weak = modes
        .iter()
        .find(|m| !matches!(m, Mode::Aead | Mode::Stream))?;
    Some(invalid(Invalid::TokenMode { mode: *weak }))
}

/// `modes` without repeats, in their order.
pub fn dedup_modes(modes: &[Mode]) -> Vec<Mode> {
    let mut out: Vec<Mode> = Vec::new();
    for m in modes {
        if !out.contains(m) {
            out.push(*m);
        }
    }
    out
}

impl ClientSettings {
    fn policy(&self) -> PathPolicy {
        PathPolicy {
            trusted: self.trusted.clone(),
            untrusted: self.untrusted.clone(),
        }
    }

    /// A trusted path, interfaces that exist in this network namespace, and metered paths
    /// that are interfaces of the policy's paths, not all of them.
    pub fn check(&self) -> Result<(), SettingsError> {
        if self.trusted.is_empty() {
            return Err(invalid(Invalid::NoTrusted));
        }
        // A typo in an interface name would otherwise start a client that never finds its
        // trusted path, or never uses the untrusted one, without a word.
        for (flag, specs) in [
            ("--trusted", &self.trusted),
            ("--untrusted", &self.untrusted),
        ] {
            for spec in specs {
                if let PathSpec::Iface(name) = spec {
                    if !iface_exists(name) {
                        return Err(invalid(Invalid::NoSuchIface {
                            flag,
                            name: name.clone(),
                        }));
                    }
                }
            }
        }
        self.check_metered()
    }

    /// `--metered IFACE`: each an interface of this network namespace that holds a path of
    /// the policy, and not every path metered.
    fn check_metered(&self) -> Result<(), SettingsError> {
        if self.metered.is_empty() {
            return Ok(());
        }
        for name in &self.metered {
            if !iface_exists(name) {
                return Err(invalid(Invalid::NoSuchIface {
                    flag: "--metered",
                    name: name.clone(),
                }));
            }
        }
        let policy = self
            .policy()
            .resolve()
            .map_err(|e| invalid(Invalid::Policy(e)))?;
        let metered = nena_mptcp::metered::metered_addrs(&policy, &self.metered);
        for name in &self.metered {
            let holds = metered
                .iter()
                .any(|a| policy.iface(*a).is_some_and(|i| i.name == *name));
            if !holds {
                return Err(invalid(Invalid::MeteredNoPath { name: name.clone() }));
            }
        }
        let all = policy.trusted.len() + policy.untrusted.len();
        if metered.len() >= all {
            return Err(invalid(Invalid::AllMetered));
        }
        Ok(())
    }

    /// The options of a session to `server` (`raw`: the plain-MPTCP baseline, no nena
    /// session): the congestion control, the server's address, the token, the server key.
    pub fn resolve(&self, server: &ServerAddr, raw: bool) -> Result<ClientOptions, SettingsError> {
        let congestion = congestion_control(self.cc.as_deref())?;
        let remote = self.server_addr(server)?;
        let token = match &self.token_file {
            Some(_) if raw => return Err(invalid(Invalid::TokenRaw)),
            Some(p) => {
                if let Some(e) = token_refused(&self.modes) {
                    return Err(e);
                }
                Some(keys::load_token(p).map_err(|e| invalid(Invalid::Token(e.into())))?)
            }
            None => None,
        };
        let modes = dedup_modes(&self.modes);
        let server_key = self.server_key_check(server, &modes, raw)?;
        Ok(ClientOptions {
            token,
            server_key,
            suite: self.suite,
            aead_epoch_log2: self.aead_epoch_log2,
            stream_epoch_log2: self.stream_epoch_log2,
            allow_fallback: self.allow_fallback,
            timeout: self.timeout,
            raw,
            #[cfg(feature = "debug-dump")]
            dump_first_flight: self.dump_first_flight.clone(),
            recover: self.recover,
            tickets: self.resume.then(super::TicketJar::new),
            reuse: self.reuse.then(super::Reuse::new),
            allow_plain: self.allow_plain,
            congestion,
            metered: self.metered.clone(),
            ..ClientOptions::new(remote, self.policy(), modes)
        })
    }

    /// The server's address: a literal as given; a name resolved only by queries that leave
    /// by a trusted interface ([`crate::resolve`]), refused with the fix otherwise.
    pub fn server_addr(&self, server: &ServerAddr) -> Result<SocketAddr, SettingsError> {
        if let resolve::Host::Ip(ip) = server.host {
            return Ok(SocketAddr::new(ip, server.port));
        }
        let policy = self
            .policy()
            .resolve()
            .map_err(|e| invalid(Invalid::Policy(e)))?;
        let cfg = ResolverConfig::new(self.resolver, self.timeout);
        match resolve::resolve(server, &policy, &cfg) {
            Ok(r) => {
                log::info!("{}", r.describe(server));
                Ok(r.addr)
            }
            Err(e @ resolve::ResolveError::Untrusted { .. }) => Err(invalid(Invalid::Untrusted(e))),
            Err(e) => Err(SettingsError::Failed(Failed::Resolve(e))),
        }
    }

    /// Which server key to expect: `server_key`, or the known_servers file (pinned on first
    /// contact). Only with key agreement (aead, stream); none for raw.
    fn server_key_check(
        &self,
        server: &ServerAddr,
        modes: &[Mode],
        raw: bool,
    ) -> Result<Option<ServerKeyCheck>, SettingsError> {
        let crypto = !raw && modes.iter().any(|m| m.is_cryptographic());
        if let Some(k) = self.server_key {
            if !crypto {
                return Err(invalid(Invalid::ServerKeyNoAgreement));
            }
            return Ok(Some(ServerKeyCheck::Given(k)));
        }
        if !crypto {
            return Ok(None);
        }
        let file = match &self.known_servers {
            Some(f) => f.clone(),
            None => keys::default_known_servers()
                .map_err(|e| invalid(Invalid::KnownServers(e.into())))?,
        };
        Ok(Some(ServerKeyCheck::known(
            server,
            Arc::new(KnownServers::new(file)),
        )))
    }

    /// The in-kernel path manager's metered paths, for as long as the command runs (the
    /// host's endpoints for their addresses made backup, put back at the end); `None`
    /// without metered paths or with the userspace path manager (which meters each
    /// connection itself).
    pub fn metered_guard(
        &self,
    ) -> Result<Option<nena_mptcp::metered::KernelMetered>, SettingsError> {
        if self.metered.is_empty() || nena_mptcp::pm_kind().ok() != Some(nena_mptcp::PmKind::Kernel)
        {
            return Ok(None);
        }
        nena_mptcp::metered::KernelMetered::start(&self.metered, &self.policy())
            .map(Some)
            .map_err(|e| SettingsError::Failed(Failed::Metered(e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(trusted: &[&str]) -> ClientSettings {
        ClientSettings {
            trusted: trusted.iter().map(|t| t.parse().unwrap()).collect(),
            untrusted: Vec::new(),
            metered: Vec::new(),
            modes: vec![Mode::Aead, Mode::Aead, Mode::Stream],
            suite: None,
            aead_epoch_log2: None,
            stream_epoch_log2: None,
            allow_fallback: false,
            allow_plain: false,
            timeout: Duration::from_secs(1),
            token_file: None,
            recover: true,
            resume: true,
            reuse: true,
            cc: None,
            resolver: None,
            known_servers: None,
            server_key: None,
            #[cfg(feature = "debug-dump")]
            dump_first_flight: None,
        }
    }

    fn invalid_message(r: Result<(), SettingsError>) -> String {
        match r {
            Err(SettingsError::Invalid(e)) => e.to_string(),
            other => panic!("not a usage error: {other:?}"),
        }
    }

    #[test]
    fn a_trusted_path_that_exists_is_required() {
        let m = invalid_message(settings(&[]).check());
        assert!(m.starts_with("no trusted path: give --trusted"), "{m}");
        let m = invalid_message(settings(&["nena-no-such0"]).check());
        assert_eq!(
            m,
            "--trusted nena-no-such0: no such interface in this network namespace"
        );
        assert!(settings(&["127.0.0.1"]).check().is_ok());
        assert!(iface_exists("lo"));
    }

    #[test]
    fn tokens_only_with_aead_or_stream_and_modes_without_repeats() {
        assert!(token_refused(&[Mode::Aead, Mode::Stream]).is_none());
        let e = token_refused(&[Mode::Aead, Mode::Plain]).unwrap();
        assert!(e.to_string().contains("--mode plain"), "{e}");
        assert!(matches!(e, SettingsError::Invalid(_)));
        assert_eq!(
            dedup_modes(&settings(&[]).modes),
            vec![Mode::Aead, Mode::Stream]
        );
    }
}
