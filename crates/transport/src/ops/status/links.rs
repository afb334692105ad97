//! The client's links as `nena status` and the status page show them: for each interface
//! named by `--trusted`, `--untrusted` or `--metered`, whether it is up (up, with carrier and
//! an address), its addresses, since when it is in that state, and the changes on a time
//! line ([`LinkWatch::poll`], read every second with the counters).

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::IpAddr;

/// How many link events are kept.
pub const EVENTS: usize = 100;

/// An interface the command was told about, and what it is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkConf {
    pub name: String,
    /// `trusted` or `untrusted`.
    pub trust: String,
    pub metered: bool,
}

/// What an interface is doing now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkStatus {
    pub name: String,
    pub trust: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub metered: bool,
    /// Up, with carrier and at least one address: a path nena can use.
    pub up: bool,
    pub addresses: Vec<IpAddr>,
    /// Unix time (milliseconds) it came into this state (or the command started watching).
    pub since_unix_ms: u64,
}

/// A change of an interface: `up`, `down`, or `addresses` (up both times, other
/// addresses).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkEvent {
    pub unix_ms: u64,
    pub name: String,
    pub event: String,
    pub addresses: Vec<IpAddr>,
}

/// What one reading of the interfaces found: per name, up and running, and the addresses.
pub type Found = BTreeMap<String, (bool, BTreeSet<IpAddr>)>;

/// The interfaces of this network namespace now (getifaddrs).
pub fn read_interfaces() -> Found {
    use nix::net::if_::InterfaceFlags as F;
    let mut out = Found::new();
    let Ok(all) = nix::ifaddrs::getifaddrs() else {
        return out;
    };
    for ifa in all {
        let running = ifa.flags.contains(F::IFF_UP) && ifa.flags.contains(F::IFF_RUNNING);
        let e = out.entry(ifa.interface_name.clone()).or_default();
        e.0 |= running;
        let Some(a) = ifa.address else { continue };
        if let Some(v4) = a.as_sockaddr_in() {
            e.1.insert(IpAddr::V4(v4.ip()));
        } else if let Some(v6) = a.as_sockaddr_in6() {
            e.1.insert(IpAddr::V6(v6.ip()));
        }
    }
    out
}

/// The interfaces watched, their state and the changes.
#[derive(Debug, Default)]
pub struct LinkWatch {
    links: Vec<LinkStatus>,
    events: VecDeque<LinkEvent>,
}

impl LinkWatch {
    /// Watch `conf`'s interfaces; their first state is read by the first [`poll`].
    ///
    /// [`poll`]: LinkWatch::poll
    pub fn new(conf: &[LinkConf]) -> LinkWatch {
        let mut seen = BTreeSet::new();
        let links = conf
            .iter()
            .filter(|c| seen.insert(c.name.clone()))
            .map(|c| LinkStatus {
                name: c.name.clone(),
                trust: c.trust.clone(),
                metered: c.metered,
                up: false,
                addresses: Vec::new(),
                since_unix_ms: 0,
            })
            .collect();
        LinkWatch {
            links,
            events: VecDeque::new(),
        }
    }

    /// Take a reading `found` at `now_ms`: a link whose state changed gets an event and a
    /// new `since` (the first reading only sets the state and `since`).
    pub fn poll(&mut self, found: &Found, now_ms: u64) {
        for l in &mut self.links {
            let (running, addrs) = found.get(&l.name).cloned().unwrap_or_default();
            let addresses: Vec<IpAddr> = addrs.into_iter().collect();
            let up = running && !addresses.is_empty();
            let first = l.since_unix_ms == 0;
            let event = if up != l.up {
                Some(if up { "up" } else { "down" })
            } else if up && addresses != l.addresses {
                Some("addresses")
            } else {
                None
            };
            if first || event.is_some() {
                if let (false, Some(e)) = (first, event) {
                    if self.events.len() == EVENTS {
                        self.events.pop_front();
                    }
                    self.events.push_back(LinkEvent {
                        unix_ms: now_ms,
                        name: l.name.clone(),
                        event: e.to_string(),
                        addresses: addresses.clone(),
                    });
                }
                if first || event != Some("addresses") {
                    l.since_unix_ms = now_ms;
                }
            }
            l.up = up;
            l.addresses = addresses;
        }
    }

