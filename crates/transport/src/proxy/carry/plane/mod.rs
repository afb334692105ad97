//! The datagram plane in the transport (issue 56): a datagram session's datagrams as sealed
//! UDP datagrams on each path ([`nena_proto::dgram::Plane`]), the session itself as the
//! fallback where a path's UDP is not confirmed.
//!
//! - **Negotiation** (op 8, [`crate::wire::plane`]): the client offers the plane with the
//!   session's open request (its receiver id, its paths, its redundancy); the server answers
//!   after its reply with its receiver id and UDP port, or declines (`--no-datagram-plane`,
//!   no UDP socket, a mode without datagram keys): the session then carries datagrams as op 7
//!   does. A server older than op 8 closes the session unanswered; the client then opens an
//!   op 7 session and offers that server nothing again while it runs.
//! - **The server** ([`PlaneServer`]): one UDP socket on the listener's address and port;
//!   each datagram goes, by its receiver id ([`nena_proto::dgram::receiver_of`]), to its
//!   session's queue (a bounded table; an unknown id is dropped and counted). Each session
//!   ([`serve_plane`]) opens what its queue brings with its [`Plane`], sends the payload on
//!   within `--allow` as op 7 does (the same checks and the same bound on destinations), and
//!   sends the replies through the plane: sealed to the addresses the plane learned from
//!   authenticated datagrams only, inside the session where no path is confirmed.
//! - **The client** ([`open_datagrams`], [`carry`]): one UDP socket per path, bound to its
//!   interface (`SO_BINDTODEVICE`) and address, connected to the server's UDP port; the
//!   plane's probes and keepalives on tokio's timers; each datagram classified
//!   ([`FlowClassifier`] per destination) and sent where the scheduler says; a copy the plane
//!   cannot send as UDP goes inside the session with its sequence number
//!   ([`crate::wire::dns_udp::Frame`]), and the receiver keeps whichever copy comes first.
//!   The gateway, `nena run` and SOCKS5 UDP ASSOCIATE all carry through [`carry`].

use crate::conn::{ClientConn, ClientOptions};
use crate::error::{Doing, During, Error, ProxyFault};
use crate::ops::metrics::Tally;
use crate::proxy::carry::frames::{read_datagram, write_datagram, RelayCounts, DESTINATIONS, IDLE};
use crate::proxy::open::{open_plane, open_service};
use crate::proxy::socks::{AllowList, Rep};
use crate::wire::dns_udp::{decode_bare, encode_bare, Datagram, Frame};
use crate::wire::plane::{
    Declined, OfferedPath, PlaneAnswer, PlaneOffer, OFFER_VERSION, PATH_TRUSTED,
};
use crate::wire::{Service, WireError};
use nena_proto::dgram::{
    receiver_of, ClassifierConfig, DatagramInfo, DatagramKeys, Delivered, Dropped, FlowClassifier,
    FlowKey, LivenessConfig, PathId, Plane, ReceiverId, Redundancy, Stats, Transmit,
};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, Semaphore};

/// Plane sessions a server keeps at most (a session beyond is declined [`Declined::Full`]).
pub const MAX_PLANE_SESSIONS: usize = 65_536;
/// Datagrams waiting for one session's task at most; more are dropped (as a full router
/// queue drops them) and counted.
const SESSION_QUEUE: usize = 512;
/// Frames read from the session ahead of the task that handles them.
const FRAME_QUEUE: usize = 64;
/// How long a client's path sockets stay open after it ended its side of the session,
/// waiting for the server to end its own.
const LINGER: Duration = Duration::from_secs(1);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A fresh receiver id (random: a guess at another session's id gets its datagrams no
/// further than their failed authentication), below 2^24 as compact datagrams carry it.
fn random_id() -> std::io::Result<ReceiverId> {
    let mut b = [0u8; 4];
    getrandom::fill(&mut b).map_err(|e| std::io::Error::other(format!("getrandom: {e}")))?;
    Ok(u32::from_be_bytes(b) & nena_proto::dgram::compact::MAX_RECEIVER)
}

/// The destination (or source) and the application's bytes of a datagram the plane
/// delivered: the address is the payload's first bytes, or the flow's key when a compact
/// datagram left it out.
fn bare_of(prefix: Option<FlowKey>, payload: &[u8]) -> Result<(SocketAddr, &[u8]), WireError> {
    match prefix {
        None => decode_bare(payload),
        Some(k) => match decode_bare(k.as_slice())? {
            (addr, []) => Ok((addr, payload)),
            _ => Err(WireError::DatagramAddress(k.as_slice()[0])),
        },
    }
}

/// One frame of a plane session (either kind); `None` at a clean end before it.
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R) -> std::io::Result<Option<Frame>> {
    let invalid = |e| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
    let mut header = [0u8; 29];
    if r.read(&mut header[..1]).await? == 0 {
        return Ok(None);
    }
    let n = Frame::header_len(header[0]).map_err(invalid)?;
    r.read_exact(&mut header[1..n]).await?;
    let (seq, addr, len) = Frame::parse_header(&header[..n]).map_err(invalid)?;
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload).await?;
    Ok(Some(Frame {
        seq,
        datagram: Datagram { addr, payload },
    }))
}

