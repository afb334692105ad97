//! MPTCP client and server sockets: [`listen`], and [`connect`] (blocking), which opens a
//! client connection from a trusted address and hands back its [`Gate`] (see the crate
//! documentation for the exact guarantees). The async twin, `connect_async`, shares the
//! preparation and the checks after connect with it ([`prepare`], [`Pending::finish`]).

use crate::gate::{Gate, GateMachine, ReleaseReport};
use crate::path::{LocalIface, PathPolicy, PolicyError, ResolvedPolicy};
use crate::pm::{Endpoint, PmEvents, PmSocket};
use crate::{sockopt, MptcpError, PmKind};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Where the kernel lists the congestion controls it has registered (its own and BPF ones).
pub const AVAILABLE_CONGESTION_CONTROLS: &str =
    "/proc/sys/net/ipv4/tcp_available_congestion_control";

/// The congestion controls the kernel has registered, in its order.
pub fn available_congestion_controls() -> io::Result<Vec<String>> {
    Ok(std::fs::read_to_string(AVAILABLE_CONGESTION_CONTROLS)?
        .split_whitespace()
        .map(str::to_string)
        .collect())
}

/// Where the namespace's default congestion control is (per network namespace).
pub const DEFAULT_CONGESTION_CONTROL: &str = "/proc/sys/net/ipv4/tcp_congestion_control";

/// The congestion control nena's MPTCP sockets take instead of the namespace's default
/// `ns_default` when none is named: cubic in place of BBR, none (keep the default) otherwise.
///
/// Why: the kernel's MPTCP scheduler gives the next bytes to the subflow whose queue drains
/// first by its pacing rate, and BBR's pacing rate overshoots the path (its start-up, and
/// every restart after the subflow went idle: 2.4 Gbit/s estimated on a 20 Mbit/s link). The
/// scheduler then queues megabytes on the slow subflow while the fast one runs dry: in
/// `nena bench peers --setting 100+20`, a trusted subflow of 100 Mbit/s sat idle for 0.2 s
/// with 1.1 MB queued on the untrusted one, and transfers took up to 20% longer (see
/// docs/BENCHMARKS.md, "Peers"). A name given by the user (`--cc bbr`) is always kept.
pub fn preferred_congestion(ns_default: &str) -> Option<&'static str> {
    ns_default.trim().starts_with("bbr").then_some("cubic")
}

/// An MPTCP socket with congestion control `congestion` (`None`: the namespace's default,
/// net.ipv4.tcp_congestion_control, unless [`preferred_congestion`] names another one and
/// the kernel lets this process use it; else the default stays, said in the debug log). It
/// is set with `setsockopt(TCP_CONGESTION)` on the MPTCP socket, which the kernel applies to
/// every subflow; a listener's accepted connections inherit it. An unknown name fails here
/// (ENOENT), before anything is sent.
fn mptcp_socket(domain: Domain, congestion: Option<&str>) -> Result<Socket, MptcpError> {
    let s = Socket::new(domain, Type::STREAM, Some(Protocol::MPTCP))
        .map_err(MptcpError::from_socket_error)?;
    if let Some(cc) = congestion {
        sockopt::set_congestion(s.as_fd(), cc).map_err(|e| {
            MptcpError::Io(io::Error::new(
                e.kind(),
                format!("congestion control {cc:?}: {e}"),
            ))
        })?;
    } else if let Ok(default) = std::fs::read_to_string(DEFAULT_CONGESTION_CONTROL) {
        if let Some(cc) = preferred_congestion(&default) {
            if let Err(e) = sockopt::set_congestion(s.as_fd(), cc) {
                log::debug!(
                    "keeping the default congestion control {}: {cc} is not usable here ({e})",
                    default.trim()
                );
            }
        }
    }
    Ok(s)
}

