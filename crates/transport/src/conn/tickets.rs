//! Resumed sessions on both ends (docs/PROTOCOL.md, "Resumed sessions"): the server's
//! [`ServerTickets`] (nena-proto's bounded store on a monotonic clock of seconds since it was
//! made), and the client's [`TicketJar`] (the tickets it holds per server and server key, in
//! memory only: a process's tickets die with it). A client that holds a ticket for a server
//! opens its next session with a resume hello of about 100 bytes; each session asks for as
//! many tickets as keep [`JAR_PER_SERVER`] in hand.

use nena_proto::{PublicKey, Resumption, StoreLimits, Ticket};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A server's tickets, shared by all its connections.
#[derive(Clone, Debug)]
pub struct ServerTickets {
    store: Resumption,
    start: Instant,
}

impl ServerTickets {
    /// A new store with `limits`.
    pub fn new(limits: StoreLimits) -> Self {
        ServerTickets {
            store: Resumption::new(limits),
            start: Instant::now(),
        }
    }

    /// The store as one handshake sees it: now.
    pub fn now(&self) -> Resumption {
        self.store.at(self.start.elapsed().as_secs())
    }

    /// Tickets held.
    pub fn held(&self) -> usize {
        self.store.tickets_held()
    }
}

impl Default for ServerTickets {
    fn default() -> Self {
        ServerTickets::new(StoreLimits::default())
    }
}

/// Tickets a client keeps per server at most; each session asks for as many as refill it.
pub const JAR_PER_SERVER: usize = 16;

/// A ticket is dropped this long before the server would refuse it (a session that starts
/// just before it expires should not spend a connection on a refusal).
const EXPIRY_MARGIN: Duration = Duration::from_secs(5);

/// The client's tickets, per server address and the key the server proved.
#[derive(Debug, Default)]
pub struct TicketJar {
    held: Mutex<HashMap<SocketAddr, VecDeque<Held>>>,
}

#[derive(Debug)]
struct Held {
    until: Instant,
    ticket: Ticket,
}

impl TicketJar {
    pub fn new() -> Arc<TicketJar> {
        Arc::new(TicketJar::default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SocketAddr, VecDeque<Held>>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A ticket for `server` (one use: it leaves the jar), from a server that proved
    /// `expected` (any key when `None`: a client that checks none); expired ones are dropped.
    pub fn take(&self, server: SocketAddr, expected: Option<PublicKey>) -> Option<Ticket> {
        let mut held = self.lock();
        let q = held.get_mut(&server)?;
        let now = Instant::now();
        q.retain(|h| h.until > now);
        let at = q
            .iter()
            .position(|h| expected.is_none_or(|k| h.ticket.server_key() == k))?;
        q.remove(at).map(|h| h.ticket)
    }

    /// How many tickets a session with `server` asks for: as many as fill the jar's share,
    /// at most what one answer grants.
    pub fn want(&self, server: SocketAddr) -> u8 {
        let n = self.lock().get(&server).map_or(0, VecDeque::len);
        JAR_PER_SERVER
            .saturating_sub(n)
            .min(usize::from(nena_proto::resume::MAX_TICKETS_PER_ANSWER)) as u8
    }

    /// Keeps the tickets a session with `server` was granted.
    pub fn put(&self, server: SocketAddr, tickets: Vec<Ticket>) {
        if tickets.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut held = self.lock();
        let q = held.entry(server).or_default();
        for t in tickets {
            let life = Duration::from_secs(t.lifetime_secs().into());
            if let Some(until) = now.checked_add(life.saturating_sub(EXPIRY_MARGIN)) {
                q.push_back(Held { until, ticket: t });
            }
        }
        while q.len() > JAR_PER_SERVER {
            q.pop_front();
        }
    }

    /// Forgets every ticket for `server` (its key changed, or it refused one).
    pub fn forget(&self, server: SocketAddr) {
        self.lock().remove(&server);
    }

    /// Tickets held for `server`.
    pub fn held(&self, server: SocketAddr) -> usize {
        self.lock().get(&server).map_or(0, VecDeque::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nena_proto::{
        test_server_key, ClientConfig, ClientHandshake, Progress, ServerConfig, ServerHandshake,
        ENTROPY_LEN, SERVER_ENTROPY_LEN,
    };

    /// Tickets from a real exchange with a server whose store is `store`.
    fn granted(store: &ServerTickets, want: u8) -> Vec<Ticket> {
        let cfg = ClientConfig {
            want_tickets: want,
            ..ClientConfig::default()
        };
        let e: [u8; ENTROPY_LEN] = std::array::from_fn(|i| i as u8 ^ 0x33);
        let mut c = ClientHandshake::new(&cfg, e).unwrap();
        let scfg = ServerConfig::default()
            .with_key(test_server_key())
            .with_resumption(store.now());
        let mut s = ServerHandshake::new(&scfg, [7; SERVER_ENTROPY_LEN]);
        let Ok(Progress::Done {
            value: (reply, _), ..
        }) = s.read(c.first_flight())
        else {
            panic!()
        };
        assert!(matches!(c.read(&reply), Ok(Progress::Done { .. })));
        c.take_tickets()
    }

    #[test]
    fn the_jar_keeps_tickets_per_server_and_key_and_asks_for_what_fills_it() {
        let store = ServerTickets::default();
        let jar = TicketJar::default();
        let (a, b): (SocketAddr, SocketAddr) = (
            "198.18.0.1:1".parse().unwrap(),
            "198.18.0.2:1".parse().unwrap(),
        );
        assert_eq!(jar.want(a), 8);
        jar.put(a, granted(&store, 8));
        assert_eq!(store.held(), 8);
        assert_eq!((jar.held(a), jar.want(a)), (8, 8));
        jar.put(a, granted(&store, 8));
        assert_eq!((jar.held(a), jar.want(a)), (16, 0));
        assert!(jar.take(b, None).is_none(), "another server's");
        let key = test_server_key().public();
        let other = nena_proto::ServerKey::from_seed(&[1; 32]).unwrap().public();
        assert!(jar.take(a, Some(other)).is_none(), "another key's");
        assert!(jar.take(a, Some(key)).is_some());
        assert_eq!((jar.held(a), jar.want(a)), (15, 1));
        jar.forget(a);
        assert_eq!(jar.held(a), 0);
    }
}
