//! What one session did on its paths ([`PathsUsed`]): bytes per path and subflow events,
//! read from the kernel's MPTCP_INFO / MPTCP_FULL_INFO when the session ends.

/// What one session did on its paths, read when it ends.
#[derive(Debug, Clone, Default)]
pub struct PathsUsed {
    /// Per path (the client's trust class, the server's local address): bytes the peer
    /// acknowledged, bytes received.
    pub paths: Vec<(String, u64, u64)>,
    /// The client's view per interface: (interface, metered, acknowledged, received).
    /// Empty on servers.
    pub ifaces: Vec<(String, bool, u64, u64)>,
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
        fd: Option<std::os::fd::BorrowedFd<'_>>,
    ) -> PathsUsed {
        let named = subflows.iter().map(|s| {
            let name = s.local.map_or("?".to_string(), |a| a.ip().to_string());
            (name, s.bytes_acked, s.bytes_received)
        });
        PathsUsed::of_subflows(named, fd, 0)
    }

    /// The client's view: each subflow of the report it logs (`Paths::subflows`) by its
    /// trust class.
    pub fn of_client(
        subflows: &[nena_mptcp::ClassifiedSubflow],
        c: &crate::conn::ClientConn,
    ) -> PathsUsed {
        let named = subflows.iter().map(|s| {
            let name = s.trust.label().to_string();
            (name, s.subflow.bytes_acked, s.subflow.bytes_received)
        });
        let gate = c.gate.as_ref();
        let mut w = PathsUsed::of_subflows(
            named,
            gate.map(|g| g.fd()),
            gate.map_or(0, |g| g.recoveries()),
        );
        w.ifaces = by_iface(subflows);
        w
    }

    /// The subflows present at the end, each `(path, acked, received)`, summed per path;
    /// joins and closes from the number of subflows the connection ever had (MPTCP_INFO).
    fn of_subflows(
        named: impl Iterator<Item = (String, u64, u64)>,
        fd: Option<std::os::fd::BorrowedFd<'_>>,
        recoveries: u64,
    ) -> PathsUsed {
        let mut paths: Vec<(String, u64, u64)> = Vec::new();
        let mut present = 0u64;
        for (name, acked, received) in named {
            present += 1;
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
            joins: total.saturating_sub(1),
            closes: total.saturating_sub(present),
            recoveries,
        }
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
