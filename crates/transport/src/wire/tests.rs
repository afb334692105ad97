//! The application protocol's messages: round trips, refusals, the connect request's tag,
//! and any bytes decoded or refused without a panic.

use super::*;
use proptest::prelude::*;

/// The connect request's tag (issue 19, item 5): the request travels after the
/// handshake, protected by the mode, on any path (the untrusted subflow joins once the
/// first flight is acknowledged), so in stream or kato an attacker there can XOR a new
/// destination into it. The tag is checked before the request is returned: a rewritten
/// destination (the attacker XORs the difference into the known plaintext) is refused,
/// and so is a request under another session's key or one without its tag.
#[test]
fn a_rewritten_connect_request_is_refused() {
    use crate::wire::target::{Host, Target};
    let key = [0x5au8; 32];
    let req = ConnectRequest::to(Target {
        host: Host::Ip("198.18.3.2".parse().unwrap()),
        port: 80,
    });
    let enc = req.encode_tagged(Some(&key));
    for cut in 0..enc.len() {
        assert_eq!(
            ConnectRequest::decode_tagged(&enc[..cut], Some(&key)),
            Ok(None)
        );
    }
    assert_eq!(
        ConnectRequest::decode_tagged(&enc, Some(&key)),
        Ok(Some((req.clone(), enc.len())))
    );
    // 198.18.3.2:80 -> 198.18.9.9:80, the address at its fixed offset (magic, op, atyp).
    let mut forged = enc.clone();
    for (i, (a, b)) in [198u8, 18, 3, 2].iter().zip([198u8, 18, 9, 9]).enumerate() {
        forged[6 + i] ^= a ^ b;
    }
    assert_eq!(
        ConnectRequest::decode(&forged)
            .unwrap()
            .unwrap()
            .0
            .target
            .unwrap()
            .to_string(),
        "198.18.9.9:80"
    );
    assert_eq!(
        ConnectRequest::decode_tagged(&forged, Some(&key)),
        Err(WireError::BadConnectTag)
    );
    // Another key (another session or direction), or no key at all.
    assert_eq!(
        ConnectRequest::decode_tagged(&enc, Some(&[0x5bu8; 32])),
        Err(WireError::BadConnectTag)
    );
    assert_eq!(
        ConnectRequest::decode_tagged(&enc, None),
        Err(WireError::BadConnectTag)
    );
    // plain (no key): a SHA-256 that catches accidents only.
    let plain = req.encode_tagged(None);
    assert!(ConnectRequest::decode_tagged(&plain, None)
        .unwrap()
        .is_some());
}

