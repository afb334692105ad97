//! What a server lets a client do, sans-IO: the access token (`--token-file`), read-only /
//! write-only, the largest file it takes (`--max-file-size`) and whether an announced upload
//! fits in the free space of its directory (with the space promised to uploads still in
//! progress). Every check returns the [`Reply`] that refuses, so that the server's I/O code
//! only sends it; the order of the checks is [`Limits::admit`] first (nothing about files is
//! revealed to a client without the token), then the name, then [`check_size`].

use crate::text::units::human;
use crate::wire::{AccessToken, Reply, Request, RequestMsg, Status};
use std::sync::{Arc, Mutex};

pub use crate::error::ErrorReply;

/// Which file operations a server allows (perf tests are always allowed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Access {
    /// PUT and GET.
    #[default]
    ReadWrite,
    /// GET only (`--read-only`).
    ReadOnly,
    /// PUT only (`--write-only`).
    WriteOnly,
}

/// The message of every [`Status::AccessDenied`] reply: the same whether the token was
/// missing or wrong, and nothing about what the server holds.
pub const DENIED: &str = "a valid access token is required (--token-file)";

pub use crate::keys::{load_token, MIN_TOKEN};

/// A server's rules for requests, checked before anything else happens.
#[derive(Debug, Clone, Default)]
pub struct Limits {
    pub access: Access,
    /// Every request must carry this token.
    pub token: Option<AccessToken>,
    /// How much of the server's CPU and bandwidth one perf test may take.
    pub perf: PerfCaps,
}

/// The server's caps on a perf test (`nena serve --perf-max-bytes`, `--perf-max-time`): a
/// request for more is refused, and a test still running at `max_time` (plus a few seconds
/// for the end) is cut, whatever the client sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerfCaps {
    /// Bytes per direction a client may ask for.
    pub max_bytes: u64,
    /// Duration a client may ask for, and the wall-clock limit of any perf test.
    pub max_time: std::time::Duration,
}

impl PerfCaps {
    /// 100 GiB per direction, 10 minutes.
    pub const DEFAULT: PerfCaps = PerfCaps {
        max_bytes: 100 << 30,
        max_time: std::time::Duration::from_secs(600),
    };

    /// Whether a perf test of `bytes` per direction (0: timed) lasting `millis` may start.
    pub fn admit(&self, bytes: u64, millis: u32) -> Result<(), Reply> {
        if bytes > self.max_bytes {
            return Err(Reply::err(
                Status::Refused,
                format!(
                    "a perf test of {} per direction, this server allows at most {} (--perf-max-bytes)",
                    human(bytes),
                    human(self.max_bytes)
                ),
            ));
        }
        let asked = std::time::Duration::from_millis(millis.into());
        if bytes == 0 && asked > self.max_time {
            return Err(Reply::err(
                Status::Refused,
                format!(
                    "a perf test of {} s, this server allows at most {} s (--perf-max-time)",
                    asked.as_secs(),
                    self.max_time.as_secs()
                ),
            ));
        }
        Ok(())
    }
}

impl Default for PerfCaps {
    fn default() -> Self {
        PerfCaps::DEFAULT
    }
}

impl Limits {
    /// Whether the request may go on, as far as the token and the operation go.
    pub fn admit(&self, msg: &RequestMsg) -> Result<(), Reply> {
        if let Some(t) = &self.token {
            if !t.admits(msg.token.as_ref()) {
                return Err(Reply::err(Status::AccessDenied, DENIED));
            }
        }
        match (&msg.request, self.access) {
            (Request::Put { .. }, Access::ReadOnly) => Err(Reply::err(
                Status::Refused,
                "this server is read-only: it does not accept uploads",
            )),
            (Request::Get { .. }, Access::WriteOnly) => Err(Reply::err(
                Status::Refused,
                "this server is write-only: it does not serve downloads",
            )),
            _ => Ok(()),
        }
    }
}

/// Whether an upload of `size` bytes may start: at most `max` (if set), and no more than the
/// `free` bytes of the file system minus the `reserved` bytes promised to other uploads.
pub fn check_size(size: u64, max: Option<u64>, free: u64, reserved: u64) -> Result<(), Reply> {
    if let Some(max) = max {
        if size > max {
            return Err(Reply::err(
                Status::TooLarge,
                format!(
                    "{} announced, this server takes at most {} per file",
                    human(size),
                    human(max)
                ),
            ));
        }
    }
    let avail = free.saturating_sub(reserved);
    if size > avail {
        return Err(Reply::err(
            Status::NoSpace,
            format!(
                "{} announced, {} free on the server",
                human(size),
                human(avail)
            ),
        ));
    }
    Ok(())
}

/// Bytes promised to uploads in progress, so that concurrent uploads that each fit cannot
/// together overfill the disk. Conservative: a reservation holds its whole size until the
/// upload ends, although the file's bytes already written also lower the free space.
#[derive(Debug, Default)]
pub struct SpaceLedger {
    reserved: Mutex<u64>,
}

/// Space held for one upload; released on drop.
#[derive(Debug)]
pub struct Reservation {
    ledger: Arc<SpaceLedger>,
    size: u64,
}

