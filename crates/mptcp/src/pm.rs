//! A small client of the kernel's `mptcp_pm` generic-netlink family (uapi
//! `linux/mptcp_pm.h`, spec `Documentation/netlink/specs/mptcp_pm.yaml`), built on the
//! rust-netlink crates (`netlink-sys` sockets, `netlink-packet-core`/`-generic` framing).
//! nena uses it as the userspace path manager of its own connections
//! (`MPTCP_PM_CMD_SUBFLOW_CREATE`, `MPTCP_PM_CMD_SET_FLAGS`) and to list in-kernel PM
//! endpoints (`MPTCP_PM_CMD_GET_ADDR`) for diagnostics. The socket belongs to the network
//! namespace of the thread that opens it.

use netlink_packet_core::{
    DecodeError, DefaultNla, Emitable, NetlinkMessage, NetlinkPayload, Nla, NlaBuffer,
    NlasIterator, Parseable, ParseableParametrized, NLA_F_NESTED, NLM_F_ACK, NLM_F_DUMP,
    NLM_F_REQUEST,
};
use netlink_packet_generic::ctrl::nlas::{GenlCtrlAttrs, McastGrpAttrs};
use netlink_packet_generic::ctrl::{GenlCtrl, GenlCtrlCmd};
use netlink_packet_generic::{GenlFamily, GenlHeader, GenlMessage};
use netlink_sys::{protocols::NETLINK_GENERIC, Socket, SocketAddr as NlAddr};
use serde::Serialize;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Family name and version.
pub const MPTCP_PM_NAME: &str = "mptcp_pm";
pub const MPTCP_PM_VER: u8 = 1;

/// Commands (`enum { MPTCP_PM_CMD_* }`).
pub const MPTCP_PM_CMD_ADD_ADDR: u8 = 1;
pub const MPTCP_PM_CMD_DEL_ADDR: u8 = 2;
pub const MPTCP_PM_CMD_GET_ADDR: u8 = 3;
pub const MPTCP_PM_CMD_SET_FLAGS: u8 = 7;
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

fn fixed<const N: usize>(v: &[u8]) -> Result<[u8; N], DecodeError> {
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
    fn from_nest(v: &[AddrAttr]) -> Self {
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

/// A netlink error answered by the kernel, with its extended-ack message when there is one.
#[derive(Debug, thiserror::Error)]
#[error("{op}: {source}{}", ext.as_deref().map(|m| format!(" ({m})")).unwrap_or_default())]
pub struct PmError {
    pub op: &'static str,
    pub source: io::Error,
    pub ext: Option<String>,
}

fn pm_err(op: &'static str, source: io::Error) -> PmError {
    PmError {
        op,
        source,
        ext: None,
    }
}

/// A generic-netlink socket talking to `mptcp_pm` in the current network namespace.
pub struct PmSocket {
    sock: Socket,
    family: u16,
    seq: u32,
}

impl std::fmt::Debug for PmSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PmSocket")
            .field("family", &self.family)
            .finish()
    }
}

const NLMSGERR_ATTR_MSG: u16 = 1;

impl PmSocket {
    /// Open a socket and resolve the `mptcp_pm` family id.
    pub fn open() -> Result<Self, PmError> {
        let mut sock = Socket::new(NETLINK_GENERIC).map_err(|e| pm_err("netlink socket", e))?;
        sock.bind_auto().map_err(|e| pm_err("netlink bind", e))?;
        sock.connect(&NlAddr::new(0, 0))
            .map_err(|e| pm_err("netlink connect", e))?;
        // Extended acks carry the kernel's human-readable reason; optional.
        let _ = sock.set_ext_ack(true);
        let mut me = PmSocket {
            sock,
            family: 0,
            seq: 0,
        };
        me.family = me.resolve_family()?;
        Ok(me)
    }

    /// The dynamic generic-netlink id of `mptcp_pm`.
    pub fn family_id(&self) -> u16 {
        self.family
    }

    fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    fn send<F>(
        &mut self,
        mut msg: NetlinkMessage<F>,
        flags: u16,
        op: &'static str,
    ) -> Result<u32, PmError>
    where
        F: netlink_packet_core::NetlinkSerializable + std::fmt::Debug,
    {
        let seq = self.next_seq();
        msg.header.flags = flags;
        msg.header.sequence_number = seq;
        msg.finalize();
        let mut buf = vec![0u8; msg.buffer_len()];
        msg.serialize(&mut buf);
        self.sock.send(&buf, 0).map_err(|e| pm_err(op, e))?;
        Ok(seq)
    }

