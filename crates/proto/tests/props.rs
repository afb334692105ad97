//! Property tests: random and mutated input never panics (the fuzz bodies on
//! stable), any split of the input gives the same result, and whole sessions
//! round-trip through randomly chunked streams.

mod common;

use common::{open_all, seal_all};
use nena_proto::*;
use proptest::collection::vec;
use proptest::prelude::*;

fn modes() -> impl Strategy<Value = Vec<Mode>> {
    prop_oneof![
        Just(vec![Mode::Kato]),
        Just(vec![Mode::Plain]),
        Just(vec![Mode::Aead]),
        Just(vec![Mode::Stream]),
        Just(vec![Mode::Kato, Mode::Plain]),
        Just(vec![Mode::Plain, Mode::Kato]),
        Just(vec![Mode::Aead, Mode::Stream]),
        Just(vec![Mode::Stream, Mode::Kato, Mode::Aead]),
        Just(Mode::ALL.to_vec()),
    ]
}

fn suite() -> impl Strategy<Value = Suite> {
    prop_oneof![Just(Suite::Aes128), Just(Suite::ChaCha20)]
}

fn entropy() -> impl Strategy<Value = [u8; ENTROPY_LEN]> {
    proptest::array::uniform32(any::<u8>())
        .prop_flat_map(|a| {
            (
                Just(a),
                proptest::array::uniform32(any::<u8>()),
                any::<[u8; 16]>(),
            )
        })
        .prop_map(|(a, b, c)| {
            let mut e = [0u8; ENTROPY_LEN];
            e[..16].copy_from_slice(&c);
            e[16..48].copy_from_slice(&a);
            e[48..80].copy_from_slice(&b);
            // The ML-KEM seed: derived from the others (proptest has no 64-byte arrays).
            for i in 0..64 {
                e[80 + i] = a[i % 32] ^ b[(i * 7) % 32] ^ (i as u8);
            }
            e
        })
        .prop_filter("distinct kato keys", |e| e[..8] != e[8..16])
}

fn config(offer: Vec<Mode>, suite: Suite) -> ClientConfig {
    ClientConfig {
        suite,
        ..ClientConfig::offering(&offer)
    }
}

/// Cuts `data` at the given (sorted, deduplicated) points.
fn split_at_points(data: &[u8], points: &[usize]) -> Vec<Vec<u8>> {
    let mut cuts: Vec<usize> = points.iter().map(|p| p % (data.len() + 1)).collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut out = Vec::new();
    let mut last = 0;
    for c in cuts.into_iter().chain(std::iter::once(data.len())) {
        out.push(data[last..c].to_vec());
        last = c;
    }
    out
}

