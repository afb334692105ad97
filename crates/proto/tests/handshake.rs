//! Client <-> server handshakes through plain buffers (no sockets): success for
//! every mode, data after the handshake, and every failure case on both sides.

mod common;

use common::{entropy, open_all, open_whole, seal_all};
use nena_proto::wire::{self, MAGIC, VERSION};
use nena_proto::*;

const ENTROPY: [u8; ENTROPY_LEN] = {
    let mut e = [0u8; ENTROPY_LEN];
    let head = [
        0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff,
        0x01,
    ];
    let mut i = 0;
    while i < ENTROPY_LEN {
        e[i] = if i < 16 { head[i] } else { i as u8 };
        i += 1;
    }
    e
};

const SERVER_ENTROPY: [u8; SERVER_ENTROPY_LEN] = [0x77; SERVER_ENTROPY_LEN];

fn client(offer: &[Mode]) -> ClientHandshake {
    ClientHandshake::new(&ClientConfig::offering(offer), ENTROPY).unwrap()
}

fn server(accept: &[Mode]) -> ServerHandshake {
    ServerHandshake::new(
        &ServerConfig::accepting(accept).with_key(test_server_key()),
        SERVER_ENTROPY,
    )
}

/// A whole exchange at once.
struct Exchange {
    client: Session,
    server: Session,
    reply: Vec<u8>,
    /// The client's key confirmation (empty unless the mode is cryptographic).
    confirm: Vec<u8>,
}

fn exchange_cfg(cfg: &ClientConfig, accept: &[Mode]) -> Exchange {
    let mut c = ClientHandshake::new(cfg, ENTROPY).unwrap();
    let mut s = server(accept);
    let hello = c.first_flight().to_vec();
    let Ok(Progress::Done {
        consumed,
        value: (reply, ss),
    }) = s.read(&hello)
    else {
        panic!("server failed")
    };
    assert_eq!(consumed, hello.len());
    let Ok(Progress::Done {
        consumed,
        value: (confirm, cs),
    }) = c.read(&reply)
    else {
        panic!("client failed")
    };
    assert_eq!(consumed, reply.len());
    Exchange {
        client: cs,
        server: ss,
        reply,
        confirm,
    }
}

fn exchange(offer: &[Mode], accept: &[Mode]) -> Exchange {
    exchange_cfg(&ClientConfig::offering(offer), accept)
}

/// Runs a whole handshake at once; returns (client session, server session, reply).
fn handshake(offer: &[Mode], accept: &[Mode]) -> (Session, Session, Vec<u8>) {
    let x = exchange(offer, accept);
    assert!(x.confirm.is_empty(), "use exchange() for crypto modes");
    (x.client, x.server, x.reply)
}

/// Client data through both halves: what the server receives of `msg` (after the client's
/// confirmation), and what the client receives of the server's `msg`; plus the two wires.
fn round_trip(x: Exchange, msg: &[u8]) -> (Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>) {
    let (mut ctx, mut crx) = x.client.split();
    let (mut stx, mut srx) = x.server.split();
    let mut up = x.confirm.clone();
    up.extend(seal_all(&mut ctx, msg, 1000));
    let got_up = open_whole(&mut srx, &up);
    assert_eq!(got_up.error, None);
    let down = seal_all(&mut stx, msg, 16 * 1024);
    let got_down = open_whole(&mut crx, &down);
    assert_eq!(got_down.error, None);
    (got_up.data, got_down.data, up, down)
}

/// The papers' scrambling, straightforward form (BRIEF.md): the reference the
/// kato mode must match on the wire.
fn reference_scramble(key: [u8; 8], data: &[u8]) -> Vec<u8> {
    let mut w = [0u8; 64];
    w[56..].copy_from_slice(&key);
    data.iter()
        .map(|&b| {
            let out = w.iter().fold(b, |a, x| a ^ x);
            w.copy_within(1.., 0);
            w[63] = b;
            out
        })
        .collect()
}

