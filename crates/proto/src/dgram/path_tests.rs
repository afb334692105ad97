//! Tests of the path table: address learning and its order, liveness from probes (down after
//! missed probes, up again), round-trip smoothing, keepalives, links going down and up.

use super::*;

fn addr(last: u8, port: u16) -> SocketAddr {
    SocketAddr::from(([198, 18, 3, last], port))
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn probes(actions: &[PathAction]) -> Vec<(PathId, u32)> {
    actions
        .iter()
        .filter_map(|a| match *a {
            PathAction::Probe { path, id } => Some((path, id)),
            _ => None,
        })
        .collect()
}

/// A server learns a path's address from its first authenticated datagram; an older
/// datagram (a lower counter) from elsewhere does not move it, a newer one does (and the
/// path is unconfirmed until a probe there is answered); an equal counter moves nothing.
#[test]
fn addresses_follow_newer_counters_only() {
    let mut t = PathTable::new(AddressMode::Learn, LivenessConfig::default());
    let now = Instant::now();
    assert!(t.get(1).is_none());
    assert_eq!(
        t.on_authenticated(1, 10, addr(1, 5000), 60, now),
        AddressUpdate::Learned
    );
    assert_eq!(t.get(1).unwrap().remote(), Some(addr(1, 5000)));
    assert_eq!(
        t.on_authenticated(1, 5, addr(9, 6000), 60, now),
        AddressUpdate::Kept
    );
    assert_eq!(
        t.on_authenticated(1, 10, addr(9, 6000), 60, now),
        AddressUpdate::Kept
    );
    assert_eq!(t.get(1).unwrap().remote(), Some(addr(1, 5000)));
    assert_eq!(
        t.on_authenticated(1, 11, addr(1, 5000), 60, now),
        AddressUpdate::Unchanged
    );
    // Confirm the path, then a NAT rebinding: newer counter, new address.
    let id = probes(&t.poll(now))[0].1;
    assert!(t.on_probe_reply(1, id, now + ms(30)).is_some());
    assert!(t.get(1).unwrap().is_usable());
    assert_eq!(
        t.on_authenticated(1, 12, addr(1, 5001), 60, now + ms(40)),
        AddressUpdate::Moved {
            from: addr(1, 5000)
        }
    );
    let p = t.get(1).unwrap();
    assert_eq!(p.remote(), Some(addr(1, 5001)));
    assert_eq!(p.status(), PathStatus::Unconfirmed);
    assert!(!p.is_usable());
    // The old address's datagrams, arriving late, do not move it back.
    assert_eq!(
        t.on_authenticated(1, 11, addr(1, 5000), 60, now + ms(41)),
        AddressUpdate::Kept
    );
    assert_eq!(t.get(1).unwrap().remote(), Some(addr(1, 5001)));
    // The new address is probed at once, and confirmed by the answer.
    let next = probes(&t.poll(now + ms(42)));
    assert_eq!(next.len(), 1);
    assert!(t.on_probe_reply(1, next[0].1, now + ms(70)).is_some());
    assert_eq!(t.get(1).unwrap().status(), PathStatus::Up);
    assert_eq!(t.get(1).unwrap().counts().received, 6);
}

/// A client's addresses are fixed: authenticated datagrams from elsewhere move nothing.
#[test]
fn fixed_addresses_never_move() {
    let mut t = PathTable::new(AddressMode::Fixed, LivenessConfig::default());
    assert_eq!(t.add_path(0, None), Err(PathError::NoAddress(0)));
    assert_eq!(t.add_path(8, Some(addr(1, 1))), Err(PathError::Id(8)));
    t.add_path(0, Some(addr(2, 4444))).unwrap();
    assert_eq!(
        t.add_path(0, Some(addr(2, 4444))),
        Err(PathError::Exists(0))
    );
    let now = Instant::now();
    assert_eq!(
        t.on_authenticated(0, 100, addr(7, 7), 40, now),
        AddressUpdate::Fixed
    );
    assert_eq!(t.get(0).unwrap().remote(), Some(addr(2, 4444)));
    // An unknown path is not added on a client.
    t.on_authenticated(3, 101, addr(7, 7), 40, now);
    assert!(t.get(3).is_none());
}

/// Down after three probes in a row go unanswered, back up at the next answer; a reply to
/// a probe never sent proves nothing.
#[test]
fn down_after_missed_probes_and_back_up() {
    let mut t = PathTable::new(AddressMode::Fixed, LivenessConfig::default());
    t.add_path(0, Some(addr(2, 4444))).unwrap();
    let t0 = Instant::now();
    t.note_data(t0);
    let first = probes(&t.poll(t0));
    assert_eq!(first.len(), 1);
    assert_eq!(t.get(0).unwrap().status(), PathStatus::Unconfirmed);
    assert_eq!(t.on_probe_reply(0, first[0].1 + 1000, t0 + ms(5)), None);
    assert_eq!(t.get(0).unwrap().status(), PathStatus::Unconfirmed);
    assert_eq!(t.on_probe_reply(0, first[0].1, t0 + ms(50)), Some(ms(50)));
    assert_eq!(t.get(0).unwrap().status(), PathStatus::Up);
    // The same reply again is no second sample.
    assert_eq!(t.on_probe_reply(0, first[0].1, t0 + ms(60)), None);

    // From here no answer: a probe a second (data flows), each missed after its timeout.
    let mut now = t0;
    let mut downs_at = None;
    for s in 1..=6u64 {
        now = t0 + Duration::from_secs(s);
        t.note_data(now);
        let sent = probes(&t.poll(now));
        assert_eq!(sent.len(), 1, "one probe at second {s}");
        if downs_at.is_none() && t.get(0).unwrap().status() == PathStatus::Down {
            downs_at = Some(s);
        }
    }
    // Probes of seconds 1, 2, 3 missed (timeout 200 ms after a 50 ms round trip): down at
    // the poll of second 4.
    assert_eq!(downs_at, Some(4));
    assert_eq!(t.get(0).unwrap().missed(), 5);
    assert!(!t.get(0).unwrap().udp_confirmed());
    // The next answer brings it back.
    now += Duration::from_secs(1);
    t.note_data(now);
    let p = probes(&t.poll(now));
    assert_eq!(t.on_probe_reply(0, p[0].1, now + ms(40)), Some(ms(40)));
    let path = t.get(0).unwrap();
    assert_eq!((path.status(), path.missed()), (PathStatus::Up, 0));
}

/// A path never answered stays unconfirmed (never "down": it never worked) however many
/// probes it misses.
#[test]
fn a_path_that_never_answers_stays_unconfirmed() {
    let mut t = PathTable::new(AddressMode::Fixed, LivenessConfig::default());
    t.add_path(1, Some(addr(2, 4444))).unwrap();
    let t0 = Instant::now();
    for s in 0..10 {
        let now = t0 + Duration::from_secs(s);
        t.note_data(now);
        t.poll(now);
    }
    let p = t.get(1).unwrap();
    assert_eq!(p.status(), PathStatus::Unconfirmed);
    assert!(p.missed() >= 8);
    assert!(!p.udp_confirmed());
}

/// Each answered probe is a sample, smoothed as RFC 6298.
#[test]
fn probe_round_trips_are_smoothed() {
    let mut t = PathTable::new(AddressMode::Fixed, LivenessConfig::default());
    t.add_path(0, Some(addr(2, 4444))).unwrap();
    let t0 = Instant::now();
    let mut now = t0;
    for (i, rtt) in [100u64, 200, 100].into_iter().enumerate() {
        now = t0 + Duration::from_secs(i as u64);
        t.note_data(now);
        let p = probes(&t.poll(now));
        assert_eq!(t.on_probe_reply(0, p[0].1, now + ms(rtt)), Some(ms(rtt)));
    }
    let path = t.get(0).unwrap();
    assert_eq!(path.srtt(), Some(Duration::from_nanos(110_937_500)));
    assert_eq!(path.rtt().rttvar(), ms(50));
    let _ = now;
}

/// A keepalive after 15 s without sending on a path (when probes are rarer, idle).
#[test]
fn keepalives_after_fifteen_seconds_of_silence() {
    let mut t = PathTable::new(AddressMode::Fixed, LivenessConfig::default());
    t.add_path(0, Some(addr(2, 4444))).unwrap();
    let t0 = Instant::now();
    assert_eq!(probes(&t.poll(t0)).len(), 1);
    t.on_sent(0, 40, t0);
    assert_eq!(t.poll(t0 + Duration::from_secs(14)), vec![]);
    assert_eq!(
        t.next_timeout(t0 + Duration::from_secs(14)),
        Some(t0 + Duration::from_secs(15))
    );
    assert_eq!(
        t.poll(t0 + Duration::from_secs(15)),
        vec![PathAction::Keepalive { path: 0 }]
    );
    t.on_sent(0, 31, t0 + Duration::from_secs(15));
    // Idle: the next probe comes after the idle interval (60 s).
    assert_eq!(t.poll(t0 + Duration::from_secs(29)), vec![]);
    assert_eq!(probes(&t.poll(t0 + Duration::from_secs(60))).len(), 1);
    let c = t.get(0).unwrap().counts();
    assert_eq!((c.sent, c.sent_bytes), (2, 71));
}

/// A link down: the path is down at once and gets nothing; back up: unconfirmed, probed at
/// once.
#[test]
fn a_link_down_and_up_again() {
    let mut t = PathTable::new(AddressMode::Fixed, LivenessConfig::default());
    t.add_path(0, Some(addr(2, 4444))).unwrap();
    let t0 = Instant::now();
    let p = probes(&t.poll(t0));
    t.on_probe_reply(0, p[0].1, t0 + ms(20));
    assert!(t.get(0).unwrap().is_usable());
    t.set_link(0, false);
    assert_eq!(t.get(0).unwrap().status(), PathStatus::Down);
    assert!(!t.get(0).unwrap().is_usable());
    assert_eq!(t.poll(t0 + Duration::from_secs(100)), vec![]);
    assert_eq!(t.next_timeout(t0 + Duration::from_secs(100)), None);
    t.set_link(0, true);
    assert_eq!(t.get(0).unwrap().status(), PathStatus::Unconfirmed);
    assert_eq!(probes(&t.poll(t0 + Duration::from_secs(101))).len(), 1);
}

/// A server does not probe a path before it knows its address.
#[test]
fn a_server_probes_only_paths_it_has_heard_from() {
    let mut t = PathTable::new(AddressMode::Learn, LivenessConfig::default());
    let now = Instant::now();
    assert_eq!(t.poll(now), vec![]);
    t.on_authenticated(2, 0, addr(1, 5000), 31, now);
    assert_eq!(probes(&t.poll(now)), vec![(2, 0)]);
}