/// Feeds chunks to the client until Done; returns the mode, the confirmation to send, all
/// bytes after the handshake (opened), and the session's outgoing half.
fn client_consume(
    c: &mut ClientHandshake,
    chunks: &[Vec<u8>],
) -> (Mode, Vec<u8>, Vec<u8>, Protector) {
    let mut pending: Option<(Vec<u8>, Session)> = None;
    let mut rest = Vec::new();
    for chunk in chunks {
        match &pending {
            Some(_) => rest.extend_from_slice(chunk),
            None => match c.read(chunk).expect("client handshake") {
                Progress::NeedMore { consumed } => assert_eq!(consumed, chunk.len()),
                Progress::Done { consumed, value } => {
                    rest.extend_from_slice(&chunk[consumed..]);
                    pending = Some(value);
                }
            },
        }
    }
    let (confirm, s) = pending.expect("handshake completes");
    let mode = s.mode();
    let (tx, mut rx) = s.split();
    let got = open_all(&mut rx, [&rest[..]]);
    assert_eq!(got.error, None);
    (mode, confirm, got.data, tx)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn random_input_never_panics(data in vec(any::<u8>(), 0..1500)) {
        nena_proto::fuzzing::server_read(&data);
        nena_proto::fuzzing::client_read(&data);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    #[test]
    fn mutated_messages_never_panic(
        offer in modes(),
        e in entropy(),
        edits in vec((any::<usize>(), any::<u8>(), 0u8..3), 1..6),
    ) {
        let c = ClientHandshake::new(&ClientConfig::offering(&offer), e).unwrap();
        let mut hello = c.first_flight().to_vec();
        let mut answer = {
            let mut s = ServerHandshake::new(&ServerConfig::accepting(Mode::ALL).with_key(test_server_key()), [3; SERVER_ENTROPY_LEN]);
            match s.read(&hello) {
                Ok(Progress::Done { value: (reply, _), .. }) => reply,
                other => panic!("valid hello refused: {other:?}"),
            }
        };
        for (pos, byte, kind) in edits {
            for msg in [&mut hello, &mut answer] {
                let i = pos % (msg.len() + 1);
                match kind {
                    0 if i < msg.len() => msg[i] = byte,
                    1 => msg.insert(i, byte),
                    _ => msg.truncate(i),
                }
            }
        }
        nena_proto::fuzzing::server_read(&hello);
        nena_proto::fuzzing::client_read(&answer);
    }

    #[test]
    fn any_split_gives_the_same_result(
        offer in modes(),
        e in entropy(),
        trailing in vec(any::<u8>(), 0..40),
        points in vec(any::<usize>(), 0..12),
    ) {
        let c = ClientHandshake::new(&ClientConfig::offering(&offer), e).unwrap();
        let mut stream = c.first_flight().to_vec();
        let hello_len = stream.len();
        stream.extend_from_slice(&trailing);
        let cfg = ServerConfig::accepting(Mode::ALL).with_key(test_server_key());

        let mut whole = ServerHandshake::new(&cfg, [7; SERVER_ENTROPY_LEN]);
        let Ok(Progress::Done { consumed, value: (reply_a, sa) }) = whole.read(&stream) else { panic!() };
        prop_assert_eq!(consumed, hello_len);

        let mut split = ServerHandshake::new(&cfg, [7; SERVER_ENTROPY_LEN]);
        let mut fed = 0;
        let mut done = None;
        for chunk in split_at_points(&stream, &points) {
            match split.read(&chunk).unwrap() {
                Progress::NeedMore { consumed } => fed += consumed,
                Progress::Done { consumed, value } => { done = Some((fed + consumed, value)); break; }
            }
        }
        let (consumed_b, (reply_b, sb)) = done.expect("split feeding completes");
        prop_assert_eq!(consumed_b, hello_len);
        prop_assert_eq!(reply_a, reply_b);
        // Same keys: the same bytes come out of both sessions' outgoing halves.
        let (mut ta, mut tb) = (sa.split().0, sb.split().0);
        prop_assert_eq!(seal_all(&mut ta, &trailing, 9), seal_all(&mut tb, &trailing, 9));
    }

    #[test]
    fn sessions_round_trip_through_random_chunking(
        offer in modes(),
        accept in modes(),
        suite in suite(),
        e in entropy(),
        up in vec(any::<u8>(), 0..3000),
        down in vec(any::<u8>(), 0..3000),
        pieces in 1usize..2000,
        points_up in vec(any::<usize>(), 0..20),
        points_down in vec(any::<usize>(), 0..20),
    ) {
        prop_assume!(accept.iter().any(|m| offer.contains(m)));
        let mut c = ClientHandshake::new(&config(offer.clone(), suite), e).unwrap();
        let mut s = ServerHandshake::new(&ServerConfig::accepting(&accept).with_key(test_server_key()), [9; SERVER_ENTROPY_LEN]);

        // Client -> server stream: hello, then (after the answer) the confirmation (crypto
        // modes) and protected data. Server -> client stream: answer, then protected data.
        let hello = c.first_flight().to_vec();
        let Ok(Progress::Done { consumed, value: (reply, ss) }) = s.read(&hello) else { panic!() };
        prop_assert_eq!(consumed, hello.len());
        let (mut stx, mut srx) = ss.split();
        let mut to_client = reply.clone();
        to_client.extend(seal_all(&mut stx, &down, pieces));

        let (mode, confirm, got_down, mut ctx) =
            client_consume(&mut c, &split_at_points(&to_client, &points_down));
        let expected = accept.iter().copied().find(|m| offer.contains(m)).unwrap();
        prop_assert_eq!(mode, expected);
        prop_assert_eq!(stx.mode(), expected);
        prop_assert_eq!(&got_down, &down);

        // Client data, sealed in random pieces, opened in other random pieces.
        let mut u = confirm;
        for piece in split_at_points(&up, &points_down) {
            u.extend(seal_all(&mut ctx, &piece, pieces));
        }
        let cut = split_at_points(&u, &points_up);
        let got_up = open_all(&mut srx, cut.iter().map(|v| &v[..]));
        prop_assert_eq!(got_up.error, None);
        prop_assert_eq!(got_up.left, 0);
        prop_assert_eq!(got_up.data, up);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Random bytes as a session's input (the records parser, the confirmation) never panic.
    #[test]
    fn random_session_input_never_panics(data in vec(any::<u8>(), 0..3000)) {
        nena_proto::fuzzing::session_input(&data);
    }

    /// Valid aead records with a few bytes altered: refused, never accepted as other data.
    #[test]
    fn altered_records_never_pass(
        e in entropy(),
        data in vec(any::<u8>(), 1..5000),
        edits in vec((any::<usize>(), 1u8..=255), 1..4),
    ) {
        let cfg = ClientConfig::offering(&[Mode::Aead]);
        let mut c = ClientHandshake::new(&cfg, e).unwrap();
        let mut s = ServerHandshake::new(&ServerConfig::accepting(&[Mode::Aead]).with_key(test_server_key()), [5; SERVER_ENTROPY_LEN]);
        let Ok(Progress::Done { value: (reply, ss), .. }) = s.read(c.first_flight()) else { panic!() };
        let Ok(Progress::Done { value: (confirm, cs), .. }) = c.read(&reply) else { panic!() };
        let mut wire = seal_all(&mut cs.split().0, &data, 1000);
        for (pos, mask) in edits {
            let i = pos % wire.len();
            wire[i] ^= mask;
        }
        let mut input = confirm;
        input.extend_from_slice(&wire);
        let got = open_all(&mut ss.split().1, [&input[..]]);
        // Whatever came out before the first failure is a prefix of the truth.
        prop_assert!(data.starts_with(&got.data));
        prop_assert!(got.error.is_some() || got.left > 0, "altered input accepted");
    }
}

// ---- the datagram plane (crates/proto/src/dgram) ----

fn datagram_keys(suite: Suite) -> (dgram::DatagramKeys, dgram::DatagramKeys) {
    let x = exchange(
        &ClientConfig {
            suite,
            ..ClientConfig::offering(&[Mode::Aead])
        },
        &[Mode::Aead],
        std::array::from_fn(|i| (i as u8).wrapping_mul(29) ^ 0x71),
        [0x42; SERVER_ENTROPY_LEN],
    )
    .unwrap();
    (
        x.client.datagram_keys().unwrap(),
        x.server.datagram_keys().unwrap(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Random bytes as datagrams (and as the edits of genuine ones) never panic, never pass
    /// authentication, and never teach the server an address.
    #[test]
    fn random_datagram_input_never_panics(data in vec(any::<u8>(), 0..2000)) {
        nena_proto::fuzzing::datagram_input(&data);
    }

    /// The same for compact datagrams (plane version 2).
    #[test]
    fn random_compact_input_never_panics(data in vec(any::<u8>(), 0..1200)) {
        nena_proto::fuzzing::compact_input(&data);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Datagrams sealed on one or two paths (redundant copies), delivered in any order with
    /// replays mixed in: each sequence number is delivered exactly once, with its payload,
    /// and every other arrival is counted as a replay or a duplicate.
    #[test]
    fn any_order_delivers_each_datagram_once(
        suite in suite(),
        sends in vec((any::<bool>(), 0usize..200), 1..60),
        order in vec(any::<u16>(), 0..300),
    ) {
        use nena_proto::dgram::{Dropped, Opener, Received, Sealer};
        let (ck, sk) = datagram_keys(suite);
        let mut tx = Sealer::new(&ck, 9);
        let mut rx = Opener::new(&sk, 9);
        let mut sealed = Vec::new();
        for (i, (both, len)) in sends.iter().enumerate() {
            let payload = vec![i as u8; *len];
            let paths: &[u8] = if *both { &[0, 1] } else { &[1] };
            let (seq, copies) = tx.seal_copies(paths, &payload).unwrap();
            prop_assert_eq!(seq, i as u64);
            for (_, d) in copies {
                sealed.push((seq, payload.clone(), d));
            }
        }
        // Every datagram once in a shuffled order, then replays the strategy picks.
        let mut idx: Vec<usize> = (0..sealed.len()).collect();
        let n = idx.len();
        for (i, r) in order.iter().enumerate() {
            idx.swap(i % n, usize::from(*r) % n);
        }
        idx.extend(order.iter().map(|r| usize::from(*r) % sealed.len()));
        let mut got = vec![0u32; sends.len()];
        let (mut replays, mut dups) = (0u64, 0u64);
        for k in idx {
            let (seq, payload, d) = &sealed[k];
            let mut b = d.clone();
            match rx.open(&mut b) {
                Ok(o) => {
                    let Received::Data { seq: s, payload: p, .. } = o.message else { panic!() };
                    prop_assert_eq!(s, *seq);
                    prop_assert_eq!(p, &payload[..]);
                    got[*seq as usize] += 1;
                }
                Err(Dropped::Replayed(_)) => replays += 1,
                Err(Dropped::Duplicate { seq: s, .. }) => {
                    prop_assert_eq!(s, *seq);
                    dups += 1;
                }
                Err(e) => prop_assert!(false, "{e}"),
            }
        }
        prop_assert!(got.iter().all(|&n| n == 1), "{got:?}");
        let st = rx.stats();
        prop_assert_eq!((st.replayed, st.duplicate), (replays, dups));
        prop_assert_eq!(st.delivered, sends.len() as u64);
        prop_assert_eq!(
            dups,
            sends.iter().filter(|(both, _)| *both).count() as u64
        );
    }
}
