//! Tests of `plane`.
use super::*;
use nena_proto::{exchange_in, Mode};

fn offer(version: u8, receiver: ReceiverId) -> PlaneOffer {
    PlaneOffer {
        version,
        receiver,
        redundancy: Redundancy::Auto,
        paths: vec![OfferedPath { id: 0, flags: 0 }],
        realtime_ports: vec![],
    }
}

/// The server answers a version 1 offer as version 1 did (no compact byte), a version 2
/// offer with compact datagrams when the session's suite and the client's receiver id
/// allow them, and declines a version it does not speak (a client of version 2 then
/// offers version 1). Its receiver ids fit 24 bits.
#[tokio::test]
async fn the_server_answers_both_versions() {
    let server = PlaneServer::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let keys = exchange_in(Mode::Aead).server.datagram_keys().unwrap();
    let compact_of = |o: &PlaneOffer| match answer(Some(&server), false, Some(&keys), o) {
        (
            PlaneAnswer::Accepted {
                receiver, compact, ..
            },
            Some(r),
        ) => {
            assert_eq!(receiver, r.id);
            assert!(receiver <= nena_proto::dgram::compact::MAX_RECEIVER);
            compact
        }
        other => panic!("{other:?}", other = other.0),
    };
    assert_eq!(compact_of(&offer(1, 0x0102_0304)), None);
    assert_eq!(compact_of(&offer(2, 0x02_0304)), Some(true));
    assert_eq!(compact_of(&offer(2, 0x0102_0304)), Some(false));
    assert_eq!(
        answer(Some(&server), false, Some(&keys), &offer(3, 1)).0,
        PlaneAnswer::Declined(Declined::Version)
    );
    assert_eq!(
        answer(Some(&server), false, None, &offer(2, 1)).0,
        PlaneAnswer::Declined(Declined::Mode)
    );
}
