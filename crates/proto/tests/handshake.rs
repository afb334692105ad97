//! Client <-> server handshakes through plain buffers (no sockets): success for
//! every mode, data after the handshake, and every failure case on both sides.

use nena_proto::wire::{self, MAGIC, VERSION};
use nena_proto::*;

const ENTROPY: [u8; 32] = [
    0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x01,
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
];

fn client(offer: &[Mode]) -> ClientHandshake {
    ClientHandshake::new(
        &ClientConfig {
            offer: offer.to_vec(),
        },
        ENTROPY,
    )
    .unwrap()
}

fn server(accept: &[Mode]) -> ServerHandshake {
    ServerHandshake::new(&ServerConfig {
        accept: accept.to_vec(),
    })
}

/// Runs a whole handshake at once; returns (client session, server session, reply).
fn handshake(offer: &[Mode], accept: &[Mode]) -> (Session, Session, Vec<u8>) {
    let mut c = client(offer);
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
        value: cs,
    }) = c.read(&reply)
    else {
        panic!("client failed")
    };
    assert_eq!(consumed, reply.len());
    (cs, ss, reply)
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
    for mode in [Mode::Plain, Mode::Kato] {
        let (mut cs, mut ss, _) = handshake(&[mode], &[Mode::Kato, Mode::Plain]);
        assert_eq!(cs.mode(), mode);
        assert_eq!(ss.mode(), mode);
        assert_eq!(cs.role(), Role::Client);
        assert_eq!(ss.role(), Role::Server);
        let msg: Vec<u8> = (0..1000u32).map(|i| (i * 31 % 251) as u8).collect();
        let mut up = msg.clone();
        cs.protect(&mut up);
        assert_eq!(
            up != msg,
            mode.is_protected(),
            "{mode}: protection must change the bytes iff protected"
        );
        ss.unprotect(&mut up);
        assert_eq!(up, msg);
        let mut down = msg.clone();
        ss.protect(&mut down);
        cs.unprotect(&mut down);
        assert_eq!(down, msg);
    }
}

#[test]
fn kato_is_the_papers_scrambling_with_per_direction_keys() {
    let (mut cs, mut ss, _) = handshake(&[Mode::Kato], &[Mode::Kato]);
    let msg = b"GET / HTTP/1.1\r\nHost: example\r\n\r\n".repeat(5);
    let c2s_key: [u8; 8] = ENTROPY[..8].try_into().unwrap();
    let s2c_key: [u8; 8] = ENTROPY[8..16].try_into().unwrap();
    let mut up = msg.clone();
    cs.protect(&mut up);
    assert_eq!(up, reference_scramble(c2s_key, &msg));
    let mut down = msg.clone();
    ss.protect(&mut down);
    assert_eq!(down, reference_scramble(s2c_key, &msg));
    assert_ne!(up, down, "the two directions must use different keys");
}

#[test]
fn keys_differ_per_connection() {
    let mut other = ENTROPY;
    other[0] ^= 1;
    other[8] ^= 1;
    let mut a = client(&[Mode::Kato]);
    let mut b = ClientHandshake::new(
        &ClientConfig {
            offer: vec![Mode::Kato],
        },
        other,
    )
    .unwrap();
    let reply = wire_accept(Mode::Kato);
    let Ok(Progress::Done { value: mut sa, .. }) = a.read(&reply) else {
        panic!()
    };
    let Ok(Progress::Done { value: mut sb, .. }) = b.read(&reply) else {
        panic!()
    };
    let (mut x, mut y) = ([0u8; 100], [0u8; 100]);
    sa.protect(&mut x);
    sb.protect(&mut y);
    assert_ne!(x, y);
}

fn wire_accept(mode: Mode) -> Vec<u8> {
    let mut v = MAGIC.to_vec();
    v.extend_from_slice(&[VERSION, wire::TYPE_ACCEPT, 0, 2, mode.wire_id(), 0]);
    v
}

