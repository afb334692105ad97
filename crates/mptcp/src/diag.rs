//! Closing one subflow of a connection whose path manager is the kernel's: the subflow is a
//! TCP socket of the host, so `sock_diag` (`SOCK_DESTROY`, what `ss -K` sends) can abort it
//! like any other; the MPTCP connection goes on over its other subflows. The userspace path
//! manager has its own command for this (`SUBFLOW_DESTROY`); the in-kernel one offers none.
//!
//! Needs `CAP_NET_ADMIN` and a kernel built with `CONFIG_INET_DIAG_DESTROY`; without either
//! the kernel refuses (EPERM / EOPNOTSUPP) and the caller must fail closed.
//!
//! Also [`bound_dev`]: which interface a subflow is bound to (`SO_BINDTODEVICE`, or the
//! interface index of `SUBFLOW_CREATE` and of an endpoint's `dev`), read the same way and
//! without any privilege: the gate decides a subflow's trust by the interface it leaves by.

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_sock_diag::{
    constants::*,
    inet::{ExtensionFlags, InetRequest, SocketId, StateFlags},
    SockDiagDestroy, SockDiagMessage,
};
use netlink_sys::{protocols::NETLINK_SOCK_DIAG, Socket, SocketAddr as NlAddr};
use std::io;
use std::net::{IpAddr, SocketAddr};

fn open() -> io::Result<Socket> {
    let mut sock = Socket::new(NETLINK_SOCK_DIAG)?;
    sock.bind_auto()?;
    sock.connect(&NlAddr::new(0, 0))?;
    Ok(sock)
}

fn canon(a: IpAddr) -> IpAddr {
    match a {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(a, IpAddr::V4),
        v4 => v4,
    }
}

fn request(family: u8, states: StateFlags, socket_id: SocketId) -> SockDiagMessage {
    SockDiagMessage::InetRequest(InetRequest {
        family,
        protocol: IPPROTO_TCP,
        extensions: ExtensionFlags::empty(),
        states,
        socket_id,
    })
}

/// The kernel's identity (interface and cookie included) of the TCP socket `local` ->
/// `remote` in this network namespace, if there is one.
fn find(sock: &mut Socket, local: SocketAddr, remote: SocketAddr) -> io::Result<Option<SocketId>> {
    let family = if canon(remote.ip()).is_ipv4() {
        AF_INET
    } else {
        AF_INET6
    };
    let mut hdr = NetlinkHeader::default();
    hdr.flags = NLM_F_REQUEST | NLM_F_DUMP;
    hdr.sequence_number = 1;
    let mut states = StateFlags::all();
    states.remove(StateFlags::LISTEN);
    let id = if family == AF_INET {
        SocketId::new_v4()
    } else {
        SocketId::new_v6()
    };
    let mut msg = NetlinkMessage::new(hdr, request(family, states, id).into());
    msg.finalize();
    let mut buf = vec![0; msg.buffer_len()];
    msg.serialize(&mut buf[..]);
    sock.send(&buf, 0)?;
    let bad = |w: String| io::Error::new(io::ErrorKind::InvalidData, w);
    let mut found = None;
    let mut rx = vec![0u8; 1 << 16];
    loop {
        let n = sock.recv(&mut &mut rx[..], 0)?;
        if n == 0 {
            return Err(bad("sock_diag: the kernel closed the dump".into()));
        }
        let mut off = 0;
        while off < n {
            let m = <NetlinkMessage<SockDiagMessage>>::deserialize(&rx[off..n])
                .map_err(|e| bad(format!("sock_diag: an answer that does not parse: {e}")))?;
            let len = m.header.length as usize;
            match m.payload {
                NetlinkPayload::Done(_) => return Ok(found),
                NetlinkPayload::Error(e) => {
                    return Err(e.code.map_or_else(
                        || bad("sock_diag error".into()),
                        |c| io::Error::from_raw_os_error(-c.get()),
                    ))
                }
                NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r)) => {
                    let id = &r.header.socket_id;
                    if id.source_port == local.port()
                        && id.destination_port == remote.port()
                        && canon(id.source_address) == canon(local.ip())
                        && canon(id.destination_address) == canon(remote.ip())
                    {
                        found = Some(id.clone());
                    }
                }
                _ => {}
            }
            if len == 0 {
                break;
            }
            off += len;
        }
    }
}

