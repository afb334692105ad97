//! Closing one subflow of a connection whose path manager is the kernel's: the subflow is a
//! TCP socket of the host, so `sock_diag` (`SOCK_DESTROY`, what `ss -K` sends) can abort it
//! like any other; the MPTCP connection goes on over its other subflows. The userspace path
//! manager has its own command for this (`SUBFLOW_DESTROY`); the in-kernel one offers none.
//!
//! Needs `CAP_NET_ADMIN` and a kernel built with `CONFIG_INET_DIAG_DESTROY`; without either
//! the kernel refuses (EPERM / EOPNOTSUPP) and the caller must fail closed.
//!
//! The subflows of one connection are found by its token ([`subflows_of`]: the MPTCP part of
//! each TCP socket's `INET_DIAG_ULP_INFO`, which names the token, so a subflow whose
//! addresses `MPTCP_FULL_INFO` does not give is found all the same), and whether a
//! connection still exists by the MPTCP diag's exact lookup of its token ([`TokenWatch`]).
//!
//! Also [`bound_dev`]: which interface a subflow is bound to (`SO_BINDTODEVICE`, or the
//! interface index of `SUBFLOW_CREATE` and of an endpoint's `dev`), read the same way and
//! without any privilege: the gate decides a subflow's trust by the interface it leaves by.

use netlink_packet_core::{
    NetlinkDeserializable, NetlinkHeader, NetlinkMessage, NetlinkPayload, NetlinkSerializable,
    NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST,
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

/// One request that has one answer (not a dump): sent, and its answer read and parsed.
fn exchange<I>(sock: &Socket, flags: u16, seq: u32, payload: I) -> io::Result<NetlinkMessage<I>>
where
    I: NetlinkSerializable + NetlinkDeserializable,
{
    let mut hdr = NetlinkHeader::default();
    hdr.flags = flags;
    hdr.sequence_number = seq;
    let mut msg = NetlinkMessage::new(hdr, NetlinkPayload::InnerMessage(payload));
    msg.finalize();
    let mut buf = vec![0; msg.buffer_len()];
    msg.serialize(&mut buf[..]);
    sock.send(&buf, 0)?;
    let mut rx = vec![0u8; 1 << 12];
    let n = sock.recv(&mut &mut rx[..], 0)?;
    <NetlinkMessage<I>>::deserialize(&rx[..n])
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("sock_diag: {e}")))
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

/// The socket families to look for a TCP socket to `remote` in, as `remote` is spelt: an
/// IPv4 address among IPv4 sockets (as before: nothing more is asked about an IPv4-only
/// host's subflows); an IPv4-mapped IPv6 address, as `MPTCP_FULL_INFO` spells the initial
/// subflow of a dual-stack MPTCP socket, among IPv6 sockets first, then IPv4 ones; any
/// other IPv6 address among IPv6 sockets.
pub fn families_for(remote: IpAddr) -> &'static [u8] {
    match remote {
        IpAddr::V4(_) => &[AF_INET],
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => &[AF_INET6, AF_INET],
        IpAddr::V6(_) => &[AF_INET6],
    }
}

/// The kernel's identity (interface and cookie included) of the TCP socket `local` ->
/// `remote` in this network namespace, if there is one, whatever its family
/// ([`families_for`]; addresses compared IPv4-mapped or not).
fn find(sock: &mut Socket, local: SocketAddr, remote: SocketAddr) -> io::Result<Option<SocketId>> {
    for &family in families_for(remote.ip()) {
        if let Some(id) = find_in(sock, family, local, remote)? {
            return Ok(Some(id));
        }
    }
    Ok(None)
}

/// [`find`] in the sockets of one family.
fn find_in(
    sock: &mut Socket,
    family: u8,
    local: SocketAddr,
    remote: SocketAddr,
) -> io::Result<Option<SocketId>> {
    let mut found = None;
    dump(sock, family, ExtensionFlags::empty(), |r| {
        let id = &r.header.socket_id;
        if id.source_port == local.port()
            && id.destination_port == remote.port()
            && canon(id.source_address) == canon(local.ip())
            && canon(id.destination_address) == canon(remote.ip())
        {
            found = Some(id.clone());
        }
    })?;
    Ok(found)
}