/// The open request of a `--forward` session (op 5) and the access token of either kind:
/// each decodes back from every split, the token sits inside the tagged bytes (a
/// rewritten token byte, or a token added or removed on the way, breaks the tag), and
/// neither kind is taken for the other or for a file request.
#[test]
fn forward_requests_and_tokens_roundtrip_under_the_tag() {
    use crate::wire::target::{Host, Target};
    let key = [0x33u8; 32];
    let token = AccessToken::new(b"0123456789abcdef-token".to_vec()).unwrap();
    let target = Target {
        host: Host::Domain("srv.lab".into()),
        port: 8000,
    };
    for req in [
        ConnectRequest {
            target: None,
            token: None,
            service: Service::Stream,
            plane: None,
            reuse: false,
        },
        ConnectRequest {
            target: None,
            token: Some(token.clone()),
            service: Service::Stream,
            plane: None,
            reuse: false,
        },
        ConnectRequest {
            target: Some(target.clone()),
            token: Some(token.clone()),
            service: Service::Stream,
            plane: None,
            reuse: false,
        },
        ConnectRequest::of(Service::Dns),
        ConnectRequest {
            target: None,
            token: Some(token.clone()),
            service: Service::Datagram,
            plane: None,
            reuse: false,
        },
    ] {
        let enc = req.encode_tagged(Some(&key));
        for cut in 0..enc.len() {
            assert_eq!(
                ConnectRequest::decode_tagged(&enc[..cut], Some(&key)),
                Ok(None),
                "{req:?} cut {cut}"
            );
        }
        let mut more = enc.clone();
        more.extend_from_slice(b"application bytes");
        assert_eq!(
            ConnectRequest::decode_tagged(&more, Some(&key)),
            Ok(Some((req.clone(), enc.len())))
        );
        assert!(matches!(RequestMsg::decode(&enc), Err(WireError::BadOp(_))));
        if let Some(t) = &req.token {
            // A token byte rewritten on the way (stream or kato: XOR into the known
            // offsets) is refused, not compared.
            let mut forged = enc.clone();
            forged[6] ^= 0x01;
            assert_eq!(
                ConnectRequest::decode_tagged(&forged, Some(&key)),
                Err(WireError::BadConnectTag)
            );
            assert!(t.admits(req.token.as_ref()));
        }
    }
    // The op decides the kind: 4 with a target, 5 without one, with bit 7 for the token.
    let fwd = ConnectRequest {
        target: None,
        token: Some(token.clone()),
        service: Service::Stream,
        plane: None,
        reuse: false,
    }
    .encode();
    assert_eq!(fwd[4], OP_FORWARD | OP_TOKEN);
    assert_eq!(
        ConnectRequest::decode(b"nAP3\x05"),
        Ok(Some((
            ConnectRequest {
                target: None,
                token: None,
                service: Service::Stream,
                plane: None,
                reuse: false,
            },
            5
        )))
    );
    assert_eq!(
        ConnectRequest::decode(b"nAP3\x85\x00"),
        Err(WireError::EmptyToken)
    );
    // 6 and 7: DNS and datagrams, no destination in the request (a target given to
    // them is not encoded).
    for (op, service) in [(6u8, Service::Dns), (7, Service::Datagram)] {
        assert_eq!(
            ConnectRequest::decode(&[b'n', b'A', b'P', b'3', op]),
            Ok(Some((ConnectRequest::of(service), 5)))
        );
        let mut with_target = ConnectRequest::to(target.clone());
        with_target.service = service;
        assert_eq!(with_target.encode()[..], [b'n', b'A', b'P', b'3', op]);
    }
    // 8: datagrams with the offer of the datagram plane, which follows the op (and token).
    let mut offer = Vec::new();
    let plane = plane::PlaneOffer {
        version: plane::OFFER_VERSION,
        receiver: 7,
        redundancy: nena_proto::dgram::Redundancy::Auto,
        paths: vec![plane::OfferedPath {
            id: 0,
            flags: plane::PATH_TRUSTED,
        }],
        realtime_ports: vec![],
    };
    plane.encode_into(&mut offer);
    let req = ConnectRequest {
        plane: Some(plane),
        reuse: false,
        ..ConnectRequest::of(Service::Datagram)
    };
    let enc = req.encode();
    assert_eq!(enc[4], OP_DATAGRAM_PLANE);
    assert_eq!(enc[5..], offer[..]);
    assert_eq!(ConnectRequest::decode(&enc), Ok(Some((req, enc.len()))));
    assert_eq!(ConnectRequest::decode(b"nAP3\x08"), Ok(None));
    assert_eq!(
        ConnectRequest::decode(b"nAP3\x09"),
        Err(WireError::NotConnect(9))
    );
}

/// A version-1 peer ("nAP1": unkeyed trailers, untagged connect requests) and a version-2
/// one ("nAP2": an untagged verdict) are told so, in both kinds of request, never read as
/// version 3.
#[test]
fn older_versions_are_refused_clearly() {
    for (v, magic) in [(1, b"nAP1"), (2, b"nAP2")] {
        let mut put = magic.to_vec();
        put.extend_from_slice(b"\x01\x00\x01a");
        assert_eq!(RequestMsg::decode(&put), Err(WireError::OldVersion(v)));
        let mut connect = magic.to_vec();
        connect.extend_from_slice(b"\x04\x01");
        assert_eq!(
            ConnectRequest::decode(&connect),
            Err(WireError::OldVersion(v))
        );
        let text = WireError::OldVersion(v).to_string();
        assert!(
            text.contains(&format!("version {v} ")) && text.contains("upgrade the older side"),
            "{text}"
        );
    }
    assert_eq!(RequestMsg::decode(b"nAP"), Ok(None));
    assert_eq!(MAGIC[3], b'0' + VERSION);
}

