//! What the gate's driver reads from the [`Kernel`]: the snapshots it feeds the machine
//! (`MPTCP_INFO`, then `MPTCP_FULL_INFO`, then the hold's drop count), the interface each
//! subflow from a trusted address leaves by (looked up once per subflow), and the reports
//! of what the connection is ([`Gate::report`], [`Gate::classified`]).

use super::{ClassifiedSubflow, Gate, Kernel, PathReport, SysKernel};
use super::{ConnSnapshot, Snapshot, SubflowSnapshot};
use crate::path::Trust;
use crate::sockopt::{self, SubflowInfo};
use crate::MptcpError;
use std::net::SocketAddr;

impl<K: Kernel> Gate<K> {
    /// What the machine is fed: `MPTCP_INFO`, then `MPTCP_FULL_INFO` (so an ACK seen is no
    /// newer than the counters). Nothing for a fallback connection.
    pub(super) fn snapshot(&self) -> Result<Snapshot, MptcpError> {
        Ok(self.read()?.0)
    }

    /// [`snapshot`](Self::snapshot) with the subflows as the kernel listed them (their
    /// remote addresses and timers).
    pub(super) fn read(&self) -> Result<(Snapshot, Vec<SubflowInfo>), MptcpError> {
        if self.is_fallback() {
            return Ok((Snapshot::default(), Vec::new()));
        }
        let conn = ConnSnapshot::from(&self.kernel.info()?);
        let (subflows, infos) = self.listed()?;
        // After the subflows: every drop of what they show is counted by now (see
        // `Snapshot::dropped`).
        let dropped = self.kernel.hold_dropped();
        Ok((
            Snapshot {
                conn,
                subflows,
                dropped,
            },
            infos,
        ))
    }

    /// `MPTCP_FULL_INFO`: the subflows as the machine sees them, and as the kernel listed
    /// them.
    pub(super) fn listed(&self) -> Result<(Vec<SubflowSnapshot>, Vec<SubflowInfo>), MptcpError> {
        let infos = self.kernel.subflows()?;
        let subflows = infos
            .iter()
            .map(|s| SubflowSnapshot {
                iface: self.leaves_by(s.local, s.remote),
                ..SubflowSnapshot::from(s)
            })
            .collect();
        Ok((subflows, infos))
    }

    /// The trust of a subflow as the kernel lists it: its address and the interface it
    /// leaves by.
    pub(super) fn trust_of(&self, s: &SubflowInfo) -> Trust {
        self.machine
            .trust(s.local, self.leaves_by(s.local, s.remote))
    }