    /// Receive every message answering `seq` until the ACK/error (requests) or DONE (dumps).
    fn collect<F>(&mut self, seq: u32, op: &'static str) -> Result<Vec<F>, PmError>
    where
        F: netlink_packet_core::NetlinkDeserializable + std::fmt::Debug,
    {
        let mut out = Vec::new();
        loop {
            let (buf, _) = self.sock.recv_from_full().map_err(|e| pm_err(op, e))?;
            let mut off = 0;
            while off + 16 <= buf.len() {
                let len = u32::from_ne_bytes(buf[off..off + 4].try_into().unwrap()) as usize;
                if len < 16 || off + len > buf.len() {
                    return Err(pm_err(op, io::Error::other("truncated netlink message")));
                }
                let raw = &buf[off..off + len];
                off += (len + 3) & !3;
                let msg = NetlinkMessage::<F>::deserialize(raw)
                    .map_err(|e| pm_err(op, io::Error::other(e.to_string())))?;
                if msg.header.sequence_number != seq {
                    continue;
                }
                match msg.payload {
                    NetlinkPayload::InnerMessage(m) => out.push(m),
                    NetlinkPayload::Done(_) => return Ok(out),
                    NetlinkPayload::Error(e) => match e.code {
                        None => return Ok(out),
                        Some(_) => {
                            return Err(PmError {
                                op,
                                source: e.to_io(),
                                ext: ext_ack_message(raw),
                            })
                        }
                    },
                    _ => {}
                }
            }
        }
    }

    fn resolve_family(&mut self) -> Result<u16, PmError> {
        Ok(self.resolve_family_and_groups()?.0)
    }

    /// The family id and its multicast groups (name, id).
    fn resolve_family_and_groups(&mut self) -> Result<(u16, Vec<(String, u32)>), PmError> {
        let op = "resolve generic netlink family mptcp_pm";
        let genl = GenlMessage::from_payload(GenlCtrl {
            cmd: GenlCtrlCmd::GetFamily,
            nlas: vec![GenlCtrlAttrs::FamilyName(MPTCP_PM_NAME.to_owned())],
        });
        let seq = self.send(NetlinkMessage::from(genl), NLM_F_REQUEST | NLM_F_ACK, op)?;
        let replies: Vec<GenlMessage<GenlCtrl>> = self.collect(seq, op)?;
        let attrs = || replies.iter().flat_map(|m| m.payload.nlas.iter());
        let id = attrs()
            .find_map(|a| match a {
                GenlCtrlAttrs::FamilyId(id) => Some(*id),
                _ => None,
            })
            .ok_or_else(|| {
                pm_err(
                    op,
                    io::Error::other("no family id in reply (kernel without MPTCP?)"),
                )
            })?;
        let groups = attrs()
            .filter_map(|a| match a {
                GenlCtrlAttrs::McastGroups(gs) => Some(gs),
                _ => None,
            })
            .flatten()
            .filter_map(|g| {
                let name = g.iter().find_map(|x| match x {
                    McastGrpAttrs::Name(n) => Some(n.clone()),
                    _ => None,
                })?;
                let id = g.iter().find_map(|x| match x {
                    McastGrpAttrs::Id(i) => Some(*i),
                    _ => None,
                })?;
                Some((name, id))
            })
            .collect();
        Ok((id, groups))
    }

    fn request(
        &mut self,
        cmd: u8,
        attrs: Vec<PmAttr>,
        dump: bool,
        op: &'static str,
    ) -> Result<Vec<PmMessage>, PmError> {
        let mut genl = GenlMessage::from_payload(PmMessage { cmd, attrs });
        genl.set_resolved_family_id(self.family);
        let flags = if dump {
            NLM_F_REQUEST | NLM_F_DUMP
        } else {
            NLM_F_REQUEST | NLM_F_ACK
        };
        let seq = self.send(NetlinkMessage::from(genl), flags, op)?;
        let replies: Vec<GenlMessage<PmMessage>> = self.collect(seq, op)?;
        Ok(replies.into_iter().map(|m| m.payload).collect())
    }

    /// Userspace PM: open a new subflow of connection `token` from `local` to `remote`
    /// (`MPTCP_PM_CMD_SUBFLOW_CREATE`). The kernel picks the local port and address id.
    pub fn subflow_create(
        &mut self,
        token: u32,
        local: IpAddr,
        remote: SocketAddr,
    ) -> Result<(), PmError> {
        let mut l = addr_nest(local, 0);
        l.push(AddrAttr::Flags(MPTCP_PM_ADDR_FLAG_SUBFLOW));
        let attrs = vec![
            PmAttr::Token(token),
            PmAttr::Addr(l),
            PmAttr::AddrRemote(addr_nest(remote.ip(), remote.port())),
        ];
        self.request(
            MPTCP_PM_CMD_SUBFLOW_CREATE,
            attrs,
            false,
            "mptcp_pm SUBFLOW_CREATE",
        )
        .map(|_| ())
    }

    /// Userspace PM: close the subflow `local` -> `remote` of connection `token`.
    pub fn subflow_destroy(
        &mut self,
        token: u32,
        local: SocketAddr,
        remote: SocketAddr,
    ) -> Result<(), PmError> {
        let attrs = vec![
            PmAttr::Token(token),
            PmAttr::Addr(addr_nest(local.ip(), local.port())),
            PmAttr::AddrRemote(addr_nest(remote.ip(), remote.port())),
        ];
        self.request(
            MPTCP_PM_CMD_SUBFLOW_DESTROY,
            attrs,
            false,
            "mptcp_pm SUBFLOW_DESTROY",
        )
        .map(|_| ())
    }

    /// Userspace PM: mark the subflow `local` -> `remote` of connection `token` as backup or
    /// not (`MPTCP_PM_CMD_SET_FLAGS`, sends MP_PRIO to the peer).
    pub fn set_backup(
        &mut self,
        token: u32,
        local: SocketAddr,
        remote: SocketAddr,
        backup: bool,
    ) -> Result<(), PmError> {
        let mut l = addr_nest(local.ip(), local.port());
        l.push(AddrAttr::Flags(if backup {
            MPTCP_PM_ADDR_FLAG_BACKUP
        } else {
            0
        }));
        let attrs = vec![
            PmAttr::Token(token),
            PmAttr::Addr(l),
            PmAttr::AddrRemote(addr_nest(remote.ip(), remote.port())),
        ];
        self.request(MPTCP_PM_CMD_SET_FLAGS, attrs, false, "mptcp_pm SET_FLAGS")
            .map(|_| ())
    }

    /// In-kernel PM endpoints of this network namespace (`ip mptcp endpoint show`).
    pub fn endpoints(&mut self) -> Result<Vec<Endpoint>, PmError> {
        let msgs = self.request(
            MPTCP_PM_CMD_GET_ADDR,
            vec![],
            true,
            "mptcp_pm GET_ADDR dump",
        )?;
        Ok(msgs
            .iter()
            .flat_map(|m| m.attrs.iter())
            .filter_map(|a| match a {
                PmAttr::Addr(v) => Some(Endpoint::from_nest(v)),
                _ => None,
            })
            .collect())
    }
}

/// Multicast group of path-manager events.
pub const MPTCP_PM_EV_GRP_NAME: &str = "mptcp_pm_events";

/// Event types (`enum mptcp_event_type`).
pub const MPTCP_EVENT_CREATED: u8 = 1;
pub const MPTCP_EVENT_ESTABLISHED: u8 = 2;
pub const MPTCP_EVENT_CLOSED: u8 = 3;
pub const MPTCP_EVENT_SUB_ESTABLISHED: u8 = 10;
pub const MPTCP_EVENT_SUB_CLOSED: u8 = 11;
pub const MPTCP_EVENT_SUB_PRIORITY: u8 = 13;

/// Event attributes (`enum mptcp_event_attr`).
const MPTCP_ATTR_TOKEN: u16 = 1;
const MPTCP_ATTR_SADDR4: u16 = 5;
const MPTCP_ATTR_SADDR6: u16 = 6;
const MPTCP_ATTR_DADDR4: u16 = 7;
const MPTCP_ATTR_DADDR6: u16 = 8;
const MPTCP_ATTR_SPORT: u16 = 9;
const MPTCP_ATTR_DPORT: u16 = 10;
const MPTCP_ATTR_BACKUP: u16 = 11;

/// One path-manager event (`MPTCP_EVENT_*`), with the attributes nena uses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PmEvent {
    /// `MPTCP_EVENT_*`.
    pub kind: u8,
    pub token: Option<u32>,
    pub local: Option<SocketAddr>,
    pub remote: Option<SocketAddr>,
    pub backup: Option<bool>,
}

