//! The cryptographic modes' handshake under attack (no sockets): downgrades, altered,
//! replayed and reflected answers, low-order key shares, the client's key confirmation,
//! hello validation, forced key updates, and nena's own transcript-to-keys vectors
//! (published in docs/PROTOCOL.md).

mod common;

use common::{entropy, open_all, open_whole, seal_all};
use nena_proto::hybrid::{self, MLKEM_CT_LEN, MLKEM_EK_LEN};
use nena_proto::keys::{self, Schedule, Secrets};
use nena_proto::wire::{self, MAGIC, VERSION};
use nena_proto::*;

/// Where the client's X25519 share is in a hello that offers aead alone: after the offers
/// (9-byte header, N, one 4-byte offer) and the ML-KEM encapsulation key.
const HELLO_X25519: usize = wire::HEADER_LEN + 5 + MLKEM_EK_LEN;
/// Where the server's X25519 share is in the body of an accept of a crypto mode: after
/// the mode, P = 1, the suite, and the ML-KEM ciphertext.
const ACCEPT_X25519: usize = 3 + MLKEM_CT_LEN;
/// Where the server's public key is in that body.
const ACCEPT_KEY: usize = ACCEPT_X25519 + 32;

fn exchange(cfg: &ClientConfig, accept: &[Mode], seed: u8) -> (Session, Session, Vec<u8>, Vec<u8>) {
    let x = nena_proto::exchange(
        cfg,
        accept,
        entropy(seed),
        [seed ^ 0xa5; SERVER_ENTROPY_LEN],
    )
    .unwrap();
    (x.client, x.server, x.reply, x.confirm)
}

/// The hello and the server's reply of one exchange, with the client kept to read answers.
fn hello_and_reply(offer: &[Mode], seed: u8) -> (ClientHandshake, Vec<u8>, Vec<u8>) {
    let c = ClientHandshake::new(&ClientConfig::offering(offer), entropy(seed)).unwrap();
    let hello = c.first_flight().to_vec();
    let Ok(Progress::Done {
        value: (reply, _), ..
    }) = ServerHandshake::new(
        &ServerConfig::default().with_key(test_server_key()),
        [seed; SERVER_ENTROPY_LEN],
    )
    .read(&hello)
    else {
        panic!()
    };
    (c, hello, reply)
}

#[test]
fn defaults_negotiate_aead_with_the_clients_suite() {
    let (cs, ss, reply, confirm) = exchange(&ClientConfig::default(), Mode::DEFAULT_ACCEPT, 1);
    assert_eq!((cs.mode(), ss.mode()), (Mode::Aead, Mode::Aead));
    assert_eq!(confirm.len(), wire::CONFIRM_LEN);
    // accept: header, mode, P = 1, suite, then the server block (ML-KEM ciphertext, X25519
    // share, server key, signature, confirmation)
    assert_eq!(reply.len(), wire::HEADER_LEN + 3 + wire::SERVER_BLOCK_LEN);
    assert_eq!(reply[wire::HEADER_LEN..wire::HEADER_LEN + 2], [0x04, 1]);
    let want = Suite::preferred();
    assert_eq!(reply[wire::HEADER_LEN + 2], want.wire_id());
    assert_eq!(cs.info().cipher, Some(want.aead_name()));
    for suite in [Suite::Aes128, Suite::ChaCha20] {
        for mode in [Mode::Aead, Mode::Stream] {
            let cfg = ClientConfig {
                suite,
                ..ClientConfig::offering(&[mode])
            };
            let (cs, ss, _, _) = exchange(&cfg, Mode::ALL, 2);
            let name = match mode {
                Mode::Aead => suite.aead_name(),
                _ => suite.stream_name(),
            };
            assert_eq!(cs.info().cipher, Some(name));
            assert_eq!(ss.info(), cs.info());
            assert!(cs.info().describe().contains(name));
        }
    }
    let (ks, _, _, _) = exchange(&ClientConfig::offering(&[Mode::Kato]), Mode::ALL, 3);
    assert_eq!(
        ks.info().describe(),
        "kato (the papers' obfuscation, not encryption)"
    );
}

