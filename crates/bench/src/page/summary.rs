//! What `nena bench page` reports: each load, each variant's median, least and most page
//! time, the ratio of the gateway's median to plain MPTCP's, and the verdicts (pure: the
//! unit tests check them on made-up loads).

use super::loader::{Connection, Lookup};
use crate::harness::median;
use crate::transfer::{TargetCheck, MIN_PATH_SHARE};
use serde::Serialize;

/// The gateway's median page time may be at most this multiple of plain MPTCP's.
pub const RATIO_TARGET: f64 = 1.2;

/// How the page is loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    /// From the LAN host, through `nena gateway` on the client and `nena proxy server`.
    Gateway,
    /// From the client host over plain MPTCP sockets, straight to the server.
    Mptcp,
}

impl Variant {
    pub const ALL: [Variant; 2] = [Variant::Gateway, Variant::Mptcp];

    pub fn name(self) -> &'static str {
        match self {
            Variant::Gateway => "gateway",
            Variant::Mptcp => "mptcp",
        }
    }
}

impl std::fmt::Display for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.name())
    }
}

/// One page load.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub variant: Variant,
    pub rep: usize,
    /// From before the first DNS query to the last object's last byte.
    pub seconds: f64,
    /// Objects fetched, each checked byte for byte.
    pub objects: usize,
    /// Body bytes fetched (the document's included), all checked.
    pub bytes: u64,
    pub lookups: Vec<Lookup>,
    pub connections: Vec<Connection>,
    /// nena handshakes the gateway completed during the load (its `--metrics`), and their
    /// mean time; none for plain MPTCP.
    pub handshakes: Option<u64>,
    pub handshake_mean_ms: Option<f64>,
    /// The untrusted interface's share of the bytes the client host's two links carried
    /// (both directions).
    pub untrusted_share: f64,
    /// Both links carried at least [`MIN_PATH_SHARE`] of them.
    pub multipath: bool,
    /// The bytes the client host's trusted and untrusted links carried during the pause
    /// before this load (`--pause`; what an idle gateway's sessions opened ahead cost).
    pub pause_bytes: Option<[u64; 2]>,
}

/// A load that failed.
pub type Failure = crate::harness::RunFailure<Variant>;

/// One variant over its completed loads.
#[derive(Debug, Clone, Serialize)]
pub struct VariantStats {
    pub variant: Variant,
    pub runs: usize,
    pub failed: usize,
    pub median_s: f64,
    pub min_s: f64,
    pub max_s: f64,
    pub median_untrusted_share: f64,
    pub multipath_runs: usize,
    /// Medians over every connection of every load: connect(), the first request's time to
    /// first byte, the later requests' (each connection's median).
    pub median_connect_ms: f64,
    pub median_first_byte_ms: f64,
    pub median_later_first_byte_ms: f64,
    /// Median over every lookup of every load.
    pub median_lookup_ms: f64,
    pub median_connections: f64,
    /// Connections (of every load) that had more than one subflow when they ended, of
    /// those that were MPTCP: context for the untrusted share.
    pub multipath_connections: usize,
    pub mptcp_connections: usize,
    pub median_handshakes: Option<f64>,
    pub median_handshake_ms: Option<f64>,
    /// The first lookup of each load (the first flow after a pause).
    pub median_first_lookup_ms: f64,
    /// Bytes on the trusted and on the untrusted link during each pause, medians.
    pub median_pause_bytes: Option<[f64; 2]>,
}

/// The verdicts and what they were decided on.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub variants: Vec<VariantStats>,
    /// The gateway's median page time over plain MPTCP's, when both have one.
    pub ratio: Option<f64>,
    pub targets: Vec<TargetCheck>,
    pub pass: bool,
}

