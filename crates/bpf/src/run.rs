//! `nena run`'s BPF (`bpf/run/run.bpf.c`): loads the object through its skeleton and attaches
//! it to one cgroup (v2).
//!
//! - [`Redirect`]: `connect4`/`connect6` send every TCP connect of the cgroup to the local
//!   nena proxy and record the original destination by socket cookie; a `sockops` program,
//!   when the SYN leaves, moves it to a map keyed by the client's local address and port,
//!   which is what the proxy sees as its peer: [`Redirect::take`] looks it up and deletes it.
//!   For UDP the same hooks and `sendmsg4`/`sendmsg6` send DNS (port 53) to the DNS
//!   responder and other datagrams to the datagram relay (or refuse them: [`Udp::block`]),
//!   `recvmsg4`/`recvmsg6` give answers their original source back, and a
//!   `cgroup_skb/egress` program drops every packet of the cgroup to a non-loopback
//!   destination (counted: [`RunStats::dropped`]); [`Redirect::relay_dst`] says which
//!   destination a datagram arriving at the relay was sent to. `connect_unix` and
//!   `sendmsg_unix` refuse AF_UNIX connects and datagrams to the paths given
//!   ([`Redirect::attach`]'s `refused_unix`: the resolvers outside nena).
//! - [`MptcpOnly`]: `fmod_ret/update_socket_protocol` turns the TCP sockets created by the
//!   cgroup's tasks into MPTCP sockets (what mptcpize does, without LD_PRELOAD).
//!
//! Nothing is pinned. The cgroup programs are attached with BPF_PROG_ATTACH, not as links:
//! they stay attached when this value is dropped or the process ends, however it ends (the
//! kernel holds them for the cgroup), until [`Redirect::detach`] or the cgroup's removal, so
//! that no process of the cgroup ever runs unredirected (`nena run` fails closed when it is
//! killed). The fmod_ret program of [`MptcpOnly`] is a link: it goes with the process.

use crate::skel::run::{types, RunSkelBuilder};
use anyhow::{anyhow, Context, Result};
use libbpf_rs::libbpf_sys;
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, MapHandle};
use std::mem::MaybeUninit;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use zerocopy::{FromBytes, IntoBytes};

/// `struct run_cfg`: addresses and ports in network order.
#[repr(C)]
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::Immutable,
    zerocopy::KnownLayout,
)]
struct RunCfg {
    cgroup_id: u64,
    proxy4: [u8; 4],
    proxy6: [u8; 16],
    port4: [u8; 2],
    port6: [u8; 2],
    dns4: [u8; 2],
    dns6: [u8; 2],
    udp4: [u8; 2],
    udp6: [u8; 2],
    udp_block: u32,
    pad: u32,
}
crate::chains::abi::same_layout!(RunCfg = types::run_cfg; cgroup_id => cgroup_id, proxy4 => proxy4,
    proxy6 => proxy6, port4 => port4, port6 => port6, dns4 => dns4, dns6 => dns6, udp4 => udp4,
    udp6 => udp6, udp_block => udp_block, pad => pad);

/// Where the cgroup's UDP goes (`nena run`): the DNS responder's and the datagram relay's
/// sockets (loopback, one per family; `None`: that family's datagrams are refused), and
/// whether every datagram but DNS is refused (`--udp block`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Udp {
    pub dns4: Option<SocketAddr>,
    pub dns6: Option<SocketAddr>,
    pub relay4: Option<SocketAddr>,
    pub relay6: Option<SocketAddr>,
    pub block: bool,
}

/// `struct run_dst` / `struct run_peer`: an address (IPv4 mapped) and a port.
#[repr(C)]
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::Immutable,
    zerocopy::KnownLayout,
)]
struct Endpoint {
    addr: [u8; 16],
    /// `run_dst`: network order; `run_peer`: host order.
    port: u16,
    pad: u16,
}
crate::chains::abi::same_layout!(Endpoint = types::run_dst; addr => addr, port => port, pad => pad);
crate::chains::abi::same_layout!(Endpoint = types::run_peer; addr => addr, port => port, pad => pad);

