//! The scheduler: which paths one datagram goes on, from the path table's view (usable or
//! not, round trip, metered) and the datagram's class. Real-time datagrams go on every
//! usable path (the receiver keeps the first copy); bulk datagrams on the usable path with
//! the lowest smoothed round trip, kept until another is clearly lower, so a bulk flow is
//! not reordered by paths of about the same delay. A metered path is used only when no
//! unmetered path is usable. Datagrams that cannot go as UDP go inside the session.

use super::path::PathTable;
use super::wire::PathId;
use serde::Serialize;
use std::time::Duration;

/// How a datagram is treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// A call, a game: every usable path, first copy kept.
    RealTime,
    /// Everything else: the lowest-latency usable path.
    Bulk,
}

/// Where one datagram goes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Route {
    /// The paths to send a sealed copy on, as UDP.
    pub udp: Vec<PathId>,
    /// Whether (also) to carry it inside the session: no path is usable as UDP, or (real
    /// time) a path whose UDP is not confirmed would have carried a copy.
    pub stream: bool,
}

/// Chooses paths; remembers the bulk path it chose last.
#[derive(Clone, Debug, Default)]
pub struct Scheduler {
    bulk: Option<PathId>,
}

/// A bulk flow moves to another path only when that path's round trip is lower by more than
/// this, or by more than an eighth of the current one.
pub const BULK_SWITCH_MARGIN: Duration = Duration::from_millis(2);

impl Scheduler {
    pub fn new() -> Scheduler {
        Scheduler::default()
    }

    /// The bulk path chosen last, if any.
    pub fn bulk_path(&self) -> Option<PathId> {
        self.bulk
    }