#[test]
fn wire_layout_is_as_documented() {
    let c = client(&[Mode::Kato, Mode::Plain]);
    let mut want = vec![0x8b, b'N', b'E', b'N', b'A', 1, 1, 0, 21, 2, 0x02, 16];
    want.extend_from_slice(&ENTROPY[..16]);
    want.extend_from_slice(&[0x01, 0]);
    assert_eq!(c.first_flight(), &want[..]);
    let (_, _, reply) = handshake(&[Mode::Kato, Mode::Plain], &[Mode::Kato]);
    assert_eq!(reply, [0x8b, b'N', b'E', b'N', b'A', 1, 2, 0, 2, 0x02, 0]);
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
    let mut c = ClientHandshake::new(
        &ClientConfig {
            offer: vec![Mode::Kato],
        },
        std::array::from_fn(|i| 200 - i as u8),
    )
    .unwrap();
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
    let mut c = client(&[Mode::Kato]);
    let mut s = server(&[Mode::Kato]);
    let Ok(Progress::Done {
        value: (reply, mut ss),
        ..
    }) = s.read(c.first_flight())
    else {
        panic!()
    };
    // The server writes its answer and its first data back to back.
    let mut data = b"server speaks first".to_vec();
    ss.protect(&mut data);
    let mut wire_bytes = reply.clone();
    wire_bytes.extend_from_slice(&data);
    let Ok(Progress::Done {
        consumed,
        value: mut cs,
    }) = c.read(&wire_bytes)
    else {
        panic!()
    };
    assert_eq!(consumed, reply.len());
    let mut rest = wire_bytes[consumed..].to_vec();
    cs.unprotect(&mut rest);
    assert_eq!(rest, b"server speaks first");
}

