//! kato-mpc for as long as a command runs: [`MpcAttachment::attach`] puts the negotiation
//! programs on every interface the command uses ([`MpcGuard`] each) and starts a sweeper
//! thread that deletes, every [`SWEEP_EVERY`], the server's records nobody read within a
//! minute (handshakes never accepted), whatever any connection does. [`MpcReader`] reads what
//! they recorded for the transport. Dropping the attachment stops the sweeper; the programs
//! are detached when it and every reader are gone.

use super::{FlowRecord, MpcGuard, MpcMethod, MpcRole};
use anyhow::{Context, Result};
use std::net::SocketAddr;
use std::sync::Arc;

/// How often the sweeper thread looks for stale records.
pub const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// The programs attached for one command, with their sweeper thread.
pub struct MpcAttachment {
    sweeper: Option<(std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>)>,
    reader: MpcReader,
}

/// The records of the programs on every interface of one command (a shared handle).
#[derive(Clone)]
pub struct MpcReader(Arc<Vec<MpcGuard>>);

impl MpcAttachment {
    /// Attaches the programs (`MpcMethod::Option`) to each of `devs` for `port` in `role`.
    pub fn attach(devs: &[String], port: u16, role: MpcRole) -> Result<MpcAttachment> {
        let mut guards = Vec::new();
        for d in devs {
            guards.push(
                MpcGuard::attach(d, port, role, MpcMethod::Option).with_context(|| {
                    format!(
                        "kato-mpc: attaching the negotiation programs to {d} (root and BPF needed)"
                    )
                })?,
            );
        }
        let guards = Arc::new(guards);
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let g = guards.clone();
        let thread = std::thread::Builder::new()
            .name("mpc-sweep".into())
            .spawn(move || {
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(SWEEP_EVERY)
                {
                    for guard in g.iter() {
                        let n = guard.sweep();
                        if n > 0 {
                            log::debug!(
                                "kato-mpc: swept {n} stale records of handshakes on {}",
                                guard.dev()
                            );
                        }
                    }
                }
            })
            .context("starting the kato-mpc sweeper thread")?;
        Ok(MpcAttachment {
            sweeper: Some((stop, thread)),
            reader: MpcReader(guards),
        })
    }

    /// A handle on the records (keeps the programs attached while it lives).
    pub fn reader(&self) -> MpcReader {
        self.reader.clone()
    }

    /// The interfaces the programs sit on.
    pub fn devs(&self) -> Vec<&str> {
        self.reader.0.iter().map(|g| g.dev()).collect()
    }
}

impl Drop for MpcAttachment {
    fn drop(&mut self) {
        // The sender dropped wakes the sweeper, which ends; joined so that its copy of the
        // guards is gone before ours (the last one detaches the programs).
        if let Some((stop, thread)) = self.sweeper.take() {
            drop(stop);
            let _ = thread.join();
        }
    }
}

impl MpcReader {
    /// The first record found with both keys (a connection's first subflow crossed one of
    /// the interfaces), else the first found at all.
    pub fn read(&self, local: SocketAddr, remote: SocketAddr) -> Result<Option<FlowRecord>> {
        first_with_keys(self.0.iter().map(|g| g.flow(local, remote)))
    }

    /// Deletes the connection's record on every interface.
    pub fn forget(&self, local: SocketAddr, remote: SocketAddr) {
        for guard in self.0.iter() {
            guard.forget(local, remote);
        }
    }
}

/// The first record with both keys, else the first at all; an error stops the search.
fn first_with_keys(
    records: impl Iterator<Item = Result<Option<FlowRecord>>>,
) -> Result<Option<FlowRecord>> {
    let mut any = None;
    for r in records {
        if let Some(r) = r? {
            if r.has_keys() {
                return Ok(Some(r));
            }
            any.get_or_insert(r);
        }
    }
    Ok(any)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(local_key: Option<[u8; 8]>, remote_key: Option<[u8; 8]>) -> FlowRecord {
        FlowRecord {
            requested: true,
            consented: false,
            confirmed: false,
            mark_failed: false,
            mptcp_syn: true,
            local_key,
            remote_key,
        }
    }

    #[test]
    fn the_record_with_both_keys_wins_else_the_first() {
        let half = rec(Some([1; 8]), None);
        let full = rec(Some([1; 8]), Some([2; 8]));
        let got = first_with_keys([Ok(None), Ok(Some(half)), Ok(Some(full))].into_iter());
        assert_eq!(got.unwrap(), Some(full));
        let got = first_with_keys([Ok(Some(half)), Ok(None)].into_iter());
        assert_eq!(got.unwrap(), Some(half));
        assert_eq!(first_with_keys(std::iter::empty()).unwrap(), None);
        assert!(first_with_keys([Err(anyhow::anyhow!("x"))].into_iter()).is_err());
    }
}
