//! `--mode kato-mpc` for the tools (`serve`, `send`, `get`, `perf`, `proxy`): attach nena's
//! negotiation programs (nena-bpf's `mpc`) to the interfaces the command uses for as
//! long as it runs, and hand the transport a lookup of what they recorded (read at once;
//! the transport waits for keys on its runtime's timer, and forgets each record once its
//! connection is decided). A sweeper thread deletes, every [`SWEEP_EVERY`], the server's
//! records nobody read within a minute (handshakes never accepted), whatever any connection
//! does. The returned [`Attached`] stops the sweeper and detaches the programs when dropped,
//! which happens on a normal exit, on an error, and on SIGINT or SIGTERM (SIGTERM is turned
//! into SIGINT, which the tools already stop on).

use nena_mptcp::PathSpec;
use nena_transport::conn::MpcLookup;
use std::net::{IpAddr, SocketAddr};

/// How often the sweeper thread looks for stale records.
#[cfg(feature = "policy")]
const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// The programs attached for one command; detached when dropped.
pub struct Attached {
    #[cfg(feature = "policy")]
    sweeper: Option<(std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>)>,
    #[cfg(feature = "policy")]
    _guards: std::sync::Arc<Vec<nena_bpf::mpc::MpcGuard>>,
}

#[cfg(feature = "policy")]
impl Drop for Attached {
    fn drop(&mut self) {
        // The sender dropped wakes the sweeper, which ends; joined so that its copy of the
        // guards is gone before ours (the last one detaches the programs).
        if let Some((stop, thread)) = self.sweeper.take() {
            drop(stop);
            let _ = thread.join();
        }
    }
}

/// The records of the programs on every interface of one command.
#[cfg(feature = "policy")]
struct Records(std::sync::Arc<Vec<nena_bpf::mpc::MpcGuard>>);

#[cfg(feature = "policy")]
impl nena_transport::conn::MpcRecords for Records {
    /// The first record found with both keys (a connection's first subflow crossed one of
    /// the interfaces), else the first found at all.
    fn read(
        &self,
        local: SocketAddr,
        remote: SocketAddr,
    ) -> anyhow::Result<Option<nena_transport::conn::MpcSeen>> {
        let mut any = None;
        for guard in self.0.iter() {
            if let Some(r) = guard.flow(local, remote)? {
                let seen = nena_transport::conn::MpcSeen {
                    requested: r.requested,
                    consented: r.consented,
                    confirmed: r.confirmed,
                    local_key: r.local_key,
                    remote_key: r.remote_key,
                };
                if r.has_keys() {
                    return Ok(Some(seen));
                }
                any.get_or_insert(seen);
            }
        }
        Ok(any)
    }

    fn forget(&self, local: SocketAddr, remote: SocketAddr) {
        for guard in self.0.iter() {
            guard.forget(local, remote);
        }
    }
}

/// The local interfaces that own `ip` (all with an address of its family when it is
/// unspecified: a listener on 0.0.0.0 takes connections on every one).
fn interfaces_of(ip: IpAddr) -> anyhow::Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    let mut ifap: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `ifap` with a list we free below; we only read it meanwhile.
    if unsafe { libc::getifaddrs(&mut ifap) } != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    let mut p = ifap;
    while !p.is_null() {
        // SAFETY: `p` is a node of the list getifaddrs returned, not freed yet.
        let ifa = unsafe { &*p };
        p = ifa.ifa_next;
        if ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: ifa_addr is non-null (checked) and points to a sockaddr.
        let family = unsafe { (*ifa.ifa_addr).sa_family } as i32;
        let addr: Option<IpAddr> = match family {
            libc::AF_INET => {
                // SAFETY: the family says it is a sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                Some(IpAddr::from(
                    u32::from_be(sin.sin_addr.s_addr).to_be_bytes(),
                ))
            }
            libc::AF_INET6 => {
                // SAFETY: the family says it is a sockaddr_in6.
                let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                Some(IpAddr::from(sin6.sin6_addr.s6_addr))
            }
            _ => None,
        };
        let Some(addr) = addr else { continue };
        let fits = if ip.is_unspecified() {
            addr.is_ipv4() == ip.is_ipv4() || (ip.is_ipv6() && addr.is_ipv4())
        } else {
            addr == ip
        };
        if fits && !out.contains(&name) {
            out.push(name);
        }
    }
    // SAFETY: the list from getifaddrs, freed once.
    unsafe { libc::freeifaddrs(ifap) };
    Ok(out)
}

