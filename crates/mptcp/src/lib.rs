//! nena-mptcp: kernel MPTCP sockets for nena, and nena's trusted-path-first enforcement.
//!
//! * [`listen`] / [`connect`] open `IPPROTO_MPTCP` sockets; [`check_enabled`] explains when
//!   MPTCP is off in the current network namespace; a connection that fell back to plain TCP
//!   is refused unless allowed ([`MptcpError::ServerWithoutMptcp`] on a client,
//!   [`MptcpError::Fallback`] on a server, `--allow-fallback`).
//! * [`is_fallback`], [`info`], [`subflows`], [`describe`] read the kernel's `MPTCP_INFO` and
//!   `MPTCP_FULL_INFO` (per-subflow addresses and `tcp_info` byte counters), so nena can say
//!   whether a connection is really multipath and what each subflow carried.
//! * [`Gate`] (inside [`Client`] / [`AsyncClient`]) enforces that the handshake and the first
//!   flight of data go over a trusted subflow and that untrusted subflows carry data only
//!   after that. Its decisions are the sans-IO [`GateMachine`] ([`gate::machine`]: snapshots
//!   and path-manager events in, a [`Verdict`] or a typed [`Refusal`] out, and which
//!   subflows to withdraw and when, unit-tested without root) and its helpers
//!   ([`gate::flight`], [`gate::release`]); [`Gate`] is their driver over a
//!   [`gate::Kernel`] (the real one, [`gate::SysKernel`], or the simulator's in the tests):
//!   it reads the kernel, carries the decisions out and waits, blocking ([`connect`],
//!   [`Gate::wait_first_flight_acked`]) or on tokio ([`connect_async`],
//!   [`Gate::wait_first_flight_acked_async`]).
//! * [`recovery`]: after a link outage, a released connection gets its subflow on that link
//!   back (userspace PM: nena re-creates it with `SUBFLOW_CREATE` as soon as the link is
//!   usable again, with backoff; sans-IO decisions in [`recovery::RecoveryMachine`]).
//! * [`metered`]: a metered path (`--metered IFACE`) carries data after the first flight
//!   only while no other path can: MPTCP's backup priority, per connection with the
//!   userspace PM ([`metered::MeteredMachine`], run by the recovery service), host-wide
//!   with the in-kernel one ([`metered::KernelMetered`]).
//!
//! # Trusted-path-first: what is guaranteed, and how
//!
//! A local address is *trusted* if it is given by `--trusted ADDR` or belongs to a
//! `--trusted IFACE`, *untrusted* if given by `--untrusted`; any other local address counts
//! as untrusted too ([`Trust::Unlisted`]). Interfaces are resolved to their addresses when
//! connecting. A subflow is judged by its local address (as `MPTCP_FULL_INFO` reports it),
//! whoever opened it (our PM, or the server joining towards one of our addresses).
//!
//! The caller's sequence is: [`connect`] / [`connect_async`] → [`Gate::before_first_flight`]
//! → write the first flight → [`Gate::poll_first_flight_acked`] (or the waiting
//! [`Gate::wait_first_flight_acked`] / [`Gate::wait_first_flight_acked_async`]) →
//! [`Gate::release_untrusted`] → normal use. Any refusal is final: the connection must be
//! dropped, and every later step of the gate fails. A refusal is a typed
//! [`MptcpError::Refused`]; [`MptcpError::is_unverifiable`] tells a first flight that could
//! not be verified (lost events: retrying with a new connection is safe) from a broken rule.
//!
//! 1. **Handshake — by construction, both PM modes.** [`connect`] binds the socket to the
//!    trusted interface (`SO_BINDTODEVICE`) and to a trusted address of it of the remote's
//!    family before `connect()`, so the MP_CAPABLE handshake (which carries both MPTCP keys
//!    in clear) runs on the initial subflow out of that interface, whatever the routes say
//!    (a host without source-based rules whose default route leaves by the untrusted link
//!    included). Before connecting it checks that the routing table has an entry to the
//!    server through that interface ([`route::lookup`]) and fails closed, naming the host's
//!    route and the fix, when it has none. After connect it reads the binding back, re-reads
//!    the subflow list and fails if the initial subflow's local address is not trusted
//!    ([`Refusal::InitialNotTrusted`]). Subflows nena opens later are bound to their
//!    address's interface (the interface index on `SUBFLOW_CREATE`).
//! 2. **Before the first flight — checked, fail closed.** In-kernel PM: subflows from a
//!    non-trusted address that exist already (a server's ADD_ADDR makes the client fully
//!    established before it wrote anything) are closed ([`diag::destroy`], `SOCK_DESTROY`,
//!    needs CAP_NET_ADMIN; nothing was written, nothing is lost; the kernel does not reopen
//!    them). [`Gate::before_first_flight`] then refuses if any subflow with a non-trusted
//!    local address still exists ([`Refusal::UntrustedBeforeFirstFlight`]); without
//!    CAP_NET_ADMIN a connection with such a subflow is refused.
//! 3. **First flight.** The caller writes it; the gate reads `MPTCP_INFO` until
//!    `mptcpi_bytes_acked` covers it (data-level ACK from the peer; `snd_una` on kernels
//!    < 6.5), and on every look reads `MPTCP_FULL_INFO` after it and refuses if a subflow
//!    with a non-trusted local address has `tcpi_bytes_sent > 0`
//!    ([`Refusal::UntrustedSent`]): nothing but the first flight has been written, so any
//!    payload such a subflow sent is first-flight data. The data-level ACK raises no event
//!    a socket can wait on, so the gate looks after every path-manager event, when the
//!    peer's first bytes arrive (they come with a DATA_ACK), and otherwise after a short
//!    adaptive pause ([`gate::Backoff`]: 250 µs doubling to 4 ms).
//!    * **Userspace PM** (client netns `net.mptcp.pm_type=1`): the kernel opens no subflow
//!      by itself and ignores ADD_ADDR, so until nena releases, the initial trusted subflow
//!      is the only one. *Guaranteed by construction*; the check is a second line.
//!    * **In-kernel PM** (`ip mptcp endpoint add ADDR dev IFACE subflow`): a client opens its
//!      `subflow` endpoints only when the connection becomes *fully established*, which for
//!      a client takes an MPTCP-level ACK (DSS with DATA_ACK) or an ADD_ADDR from the server.
//!      The server sends its first DSS ACK only in answer to our first data, so the extra
//!      subflow appears only after the first flight was handed to the trusted subflow.
//!      Measured on Linux 6.18 in the lab (tests watch it in a tight loop on one atomic
//!      `MPTCP_FULL_INFO` snapshot): no extra subflow on an idle connection (100–200 ms);
//!      with a 1200-byte first flight the untrusted subflow shows up within 0–9 ms of the
//!      first flight's DATA_ACK (sometimes a few µs before the ACK covering all of it is
//!      seen: the server's first DSS ACK may acknowledge less) and always after the trusted
//!      subflow had sent all of it. A first flight no larger than what the initial subflow sends at once ([`Gate::first_flight_budget`],
//!      `cwnd × mss`, ~14 KB) is therefore entirely on the trusted subflow before another
//!      subflow can exist: *by construction*, except for an MPTCP-level retransmission
//!      after a loss, which the counter check catches. A larger first flight over a slow
//!      trusted link is *not* prevented: measured with 200 KB over a 1 Mbit/s trusted link,
//!      the kernel opened the untrusted subflow at the first DATA_ACK and sent 177 KB of the
//!      first flight over it; the gate *detects* this and refuses the connection
//!      ([`Refusal::UntrustedSent`]). Per-connection backup priority is not available
//!      to applications with the in-kernel PM (`MPTCP_PM_CMD_SET_FLAGS` with a token is
//!      userspace-PM only; endpoint flags are host-wide): nena changes an endpoint's flag
//!      only for `--metered` ([`metered::KernelMetered`]), and the first flight goes on the
//!      trusted subflow backup or not (it is the only one then).
//!    * If the **server speaks first**, the client is fully established before it writes
//!      anything and the in-kernel PM opens the untrusted subflow at once: without the
//!      hold (below), step 2 refuses. nena's protocol lets the client speak first.
//!    * With the first-flight hold ([`hold`], which the nena binary provides) the
//!      connection's payload leaves only by trusted interfaces until the first flight is
//!      DATA_ACKed: an untrusted subflow the kernel opens before or during the first flight
//!      then stays (neither refused nor closed) unless the kernel hands it first-flight
//!      bytes, which the gate sees in its counters and answers by closing it before the
//!      release; one handed nothing carries data after the release (the argument is in
//!      [`GateMachine::withdraw_due`]).
//! 4. **Release.** Userspace PM: nena, as the path manager of its own connection, asks the
//!    kernel (generic netlink `mptcp_pm`, `MPTCP_PM_CMD_SUBFLOW_CREATE`, token from
//!    `MPTCP_INFO`) for one subflow from every other policy address of the remote's
//!    family, untrusted ones included. In-kernel PM: the kernel does it; the release report
//!    lists the `subflow` endpoints seen at connect time (warning when there are none).
//!    From then on the kernel's default scheduler spreads data over all subflows.
//! 5. **The peer's first flight.** The server's reply may go over any subflow that exists
//!    when it is sent. Callers that want it on trusted paths only wait for the ACK, read the
//!    reply, call [`Gate::check_untrusted_idle`] with `received = true` (checked,
//!    [`Refusal::UntrustedReceived`]) and only then release (userspace PM: by construction).
//!
//! The per-subflow counters vanish with a closed subflow, so an untrusted subflow that
//! carried first-flight data *and* was closed again between two polls would escape them.
//! [`connect`] therefore also subscribes to the `mptcp_pm_events` multicast group (before
//! connecting, so nothing is missed) and the gate refuses if an `MPTCP_EVENT_SUB_CLOSED`
//! for a non-trusted local address of this connection arrived during the first flight
//! ([`Refusal::UntrustedClosed`]), or if events were lost ([`Refusal::EventsLost`]). An
//! untrusted subflow whose `MPTCP_EVENT_SUB_ESTABLISHED` arrived during the first flight
//! must also be listed (its counters checked) before the first flight counts as acked. The
//! subscription needs `CAP_NET_ADMIN`; without it only the counter checks run.
//! Userspace-PM `SUBFLOW_CREATE` needs `CAP_NET_ADMIN`; without it the release reports the
//! failure and the connection stays on its trusted subflow.
//!
//! The server side needs no path policy: it cannot choose the client's subflows. It only
//! refuses fallback connections ([`check_fallback`]).