#[test]
fn every_mode_round_trips_both_directions() {
    for mode in Mode::ALL.iter().copied() {
        let x = exchange(&[mode], Mode::ALL);
        assert_eq!((x.client.mode(), x.server.mode()), (mode, mode));
        assert_eq!(x.client.role(), Role::Client);
        assert_eq!(x.server.role(), Role::Server);
        assert_eq!(x.confirm.is_empty(), !mode.is_cryptographic());
        let msg: Vec<u8> = (0..40_000u32).map(|i| (i * 31 % 251) as u8).collect();
        let (up, down, wire_up, wire_down) = round_trip(x, &msg);
        assert_eq!(up, msg, "{mode}");
        assert_eq!(down, msg, "{mode}");
        let runs: std::collections::HashSet<&[u8]> = msg.windows(16).collect();
        let changed = !wire_down.windows(16).any(|w| runs.contains(w));
        assert_eq!(
            changed,
            mode.is_protected(),
            "{mode}: protection must hide the bytes iff protected"
        );
        // Full records downstream: below 0.2% for aead; nothing at all in place.
        let expansion = wire_down.len() as f64 / msg.len() as f64 - 1.0;
        match mode {
            Mode::Aead => assert!(expansion > 0.0 && expansion < 0.002, "{expansion}"),
            _ => assert_eq!(wire_down.len(), msg.len(), "{mode}: zero expansion"),
        }
        assert_eq!(
            wire_up.len() - msg.len() > 0,
            mode.is_cryptographic(),
            "{mode}: the client's confirmation (and records) upstream"
        );
    }
}

#[test]
fn kato_is_the_papers_scrambling_with_per_direction_keys() {
    let (cs, ss, _) = handshake(&[Mode::Kato], &[Mode::Kato]);
    let msg = b"GET / HTTP/1.1\r\nHost: example\r\n\r\n".repeat(5);
    let c2s_key: [u8; 8] = ENTROPY[..8].try_into().unwrap();
    let s2c_key: [u8; 8] = ENTROPY[8..16].try_into().unwrap();
    let up = seal_all(&mut cs.split().0, &msg, 7);
    assert_eq!(up, reference_scramble(c2s_key, &msg));
    let down = seal_all(&mut ss.split().0, &msg, 100);
    assert_eq!(down, reference_scramble(s2c_key, &msg));
    assert_ne!(up, down, "the two directions must use different keys");
}

#[test]
fn keys_differ_per_connection() {
    for mode in [Mode::Kato, Mode::Stream, Mode::Aead] {
        let mut wires = Vec::new();
        for seed in [1u8, 2] {
            let mut c =
                ClientHandshake::new(&ClientConfig::offering(&[mode]), entropy(seed)).unwrap();
            // The same server entropy both times: only the client's differs.
            let Ok(Progress::Done {
                value: (reply, _), ..
            }) = server(&[mode]).read(c.first_flight())
            else {
                panic!()
            };
            let Ok(Progress::Done { value: (_, cs), .. }) = c.read(&reply) else {
                panic!()
            };
            wires.push(seal_all(&mut cs.split().0, &[0u8; 100], 100));
        }
        assert_ne!(wires[0], wires[1], "{mode}");
    }
    // And per server: the same client hello with another server secret gives other keys.
    let x1 = exchange(&[Mode::Aead], &[Mode::Aead]);
    let mut c = client(&[Mode::Aead]);
    let mut s = ServerHandshake::new(
        &ServerConfig::accepting(&[Mode::Aead]).with_key(test_server_key()),
        [0x78; SERVER_ENTROPY_LEN],
    );
    let Ok(Progress::Done {
        value: (reply, _), ..
    }) = s.read(c.first_flight())
    else {
        panic!()
    };
    let Ok(Progress::Done { value: (_, cs), .. }) = c.read(&reply) else {
        panic!()
    };
    assert_ne!(
        seal_all(&mut x1.client.split().0, &[0u8; 100], 100),
        seal_all(&mut cs.split().0, &[0u8; 100], 100)
    );
}

