//! The queries themselves: each resolver chosen asked in turn by its trusted interface
//! ([`crate::dns::exchange`], bound to it), a random ID per query, the preferred family
//! first; an answer's addresses as [`crate::dns::addresses`] believes them. Blocking (the
//! queries on a runtime of their own): a client resolves its server once, before it
//! connects.

use crate::dns::{self, DnsError, ExchangeError, Family, Question};
use nena_mptcp::path::LocalIface;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

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
    block_on(ask_each(name, chosen, v4_first, timeout)).unwrap_or_else(|e| {
        Err(AskError::Failed(format!(
            "cannot start a runtime for the queries: {e}"
        )))
    })
}

async fn ask_each(
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
            match exchange(*resolver, via, &qname, fam, until).await {
                Ok(addrs) => match addrs.first() {
                    Some(ip) => return Ok((*ip, *resolver, via.clone())),
                    None => empty += 1,
                },
                Err(Failure::Answer(DnsError::NoSuchName)) => {
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
    /// What the answer said instead ([`dns::addresses`]).
    Answer(DnsError),
    Exchange(ExchangeError),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Answer(e) => write!(f, "{e}"),
            Failure::Exchange(e) => write!(f, "{e}"),
        }
    }
}

/// One question (`name`, `family`) to `resolver` by `via`, answered by `until`.
async fn exchange(
    resolver: SocketAddr,
    via: &LocalIface,
    name: &hickory_proto::rr::Name,
    family: Family,
    until: Instant,
) -> Result<Vec<IpAddr>, Failure> {
    let id = dns::random_id().map_err(|error| {
        Failure::Exchange(ExchangeError::Io {
            step: dns::Step::Reach,
            error,
        })
    })?;
    let q = Question::of(name, family, id);
    let until = tokio::time::Instant::from_std(until);
    let answer = dns::exchange(resolver, Some(&via.name), &q, &q.encode(), until)
        .await
        .map_err(Failure::Exchange)?;
    dns::addresses(&answer, &q).map_err(Failure::Answer)
}

/// `f` run to its end on a runtime of its own (on a thread of its own when the caller is
/// itself on a runtime, which cannot block); an error when no runtime could be made.
fn block_on<F: Future + Send>(f: F) -> std::io::Result<F::Output>
where
    F::Output: Send,
{
    let run = move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map(|rt| rt.block_on(f))
    };
    if tokio::runtime::Handle::try_current().is_ok() {
        std::thread::scope(|s| s.spawn(run).join()).unwrap_or_else(|p| std::panic::resume_unwind(p))
    } else {
        run()
    }
}