/// Rebuilds an accept message from its body.
fn accept_with_body(body: &[u8]) -> Vec<u8> {
    let mut v = MAGIC.to_vec();
    v.extend_from_slice(&[VERSION, wire::TYPE_ACCEPT]);
    v.extend_from_slice(&(body.len() as u16).to_be_bytes());
    v.extend_from_slice(body);
    v
}

#[test]
fn an_attacker_cannot_downgrade_or_alter_the_answer() {
    let offer = [Mode::Aead, Mode::Stream, Mode::Kato, Mode::Plain];
    // To kato or plain without a confirmation (what an older server would send).
    for m in [Mode::Kato, Mode::Plain] {
        let (mut c, _, _) = hello_and_reply(&offer, 4);
        let e = c.read(&accept_with_body(&[m.wire_id(), 0])).unwrap_err();
        assert_eq!(e, HandshakeError::Unconfirmed { mode: m });
        assert!(e.to_string().contains("downgrade"), "{e}");
    }
    // To another crypto mode, keeping the server's share and tag.
    let (mut c, _, reply) = hello_and_reply(&offer, 5);
    let mut swapped = reply.clone();
    swapped[wire::HEADER_LEN] = Mode::Stream.wire_id();
    assert_eq!(
        c.read(&swapped).unwrap_err(),
        HandshakeError::ConfirmationFailed
    );
    // Another suite.
    let (mut c, _, reply) = hello_and_reply(&offer, 5);
    let mut other = reply.clone();
    other[wire::HEADER_LEN + 2] ^= 0x03; // 1 <-> 2
    assert_eq!(
        c.read(&other).unwrap_err(),
        HandshakeError::ConfirmationFailed
    );
    // Any single bit of the ciphertext, the share, the server key, the signature or the tag.
    for i in wire::HEADER_LEN + 3..reply.len() {
        let (mut c, _, reply) = hello_and_reply(&offer, 5);
        let mut bad = reply.clone();
        bad[i] ^= 0x10;
        let e = c.read(&bad).unwrap_err();
        assert!(
            matches!(
                e,
                HandshakeError::ConfirmationFailed | HandshakeError::ZeroSharedSecret
            ),
            "byte {i}: {e}"
        );
    }
    // The untouched answer is fine.
    let (mut c, _, reply) = hello_and_reply(&offer, 5);
    assert!(matches!(c.read(&reply), Ok(Progress::Done { .. })));
}

#[test]
fn a_replayed_answer_is_refused() {
    // The answer of an earlier connection (valid then) is replayed to a new one.
    let (_, _, old_reply) = hello_and_reply(&[Mode::Aead], 6);
    let (mut c, _, _) = hello_and_reply(&[Mode::Aead], 7);
    let e = c.read(&old_reply).unwrap_err();
    assert_eq!(e, HandshakeError::ConfirmationFailed);
    assert!(e.to_string().contains("replayed"), "{e}");
}

#[test]
fn a_reflected_share_is_refused() {
    let (mut c, hello, reply) = hello_and_reply(&[Mode::Aead], 8);
    // The client's own X25519 share as the server's.
    let client_share = &hello[HELLO_X25519..HELLO_X25519 + 32];
    let mut body = reply[wire::HEADER_LEN..].to_vec();
    body[ACCEPT_X25519..ACCEPT_X25519 + 32].copy_from_slice(client_share);
    assert_eq!(
        c.read(&accept_with_body(&body)).unwrap_err(),
        HandshakeError::ReflectedShare
    );
}

/// A point of order 8 on Curve25519 (X25519 with it gives zero for every secret).
const LOW_ORDER: [u8; 32] = [
    0xe0, 0xeb, 0x7a, 0x7c, 0x3b, 0x41, 0xb8, 0xae, 0x16, 0x56, 0xe3, 0xfa, 0xf1, 0x9f, 0xc4, 0x6a,
    0xda, 0x09, 0x8d, 0xeb, 0x9c, 0x32, 0xb1, 0xfd, 0x86, 0x62, 0x05, 0x16, 0x5f, 0x49, 0xb8, 0x00,
];