/// A listening MPTCP socket (`IPPROTO_MPTCP`, `SO_REUSEADDR`, backlog 1024) whose accepted
/// connections use congestion control `congestion` (`None`: the namespace's default).
/// Plain-TCP clients are still accepted (as fallback connections): check them with
/// [`check_fallback`](crate::check_fallback). On `[::]` it is dual stack whatever
/// `net.ipv6.bindv6only` says (`IPV6_V6ONLY` off): it takes connections and joins of both
/// families, so a client's subflow of the other family can join an address it announces.
pub fn listen(addr: SocketAddr, congestion: Option<&str>) -> io::Result<TcpListener> {
    let s = mptcp_socket(Domain::for_address(addr), congestion).map_err(io::Error::from)?;
    if let SocketAddr::V6(v6) = addr {
        if v6.ip().is_unspecified() {
            s.set_only_v6(false)?;
        }
    }
    s.set_reuse_address(true)?;
    s.bind(&SockAddr::from(addr))?;
    s.listen(1024)?;
    Ok(s.into())
}

/// An MPTCP socket bound to `local` and connected to `remote` (within `timeout`), with no
/// trusted-path gate and no fallback check: for measuring bare MPTCP (the plain-MPTCP
/// baseline of `nena bench transfer`). nena's own connections use [`connect`].
pub fn connect_ungated(
    local: SocketAddr,
    remote: SocketAddr,
    timeout: Duration,
    congestion: Option<&str>,
) -> io::Result<TcpStream> {
    let s = mptcp_socket(Domain::for_address(remote), congestion).map_err(io::Error::from)?;
    s.bind(&SockAddr::from(local))?;
    s.connect_timeout(&SockAddr::from(remote), timeout)?;
    Ok(s.into())
}

/// How to connect.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    pub policy: PathPolicy,
    /// Accept a connection that fell back to plain TCP (`--allow-fallback`).
    pub allow_fallback: bool,
    /// Bound on connect() and on the wait for the first flight's data-level ACK.
    pub timeout: Duration,
    /// Congestion control of every subflow (`--cc NAME`; `None`: the namespace's default).
    pub congestion: Option<String>,
    /// Interfaces of metered paths (`--metered IFACE`): with the userspace PM their
    /// subflows are backup after the release while another path carries
    /// ([`crate::metered`]); the in-kernel PM's are the host's endpoint flags
    /// ([`crate::metered::KernelMetered`], which the caller starts).
    pub metered: Vec<String>,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            policy: PathPolicy::default(),
            allow_fallback: false,
            timeout: Duration::from_secs(10),
            congestion: None,
            metered: Vec::new(),
        }
    }
}

/// A connected MPTCP client socket with its gate.
#[derive(Debug)]
pub struct Client {
    pub stream: TcpStream,
    gate: Gate,
}

/// Everything of a connection but its socket, between [`prepare`] and connect().
pub(crate) struct Pending {
    remote: SocketAddr,
    /// What connect() is given: `remote`, or its IPv4-mapped form on a dual-stack socket.
    dial: SocketAddr,
    /// The trusted interface the initial subflow is bound to.
    iface: LocalIface,
    policy: ResolvedPolicy,
    pm: PmKind,
    pm_sock: Option<PmSocket>,
    kernel_endpoints: Option<Vec<Endpoint>>,
    events: Option<PmEvents>,
    metered: Vec<String>,
}