/// The body of an event message: its generic-netlink command is the event type.
#[derive(Debug, Clone, PartialEq, Eq)]
struct EventMessage(PmEvent);

impl ParseableParametrized<[u8], GenlHeader> for EventMessage {
    fn parse_with_param(buf: &[u8], header: GenlHeader) -> Result<Self, DecodeError> {
        let mut ev = PmEvent {
            kind: header.cmd,
            ..Default::default()
        };
        let (mut sip, mut dip, mut sport, mut dport) = (None, None, 0u16, 0u16);
        for nla in NlasIterator::new(buf) {
            let nla = nla?;
            let v = nla.value();
            match nla.kind() {
                MPTCP_ATTR_TOKEN => ev.token = Some(u32::from_ne_bytes(fixed(v)?)),
                MPTCP_ATTR_SADDR4 => sip = Some(IpAddr::V4(Ipv4Addr::from(fixed::<4>(v)?))),
                MPTCP_ATTR_SADDR6 => sip = Some(IpAddr::V6(Ipv6Addr::from(fixed::<16>(v)?))),
                MPTCP_ATTR_DADDR4 => dip = Some(IpAddr::V4(Ipv4Addr::from(fixed::<4>(v)?))),
                MPTCP_ATTR_DADDR6 => dip = Some(IpAddr::V6(Ipv6Addr::from(fixed::<16>(v)?))),
                // be16 on the wire
                MPTCP_ATTR_SPORT => sport = u16::from_be_bytes(fixed(v)?),
                MPTCP_ATTR_DPORT => dport = u16::from_be_bytes(fixed(v)?),
                MPTCP_ATTR_BACKUP => ev.backup = Some(fixed::<1>(v)?[0] != 0),
                _ => {}
            }
        }
        ev.local = sip.map(|a| SocketAddr::new(a, sport));
        ev.remote = dip.map(|a| SocketAddr::new(a, dport));
        Ok(EventMessage(ev))
    }
}