fn mapped(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

fn unmapped(a: [u8; 16]) -> IpAddr {
    let v6 = Ipv6Addr::from(a);
    match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(v6),
    }
}

/// What the programs counted (summed over CPUs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Connects rewritten to the proxy.
    pub redirected: u64,
    /// Connects left alone (loopback or unspecified destinations).
    pub local: u64,
    /// Connects refused (no listener of their family).
    pub refused: u64,
    /// Connections whose original destination was handed to the proxy (sockops).
    pub handed: u64,
    /// Sockets made MPTCP (`--mptcp-only`).
    pub mptcp: u64,
    /// DNS datagrams (and UDP connects to port 53) sent to the responder.
    pub dns: u64,
    /// Other datagrams (and UDP connects) sent to the relay.
    pub udp: u64,
    /// Datagrams (and UDP connects) refused: `--udp block`, or no socket of their family.
    pub udp_refused: u64,
    /// Packets dropped at egress: to a destination outside loopback.
    pub dropped: u64,
    /// AF_UNIX connects and datagrams refused: to a resolver's socket.
    pub unix_refused: u64,
}

/// A program attached to a cgroup with BPF_PROG_ATTACH: its descriptor and attach type.
struct CgroupProg {
    prog: OwnedFd,
    attach_type: libbpf_sys::bpf_attach_type,
}

/// A cgroup and the programs attached to it.
struct CgroupProgs {
    cgroup: OwnedFd,
    progs: Vec<CgroupProg>,
}

impl CgroupProgs {
    /// BPF_PROG_DETACH of each; errors said in the log.
    fn detach(self) {
        for p in self.progs {
            // SAFETY: two live descriptors and an attach type.
            let r = unsafe {
                libbpf_sys::bpf_prog_detach2(
                    p.prog.as_raw_fd(),
                    self.cgroup.as_raw_fd(),
                    p.attach_type,
                )
            };
            if r != 0 {
                log::warn!(
                    "detaching a nena run program: {}",
                    std::io::Error::from_raw_os_error(-r)
                );
            }
        }
    }
}

/// The programs' ids and the maps every mode keeps.
struct Loaded {
    /// The fmod_ret link (`--mptcp-only`).
    links: Vec<Link>,
    /// The cgroup and its programs (redirect): attached until detached or the cgroup is
    /// removed.
    cgroup: std::sync::Mutex<Option<CgroupProgs>>,
    prog_ids: Vec<u32>,
    orig: MapHandle,
    relay: MapHandle,
    stats: MapHandle,
}

impl Loaded {
    fn stats(&self) -> RunStats {
        let mut v = [0u64; 10];
        for (i, slot) in v.iter_mut().enumerate() {
            let key = (i as u32).to_ne_bytes();
            if let Ok(Some(per_cpu)) = self.stats.lookup_percpu(&key, MapFlags::ANY) {
                *slot = per_cpu
                    .iter()
                    .filter_map(|b| u64::read_from_bytes(b.as_slice()).ok())
                    .sum();
            }
        }
        RunStats {
            redirected: v[0],
            local: v[1],
            refused: v[2],
            handed: v[3],
            mptcp: v[4],
            dns: v[5],
            udp: v[6],
            udp_refused: v[7],
            dropped: v[8],
            unix_refused: v[9],
        }
    }

    /// Detaches the cgroup's programs (BPF_PROG_DETACH), once.
    fn detach(&self) {
        let taken = self.cgroup.lock().map(|mut g| g.take());
        if let Ok(Some(c)) = taken {
            c.detach();
        }
    }
}

/// Which programs to load.
enum Which {
    /// The redirect, with the AF_UNIX programs (refusing these paths) or without them.
    Redirect {
        unix: Option<Vec<Vec<u8>>>,
    },
    Mptcp,
}

/// A `run_unix` key: the path's bytes, zero-padded to sun_path's 108.
fn unix_key(path: &[u8]) -> Result<[u8; 108]> {
    let mut k = [0u8; 108];
    if path.is_empty() || path.len() > 107 || path.contains(&0) {
        return Err(anyhow!(
            "{}: not an AF_UNIX path nena run can refuse",
            String::from_utf8_lossy(path)
        ));
    }
    k[..path.len()].copy_from_slice(path);
    Ok(k)
}

