//! Resumed sessions (docs/PROTOCOL.md, "Resumed sessions"): the tickets a server grants at
//! the end of a handshake, the client's [`Ticket`], and the server's bounded [`TicketStore`].
//!
//! A ticket is a secret both ends derive from a session's key schedule (nothing of it crosses
//! the wire but its id, once, when it is used). A client that holds one opens its next
//! session with a resume hello of about 100 bytes: the ticket's id, a fresh `r_c` (on the
//! trusted path only, as in a full handshake) and a binder; the server answers with its own
//! fresh 32 bytes and a key confirmation, and no key agreement, signature or ML-KEM runs on
//! either side. Each ticket is used once (the store forgets it when it is taken: a replayed
//! resume hello finds nothing); a full handshake opens a *lineage* that may grant at most
//! [`StoreLimits::per_lineage`] tickets and ends [`StoreLimits::max_age_secs`] after it, so
//! forward secrecy comes back with the next full handshake. The store holds at most
//! [`StoreLimits::capacity`] tickets; full, it grants none (clients then make full
//! handshakes). Sans-IO: the caller gives the time, in seconds on its own monotonic clock.

use crate::identity::PublicKey;
use crate::keys::{SECRET_LEN, TICKET_ID_LEN};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use zeroize::Zeroizing;

/// The id of the offer block by which a hello asks for tickets (not a mode: never chosen;
/// servers older than resumption skip it as an unknown mode).
pub const TICKETS_OFFER_ID: u8 = 0x10;
/// Most tickets one answer grants.
pub const MAX_TICKETS_PER_ANSWER: u8 = 8;
/// Parameters of an accept of `stream` or `aead` to a hello that asked for tickets: the
/// suite, the number granted, the lineage's remaining lifetime in seconds (u32).
pub const TICKET_PARAMS_LEN: usize = 1 + 1 + 4;

/// A ticket the client keeps to resume with (one use). Its secret is wiped when dropped and
/// never printed.
#[derive(Clone)]
pub struct Ticket {
    pub(crate) id: [u8; TICKET_ID_LEN],
    pub(crate) secret: Zeroizing<[u8; SECRET_LEN]>,
    pub(crate) server_key: PublicKey,
    pub(crate) lifetime_secs: u32,
}

impl Ticket {
    /// The key of the server that granted it (proved by the full handshake the lineage began
    /// with): a resumed session is with that server or with nobody.
    pub fn server_key(&self) -> PublicKey {
        self.server_key
    }

    /// Seconds from its grant after which the server refuses it.
    pub fn lifetime_secs(&self) -> u32 {
        self.lifetime_secs
    }

    /// Its id (it crosses the trusted path once, in the resume hello that uses it).
    pub fn id(&self) -> &[u8; TICKET_ID_LEN] {
        &self.id
    }

    /// Its secret: for known-answer tests and vectors only.
    pub fn expose_secret(&self) -> &[u8; SECRET_LEN] {
        &self.secret
    }
}

impl PartialEq for Ticket {
    fn eq(&self, other: &Ticket) -> bool {
        self.id == other.id
    }
}

impl Eq for Ticket {}

impl fmt::Debug for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticket")
            .field("lifetime_secs", &self.lifetime_secs)
            .finish_non_exhaustive()
    }
}

/// The bounds of a [`TicketStore`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreLimits {
    /// Seconds from a full handshake after which none of its lineage's tickets is accepted.
    pub max_age_secs: u32,
    /// Tickets a lineage (a full handshake and the sessions resumed from it) may grant.
    pub per_lineage: u32,
    /// Tickets held at once.
    pub capacity: usize,
}

impl Default for StoreLimits {
    /// Ten minutes, 256 tickets per full handshake, 65,536 tickets (about 6 MB).
    fn default() -> Self {
        StoreLimits {
            max_age_secs: 600,
            per_lineage: 256,
            capacity: 65_536,
        }
    }
}

pub use crate::error::ResumeRefusal;

struct Stored {
    secret: Zeroizing<[u8; SECRET_LEN]>,
    lineage: u64,
    expires: u64,
}

struct Lineage {
    left: u32,
    expires: u64,
}

/// The server's tickets, bounded (see the module's doc). Share one between connections with
/// [`Resumption`].
pub struct TicketStore {
    limits: StoreLimits,
    tickets: HashMap<[u8; TICKET_ID_LEN], Stored>,
    lineages: HashMap<u64, Lineage>,
    next_lineage: u64,
}

