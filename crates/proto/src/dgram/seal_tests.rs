//! Tests of sealing and opening: round trips, every altered byte refused, replays, the
//! window's edges, duplicates by sequence number, the counts, and the known answer published
//! in docs/PROTOCOL.md ("Datagram plane").

use super::*;
use crate::cipher::Suite;
use crate::dgram::window::WINDOW;
use crate::keys::{Schedule, Secrets, TrafficSecret};
use crate::{exchange_in, Mode};

fn keys(suite: Suite) -> (DatagramKeys, DatagramKeys) {
    let (c2s, s2c) = Schedule::new(
        &Secrets {
            kem: &[4; 32],
            dh: &[5; 32],
            r_c: &[6; 32],
        },
        b"hello",
        b"accept",
    )
    .traffic();
    (
        DatagramKeys::client(suite, &c2s, &s2c),
        DatagramKeys::server(suite, &c2s, &s2c),
    )
}

const C_ID: ReceiverId = 0xc1c1_0001;
const S_ID: ReceiverId = 0x5e5e_0002;

/// A client sealer and the server's opener, for `suite`.
fn pair(suite: Suite) -> (Sealer, Opener) {
    let (c, s) = keys(suite);
    (Sealer::new(&c, S_ID), Opener::new(&s, S_ID))
}

fn data(seq: u64, payload: &[u8]) -> Message<'_> {
    Message::Data { seq, payload }
}

#[test]
fn every_kind_round_trips_in_both_suites_and_both_directions() {
    for suite in [Suite::Aes128, Suite::ChaCha20] {
        let (c, s) = keys(suite);
        let mut up = Sealer::new(&c, S_ID);
        let mut down = Sealer::new(&s, C_ID);
        let mut s_open = Opener::new(&s, S_ID);
        let mut c_open = Opener::new(&c, C_ID);
        let payload: Vec<u8> = (0..160u8).collect();
        for (sealer, opener) in [(&mut up, &mut s_open), (&mut down, &mut c_open)] {
            let mut d = sealer.seal(1, data(0, &payload)).unwrap();
            assert_eq!(d.len(), payload.len() + wire::DATA_OVERHEAD);
            let o = opener.open(&mut d).unwrap();
            assert_eq!(o.path, 1);
            assert_eq!(o.counter, Some(0));
            assert_eq!(
                o.message,
                Received::Data {
                    seq: 0,
                    payload: &payload,
                    prefix: None,
                    announced: None,
                }
            );
            for (msg, want) in [
                (Message::Keepalive, Received::Keepalive),
                (Message::Probe { id: 9 }, Received::Probe { id: 9 }),
                (
                    Message::ProbeReply { id: 9 },
                    Received::ProbeReply { id: 9 },
                ),
                (
                    data(1, b""),
                    Received::Data {
                        seq: 1,
                        payload: b"",
                        prefix: None,
                        announced: None,
                    },
                ),
            ] {
                let mut d = sealer.seal(0, msg).unwrap();
                assert_eq!(opener.open(&mut d).unwrap().message, want);
            }
            assert_eq!(sealer.counter(), 5);
            let st = opener.stats();
            assert_eq!(
                (st.delivered, st.keepalives, st.probes, st.probe_replies),
                (2, 1, 1, 1)
            );
            assert_eq!(st.delivered_bytes, 160);
            assert_eq!(st.dropped(), 0);
        }
        // The client's datagrams do not open as the server's (directions have own keys).
        let mut d = up.seal(0, data(2, b"x")).unwrap();
        d[1..5].copy_from_slice(&C_ID.to_be_bytes());
        assert_eq!(c_open.open(&mut d), Err(Dropped::Unauthentic));
    }
}

