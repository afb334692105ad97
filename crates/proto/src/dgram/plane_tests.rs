//! Tests of a whole plane, client and server, over a simulated pair of paths: addresses
//! learned from authenticated datagrams only, redundant copies delivered once, the fallback
//! into the session where a path blocks UDP (and back), and the bytes a redundant call
//! costs.

use super::*;
use crate::dgram::path::PathStatus;
use crate::dgram::wire::{self, DATA_OVERHEAD};
use crate::{exchange_in, Mode};
use std::time::Duration;

const C_ID: ReceiverId = 0x0000_c11e;
const S_ID: ReceiverId = 0x5e55_0001;

fn server_addr() -> SocketAddr {
    SocketAddr::from(([198, 18, 4, 2], 4444))
}

/// The client's address on each path as the server sees it (path 1 behind a NAT).
fn client_addr(path: PathId) -> SocketAddr {
    match path {
        0 => SocketAddr::from(([198, 18, 1, 2], 40000)),
        _ => SocketAddr::from(([198, 18, 3, 1], 61000)),
    }
}

fn attacker() -> SocketAddr {
    SocketAddr::from(([198, 18, 3, 66], 6666))
}

fn planes() -> (Plane, Plane) {
    let x = exchange_in(Mode::Aead);
    let ck = x.client.datagram_keys().unwrap();
    let sk = x.server.datagram_keys().unwrap();
    let mut c = Plane::client(&ck, C_ID, S_ID, LivenessConfig::default());
    c.add_path(0, server_addr()).unwrap();
    c.add_path(1, server_addr()).unwrap();
    let s = Plane::server(&sk, S_ID, C_ID, LivenessConfig::default());
    (c, s)
}

/// Which paths deliver UDP (both directions).
struct Net {
    open: [bool; 2],
}

impl Net {
    /// Moves everything both planes want to send now (probes, replies, keepalives) until
    /// nothing is left; returns what the server sent.
    fn settle(&self, c: &mut Plane, s: &mut Plane, now: Instant) -> Vec<Transmit> {
        let mut from_server = Vec::new();
        for _ in 0..4 {
            for mut t in c.poll(now).unwrap() {
                assert_eq!(t.to, server_addr());
                if self.open[usize::from(t.path)] {
                    let _ = s.receive(&mut t.bytes, client_addr(t.path), now);
                }
            }
            for mut t in s.poll(now).unwrap() {
                from_server.push(t.clone());
                if self.open[usize::from(t.path)] {
                    let _ = c.receive(&mut t.bytes, server_addr(), now);
                }
            }
        }
        from_server
    }
}

/// Forged and altered datagrams from an attacker's address teach the server nothing and
/// get nothing from it; the client's first authenticated datagram teaches it the path; a
/// replay from the attacker is refused, and a genuine datagram held back and re-sent from
/// the attacker's address (older counter) is delivered but does not move the address.
#[test]
fn addresses_are_learned_from_authenticated_datagrams_only() {
    let (mut c, mut s) = planes();
    let now = Instant::now();
    let mut genuine = c.send(b"held back", Class::Bulk, now).unwrap();
    assert!(genuine.stream, "no path confirmed yet: the session");
    // Nothing confirmed: force a UDP copy by sealing directly for path 1.
    let held = c
        .sealer
        .seal(
            1,
            Message::Data {
                seq: 1000,
                payload: b"held",
            },
        )
        .unwrap();
    genuine.udp.clear();

    // Forgeries: random bodies behind a valid header, and a genuine datagram altered.
    let mut forged = wire::Header {
        receiver: S_ID,
        path: 1,
        counter: 1_000_000,
    }
    .encode()
    .to_vec();
    forged.extend_from_slice(&[0x5a; 40]);
    assert_eq!(
        s.receive(&mut forged.clone(), attacker(), now),
        Err(Dropped::Unauthentic)
    );
    let mut altered = held.clone();
    let last = altered.len() - 1;
    altered[last] ^= 1;
    assert_eq!(
        s.receive(&mut altered, attacker(), now),
        Err(Dropped::Unauthentic)
    );
    assert!(s.paths().iter().next().is_none(), "no path learned");
    assert!(s.poll(now).unwrap().is_empty(), "nothing sent anywhere");
    assert_eq!(s.stats().unauthentic, 2);

    // The client probes both paths; path 1's probe (from the NAT's address) teaches it.
    let sent_by_server = Net { open: [true, true] }.settle(&mut c, &mut s, now);
    assert!(sent_by_server.iter().all(|t| t.to == client_addr(t.path)));
    assert_eq!(s.paths().get(1).unwrap().remote(), Some(client_addr(1)));
    assert!(s.paths().get(1).unwrap().udp_confirmed());

    // The held-back datagram, re-sent from the attacker's address: authentic and new, so
    // delivered, but older than what set the address: the address stays.
    let mut h = held.clone();
    assert!(matches!(
        s.receive(&mut h, attacker(), now),
        Ok(Delivered::Data {
            path: 1,
            payload: b"held",
            ..
        })
    ));
    assert_eq!(s.paths().get(1).unwrap().remote(), Some(client_addr(1)));
    // Its replay: refused, and still no move.
    assert_eq!(
        s.receive(&mut held.clone(), attacker(), now),
        Err(Dropped::Replayed(0))
    );
    assert_eq!(s.paths().get(1).unwrap().remote(), Some(client_addr(1)));
    let later = now + Duration::from_secs(1);
    for t in s.poll(later).unwrap() {
        assert_ne!(t.to, attacker());
    }
}

