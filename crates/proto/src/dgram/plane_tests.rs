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

// ---------------------------------------------------------------------------------------
// Version 2: compact real-time datagrams.

/// Receiver ids of a version 2 plane fit 24 bits.
const C_ID2: ReceiverId = 0x00_c11e;
const S_ID2: ReceiverId = 0x5e_0001;

/// The address a transport puts before a datagram's bytes (IPv4: atyp, 4, port): the key
/// of its flow.
const FLOW_A: [u8; 7] = [0x01, 198, 18, 9, 9, 0x1b, 0x59];

/// Two version 2 planes with both paths confirmed.
fn planes_v2() -> (Plane, Plane, Instant) {
    let x = exchange_in(Mode::Aead);
    let ck = x.client.datagram_keys().unwrap();
    let sk = x.server.datagram_keys().unwrap();
    let mut c = Plane::client(&ck, C_ID2, S_ID2, LivenessConfig::default());
    c.add_path(0, server_addr()).unwrap();
    c.add_path(1, server_addr()).unwrap();
    let mut s = Plane::server(&sk, S_ID2, C_ID2, LivenessConfig::default());
    assert!(c.enable_compact(&ck) && s.enable_compact(&sk));
    let now = Instant::now();
    Net { open: [true, true] }.settle(&mut c, &mut s, now);
    for p in [0, 1] {
        assert!(c.paths().get(p).unwrap().udp_confirmed(), "path {p}");
    }
    (c, s, now)
}

fn voice_of(key: &[u8], n: usize) -> Vec<u8> {
    let mut v = key.to_vec();
    v.extend((0..n).map(|i| i as u8));
    v
}

/// Delivers `sent`'s copies to the server; returns what the first delivered.
fn deliver(s: &mut Plane, sent: &mut Sent, now: Instant) -> (Option<FlowKey>, Vec<u8>) {
    let mut got = None;
    for t in sent.udp.iter_mut() {
        match s.receive(&mut t.bytes, client_addr(t.path), now) {
            Ok(Delivered::Data {
                prefix, payload, ..
            }) => {
                assert!(got.is_none(), "delivered twice");
                got = Some((prefix, payload.to_vec()));
            }
            Err(Dropped::Duplicate { seq, .. }) => assert_eq!(seq, sent.seq),
            other => panic!("{other:?}"),
        }
    }
    got.expect("no copy delivered")
}

