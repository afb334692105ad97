//! kato-mpc on this side of a connection: what nena's BPF programs recorded about it
//! ([`MpcSeen`], read through an [`MpcLookup`] the command line hands over), the wait for a
//! record's keys on the runtime's timer, and the session it decides ([`mpc_session`]).

use crate::error::{KatoMpc, Result};
use serde::Serialize;
use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::time::Duration;

/// What nena's kato-mpc programs recorded about one connection (nena-bpf's `mpc`
/// module; the transport does not load BPF itself). `Debug` shows the keys' tokens only.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct MpcSeen {
    pub requested: bool,
    pub consented: bool,
    pub confirmed: bool,
    pub local_key: Option<[u8; 8]>,
    pub remote_key: Option<[u8; 8]>,
}

impl std::fmt::Debug for MpcSeen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use nena_proto::mpc::KeyByToken;
        f.debug_struct("MpcSeen")
            .field("requested", &self.requested)
            .field("consented", &self.consented)
            .field("confirmed", &self.confirmed)
            .field("local_key", &self.local_key.as_ref().map(KeyByToken))
            .field("remote_key", &self.remote_key.as_ref().map(KeyByToken))
            .finish()
    }
}

/// The kato-mpc programs' records of connections, by the 4-tuple of a connection's first
/// subflow as this host sees it (the command line that attached them implements it).
pub trait MpcRecords: Send + Sync + 'static {
    /// The record of the connection (local, remote) as it is now, without waiting (the
    /// caller polls); `Ok(None)`: the programs hold none.
    fn read(&self, local: SocketAddr, remote: SocketAddr) -> Result<Option<MpcSeen>>;
    /// The connection's side decided: its record goes, whatever it held.
    fn forget(&self, local: SocketAddr, remote: SocketAddr);
}

/// The kato-mpc programs' records, as the command line that attached them reads them.
#[derive(Clone)]
pub struct MpcLookup(pub std::sync::Arc<dyn MpcRecords>);

/// How long a side waits for its record's keys (a third ACK lost on the way lets the first
/// data segment carry them).
pub const MPC_KEYS_WITHIN: Duration = Duration::from_secs(1);
/// How often the record is read again meanwhile.
const MPC_POLL: Duration = Duration::from_millis(5);

/// The record of (local, remote), read until it holds both keys or [`MPC_KEYS_WITHIN`]
/// passed, waiting on the runtime's timer; then forgotten, whatever it held.
async fn await_record(
    lookup: &MpcLookup,
    local: SocketAddr,
    remote: SocketAddr,
) -> Result<Option<MpcSeen>> {
    let end = tokio::time::Instant::now() + MPC_KEYS_WITHIN;
    let r = loop {
        let r = lookup.0.read(local, remote);
        let keyed = matches!(&r, Ok(Some(s)) if s.local_key.is_some() && s.remote_key.is_some());
        if keyed || r.is_err() || tokio::time::Instant::now() >= end {
            break r;
        }
        tokio::time::sleep(MPC_POLL).await;
    };
    lookup.0.forget(local, remote);
    r
}

impl std::fmt::Debug for MpcLookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MpcLookup(..)")
    }
}

/// How a kato-mpc connection came out, for reports: `None` in other modes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MpcOutcome {
    /// Scrambling (both sides agreed) or plain on both sides.
    pub scrambled: bool,
    /// Why it is plain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plain_because: Option<String>,
}

impl MpcOutcome {
    /// The line the tools print when kato-mpc was not negotiated (None: it was).
    pub fn warning(&self) -> Option<String> {
        self.plain_because.as_ref().map(|r| {
            format!("kato-mpc not negotiated ({r}): this connection is plain on both sides")
        })
    }
}

