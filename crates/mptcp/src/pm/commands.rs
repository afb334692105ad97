//! Requests to the kernel's `mptcp_pm` family over a generic-netlink socket ([`PmSocket`]):
//! family resolution, userspace-PM commands (`SUBFLOW_CREATE`, `SUBFLOW_DESTROY`,
//! `SET_FLAGS`) and the in-kernel endpoint dump (`GET_ADDR`), with the kernel's
//! extended-ack reason in errors ([`PmError`]). Each request is answered by the kernel
//! synchronously: none waits on the network.

use super::attrs::{
    addr_nest, AddrAttr, Endpoint, PmAttr, PmMessage, MPTCP_PM_ADDR_FLAG_BACKUP,
    MPTCP_PM_ADDR_FLAG_SUBFLOW, MPTCP_PM_CMD_ADD_ADDR, MPTCP_PM_CMD_DEL_ADDR,
    MPTCP_PM_CMD_GET_ADDR, MPTCP_PM_CMD_REMOVE, MPTCP_PM_CMD_SET_FLAGS,
    MPTCP_PM_CMD_SUBFLOW_CREATE, MPTCP_PM_CMD_SUBFLOW_DESTROY, MPTCP_PM_NAME,
};
use netlink_packet_core::{
    NetlinkMessage, NetlinkPayload, NlasIterator, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_generic::ctrl::nlas::{GenlCtrlAttrs, McastGrpAttrs};
use netlink_packet_generic::ctrl::{GenlCtrl, GenlCtrlCmd};
use netlink_packet_generic::GenlMessage;
use netlink_sys::{protocols::NETLINK_GENERIC, Socket, SocketAddr as NlAddr};
use std::io;
use std::net::{IpAddr, SocketAddr};

/// A netlink error answered by the kernel, with its extended-ack message when there is one.
#[derive(Debug, thiserror::Error)]
#[error("{op}: {source}{}", ext.as_deref().map(|m| format!(" ({m})")).unwrap_or_default())]
pub struct PmError {
    pub op: &'static str,
    pub source: io::Error,
    pub ext: Option<String>,
}

impl PmError {
    /// The kernel dropped messages for this socket (`ENOBUFS`: its receive buffer overran).
    /// On an event subscription this means events were lost.
    pub fn is_overrun(&self) -> bool {
        self.source.raw_os_error() == Some(libc::ENOBUFS)
    }
}

pub(super) fn pm_err(op: &'static str, source: io::Error) -> PmError {
    PmError {
        op,
        source,
        ext: None,
    }
}

/// A generic-netlink socket talking to `mptcp_pm` in the current network namespace.
pub struct PmSocket {
    pub(super) sock: Socket,
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
    pub(super) fn resolve_family_and_groups(
        &mut self,
    ) -> Result<(u16, Vec<(String, u32)>), PmError> {
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
    /// (`MPTCP_PM_CMD_SUBFLOW_CREATE`). The kernel picks the local port; the address id is
    /// [`local_id`]'s, one per address for the process's life. (With id 0 for every
    /// address, the kernel refuses a second address while the first one's entry is kept:
    /// "did not match address and id", `EINVAL`; that kept the trusted path from being
    /// re-created after an outage while the untrusted one had a subflow.)
    /// With `ifindex` the subflow is bound to that interface (`MPTCP_PM_ADDR_ATTR_IF_IDX`):
    /// it leaves by it whatever the routes say; without, routing picks the interface.
    pub fn subflow_create(
        &mut self,
        token: u32,
        local: IpAddr,
        ifindex: Option<u32>,
        remote: SocketAddr,
    ) -> Result<(), PmError> {
        self.subflow_create_with(token, local, ifindex, remote, false)
    }

    /// [`subflow_create`](Self::subflow_create), with `backup`: the subflow's MP_JOIN
    /// carries the B flag, so neither end's scheduler gives it data while another subflow
    /// is usable (a metered path's subflow, `--metered`).
    pub fn subflow_create_with(
        &mut self,
        token: u32,
        local: IpAddr,
        ifindex: Option<u32>,
        remote: SocketAddr,
        backup: bool,
    ) -> Result<(), PmError> {
        let mut l = addr_nest(local, 0);
        l.push(AddrAttr::Id(local_id(local)));
        let flags = MPTCP_PM_ADDR_FLAG_SUBFLOW | if backup { MPTCP_PM_ADDR_FLAG_BACKUP } else { 0 };
        l.push(AddrAttr::Flags(flags));
        if let Some(i) = ifindex {
            l.push(AddrAttr::IfIdx(i as i32));
        }
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

    /// Userspace PM: withdraw the local address of id `id` from connection `token`
    /// (`MPTCP_PM_CMD_REMOVE`): the kernel sends RM_ADDR to the peer on a usable subflow,
    /// and the peer closes its subflows to that address and sends again what they had in
    /// flight. The kernel sends it only while a subflow from the address exists.
    pub fn remove_addr(&mut self, token: u32, id: u8) -> Result<(), PmError> {
        self.request(
            MPTCP_PM_CMD_REMOVE,
            vec![PmAttr::Token(token), PmAttr::LocId(id)],
            false,
            "mptcp_pm REMOVE",
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

    /// In-kernel PM: add the endpoint `addr` bound to interface `ifindex` with `flags`
    /// (`ip mptcp endpoint add ADDR dev IFACE [backup] ...`); the kernel picks its id.
    pub fn endpoint_add(&mut self, addr: IpAddr, ifindex: u32, flags: u32) -> Result<(), PmError> {
        let mut l = addr_nest(addr, 0);
        l.push(AddrAttr::Flags(flags));
        l.push(AddrAttr::IfIdx(ifindex as i32));
        self.request(
            MPTCP_PM_CMD_ADD_ADDR,
            vec![PmAttr::Addr(l)],
            false,
            "mptcp_pm ADD_ADDR (endpoint add)",
        )
        .map(|_| ())
    }

    /// In-kernel PM: remove the endpoint of id `id` (`ip mptcp endpoint delete id ID`).
    pub fn endpoint_delete(&mut self, id: u8) -> Result<(), PmError> {
        let l = vec![AddrAttr::Id(id)];
        self.request(
            MPTCP_PM_CMD_DEL_ADDR,
            vec![PmAttr::Addr(l)],
            false,
            "mptcp_pm DEL_ADDR (endpoint delete)",
        )
        .map(|_| ())
    }

    /// In-kernel PM: set or clear the `backup` flag of the endpoint `addr` (`ip mptcp
    /// endpoint change ADDR [no]backup`). A change sends MP_PRIO on the subflow from that
    /// address of every connection of the in-kernel PM in this network namespace (the first
    /// one of each connection); every connection of the namespace is concerned, not one.
    pub fn endpoint_set_backup(&mut self, addr: IpAddr, backup: bool) -> Result<(), PmError> {
        let mut l = addr_nest(addr, 0);
        l.push(AddrAttr::Flags(if backup {
            MPTCP_PM_ADDR_FLAG_BACKUP
        } else {
            0
        }));
        self.request(
            MPTCP_PM_CMD_SET_FLAGS,
            vec![PmAttr::Addr(l)],
            false,
            "mptcp_pm SET_FLAGS (endpoint change)",
        )
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

/// The address id the userspace PM gives subflows from `addr` (`MPTCP_PM_ADDR_ATTR_ID`):
/// 1 to 255, one per address, the same for every connection of this process (as mptcpd's id
/// manager does). The kernel keeps a connection's local addresses by id and refuses an
/// address under an id another address holds; 0 is the initial subflow's, never given
/// here. Past 255 addresses, 0: the kernel's own choice, which works while the connection
/// has no other entry of id 0.
pub fn local_id(addr: IpAddr) -> u8 {
    use std::collections::HashMap;
    use std::sync::Mutex;
    static IDS: Mutex<Option<HashMap<IpAddr, u8>>> = Mutex::new(None);
    let mut ids = IDS.lock().unwrap_or_else(|e| e.into_inner());
    let ids = ids.get_or_insert_with(HashMap::new);
    if let Some(&id) = ids.get(&addr) {
        return id;
    }
    match u8::try_from(ids.len() + 1) {
        Ok(id) => {
            ids.insert(addr, id);
            id
        }
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::local_id;
    use std::net::IpAddr;

    #[test]
    fn every_address_keeps_one_id_of_its_own_and_none_is_zero() {
        let a: IpAddr = "198.18.1.2".parse().unwrap();
        let b: IpAddr = "198.18.2.2".parse().unwrap();
        let c: IpAddr = "2001:2:0:2::2".parse().unwrap();
        let (ia, ib, ic) = (local_id(a), local_id(b), local_id(c));
        assert!(ia != 0 && ib != 0 && ic != 0);
        assert!(ia != ib && ib != ic && ia != ic, "{ia} {ib} {ic}");
        assert_eq!(local_id(b), ib);
        assert_eq!(local_id(a), ia);
    }
}
