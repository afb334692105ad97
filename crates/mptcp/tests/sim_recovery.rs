//! Subflow recovery driven through a simulated kernel on a virtual clock (`sim/mod.rs`):
//! the `RecoveryMachine`'s commands are carried out by a model of the userspace PM (a
//! create is refused without a link or route, else its join completes one RTT later unless
//! the peer ignores it; a destroy is reported closed), outages and returns of the links at
//! every moment relative to an attempt, the backoff timing exactly, giving up with the
//! connection.

mod sim;

use nena_mptcp::recovery::{Command, RecoveryConfig, RecoveryEvent};
use sim::*;
use std::net::IpAddr;

/// The trusted (T) and untrusted (U) paths were released, each with its subflow.
fn world() -> RecWorld {
    let mut w = RecWorld::new(&[T, U]);
    w.open(T);
    w.open(U);
    w
}

fn commands_on(w: &RecWorld, addr: &str) -> usize {
    w.log
        .iter()
        .filter(|(_, c)| match c {
            Command::CreateSubflow { local, .. } => *local == ip(addr),
            Command::DestroySubflow { local, .. } => local.ip() == ip(addr),
        })
        .count()
}

/// The creates' times relative to `from`, in ms.
fn create_times(w: &RecWorld, addr: &str, from: Micros) -> Vec<Micros> {
    w.creates()
        .into_iter()
        .filter(|(_, a)| *a == ip(addr))
        .map(|(t, _)| (t - from) / MS)
        .collect()
}

/// At rest with the link up: exactly one established subflow on the path, nothing else
/// of it left in the kernel (stale ones destroyed), and no timer pending.
fn assert_recovered(w: &RecWorld, m: &nena_mptcp::recovery::RecoveryMachine, addr: &str) {
    assert_eq!(w.live(addr).len(), 1, "{:?}", w.subflows);
    assert_eq!(
        w.subflows
            .iter()
            .filter(|s| s.0.ip() == ip(addr) && s.1)
            .count(),
        1
    );
    assert_eq!(m.next_deadline(), None, "{:?}", w.log);
}

/// An outage of every length (shorter than a wait, exactly one, longer, a minute): the new
/// subflow is asked for at the very microsecond the link is back, the stale one closed with
/// it, and nothing else happens; the trusted path is never touched.
#[test]
fn outage_then_recreate_exactly_when_the_link_returns() {
    for len in [1, MS, 249 * MS, 250 * MS, 251 * MS, 5 * SEC, 60 * SEC] {
        let mut w = world();
        let mut m = recovery(&mut w, &[U, T], RecoveryConfig::default());
        let stale = w.live(U)[0];
        let (down, up) = (SEC, SEC + len);
        w.at(down, RecAct::LinkDown(ip(U)))
            .at(up, RecAct::LinkUp(ip(U)));
        w.run(&mut m, up + 30 * SEC);
        assert_eq!(
            w.log,
            vec![
                (
                    up,
                    Command::DestroySubflow {
                        local: stale,
                        remote: remote()
                    }
                ),
                (
                    up,
                    Command::CreateSubflow {
                        local: ip(U),
                        remote: remote()
                    }
                ),
            ],
            "outage of {len} µs"
        );
        assert_recovered(&w, &m, U);
        assert_ne!(w.live(U)[0], stale);
        assert_eq!(commands_on(&w, T), 0);
        assert!(w.refused.is_empty());
    }
}