/// A NAT rebinding on path 1: the client's newer datagram from the new address moves the
/// path there; the server sends it only probes until one is answered, then data again.
#[test]
fn a_moved_address_gets_probes_only_until_confirmed() {
    let (mut c, mut s) = planes();
    let now = Instant::now();
    Net { open: [true, true] }.settle(&mut c, &mut s, now);
    assert!(s.paths().get(1).unwrap().is_usable());
    let new_addr = SocketAddr::from(([198, 18, 3, 1], 61001));
    let mut d = c.sealer.seal(1, Message::Keepalive).unwrap();
    assert!(s.receive(&mut d, new_addr, now).is_ok());
    let p = s.paths().get(1).unwrap();
    assert_eq!(
        (p.remote(), p.status()),
        (Some(new_addr), PathStatus::Unconfirmed)
    );
    // Bulk from the server avoids it; real time carries that path's copy in the session.
    let sent = s.send(b"down", Class::RealTime, now).unwrap();
    assert_eq!(sent.udp.iter().map(|t| t.path).collect::<Vec<_>>(), vec![0]);
    assert!(sent.stream);
    let probes = s.poll(now).unwrap();
    assert_eq!(probes.len(), 1);
    assert_eq!((probes[0].path, probes[0].to), (1, new_addr));
    let mut probe = probes[0].bytes.clone();
    c.receive(&mut probe, server_addr(), now).unwrap();
    for mut t in c.poll(now).unwrap() {
        let _ = s.receive(&mut t.bytes, new_addr, now + Duration::from_millis(30));
    }
    assert!(s.paths().get(1).unwrap().is_usable());
    let sent = s.send(b"down", Class::RealTime, now).unwrap();
    assert_eq!(sent.udp.len(), 2);
    assert!(!sent.stream);
}

