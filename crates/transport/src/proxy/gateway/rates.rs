//! How fast one LAN host, and all of them, may make the gateway start work that costs a
//! nena session: new datagram flows and DNS queries, each a GCRA bucket (the `governor`
//! crate) of a rate a second and a burst of twice it. The caps of [`super::bounds`] say
//! how much may be held at once; a host spraying source ports or names at thousands a
//! second stays within them but would make the gateway open (and close) sessions as fast
//! as it sprays, taking the CPU and the session openings another host needs. Over its rate
//! a new flow's datagram and a query are dropped unanswered, before any task or session
//! (an answer would cost a socket of its own); a host that keeps to its rate is not affected by one that does not, unless
//! the total rate is reached (then every host is refused alike).
//!
//! A host's buckets are kept for the [`HOSTS`] most recently seen hosts (a LAN host forging
//! many sources within its prefixes cannot grow this table; one that cycles through more
//! than [`HOSTS`] sources gets fresh buckets, but the total buckets still hold).

use governor::clock::{Clock, DefaultClock};
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use lru::LruCache;
use std::net::IpAddr;
use std::num::{NonZeroU32, NonZeroUsize};

/// Hosts whose buckets are remembered.
pub const HOSTS: usize = 4096;

/// Rates a second; 0 means no limit. Bursts are twice the rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rates {
    /// New datagram flows (LAN sockets) of one LAN host.
    pub flows_per_host: u32,
    /// New datagram flows of all LAN hosts.
    pub flows: u32,
    /// DNS queries of one LAN host.
    pub dns_per_host: u32,
    /// DNS queries of all LAN hosts.
    pub dns: u32,
}

impl Default for Rates {
    /// A host's browser opens a few QUIC and DNS sockets a second and resolves a page's
    /// few dozen names in a burst: well within 32 new flows and 64 queries a second (bursts
    /// of 64 and 128). The totals let eight such hosts at their rate at once.
    fn default() -> Rates {
        Rates {
            flows_per_host: 32,
            flows: 256,
            dns_per_host: 64,
            dns: 512,
        }
    }
}

/// Refusals over a rate, for the gateway's final log line.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    pub flows: u64,
    pub dns: u64,
}

type Bucket<C> = RateLimiter<NotKeyed, InMemoryState, C, NoOpMiddleware<<C as Clock>::Instant>>;

fn bucket<C: Clock + Clone>(per_second: u32, clock: &C) -> Option<Bucket<C>> {
    let rate = NonZeroU32::new(per_second)?;
    let burst = rate.saturating_mul(NonZeroU32::new(2).expect("2 is not 0"));
    Some(RateLimiter::direct_with_clock(
        Quota::per_second(rate).allow_burst(burst),
        clock.clone(),
    ))
}

/// Whether `b` (no bucket: no limit) lets one more through now.
fn admits<C: Clock>(b: &Option<Bucket<C>>) -> bool {
    b.as_ref().is_none_or(|b| b.check().is_ok())
}

struct HostBuckets<C: Clock> {
    flows: Option<Bucket<C>>,
    dns: Option<Bucket<C>>,
}

/// The buckets of the LAN hosts and of all of them.
pub struct Limits<C: Clock = DefaultClock> {
    rates: Rates,
    clock: C,
    hosts: LruCache<IpAddr, HostBuckets<C>>,
    flows: Option<Bucket<C>>,
    dns: Option<Bucket<C>>,
    refused: Refused,
}

impl std::fmt::Debug for Limits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limits")
            .field("rates", &self.rates)
            .field("hosts", &self.hosts.len())
            .field("refused", &self.refused)
            .finish()
    }
}

impl Limits {
    pub fn new(rates: Rates) -> Limits {
        Limits::with_clock(rates, DefaultClock::default())
    }
}