#[test]
fn low_order_shares_are_refused_on_both_sides() {
    for point in [[0u8; 32], LOW_ORDER] {
        // From the server.
        let (mut c, _, reply) = hello_and_reply(&[Mode::Aead], 9);
        let mut body = reply[wire::HEADER_LEN..].to_vec();
        body[ACCEPT_X25519..ACCEPT_X25519 + 32].copy_from_slice(&point);
        assert_eq!(
            c.read(&accept_with_body(&body)).unwrap_err(),
            HandshakeError::ZeroSharedSecret
        );
        // From the client: the server refuses the hello as malformed.
        let c = ClientHandshake::new(&ClientConfig::offering(&[Mode::Aead]), entropy(9)).unwrap();
        let mut hello = c.first_flight().to_vec();
        hello[HELLO_X25519..HELLO_X25519 + 32].copy_from_slice(&point);
        let err = ServerHandshake::new(
            &ServerConfig::default().with_key(test_server_key()),
            [1; SERVER_ENTROPY_LEN],
        )
        .read(&hello)
        .unwrap_err();
        assert_eq!(err.error, HandshakeError::ZeroSharedSecret);
        assert!(err.reply.is_some(), "a nena peer gets a reason");
    }
}

#[test]
fn an_attacker_who_swaps_the_server_share_cannot_confirm_it() {
    // An active attacker on an untrusted path sees the answer (not the hello: that crossed
    // the trusted path). It replaces the server's share with its own and computes a tag as
    // best it can: knowing everything but r_c, it must guess r_c.
    let (mut c, hello, reply) = hello_and_reply(&[Mode::Aead], 10);
    let client_share: [u8; 32] = hello[HELLO_X25519..HELLO_X25519 + 32].try_into().unwrap();
    let a = [0x42u8; 32];
    let mut body = reply[wire::HEADER_LEN..].to_vec();
    body[ACCEPT_X25519..ACCEPT_X25519 + 32].copy_from_slice(&keys::x25519_share(&a));
    let mut forged = accept_with_body(&body);
    let dh = keys::x25519_agree(&a, &client_share).unwrap();
    let tag_at = forged.len() - keys::TAG_LEN;
    // It lacks r_c and the ML-KEM secret (the encapsulation key was in the hello too).
    let guess = [0u8; 32];
    let secrets = Secrets {
        kem: &guess,
        dh: &dh,
        r_c: &guess,
    };
    let tag = Schedule::new(&secrets, &hello, &forged[..tag_at]).server_tag();
    forged[tag_at..].copy_from_slice(&tag);
    assert_eq!(
        c.read(&forged).unwrap_err(),
        HandshakeError::ConfirmationFailed
    );
}

#[test]
fn the_server_checks_the_clients_confirmation_before_any_data() {
    for mode in [Mode::Aead, Mode::Stream] {
        let cfg = ClientConfig::offering(&[mode]);
        let (cs, ss, _, confirm) = exchange(&cfg, &[mode], 11);
        let data = seal_all(&mut cs.split().0, b"secret request", 100);
        // Right confirmation: data flows.
        let (_, mut rx) = exchange(&cfg, &[mode], 11).1.split();
        let mut ok = confirm.clone();
        ok.extend_from_slice(&data);
        assert_eq!(open_whole(&mut rx, &ok).data, b"secret request");
        // Wrong tag, wrong header, another session's confirmation, none at all.
        let (_, _, _, other_confirm) = exchange(&cfg, &[mode], 12);
        let mut bad_tag = confirm.clone();
        bad_tag[20] ^= 1;
        let mut bad_type = confirm.clone();
        bad_type[6] = wire::TYPE_HELLO;
        for (wire_bytes, what) in [
            ([bad_tag, data.clone()].concat(), "does not match"),
            ([bad_type, data.clone()].concat(), "not a nena confirmation"),
            ([other_confirm, data.clone()].concat(), "does not match"),
            (data.clone(), ""),
        ] {
            let (_, mut rx) = exchange(&cfg, &[mode], 11).1.split();
            let got = open_whole(&mut rx, &wire_bytes);
            assert!(
                got.data.is_empty(),
                "{mode}: no byte reaches the application"
            );
            if wire_bytes.len() < wire::CONFIRM_LEN {
                assert_eq!(got.error, None);
                assert_eq!(rx.eof(), Err(SessionError::ConfirmMissing));
            } else {
                let e = got.error.expect("refused").to_string();
                assert!(e.starts_with("the client's key confirmation failed"), "{e}");
                assert!(e.contains(what), "{e}");
            }
        }
        // The connection ends right after the answer.
        let (_, rx) = ss.split();
        assert_eq!(rx.eof(), Err(SessionError::ConfirmMissing));
    }
}