    /// Where a datagram of `class` goes now.
    pub fn route(&mut self, paths: &PathTable, class: Class) -> Route {
        let usable: Vec<_> = paths.iter().filter(|p| p.is_usable()).collect();
        let any_unmetered = usable.iter().any(|p| !p.metered());
        let candidates: Vec<_> = usable
            .into_iter()
            .filter(|p| !any_unmetered || !p.metered())
            .collect();
        if candidates.is_empty() {
            return Route {
                udp: Vec::new(),
                stream: true,
            };
        }
        match class {
            Class::RealTime => {
                // A path that would carry a copy but cannot as UDP (not confirmed, or gone
                // down while its link is up): its copy goes inside the session.
                let waiting = paths
                    .iter()
                    .any(|p| p.link_up() && !p.is_usable() && (!p.metered() || !any_unmetered));
                Route {
                    udp: candidates.iter().map(|p| p.id()).collect(),
                    stream: waiting,
                }
            }
            Class::Bulk => {
                let rtt = |p: &&super::path::Path| p.srtt().unwrap_or(Duration::MAX);
                let best = *candidates
                    .iter()
                    .min_by_key(|p| (rtt(p), p.id()))
                    .expect("candidates is not empty");
                let chosen = match candidates.iter().find(|p| Some(p.id()) == self.bulk) {
                    Some(cur) => {
                        let c = rtt(cur);
                        let margin = BULK_SWITCH_MARGIN.max(c / 8);
                        if rtt(&best).saturating_add(margin) < c {
                            best
                        } else {
                            *cur
                        }
                    }
                    None => best,
                };
                self.bulk = Some(chosen.id());
                Route {
                    udp: vec![chosen.id()],
                    stream: false,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dgram::path::{AddressMode, LivenessConfig, PathAction};
    use std::net::SocketAddr;
    use std::time::Instant;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([198, 18, 4, 2], port))
    }

    /// A client table with paths 0 and 1, answered with the given round trips (None: the
    /// path's probe is never answered).
    fn table(rtts: [Option<u64>; 2]) -> (PathTable, Instant) {
        let mut t = PathTable::new(AddressMode::Fixed, LivenessConfig::default());
        t.add_path(0, Some(addr(1))).unwrap();
        t.add_path(1, Some(addr(2))).unwrap();
        let t0 = Instant::now();
        let probes = t.poll(t0);
        for a in probes {
            if let PathAction::Probe { path, id } = a {
                if let Some(ms) = rtts[usize::from(path)] {
                    t.on_probe_reply(path, id, t0 + Duration::from_millis(ms));
                }
            }
        }
        (t, t0)
    }

    #[test]
    fn real_time_goes_on_every_usable_path_bulk_on_the_fastest() {
        let (t, _) = table([Some(60), Some(20)]);
        let mut s = Scheduler::new();
        assert_eq!(
            s.route(&t, Class::RealTime),
            Route {
                udp: vec![0, 1],
                stream: false
            }
        );
        assert_eq!(
            s.route(&t, Class::Bulk),
            Route {
                udp: vec![1],
                stream: false
            }
        );
    }

    /// A path whose UDP is not confirmed: real-time copies go on the other path and inside
    /// the session; bulk on the confirmed path alone; with no path confirmed, the session.
    #[test]
    fn unconfirmed_paths_fall_back_to_the_session() {
        let (t, _) = table([Some(60), None]);
        let mut s = Scheduler::new();
        assert_eq!(
            s.route(&t, Class::RealTime),
            Route {
                udp: vec![0],
                stream: true
            }
        );
        assert_eq!(
            s.route(&t, Class::Bulk),
            Route {
                udp: vec![0],
                stream: false
            }
        );
        let (none, _) = table([None, None]);
        for class in [Class::RealTime, Class::Bulk] {
            assert_eq!(
                s.route(&none, class),
                Route {
                    udp: vec![],
                    stream: true
                }
            );
        }
    }

    /// A path whose link is down carries nothing, and no copy is owed to it.
    #[test]
    fn a_link_down_is_left_out() {
        let (mut t, _) = table([Some(60), Some(20)]);
        t.set_link(1, false);
        let mut s = Scheduler::new();
        assert_eq!(
            s.route(&t, Class::RealTime),
            Route {
                udp: vec![0],
                stream: false
            }
        );
        assert_eq!(s.route(&t, Class::Bulk).udp, vec![0]);
    }

    /// A metered path is used only when no unmetered path is usable.
    #[test]
    fn metered_paths_only_when_nothing_else_works() {
        let (mut t, _) = table([Some(20), Some(60)]);
        t.set_metered(0, true);
        let mut s = Scheduler::new();
        assert_eq!(
            s.route(&t, Class::RealTime),
            Route {
                udp: vec![1],
                stream: false
            }
        );
        assert_eq!(s.route(&t, Class::Bulk).udp, vec![1]);
        t.set_link(1, false);
        assert_eq!(s.route(&t, Class::RealTime).udp, vec![0]);
        assert_eq!(s.route(&t, Class::Bulk).udp, vec![0]);
    }

    /// Bulk stays on its path while another is only slightly faster, moves when it is
    /// clearly faster.
    #[test]
    fn bulk_keeps_its_path_unless_another_is_clearly_faster() {
        let (mut t, t0) = table([Some(40), Some(41)]);
        let mut s = Scheduler::new();
        assert_eq!(s.route(&t, Class::Bulk).udp, vec![0]);
        // Path 1 gets faster by a little (39 ms against 40): no move.
        let mut now = t0;
        let answer = |t: &mut PathTable, now: Instant, ms: [u64; 2]| {
            for a in t.poll(now) {
                if let PathAction::Probe { path, id } = a {
                    t.on_probe_reply(path, id, now + Duration::from_millis(ms[usize::from(path)]));
                }
            }
        };
        for _ in 0..40 {
            now += Duration::from_secs(1);
            t.note_data(now);
            answer(&mut t, now, [40, 39]);
        }
        assert_eq!(s.route(&t, Class::Bulk).udp, vec![0]);
        // Then by much (10 ms against 40): move.
        for _ in 0..40 {
            now += Duration::from_secs(1);
            t.note_data(now);
            answer(&mut t, now, [40, 10]);
        }
        assert_eq!(s.route(&t, Class::Bulk).udp, vec![1]);
        assert_eq!(s.bulk_path(), Some(1));
    }
}
