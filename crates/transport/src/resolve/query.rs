//! The queries themselves: UDP (TCP when the answer is truncated) on a socket bound to the
//! trusted interface (`SO_BINDTODEVICE`) and connected to the resolver, a random ID per
//! query, a second copy of the query when the first got no answer within a second, and
//! answers that fail [`super::dns::addresses`]'s checks ignored as strays. Blocking: a
//! client resolves its server once, before it connects.

use super::dns::{self, AnswerError, Family};
use nena_mptcp::path::LocalIface;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// How long a UDP query waits before it is sent again.
const RESEND: Duration = Duration::from_secs(1);

/// Why no address came back.
#[derive(Debug)]
pub(super) enum AskError {
    NoSuchName { resolver: SocketAddr, via: String },
    NoAddress { resolver: SocketAddr, via: String },
    Failed(String),
}

/// The first address `name` has, asking each resolver in turn by its interface: the
/// preferred family first, then the other. A name the resolver says does not exist ends
/// the search (a second resolver would only be asked to disagree).
pub(super) fn ask(
    name: &str,
    chosen: &[(SocketAddr, LocalIface)],
    v4_first: bool,
    timeout: Duration,
) -> Result<(IpAddr, SocketAddr, LocalIface), AskError> {
    let qname = dns::name(name).map_err(AskError::Failed)?;
    let families = if v4_first {
        [Family::V4, Family::V6]
    } else {
        [Family::V6, Family::V4]
    };
    let deadline = Instant::now() + timeout;
    let mut reasons = Vec::new();
    for (i, (resolver, via)) in chosen.iter().enumerate() {
        // Each resolver left gets an equal share of the time left.
        let left = deadline.saturating_duration_since(Instant::now());
        let share = left / (chosen.len() - i) as u32;
        let until = Instant::now() + share;
        let mut empty = 0;
        for fam in families {
            match exchange(*resolver, via, &qname, fam, until) {
                Ok(addrs) => match addrs.first() {
                    Some(ip) => return Ok((*ip, *resolver, via.clone())),
                    None => empty += 1,
                },
                Err(Failure::Answer(AnswerError::NoSuchName)) => {
                    return Err(AskError::NoSuchName {
                        resolver: *resolver,
                        via: via.name.clone(),
                    })
                }
                Err(e) => {
                    reasons.push(format!("{resolver} by `{}`: {e}", via.name));
                    break;
                }
            }
        }
        if empty == families.len() {
            return Err(AskError::NoAddress {
                resolver: *resolver,
                via: via.name.clone(),
            });
        }
    }
    Err(AskError::Failed(reasons.join("; ")))
}

/// Why one exchange gave no addresses.
#[derive(Debug)]
enum Failure {
    Answer(AnswerError),
    Io(io::Error),
    NoAnswer,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Answer(e) => write!(f, "{e}"),
            Failure::Io(e) => write!(f, "{e}"),
            Failure::NoAnswer => f.write_str("no answer"),
        }
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Failure::Io(e)
    }
}

fn random_id() -> Result<u16, Failure> {
    let mut b = [0u8; 2];
    getrandom::fill(&mut b).map_err(|e| Failure::Io(io::Error::other(e.to_string())))?;
    Ok(u16::from_be_bytes(b))
}

/// A socket of `ty` bound to `via` and connected to `resolver` (TCP: within `until`).
fn bound(
    resolver: SocketAddr,
    via: &LocalIface,
    ty: Type,
    proto: Protocol,
    until: Instant,
) -> Result<Socket, Failure> {
    let s = Socket::new(Domain::for_address(resolver), ty, Some(proto))?;
    s.set_cloexec(true)?;
    s.bind_device(Some(via.name.as_bytes()))?;
    let addr = SockAddr::from(resolver);
    if ty == Type::STREAM {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Failure::NoAnswer);
        }
        s.connect_timeout(&addr, left)?;
    } else {
        s.connect(&addr)?;
    }
    Ok(s)
}

/// One question (`name`, `family`) to `resolver` by `via`, answered by `until`.
fn exchange(
    resolver: SocketAddr,
    via: &LocalIface,
    name: &hickory_proto::rr::Name,
    family: Family,
    until: Instant,
) -> Result<Vec<IpAddr>, Failure> {
    let id = random_id()?;
    let q = dns::query(name, family, id);
    let s = bound(resolver, via, Type::DGRAM, Protocol::UDP, until)?;
    let mut buf = vec![0u8; 4096];
    let mut next_send = Instant::now();
    loop {
        let now = Instant::now();
        if now >= until {
            return Err(Failure::NoAnswer);
        }
        if now >= next_send {
            s.send(&q)?;
            next_send = now + RESEND;
        }
        let wait = until.min(next_send).saturating_duration_since(now);
        s.set_read_timeout(Some(wait.max(Duration::from_millis(1))))?;
        let n = match (&s).read(&mut buf) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            // An ICMP "port unreachable" for an earlier copy: the resolver is not there.
            Err(e) => return Err(e.into()),
        };
        match dns::addresses(&buf[..n], name, family, id) {
            Ok(a) => return Ok(a),
            Err(AnswerError::Truncated) => return exchange_tcp(resolver, via, name, family, until),
            Err(
                AnswerError::OtherId { .. }
                | AnswerError::OtherQuestion
                | AnswerError::NotResponse
                | AnswerError::Malformed(_),
            ) => {
                log::debug!("a stray datagram from {resolver} ignored");
            }
            Err(e) => return Err(Failure::Answer(e)),
        }
    }
}

/// The same question over TCP (RFC 7766: a two-byte length before each message).
fn exchange_tcp(
    resolver: SocketAddr,
    via: &LocalIface,
    name: &hickory_proto::rr::Name,
    family: Family,
    until: Instant,
) -> Result<Vec<IpAddr>, Failure> {
    let id = random_id()?;
    let q = dns::query(name, family, id);
    let mut s = bound(resolver, via, Type::STREAM, Protocol::TCP, until)?;
    let left = until.saturating_duration_since(Instant::now());
    s.set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
    s.set_write_timeout(Some(left.max(Duration::from_millis(1))))?;
    let mut out = Vec::with_capacity(q.len() + 2);
    out.extend_from_slice(&(q.len() as u16).to_be_bytes());
    out.extend_from_slice(&q);
    s.write_all(&out)?;
    let mut len = [0u8; 2];
    s.read_exact(&mut len)?;
    let mut msg = vec![0u8; u16::from_be_bytes(len) as usize];
    s.read_exact(&mut msg)?;
    dns::addresses(&msg, name, family, id).map_err(Failure::Answer)
}
