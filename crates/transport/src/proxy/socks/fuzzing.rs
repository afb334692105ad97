//! Entry points for fuzzing: the same bodies run under cargo-fuzz and in `cargo test`.

use super::allow::AllowRule;
use super::handshake::{Handshake, Users, MAX_STEP};
use super::message::{SocksError, Target};
use super::udp::{UdpError, UdpPacket, MAX_UDP_PAYLOAD};
use std::net::SocketAddr;

/// Drive a [`Handshake`] (with and without users) with arbitrary bytes cut at every
/// fourth position: never a panic, the buffer stays bounded, the answers are well formed,
/// and splitting the input does not change the outcome.
pub fn handshake(data: &[u8]) {
    let users = Users::parse("u:p").unwrap();
    for users in [None, Some(users)] {
        let whole = run(users.clone(), &[data]);
        let pieces: Vec<&[u8]> = data.chunks(4).collect();
        let split = run(users.clone(), &pieces);
        assert_eq!(whole, split, "splitting the input changed the outcome");
        if let Ok((sent, Some(t), _)) = &whole {
            // What was requested encodes back to a request that decodes the same.
            let mut enc = Vec::new();
            t.encode_into(&mut enc);
            assert_eq!(Target::decode(&enc), Ok(Some((t.clone(), enc.len()))));
            assert!(sent.len() >= 2);
        }
    }
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(r) = s.parse::<AllowRule>() {
            assert!(r.prefix <= if r.net.is_ipv4() { 32 } else { 128 });
            assert!(r.ports.0 <= r.ports.1);
            assert!(r.permits(SocketAddr::new(r.net, r.ports.0)));
        }
    }
}

/// Parse arbitrary bytes as a UDP ASSOCIATE datagram: never a panic; what parses
/// encodes back to exactly the bytes it came from, and every cut of its header is refused
/// as too short.
pub fn udp_packet(data: &[u8]) {
    let Ok(p) = UdpPacket::parse(data) else {
        return;
    };
    if data.len() <= MAX_UDP_PAYLOAD {
        assert_eq!(
            p.encode().as_deref(),
            Some(data),
            "parse and encode disagree"
        );
    }
    let header = data.len() - p.data.len();
    assert!(header >= 3 + 1 + 2, "a header of {header} bytes");
    for cut in 0..header {
        assert_eq!(
            UdpPacket::parse(&data[..cut]),
            Err(UdpError::Short(cut)),
            "cut at {cut}"
        );
    }
}

type Outcome = Result<(Vec<u8>, Option<Target>, Vec<u8>), SocksError>;

fn run(users: Option<Users>, pieces: &[&[u8]]) -> Outcome {
    let mut h = Handshake::new(users);
    let mut sent = Vec::new();
    let mut leftover = Vec::new();
    let mut request = None;
    for p in pieces {
        if h.is_done() {
            leftover.extend_from_slice(p);
            continue;
        }
        let got = h.feed(p)?;
        assert!(h.buf.len() <= MAX_STEP);
        sent.extend_from_slice(&got.send);
        leftover.extend_from_slice(&got.leftover);
        if got.request.is_some() {
            request = got.request;
        }
    }
    Ok((sent, request, leftover))
}
