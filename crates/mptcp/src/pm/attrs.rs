//! The `mptcp_pm` message model: family, command and attribute numbers, the address nest
//! ([`AddrAttr`]), top-level attributes ([`PmAttr`]), the message body ([`PmMessage`]) with
//! its encoding and decoding, and in-kernel PM endpoints ([`Endpoint`]). No I/O.

use netlink_packet_core::{
    DecodeError, DefaultNla, Emitable, Nla, NlaBuffer, NlasIterator, Parseable,
    ParseableParametrized, NLA_F_NESTED,
};
use netlink_packet_generic::{GenlFamily, GenlHeader};
use serde::Serialize;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Family name and version.
pub const MPTCP_PM_NAME: &str = "mptcp_pm";
pub const MPTCP_PM_VER: u8 = 1;

/// Commands (`enum { MPTCP_PM_CMD_* }`).
pub const MPTCP_PM_CMD_ADD_ADDR: u8 = 1;
pub const MPTCP_PM_CMD_DEL_ADDR: u8 = 2;
pub const MPTCP_PM_CMD_GET_ADDR: u8 = 3;
pub const MPTCP_PM_CMD_SET_FLAGS: u8 = 7;
pub const MPTCP_PM_CMD_REMOVE: u8 = 9;
pub const MPTCP_PM_CMD_SUBFLOW_CREATE: u8 = 10;
pub const MPTCP_PM_CMD_SUBFLOW_DESTROY: u8 = 11;

/// Top-level attributes (`MPTCP_PM_ATTR_*`).
const MPTCP_PM_ATTR_ADDR: u16 = 1;
const MPTCP_PM_ATTR_TOKEN: u16 = 4;
const MPTCP_PM_ATTR_LOC_ID: u16 = 5;
const MPTCP_PM_ATTR_ADDR_REMOTE: u16 = 6;

/// Address attributes (`MPTCP_PM_ADDR_ATTR_*`).
const MPTCP_PM_ADDR_ATTR_FAMILY: u16 = 1;
const MPTCP_PM_ADDR_ATTR_ID: u16 = 2;
const MPTCP_PM_ADDR_ATTR_ADDR4: u16 = 3;
const MPTCP_PM_ADDR_ATTR_ADDR6: u16 = 4;
const MPTCP_PM_ADDR_ATTR_PORT: u16 = 5;
const MPTCP_PM_ADDR_ATTR_FLAGS: u16 = 6;
const MPTCP_PM_ADDR_ATTR_IF_IDX: u16 = 7;

/// Endpoint flags (`MPTCP_PM_ADDR_FLAG_*`).
pub const MPTCP_PM_ADDR_FLAG_SIGNAL: u32 = 1 << 0;
pub const MPTCP_PM_ADDR_FLAG_SUBFLOW: u32 = 1 << 1;
pub const MPTCP_PM_ADDR_FLAG_BACKUP: u32 = 1 << 2;
pub const MPTCP_PM_ADDR_FLAG_FULLMESH: u32 = 1 << 3;

/// One attribute of an `mptcp_pm` address nest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddrAttr {
    Family(u16),
    Id(u8),
    Addr4(Ipv4Addr),
    Addr6(Ipv6Addr),
    /// Host byte order, as the kernel expects (`nla_get_u16` then `htons`).
    Port(u16),
    Flags(u32),
    IfIdx(i32),
    Other(DefaultNla),
}