fn wire_accept(mode: Mode) -> Vec<u8> {
    let mut v = MAGIC.to_vec();
    v.extend_from_slice(&[VERSION, wire::TYPE_ACCEPT, 0, 2, mode.wire_id(), 0]);
    v
}

#[test]
fn wire_layout_is_as_documented() {
    let c = client(&[Mode::Kato, Mode::Plain]);
    let mut want = vec![0x8b, b'N', b'E', b'N', b'A', 2, 1, 0, 21, 2, 0x02, 16];
    want.extend_from_slice(&ENTROPY[..16]);
    want.extend_from_slice(&[0x01, 0]);
    assert_eq!(c.first_flight(), &want[..]);
    let (_, _, reply) = handshake(&[Mode::Kato, Mode::Plain], &[Mode::Kato]);
    assert_eq!(reply, [0x8b, b'N', b'E', b'N', b'A', 2, 2, 0, 2, 0x02, 0]);
    assert_eq!(reply, wire_accept(Mode::Kato));
}

#[test]
fn server_answer_carries_no_secret() {
    let (_, _, reply) = handshake(&[Mode::Kato], &[Mode::Kato]);
    for key in [&ENTROPY[..8], &ENTROPY[8..16]] {
        assert!(
            !reply.windows(2).any(|w| key.windows(2).any(|k| k == w)),
            "no 2-byte run of a key in the answer"
        );
    }
    // The answer is the same whatever the keys are.
    let mut c = ClientHandshake::new(&ClientConfig::offering(&[Mode::Kato]), entropy(200)).unwrap();
    let Ok(Progress::Done {
        value: (reply2, _), ..
    }) = server(&[Mode::Kato]).read(c.first_flight())
    else {
        panic!()
    };
    assert_eq!(reply, reply2);
    assert!(matches!(c.read(&reply2), Ok(Progress::Done { .. })));
}

#[test]
fn server_preference_decides() {
    let (cs, ss, _) = handshake(&[Mode::Plain, Mode::Kato], &[Mode::Kato, Mode::Plain]);
    assert_eq!((cs.mode(), ss.mode()), (Mode::Kato, Mode::Kato));
    let (cs, _, _) = handshake(&[Mode::Kato, Mode::Plain], &[Mode::Plain, Mode::Kato]);
    assert_eq!(cs.mode(), Mode::Plain);
}

#[test]
fn session_data_in_the_same_buffer_is_reported_not_swallowed() {
    for mode in [Mode::Kato, Mode::Stream, Mode::Aead] {
        let mut c = client(&[mode]);
        let mut s = server(&[mode]);
        let Ok(Progress::Done {
            value: (reply, ss), ..
        }) = s.read(c.first_flight())
        else {
            panic!()
        };
        // The server writes its answer and its first data back to back.
        let (mut stx, mut srx) = ss.split();
        let mut wire_bytes = reply.clone();
        wire_bytes.extend(seal_all(&mut stx, b"server speaks first", 100));
        let Ok(Progress::Done {
            consumed,
            value: (confirm, cs),
        }) = c.read(&wire_bytes)
        else {
            panic!()
        };
        assert_eq!(consumed, reply.len());
        let (mut ctx, mut crx) = cs.split();
        let got = open_whole(&mut crx, &wire_bytes[consumed..]);
        assert_eq!(got.data, b"server speaks first", "{mode}");
        // The client's confirmation and its first data, also back to back.
        let mut up = confirm;
        up.extend(seal_all(&mut ctx, b"client answers", 100));
        assert_eq!(open_whole(&mut srx, &up).data, b"client answers", "{mode}");
    }
}

