//! nena-bench: every benchmark behind `nena bench ...`, one module per concern.
//!
//! - [`transfer`]: `nena bench transfer`, goodput and CPU per GB of plain MPTCP and nena in
//!   each mode over the lab's two paths; [`overhead`]: what each mode costs there beyond raw
//!   MPTCP and its primitive (the primitives timed in the same run).
//! - [`aggregation`]: `nena bench aggregation`, nena's transfers over two link-bound paths
//!   against the bare kernel's MPTCP and against what the links allow.
//! - [`peers`]: `nena bench peers`, nena's SOCKS5 proxy pair against shadowsocks-rust and
//!   a TLS 1.3 tunnel (stunnel) over the same lab paths: goodput and CPU per GB of both ends.
//! - [`page`]: `nena bench page`, a page of 30 objects on two host names loaded as a
//!   browser loads it, from a LAN host through `nena gateway` against plain MPTCP.
//! - [`emulation`]: `nena bench emulation`, the link emulator's fidelity.
//! - [`sessions`]: `nena bench sessions`, many concurrent SOCKS5 sessions through one proxy
//!   pair: memory per idle session and the time to open one more under that load.
//! - [`fairness`]: `nena bench fairness`, issue 13's share of LIA and uncoupled reno beside
//!   a TCP flow at a shared bottleneck (the shipped scenario), with its verdict.
//! - [`metered`]: `nena bench metered`, a metered trusted link (issue 56): its share of a
//!   transfer's bytes with the WLAN up, the goodput against the WLAN's alone, and the
//!   longest gap when the WLAN goes, both ways, with either path manager.
//! - [`realtime`]: `nena bench realtime`, a call-like datagram flow through `nena gateway`
//!   and `nena run` against the same flow straight over each single link, with loss and an
//!   outage of either link: round trips, lost and late datagrams, bytes on the wire.
//! - [`outage`]: `nena bench outage`, issue 40's LTE dropout (the shipped scenario): nena
//!   with either path manager against raw MPTCP, and the trusted link's return.
//! - [`policy`] (feature `policy`): `nena bench policy`, the per-packet cost of each eBPF
//!   selector, actor and chain; [`rate_limit`] (feature `policy`): `nena bench rate-limit`,
//!   whether the `rate_limit` actor holds its rate on a delayed path.
//! - [`codec`] (feature `openssl`): `nena bench codec`, the codec overhead table of issue 2
//!   (the papers' Table II with OpenSSL baselines and memcpy, plus the papers' own Figure 14
//!   C code in [`paper_c`]), and [`primitives`], the comparison of crypto primitives from
//!   ring, aws-lc-rs, RustCrypto and OpenSSL (run by the `primitives` example); the codec
//!   table's subjects are [`ciphers`], [`kato`], [`session`] and [`subject`].
//! - [`handshake`]: `nena bench handshake`, issue 41's handshake (X25519 + ML-KEM-768,
//!   the server's signature) against version 1's (X25519 alone), timed in one run, and
//!   their first flights' sizes.
//! - [`lab_ends`]: the two ends the lab benches compare (`nena serve` and a bare
//!   kernel-MPTCP listener), a nena client's options, one raw exchange.
//! - [`harness`]: a small measurement harness (and the median the benches share); [`host`]:
//!   what a report says about the machine; [`progress`]: a progress indicator for terminals.

pub mod aggregation;
mod bytes;
#[cfg(feature = "openssl")]
pub mod ciphers;
#[cfg(feature = "openssl")]
pub mod codec;
pub mod emulation;
pub mod fairness;
pub mod flows;
pub mod handshake;
pub mod harness;
pub mod host;
pub mod hostile;
#[cfg(feature = "openssl")]
pub mod kato;
pub mod lab_ends;
pub mod metered;
pub mod outage;
pub mod overhead;
pub mod own_lab;
pub mod page;
#[cfg(feature = "openssl")]
pub mod paper_c;
pub mod peers;
#[cfg(feature = "policy")]
pub mod policy;
#[cfg(feature = "openssl")]
pub mod primitives;
pub mod progress;
#[cfg(feature = "policy")]
pub mod rate_limit;
pub mod realtime;
#[cfg(feature = "openssl")]
pub mod session;
pub mod sessions;
#[cfg(feature = "openssl")]
pub mod subject;
pub mod transfer;

#[cfg(feature = "openssl")]
pub use codec::{render_text, run as run_codec, CodecBenchConfig, Report, NAMES};
pub use harness::{HarnessConfig, Stats};