impl Nla for AddrAttr {
    fn value_len(&self) -> usize {
        match self {
            AddrAttr::Family(_) | AddrAttr::Port(_) => 2,
            AddrAttr::Id(_) => 1,
            AddrAttr::Addr4(_) | AddrAttr::Flags(_) | AddrAttr::IfIdx(_) => 4,
            AddrAttr::Addr6(_) => 16,
            AddrAttr::Other(n) => n.value_len(),
        }
    }
    fn kind(&self) -> u16 {
        match self {
            AddrAttr::Family(_) => MPTCP_PM_ADDR_ATTR_FAMILY,
            AddrAttr::Id(_) => MPTCP_PM_ADDR_ATTR_ID,
            AddrAttr::Addr4(_) => MPTCP_PM_ADDR_ATTR_ADDR4,
            AddrAttr::Addr6(_) => MPTCP_PM_ADDR_ATTR_ADDR6,
            AddrAttr::Port(_) => MPTCP_PM_ADDR_ATTR_PORT,
            AddrAttr::Flags(_) => MPTCP_PM_ADDR_ATTR_FLAGS,
            AddrAttr::IfIdx(_) => MPTCP_PM_ADDR_ATTR_IF_IDX,
            AddrAttr::Other(n) => n.kind(),
        }
    }
    fn emit_value(&self, b: &mut [u8]) {
        match self {
            AddrAttr::Family(v) | AddrAttr::Port(v) => b[..2].copy_from_slice(&v.to_ne_bytes()),
            AddrAttr::Id(v) => b[0] = *v,
            // in_addr / in6_addr: network byte order.
            AddrAttr::Addr4(a) => b[..4].copy_from_slice(&a.octets()),
            AddrAttr::Addr6(a) => b[..16].copy_from_slice(&a.octets()),
            AddrAttr::Flags(v) => b[..4].copy_from_slice(&v.to_ne_bytes()),
            AddrAttr::IfIdx(v) => b[..4].copy_from_slice(&v.to_ne_bytes()),
            AddrAttr::Other(n) => n.emit_value(b),
        }
    }
}

pub(super) fn fixed<const N: usize>(v: &[u8]) -> Result<[u8; N], DecodeError> {
    v.get(..N)
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| DecodeError::from(format!("attribute too short: {} < {N}", v.len())))
}

impl<'a, T: AsRef<[u8]> + ?Sized> Parseable<NlaBuffer<&'a T>> for AddrAttr {
    fn parse(buf: &NlaBuffer<&'a T>) -> Result<Self, DecodeError> {
        let v = buf.value();
        Ok(match buf.kind() {
            MPTCP_PM_ADDR_ATTR_FAMILY => AddrAttr::Family(u16::from_ne_bytes(fixed(v)?)),
            MPTCP_PM_ADDR_ATTR_ID => AddrAttr::Id(fixed::<1>(v)?[0]),
            MPTCP_PM_ADDR_ATTR_ADDR4 => AddrAttr::Addr4(Ipv4Addr::from(fixed::<4>(v)?)),
            MPTCP_PM_ADDR_ATTR_ADDR6 => AddrAttr::Addr6(Ipv6Addr::from(fixed::<16>(v)?)),
            MPTCP_PM_ADDR_ATTR_PORT => AddrAttr::Port(u16::from_ne_bytes(fixed(v)?)),
            MPTCP_PM_ADDR_ATTR_FLAGS => AddrAttr::Flags(u32::from_ne_bytes(fixed(v)?)),
            MPTCP_PM_ADDR_ATTR_IF_IDX => AddrAttr::IfIdx(i32::from_ne_bytes(fixed(v)?)),
            _ => AddrAttr::Other(DefaultNla::parse(buf)?),
        })
    }
}

/// A top-level `mptcp_pm` attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PmAttr {
    Addr(Vec<AddrAttr>),
    AddrRemote(Vec<AddrAttr>),
    Token(u32),
    LocId(u8),
    Other(DefaultNla),
}

impl Nla for PmAttr {
    fn value_len(&self) -> usize {
        match self {
            PmAttr::Addr(v) | PmAttr::AddrRemote(v) => v.as_slice().buffer_len(),
            PmAttr::Token(_) => 4,
            PmAttr::LocId(_) => 1,
            PmAttr::Other(n) => n.value_len(),
        }
    }
    fn kind(&self) -> u16 {
        match self {
            PmAttr::Addr(_) => MPTCP_PM_ATTR_ADDR | NLA_F_NESTED,
            PmAttr::AddrRemote(_) => MPTCP_PM_ATTR_ADDR_REMOTE | NLA_F_NESTED,
            PmAttr::Token(_) => MPTCP_PM_ATTR_TOKEN,
            PmAttr::LocId(_) => MPTCP_PM_ATTR_LOC_ID,
            PmAttr::Other(n) => n.kind(),
        }
    }
    fn emit_value(&self, b: &mut [u8]) {
        match self {
            PmAttr::Addr(v) | PmAttr::AddrRemote(v) => v.as_slice().emit(b),
            PmAttr::Token(t) => b[..4].copy_from_slice(&t.to_ne_bytes()),
            PmAttr::LocId(i) => b[0] = *i,
            PmAttr::Other(n) => n.emit_value(b),
        }
    }
}

