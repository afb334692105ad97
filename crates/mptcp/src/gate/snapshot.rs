//! What the gate's machine is fed and answers: the snapshots of the connection
//! ([`Snapshot`]: `MPTCP_INFO`'s ack counters and token, `MPTCP_FULL_INFO`'s subflows),
//! the path-manager events it reacts to ([`PathEvent`]), its [`Verdict`]s and its typed
//! [`Refusal`]s. Plain data, no I/O.

use crate::pm::{PmEvent, MPTCP_EVENT_SUB_CLOSED, MPTCP_EVENT_SUB_ESTABLISHED};
use crate::sockopt::{ConnInfo, SubflowInfo};
use std::net::{IpAddr, SocketAddr};
/// The answer to any call after a refusal.
pub const REFUSED: &str = "the connection was refused by an earlier trusted-path check";

/// Connection-level counters the gate needs (from `MPTCP_INFO`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnSnapshot {
    /// Local connection token (path-manager events carry it).
    pub token: u32,
    /// `mptcpi_bytes_acked` (None on kernels < 6.5).
    pub bytes_acked: Option<u64>,
    /// `mptcpi_snd_una`, the data-level send-unacknowledged sequence number (wraps).
    pub snd_una: u64,
}

impl From<&ConnInfo> for ConnSnapshot {
    fn from(i: &ConnInfo) -> Self {
        ConnSnapshot {
            token: i.token,
            bytes_acked: i.bytes_acked,
            snd_una: i.snd_una,
        }
    }
}

/// One subflow as the gate sees it (from `MPTCP_FULL_INFO`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubflowSnapshot {
    /// The kernel's per-connection subflow id (`MPTCP_FULL_INFO`; 0 on kernels < 6.5): two
    /// subflows from one local address and port are told apart by it.
    pub id: u32,
    /// Local address; `None` (unknown) counts as untrusted.
    pub local: Option<SocketAddr>,
    /// The interface the subflow leaves by (its bound device, else the route for its
    /// addresses), as the I/O layer found it for a subflow from a trusted address; `None`
    /// when unknown. A trusted address counts as trusted only on a trusted interface
    /// ([`ResolvedPolicy::classify_path`]).
    pub iface: Option<u32>,
    /// Payload bytes this subflow sent (`tcpi_bytes_sent`, retransmissions included).
    pub bytes_sent: u64,
    /// Payload bytes this subflow received (`tcpi_bytes_received`).
    pub bytes_received: u64,
    /// Payload bytes in its write queue not sent yet (`tcpi_notsent_bytes`).
    pub notsent_bytes: u64,
}

impl From<&SubflowInfo> for SubflowSnapshot {
    fn from(s: &SubflowInfo) -> Self {
        SubflowSnapshot {
            id: s.id,
            local: s.local,
            iface: None,
            bytes_sent: s.bytes_sent,
            bytes_received: s.bytes_received,
            notsent_bytes: u64::from(s.notsent_bytes),
        }
    }
}

/// Everything the gate reads from the socket at one moment. `conn` is read before
/// `subflows` (an ACK seen in `conn` is at least as old as the subflow counters). A
/// connection that fell back to plain TCP has no MPTCP state: pass `Snapshot::default()`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub conn: ConnSnapshot,
    /// In the kernel's order: the initial subflow first.
    pub subflows: Vec<SubflowSnapshot>,
    /// Held ([`GateMachine::set_held`]): the packets of the connection the first-flight
    /// hold dropped so far, read *after* `subflows` (a segment a subflow counts in
    /// `bytes_sent` is dropped, if it is, in the same transmit, under the subflow's lock that
    /// `MPTCP_FULL_INFO` takes to read the counter: so every drop of what `subflows` shows
    /// is counted here). `None`: not held, or the hold has no entry for the connection.
    pub dropped: Option<u64>,
}

/// A path-manager event the gate reacts to (from the `mptcp_pm_events` group).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathEvent {
    /// `MPTCP_EVENT_SUB_ESTABLISHED` of connection `token`.
    SubflowEstablished {
        token: u32,
        local: Option<SocketAddr>,
        /// The interface it leaves by, when known (see [`SubflowSnapshot::iface`]).
        iface: Option<u32>,
    },
    /// `MPTCP_EVENT_SUB_CLOSED` of connection `token`: its counters are gone with it.
    SubflowClosed {
        token: u32,
        local: Option<SocketAddr>,
        /// The interface it left by, when known (see [`SubflowSnapshot::iface`]).
        iface: Option<u32>,
    },
    /// The subscription overran (`ENOBUFS`) or could not be read: events are missing.
    Lost,
}

impl PathEvent {
    /// The same event with the interface its subflow leaves by set to `iface`.
    pub fn with_iface(self, iface: Option<u32>) -> PathEvent {
        match self {
            PathEvent::SubflowEstablished { token, local, .. } => PathEvent::SubflowEstablished {
                token,
                local,
                iface,
            },
            PathEvent::SubflowClosed { token, local, .. } => PathEvent::SubflowClosed {
                token,
                local,
                iface,
            },
            other => other,
        }
    }

