//! Fuzz bodies for the parsers of bytes from the network in this crate, shared by
//! `fuzz/fuzz_targets/{handshake,session}.rs` (libFuzzer, nightly) and by stable `cargo test`
//! runs over random and mutated inputs.
//!
//! Each handshake body feeds the input twice, once whole and once in chunks whose sizes come
//! from the input itself, and panics only when an invariant of the state machine breaks: the
//! two feedings must give the same outcome, `consumed` must stay within the input, answers
//! must be bounded and well-formed, and a finished handshake must refuse more input.
//! Random bytes rarely get past the 5-byte magic, so each body also runs on the input behind
//! a valid header prefix, which sends it straight to the length and body parsers.
//! [`session_input`] feeds the input to the incoming half of a session (the client's key
//! confirmation, then records or in-place data), whole and split, for every mode.
//! [`datagram_input`] feeds the input to the datagram plane's server end as a datagram from
//! an attacker, and uses it to alter genuine datagrams (`fuzz/fuzz_targets/datagram.rs`).

use crate::record::MAX_RECORD;
use crate::wire::{self, MAGIC, VERSION};
use crate::{
    ClientConfig, ClientHandshake, HandshakeError, Mode, Opened, Progress, Rejected, ServerConfig,
    ServerHandshake, Session, SessionError, ENTROPY_LEN, SERVER_ENTROPY_LEN,
};

/// Checks the server's parser on `data` as a client hello.
pub fn server_read(data: &[u8]) {
    server_check(data);
    server_check(&with_prefix(wire::TYPE_HELLO, data));
    server_check(&with_prefix(wire::TYPE_RESUME, data));
}

/// Checks the client's parser on `data` as a server answer, for a client that offers only
/// kato and plain and for one that also offers key agreement.
pub fn client_read(data: &[u8]) {
    let t = data.first().map_or(wire::TYPE_ACCEPT, |b| 2 + (b & 1));
    for cfg in [
        ClientConfig::offering(&[Mode::Kato, Mode::Plain]),
        ClientConfig::offering(Mode::ALL),
    ] {
        client_check(&cfg, data);
        client_check(&cfg, &with_prefix(t, data));
    }
    // A client resuming with a ticket, asking for more.
    let resuming = ClientConfig {
        want_tickets: 2,
        resume: Some(fuzz_ticket()),
        ..ClientConfig::offering(&[Mode::Aead, Mode::Stream])
    };
    let t = data.first().map_or(wire::TYPE_RESUMED, |b| {
        [wire::TYPE_RESUMED, wire::TYPE_REJECT][usize::from(b & 1)]
    });
    client_check(&resuming, data);
    client_check(&resuming, &with_prefix(t, data));
}

/// The ticket of the fuzz bodies: id `42` x 16, secret `43` x 32, the test server's key.
fn fuzz_ticket() -> crate::Ticket {
    crate::Ticket {
        id: [0x42; 16],
        secret: zeroize::Zeroizing::new([0x43; 32]),
        server_key: crate::test_server_key().public(),
        lifetime_secs: 600,
    }
}

/// A server's store holding [`fuzz_ticket`]: a fuzzed resume hello that names it gets as far
/// as its binder.
fn fuzz_resumption() -> crate::Resumption {
    let r = crate::Resumption::new(crate::StoreLimits::default());
    {
        let mut store = r.lock();
        let lineage = store.open_lineage(0).expect("an empty store has room");
        let t = fuzz_ticket();
        store.insert(t.id, t.secret, lineage);
    }
    r
}

/// Checks the incoming half of a session on `data` (bytes from the peer after the
/// handshake): a server in each mode, whole and split. Nothing may panic, `NeedMore` may
/// never ask for more than one record, `consumed` stays within the input, both feedings
/// agree, and after the first error every call fails.
pub fn session_input(data: &[u8]) {
    for mode in Mode::ALL {
        let whole = open_all(server_session(*mode), std::iter::once(data));
        let split = open_all(server_session(*mode), chunks(data));
        assert_eq!(whole, split, "{mode}: outcome must not depend on the split");
    }
}