/// The key share block of a hello: ML-KEM-768 encapsulation key, X25519 share, r_c.
fn key_share(ek: &[u8], share: [u8; 32], rc: [u8; 32]) -> Vec<u8> {
    [ek, &share[..], &rc[..]].concat()
}

fn hello_with(offers: &[(Mode, Vec<u8>)], share: &[u8]) -> Vec<u8> {
    let mut body = vec![offers.len() as u8];
    for (m, key) in offers {
        body.extend_from_slice(&[m.wire_id(), key.len() as u8]);
        body.extend_from_slice(key);
    }
    body.extend_from_slice(share);
    let mut v = MAGIC.to_vec();
    v.extend_from_slice(&[VERSION, wire::TYPE_HELLO]);
    v.extend_from_slice(&(body.len() as u16).to_be_bytes());
    v.extend_from_slice(&body);
    v
}

/// A client may not make the server update its keys every record (aead) or every 256 bytes
/// (stream): the server refuses a hello below the floor (issue 41, finding 6), the client
/// refuses to offer one, and the floor itself is accepted.
#[test]
fn key_update_intervals_below_the_floor_are_refused() {
    let (_, ek) = hybrid::keypair(&[3; 64]);
    let ks = key_share(&ek, keys::x25519_share(&[5; 32]), [9; 32]);
    let read = |mode: Mode, epoch: u8| {
        let hello = hello_with(&[(mode, vec![1, epoch])], &ks);
        ServerHandshake::new(
            &ServerConfig::accepting(&[mode]).with_key(test_server_key()),
            [1; SERVER_ENTROPY_LEN],
        )
        .read(&hello)
        .map(|_| ())
        .map_err(|r| (r.error.to_string(), r.reply.is_some()))
    };
    for (mode, below, floor) in [(Mode::Aead, 0u8, 1u8), (Mode::Stream, 15, 16)] {
        for epoch in [0, below] {
            let (err, answered) = read(mode, epoch).unwrap_err();
            assert!(
                err.contains("below the server's floor"),
                "{mode} {epoch}: {err}"
            );
            assert!(answered, "{mode}: the client is told (a reject)");
        }
        assert!(read(mode, floor).is_ok(), "{mode} at the floor");
        let mut cfg = ClientConfig::offering(&[mode]);
        cfg.aead_epoch_log2 = if mode == Mode::Aead { below } else { 23 };
        cfg.stream_epoch_log2 = if mode == Mode::Stream { below } else { 36 };
        let err = ClientHandshake::new(&cfg, entropy(3)).unwrap_err();
        assert!(
            err.to_string().contains("servers refuse a shorter one"),
            "{err}"
        );
    }
}

