//! What one LAN host can make the gateway hold, and all of them together: the datagram
//! flows (each a task, a nena session and a queue) and the DNS queries in flight (each a
//! task and at most one nena session), counted per LAN host (its source address) and in
//! total ([`Caps`]). A new flow over a cap closes the least recently used flow first (of its
//! own host when the host is at its cap, else of all hosts); a DNS query over a cap is not
//! carried. Every operation costs the same however many flows there are: two LRU lists
//! (the `lru` crate), one over all flows and one per host, and a flow's task removes its
//! own entry when it ends, by its generation (a later flow of the same LAN socket is not
//! removed by an earlier one's end). TCP connections are counted per LAN host too
//! ([`HostSessions`]). How fast new flows and queries may come is [`super::rates`]'.

use lru::LruCache;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

/// The gateway's caps on what its LAN hosts hold at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// Datagram flows (LAN sockets carried, each in a nena session) of one LAN host.
    pub flows_per_host: usize,
    /// Datagram flows of all LAN hosts.
    pub flows: usize,
    /// DNS queries in flight (each carried in a nena session) of one LAN host.
    pub dns_per_host: usize,
    /// DNS queries in flight of all LAN hosts.
    pub dns: usize,
    /// TCP connections carried at once for one LAN host (all hosts: `--max-sessions`).
    pub tcp_per_host: usize,
    /// How fast new datagram flows and DNS queries may come, per host and in all.
    pub rates: super::rates::Rates,
}

impl Default for Caps {
    /// Sized for a home or office LAN: a host's browser keeps a few dozen QUIC and DNS
    /// sockets; the totals keep the gateway's memory under the bound docs/GATEWAY.md states
    /// and its sessions well under a proxy server's `--max-sessions` (4096 by default).
    fn default() -> Caps {
        Caps {
            flows_per_host: 64,
            flows: 512,
            dns_per_host: 32,
            dns: 128,
            tcp_per_host: 512,
            rates: super::rates::Rates::default(),
        }
    }
}

/// Peaks and refusals, for the gateway's final log line (and tests).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Peaks {
    /// Most flows at once, of all hosts and of any one host.
    pub flows: usize,
    pub flows_host: usize,
    /// Most DNS queries in flight at once, of all hosts and of any one host.
    pub dns: usize,
    pub dns_host: usize,
    /// Flows closed to make room for a new one.
    pub evicted: u64,
    /// DNS queries not carried (over a cap).
    pub dns_refused: u64,
}

/// Sessions of one LAN host's flows and DNS queries being opened at once: a flow closed
/// while it waits here has cost the proxy server nothing, and a host asking fast holds at
/// most this many handshakes of the gateway's CPU and `--max-connecting` at once.
pub const OPENING_PER_HOST: usize = 8;

#[derive(Debug)]
struct Host {
    /// This host's flows, least recently used first.
    flows: LruCache<SocketAddr, ()>,
    dns: usize,
    /// Its flows' sessions being opened ([`OPENING_PER_HOST`]).
    opening: Arc<tokio::sync::Semaphore>,
}

impl Host {
    fn new() -> Host {
        Host {
            flows: LruCache::unbounded(),
            dns: 0,
            opening: Arc::new(tokio::sync::Semaphore::new(OPENING_PER_HOST)),
        }
    }
}

/// The flows (each a `V`, what it takes to close it) and DNS queries of the LAN hosts.
#[derive(Debug)]
pub struct Table<V> {
    caps: Caps,
    /// Every flow, least recently used first, with its generation.
    flows: LruCache<SocketAddr, (u64, V)>,
    /// Hosts with a flow or a query in flight (no entry otherwise: a host's entry goes when
    /// its last flow and query do).
    hosts: HashMap<IpAddr, Host>,
    dns: usize,
    next: u64,
    peaks: Peaks,
}

impl<V> Table<V> {
    pub fn new(caps: Caps) -> Table<V> {
        Table {
            caps: Caps {
                flows_per_host: caps.flows_per_host.max(1),
                flows: caps.flows.max(1),
                dns_per_host: caps.dns_per_host,
                dns: caps.dns,
                tcp_per_host: caps.tcp_per_host,
                rates: caps.rates,
            },
            flows: LruCache::unbounded(),
            hosts: HashMap::new(),
            dns: 0,
            next: 0,
            peaks: Peaks::default(),
        }
    }

    pub fn caps(&self) -> Caps {
        self.caps
    }

    pub fn peaks(&self) -> Peaks {
        self.peaks
    }

    /// Flows now, of all hosts.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    /// Hosts with a flow or a DNS query in flight now.
    pub fn hosts(&self) -> usize {
        self.hosts.len()
    }

    /// `peer`'s flow, made the most recently used.
    pub fn get(&mut self, peer: &SocketAddr) -> Option<&V> {
        let (_, v) = self.flows.get(peer)?;
        if let Some(h) = self.hosts.get_mut(&peer.ip()) {
            h.flows.promote(peer);
        }
        Some(v)
    }