#[test]
fn byte_by_byte_feeding_gives_the_same_result() {
    for offer in [
        &[Mode::Kato, Mode::Plain][..],
        &[Mode::Aead, Mode::Stream][..],
    ] {
        let mut c = client(offer);
        let mut s = server(Mode::ALL);
        let hello = c.first_flight().to_vec();
        let mut result = None;
        for (i, b) in hello.iter().enumerate() {
            match s.read(std::slice::from_ref(b)).unwrap() {
                Progress::NeedMore { consumed } => {
                    assert_eq!(consumed, 1);
                    assert!(i + 1 < hello.len());
                }
                Progress::Done { consumed, value } => {
                    assert_eq!((consumed, i + 1), (1, hello.len()));
                    result = Some(value);
                }
            }
        }
        let (reply, ss) = result.unwrap();
        let mut done = None;
        for (i, b) in reply.iter().enumerate() {
            match c.read(std::slice::from_ref(b)).unwrap() {
                Progress::NeedMore { .. } => assert!(i + 1 < reply.len()),
                Progress::Done { value, .. } => done = Some(value),
            }
        }
        let (confirm, cs) = done.unwrap();
        let mut up = confirm;
        up.extend(seal_all(&mut cs.split().0, b"abc", 3));
        // The server's incoming half, fed one byte at a time too.
        let got = open_all(&mut ss.split().1, up.iter().map(std::slice::from_ref));
        assert_eq!(got.data, b"abc");
        assert_eq!((got.error, got.left), (None, 0));
    }
}

#[test]
fn not_nena_peer() {
    // Server side: an HTTP client. Fails at the first byte; nothing is written back.
    let mut s = server(&[Mode::Kato]);
    let err = s.read(b"GET / HTTP/1.1\r\n").unwrap_err();
    assert_eq!(err.reply, None);
    assert_eq!(err.error, HandshakeError::NotNena { got: b"G".to_vec() });
    assert!(
        err.to_string().starts_with("peer does not speak nena"),
        "{err}"
    );
    // Client side: an HTTP server answering our hello.
    let mut c = client(&[Mode::Kato]);
    let e = c.read(b"HTTP/1.1 400 Bad Request\r\n").unwrap_err();
    assert_eq!(e, HandshakeError::NotNena { got: b"H".to_vec() });
    // A near miss is caught at the first wrong byte, even when fed slowly.
    let mut c = client(&[Mode::Kato]);
    assert!(matches!(
        c.read(&[0x8b, b'N']),
        Ok(Progress::NeedMore { consumed: 2 })
    ));
    assert_eq!(
        c.read(b"OPE").unwrap_err(),
        HandshakeError::NotNena {
            got: vec![0x8b, b'N', b'O']
        }
    );
}

/// A version-1 hello (docs/PROTOCOL.md's version-1 test vector: aead alone, X25519 only),
/// as a nena of before the hybrid key agreement sends it.
const V1_HELLO: &str = "8b4e454e410101004501044\
    28cbcc47b2c265e7ec4b2ff70eb25dccde709f96d3ebb4917203de809e973e56d9194979a9da0a3a6a9acafb2b5b8bbbec1c4c7cacdd0d3d6d9dcdfe2e5e8ebee0117";

fn unhex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    data_encoding::HEXLOWER_PERMISSIVE
        .decode(s.as_bytes())
        .unwrap()
}

/// The policy for version-1 peers: refused both ways, with a message that says which side
/// is older and what to do (no flag accepts them: version 1 has no server key and no
/// post-quantum share).
#[test]
fn other_version_both_sides() {
    // A version-1 client (its real hello) reaches this server.
    let v1_hello = unhex(&V1_HELLO.replace(['\\', ' ', '\n'], ""));
    assert_eq!(v1_hello.len(), 78);
    let mut s = server(&[Mode::Aead]);
    let err = s.read(&v1_hello).unwrap_err();
    assert_eq!(
        err.error,
        HandshakeError::UnsupportedVersion { ours: 2, theirs: 1 }
    );
    assert!(
        err.error.to_string().contains("older nena: upgrade it"),
        "{}",
        err.error
    );
    let reply = err
        .reply
        .expect("a nena peer of another version gets an answer");
    // The answer's header carries this server's version, which a version-1 client compares
    // with its own and reports ("peer speaks nena protocol version 2, we speak version 1").
    assert_eq!(reply, [0x8b, b'N', b'E', b'N', b'A', 2, 3, 0, 1, 1]);
    // A version-1 server's refusal of our hello (its reject 01 under its own version).
    let v1_reject = [0x8b, b'N', b'E', b'N', b'A', 1, 3, 0, 1, 1];
    let mut c = client(&[Mode::Aead]);
    let e = c.read(&v1_reject).unwrap_err();
    assert_eq!(e, HandshakeError::UnsupportedVersion { ours: 2, theirs: 1 });
    assert!(e.to_string().contains("older nena: upgrade it"), "{e}");
    // A newer peer, and a same-version reject.
    let mut hello = client(&[Mode::Kato]).first_flight().to_vec();
    hello[5] = 3;
    let err = server(&[Mode::Kato]).read(&hello).unwrap_err();
    assert_eq!(
        err.error,
        HandshakeError::UnsupportedVersion { ours: 2, theirs: 3 }
    );
    assert!(err.error.to_string().contains("upgrade this side"));
    let mut c = client(&[Mode::Kato]);
    assert_eq!(
        c.read(&err.reply.unwrap()).unwrap_err(),
        HandshakeError::PeerRejected(RejectReason::UnsupportedVersion)
    );
}

