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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
            super::super::fuzzing::app_messages(&data);
        }
    }
}