/// A client's and a server's datagram keys in `suite`, from a fixed key schedule.
fn datagram_keys(suite: crate::Suite) -> (crate::dgram::DatagramKeys, crate::dgram::DatagramKeys) {
    use crate::dgram::DatagramKeys;
    let (c2s, s2c) = crate::keys::Schedule::new(
        &crate::keys::Secrets {
            kem: &[0x11; 32],
            dh: &[0x22; 32],
            r_c: &[0x33; 32],
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

/// Checks the datagram plane ([`crate::dgram`]) on `data`: as a datagram from an attacker's
/// address (whole, and behind a valid header for the server's receiver id) it is refused,
/// counted once, and teaches the server no path; then `data` chooses which genuine datagrams
/// of a client to alter (byte and XOR mask) and in which order to deliver them, twice each.
/// Every altered datagram is refused with a reason other than "duplicate", every unaltered
/// one is delivered (or kept as control) once and refused as a replay the second time, and
/// the server answers only the client's own addresses.
pub fn datagram_input(data: &[u8]) {
    use crate::dgram::{wire, Dropped, LivenessConfig, Plane};
    use std::net::SocketAddr;
    use std::time::Instant;

    let suite = if data.first().is_some_and(|b| b & 1 == 1) {
        crate::Suite::ChaCha20
    } else {
        crate::Suite::Aes128
    };
    let (ck, sk) = datagram_keys(suite);
    const C_ID: u32 = 0x0c11_e000;
    const S_ID: u32 = 0x05e5_0000;
    let now = Instant::now();
    let attacker = SocketAddr::from(([198, 18, 3, 66], 6666));
    let client = |path: u8| SocketAddr::from(([198, 18, 1, path], 40_000));

    let _ = wire::Header::parse(data);
    let _ = wire::parse_inner(data);
    let mut server = Plane::server(&sk, S_ID, C_ID, LivenessConfig::default());
    let mut raw = data.to_vec();
    assert!(server.receive(&mut raw, attacker, now).is_err());
    let mut framed = wire::Header {
        receiver: S_ID,
        path: data.first().map_or(0, |b| b % wire::MAX_PATHS as u8),
        counter: data
            .iter()
            .fold(0u64, |a, &b| a.rotate_left(8) ^ u64::from(b))
            % (1 << 40),
    }
    .encode()
    .to_vec();
    framed.extend_from_slice(data);
    let got = server.receive(&mut framed, attacker, now);
    assert!(
        matches!(got, Err(Dropped::Unauthentic | Dropped::Malformed(_))),
        "{got:?}"
    );
    assert_eq!(server.stats().dropped(), 2);
    assert!(
        server.paths().iter().next().is_none(),
        "a path learned from a forgery"
    );
    assert!(server.poll(now).unwrap().is_empty());

    // Genuine datagrams of every kind on paths 0..3, some altered.
    let mut sealer = crate::dgram::Sealer::new(&ck, S_ID);
    let n = 1 + data.len() % 12;
    let mut genuine: Vec<(u8, Vec<u8>, bool)> = (0..n)
        .map(|i| {
            let path = (i % 3) as u8;
            let payload = &data[..data.len().min(i * 7)];
            let msg = match i % 4 {
                0 | 1 => wire::Message::Data {
                    seq: i as u64,
                    payload,
                },
                2 => wire::Message::Probe { id: i as u32 },
                _ => wire::Message::Keepalive,
            };
            (
                path,
                sealer.seal(path, msg).expect("small datagrams seal"),
                false,
            )
        })
        .collect();
    let originals: Vec<Vec<u8>> = genuine.iter().map(|g| g.1.clone()).collect();
    for pair in data.chunks_exact(3) {
        let k = usize::from(pair[0]) % n;
        let d = &mut genuine[k].1;
        let at = usize::from(pair[1]) % d.len();
        d[at] ^= pair[2];
    }
    // Two edits of one byte can cancel: altered means differing from what was sealed.
    for (g, o) in genuine.iter_mut().zip(&originals) {
        g.2 = g.1 != *o;
    }
    let order: Vec<usize> = (0..n)
        .map(|i| (i + usize::from(data.get(i).copied().unwrap_or(0))) % n)
        .collect();
    let mut delivered = vec![0u32; n];
    for round in 0..2 {
        for (j, &k) in order.iter().enumerate() {
            if order[..j].contains(&k) {
                continue;
            }
            let (path, bytes, altered) = &genuine[k];
            let from = if *altered { attacker } else { client(*path) };
            let mut b = bytes.clone();
            match server.receive(&mut b, from, now) {
                Ok(_) => {
                    assert!(!altered, "an altered datagram was accepted");
                    assert_eq!(round, 0, "a datagram was accepted twice");
                    delivered[k] += 1;
                }
                Err(Dropped::Duplicate { .. }) => panic!("distinct sequence numbers"),
                Err(Dropped::Replayed(_)) => assert!(round == 1 || *altered),
                Err(_) => assert!(*altered, "a genuine datagram was refused"),
            }
        }
    }
    for (k, (_, _, altered)) in genuine.iter().enumerate() {
        if !altered && order.contains(&k) {
            assert_eq!(delivered[k], 1, "datagram {k}");
        }
    }
    for p in server.paths().iter() {
        assert_eq!(
            p.remote(),
            Some(client(p.id())),
            "answered at a forged address"
        );
    }
    for t in server.poll(now).unwrap() {
        assert_eq!(t.to, client(t.path));
    }
}

/// Compact datagrams (plane version 2) for a fuzzer: `data` sent to a version 2 server end
/// from an attacker's address, whole and behind a valid compact header for the server's
/// receiver id, is refused and teaches no path; then genuine compact datagrams of an
/// announced flow, altered as `data` says, are delivered once if unaltered (a second
/// arrival is a replay) and refused if altered, with the flow's address.
pub fn compact_input(data: &[u8]) {
    use crate::dgram::Sealer;
    use crate::dgram::{compact, Delivered, Dropped, LivenessConfig, Plane};
    use std::net::SocketAddr;
    use std::time::Instant;

    let (ck, sk) = datagram_keys(crate::Suite::Aes128);
    const C_ID: u32 = 0x00_c11e;
    const S_ID: u32 = 0x5e_0000;
    let now = Instant::now();
    let attacker = SocketAddr::from(([198, 18, 3, 66], 6666));
    let client = SocketAddr::from(([198, 18, 1, 2], 40_000));
    let _ = compact::Header::parse(data);
    let mut server = Plane::server(&sk, S_ID, C_ID, LivenessConfig::default());
    assert!(server.enable_compact(&sk));
    let mut raw = data.to_vec();
    assert!(server.receive(&mut raw, attacker, now).is_err());
    let mut framed = compact::Header {
        receiver: S_ID,
        path: data.first().map_or(0, |b| b % 8),
        seq16: data
            .iter()
            .fold(0u16, |a, &b| a.rotate_left(3) ^ u16::from(b)),
        flow: data.get(1).map_or(0, |b| b % 255),
    }
    .encode()
    .to_vec();
    framed.extend_from_slice(data);
    let got = server.receive(&mut framed, attacker, now);
    assert!(
        matches!(got, Err(Dropped::Unauthentic | Dropped::Malformed(_))),
        "{got:?}"
    );
    assert!(
        server.paths().iter().next().is_none(),
        "a path from a forgery"
    );

    // The flow announced (kind 04), then compact datagrams of it, some altered.
    let key = [0x01, 198, 18, 9, 9, 0x1b, 0x59];
    let mut sealer = Sealer::new(&ck, S_ID);
    assert!(sealer.enable_compact(&ck));
    let with_key = |body: &[u8]| [&key[..], body].concat();
    let (_, mut a) = sealer
        .seal_flow_copies(&[0], &with_key(b"hi"), 7, 7, false)
        .expect("small datagrams seal");
    assert!(server.receive(&mut a[0].1, client, now).is_ok());
    let n = 1 + data.len() % 10;
    let mut genuine: Vec<(Vec<u8>, Vec<u8>)> = (0..n)
        .map(|i| {
            let body = data[..data.len().min(i * 5)].to_vec();
            let (_, mut c) = sealer
                .seal_flow_copies(&[(i % 2) as u8], &with_key(&body), 7, 7, true)
                .expect("small datagrams seal");
            (c.remove(0).1, body)
        })
        .collect();
    let originals: Vec<Vec<u8>> = genuine.iter().map(|g| g.0.clone()).collect();
    for edit in data.chunks_exact(3) {
        let d = &mut genuine[usize::from(edit[0]) % n].0;
        let at = usize::from(edit[1]) % d.len();
        d[at] ^= edit[2];
    }
    for round in 0..2 {
        for (k, (bytes, body)) in genuine.iter().enumerate() {
            let altered = *bytes != originals[k];
            let mut b = bytes.clone();
            match server.receive(&mut b, if altered { attacker } else { client }, now) {
                Ok(Delivered::Data {
                    prefix, payload, ..
                }) => {
                    assert!(
                        !altered && round == 0,
                        "datagram {k} accepted (round {round})"
                    );
                    assert_eq!(prefix.map(|p| p.as_slice().to_vec()), Some(key.to_vec()));
                    assert_eq!(payload, &body[..]);
                }
                Ok(other) => panic!("{other:?}"),
                Err(Dropped::Replayed(_)) => assert!(round == 1 || altered),
                Err(_) => assert!(altered, "a genuine compact datagram was refused"),
            }
        }
    }
    for p in server.paths().iter() {
        assert_eq!(p.remote(), Some(client), "answered at a forged address");
    }
}

/// A server session in `mode`, made by a real exchange with fixed entropy.
fn server_session(mode: Mode) -> Session {
    crate::exchange(
        &ClientConfig::offering(&[mode]),
        &[mode],
        ENTROPY,
        [0x33; SERVER_ENTROPY_LEN],
    )
    .unwrap_or_else(|e| panic!("{mode}: a valid exchange failed: {e}"))
    .server
}

/// Feeds `pieces` to the session's incoming half the way a reader does (a buffer, units
/// opened from its start), and returns the plaintext, the end state and the error if any.
fn open_all<'a>(
    s: Session,
    pieces: impl Iterator<Item = &'a [u8]>,
) -> (Vec<u8>, bool, Option<SessionError>) {
    let (_, mut rx) = s.split();
    let mut buf: Vec<u8> = Vec::new();
    let mut plain = Vec::new();
    let mut closed = false;
    for piece in pieces {
        buf.extend_from_slice(piece);
        loop {
            if buf.is_empty() {
                break;
            }
            match rx.open(&mut buf) {
                Ok(Opened::NeedMore { total }) => {
                    assert!(total > buf.len() && total <= MAX_RECORD, "{total}");
                    break;
                }
                Ok(Opened::Data { consumed, plain: p }) => {
                    assert!(consumed <= buf.len() && p.end <= consumed && p.start <= p.end);
                    assert!(consumed > 0, "no progress");
                    plain.extend_from_slice(&buf[p]);
                    buf.drain(..consumed);
                }
                Ok(Opened::FlowEnd { consumed }) => {
                    buf.drain(..consumed);
                }
                Ok(Opened::Close { consumed }) => {
                    assert!(consumed <= buf.len());
                    buf.drain(..consumed);
                    closed = true;
                }
                Err(e) => {
                    assert_eq!(rx.open(&mut [1, 2, 3]), Err(SessionError::Failed));
                    return (plain, closed, Some(e));
                }
            }
        }
    }
    if let Err(e) = rx.eof() {
        // Only a framed session (or one awaiting the confirmation) can end badly.
        assert!(
            !rx.is_in_place() || matches!(e, SessionError::ConfirmMissing),
            "{e}"
        );
    }
    (plain, closed, None)
}

fn with_prefix(msg_type: u8, data: &[u8]) -> Vec<u8> {
    let mut v = MAGIC.to_vec();
    v.push(VERSION);
    v.push(msg_type);
    v.extend_from_slice(data);
    v
}

/// Chunk sizes (1..=8) taken from the data, so every input also tests one split.
fn chunks(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = data;
    let mut i = 0;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let n = (usize::from(data[i % data.len()] % 8) + 1).min(rest.len());
        i += 1;
        let (a, b) = rest.split_at(n);
        rest = b;
        Some(a)
    })
}

