//! The trusted-path-first gate of a client connection. The decisions are sans-IO: the
//! [`GateMachine`] ([`machine`]: the verdicts and refusals, which subflows to withdraw and
//! when, which to close on an exit that is not a proceed), the first flight's clock and
//! pauses ([`flight`]) and the release's plan ([`release`]). [`Gate`] is their driver over a
//! [`Kernel`] ([`kernel`]): it reads the snapshots (`MPTCP_INFO`, `MPTCP_FULL_INFO`:
//! `read.rs`), drains the path-manager events, feeds them to the machine, and carries out
//! what it answers (`steps.rs`: close a subflow, end or keep the hold, make the close
//! abortive, fast close, register with the recovery service, `SUBFLOW_CREATE` for the
//! userspace PM). The production kernel is [`SysKernel`]; the simulator (`tests/sim`)
//! implements [`Kernel`] too and drives this very code.
//!
//! Waiting for the first flight's data-level ACK comes in two forms over the same steps:
//! blocking ([`Gate::wait_first_flight_acked`], `blocking.rs`, over [`Kernel::wait`]) and
//! async on tokio ([`Gate::wait_first_flight_acked_async`], [`connect_async`],
//! `asynchronous.rs`). Both wake up on a path-manager event (the subscription's socket
//! becomes readable) and on the peer's first bytes (the segment that carries them carries a
//! DATA_ACK). The data-level ACK itself raises no event a socket can wait on, so between
//! wake-ups they poll with a short adaptive backoff ([`Backoff`]: 250 µs doubling to 4 ms,
//! reset by every wake-up).

mod asynchronous;
mod blocking;
pub mod flight;
pub mod kernel;
pub mod machine;
mod read;
pub mod release;
mod snapshot;
mod steps;

pub use asynchronous::{connect_async, AsyncClient};
pub use flight::{first_flight_guard, Backoff};
pub use kernel::{Kernel, SysKernel, Wake};
pub use machine::{
    ConnSnapshot, GateMachine, PathEvent, Refusal, Snapshot, Stage, SubflowSnapshot, Verdict,
};
pub use release::{endpoint_notes, ReleaseReport};

use crate::path::{ResolvedPolicy, Trust};
use crate::pm::{Endpoint, PmEvents, PmSocket};
use crate::recovery::RecoveryHandle;
use crate::sockopt::{ConnInfo, SubflowInfo};
use crate::{MptcpError, PmKind};
use serde::Serialize;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::Mutex;

/// One subflow with its trust under the connection's policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClassifiedSubflow {
    #[serde(flatten)]
    pub subflow: SubflowInfo,
    pub trust: Trust,
    /// The interface of the subflow's local address under the policy (`None`: an address
    /// the policy does not know an interface of).
    pub iface: Option<String>,
    /// The subflow is on a metered path (`--metered`).
    pub metered: bool,
}

/// What a connection is: MPTCP or not, multipath or not, and what each subflow carried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathReport {
    /// The connection runs MPTCP (did not fall back to TCP).
    pub mptcp: bool,
    /// At least two subflows carried payload (either direction).
    pub multipath: bool,
    pub pm: PmKind,
    /// The congestion control of the connection's subflows (`getsockopt(TCP_CONGESTION)`
    /// on the MPTCP socket); `None` where the kernel does not say.
    pub congestion: Option<String>,
    pub conn: Option<ConnInfo>,
    pub subflows: Vec<ClassifiedSubflow>,
    /// Why the connection is single-path, where nena knows it: a path none of whose joins
    /// was established (a network that strips MPTCP's options), a subflow of the in-kernel
    /// path manager nena closed during the first flight. `None` when multipath.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub single_path: Option<String>,
}

/// The trusted-path-first gate of one client connection: a [`GateMachine`] and the
/// [`Kernel`] it is carried out on (by default the real one, which holds its own duplicate
/// of the socket descriptor, so the gate keeps working after the stream was moved, e.g.
/// into tokio; the connection is closed only when both the stream and the gate are
/// dropped). The steps that change its state take `&mut self`; the reports take `&self`.
#[derive(Debug)]
pub struct Gate<K: Kernel = SysKernel> {
    kernel: K,
    machine: GateMachine,
    kernel_endpoints: Option<Vec<Endpoint>>,
    /// Recover subflows after link outages once released (userspace PM; default on).
    recover: bool,
    /// The connection's registration with the recovery service (dropped with the gate): it
    /// recovers subflows (userspace PM, `recover`), or only watches the joins (their notes),
    /// and meters (`metered`).
    recovery: Option<RecoveryHandle>,
    /// The service recovers this connection's subflows (not only watches them).
    recovering: bool,
    /// What the peer said of joins, as the subscription read it ([`release::Peer`]).
    peer: release::Peer,
    /// The untrusted subflows nena closed during the first flight (their closes are no
    /// failed joins).
    withdrawn: Vec<SocketAddr>,
    /// Why the connection is single-path, as far as the gate made it so (see
    /// [`PathReport::single_path`]).
    notes: Vec<String>,
    /// The connection's local token (path-manager events carry it); 0 for a fallback.
    token: u32,
    /// When the first flight was written, and its guard ([`flight::FlightClock`]).
    flight: Option<flight::FlightClock>,
    /// A refusal made the socket's close abortive (`SO_LINGER` 0).
    aborted: bool,
    /// The interfaces of metered paths (`--metered IFACE`): after the release their
    /// subflows are backup while another path carries ([`crate::metered`]).
    metered: Vec<String>,
    /// The interface each trusted-address subflow was found to leave by ([`Gate::leaves_by`]),
    /// by (local, remote): looked up once per subflow, not at every poll.
    paths: Mutex<HashMap<(SocketAddr, SocketAddr), Option<u32>>>,
}

