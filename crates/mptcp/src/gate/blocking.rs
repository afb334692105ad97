//! The blocking driver of the gate's wait for the first flight's data-level ACK: between
//! two steps it waits ([`Kernel::wait`]: `ppoll(2)` on the path-manager event socket and on
//! the connection itself, whose peer's first bytes come with a DATA_ACK; the simulator's
//! virtual clock), bounded by the [`Backoff`] pause and the deadline. For threads that may
//! block (tests, simple tools, the simulator); async code uses
//! [`Gate::wait_first_flight_acked_async`].

use super::{Backoff, Gate, Kernel};
use crate::MptcpError;
use std::time::Duration;

impl<K: Kernel> Gate<K> {
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
        let deadline = self.kernel.now() + timeout;
        let mut backoff = Backoff::new();
        // The connection stays readable once the peer's bytes arrived (nobody reads them
        // here): watch it until it first fires.
        let mut data_hint = true;
        loop {
            if self.poll_step(len)? {
                return Ok(());
            }
            let now = self.kernel.now();
            if now >= deadline {
                return Err(MptcpError::Timeout("the first flight's data-level ACK"));
            }
            let wake = self
                .kernel
                .wait(backoff.next_pause().min(deadline - now), data_hint)?;
            if wake.data {
                data_hint = false;
            }
            if wake.event || wake.data {
                backoff.reset();
            }
        }
    }
}