/// A comparable summary of one finished (or unfinished) handshake.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    NeedMore,
    Done {
        consumed: usize,
        reply: Vec<u8>,
        mode: Mode,
        fingerprint: Vec<u8>,
    },
    Failed(Rejected),
}

/// What a session's outgoing half does to a fixed buffer: equal fingerprints mean equal
/// keys.
fn fingerprint(s: Session) -> Vec<u8> {
    let (mut tx, _) = s.split();
    let mut buf = vec![0x5au8; tx.header_len() + 80 + tx.trailer_len()];
    let n = tx.seal(&mut buf, 80);
    buf.truncate(n);
    buf
}

fn server_run<'a>(
    server: &mut ServerHandshake,
    pieces: impl Iterator<Item = &'a [u8]>,
    total: usize,
) -> Outcome {
    let mut fed = 0;
    for piece in pieces {
        match server.read(piece) {
            Ok(Progress::NeedMore { consumed }) => {
                assert_eq!(consumed, piece.len(), "NeedMore must take the whole input");
                fed += consumed;
            }
            Ok(Progress::Done {
                consumed,
                value: (reply, session),
            }) => {
                assert!(consumed <= piece.len());
                return Outcome::Done {
                    consumed: fed + consumed,
                    reply,
                    mode: session.mode(),
                    fingerprint: fingerprint(session),
                };
            }
            Err(r) => return Outcome::Failed(r),
        }
    }
    assert_eq!(fed, total);
    Outcome::NeedMore
}