impl SpaceLedger {
    /// Check [`check_size`] against the current reservations and, if it passes, reserve
    /// `size` bytes (one step under the lock: two uploads cannot both take the last space).
    pub fn reserve(
        self: &Arc<Self>,
        size: u64,
        max: Option<u64>,
        free: u64,
    ) -> Result<Reservation, Reply> {
        let mut r = self.reserved.lock().unwrap_or_else(|p| p.into_inner());
        check_size(size, max, free, *r)?;
        *r += size;
        Ok(Reservation {
            ledger: self.clone(),
            size,
        })
    }

    /// Bytes reserved now.
    pub fn reserved(&self) -> u64 {
        *self.reserved.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut r = self
            .ledger
            .reserved
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        *r -= self.size;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::PerfRequest;

    fn msg(request: Request, token: Option<&[u8]>) -> RequestMsg {
        RequestMsg {
            request,
            token: token.map(|t| AccessToken::new(t.to_vec()).unwrap()),
        }
    }

    fn put() -> Request {
        Request::Put {
            name: "f".into(),
            size: 1,
        }
    }

    fn get() -> Request {
        Request::Get { name: "f".into() }
    }

    fn perf() -> Request {
        Request::Perf(PerfRequest {
            up: true,
            down: false,
            bytes: 1,
            millis: 0,
        })
    }

    #[test]
    fn the_token_is_checked_before_anything_else() {
        let l = Limits {
            access: Access::ReadOnly,
            token: Some(AccessToken::new(b"right token of 16+ bytes".to_vec()).unwrap()),
            ..Limits::default()
        };
        for req in [put(), get(), perf()] {
            for bad in [None, Some(&b"wrong token of 16+ bytes"[..]), Some(b"r")] {
                let r = l.admit(&msg(req.clone(), bad)).unwrap_err();
                assert_eq!(r.status, Status::AccessDenied, "{req:?} {bad:?}");
                assert_eq!(
                    r.msg, DENIED,
                    "the same answer for a missing or a wrong token"
                );
            }
        }
        let right = Some(&b"right token of 16+ bytes"[..]);
        assert!(l.admit(&msg(get(), right)).is_ok());
        assert!(l.admit(&msg(perf(), right)).is_ok());
        // Right token, but the server is read-only.
        assert_eq!(
            l.admit(&msg(put(), right)).unwrap_err().status,
            Status::Refused
        );
        // A server without a token ignores one that is sent.
        assert!(Limits::default().admit(&msg(put(), right)).is_ok());
    }

    #[test]
    fn read_only_and_write_only() {
        let ro = Limits {
            access: Access::ReadOnly,
            token: None,
            ..Limits::default()
        };
        let e = ro.admit(&msg(put(), None)).unwrap_err();
        assert_eq!(e.status, Status::Refused);
        assert!(e.msg.contains("read-only"), "{}", e.msg);
        assert!(ro.admit(&msg(get(), None)).is_ok());
        assert!(ro.admit(&msg(perf(), None)).is_ok());
        let wo = Limits {
            access: Access::WriteOnly,
            token: None,
            ..Limits::default()
        };
        let e = wo.admit(&msg(get(), None)).unwrap_err();
        assert!(e.msg.contains("write-only"), "{}", e.msg);
        assert!(wo.admit(&msg(put(), None)).is_ok());
        assert!(wo.admit(&msg(perf(), None)).is_ok());
    }

    #[test]
    fn sizes_against_the_limit_and_the_free_space() {
        assert!(check_size(100, Some(100), 1000, 0).is_ok());
        let e = check_size(101, Some(100), 1000, 0).unwrap_err();
        assert_eq!(e.status, Status::TooLarge);
        assert!(e.msg.contains("101 B announced") && e.msg.contains("at most 100 B"));
        let e = check_size(1 << 40, None, 75 << 30, 0).unwrap_err();
        assert_eq!(e.status, Status::NoSpace);
        assert_eq!(e.msg, "1.0 TiB announced, 75.0 GiB free on the server");
        // What is promised to other uploads is not free.
        assert!(check_size(600, None, 1000, 400).is_ok());
        assert_eq!(
            check_size(601, None, 1000, 400).unwrap_err().status,
            Status::NoSpace
        );
        assert_eq!(
            check_size(1, None, 10, 20).unwrap_err().status,
            Status::NoSpace
        );
        assert!(check_size(0, Some(0), 0, 0).is_ok());
    }

    #[test]
    fn reservations_add_up_and_are_released() {
        let ledger = Arc::new(SpaceLedger::default());
        let a = ledger.reserve(600, None, 1000).unwrap();
        assert_eq!(ledger.reserved(), 600);
        // A second upload that would fit alone does not fit beside the first.
        assert_eq!(
            ledger.reserve(500, None, 1000).unwrap_err().status,
            Status::NoSpace
        );
        let b = ledger.reserve(400, None, 1000).unwrap();
        assert_eq!(ledger.reserved(), 1000);
        drop(a);
        assert_eq!(ledger.reserved(), 400);
        assert!(ledger.reserve(500, None, 1000).is_ok());
        drop(b);
        assert_eq!(ledger.reserved(), 0);
    }
}
