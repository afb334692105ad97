//! The header of a UDP ASSOCIATE datagram (RFC 1928 section 7), sans-IO: parsed from what
//! arrives from the network ([`UdpPacket::parse`]) and put in front of a reply
//! ([`UdpPacket::encode`]).

use super::message::{Host, SocksError, Target};
use thiserror::Error;

/// Why a UDP ASSOCIATE datagram was dropped ([`UdpPacket::parse`]).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum UdpError {
    #[error("a datagram of {0} bytes is shorter than its SOCKS UDP header")]
    Short(usize),
    #[error("reserved bytes of the SOCKS UDP header are {0:#06x}, not 0")]
    Reserved(u16),
    #[error("SOCKS UDP fragment {0:#04x} (fragmentation is not supported)")]
    Fragment(u8),
    #[error("SOCKS UDP header: {0}")]
    Address(SocksError),
}

/// A datagram of a UDP association (RFC 1928 section 7):
/// `RSV u16 (0) | FRAG u8 | ATYP | DST.ADDR | DST.PORT | DATA`. From the application,
/// `target` is where to send `data`; toward it, where the reply came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpPacket<'a> {
    pub target: Target,
    pub data: &'a [u8],
}

impl<'a> UdpPacket<'a> {
    /// Parses a whole datagram from the network. Refused: a header cut short, reserved
    /// bytes that are not zero, a fragment (FRAG not 0: reassembly is not supported, as in
    /// most servers), an unknown address type, an empty or unprintable domain name. The
    /// data is the rest of the datagram, possibly empty.
    pub fn parse(buf: &'a [u8]) -> Result<UdpPacket<'a>, UdpError> {
        let Some(head) = buf.get(..3) else {
            return Err(UdpError::Short(buf.len()));
        };
        let rsv = u16::from_be_bytes([head[0], head[1]]);
        if rsv != 0 {
            return Err(UdpError::Reserved(rsv));
        }
        if head[2] != 0 {
            return Err(UdpError::Fragment(head[2]));
        }
        match Target::decode(&buf[3..]) {
            Ok(Some((target, used))) => Ok(UdpPacket {
                target,
                data: &buf[3 + used..],
            }),
            Ok(None) => Err(UdpError::Short(buf.len())),
            Err(e) => Err(UdpError::Address(e)),
        }
    }

    /// The datagram with its header (`FRAG` 0); `None` when the whole would not fit a UDP
    /// datagram (65,507 bytes over IPv4) or the domain name is longer than 255 bytes.
    pub fn encode(&self) -> Option<Vec<u8>> {
        if let Host::Domain(d) = &self.target.host {
            if d.is_empty() || d.len() > 255 {
                return None;
            }
        }
        let mut out = Vec::with_capacity(3 + 1 + 16 + 2 + self.data.len());
        out.extend_from_slice(&[0, 0, 0]);
        self.target.encode_into(&mut out);
        out.extend_from_slice(self.data);
        (out.len() <= MAX_UDP_PAYLOAD).then_some(out)
    }
}

/// The largest payload of a UDP datagram over IPv4 (65535 - 20 - 8); a reply whose header
/// would make it larger is dropped.
pub const MAX_UDP_PAYLOAD: usize = 65507;