fn server_check(data: &[u8]) {
    let cfg = || {
        ServerConfig::accepting(Mode::ALL)
            .with_key(crate::test_server_key())
            .with_resumption(fuzz_resumption())
    };
    let mut whole = ServerHandshake::new(&cfg(), [0x44; SERVER_ENTROPY_LEN]);
    let a = server_run(&mut whole, std::iter::once(data), data.len());
    let mut split = ServerHandshake::new(&cfg(), [0x44; SERVER_ENTROPY_LEN]);
    let b = server_run(&mut split, chunks(data), data.len());
    assert_eq!(a, b, "outcome must not depend on how the input is split");

    match a {
        Outcome::NeedMore => {
            assert!(
                data.len() < wire::MAX_HELLO_LEN,
                "must not buffer more than a hello"
            );
            assert_eq!(
                whole.eof(),
                HandshakeError::ClosedEarly {
                    received: data.len()
                }
            );
        }
        Outcome::Done {
            consumed,
            reply,
            mode,
            ..
        } => {
            assert!(consumed <= data.len() && consumed <= wire::MAX_HELLO_LEN);
            check_accept_shape(&reply, mode);
        }
        Outcome::Failed(rejected) => {
            if let Some(reply) = &rejected.reply {
                assert!(reply.len() <= wire::MAX_ANSWER_LEN);
                let mut client =
                    ClientHandshake::new(&ClientConfig::offering(Mode::ALL), ENTROPY).unwrap();
                match client.read(reply) {
                    Err(_) => {}
                    other => panic!("a reject must fail the client: {other:?}"),
                }
            } else {
                assert!(
                    matches!(rejected.error, HandshakeError::NotNena { .. }),
                    "{rejected:?}"
                );
            }
            assert!(matches!(
                whole.read(b"x"),
                Err(Rejected {
                    error: HandshakeError::AlreadyFinished,
                    ..
                })
            ));
        }
    }
}

