//! The datagram plane's negotiation inside a datagram session (op 8), sans-IO.
//!
//! ```text
//! PlaneOffer   (in the connect request, after op 8 [| token], under its tag)
//!              version u8 (1 | 2) | receiver id u32 | redundancy u8 (0 auto, 1 always, 2 never)
//!              | n u8 (1..=8) | n x (path id u8 (< 8) | flags u8: bit 0 trusted, bit 1 metered)
//!              | m u8 (0..=16) | m x real-time port u16
//! PlaneAnswer  (after the ok connect reply to op 8)
//!              status u8: 0 accepted | receiver id u32 | UDP port u16
//!                           [| compact u8 (0 | 1): answering a version 2 offer only]
//!                         1..=255 declined (the reason, [`Declined`]): the session
//!                         carries its datagrams as op 7 does
//! ```
//!
//! A server older than op 8 reads it as no connect request and closes the session without a
//! reply; the client then opens an op 7 session (docs/PROTOCOL.md, "Datagram plane").

use nena_proto::dgram::{PathId, ReceiverId, Redundancy};

/// A datagram plane offer or answer that is none (in [`super::WireError::Plane`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlaneError {
    #[error("a datagram plane offer with {0}")]
    Offer(String),
    #[error("unknown datagram plane answer {0}")]
    Answer(u8),
}

/// The offer's version this build speaks: 2, compact real-time datagrams (a server also
/// answers version 1 offers, as version 1 did).
pub const OFFER_VERSION: u8 = 2;
/// Paths an offer names at most (the plane's own bound).
pub const MAX_OFFER_PATHS: usize = nena_proto::dgram::wire::MAX_PATHS;
/// Real-time ports an offer names at most (`--realtime-port`).
pub const MAX_REALTIME_PORTS: usize = 16;
/// Path flag: the path is trusted.
pub const PATH_TRUSTED: u8 = 1;
/// Path flag: the path is metered.
pub const PATH_METERED: u8 = 2;

/// One path of an offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OfferedPath {
    pub id: PathId,
    /// [`PATH_TRUSTED`], [`PATH_METERED`]; other bits are kept as sent and ignored.
    pub flags: u8,
}

/// The client's offer of the datagram plane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaneOffer {
    /// The version of the offer (a server answers an unknown one [`Declined::Version`]).
    pub version: u8,
    /// The receiver id the client's datagrams from the server are to carry.
    pub receiver: ReceiverId,
    /// How the server is to send the replies (`--udp-redundancy`).
    pub redundancy: Redundancy,
    pub paths: Vec<OfferedPath>,
    /// Destination ports whose flows are real-time (`--realtime-port`).
    pub realtime_ports: Vec<u16>,
}

fn redundancy_byte(r: Redundancy) -> u8 {
    match r {
        Redundancy::Auto => 0,
        Redundancy::Always => 1,
        Redundancy::Never => 2,
    }
}

