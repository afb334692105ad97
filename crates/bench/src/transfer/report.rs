//! The transfer bench's verdicts and its table: the repetitions of a run summarized per
//! setting and variant, each target checked against them, and the lines a person reads.

use super::*;

/// Median, min, max and ratios of the runs of one setting, and its targets: every run of
/// every variant multipath. Where the runs measure a rate (`rates`: runs of a fixed time),
/// kato's goodput against `target`; where the links set the pace (`link_limited`) the
/// crypto modes' goodput against [`CRYPTO_GOODPUT_TARGET`]; where the CPU does, their
/// goodput against [`CPU_BOUND_GOODPUT_TARGET`] and their CPU per GB against
/// [`CPU_TARGETS`]. Where the CPU sets the pace, also each nena mode's median untrusted
/// share against [`UNTRUSTED_SHARE_TARGET`] (runs of a fixed size too: a 2 MB transfer
/// has no rate worth checking, but it has a split).
pub fn summarize(
    runs: &[Run],
    target: f64,
    link_limited: bool,
    rates: bool,
) -> (Vec<VariantStats>, f64, Vec<TargetCheck>) {
    let mut stats = Vec::new();
    for v in Variant::ALL {
        let of: Vec<&Run> = runs.iter().filter(|r| r.variant == v).collect();
        let mut xs: Vec<f64> = of.iter().map(|r| r.mbit_s).collect();
        let mut cpu: Vec<f64> = of.iter().map(|r| r.cpu_s_per_gb).collect();
        let mut shares: Vec<f64> = of.iter().map(|r| r.untrusted_share()).collect();
        let multipath_runs = of.iter().filter(|r| r.multipath).count();
        let untrusted: u64 = of.iter().map(|r| r.untrusted_bytes).sum();
        let all: u64 = of.iter().map(|r| r.untrusted_bytes + r.trusted_bytes).sum();
        let n = xs.len();
        let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        stats.push(VariantStats {
            variant: v,
            median_mbit_s: median(&mut xs),
            min_mbit_s: min,
            max_mbit_s: max,
            ratio: f64::NAN,
            paired_ratio: f64::NAN,
            multipath_runs,
            runs: n,
            untrusted_share: untrusted as f64 / all as f64,
            median_untrusted_share: median(&mut shares),
            median_cpu_s_per_gb: median(&mut cpu),
        });
    }
    let base = stats[0].median_mbit_s;
    for s in &mut stats {
        s.ratio = s.median_mbit_s / base;
        let mut paired: Vec<f64> = runs
            .iter()
            .filter(|r| r.variant == s.variant)
            .filter_map(|r| {
                runs.iter()
                    .find(|b| b.variant == Variant::PlainMptcp && b.rep == r.rep)
                    .map(|b| r.mbit_s / b.mbit_s)
            })
            .collect();
        s.paired_ratio = median(&mut paired);
    }
    let by = |v: Variant| {
        stats
            .iter()
            .find(|s| s.variant == v)
            .expect("every variant")
    };
    let kato = by(Variant::NenaKato).ratio;
    // Runs of a fixed size check nena's modes only: the raw baseline leaves its second
    // subflow to the kernel's path manager, which may add it after a short transfer is over
    // (its split is still reported).
    let checked: Vec<&VariantStats> = stats
        .iter()
        .filter(|s| rates || s.variant.mode().is_some())
        .collect();
    let all_runs: usize = checked.iter().map(|s| s.runs).sum();
    let mp_runs: usize = checked.iter().map(|s| s.multipath_runs).sum();
    let mp = if all_runs == 0 {
        0.0
    } else {
        mp_runs as f64 / all_runs as f64
    };
    let mut targets = vec![TargetCheck {
        name: if rates {
            "every run multipath (each variant's runs)".into()
        } else {
            "every run of nena multipath (each mode's runs)".into()
        },
        value: mp,
        limit: 1.0,
        at_least: true,
        // every variant ran, and every run of each was multipath
        pass: checked
            .iter()
            .all(|s| s.runs > 0 && s.multipath_runs == s.runs),
    }];
    if rates {
        targets.push(TargetCheck::at_least(
            format!("nena kato goodput >= {:.0}% of plain MPTCP", target * 100.0),
            kato,
            target,
        ));
        let goodput = if link_limited {
            CRYPTO_GOODPUT_TARGET
        } else {
            CPU_BOUND_GOODPUT_TARGET
        };
        for v in [Variant::NenaStream, Variant::NenaAead] {
            let name = format!("{v} goodput >= {:.0}% of plain MPTCP", goodput * 100.0);
            targets.push(TargetCheck::at_least(name, by(v).ratio, goodput));
        }
    }
    if !link_limited {
        if rates {
            let base = stats[0].median_cpu_s_per_gb;
            for (v, limit) in CPU_TARGETS {
                let name = format!("{v} CPU per GB <= {limit:.2} x plain MPTCP");
                let r = by(v).median_cpu_s_per_gb / base;
                targets.push(TargetCheck::at_most(name, r, limit));
            }
        }
        for s in stats.iter().filter(|s| s.variant.mode().is_some()) {
            let name = format!(
                "{} untrusted share >= {:.0}% (median of runs)",
                s.variant,
                UNTRUSTED_SHARE_TARGET * 100.0
            );
            targets.push(TargetCheck::at_least(
                name,
                s.median_untrusted_share,
                UNTRUSTED_SHARE_TARGET,
            ));
        }
    }
    (stats, kato, targets)
}

