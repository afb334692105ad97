//! MPTCP client and server sockets, and the trusted-path-first gate of a client connection
//! (see the crate documentation for the exact guarantees).

use crate::path::{PathPolicy, PolicyError, ResolvedPolicy, Trust};
use crate::pm::{Endpoint, PmError, PmEvents, PmSocket, MPTCP_EVENT_SUB_CLOSED};
use crate::sockopt::{self, ConnInfo, SubflowInfo};
use crate::{MptcpError, PmKind};
use serde::Serialize;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const REFUSED: &str = "the connection was refused by an earlier trusted-path check";

/// Poll period of the blocking waits.
const POLL: Duration = Duration::from_millis(2);

fn mptcp_socket(domain: Domain) -> Result<Socket, MptcpError> {
    Socket::new(domain, Type::STREAM, Some(Protocol::MPTCP)).map_err(MptcpError::from_socket_error)
}

/// A listening MPTCP socket (`IPPROTO_MPTCP`, `SO_REUSEADDR`, backlog 1024). Plain-TCP
/// clients are still accepted (as fallback connections): check them with
/// [`check_fallback`](crate::check_fallback).
pub fn listen(addr: SocketAddr) -> io::Result<TcpListener> {
    let s = mptcp_socket(Domain::for_address(addr)).map_err(io::Error::from)?;
    s.set_reuse_address(true)?;
    s.bind(&SockAddr::from(addr))?;
    s.listen(1024)?;
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
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            policy: PathPolicy::default(),
            allow_fallback: false,
            timeout: Duration::from_secs(10),
        }
    }
}

/// Where the gate is in the trusted-path-first sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Connected; nothing written yet.
    Connected,
    /// `before_first_flight` passed; `base` = MPTCP bytes acked / snd_una at that moment.
    FirstFlight {
        base_acked: Option<u64>,
        base_una: u64,
    },
    /// The first flight is data-acked and was checked not to have used an untrusted subflow.
    Acked,
    /// Untrusted paths released.
    Released,
    /// A check failed: the connection must not be used any more.
    Refused,
}

/// One subflow with its trust under the connection's policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClassifiedSubflow {
    #[serde(flatten)]
    pub subflow: SubflowInfo,
    pub trust: Trust,
}

/// What a connection is: MPTCP or not, multipath or not, and what each subflow carried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathReport {
    /// The connection runs MPTCP (did not fall back to TCP).
    pub mptcp: bool,
    /// At least two subflows carried payload (either direction).
    pub multipath: bool,
    pub pm: PmKind,
    pub conn: Option<ConnInfo>,
    pub subflows: Vec<ClassifiedSubflow>,
}

/// Result of [`Gate::release_untrusted`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReleaseReport {
    /// Userspace PM: local addresses a subflow was requested from.
    pub created: Vec<IpAddr>,
    /// Userspace PM: local addresses whose SUBFLOW_CREATE failed, with the reason.
    pub failed: Vec<(IpAddr, String)>,
    /// In-kernel PM: the `subflow` endpoints (of the remote's family) the kernel opens
    /// subflows from, as listed when connecting; empty means the connection stays single-path.
    pub kernel_endpoints: Vec<IpAddr>,
}

/// The trusted-path-first gate of one client connection. It holds its own duplicate of the
/// socket descriptor, so it keeps working after the stream was moved (e.g. into tokio); the
/// connection is closed only when both the stream and the gate are dropped.
#[derive(Debug)]
pub struct Gate {
    fd: OwnedFd,
    policy: ResolvedPolicy,
    remote: SocketAddr,
    pm: PmKind,
    fallback: bool,
    pm_sock: Mutex<Option<PmSocket>>,
    kernel_endpoints: Option<Vec<Endpoint>>,
    events: Mutex<Option<PmEvents>>,
    phase: Mutex<Phase>,
}

/// A connected MPTCP client socket with its gate.
#[derive(Debug)]
pub struct Client {
    pub stream: TcpStream,
    gate: Gate,
}