/// A real-time datagram goes on both paths; the server delivers the first copy and drops
/// the second as a duplicate; a bulk datagram goes on one path. The bytes: 35 per copy.
#[test]
fn redundant_copies_are_delivered_once() {
    let (mut c, mut s) = planes();
    let now = Instant::now();
    Net { open: [true, true] }.settle(&mut c, &mut s, now);
    assert!(c.paths().iter().all(|p| p.udp_confirmed()));
    let voice = [0x11u8; 160];
    let sent = c.send(&voice, Class::RealTime, now).unwrap();
    assert!(!sent.stream);
    assert_eq!(sent.udp.len(), 2);
    let wire_bytes: usize = sent.udp.iter().map(|t| t.bytes.len()).sum();
    assert_eq!(wire_bytes, 2 * (160 + DATA_OVERHEAD));
    assert_eq!(wire_bytes, 390);
    let mut delivered = 0;
    for mut t in sent.udp {
        match s.receive(&mut t.bytes, client_addr(t.path), now) {
            Ok(Delivered::Data { payload, seq, .. }) => {
                assert_eq!((payload, seq), (&voice[..], sent.seq));
                delivered += 1;
            }
            Err(Dropped::Duplicate { seq, .. }) => assert_eq!(seq, sent.seq),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(delivered, 1);
    assert_eq!(s.stats().duplicate, 1);
    let bulk = c.send(&[0u8; 1200], Class::Bulk, now).unwrap();
    assert_eq!(bulk.udp.len(), 1);
    assert!(!bulk.stream);
}

/// Path 1 blocks UDP: it never confirms, and each real-time datagram goes on path 0 and
/// inside the session, delivered once whichever arrives first. When path 1 opens, its
/// probes confirm it; when it blocks again it goes down after three missed probes, and the
/// session carries its copies again.
#[test]
fn a_path_that_blocks_udp_falls_back_to_the_session_and_back() {
    let (mut c, mut s) = planes();
    let t0 = Instant::now();
    let blocked = Net {
        open: [true, false],
    };
    blocked.settle(&mut c, &mut s, t0);
    assert_eq!(c.paths().get(1).unwrap().status(), PathStatus::Unconfirmed);
    let sent = c.send(b"rt", Class::RealTime, t0).unwrap();
    assert_eq!(sent.udp.iter().map(|t| t.path).collect::<Vec<_>>(), vec![0]);
    assert!(sent.stream);
    // The session's copy first, then the UDP copy: one delivery.
    assert!(s.accept_from_session(sent.seq, t0));
    let mut u = sent.udp[0].bytes.clone();
    assert!(matches!(
        s.receive(&mut u, client_addr(0), t0),
        Err(Dropped::Duplicate { .. })
    ));
    // The other order on the next datagram.
    let sent = c.send(b"rt", Class::RealTime, t0).unwrap();
    let mut u = sent.udp[0].bytes.clone();
    assert!(s.receive(&mut u, client_addr(0), t0).is_ok());
    assert!(!s.accept_from_session(sent.seq, t0));
    assert_eq!(s.session_duplicates(), 1);

    // Path 1 opens: confirmed at its next probe.
    let open = Net { open: [true, true] };
    let mut now = t0;
    for _ in 0..2 {
        now += Duration::from_secs(1);
        c.send(b"rt", Class::RealTime, now).unwrap();
        open.settle(&mut c, &mut s, now);
    }
    assert!(c.paths().get(1).unwrap().udp_confirmed());
    let sent = c.send(b"rt", Class::RealTime, now).unwrap();
    assert_eq!((sent.udp.len(), sent.stream), (2, false));

    // It blocks again: down after three missed probes, and the session carries again.
    let mut down_after = None;
    for i in 1..=6 {
        now += Duration::from_secs(1);
        c.send(b"rt", Class::RealTime, now).unwrap();
        blocked.settle(&mut c, &mut s, now);
        if down_after.is_none() && c.paths().get(1).unwrap().status() == PathStatus::Down {
            down_after = Some(i);
        }
    }
    assert_eq!(down_after, Some(4));
    let sent = c.send(b"rt", Class::RealTime, now).unwrap();
    assert_eq!(sent.udp.iter().map(|t| t.path).collect::<Vec<_>>(), vec![0]);
    assert!(sent.stream);
    // And path 0 stayed up throughout.
    assert!(c.paths().get(0).unwrap().udp_confirmed());
}

#[test]
fn next_timeout_asks_for_a_poll_when_something_is_due() {
    let (mut c, mut s) = planes();
    let now = Instant::now();
    assert_eq!(c.next_timeout(now), Some(now), "the first probes are due");
    Net { open: [true, true] }.settle(&mut c, &mut s, now);
    let next = c.next_timeout(now).unwrap();
    assert!(
        next > now && next <= now + Duration::from_secs(15),
        "{next:?}"
    );
    assert!(c.poll(now).unwrap().is_empty());
}