#[test]
fn malformed_crypto_offers_are_refused() {
    let (_, ek) = hybrid::keypair(&[3; 64]);
    let ks = key_share(&ek, keys::x25519_share(&[5; 32]), [9; 32]);
    let mut bad_ek = ek;
    bad_ek[..2].copy_from_slice(&[0xff, 0x0f]); // a coefficient >= q
    let server = || {
        ServerHandshake::new(
            &ServerConfig::accepting(Mode::ALL).with_key(test_server_key()),
            [1; SERVER_ENTROPY_LEN],
        )
    };
    let cases = [
        (
            vec![(Mode::Aead, vec![3, 23])],
            ks.clone(),
            HandshakeError::Malformed("a crypto offer names an unknown cipher suite"),
        ),
        (
            vec![(Mode::Aead, vec![1, 24])],
            ks.clone(),
            HandshakeError::Malformed("a crypto offer's key update interval is out of range"),
        ),
        (
            vec![(Mode::Stream, vec![1, 7])],
            ks.clone(),
            HandshakeError::Malformed("a crypto offer's key update interval is below the server's floor (aead: 2^1 records, stream: 2^16 bytes)"),
        ),
        (
            vec![(Mode::Stream, vec![1, 37])],
            ks.clone(),
            HandshakeError::Malformed("a crypto offer's key update interval is out of range"),
        ),
        (
            vec![(Mode::Aead, vec![1])],
            ks.clone(),
            HandshakeError::Malformed("key material has the wrong length for its mode"),
        ),
        (
            vec![(Mode::Aead, vec![1, 23])],
            ks[..ks.len() - 1].to_vec(),
            HandshakeError::Malformed("the hello's key share is short"),
        ),
        (
            vec![(Mode::Aead, vec![1, 23])],
            [&ks[..], &[0]].concat(),
            HandshakeError::Malformed("trailing bytes after the offers"),
        ),
        (
            vec![(Mode::Kato, vec![1; 8].into_iter().chain([2; 8]).collect())],
            ks.clone(),
            HandshakeError::Malformed("trailing bytes after the offers"),
        ),
        (
            vec![(Mode::Aead, vec![1, 23])],
            key_share(&bad_ek, keys::x25519_share(&[5; 32]), [9; 32]),
            HandshakeError::InvalidKemKey,
        ),
    ];
    for (offers, share, why) in cases {
        let err = server().read(&hello_with(&offers, &share)).unwrap_err();
        assert_eq!(err.error, why);
        assert!(err.reply.is_some(), "a nena peer gets a reason: {why}");
    }
    // Suites and intervals may differ between the two crypto offers, which share the key share.
    let ok = hello_with(
        &[(Mode::Aead, vec![2, 1]), (Mode::Stream, vec![1, 16])],
        &ks,
    );
    assert!(server().read(&ok).is_ok());
}

#[test]
fn forced_key_updates_in_both_directions_mid_stream() {
    for mode in [Mode::Aead, Mode::Stream] {
        let cfg = ClientConfig {
            aead_epoch_log2: 2,    // a new key every 4 records
            stream_epoch_log2: 16, // a new key every 64 KiB (the floor)
            ..ClientConfig::offering(&[mode])
        };
        let (cs, ss, _, confirm) = exchange(&cfg, &[mode], 13);
        let (mut ctx, mut crx) = cs.split();
        let (mut stx, mut srx) = ss.split();
        let msg: Vec<u8> = (0..1_000_000u32).map(|i| (i % 253) as u8).collect();
        let mut up = confirm;
        up.extend(seal_all(&mut ctx, &msg, 1000));
        let down = seal_all(&mut stx, &msg, 700);
        // Received in other pieces than they were sent.
        let got_up = open_all(&mut srx, up.chunks(4099));
        let got_down = open_all(&mut crx, down.chunks(777));
        assert_eq!(got_up.data, msg, "{mode}");
        assert_eq!(got_down.data, msg, "{mode}");
        let (tx_e, rx_e) = (ctx.key_epochs().unwrap(), srx.key_epochs().unwrap());
        assert_eq!(tx_e, rx_e);
        let expect = match mode {
            Mode::Aead => 1000 / 4 + 1, // 1000 records of 1000 bytes
            _ => 1_000_000 / 65536 + 1, // epochs of 64 KiB
        };
        assert_eq!(tx_e, expect, "{mode}");
        assert_eq!(stx.key_epochs(), crx.key_epochs());
        assert!(stx.key_epochs().unwrap() > 10);
        // A receiver that does not update its keys cannot read past the first epoch: the
        // update is real (the interval is part of the hello, hence of the transcript).
        let (cs2, ss2, _, confirm2) = exchange(&ClientConfig::offering(&[mode]), &[mode], 13);
        let mut up2 = confirm2;
        up2.extend(seal_all(&mut cs2.split().0, &msg, 1000));
        let (_, mut rx2) = ss2.split();
        assert_eq!(open_whole(&mut rx2, &up2).data, msg);
    }
}

