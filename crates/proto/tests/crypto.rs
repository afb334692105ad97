//! The cryptographic modes' handshake under attack (no sockets): downgrades, altered,
//! replayed and reflected answers, low-order key shares, the client's key confirmation,
//! hello validation, forced key updates, and nena's own transcript-to-keys vectors
//! (published in docs/PROTOCOL.md).

mod common;

use common::{entropy, open_all, open_whole, seal_all};
use nena_proto::keys::{self, Schedule};
use nena_proto::wire::{self, MAGIC, VERSION};
use nena_proto::*;

fn exchange(cfg: &ClientConfig, accept: &[Mode], seed: u8) -> (Session, Session, Vec<u8>, Vec<u8>) {
    let x = nena_proto::exchange(cfg, accept, entropy(seed), [seed ^ 0xa5; 32]).unwrap();
    (x.client, x.server, x.reply, x.confirm)
}

/// The hello and the server's reply of one exchange, with the client kept to read answers.
fn hello_and_reply(offer: &[Mode], seed: u8) -> (ClientHandshake, Vec<u8>, Vec<u8>) {
    let c = ClientHandshake::new(&ClientConfig::offering(offer), entropy(seed)).unwrap();
    let hello = c.first_flight().to_vec();
    let Ok(Progress::Done {
        value: (reply, _), ..
    }) = ServerHandshake::new(&ServerConfig::default(), [seed; 32]).read(&hello)
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
    // accept: header, mode, P = 65, suite, share (32), tag (32)
    assert_eq!(reply.len(), wire::HEADER_LEN + 2 + 65);
    assert_eq!(reply[wire::HEADER_LEN..wire::HEADER_LEN + 2], [0x04, 65]);
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
    // Any single bit of the share or the tag.
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
    // The client's own share (first 32 bytes of its offer's key material) as the server's.
    let client_share = &hello[wire::HEADER_LEN + 3..wire::HEADER_LEN + 35];
    let mut body = reply[wire::HEADER_LEN..].to_vec();
    body[3..35].copy_from_slice(client_share);
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
        body[3..35].copy_from_slice(&point);
        assert_eq!(
            c.read(&accept_with_body(&body)).unwrap_err(),
            HandshakeError::ZeroSharedSecret
        );
        // From the client: the server refuses the hello as malformed.
        let c = ClientHandshake::new(&ClientConfig::offering(&[Mode::Aead]), entropy(9)).unwrap();
        let mut hello = c.first_flight().to_vec();
        hello[wire::HEADER_LEN + 3..wire::HEADER_LEN + 35].copy_from_slice(&point);
        let err = ServerHandshake::new(&ServerConfig::default(), [1; 32])
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
    let client_share: [u8; 32] = hello[wire::HEADER_LEN + 3..wire::HEADER_LEN + 35]
        .try_into()
        .unwrap();
    let a = [0x42u8; 32];
    let mut body = reply[wire::HEADER_LEN..].to_vec();
    body[3..35].copy_from_slice(&keys::x25519_share(&a));
    let mut forged = accept_with_body(&body);
    let dh = keys::x25519_agree(&a, &client_share).unwrap();
    let tag_at = forged.len() - keys::TAG_LEN;
    let guess_rc = [0u8; keys::RC_LEN];
    let tag = Schedule::new(&dh, &guess_rc, &hello, &forged[..tag_at]).server_tag();
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

fn crypto_offer(share: [u8; 32], rc: [u8; 32], suite: u8, epoch: u8) -> Vec<u8> {
    let mut v = share.to_vec();
    v.extend_from_slice(&rc);
    v.extend_from_slice(&[suite, epoch]);
    v
}

fn hello_with(offers: &[(Mode, Vec<u8>)]) -> Vec<u8> {
    let mut body = vec![offers.len() as u8];
    for (m, key) in offers {
        body.extend_from_slice(&[m.wire_id(), key.len() as u8]);
        body.extend_from_slice(key);
    }
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
    let share = keys::x25519_share(&[5; 32]);
    let rc = [9u8; 32];
    let read = |mode: Mode, epoch: u8| {
        let hello = hello_with(&[(mode, crypto_offer(share, rc, 1, epoch))]);
        ServerHandshake::new(&ServerConfig::accepting(&[mode]), [1; 32])
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
    let share = keys::x25519_share(&[5; 32]);
    let other = keys::x25519_share(&[6; 32]);
    let rc = [9u8; 32];
    let cases = [
        (
            vec![(Mode::Aead, crypto_offer(share, rc, 3, 23))],
            "a crypto offer names an unknown cipher suite",
        ),
        (
            vec![(Mode::Aead, crypto_offer(share, rc, 1, 24))],
            "a crypto offer's key update interval is out of range",
        ),
        (
            vec![(Mode::Stream, crypto_offer(share, rc, 1, 7))],
            "a crypto offer's key update interval is below the server's floor (aead: 2^1 records, stream: 2^16 bytes)",
        ),
        (
            vec![(Mode::Stream, crypto_offer(share, rc, 1, 37))],
            "a crypto offer's key update interval is out of range",
        ),
        (
            vec![
                (Mode::Aead, crypto_offer(share, rc, 1, 23)),
                (Mode::Stream, crypto_offer(other, rc, 1, 36)),
            ],
            "the crypto offers carry different key shares",
        ),
        (
            vec![
                (Mode::Aead, crypto_offer(share, rc, 1, 23)),
                (Mode::Stream, crypto_offer(share, [8; 32], 1, 36)),
            ],
            "the crypto offers carry different key shares",
        ),
        (
            vec![(Mode::Aead, crypto_offer(share, rc, 1, 23)[..65].to_vec())],
            "key material has the wrong length for its mode",
        ),
    ];
    for (offers, why) in cases {
        let err = ServerHandshake::new(&ServerConfig::accepting(Mode::ALL), [1; 32])
            .read(&hello_with(&offers))
            .unwrap_err();
        assert_eq!(err.error, HandshakeError::Malformed(why));
    }
    // Suites and intervals may differ between the two crypto offers; shares may not.
    let ok = hello_with(&[
        (Mode::Aead, crypto_offer(share, rc, 2, 1)),
        (Mode::Stream, crypto_offer(share, rc, 1, 16)),
    ]);
    assert!(
        ServerHandshake::new(&ServerConfig::accepting(Mode::ALL), [1; 32])
            .read(&ok)
            .is_ok()
    );
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

/// The vector's inputs: client entropy bytes i * 3 + 1 (i = 0..80), server entropy
/// bytes 0xc0 + i (i = 0..32), offer [aead] with suite AES-128, the default interval.
fn vector_exchange() -> (Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>) {
    let ce: [u8; ENTROPY_LEN] = std::array::from_fn(|i| (i * 3 + 1) as u8);
    let se: [u8; 32] = std::array::from_fn(|i| 0xc0 + i as u8);
    let cfg = ClientConfig {
        suite: Suite::Aes128,
        ..ClientConfig::offering(&[Mode::Aead])
    };
    let mut c = ClientHandshake::new(&cfg, ce).unwrap();
    let hello = c.first_flight().to_vec();
    let Ok(Progress::Done {
        value: (reply, _), ..
    }) = ServerHandshake::new(&ServerConfig::accepting(&[Mode::Aead]), se).read(&hello)
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
    let se: [u8; 32] = std::array::from_fn(|i| 0xc0 + i as u8);
    let c_secret: [u8; 32] = ce[16..48].try_into().unwrap();
    let r_c: [u8; 32] = ce[48..80].try_into().unwrap();
    let s_share = keys::x25519_share(&se);
    assert_eq!(
        &reply[wire::HEADER_LEN + 3..wire::HEADER_LEN + 35],
        &s_share
    );
    let dh = keys::x25519_agree(&c_secret, &s_share).unwrap();
    let sched = Schedule::new(&dh, &r_c, &hello, &reply[..reply.len() - 32]);
    let (c2s, s2c) = sched.traffic();
    let (key, iv) = c2s.key_iv(16);
    assert_eq!(&reply[reply.len() - 32..], &sched.server_tag());
    assert_eq!(
        &confirm[wire::HEADER_LEN..],
        &sched.client_tag(&hello, &reply)
    );

    let values = [
        ("hello", hex(&hello)),
        ("accept", hex(&reply)),
        ("confirm", hex(&confirm)),
        ("X25519 shared secret", hex(&dh[..])),
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
        if !doc_hex.contains(v.as_str()) {
            missing.push(format!("{name}: {v}"));
        }
    }
    assert!(
        missing.is_empty(),
        "docs/PROTOCOL.md lacks (or has other values for):\n{}",
        missing.join("\n")
    );
}

/// The limit of a protocol without certificates, shown rather than hidden: an attacker who
/// controls the trusted path answers the client itself and opens its own session to the
/// server; both sides complete their handshakes, and the attacker reads and relays.
#[test]
fn a_man_in_the_middle_on_the_trusted_path_is_not_detected() {
    let mut client =
        ClientHandshake::new(&ClientConfig::offering(&[Mode::Aead]), entropy(20)).unwrap();
    // The attacker plays server to the client ...
    let mut fake_server = ServerHandshake::new(&ServerConfig::accepting(&[Mode::Aead]), [0x66; 32]);
    let Ok(Progress::Done {
        value: (reply, m_server_side),
        ..
    }) = fake_server.read(client.first_flight())
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
    // ... and client to the real server.
    let mut fake_client =
        ClientHandshake::new(&ClientConfig::offering(&[Mode::Aead]), entropy(21)).unwrap();
    let Ok(Progress::Done {
        value: (reply2, s), ..
    }) = ServerHandshake::new(&ServerConfig::accepting(&[Mode::Aead]), [0x67; 32])
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
}
