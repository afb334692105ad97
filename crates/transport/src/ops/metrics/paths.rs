//! What one session did on its paths ([`PathsUsed`]): bytes per path and subflow events,
//! read from the kernel's MPTCP_INFO / MPTCP_FULL_INFO while the session runs (every
//! [`super::counters::LIVE_EVERY`], [`super::Tally::live`]) and when it ends.

use crate::conn::established_rtt;
use std::os::fd::{BorrowedFd, RawFd};

/// What one session did on its paths, read when it ends.
#[derive(Debug, Clone, Default)]
pub struct PathsUsed {
    /// Per path (the client's trust class, the server's local address): bytes the peer
    /// acknowledged, bytes received.
    pub paths: Vec<(String, u64, u64)>,
    /// The client's view per interface: (interface, metered, acknowledged, received).
    /// Empty on servers.
    pub ifaces: Vec<(String, bool, u64, u64)>,
    /// Per path, and per interface on clients: the smoothed RTT (microseconds) of its
    /// established subflows, the lowest where it has several (none: no established subflow
    /// with an RTT).
    pub path_rtt_us: Vec<(String, u32)>,
    pub iface_rtt_us: Vec<(String, u32)>,
    /// Subflows that joined after the first, subflows closed before the end, subflows
    /// re-created after an outage (the client's recovery).
    pub joins: u64,
    pub closes: u64,
    pub recoveries: u64,
}

impl PathsUsed {
    /// The server's view of a session: each subflow (as [`crate::conn::subflow_bytes`]
    /// read them) by its local address; `fd` for the count of subflows ever created (`None`:
    /// not a socket, no subflows).
    pub fn of_server(
        subflows: &[crate::conn::SubflowBytes],
        fd: Option<BorrowedFd<'_>>,
    ) -> PathsUsed {
        let named = subflows.iter().map(|s| {
            let name = s.local.map_or("?".to_string(), |a| a.ip().to_string());
            (name, s.bytes_acked, s.bytes_received, s.rtt_us)
        });
        PathsUsed::of_subflows(named, fd, 0)
    }

    /// A reader of the server's view of the connection whose descriptor is `fd`, for
    /// [`super::Tally::live`] beside the session's bulk. The descriptor is borrowed, not
    /// duplicated: a descriptor per session is what `nena bench sessions` counts.
    ///
    /// # Safety
    /// `fd` must stay open for as long as the reader is kept: the session that owns it is
    /// borrowed by the bulk that `live` runs, and the reader is dropped when `live` returns.
    pub unsafe fn server_reader(fd: Option<RawFd>) -> impl Fn() -> PathsUsed {
        move || match fd {
            Some(raw) => {
                // SAFETY: open while the reader lives (this function's contract).
                let fd = unsafe { BorrowedFd::borrow_raw(raw) };
                PathsUsed::of_server(&crate::conn::subflow_bytes(fd), Some(fd))
            }
            None => PathsUsed::default(),
        }
    }

    /// The client's view of the connection of `gate` now (nothing without a gate, or when
    /// the kernel cannot be read): for [`super::Tally::live`].
    pub fn of_gate(gate: Option<&nena_mptcp::Gate>) -> PathsUsed {
        gate.and_then(|g| g.report().ok())
            .map_or_else(PathsUsed::default, |r| {
                PathsUsed::of_client(&r.subflows, gate)
            })
    }

    /// The client's view: each subflow of the report it logs (`Paths::subflows`) by its
    /// trust class; `gate`: the connection's (its subflow count and recoveries).
    pub fn of_client(
        subflows: &[nena_mptcp::ClassifiedSubflow],
        gate: Option<&nena_mptcp::Gate>,
    ) -> PathsUsed {
        let named = subflows.iter().map(|s| {
            let name = s.trust.label().to_string();
            let rtt = established_rtt(s.subflow.state, s.subflow.rtt_us);
            (name, s.subflow.bytes_acked, s.subflow.bytes_received, rtt)
        });
        let mut w = PathsUsed::of_subflows(
            named,
            gate.map(|g| g.fd()),
            gate.map_or(0, |g| g.recoveries()),
        );
        w.ifaces = by_iface(subflows);
        for s in subflows {
            let name = s.iface.clone().unwrap_or_else(|| "?".into());
            lowest_rtt(
                &mut w.iface_rtt_us,
                name,
                established_rtt(s.subflow.state, s.subflow.rtt_us),
            );
        }
        w
    }

    /// The subflows present at the end, each `(path, acked, received, rtt if established)`,
    /// summed per path; joins and closes from the number of subflows the connection ever
    /// had (MPTCP_INFO).
    fn of_subflows(
        named: impl Iterator<Item = (String, u64, u64, Option<u32>)>,
        fd: Option<BorrowedFd<'_>>,
        recoveries: u64,
    ) -> PathsUsed {
        let mut paths: Vec<(String, u64, u64)> = Vec::new();
        let mut path_rtt_us = Vec::new();
        let mut present = 0u64;
        for (name, acked, received, rtt) in named {
            present += 1;
            lowest_rtt(&mut path_rtt_us, name.clone(), rtt);
            match paths.iter_mut().find(|p| p.0 == name) {
                Some(p) => {
                    p.1 += acked;
                    p.2 += received;
                }
                None => paths.push((name, acked, received)),
            }
        }
        let total = fd
            .and_then(|fd| nena_mptcp::info(fd).ok())
            .map_or(present, |i| u64::from(i.subflows));
        PathsUsed {
            paths,
            ifaces: Vec::new(),
            path_rtt_us,
            iface_rtt_us: Vec::new(),
            joins: total.saturating_sub(1),
            closes: total.saturating_sub(present),
            recoveries,
        }
    }
}