impl TicketStore {
    pub fn new(limits: StoreLimits) -> Self {
        TicketStore {
            limits,
            tickets: HashMap::new(),
            lineages: HashMap::new(),
            next_lineage: 0,
        }
    }

    /// Tickets held.
    pub fn len(&self) -> usize {
        self.tickets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tickets.is_empty()
    }

    pub fn limits(&self) -> StoreLimits {
        self.limits
    }

    /// Takes ticket `id` (it is gone afterwards, whatever follows): its secret and lineage.
    pub(crate) fn take(
        &mut self,
        id: &[u8; TICKET_ID_LEN],
        now: u64,
    ) -> Option<(Zeroizing<[u8; SECRET_LEN]>, u64)> {
        let t = self.tickets.remove(id)?;
        (now < t.expires).then_some((t.secret, t.lineage))
    }

    /// Opens the lineage of a full handshake, if there is room for it.
    pub(crate) fn open_lineage(&mut self, now: u64) -> Option<u64> {
        if self.lineages.len() >= self.limits.capacity {
            self.sweep(now);
            if self.lineages.len() >= self.limits.capacity {
                return None;
            }
        }
        let id = self.next_lineage;
        self.next_lineage += 1;
        self.lineages.insert(
            id,
            Lineage {
                left: self.limits.per_lineage,
                expires: now + u64::from(self.limits.max_age_secs),
            },
        );
        Some(id)
    }

    /// How many of `want` tickets `lineage` may grant now (counted against its budget), and
    /// the seconds it has left.
    pub(crate) fn grant(&mut self, lineage: u64, want: u8, now: u64) -> (u8, u32) {
        if self.tickets.len() + usize::from(want) > self.limits.capacity {
            self.sweep(now);
        }
        let room = self.limits.capacity.saturating_sub(self.tickets.len());
        let Some(l) = self.lineages.get_mut(&lineage).filter(|l| now < l.expires) else {
            return (0, 0);
        };
        let n = u32::from(want.min(MAX_TICKETS_PER_ANSWER))
            .min(l.left)
            .min(room as u32);
        l.left -= n;
        let secs = u32::try_from(l.expires - now).unwrap_or(u32::MAX);
        (n as u8, secs)
    }

    /// Keeps a granted ticket until its lineage ends.
    pub(crate) fn insert(
        &mut self,
        id: [u8; TICKET_ID_LEN],
        secret: Zeroizing<[u8; SECRET_LEN]>,
        lineage: u64,
    ) {
        if let Some(l) = self.lineages.get(&lineage) {
            let expires = l.expires;
            self.tickets.insert(
                id,
                Stored {
                    secret,
                    lineage,
                    expires,
                },
            );
        }
    }

    /// Forgets what has expired.
    fn sweep(&mut self, now: u64) {
        self.tickets.retain(|_, t| now < t.expires);
        self.lineages.retain(|_, l| now < l.expires);
    }
}

impl fmt::Debug for TicketStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TicketStore")
            .field("limits", &self.limits)
            .field("tickets", &self.tickets.len())
            .field("lineages", &self.lineages.len())
            .finish()
    }
}

/// A server's resumption for one handshake: the shared store and the time now (seconds on the
/// caller's monotonic clock; the same clock for every handshake of the store).
#[derive(Clone)]
pub struct Resumption {
    pub store: Arc<Mutex<TicketStore>>,
    pub now: u64,
}

impl Resumption {
    /// A new store with `limits`, at time 0.
    pub fn new(limits: StoreLimits) -> Self {
        Resumption {
            store: Arc::new(Mutex::new(TicketStore::new(limits))),
            now: 0,
        }
    }

    /// The same store at time `now`.
    pub fn at(&self, now: u64) -> Self {
        Resumption {
            store: Arc::clone(&self.store),
            now,
        }
    }

    /// The store, locked (a panic elsewhere while it was held leaves it usable: every
    /// operation on it completes before the guard drops).
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, TicketStore> {
        self.store.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Tickets held now.
    pub fn tickets_held(&self) -> usize {
        self.lock().len()
    }
}

impl PartialEq for Resumption {
    fn eq(&self, other: &Resumption) -> bool {
        Arc::ptr_eq(&self.store, &other.store) && self.now == other.now
    }
}

impl Eq for Resumption {}

impl fmt::Debug for Resumption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resumption")
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}

/// The tickets one answer grants: how many, the lineage's seconds left, and where to keep
/// them once the session's schedule gives them.
pub(crate) struct Grant {
    to: Option<(Resumption, u64)>,
    n: u8,
    secs: u32,
}