fn parse_addr_nest(v: &[u8]) -> Result<Vec<AddrAttr>, DecodeError> {
    NlasIterator::new(v)
        .map(|nla| AddrAttr::parse(&nla?))
        .collect()
}

impl<'a, T: AsRef<[u8]> + ?Sized> Parseable<NlaBuffer<&'a T>> for PmAttr {
    fn parse(buf: &NlaBuffer<&'a T>) -> Result<Self, DecodeError> {
        let v = buf.value();
        Ok(match buf.kind() {
            MPTCP_PM_ATTR_ADDR => PmAttr::Addr(parse_addr_nest(v)?),
            MPTCP_PM_ATTR_ADDR_REMOTE => PmAttr::AddrRemote(parse_addr_nest(v)?),
            MPTCP_PM_ATTR_TOKEN => PmAttr::Token(u32::from_ne_bytes(fixed(v)?)),
            MPTCP_PM_ATTR_LOC_ID => PmAttr::LocId(fixed::<1>(v)?[0]),
            _ => PmAttr::Other(DefaultNla::parse(buf)?),
        })
    }
}

/// An `mptcp_pm` generic-netlink message body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PmMessage {
    pub cmd: u8,
    pub attrs: Vec<PmAttr>,
}

impl GenlFamily for PmMessage {
    fn family_name() -> &'static str {
        MPTCP_PM_NAME
    }
    fn command(&self) -> u8 {
        self.cmd
    }
    fn version(&self) -> u8 {
        MPTCP_PM_VER
    }
}

impl Emitable for PmMessage {
    fn buffer_len(&self) -> usize {
        self.attrs.as_slice().buffer_len()
    }
    fn emit(&self, buffer: &mut [u8]) {
        self.attrs.as_slice().emit(buffer)
    }
}

impl ParseableParametrized<[u8], GenlHeader> for PmMessage {
    fn parse_with_param(buf: &[u8], header: GenlHeader) -> Result<Self, DecodeError> {
        let attrs = NlasIterator::new(buf)
            .map(|nla| PmAttr::parse(&nla?))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PmMessage {
            cmd: header.cmd,
            attrs,
        })
    }
}

/// The address nest for `addr` (family + address [+ port when non-zero]).
pub fn addr_nest(addr: IpAddr, port: u16) -> Vec<AddrAttr> {
    let mut v = match addr {
        IpAddr::V4(a) => vec![AddrAttr::Family(libc::AF_INET as u16), AddrAttr::Addr4(a)],
        IpAddr::V6(a) => vec![AddrAttr::Family(libc::AF_INET6 as u16), AddrAttr::Addr6(a)],
    };
    if port != 0 {
        v.push(AddrAttr::Port(port));
    }
    v
}

/// An in-kernel path-manager endpoint (`ip mptcp endpoint show`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Endpoint {
    pub id: u8,
    pub addr: Option<IpAddr>,
    pub port: u16,
    pub flags: u32,
    pub ifindex: i32,
}

