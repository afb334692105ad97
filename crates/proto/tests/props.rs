//! Property tests: random and mutated input never panics (the fuzz bodies on
//! stable), any split of the input gives the same result, and whole sessions
//! round-trip through randomly chunked streams.

use nena_proto::*;
use proptest::collection::vec;
use proptest::prelude::*;

fn modes() -> impl Strategy<Value = Vec<Mode>> {
    prop_oneof![
        Just(vec![Mode::Kato]),
        Just(vec![Mode::Plain]),
        Just(vec![Mode::Kato, Mode::Plain]),
        Just(vec![Mode::Plain, Mode::Kato]),
    ]
}

fn entropy() -> impl Strategy<Value = [u8; 32]> {
    any::<[u8; 32]>().prop_filter("distinct kato keys", |e| e[..8] != e[8..16])
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

/// Feeds chunks to the client until Done; returns the session and all bytes
/// after the handshake (already unprotected).
fn client_consume(c: &mut ClientHandshake, chunks: &[Vec<u8>]) -> (Mode, Vec<u8>, Option<Session>) {
    let mut session: Option<Session> = None;
    let mut after = Vec::new();
    for chunk in chunks {
        match &mut session {
            Some(s) => {
                let mut b = chunk.clone();
                s.unprotect(&mut b);
                after.extend_from_slice(&b);
            }
            None => match c.read(chunk).expect("client handshake") {
                Progress::NeedMore { consumed } => assert_eq!(consumed, chunk.len()),
                Progress::Done {
                    consumed,
                    value: mut s,
                } => {
                    let mut rest = chunk[consumed..].to_vec();
                    s.unprotect(&mut rest);
                    after.extend_from_slice(&rest);
                    session = Some(s);
                }
            },
        }
    }
    let s = session.expect("handshake completes");
    (s.mode(), after, Some(s))
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
        let c = ClientHandshake::new(&ClientConfig { offer }, e).unwrap();
        let mut hello = c.first_flight().to_vec();
        let mut answer = {
            let mut s = ServerHandshake::new(&ServerConfig::default());
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
        let c = ClientHandshake::new(&ClientConfig { offer }, e).unwrap();
        let mut stream = c.first_flight().to_vec();
        let hello_len = stream.len();
        stream.extend_from_slice(&trailing);

        let mut whole = ServerHandshake::new(&ServerConfig::default());
        let Ok(Progress::Done { consumed, value: (reply_a, mut sa) }) = whole.read(&stream) else { panic!() };
        prop_assert_eq!(consumed, hello_len);

        let mut split = ServerHandshake::new(&ServerConfig::default());
        let mut fed = 0;
        let mut done = None;
        for chunk in split_at_points(&stream, &points) {
            match split.read(&chunk).unwrap() {
                Progress::NeedMore { consumed } => fed += consumed,
                Progress::Done { consumed, value } => { done = Some((fed + consumed, value)); break; }
            }
        }
        let (consumed_b, (reply_b, mut sb)) = done.expect("split feeding completes");
        prop_assert_eq!(consumed_b, hello_len);
        prop_assert_eq!(reply_a, reply_b);
        let (mut x, mut y) = (trailing.clone(), trailing.clone());
        sa.unprotect(&mut x);
        sb.unprotect(&mut y);
        prop_assert_eq!(x, y);
    }

    #[test]
    fn sessions_round_trip_through_random_chunking(
        offer in modes(),
        accept in modes(),
        e in entropy(),
        up in vec(any::<u8>(), 0..3000),
        down in vec(any::<u8>(), 0..3000),
        points_up in vec(any::<usize>(), 0..20),
        points_down in vec(any::<usize>(), 0..20),
    ) {
        prop_assume!(accept.iter().any(|m| offer.contains(m)));
        let mut c = ClientHandshake::new(&ClientConfig { offer: offer.clone() }, e).unwrap();
        let mut s = ServerHandshake::new(&ServerConfig { accept: accept.clone() });

        // Client -> server stream: hello, then (after the answer) protected data.
        // Server -> client stream: answer, immediately followed by protected data.
        let hello = c.first_flight().to_vec();
        let Ok(Progress::Done { consumed, value: (reply, mut ss) }) = s.read(&hello) else { panic!() };
        prop_assert_eq!(consumed, hello.len());
        let mut to_client = reply.clone();
        let mut d = down.clone();
        ss.protect(&mut d);
        to_client.extend_from_slice(&d);

        let (mode, got_down, cs) = client_consume(&mut c, &split_at_points(&to_client, &points_down));
        let mut cs = cs.unwrap();
        let expected = accept.iter().copied().find(|m| offer.contains(m)).unwrap();
        prop_assert_eq!(mode, expected);
        prop_assert_eq!(ss.mode(), expected);
        prop_assert_eq!(&got_down, &down);

        // Client data, protected in random pieces, unprotected in other random pieces.
        let mut u = Vec::new();
        for piece in split_at_points(&up, &points_down) {
            let mut p = piece;
            cs.protect(&mut p);
            u.extend_from_slice(&p);
        }
        let mut got_up = Vec::new();
        for piece in split_at_points(&u, &points_up) {
            let mut p = piece;
            ss.unprotect(&mut p);
            got_up.extend_from_slice(&p);
        }
        prop_assert_eq!(got_up, up);
    }
}