#[test]
fn no_common_mode_both_sides_see_the_same_error() {
    let mut c = client(&[Mode::Plain]);
    let mut s = server(&[Mode::Kato]);
    let err = s.read(c.first_flight()).unwrap_err();
    let want = HandshakeError::NoCommonMode {
        offered: vec![Mode::Plain],
        unknown: vec![],
        accepted: vec![Mode::Kato],
    };
    assert_eq!(err.error, want);
    let e = c.read(&err.reply.unwrap()).unwrap_err();
    assert_eq!(e, want);
    assert_eq!(
        e.to_string(),
        "no common mode: the client offers [plain], the server accepts [kato] (to allow kato \
         pass --mode kato; modes without integrity are offered only when named)"
    );
    // An empty accept list accepts nothing.
    let mut c = client(&[Mode::Kato, Mode::Plain]);
    let err = server(&[]).read(c.first_flight()).unwrap_err();
    assert_eq!(
        c.read(&err.reply.unwrap()).unwrap_err(),
        HandshakeError::NoCommonMode {
            offered: vec![Mode::Kato, Mode::Plain],
            unknown: vec![],
            accepted: vec![]
        }
    );
}

/// Builds a hello with the given body (header computed).
fn hello_with_body(body: &[u8]) -> Vec<u8> {
    let mut v = MAGIC.to_vec();
    v.extend_from_slice(&[VERSION, wire::TYPE_HELLO]);
    v.extend_from_slice(&(body.len() as u16).to_be_bytes());
    v.extend_from_slice(body);
    v
}

#[test]
fn malformed_hellos_are_rejected_with_a_reason() {
    let kato = |k: [u8; 16]| -> Vec<u8> {
        let mut v = vec![0x02, 16];
        v.extend_from_slice(&k);
        v
    };
    let good_key: [u8; 16] = ENTROPY[..16].try_into().unwrap();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (vec![], "empty hello"),
        (vec![0], "the hello offers no mode"),
        (vec![33], "the hello offers too many modes"),
        (vec![1, 0x02], "offer list overruns the hello"),
        (
            vec![1, 0x02, 16, 1, 2, 3],
            "key material overruns the hello",
        ),
        (
            vec![1, 0x02, 8, 1, 2, 3, 4, 5, 6, 7, 8],
            "key material has the wrong length for its mode",
        ),
        (
            vec![1, 0x01, 1, 0],
            "key material has the wrong length for its mode",
        ),
        (
            [vec![1], kato([7; 16])].concat(),
            "kato keys are the same in both directions",
        ),
        (
            [vec![2], kato(good_key), kato(good_key)].concat(),
            "the hello offers a mode twice",
        ),
        (
            [vec![1], kato(good_key), vec![0]].concat(),
            "trailing bytes after the offers",
        ),
    ];
    for (body, why) in cases {
        let mut s = server(&[Mode::Kato, Mode::Plain]);
        let err = s.read(&hello_with_body(&body)).unwrap_err();
        assert_eq!(err.error, HandshakeError::Malformed(why), "body {body:?}");
        let mut c = client(&[Mode::Kato]);
        assert_eq!(
            c.read(&err.reply.unwrap()).unwrap_err(),
            HandshakeError::PeerRejected(RejectReason::Malformed)
        );
    }
    // A server answer of the wrong type.
    let mut s = server(&[Mode::Kato]);
    let err = s.read(&wire_accept(Mode::Kato)).unwrap_err();
    assert_eq!(
        err.error,
        HandshakeError::Malformed("unexpected message type")
    );
}