/// Any one byte altered (header, ciphertext or tag), or the datagram cut or lengthened:
/// refused, with the reason the header's checks give; the windows do not move, so the
/// unaltered datagram still opens afterwards.
#[test]
fn every_altered_byte_is_refused() {
    for suite in [Suite::Aes128, Suite::ChaCha20] {
        let (mut tx, mut rx) = pair(suite);
        let good = tx.seal(1, data(0, b"a call's 20 ms of voice")).unwrap();
        for i in 0..good.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bad = good.clone();
                bad[i] ^= flip;
                let want = match i {
                    0 => Err(Dropped::Malformed(Malformed::NotADatagram)),
                    1..=4 => Err(Dropped::UnknownReceiver(u32::from_be_bytes(
                        bad[1..5].try_into().unwrap(),
                    ))),
                    5 if usize::from(bad[5]) >= wire::MAX_PATHS => {
                        Err(Dropped::Malformed(Malformed::PathId))
                    }
                    _ => Err(Dropped::Unauthentic),
                };
                assert_eq!(rx.open(&mut bad), want, "byte {i} ^ {flip:#x}");
            }
        }
        let mut short = good[..good.len() - 1].to_vec();
        assert_eq!(rx.open(&mut short), Err(Dropped::Unauthentic));
        let mut long = good.clone();
        long.push(0);
        assert_eq!(rx.open(&mut long), Err(Dropped::Unauthentic));
        let mut ok = good.clone();
        assert!(rx.open(&mut ok).is_ok());
        let st = rx.stats();
        assert_eq!(st.delivered, 1);
        assert!(st.unauthentic > 0 && st.unknown_receiver > 0 && st.malformed > 0);
        assert_eq!(
            st.dropped(),
            st.unauthentic + st.unknown_receiver + st.malformed
        );
    }
}

#[test]
fn a_replay_is_refused_and_counted() {
    let (mut tx, mut rx) = pair(Suite::Aes128);
    let d = tx.seal(0, data(0, b"once")).unwrap();
    assert!(rx.open(&mut d.clone()).is_ok());
    for _ in 0..3 {
        assert_eq!(rx.open(&mut d.clone()), Err(Dropped::Replayed(0)));
    }
    // A replay on another path is the same datagram (the path id is authenticated): it
    // cannot be moved there either.
    let mut moved = d.clone();
    moved[5] = 1;
    assert_eq!(rx.open(&mut moved), Err(Dropped::Replayed(0)));
    assert_eq!(rx.stats().replayed, 4);
    assert_eq!(rx.stats().delivered, 1);
}

/// Out of order within the window: each accepted once. Older than the window: refused as
/// too old, though never seen.
#[test]
fn reordering_within_the_window_and_too_old_beyond_it() {
    let (mut tx, mut rx) = pair(Suite::ChaCha20);
    let first = tx.seal(0, Message::Keepalive).unwrap();
    let mut sealed: Vec<Vec<u8>> = (0..200)
        .map(|_| tx.seal(0, Message::Keepalive).unwrap())
        .collect();
    // Deliver 1..=200 backwards: all accepted.
    for d in sealed.iter_mut().rev() {
        assert!(rx.open(d).is_ok());
    }
    // Counter 0, never seen and within the window: accepted.
    assert!(rx.open(&mut first.clone()).is_ok());
    // Now push the window past a datagram held back.
    let held = tx.seal(0, Message::Keepalive).unwrap(); // counter 201
    let mut last = Vec::new();
    for _ in 0..WINDOW + 1 {
        last = tx.seal(0, Message::Keepalive).unwrap();
    }
    let top = tx.counter() - 1;
    assert!(rx.open(&mut last).is_ok());
    assert_eq!(rx.open(&mut held.clone()), Err(Dropped::TooOld(201)));
    assert_eq!(top - 201, WINDOW + 1);
    assert_eq!(rx.stats().too_old, 1);
}

