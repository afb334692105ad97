use super::*;
use crate::cipher::Suite;
use crate::dgram::DatagramKeys;
use crate::keys::TrafficSecret;

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The client's keys of the handshake vectors' session (docs/PROTOCOL.md, "Test vectors").
fn vector_keys() -> (DatagramKeys, DatagramKeys) {
    let c2s0: [u8; 32] = unhex("b408359e6bfe8c9bd0ef02253e982435cec323733926a144fc320ee216bf315c")
        .try_into()
        .unwrap();
    let c2s = TrafficSecret(Zeroizing::new(c2s0));
    let s2c = TrafficSecret(Zeroizing::new([0u8; 32]));
    (
        DatagramKeys::client(Suite::Aes128, &c2s, &s2c),
        DatagramKeys::server(Suite::Aes128, &c2s, &s2c),
    )
}

fn sealed(keys: &mut CompactKeys, h: Header, seq: u64, body: &[u8]) -> Vec<u8> {
    let header = h.encode();
    let mut out = header.to_vec();
    out.extend_from_slice(body);
    let tag = keys.seal(h.path, seq, &header, &mut out[HEADER_LEN..]);
    out.extend_from_slice(&tag);
    out
}

fn open(keys: &mut CompactKeys, d: &mut [u8], seq: u64) -> Result<Vec<u8>, Unauthentic> {
    let h = Header::parse(d).unwrap();
    let (aad, rest) = d.split_at_mut(HEADER_LEN);
    let n = keys.open(h.path, seq, aad, rest)?;
    Ok(rest[..n].to_vec())
}

/// The vector of docs/PROTOCOL.md ("Compact real-time datagrams"), computed independently
/// with Python's `hmac` and `cryptography` (AESGCM's tag cut to its first 8 bytes).
#[test]
fn compact_vector_matches_protocol_md() {
    let key = "031df733d86147c3cfb2908bb7ad4319";
    let iv = "e5954326d7db93bbf3ae957d";
    let datagram = "060203040005038ff80985652a17aac858a587";
    let doc = include_str!("../../../../docs/PROTOCOL.md");
    let doc_hex: String = doc.split_whitespace().collect();
    for v in [key, iv, datagram] {
        assert!(doc_hex.contains(v), "docs/PROTOCOL.md lacks {v}");
    }
    let (c, s) = vector_keys();
    let mut tx = CompactKeys::sending(&c).unwrap();
    assert_eq!(hex(&tx.epoch_key_bytes(0)[..]), key);
    assert_eq!(hex(&tx.iv()), iv);
    let h = Header {
        receiver: 0x02_0304,
        path: 1,
        seq16: 5,
        flow: 3,
    };
    let mut d = sealed(&mut tx, h, 5, b"nena");
    assert_eq!(hex(&d), datagram);
    assert_eq!(d.len(), OVERHEAD + 4);
    let mut rx = CompactKeys::receiving(&s).unwrap();
    assert_eq!(open(&mut rx, &mut d, 5).unwrap(), b"nena");
}

#[test]
fn chacha_sessions_have_no_compact_keys() {
    let (c2s, s2c) = (
        TrafficSecret(Zeroizing::new([1u8; 32])),
        TrafficSecret(Zeroizing::new([2u8; 32])),
    );
    let k = DatagramKeys::client(Suite::ChaCha20, &c2s, &s2c);
    assert!(CompactKeys::sending(&k).is_none() && CompactKeys::receiving(&k).is_none());
}

/// Any changed bit fails: in the header (associated data), the ciphertext or the tag, and
/// under another path or sequence number (another nonce) or epoch (another key). A datagram
/// that fails leaves zeros, and its epoch's key is not cached.
#[test]
fn every_bit_and_the_nonce_are_bound() {
    let (c, s) = vector_keys();
    let mut tx = CompactKeys::sending(&c).unwrap();
    let seq = (3 << EPOCH_LOG2) + 77;
    let h = Header {
        receiver: 9,
        path: 2,
        seq16: seq as u16,
        flow: 0,
    };
    let good = sealed(&mut tx, h, seq, b"a voice frame of some length");
    let mut rx = CompactKeys::receiving(&s).unwrap();
    for bit in 0..good.len() * 8 {
        let mut d = good.clone();
        d[bit / 8] ^= 1 << (bit % 8);
        if Header::parse(&d).is_err() {
            continue; // the type or flow byte changed into something unparsable
        }
        assert_eq!(open(&mut rx, &mut d, seq), Err(Unauthentic), "bit {bit}");
        assert!(d[HEADER_LEN..d.len() - TAG_LEN].iter().all(|&b| b == 0));
    }
    assert!(
        rx.cache.iter().all(Option::is_none),
        "a failure cached a key"
    );
    for wrong in [seq + 1, seq ^ (1 << EPOCH_LOG2), seq + (1 << 16)] {
        assert_eq!(open(&mut rx, &mut good.clone(), wrong), Err(Unauthentic));
    }
    // The same bytes as path 3's: the type byte is bound, and so is the nonce.
    let mut other_path = good.clone();
    other_path[0] = TYPE_BASE + 3;
    assert_eq!(open(&mut rx, &mut other_path, seq), Err(Unauthentic));
    assert_eq!(
        open(&mut rx, &mut good.clone(), seq).unwrap(),
        b"a voice frame of some length"
    );
    assert_eq!(rx.cache.iter().flatten().count(), 1);
}

/// The copies of one datagram on two paths differ in every ciphertext byte position that
/// a shared nonce would have made equal (their nonces differ by the path id).
#[test]
fn copies_on_two_paths_use_two_nonces() {
    let (c, _) = vector_keys();
    let mut tx = CompactKeys::sending(&c).unwrap();
    let body = [0u8; 64];
    let h0 = Header {
        receiver: 1,
        path: 0,
        seq16: 9,
        flow: 0,
    };
    let h1 = Header { path: 1, ..h0 };
    let a = sealed(&mut tx, h0, 9, &body);
    let b = sealed(&mut tx, h1, 9, &body);
    let same = a[HEADER_LEN..HEADER_LEN + 64]
        .iter()
        .zip(&b[HEADER_LEN..HEADER_LEN + 64])
        .filter(|(x, y)| x == y)
        .count();
    assert!(same < 8, "{same} equal keystream bytes: a nonce was shared");
}

#[test]
fn header_layout_and_checks() {
    let h = Header {
        receiver: 0x0a_0b0c,
        path: 7,
        seq16: 0xbeef,
        flow: 254,
    };
    let b = h.encode();
    assert_eq!(b, [0x0c, 0x0a, 0x0b, 0x0c, 0xbe, 0xef, 254]);
    let mut d = b.to_vec();
    d.extend_from_slice(&[0; TAG_LEN]);
    assert_eq!(Header::parse(&d), Ok(h));
    assert_eq!(Header::parse(&d[..OVERHEAD - 1]), Err(Malformed::TooShort));
    let mut none = d.clone();
    none[6] = 255;
    assert_eq!(Header::parse(&none), Err(Malformed::Inner));
    for t in [0x04, 0x0d, 0x0e] {
        let mut x = d.clone();
        x[0] = t;
        assert_eq!(Header::parse(&x), Err(Malformed::NotADatagram), "{t:#x}");
    }
    let long = vec![TYPE_BASE; OVERHEAD + MAX_BODY + 1];
    assert_eq!(Header::parse(&long), Err(Malformed::TooLong));
    assert_eq!(OVERHEAD, 15);
}
