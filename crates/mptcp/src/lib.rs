//! nena-mptcp: kernel MPTCP sockets for nena, and nena's trusted-path-first enforcement.
//!
//! * [`listen`] / [`connect`] open `IPPROTO_MPTCP` sockets; [`check_enabled`] explains when
//!   MPTCP is off in the current network namespace; a connection that fell back to plain TCP
//!   is refused unless allowed ([`MptcpError::Fallback`], `--allow-fallback`).
//! * [`is_fallback`], [`info`], [`subflows`], [`describe`] read the kernel's `MPTCP_INFO` and
//!   `MPTCP_FULL_INFO` (per-subflow addresses and `tcp_info` byte counters), so nena can say
//!   whether a connection is really multipath and what each subflow carried.
//! * [`Gate`] (inside [`Client`]) enforces that the handshake and the first flight of data go
//!   over a trusted subflow and that untrusted subflows carry data only after that.
//!
//! # Trusted-path-first: what is guaranteed, and how
//!
//! A local address is *trusted* if it is given by `--trusted ADDR` or belongs to a
//! `--trusted IFACE`; *untrusted* if given by `--untrusted`; any other local address
//! (including one that appears later) counts as untrusted too. Interfaces are resolved to
//! their addresses when connecting.
//!
//! 1. **Handshake** (both PM modes, by construction): [`connect`] binds the socket to a
//!    trusted address of the remote's family before `connect()`, so the MP_CAPABLE handshake
//!    (which carries both MPTCP keys in clear) runs on the initial subflow from that
//!    address. After connect it re-reads the subflow list and fails if the initial
//!    subflow's local address is not trusted.
//! 2. **Before the first flight** ([`Gate::before_first_flight`], both modes, checked): fails
//!    closed if any subflow with a non-trusted local address exists. With the in-kernel PM a
//!    client opens `subflow` endpoints only once the connection is *fully established*,
//!    which for a client needs an MPTCP-level ACK (DSS with DATA_ACK) or an ADD_ADDR from the
//!    server, i.e. normally after the server has acked our first data. A server announcing
//!    addresses (ADD_ADDR) can make it happen earlier; then this check refuses.
//! 3. **First flight** ([`Gate::poll_first_flight_acked`]): nena writes the first flight, then
//!    polls `MPTCP_INFO` until `mptcpi_bytes_acked` (or `snd_una` on old kernels) covers it.
//!    On every poll it reads `MPTCP_FULL_INFO` and fails closed if a subflow with a
//!    non-trusted local address has `tcpi_bytes_sent > 0`: since nothing but the first
//!    flight has been written, any payload such a subflow sent is first-flight data.
//!    * **Userspace PM** (`net.mptcp.pm_type=1`): the kernel opens no subflow by itself and
//!      does not act on ADD_ADDR, so during the first flight the initial (trusted) subflow
//!      is the only one: guaranteed by construction; the check is a second line.
//!    * **In-kernel PM** with `ip mptcp endpoint add ADDR dev IFACE subflow`: the kernel
//!      opens the extra subflow when the connection becomes fully established, i.e. when
//!      the server's DATA_ACK for the first bytes arrives. A first flight that fits in one
//!      window is then already acked and no untrusted subflow can carry any of it; a first
//!      flight so large that part of it is still unsent when the first DATA_ACK arrives
//!      *could* be scheduled on the new subflow. That case is not prevented but detected
//!      (the per-subflow counter check above) and the connection is refused. Keep the first
//!      flight small (one initial window, ~14 KB) to never hit it.
//! 4. **Release** ([`Gate::release_untrusted`]): userspace PM: nena, as the path manager of
//!    its own connection, asks the kernel through generic netlink `mptcp_pm`
//!    `MPTCP_PM_CMD_SUBFLOW_CREATE` (token from `MPTCP_INFO`) for one subflow from every
//!    other policy address of the remote's family. In-kernel PM: the kernel does it.
//!    From then on the kernel's default scheduler spreads data over all subflows.
//! 5. **Peer's first flight** ([`Gate::check_untrusted_idle`] with `received = true`): the
//!    server's reply may be scheduled on any subflow that exists when it is sent. A caller
//!    that wants the reply on trusted paths only releases after reading it (userspace PM:
//!    guaranteed) and can check that no untrusted subflow received payload (in-kernel PM:
//!    detected, fail closed).
//!
//! The server side needs no path policy: it cannot choose the client's subflows. It only
//! refuses fallback connections ([`check_fallback`]).

mod client;
pub mod path;
pub mod pm;
mod sockopt;
pub mod uapi;

pub use client::{
    connect, listen, ClassifiedSubflow, Client, ConnectOptions, Gate, PathReport, ReleaseReport,
};
pub use path::{PathPolicy, PathSpec, PathSpecError, PolicyError, ResolvedPolicy, Trust};
pub use sockopt::{describe, info, is_fallback, subflows, ConnInfo, SubflowInfo};

use serde::Serialize;
use std::io;
use std::net::SocketAddr;
use std::os::fd::BorrowedFd;

