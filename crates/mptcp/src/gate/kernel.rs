//! What the gate's driver needs from the operating system, as the [`Kernel`] trait, and
//! [`SysKernel`], its implementation over the real socket (`MPTCP_INFO`,
//! `MPTCP_FULL_INFO`, `SO_LINGER`, `connect(AF_UNSPEC)`), the path manager's netlink
//! (events, `SUBFLOW_CREATE`), `sock_diag` (bound device, `SOCK_DESTROY`), rtnetlink
//! routes, the first-flight hold ([`crate::hold`]), the recovery service and the clock. A
//! simulator implements the trait too (`tests/sim`) and drives the real [`Gate`](super::Gate).

use crate::hold::Held;
use crate::metered::MeteredMachine;
use crate::pm::{PmEvent, PmEvents, PmSocket};
use crate::recovery::{RecoveryHandle, RecoveryMachine};
use crate::sockopt::{self, ConnInfo, SubflowInfo};
use crate::MptcpError;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

/// What ended a wait ([`Kernel::wait`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Wake {
    /// The path-manager event subscription became readable.
    pub event: bool,
    /// The connection became readable (or hung up): the peer sent something.
    pub data: bool,
}

/// The operating system as the gate's driver sees it: one connection, its subflows, the
/// path manager, the hold and the clock. Every method is one kernel request (or a wait);
/// none decides anything.
pub trait Kernel: std::fmt::Debug {
    /// A subflow socket as the kernel's socket list names it ([`Kernel::sockets_of`]), to
    /// close exactly that one.
    type Socket: std::fmt::Debug;

    /// `MPTCP_INFO` of the connection.
    fn info(&self) -> io::Result<ConnInfo>;
    /// `MPTCP_FULL_INFO`: the connection's subflows, the initial one first.
    fn subflows(&self) -> io::Result<Vec<SubflowInfo>>;
    /// `sock_diag`'s exact lookup of the socket `local` -> `remote` through interface
    /// `dev`: the device it is bound to (`Some(0)`: none), `None` when not found there.
    fn bound_dev(&self, local: SocketAddr, remote: SocketAddr, dev: u32)
        -> io::Result<Option<u32>>;
    /// The interface the route from `src` to `dst` leaves by.
    fn output_iface(&self, src: IpAddr, dst: IpAddr) -> io::Result<Option<u32>>;
    /// Whether there is a route to `dst` through interface `oif`.
    fn has_route(&self, dst: IpAddr, oif: u32) -> io::Result<bool>;
    /// The path-manager events queued since the last call; `None` without a subscription.
    fn pm_events(&mut self) -> Option<Result<Vec<PmEvent>, String>>;
    /// Whether the subscription is there.
    fn subscribed(&self) -> bool;
    /// Drop the subscription.
    fn unsubscribe(&mut self);
    /// Close (`SOCK_DESTROY`) the TCP socket `local` -> `remote`; false: none found.
    fn destroy(&self, local: SocketAddr, remote: SocketAddr) -> io::Result<bool>;
    /// Every subflow socket of the connection with local `token` (`sock_diag`), with its
    /// addresses.
    fn sockets_of(&self, token: u32) -> io::Result<Vec<(SocketAddr, SocketAddr, Self::Socket)>>;
    /// Close (`SOCK_DESTROY`) one socket [`sockets_of`](Self::sockets_of) listed.
    fn destroy_socket(&self, s: &Self::Socket) -> io::Result<bool>;
    /// `SO_LINGER` 0 (`true`: the close resets) or off (`false`).
    fn set_abortive(&self, on: bool) -> io::Result<()>;
    /// The MPTCP fast close (`connect(AF_UNSPEC)`): every subflow reset, the token gone.
    fn fast_close(&self) -> io::Result<()>;
    /// Userspace PM: `SUBFLOW_CREATE` from `local` (on `ifindex`) to `remote`. The outer
    /// error: no path-manager socket; the inner one: the kernel refused the subflow.
    fn subflow_create(
        &mut self,
        token: u32,
        local: IpAddr,
        ifindex: Option<u32>,
        remote: SocketAddr,
        backup: bool,
    ) -> Result<Result<(), String>, MptcpError>;
    /// Hold the connection's payload to the interfaces `trusted` ([`crate::hold`]): `None`
    /// when the process provided no hold, else whether it could be made.
    fn hold(&mut self, token: u32, trusted: &[u32]) -> Option<Result<(), String>>;
    /// The packets the hold dropped so far (`None`: not held, or no entry).
    fn hold_dropped(&self) -> Option<u64>;
    /// End the hold now (the first flight is acknowledged).
    fn release_hold(&mut self);
    /// Keep the hold until the connection is gone from the kernel, then end it.
    fn keep_hold_until_gone(&mut self);
    /// Register the connection with the recovery service.
    fn register_recovery(
        &mut self,
        token: u32,
        machine: RecoveryMachine,
        metered: Option<MeteredMachine>,
    ) -> Result<RecoveryHandle, MptcpError>;
    /// The clock.
    fn now(&self) -> Instant;
    /// Sleep (a short pause between two looks at a closing subflow).
    fn sleep(&mut self, d: Duration);
    /// Block until the subscription or (with `data`) the connection is readable, or
    /// `pause` has passed.
    fn wait(&mut self, pause: Duration, data: bool) -> io::Result<Wake>;
}

/// The real [`Kernel`]: a duplicate of the connection's descriptor (the connection is
/// closed only when both the stream and the gate are dropped), the path manager's sockets
/// and the hold.
#[derive(Debug)]
pub struct SysKernel {
    fd: OwnedFd,
    pm_sock: Option<PmSocket>,
    /// The event subscription, kept only while it matters.
    events: Option<PmEvents>,
    held: Option<Held>,
}