impl<C: Clock + Clone> Limits<C> {
    pub fn with_clock(rates: Rates, clock: C) -> Limits<C> {
        Limits {
            flows: bucket(rates.flows, &clock),
            dns: bucket(rates.dns, &clock),
            rates,
            clock,
            hosts: LruCache::new(NonZeroUsize::new(HOSTS).expect("HOSTS is not 0")),
            refused: Refused::default(),
        }
    }

    pub fn rates(&self) -> Rates {
        self.rates
    }

    pub fn refused(&self) -> Refused {
        self.refused
    }

    fn host(&mut self, host: IpAddr) -> &mut HostBuckets<C> {
        let (rates, clock) = (self.rates, &self.clock);
        self.hosts.get_or_insert_mut(host, || HostBuckets {
            flows: bucket(rates.flows_per_host, clock),
            dns: bucket(rates.dns_per_host, clock),
        })
    }

    /// A new datagram flow of `host` may start now (else counted).
    pub fn new_flow(&mut self, host: IpAddr) -> bool {
        let ok = admits(&self.host(host).flows) && admits(&self.flows);
        if !ok {
            self.refused.flows += 1;
        }
        ok
    }

    /// A DNS query of `host` may be carried now (else counted).
    pub fn query(&mut self, host: IpAddr) -> bool {
        let ok = admits(&self.host(host).dns) && admits(&self.dns);
        if !ok {
            self.refused.dns += 1;
        }
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use governor::clock::FakeRelativeClock;
    use std::time::Duration;

    fn host(n: u8) -> IpAddr {
        IpAddr::from([198, 18, 5, n])
    }

    fn rates() -> Rates {
        Rates {
            flows_per_host: 10,
            flows: 30,
            dns_per_host: 5,
            dns: 1000,
        }
    }

    /// A spraying host gets its burst, then its rate; a calm host meanwhile gets all of its
    /// own; the refusals are counted.
    #[test]
    fn a_spraying_host_is_held_to_its_rate_and_another_is_not_affected() {
        let clock = FakeRelativeClock::default();
        let mut l = Limits::with_clock(rates(), clock.clone());
        let passed = (0..1000).filter(|_| l.new_flow(host(2))).count();
        assert_eq!(passed, 20, "the burst: twice the rate");
        // One second later: ten more (the rate), not the whole burst again.
        clock.advance(Duration::from_secs(1));
        let passed = (0..1000).filter(|_| l.new_flow(host(2))).count();
        assert_eq!(passed, 10);
        assert!((0..10).all(|_| l.new_flow(host(3))), "the calm host");
        assert_eq!(l.refused().flows, 980 + 990);
        // DNS has buckets of its own.
        assert_eq!((0..100).filter(|_| l.query(host(2))).count(), 10);
        assert_eq!(l.refused().dns, 90);
    }

    /// Many hosts together are held to the total.
    #[test]
    fn all_hosts_together_are_held_to_the_total() {
        let clock = FakeRelativeClock::default();
        let mut l = Limits::with_clock(rates(), clock.clone());
        let passed = (1..=20)
            .flat_map(|h| std::iter::repeat_n(h, 20))
            .filter(|h| l.new_flow(host(*h)))
            .count();
        assert_eq!(passed, 60, "the total's burst");
    }

    /// A rate of 0 is no limit; the table of hosts stays within [`HOSTS`].
    #[test]
    fn zero_is_no_limit_and_the_hosts_are_bounded() {
        let mut l = Limits::with_clock(
            Rates {
                flows_per_host: 0,
                flows: 0,
                dns_per_host: 0,
                dns: 0,
            },
            FakeRelativeClock::default(),
        );
        for i in 0..(HOSTS as u32 + 100) {
            let h = IpAddr::from(std::net::Ipv6Addr::from(0x2001_0002_u128 << 96 | i as u128));
            assert!(l.new_flow(h) && l.query(h));
        }
        assert_eq!(l.hosts.len(), HOSTS);
        assert_eq!(l.refused(), Refused::default());
    }
}