/// Each variant's figures and the verdicts: every load of both variants complete and
/// byte-exact; every plain-MPTCP load multipath (else it is no multipath baseline); the
/// gateway's median at most [`RATIO_TARGET`] times plain MPTCP's.
pub fn summarize(runs: &[Run], failures: &[Failure], objects: usize, bytes: u64) -> Summary {
    let variants: Vec<VariantStats> = Variant::ALL
        .iter()
        .filter_map(|v| stats(*v, runs, failures))
        .collect();
    let exact = runs
        .iter()
        .filter(|r| r.objects == objects && r.bytes == bytes)
        .count();
    let all = runs.len() + failures.len();
    let mut targets = vec![TargetCheck::at_least(
        "every load complete and byte-exact".into(),
        exact as f64 / all.max(1) as f64,
        1.0,
    )];
    let of = |v: Variant| variants.iter().find(|s| s.variant == v);
    let mptcp = of(Variant::Mptcp);
    targets.push(TargetCheck::at_least(
        "every plain MPTCP load multipath".into(),
        mptcp.map_or(0.0, |m| m.multipath_runs as f64 / m.runs.max(1) as f64),
        1.0,
    ));
    let ratio = match (of(Variant::Gateway), mptcp) {
        (Some(g), Some(m)) => Some(g.median_s / m.median_s.max(1e-12)),
        _ => None,
    };
    targets.push(TargetCheck::at_most(
        format!("gateway median page time <= {RATIO_TARGET}x plain MPTCP's"),
        // No ratio (a variant without a completed load) fails the target.
        ratio.unwrap_or(f64::INFINITY),
        RATIO_TARGET,
    ));
    Summary {
        pass: targets.iter().all(|t| t.pass),
        variants,
        ratio,
        targets,
    }
}

fn stats(v: Variant, runs: &[Run], failures: &[Failure]) -> Option<VariantStats> {
    let mine: Vec<&Run> = runs.iter().filter(|r| r.variant == v).collect();
    if mine.is_empty() {
        return None;
    }
    let med = |xs: Vec<f64>| {
        let mut xs = xs;
        if xs.is_empty() {
            0.0
        } else {
            median(&mut xs)
        }
    };
    let conns = || mine.iter().flat_map(|r| r.connections.iter());
    let times: Vec<f64> = mine.iter().map(|r| r.seconds).collect();
    let handshakes: Vec<f64> = mine
        .iter()
        .filter_map(|r| r.handshakes)
        .map(|h| h as f64)
        .collect();
    let handshake_ms: Vec<f64> = mine.iter().filter_map(|r| r.handshake_mean_ms).collect();
    Some(VariantStats {
        variant: v,
        runs: mine.len(),
        failed: failures.iter().filter(|f| f.variant == v).count(),
        median_s: med(times.clone()),
        min_s: times.iter().copied().fold(f64::INFINITY, f64::min),
        max_s: times.iter().copied().fold(0.0, f64::max),
        median_untrusted_share: med(mine.iter().map(|r| r.untrusted_share).collect()),
        multipath_runs: mine.iter().filter(|r| r.multipath).count(),
        median_connect_ms: med(conns().map(|c| c.connect_ms).collect()),
        median_first_byte_ms: med(conns().map(|c| c.first_byte_ms).collect()),
        median_later_first_byte_ms: med(conns().filter_map(|c| c.later_first_byte_ms).collect()),
        median_lookup_ms: med(mine
            .iter()
            .flat_map(|r| r.lookups.iter().map(|l| l.ms))
            .collect()),
        median_connections: med(mine.iter().map(|r| r.connections.len() as f64).collect()),
        multipath_connections: conns()
            .filter(|c| c.subflows.is_some_and(|n| n > 1))
            .count(),
        mptcp_connections: conns().filter(|c| c.subflows.is_some()).count(),
        median_handshakes: (!handshakes.is_empty()).then(|| med(handshakes)),
        median_handshake_ms: (!handshake_ms.is_empty()).then(|| med(handshake_ms)),
        median_first_lookup_ms: med(mine
            .iter()
            .filter_map(|r| r.lookups.first().map(|l| l.ms))
            .collect()),
        median_pause_bytes: {
            let paused: Vec<[u64; 2]> = mine.iter().filter_map(|r| r.pause_bytes).collect();
            (!paused.is_empty())
                .then(|| [0, 1].map(|i| med(paused.iter().map(|b| b[i] as f64).collect())))
        },
    })
}