impl SysKernel {
    pub(crate) fn new(fd: OwnedFd, pm_sock: Option<PmSocket>, events: Option<PmEvents>) -> Self {
        SysKernel {
            fd,
            pm_sock,
            events,
            held: None,
        }
    }
    /// The connection's socket.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
    /// The event subscription's socket, while there is one.
    pub(crate) fn events_fd(&self) -> Option<BorrowedFd<'_>> {
        self.events.as_ref().map(|e| e.as_fd())
    }
}

impl Kernel for SysKernel {
    type Socket = crate::diag::DiagSubflow;

    fn info(&self) -> io::Result<ConnInfo> {
        sockopt::info(self.fd())
    }
    fn subflows(&self) -> io::Result<Vec<SubflowInfo>> {
        sockopt::subflows(self.fd())
    }
    fn bound_dev(
        &self,
        local: SocketAddr,
        remote: SocketAddr,
        dev: u32,
    ) -> io::Result<Option<u32>> {
        crate::diag::bound_dev(local, remote, dev)
    }
    fn output_iface(&self, src: IpAddr, dst: IpAddr) -> io::Result<Option<u32>> {
        crate::route::output_iface(src, dst)
    }
    fn has_route(&self, dst: IpAddr, oif: u32) -> io::Result<bool> {
        Ok(crate::route::lookup(dst, Some(oif))?.is_some())
    }
    fn pm_events(&mut self) -> Option<Result<Vec<PmEvent>, String>> {
        Some(self.events.as_mut()?.drain().map_err(|e| e.to_string()))
    }
    fn subscribed(&self) -> bool {
        self.events.is_some()
    }
    fn unsubscribe(&mut self) {
        self.events = None;
    }
    fn destroy(&self, local: SocketAddr, remote: SocketAddr) -> io::Result<bool> {
        crate::diag::destroy(local, remote)
    }
    fn sockets_of(&self, token: u32) -> io::Result<Vec<(SocketAddr, SocketAddr, Self::Socket)>> {
        Ok(crate::diag::subflows_of(token)?
            .into_iter()
            .map(|s| (s.local, s.remote, s))
            .collect())
    }
    fn destroy_socket(&self, s: &Self::Socket) -> io::Result<bool> {
        crate::diag::destroy_subflow(s)
    }
    fn set_abortive(&self, on: bool) -> io::Result<()> {
        if on {
            sockopt::set_linger_zero(self.fd())
        } else {
            sockopt::set_linger_off(self.fd())
        }
    }
    fn fast_close(&self) -> io::Result<()> {
        sockopt::disconnect(self.fd())
    }
    fn subflow_create(
        &mut self,
        token: u32,
        local: IpAddr,
        ifindex: Option<u32>,
        remote: SocketAddr,
        backup: bool,
    ) -> Result<Result<(), String>, MptcpError> {
        if self.pm_sock.is_none() {
            self.pm_sock = Some(PmSocket::open().map_err(MptcpError::Netlink)?);
        }
        let pm = self.pm_sock.as_mut().expect("opened above");
        Ok(pm
            .subflow_create_with(token, local, ifindex, remote, backup)
            .map_err(|e| e.to_string()))
    }
    fn hold(&mut self, token: u32, trusted: &[u32]) -> Option<Result<(), String>> {
        let hold = crate::hold::get()?;
        Some(
            hold.map_err(str::to_string)
                .and_then(|h| {
                    if token == 0 {
                        return Err("the kernel gave the connection no token".to_string());
                    }
                    Held::new(h, token, trusted)
                })
                .map(|h| self.held = Some(h)),
        )
    }
    fn hold_dropped(&self) -> Option<u64> {
        self.held.as_ref().and_then(|h| h.dropped())
    }
    fn release_hold(&mut self) {
        if let Some(h) = self.held.take() {
            h.release();
        }
    }
    fn keep_hold_until_gone(&mut self) {
        if let Some(h) = self.held.take() {
            h.keep_until_gone(crate::diag::TokenWatch::of_socket(self.fd()));
        }
    }
    fn register_recovery(
        &mut self,
        token: u32,
        machine: RecoveryMachine,
        metered: Option<MeteredMachine>,
    ) -> Result<RecoveryHandle, MptcpError> {
        crate::recovery::register_metered(token, machine, metered)
    }
    fn now(&self) -> Instant {
        Instant::now()
    }
    fn sleep(&mut self, d: Duration) {
        std::thread::sleep(d)
    }

    /// `ppoll(2)` on the subscription's socket and (with `data`) the connection.
    fn wait(&mut self, pause: Duration, data: bool) -> io::Result<Wake> {
        let mut fds = Vec::with_capacity(2);
        let events_at = self.events.as_ref().map(|ev| {
            fds.push(libc::pollfd {
                fd: ev.as_fd().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
            fds.len() - 1
        });
        let data_at = data.then(|| {
            fds.push(libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
            fds.len() - 1
        });
        let ts = libc::timespec {
            tv_sec: pause.as_secs() as libc::time_t,
            tv_nsec: pause.subsec_nanos() as libc::c_long,
        };
        // SAFETY: `fds` holds `fds.len()` initialised pollfd entries for descriptors owned by
        // `self` (alive for the call); `ts` lives for the call; no signal mask is passed.
        let rc = unsafe {
            libc::ppoll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(Wake::default())
            } else {
                Err(e)
            };
        }
        let fired = |at: Option<usize>| at.is_some_and(|i| fds[i].revents != 0);
        Ok(Wake {
            event: fired(events_at),
            data: fired(data_at),
        })
    }
}
