//! Fuzz bodies for the handshake parsers, shared by `fuzz/fuzz_targets/handshake.rs`
//! (libFuzzer, nightly) and by a stable `cargo test` over random inputs.
//!
//! Each body feeds the input twice, once whole and once in chunks whose sizes
//! come from the input itself, and panics only when an invariant of the state
//! machine breaks: the two feedings must give the same outcome, `consumed`
//! must stay within the input, answers must be bounded and understood by the
//! other side, and a finished handshake must refuse more input.
//! Random bytes rarely get past the 5-byte magic, so each body also runs on
//! the input behind a valid header prefix, which sends it straight to the
//! length and body parsers.

use crate::wire::{self, MAGIC, VERSION};
use crate::{
    ClientConfig, ClientHandshake, HandshakeError, Mode, Progress, Rejected, ServerConfig,
    ServerHandshake, Session,
};

/// Checks the server's parser on `data` as a client hello.
pub fn server_read(data: &[u8]) {
    server_check(data);
    server_check(&with_prefix(wire::TYPE_HELLO, data));
}

/// Checks the client's parser on `data` as a server answer.
pub fn client_read(data: &[u8]) {
    client_check(data);
    client_check(&with_prefix(
        data.first().map_or(wire::TYPE_ACCEPT, |b| 2 + (b & 1)),
        data,
    ));
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

/// What a session does to a fixed buffer in each direction: equal fingerprints
/// mean equal keys.
fn fingerprint(mut s: Session) -> Vec<u8> {
    let mut a = [0x5au8; 80];
    let mut b = [0xa5u8; 80];
    s.protect(&mut a);
    s.unprotect(&mut b);
    let mut v = a.to_vec();
    v.extend_from_slice(&b);
    v
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
    let cfg = ServerConfig::default();
    let mut whole = ServerHandshake::new(&cfg);
    let a = server_run(&mut whole, std::iter::once(data), data.len());
    let mut split = ServerHandshake::new(&cfg);
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
            // A client offering every mode understands the answer and agrees on the mode.
            let mut client = ClientHandshake::new(
                &ClientConfig {
                    offer: Mode::ALL.to_vec(),
                },
                ENTROPY,
            )
            .unwrap();
            match client.read(&reply) {
                Ok(Progress::Done { consumed, value }) => {
                    assert_eq!(consumed, reply.len());
                    assert_eq!(value.mode(), mode);
                }
                other => panic!("client cannot read the server's accept: {other:?}"),
            }
        }
        Outcome::Failed(rejected) => {
            if let Some(reply) = &rejected.reply {
                assert!(reply.len() <= wire::MAX_ANSWER_LEN);
                let mut client = ClientHandshake::new(
                    &ClientConfig {
                        offer: Mode::ALL.to_vec(),
                    },
                    ENTROPY,
                )
                .unwrap();
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

const ENTROPY: [u8; 32] = {
    let mut e = [0u8; 32];
    let mut i = 0;
    while i < 32 {
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
            Ok(Progress::Done { consumed, value }) => {
                assert!(consumed <= piece.len());
                return Outcome::Done {
                    consumed: fed + consumed,
                    reply: Vec::new(),
                    mode: value.mode(),
                    fingerprint: fingerprint(value),
                };
            }
            Err(error) => return Outcome::Failed(Rejected { reply: None, error }),
        }
    }
    assert_eq!(fed, total);
    Outcome::NeedMore
}

fn client_check(data: &[u8]) {
    let cfg = ClientConfig {
        offer: vec![Mode::Kato, Mode::Plain],
    };
    let mut whole = ClientHandshake::new(&cfg, ENTROPY).unwrap();
    let a = client_run(&mut whole, std::iter::once(data), data.len());
    let mut split = ClientHandshake::new(&cfg, ENTROPY).unwrap();
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
        }
    }
}