#[test]
fn byte_by_byte_feeding_gives_the_same_result() {
    let mut c = client(&[Mode::Kato, Mode::Plain]);
    let mut s = server(&[Mode::Kato]);
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
    let (reply, mut ss) = result.unwrap();
    let mut cs = None;
    for (i, b) in reply.iter().enumerate() {
        match c.read(std::slice::from_ref(b)).unwrap() {
            Progress::NeedMore { .. } => assert!(i + 1 < reply.len()),
            Progress::Done { value, .. } => cs = Some(value),
        }
    }
    let mut cs = cs.unwrap();
    let mut m = *b"abc";
    cs.protect(&mut m);
    ss.unprotect(&mut m);
    assert_eq!(&m, b"abc");
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

#[test]
fn other_version_both_sides() {
    // A version-2 client reaches a version-1 server.
    let mut hello = client(&[Mode::Kato]).first_flight().to_vec();
    hello[5] = 2;
    let mut s = server(&[Mode::Kato]);
    let err = s.read(&hello).unwrap_err();
    assert_eq!(
        err.error,
        HandshakeError::UnsupportedVersion { ours: 1, theirs: 2 }
    );
    let reply = err
        .reply
        .expect("a nena peer of another version gets an answer");
    // The answer's header carries the server's version, which the v2 client compares with its own.
    assert_eq!(&reply[..6], &[0x8b, b'N', b'E', b'N', b'A', 1]);
    // A version-1 client facing a version-2 server's answer:
    let mut answer = reply.clone();
    answer[5] = 2;
    let mut c = client(&[Mode::Kato]);
    let e = c.read(&answer).unwrap_err();
    assert_eq!(e, HandshakeError::UnsupportedVersion { ours: 1, theirs: 2 });
    assert_eq!(
        e.to_string(),
        "peer speaks nena protocol version 2, we speak version 1"
    );
    // Same-version client receiving that reject directly:
    let mut c = client(&[Mode::Kato]);
    assert_eq!(
        c.read(&reply).unwrap_err(),
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
        accepted: vec![Mode::Kato],
    };
    assert_eq!(err.error, want);
    let e = c.read(&err.reply.unwrap()).unwrap_err();
    assert_eq!(e, want);
    assert_eq!(
        e.to_string(),
        "no common mode: the client offers [plain], the server accepts [kato]"
    );
    // An empty accept list accepts nothing.
    let mut c = client(&[Mode::Kato, Mode::Plain]);
    let err = server(&[]).read(c.first_flight()).unwrap_err();
    assert_eq!(
        c.read(&err.reply.unwrap()).unwrap_err(),
        HandshakeError::NoCommonMode {
            offered: vec![Mode::Kato, Mode::Plain],
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
    // Only unknown modes: no common mode, with the unknown ones left out of the list.
    let err = server(&[Mode::Kato])
        .read(&hello_with_body(&[1, 0x42, 0]))
        .unwrap_err();
    assert_eq!(
        err.error,
        HandshakeError::NoCommonMode {
            offered: vec![],
            accepted: vec![Mode::Kato]
        }
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
            answer(&[0; 300], wire::TYPE_ACCEPT),
            HandshakeError::TooLong { len: 309, max: 256 },
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
            max: 1024
        }
    );
    assert_eq!(
        client(&[Mode::Kato]).read(&err.reply.unwrap()).unwrap_err(),
        HandshakeError::PeerRejected(RejectReason::TooLong)
    );
    // The largest allowed hello (exactly 1024 bytes) is still read; one byte more is not.
    let hello_of = |pad: usize| {
        let mut body = vec![5];
        for id in [0x40u8, 0x41, 0x42] {
            body.extend_from_slice(&[id, 255]);
            body.extend_from_slice(&[id; 255]);
        }
        body.extend_from_slice(&[0x43, pad as u8]);
        body.resize(body.len() + pad, 0x43);
        body.extend_from_slice(&[0x02, 16]);
        body.extend_from_slice(&ENTROPY[..16]);
        hello_with_body(&body)
    };
    let pad = 1024 - hello_of(0).len();
    assert!(pad < 256);
    assert_eq!(hello_of(pad).len(), 1024);
    let Ok(Progress::Done {
        consumed: 1024,
        value: (_, ss),
    }) = server(&[Mode::Kato]).read(&hello_of(pad))
    else {
        panic!("a 1024-byte hello must be accepted")
    };
    assert_eq!(ss.mode(), Mode::Kato);
    let err = server(&[Mode::Kato]).read(&hello_of(pad + 1)).unwrap_err();
    assert_eq!(
        err.error,
        HandshakeError::TooLong {
            len: 1025,
            max: 1024
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
    let mk = |offer: Vec<Mode>, e: [u8; 32]| {
        ClientHandshake::new(&ClientConfig { offer }, e).unwrap_err()
    };
    assert_eq!(
        mk(vec![], ENTROPY),
        HandshakeError::Config("the client offers no mode")
    );
    assert_eq!(
        mk(vec![Mode::Kato, Mode::Kato], ENTROPY),
        HandshakeError::Config("the client offers a mode twice")
    );
    assert!(matches!(
        mk(vec![Mode::Kato], [0; 32]),
        HandshakeError::Config(_)
    ));
    // Plain needs no key, so constant entropy is fine for it.
    assert!(ClientHandshake::new(
        &ClientConfig {
            offer: vec![Mode::Plain]
        },
        [0; 32]
    )
    .is_ok());
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
    let (cs, ss, _) = handshake(&[Mode::Kato], &[Mode::Kato]);
    let (mut ctx, mut crx) = cs.split();
    let (mut stx, mut srx) = ss.split();
    let up = std::thread::spawn(move || {
        let mut v = vec![1u8; 5000];
        ctx.protect(&mut v);
        srx.unprotect(&mut v);
        v
    });
    let mut down = vec![2u8; 5000];
    stx.protect(&mut down);
    crx.unprotect(&mut down);
    assert_eq!(down, vec![2u8; 5000]);
    assert_eq!(up.join().unwrap(), vec![1u8; 5000]);
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
}