impl Gate {
    /// The gate of a connected socket: checks its initial subflow.
    pub(crate) fn open(
        fd: OwnedFd,
        machine: GateMachine,
        pm_sock: Option<PmSocket>,
        kernel_endpoints: Option<Vec<Endpoint>>,
        events: Option<PmEvents>,
    ) -> Result<Gate, MptcpError> {
        Gate::with_kernel(
            SysKernel::new(fd, pm_sock, events),
            machine,
            kernel_endpoints,
        )
    }

    /// The socket this gate watches.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.kernel.fd()
    }
}

impl<K: Kernel> Gate<K> {
    /// The gate of a connection connected from a trusted address, over `kernel`: checks its
    /// initial subflow (and, with the in-kernel PM, holds its payload to the trusted
    /// interfaces). `kernel_endpoints`: the in-kernel PM's endpoints listed when connecting.
    pub fn with_kernel(
        kernel: K,
        machine: GateMachine,
        kernel_endpoints: Option<Vec<Endpoint>>,
    ) -> Result<Gate<K>, MptcpError> {
        let machine = machine.watching_events(kernel.subscribed());
        let mut gate = Gate {
            kernel,
            machine,
            kernel_endpoints,
            recover: true,
            recovery: None,
            recovering: false,
            peer: release::Peer::default(),
            withdrawn: Vec::new(),
            notes: Vec::new(),
            token: 0,
            flight: None,
            aborted: false,
            metered: Vec::new(),
            paths: Default::default(),
        };
        let snap = gate.snapshot()?;
        gate.token = snap.conn.token;
        if gate.machine.needs_hold() {
            gate.hold()?;
        }
        gate.machine.connected(&snap)?;
        Ok(gate)
    }

    /// In-kernel PM: holds the connection's payload to its trusted interfaces until the
    /// first flight is acknowledged ([`crate::hold`]), before anything is written. A process
    /// that provided no hold goes without (the gate's own reaction only); one whose hold
    /// cannot be made refuses, naming why.
    fn hold(&mut self) -> Result<(), MptcpError> {
        let trusted: Vec<u32> = self
            .machine
            .policy()
            .trusted_ifaces()
            .iter()
            .map(|i| i.index)
            .collect();
        match self.kernel.hold(self.token, &trusted) {
            None => Ok(()),
            Some(Ok(())) => {
                self.machine.set_held(true);
                // Until the release the connection's close is abortive: a process that dies
                // (its hold with it) leaves no orphan retransmitting the first flight on
                // whatever subflow the kernel picks, where the kernel resets on SO_LINGER 0.
                if let Err(e) = self.kernel.set_abortive(true) {
                    log::warn!("could not make the held connection's close abortive: {e}");
                }
                Ok(())
            }
            Some(Err(e)) => Err(MptcpError::Policy(flight::hold_refusal(&e))),
        }
    }

    /// The kernel this gate runs on.
    pub fn kernel(&self) -> &K {
        &self.kernel
    }
    /// The connection fell back to plain TCP (only possible with `allow_fallback`).
    pub fn is_fallback(&self) -> bool {
        self.machine.is_fallback()
    }
    pub fn pm(&self) -> PmKind {
        self.machine.pm()
    }
    pub fn policy(&self) -> &ResolvedPolicy {
        self.machine.policy()
    }
    pub fn remote(&self) -> SocketAddr {
        self.machine.remote()
    }
    /// The decisions so far (stage, refusal).
    pub fn machine(&self) -> &GateMachine {
        &self.machine
    }

    /// Turn subflow recovery after link outages on (the default) or off; takes effect at
    /// [`release_untrusted`](Self::release_untrusted). See [`crate::recovery`].
    pub fn set_recovery(&mut self, on: bool) {
        self.recover = on;
    }

    /// The interfaces of metered paths (`--metered IFACE`); takes effect at
    /// [`release_untrusted`](Self::release_untrusted). See [`crate::metered`].
    pub fn set_metered(&mut self, ifaces: Vec<String>) {
        self.metered = ifaces;
    }

    /// The local addresses of this connection's policy that are on a metered interface.
    pub fn metered_addrs(&self) -> Vec<IpAddr> {
        crate::metered::metered_addrs(self.machine.policy(), &self.metered)
    }

