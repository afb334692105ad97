//! Coupled congestion control for MPTCP on upstream Linux, as BPF `tcp_congestion_ops`
//! (struct_ops): RFC 6356 LIA (`nena_lia`), OLIA (`nena_olia`), BALIA (`nena_balia`) and the
//! LTE study's EWTCP (`nena_ewtcp`). Each program reaches the other subflows of its MPTCP
//! connection through `icsk_ulp_data` -> `mptcp_subflow_context` -> `conn` -> `conn_list`
//! (bounded walk, unlocked snapshot reads; `bpf/cc/cc.h`). Slow start and loss recovery are
//! Reno's.
//!
//! - [`model`]: the increase rules as pure functions in the programs' fixed-point arithmetic,
//!   tested against each paper's formula.
//! - [`loader`]: load (the struct_ops link pinned under `/sys/fs/bpf/nena-cc/NAME`, so it
//!   outlives the command), unload, show; [`loader::Loaded`] unloads in Drop (tests).
//! - The shared-bottleneck and disjoint-paths experiments in the lab are
//!   `nena_scenario::fairness` (they need the lab, this crate does not).
//! - [`set_congestion`]: `TCP_CONGESTION` on a socket (on an MPTCP socket the kernel applies
//!   it to every subflow).

mod algo;
pub mod loader;
pub mod model;

pub use algo::Algo;

use std::os::fd::AsFd;

/// Set the congestion control of a TCP or MPTCP socket (`setsockopt(TCP_CONGESTION)`; on an
/// MPTCP socket the kernel applies it to every current and future subflow). Any name the
/// kernel knows works (`reno`, `cubic`, `nena_lia`, ...); an unknown one is an error that
/// names it and the available ones.
pub fn set_congestion(sock: &impl AsFd, name: &str) -> anyhow::Result<()> {
    if name.is_empty() || name.len() > 15 {
        anyhow::bail!("congestion control name {name:?}: must be 1 to 15 characters");
    }
    match nena_mptcp::set_congestion(sock.as_fd(), name) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => anyhow::bail!(
            "congestion control {name:?} is not available (available: {}; `nena cc load` adds nena_lia, nena_olia, nena_balia, nena_ewtcp)",
            loader::available().unwrap_or_default().join(" ")
        ),
        Err(e) => anyhow::bail!("setting congestion control {name:?}: {e}"),
    }
}

/// The congestion control a socket uses (`getsockopt(TCP_CONGESTION)`).
pub fn congestion(sock: &impl AsFd) -> anyhow::Result<String> {
    nena_mptcp::congestion(sock.as_fd()).map_err(|e| anyhow::anyhow!("reading TCP_CONGESTION: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_fit_the_kernels_limit() {
        for a in Algo::ALL {
            assert!(a.name().len() <= 15);
            assert_eq!(Algo::parse(a.name()), Some(a));
            assert_eq!(Algo::parse(&a.name()[5..]), Some(a));
            assert_eq!(Algo::parse(&a.name().to_uppercase()), Some(a));
        }
        assert_eq!(Algo::parse("cubic"), None);
        assert_eq!(Algo::parse("nena_"), None);
        assert_eq!(Algo::parse(""), None);
    }
}