/// Every TCP socket of one family in this network namespace but listeners, with the
/// attributes `ext` asks for, each handed to `each`.
fn dump(
    sock: &mut Socket,
    family: u8,
    ext: ExtensionFlags,
    mut each: impl FnMut(&netlink_packet_sock_diag::inet::InetResponse),
) -> io::Result<()> {
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
    let mut req = request(family, states, id);
    if let SockDiagMessage::InetRequest(r) = &mut req {
        r.extensions = ext;
    }
    let mut msg = NetlinkMessage::new(hdr, req.into());
    msg.finalize();
    let mut buf = vec![0; msg.buffer_len()];
    msg.serialize(&mut buf[..]);
    sock.send(&buf, 0)?;
    let bad = |w: String| io::Error::new(io::ErrorKind::InvalidData, w);
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
                NetlinkPayload::Done(_) => return Ok(()),
                NetlinkPayload::Error(e) => {
                    return Err(e.code.map_or_else(
                        || bad("sock_diag error".into()),
                        |c| io::Error::from_raw_os_error(-c.get()),
                    ))
                }
                NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r)) => each(&r),
                _ => {}
            }
            if len == 0 {
                break;
            }
            off += len;
        }
    }
}

/// One subflow of a connection as `sock_diag` lists it (see [`subflows_of`]).
#[derive(Debug, Clone)]
pub struct DiagSubflow {
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// The device it is bound to (0: none).
    pub ifindex: u32,
    family: u8,
    id: SocketId,
}

/// `INET_DIAG_ULP_INFO` and, nested in it, `INET_ULP_INFO_MPTCP` and the subflow's local
/// token (`MPTCP_SUBFLOW_ATTR_TOKEN_LOC`), from `<linux/inet_diag.h>` and `<linux/mptcp.h>`.
const INET_DIAG_ULP_INFO: u16 = 19;
const INET_ULP_INFO_MPTCP: u16 = 3;
const MPTCP_SUBFLOW_ATTR_TOKEN_LOC: u16 = 2;
const NLA_TYPE_MASK: u16 = 0x3fff;

/// The value of the attribute `kind` among the attributes in `buf`.
fn nla_value(buf: &[u8], kind: u16) -> Option<Vec<u8>> {
    netlink_packet_core::NlasIterator::new(buf)
        .filter_map(Result::ok)
        .find(|a| a.kind() & NLA_TYPE_MASK == kind)
        .map(|a| a.value().to_vec())
}

/// The local MPTCP token of a TCP socket's diag answer: `None` for a socket that is no
/// MPTCP subflow (or a kernel that does not say: the ULP's info needs CAP_NET_ADMIN).
fn subflow_token(r: &netlink_packet_sock_diag::inet::InetResponse) -> Option<u32> {
    use netlink_packet_core::Nla as _;
    use netlink_packet_sock_diag::inet::nlas::Nla;
    let ulp = r.nlas.iter().find_map(|a| match a {
        Nla::Other(o) if o.kind() & NLA_TYPE_MASK == INET_DIAG_ULP_INFO => {
            let mut v = vec![0u8; o.value_len()];
            o.emit_value(&mut v);
            Some(v)
        }
        _ => None,
    })?;
    let mptcp = nla_value(&ulp, INET_ULP_INFO_MPTCP)?;
    let tok = nla_value(&mptcp, MPTCP_SUBFLOW_ATTR_TOKEN_LOC)?;
    Some(u32::from_ne_bytes(tok.get(..4)?.try_into().ok()?))
}

/// Every subflow (TCP socket) of the MPTCP connection with local `token` in this network
/// namespace, of either family, whatever its addresses: what the kernel names the token
/// of in each socket's ULP info. Needs CAP_NET_ADMIN (without it the kernel leaves the
/// token out, and none is found).
pub fn subflows_of(token: u32) -> io::Result<Vec<DiagSubflow>> {
    let mut sock = open()?;
    let mut out = Vec::new();
    for family in [AF_INET, AF_INET6] {
        dump(&mut sock, family, ExtensionFlags::INFO, |r| {
            if subflow_token(r) == Some(token) {
                let id = &r.header.socket_id;
                out.push(DiagSubflow {
                    local: SocketAddr::new(canon(id.source_address), id.source_port),
                    remote: SocketAddr::new(canon(id.destination_address), id.destination_port),
                    ifindex: id.interface_id,
                    family,
                    id: id.clone(),
                });
            }
        })?;
    }
    Ok(out)
}

