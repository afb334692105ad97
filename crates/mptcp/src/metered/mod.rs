//! Metered paths (`--metered IFACE`): a path that costs money per byte (LTE on a data plan)
//! carries the handshake and the first flight as the gate requires, then data only when no
//! other path can. The mechanism is MPTCP's backup priority: a backup subflow gets no data
//! from either end's scheduler (Linux's default scheduler, `mptcp_subflow_get_send`, picks a
//! backup subflow only when no non-backup subflow is active), and MP_PRIO tells the peer,
//! so downloads are kept off the metered path as well as uploads.
//!
//! How each path manager does it:
//! * **Userspace PM** (per connection): after the gate's release, the recovery service
//!   (which already follows the connection's subflows and the links) runs a
//!   [`MeteredMachine`] per connection: the metered subflows are made backup with
//!   `MPTCP_PM_CMD_SET_FLAGS` (token, local and remote address and port; MP_PRIO to the
//!   peer) as soon as a subflow of another path is established, made regular again at
//!   once when the last such path's link goes down, its subflow closes or it stalls, and
//!   backup again when a subflow of it carries again; a metered path's new subflow is
//!   opened with the B flag of MP_JOIN while another path carries. Other connections of
//!   the host are not touched.
//! * **In-kernel PM** (host-wide): the kernel offers no per-connection flag to an
//!   application (`SET_FLAGS` with a token is refused for its connections). [`KernelMetered`]
//!   gives each metered address an endpoint with the `backup` flag (`ip mptcp endpoint add
//!   ADDR dev IFACE backup`, or the flag added to the endpoint that exists), and the kernel
//!   then marks the subflow from that address backup in every connection of the network
//!   namespace, nena's and others', the initial subflow included (measured on Linux 6.18:
//!   the MP_CAPABLE subflow shows `b` on the client and `B` on the server, and the first
//!   flight crosses it all the same, being the only subflow). A watcher thread clears the
//!   flag when every non-metered path's link is down (one MP_PRIO per connection) and sets
//!   it again when one is back; on exit the endpoints are put back as they were.
//!
//! The gate's order is untouched either way: the first flight and the handshake cross the
//! trusted path before any other subflow may carry data, backup or not.

mod machine;

pub use machine::{MeteredCommand, MeteredEvent, MeteredMachine, Switch};

use crate::path::{PathPolicy, ResolvedPolicy};
use crate::pm::{Endpoint, PmSocket, MPTCP_PM_ADDR_FLAG_BACKUP};
use crate::MptcpError;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The local addresses of `policy` held by one of the interfaces `ifaces`.
pub fn metered_addrs(policy: &ResolvedPolicy, ifaces: &[String]) -> Vec<IpAddr> {
    policy
        .trusted
        .iter()
        .chain(&policy.untrusted)
        .copied()
        .filter(|a| policy.iface(*a).is_some_and(|i| ifaces.contains(&i.name)))
        .collect()
}

/// How an endpoint is put back when [`KernelMetered`] ends.
#[derive(Debug, Clone)]
enum Restore {
    /// nena added it: deleted.
    Delete { addr: IpAddr },
    /// It was there without the backup flag: the flag is cleared.
    ClearBackup { addr: IpAddr },
    /// It was there with the flag: the flag is set again (the watcher may have cleared it).
    SetBackup { addr: IpAddr },
}

/// The in-kernel PM's metered paths (see the module documentation): the endpoints made
/// backup and the watcher of the other paths' links, until dropped.
#[derive(Debug)]
pub struct KernelMetered {
    restore: Vec<Restore>,
    stop: Arc<AtomicBool>,
    watcher: Option<std::thread::JoinHandle<()>>,
}

/// How often the watcher looks at the links without a notification.
const RESCAN: Duration = Duration::from_secs(1);

impl KernelMetered {
    /// For the in-kernel PM of the calling thread's network namespace: give every metered
    /// address of `policy` (held by an interface of `ifaces`) an endpoint with the backup
    /// flag, and start the watcher. Needs CAP_NET_ADMIN. Fails naming the endpoint when
    /// the kernel refuses.
    pub fn start(ifaces: &[String], policy: &PathPolicy) -> Result<KernelMetered, MptcpError> {
        let resolved = policy.resolve()?;
        let metered = metered_addrs(&resolved, ifaces);
        let others: Vec<IpAddr> = resolved
            .trusted
            .iter()
            .chain(&resolved.untrusted)
            .copied()
            .filter(|a| !metered.contains(a))
            .collect();
        let mut pm = PmSocket::open()?;
        let eps = pm.endpoints()?;
        let mut restore = Vec::new();
        let mut me = KernelMetered {
            restore: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            watcher: None,
        };
        let carrying = others_usable(&others);
        for &addr in &metered {
            let iface = resolved.iface(addr).cloned();
            let found = eps.iter().find(|e| e.addr == Some(addr));
            let r = match found {
                Some(e) if e.flags & MPTCP_PM_ADDR_FLAG_BACKUP != 0 => Restore::SetBackup { addr },
                Some(_) => Restore::ClearBackup { addr },
                None => {
                    let Some(i) = iface else {
                        return Err(MptcpError::Policy(format!(
                            "--metered: the metered address {addr} is held by no interface"
                        )));
                    };
                    let flags = if carrying {
                        MPTCP_PM_ADDR_FLAG_BACKUP
                    } else {
                        0
                    };
                    pm.endpoint_add(addr, i.index, flags).map_err(|e| {
                        MptcpError::Policy(format!(
                            "--metered {}: cannot add the in-kernel path manager's endpoint \
                             {addr} dev {} backup ({e}; it needs CAP_NET_ADMIN)",
                            i.name, i.name
                        ))
                    })?;
                    log::info!(
                        "metered (in-kernel path manager): added the endpoint {addr} dev {} \
                         {}(no subflow, no signal): the kernel makes the subflows from \
                         {addr} of every connection of this network namespace backup; removed \
                         when nena ends",
                        i.name,
                        if carrying { "backup " } else { "" }
                    );
                    Restore::Delete { addr }
                }
            };
            if found.is_some() {
                pm.endpoint_set_backup(addr, carrying).map_err(|e| {
                    MptcpError::Policy(format!(
                        "--metered: cannot change the in-kernel path manager's endpoint {addr} \
                         ({e}; it needs CAP_NET_ADMIN)"
                    ))
                })?;
            }
            restore.push(r);
        }
        me.restore = restore;
        if !carrying {
            log::info!(
                "metered (in-kernel path manager): no other path is up: the metered path \
                 carries data"
            );
        }
        let stop = me.stop.clone();
        let watcher = Watcher {
            metered,
            others,
            backup: carrying,
            back_since: None,
            pm,
            rtnl: crate::links::subscribe()?,
            stop,
        };
        me.watcher = Some(
            std::thread::Builder::new()
                .name("nena-metered".into())
                .spawn(move || watcher.run())?,
        );
        Ok(me)
    }
}