#[test]
fn unknown_modes_from_a_newer_client_are_skipped() {
    let mut body = vec![2, 0x42, 32];
    body.extend_from_slice(&[0xee; 32]);
    body.extend_from_slice(&[0x02, 16]);
    body.extend_from_slice(&ENTROPY[..16]);
    let Ok(Progress::Done {
        value: (reply, ss), ..
    }) = server(&[Mode::Kato]).read(&hello_with_body(&body))
    else {
        panic!()
    };
    assert_eq!(ss.mode(), Mode::Kato);
    assert_eq!(reply, wire_accept(Mode::Kato));
    // Only unknown modes: no common mode, and the server's error names their ids.
    let err = server(&[Mode::Kato])
        .read(&hello_with_body(&[2, 0x42, 0, 0x43, 0]))
        .unwrap_err();
    assert_eq!(
        err.error,
        HandshakeError::NoCommonMode {
            offered: vec![],
            unknown: vec![0x42, 0x43],
            accepted: vec![Mode::Kato]
        }
    );
    assert_eq!(
        err.error.to_string(),
        "no common mode: the client offers only modes unknown to this server (ids 0x42, 0x43), \
         the server accepts [kato]"
    );
}

#[test]
fn bad_answers_fail_the_client() {
    let answer = |body: &[u8], t: u8| {
        let mut v = MAGIC.to_vec();
        v.extend_from_slice(&[VERSION, t]);
        v.extend_from_slice(&(body.len() as u16).to_be_bytes());
        v.extend_from_slice(body);
        v
    };
    let cases: Vec<(Vec<u8>, HandshakeError)> = vec![
        (
            answer(&[0x01, 0], wire::TYPE_ACCEPT),
            HandshakeError::Malformed("the server chose a mode we did not offer"),
        ),
        (
            answer(&[0x42, 0], wire::TYPE_ACCEPT),
            HandshakeError::Malformed("the server chose a mode we did not offer"),
        ),
        (
            answer(&[0x02, 1, 9], wire::TYPE_ACCEPT),
            HandshakeError::Malformed("accept parameters have the wrong length for the mode"),
        ),
        (
            answer(&[0x02], wire::TYPE_ACCEPT),
            HandshakeError::Malformed("accept without a parameter length"),
        ),
        (
            answer(&[0x02, 0, 0], wire::TYPE_ACCEPT),
            HandshakeError::Malformed("trailing bytes after the accept"),
        ),
        (
            answer(&[], wire::TYPE_REJECT),
            HandshakeError::Malformed("reject without a reason"),
        ),
        (
            answer(&[0x02, 3, 1], wire::TYPE_REJECT),
            HandshakeError::Malformed("reject mode list overruns the message"),
        ),
        (
            answer(&[0x99, 1, 2], wire::TYPE_REJECT),
            HandshakeError::PeerRejected(RejectReason::Other(0x99)),
        ),
        (
            answer(&[], wire::TYPE_HELLO),
            HandshakeError::Malformed("unexpected message type"),
        ),
        (
            answer(&[0; 2100], wire::TYPE_ACCEPT),
            HandshakeError::TooLong {
                len: 2109,
                max: 2048,
            },
        ),
    ];
    for (bytes, want) in cases {
        let mut c = client(&[Mode::Kato]);
        assert_eq!(c.read(&bytes).unwrap_err(), want, "{bytes:?}");
        // Once failed, it stays failed and hands out nothing.
        assert_eq!(
            c.read(b"more").unwrap_err(),
            HandshakeError::AlreadyFinished
        );
    }
}