/// Everything before connect(): check MPTCP, resolve the policy, open the netlink sockets
/// (in the network namespace of the calling thread) and an MPTCP socket bound to a trusted
/// address of the remote's family. No step waits on the network.
pub(crate) fn prepare(
    remote: SocketAddr,
    opts: &ConnectOptions,
) -> Result<(Socket, Pending), MptcpError> {
    crate::check_enabled()?;
    let policy = opts.policy.resolve()?;
    if policy.trusted.is_empty() {
        return Err(PolicyError::NoTrusted.into());
    }
    let source = policy.trusted_source_for(remote.ip()).ok_or_else(|| {
        MptcpError::Policy(format!(
            "no trusted local address of the same family as {} (trusted: {})",
            remote.ip(),
            join(policy.trusted.iter())
        ))
    })?;
    // A path is an interface: the initial subflow (the MP_CAPABLE handshake, the first
    // flight) is bound to the trusted address's interface, whatever the routes say.
    let iface = policy.iface(source).cloned().ok_or_else(|| {
        MptcpError::Policy(format!(
            "the trusted address {source} is held by no interface of this host: name the \
             trusted interface with --trusted IFACE, or add the address to it"
        ))
    })?;
    check_trusted_route(remote.ip(), source, &iface)?;
    let pm = crate::pm_kind()?;
    // The first-flight hold is made (its BPF loaded, once per process) before connecting,
    // not between the connect and the first write, where the time it takes would let the
    // in-kernel PM's subflows open before the first flight (the gate uses it, or refuses
    // with its error, in Gate::open).
    if pm == PmKind::Kernel {
        let _ = crate::hold::get();
    }
    // Open the netlink socket now, in the namespace the connection lives in (the gate may be
    // used later from another thread). Userspace PM needs it; in-kernel PM only reads the
    // endpoints from it, for diagnostics.
    let (pm_sock, kernel_endpoints) = match pm {
        PmKind::Userspace => (Some(PmSocket::open().map_err(MptcpError::Netlink)?), None),
        PmKind::Kernel => match PmSocket::open().and_then(|mut s| s.endpoints()) {
            Ok(eps) => (None, Some(eps)),
            Err(e) => {
                log::debug!("cannot list in-kernel PM endpoints: {e}");
                (None, None)
            }
        },
    };
    // Path-manager events, subscribed before connecting so that no subflow event of this
    // connection is missed; needs CAP_NET_ADMIN, optional (the counter checks still run).
    let events = match PmEvents::subscribe() {
        Ok(ev) => Some(ev),
        Err(e) => {
            log::debug!("no mptcp_pm events ({e}); relying on subflow counters only");
            None
        }
    };
    // A socket of the remote's family, except that subflows of both families need an IPv6
    // socket that is not IPV6_V6ONLY (the kernel's mptcp_pm_addr_families_match): an IPv6
    // connection always gets one (so an IPv4 path can join an address the server announces),
    // and an IPv4 one does when the policy has IPv6 paths (it then goes to the remote's
    // IPv4-mapped address, and still leaves from the trusted IPv4 address).
    let dual = policy.needs_ipv6_socket(remote.ip());
    let domain = if dual { Domain::IPV6 } else { Domain::IPV4 };
    let sock = mptcp_socket(domain, opts.congestion.as_deref())?;
    if dual {
        sock.set_only_v6(false).map_err(|e| {
            MptcpError::Io(io::Error::new(
                e.kind(),
                format!("an IPv6 socket that also carries IPv4 subflows (IPV6_V6ONLY off): {e}"),
            ))
        })?;
    }
    let on_socket = |a: SocketAddr| {
        if dual {
            crate::path::to_ipv6_socket_addr(a)
        } else {
            a
        }
    };
    // SO_BINDTODEVICE on the MPTCP socket binds its initial subflow (and the MPTCP socket)
    // to the device; an unprivileged process may do it on a socket not bound yet (Linux 5.7).
    sock.bind_device(Some(iface.name.as_bytes())).map_err(|e| {
        MptcpError::Policy(format!(
            "cannot bind the connection to the trusted interface {iface}: {e}"
        ))
    })?;
    sock.bind(&SockAddr::from(on_socket(SocketAddr::new(source, 0))))
        .map_err(|e| MptcpError::Policy(format!("cannot bind to trusted address {source}: {e}")))?;
    Ok((
        sock,
        Pending {
            remote,
            dial: on_socket(remote),
            iface,
            policy,
            pm,
            pm_sock,
            kernel_endpoints,
            events,
            metered: opts.metered.clone(),
        },
    ))
}

impl Pending {
    /// The address connect() is given (the remote, IPv4-mapped on a dual-stack socket).
    pub(crate) fn dial(&self) -> SocketAddr {
        self.dial
    }