/// A subflow's TCP state as `sock_diag` reports it ([`subflow_states`]): enough to tell
/// whether it makes progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubflowState {
    /// The local token of the MPTCP connection it belongs to.
    pub token: u32,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// Bytes written and not yet acknowledged (`idiag_wqueue`).
    pub unacked_bytes: u32,
    /// Milliseconds since the last ACK, and since the last data, received.
    pub last_ack_recv_ms: u32,
    pub last_data_recv_ms: u32,
    /// Payload bytes acknowledged / received so far (`tcpi_bytes_acked`, `_received`).
    pub bytes_acked: u64,
    pub bytes_received: u64,
    /// The retransmission timeout, microseconds (`tcpi_rto`).
    pub rto_us: u32,
}

/// Every MPTCP subflow of this network namespace with its TCP state (one dump per family
/// with `INET_DIAG_INFO`). Needs CAP_NET_ADMIN for the tokens (without it none is found).
pub fn subflow_states() -> io::Result<Vec<SubflowState>> {
    use netlink_packet_sock_diag::inet::nlas::Nla;
    let mut sock = open()?;
    let mut out = Vec::new();
    for family in [AF_INET, AF_INET6] {
        dump(&mut sock, family, ExtensionFlags::INFO, |r| {
            let Some(token) = subflow_token(r) else {
                return;
            };
            let Some(info) = r.nlas.iter().find_map(|a| match a {
                Nla::TcpInfo(i) => Some(i),
                _ => None,
            }) else {
                return;
            };
            let id = &r.header.socket_id;
            out.push(SubflowState {
                token,
                local: SocketAddr::new(canon(id.source_address), id.source_port),
                remote: SocketAddr::new(canon(id.destination_address), id.destination_port),
                unacked_bytes: r.header.send_queue,
                last_ack_recv_ms: info.last_ack_recv,
                last_data_recv_ms: info.last_data_recv,
                bytes_acked: info.bytes_acked,
                bytes_received: info.bytes_received,
                rto_us: info.rto,
            });
        })?;
    }
    Ok(out)
}

/// Abort one subflow [`subflows_of`] listed. `Ok(false)`: gone already.
pub fn destroy_subflow(sf: &DiagSubflow) -> io::Result<bool> {
    let sock = open()?;
    destroy_id(&sock, sf.family, sf.id.clone())
}

/// `SOCK_DESTROY` of the socket `id` of `family`.
fn destroy_id(sock: &Socket, family: u8, id: SocketId) -> io::Result<bool> {
    let payload = SockDiagDestroy::new(request(family, StateFlags::all(), id));
    let m = exchange(sock, NLM_F_REQUEST | NLM_F_ACK, 2, payload)?;
    match m.payload {
        NetlinkPayload::Error(e) => match e.code {
            None => Ok(true),
            Some(c) if -c.get() == libc::ENOENT => Ok(false),
            Some(c) => Err(io::Error::from_raw_os_error(-c.get())),
        },
        _ => Ok(true),
    }
}

/// Whether an MPTCP connection still exists, by its local token: the MPTCP diag's exact
/// lookup (`mptcp_diag_dump_one`, which finds the connection in the kernel's token table)
/// through a `sock_diag` socket of the connection's network namespace, opened once.
#[derive(Debug)]
pub struct TokenWatch {
    sock: Socket,
}

/// `IPPROTO_MPTCP`, which does not fit `inet_diag_req_v2`'s 8-bit protocol: it goes in the
/// `INET_DIAG_REQ_PROTOCOL` attribute.
const IPPROTO_MPTCP: u32 = 262;
const INET_DIAG_REQ_PROTOCOL: u16 = 3;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_ERROR: u16 = 2;