impl PlaneOffer {
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.push(self.version);
        out.extend_from_slice(&self.receiver.to_be_bytes());
        out.push(redundancy_byte(self.redundancy));
        out.push(self.paths.len() as u8);
        for p in &self.paths {
            out.push(p.id);
            out.push(p.flags);
        }
        out.push(self.realtime_ports.len() as u8);
        for p in &self.realtime_ports {
            out.extend_from_slice(&p.to_be_bytes());
        }
    }

    /// `Ok(None)`: more bytes needed; else the offer and the bytes it took.
    pub fn decode(buf: &[u8]) -> Result<Option<(PlaneOffer, usize)>, PlaneError> {
        let Some(head) = buf.get(..7) else {
            return Ok(None);
        };
        let version = head[0];
        let receiver = u32::from_be_bytes([head[1], head[2], head[3], head[4]]);
        let redundancy = match head[5] {
            0 => Redundancy::Auto,
            1 => Redundancy::Always,
            2 => Redundancy::Never,
            other => return Err(PlaneError::Offer(format!("redundancy {other}"))),
        };
        let n = head[6] as usize;
        if n == 0 || n > MAX_OFFER_PATHS {
            return Err(PlaneError::Offer(format!("{n} paths")));
        }
        let mut at = 7;
        let Some(raw) = buf.get(at..at + 2 * n) else {
            return Ok(None);
        };
        let mut paths: Vec<OfferedPath> = Vec::with_capacity(n);
        for c in raw.chunks_exact(2) {
            if c[0] as usize >= MAX_OFFER_PATHS || paths.iter().any(|p| p.id == c[0]) {
                return Err(PlaneError::Offer(format!("path id {}", c[0])));
            }
            paths.push(OfferedPath {
                id: c[0],
                flags: c[1],
            });
        }
        at += 2 * n;
        let Some(&m) = buf.get(at) else {
            return Ok(None);
        };
        let m = m as usize;
        if m > MAX_REALTIME_PORTS {
            return Err(PlaneError::Offer(format!("{m} real-time ports")));
        }
        at += 1;
        let Some(raw) = buf.get(at..at + 2 * m) else {
            return Ok(None);
        };
        let realtime_ports = raw
            .chunks_exact(2)
            .map(|c| u16::from_be_bytes([c[0], c[1]]))
            .collect();
        at += 2 * m;
        Ok(Some((
            PlaneOffer {
                version,
                receiver,
                redundancy,
                paths,
                realtime_ports,
            },
            at,
        )))
    }
}

/// Why a server declined the plane (the session then carries datagrams as op 7 does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Declined {
    /// `nena proxy server --no-datagram-plane`.
    Off = 1,
    /// The server has no UDP socket (it could not bind one).
    NoSocket = 2,
    /// The session's mode has no datagram keys (plain, kato).
    Mode = 3,
    /// The server carries as many plane sessions as it keeps.
    Full = 4,
    /// An offer version the server does not speak.
    Version = 5,
}

impl Declined {
    fn from_u8(b: u8) -> Option<Declined> {
        Some(match b {
            1 => Declined::Off,
            2 => Declined::NoSocket,
            3 => Declined::Mode,
            4 => Declined::Full,
            5 => Declined::Version,
            _ => return None,
        })
    }

    pub fn reason(self) -> &'static str {
        match self {
            Declined::Off => "the proxy server's datagram plane is off (--no-datagram-plane)",
            Declined::NoSocket => "the proxy server has no UDP socket",
            Declined::Mode => "the session's mode has no datagram keys (plain, kato)",
            Declined::Full => "the proxy server carries as many plane sessions as it keeps",
            Declined::Version => "the proxy server does not speak this offer's version",
        }
    }
}

/// The server's answer to an offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlaneAnswer {
    /// The receiver id the server's datagrams from the client are to carry, and the UDP
    /// port they go to (at the session's server address).
    Accepted {
        receiver: ReceiverId,
        port: u16,
        /// Answering a version 2 offer: whether both ends send compact datagrams.
        compact: Option<bool>,
    },
    Declined(Declined),
}

impl PlaneAnswer {
    pub fn encode(&self) -> Vec<u8> {
        match self {
            PlaneAnswer::Accepted {
                receiver,
                port,
                compact,
            } => {
                let mut out = vec![0];
                out.extend_from_slice(&receiver.to_be_bytes());
                out.extend_from_slice(&port.to_be_bytes());
                if let Some(c) = compact {
                    out.push(u8::from(*c));
                }
                out
            }
            PlaneAnswer::Declined(d) => vec![*d as u8],
        }
    }