impl PathsUsed {
    /// What `self` (read now) holds beyond `counted` (what was already counted while the
    /// session ran): per path and per interface the bytes above the counted figure (never
    /// fewer than none: a subflow closed since took its bytes along), the subflow events
    /// as they are (they are counted once, at the end).
    pub fn beyond(&self, counted: &PathsUsed) -> PathsUsed {
        let paths = self
            .paths
            .iter()
            .map(|(name, sent, received)| {
                let (s0, r0) = counted
                    .paths
                    .iter()
                    .find(|c| &c.0 == name)
                    .map_or((0, 0), |c| (c.1, c.2));
                (
                    name.clone(),
                    sent.saturating_sub(s0),
                    received.saturating_sub(r0),
                )
            })
            .collect();
        let ifaces = self
            .ifaces
            .iter()
            .map(|(name, metered, sent, received)| {
                let (s0, r0) = counted
                    .ifaces
                    .iter()
                    .find(|c| &c.0 == name)
                    .map_or((0, 0), |c| (c.2, c.3));
                let (s, r) = (sent.saturating_sub(s0), received.saturating_sub(r0));
                (name.clone(), *metered, s, r)
            })
            .collect();
        PathsUsed {
            paths,
            ifaces,
            path_rtt_us: self.path_rtt_us.clone(),
            iface_rtt_us: self.iface_rtt_us.clone(),
            joins: self.joins,
            closes: self.closes,
            recoveries: self.recoveries,
        }
    }

    /// `self` and `other` together: bytes summed per path and per interface (a datagram
    /// session's subflows and its datagram plane), the lowest RTTs, the events summed.
    pub fn plus(&self, other: &PathsUsed) -> PathsUsed {
        let mut out = self.clone();
        for (name, sent, received) in &other.paths {
            match out.paths.iter_mut().find(|c| &c.0 == name) {
                Some(c) => {
                    c.1 += sent;
                    c.2 += received;
                }
                None => out.paths.push((name.clone(), *sent, *received)),
            }
        }
        for (name, metered, sent, received) in &other.ifaces {
            match out.ifaces.iter_mut().find(|c| &c.0 == name) {
                Some(c) => {
                    c.2 += sent;
                    c.3 += received;
                }
                None => out.ifaces.push((name.clone(), *metered, *sent, *received)),
            }
        }
        for (name, rtt) in &other.path_rtt_us {
            lowest_rtt(&mut out.path_rtt_us, name.clone(), Some(*rtt));
        }
        for (name, rtt) in &other.iface_rtt_us {
            lowest_rtt(&mut out.iface_rtt_us, name.clone(), Some(*rtt));
        }
        out.joins += other.joins;
        out.closes += other.closes;
        out.recoveries += other.recoveries;
        out
    }

    /// Raise what `self` records as counted to `now`'s figures where they are higher.
    pub fn raise(&mut self, now: &PathsUsed) {
        for (name, sent, received) in &now.paths {
            match self.paths.iter_mut().find(|c| &c.0 == name) {
                Some(c) => {
                    c.1 = c.1.max(*sent);
                    c.2 = c.2.max(*received);
                }
                None => self.paths.push((name.clone(), *sent, *received)),
            }
        }
        for (name, metered, sent, received) in &now.ifaces {
            match self.ifaces.iter_mut().find(|c| &c.0 == name) {
                Some(c) => {
                    c.2 = c.2.max(*sent);
                    c.3 = c.3.max(*received);
                }
                None => self.ifaces.push((name.clone(), *metered, *sent, *received)),
            }
        }
    }
}

/// Keep in `out` the lowest RTT per name (`rtt` none: nothing to keep).
fn lowest_rtt(out: &mut Vec<(String, u32)>, name: String, rtt: Option<u32>) {
    let Some(rtt) = rtt else { return };
    match out.iter_mut().find(|p| p.0 == name) {
        Some(p) => p.1 = p.1.min(rtt),
        None => out.push((name, rtt)),
    }
}

/// The subflows' bytes summed per interface (an address the policy knows no interface of
/// under `?`), each with whether it is metered, in the order first seen.
pub fn by_iface(subflows: &[nena_mptcp::ClassifiedSubflow]) -> Vec<(String, bool, u64, u64)> {
    let mut out: Vec<(String, bool, u64, u64)> = Vec::new();
    for s in subflows {
        let name = s.iface.clone().unwrap_or_else(|| "?".into());
        match out.iter_mut().find(|p| p.0 == name) {
            Some(p) => {
                p.2 += s.subflow.bytes_acked;
                p.3 += s.subflow.bytes_received;
            }
            None => out.push((
                name,
                s.metered,
                s.subflow.bytes_acked,
                s.subflow.bytes_received,
            )),
        }
    }
    out
}
