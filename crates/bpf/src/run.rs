//! `nena run`'s BPF (`bpf/run/run.bpf.c`): loads the object through its skeleton and attaches
//! it to one cgroup (v2).
//!
//! - [`Redirect`]: `connect4`/`connect6` send every TCP connect of the cgroup to the local
//!   nena proxy and record the original destination by socket cookie; a `sockops` program,
//!   when the SYN leaves, moves it to a map keyed by the client's local address and port,
//!   which is what the proxy sees as its peer: [`Redirect::take`] looks it up and deletes it.
//! - [`MptcpOnly`]: `fmod_ret/update_socket_protocol` turns the TCP sockets created by the
//!   cgroup's tasks into MPTCP sockets (what mptcpize does, without LD_PRELOAD).
//!
//! Nothing is pinned. The object's programs and maps are held by the links and the map
//! handles kept here: dropping the value (or the process ending, however it ends) detaches
//! and frees everything.

use crate::skel::run::{types, RunSkelBuilder};
use anyhow::{anyhow, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, MapHandle};
use std::mem::MaybeUninit;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd};
use zerocopy::{FromBytes, IntoBytes};

/// The compiled object (built from `bpf/run/run.bpf.c` by build.rs).
pub const RUN_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/run.bpf.o"));

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
}
crate::chains::abi::same_layout!(RunCfg = types::run_cfg; cgroup_id => cgroup_id, proxy4 => proxy4,
    proxy6 => proxy6, port4 => port4, port6 => port6);

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
}

/// The programs' ids and the maps every mode keeps.
struct Loaded {
    links: Vec<Link>,
    prog_ids: Vec<u32>,
    orig: MapHandle,
    stats: MapHandle,
}

impl Loaded {
    fn stats(&self) -> RunStats {
        let mut v = [0u64; 5];
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
        }
    }
}

/// Which programs to load.
enum Which {
    Redirect,
    Mptcp,
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
    let redirect = matches!(which, Which::Redirect);
    open.progs.nena_run_c4.set_autoload(redirect);
    open.progs.nena_run_c6.set_autoload(redirect);
    open.progs.nena_run_so.set_autoload(redirect);
    open.progs.nena_run_mp.set_autoload(!redirect);
    let skel = open.load().context(if redirect {
        "loading the nena run programs (cgroup connect4/6, sockops)"
    } else {
        "loading fmod_ret/update_socket_protocol (a tracing program: the kernel needs BTF, \
         the hook (6.6+) and must allow tracing programs; lockdown or a BPF LSM may refuse them)"
    })?;
    skel.maps
        .run_cfg
        .update(&0u32.to_ne_bytes(), cfg.as_bytes(), MapFlags::ANY)
        .context("configuring the nena run programs")?;
    let mut links = Vec::new();
    let mut prog_ids = Vec::new();
    if redirect {
        for (name, p) in [
            ("connect4", &skel.progs.nena_run_c4),
            ("connect6", &skel.progs.nena_run_c6),
            ("sockops", &skel.progs.nena_run_so),
        ] {
            links.push(
                p.attach_cgroup(cgroup_fd)
                    .with_context(|| format!("attaching the {name} program to the cgroup"))?,
            );
            prog_ids.push(libbpf_rs::Program::id_from_fd(p.as_fd())?);
        }
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
        orig: MapHandle::try_from(&skel.maps.run_orig)?,
        stats: MapHandle::try_from(&skel.maps.run_stats)?,
    })
    // The skeleton's own descriptors close here; the links hold the programs (and through
    // them the maps), the handles the maps user space reads.
}

/// The cgroup id (the inode number of its directory in the cgroup2 file system).
pub fn cgroup_id(dir: &std::path::Path) -> Result<u64> {
    use std::os::unix::fs::MetadataExt;
    Ok(std::fs::metadata(dir)
        .with_context(|| format!("cannot stat {}", dir.display()))?
        .ino())
}

/// The TCP connects of a cgroup, sent to the local proxy (`nena run`).
pub struct Redirect {
    loaded: Loaded,
}

impl Redirect {
    /// Attach to the cgroup `cgroup` (an open directory of the cgroup2 file system). The
    /// proxy listens on `v4` (127.0.0.1:PORT) and, if it has one, on `v6` ([::1]:PORT);
    /// connects of a family without a listener are refused.
    pub fn attach(
        cgroup: &std::fs::File,
        v4: Option<SocketAddr>,
        v6: Option<SocketAddr>,
    ) -> Result<Redirect> {
        let mut cfg = RunCfg::default();
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
        Ok(Redirect {
            loaded: load(Which::Redirect, cfg, cgroup.as_raw_fd())?,
        })
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

    /// The ids of the attached programs (connect4, connect6, sockops).
    pub fn prog_ids(&self) -> &[u32] {
        &self.loaded.prog_ids
    }

    pub fn stats(&self) -> RunStats {
        self.loaded.stats()
    }

    /// Detach and unload now (what dropping does).
    pub fn detach(self) {
        drop(self.loaded.links);
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