impl Drop for KernelMetered {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(w) = self.watcher.take() {
            let _ = w.join();
        }
        let Ok(mut pm) = PmSocket::open() else {
            return;
        };
        let eps: Vec<Endpoint> = pm.endpoints().unwrap_or_default();
        for r in &self.restore {
            let done = match r {
                Restore::SetBackup { addr } => pm.endpoint_set_backup(*addr, true),
                Restore::ClearBackup { addr } => pm.endpoint_set_backup(*addr, false),
                Restore::Delete { addr } => match eps.iter().find(|e| e.addr == Some(*addr)) {
                    Some(e) => pm.endpoint_delete(e.id),
                    None => Ok(()),
                },
            };
            if let Err(e) = done {
                log::warn!(
                    "metered: could not put the in-kernel path manager's endpoint back: {e}"
                );
            }
        }
    }
}

/// Whether one of `others` is usable now (its interface up with carrier). No other path
/// at all counts as none usable.
fn others_usable(others: &[IpAddr]) -> bool {
    match crate::links::usable_addresses() {
        Ok(u) => others.iter().any(|a| u.contains(a)),
        Err(e) => {
            log::warn!("metered: cannot list local addresses: {e}");
            true
        }
    }
}

/// After the other paths' return, the longest nena waits for their subflows to move again
/// before the metered path is backup again.
const REVIVE_AT_MOST: Duration = Duration::from_secs(10);

struct Watcher {
    metered: Vec<IpAddr>,
    others: Vec<IpAddr>,
    backup: bool,
    /// The other paths usable again since then, the metered path not backup yet.
    back_since: Option<std::time::Instant>,
    pm: PmSocket,
    rtnl: netlink_sys::Socket,
    stop: Arc<AtomicBool>,
}

impl Watcher {
    /// Whether the other paths' subflows move again since their link came back at `since`:
    /// none with bytes unacknowledged has gone without an ACK since then (after an outage
    /// TCP's retransmission backoff keeps a subflow silent for up to seconds after its link
    /// returns; the metered path made backup before it moves would stall its connection).
    /// At most [`REVIVE_AT_MOST`] after the return it counts as moving.
    fn revived(&self, since: std::time::Instant) -> bool {
        let waited = since.elapsed();
        if waited >= REVIVE_AT_MOST {
            return true;
        }
        let ms = waited.as_millis() as u32;
        match crate::diag::subflow_states() {
            Ok(states) => !states.iter().any(|s| {
                self.others.contains(&crate::path::canonical(s.local.ip()))
                    && s.unacked_bytes > 0
                    && s.last_ack_recv_ms > ms
            }),
            Err(e) => {
                log::debug!("metered: cannot read the subflows' state: {e}");
                true
            }
        }
    }

    fn run(mut self) {
        use std::os::fd::AsRawFd;
        while !self.stop.load(Ordering::Relaxed) {
            let mut fds = [libc::pollfd {
                fd: self.rtnl.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            }];
            // Short enough for the owner's drop to end the thread promptly.
            let ms = 100.min(RESCAN.as_millis() as libc::c_int);
            // SAFETY: `fds` is a live array of one pollfd for the call.
            unsafe { libc::poll(fds.as_mut_ptr(), 1, ms) };
            crate::links::drain_rtnl(&self.rtnl);
            let usable = others_usable(&self.others);
            if !usable {
                self.back_since = None;
            } else if !self.backup && self.back_since.is_none() {
                self.back_since = Some(std::time::Instant::now());
            }
            // Back: not before the other paths' subflows that were cut off move again.
            let carrying = usable && self.back_since.is_none_or(|t| self.revived(t));
            if carrying == self.backup {
                continue;
            }
            self.back_since = None;
            self.backup = carrying;
            for &addr in &self.metered {
                if let Err(e) = self.pm.endpoint_set_backup(addr, carrying) {
                    log::warn!("metered: cannot change the endpoint {addr}: {e}");
                }
            }
            let list = |v: &[IpAddr]| {
                v.iter()
                    .map(|a| a.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            if carrying {
                log::info!(
                    "metered (in-kernel path manager): the metered path is backup again (MP_PRIO), \
                     another path is up ({}); endpoint(s) {} backup",
                    list(&self.others),
                    list(&self.metered)
                );
            } else {
                log::info!(
                    "metered (in-kernel path manager): the metered path carries data now, no \
                     other path is up ({} down); endpoint(s) {} no longer backup",
                    list(&self.others),
                    list(&self.metered)
                );
            }
        }
    }
}
