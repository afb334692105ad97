//! The blocking driver of the gate's wait for the first flight's data-level ACK: between
//! two steps it sleeps in `ppoll(2)` on the path-manager event socket and on the connection
//! itself (the peer's first bytes come with a DATA_ACK), bounded by the [`Backoff`] pause
//! and the deadline. For threads that may block (tests, simple tools); async code uses
//! [`Gate::wait_first_flight_acked_async`].

use super::{Backoff, Gate};
use crate::MptcpError;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

/// What ended a wait.
#[derive(Debug, Default, Clone, Copy)]
struct Wake {
    /// The event socket became readable.
    event: bool,
    /// The connection became readable (or hung up): the peer sent something.
    data: bool,
}

impl Gate {
    /// Blocking form of [`poll_first_flight_acked`](Self::poll_first_flight_acked): returns
    /// once the first flight of `len` bytes is data-acked and checked, fails closed as soon
    /// as a check fails, and with [`MptcpError::Timeout`] after `timeout`.
    pub fn wait_first_flight_acked(
        &mut self,
        len: u64,
        timeout: Duration,
    ) -> Result<(), MptcpError> {
        let r = self.wait_blocking(len, timeout);
        self.settle();
        r
    }

    fn wait_blocking(&mut self, len: u64, timeout: Duration) -> Result<(), MptcpError> {
        let deadline = Instant::now() + timeout;
        let mut backoff = Backoff::new();
        // The connection stays readable once the peer's bytes arrived (nobody reads them
        // here): watch it until it first fires.
        let mut data_hint = true;
        loop {
            if self.poll_step(len)? {
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(MptcpError::Timeout("the first flight's data-level ACK"));
            }
            let wake = self.wait_readable(backoff.next_pause().min(deadline - now), data_hint)?;
            if wake.data {
                data_hint = false;
            }
            if wake.event || wake.data {
                backoff.reset();
            }
        }
    }

    /// Sleep until the event socket or (with `data`) the connection is readable, or `pause`
    /// has passed.
    fn wait_readable(&self, pause: Duration, data: bool) -> io::Result<Wake> {
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