#[test]
fn connect_roundtrip_and_errors() {
    use crate::wire::target::{Host, Rep, SocksError, Target};
    for target in [
        Target {
            host: Host::Ip("198.18.3.2".parse().unwrap()),
            port: 80,
        },
        Target {
            host: Host::Ip("2001:db8::1".parse().unwrap()),
            port: 443,
        },
        Target {
            host: Host::Domain("srv.lab".into()),
            port: 8000,
        },
    ] {
        let req = ConnectRequest::to(target);
        let enc = req.encode();
        for cut in 0..enc.len() {
            assert_eq!(ConnectRequest::decode(&enc[..cut]), Ok(None), "cut {cut}");
        }
        let mut tail = enc.clone();
        tail.extend_from_slice(b"rest");
        assert_eq!(ConnectRequest::decode(&tail), Ok(Some((req, enc.len()))));
        // A file server sees op 4 as an unknown op (and answers "refused").
        assert_eq!(RequestMsg::decode(&enc), Err(WireError::BadOp(4)));
    }
    assert_eq!(
        ConnectRequest::decode(b"nAP3\x02\x00\x01a"),
        Err(WireError::NotConnect(2))
    );
    assert_eq!(
        ConnectRequest::decode(b"nAP3\x04\x07"),
        Err(WireError::BadTarget(SocksError::AddressType(7)))
    );
    assert!(matches!(
        ConnectRequest::decode(b"GET "),
        Err(WireError::BadMagic(_))
    ));
    let r = ConnectReply {
        code: Rep::NotAllowed,
        msg: "198.18.9.9:80 is not in --allow".into(),
    };
    let enc = r.encode();
    for cut in 0..enc.len() {
        assert_eq!(ConnectReply::decode(&enc[..cut]), Ok(None));
    }
    assert_eq!(ConnectReply::decode(&enc), Ok(Some((r, enc.len()))));
    assert_eq!(
        ConnectReply::decode(&[9, 0]),
        Err(WireError::BadConnectCode(9))
    );
    // Over-long messages are cut to 255 bytes on a char boundary.
    let long = ConnectReply {
        code: Rep::GeneralFailure,
        msg: "é".repeat(200),
    };
    let (back, _) = ConnectReply::decode(&long.encode()).unwrap().unwrap();
    assert_eq!(back.msg.len(), 254);
}

fn all_requests() -> Vec<Request> {
    vec![
        Request::Put {
            name: "a.bin".into(),
            size: 0,
        },
        Request::Put {
            name: "x".repeat(MAX_NAME),
            size: u64::MAX,
        },
        Request::Get {
            name: "report.pdf".into(),
        },
        Request::Perf(PerfRequest {
            up: true,
            down: false,
            bytes: 1 << 30,
            millis: 0,
        }),
        Request::Perf(PerfRequest {
            up: true,
            down: true,
            bytes: 0,
            millis: 10_000,
        }),
    ]
}

fn token() -> AccessToken {
    AccessToken::new(b"0123456789abcdef-secret".to_vec()).unwrap()
}

#[test]
fn request_roundtrip_and_incremental() {
    for req in all_requests() {
        for token in [None, Some(token())] {
            let enc = req.encode_with(token.as_ref());
            let msg = RequestMsg {
                request: req.clone(),
                token: token.clone(),
            };
            for cut in 0..enc.len() {
                assert_eq!(
                    RequestMsg::decode(&enc[..cut]),
                    Ok(None),
                    "cut {cut} of {req:?}"
                );
            }
            let mut with_tail = enc.clone();
            with_tail.extend_from_slice(b"data after");
            assert_eq!(RequestMsg::decode(&with_tail), Ok(Some((msg, enc.len()))));
        }
    }
}

#[test]
fn a_request_without_token_is_encoded_as_before() {
    // The bytes of the original protocol: old clients and new servers agree.
    assert_eq!(
        Request::Get { name: "ab".into() }.encode(),
        b"nAP3\x02\x00\x02ab".to_vec()
    );
    let t = AccessToken::new(b"tok".to_vec()).unwrap();
    assert_eq!(
        Request::Get { name: "ab".into() }.encode_with(Some(&t))[..],
        b"nAP3\x82\x03tok\x00\x02ab"[..]
    );
}

