//! The exchange with a resolver, the one every DNS query of nena's goes by (the names
//! resolver's, and the proxy server's for `nena run` and the gateway): the query over UDP
//! from a socket connected to the resolver (the kernel drops datagrams from anyone else),
//! bound to an interface when the caller asks (`SO_BINDTODEVICE`: the query cannot leave by
//! another, whatever the routes, and the socket takes no answer that arrived by another),
//! sent again when no answer came within [`RESEND`]; a datagram that fails
//! [`check_answer`] is a stray, ignored; a truncated answer is asked again over TCP (the
//! same query, RFC 7766 framing), where the answer must pass the check too. Everything
//! within the caller's deadline.

use super::frame::{read_frame, write_frame};
use super::message::{check_answer, DnsError, Question};
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;
use thiserror::Error;
use tokio::net::{TcpSocket, UdpSocket};
use tokio::time::Instant;

/// How long one query carried for `nena run` or the gateway may take at the proxy server's
/// resolver (UDP and TCP together); the responder waits that long beyond a session's opening.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a UDP query waits for its answer before it is sent again.
pub const RESEND: Duration = Duration::from_secs(1);

/// The step of an exchange whose socket failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Making the UDP socket, binding it to the interface, connecting it to the resolver.
    Reach,
    /// Sending the query over UDP.
    Send,
    /// Receiving over UDP (an ICMP "port unreachable" for an earlier copy: the resolver is
    /// not there).
    Receive,
    /// Connecting over TCP.
    TcpConnect,
    /// Sending the query or receiving the answer over TCP.
    Tcp,
}

/// Why an exchange brought no answer.
#[derive(Debug, Error)]
pub enum ExchangeError {
    #[error("no answer")]
    NoAnswer,
    #[error("{error}")]
    Io { step: Step, error: io::Error },
    #[error("closed the TCP connection without an answer")]
    Closed,
    /// The answer over TCP failed [`check_answer`].
    #[error("{0}")]
    Answer(DnsError),
}

fn failed(step: Step) -> impl FnOnce(io::Error) -> ExchangeError {
    move |error| ExchangeError::Io { step, error }
}

/// A random message ID for a query of nena's own.
pub fn random_id() -> io::Result<u16> {
    let mut b = [0u8; 2];
    getrandom::fill(&mut b).map_err(|e| io::Error::other(e.to_string()))?;
    Ok(u16::from_be_bytes(b))
}

/// The answer of `resolver` to `query` (whose ID and question are `q`), by the interface
/// `via` when given, by `until`: checked ([`check_answer`]), whatever its response code.
pub async fn exchange(
    resolver: SocketAddr,
    via: Option<&str>,
    q: &Question,
    query: &[u8],
    until: Instant,
) -> Result<Vec<u8>, ExchangeError> {
    tokio::time::timeout_at(until, udp(resolver, via, q, query))
        .await
        .unwrap_or(Err(ExchangeError::NoAnswer))
}

async fn udp(
    resolver: SocketAddr,
    via: Option<&str>,
    q: &Question,
    query: &[u8],
) -> Result<Vec<u8>, ExchangeError> {
    let any: SocketAddr = match resolver {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let s = UdpSocket::bind(any).await.map_err(failed(Step::Reach))?;
    if let Some(via) = via {
        s.bind_device(Some(via.as_bytes()))
            .map_err(failed(Step::Reach))?;
    }
    s.connect(resolver).await.map_err(failed(Step::Reach))?;
    let mut buf = vec![0u8; 65535];
    loop {
        s.send(query).await.map_err(failed(Step::Send))?;
        let resend = tokio::time::sleep(RESEND);
        tokio::pin!(resend);
        loop {
            let n = tokio::select! {
                r = s.recv(&mut buf) => r.map_err(failed(Step::Receive))?,
                _ = &mut resend => break,
            };
            match check_answer(q, &buf[..n]) {
                Ok(c) if c.truncated => return tcp(resolver, via, q, query).await,
                Ok(_) => return Ok(buf[..n].to_vec()),
                // Not the answer (a late answer to an earlier query, or junk): wait on.
                Err(e) => log::debug!("{resolver}: {e}; ignored"),
            }
        }
    }
}

/// The same query over TCP, from a socket bound to `via` when given.
async fn tcp(
    resolver: SocketAddr,
    via: Option<&str>,
    q: &Question,
    query: &[u8],
) -> Result<Vec<u8>, ExchangeError> {
    let s = match resolver {
        SocketAddr::V4(_) => TcpSocket::new_v4(),
        SocketAddr::V6(_) => TcpSocket::new_v6(),
    }
    .map_err(failed(Step::TcpConnect))?;
    if let Some(via) = via {
        s.bind_device(Some(via.as_bytes()))
            .map_err(failed(Step::TcpConnect))?;
    }
    let mut t = s
        .connect(resolver)
        .await
        .map_err(failed(Step::TcpConnect))?;
    write_frame(&mut t, query)
        .await
        .map_err(failed(Step::Tcp))?;
    let answer = read_frame(&mut t)
        .await
        .map_err(failed(Step::Tcp))?
        .ok_or(ExchangeError::Closed)?;
    check_answer(q, &answer).map_err(ExchangeError::Answer)?;
    Ok(answer)
}
