//! The messages of `nena run`'s DNS and datagram sessions (ops 6 and 7), sans-IO.
//!
//! ```text
//! DnsFrame   len u16 | DNS message (len bytes, 12..=65535)         (as DNS over TCP)
//! Datagram   atyp u8 (1 IPv4, 4 IPv6) | addr (4 | 16) | port u16
//!            | len u16 | payload (len bytes, 0..=MAX_DATAGRAM)
//! ```
//!
//! A DNS session carries queries from the client and answers from the server, one frame
//! each, in any number. A datagram session carries, toward the server, each datagram with
//! the destination the application sent it to; from the server, each reply with the source
//! it came from. Decoders either wait for more bytes (`Ok(None)`), refuse (`Err`), or take
//! one whole message from the start of their input; none allocates more than the message.
//! [`DnsFrame`] is also the framing of DNS over TCP wherever nena speaks it (to a resolver,
//! to an application): `crate::dns::frame` reads and writes it on streams.

use super::WireError;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The shortest DNS message: its 12-byte header.
pub const MIN_DNS: usize = 12;
/// The largest payload a UDP datagram can have (IPv6 without jumbograms: 65535 - 8).
pub const MAX_DATAGRAM: usize = 65527;

/// Address types of a [`Datagram`] (as in SOCKS5).
const ATYP_IPV4: u8 = 1;
const ATYP_IPV6: u8 = 4;

/// One DNS message of a DNS session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsFrame(pub Vec<u8>);

impl DnsFrame {
    /// `len u16 | msg`; `None` when `msg` cannot be framed (shorter than a header, or over
    /// 65535 bytes).
    pub fn encode(msg: &[u8]) -> Option<Vec<u8>> {
        if msg.len() < MIN_DNS || msg.len() > u16::MAX as usize {
            return None;
        }
        let mut out = Vec::with_capacity(2 + msg.len());
        out.extend_from_slice(&(msg.len() as u16).to_be_bytes());
        out.extend_from_slice(msg);
        Some(out)
    }

    /// The length a frame header announces, refused when shorter than a DNS header.
    pub fn length(header: [u8; 2]) -> Result<usize, WireError> {
        let len = u16::from_be_bytes(header) as usize;
        if len < MIN_DNS {
            return Err(WireError::DnsTooShort(len));
        }
        Ok(len)
    }

    pub fn decode(buf: &[u8]) -> Result<Option<(DnsFrame, usize)>, WireError> {
        let Some(h) = buf.get(..2) else {
            return Ok(None);
        };
        let len = DnsFrame::length([h[0], h[1]])?;
        match buf.get(2..2 + len) {
            Some(m) => Ok(Some((DnsFrame(m.to_vec()), 2 + len))),
            None => Ok(None),
        }
    }
}

/// One datagram of a datagram session, with its destination (toward the server) or its
/// source (from the server).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    pub addr: SocketAddr,
    pub payload: Vec<u8>,
}

impl Datagram {
    /// The header's length for an address type, refused for any other type.
    pub fn header_len(atyp: u8) -> Result<usize, WireError> {
        match atyp {
            ATYP_IPV4 => Ok(1 + 4 + 2 + 2),
            ATYP_IPV6 => Ok(1 + 16 + 2 + 2),
            other => Err(WireError::DatagramAddress(other)),
        }
    }

    /// The address and payload length of a whole header (`header_len(header[0])` bytes).
    pub fn parse_header(header: &[u8]) -> Result<(SocketAddr, usize), WireError> {
        let atyp = *header.first().ok_or(WireError::DatagramAddress(0))?;
        let n = Datagram::header_len(atyp)?;
        if header.len() != n {
            return Err(WireError::DatagramAddress(atyp));
        }
        let ip = if atyp == ATYP_IPV4 {
            let o: [u8; 4] = header[1..5].try_into().expect("4 bytes");
            IpAddr::V4(Ipv4Addr::from(o))
        } else {
            let o: [u8; 16] = header[1..17].try_into().expect("16 bytes");
            IpAddr::V6(Ipv6Addr::from(o))
        };
        let port = u16::from_be_bytes([header[n - 4], header[n - 3]]);
        let len = u16::from_be_bytes([header[n - 2], header[n - 1]]) as usize;
        if len > MAX_DATAGRAM {
            return Err(WireError::DatagramTooLong(len));
        }
        Ok((SocketAddr::new(ip, port), len))
    }