/// Connect to `remote` from a trusted local address (see the crate docs).
pub fn connect(remote: SocketAddr, opts: &ConnectOptions) -> Result<Client, MptcpError> {
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
    let pm = crate::pm_kind()?;
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

    let sock = mptcp_socket(Domain::for_address(remote))?;
    sock.bind(&SockAddr::from(SocketAddr::new(source, 0)))
        .map_err(|e| MptcpError::Policy(format!("cannot bind to trusted address {source}: {e}")))?;
    sock.connect_timeout(&SockAddr::from(remote), opts.timeout)
        .map_err(|e| MptcpError::Connect { remote, source: e })?;
    let stream: TcpStream = sock.into();

    let fallback = sockopt::is_fallback(stream.as_fd())?;
    if fallback {
        if !opts.allow_fallback {
            return Err(MptcpError::Fallback);
        }
        log::warn!("connection to {remote} fell back to plain TCP (allowed by --allow-fallback)");
    }
    let gate = Gate {
        fd: stream.as_fd().try_clone_to_owned()?,
        policy,
        remote,
        pm,
        fallback,
        pm_sock: Mutex::new(pm_sock),
        kernel_endpoints,
        events: Mutex::new(if fallback { None } else { events }),
        phase: Mutex::new(Phase::Connected),
    };
    if !fallback {
        // The initial subflow must leave from a trusted address (it does, we bound it; this
        // checks what the kernel reports).
        let sfs = gate.classified()?;
        match sfs.first() {
            Some(sf) if sf.trust.is_trusted() => {}
            Some(sf) => {
                return Err(MptcpError::Policy(format!(
                    "the initial subflow left from {} which is not trusted",
                    sf.subflow.local.map_or("?".into(), |a| a.to_string())
                )))
            }
            None => return Err(MptcpError::Policy("the connection has no subflow".into())),
        }
    }
    log::debug!("connected: {}", sockopt::describe(gate.fd.as_fd()));
    Ok(Client { stream, gate })
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
    /// See [`Gate::before_first_flight`].
    pub fn before_first_flight(&self) -> Result<(), MptcpError> {
        self.gate.before_first_flight()
    }
    /// See [`Gate::poll_first_flight_acked`].
    pub fn poll_first_flight_acked(&self, len: u64) -> Result<bool, MptcpError> {
        self.gate.poll_first_flight_acked(len)
    }
    /// See [`Gate::wait_first_flight_acked`].
    pub fn wait_first_flight_acked(&self, len: u64, timeout: Duration) -> Result<(), MptcpError> {
        self.gate.wait_first_flight_acked(len, timeout)
    }
    /// See [`Gate::release_untrusted`].
    pub fn release_untrusted(&self) -> Result<ReleaseReport, MptcpError> {
        self.gate.release_untrusted()
    }
    /// Wait for the first flight's ACK, then release the untrusted paths.
    pub fn after_first_flight(
        &self,
        len: u64,
        timeout: Duration,
    ) -> Result<ReleaseReport, MptcpError> {
        self.gate.wait_first_flight_acked(len, timeout)?;
        self.gate.release_untrusted()
    }
    /// See [`Gate::report`].
    pub fn report(&self) -> Result<PathReport, MptcpError> {
        self.gate.report()
    }
}

impl Gate {
    /// The socket this gate watches.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
    /// The connection fell back to plain TCP (only possible with `allow_fallback`).
    pub fn is_fallback(&self) -> bool {
        self.fallback
    }
    pub fn pm(&self) -> PmKind {
        self.pm
    }
    pub fn policy(&self) -> &ResolvedPolicy {
        &self.policy
    }
    pub fn remote(&self) -> SocketAddr {
        self.remote
    }

    /// In-kernel PM endpoints listed when connecting (None in userspace mode or if the
    /// listing failed).
    pub fn kernel_endpoints(&self) -> Option<&[Endpoint]> {
        self.kernel_endpoints.as_deref()
    }

    /// Advisory: how many bytes the initial subflow can put on the wire at once now
    /// (`snd_cwnd × snd_mss`). With the in-kernel PM, a first flight no larger than this is
    /// entirely handed to the trusted subflow before any DATA_ACK can make the kernel open
    /// another subflow; only an MPTCP-level retransmission could then move it (and
    /// [`poll_first_flight_acked`](Self::poll_first_flight_acked) detects that).
    pub fn first_flight_budget(&self) -> Result<u64, MptcpError> {
        if self.fallback {
            return Ok(u64::MAX);
        }
        Ok(sockopt::initial_window(self.fd())?)
    }

    /// All subflows with their trust.
    pub fn classified(&self) -> Result<Vec<ClassifiedSubflow>, MptcpError> {
        Ok(sockopt::subflows(self.fd())?
            .into_iter()
            .map(|s| {
                let trust = s
                    .local
                    .map(|a| self.policy.classify(a.ip()))
                    .unwrap_or(Trust::Unlisted);
                ClassifiedSubflow { subflow: s, trust }
            })
            .collect())
    }

