//! The handshake machines exchanging bytes through a simulated connection on a virtual
//! clock (`sim/mod.rs`): segments split at every byte boundary and of every small size,
//! delays and jitter, the connection dropped at every byte of either direction, mismatched
//! modes, random schedules. Each side must either complete with keys matching the peer's
//! (its data opens to exactly what the peer sent) or fail with an error that says what
//! happened; never panic, never hang.

mod sim;

use nena_proto::*;
use proptest::prelude::*;
use sim::*;
use std::collections::BTreeSet;

/// The offers that lead to each mode (a crypto offer carries a key share, which changes the
/// answer of the non-crypto modes too).
fn pairs() -> Vec<(Vec<Mode>, Vec<Mode>)> {
    let mut v: Vec<(Vec<Mode>, Vec<Mode>)> = Mode::ALL
        .iter()
        .map(|&m| (vec![m], Mode::ALL.to_vec()))
        .collect();
    v.push((vec![Mode::Aead, Mode::Kato], vec![Mode::Kato]));
    v.push((
        vec![Mode::Stream, Mode::Plain],
        vec![Mode::Plain, Mode::Aead],
    ));
    v
}

/// What a clean run gives: both complete in the same mode.
fn both_complete(r: &Run) -> Mode {
    match (&r.client, &r.server) {
        (End::Complete(a), End::Complete(b)) if a == b => *a,
        other => panic!("not both complete: {other:?}"),
    }
}

/// The lengths of the handshake messages of a setup: (hello, client's confirmation, answer).
fn lengths(offer: &[Mode], accept: &[Mode]) -> (usize, usize, usize) {
    let x = exchange(
        &ClientConfig::offering(offer),
        accept,
        Setup::new(offer, accept).client_entropy,
        Setup::new(offer, accept).server_entropy,
    )
    .unwrap();
    (x.hello.len(), x.confirm.len(), x.reply.len())
}

/// Every mode completes whatever the segmenting: one boundary at every byte offset of the
/// handshake part of each direction (hello, confirmation and the first data after them),
/// byte-by-byte segments, and every segment size up to 17 — with the client's
/// confirmation and data often arriving in the same read as the answer's last byte.
#[test]
fn every_mode_completes_through_every_segmenting() {
    let mut runs = 0;
    for (offer, accept) in pairs() {
        let (hello, confirm, reply) = lengths(&offer, &accept);
        let mut modes = BTreeSet::new();
        for c2s in [true, false] {
            let span = if c2s {
                hello + confirm + 80
            } else {
                reply + 80
            };
            for at in 1..span {
                let mut s = Setup::new(&offer, &accept);
                let shape = if c2s { &mut s.c2s } else { &mut s.s2c };
                shape.cuts = [at].into();
                let r = run(&s);
                modes.insert(format!("{:?}", both_complete(&r)));
                runs += 1;
            }
        }
        for mss in 1..=17 {
            let mut s = Setup::new(&offer, &accept);
            s.c2s.mss = mss;
            s.s2c.mss = 18 - mss;
            s.c2s.jitter = 3_000;
            s.s2c.jitter = 5_000;
            s.c2s.seed = mss as u64;
            s.s2c.seed = 100 + mss as u64;
            both_complete(&run(&s));
            runs += 1;
        }
        assert_eq!(modes.len(), 1, "one mode per offer and acceptance");
    }
    assert!(runs > 1_500, "{runs}");
    eprintln!("{runs} segmentings");
}