/// Errors of this crate; every message is one line meant for the user.
#[derive(Debug, thiserror::Error)]
pub enum MptcpError {
    #[error("MPTCP is disabled in this network namespace (net.mptcp.enabled = 0); enable it with `sysctl -w net.mptcp.enabled=1`")]
    Disabled,
    #[error("this kernel has no MPTCP support ({0})")]
    Unsupported(String),
    #[error("connection fell back to plain TCP; pass --allow-fallback to accept")]
    Fallback,
    #[error("cannot connect to {remote}: {source}")]
    Connect {
        remote: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("path policy: {0}")]
    Policy(String),
    #[error("trusted-path-first violated: the subflow from {} {what}; refusing the connection", local.map_or("?".into(), |a| a.to_string()))]
    UntrustedTooEarly {
        local: Option<SocketAddr>,
        what: &'static str,
    },
    #[error("timed out waiting for {0}")]
    Timeout(&'static str),
    #[error("gate used out of order: {0}")]
    Sequence(&'static str),
    #[error("mptcp_pm netlink: {0}")]
    Netlink(#[from] pm::PmError),
    #[error("{0}")]
    Io(#[from] io::Error),
}

impl From<PolicyError> for MptcpError {
    fn from(e: PolicyError) -> Self {
        MptcpError::Policy(e.to_string())
    }
}

impl From<MptcpError> for io::Error {
    fn from(e: MptcpError) -> Self {
        match e {
            MptcpError::Io(e) => e,
            other => io::Error::other(other.to_string()),
        }
    }
}

impl MptcpError {
    /// Interpret a failed `socket(..., IPPROTO_MPTCP)`.
    pub(crate) fn from_socket_error(e: io::Error) -> Self {
        match e.raw_os_error() {
            // mptcp_init_sock() refuses with ENOPROTOOPT when net.mptcp.enabled = 0.
            Some(libc::ENOPROTOOPT) => MptcpError::Disabled,
            Some(libc::EPROTONOSUPPORT)
            | Some(libc::EINVAL)
            | Some(libc::ESOCKTNOSUPPORT)
            | Some(libc::EAFNOSUPPORT) => MptcpError::Unsupported(e.to_string()),
            _ => MptcpError::Io(e),
        }
    }
}

fn read_sysctl(name: &str) -> io::Result<String> {
    Ok(
        std::fs::read_to_string(format!("/proc/sys/net/mptcp/{name}"))?
            .trim()
            .to_string(),
    )
}

/// Check that MPTCP is enabled in the current network namespace (`net.mptcp.enabled`).
pub fn check_enabled() -> Result<(), MptcpError> {
    match read_sysctl("enabled") {
        Ok(v) if v == "1" => Ok(()),
        Ok(_) => Err(MptcpError::Disabled),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(MptcpError::Unsupported(
            "no /proc/sys/net/mptcp: kernel built without CONFIG_MPTCP".into(),
        )),
        Err(e) => Err(MptcpError::Io(e)),
    }
}

/// The path manager of the current network namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PmKind {
    /// In-kernel PM (`net.mptcp.pm_type = 0`): subflows from `ip mptcp endpoint ... subflow`.
    Kernel,
    /// Userspace PM (`net.mptcp.pm_type = 1`): nena opens subflows through genl `mptcp_pm`.
    Userspace,
}

/// Read the path manager of the current network namespace.
pub fn pm_kind() -> Result<PmKind, MptcpError> {
    // Linux >= 6.15 has the textual `path_manager`; `pm_type` is kept in sync with it.
    if let Ok(v) = read_sysctl("path_manager") {
        return match v.as_str() {
            "userspace" => Ok(PmKind::Userspace),
            "kernel" => Ok(PmKind::Kernel),
            other => Err(MptcpError::Unsupported(format!(
                "unknown MPTCP path manager `{other}`"
            ))),
        };
    }
    match read_sysctl("pm_type") {
        Ok(v) if v == "1" => Ok(PmKind::Userspace),
        Ok(_) => Ok(PmKind::Kernel),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(PmKind::Kernel),
        Err(e) => Err(MptcpError::Io(e)),
    }
}

/// Refuse a plain-TCP (fallback) connection unless allowed; for accepted server sockets.
pub fn check_fallback(fd: BorrowedFd<'_>, allow_fallback: bool) -> Result<(), MptcpError> {
    if is_fallback(fd)? && !allow_fallback {
        return Err(MptcpError::Fallback);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_line_and_clear() {
        assert_eq!(
            MptcpError::Fallback.to_string(),
            "connection fell back to plain TCP; pass --allow-fallback to accept"
        );
        assert!(MptcpError::Disabled
            .to_string()
            .contains("net.mptcp.enabled"));
        let e = MptcpError::UntrustedTooEarly {
            local: Some("198.18.2.2:1234".parse().unwrap()),
            what: "exists before the first flight is sent",
        };
        assert!(e.to_string().contains("198.18.2.2:1234"));
        for e in [MptcpError::Disabled, MptcpError::Fallback, e] {
            assert!(!e.to_string().contains('\n'));
        }
    }

    #[test]
    fn socket_errors_are_classified() {
        assert!(matches!(
            MptcpError::from_socket_error(io::Error::from_raw_os_error(libc::ENOPROTOOPT)),
            MptcpError::Disabled
        ));
        assert!(matches!(
            MptcpError::from_socket_error(io::Error::from_raw_os_error(libc::EPROTONOSUPPORT)),
            MptcpError::Unsupported(_)
        ));
    }
}