    /// The gate's view of a decoded event; `None` for events it does not use (and for
    /// subflow events without a token, which cannot be attributed to a connection).
    pub fn from_pm(e: &PmEvent) -> Option<PathEvent> {
        let token = e.token?;
        match e.kind {
            MPTCP_EVENT_SUB_ESTABLISHED => Some(PathEvent::SubflowEstablished {
                token,
                local: e.local,
                iface: e.ifindex,
            }),
            MPTCP_EVENT_SUB_CLOSED => Some(PathEvent::SubflowClosed {
                token,
                local: e.local,
                iface: e.ifindex,
            }),
            _ => None,
        }
    }
}

/// What the caller may do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Go on: after `connected`/`check_idle`, the check passed; after
    /// `before_first_flight`, write the first flight now; after `poll_first_flight`, the
    /// first flight is data-acked and no untrusted subflow carried any of it.
    Proceed,
    /// The first flight is not (verifiably) data-acked yet: feed a newer snapshot later.
    /// `acked` is how much of it the peer has acknowledged.
    Wait { acked: u64 },
    /// Untrusted paths may carry data now. Userspace PM: ask the kernel for one subflow from
    /// each of `open` (`SUBFLOW_CREATE`); in-kernel PM and fallback: `open` is empty (the
    /// kernel opens its `subflow` endpoints by itself).
    Release { open: Vec<IpAddr> },
}

/// Why the gate refused the connection (or the call). Every message is one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the connection has no subflow")]
    NoSubflow,
    #[error("the initial subflow left from {} which is not trusted", show(local))]
    InitialNotTrusted { local: Option<SocketAddr> },
    #[error("trusted-path-first violated: the subflow from {} exists before the first flight is sent; refusing the connection", show(local))]
    UntrustedBeforeFirstFlight { local: Option<SocketAddr> },
    #[error("trusted-path-first violated: the subflow from {} sent data of the first flight; refusing the connection", show(local))]
    UntrustedSent { local: Option<SocketAddr> },
    #[error("trusted-path-first violated: the subflow from {} received data of the peer's first flight; refusing the connection", show(local))]
    UntrustedReceived { local: Option<SocketAddr> },
    #[error("trusted-path-first violated: the subflow from {} was closed during the first flight (what it carried cannot be checked); refusing the connection", show(local))]
    UntrustedClosed { local: Option<SocketAddr> },
    #[error("trusted-path-first: the first flight is not acknowledged after {waited_ms} ms, and the kernel could retransmit it on the subflow from {} (an untrusted path), which nena cannot close ({why}; closing one subflow needs CAP_NET_ADMIN); refusing the connection. Run with CAP_NET_ADMIN, or use the userspace path manager (sysctl net.mptcp.path_manager=userspace)", show(local))]
    Unwithdrawable {
        local: Option<SocketAddr>,
        waited_ms: u64,
        why: String,
    },
    #[error("trusted-path-first violated: the subflow from {} on an untrusted path sent {sent} bytes of the first flight while nena's first-flight hold counted {} drop(s) for the connection, so the hold (nena's BPF program on the egress of its own cgroup) was not in effect for it and those bytes may have crossed that path; the likely cause is that the nena process (or the thread that connected) was moved to another cgroup after the program was attached (by systemd, a container runtime, cgclassify): keep nena in the cgroup it started in; refusing the connection", show(local), dropped.map_or("no".to_string(), |d| d.to_string()))]
    HoldNotInEffect {
        local: Option<SocketAddr>,
        sent: u64,
        dropped: Option<u64>,
    },
    #[error("trusted-path-first unverifiable: path-manager events were lost during the first flight; refusing the connection")]
    EventsLost,
    #[error("gate used out of order: {0}")]
    OutOfOrder(&'static str),
}

fn show(a: &Option<SocketAddr>) -> String {
    a.map_or("?".into(), |a| a.to_string())
}

impl Refusal {
    /// The first flight could not be verified (events lost), rather than a rule being
    /// broken: a new connection with fresh keys is as safe as the refused one.
    pub fn is_unverifiable(&self) -> bool {
        matches!(self, Refusal::EventsLost)
    }
    /// The local address of the subflow that broke the rule, if the refusal names one.
    pub fn local(&self) -> Option<SocketAddr> {
        match self {
            Refusal::InitialNotTrusted { local }
            | Refusal::UntrustedBeforeFirstFlight { local }
            | Refusal::UntrustedSent { local }
            | Refusal::UntrustedReceived { local }
            | Refusal::UntrustedClosed { local }
            | Refusal::HoldNotInEffect { local, .. }
            | Refusal::Unwithdrawable { local, .. } => *local,
            _ => None,
        }
    }
}