/// A non-blocking subscription to the `mptcp_pm_events` multicast group of the current
/// network namespace (needs `CAP_NET_ADMIN`). Events of every connection arrive; filter by
/// token.
pub struct PmEvents {
    sock: Socket,
}

impl std::fmt::Debug for PmEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PmEvents")
    }
}

impl PmEvents {
    /// Subscribe. Events that happen from now on are queued in the socket until drained.
    pub fn subscribe() -> Result<Self, PmError> {
        let mut pm = PmSocket::open()?;
        let (_, groups) = pm.resolve_family_and_groups()?;
        let op = "subscribe to mptcp_pm_events";
        let group = groups
            .iter()
            .find(|(n, _)| n == MPTCP_PM_EV_GRP_NAME)
            .map(|(_, id)| *id)
            .ok_or_else(|| {
                pm_err(
                    op,
                    io::Error::other("the kernel has no mptcp_pm_events group"),
                )
            })?;
        // Every subscriber receives the events of every connection in the namespace: a burst
        // of connects would overflow the default receive buffer (ENOBUFS, and the gate then
        // fails closed). Ask for a large buffer before joining the group.
        enlarge_rcvbuf(&pm.sock, EVENTS_RCVBUF);
        pm.sock.add_membership(group).map_err(|e| pm_err(op, e))?;
        pm.sock.set_non_blocking(true).map_err(|e| pm_err(op, e))?;
        Ok(PmEvents { sock: pm.sock })
    }

    /// Every event queued so far (non-blocking). Fails if events were lost (`ENOBUFS`):
    /// a caller relying on them must then assume the worst.
    pub fn drain(&mut self) -> Result<Vec<PmEvent>, PmError> {
        let op = "read mptcp_pm_events";
        let mut out = Vec::new();
        loop {
            let buf = match self.sock.recv_from_full() {
                Ok((b, _)) => b,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(out),
                Err(e) => return Err(pm_err(op, e)),
            };
            out.extend(parse_events(&buf));
        }
    }
}

/// Receive buffer asked for an event subscription (bytes): room for thousands of events.
const EVENTS_RCVBUF: libc::c_int = 8 << 20;