    /// `None` when the payload is longer than [`MAX_DATAGRAM`].
    pub fn encode(addr: SocketAddr, payload: &[u8]) -> Option<Vec<u8>> {
        if payload.len() > MAX_DATAGRAM {
            return None;
        }
        let mut out = Vec::with_capacity(21 + payload.len());
        push_address(&mut out, addr);
        out.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        out.extend_from_slice(payload);
        Some(out)
    }

    pub fn decode(buf: &[u8]) -> Result<Option<(Datagram, usize)>, WireError> {
        let Some(&atyp) = buf.first() else {
            return Ok(None);
        };
        let n = Datagram::header_len(atyp)?;
        let Some(header) = buf.get(..n) else {
            return Ok(None);
        };
        let (addr, len) = Datagram::parse_header(header)?;
        match buf.get(n..n + len) {
            Some(p) => Ok(Some((
                Datagram {
                    addr,
                    payload: p.to_vec(),
                },
                n + len,
            ))),
            None => Ok(None),
        }
    }
}

/// The bit of a [`Frame`]'s first byte that says a sequence number follows it.
pub const SEQUENCED: u8 = 0x80;

/// A datagram inside a plane session (op 8): op 7's [`Datagram`], or, with [`SEQUENCED`] set
/// in its address type, the same with the plane's sequence number after that byte, for a
/// copy the plane could not send as UDP on some path (the receiver drops whichever copy
/// comes second).
///
/// ```text
/// Frame   atyp u8 (1, 4; or 0x81, 0x84 with seq) [| seq u64] | addr | port u16 | len u16 | payload
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub seq: Option<u64>,
    pub datagram: Datagram,
}

impl Frame {
    /// The header's length for a first byte, refused for an unknown address type.
    pub fn header_len(first: u8) -> Result<usize, WireError> {
        if first & SEQUENCED != 0 {
            Datagram::header_len(first & !SEQUENCED)
                .map(|n| n + 8)
                .map_err(|_| WireError::DatagramAddress(first))
        } else {
            Datagram::header_len(first)
        }
    }

    /// The sequence number, address and payload length of a whole header.
    pub fn parse_header(header: &[u8]) -> Result<(Option<u64>, SocketAddr, usize), WireError> {
        let first = *header.first().ok_or(WireError::DatagramAddress(0))?;
        if first & SEQUENCED == 0 {
            let (addr, len) = Datagram::parse_header(header)?;
            return Ok((None, addr, len));
        }
        if header.len() != Frame::header_len(first)? {
            return Err(WireError::DatagramAddress(first));
        }
        let seq = u64::from_be_bytes(header[1..9].try_into().expect("8 bytes"));
        let mut rest = Vec::with_capacity(header.len() - 8);
        rest.push(first & !SEQUENCED);
        rest.extend_from_slice(&header[9..]);
        let (addr, len) = Datagram::parse_header(&rest)?;
        Ok((Some(seq), addr, len))
    }

    /// `None` when the payload is longer than [`MAX_DATAGRAM`].
    pub fn encode(seq: Option<u64>, addr: SocketAddr, payload: &[u8]) -> Option<Vec<u8>> {
        let mut out = Datagram::encode(addr, payload)?;
        if let Some(seq) = seq {
            out[0] |= SEQUENCED;
            out.splice(1..1, seq.to_be_bytes());
        }
        Some(out)
    }

