//! Subflow recovery after a link outage, userspace PM. The decisions are the sans-IO
//! [`RecoveryMachine`] ([`machine`]); this module is its driver: one thread per network
//! namespace (started by the first connection that needs it) that serves every registered
//! connection of the process in that namespace. It
//! * listens to the `mptcp_pm_events` group (subflow established / closed, connection
//!   closed, an address the peer announced) and to rtnetlink link and address
//!   notifications (as a wake-up only: on each it re-reads which local addresses are
//!   usable, i.e. present on an interface that is up and has carrier, with `getifaddrs`,
//!   and also does so every second);
//! * feeds both to the machines of the connections (by token and local address);
//! * carries out their commands with `SUBFLOW_CREATE` / `SUBFLOW_DESTROY`, and reports a
//!   refused create back to the machine.
//!
//! A connection is registered by [`Gate::release_untrusted`](crate::Gate::release_untrusted)
//! (never before the release, see [`GateMachine::recovery_paths`](crate::GateMachine::recovery_paths))
//! and deregistered when its [`RecoveryHandle`] (held by the gate) is dropped or its
//! `MPTCP_EVENT_CLOSED` arrives. The service holds no descriptor of any connection, so it
//! never keeps one open. Events of a connection not registered yet are kept a short while
//! ([`BACKLOG_FOR`]) and given to its machine when it registers: the in-kernel path manager
//! may join (and fail to) while the gate is still releasing the connection.
//!
//! A machine's [`JoinNote`]s (a path none of whose joins was established) are logged once per
//! process and path, and kept in the connection's handle ([`RecoveryHandle::notes`]) for its
//! report: why the connection is single-path. Lost events (`ENOBUFS`) are logged; a subflow closed in the lost
//! stretch is found again only at its path's next outage.

pub mod machine;
mod service;
mod shared;

pub use machine::{Command, JoinNote, RecoveryConfig, RecoveryEvent, RecoveryMachine};
pub use service::stalled;
use service::start;
use shared::{Change, Shared, NEXT_ID, SERVICES};
pub use shared::{MeteredState, BACKLOG_FOR};

use crate::metered::MeteredMachine;
use crate::MptcpError;
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A connection's registration with the recovery service; dropping it ends the recovery.
pub struct RecoveryHandle {
    id: u64,
    shared: Arc<Shared>,
    recovered: Arc<AtomicU64>,
    notes: Arc<Mutex<Vec<String>>>,
    metered: Option<Arc<MeteredState>>,
}

impl RecoveryHandle {
    /// The connection's metered subflows are backup now (another path carries).
    pub fn metered_saving(&self) -> bool {
        self.metered
            .as_ref()
            .is_some_and(|m| m.saving.load(Ordering::Relaxed))
    }

    /// A new subflow from `local` is to be opened as backup: a metered path's, while
    /// another path carries ([`MeteredMachine::backup_for_new`]).
    pub fn backup_for_new(&self, local: IpAddr) -> bool {
        self.metered.as_ref().is_some_and(|m| {
            m.addrs.contains(&crate::path::canonical(local)) && m.saving.load(Ordering::Relaxed)
        })
    }

    /// Subflows the service re-created for this connection so far (each accepted
    /// `SUBFLOW_CREATE` after an outage).
    pub fn recovered(&self) -> u64 {
        self.recovered.load(Ordering::Relaxed)
    }

    /// Why paths of this connection carry nothing: one line per path none of whose joins
    /// was established ([`JoinNote::line`]).
    pub fn notes(&self) -> Vec<String> {
        self.notes.lock().map(|n| n.clone()).unwrap_or_default()
    }

    /// Give the connection's machine the subflow events its owner read before the
    /// registration (a close seen twice counts once).
    pub fn replay(&self, events: Vec<RecoveryEvent>) {
        if !events.is_empty() {
            self.shared.push(Change::Replay {
                id: self.id,
                events,
            });
        }
    }

    /// Tell the connection's machine of an address the peer announced before the
    /// registration (the service sees only what is announced after it).
    pub fn announce(&self, remote: SocketAddr) {
        self.shared.push(Change::Announced {
            id: self.id,
            remote,
        });
    }
}

impl std::fmt::Debug for RecoveryHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecoveryHandle")
            .field("id", &self.id)
            .finish()
    }
}

impl Drop for RecoveryHandle {
    fn drop(&mut self) {
        self.shared.push(Change::Remove { id: self.id });
    }
}

/// The inode of the calling thread's network namespace.
fn netns_id() -> io::Result<u64> {
    Ok(std::fs::metadata("/proc/thread-self/ns/net")?.ino())
}

/// Register connection `token` (its machine built from the gate's released paths) with the
/// recovery service of the calling thread's network namespace, starting the service if
/// needed. Must be called before any subflow of the release is requested, so that their
/// events are seen.
pub fn register(token: u32, machine: RecoveryMachine) -> Result<RecoveryHandle, MptcpError> {
    register_metered(token, machine, None)
}

/// [`register`], with the connection's metered decisions (`--metered`, userspace PM): the
/// service carries out their `SET_FLAGS` too, opens the metered paths' new subflows as
/// backup while another path carries, and logs each switch.
pub fn register_metered(
    token: u32,
    machine: RecoveryMachine,
    metered: Option<MeteredMachine>,
) -> Result<RecoveryHandle, MptcpError> {
    let metered = metered.map(|m| {
        let state = Arc::new(MeteredState {
            addrs: machine_addrs(&m, &machine),
            saving: AtomicBool::new(m.saving()),
        });
        (m, state)
    });
    let ns = netns_id()?;
    let mut map = SERVICES.lock().map_err(|_| io::Error::other("poisoned"))?;
    let services = map.get_or_insert_with(HashMap::new);
    let shared = match services.get(&ns) {
        Some(s) => s.clone(),
        None => {
            let s = start(ns)?;
            services.insert(ns, s.clone());
            s
        }
    };
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    // Pushed under the services lock: a service that is about to stop for want of work
    // (see `Service::retire`) sees it, or this registration finds no service and starts one.
    let recovered = Arc::new(AtomicU64::new(0));
    let notes = Arc::new(Mutex::new(Vec::new()));
    let state = metered.as_ref().map(|(_, s)| s.clone());
    shared.push(Change::Add {
        id,
        token,
        machine,
        recovered: recovered.clone(),
        notes: notes.clone(),
        metered: Box::new(metered),
    });
    drop(map);
    Ok(RecoveryHandle {
        id,
        shared,
        recovered,
        notes,
        metered: state,
    })
}

/// The metered addresses among a recovery machine's paths.
fn machine_addrs(m: &MeteredMachine, r: &RecoveryMachine) -> Vec<IpAddr> {
    r.paths().filter(|a| m.is_metered(*a)).collect()
}
