//! What a client session's connection is and what its paths carried ([`Paths`]): MPTCP or
//! a fallback, multipath or not, the path manager, the congestion control and every
//! subflow's bytes by trust class, as the file server's client tools and the proxy's client
//! sessions report it.

use crate::conn::ClientConn;
use crate::text::units::human;
use nena_mptcp::{ClassifiedSubflow, PathReport};
use serde::Serialize;

/// The path summary that goes into every report.
#[derive(Debug, Clone, Serialize)]
pub struct Paths {
    /// The connection runs MPTCP (did not fall back to plain TCP).
    pub mptcp: bool,
    /// At least two subflows carried payload.
    pub multipath: bool,
    /// The path manager of the client's namespace (`kernel` or `userspace`; none in memory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_manager: Option<nena_mptcp::PmKind>,
    /// The congestion control of the subflows (`--cc`, or the namespace's default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
    pub subflows: Vec<ClassifiedSubflow>,
    /// Why the connection is single-path, where nena knows it (a network that strips
    /// MPTCP's options, a subflow nena closed during the first flight).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub single_path: Option<String>,
}

impl Paths {
    /// What the connection of `c` is now.
    pub fn of(c: &ClientConn) -> Paths {
        match c.paths() {
            Some(PathReport {
                mptcp,
                multipath,
                pm,
                congestion,
                subflows,
                single_path,
                ..
            }) => Paths {
                mptcp,
                multipath,
                path_manager: Some(pm),
                congestion,
                subflows,
                single_path,
            },
            None => match &c.gate {
                Some(gate) => Paths {
                    mptcp: !gate.is_fallback(),
                    multipath: false,
                    path_manager: Some(gate.pm()),
                    congestion: nena_mptcp::congestion(gate.fd()).ok(),
                    subflows: vec![],
                    single_path: gate.single_path(),
                },
                // Not a kernel connection (the in-memory harness): no paths to report.
                None => Paths {
                    mptcp: false,
                    multipath: false,
                    path_manager: None,
                    congestion: None,
                    subflows: vec![],
                    single_path: None,
                },
            },
        }
    }

    /// `multipath over 2 subflow(s): 198.18.1.2 (trusted) acked 12.3 MiB recv 1.0 KiB, ...`.
    /// Per subflow: the bytes the peer acknowledged (what crossed; a subflow's "sent" also
    /// counts segments a local rate limiter dropped and retransmissions) and the bytes
    /// received. Then the congestion control and the path manager.
    pub fn describe(&self) -> String {
        if self.path_manager.is_none() {
            return "in memory (the testing harness): no subflows".into();
        }
        format!("{}; {}", self.describe_subflows(), self.describe_control())
    }

    /// `congestion control cubic, in-kernel path manager`.
    pub fn describe_control(&self) -> String {
        format!(
            "congestion control {}, {} path manager",
            self.congestion.as_deref().unwrap_or("unknown"),
            match self.path_manager {
                Some(nena_mptcp::PmKind::Kernel) => "in-kernel",
                Some(nena_mptcp::PmKind::Userspace) => "userspace",
                None => "no",
            }
        )
    }

    fn describe_subflows(&self) -> String {
        if !self.mptcp {
            return "plain TCP (MPTCP fell back)".into();
        }
        let parts: Vec<String> = self
            .subflows
            .iter()
            .map(|s| {
                format!(
                    "{} ({}{}) acked {} recv {}",
                    s.subflow.local.map_or("?".into(), |a| a.ip().to_string()),
                    s.trust.label(),
                    if s.metered { ", metered" } else { "" },
                    human(s.subflow.bytes_acked),
                    human(s.subflow.bytes_received)
                )
            })
            .collect();
        // Why single-path (`single_path`) was said in a warning line already.
        format!(
            "{} over {} subflow(s): {}",
            if self.multipath {
                "multipath"
            } else {
                "single path"
            },
            self.subflows.len(),
            parts.join(", ")
        )
    }
}