/// The session of a kato-mpc connection on `fd`, from what the programs recorded (`lookup`
/// None: no programs on this side, so no request or consent). Errors close the connection:
/// both sides agreed but this one cannot scramble as the other will; or the connection
/// would be plain and `allow_plain` is false (fail closed: the caller has written nothing);
/// or the programs hold no record of it (`lookup` given: the peer may scramble).
pub async fn mpc_session(
    role: nena_proto::Role,
    fd: BorrowedFd<'_>,
    local: SocketAddr,
    remote: SocketAddr,
    lookup: Option<&MpcLookup>,
    allow_plain: bool,
) -> Result<(nena_proto::Session, MpcOutcome)> {
    use nena_proto::mpc::{decide, MpcDecision, MpcObservation};
    let fallback = nena_mptcp::is_fallback(fd).unwrap_or(false);
    let seen = match (lookup, fallback) {
        (Some(l), false) => await_record(l, local, remote).await?,
        (Some(l), true) => {
            l.0.forget(local, remote);
            None
        }
        (None, _) => None,
    };
    let obs = MpcObservation {
        fallback,
        seen: seen.is_some(),
        unrecorded: lookup.is_some() && !fallback && seen.is_none(),
        requested: seen.is_some_and(|s| s.requested),
        consented: seen.is_some_and(|s| s.consented),
        confirmed: seen.is_some_and(|s| s.confirmed),
        local_key: seen.and_then(|s| s.local_key),
        remote_key: seen.and_then(|s| s.remote_key),
        socket_token: nena_mptcp::info(fd).ok().map(|i| i.token),
    };
    let d = decide(role, &obs).map_err(KatoMpc::Undecidable)?;
    if let (MpcDecision::Plain(reason), false) = (&d, allow_plain) {
        return Err(KatoMpc::Plain {
            reason: *reason,
            role,
        }
        .into());
    }
    let outcome = match &d {
        MpcDecision::Scramble(_) => MpcOutcome {
            scrambled: true,
            plain_because: None,
        },
        MpcDecision::Plain(r) => MpcOutcome {
            scrambled: false,
            plain_because: Some(r.describe(role).to_string()),
        },
    };
    Ok((nena_proto::Session::from_decision(role, &d), outcome))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A record whose keys appear only when `keyed` is set, by another task.
    #[derive(Default)]
    struct Fake {
        keyed: AtomicBool,
        reads: AtomicUsize,
        forgotten: AtomicUsize,
    }

    impl MpcRecords for Fake {
        fn read(&self, _: SocketAddr, _: SocketAddr) -> Result<Option<MpcSeen>> {
            self.reads.fetch_add(1, Ordering::Relaxed);
            let k = self.keyed.load(Ordering::Relaxed);
            Ok(Some(MpcSeen {
                requested: true,
                consented: true,
                confirmed: true,
                local_key: Some([1; 8]),
                remote_key: k.then_some([2; 8]),
            }))
        }
        fn forget(&self, _: SocketAddr, _: SocketAddr) {
            self.forgotten.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The wait for a record's keys yields its thread: on a one-thread runtime, the task
    /// that gives the keys runs meanwhile and the wait ends with them, long before its
    /// limit (a sleeping thread would never let that task run, and would end without keys
    /// after [`MPC_KEYS_WITHIN`]). The record is forgotten once, also when it never gets
    /// its keys.
    #[test]
    fn the_wait_for_keys_lets_the_runtimes_other_tasks_run() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let fake = Arc::new(Fake::default());
        let lookup = MpcLookup(fake.clone());
        let (l, r): (SocketAddr, SocketAddr) = (
            "198.18.1.2:40000".parse().unwrap(),
            "198.18.3.2:4433".parse().unwrap(),
        );
        let (seen, waited) = rt.block_on(async {
            let f = fake.clone();
            tokio::spawn(async move {
                // Runs only when the waiting task yields the thread.
                f.keyed.store(true, Ordering::Relaxed);
            });
            let t0 = tokio::time::Instant::now();
            let seen = await_record(&lookup, l, r).await.unwrap();
            (seen, t0.elapsed())
        });
        let seen = seen.expect("a record");
        assert_eq!(
            seen.remote_key,
            Some([2; 8]),
            "the keys the other task gave"
        );
        assert!(waited < MPC_KEYS_WITHIN, "{waited:?}");
        assert_eq!(fake.forgotten.load(Ordering::Relaxed), 1);

        // Never keyed: the wait ends at its limit, polled meanwhile, then forgotten.
        let fake = Arc::new(Fake::default());
        let lookup = MpcLookup(fake.clone());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let seen = rt.block_on(await_record(&lookup, l, r)).unwrap().unwrap();
        assert_eq!(seen.remote_key, None);
        assert!(
            fake.reads.load(Ordering::Relaxed) > 1,
            "read again meanwhile"
        );
        assert_eq!(fake.forgotten.load(Ordering::Relaxed), 1);
    }
}