    /// The interface a subflow `local` -> `remote` from a *trusted* address leaves by (the
    /// trust of other addresses does not depend on it: `None`): the device the socket is
    /// bound to, else, for a socket bound to none, the route from its address. `None` when
    /// it cannot be told (a socket gone, or bound to a device that is not the address's
    /// own): the machine then counts the subflow untrusted.
    pub(super) fn leaves_by(
        &self,
        local: Option<SocketAddr>,
        remote: Option<SocketAddr>,
    ) -> Option<u32> {
        let (l, r) = (local?, remote?);
        if !self.machine.policy().classify(l.ip()).is_trusted() {
            return None;
        }
        let mut paths = self.paths.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&known) = paths.get(&(l, r)) {
            return known;
        }
        let found = self.find_path(l, r);
        // A socket not found yet (or any more) is looked up again next time.
        if found.is_some() {
            paths.insert((l, r), found);
        }
        found
    }

    /// [`Gate::leaves_by`]'s lookup, uncached: `sock_diag`'s exact lookup through the
    /// address's own interface finds the socket if it is bound there or to no device.
    fn find_path(&self, l: SocketAddr, r: SocketAddr) -> Option<u32> {
        let own = self.machine.policy().iface(l.ip())?.index;
        match self.kernel.bound_dev(l, r, own) {
            Ok(Some(0)) => self.route_of(Some(l), Some(r)),
            Ok(Some(dev)) => Some(dev),
            // Not found through its own device: gone (a closed subflow's route is what it
            // used, unless it was bound elsewhere) or bound to another device.
            Ok(None) => None,
            Err(e) => {
                log::debug!("sock_diag lookup of {l} -> {r}: {e}");
                None
            }
        }
    }

    /// For a subflow from a trusted address bound to no device: the interface the route
    /// from its address leads to (see [`Gate::leaves_by`]).
    pub(super) fn route_of(
        &self,
        local: Option<SocketAddr>,
        remote: Option<SocketAddr>,
    ) -> Option<u32> {
        let (l, r) = (local?, remote?);
        if !self.machine.policy().classify(l.ip()).is_trusted() {
            return None;
        }
        self.kernel.output_iface(l.ip(), r.ip()).ok().flatten()
    }

    /// All subflows with their trust, their addresses as people write them (an IPv4
    /// subflow of a dual-stack socket, which the kernel lists IPv4-mapped, as IPv4).
    pub fn classified(&self) -> Result<Vec<ClassifiedSubflow>, MptcpError> {
        let plain = |a: Option<SocketAddr>| {
            a.map(|a| SocketAddr::new(crate::path::canonical(a.ip()), a.port()))
        };
        let metered = self.metered_addrs();
        let policy = self.machine.policy();
        Ok(self
            .kernel
            .subflows()?
            .into_iter()
            .map(|s| ClassifiedSubflow {
                trust: self.trust_of(&s),
                iface: s
                    .local
                    .and_then(|a| policy.iface(crate::path::canonical(a.ip())))
                    .map(|i| i.name.clone()),
                metered: s
                    .local
                    .is_some_and(|a| metered.contains(&crate::path::canonical(a.ip()))),
                subflow: SubflowInfo {
                    local: plain(s.local),
                    remote: plain(s.remote),
                    ..s
                },
            })
            .collect())
    }

    /// Why the connection is single-path, where nena knows it (the notes of the gate, then
    /// of the recovery service's machine, without their "single path: ", joined).
    pub fn single_path(&self) -> Option<String> {
        let mut all = self.notes.clone();
        if let Some(h) = &self.recovery {
            all.extend(h.notes());
        }
        let all: Vec<&str> = all
            .iter()
            .map(|l| l.trim_start_matches("single path: "))
            .collect();
        (!all.is_empty()).then(|| all.join("; "))
    }
}

impl Gate<SysKernel> {
    /// Advisory: how many bytes the initial subflow can put on the wire at once now
    /// (`snd_cwnd × snd_mss`). With the in-kernel PM, a first flight no larger than this is
    /// entirely handed to the trusted subflow before any DATA_ACK can make the kernel open
    /// another subflow; only an MPTCP-level retransmission could then move it (and
    /// [`poll_first_flight_acked`](Self::poll_first_flight_acked) detects that).
    pub fn first_flight_budget(&self) -> Result<u64, MptcpError> {
        if self.is_fallback() {
            return Ok(u64::MAX);
        }
        Ok(sockopt::initial_window(self.fd())?)
    }

    /// What the connection is now.
    pub fn report(&self) -> Result<PathReport, MptcpError> {
        if self.is_fallback() {
            return Ok(PathReport {
                mptcp: false,
                multipath: false,
                pm: self.pm(),
                congestion: sockopt::congestion(self.fd()).ok(),
                conn: None,
                subflows: vec![],
                single_path: None,
            });
        }
        let subflows = self.classified()?;
        let carrying = subflows
            .iter()
            .filter(|s| s.subflow.bytes_sent + s.subflow.bytes_received > 0)
            .count();
        Ok(PathReport {
            mptcp: true,
            multipath: carrying >= 2,
            pm: self.pm(),
            congestion: sockopt::congestion(self.fd()).ok(),
            conn: Some(sockopt::info(self.fd())?),
            subflows,
            single_path: (carrying < 2).then(|| self.single_path()).flatten(),
        })
    }
}