/// The target of each mode whose primitive was timed: what is left <= 5% of raw MPTCP's
/// CPU per GB ([`crate::overhead::OVERHEAD_TARGET`]).
pub(super) fn beyond_targets(o: &[crate::overhead::Overhead]) -> Vec<TargetCheck> {
    let limit = crate::overhead::OVERHEAD_TARGET;
    o.iter()
        .filter_map(|x| {
            Some(TargetCheck {
                name: format!(
                    "{} CPU per GB beyond plain MPTCP and its primitive <= {:.0}% of plain MPTCP's",
                    x.variant,
                    limit * 100.0
                ),
                value: x.ratio,
                limit,
                at_least: false,
                pass: crate::overhead::meets_target(x)?,
            })
        })
        .collect()
}

/// `nena aead`'s CPU per GB against raw MPTCP's, <= [`AEAD_FLOOR_TARGET`], named with
/// what raw MPTCP plus the primitive (timed in the same run) would be.
pub(super) fn aead_floor_target(o: &[crate::overhead::Overhead]) -> Option<TargetCheck> {
    let a = o
        .iter()
        .find(|x| x.variant == Variant::NenaAead.to_string())?;
    let raw = a.raw_cpu_s_per_gb;
    let floor = (raw + a.primitive_s_per_gb) / raw;
    floor.is_finite().then(|| {
        TargetCheck::at_most(
            format!(
                "nena aead CPU per GB <= {AEAD_FLOOR_TARGET:.2} x plain MPTCP (plain MPTCP + {}: {floor:.3} x)",
                a.primitive
            ),
            a.cpu_s_per_gb / raw,
            AEAD_FLOOR_TARGET,
        )
    })
}

/// The human table.
pub fn table(r: &BenchReport) -> String {
    let mut s = String::new();
    let what = match (r.bytes, r.seconds_per_run) {
        (Some(b), _) => format!("{b} bytes per run"),
        (None, Some(t)) => match r.omitted_seconds {
            Some(o) => format!("{t} s per run (goodput after the first {o} s)"),
            None => format!("{t} s per run"),
        },
        _ => String::new(),
    };
    s += &format!(
        "Transfer goodput, {} repetitions, {what}, {} (kernel {}, {}; load average {} -> {})\n",
        r.reps, r.direction, r.kernel, r.cpu, r.loadavg_start, r.loadavg_end
    );
    s += &format!(
        "{:<18} {:<12} {:>14} {:>10} {:>10} {:>9} {:>9} {:>10} {:>10} {:>10}\n",
        "setting",
        "variant",
        "median Mbit/s",
        "min",
        "max",
        "ratio",
        "paired",
        "multipath",
        "untrusted",
        "CPU s/GB"
    );
    for set in &r.settings {
        for (i, v) in set.variants.iter().enumerate() {
            s += &format!(
                "{:<18} {:<12} {:>14.1} {:>10.1} {:>10.1} {:>8.1}% {:>8.1}% {:>6}/{:<3} {:>9.1}% {:>10.2}\n",
                if i == 0 {
                    set.setting.name.as_str()
                } else {
                    ""
                },
                v.variant,
                v.median_mbit_s,
                v.min_mbit_s,
                v.max_mbit_s,
                v.ratio * 100.0,
                v.paired_ratio * 100.0,
                v.multipath_runs,
                v.runs,
                v.untrusted_share * 100.0,
                v.median_cpu_s_per_gb
            );
        }
    }
    for set in r
        .settings
        .iter()
        .filter(|s| !s.beyond_the_primitive.is_empty())
    {
        s += &crate::overhead::table(&set.setting.name, &set.beyond_the_primitive);
    }
    for set in &r.settings {
        for t in &set.targets {
            s += &format!(
                "target {}, {}: {:.3} {}\n",
                t.name,
                set.setting.name,
                t.value,
                if t.pass { "PASS" } else { "FAIL" }
            );
        }
    }
    s
}