/// SIGTERM becomes SIGINT, which the tools stop on cleanly (guards dropped).
#[cfg(feature = "policy")]
fn sigterm_as_sigint() {
    extern "C" fn on_term(_: libc::c_int) {
        // SAFETY: kill and getpid are async-signal-safe.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGINT);
        }
    }
    // SAFETY: installing a handler that only calls async-signal-safe functions.
    unsafe {
        libc::signal(
            libc::SIGTERM,
            on_term as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
}

/// The interfaces a client's first subflow leaves on: its trusted paths.
fn client_interfaces(trusted: &[PathSpec]) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for t in trusted {
        let names = match t {
            PathSpec::Iface(n) => vec![n.clone()],
            PathSpec::Addr(a) => interfaces_of(*a)?,
        };
        if names.is_empty() {
            anyhow::bail!("no local interface has the trusted address {t:?}");
        }
        for n in names {
            if !out.contains(&n) {
                out.push(n);
            }
        }
    }
    Ok(out)
}

#[cfg(feature = "policy")]
fn attach(
    devs: &[String],
    port: u16,
    role: nena_bpf::mpc::MpcRole,
) -> anyhow::Result<(Attached, MpcLookup)> {
    use anyhow::Context;
    use nena_bpf::mpc::{MpcGuard, MpcMethod};
    let mut guards = Vec::new();
    for d in devs {
        guards.push(
            MpcGuard::attach(d, port, role, MpcMethod::Option).with_context(|| {
                format!("kato-mpc: attaching the negotiation programs to {d} (root and BPF needed)")
            })?,
        );
    }
    sigterm_as_sigint();
    let guards = std::sync::Arc::new(guards);
    let lookup = MpcLookup(std::sync::Arc::new(Records(guards.clone())));
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let g = guards.clone();
    let thread = std::thread::Builder::new()
        .name("mpc-sweep".into())
        .spawn(move || {
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                stopped.recv_timeout(SWEEP_EVERY)
            {
                for guard in g.iter() {
                    let n = guard.sweep();
                    if n > 0 {
                        log::debug!(
                            "kato-mpc: swept {n} stale records of handshakes on {}",
                            guard.dev()
                        );
                    }
                }
            }
        })
        .context("starting the kato-mpc sweeper thread")?;
    Ok((
        Attached {
            sweeper: Some((stop, thread)),
            _guards: guards,
        },
        lookup,
    ))
}

/// A client's programs (on its trusted interfaces, for connections to `remote`'s port).
/// `none`: testing only, attach nothing (this side does not ask).
pub fn attach_client(
    trusted: &[PathSpec],
    remote: SocketAddr,
    none: bool,
) -> anyhow::Result<Option<(Attached, MpcLookup)>> {
    if none {
        return Ok(None);
    }
    let devs = client_interfaces(trusted)?;
    attach_for(&devs, remote.port(), false)
}

/// A server's programs (on the interfaces of its listening address).
pub fn attach_server(
    listen: SocketAddr,
    none: bool,
) -> anyhow::Result<Option<(Attached, MpcLookup)>> {
    if none {
        return Ok(None);
    }
    if listen.port() == 0 {
        anyhow::bail!("kato-mpc needs a fixed listening port (not 0)");
    }
    let devs = interfaces_of(listen.ip())?;
    if devs.is_empty() {
        anyhow::bail!("no local interface has the address {}", listen.ip());
    }
    attach_for(&devs, listen.port(), true)
}

#[cfg(feature = "policy")]
fn attach_for(
    devs: &[String],
    port: u16,
    server: bool,
) -> anyhow::Result<Option<(Attached, MpcLookup)>> {
    use nena_bpf::mpc::MpcRole;
    let role = if server {
        MpcRole::Server
    } else {
        MpcRole::Client
    };
    attach(devs, port, role).map(Some)
}

#[cfg(not(feature = "policy"))]
fn attach_for(
    _devs: &[String],
    _port: u16,
    _server: bool,
) -> anyhow::Result<Option<(Attached, MpcLookup)>> {
    anyhow::bail!("kato-mpc needs BPF: this nena was built without the `policy` feature")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_owns_127_0_0_1() {
        let v = interfaces_of("127.0.0.1".parse().unwrap()).unwrap();
        assert_eq!(v, vec!["lo".to_string()]);
        assert!(interfaces_of("198.18.255.254".parse().unwrap())
            .unwrap()
            .is_empty());
        assert!(interfaces_of("0.0.0.0".parse().unwrap())
            .unwrap()
            .contains(&"lo".to_string()));
    }
}