fn load(which: Which, cfg: RunCfg, cgroup_fd: i32) -> Result<Loaded> {
    let mut storage = MaybeUninit::uninit();
    let mut b = RunSkelBuilder::default();
    b.obj_builder
        .name("nena_run")
        .context("naming the BPF object")?;
    let mut open = b
        .open(&mut storage)
        .context("opening the nena run object")?;
    let (redirect, unix) = match &which {
        Which::Redirect { unix } => (true, unix.as_ref()),
        Which::Mptcp => (false, None),
    };
    open.progs.nena_run_cu.set_autoload(unix.is_some());
    open.progs.nena_run_su.set_autoload(unix.is_some());
    open.progs.nena_run_c4.set_autoload(redirect);
    open.progs.nena_run_c6.set_autoload(redirect);
    open.progs.nena_run_s4.set_autoload(redirect);
    open.progs.nena_run_s6.set_autoload(redirect);
    open.progs.nena_run_r4.set_autoload(redirect);
    open.progs.nena_run_r6.set_autoload(redirect);
    open.progs.nena_run_eg.set_autoload(redirect);
    open.progs.nena_run_so.set_autoload(redirect);
    open.progs.nena_run_mp.set_autoload(!redirect);
    let skel = open.load().context(if unix.is_some() {
        "loading the nena run programs (cgroup connect4/6, sendmsg4/6, recvmsg4/6, skb \
         egress, sockops, connect_unix, sendmsg_unix: kernel 6.7+)"
    } else if redirect {
        "loading the nena run programs (cgroup connect4/6, sendmsg4/6, recvmsg4/6, skb \
         egress, sockops)"
    } else {
        "loading fmod_ret/update_socket_protocol (a tracing program: the kernel needs BTF, \
         the hook (6.6+) and must allow tracing programs; lockdown or a BPF LSM may refuse them)"
    })?;
    skel.maps
        .run_cfg
        .update(&0u32.to_ne_bytes(), cfg.as_bytes(), MapFlags::ANY)
        .context("configuring the nena run programs")?;
    for path in unix.into_iter().flatten() {
        skel.maps
            .run_unix
            .update(&unix_key(path)?, &[1u8], MapFlags::ANY)
            .context("configuring the AF_UNIX paths nena run refuses")?;
    }
    let mut links = Vec::new();
    let mut prog_ids = Vec::new();
    let mut cgroup = None;
    if redirect {
        // SAFETY: the caller's open descriptor, borrowed for the duplication.
        let cg = unsafe { std::os::fd::BorrowedFd::borrow_raw(cgroup_fd) }
            .try_clone_to_owned()
            .context("duplicating the cgroup's descriptor")?;
        let mut progs = vec![
            // The egress backstop first: from the moment any other program is attached,
            // nothing of the cgroup leaves outside loopback.
            (
                "egress",
                &skel.progs.nena_run_eg,
                libbpf_sys::BPF_CGROUP_INET_EGRESS,
            ),
            (
                "connect4",
                &skel.progs.nena_run_c4,
                libbpf_sys::BPF_CGROUP_INET4_CONNECT,
            ),
            (
                "connect6",
                &skel.progs.nena_run_c6,
                libbpf_sys::BPF_CGROUP_INET6_CONNECT,
            ),
            (
                "sendmsg4",
                &skel.progs.nena_run_s4,
                libbpf_sys::BPF_CGROUP_UDP4_SENDMSG,
            ),
            (
                "sendmsg6",
                &skel.progs.nena_run_s6,
                libbpf_sys::BPF_CGROUP_UDP6_SENDMSG,
            ),
            (
                "recvmsg4",
                &skel.progs.nena_run_r4,
                libbpf_sys::BPF_CGROUP_UDP4_RECVMSG,
            ),
            (
                "recvmsg6",
                &skel.progs.nena_run_r6,
                libbpf_sys::BPF_CGROUP_UDP6_RECVMSG,
            ),
            (
                "sockops",
                &skel.progs.nena_run_so,
                libbpf_sys::BPF_CGROUP_SOCK_OPS,
            ),
        ];
        if unix.is_some() {
            progs.push((
                "connect_unix",
                &skel.progs.nena_run_cu,
                libbpf_sys::BPF_CGROUP_UNIX_CONNECT,
            ));
            progs.push((
                "sendmsg_unix",
                &skel.progs.nena_run_su,
                libbpf_sys::BPF_CGROUP_UNIX_SENDMSG,
            ));
        }
        // Detached again if attaching one of them fails (the cgroup is then still empty:
        // nothing ran unredirected).
        let mut partial = CgroupProgs {
            cgroup: cg,
            progs: Vec::new(),
        };
        for (name, p, attach_type) in progs {
            let prog = p
                .as_fd()
                .try_clone_to_owned()
                .context("duplicating a program's descriptor")?;
            // SAFETY: two live descriptors; BPF_F_ALLOW_MULTI keeps other programs of the
            // cgroup (and the hierarchy's) in place.
            let r = unsafe {
                libbpf_sys::bpf_prog_attach(
                    prog.as_raw_fd(),
                    cgroup_fd,
                    attach_type,
                    libbpf_sys::BPF_F_ALLOW_MULTI,
                )
            };
            if r != 0 {
                let e = std::io::Error::from_raw_os_error(-r);
                partial.detach();
                return Err(anyhow!("attaching the {name} program to the cgroup: {e}"));
            }
            partial.progs.push(CgroupProg { prog, attach_type });
            prog_ids.push(libbpf_rs::Program::id_from_fd(p.as_fd())?);
        }
        cgroup = Some(partial);
    } else {
        let p = &skel.progs.nena_run_mp;
        links.push(p.attach_trace().context(
            "attaching fmod_ret/update_socket_protocol (needs a kernel with that hook, 6.6+)",
        )?);
        prog_ids.push(libbpf_rs::Program::id_from_fd(p.as_fd())?);
    }
    Ok(Loaded {
        links,
        prog_ids,
        cgroup: std::sync::Mutex::new(cgroup),
        orig: MapHandle::try_from(&skel.maps.run_orig)?,
        relay: MapHandle::try_from(&skel.maps.run_relay)?,
        stats: MapHandle::try_from(&skel.maps.run_stats)?,
    })
    // The skeleton's own descriptors close here; the kernel (for the cgroup) and the
    // descriptors kept hold the programs (and through them the maps), the handles the maps
    // user space reads.
}

