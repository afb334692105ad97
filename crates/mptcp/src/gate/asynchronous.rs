//! The async (tokio) driver of the gate: [`connect_async`] connects without blocking a thread
//! (a non-blocking connect() awaited by tokio) and [`AsyncClient`] /
//! [`Gate::wait_first_flight_acked_async`] wait for the first flight's data-level ACK on
//! readiness: the path-manager event socket and the connection are registered with tokio's
//! reactor (`AsyncFd`), and the [`Backoff`] pause bounds the wait in between because the
//! ACK itself raises no event. The netlink requests on the way (family resolution,
//! `SUBFLOW_CREATE`) are answered by the kernel synchronously and never wait on the network.
//! Must run inside a tokio runtime with I/O and time enabled.

use super::{Backoff, Gate, ReleaseReport};
use crate::client::{prepare, ConnectOptions, TrustedWait};
use crate::MptcpError;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::net::{TcpSocket, TcpStream};

/// A connected MPTCP client socket on tokio, with its gate.
#[derive(Debug)]
pub struct AsyncClient {
    pub stream: TcpStream,
    gate: Gate,
}

/// Connect to `remote` from a trusted local address, as [`crate::connect`] does, without
/// blocking the calling thread.
pub async fn connect_async(
    remote: SocketAddr,
    opts: &ConnectOptions,
) -> Result<AsyncClient, MptcpError> {
    let mut wait = TrustedWait::new(remote, opts);
    let (stream, pending) = loop {
        let Some((sock, pending)) = wait.next(prepare(remote, opts))? else {
            tokio::time::sleep(TrustedWait::POLL).await;
            continue;
        };
        sock.set_nonblocking(true)?;
        let socket = TcpSocket::from_std_stream(sock.into());
        match tokio::time::timeout(opts.timeout, socket.connect(pending.dial())).await {
            Ok(Ok(s)) => break (s, pending),
            Ok(Err(e)) if wait.retry_connect(&e) => tokio::time::sleep(TrustedWait::POLL).await,
            Ok(Err(e)) => return Err(MptcpError::Connect { remote, source: e }),
            Err(_) => {
                return Err(MptcpError::Connect {
                    remote,
                    source: io::Error::new(io::ErrorKind::TimedOut, "connection timed out"),
                })
            }
        }
    };
    let gate = pending.finish(stream.as_fd(), opts.allow_fallback)?;
    Ok(AsyncClient { stream, gate })
}

impl AsyncClient {
    /// Split into the stream and its gate.
    pub fn into_parts(self) -> (TcpStream, Gate) {
        (self.stream, self.gate)
    }
    pub fn gate(&self) -> &Gate {
        &self.gate
    }
    pub fn gate_mut(&mut self) -> &mut Gate {
        &mut self.gate
    }
    /// See [`Gate::before_first_flight`] (no waiting).
    pub fn before_first_flight(&mut self) -> Result<(), MptcpError> {
        self.gate.before_first_flight()
    }
    /// Wait for the first flight's ACK, then release the untrusted paths.
    pub async fn after_first_flight(
        &mut self,
        len: u64,
        timeout: Duration,
    ) -> Result<ReleaseReport, MptcpError> {
        self.gate
            .wait_first_flight_acked_async(len, timeout)
            .await?;
        self.gate.release_untrusted()
    }
}

/// Register a duplicate of `fd` with the reactor for readability. The registration owns the
/// duplicate, so the descriptor it watches stays open exactly as long as it is registered.
fn watch(fd: BorrowedFd<'_>) -> io::Result<AsyncFd<OwnedFd>> {
    let dup = fd.try_clone_to_owned()?;
    // SAFETY: the AsyncFd owns `dup`, which therefore stays open and refers to the same open
    // file description for the AsyncFd's whole life, and `as_raw_fd` always returns it.
    Ok(unsafe { AsyncFd::register_with_interest(dup, Interest::READABLE) }?)
}

/// Readable, then cleared (the caller drains the socket).
async fn event_ready(fd: Option<&AsyncFd<OwnedFd>>) -> io::Result<()> {
    match fd {
        Some(fd) => {
            fd.readable().await?.clear_ready();
            Ok(())
        }
        None => std::future::pending().await,
    }
}

impl Gate {
    /// Async form of [`wait_first_flight_acked`](Self::wait_first_flight_acked): the same
    /// steps and checks, waiting on readiness instead of blocking the thread.
    pub async fn wait_first_flight_acked_async(
        &mut self,
        len: u64,
        timeout: Duration,
    ) -> Result<(), MptcpError> {
        let r = self.wait_async(len, timeout).await;
        self.settle();
        r
    }

    async fn wait_async(&mut self, len: u64, timeout: Duration) -> Result<(), MptcpError> {
        let deadline = tokio::time::Instant::now() + timeout;
        if self.poll_step(len)? {
            return Ok(());
        }
        let events = match self.kernel.events_fd() {
            Some(ev) => Some(watch(ev)?),
            None => None,
        };
        let data = watch(self.fd())?;
        // The connection stays readable once the peer's bytes arrived (nobody reads them
        // here): watch it until it first fires.
        let mut data_hint = true;
        let mut backoff = Backoff::new();
        loop {
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Err(MptcpError::Timeout("the first flight's data-level ACK"));
            }
            let pause = backoff.next_pause().min(deadline - now);
            tokio::select! {
                r = event_ready(events.as_ref()) => {
                    r?;
                    backoff.reset();
                }
                r = data.readable(), if data_hint => {
                    // Left ready: nothing here reads the connection.
                    drop(r?);
                    data_hint = false;
                    backoff.reset();
                }
                _ = tokio::time::sleep(pause) => {}
            }
            if self.poll_step(len)? {
                return Ok(());
            }
        }
    }
}