    /// The answer to an offer of version `offered`.
    pub fn decode(buf: &[u8], offered: u8) -> Result<Option<(PlaneAnswer, usize)>, PlaneError> {
        let Some(&status) = buf.first() else {
            return Ok(None);
        };
        if status != 0 {
            return match Declined::from_u8(status) {
                Some(d) => Ok(Some((PlaneAnswer::Declined(d), 1))),
                None => Err(PlaneError::Answer(status)),
            };
        }
        let len = if offered >= 2 { 8 } else { 7 };
        let Some(b) = buf.get(1..len) else {
            return Ok(None);
        };
        let compact = match b.get(6) {
            None => None,
            Some(0) => Some(false),
            Some(1) => Some(true),
            Some(&other) => return Err(PlaneError::Answer(other)),
        };
        Ok(Some((
            PlaneAnswer::Accepted {
                receiver: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
                port: u16::from_be_bytes([b[4], b[5]]),
                compact,
            },
            len,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    fn offer() -> PlaneOffer {
        PlaneOffer {
            version: OFFER_VERSION,
            receiver: 0x0002_0304,
            redundancy: Redundancy::Always,
            paths: vec![
                OfferedPath {
                    id: 0,
                    flags: PATH_TRUSTED,
                },
                OfferedPath {
                    id: 1,
                    flags: PATH_METERED,
                },
            ],
            realtime_ports: vec![5004, 3478],
        }
    }

    /// The bytes of PROTOCOL.md's example, every cut waits, and what is no offer is refused.
    #[test]
    fn offers_roundtrip_wait_and_refuse() {
        let mut enc = Vec::new();
        offer().encode_into(&mut enc);
        assert_eq!(hex(&enc), "020002030401020001010202138c0d96");
        for cut in 0..enc.len() {
            assert_eq!(PlaneOffer::decode(&enc[..cut]), Ok(None), "cut {cut}");
        }
        assert_eq!(PlaneOffer::decode(&enc), Ok(Some((offer(), enc.len()))));
        let mut bad = enc.clone();
        bad[5] = 3;
        assert!(PlaneOffer::decode(&bad).is_err(), "redundancy 3");
        let mut bad = enc.clone();
        bad[6] = 0;
        assert!(PlaneOffer::decode(&bad).is_err(), "no path");
        let mut bad = enc.clone();
        bad[9] = 0;
        assert!(PlaneOffer::decode(&bad).is_err(), "a path id twice");
        let mut bad = enc.clone();
        bad[7] = 8;
        assert!(PlaneOffer::decode(&bad).is_err(), "path id 8");
        let mut bad = enc.clone();
        bad[11] = 17;
        assert!(PlaneOffer::decode(&bad).is_err(), "17 ports");
    }

    #[test]
    fn answers_roundtrip_wait_and_refuse() {
        let a = PlaneAnswer::Accepted {
            receiver: 0x5e55_0001,
            port: 7441,
            compact: None,
        };
        let enc = a.encode();
        assert_eq!(hex(&enc), "005e5500011d11");
        for cut in 0..enc.len() {
            assert_eq!(PlaneAnswer::decode(&enc[..cut], 1), Ok(None));
        }
        assert_eq!(PlaneAnswer::decode(&enc, 1), Ok(Some((a, 7))));
        // Answering a version 2 offer: one byte more, compact or not.
        for (c, h) in [(true, "00005e00011d1101"), (false, "00005e00011d1100")] {
            let a = PlaneAnswer::Accepted {
                receiver: 0x5e_0001,
                port: 7441,
                compact: Some(c),
            };
            let enc = a.encode();
            assert_eq!(hex(&enc), h);
            assert_eq!(PlaneAnswer::decode(&enc[..7], 2), Ok(None));
            assert_eq!(PlaneAnswer::decode(&enc, 2), Ok(Some((a, 8))));
        }
        assert_eq!(
            PlaneAnswer::decode(&[0, 0, 0x5e, 0, 1, 0x1d, 0x11, 2], 2),
            Err(PlaneError::Answer(2))
        );
        for d in [
            Declined::Off,
            Declined::NoSocket,
            Declined::Mode,
            Declined::Full,
            Declined::Version,
        ] {
            let enc = PlaneAnswer::Declined(d).encode();
            for v in [1, 2] {
                assert_eq!(
                    PlaneAnswer::decode(&enc, v),
                    Ok(Some((PlaneAnswer::Declined(d), 1)))
                );
            }
        }
        assert_eq!(PlaneAnswer::decode(&[6], 2), Err(PlaneError::Answer(6)));
    }
}