/// The cgroup id (the inode number of its directory in the cgroup2 file system).
pub fn cgroup_id(dir: &std::path::Path) -> Result<u64> {
    use std::os::unix::fs::MetadataExt;
    Ok(std::fs::metadata(dir)
        .with_context(|| format!("cannot stat {}", dir.display()))?
        .ino())
}

/// The programs' configuration for a proxy on `v4` / `v6` and the cgroup's UDP sockets
/// (each on its family's proxy address).
fn redirect_cfg(v4: Option<SocketAddr>, v6: Option<SocketAddr>, udp: Udp) -> Result<RunCfg> {
    let mut cfg = RunCfg::default();
    let port_on = |a: Option<SocketAddr>, on: Option<SocketAddr>| -> Result<[u8; 2]> {
        match (a, on) {
            (None, _) => Ok([0, 0]),
            (Some(a), Some(l)) if a.ip() == l.ip() => Ok(a.port().to_be_bytes()),
            (Some(a), _) => Err(anyhow!(
                "{a}: a UDP socket of nena run must be on the proxy's loopback address"
            )),
        }
    };
    cfg.dns4 = port_on(udp.dns4, v4)?;
    cfg.dns6 = port_on(udp.dns6, v6)?;
    cfg.udp4 = port_on(udp.relay4, v4)?;
    cfg.udp6 = port_on(udp.relay6, v6)?;
    cfg.udp_block = udp.block as u32;
    if let Some(a) = v4 {
        let IpAddr::V4(ip) = a.ip() else {
            return Err(anyhow!("{a}: the IPv4 listener must be an IPv4 address"));
        };
        cfg.proxy4 = ip.octets();
        cfg.port4 = a.port().to_be_bytes();
    }
    if let Some(a) = v6 {
        let IpAddr::V6(ip) = a.ip() else {
            return Err(anyhow!("{a}: the IPv6 listener must be an IPv6 address"));
        };
        cfg.proxy6 = ip.octets();
        cfg.port6 = a.port().to_be_bytes();
    }
    Ok(cfg)
}

