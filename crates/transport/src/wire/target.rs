//! Destinations and reply codes as a session carries them, in SOCKS5's encoding (RFC 1928),
//! which the wire reuses so that the proxy client passes a SOCKS request's bytes on as they
//! came: the protocol's constants, the reply codes ([`Rep`]), a requested destination
//! ([`Target`]) and its encoding, how an exchange fails ([`SocksError`]) and the reply the
//! proxy client sends ([`reply`]). The SOCKS5 proxy ([`crate::proxy::socks`]) re-exports
//! them as its `message`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use thiserror::Error;

/// SOCKS protocol version.
pub const VERSION: u8 = 5;
/// Method: no authentication required.
pub const METHOD_NONE: u8 = 0x00;
/// Method: username/password (RFC 1929).
pub const METHOD_USERPASS: u8 = 0x02;
/// Method reply: no acceptable methods.
pub const METHOD_NO_ACCEPTABLE: u8 = 0xff;
/// Command CONNECT.
pub const CMD_CONNECT: u8 = 0x01;
/// Command UDP ASSOCIATE (RFC 1928 section 7). BIND (0x02) is not served.
pub const CMD_UDP_ASSOCIATE: u8 = 0x03;
/// Address types.
pub const ATYP_IPV4: u8 = 0x01;
pub const ATYP_DOMAIN: u8 = 0x03;
pub const ATYP_IPV6: u8 = 0x04;
/// Version of the RFC 1929 subnegotiation.
pub const USERPASS_VERSION: u8 = 0x01;

/// Reply codes (RFC 1928 section 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Rep {
    Succeeded = 0x00,
    GeneralFailure = 0x01,
    NotAllowed = 0x02,
    NetworkUnreachable = 0x03,
    HostUnreachable = 0x04,
    ConnectionRefused = 0x05,
    TtlExpired = 0x06,
    CommandNotSupported = 0x07,
    AddressTypeNotSupported = 0x08,
}

impl Rep {
    pub fn from_u8(v: u8) -> Option<Rep> {
        Some(match v {
            0 => Rep::Succeeded,
            1 => Rep::GeneralFailure,
            2 => Rep::NotAllowed,
            3 => Rep::NetworkUnreachable,
            4 => Rep::HostUnreachable,
            5 => Rep::ConnectionRefused,
            6 => Rep::TtlExpired,
            7 => Rep::CommandNotSupported,
            8 => Rep::AddressTypeNotSupported,
            _ => return None,
        })
    }

    /// The reply code for a failed `connect` to the destination.
    pub fn of_connect_error(e: &std::io::Error) -> Rep {
        use std::io::ErrorKind::*;
        match e.kind() {
            ConnectionRefused => Rep::ConnectionRefused,
            NetworkUnreachable | AddrNotAvailable => Rep::NetworkUnreachable,
            HostUnreachable | TimedOut => Rep::HostUnreachable,
            _ => match e.raw_os_error() {
                Some(libc::ENETUNREACH) | Some(libc::EADDRNOTAVAIL) => Rep::NetworkUnreachable,
                Some(libc::EHOSTUNREACH) | Some(libc::ETIMEDOUT) => Rep::HostUnreachable,
                Some(libc::ECONNREFUSED) => Rep::ConnectionRefused,
                _ => Rep::GeneralFailure,
            },
        }
    }
}

impl std::fmt::Display for Rep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Rep::Succeeded => "succeeded",
            Rep::GeneralFailure => "general SOCKS server failure",
            Rep::NotAllowed => "connection not allowed by ruleset",
            Rep::NetworkUnreachable => "network unreachable",
            Rep::HostUnreachable => "host unreachable",
            Rep::ConnectionRefused => "connection refused",
            Rep::TtlExpired => "TTL expired",
            Rep::CommandNotSupported => "command not supported",
            Rep::AddressTypeNotSupported => "address type not supported",
        })
    }
}

/// The host part of a destination.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Host {
    Ip(IpAddr),
    /// A domain name (1..=255 bytes, as sent; resolved by the proxy server).
    Domain(String),
}

/// A requested destination.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    pub host: Host,
    pub port: u16,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.host {
            Host::Ip(ip) => write!(f, "{}", SocketAddr::new(*ip, self.port)),
            Host::Domain(d) => write!(f, "{d}:{}", self.port),
        }
    }
}