    /// No interface is watched (a server).
    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    pub fn links(&self) -> Vec<LinkStatus> {
        self.links.clone()
    }

    pub fn events(&self) -> Vec<LinkEvent> {
        self.events.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(list: &[(&str, bool, &[&str])]) -> Found {
        list.iter()
            .map(|(n, up, a)| {
                let addrs = a.iter().map(|x| x.parse().unwrap()).collect();
                (n.to_string(), (*up, addrs))
            })
            .collect()
    }

    fn conf(name: &str, trust: &str) -> LinkConf {
        LinkConf {
            name: name.into(),
            trust: trust.into(),
            metered: false,
        }
    }

    /// The first reading sets the state without an event; a link going down, coming back
    /// and changing its address each make one event, and `since` moves with up and down
    /// only.
    #[test]
    fn down_up_and_a_new_address_are_events_with_their_times() {
        let mut w = LinkWatch::new(&[conf("lte", "trusted"), conf("wlan", "untrusted")]);
        let both = found(&[
            ("lte", true, &["198.18.1.1"]),
            ("wlan", true, &["198.18.2.1"]),
        ]);
        w.poll(&both, 1_000);
        assert!(w.events().is_empty());
        assert!(w.links().iter().all(|l| l.up && l.since_unix_ms == 1_000));
        // WLAN loses carrier: down at 2,000.
        w.poll(
            &found(&[
                ("lte", true, &["198.18.1.1"]),
                ("wlan", false, &["198.18.2.1"]),
            ]),
            2_000,
        );
        let wlan = |w: &LinkWatch| w.links().into_iter().find(|l| l.name == "wlan").unwrap();
        assert!(!wlan(&w).up);
        assert_eq!(wlan(&w).since_unix_ms, 2_000);
        // Back with another address at 3,000, then the address changes at 4,000.
        w.poll(
            &found(&[
                ("lte", true, &["198.18.1.1"]),
                ("wlan", true, &["198.18.2.7"]),
            ]),
            3_000,
        );
        w.poll(
            &found(&[
                ("lte", true, &["198.18.1.1"]),
                ("wlan", true, &["198.18.2.8"]),
            ]),
            4_000,
        );
        let ev: Vec<(u64, String)> = w
            .events()
            .into_iter()
            .map(|e| (e.unix_ms, e.event))
            .collect();
        let want = [(2_000, "down"), (3_000, "up"), (4_000, "addresses")];
        assert_eq!(ev, want.map(|(t, e)| (t, e.to_string())));
        assert_eq!(
            wlan(&w).since_unix_ms,
            3_000,
            "an address change is not a new state"
        );
        assert_eq!(
            wlan(&w).addresses,
            vec!["198.18.2.8".parse::<IpAddr>().unwrap()]
        );
        let lte = w.links().into_iter().find(|l| l.name == "lte").unwrap();
        assert_eq!((lte.up, lte.since_unix_ms), (true, 1_000));
    }

    /// An interface that does not exist, or is up without an address, is down; one named
    /// twice is watched once.
    #[test]
    fn a_missing_or_addressless_interface_is_down() {
        let mut w = LinkWatch::new(&[
            conf("lte", "trusted"),
            conf("lte", "trusted"),
            conf("wlan", "untrusted"),
        ]);
        w.poll(&found(&[("wlan", true, &[])]), 5);
        assert_eq!(w.links().len(), 2);
        assert!(w.links().iter().all(|l| !l.up));
    }

    /// The loopback interface of any host is up with 127.0.0.1 (a smoke test of the real
    /// reading).
    #[test]
    fn the_real_reading_finds_loopback() {
        let f = read_interfaces();
        let (up, addrs) = f.get("lo").expect("lo");
        assert!(*up);
        assert!(addrs.contains(&"127.0.0.1".parse::<IpAddr>().unwrap()));
    }
}
