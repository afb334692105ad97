//! The few traffic-control queries the loader needs that libbpf does not offer: whether a
//! device has a clsact qdisc and how many filters sit on it (rtnetlink `RTM_GETQDISC` and
//! `RTM_GETTFILTER` dumps, through the rust-netlink crates).

use anyhow::{anyhow, Context, Result};
use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::tc::{TcAttribute, TcHandle, TcHeader, TcMessage};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

fn open() -> Result<Socket> {
    let mut sock = Socket::new(NETLINK_ROUTE).context("opening an rtnetlink socket")?;
    sock.bind_auto().context("binding the rtnetlink socket")?;
    sock.connect(&SocketAddr::new(0, 0))
        .context("connecting the rtnetlink socket")?;
    Ok(sock)
}

/// Device `idx` has a clsact qdisc.
pub fn has_clsact(idx: u32) -> Result<bool> {
    let mut sock = open()?;
    let header = TcHeader {
        index: idx as i32,
        ..Default::default()
    };
    let mut found = false;
    dump(
        &mut sock,
        RouteNetlinkMessage::GetQueueDiscipline(TcMessage::from_parts(header, vec![])),
        1,
        |m| {
            if let RouteNetlinkMessage::NewQueueDiscipline(q) = m {
                let kind = q
                    .attributes
                    .iter()
                    .any(|a| matches!(a, TcAttribute::Kind(k) if k == "clsact"));
                if kind && q.header.index == idx as i32 {
                    found = true;
                }
            }
        },
    )?;
    Ok(found)
}

/// Filter messages in the dumps of the clsact qdisc of device `idx`, ingress and egress
/// together: 0 when no filter is left, or when the device has no clsact qdisc.
pub fn clsact_filters(idx: u32) -> Result<usize> {
    let mut sock = open()?;
    let mut n = 0;
    for (seq, minor) in [(2, TcHandle::MIN_INGRESS), (3, TcHandle::MIN_EGRESS)] {
        let header = TcHeader {
            index: idx as i32,
            parent: TcHandle {
                major: u16::MAX,
                minor,
            },
            ..Default::default()
        };
        let req = RouteNetlinkMessage::GetTrafficFilter(TcMessage::from_parts(header, vec![]));
        // one message per filter (a classifier's head is listed as well: only "none"
        // against "some" matters here)
        let r = dump(&mut sock, req, seq, |m| {
            if matches!(m, RouteNetlinkMessage::NewTrafficFilter(_)) {
                n += 1;
            }
        });
        match r {
            Ok(()) => {}
            // no clsact qdisc on the device: no filters
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOENT)) => {}
            Err(e) => return Err(anyhow!(e).context("dumping the clsact filters")),
        }
    }
    Ok(n)
}

/// Send one dump request and hand every message of the answer to `each`.
fn dump(
    sock: &mut Socket,
    req: RouteNetlinkMessage,
    seq: u32,
    mut each: impl FnMut(RouteNetlinkMessage),
) -> std::io::Result<()> {
    let bad = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
    let mut nh = NetlinkHeader::default();
    nh.flags = NLM_F_REQUEST | NLM_F_DUMP;
    nh.sequence_number = seq;
    let mut msg = NetlinkMessage::new(nh, NetlinkPayload::from(req));
    msg.finalize();
    let mut buf = vec![0u8; msg.buffer_len()];
    msg.serialize(&mut buf);
    sock.send(&buf, 0)?;
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
            if m.header.sequence_number != seq {
                continue;
            }
            match m.payload {
                NetlinkPayload::InnerMessage(inner) => each(inner),
                NetlinkPayload::Done(_) => return Ok(()),
                NetlinkPayload::Error(e) => {
                    return match e.code {
                        None => Ok(()), // an acknowledgement
                        Some(c) => Err(std::io::Error::from_raw_os_error(-c.get())),
                    };
                }
                _ => {}
            }
        }
    }
}