impl Endpoint {
    pub(super) fn from_nest(v: &[AddrAttr]) -> Self {
        let mut e = Endpoint {
            id: 0,
            addr: None,
            port: 0,
            flags: 0,
            ifindex: 0,
        };
        for a in v {
            match a {
                AddrAttr::Id(i) => e.id = *i,
                AddrAttr::Addr4(x) => e.addr = Some(IpAddr::V4(*x)),
                AddrAttr::Addr6(x) => e.addr = Some(IpAddr::V6(*x)),
                AddrAttr::Port(p) => e.port = *p,
                AddrAttr::Flags(f) => e.flags = *f,
                AddrAttr::IfIdx(i) => e.ifindex = *i,
                _ => {}
            }
        }
        e
    }
    /// The endpoint makes the in-kernel PM open subflows from it.
    pub fn is_subflow(&self) -> bool {
        self.flags & MPTCP_PM_ADDR_FLAG_SUBFLOW != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SUBFLOW_CREATE request is laid out exactly as the kernel selftest `pm_nl_ctl csf`
    /// lays it out (token, then the local and remote nests; ports in host order).
    #[test]
    fn subflow_create_encoding() {
        let msg = PmMessage {
            cmd: MPTCP_PM_CMD_SUBFLOW_CREATE,
            attrs: vec![
                PmAttr::Token(0x01020304),
                PmAttr::Addr({
                    let mut l = addr_nest("198.18.2.2".parse().unwrap(), 0);
                    l.push(AddrAttr::Flags(MPTCP_PM_ADDR_FLAG_SUBFLOW));
                    l
                }),
                PmAttr::AddrRemote(addr_nest("198.18.3.2".parse().unwrap(), 4433)),
            ],
        };
        let mut buf = vec![0u8; msg.buffer_len()];
        msg.emit(&mut buf);
        let mut expect = Vec::new();
        // token: len 8, type 4
        expect.extend_from_slice(&8u16.to_ne_bytes());
        expect.extend_from_slice(&4u16.to_ne_bytes());
        expect.extend_from_slice(&0x01020304u32.to_ne_bytes());
        // local nest: header + family(8) + addr4(8) + flags(8) = 28
        expect.extend_from_slice(&28u16.to_ne_bytes());
        expect.extend_from_slice(&(1u16 | 0x8000).to_ne_bytes());
        expect.extend_from_slice(&6u16.to_ne_bytes());
        expect.extend_from_slice(&1u16.to_ne_bytes());
        expect.extend_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        expect.extend_from_slice(&[0, 0]);
        expect.extend_from_slice(&8u16.to_ne_bytes());
        expect.extend_from_slice(&3u16.to_ne_bytes());
        expect.extend_from_slice(&[198, 18, 2, 2]);
        expect.extend_from_slice(&8u16.to_ne_bytes());
        expect.extend_from_slice(&6u16.to_ne_bytes());
        expect.extend_from_slice(&2u32.to_ne_bytes());
        // remote nest: header + family(8) + addr4(8) + port(8) = 28
        expect.extend_from_slice(&28u16.to_ne_bytes());
        expect.extend_from_slice(&(6u16 | 0x8000).to_ne_bytes());
        expect.extend_from_slice(&6u16.to_ne_bytes());
        expect.extend_from_slice(&1u16.to_ne_bytes());
        expect.extend_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        expect.extend_from_slice(&[0, 0]);
        expect.extend_from_slice(&8u16.to_ne_bytes());
        expect.extend_from_slice(&3u16.to_ne_bytes());
        expect.extend_from_slice(&[198, 18, 3, 2]);
        expect.extend_from_slice(&6u16.to_ne_bytes());
        expect.extend_from_slice(&5u16.to_ne_bytes());
        expect.extend_from_slice(&4433u16.to_ne_bytes());
        expect.extend_from_slice(&[0, 0]);
        assert_eq!(buf, expect);

        // And it parses back to the same message.
        let back = PmMessage::parse_with_param(
            &buf,
            GenlHeader {
                cmd: MPTCP_PM_CMD_SUBFLOW_CREATE,
                version: 1,
            },
        )
        .unwrap();
        assert_eq!(back, msg);
    }

    #[test]
    fn endpoint_from_nest() {
        let mut v = addr_nest("198.18.2.2".parse().unwrap(), 0);
        v.push(AddrAttr::Id(3));
        v.push(AddrAttr::Flags(
            MPTCP_PM_ADDR_FLAG_SUBFLOW | MPTCP_PM_ADDR_FLAG_BACKUP,
        ));
        v.push(AddrAttr::IfIdx(7));
        let e = Endpoint::from_nest(&v);
        assert_eq!(e.id, 3);
        assert_eq!(e.addr, Some("198.18.2.2".parse().unwrap()));
        assert!(e.is_subflow());
        assert_eq!(e.ifindex, 7);
    }

    #[test]
    fn short_attribute_is_an_error_not_a_panic() {
        // PORT attribute with a 1-byte value.
        let raw = [5u8, 0, 5, 0, 9, 0, 0, 0];
        assert!(parse_addr_nest(&raw).is_err());
    }
}
