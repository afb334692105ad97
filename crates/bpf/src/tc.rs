//! The TC toolkit of every loader that puts a program on a clsact qdisc (the policy
//! dispatcher, kato-mpc and its strip box, the lab's tamper and forge): [`Filter`], the one
//! hook builder (a filter's handle and priority on a device, ingress or egress), with the
//! query of what is attached there and the one lookup of an attached program's map
//! ([`Filter::attached_map`]); and the few traffic-control queries libbpf does not offer:
//! whether a device has a clsact qdisc and how many filters sit on it (rtnetlink
//! `RTM_GETQDISC` and `RTM_GETTFILTER` dumps, through the rust-netlink crates), the namespace
//! [`lock`], and [`remove_clsact_if_empty`].

use anyhow::{anyhow, bail, Context, Result};
use libbpf_rs::{MapCore, MapHandle, TcHook, TcHookBuilder};
use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::tc::{TcAttribute, TcHandle, TcHeader, TcMessage};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use std::os::fd::{AsFd, BorrowedFd};

/// Where one of nena's TC programs sits on a device's clsact qdisc: its filter's handle and
/// priority (each program family has its own, so they neither replace nor hide each other).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Filter {
    pub handle: u32,
    pub priority: u32,
}

impl Filter {
    /// The hook of this filter on device `idx`, at ingress or egress, for the program `prog`
    /// (attaching replaces an earlier program in the same place).
    pub fn hook(self, prog: BorrowedFd<'_>, idx: u32, ingress: bool) -> TcHook {
        TcHookBuilder::new(prog)
            .ifindex(idx as i32)
            .replace(true)
            .handle(self.handle)
            .priority(self.priority)
            .hook(if ingress {
                libbpf_rs::TC_INGRESS
            } else {
                libbpf_rs::TC_EGRESS
            })
    }

    /// The hook in this place, for a query or detach (which take no program).
    fn place(self, idx: u32, ingress: bool) -> Result<TcHook> {
        let dummy = std::fs::File::open("/dev/null")?;
        Ok(self.hook(dummy.as_fd(), idx, ingress))
    }

    /// The id of the program attached in this place on device `idx` (None: none).
    pub fn query(self, idx: u32, ingress: bool) -> Result<Option<u32>> {
        Ok(self.place(idx, ingress)?.query().ok())
    }

    /// Detaches the program in this place on device `idx`.
    pub fn detach(self, idx: u32, ingress: bool) -> Result<()> {
        Ok(self.place(idx, ingress)?.detach()?)
    }

    /// The program attached in this place on device `idx`, with the ids of its maps (None:
    /// nothing attached, or it went before it could be read).
    pub fn attached(
        self,
        idx: u32,
        ingress: bool,
    ) -> Result<Option<libbpf_rs::query::ProgramInfo>> {
        let Some(id) = self.query(idx, ingress)? else {
            return Ok(None);
        };
        let opts = libbpf_rs::query::ProgInfoQueryOptions::default().include_map_ids(true);
        Ok(libbpf_rs::query::ProgInfoIter::with_query_opts(opts).find(|p| p.id == id))
    }

    /// The map `what` of the program `prog` attached in this place on device `dev` (index
    /// `idx`), for the lab's attackers, whose program and map share the name `what`: None
    /// when nothing is attached there; an error when another program is, or it has no such
    /// map.
    pub fn attached_map(
        self,
        dev: &str,
        idx: u32,
        ingress: bool,
        prog: &str,
        what: &str,
    ) -> Result<Option<MapHandle>> {
        let Some(info) = self.attached(idx, ingress)? else {
            return Ok(None);
        };
        if info.name.to_string_lossy() != prog {
            bail!(
                "the filter on {dev} runs {:?}, not the {what} program",
                info.name
            );
        }
        for mid in info.map_ids {
            let m =
                MapHandle::from_map_id(mid).with_context(|| format!("opening the {what} map"))?;
            if m.name() == what {
                return Ok(Some(m));
            }
        }
        bail!("the {what} program on {dev} has no map `{what}`")
    }
}

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

/// An exclusive lock, among nena's processes, on the traffic-control state of the current
/// network namespace: held while a process reads and changes what it shares with others
/// there (the mpc programs' port registrations and users, whether a clsact qdisc may go).
/// Without it two processes attaching or detaching at once lose each other's
/// registrations, and the last to leave can take the programs (and the qdisc) from under
/// one still running. An `flock` on the namespace itself (its nsfs inode): nothing on
/// disk to leave behind, one lock per namespace, and a process that dies lets go.
#[derive(Debug)]
pub struct NamespaceLock {
    _ns: std::fs::File,
}

/// Takes the [`NamespaceLock`] of the calling thread's network namespace, blocking until no
/// other process (or thread) holds it. Not reentrant: take it once per operation.
pub fn lock() -> Result<NamespaceLock> {
    let ns = std::fs::File::open("/proc/thread-self/ns/net")
        .context("opening the network namespace to lock it")?;
    ns.lock()
        .context("locking the network namespace's traffic-control state")?;
    Ok(NamespaceLock { _ns: ns })
}

/// Removes the clsact qdisc of device `idx` if no filter is left on it (for a caller that
/// created it and took its own filter off; another tool's filters keep it in place). Call
/// it holding the [`lock`], or another nena process may be attaching to it.
pub fn remove_clsact_if_empty(idx: u32) -> Result<()> {
    if clsact_filters(idx)? > 0 {
        return Ok(());
    }
    let dummy = std::fs::File::open("/dev/null")?;
    let mut h = libbpf_rs::TcHookBuilder::new(dummy.as_fd())
        .ifindex(idx as i32)
        .hook(libbpf_rs::TC_INGRESS | libbpf_rs::TC_EGRESS);
    match h.destroy() {
        Ok(()) => Ok(()),
        // gone already (removed by hand, or the device went away)
        Err(e) if matches!(e.kind(), libbpf_rs::ErrorKind::NotFound) => Ok(()),
        Err(e) => Err(anyhow!(e).context("removing the clsact qdisc nena created")),
    }
}