impl Target {
    /// `ATYP | ADDR | PORT`, as in a SOCKS request (and in nena's connect request).
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        match &self.host {
            Host::Ip(IpAddr::V4(a)) => {
                out.push(ATYP_IPV4);
                out.extend_from_slice(&a.octets());
            }
            Host::Ip(IpAddr::V6(a)) => {
                out.push(ATYP_IPV6);
                out.extend_from_slice(&a.octets());
            }
            Host::Domain(d) => {
                out.push(ATYP_DOMAIN);
                out.push(d.len() as u8);
                out.extend_from_slice(d.as_bytes());
            }
        }
        out.extend_from_slice(&self.port.to_be_bytes());
    }

    /// Decode `ATYP | ADDR | PORT` from the start of `buf`: `Ok(None)` if more bytes are
    /// needed, else the target and the bytes used.
    pub fn decode(buf: &[u8]) -> Result<Option<(Target, usize)>, SocksError> {
        let Some(&atyp) = buf.first() else {
            return Ok(None);
        };
        let (host, at) = match atyp {
            ATYP_IPV4 => {
                if buf.len() < 5 {
                    return Ok(None);
                }
                let o: [u8; 4] = buf[1..5].try_into().unwrap();
                (Host::Ip(IpAddr::V4(Ipv4Addr::from(o))), 5)
            }
            ATYP_IPV6 => {
                if buf.len() < 17 {
                    return Ok(None);
                }
                let o: [u8; 16] = buf[1..17].try_into().unwrap();
                (Host::Ip(IpAddr::V6(Ipv6Addr::from(o))), 17)
            }
            ATYP_DOMAIN => {
                let Some(&len) = buf.get(1) else {
                    return Ok(None);
                };
                if len == 0 {
                    return Err(SocksError::EmptyDomain);
                }
                let end = 2 + len as usize;
                if buf.len() < end {
                    return Ok(None);
                }
                let name = std::str::from_utf8(&buf[2..end])
                    .ok()
                    .filter(|s| s.bytes().all(|b| b.is_ascii_graphic()))
                    .ok_or(SocksError::BadDomain)?;
                (Host::Domain(name.to_owned()), end)
            }
            other => return Err(SocksError::AddressType(other)),
        };
        if buf.len() < at + 2 {
            return Ok(None);
        }
        let port = u16::from_be_bytes([buf[at], buf[at + 1]]);
        Ok(Some((Target { host, port }, at + 2)))
    }
}

/// Why a SOCKS exchange failed; [`SocksError::reply`] gives the bytes to answer with.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SocksError {
    #[error("not SOCKS version 5 (version byte {0:#04x})")]
    Version(u8),
    #[error("SOCKS greeting offers no authentication method")]
    NoMethods,
    #[error("no acceptable authentication method (offered {0:02x?})")]
    NoAcceptableMethod(Vec<u8>),
    #[error("username/password subnegotiation of unknown version {0:#04x}")]
    AuthVersion(u8),
    #[error("empty user name or password")]
    EmptyCredentials,
    #[error("wrong user name or password")]
    AuthFailed,
    #[error("SOCKS command {0:#04x} not supported (CONNECT and UDP ASSOCIATE only)")]
    Command(u8),
    #[error("reserved byte of the SOCKS request is {0:#04x}, not 0")]
    Reserved(u8),
    #[error("SOCKS address type {0:#04x} not supported")]
    AddressType(u8),
    #[error("empty domain name")]
    EmptyDomain,
    #[error("domain name is not printable ASCII")]
    BadDomain,
    #[error("the client closed the connection in the middle of the SOCKS exchange")]
    Truncated,
}

impl SocksError {
    /// What to send the application before closing, when the RFCs define an answer.
    pub fn reply(&self) -> Option<Vec<u8>> {
        match self {
            SocksError::NoMethods | SocksError::NoAcceptableMethod(_) => {
                Some(vec![VERSION, METHOD_NO_ACCEPTABLE])
            }
            SocksError::AuthVersion(_) | SocksError::EmptyCredentials | SocksError::AuthFailed => {
                Some(vec![USERPASS_VERSION, 0x01])
            }
            SocksError::Command(_) => Some(reply(Rep::CommandNotSupported, None)),
            SocksError::AddressType(_) => Some(reply(Rep::AddressTypeNotSupported, None)),
            SocksError::Reserved(_) | SocksError::EmptyDomain | SocksError::BadDomain => {
                Some(reply(Rep::GeneralFailure, None))
            }
            // Not SOCKS 5 (or the peer is gone): there is no version to answer in.
            SocksError::Version(_) | SocksError::Truncated => None,
        }
    }
}

/// A SOCKS reply: `VER REP RSV ATYP BND.ADDR BND.PORT` (unspecified IPv4 address when `bound`
/// is `None`).
pub fn reply(rep: Rep, bound: Option<SocketAddr>) -> Vec<u8> {
    let mut out = vec![VERSION, rep as u8, 0];
    let bound = bound.unwrap_or(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0));
    Target {
        host: Host::Ip(bound.ip()),
        port: bound.port(),
    }
    .encode_into(&mut out);
    out
}