    pub fn decode(buf: &[u8]) -> Result<Option<(Frame, usize)>, WireError> {
        let Some(&first) = buf.first() else {
            return Ok(None);
        };
        let n = Frame::header_len(first)?;
        let Some(header) = buf.get(..n) else {
            return Ok(None);
        };
        let (seq, addr, len) = Frame::parse_header(header)?;
        match buf.get(n..n + len) {
            Some(p) => Ok(Some((
                Frame {
                    seq,
                    datagram: Datagram {
                        addr,
                        payload: p.to_vec(),
                    },
                },
                n + len,
            ))),
            None => Ok(None),
        }
    }
}

/// `atyp u8 | addr (4 | 16) | port u16`, as a datagram frame and a plane datagram begin.
fn push_address(out: &mut Vec<u8>, addr: SocketAddr) {
    match addr.ip() {
        IpAddr::V4(a) => {
            out.push(ATYP_IPV4);
            out.extend_from_slice(&a.octets());
        }
        IpAddr::V6(a) => {
            out.push(ATYP_IPV6);
            out.extend_from_slice(&a.octets());
        }
    }
    out.extend_from_slice(&addr.port().to_be_bytes());
}

/// What a plane data datagram carries (sealed): `atyp u8 | addr (4 | 16) | port u16 |
/// payload` (the payload is the rest; no length: the seal gives it).
pub fn encode_bare(addr: SocketAddr, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(19 + payload.len());
    push_address(&mut out, addr);
    out.extend_from_slice(payload);
    out
}