/// Whether both links carried at least [`MIN_PATH_SHARE`] of `trusted + untrusted` bytes,
/// and the untrusted share.
pub fn path_split(trusted: u64, untrusted: u64) -> (f64, bool) {
    let all = (trusted + untrusted).max(1) as f64;
    let (t, u) = (trusted as f64 / all, untrusted as f64 / all);
    (u, t >= MIN_PATH_SHARE && u >= MIN_PATH_SHARE)
}

/// The human table.
pub fn table(s: &Summary, failures: &[Failure], heading: &str, footer: &str) -> String {
    use std::fmt::Write;
    let mut out = format!("\n{heading}\n");
    let _ = writeln!(
        out,
        "  {:<8} {:>8} {:>8} {:>8} {:>10} {:>6} {:>10} {:>8} {:>9} {:>9} {:>9} {:>9}",
        "variant",
        "median s",
        "min s",
        "max s",
        "untrusted",
        "conns",
        "handshakes",
        "DNS ms",
        "connect",
        "1st TTFB",
        "later",
        "multipath"
    );
    for v in &s.variants {
        let hs = v
            .median_handshakes
            .map_or("-".to_string(), |h| format!("{h:.0}"));
        let _ = writeln!(
            out,
            "  {:<8} {:>8.3} {:>8.3} {:>8.3} {:>9.1}% {:>6.0} {:>10} {:>8.1} {:>7.1}ms {:>7.1}ms {:>7.1}ms {:>7}/{}",
            v.variant,
            v.median_s,
            v.min_s,
            v.max_s,
            v.median_untrusted_share * 100.0,
            v.median_connections,
            hs,
            v.median_lookup_ms,
            v.median_connect_ms,
            v.median_first_byte_ms,
            v.median_later_first_byte_ms,
            v.multipath_runs,
            v.runs
        );
        if v.mptcp_connections > 0 {
            let _ = writeln!(
                out,
                "  {}: {} of {} MPTCP connections had two subflows when they ended",
                v.variant, v.multipath_connections, v.mptcp_connections
            );
        }
        if let Some([t, u]) = v.median_pause_bytes {
            let _ = writeln!(
                out,
                "  {}: the first lookup after each pause took {:.1} ms; during each pause the \
                 links carried {t:.0} B (trusted) and {u:.0} B (untrusted), medians",
                v.variant, v.median_first_lookup_ms
            );
        }
        if let Some(ms) = v.median_handshake_ms {
            let _ = writeln!(
                out,
                "  {}: a nena handshake took {ms:.1} ms (median of the loads' means)",
                v.variant
            );
        }
    }
    if let Some(r) = s.ratio {
        let _ = writeln!(out, "  gateway / plain MPTCP, medians: {r:.3}");
    }
    for f in failures {
        let _ = writeln!(out, "  {} rep {} failed: {}", f.variant, f.rep, f.error);
    }
    for t in &s.targets {
        let _ = writeln!(out, "  {t}");
    }
    let _ = writeln!(out, "\n{} ({footer})", if s.pass { "PASS" } else { "FAIL" });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(first: f64, later: Option<f64>) -> Connection {
        Connection {
            host: "www.example.test".into(),
            opened_at_ms: 0.0,
            connect_ms: 1.0,
            first_byte_ms: first,
            later_first_byte_ms: later,
            requests: 1 + later.is_some() as usize,
            subflows: Some(2),
        }
    }

    fn run(variant: Variant, rep: usize, seconds: f64) -> Run {
        Run {
            variant,
            rep,
            seconds,
            objects: 30,
            bytes: 1000,
            lookups: vec![Lookup {
                name: "www.example.test".into(),
                ms: 2.0,
            }],
            connections: vec![conn(100.0, Some(40.0)), conn(120.0, None)],
            handshakes: (variant == Variant::Gateway).then_some(14),
            handshake_mean_ms: (variant == Variant::Gateway).then_some(80.0),
            untrusted_share: 0.3,
            pause_bytes: None,
            multipath: true,
        }
    }

    #[test]
    fn the_ratio_is_the_quotient_of_the_medians_and_decides_the_verdict() {
        // (repetition, the gateway's seconds, plain MPTCP's)
        let loads = [(1, 0.6, 0.5), (2, 0.9, 0.4), (3, 0.55, 0.45)];
        let runs: Vec<Run> = loads
            .iter()
            .flat_map(|&(rep, g, m)| [run(Variant::Gateway, rep, g), run(Variant::Mptcp, rep, m)])
            .collect();
        let s = summarize(&runs, &[], 30, 1000);
        let g = &s.variants[0];
        assert_eq!((g.variant, g.runs, g.failed), (Variant::Gateway, 3, 0));
        assert_eq!((g.median_s, g.min_s, g.max_s), (0.6, 0.55, 0.9));
        assert_eq!(s.variants[1].median_s, 0.45);
        let ratio = s.ratio.unwrap();
        assert!((ratio - 0.6 / 0.45).abs() < 1e-12);
        assert_eq!(s.targets.len(), 3);
        assert!(s.targets[0].pass && s.targets[1].pass);
        assert!(!s.targets[2].pass && s.targets[2].value == ratio && !s.pass);
        assert_eq!(g.median_first_byte_ms, 110.0);
        assert_eq!(g.median_later_first_byte_ms, 40.0);
        assert_eq!(g.median_connections, 2.0);
        assert_eq!((g.multipath_connections, g.mptcp_connections), (6, 6));
        assert_eq!(g.median_handshakes, Some(14.0));
        assert_eq!(s.variants[1].median_handshakes, None);
        // Within 1.2x: the verdict passes.
        let fast = vec![run(Variant::Gateway, 1, 0.54), run(Variant::Mptcp, 1, 0.45)];
        let s = summarize(&fast, &[], 30, 1000);
        assert!(s.pass, "{:?}", s.targets);
    }

    #[test]
    fn a_failed_short_or_single_path_load_fails_its_target() {
        let mut runs = vec![run(Variant::Gateway, 1, 0.5), run(Variant::Mptcp, 1, 0.5)];
        let failure = Failure {
            variant: Variant::Gateway,
            rep: 2,
            error: "the page did not load".into(),
        };
        let s = summarize(&runs, std::slice::from_ref(&failure), 30, 1000);
        assert!(!s.targets[0].pass && (s.targets[0].value - 2.0 / 3.0).abs() < 1e-12);
        assert!(s.targets[2].pass, "the medians of what completed");
        assert_eq!(s.variants[0].failed, 1);
        assert!(table(&s, &[failure], "h", "f").contains("gateway rep 2 failed"));
        runs[1].bytes = 999;
        assert!(!summarize(&runs, &[], 30, 1000).targets[0].pass);
        runs[1].bytes = 1000;
        runs[1].multipath = false;
        let s = summarize(&runs, &[], 30, 1000);
        assert!(s.targets[0].pass && !s.targets[1].pass && !s.pass);
        // No plain-MPTCP load at all: no ratio, and the target fails.
        let s = summarize(&runs[..1], &[], 30, 1000);
        assert_eq!(s.ratio, None);
        assert!(!s.targets[1].pass && !s.targets[2].pass);
    }

    #[test]
    fn the_path_split_needs_both_links() {
        assert_eq!(path_split(70, 30), (0.3, true));
        assert_eq!(path_split(1000, 0), (0.0, false));
        assert_eq!(path_split(0, 0), (0.0, false));
    }
}