/// The TCP connects of a cgroup, sent to the local proxy (`nena run`).
pub struct Redirect {
    loaded: Loaded,
    unix: bool,
}

impl Redirect {
    /// Attach to the cgroup `cgroup` (an open directory of the cgroup2 file system). The
    /// proxy listens on `v4` (127.0.0.1:PORT) and, if it has one, on `v6` ([::1]:PORT);
    /// connects of a family without a listener are refused. `udp` says where datagrams go
    /// (its sockets on the same loopback addresses as the proxy's). AF_UNIX connects and
    /// datagrams to the paths `refused_unix` are refused (EPERM); a kernel without the
    /// AF_UNIX hooks (before 6.7) gets the rest, said once in the log
    /// ([`Redirect::refuses_unix`] false).
    ///
    /// The programs stay attached when the value is dropped: [`Redirect::detach`] once the
    /// cgroup is empty, or remove the cgroup.
    pub fn attach(
        cgroup: &std::fs::File,
        v4: Option<SocketAddr>,
        v6: Option<SocketAddr>,
        udp: Udp,
        refused_unix: &[&Path],
    ) -> Result<Redirect> {
        use std::os::unix::ffi::OsStrExt;
        let cfg = redirect_cfg(v4, v6, udp)?;
        let paths: Vec<Vec<u8>> = refused_unix
            .iter()
            .map(|p| p.as_os_str().as_bytes().to_vec())
            .collect();
        for p in &paths {
            unix_key(p)?;
        }
        let fd = cgroup.as_raw_fd();
        match load(Which::Redirect { unix: Some(paths) }, cfg, fd) {
            Ok(loaded) => Ok(Redirect { loaded, unix: true }),
            Err(e) => {
                log::warn!(
                    "the kernel refused the AF_UNIX programs (cgroup/connect_unix: 6.7+): CMD's \
                     mount namespace alone hides the resolvers' sockets ({e:#})"
                );
                Ok(Redirect {
                    loaded: load(Which::Redirect { unix: None }, cfg, fd)?,
                    unix: false,
                })
            }
        }
    }

    /// The AF_UNIX programs are attached (the kernel has the hooks).
    pub fn refuses_unix(&self) -> bool {
        self.unix
    }

    /// The original destination of the connection whose client end is `peer` (as the
    /// proxy's accept saw it), removed from the map; `None` if the cgroup's programs did not
    /// redirect it (a process outside the cgroup connecting to the proxy's port).
    pub fn take(&self, peer: SocketAddr) -> Option<SocketAddr> {
        let key = Endpoint {
            addr: mapped(peer.ip()),
            port: peer.port(),
            pad: 0,
        };
        let v = self
            .loaded
            .orig
            .lookup_and_delete(key.as_bytes())
            .ok()
            .flatten()?;
        let d = Endpoint::read_from_bytes(v.as_slice()).ok()?;
        Some(SocketAddr::new(unmapped(d.addr), u16::from_be(d.port)))
    }

    /// The original destination of the datagram the relay received from `peer` (recorded
    /// by the egress program as the datagram left the application); kept, since the same
    /// socket sends again.
    pub fn relay_dst(&self, peer: SocketAddr) -> Option<SocketAddr> {
        let key = Endpoint {
            addr: mapped(peer.ip()),
            port: peer.port(),
            pad: 0,
        };
        let v = self
            .loaded
            .relay
            .lookup(key.as_bytes(), MapFlags::ANY)
            .ok()
            .flatten()?;
        let d = Endpoint::read_from_bytes(v.as_slice()).ok()?;
        Some(SocketAddr::new(unmapped(d.addr), u16::from_be(d.port)))
    }

