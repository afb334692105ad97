//! Checks for the fuzz target `app_wire` (fuzz/fuzz_targets/app_wire.rs), also run on
//! stable by this module's property tests: what a peer sends inside a session is decoded
//! without a panic, every decoder either waits, errs, or takes a prefix of its input, what
//! it takes re-encodes to exactly those bytes, and no shorter prefix already decodes. `nena
//! run`'s DNS frames and datagrams (ops 6 and 7, [`super::dns_udp`]) too.

use super::*;

/// Feed `data` to every decoder of the application protocol.
pub fn app_messages(data: &[u8]) {
    if let Ok(Some((m, used))) = RequestMsg::decode(data) {
        assert_eq!(
            m.request.encode_with(m.token.as_ref())[..],
            data[..used],
            "a request re-encodes to the bytes it came from"
        );
        shortest(data, used, |b| RequestMsg::decode(b).map(|o| o.is_some()));
    }
    if let Ok(Some((r, used))) = ConnectRequest::decode(data) {
        assert_eq!(r.encode()[..], data[..used], "a connect request re-encodes");
        shortest(data, used, |b| {
            ConnectRequest::decode(b).map(|o| o.is_some())
        });
        // Under its own tag it decodes the same; under another key never.
        let key = [0x42u8; 32];
        let mut tagged = r.encode_tagged(Some(&key));
        assert_eq!(
            ConnectRequest::decode_tagged(&tagged, Some(&key)),
            Ok(Some((r.clone(), used + TRAILER_LEN)))
        );
        assert_eq!(
            ConnectRequest::decode_tagged(&tagged, Some(&[0x43u8; 32])),
            Err(WireError::BadConnectTag)
        );
        let last = tagged.len() - 1;
        tagged[last] ^= 1;
        assert_eq!(
            ConnectRequest::decode_tagged(&tagged, Some(&key)),
            Err(WireError::BadConnectTag)
        );
    }
    let _ = ConnectRequest::decode_tagged(data, None);
    if let Ok(Some((_, used))) = Reply::decode(data) {
        assert!(used <= data.len());
    }
    if let Ok(Some((_, used))) = ConnectReply::decode(data) {
        assert!(used <= data.len());
    }
    // `nena run`'s DNS and datagram sessions: a message re-encodes to the bytes it took.
    if let Ok(Some((dns_udp::DnsFrame(m), used))) = dns_udp::DnsFrame::decode(data) {
        assert_eq!(
            dns_udp::DnsFrame::encode(&m).as_deref(),
            Some(&data[..used]),
            "a DNS frame re-encodes"
        );
    }
    if let Ok(Some((d, used))) = dns_udp::Datagram::decode(data) {
        assert_eq!(
            dns_udp::Datagram::encode(d.addr, &d.payload).as_deref(),
            Some(&data[..used]),
            "a datagram re-encodes"
        );
    }
    // A perf stream: every step takes at least one byte and never more than given.
    let mut dec = ChunkDecoder::new();
    let mut rest = data;
    while !rest.is_empty() && !dec.is_done() {
        match dec.next(rest) {
            Ok((n, _)) => {
                assert!(n >= 1 && n <= rest.len());
                rest = &rest[n..];
            }
            Err(_) => break,
        }
    }
}

/// No prefix of `data[..used]` shorter than `used` is a whole message yet.
fn shortest(data: &[u8], used: usize, whole: impl Fn(&[u8]) -> Result<bool, WireError>) {
    for cut in 0..used {
        assert_ne!(
            whole(&data[..cut]),
            Ok(true),
            "decoded from {cut} of {used} bytes"
        );
    }
}
