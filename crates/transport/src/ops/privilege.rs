//! Whether this process holds the capabilities a command needs, checked before the command
//! touches anything, so that a first-time user who forgot `sudo` reads one line that says
//! so (and how to fix it) instead of the first failing system call's errno
//! ("netlink: cache initialization failed: Operation not permitted").
//!
//! The effective set is read from `/proc/self/status` (`CapEff`), which holds for root, for a
//! systemd unit's `AmbientCapabilities=` and for file capabilities alike.

use std::fmt;

/// A Linux capability by number (linux/capability.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cap(pub u32, pub &'static str);

pub const CAP_NET_ADMIN: Cap = Cap(12, "CAP_NET_ADMIN");
pub const CAP_SYS_ADMIN: Cap = Cap(21, "CAP_SYS_ADMIN");

/// The command lacks capabilities it needs; prints as one line that names the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingPrivilege {
    /// The command, as a user types it (`nena gateway`).
    pub command: &'static str,
    /// What the capabilities are for.
    pub why: &'static str,
    pub missing: Vec<Cap>,
    /// How to run it instead.
    pub fix: &'static str,
}

impl fmt::Display for MissingPrivilege {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.missing.iter().map(|c| c.1).collect();
        write!(
            f,
            "{} needs root ({}: {}); {}",
            self.command,
            names.join(", "),
            self.why,
            self.fix
        )
    }
}

impl std::error::Error for MissingPrivilege {}

/// The effective capability set of a `/proc/PID/status` text (`CapEff:` in hex).
pub fn effective_of(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
}

/// Which of `needed` the set `effective` lacks.
pub fn lacking(effective: u64, needed: &[Cap]) -> Vec<Cap> {
    needed
        .iter()
        .copied()
        .filter(|c| c.0 >= 64 || effective & (1u64 << c.0) == 0)
        .collect()
}

/// Checks this process's effective set for `needed`. A set that cannot be read (no /proc)
/// is not refused here: the command then fails at its first privileged call as before.
pub fn require(
    command: &'static str,
    needed: &[Cap],
    why: &'static str,
    fix: &'static str,
) -> Result<(), MissingPrivilege> {
    let Some(effective) = std::fs::read_to_string("/proc/self/status")
        .ok()
        .as_deref()
        .and_then(effective_of)
    else {
        return Ok(());
    };
    let missing = lacking(effective, needed);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(MissingPrivilege {
            command,
            why,
            missing,
            fix,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_effective_set_is_read_from_the_status_text() {
        let status = "Name:\tnena\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\n\
                      CapEff:\t0000000000001000\nCapBnd:\t000001ffffffffff\n";
        assert_eq!(effective_of(status), Some(1 << 12));
        assert_eq!(effective_of("Name:\tnena\n"), None);
        assert_eq!(effective_of("CapEff:\tnot-hex\n"), None);
    }

    #[test]
    fn only_the_capabilities_not_in_the_set_are_named() {
        let net_admin_only = 1u64 << 12;
        assert_eq!(
            lacking(net_admin_only, &[CAP_NET_ADMIN, CAP_SYS_ADMIN]),
            vec![CAP_SYS_ADMIN]
        );
        assert!(lacking(u64::MAX >> 23, &[CAP_NET_ADMIN, CAP_SYS_ADMIN]).is_empty());
        assert_eq!(lacking(0, &[CAP_NET_ADMIN]), vec![CAP_NET_ADMIN]);
        let e = MissingPrivilege {
            command: "nena gateway",
            why: "nftables and TPROXY",
            missing: vec![CAP_NET_ADMIN],
            fix: "run it with sudo",
        };
        assert_eq!(
            e.to_string(),
            "nena gateway needs root (CAP_NET_ADMIN: nftables and TPROXY); run it with sudo"
        );
    }
}