impl Grant {
    /// For a full handshake: a new lineage, if the server keeps tickets and has room.
    pub(crate) fn full(res: Option<&Resumption>, want: u8) -> Grant {
        let none = Grant {
            to: None,
            n: 0,
            secs: 0,
        };
        let Some(res) = res.filter(|_| want > 0) else {
            return none;
        };
        let mut store = res.lock();
        let Some(lineage) = store.open_lineage(res.now) else {
            return none;
        };
        let (n, secs) = store.grant(lineage, want, res.now);
        drop(store);
        Grant {
            to: Some((res.clone(), lineage)),
            n,
            secs,
        }
    }

    /// For a resumed session: from the lineage of the ticket it used.
    pub(crate) fn resumed(res: &Resumption, lineage: u64, want: u8) -> Grant {
        let (n, secs) = res.lock().grant(lineage, want, res.now);
        Grant {
            to: Some((res.clone(), lineage)),
            n,
            secs,
        }
    }

    /// The accept's ticket parameters: the number granted, the seconds left.
    pub(crate) fn params(&self, out: &mut Vec<u8>) {
        out.push(self.n);
        out.extend_from_slice(&self.secs.to_be_bytes());
    }

    /// Keeps the granted tickets, derived from the session's schedule.
    pub(crate) fn issue(self, sched: &crate::keys::Schedule) {
        let Some((res, lineage)) = self.to else {
            return;
        };
        let mut store = res.lock();
        for i in 0..self.n {
            let (id, secret) = sched.ticket(i);
            store.insert(id, secret, lineage);
        }
    }
}

/// The tickets an accept granted, as the client reads them from its parameters: how many and
/// their lifetime. `params` are the accept's parameters after the suite.
pub(crate) fn granted(params: &[u8], want: u8) -> Result<(u8, u32), crate::HandshakeError> {
    let malformed = crate::HandshakeError::Malformed;
    let [n, a, b, c, d] = params else {
        return Err(malformed("the accept's ticket parameters are not 5 bytes"));
    };
    if *n > want {
        return Err(malformed("the server granted more tickets than asked"));
    }
    Ok((*n, u32::from_be_bytes([*a, *b, *c, *d])))
}

/// The tickets `n` of a session's schedule, for the client.
pub(crate) fn tickets_of(
    sched: &crate::keys::Schedule,
    n: u8,
    server_key: PublicKey,
    lifetime_secs: u32,
) -> Vec<Ticket> {
    (0..n)
        .map(|i| {
            let (id, secret) = sched.ticket(i);
            Ticket {
                id,
                secret,
                server_key,
                lifetime_secs,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(b: u8) -> Zeroizing<[u8; SECRET_LEN]> {
        Zeroizing::new([b; SECRET_LEN])
    }

    #[test]
    fn a_ticket_is_taken_once_and_not_after_its_lineage_ends() {
        let mut s = TicketStore::new(StoreLimits {
            max_age_secs: 10,
            per_lineage: 100,
            capacity: 100,
        });
        let l = s.open_lineage(5).unwrap();
        assert_eq!(s.grant(l, 2, 5), (2, 10));
        s.insert([1; 16], secret(1), l);
        s.insert([2; 16], secret(2), l);
        let (sec, lin) = s.take(&[1; 16], 14).unwrap();
        assert_eq!((*sec, lin), ([1; 32], l));
        assert!(s.take(&[1; 16], 14).is_none(), "a second use is refused");
        assert!(s.take(&[2; 16], 15).is_none(), "expired at 5 + 10");
        assert!(s.is_empty());
        assert_eq!(s.grant(l, 1, 15), (0, 0), "an ended lineage grants nothing");
    }

    #[test]
    fn a_lineage_grants_its_budget_and_the_store_its_capacity() {
        let mut s = TicketStore::new(StoreLimits {
            max_age_secs: 100,
            per_lineage: 10,
            capacity: 12,
        });
        let a = s.open_lineage(0).unwrap();
        let grants: Vec<u8> = (0..3).map(|_| s.grant(a, 8, 1).0).collect();
        assert_eq!(grants, [8, 2, 0], "10 per lineage");
        let b = s.open_lineage(1).unwrap();
        for i in 0..10u8 {
            s.insert([i; 16], secret(i), a);
        }
        assert_eq!(s.grant(b, 8, 2).0, 2, "room for 2 of 12");
        // Once a's lineage ends (at 100) its tickets make room again.
        assert_eq!(s.grant(b, 8, 100), (8, 1), "b has 8 of its 10 left");
    }
}