/// The connection dropped at every byte of either direction, with whole segments and with
/// byte-by-byte ones: a side completes only with the peer's whole data opened under
/// matching keys; otherwise it fails, with `ClosedEarly { received }` counting exactly the
/// bytes of the peer's handshake message that arrived while its handshake was not done,
/// or with a truncation that kept a prefix of the peer's data. No drop leaves a side
/// waiting, and no drop makes any session report corrupted data.
#[test]
fn dropped_at_every_byte_of_either_direction() {
    let mut runs = 0;
    let mut seen = BTreeSet::new();
    for (offer, accept) in pairs() {
        let (hello, confirm, reply) = lengths(&offer, &accept);
        for byte_by_byte in [false, true] {
            let mut base = Setup::new(&offer, &accept);
            if byte_by_byte {
                // Byte-sized segments, the server's on a slow link (100 µs a byte) so that
                // the client's data can reach the server before the last of the server's.
                base.c2s.mss = 1;
                base.s2c.mss = 1;
                base.s2c.per_byte = 100;
            }
            let clean = run(&base);
            let mode = both_complete(&clean);
            for c2s in [true, false] {
                let total = if c2s {
                    clean.c2s_written
                } else {
                    clean.s2c_written
                };
                for at in 0..=total {
                    let mut s = Setup::new(&offer, &accept);
                    s.c2s = base.c2s.clone();
                    s.s2c = base.s2c.clone();
                    s.drop = Some(Drop { c2s, at });
                    let r = run(&s);
                    runs += 1;
                    let ctx = format!("{offer:?}/{accept:?} c2s {c2s} at {at}: {r:?}");
                    for end in [&r.client, &r.server] {
                        match end {
                            End::Complete(m) => assert_eq!(*m, mode, "{ctx}"),
                            End::Failed(Failure::Handshake(HandshakeError::ClosedEarly {
                                ..
                            }))
                            | End::Failed(Failure::Truncated(_)) => {}
                            other => panic!("unexpected {other:?}: {ctx}"),
                        }
                    }
                    seen.insert(format!("{}|{}", kind(&r.client), kind(&r.server)));
                    // Exactly where each side must stop.
                    if c2s {
                        if at < hello {
                            // The server never has a whole hello; the client never an answer.
                            assert_eq!(
                                r.server,
                                End::Failed(Failure::Handshake(HandshakeError::ClosedEarly {
                                    received: at
                                })),
                                "{ctx}"
                            );
                            assert_eq!(
                                r.client,
                                End::Failed(Failure::Handshake(HandshakeError::ClosedEarly {
                                    received: 0
                                })),
                                "{ctx}"
                            );
                        } else if at < total {
                            // The server's handshake is done; the client's data is cut.
                            assert!(
                                matches!(r.server, End::Failed(Failure::Truncated(n)) if n < s.client_data.len()),
                                "{ctx}"
                            );
                        }
                        if at >= hello + confirm && at < total {
                            assert!(
                                matches!(r.server, End::Failed(Failure::Truncated(_))),
                                "{ctx}"
                            );
                        }
                    } else if at < reply {
                        assert_eq!(
                            r.client,
                            End::Failed(Failure::Handshake(HandshakeError::ClosedEarly {
                                received: at
                            })),
                            "{ctx}"
                        );
                        // The client never sent its confirmation or data.
                        assert_eq!(r.server, End::Failed(Failure::Truncated(0)), "{ctx}");
                    } else if at < total {
                        assert!(
                            matches!(r.client, End::Failed(Failure::Truncated(n)) if n < s.server_data.len()),
                            "{ctx}"
                        );
                    }
                    if at == total {
                        both_complete(&r);
                    }
                }
            }
        }
    }
    // Both sides completing, one of them, and neither, all happened.
    assert!(seen.contains("Complete|Complete"), "{seen:?}");
    assert!(seen.contains("Complete|Truncated"), "{seen:?}");
    assert!(seen.contains("Truncated|Complete"), "{seen:?}");
    assert!(seen.contains("ClosedEarly|ClosedEarly"), "{seen:?}");
    assert!(seen.contains("ClosedEarly|Truncated"), "{seen:?}");
    assert!(runs > 20_000, "{runs}");
    eprintln!("{runs} dropped connections");
}

fn kind(e: &End) -> &'static str {
    match e {
        End::Complete(_) => "Complete",
        End::Failed(Failure::Handshake(HandshakeError::ClosedEarly { .. })) => "ClosedEarly",
        End::Failed(Failure::Handshake(_)) => "Handshake",
        End::Failed(Failure::Session(_)) => "Session",
        End::Failed(Failure::Truncated(_)) => "Truncated",
    }
}