/// Joins the peer does not answer: asked again after 250 ms, 500 ms, 1 s, 2 s, then every
/// 4 s (the bound), to the microsecond; the first answered one ends it.
#[test]
fn backoff_timing_is_exact_when_joins_go_unanswered() {
    let expect = [
        0, 250, 750, 1_750, 3_750, 7_750, 11_750, 15_750, 19_750, 23_750,
    ];
    for unanswered in 0..expect.len() - 1 {
        let mut w = world();
        w.unanswered.insert(ip(U), unanswered);
        let mut m = recovery(&mut w, &[U, T], RecoveryConfig::default());
        let up = 2 * SEC;
        w.at(SEC, RecAct::LinkDown(ip(U)))
            .at(up, RecAct::LinkUp(ip(U)));
        w.run(&mut m, up + 60 * SEC);
        assert_eq!(
            create_times(&w, U, up),
            expect[..=unanswered].to_vec(),
            "{unanswered} unanswered"
        );
        for (t, _) in w.creates() {
            assert_eq!((t - up) % MS, 0, "an attempt off the millisecond grid");
        }
        assert_eq!(w.live(U).len(), 1);
        assert_eq!(m.next_deadline(), None);
    }
    // Another timing: the bound is what the configuration says.
    let cfg = RecoveryConfig {
        first_wait: std::time::Duration::from_millis(100),
        max_wait: std::time::Duration::from_millis(300),
    };
    let mut w = world();
    w.unanswered.insert(ip(U), 5);
    let mut m = recovery(&mut w, &[U, T], cfg);
    w.at(SEC, RecAct::LinkDown(ip(U)))
        .at(2 * SEC, RecAct::LinkUp(ip(U)));
    w.run(&mut m, 10 * SEC);
    assert_eq!(create_times(&w, U, 2 * SEC), [0, 100, 300, 600, 900, 1_200]);
}

/// The link is back before its route: creates are refused (no route), retried after the
/// doubling wait; the route's return is acted on at once.
#[test]
fn refused_creates_are_retried_and_a_route_change_retries_at_once() {
    for route_after in [MS, 200 * MS, 250 * MS, 600 * MS, 3 * SEC] {
        let mut w = world();
        let mut m = recovery(&mut w, &[U, T], RecoveryConfig::default());
        let up = 2 * SEC;
        w.at(SEC, RecAct::LinkDown(ip(U)))
            .at(up, RecAct::LinkUpNoRoute(ip(U)))
            .at(up + route_after, RecAct::RouteUp(ip(U)));
        w.run(&mut m, up + 30 * SEC);
        let times = create_times(&w, U, up);
        // Refused ones at 0, 250, 750, 1750 ms ... before the route; one at the route.
        let refused: Vec<Micros> = [0, 250, 750, 1_750]
            .into_iter()
            .filter(|&t| t * MS < route_after)
            .collect();
        let mut want = refused.clone();
        want.push(route_after / MS);
        assert_eq!(times, want, "route after {route_after} µs");
        assert_eq!(w.refused.len(), refused.len());
        assert_recovered(&w, &m, U);
    }
}

/// A subflow reset by the peer while its link is up is replaced after the first wait.
#[test]
fn a_reset_subflow_is_replaced_after_the_wait() {
    let mut w = world();
    let mut m = recovery(&mut w, &[U, T], RecoveryConfig::default());
    w.at(SEC, RecAct::ResetPath(ip(U)));
    w.run(&mut m, 10 * SEC);
    assert_eq!(create_times(&w, U, SEC), [250]);
    assert_recovered(&w, &m, U);
    // The trusted path too, it is a released path like any other.
    let mut w = world();
    let mut m = recovery(&mut w, &[U, T], RecoveryConfig::default());
    w.at(SEC, RecAct::ResetPath(ip(T)));
    w.run(&mut m, 10 * SEC);
    assert_eq!(create_times(&w, T, SEC), [250]);
    assert_recovered(&w, &m, T);
}