/// The session's frames, read by a future of their own into a queue of [`FRAME_QUEUE`], so
/// that the loop taking them also waits on the paths' sockets: the queue, and the reading
/// future (it ends at the session's clean end, or once the queue is dropped).
fn frame_queue<R: AsyncRead + Unpin>(
    reader: &mut R,
) -> (
    mpsc::Receiver<Frame>,
    impl std::future::Future<Output = Result<(), Error>> + '_,
) {
    let (ftx, frx) = mpsc::channel::<Frame>(FRAME_QUEUE);
    let reading = async move {
        while let Some(f) = read_frame(reader).await.during(Doing::ReadingDatagram)? {
            if ftx.send(f).await.is_err() {
                break;
            }
        }
        Ok::<_, Error>(())
    };
    (frx, reading)
}

/// Writes one frame (with `seq`: a copy the plane also numbered) and flushes.
pub use crate::proxy::carry::frames::write_frame;

/// What a plane session did, for its final line (either side).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlaneCounts {
    /// Application datagrams sealed and sent as UDP on at least one path.
    pub udp: u64,
    /// Application datagrams (or copies) carried inside the session.
    pub in_session: u64,
    /// Application datagrams received from the session and delivered (the first copy).
    pub from_session: u64,
    /// Copies from the session dropped because the UDP copy came first.
    pub session_duplicates: u64,
    /// The opener's counts (delivered by UDP, and every drop by reason).
    pub stats: Stats,
}

impl PlaneCounts {
    /// The figures the metrics count ([`crate::ops::metrics::Tally::datagrams`]).
    pub fn metrics(&self) -> crate::ops::metrics::DatagramCounts {
        let s = &self.stats;
        crate::ops::metrics::DatagramCounts {
            udp_sent: self.udp,
            session_sent: self.in_session,
            udp_received: s.delivered,
            session_received: self.from_session,
            unauthentic: s.unauthentic,
            replayed: s.replayed,
            too_old: s.too_old,
            malformed: s.malformed,
            duplicate: s.duplicate + self.session_duplicates,
            unknown_flow: s.unknown_flow,
        }
    }

    pub fn describe(&self) -> String {
        let s = &self.stats;
        format!(
            "plane: {} sent as UDP, {} inside the session; received {} by UDP, {} from the \
             session; dropped: {} failed authentication, {} replayed, {} too old, {} malformed, \
             {} duplicates ({} from the session), {} of an unknown flow; {} compact",
            self.udp,
            self.in_session,
            s.delivered,
            self.from_session,
            s.unauthentic,
            s.replayed,
            s.too_old,
            s.malformed,
            s.duplicate,
            self.session_duplicates,
            s.unknown_flow,
            s.compact
        )
    }
}

/// Logs a datagram the plane dropped: the first of its kind and then one in 1000 at warn
/// (a forger must not fill the log), duplicates (redundancy's normal) at debug.
fn log_drop(side: &str, d: &Dropped, from: SocketAddr, stats: &Stats) {
    let n = match d {
        Dropped::Duplicate { .. } => {
            log::debug!("{side}: {d} from {from}");
            return;
        }
        Dropped::Unauthentic => stats.unauthentic,
        Dropped::Replayed(_) => stats.replayed,
        Dropped::TooOld(_) => stats.too_old,
        Dropped::Malformed(_) => stats.malformed,
        Dropped::UnknownReceiver(_) => stats.unknown_receiver,
        Dropped::UnknownFlow(_) => stats.unknown_flow,
    };
    if n == 1 || n.is_multiple_of(1000) {
        log::warn!("{side}: a datagram from {from} dropped: {d} ({n} so far)");
    }
}

mod client;
mod server;

pub use client::*;
pub use server::*;

#[cfg(test)]
mod tests;
