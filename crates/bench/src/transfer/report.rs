//! The transfer bench's table: a report as the lines a person reads.

use super::*;

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