    /// The connection's metered subflows are backup now (another path carries); false
    /// without metered paths.
    pub fn metered_saving(&self) -> bool {
        self.recovery.as_ref().is_some_and(|h| h.metered_saving())
    }

    /// Subflows re-created after a link outage so far (0 without recovery).
    pub fn recoveries(&self) -> u64 {
        self.recovery.as_ref().map_or(0, |r| r.recovered())
    }

    /// In-kernel PM endpoints listed when connecting (None in userspace mode or if the
    /// listing failed).
    pub fn kernel_endpoints(&self) -> Option<&[Endpoint]> {
        self.kernel_endpoints.as_deref()
    }

    /// Where the subflows nena opens go: [`crate::path::join_target`] of what the peer
    /// announced (`None`: it denies joins to the initial address and has announced no
    /// other yet).
    pub fn join_target(&self) -> Option<SocketAddr> {
        self.peer.join_target(self.remote())
    }

    /// Call right before writing the first flight. Fails closed if any subflow whose local
    /// address is not trusted exists already, and records the data-level baseline.
    pub fn before_first_flight(&mut self) -> Result<(), MptcpError> {
        if self.machine.stage() == Stage::Connected {
            // Held, the kernel's early subflows stay: see `close_premature`.
            if self.machine.closes_premature() {
                self.close_premature()?;
            }
            self.discard_events();
            let (snap, infos) = self.read()?;
            self.machine.before_first_flight(&snap)?;
            let now = self.kernel.now();
            self.flight = Some(flight::FlightClock::start(
                now,
                &self.machine,
                &snap,
                &infos,
            ));
        } else {
            self.machine.before_first_flight(&Snapshot::default())?;
        }
        self.settle();
        Ok(())
    }

    /// Non-blocking: true once the peer has DATA-ACKed the `len` bytes written after
    /// [`before_first_flight`](Self::before_first_flight). Fails closed if a subflow with an
    /// untrusted local address has sent any payload, or one was closed (or events were
    /// lost) during the first flight.
    pub fn poll_first_flight_acked(&mut self, len: u64) -> Result<bool, MptcpError> {
        let r = self.poll_step(len);
        self.settle();
        r
    }

    /// Fails if a subflow whose local address is not trusted has sent payload (and, with
    /// `received`, received payload). Callers may use it after reading the peer's first
    /// flight to check that it too arrived over trusted subflows only (before releasing).
    pub fn check_untrusted_idle(&mut self, received: bool) -> Result<(), MptcpError> {
        let snap = match self.machine.stage() {
            Stage::Connected | Stage::FirstFlight | Stage::Acked => self.snapshot()?,
            _ => Snapshot::default(),
        };
        let r = self.machine.check_idle(&snap, received);
        self.settle();
        r.map(drop).map_err(Into::into)
    }

    /// After the first flight is acked: let untrusted paths carry data. Userspace PM: asks the
    /// kernel (genl `SUBFLOW_CREATE`) for one subflow from every policy address of the
    /// remote's family other than those in use (the plan: [`release::ReleasePlan`]).
    /// In-kernel PM: the kernel opens its `subflow` endpoints by itself; the report lists
    /// them.
    pub fn release_untrusted(&mut self) -> Result<ReleaseReport, MptcpError> {
        let first = self.machine.stage() == Stage::Acked;
        let snap = if first {
            self.snapshot()?
        } else {
            Snapshot::default()
        };
        // Announced since the last poll (the subscription is still there only if needed).
        self.read_announcements();
        let open = match self.machine.release(&snap)? {
            Verdict::Release { open } => open,
            other => {
                return Err(MptcpError::Io(std::io::Error::other(format!(
                    "internal: the gate answered a release with {other:?}"
                ))))
            }
        };
        if !first || self.is_fallback() {
            self.settle();
            return Ok(ReleaseReport::default());
        }
        let plan = release::ReleasePlan::new(&self.machine, &snap, open, &self.peer);
        self.register(&plan)?;
        self.settle();
        let mut report = ReleaseReport::default();
        let recovering = self.recovery.is_some() && self.recovering;
        if !plan.open.is_empty() {
            self.carry_out(plan.joins(recovering), &mut report)?;
        }
        if !plan.cross.is_empty() {
            let joins = plan.cross_joins(self.machine.policy(), &report, recovering);
            self.carry_out(joins, &mut report)?;
        }
        if self.pm() == PmKind::Kernel {
            if let Some(eps) = &self.kernel_endpoints {
                let locals: Vec<SocketAddr> = self
                    .kernel
                    .subflows()?
                    .iter()
                    .filter_map(|s| s.local)
                    .collect();
                let (eps, lines) =
                    release::kernel_pm_release(&self.machine, eps, &self.peer, &locals);
                report.kernel_endpoints = eps;
                lines.iter().for_each(|l| log::warn!("{l}"));
            }
        }
        Ok(report)
    }
}

impl<K: Kernel> Drop for Gate<K> {
    /// Still held: the gate ends without having proceeded ([`Gate::abandon`]).
    fn drop(&mut self) {
        if self.machine.is_held() {
            self.abandon();
        }
    }
}