/// Abort the TCP socket `local` -> `remote` (a subflow) of this network namespace. `Ok(false)`:
/// no such socket (already gone). Errors: the kernel's refusal (EPERM without
/// CAP_NET_ADMIN, EOPNOTSUPP without `CONFIG_INET_DIAG_DESTROY`).
pub fn destroy(local: SocketAddr, remote: SocketAddr) -> io::Result<bool> {
    let mut sock = open()?;
    let Some(id) = find(&mut sock, local, remote)? else {
        return Ok(false);
    };
    let family = if id.source_address.is_ipv4() {
        AF_INET
    } else {
        AF_INET6
    };
    let mut hdr = NetlinkHeader::default();
    hdr.flags = NLM_F_REQUEST | NLM_F_ACK;
    hdr.sequence_number = 2;
    let payload = SockDiagDestroy::new(request(family, StateFlags::all(), id));
    let mut msg = NetlinkMessage::new(hdr, NetlinkPayload::from(payload));
    msg.finalize();
    let mut buf = vec![0; msg.buffer_len()];
    msg.serialize(&mut buf[..]);
    sock.send(&buf, 0)?;
    let mut rx = vec![0u8; 1 << 12];
    let n = sock.recv(&mut &mut rx[..], 0)?;
    let m = <NetlinkMessage<SockDiagDestroy>>::deserialize(&rx[..n])
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("sock_diag: {e}")))?;
    match m.payload {
        NetlinkPayload::Error(e) => match e.code {
            None => Ok(true),
            Some(c) if -c.get() == libc::ENOENT => Ok(false),
            Some(c) => Err(io::Error::from_raw_os_error(-c.get())),
        },
        _ => Ok(true),
    }
}

/// The device the TCP socket `local` -> `remote` of this network namespace is bound to, by
/// the kernel's exact lookup (no dump): `Ok(Some(0))` for a socket bound to no device (it
/// leaves where the routes say), `Ok(Some(i))` for one bound to `dif`, `Ok(None)` when the
/// lookup through `dif` finds none (gone, or bound to another device: the kernel's lookup
/// matches a bound socket only through its own device).
pub fn bound_dev(local: SocketAddr, remote: SocketAddr, dif: u32) -> io::Result<Option<u32>> {
    let sock = open()?;
    let (l, r) = (canon(local.ip()), canon(remote.ip()));
    let family = if r.is_ipv4() { AF_INET } else { AF_INET6 };
    let mut id = if family == AF_INET {
        SocketId::new_v4()
    } else {
        SocketId::new_v6()
    };
    id.source_address = l;
    id.destination_address = r;
    id.source_port = local.port();
    id.destination_port = remote.port();
    id.interface_id = dif;
    // INET_DIAG_NOCOOKIE: match by addresses and ports only.
    id.cookie = [0xff; 8];
    let mut hdr = NetlinkHeader::default();
    hdr.flags = NLM_F_REQUEST;
    hdr.sequence_number = 3;
    let mut msg = NetlinkMessage::new(hdr, request(family, StateFlags::all(), id).into());
    msg.finalize();
    let mut buf = vec![0; msg.buffer_len()];
    msg.serialize(&mut buf[..]);
    sock.send(&buf, 0)?;
    let mut rx = vec![0u8; 1 << 12];
    let n = sock.recv(&mut &mut rx[..], 0)?;
    let m = <NetlinkMessage<SockDiagMessage>>::deserialize(&rx[..n])
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("sock_diag: {e}")))?;
    match m.payload {
        NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r)) => {
            Ok(Some(r.header.socket_id.interface_id))
        }
        NetlinkPayload::Error(e) => match e.code.map(|c| -c.get()) {
            Some(libc::ENOENT) => Ok(None),
            Some(c) => Err(io::Error::from_raw_os_error(c)),
            None => Ok(None),
        },
        _ => Ok(None),
    }
}