#[test]
fn tokens_compare_whole() {
    let t = token();
    assert!(t.admits(Some(&token())));
    assert!(!t.admits(None));
    let mut other = t.0.clone();
    *other.last_mut().unwrap() ^= 1;
    assert!(!t.admits(Some(&AccessToken::new(other).unwrap())));
    // A prefix or an extension of the token is not the token.
    let prefix = AccessToken::new(t.0[..t.0.len() - 1].to_vec()).unwrap();
    assert!(!t.admits(Some(&prefix)));
    let mut longer = t.0.clone();
    longer.push(b'x');
    assert!(!t.admits(Some(&AccessToken::new(longer).unwrap())));
    assert_eq!(AccessToken::new(Vec::new()), Err(WireError::EmptyToken));
    assert_eq!(
        AccessToken::new(vec![1u8; 256]),
        Err(WireError::TokenTooLong(256))
    );
    // Never printed.
    assert!(!format!("{t:?}").contains("secret"));
}

#[test]
fn request_errors() {
    assert_eq!(
        RequestMsg::decode(b"GET / HTTP/1.1\r\n"),
        Err(WireError::BadMagic(*b"GET "))
    );
    assert_eq!(
        RequestMsg::decode(b"nX"),
        Err(WireError::BadMagic(*b"nX\0\0"))
    );
    assert_eq!(RequestMsg::decode(b"nAP3\x09"), Err(WireError::BadOp(9)));
    assert_eq!(
        RequestMsg::decode(b"nAP3\x89\x01"),
        Err(WireError::BadOp(0x89))
    );
    assert_eq!(
        RequestMsg::decode(b"nAP3\x81\x00"),
        Err(WireError::EmptyToken)
    );
    assert_eq!(
        RequestMsg::decode(b"nAP3\x01\x01\x00"),
        Err(WireError::NameTooLong(256))
    );
    assert_eq!(
        RequestMsg::decode(b"nAP3\x01\xff\xff"),
        Err(WireError::NameTooLong(0xffff))
    );
    assert_eq!(
        RequestMsg::decode(b"nAP3\x02\x00\x01\xff"),
        Err(WireError::NameNotUtf8)
    );
    assert!(WireError::NameNotUtf8.is_bad_name() && WireError::NameTooLong(300).is_bad_name());
    assert!(!WireError::BadOp(9).is_bad_name());
    assert_eq!(
        RequestMsg::decode(b"nAP3\x03\x04"),
        Err(WireError::BadFlags(4))
    );
}

#[test]
fn bad_magic_is_shown_in_hex() {
    let e = RequestMsg::decode(b"::::").unwrap_err();
    assert_eq!(
        e.to_string(),
        "peer does not speak the nena application protocol (its first bytes were \
         3a 3a 3a 3a \"::::\", expected 6e 41 50 33 \"nAP3\")"
    );
    let e = RequestMsg::decode(&[0x16, 0x03, 0x01, 0x00]).unwrap_err();
    assert!(
        e.to_string().contains("first bytes were 16 03 01 00,"),
        "{e}"
    );
}

#[test]
fn new_statuses_roundtrip() {
    for (st, text) in [
        (Status::AccessDenied, "access denied"),
        (Status::TooLarge, "file too large"),
        (Status::NoSpace, "not enough space"),
        (Status::ShuttingDown, "server shutting down"),
    ] {
        let r = Reply::err(st, "why");
        let enc = r.encode();
        assert_eq!(Reply::decode(&enc).unwrap().unwrap().0.status, st);
        assert_eq!(st.to_string(), text);
    }
}

/// A peer's message reaches the user with its control characters escaped (a server could
/// otherwise clear the screen or retitle the terminal of whoever reads the error).
#[test]
fn peer_messages_lose_their_terminal_escapes() {
    let evil = "\x1b[2J\x1b]0;owned\x07done";
    let enc = Reply::err(Status::Refused, evil).encode();
    let (r, _) = Reply::decode(&enc).unwrap().unwrap();
    assert_eq!(r.msg, "\\u{1b}[2J\\u{1b}]0;owned\\u{7}done");
    let enc = ConnectReply {
        code: crate::wire::target::Rep::NotAllowed,
        msg: evil.into(),
    }
    .encode();
    let (c, _) = ConnectReply::decode(&enc).unwrap().unwrap();
    assert!(
        !c.msg.contains('\x1b') && !c.msg.contains('\x07'),
        "{:?}",
        c.msg
    );
}