/// An accept of `mode`: the header, the mode, parameters of the length the protocol allows
/// for it (the suite for crypto modes, none otherwise), and either nothing after them or the
/// server key block.
fn check_accept_shape(reply: &[u8], mode: Mode) {
    assert!(reply.len() <= wire::MAX_ANSWER_LEN);
    assert_eq!(
        reply[..wire::HEADER_LEN - 2],
        wire::header(wire::TYPE_ACCEPT, 0)[..7]
    );
    let body = &reply[wire::HEADER_LEN..];
    assert_eq!(
        u16::from_be_bytes([reply[7], reply[8]]) as usize,
        body.len()
    );
    assert_eq!(body[0], mode.wire_id());
    let p = body[1] as usize;
    // The suite, and with it the tickets granted when the hello asked for some.
    let crypto = mode.is_cryptographic();
    assert!(
        p == usize::from(crypto) || crypto && p == crate::resume::TICKET_PARAMS_LEN,
        "{mode}: {p} parameter bytes"
    );
    let rest = body.len() - 2 - p;
    assert!(
        rest == 0 && !mode.is_cryptographic() || rest == wire::SERVER_BLOCK_LEN,
        "{mode}: {rest} bytes after the parameters"
    );
}

const ENTROPY: [u8; ENTROPY_LEN] = {
    let mut e = [0u8; ENTROPY_LEN];
    let mut i = 0;
    while i < ENTROPY_LEN {
        e[i] = (i as u8).wrapping_mul(37).wrapping_add(11);
        i += 1;
    }
    e
};