/// [`encode_bare`]'s address and payload.
pub fn decode_bare(buf: &[u8]) -> Result<(SocketAddr, &[u8]), WireError> {
    let atyp = *buf.first().ok_or(WireError::DatagramAddress(0))?;
    let n = Datagram::header_len(atyp)? - 2;
    let Some(h) = buf.get(..n) else {
        return Err(WireError::DatagramAddress(atyp));
    };
    let ip = if atyp == ATYP_IPV4 {
        let o: [u8; 4] = h[1..5].try_into().expect("4 bytes");
        IpAddr::V4(Ipv4Addr::from(o))
    } else {
        let o: [u8; 16] = h[1..17].try_into().expect("16 bytes");
        IpAddr::V6(Ipv6Addr::from(o))
    };
    let port = u16::from_be_bytes([h[n - 2], h[n - 1]]);
    Ok((SocketAddr::new(ip, port), &buf[n..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A plane session's frames: op 7's unchanged, sequenced ones with their number after
    /// the first byte; every cut waits; bare datagrams round trip in both families.
    #[test]
    fn frames_and_bare_datagrams_roundtrip() {
        let a: SocketAddr = "198.18.3.2:7007".parse().unwrap();
        let plain = Frame::encode(None, a, b"x").unwrap();
        assert_eq!(plain, Datagram::encode(a, b"x").unwrap());
        let seq = Frame::encode(Some(0x0102_0304_0506_0708), a, b"call").unwrap();
        assert_eq!(
            seq[..9],
            [0x81, 1, 2, 3, 4, 5, 6, 7, 8],
            "first byte, then the sequence number"
        );
        assert_eq!(seq[9..], Datagram::encode(a, b"call").unwrap()[1..]);
        for cut in 0..seq.len() {
            assert_eq!(Frame::decode(&seq[..cut]), Ok(None), "cut {cut}");
        }
        let want = Frame {
            seq: Some(0x0102_0304_0506_0708),
            datagram: Datagram {
                addr: a,
                payload: b"call".to_vec(),
            },
        };
        assert_eq!(Frame::decode(&seq), Ok(Some((want, seq.len()))));
        assert_eq!(
            Frame::decode(&[0x82, 0]),
            Err(WireError::DatagramAddress(0x82))
        );
        // An op 7 session refuses a sequenced frame.
        assert_eq!(
            Datagram::decode(&seq),
            Err(WireError::DatagramAddress(0x81))
        );
        for addr in ["198.18.3.2:7", "[2001:2::3]:443"] {
            let addr: SocketAddr = addr.parse().unwrap();
            let b = encode_bare(addr, b"payload");
            assert_eq!(decode_bare(&b), Ok((addr, &b"payload"[..])));
            assert!(decode_bare(&b[..3]).is_err());
        }
        assert_eq!(decode_bare(&[9]), Err(WireError::DatagramAddress(9)));
    }

    #[test]
    fn dns_frames_roundtrip_and_refuse_what_is_no_message() {
        let msg: Vec<u8> = (0..40u8).collect();
        let enc = DnsFrame::encode(&msg).unwrap();
        assert_eq!(&enc[..2], &[0, 40]);
        for cut in 0..enc.len() {
            assert_eq!(DnsFrame::decode(&enc[..cut]), Ok(None), "cut {cut}");
        }
        let mut more = enc.clone();
        more.extend_from_slice(b"next");
        assert_eq!(
            DnsFrame::decode(&more),
            Ok(Some((DnsFrame(msg), enc.len())))
        );
        assert_eq!(DnsFrame::encode(&[0u8; 11]), None);
        assert_eq!(DnsFrame::encode(&vec![0u8; 65536]), None);
        assert!(DnsFrame::encode(&vec![0u8; 65535]).is_some());
        assert_eq!(
            DnsFrame::decode(&[0, 11, 1, 2]),
            Err(WireError::DnsTooShort(11))
        );
        assert_eq!(DnsFrame::length([0, 0]), Err(WireError::DnsTooShort(0)));
    }

    #[test]
    fn datagrams_roundtrip_in_both_families() {
        for (addr, payload) in [
            ("198.18.3.2:7", b"echo me".to_vec()),
            ("[2001:2::3]:443", vec![0u8; 1200]),
            ("198.18.3.2:9", Vec::new()),
        ] {
            let addr: SocketAddr = addr.parse().unwrap();
            let enc = Datagram::encode(addr, &payload).unwrap();
            for cut in 0..enc.len() {
                assert_eq!(Datagram::decode(&enc[..cut]), Ok(None), "cut {cut}");
            }
            let d = Datagram {
                addr,
                payload: payload.clone(),
            };
            assert_eq!(Datagram::decode(&enc), Ok(Some((d, enc.len()))));
            let n = Datagram::header_len(enc[0]).unwrap();
            assert_eq!(Datagram::parse_header(&enc[..n]), Ok((addr, payload.len())));
        }
        assert_eq!(
            Datagram::encode("198.18.3.2:7".parse().unwrap(), &vec![0; MAX_DATAGRAM + 1]),
            None
        );
        assert_eq!(
            Datagram::decode(&[3, 1]),
            Err(WireError::DatagramAddress(3))
        );
        // A length over the largest datagram is refused from the header alone.
        assert_eq!(
            Datagram::decode(&[1, 198, 18, 3, 2, 0, 7, 0xff, 0xff]),
            Err(WireError::DatagramTooLong(65535))
        );
    }

    proptest! {
        /// Any bytes decode into a message that encodes back to the bytes it took, or
        /// wait, or are refused: never a panic.
        #[test]
        fn any_bytes_decode_or_are_refused(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(Some((DnsFrame(m), used))) = DnsFrame::decode(&data) {
                prop_assert_eq!(DnsFrame::encode(&m).unwrap(), data[..used].to_vec());
            }
            if let Ok(Some((d, used))) = Datagram::decode(&data) {
                prop_assert_eq!(Datagram::encode(d.addr, &d.payload).unwrap(), data[..used].to_vec());
            }
            if let Ok(Some((f, used))) = Frame::decode(&data) {
                prop_assert_eq!(
                    Frame::encode(f.seq, f.datagram.addr, &f.datagram.payload).unwrap(),
                    data[..used].to_vec()
                );
            }
            if let Ok((addr, payload)) = decode_bare(&data) {
                prop_assert_eq!(encode_bare(addr, payload), data.clone());
            }
            super::super::fuzzing::app_messages(&data);
        }
    }
}