// ---- nena's transcript-to-keys vectors (docs/PROTOCOL.md, "Test vectors") ----

use nena_testkit::hex;

/// The vector's inputs: client entropy bytes (i * 3 + 1) mod 256 (i = 0..144), server
/// entropy bytes 0xc0 + i (i = 0..64), the server key of seed 0x5e x 32
/// ([`test_server_key`]), offer [aead] with suite AES-128, the default interval.
fn vector_exchange() -> (Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>) {
    let ce: [u8; ENTROPY_LEN] = std::array::from_fn(|i| (i * 3 + 1) as u8);
    let se: [u8; SERVER_ENTROPY_LEN] = std::array::from_fn(|i| 0xc0 + i as u8);
    let cfg = ClientConfig {
        suite: Suite::Aes128,
        ..ClientConfig::offering(&[Mode::Aead])
    };
    let mut c = ClientHandshake::new(&cfg, ce).unwrap();
    let hello = c.first_flight().to_vec();
    let Ok(Progress::Done {
        value: (reply, _), ..
    }) = ServerHandshake::new(
        &ServerConfig::accepting(&[Mode::Aead]).with_key(test_server_key()),
        se,
    )
    .read(&hello)
    else {
        panic!()
    };
    let Ok(Progress::Done {
        value: (confirm, cs),
        ..
    }) = c.read(&reply)
    else {
        panic!()
    };
    let (mut tx, _) = cs.split();
    let record = seal_all(&mut tx, b"nena", 100);
    (hello, reply, confirm, record)
}