    /// After connect(): refuse a fallback unless allowed, and build the gate, which checks
    /// that the initial subflow left from a trusted address (we bound it; this checks what
    /// the kernel reports).
    pub(crate) fn finish(
        self,
        conn: BorrowedFd<'_>,
        allow_fallback: bool,
    ) -> Result<Gate, MptcpError> {
        // The initial subflow leaves by the trusted interface: read the binding back.
        let bound = socket2::SockRef::from(&conn).device()?;
        if bound.as_deref() != Some(self.iface.name.as_bytes()) {
            return Err(MptcpError::Policy(format!(
                "the connection to {} is bound to {} instead of the trusted interface {}; refusing it",
                self.remote,
                bound.map_or("no interface".into(), |b| format!(
                    "`{}`",
                    String::from_utf8_lossy(&b)
                )),
                self.iface
            )));
        }
        let fallback = sockopt::is_fallback(conn)?;
        if fallback {
            if !allow_fallback {
                return Err(MptcpError::ServerWithoutMptcp(self.remote));
            }
            log::warn!(
                "connection to {} fell back to plain TCP (allowed by --allow-fallback)",
                self.remote
            );
        }
        let machine = GateMachine::new(self.policy, self.pm, self.remote, fallback);
        let mut gate = Gate::open(
            conn.try_clone_to_owned()?,
            machine,
            self.pm_sock,
            self.kernel_endpoints,
            if fallback { None } else { self.events },
        )?;
        gate.set_metered(self.metered);
        log::debug!("connected: {}", sockopt::describe(gate.fd()));
        Ok(gate)
    }
}

/// Connect to `remote` from a trusted local address (see the crate docs). Blocks the
/// calling thread for connect(); async callers use `connect_async`. While every trusted
/// interface is down, waits for one up to `opts.timeout` ([`TrustedWait`]).
pub fn connect(remote: SocketAddr, opts: &ConnectOptions) -> Result<Client, MptcpError> {
    let mut wait = TrustedWait::new(remote, opts);
    let (sock, pending) = loop {
        let Some((sock, pending)) = wait.next(prepare(remote, opts))? else {
            std::thread::sleep(TrustedWait::POLL);
            continue;
        };
        match sock.connect_timeout(&SockAddr::from(pending.dial()), opts.timeout) {
            Ok(()) => break (sock, pending),
            Err(e) if wait.retry_connect(&e) => std::thread::sleep(TrustedWait::POLL),
            Err(e) => return Err(MptcpError::Connect { remote, source: e }),
        }
    };
    let stream: TcpStream = sock.into();
    let gate = pending.finish(stream.as_fd(), opts.allow_fallback)?;
    Ok(Client { stream, gate })
}

/// A new connection while no trusted link is up (an LTE dropout): it waits for one, up to
/// its timeout, and then fails with one line; its hello never goes by another interface.
/// "Up" is the interface's own state (`IFF_UP` and `IFF_RUNNING`: administratively up, with
/// carrier), so a host whose trusted interface is up but has no route still fails at once
/// (a configuration to fix, not an outage to wait out); once a wait began, the interface's
/// return is waited out until its routes are back too.
pub(crate) struct TrustedWait {
    remote: SocketAddr,
    timeout: Duration,
    policy: PathPolicy,
    deadline: std::time::Instant,
    said: bool,
}

/// The process's waits for a trusted link ([`trusted_waits`]).
static WAITING: AtomicU64 = AtomicU64::new(0);
static WAITED: AtomicU64 = AtomicU64::new(0);
static GAVE_UP: AtomicU64 = AtomicU64::new(0);

/// What this process's new connections did about trusted links that were down: for the
/// proxies' and the gateway's metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrustedWaits {
    /// Connections waiting now for a trusted interface to come back.
    pub waiting: u64,
    /// Connections that had to wait, since the process started.
    pub waited: u64,
    /// Of those, the ones whose timeout ran out (they failed; nothing was sent).
    pub gave_up: u64,
}