/// Giving up: the connection closes at every moment of a recovery (before the outage,
/// during it, at the create, while a join is pending, during each backoff wait): nothing is
/// asked from then on, and no timer is left.
#[test]
fn the_connection_closing_at_any_moment_ends_the_recovery() {
    let up = 2 * SEC;
    let mut cases = 0;
    for close in [
        0,
        SEC - 1,
        SEC,
        SEC + 1,
        up - 1,
        up,
        up + 1,
        up + 10 * MS,
        up + 250 * MS - 1,
        up + 250 * MS,
        up + 250 * MS + 1,
        up + 700 * MS,
        up + 5 * SEC,
    ] {
        let mut w = world();
        w.unanswered.insert(ip(U), 100);
        let mut m = recovery(&mut w, &[U, T], RecoveryConfig::default());
        w.at(SEC, RecAct::LinkDown(ip(U)))
            .at(up, RecAct::LinkUp(ip(U)))
            .at(close, RecAct::ConnectionClosed);
        w.run(&mut m, up + 60 * SEC);
        assert!(m.is_done());
        assert_eq!(m.next_deadline(), None);
        // Acts at one instant happen in the order scheduled: a close at `up` comes after
        // the link's return, whose attempt is made.
        assert!(
            w.log.iter().all(|(t, _)| *t <= close),
            "asked after the close at {close}: {:?}",
            w.log
        );
        // The create at the link's return comes from an act scheduled before the close;
        // the later ones from timers, which a close at the same instant stops.
        let before: Vec<Micros> = [0, 250, 750, 1_750, 3_750]
            .into_iter()
            .map(|d| up + d * MS)
            .filter(|&t| t < close || (t == up && t == close))
            .collect();
        let creates: Vec<Micros> = w.creates().into_iter().map(|c| c.0).collect();
        assert_eq!(creates, before, "closed at {close}");
        cases += 1;
    }
    assert_eq!(cases, 13);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Happening {
    Down,
    Up,
    UpNoRoute,
    RouteUp,
    Reset,
    Closed,
}

/// Every subset of six happenings of the untrusted path, in every order, 300 ms apart
/// (longer than the first wait, shorter than the second), with joins answered in one RTT
/// or after one or two ignored, or answered slower than the first wait: the invariants of recovery hold at every step:
/// * nothing is asked after the connection closed, and no timer is left;
/// * never a create while the link is down, and a create is made at the very moment the
///   link returns to a path without a subflow;
/// * at rest with the link and route up, exactly one established subflow on the path and
///   none left over; with the link down, none created;
/// * the trusted path is never touched.
#[test]
fn every_interleaving_of_outage_return_route_reset_and_close() {
    let all = [
        Happening::Down,
        Happening::Up,
        Happening::UpNoRoute,
        Happening::RouteUp,
        Happening::Reset,
        Happening::Closed,
    ];
    let mut runs = 0;
    for seq in arrangements(&all) {
        for (unanswered, rtt) in [(0, 20), (1, 20), (2, 20), (0, 280), (1, 280)] {
            let mut w = world();
            w.unanswered.insert(ip(U), unanswered);
            // 280 ms: a join answered after the first wait ran out, so a second is asked
            // for, and both complete.
            w.rtt = rtt * MS;
            let mut m = recovery(&mut w, &[U, T], RecoveryConfig::default());
            let at = |i: usize| SEC + i as Micros * 300 * MS;
            // The link state over time, from the schedule (true: up).
            let mut link = vec![(0, true, true)];
            for (i, h) in seq.iter().enumerate() {
                let up = link.last().unwrap().1;
                let act = match h {
                    Happening::Down => {
                        link.push((at(i), false, false));
                        RecAct::LinkDown(ip(U))
                    }
                    Happening::Up => {
                        link.push((at(i), true, true));
                        RecAct::LinkUp(ip(U))
                    }
                    Happening::UpNoRoute => {
                        link.push((at(i), true, false));
                        RecAct::LinkUpNoRoute(ip(U))
                    }
                    Happening::RouteUp => {
                        link.push((at(i), up, true));
                        RecAct::RouteUp(ip(U))
                    }
                    Happening::Reset => RecAct::ResetPath(ip(U)),
                    Happening::Closed => RecAct::ConnectionClosed,
                };
                w.at(at(i), act);
            }
            let end = at(seq.len()) + 60 * SEC;
            w.run(&mut m, end);
            let state_at = |t: Micros| {
                let l = link.iter().rev().find(|l| l.0 <= t).unwrap();
                (l.1, l.2)
            };
            let ctx = format!("{seq:?} unanswered {unanswered} rtt {rtt}: {:?}", w.log);
            assert_eq!(commands_on(&w, T), 0, "{ctx}");
            for (t, a) in w.creates() {
                assert_eq!(a, ip(U));
                assert!(state_at(t).0, "a create while the link is down: {ctx}");
            }
            // Refused only for want of a route.
            for (t, _) in &w.refused {
                assert!(!state_at(*t).1, "{ctx}");
            }
            if let Some(c) = seq.iter().position(|h| *h == Happening::Closed) {
                assert!(w.log.iter().all(|(t, _)| *t <= at(c)), "{ctx}");
                assert!(m.is_done() && m.next_deadline().is_none(), "{ctx}");
                runs += 1;
                continue;
            }
            // A return of the link to a path that lost its subflow is acted on at once.
            for (i, h) in seq.iter().enumerate() {
                let was_down = seq[..i].contains(&Happening::Down)
                    && seq[..i].iter().rposition(|x| *x == Happening::Down)
                        > seq[..i]
                            .iter()
                            .rposition(|x| matches!(x, Happening::Up | Happening::UpNoRoute));
                if matches!(h, Happening::Up | Happening::UpNoRoute) && was_down {
                    assert!(
                        w.creates().iter().any(|c| c.0 == at(i)),
                        "no create when the link came back: {ctx}"
                    );
                }
            }
            match state_at(end) {
                (true, true) => assert_recovered(&w, &m, U),
                (true, false) => {
                    // Without a route the machine keeps retrying at the bound (4 s).
                    if w.live(U).is_empty() {
                        assert!(m.next_deadline().is_some(), "{ctx}");
                        assert!(!w.refused.is_empty(), "{ctx}");
                    }
                }
                (false, _) => {
                    let down = at(seq.iter().position(|h| *h == Happening::Down).unwrap());
                    assert!(w.creates().iter().all(|c| c.0 < down), "{ctx}");
                    assert_eq!(m.next_deadline(), None, "{ctx}");
                }
            }
            runs += 1;
        }
    }
    // 1 957 arrangements of six happenings, five join behaviours.
    assert_eq!(runs, 5 * 1_957);
}

/// A join answered after the first wait ran out: a second was asked for and completes too;
/// the extra one is destroyed the moment it is reported, leaving one subflow.
#[test]
fn a_slow_join_and_its_retry_both_completing_leave_one_subflow() {
    let mut w = world();
    w.rtt = 300 * MS;
    let mut m = recovery(&mut w, &[U, T], RecoveryConfig::default());
    let up = 2 * SEC;
    w.at(SEC, RecAct::LinkDown(ip(U)))
        .at(up, RecAct::LinkUp(ip(U)));
    w.run(&mut m, up + 30 * SEC);
    assert_eq!(create_times(&w, U, up), [0, 250]);
    let destroys: Vec<(Micros, std::net::SocketAddr)> = w
        .log
        .iter()
        .filter_map(|(t, c)| match c {
            Command::DestroySubflow { local, .. } => Some((*t, *local)),
            _ => None,
        })
        .collect();
    // The stale one at the return; the second join when it completes (250 + 300 ms).
    assert_eq!(destroys.len(), 2, "{:?}", w.log);
    assert_eq!(destroys[1].0, up + 550 * MS);
    assert_recovered(&w, &m, U);
    assert_ne!(w.live(U)[0], destroys[1].1);
}

/// Addresses the gate did not release are never touched, whatever happens to them.
#[test]
fn unreleased_paths_are_left_alone() {
    let mut w = RecWorld::new(&[T, U, T2]);
    w.open(T);
    w.open(U);
    w.open(T2);
    let mut m = recovery(&mut w, &[U], RecoveryConfig::default());
    for (i, a) in [T, T2].iter().enumerate() {
        let base = SEC * (1 + 3 * i as Micros);
        w.at(base, RecAct::LinkDown(ip(a)))
            .at(base + SEC, RecAct::LinkUp(ip(a)))
            .at(base + 2 * SEC, RecAct::ResetPath(ip(a)));
    }
    w.run(&mut m, 30 * SEC);
    assert!(w.log.is_empty(), "{:?}", w.log);
    let fed: Vec<IpAddr> = w
        .fed
        .iter()
        .filter_map(|(_, e)| match e {
            RecoveryEvent::LinkDown { addr } => Some(*addr),
            _ => None,
        })
        .collect();
    assert_eq!(fed, [ip(T), ip(T2)], "the events were fed");
    assert_eq!(m.paths().collect::<Vec<_>>(), [ip(U)]);
}