/// The published values, derived step by step with the `keys` module, and the session's
/// own output checked against them.
#[test]
fn transcript_to_keys_vectors_match_protocol_md() {
    let (hello, reply, confirm, record) = vector_exchange();
    let ce: [u8; ENTROPY_LEN] = std::array::from_fn(|i| (i * 3 + 1) as u8);
    let se: [u8; SERVER_ENTROPY_LEN] = std::array::from_fn(|i| 0xc0 + i as u8);
    let c_secret: [u8; 32] = ce[16..48].try_into().unwrap();
    let r_c: [u8; 32] = ce[48..80].try_into().unwrap();
    let seed: [u8; 64] = ce[80..144].try_into().unwrap();
    let (dk, ek) = hybrid::keypair(&seed);
    assert_eq!(&hello[HELLO_X25519 - MLKEM_EK_LEN..HELLO_X25519], &ek[..]);
    let s_share = keys::x25519_share(&se[..32].try_into().unwrap());
    let body = &reply[wire::HEADER_LEN..];
    assert_eq!(&body[ACCEPT_X25519..ACCEPT_X25519 + 32], &s_share);
    let (ct, kem) = hybrid::encapsulate(&ek, &se[32..].try_into().unwrap()).unwrap();
    assert_eq!(&body[3..ACCEPT_X25519], &ct[..]);
    assert_eq!(dk.decapsulate(&ct)[..], kem[..]);
    assert_eq!(
        &body[ACCEPT_KEY..ACCEPT_KEY + 32],
        &test_server_key().public()
    );
    let dh = keys::x25519_agree(&c_secret, &s_share).unwrap();
    let secrets = Secrets {
        kem: &kem,
        dh: &dh,
        r_c: &r_c,
    };
    let sched = Schedule::new(&secrets, &hello, &reply[..reply.len() - 32]);
    let sig_at = reply.len() - 32 - 64;
    let signed_hash = keys::sha256(&[&hello, &reply[..sig_at]]);
    assert!(identity::verify(
        &test_server_key().public(),
        &signed_hash,
        &reply[sig_at..sig_at + 64]
    ));
    let (c2s, s2c) = sched.traffic();
    let (key, iv) = c2s.key_iv(16);
    assert_eq!(&reply[reply.len() - 32..], &sched.server_tag());
    assert_eq!(
        &confirm[wire::HEADER_LEN..],
        &sched.client_tag(&hello, &reply)
    );

    let values = [
        // The hello and the accept (about 1,300 bytes each) by their SHA-256.
        ("SHA-256 of the hello", hex(&keys::sha256(&[&hello]))),
        ("SHA-256 of the accept", hex(&keys::sha256(&[&reply]))),
        ("hello length", format!("hello: {} bytes", hello.len())),
        ("accept length", format!("accept: {} bytes", reply.len())),
        ("confirm", hex(&confirm)),
        ("server public key", hex(&test_server_key().public())),
        ("ML-KEM-768 shared secret", hex(&kem[..])),
        ("X25519 shared secret", hex(&dh[..])),
        ("signed transcript hash", hex(&signed_hash)),
        ("transcript hash", hex(sched.transcript_hash())),
        ("c2s traffic secret 0", hex(c2s.expose())),
        ("s2c traffic secret 0", hex(s2c.expose())),
        ("c2s key 0", hex(&key)),
        ("c2s iv 0", hex(&iv)),
        ("c2s traffic secret 1", hex(c2s.next().expose())),
        ("c2s app mac key", hex(&keys::app_mac_key(&c2s)[..])),
        ("trailer of a PUT of \"nena\" as \"f\"", {
            let mut m = nena_proto::appmac::AppMac::file(Some(&keys::app_mac_key(&c2s)), 1, "f", 4);
            m.update(b"nena");
            hex(&m.finish())
        }),
        ("first c2s record of \"nena\"", hex(&record)),
    ];
    let doc = include_str!("../../../docs/PROTOCOL.md");
    // The document prints long values in lines of 64 hex digits.
    let doc_hex: String = doc.split_whitespace().collect::<Vec<_>>().join("");
    let mut missing = Vec::new();
    for (name, v) in &values {
        if !doc_hex.contains(v.as_str()) && !doc.contains(v.as_str()) {
            missing.push(format!("{name}: {v}"));
        }
    }
    assert!(
        missing.is_empty(),
        "docs/PROTOCOL.md lacks (or has other values for):\n{}",
        missing.join("\n")
    );
}

