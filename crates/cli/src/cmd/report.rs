//! How `nena send|get|perf` show their work: the progress bar of a file transfer (on stderr,
//! only on a terminal) and the one-line reports (`.line()` of a report, formerly in
//! nena-transport's client tools, `app::file_client`).
use indicatif::{ProgressBar, ProgressStyle};
use nena_transport::app::file_client::{
    IntervalReport, PerfReport, TransferProgress, TransferReport,
};
use nena_transport::text::units::human;
use std::io::IsTerminal;
use std::sync::OnceLock;

/// A progress bar of a file transfer, when `show` and stderr is a terminal: drawn from the
/// moment the session is up, cleared when the transfer ends (left as it is when Ctrl-C
/// drops the transfer).
pub struct Bar {
    show: bool,
    pb: OnceLock<ProgressBar>,
}

impl Bar {
    pub fn new(show: bool) -> Self {
        Bar {
            show,
            pb: OnceLock::new(),
        }
    }
}

impl TransferProgress for Bar {
    fn start(&self) {
        if !self.show || !std::io::stderr().is_terminal() {
            return;
        }
        let pb = ProgressBar::new(0);
        pb.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] [{wide_bar}] {bytes}/{total_bytes} {binary_bytes_per_sec} {eta}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        let _ = self.pb.set(pb);
    }

    fn size(&self, bytes: u64) {
        if let Some(pb) = self.pb.get() {
            pb.set_length(bytes)
        }
    }

    fn advance(&self, n: u64) {
        if let Some(pb) = self.pb.get() {
            pb.inc(n)
        }
    }

    fn finish(&self) {
        if let Some(pb) = self.pb.get() {
            pb.finish_and_clear();
        }
    }
}

/// The final line of `nena send` / `nena get`.
pub fn transfer_line(r: &TransferReport) -> String {
    format!(
        "{} {} {}: {} in {:.2}s, {:.1} Mbit/s, verified end to end, mode {}, {}",
        r.op,
        r.name,
        if r.op == "send" { "sent" } else { "received" },
        human(r.bytes),
        r.seconds,
        r.mbit_s,
        r.mode_label,
        r.paths.describe()
    )
}

/// One interval line of `nena perf`.
pub fn interval_line(r: &IntervalReport) -> String {
    let sf: Vec<String> = r
        .subflows_interval
        .iter()
        .map(|s| {
            format!(
                "{} {}/{}",
                s.local.map_or("?".into(), |a| a.ip().to_string()),
                human(s.acked),
                human(s.received)
            )
        })
        .collect();
    format!(
        "[{:6.2}-{:6.2}s] sent {:>10} {:8.1} Mbit/s  received {:>10} {:8.1} Mbit/s  subflows acked/recv: {}",
        r.sample.t - r.sample.secs,
        r.sample.t,
        human(r.sample.sent),
        r.mbit_s_sent,
        human(r.sample.received),
        r.mbit_s_received,
        sf.join(", ")
    )
}

/// The final line of `nena perf`. Its seconds say what they time: `--time` bounds the
/// writing; the goodput counts the seconds until the peer confirmed every byte (the data
/// still in flight when writing stopped, and the verdicts' round trip).
pub fn perf_line(r: &PerfReport) -> String {
    let timing = match (r.sent > 0, r.received > 0) {
        (true, false) => format!(
            "written until {:.2}s, all confirmed by the peer at {:.2}s",
            r.send_seconds, r.seconds
        ),
        (false, true) => format!(
            "received until {:.2}s, verdicts exchanged at {:.2}s",
            r.receive_seconds, r.seconds
        ),
        (true, true) => format!(
            "written until {:.2}s, received until {:.2}s, all confirmed at {:.2}s",
            r.send_seconds, r.receive_seconds, r.seconds
        ),
        (false, false) => format!("no data, verdicts exchanged at {:.2}s", r.seconds),
    };
    format!(
        "perf ({}): sent {} and received {}; {timing}: {:.1} Mbit/s sent, {:.1} Mbit/s received{}; all bytes verified; {}",
        r.mode_label,
        human(r.sent),
        human(r.received),
        r.mbit_s_sent,
        r.mbit_s_received,
        r.omitted
            .map(|m| format!(" (goodput after the first {:.2}s)", m.t))
            .unwrap_or_default(),
        r.paths.describe()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use nena_transport::app::file_client::subflow_deltas;
    use nena_transport::app::perf::Sample;

    use nena_transport::testing::subflow as sb;

    #[test]
    fn interval_lines_show_each_interval_and_acknowledged_bytes() {
        let t1 = vec![sb("198.18.1.2:40000", 1 << 20, 10)];
        let t2 = vec![
            sb("198.18.1.2:40000", 3 << 20, 30),
            sb("198.18.2.2:40001", 1 << 20, 5),
        ];
        let d = subflow_deltas(&t1, &t2);
        let r = IntervalReport {
            sample: Sample {
                t: 2.0,
                secs: 1.0,
                sent: 3 << 20,
                received: 0,
                unix: 0.0,
            },
            mbit_s_sent: 25.2,
            mbit_s_received: 0.0,
            subflows: t2.clone(),
            subflows_interval: d,
            unacked: 0,
        };
        let line = interval_line(&r);
        assert!(
            line.ends_with("subflows acked/recv: 198.18.1.2 2.0 MiB/20 B, 198.18.2.2 1.0 MiB/5 B"),
            "{line}"
        );
    }
}