    fn untrusted(&self) -> Result<Vec<ClassifiedSubflow>, MptcpError> {
        Ok(self
            .classified()?
            .into_iter()
            .filter(|s| !s.trust.is_trusted())
            .collect())
    }

    /// Call right before writing the first flight. Fails closed if any subflow whose local
    /// address is not trusted exists already, and records the data-level baseline.
    pub fn before_first_flight(&self) -> Result<(), MptcpError> {
        let mut phase = self.phase.lock().unwrap();
        if *phase == Phase::Refused {
            return Err(MptcpError::Sequence(REFUSED));
        }
        if *phase != Phase::Connected {
            return Err(MptcpError::Sequence("before_first_flight called twice"));
        }
        if self.fallback {
            *phase = Phase::Acked;
            return Ok(());
        }
        let bad = self.untrusted()?;
        if let Some(sf) = bad.first() {
            *phase = Phase::Refused;
            return Err(MptcpError::UntrustedTooEarly {
                local: sf.subflow.local,
                what: "exists before the first flight is sent",
            });
        }
        let i = sockopt::info(self.fd())?;
        // Forget earlier events: only what happens during the first flight matters.
        if let Some(ev) = self.events.lock().unwrap().as_mut() {
            if let Err(e) = ev.drain() {
                log::debug!("mptcp_pm events: {e}");
            }
        }
        *phase = Phase::FirstFlight {
            base_acked: i.bytes_acked,
            base_una: i.snd_una,
        };
        Ok(())
    }

    /// Non-blocking: true once the peer has DATA-ACKed the `len` bytes written after
    /// [`before_first_flight`](Self::before_first_flight). At that moment it checks that no
    /// subflow with an untrusted local address has sent any payload (fail closed otherwise).
    pub fn poll_first_flight_acked(&self, len: u64) -> Result<bool, MptcpError> {
        let mut phase = self.phase.lock().unwrap();
        let (base_acked, base_una) = match *phase {
            Phase::FirstFlight {
                base_acked,
                base_una,
            } => (base_acked, base_una),
            Phase::Acked | Phase::Released => return Ok(true),
            Phase::Connected => return Err(MptcpError::Sequence("call before_first_flight first")),
            Phase::Refused => return Err(MptcpError::Sequence(REFUSED)),
        };
        let i = sockopt::info(self.fd())?;
        let acked = match (i.bytes_acked, base_acked) {
            (Some(now), Some(base)) => now.saturating_sub(base),
            _ => i.snd_una.wrapping_sub(base_una),
        };
        // Every untrusted subflow must not have sent payload: all data written so far is the
        // first flight, so any byte it sent would be first-flight data.
        if let Err(e) = self
            .check_untrusted_idle(false)
            .and_then(|()| self.check_closed_untrusted(i.token))
        {
            *phase = Phase::Refused;
            return Err(e);
        }
        if acked >= len {
            *phase = Phase::Acked;
            // Events only matter during the first flight.
            self.events.lock().unwrap().take();
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// Blocking form of [`poll_first_flight_acked`](Self::poll_first_flight_acked).
    pub fn wait_first_flight_acked(&self, len: u64, timeout: Duration) -> Result<(), MptcpError> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.poll_first_flight_acked(len)? {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(MptcpError::Timeout("the first flight's data-level ACK"));
            }
            std::thread::sleep(POLL);
        }
    }

    /// Fails if a subflow whose local address is not trusted has sent payload (and, with
    /// `received`, received payload). Callers may use it after reading the peer's first
    /// flight to check that it too arrived over trusted subflows only.
    pub fn check_untrusted_idle(&self, received: bool) -> Result<(), MptcpError> {
        if self.fallback {
            return Ok(());
        }
        for sf in self.untrusted()? {
            if sf.subflow.bytes_sent > 0 {
                return Err(MptcpError::UntrustedTooEarly {
                    local: sf.subflow.local,
                    what: "sent data of the first flight",
                });
            }
            if received && sf.subflow.bytes_received > 0 {
                return Err(MptcpError::UntrustedTooEarly {
                    local: sf.subflow.local,
                    what: "received data of the peer's first flight",
                });
            }
        }
        Ok(())
    }