/// The limit of trust on first use, shown rather than hidden: an attacker who controls the
/// trusted path at the *first* contact answers the client itself (with its own key) and
/// opens its own session to the server; both sides complete their handshakes, and the
/// attacker reads and relays. After first contact the client expects the server's key, and
/// the same attacker is refused before the client sends a byte.
#[test]
fn a_man_in_the_middle_on_the_trusted_path_at_first_contact_only() {
    let attacker_key = ServerKey::from_seed(&[0xa7; 32]).unwrap();
    let fake = || {
        ServerHandshake::new(
            &ServerConfig::accepting(&[Mode::Aead]).with_key(attacker_key.clone()),
            [0x66; SERVER_ENTROPY_LEN],
        )
    };
    let mut client =
        ClientHandshake::new(&ClientConfig::offering(&[Mode::Aead]), entropy(20)).unwrap();
    // The attacker plays server to the client ...
    let Ok(Progress::Done {
        value: (reply, m_server_side),
        ..
    }) = fake().read(client.first_flight())
    else {
        panic!()
    };
    let Ok(Progress::Done {
        value: (confirm, c),
        ..
    }) = client.read(&reply)
    else {
        panic!("the client accepts the attacker's answer")
    };
    assert_eq!(client.server_key(), Some(attacker_key.public()));
    // ... and client to the real server.
    let mut fake_client =
        ClientHandshake::new(&ClientConfig::offering(&[Mode::Aead]), entropy(21)).unwrap();
    let Ok(Progress::Done {
        value: (reply2, s), ..
    }) = ServerHandshake::new(
        &ServerConfig::accepting(&[Mode::Aead]).with_key(test_server_key()),
        [0x67; SERVER_ENTROPY_LEN],
    )
    .read(fake_client.first_flight())
    else {
        panic!()
    };
    let Ok(Progress::Done {
        value: (confirm2, m_client_side),
        ..
    }) = fake_client.read(&reply2)
    else {
        panic!()
    };
    // The client's secret reaches the attacker in clear, and the server gets it intact.
    let mut up = confirm;
    up.extend(seal_all(&mut c.split().0, b"the client's secret", 100));
    let stolen = open_whole(&mut m_server_side.split().1, &up);
    assert_eq!(stolen.data, b"the client's secret");
    let mut relayed = confirm2;
    relayed.extend(seal_all(&mut m_client_side.split().0, &stolen.data, 100));
    assert_eq!(
        open_whole(&mut s.split().1, &relayed).data,
        b"the client's secret"
    );

    // After first contact: the client expects the real server's key.
    let pinned = ClientConfig {
        server_key: Some(test_server_key().public()),
        ..ClientConfig::offering(&[Mode::Aead])
    };
    let mut client = ClientHandshake::new(&pinned, entropy(22)).unwrap();
    let Ok(Progress::Done {
        value: (reply, _), ..
    }) = fake().read(client.first_flight())
    else {
        panic!()
    };
    let e = client.read(&reply).unwrap_err();
    assert_eq!(
        e,
        HandshakeError::ServerKeyMismatch {
            expected: test_server_key().public(),
            got: attacker_key.public()
        }
    );
    assert!(
        e.to_string()
            .contains(&KeyText(&attacker_key.public()).to_string()),
        "{e}"
    );
    assert_eq!(
        client.server_key(),
        None,
        "nothing pinned from a refused answer"
    );
}

/// An attacker who knows every secret of the handshake (it runs the server side with the
/// client on the trusted path) but not the server's private key: it names the pinned key in
/// its answer and makes the key confirmation match, and the signature still fails.
#[test]
fn naming_the_pinned_key_without_holding_it_is_refused() {
    let attacker_key = ServerKey::from_seed(&[0xa7; 32]).unwrap();
    let se = [0x66; SERVER_ENTROPY_LEN];
    let pinned = ClientConfig {
        server_key: Some(test_server_key().public()),
        ..ClientConfig::offering(&[Mode::Aead])
    };
    let mut client = ClientHandshake::new(&pinned, entropy(23)).unwrap();
    let hello = client.first_flight().to_vec();
    let Ok(Progress::Done {
        value: (reply, _), ..
    }) = ServerHandshake::new(
        &ServerConfig::accepting(&[Mode::Aead]).with_key(attacker_key),
        se,
    )
    .read(&hello)
    else {
        panic!()
    };
    let mut forged = reply.clone();
    let key_at = wire::HEADER_LEN + ACCEPT_KEY;
    forged[key_at..key_at + 32].copy_from_slice(&test_server_key().public());
    // It recomputes the confirmation: it knows r_c (from the hello), the X25519 secret and
    // the ML-KEM secret (it encapsulated).
    let r_c: [u8; 32] = hello[HELLO_X25519 + 32..HELLO_X25519 + 64]
        .try_into()
        .unwrap();
    let client_share: [u8; 32] = hello[HELLO_X25519..HELLO_X25519 + 32].try_into().unwrap();
    let dh = keys::x25519_agree(&se[..32].try_into().unwrap(), &client_share).unwrap();
    let ek = &hello[HELLO_X25519 - MLKEM_EK_LEN..HELLO_X25519];
    let (_, kem) = hybrid::encapsulate(ek, &se[32..].try_into().unwrap()).unwrap();
    let secrets = Secrets {
        kem: &kem,
        dh: &dh,
        r_c: &r_c,
    };
    let tag_at = forged.len() - 32;
    let tag = Schedule::new(&secrets, &hello, &forged[..tag_at]).server_tag();
    forged[tag_at..].copy_from_slice(&tag);
    assert_eq!(
        client.read(&forged).unwrap_err(),
        HandshakeError::BadSignature
    );
}