    /// A new flow for `peer` (which has none), made by `make` with its generation and its
    /// host's permits for opening sessions; returns the generation and the flow closed to
    /// make room, if one was.
    pub fn insert(
        &mut self,
        peer: SocketAddr,
        make: impl FnOnce(u64, Arc<tokio::sync::Semaphore>) -> V,
    ) -> (u64, Option<V>) {
        debug_assert!(!self.flows.contains(&peer));
        let host_full = self
            .hosts
            .get(&peer.ip())
            .is_some_and(|h| h.flows.len() >= self.caps.flows_per_host);
        let victim = if host_full {
            // The host's own least recently used flow.
            let h = self
                .hosts
                .get_mut(&peer.ip())
                .expect("a full host has an entry");
            h.flows.pop_lru().map(|(k, ())| k)
        } else if self.flows.len() >= self.caps.flows {
            self.flows.peek_lru().map(|(k, _)| *k)
        } else {
            None
        };
        let closed = victim.and_then(|k| {
            self.peaks.evicted += 1;
            self.remove(&k)
        });
        let gen = self.next;
        self.next += 1;
        let opening = self
            .hosts
            .entry(peer.ip())
            .or_insert_with(Host::new)
            .opening
            .clone();
        self.flows.put(peer, (gen, make(gen, opening)));
        let h = self.hosts.get_mut(&peer.ip()).expect("made above");
        h.flows.put(peer, ());
        self.peaks.flows_host = self.peaks.flows_host.max(h.flows.len());
        self.peaks.flows = self.peaks.flows.max(self.flows.len());
        (gen, closed)
    }

    /// The flow of `peer` ended by itself: removed, unless a later flow (another
    /// generation) took its place. Returns what was removed.
    pub fn ended(&mut self, peer: &SocketAddr, gen: u64) -> Option<V> {
        match self.flows.peek(peer) {
            Some((g, _)) if *g == gen => self.remove(peer),
            _ => None,
        }
    }

    fn remove(&mut self, peer: &SocketAddr) -> Option<V> {
        let (_, v) = self.flows.pop(peer)?;
        if let Some(h) = self.hosts.get_mut(&peer.ip()) {
            h.flows.pop(peer);
            if h.flows.is_empty() && h.dns == 0 {
                self.hosts.remove(&peer.ip());
            }
        }
        Some(v)
    }

    /// A DNS query of `host` begins: false (and counted) when the host or all hosts have
    /// their cap in flight; else [`dns_end`](Self::dns_end) must follow.
    pub fn dns_begin(&mut self, host: IpAddr) -> bool {
        let mine = self.hosts.get(&host).map_or(0, |h| h.dns);
        if mine >= self.caps.dns_per_host || self.dns >= self.caps.dns {
            self.peaks.dns_refused += 1;
            return false;
        }
        let h = self.hosts.entry(host).or_insert_with(Host::new);
        h.dns += 1;
        self.dns += 1;
        self.peaks.dns_host = self.peaks.dns_host.max(h.dns);
        self.peaks.dns = self.peaks.dns.max(self.dns);
        true
    }

    /// The permits for sessions being opened of `host` ([`OPENING_PER_HOST`], shared by
    /// its flows and its DNS queries), while it has a flow or a query in flight.
    pub fn opening(&self, host: IpAddr) -> Option<Arc<tokio::sync::Semaphore>> {
        self.hosts.get(&host).map(|h| h.opening.clone())
    }

    /// A DNS query of `host` that [`dns_begin`](Self::dns_begin) let in has ended.
    pub fn dns_end(&mut self, host: IpAddr) {
        let Some(h) = self.hosts.get_mut(&host) else {
            return;
        };
        h.dns = h.dns.saturating_sub(1);
        self.dns = self.dns.saturating_sub(1);
        if h.flows.is_empty() && h.dns == 0 {
            self.hosts.remove(&host);
        }
    }
}

/// TCP connections carried per LAN host, at most [`Caps::tcp_per_host`] each (the gateway's
/// `--max-sessions` bounds all of them); a connection over the cap is reset.
#[derive(Debug)]
pub struct HostSessions {
    cap: usize,
    /// (sessions per host, the most one host had at once, connections reset).
    held: Mutex<(HashMap<IpAddr, usize>, usize, u64)>,
}

/// A LAN host's place among its carried connections, given back when dropped.
#[derive(Debug)]
pub struct HostSlot {
    of: Arc<HostSessions>,
    host: IpAddr,
}

impl HostSessions {
    pub fn new(cap: usize) -> Arc<HostSessions> {
        Arc::new(HostSessions {
            cap: cap.max(1),
            held: Mutex::new((HashMap::new(), 0, 0)),
        })
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    /// A place for one more connection of `host`, unless it has its cap (then counted).
    pub fn take(self: &Arc<Self>, host: IpAddr) -> Option<HostSlot> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let n = held.0.entry(host).or_insert(0);
        if *n >= self.cap {
            held.2 += 1;
            return None;
        }
        *n += 1;
        let n = *n;
        held.1 = held.1.max(n);
        Some(HostSlot {
            of: self.clone(),
            host,
        })
    }

