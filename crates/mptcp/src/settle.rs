//! Before the first data on a newly joined subflow: wait until the peer has data-acked
//! every byte written so far.
//!
//! Why (docs/KERNEL-41-BYTES.md): on Linux 6.18, a server's kernel was captured placing the
//! first data of a just-joined subflow at the connection's receive point (`ack_seq`) instead
//! of at the data sequence number its DSS mapping carried, when earlier bytes from the other
//! subflow had reached the server but not yet the connection level. The application then got
//! the earlier bytes followed by the join's data shifted by their length: nena's 41-byte key
//! confirmation and record 0 from its byte 41, about one session in 100,000. No path in nena
//! reorders bytes, and the captured DSS mappings were right.
//!
//! The misplacement needs bytes still in flight in front of the join's first data. So after
//! its last handshake write, and before its first record, a client that has a subflow which
//! has not sent anything yet waits until `MPTCPI_WRITE_SEQ == MPTCPI_SND_UNA`: the peer has
//! the whole handshake at the connection level, and whatever the join carries first lands
//! where the peer's kernel expects it. The cost is one round trip on the trusted path in
//! `aead` (whose confirmation is the only handshake byte written after the first flight),
//! nothing in the other modes (the first flight is already acked when the gate releases).
//!
//! The decision is a pure function of two snapshots ([`needs_settle`]); the wait polls
//! `MPTCP_INFO` with the gate's [`Backoff`] because a data-level ACK raises no event.

use crate::gate::Backoff;
use crate::sockopt::{self, ConnInfo, SubflowInfo};
use std::io;
use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

/// `TCP_CLOSE` and the states after it: a subflow that will carry nothing more.
fn is_gone(state: u8) -> bool {
    // TCP_FIN_WAIT1 4 .. TCP_CLOSING 11 except ESTABLISHED/SYN states: treat every closing
    // state as gone; TCP_ESTABLISHED 1, TCP_SYN_SENT 2, TCP_SYN_RECV 3 are live.
    !matches!(state, 1..=3)
}

/// Whether the next write must wait: bytes are still unacked at the data level and some live
/// subflow has not sent a byte yet (its first data would land behind them).
pub fn needs_settle(conn: &ConnInfo, subflows: &[SubflowInfo]) -> bool {
    if conn.write_seq == conn.snd_una {
        return false;
    }
    subflows
        .iter()
        .any(|s| !is_gone(s.state) && s.bytes_sent == 0)
}

/// What [`settle_before_join_data`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// Nothing to wait for (every byte acked, or no fresh subflow).
    NotNeeded,
    /// Waited this long for the data-level ACK.
    Acked(Duration),
    /// The bound passed first; the caller goes on (the workaround is best effort).
    GaveUp(Duration),
}

/// Wait (at most `bound`) until the peer has data-acked every byte written on `fd`, if a
/// subflow that has not sent yet could otherwise carry the next bytes. Must run inside a
/// tokio runtime with time enabled.
pub async fn settle_before_join_data(fd: BorrowedFd<'_>, bound: Duration) -> io::Result<Settle> {
    let start = Instant::now();
    let (conn, subs) = (sockopt::info(fd)?, sockopt::subflows(fd)?);
    log::trace!(
        "settle: write_seq {} snd_una {}, subflows {:?}",
        conn.write_seq,
        conn.snd_una,
        subs.iter().map(|s| (s.id, s.state, s.bytes_sent)).collect::<Vec<_>>()
    );
    if !needs_settle(&conn, &subs) {
        return Ok(Settle::NotNeeded);
    }
    let mut backoff = Backoff::new();
    loop {
        let waited = start.elapsed();
        if waited >= bound {
            return Ok(Settle::GaveUp(waited));
        }
        tokio::time::sleep(backoff.next_pause().min(bound - waited)).await;
        let conn = sockopt::info(fd)?;
        if conn.write_seq == conn.snd_una {
            return Ok(Settle::Acked(start.elapsed()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(write_seq: u64, snd_una: u64) -> ConnInfo {
        ConnInfo {
            token: 1,
            subflows: 2,
            flags: 0,
            remote_key_received: true,
            write_seq,
            snd_una,
            rcv_nxt: 0,
            bytes_sent: None,
            bytes_received: None,
            bytes_acked: None,
            bytes_retrans: None,
            csum_enabled: false,
        }
    }

    fn sub(id: u32, state: u8, bytes_sent: u64) -> SubflowInfo {
        SubflowInfo {
            id,
            local: None,
            remote: None,
            state,
            bytes_sent,
            bytes_received: 0,
            bytes_acked: bytes_sent,
            bytes_retrans: 0,
            rtt_us: 0,
        }
    }

    #[test]
    fn waits_only_for_unacked_bytes_in_front_of_a_fresh_subflow() {
        let used = sub(1, 1, 187);
        let fresh = sub(2, 1, 0);
        // The 41-byte confirmation in flight and a joined subflow that has sent nothing.
        assert!(needs_settle(&conn(188, 147), &[used.clone(), fresh.clone()]));
        // Joining still (SYN_SENT): it may carry the next bytes as soon as it is up.
        assert!(needs_settle(&conn(188, 147), &[used.clone(), sub(2, 2, 0)]));
        // Everything acked: nothing can land behind anything.
        assert!(!needs_settle(&conn(188, 188), &[used.clone(), fresh]));
        // Only the subflow that carried the handshake: its bytes stay in order.
        assert!(!needs_settle(&conn(188, 147), &[used.clone()]));
        // A second subflow that already sent data is not fresh.
        assert!(!needs_settle(&conn(188, 147), &[used.clone(), sub(2, 1, 10)]));
        // A fresh subflow that is closing (FIN_WAIT1 4, CLOSE 7) carries nothing.
        assert!(!needs_settle(&conn(188, 147), &[used.clone(), sub(2, 7, 0)]));
        assert!(!needs_settle(&conn(188, 147), &[used, sub(2, 4, 0)]));
    }

    #[test]
    fn sequence_numbers_compare_exactly_even_near_wrap() {
        let fresh = [sub(1, 1, 5), sub(2, 1, 0)];
        assert!(!needs_settle(&conn(u64::MAX, u64::MAX), &fresh));
        assert!(needs_settle(&conn(2, u64::MAX), &fresh));
    }
}