impl TokenWatch {
    /// A watch in the network namespace of the socket `fd` (`SIOCGSKNS`): opened here when
    /// this thread is in it, else on a short-lived thread that enters it (CAP_SYS_ADMIN).
    pub fn of_socket(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<TokenWatch> {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        const SIOCGSKNS: libc::c_ulong = 0x894C;
        // SAFETY: SIOCGSKNS takes no argument and returns a new descriptor (or -1).
        let ns = unsafe { libc::ioctl(fd.as_raw_fd(), SIOCGSKNS as _) };
        if ns < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor the kernel just opened for us, owned from here on.
        let ns = unsafe { OwnedFd::from_raw_fd(ns) };
        let theirs = nix::sys::stat::fstat(&ns)?.st_ino;
        let ours = std::fs::metadata("/proc/thread-self/ns/net")
            .map(|m| std::os::unix::fs::MetadataExt::ino(&m))?;
        if theirs == ours {
            return Ok(TokenWatch { sock: open()? });
        }
        std::thread::scope(|s| {
            s.spawn(|| {
                nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET)?;
                Ok(TokenWatch { sock: open()? })
            })
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the thread entering the namespace died")))
        })
    }

    /// A watch in this thread's network namespace.
    pub fn here() -> io::Result<TokenWatch> {
        Ok(TokenWatch { sock: open()? })
    }

    /// Whether the connection with local `token` still exists.
    pub fn alive(&self, token: u32) -> io::Result<bool> {
        // nlmsghdr, inet_diag_req_v2 (family, protocol, ext, pad, states, sockid with the
        // token in idiag_cookie[0]), then the INET_DIAG_REQ_PROTOCOL attribute.
        let mut m = Vec::with_capacity(16 + 56 + 8);
        m.extend_from_slice(&(16u32 + 56 + 8).to_ne_bytes());
        m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        m.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
        m.extend_from_slice(&7u32.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&[AF_INET, IPPROTO_TCP, 0, 0]);
        m.extend_from_slice(&u32::MAX.to_ne_bytes());
        m.extend_from_slice(&[0u8; 4 + 32 + 4]);
        m.extend_from_slice(&token.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&8u16.to_ne_bytes());
        m.extend_from_slice(&INET_DIAG_REQ_PROTOCOL.to_ne_bytes());
        m.extend_from_slice(&IPPROTO_MPTCP.to_ne_bytes());
        self.sock.send(&m, 0)?;
        let mut rx = vec![0u8; 1 << 12];
        let n = self.sock.recv(&mut &mut rx[..], 0)?;
        if n < 20 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "sock_diag: a short answer to the token lookup",
            ));
        }
        let kind = u16::from_ne_bytes([rx[4], rx[5]]);
        if kind != NLMSG_ERROR {
            return Ok(true);
        }
        match -i32::from_ne_bytes([rx[16], rx[17], rx[18], rx[19]]) {
            libc::ENOENT => Ok(false),
            0 => Ok(true),
            e => Err(io::Error::from_raw_os_error(e)),
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
    destroy_id(&sock, family, id)
}

