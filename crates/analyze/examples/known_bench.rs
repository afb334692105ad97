//! Time the known-file check on random data:
//! `cargo run --release -p nena-analyze --example known_bench -- MIB [leak|noleak]`.
//! `leak`: the capture is the file itself (a plain transfer); `noleak`: unrelated bytes
//! of the same size (what a scrambled transfer looks like to this check).
use nena_analyze::known::{check, Piece};
use std::time::Instant;

fn random(n: usize, seed: u64) -> Vec<u8> {
    nena_testkit::random_bytes(seed, n)
}

fn main() {
    let mib: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(16);
    let leak = std::env::args().nth(2).as_deref() != Some("noleak");
    let known = random(mib << 20, 0x2545f4914f6cdd1d);
    let capture = if leak {
        known.clone()
    } else {
        random(mib << 20, 0x9e3779b97f4a7c15)
    };
    let pieces = [Piece {
        flow: "f",
        offset: 0,
        data: &capture,
    }];
    let t = Instant::now();
    let r = check(&known, &pieces, 10);
    println!(
        "{mib} MiB file vs {mib} MiB capture ({}): {} of {} runs found in {:.2?}",
        if leak { "leak" } else { "noleak" },
        r.runs_found,
        r.runs_checked,
        t.elapsed()
    );
}