/// One datagram sealed for two paths: the first copy is delivered, the second dropped as a
/// duplicate (its path and counter reported: it authenticated), a new sequence accepted.
#[test]
fn a_second_copy_is_a_duplicate_and_a_new_sequence_is_not() {
    let (mut tx, mut rx) = pair(Suite::Aes128);
    let (seq, copies) = tx.seal_copies(&[0, 1], b"voice").unwrap();
    assert_eq!(seq, 0);
    assert_eq!(copies.len(), 2);
    assert_ne!(
        copies[0].1[6..14],
        copies[1].1[6..14],
        "each copy has its own counter"
    );
    let (mut b, mut a) = (copies[1].1.clone(), copies[0].1.clone());
    let o = rx.open(&mut b).unwrap();
    assert_eq!(
        (o.path, o.message),
        (
            1,
            Received::Data {
                seq: 0,
                payload: b"voice",
                prefix: None,
                announced: None,
            }
        )
    );
    let dup = rx.open(&mut a);
    assert_eq!(
        dup,
        Err(Dropped::Duplicate {
            path: 0,
            counter: Some(0),
            seq: 0
        })
    );
    assert_eq!(dup.unwrap_err().authenticated(), Some((0, Some(0))));
    let (seq, mut next) = tx.seal_copies(&[0, 1], b"voice").unwrap();
    assert_eq!(seq, 1);
    assert!(matches!(
        rx.open(&mut next[0].1).unwrap().message,
        Received::Data { seq: 1, .. }
    ));
    // A sequence number delivered inside the session makes its UDP copy a duplicate.
    let (seq, mut later) = tx.seal_copies(&[1], b"late").unwrap();
    assert!(rx.accept_seq(seq));
    assert!(!rx.accept_seq(seq));
    assert!(matches!(
        rx.open(&mut later[0].1),
        Err(Dropped::Duplicate { seq: 2, .. })
    ));
    assert_eq!((rx.stats().delivered, rx.stats().duplicate), (2, 2));
}

#[test]
fn another_receivers_datagram_is_not_ours() {
    let (c, s) = keys(Suite::Aes128);
    let mut tx = Sealer::new(&c, 0xdead_beef);
    let mut rx = Opener::new(&s, S_ID);
    let mut d = tx.seal(0, Message::Keepalive).unwrap();
    assert_eq!(wire::receiver_of(&d), Ok(0xdead_beef));
    assert_eq!(rx.open(&mut d), Err(Dropped::UnknownReceiver(0xdead_beef)));
    assert_eq!(rx.stats().unknown_receiver, 1);
}

#[test]
fn seal_refuses_what_cannot_be_sent() {
    let (mut tx, _) = pair(Suite::Aes128);
    let big = vec![0u8; wire::MAX_PAYLOAD + 1];
    assert_eq!(
        tx.seal(0, data(0, &big)),
        Err(SealError::TooLarge {
            len: wire::MAX_PAYLOAD + 1,
            max: wire::MAX_PAYLOAD
        })
    );
    assert!(tx.seal_copies(&[0], &big).is_err());
    assert_eq!(
        tx.seal(wire::MAX_PATHS as u8, Message::Keepalive),
        Err(SealError::PathId(8))
    );
    assert_eq!(tx.counter(), 0, "nothing sealed, no counter spent");
    let max = tx.seal(0, data(0, &big[1..])).unwrap();
    assert_eq!(max.len(), wire::MAX_DATAGRAM);
    tx.counter = super::REJECT_AFTER;
    assert_eq!(
        tx.seal(0, Message::Keepalive),
        Err(SealError::CounterExhausted)
    );
}

/// The keys of a real handshake: a client's datagram opens at the server; plain and kato
/// have none.
#[test]
fn sessions_give_datagram_keys_in_the_cryptographic_modes_only() {
    for mode in [Mode::Aead, Mode::Stream] {
        let x = exchange_in(mode);
        let ck = x
            .client
            .datagram_keys()
            .expect("crypto mode has datagram keys");
        let sk = x
            .server
            .datagram_keys()
            .expect("crypto mode has datagram keys");
        assert!(ck.is_client() && !sk.is_client());
        assert_eq!(ck.suite(), sk.suite());
        let mut d = Sealer::new(&ck, 7).seal(1, data(0, b"up")).unwrap();
        let o = Opener::new(&sk, 7).open(&mut d).unwrap();
        assert_eq!(
            o.message,
            Received::Data {
                seq: 0,
                payload: b"up",
                prefix: None,
                announced: None,
            }
        );
        let mut d = Sealer::new(&sk, 8).seal(1, data(0, b"down")).unwrap();
        assert!(Opener::new(&ck, 8).open(&mut d).is_ok());
    }
    for mode in [Mode::Plain, Mode::Kato] {
        let x = exchange_in(mode);
        assert!(x.client.datagram_keys().is_none() && x.server.datagram_keys().is_none());
    }
}