#[test]
fn oversized_hello_is_refused_from_its_header() {
    let mut s = server(&[Mode::Kato]);
    let mut header = MAGIC.to_vec();
    header.extend_from_slice(&[VERSION, wire::TYPE_HELLO, 0xff, 0xff]);
    let err = s.read(&header).unwrap_err();
    assert_eq!(
        err.error,
        HandshakeError::TooLong {
            len: 9 + 0xffff,
            max: 2048
        }
    );
    assert_eq!(
        client(&[Mode::Kato]).read(&err.reply.unwrap()).unwrap_err(),
        HandshakeError::PeerRejected(RejectReason::TooLong)
    );
    // The largest allowed hello (exactly 2048 bytes) is still read; one byte more is not.
    let hello_of = |pad: usize| {
        let mut body = vec![9];
        for id in 0x40u8..=0x46 {
            body.extend_from_slice(&[id, 255]);
            body.extend_from_slice(&[id; 255]);
        }
        body.extend_from_slice(&[0x47, pad as u8]);
        body.resize(body.len() + pad, 0x47);
        body.extend_from_slice(&[0x02, 16]);
        body.extend_from_slice(&ENTROPY[..16]);
        hello_with_body(&body)
    };
    let pad = 2048 - hello_of(0).len();
    assert!(pad < 256);
    assert_eq!(hello_of(pad).len(), 2048);
    let Ok(Progress::Done {
        consumed: 2048,
        value: (_, ss),
    }) = server(&[Mode::Kato]).read(&hello_of(pad))
    else {
        panic!("a 2048-byte hello must be accepted")
    };
    assert_eq!(ss.mode(), Mode::Kato);
    let err = server(&[Mode::Kato]).read(&hello_of(pad + 1)).unwrap_err();
    assert_eq!(
        err.error,
        HandshakeError::TooLong {
            len: 2049,
            max: 2048
        }
    );
}

#[test]
fn closing_early_is_a_clear_error_on_both_sides() {
    let mut c = client(&[Mode::Kato]);
    let hello = c.first_flight().to_vec();
    let mut s = server(&[Mode::Kato]);
    assert_eq!(s.eof(), HandshakeError::ClosedEarly { received: 0 });
    let mut s = server(&[Mode::Kato]);
    assert!(matches!(
        s.read(&hello[..10]),
        Ok(Progress::NeedMore { consumed: 10 })
    ));
    let e = s.eof();
    assert_eq!(e, HandshakeError::ClosedEarly { received: 10 });
    assert_eq!(
        e.to_string(),
        "peer closed the connection in the middle of its nena handshake message (after 10 bytes)"
    );
    assert!(matches!(
        c.read(&wire_accept(Mode::Kato)[..4]),
        Ok(Progress::NeedMore { consumed: 4 })
    ));
    assert_eq!(c.eof(), HandshakeError::ClosedEarly { received: 4 });
    assert_eq!(
        c.read(&wire_accept(Mode::Kato)[4..]).unwrap_err(),
        HandshakeError::AlreadyFinished
    );
}

#[test]
fn bad_configs_are_refused() {
    let mk = |offer: &[Mode], e: [u8; ENTROPY_LEN]| {
        ClientHandshake::new(&ClientConfig::offering(offer), e).unwrap_err()
    };
    assert_eq!(
        mk(&[], ENTROPY),
        HandshakeError::Config("the client offers no mode")
    );
    assert_eq!(
        mk(&[Mode::Kato, Mode::Kato], ENTROPY),
        HandshakeError::Config("the client offers a mode twice")
    );
    for offer in [&[Mode::Kato][..], &[Mode::Aead], &[Mode::Plain]] {
        assert!(matches!(
            mk(offer, [0; ENTROPY_LEN]),
            HandshakeError::Config(_)
        ));
    }
    let mut same_kato = ENTROPY;
    same_kato[8..16].copy_from_slice(&ENTROPY[..8]);
    assert!(matches!(
        mk(&[Mode::Kato], same_kato),
        HandshakeError::Config(_)
    ));
    // ... which does not matter when kato is not offered.
    assert!(ClientHandshake::new(&ClientConfig::offering(&[Mode::Aead]), same_kato).is_ok());
    let mut cfg = ClientConfig::offering(&[Mode::Aead]);
    cfg.aead_epoch_log2 = 24;
    assert!(ClientHandshake::new(&cfg, ENTROPY).is_err());
    let mut cfg = ClientConfig::offering(&[Mode::Stream]);
    cfg.stream_epoch_log2 = 7;
    assert!(ClientHandshake::new(&cfg, ENTROPY).is_err());
    cfg.stream_epoch_log2 = 37;
    assert!(ClientHandshake::new(&cfg, ENTROPY).is_err());
}