#[test]
fn reply_roundtrip_and_errors() {
    let r = Reply {
        status: Status::NotFound,
        size: 7,
        msg: "no such file: é".into(),
    };
    let enc = r.encode();
    for cut in 0..enc.len() {
        assert_eq!(Reply::decode(&enc[..cut]), Ok(None));
    }
    assert_eq!(Reply::decode(&enc), Ok(Some((r, enc.len()))));
    assert_eq!(Reply::decode(&[11]), Err(WireError::BadStatus(11)));
    let mut long = vec![0u8; 9];
    long.extend_from_slice(&2000u16.to_be_bytes());
    assert_eq!(Reply::decode(&long), Err(WireError::MsgTooLong(2000)));
    // Over-long messages are truncated on a char boundary when encoding.
    let big = Reply::err(Status::ServerError, "é".repeat(MAX_MSG));
    assert!(big.msg.len() <= MAX_MSG);
    let enc = big.encode();
    assert_eq!(Reply::decode(&enc).unwrap().unwrap().0, big);
}

fn chunk_stream(payloads: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut total = 0u64;
    for p in payloads {
        out.extend_from_slice(&chunk_header(p.len() as u32));
        out.extend_from_slice(p);
        total += p.len() as u64;
    }
    out.extend_from_slice(&chunk_end(total));
    out
}

fn decode_all(stream: &[u8], step: usize) -> Result<(Vec<u8>, u64, usize), WireError> {
    let mut dec = ChunkDecoder::new();
    let mut data = Vec::new();
    let mut pos = 0;
    while pos < stream.len() {
        let end = (pos + step).min(stream.len());
        let mut input = &stream[pos..end];
        while !input.is_empty() {
            let (n, ev) = dec.next(input)?;
            match ev {
                ChunkEvent::Data => data.extend_from_slice(&input[..n]),
                ChunkEvent::Header => {}
                ChunkEvent::End(t) => return Ok((data, t, pos + n)),
            }
            input = &input[n..];
            pos += n;
        }
    }
    panic!("no end marker");
}

proptest! {
    #[test]
    fn chunks_roundtrip(payloads in proptest::collection::vec(
            proptest::collection::vec(any::<u8>(), 1..300), 0..8),
            step in 1usize..64) {
        let mut stream = chunk_stream(&payloads);
        let len = stream.len();
        stream.extend_from_slice(b"reply bytes");
        let (data, total, used) = decode_all(&stream, step).unwrap();
        prop_assert_eq!(data, payloads.concat());
        prop_assert_eq!(total as usize, payloads.iter().map(Vec::len).sum::<usize>());
        prop_assert_eq!(used, len);
    }

    #[test]
    fn fuzz_body_on_random_input(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        fuzzing::app_messages(&data);
    }

    /// Near-valid input: the magic, an op of each kind (with and without the token
    /// bit), then anything.
    #[test]
    fn fuzz_body_on_near_valid_input(
        op in prop_oneof![1u8..=5, Just(0x81u8), Just(0x83u8), Just(0x84u8), Just(0x85u8), any::<u8>()],
        tail in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let mut data = MAGIC.to_vec();
        data.push(op);
        data.extend_from_slice(&tail);
        fuzzing::app_messages(&data);
    }

    #[test]
    fn request_decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = RequestMsg::decode(&bytes);
        let _ = Reply::decode(&bytes);
        let _ = ConnectRequest::decode(&bytes);
        let _ = ConnectReply::decode(&bytes);
    }
}

#[test]
fn chunk_too_long_is_refused() {
    let mut dec = ChunkDecoder::new();
    let hdr = chunk_header(MAX_CHUNK + 1);
    assert_eq!(dec.next(&hdr), Err(WireError::ChunkTooLong(MAX_CHUNK + 1)));
}

#[test]
fn pattern_check_detects_a_flipped_byte() {
    let p = pattern();
    assert_eq!(p.len(), PATTERN_LEN);
    let mut stream = p.to_vec();
    stream.extend_from_slice(&p[..1000]);
    let mut ok = PatternCheck::new(p);
    for piece in stream.chunks(777) {
        ok.feed(piece);
    }
    assert!(ok.ok());
    stream[PATTERN_LEN + 10] ^= 1;
    let mut bad = PatternCheck::new(p);
    bad.feed(&stream);
    assert!(!bad.ok());
}