fn unhex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    data_encoding::HEXLOWER_PERMISSIVE
        .decode(s.as_bytes())
        .expect("hex")
}

fn hex(b: &[u8]) -> String {
    data_encoding::HEXLOWER.encode(b)
}

/// The known answer of docs/PROTOCOL.md ("Datagram plane", test vector): from the c2s
/// traffic secret 0 of the handshake vectors, the client's datagram secret, key and IV, and
/// the data datagram "nena" (sequence number 7) sealed for receiver 01020304 on path 1 with
/// counter 5, for both suites. The expected values were computed independently with
/// Python's `hmac` and `cryptography` modules (HKDF-Expand-Label written out by hand); the
/// test also checks that docs/PROTOCOL.md prints them.
#[test]
fn datagram_vectors_match_protocol_md() {
    let c2s0: [u8; 32] = unhex("b408359e6bfe8c9bd0ef02253e982435cec323733926a144fc320ee216bf315c")
        .try_into()
        .unwrap();
    let c2s = TrafficSecret(zeroize::Zeroizing::new(c2s0));
    let s2c = TrafficSecret(zeroize::Zeroizing::new([0u8; 32]));
    let secret = "191b5a49f7783965e2a1245e6d039b733f074dc83dd63bf9b8790fa9a3ea0a8f";
    let iv = "c14bb48bc748e3b6e9124465";
    let expected = [
        (
            Suite::Aes128,
            "d39a6e993d4032aee41d2fd0102c4165",
            "0e0102030401000000000000000543608694535f2d2c0b9a7087de75e5a778386456e1366562c8",
        ),
        (
            Suite::ChaCha20,
            "cb05f03ab93e94a70f670d6cc06131410fa3905e4a6d38279ed70f18757b7f2a",
            "0e01020304010000000000000005d9f67d016ef4930dd00c789fd4d18524e0d60a45b2527304ab",
        ),
    ];
    let doc = include_str!("../../../../docs/PROTOCOL.md");
    let doc_hex: String = doc.split_whitespace().collect();
    for v in [secret, iv] {
        assert!(doc_hex.contains(v), "docs/PROTOCOL.md lacks {v}");
    }
    for (suite, key, datagram) in expected {
        let k = DatagramKeys::client(suite, &c2s, &s2c);
        assert_eq!(hex(k.expose_send()), secret);
        let dir = k.sending();
        assert_eq!(hex(&dir.epoch_key_bytes(0)), key, "{suite:?}");
        assert_eq!(hex(&dir.iv()), iv);
        let mut tx = Sealer::new(&k, 0x0102_0304);
        for _ in 0..5 {
            tx.seal(0, Message::Keepalive).unwrap();
        }
        let d = tx.seal(1, data(7, b"nena")).unwrap();
        assert_eq!(hex(&d), datagram, "{suite:?}");
        // The server opens it.
        let sk = DatagramKeys::server(suite, &c2s, &s2c);
        let mut copy = d.clone();
        let o = Opener::new(&sk, 0x0102_0304).open(&mut copy).unwrap();
        assert_eq!((o.path, o.counter), (1, Some(5)));
        assert_eq!(
            o.message,
            Received::Data {
                seq: 7,
                payload: b"nena",
                prefix: None,
                announced: None,
            }
        );
        for v in [key, datagram] {
            assert!(doc_hex.contains(v), "docs/PROTOCOL.md lacks {v}");
        }
    }
}