#[test]
fn finished_handshakes_refuse_input_and_wipe_the_hello() {
    let mut c = client(&[Mode::Kato]);
    let mut s = server(&[Mode::Kato]);
    let Ok(Progress::Done {
        value: (reply, _), ..
    }) = s.read(c.first_flight())
    else {
        panic!()
    };
    assert!(matches!(c.read(&reply), Ok(Progress::Done { .. })));
    assert!(
        c.first_flight().is_empty(),
        "keys are not kept after the handshake"
    );
    assert_eq!(c.read(&reply).unwrap_err(), HandshakeError::AlreadyFinished);
    assert_eq!(
        s.read(b"x").unwrap_err().error,
        HandshakeError::AlreadyFinished
    );
    assert_eq!(s.eof(), HandshakeError::AlreadyFinished);
}

#[test]
fn split_halves_are_send_and_work_on_separate_threads() {
    fn assert_send<T: Send + 'static>() {}
    assert_send::<Protector>();
    assert_send::<Unprotector>();
    assert_send::<Session>();
    for mode in Mode::ALL.iter().copied() {
        let x = exchange(&[mode], &[mode]);
        let (mut ctx, _) = x.client.split();
        let (_, mut srx) = x.server.split();
        let confirm = x.confirm;
        let wire_up = std::thread::spawn(move || {
            let mut w = confirm;
            w.extend(seal_all(&mut ctx, &[1u8; 50_000], 4096));
            w
        })
        .join()
        .unwrap();
        let got = std::thread::spawn(move || open_whole(&mut srx, &wire_up).data);
        assert_eq!(got.join().unwrap(), vec![1u8; 50_000]);
    }
}

#[test]
fn debug_output_never_shows_keys() {
    let c = client(&[Mode::Kato]);
    let (cs, _, _) = handshake(&[Mode::Kato], &[Mode::Kato]);
    for text in [
        format!("{c:?}"),
        format!("{cs:?}"),
        format!("{:?}", cs.split()),
    ] {
        assert!(!text.contains("17, 34") && !text.contains("0x11"), "{text}");
        assert!(text.contains("Kato"), "{text}");
    }
    let x = exchange(&[Mode::Aead], &[Mode::Aead]);
    let c = client(&[Mode::Aead]);
    for text in [
        format!("{c:?}"),
        format!("{:?}", x.client),
        format!("{:?}", x.server.split()),
    ] {
        // No byte array (a key, r_c, a share, a tag) in any form.
        assert!(!text.contains(", 1") && !text.contains("0x"), "{text}");
        assert!(text.contains("Aead"), "{text}");
    }
}

#[test]
fn a_fallback_refusal_reaches_the_client_as_such() {
    let msg = ServerHandshake::refusal(RejectReason::FallbackRefused);
    assert_eq!(
        msg,
        [&MAGIC[..], &[VERSION, 0x03, 0x00, 0x01, 0x05]].concat()
    );
    let e = client(&[Mode::Kato]).read(&msg).unwrap_err();
    assert_eq!(
        e,
        HandshakeError::PeerRejected(RejectReason::FallbackRefused)
    );
    assert!(e.to_string().contains("plain TCP"), "{e}");
}
