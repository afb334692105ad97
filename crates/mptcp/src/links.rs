//! The local links as nena watches them: which local addresses are usable (present on an
//! interface that is up and has carrier), and rtnetlink's notifications of changes, read as
//! wake-ups. Shared by the subflow recovery and the in-kernel PM's metered paths.

use netlink_sys::Socket;
use std::collections::HashSet;
use std::io;
use std::net::IpAddr;

/// rtnetlink multicast groups (legacy bitmask form): link, IPv4/IPv6 addresses, IPv4/IPv6
/// routes.
pub(crate) const RTMGRP_LINK: u32 = 0x1;
pub(crate) const RTMGRP_IPV4_IFADDR: u32 = 0x10;
pub(crate) const RTMGRP_IPV4_ROUTE: u32 = 0x40;
pub(crate) const RTMGRP_IPV6_IFADDR: u32 = 0x100;
pub(crate) const RTMGRP_IPV6_ROUTE: u32 = 0x400;

/// The local addresses that are present on an interface that is up and has carrier.
pub(crate) fn usable_addresses() -> io::Result<HashSet<IpAddr>> {
    use nix::net::if_::InterfaceFlags as F;
    let mut out = HashSet::new();
    for ifa in nix::ifaddrs::getifaddrs().map_err(io::Error::from)? {
        if !ifa.flags.contains(F::IFF_UP) || !ifa.flags.contains(F::IFF_RUNNING) {
            continue;
        }
        let Some(a) = ifa.address else { continue };
        if let Some(v4) = a.as_sockaddr_in() {
            out.insert(IpAddr::V4(v4.ip()));
        } else if let Some(v6) = a.as_sockaddr_in6() {
            out.insert(IpAddr::V6(v6.ip()));
        }
    }
    Ok(out)
}

/// Read every queued rtnetlink notification; true if there was any (or some were lost).
pub(crate) fn drain_rtnl(sock: &Socket) -> bool {
    let mut buf = vec![0u8; 16384];
    let mut any = false;
    for _ in 0..1024 {
        match sock.recv(&mut &mut buf[..], 0) {
            Ok(_) => any = true,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return any,
            // ENOBUFS: notifications were lost; the rescan this triggers covers them.
            Err(_) => any = true,
        }
    }
    any
}

/// A non-blocking rtnetlink socket subscribed to link, address and route notifications of
/// the calling thread's network namespace.
pub(crate) fn subscribe() -> io::Result<Socket> {
    use netlink_sys::{protocols::NETLINK_ROUTE, SocketAddr as NlAddr};
    let mut rtnl = Socket::new(NETLINK_ROUTE)?;
    rtnl.bind(&NlAddr::new(
        0,
        RTMGRP_LINK
            | RTMGRP_IPV4_IFADDR
            | RTMGRP_IPV6_IFADDR
            | RTMGRP_IPV4_ROUTE
            | RTMGRP_IPV6_ROUTE,
    ))?;
    rtnl.set_non_blocking(true)?;
    Ok(rtnl)
}
