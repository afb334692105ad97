//! RTT: samples by ACK matching with Karn's rule (no sample from a retransmitted segment)
//! and by TCP timestamps (a TSval to its first echo), the smoothed RTT that outage
//! thresholds use, and the samples' statistics and series in the report.

use super::report::RttStats;
use super::state::DirState;
use std::collections::BTreeMap;

impl DirState {
    /// An ACK `ack` for this direction (sent by its receiver) at time `t`.
    pub(super) fn ack(&mut self, ack: u32, t: f64) {
        let dir = self;
        let Some(a) = dir.peek(ack) else { return };
        if dir.max_ack.is_some_and(|m| a <= m) {
            return; // not new: duplicate ACKs give no sample
        }
        dir.max_ack = Some(a);
        let mut sample = None;
        while let Some(o) = dir.outstanding.front_mut() {
            if o.end <= a {
                if o.end == a && !o.retx {
                    sample = Some(t - o.t);
                }
                dir.outstanding.pop_front();
            } else {
                if o.start < a {
                    o.start = a;
                }
                break;
            }
        }
        if let Some(s) = sample {
            dir.rtt.push((t, s * 1000.0));
            dir.srtt = Some(dir.srtt.map_or(s, |x| 0.875 * x + 0.125 * s));
        }
        if dir.max_end.is_some_and(|e| a >= e) {
            dir.all_acked.get_or_insert(t);
        }
    }

    /// An echo `tsecr` of this direction's TSvals (sent by its receiver) at time `t`.
    pub(super) fn ts_echo(&mut self, tsecr: u32, t: f64) {
        let dir = self;
        // Drop what is older than the echoed value; the echoed value gives a sample once.
        while let Some(&(v, ts)) = dir.ts_sent.front() {
            let diff = tsecr.wrapping_sub(v) as i32;
            if diff < 0 {
                break;
            }
            dir.ts_sent.pop_front();
            if diff == 0 {
                dir.rtt_ts.push((t, (t - ts) * 1000.0));
                if dir.srtt.is_none() || dir.rtt.is_empty() {
                    dir.srtt = Some(t - ts);
                }
                break;
            }
        }
    }
}

impl RttStats {
    /// The statistics of samples (seconds, ms).
    pub(super) fn of(samples: &[(f64, f64)]) -> RttStats {
        if samples.is_empty() {
            return RttStats::default();
        }
        let mut v: Vec<f64> = samples.iter().map(|s| s.1).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        RttStats {
            samples: n as u64,
            min_ms: Some(v[0]),
            median_ms: Some(median_sorted(&v)),
            mean_ms: Some(mean),
            sigma_ms: Some(var.sqrt()),
            p95_ms: Some(v[((n - 1) as f64 * 0.95).round() as usize]),
            max_ms: Some(v[n - 1]),
        }
    }
}

fn median_sorted(v: &[f64]) -> f64 {
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The RTT series of ACK-matched samples: (bin start, median RTT in ms of the bin's samples).
pub(super) fn series(samples: &[(f64, f64)], bin: f64) -> Vec<(f64, f64)> {
    let mut by: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    for &(t, v) in samples {
        by.entry((t / bin) as usize).or_default().push(v);
    }
    by.into_iter()
        .map(|(i, mut v)| {
            v.sort_by(f64::total_cmp);
            (i as f64 * bin, median_sorted(&v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::craft::{tcp_frame, TcpFlags};
    use crate::trace::fixtures::{addrs, pcap_at, ts_opt};
    use crate::trace::{analyze_bytes, TraceOptions};

    #[test]
    fn karn_no_sample_from_a_retransmitted_segment_and_timestamps() {
        let (c, s) = addrs();
        let f = |seq, ack, flags, opt: &[u8], p: &[u8]| tcp_frame(c, s, seq, ack, flags, opt, p);
        let b = |seq, ack, flags, opt: &[u8]| tcp_frame(s, c, seq, ack, flags, opt, &[]);
        let frames = vec![
            (0.000, f(100, 0, TcpFlags::SYN, &[], &[])),
            (0.010, b(500, 101, TcpFlags::SYN_ACK, &[])),
            (0.020, f(101, 501, TcpFlags::ACK, &ts_opt(1, 0), &[1; 100])),
            // acked after 30 ms: a sample (ACK) and an echo of TSval 1 (timestamps)
            (0.050, b(501, 201, TcpFlags::ACK, &ts_opt(9, 1))),
            (0.060, f(201, 501, TcpFlags::ACK, &ts_opt(2, 9), &[2; 100])),
            // retransmitted, then acked: Karn gives no ACK sample
            (0.300, f(201, 501, TcpFlags::ACK, &ts_opt(3, 9), &[2; 100])),
            (0.310, b(501, 301, TcpFlags::ACK, &ts_opt(10, 3))),
        ];
        let r = analyze_bytes(&pcap_at(&frames), &TraceOptions::default()).unwrap();
        let sf = &r.connections[0].subflows[0];
        assert_eq!(sf.payload_bytes.c2s, 300);
        assert_eq!(sf.retransmitted_bytes.c2s, 100);
        assert_eq!(sf.rtt.c2s.samples, 1);
        assert!((sf.rtt.c2s.median_ms.unwrap() - 30.0).abs() < 1e-6);
        // TSval 1 echoed at 0.050 (30 ms), TSval 3 echoed at 0.310 (10 ms).
        assert_eq!(sf.rtt_ts.c2s.samples, 2);
        assert!((sf.rtt_ts.c2s.max_ms.unwrap() - 30.0).abs() < 1e-6);
        assert!((sf.rtt_ts.c2s.min_ms.unwrap() - 10.0).abs() < 1e-6);
        // 240 ms of silence with 100 bytes unacknowledged: an outage of the subflow.
        assert_eq!(sf.outages.len(), 1, "{:?}", sf.outages);
        let o = &sf.outages[0];
        assert_eq!(o.direction, "c2s");
        assert!((o.start - 0.060).abs() < 1e-6 && (o.duration.unwrap() - 0.240).abs() < 1e-6);
    }
}