/// A call's first datagrams announce its flow (kind 04, the address inside); once the
/// server's ack comes back the same datagram costs 15 bytes a copy, 2 x 175 = 350 bytes for
/// two 160-byte copies (2.16 times the 188 of the datagram sent straight over IPv4, where a
/// full copy with its address costs 2 x 202). The server gets the same address and bytes.
#[test]
fn a_call_goes_compact_once_its_flow_is_acknowledged() {
    let (mut c, mut s, now) = planes_v2();
    let voice = voice_of(&FLOW_A, 160);
    let mut first = c.send_flow(&voice, 7, Class::RealTime, now).unwrap();
    assert_eq!(first.udp.len(), 2);
    for t in &first.udp {
        assert_eq!(t.bytes[0], wire::TYPE_DATAGRAM);
        assert_eq!(t.bytes.len(), DATA_OVERHEAD + 2 + voice.len());
    }
    assert_eq!(deliver(&mut s, &mut first, now), (None, voice.clone()));
    // Not acknowledged yet: still announced.
    let mut second = c.send_flow(&voice, 7, Class::RealTime, now).unwrap();
    assert_eq!(second.udp[0].bytes[0], wire::TYPE_DATAGRAM);
    deliver(&mut s, &mut second, now);
    // The server acknowledges the flow (once per path it came on, once per announcement
    // waiting), the client learns it.
    let acks = s.poll(now).unwrap();
    assert!(!acks.is_empty() && acks.len() <= 4, "{acks:?}");
    for mut t in acks {
        assert!(c.receive(&mut t.bytes, server_addr(), now).is_ok());
    }
    let mut third = c.send_flow(&voice, 7, Class::RealTime, now).unwrap();
    let wire_bytes: usize = third.udp.iter().map(|t| t.bytes.len()).sum();
    assert_eq!(wire_bytes, 2 * (160 + compact::OVERHEAD));
    assert_eq!(wire_bytes, 350);
    for t in &third.udp {
        assert_eq!(t.bytes[0], compact::TYPE_BASE + t.path);
    }
    let replay = third.udp[1].bytes.clone();
    let (prefix, payload) = deliver(&mut s, &mut third, now);
    assert_eq!(prefix.unwrap().as_slice(), &FLOW_A);
    assert_eq!(payload, &voice[7..]);
    assert_eq!(s.stats().compact, 1);
    // A copy captured and re-sent, even from elsewhere, is a replay (its path carried that
    // number once): dropped before decryption, and it does not move the path's address (a
    // compact datagram never does).
    let mut r = replay;
    assert_eq!(
        s.receive(&mut r, attacker(), now),
        Err(Dropped::Replayed(third.seq))
    );
    assert_eq!(s.stats().replayed, 1);
    assert_eq!(s.paths().get(1).unwrap().remote(), Some(client_addr(1)));
    // A bulk datagram of the same flow, and a datagram too large, go full (kind 00).
    let bulk = c.send_flow(&voice, 7, Class::Bulk, now).unwrap();
    assert_eq!(bulk.udp[0].bytes.len(), DATA_OVERHEAD + voice.len());
    let big = voice_of(&FLOW_A, compact::MAX_BODY + 1);
    let big = c.send_flow(&big, 7, Class::RealTime, now).unwrap();
    assert_eq!(big.udp[0].bytes[0], wire::TYPE_DATAGRAM);
}

/// The server's replies go compact the same way: it numbers the flow of each source.
#[test]
fn replies_go_compact_too() {
    let (mut c, mut s, now) = planes_v2();
    let reply = voice_of(&FLOW_A, 100);
    let mut n = 0;
    loop {
        n += 1;
        assert!(n < 4, "never compact");
        let sent = s.send_flow(&reply, 7, Class::RealTime, now).unwrap();
        let compact = compact::is_compact(sent.udp[0].bytes[0]);
        for mut t in sent.udp {
            match c.receive(&mut t.bytes, server_addr(), now) {
                Ok(Delivered::Data {
                    prefix, payload, ..
                }) => {
                    let mut whole = prefix.map(|k| k.as_slice().to_vec()).unwrap_or_default();
                    whole.extend_from_slice(payload);
                    assert_eq!(whole, reply);
                }
                Err(Dropped::Duplicate { .. }) => {}
                other => panic!("{other:?}"),
            }
        }
        if compact {
            break;
        }
        for mut t in c.poll(now).unwrap() {
            let _ = s.receive(&mut t.bytes, client_addr(t.path), now);
        }
    }
}

/// 255 flows get numbers; the 256th goes full for the rest of the session (a number is
/// never reused, so it always means one address).
#[test]
fn flow_ids_run_out_and_are_never_reused() {
    let (mut c, _s, now) = planes_v2();
    for i in 0..=255u16 {
        let key = [0x01, 198, 18, 9, (i >> 8) as u8, i as u8, 0x1b];
        let d = voice_of(&key, 20);
        let sent = c.send_flow(&d, 7, Class::RealTime, now).unwrap();
        let len = sent.udp[0].bytes.len();
        if i < 255 {
            assert_eq!(len, DATA_OVERHEAD + 2 + d.len(), "flow {i}: announced");
        } else {
            assert_eq!(len, DATA_OVERHEAD + d.len(), "flow {i}: plain");
        }
    }
}