/// This process's [`TrustedWaits`] so far.
pub fn trusted_waits() -> TrustedWaits {
    TrustedWaits {
        waiting: WAITING.load(Ordering::Relaxed),
        waited: WAITED.load(Ordering::Relaxed),
        gave_up: GAVE_UP.load(Ordering::Relaxed),
    }
}

impl Drop for TrustedWait {
    fn drop(&mut self) {
        if self.said {
            WAITING.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl TrustedWait {
    /// How often the interfaces are looked at again while waiting.
    pub(crate) const POLL: Duration = Duration::from_millis(50);

    pub(crate) fn new(remote: SocketAddr, opts: &ConnectOptions) -> TrustedWait {
        TrustedWait {
            remote,
            timeout: opts.timeout,
            policy: opts.policy.clone(),
            deadline: std::time::Instant::now() + opts.timeout,
            said: false,
        }
    }

    /// Whether a connect() that failed with `e` is tried again: only in a wait that began
    /// (the trusted link was down) with time left, and only for "no route" or "host
    /// unreachable" (the link's first neighbour resolution after its return can fail).
    pub(crate) fn retry_connect(&self, e: &io::Error) -> bool {
        self.said
            && std::time::Instant::now() < self.deadline
            && matches!(
                e.raw_os_error(),
                Some(libc::EHOSTUNREACH | libc::ENETUNREACH)
            )
    }

    /// `prepare`'s result, or `Ok(None)`: its failure came from trusted interfaces that are
    /// all down, and there is time left to wait (the caller pauses [`Self::POLL`] and calls
    /// `prepare` again).
    pub(crate) fn next<T>(
        &mut self,
        prepared: Result<T, MptcpError>,
    ) -> Result<Option<T>, MptcpError> {
        let e = match prepared {
            Ok(p) => return Ok(Some(p)),
            Err(e) => e,
        };
        let Some(down) = trusted_links_down(&self.policy) else {
            // Up again: its routes come a moment after the link (DHCP, RA, the lab's
            // `set --up`), so a wait that began goes on until they do, or time is up.
            if self.said && std::time::Instant::now() < self.deadline {
                return Ok(None);
            }
            return Err(e);
        };
        if std::time::Instant::now() >= self.deadline {
            GAVE_UP.fetch_add(1, Ordering::Relaxed);
            return Err(MptcpError::Policy(format!(
                "the trusted interface {down} is down, and it did not come back within {:?}; \
                 nena never sends the connection's handshake to {} by another interface",
                self.timeout, self.remote
            )));
        }
        if !self.said {
            log::warn!(
                "the trusted interface {down} is down: the connection to {} waits up to {:?} \
                 for it",
                self.remote,
                self.timeout
            );
            self.said = true;
            WAITING.fetch_add(1, Ordering::Relaxed);
            WAITED.fetch_add(1, Ordering::Relaxed);
        }
        Ok(None)
    }
}

/// The trusted interfaces of `policy` (named, or holding a named address), as `` `a`, `b` ``,
/// when there is at least one and none is up with carrier; `None` otherwise (one is up, or
/// none can be found: nothing to wait for).
fn trusted_links_down(policy: &PathPolicy) -> Option<String> {
    use nix::net::if_::InterfaceFlags as F;
    let addrs: Vec<_> = nix::ifaddrs::getifaddrs().ok()?.collect();
    let mut names: Vec<String> = Vec::new();
    for spec in &policy.trusted {
        let name = match spec {
            crate::path::PathSpec::Iface(n) => Some(n.clone()),
            crate::path::PathSpec::Addr(a) => {
                crate::path::iface_of(*a).ok().flatten().map(|i| i.name)
            }
        };
        if let Some(n) = name {
            if !names.contains(&n) {
                names.push(n);
            }
        }
    }
    let usable = |n: &str| {
        addrs.iter().any(|a| {
            a.interface_name == n && a.flags.contains(F::IFF_UP) && a.flags.contains(F::IFF_RUNNING)
        })
    };
    let known = |n: &str| addrs.iter().any(|a| a.interface_name == n);
    if names.is_empty() || names.iter().any(|n| usable(n) || !known(n)) {
        return None;
    }
    Some(join(names.iter().map(|n| format!("`{n}`"))))
}

/// Fail closed, with the route and the fix, when the trusted interface has no route to
/// `remote` (a host whose only default route leaves by the untrusted link): bound to its
/// interface the connection could not leave, and the kernel would only find out after
/// seconds of unanswered neighbour requests. A lookup that cannot be made is no reason to
/// refuse: the binding holds either way.
fn check_trusted_route(
    remote: IpAddr,
    source: IpAddr,
    iface: &LocalIface,
) -> Result<(), MptcpError> {
    match crate::route::lookup(remote, Some(iface.index)) {
        Ok(Some(_)) => Ok(()),
        Ok(None) => {
            let host = match crate::route::lookup(remote, None) {
                Ok(Some(r)) => format!("this host's route to it is `{}`", r.describe()),
                _ => "this host has no route to it at all".to_string(),
            };
            Err(MptcpError::Policy(format!(
                "no route to {remote} through the trusted interface {iface} ({source}); {host}, \
                 and nena never lets the handshake leave by another interface: add a route \
                 through {iface}, e.g. `ip route add {remote} via GATEWAY dev {}` or a default \
                 route on it with its own metric",
                iface.name
            )))
        }
        Err(e) => {
            log::debug!("route lookup towards {remote} through {iface}: {e}");
            Ok(())
        }
    }
}

fn join<T: std::fmt::Display>(it: impl Iterator<Item = T>) -> String {
    it.map(|x| x.to_string()).collect::<Vec<_>>().join(", ")
}

impl Client {
    /// Split into the stream and its gate (e.g. to move the stream into an async runtime).
    pub fn into_parts(self) -> (TcpStream, Gate) {
        (self.stream, self.gate)
    }
    pub fn gate(&self) -> &Gate {
        &self.gate
    }
    pub fn gate_mut(&mut self) -> &mut Gate {
        &mut self.gate
    }
    /// See [`Gate::before_first_flight`].
    pub fn before_first_flight(&mut self) -> Result<(), MptcpError> {
        self.gate.before_first_flight()
    }
    /// See [`Gate::poll_first_flight_acked`].
    pub fn poll_first_flight_acked(&mut self, len: u64) -> Result<bool, MptcpError> {
        self.gate.poll_first_flight_acked(len)
    }
    /// See [`Gate::wait_first_flight_acked`].
    pub fn wait_first_flight_acked(
        &mut self,
        len: u64,
        timeout: Duration,
    ) -> Result<(), MptcpError> {
        self.gate.wait_first_flight_acked(len, timeout)
    }
    /// See [`Gate::release_untrusted`].
    pub fn release_untrusted(&mut self) -> Result<ReleaseReport, MptcpError> {
        self.gate.release_untrusted()
    }
    /// Wait for the first flight's ACK, then release the untrusted paths.
    pub fn after_first_flight(
        &mut self,
        len: u64,
        timeout: Duration,
    ) -> Result<ReleaseReport, MptcpError> {
        self.gate.wait_first_flight_acked(len, timeout)?;
        self.gate.release_untrusted()
    }
    /// See [`Gate::report`].
    pub fn report(&self) -> Result<crate::PathReport, MptcpError> {
        self.gate.report()
    }
}

#[cfg(test)]
mod tests {
    use super::preferred_congestion;

    #[test]
    fn bbr_defaults_give_way_to_cubic_and_others_stay() {
        assert_eq!(preferred_congestion("bbr\n"), Some("cubic"));
        assert_eq!(preferred_congestion("bbr3"), Some("cubic"));
        for keep in ["cubic\n", "reno", "nena_olia", ""] {
            assert_eq!(preferred_congestion(keep), None, "{keep:?}");
        }
    }
}