/// The device the TCP socket `local` -> `remote` of this network namespace is bound to, by
/// the kernel's exact lookup (no dump): `Ok(Some(0))` for a socket bound to no device (it
/// leaves where the routes say), `Ok(Some(i))` for one bound to `dif`, `Ok(None)` when the
/// lookup through `dif` finds none (gone, or bound to another device: the kernel's lookup
/// matches a bound socket only through its own device).
pub fn bound_dev(local: SocketAddr, remote: SocketAddr, dif: u32) -> io::Result<Option<u32>> {
    // The initial subflow of a dual-stack MPTCP socket reaching an IPv4 server is an IPv6
    // socket with IPv4-mapped addresses (so MPTCP_FULL_INFO spells them): asked among IPv6
    // sockets, then IPv4 ones; plain IPv4 addresses among IPv4 sockets only.
    for &family in families_for(remote.ip()) {
        if let Some(i) = bound_dev_in(family, local, remote, dif)? {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

/// [`bound_dev`] among the sockets of one family.
fn bound_dev_in(
    family: u8,
    local: SocketAddr,
    remote: SocketAddr,
    dif: u32,
) -> io::Result<Option<u32>> {
    let sock = open()?;
    let (mut l, mut r) = (canon(local.ip()), canon(remote.ip()));
    let mut id = if family == AF_INET {
        SocketId::new_v4()
    } else {
        // IPv4 addresses of an IPv6 socket are IPv4-mapped
        let mapped = |a: IpAddr| match a {
            IpAddr::V4(v4) => IpAddr::V6(v4.to_ipv6_mapped()),
            v6 => v6,
        };
        (l, r) = (mapped(l), mapped(r));
        SocketId::new_v6()
    };
    id.source_address = l;
    id.destination_address = r;
    id.source_port = local.port();
    id.destination_port = remote.port();
    id.interface_id = dif;
    // INET_DIAG_NOCOOKIE: match by addresses and ports only.
    id.cookie = [0xff; 8];
    let m = exchange(
        &sock,
        NLM_F_REQUEST,
        3,
        request(family, StateFlags::all(), id),
    )?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn a_mapped_remote_is_looked_for_in_both_families() {
        assert_eq!(families_for("198.18.3.2".parse().unwrap()), &[AF_INET]);
        assert_eq!(
            families_for("::ffff:198.18.3.2".parse().unwrap()),
            &[AF_INET6, AF_INET]
        );
        assert_eq!(families_for("2001:2:0:3::2".parse().unwrap()), &[AF_INET6]);
    }

    /// The IPv4 connection of an IPv6 socket, named by its IPv4-mapped addresses as
    /// `MPTCP_FULL_INFO` lists them, is found (its device) and aborted (as root:
    /// SOCK_DESTROY needs CAP_NET_ADMIN).
    #[test]
    fn a_mapped_connection_is_destroyed_by_its_ipv4_addresses() {
        let Ok(l) = std::net::TcpListener::bind("[::]:0") else {
            eprintln!("no IPv6 here: nothing to check");
            return;
        };
        let port = l.local_addr().unwrap().port();
        let c = socket2::Socket::new(socket2::Domain::IPV6, socket2::Type::STREAM, None).unwrap();
        c.set_only_v6(false).unwrap();
        let to: SocketAddr = format!("[::ffff:127.0.0.1]:{port}").parse().unwrap();
        c.connect(&to.into()).unwrap();
        let mut c: std::net::TcpStream = c.into();
        let (_s, _) = l.accept().unwrap();
        let local = c.local_addr().unwrap();
        assert!(
            matches!(local.ip(), IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some()),
            "{local}"
        );
        // bound to no device: found through none
        assert_eq!(bound_dev(local, to, 0).unwrap(), Some(0));
        match destroy(local, to) {
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                eprintln!("not root: SOCK_DESTROY refused, nothing more to check");
            }
            r => {
                assert!(r.unwrap(), "the mapped socket was found");
                let mut b = [0u8; 1];
                assert!(c.read(&mut b).is_err(), "the client socket was aborted");
            }
        }
    }

    /// A loopback MPTCP connection (as root: the ULP info that names the token needs
    /// CAP_NET_ADMIN): its subflow is found by its token, and the token is known to exist
    /// while the connection does and not after its reset.
    #[test]
    #[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
    fn a_connection_s_subflows_are_found_by_token_until_it_is_gone() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("not root: the kernel hides the token, nothing to check");
            return;
        }
        let Ok(l) = crate::listen("127.0.0.1:0".parse().unwrap(), None) else {
            eprintln!("no MPTCP here: nothing to check");
            return;
        };
        let to = l.local_addr().unwrap();
        let s = socket2::Socket::new(
            socket2::Domain::IPV4,
            socket2::Type::STREAM,
            Some(socket2::Protocol::MPTCP),
        )
        .unwrap();
        s.connect(&to.into()).unwrap();
        let c: std::net::TcpStream = s.into();
        let (_srv, _) = l.accept().unwrap();
        let token = crate::info(std::os::fd::AsFd::as_fd(&c)).unwrap().token;
        let found = subflows_of(token).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].local, c.local_addr().unwrap());
        assert_eq!(found[0].remote, to);
        assert!(subflows_of(token ^ 1).unwrap().is_empty());
        let w = TokenWatch::of_socket(std::os::fd::AsFd::as_fd(&c)).unwrap();
        assert!(w.alive(token).unwrap());
        crate::sockopt::disconnect(std::os::fd::AsFd::as_fd(&c)).unwrap();
        assert!(!w.alive(token).unwrap(), "the token outlived the reset");
        assert!(subflows_of(token).unwrap().is_empty());
    }
}
