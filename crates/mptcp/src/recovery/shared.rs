//! What the recovery service's thread and the connections' handles share: the changes a
//! registration sends the thread ([`Change`]), the queue and wake-up they go through
//! ([`Shared`]), the services by network namespace, the metered state a handle reads, and
//! the service's timing constants.

use super::machine::{RecoveryEvent, RecoveryMachine};
use crate::metered::{MeteredEvent, MeteredMachine};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The metered event a recovery event also is (link changes, subflows), if any.
pub(super) fn metered_event(ev: &RecoveryEvent, backup: Option<bool>) -> Option<MeteredEvent> {
    Some(match *ev {
        RecoveryEvent::SubflowEstablished { local, remote } => MeteredEvent::SubflowEstablished {
            local,
            remote,
            backup: backup.unwrap_or(false),
        },
        RecoveryEvent::SubflowClosed { local } => MeteredEvent::SubflowClosed { local },
        RecoveryEvent::ConnectionClosed => MeteredEvent::ConnectionClosed,
        RecoveryEvent::LinkDown { addr } => MeteredEvent::LinkDown { addr },
        RecoveryEvent::LinkUp { addr } => MeteredEvent::LinkUp { addr },
        _ => return None,
    })
}

/// Re-read the usable addresses at least this often (a missed notification costs at most
/// this much delay).
pub(super) const RESCAN: Duration = Duration::from_secs(1);

/// A service with no connection for this long stops (its netlink sockets would otherwise
/// keep a deleted network namespace alive); the next registration starts a new one.
pub(super) const IDLE_STOP: Duration = Duration::from_secs(2);

/// How long events of a connection that is not registered (yet) are kept for it.
pub const BACKLOG_FOR: Duration = Duration::from_secs(2);

/// At most this many such events are kept.
pub(super) const BACKLOG_MAX: usize = 256;

pub(super) enum Change {
    Add {
        id: u64,
        token: u32,
        machine: RecoveryMachine,
        recovered: Arc<AtomicU64>,
        notes: Arc<Mutex<Vec<String>>>,
        metered: Box<Option<(MeteredMachine, Arc<MeteredState>)>>,
    },
    Remove {
        id: u64,
    },
    /// The owner saw the peer announce `remote` (in events queued before the registration).
    Announced {
        id: u64,
        remote: SocketAddr,
    },
    /// Subflow events of the connection the owner read before the registration.
    Replay {
        id: u64,
        events: Vec<RecoveryEvent>,
    },
}

pub(super) struct Shared {
    pub(super) changes: Mutex<Vec<Change>>,
    /// Written to wake the service thread up for a change.
    pub(super) wake: OwnedFd,
}

/// Services by network namespace (the inode of `/proc/thread-self/ns/net`).
pub(super) static SERVICES: Mutex<Option<HashMap<u64, Arc<Shared>>>> = Mutex::new(None);
pub(super) static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What the owner of a metered connection may read of its machine, kept by the service.
#[derive(Debug)]
pub struct MeteredState {
    /// The metered local addresses (canonical).
    pub(super) addrs: Vec<IpAddr>,
    /// The metered subflows are backup now.
    pub(super) saving: AtomicBool,
}

impl Shared {
    pub(super) fn push(&self, c: Change) {
        if let Ok(mut q) = self.changes.lock() {
            q.push(c);
        }
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live buffer to an eventfd we own.
        let _ = unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), 8) };
    }
}