fn client_run<'a>(
    client: &mut ClientHandshake,
    pieces: impl Iterator<Item = &'a [u8]>,
    total: usize,
) -> Outcome {
    let mut fed = 0;
    for piece in pieces {
        match client.read(piece) {
            Ok(Progress::NeedMore { consumed }) => {
                assert_eq!(consumed, piece.len(), "NeedMore must take the whole input");
                fed += consumed;
            }
            Ok(Progress::Done {
                consumed,
                value: (confirm, session),
            }) => {
                assert!(consumed <= piece.len());
                assert_eq!(
                    confirm.len(),
                    if session.mode().is_cryptographic() {
                        wire::CONFIRM_LEN
                    } else {
                        0
                    }
                );
                return Outcome::Done {
                    consumed: fed + consumed,
                    reply: confirm,
                    mode: session.mode(),
                    fingerprint: fingerprint(session),
                };
            }
            Err(error) => return Outcome::Failed(Rejected { reply: None, error }),
        }
    }
    assert_eq!(fed, total);
    Outcome::NeedMore
}

fn client_check(cfg: &ClientConfig, data: &[u8]) {
    let mut whole = ClientHandshake::new(cfg, ENTROPY).unwrap();
    let a = client_run(&mut whole, std::iter::once(data), data.len());
    let mut split = ClientHandshake::new(cfg, ENTROPY).unwrap();
    let b = client_run(&mut split, chunks(data), data.len());
    assert_eq!(a, b, "outcome must not depend on how the input is split");
    match a {
        Outcome::NeedMore => {
            assert!(
                data.len() < wire::MAX_ANSWER_LEN,
                "must not buffer more than an answer"
            );
            assert_eq!(
                whole.eof(),
                HandshakeError::ClosedEarly {
                    received: data.len()
                }
            );
        }
        Outcome::Done { consumed, mode, .. } => {
            assert!(consumed <= data.len() && consumed <= wire::MAX_ANSWER_LEN);
            assert!(cfg.offer.contains(&mode));
            assert_eq!(
                whole.read(b"x").err(),
                Some(HandshakeError::AlreadyFinished)
            );
        }
        Outcome::Failed(_) => {
            assert_eq!(
                whole.read(b"x").err(),
                Some(HandshakeError::AlreadyFinished)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_input_in_order() {
        let data: Vec<u8> = (0..=255).collect();
        let joined: Vec<u8> = chunks(&data).flatten().copied().collect();
        assert_eq!(joined, data);
        assert!(chunks(&data).all(|c| (1..=8).contains(&c.len())));
        assert_eq!(chunks(&[]).count(), 0);
    }

    #[test]
    fn bodies_accept_edge_inputs() {
        for d in [&[][..], &[0], &MAGIC[..], &[0xff; 2000]] {
            server_read(d);
            client_read(d);
            session_input(d);
            datagram_input(d);
            compact_input(d);
        }
    }
}