/// A compact datagram of a flow the receiver never had announced is dropped and counted;
/// an announcement that gives a known flow id another address is malformed.
#[test]
fn unknown_and_conflicting_flows_are_refused() {
    let x = exchange_in(Mode::Aead);
    let ck = x.client.datagram_keys().unwrap();
    let sk = x.server.datagram_keys().unwrap();
    let mut tx = Sealer::new(&ck, S_ID2);
    let mut rx = Opener::new(&sk, S_ID2);
    assert!(tx.enable_compact(&ck) && rx.enable_compact(&sk));
    let (_, mut d) = tx
        .seal_flow_copies(&[0], &voice_of(&FLOW_A, 9), 4, 7, true)
        .unwrap();
    assert_eq!(rx.open(&mut d[0].1), Err(Dropped::UnknownFlow(4)));
    assert_eq!(rx.stats().unknown_flow, 1);
    let (_, mut a) = tx
        .seal_flow_copies(&[0], &voice_of(&FLOW_A, 9), 4, 7, false)
        .unwrap();
    assert!(rx.open(&mut a[0].1).is_ok());
    let other = [0x01, 198, 18, 9, 10, 0x1b, 0x59];
    let (_, mut b) = tx
        .seal_flow_copies(&[0], &voice_of(&other, 9), 4, 7, false)
        .unwrap();
    assert_eq!(
        rx.open(&mut b[0].1),
        Err(Dropped::Malformed(wire::Malformed::Inner))
    );
    // Flow 4 still means FLOW_A.
    let (_, mut c) = tx
        .seal_flow_copies(&[0], &voice_of(&other, 9), 4, 7, true)
        .unwrap();
    match rx.open(&mut c[0].1).unwrap().message {
        Received::Data { prefix, .. } => assert_eq!(prefix.unwrap().as_slice(), &FLOW_A),
        m => panic!("{m:?}"),
    }
    // A ChaCha20 session, or a receiver id over 24 bits, has no compact datagrams.
    let secret = || crate::keys::TrafficSecret(zeroize::Zeroizing::new([1; 32]));
    let yk = DatagramKeys::client(crate::cipher::Suite::ChaCha20, &secret(), &secret());
    assert!(!Sealer::new(&yk, S_ID2).enable_compact(&yk));
    assert!(!Sealer::new(&ck, S_ID).enable_compact(&ck));
}

/// Past the failure limit the server opens no compact datagram more, tells the client on
/// every path, and the client sends full datagrams from then on: forgeries can cost the
/// call its 15-byte format, never its datagrams.
#[test]
fn past_the_failure_limit_the_sender_goes_back_to_full_datagrams() {
    let (mut c, mut s, now) = planes_v2();
    let voice = voice_of(&FLOW_A, 60);
    let mut sent = c.send_flow(&voice, 7, Class::RealTime, now).unwrap();
    deliver(&mut s, &mut sent, now);
    for mut t in s.poll(now).unwrap() {
        c.receive(&mut t.bytes, server_addr(), now).unwrap();
    }
    let mut sent = c.send_flow(&voice, 7, Class::RealTime, now).unwrap();
    assert!(compact::is_compact(sent.udp[0].bytes[0]));
    deliver(&mut s, &mut sent, now);
    // A forgery of a number not seen yet (one seen would be refused as a replay first).
    let mut forged = c.send_flow(&voice, 7, Class::RealTime, now).unwrap().udp[0]
        .bytes
        .clone();
    s.opener.count_compact_failures(compact::FAILURE_LIMIT - 1);
    let last = forged.len() - 1;
    forged[last] ^= 1;
    assert_eq!(
        s.receive(&mut forged, attacker(), now),
        Err(Dropped::Unauthentic)
    );
    let told = s.poll(now).unwrap();
    assert_eq!(told.len(), 2, "one notice per path: {told:?}");
    for mut t in told {
        assert!(matches!(
            c.receive(&mut t.bytes, server_addr(), now),
            Ok(Delivered::Control { .. })
        ));
    }
    assert!(!c.compact());
    let mut after = c.send_flow(&voice, 7, Class::RealTime, now).unwrap();
    assert_eq!(after.udp[0].bytes.len(), DATA_OVERHEAD + voice.len());
    assert_eq!(deliver(&mut s, &mut after, now), (None, voice));
}