/// Set the socket's receive buffer to `bytes`: `SO_RCVBUFFORCE` (needs `CAP_NET_ADMIN`, which
/// a subscriber has), else `SO_RCVBUF` (capped by `net.core.rmem_max`). Best effort: a
/// smaller buffer only makes an overflow more likely, and an overflow is reported by
/// [`PmEvents::drain`].
fn enlarge_rcvbuf(sock: &Socket, bytes: libc::c_int) {
    use std::os::fd::AsRawFd;
    let fd = sock.as_raw_fd();
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        // SAFETY: fd is an open socket owned by `sock`; the option value is a c_int that
        // lives for the call, and its size is passed.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&bytes as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            return;
        }
    }
    log::debug!(
        "mptcp_pm_events: could not enlarge the receive buffer: {}",
        io::Error::last_os_error()
    );
}

/// Decode a datagram of event messages; undecodable ones are skipped.
fn parse_events(buf: &[u8]) -> Vec<PmEvent> {
    let mut out = Vec::new();
    let mut off = 0;
    while off + 16 <= buf.len() {
        let len = u32::from_ne_bytes(buf[off..off + 4].try_into().unwrap()) as usize;
        if len < 16 || off + len > buf.len() {
            break;
        }
        let raw = &buf[off..off + len];
        off += (len + 3) & !3;
        match NetlinkMessage::<GenlMessage<EventMessage>>::deserialize(raw) {
            Ok(m) => {
                if let NetlinkPayload::InnerMessage(g) = m.payload {
                    out.push(g.payload.0);
                }
            }
            Err(e) => log::debug!("skipping undecodable mptcp_pm event: {e}"),
        }
    }
    out
}

/// The `NLMSGERR_ATTR_MSG` string of an extended ack, if present. The error payload is
/// `nlmsgerr` (errno + the request's `nlmsghdr`, 20 bytes: the request payload is capped)
/// followed by TLVs.
fn ext_ack_message(raw: &[u8]) -> Option<String> {
    let tlvs = raw.get(16 + 4 + 16..)?;
    NlasIterator::new(tlvs)
        .filter_map(Result::ok)
        .find_map(|nla| {
            (nla.kind() == NLMSGERR_ATTR_MSG).then(|| {
                String::from_utf8_lossy(nla.value())
                    .trim_end_matches('\0')
                    .to_string()
            })
        })
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
    fn event_decoding() {
        let attrs = vec![
            DefaultNla::new(MPTCP_ATTR_TOKEN, 0xdeadbeefu32.to_ne_bytes().to_vec()),
            DefaultNla::new(MPTCP_ATTR_SADDR4, vec![198, 18, 2, 2]),
            DefaultNla::new(MPTCP_ATTR_SPORT, 40000u16.to_be_bytes().to_vec()),
            DefaultNla::new(MPTCP_ATTR_DADDR4, vec![198, 18, 3, 2]),
            DefaultNla::new(MPTCP_ATTR_DPORT, 5000u16.to_be_bytes().to_vec()),
            DefaultNla::new(MPTCP_ATTR_BACKUP, vec![1]),
        ];
        let body_len = attrs.as_slice().buffer_len();
        let total = 16 + 4 + body_len;
        let mut buf = Vec::new();
        buf.extend_from_slice(&(total as u32).to_ne_bytes());
        buf.extend_from_slice(&0x1234u16.to_ne_bytes()); // family id
        buf.extend_from_slice(&0u16.to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes());
        buf.extend_from_slice(&[MPTCP_EVENT_SUB_CLOSED, 1, 0, 0]);
        let mut body = vec![0u8; body_len];
        attrs.as_slice().emit(&mut body);
        buf.extend_from_slice(&body);
        // Two messages in one datagram, then garbage that must not panic.
        let mut two = buf.clone();
        two.extend_from_slice(&buf);
        two.extend_from_slice(&[0xff; 7]);
        let evs = parse_events(&two);
        assert_eq!(evs.len(), 2);
        let e = &evs[0];
        assert_eq!(e.kind, MPTCP_EVENT_SUB_CLOSED);
        assert_eq!(e.token, Some(0xdeadbeef));
        assert_eq!(e.local, Some("198.18.2.2:40000".parse().unwrap()));
        assert_eq!(e.remote, Some("198.18.3.2:5000".parse().unwrap()));
        assert_eq!(e.backup, Some(true));
    }

    #[test]
    fn short_attribute_is_an_error_not_a_panic() {
        // PORT attribute with a 1-byte value.
        let raw = [5u8, 0, 5, 0, 9, 0, 0, 0];
        assert!(parse_addr_nest(&raw).is_err());
    }
}