    /// The most connections one host had at once, and the connections reset over the cap.
    pub fn peaks(&self) -> (usize, u64) {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        (held.1, held.2)
    }
}

impl Drop for HostSlot {
    fn drop(&mut self) {
        let mut held = self.of.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = held.0.get_mut(&self.host) {
            *n -= 1;
            if *n == 0 {
                held.0.remove(&self.host);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(host: u8, port: u16) -> SocketAddr {
        SocketAddr::new([198, 18, 5, host].into(), port)
    }

    fn caps() -> Caps {
        Caps {
            flows_per_host: 3,
            flows: 5,
            dns_per_host: 2,
            dns: 3,
            tcp_per_host: 2,
            rates: Default::default(),
        }
    }

    /// A host spraying source ports holds its cap of flows, its least recently used closed
    /// first (a flow it keeps using stays); another host's flows are untouched.
    #[test]
    fn a_spraying_host_closes_its_own_least_recently_used_flows() {
        let mut t = Table::new(caps());
        t.insert(at(3, 1), |_, _| "victim");
        t.insert(at(2, 1), |_, _| "kept");
        for port in 2..1000 {
            assert!(t.get(&at(2, 1)).is_some(), "the used flow was closed");
            let (_, closed) = t.insert(at(2, port), |_, _| "spray");
            // The host holds ports 1, 2 and 3, then its cap: each new port closes the
            // oldest spraying one.
            assert_eq!(closed.is_some(), port >= 4, "port {port}");
            if port >= 4 {
                assert_eq!(closed, Some("spray"), "port {port}");
            }
        }
        assert_eq!(t.flows(), 4);
        assert_eq!(t.get(&at(3, 1)), Some(&"victim"));
        assert_eq!(t.get(&at(2, 1)), Some(&"kept"));
        assert_eq!(t.get(&at(2, 999)), Some(&"spray"));
        assert_eq!(t.get(&at(2, 997)), None);
        let p = t.peaks();
        assert_eq!((p.flows, p.flows_host, p.evicted), (4, 3, 996));
    }

    /// Over the total, the least recently used flow of all hosts is closed.
    #[test]
    fn over_the_total_the_least_recently_used_of_all_is_closed() {
        let mut t = Table::new(caps());
        for host in 1..=5 {
            t.insert(at(host, 1), |_, _| host);
        }
        t.get(&at(1, 1));
        let (_, closed) = t.insert(at(6, 1), |_, _| 6);
        assert_eq!(closed, Some(2));
        assert_eq!(t.flows(), 5);
        assert_eq!(t.hosts(), 5, "the host without a flow left has no entry");
    }

    /// A flow's end removes its own entry, not a later flow's of the same LAN socket; the
    /// host's entry goes with its last flow.
    #[test]
    fn a_flow_removes_only_its_own_generation() {
        let mut t = Table::new(caps());
        let (old, _) = t.insert(at(2, 1), |g, _| g);
        assert_eq!(t.ended(&at(2, 1), old), Some(old));
        let (new, _) = t.insert(at(2, 1), |g, _| g);
        assert_ne!(old, new);
        assert_eq!(t.ended(&at(2, 1), old), None);
        assert_eq!(t.get(&at(2, 1)), Some(&new));
        assert_eq!(t.ended(&at(2, 1), new), Some(new));
        assert_eq!((t.flows(), t.hosts()), (0, 0));
    }

    /// DNS queries in flight: per host and in total, refusals counted; the slots come back.
    #[test]
    fn dns_in_flight_is_capped_per_host_and_in_total() {
        let mut t = Table::<()>::new(caps());
        let (a, b, c) = (at(2, 0).ip(), at(3, 0).ip(), at(4, 0).ip());
        assert!(t.dns_begin(a) && t.dns_begin(a));
        assert!(!t.dns_begin(a), "over the host's cap");
        assert!(t.dns_begin(b));
        assert!(!t.dns_begin(c), "over the total");
        t.dns_end(a);
        assert!(t.dns_begin(c));
        let p = t.peaks();
        assert_eq!((p.dns, p.dns_host, p.dns_refused), (3, 2, 2));
        for h in [a, b, c] {
            t.dns_end(h);
        }
        t.dns_end(a);
        assert_eq!(t.hosts(), 0);
        assert!(t.dns_begin(a) && t.dns_begin(a));
    }

    /// One host's TCP connections: at its cap the next is refused (counted), a place comes
    /// back when a connection ends; another host is not affected.
    #[test]
    fn tcp_connections_are_capped_per_host() {
        let h = HostSessions::new(2);
        let (a, b) = (at(2, 0).ip(), at(3, 0).ip());
        let one = h.take(a).unwrap();
        let _two = h.take(a).unwrap();
        assert!(h.take(a).is_none());
        assert!(h.take(b).is_some());
        drop(one);
        assert!(h.take(a).is_some());
        assert_eq!(h.peaks(), (2, 1));
        assert_eq!(
            h.held.lock().unwrap().0.len(),
            1,
            "b's entry went with its slot"
        );
    }
}
