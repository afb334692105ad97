//! Bytes per subflow of a session's socket, for reports and log lines.

use nena_mptcp::SubflowInfo;
use serde::Serialize;
use std::net::SocketAddr;
use std::os::fd::BorrowedFd;

/// Bytes per subflow, for reports. `bytes_sent` counts what the subflow handed to the
/// network, retransmissions and segments dropped on the way out (a local rate limiter)
/// included; `bytes_acked` what the peer acknowledged: what crossed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SubflowBytes {
    pub local: Option<SocketAddr>,
    pub remote: Option<SocketAddr>,
    pub bytes_sent: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    /// The smoothed RTT (microseconds) while the subflow is established and has one (for
    /// `nena status` and the metrics, not the reports).
    #[serde(skip)]
    pub rtt_us: Option<u32>,
}

impl From<&SubflowInfo> for SubflowBytes {
    fn from(s: &SubflowInfo) -> Self {
        SubflowBytes {
            local: s.local,
            remote: s.remote,
            bytes_sent: s.bytes_sent,
            bytes_acked: s.bytes_acked,
            bytes_received: s.bytes_received,
            rtt_us: established_rtt(s.state, s.rtt_us),
        }
    }
}

/// The smoothed RTT of a subflow in TCP state `state` (ESTABLISHED is 1): none when it is
/// not established or the kernel has no RTT for it yet.
pub(crate) fn established_rtt(state: u8, rtt_us: u32) -> Option<u32> {
    (state == 1 && rtt_us > 0).then_some(rtt_us)
}

/// The split across paths for a server's log line, each subflow named by the client's end:
/// `198.18.1.2:40000 acked 1.2 MiB recv 3.0 KiB, ...` (`none` when the socket has no
/// subflows to show, e.g. after a fallback).
pub fn describe_split(subflows: &[SubflowBytes]) -> String {
    if subflows.is_empty() {
        return "none".into();
    }
    let parts: Vec<String> = subflows
        .iter()
        .map(|s| {
            format!(
                "{} acked {} recv {}",
                s.remote.map_or("?".into(), |a| a.to_string()),
                crate::text::units::human(s.bytes_acked),
                crate::text::units::human(s.bytes_received)
            )
        })
        .collect();
    parts.join(", ")
}

/// The subflows of a socket (empty when it is not MPTCP or cannot be read).
pub fn subflow_bytes(fd: BorrowedFd<'_>) -> Vec<SubflowBytes> {
    nena_mptcp::subflows(fd)
        .map(|v| v.iter().map(SubflowBytes::from).collect())
        .unwrap_or_default()
}
