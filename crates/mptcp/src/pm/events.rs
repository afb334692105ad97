//! Path-manager events: a non-blocking subscription to the `mptcp_pm_events` multicast group
//! ([`PmEvents`]) and the decoding of its messages into [`PmEvent`]s. A lost event
//! (receive-buffer overrun, `ENOBUFS`) is reported, never hidden ([`PmError::is_overrun`]).

use super::attrs::fixed;
use super::commands::{pm_err, PmError, PmSocket};
use netlink_packet_core::ParseableParametrized;
use netlink_packet_core::{DecodeError, NetlinkMessage, NetlinkPayload, NlasIterator};
use netlink_packet_generic::{GenlHeader, GenlMessage};
use netlink_sys::Socket;
use serde::Serialize;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, BorrowedFd};

/// Multicast group of path-manager events.
pub const MPTCP_PM_EV_GRP_NAME: &str = "mptcp_pm_events";

/// Event types (`enum mptcp_event_type`).
pub const MPTCP_EVENT_CREATED: u8 = 1;
pub const MPTCP_EVENT_ESTABLISHED: u8 = 2;
pub const MPTCP_EVENT_CLOSED: u8 = 3;
/// The peer announced an address (ADD_ADDR): `remote` is that address, with the port it
/// announced (0: none, the connection's own port).
pub const MPTCP_EVENT_ANNOUNCED: u8 = 6;
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
const MPTCP_ATTR_FLAGS: u16 = 13;
const MPTCP_ATTR_IF_IDX: u16 = 15;

/// `MPTCP_ATTR_FLAGS` of `MPTCP_EVENT_CREATED`/`ESTABLISHED`: the peer set the C flag of
/// MP_CAPABLE, it accepts no join to the address and port the connection went to (a server
/// with `net.mptcp.allow_join_initial_addr_port=0`, behind a balancer).
pub const MPTCP_PM_EV_FLAG_DENY_JOIN_ID0: u16 = 1 << 0;

/// One path-manager event (`MPTCP_EVENT_*`), with the attributes nena uses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PmEvent {
    /// `MPTCP_EVENT_*`.
    pub kind: u8,
    pub token: Option<u32>,
    pub local: Option<SocketAddr>,
    pub remote: Option<SocketAddr>,
    pub backup: Option<bool>,
    /// `MPTCP_PM_EV_FLAG_*` (created and established events).
    pub flags: Option<u16>,
    /// The interface the subflow is bound to (`MPTCP_ATTR_IF_IDX`, sent only when it is
    /// bound): it leaves by that interface whatever the routes say.
    pub ifindex: Option<u32>,
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
                MPTCP_ATTR_FLAGS => ev.flags = Some(u16::from_ne_bytes(fixed(v)?)),
                MPTCP_ATTR_IF_IDX => {
                    let i = i32::from_ne_bytes(fixed(v)?);
                    ev.ifindex = u32::try_from(i).ok().filter(|&i| i != 0);
                }
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

    /// Every event queued so far (non-blocking). Fails if events were lost (`ENOBUFS`,
    /// [`PmError::is_overrun`]): a caller relying on them must then assume the worst.
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

/// The subscription's socket, to wait for it to become readable (`poll(2)`, tokio's
/// `AsyncFd`): it is non-blocking, and readable when an event (or an overrun) is queued.
impl AsFd for PmEvents {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
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

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_core::{DefaultNla, Emitable};

    #[test]
    fn event_decoding() {
        let attrs = vec![
            DefaultNla::new(MPTCP_ATTR_TOKEN, 0xdeadbeefu32.to_ne_bytes().to_vec()),
            DefaultNla::new(MPTCP_ATTR_SADDR4, vec![198, 18, 2, 2]),
            DefaultNla::new(MPTCP_ATTR_SPORT, 40000u16.to_be_bytes().to_vec()),
            DefaultNla::new(MPTCP_ATTR_DADDR4, vec![198, 18, 3, 2]),
            DefaultNla::new(MPTCP_ATTR_DPORT, 5000u16.to_be_bytes().to_vec()),
            DefaultNla::new(MPTCP_ATTR_BACKUP, vec![1]),
            DefaultNla::new(
                MPTCP_ATTR_FLAGS,
                MPTCP_PM_EV_FLAG_DENY_JOIN_ID0.to_ne_bytes().to_vec(),
            ),
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
        assert_eq!(e.flags, Some(MPTCP_PM_EV_FLAG_DENY_JOIN_ID0));
    }
}