mod client;
pub mod diag;
pub mod gate;
pub mod hold;
mod links;
pub mod metered;
pub mod mptcpize;
pub mod notes;
pub mod path;
pub mod pm;
pub mod recovery;
pub mod route;
pub mod sample;
mod sockopt;
pub mod uapi;

pub use client::{
    available_congestion_controls, preferred_congestion, AVAILABLE_CONGESTION_CONTROLS,
    DEFAULT_CONGESTION_CONTROL,
};
pub use client::{
    connect, connect_ungated, listen, trusted_waits, Client, ConnectOptions, TrustedWaits,
};
pub use gate::{
    connect_async, AsyncClient, ClassifiedSubflow, Gate, GateMachine, PathReport, Refusal,
    ReleaseReport, Verdict,
};
pub use path::{PathPolicy, PathSpec, PathSpecError, PolicyError, ResolvedPolicy, Trust};
pub use sockopt::{
    congestion, describe, info, is_fallback, set_congestion, subflows, ConnInfo, SubflowInfo,
};

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
    /// A client's connection that the server answered without MPTCP.
    #[error("the server at {0} answered in plain TCP, not MPTCP: it is not a nena server, or MPTCP is off on its host, or a middlebox strips MPTCP options; nothing was sent (--allow-fallback accepts a single plain path, if a nena server is there)")]
    ServerWithoutMptcp(SocketAddr),
    /// An accepted connection that the client opened without MPTCP.
    #[error("connection fell back to plain TCP; pass --allow-fallback to accept")]
    Fallback,
    #[error("cannot connect to {remote}")]
    Connect {
        remote: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("path policy: {0}")]
    Policy(String),
    /// The trusted-path-first gate refused the connection (or a call out of order).
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error("timed out waiting for {0}")]
    Timeout(&'static str),
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
    /// The gate could not verify the first flight (path-manager events were lost, e.g. when
    /// many connections start at once) rather than seeing a rule broken: a new connection
    /// with fresh keys is as safe as this one.
    pub fn is_unverifiable(&self) -> bool {
        matches!(self, MptcpError::Refused(r) if r.is_unverifiable())
    }

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
        let e = MptcpError::from(Refusal::UntrustedBeforeFirstFlight {
            local: Some("198.18.2.2:1234".parse().unwrap()),
        });
        assert_eq!(
            e.to_string(),
            "trusted-path-first violated: the subflow from 198.18.2.2:1234 exists before the \
             first flight is sent; refusing the connection"
        );
        let s = MptcpError::ServerWithoutMptcp("198.18.3.2:80".parse().unwrap()).to_string();
        assert!(
            s.starts_with("the server at 198.18.3.2:80 answered in plain TCP")
                && s.contains("not a nena server")
                && s.contains("nothing was sent"),
            "{s}"
        );
        for e in [MptcpError::Disabled, MptcpError::Fallback, e] {
            assert!(!e.to_string().contains('\n'));
        }
    }

    #[test]
    fn only_lost_events_are_unverifiable() {
        assert!(MptcpError::from(Refusal::EventsLost).is_unverifiable());
        let broken = MptcpError::from(Refusal::UntrustedSent { local: None });
        assert!(!broken.is_unverifiable());
        assert!(!MptcpError::Timeout("x").is_unverifiable());
        // Through anyhow, as the transport sees it.
        let e = anyhow::Error::from(MptcpError::from(Refusal::EventsLost));
        assert!(e
            .downcast_ref::<MptcpError>()
            .is_some_and(MptcpError::is_unverifiable));
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
