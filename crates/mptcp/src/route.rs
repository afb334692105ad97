//! Which way the host would send a packet: a route lookup through rtnetlink
//! (`RTM_GETROUTE`, what `ip route get [fibmatch] DST [oif DEV]` asks), used before a
//! connection is opened to check that the trusted interface has a route to the server, and
//! to name, when it has none, the interface the host would have used instead.
//!
//! With `RTM_F_FIB_MATCH` the kernel answers with the routing-table entry that matches, and
//! refuses (`ENETUNREACH`/`EHOSTUNREACH`) when no entry leads through the requested output
//! interface. A plain lookup with an output interface would instead pretend the destination
//! is on that link (the kernel's "assume on-link" rule) and the connection would wait for a
//! neighbour that never answers.

use netlink_packet_core::{NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_REQUEST};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteHeader, RouteMessage,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use serde::Serialize;
use std::io;
use std::net::IpAddr;

/// The routing-table entry a lookup matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Route {
    /// Output interface index (None for a route without one, e.g. `unreachable`).
    pub oif: Option<u32>,
    /// The next hop, for a route through a gateway.
    pub gateway: Option<IpAddr>,
    /// The route's destination prefix (None with length 0: a default route).
    pub dst: Option<(IpAddr, u8)>,
}

impl Route {
    /// The output interface's name, if it still exists.
    pub fn dev(&self) -> Option<String> {
        let idx = self.oif?;
        let mut buf = [0u8; libc::IF_NAMESIZE];
        // SAFETY: `buf` has IF_NAMESIZE bytes, as if_indextoname requires.
        let p = unsafe { libc::if_indextoname(idx, buf.as_mut_ptr().cast()) };
        if p.is_null() {
            return None;
        }
        let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
        Some(String::from_utf8_lossy(&buf[..end]).into_owned())
    }

    /// `default via 198.18.2.1 dev untrusted` / `198.18.3.0/24 dev eth0`, as `ip route` says it.
    pub fn describe(&self) -> String {
        let mut s = match self.dst {
            None => "default".to_string(),
            Some((a, l)) => format!("{a}/{l}"),
        };
        if let Some(g) = self.gateway {
            s += &format!(" via {g}");
        }
        if let Some(d) = self.dev() {
            s += &format!(" dev {d}");
        }
        s
    }
}

/// The routing-table entry the host would use to reach `dst` (through `oif` only, when
/// given). `Ok(None)`: no entry leads there (through `oif`).
pub fn lookup(dst: IpAddr, oif: Option<u32>) -> io::Result<Option<Route>> {
    ask(dst, oif, None)
}

/// The interface a packet from the local address `src` to `dst` leaves by, as the kernel
/// routes a socket bound to `src` and to no device (`ip route get DST from SRC`: source
/// rules apply). `Ok(None)`: no route.
pub fn output_iface(src: IpAddr, dst: IpAddr) -> io::Result<Option<u32>> {
    Ok(ask(dst, None, Some(src))?.and_then(|r| r.oif))
}

/// One `RTM_GETROUTE`: with `src`, a plain lookup from that source (the answer is the route
/// the kernel would use, its output interface included); without, a `fibmatch` lookup
/// (the table entry, through `oif` when given).
fn ask(dst: IpAddr, oif: Option<u32>, src: Option<IpAddr>) -> io::Result<Option<Route>> {
    let mut sock = Socket::new(NETLINK_ROUTE)?;
    sock.bind_auto()?;
    sock.connect(&SocketAddr::new(0, 0))?;
    let mut msg = RouteMessage::default();
    msg.header = RouteHeader {
        address_family: if dst.is_ipv4() {
            AddressFamily::Inet
        } else {
            AddressFamily::Inet6
        },
        destination_prefix_length: if dst.is_ipv4() { 32 } else { 128 },
        flags: if src.is_some() {
            RouteFlags::empty()
        } else {
            RouteFlags::FibMatch
        },
        source_prefix_length: match src {
            Some(IpAddr::V4(_)) => 32,
            Some(IpAddr::V6(_)) => 128,
            None => 0,
        },
        ..Default::default()
    };
    msg.attributes
        .push(RouteAttribute::Destination(RouteAddress::from(dst)));
    if let Some(s) = src {
        msg.attributes
            .push(RouteAttribute::Source(RouteAddress::from(s)));
    }
    if let Some(i) = oif {
        msg.attributes.push(RouteAttribute::Oif(i));
    }
    let mut nh = NetlinkHeader::default();
    nh.flags = NLM_F_REQUEST;
    nh.sequence_number = 1;
    let mut req = NetlinkMessage::new(nh, NetlinkPayload::from(RouteNetlinkMessage::GetRoute(msg)));
    req.finalize();
    let mut buf = vec![0u8; req.buffer_len()];
    req.serialize(&mut buf);
    sock.send(&buf, 0)?;
    let bad = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
    loop {
        let (data, _) = sock.recv_from_full()?;
        let mut off = 0;
        while off < data.len() {
            let m = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&data[off..])
                .map_err(|e| bad(format!("bad rtnetlink message: {e}")))?;
            let len = m.header.length as usize;
            if len == 0 {
                return Err(bad("rtnetlink message of length 0".into()));
            }
            off += len;
            match m.payload {
                NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewRoute(r)) => {
                    return Ok(Some(route_of(&r)))
                }
                NetlinkPayload::Error(e) => {
                    return match e.code.map(|c| -c.get()) {
                        None => Ok(None),
                        Some(libc::ENETUNREACH | libc::EHOSTUNREACH | libc::ENODEV) => Ok(None),
                        Some(c) => Err(io::Error::from_raw_os_error(c)),
                    };
                }
                NetlinkPayload::Done(_) => return Ok(None),
                _ => {}
            }
        }
    }
}

fn ip_of(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

fn route_of(r: &RouteMessage) -> Route {
    let mut out = Route {
        oif: None,
        gateway: None,
        dst: None,
    };
    for a in &r.attributes {
        match a {
            RouteAttribute::Oif(i) => out.oif = Some(*i),
            RouteAttribute::Gateway(g) => out.gateway = ip_of(g),
            RouteAttribute::Destination(d) if r.header.destination_prefix_length > 0 => {
                out.dst = ip_of(d).map(|ip| (ip, r.header.destination_prefix_length))
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Loopback always has a route in the local table; through `lo` it matches, and the
    /// answer names `lo`.
    #[test]
    fn loopback_routes_through_lo() {
        let lo = nix::net::if_::if_nametoindex("lo").unwrap();
        let r = lookup("127.0.0.1".parse().unwrap(), Some(lo))
            .unwrap()
            .unwrap();
        assert_eq!(r.oif, Some(lo));
        assert_eq!(r.dev().as_deref(), Some("lo"));
    }

    /// The same lookup in IPv6 (`::1`, no packet sent): the request and the answer's
    /// attributes are the family's own. Skipped where the host has IPv6 disabled.
    #[test]
    fn loopback_routes_through_lo_in_ipv6() {
        if std::fs::read_to_string("/proc/sys/net/ipv6/conf/lo/disable_ipv6")
            .map_or(true, |v| v.trim() != "0")
        {
            eprintln!("skipped: IPv6 disabled on lo");
            return;
        }
        let lo = nix::net::if_::if_nametoindex("lo").unwrap();
        let r = lookup("::1".parse().unwrap(), Some(lo)).unwrap().unwrap();
        assert_eq!(r.oif, Some(lo));
        assert_eq!(r.dev().as_deref(), Some("lo"));
    }
}