    /// The ids of the attached programs (egress, connect4/6, sendmsg4/6, recvmsg4/6,
    /// sockops, and connect_unix, sendmsg_unix where the kernel has them).
    pub fn prog_ids(&self) -> &[u32] {
        &self.loaded.prog_ids
    }

    pub fn stats(&self) -> RunStats {
        self.loaded.stats()
    }

    /// Detach the programs from the cgroup (call it once the cgroup is empty: a process
    /// still in it would run unredirected from then on).
    pub fn detach(&self) {
        self.loaded.detach();
    }
}

/// The TCP sockets created in a cgroup become MPTCP (`nena run --mptcp-only`).
pub struct MptcpOnly {
    loaded: Loaded,
}

impl MptcpOnly {
    /// Attach the hook for the cgroup whose directory is `cgroup_dir`.
    pub fn attach(cgroup_dir: &std::path::Path) -> Result<MptcpOnly> {
        let cfg = RunCfg {
            cgroup_id: cgroup_id(cgroup_dir)?,
            ..Default::default()
        };
        // A kernel that refuses tracing programs is expected (the caller falls back): keep
        // libbpf's own report of the refusal off stderr unless debugging.
        let quiet = !log::log_enabled!(log::Level::Debug);
        let prev = quiet.then(|| libbpf_rs::set_print(None));
        let loaded = load(Which::Mptcp, cfg, -1);
        if let Some(prev) = prev {
            libbpf_rs::set_print(prev);
        }
        Ok(MptcpOnly { loaded: loaded? })
    }

    pub fn prog_ids(&self) -> &[u32] {
        &self.loaded.prog_ids
    }

    pub fn stats(&self) -> RunStats {
        self.loaded.stats()
    }

    pub fn detach(self) {
        drop(self.loaded.links);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn udp_sockets_go_into_the_config_in_network_order() {
        let a = |s: &str| Some(s.parse::<SocketAddr>().unwrap());
        let udp = Udp {
            dns4: a("127.0.0.1:5353"),
            dns6: a("[::1]:5354"),
            relay4: a("127.0.0.1:4000"),
            relay6: None,
            block: false,
        };
        let cfg = redirect_cfg(a("127.0.0.1:7000"), a("[::1]:7001"), udp).unwrap();
        assert_eq!(cfg.proxy4, [127, 0, 0, 1]);
        assert_eq!(cfg.port4, 7000u16.to_be_bytes());
        assert_eq!(cfg.port6, 7001u16.to_be_bytes());
        assert_eq!(cfg.dns4, 5353u16.to_be_bytes());
        assert_eq!(cfg.dns6, 5354u16.to_be_bytes());
        assert_eq!(cfg.udp4, 4000u16.to_be_bytes());
        assert_eq!(cfg.udp6, [0, 0], "no IPv6 relay: IPv6 datagrams refused");
        assert_eq!(cfg.udp_block, 0);
        let block = Udp {
            relay4: None,
            block: true,
            ..udp
        };
        assert_eq!(
            redirect_cfg(
                a("127.0.0.1:7000"),
                None,
                Udp {
                    dns6: None,
                    ..block
                }
            )
            .unwrap()
            .udp_block,
            1
        );
        // A UDP socket elsewhere than the proxy's address, or of a family without a
        // listener, would never see what the programs send it: refused.
        let e = redirect_cfg(a("127.0.0.1:7000"), None, udp).unwrap_err();
        assert!(e.to_string().contains("[::1]:5354"), "{e}");
        let elsewhere = Udp {
            dns4: a("127.0.0.2:53"),
            ..Udp::default()
        };
        assert!(redirect_cfg(a("127.0.0.1:7000"), None, elsewhere).is_err());
    }

    #[test]
    fn addresses_round_trip_through_the_mapped_form() {
        for a in ["198.18.3.2", "2001:2::2", "::1"] {
            let ip: IpAddr = a.parse().unwrap();
            assert_eq!(unmapped(mapped(ip)), ip);
        }
        assert_eq!(
            mapped(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)))[10..],
            [0xff, 0xff, 127, 0, 0, 1]
        );
    }
}