    /// With event monitoring: fail if a subflow of this connection whose local address is not
    /// trusted was closed since the last check. Its counters vanished with it, so whether it
    /// carried first-flight data cannot be verified: assume it did. Lost events (`ENOBUFS`)
    /// are treated the same way.
    fn check_closed_untrusted(&self, token: u32) -> Result<(), MptcpError> {
        let mut guard = self.events.lock().unwrap();
        let Some(ev) = guard.as_mut() else {
            return Ok(());
        };
        let events = ev.drain().map_err(|e| {
            MptcpError::Policy(format!(
                "path-manager events were lost during the first flight ({e}); refusing"
            ))
        })?;
        for e in events {
            if e.token != Some(token) || e.kind != MPTCP_EVENT_SUB_CLOSED {
                continue;
            }
            let trust = e
                .local
                .map(|a| self.policy.classify(a.ip()))
                .unwrap_or(Trust::Unlisted);
            if !trust.is_trusted() {
                return Err(MptcpError::UntrustedTooEarly {
                    local: e.local,
                    what: "was closed during the first flight (what it carried cannot be checked)",
                });
            }
        }
        Ok(())
    }

    /// After the first flight is acked: let untrusted paths carry data. Userspace PM: asks the
    /// kernel (genl `SUBFLOW_CREATE`) for one subflow from every policy address of the
    /// remote's family other than the initial one. In-kernel PM: the kernel opens its
    /// `subflow` endpoints by itself; nothing to do (the check was done when the ACK was seen).
    pub fn release_untrusted(&self) -> Result<ReleaseReport, MptcpError> {
        let mut phase = self.phase.lock().unwrap();
        match *phase {
            Phase::Acked => {}
            Phase::Released => return Ok(ReleaseReport::default()),
            Phase::Refused => return Err(MptcpError::Sequence(REFUSED)),
            _ => {
                return Err(MptcpError::Sequence(
                    "the first flight is not acknowledged yet",
                ))
            }
        }
        let mut report = ReleaseReport::default();
        if !self.fallback && self.pm == PmKind::Userspace {
            let token = sockopt::info(self.fd())?.token;
            let initial: Vec<IpAddr> = self
                .classified()?
                .iter()
                .filter_map(|s| s.subflow.local.map(|a| a.ip()))
                .collect();
            let remote = self.remote;
            let mut guard = self.pm_sock.lock().unwrap();
            if guard.is_none() {
                *guard = Some(PmSocket::open().map_err(MptcpError::Netlink)?);
            }
            let pm = guard.as_mut().expect("opened above");
            for addr in self
                .policy
                .untrusted
                .iter()
                .chain(self.policy.trusted.iter())
            {
                if addr.is_ipv4() != remote.is_ipv4()
                    || initial.contains(addr)
                    || addr.is_loopback()
                {
                    continue;
                }
                match pm.subflow_create(token, *addr, remote) {
                    Ok(()) => report.created.push(*addr),
                    Err(e) => {
                        log::warn!("could not open a subflow from {addr}: {e}");
                        report.failed.push((*addr, e.to_string()));
                    }
                }
            }
        }
        if !self.fallback && self.pm == PmKind::Kernel {
            if let Some(eps) = &self.kernel_endpoints {
                report.kernel_endpoints = eps
                    .iter()
                    .filter(|e| e.is_subflow())
                    .filter_map(|e| e.addr)
                    .filter(|a| a.is_ipv4() == self.remote.is_ipv4())
                    .collect();
                if report.kernel_endpoints.is_empty() {
                    log::warn!(
                        "the in-kernel path manager has no `subflow` endpoint: the connection \
                         stays on one path (add one with `ip mptcp endpoint add ADDR dev IFACE subflow`)"
                    );
                }
            }
        }
        *phase = Phase::Released;
        Ok(report)
    }

    /// What the connection is now.
    pub fn report(&self) -> Result<PathReport, MptcpError> {
        if self.fallback {
            return Ok(PathReport {
                mptcp: false,
                multipath: false,
                pm: self.pm,
                conn: None,
                subflows: vec![],
            });
        }
        let subflows = self.classified()?;
        let carrying = subflows
            .iter()
            .filter(|s| s.subflow.bytes_sent + s.subflow.bytes_received > 0)
            .count();
        Ok(PathReport {
            mptcp: true,
            multipath: carrying >= 2,
            pm: self.pm,
            conn: Some(sockopt::info(self.fd())?),
            subflows,
        })
    }
}

/// Map a userspace-PM netlink error for callers that want an `io::Error`.
impl From<PmError> for io::Error {
    fn from(e: PmError) -> Self {
        io::Error::other(e.to_string())
    }
}