/// No common mode: both sides fail with the same diagnosis, through any segmenting; the
/// reject dropped at any byte leaves the client with `ClosedEarly` instead, never a
/// session.
#[test]
fn no_common_mode_fails_both_sides_through_any_segmenting_and_drop() {
    let (offer, accept) = (vec![Mode::Aead], vec![Mode::Kato, Mode::Plain]);
    let clean = run(&Setup::new(&offer, &accept));
    let no_common = |e: &End| {
        matches!(
            e,
            End::Failed(Failure::Handshake(HandshakeError::NoCommonMode { .. }))
        )
    };
    assert!(
        no_common(&clean.client) && no_common(&clean.server),
        "{clean:?}"
    );
    for mss in 1..=9 {
        let mut s = Setup::new(&offer, &accept);
        s.s2c.mss = mss;
        s.c2s.mss = 10 - mss;
        let r = run(&s);
        assert!(no_common(&r.client) && no_common(&r.server), "{r:?}");
    }
    for at in 0..clean.s2c_written {
        let mut s = Setup::new(&offer, &accept);
        s.drop = Some(Drop { c2s: false, at });
        let r = run(&s);
        assert!(no_common(&r.server), "{r:?}");
        assert_eq!(
            r.client,
            End::Failed(Failure::Handshake(HandshakeError::ClosedEarly {
                received: at
            }))
        );
    }
}

/// The clock: every segment takes its latency; the run ends at the last arrival. A
/// handshake is one round trip for the client and one and a half for the server (its
/// peer's data comes after the answer), whatever the segmenting.
#[test]
fn the_exchange_takes_the_round_trips_it_should_on_the_virtual_clock() {
    for (offer, accept) in pairs() {
        for (up, down) in [(10_000, 12_000), (1, 1), (250_000, 3)] {
            let mut s = Setup::new(&offer, &accept);
            s.c2s.latency = up;
            s.s2c.latency = down;
            let r = run(&s);
            both_complete(&r);
            // Hello (up), answer and server data (down), confirmation and client data (up).
            assert_eq!(r.now, 2 * up + down, "{offer:?} {up} {down}");
        }
    }
}

fn mode_set() -> impl Strategy<Value = Vec<Mode>> {
    proptest::sample::subsequence(Mode::ALL.to_vec(), 1..=4).prop_shuffle()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Random offers and acceptances, segment sizes, latencies, jitter and drops: each side
    /// completes (then in the mode the server chose, with the peer's data intact) or fails
    /// with an error; without a drop, both complete exactly when a common mode exists.
    #[test]
    fn random_schedules_complete_or_fail_cleanly(
        offer in mode_set(),
        accept in mode_set(),
        rand_c in 0usize..40,
        rand_s in 0usize..40,
        lat in (0u64..50_000, 0u64..50_000),
        jitter in (0u64..20_000, 0u64..20_000),
        seed in any::<u64>(),
        drop in proptest::option::of((any::<bool>(), 0usize..3_000)),
    ) {
        let mut s = Setup::new(&offer, &accept);
        s.c2s = Shape { rand_mss: rand_c, latency: lat.0, jitter: jitter.0, seed, ..Shape::default() };
        s.s2c = Shape { rand_mss: rand_s, latency: lat.1, jitter: jitter.1, seed: !seed, ..Shape::default() };
        s.drop = drop.map(|(c2s, at)| Drop { c2s, at });
        let r = run(&s);
        let common = accept.iter().copied().find(|m| offer.contains(m));
        for end in [&r.client, &r.server] {
            match end {
                End::Complete(m) => prop_assert_eq!(Some(*m), common),
                End::Failed(Failure::Session(e)) => prop_assert!(false, "session error {e:?}"),
                End::Failed(_) => {}
            }
        }
        if drop.is_none() {
            match common {
                Some(m) => {
                    prop_assert_eq!(&r.client, &End::Complete(m));
                    prop_assert_eq!(&r.server, &End::Complete(m));
                }
                None => {
                    let nc = |e: &End| matches!(e, End::Failed(Failure::Handshake(HandshakeError::NoCommonMode { .. })));
                    prop_assert!(nc(&r.client), "{:?}", r.client);
                    prop_assert!(nc(&r.server), "{:?}", r.server);
                }
            }
        }
    }
}
