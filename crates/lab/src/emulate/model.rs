//! The link model, sans-IO: given the time a frame arrives and its length, drop it or say
//! when it leaves. Deterministic for a seed (a SplitMix64 generator of its own), so its
//! behaviour is unit-tested without root, namespaces or clocks.
//!
//! Per frame, in order: an outage drops it; loss (random or Gilbert-Elliott) drops it; a
//! rate trace serialises it behind the frames before it (tail drop past [`QUEUE_LIMIT`] of
//! waiting); then it is delayed by `delay` ± `jitter`; without `reorder` it never leaves
//! before the frame ahead of it.

use super::{Emulation, Loss, RateTrace};
use std::time::Duration;

/// Bytes one delivery opportunity of a mahimahi trace carries: one full-size Ethernet frame
/// (1500-byte MTU + 14-byte header; mahimahi's own is 1500 + its 4-byte tun header).
pub const OPPORTUNITY_BYTES: u64 = 1514;

/// A frame that would wait longer than this behind a rate trace is dropped (tail drop).
pub const QUEUE_LIMIT: Duration = Duration::from_secs(1);

/// What happens to a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Drop(DropCause),
    /// Deliver at this time (same clock as `now`).
    Deliver(Duration),
}

/// Why a frame was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropCause {
    Outage,
    Loss,
    Queue,
}

/// SplitMix64: small, fast, and good enough for loss and jitter draws.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.f64() < p
    }
}

/// Where a delivery trace stands: the next unused opportunity, and what is left of the last
/// one used (shared by small frames, as mahimahi does).
#[derive(Debug, Clone, Default)]
struct TraceState {
    next_k: u64,
    left: u64,
    left_at: Duration,
}

/// One direction of an emulated link.
#[derive(Debug, Clone)]
pub struct LinkModel {
    em: Emulation,
    rng: Rng,
    /// When the outages and the trace were applied (their time 0).
    base: Duration,
    ge_bad: bool,
    /// When the last frame leaves (frames do not overtake it without `reorder`).
    last: Duration,
    /// When the trace's transmitter is free again.
    busy: Duration,
    trace: TraceState,
}

impl LinkModel {
    /// A model applied at `now`.
    pub fn new(em: Emulation, seed: u64, now: Duration) -> LinkModel {
        LinkModel {
            em,
            rng: Rng(seed),
            base: now,
            ge_bad: false,
            last: Duration::ZERO,
            busy: now,
            trace: TraceState::default(),
        }
    }

    /// The emulation in force.
    pub fn emulation(&self) -> &Emulation {
        &self.em
    }

    /// Change the emulation at `now`, keeping the frames' order. Outages and the trace keep
    /// their time 0 unless they changed (then they start again from `now`).
    pub fn update(&mut self, em: Emulation, now: Duration) {
        if em.outages != self.em.outages || em.trace != self.em.trace {
            self.base = now;
            self.busy = self.busy.max(now);
            self.trace = TraceState::default();
        }
        if let Some(s) = em.seed {
            if em.seed != self.em.seed {
                self.rng = Rng(s);
            }
        }
        self.em = em;
    }

    /// A frame of `len` bytes arrives at `now` (times must not decrease between calls).
    pub fn on_frame(&mut self, now: Duration, len: usize) -> Verdict {
        let rel = now.saturating_sub(self.base);
        if self.em.outages.iter().any(|o| o.contains(rel)) {
            return Verdict::Drop(DropCause::Outage);
        }
        if self.lost() {
            return Verdict::Drop(DropCause::Loss);
        }
        let mut t = now;
        if self.em.trace.is_some() {
            let start = now.max(self.busy);
            if start - now > QUEUE_LIMIT {
                return Verdict::Drop(DropCause::Queue);
            }
            match self.finish(start, len as u64) {
                Some(end) => {
                    self.busy = end;
                    t = end;
                }
                None => return Verdict::Drop(DropCause::Queue),
            }
        }
        let mut d = self.em.delay;
        if !self.em.jitter.is_zero() {
            let j = self.em.jitter.as_secs_f64();
            let x = self.em.delay.as_secs_f64() + j * (2.0 * self.rng.f64() - 1.0);
            d = Duration::from_secs_f64(x.max(0.0));
        }
        let mut at = t + d;
        if !self.em.reorder {
            at = at.max(self.last);
        }
        self.last = self.last.max(at);
        Verdict::Deliver(at)
    }

    fn lost(&mut self) -> bool {
        match self.em.loss {
            Loss::None => false,
            Loss::Random(p) => self.rng.chance(p),
            Loss::GilbertElliott {
                p,
                r,
                loss_bad,
                loss_good,
            } => {
                self.ge_bad = if self.ge_bad {
                    !self.rng.chance(r)
                } else {
                    self.rng.chance(p)
                };
                self.rng
                    .chance(if self.ge_bad { loss_bad } else { loss_good })
            }
        }
    }

    /// When a frame of `bytes` that starts transmission at `start` has left, by the trace;
    /// `None` if never.
    fn finish(&mut self, start: Duration, bytes: u64) -> Option<Duration> {
        let base = self.base;
        let rel = start.saturating_sub(base);
        match self.em.trace.as_ref()? {
            RateTrace::Rates { steps, .. } => {
                let mut i = steps.partition_point(|s| s.at <= rel).saturating_sub(1);
                let mut t = rel.as_secs_f64();
                let mut bits = (bytes * 8) as f64;
                loop {
                    let r = steps[i].rate.bps() as f64;
                    let end = steps
                        .get(i + 1)
                        .map_or(f64::INFINITY, |s| s.at.as_secs_f64());
                    if r > 0.0 {
                        let need = bits / r;
                        if t + need <= end {
                            return Some(base + Duration::from_secs_f64(t + need));
                        }
                        bits -= (end - t) * r;
                    } else if end.is_infinite() {
                        return None;
                    }
                    t = end;
                    i += 1;
                }
            }
            RateTrace::Deliveries {
                period_ms,
                opportunities_ms,
                ..
            } => {
                let n = opportunities_ms.len() as u64;
                let period = Duration::from_millis(*period_ms);
                let at = |k: u64| {
                    period * (k / n) as u32
                        + Duration::from_millis(opportunities_ms[(k % n) as usize])
                };
                let mut need = bytes;
                let st = &mut self.trace;
                let mut t = start;
                if st.left > 0 && base + st.left_at >= start {
                    let take = st.left.min(need);
                    need -= take;
                    st.left -= take;
                    t = base + st.left_at;
                }
                while need > 0 {
                    // first opportunity at or after `rel`
                    let cycles = (rel.as_millis() / u128::from(*period_ms)) as u64;
                    let in_cycle = rel.saturating_sub(period * cycles as u32);
                    let idx = opportunities_ms
                        .partition_point(|&ms| Duration::from_millis(ms) < in_cycle);
                    let first = cycles * n + idx as u64;
                    let k = st.next_k.max(first);
                    st.next_k = k + 1;
                    let take = OPPORTUNITY_BYTES.min(need);
                    need -= take;
                    st.left = OPPORTUNITY_BYTES - take;
                    st.left_at = at(k);
                    t = base + st.left_at;
                }
                Some(t)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emulate::{Outage, RateStep};
    use crate::Rate;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// The binomial 99% interval of the count of successes in `n` trials of probability `p`
    /// (normal approximation, z = 2.576).
    fn binomial_99(n: u64, p: f64) -> (f64, f64) {
        let mean = n as f64 * p;
        let sd = (n as f64 * p * (1.0 - p)).sqrt();
        (mean - 2.576 * sd, mean + 2.576 * sd)
    }

    #[test]
    fn delay_is_added_and_order_kept_under_jitter() {
        let em = Emulation {
            delay: ms(20),
            jitter: ms(10),
            seed: Some(1),
            ..Emulation::default()
        };
        let mut m = LinkModel::new(em, 1, Duration::ZERO);
        let mut last = Duration::ZERO;
        let mut spread = (Duration::MAX, Duration::ZERO);
        for i in 0..10_000u64 {
            // one frame every 0.1 ms: jitter of ±10 ms would reorder them
            let now = Duration::from_micros(i * 100);
            let Verdict::Deliver(at) = m.on_frame(now, 1500) else {
                panic!("dropped without loss")
            };
            assert!(at >= last, "frame {i} overtook the one ahead");
            assert!(at >= now + ms(10), "frame {i}: {:?} early", at - now);
            last = at;
            spread = (spread.0.min(at - now), spread.1.max(at - now));
        }
        assert!(spread.1 > ms(25), "jitter never above delay: {spread:?}");
        // Frames far apart are not held back: the spread reaches both ends.
        let em = Emulation {
            delay: ms(20),
            jitter: ms(10),
            ..Emulation::default()
        };
        let mut m = LinkModel::new(em, 2, Duration::ZERO);
        let d: Vec<Duration> = (0..2000u64)
            .map(|i| match m.on_frame(ms(i * 100), 100) {
                Verdict::Deliver(at) => at - ms(i * 100),
                v => panic!("{v:?}"),
            })
            .collect();
        let min = d.iter().min().unwrap();
        let max = d.iter().max().unwrap();
        assert!(*min >= ms(10) && *min < ms(11), "{min:?}");
        assert!(*max <= ms(30) && *max > ms(29), "{max:?}");
        let mean = d.iter().sum::<Duration>() / d.len() as u32;
        assert!(mean > ms(19) && mean < ms(21), "{mean:?}");
    }

    #[test]
    fn reorder_lets_frames_overtake() {
        let em = Emulation {
            delay: ms(20),
            jitter: ms(10),
            reorder: true,
            ..Emulation::default()
        };
        let mut m = LinkModel::new(em, 3, Duration::ZERO);
        let mut overtaken = 0;
        let mut last = Duration::ZERO;
        for i in 0..1000u64 {
            let Verdict::Deliver(at) = m.on_frame(Duration::from_micros(i * 100), 1500) else {
                panic!()
            };
            if at < last {
                overtaken += 1;
            }
            last = last.max(at);
        }
        assert!(overtaken > 100, "{overtaken}");
    }

    #[test]
    fn random_loss_is_within_the_binomial_interval_and_deterministic() {
        for (p, seed) in [(0.05, 7u64), (0.01, 8), (0.3, 9)] {
            let em = Emulation {
                loss: Loss::Random(p),
                ..Emulation::default()
            };
            let run = |seed| {
                let mut m = LinkModel::new(em.clone(), seed, Duration::ZERO);
                (0..100_000u64)
                    .map(|i| m.on_frame(Duration::from_micros(i), 100))
                    .collect::<Vec<_>>()
            };
            let a = run(seed);
            assert_eq!(a, run(seed), "same seed, different draws");
            assert_ne!(a, run(seed + 1000), "seed ignored");
            let lost = a
                .iter()
                .filter(|v| **v == Verdict::Drop(DropCause::Loss))
                .count() as f64;
            let (lo, hi) = binomial_99(100_000, p);
            assert!(
                lost >= lo && lost <= hi,
                "p {p}: {lost} not in [{lo}, {hi}]"
            );
        }
    }

    #[test]
    fn gilbert_elliott_bursts_have_mean_length_one_over_r() {
        let (p, r) = (0.01, 0.25);
        let em = Emulation {
            loss: Loss::GilbertElliott {
                p,
                r,
                loss_bad: 1.0,
                loss_good: 0.0,
            },
            ..Emulation::default()
        };
        let mut m = LinkModel::new(em.clone(), 11, Duration::ZERO);
        let mut bursts = Vec::new();
        let mut run = 0u32;
        let n = 400_000u64;
        let mut lost = 0u64;
        for i in 0..n {
            if m.on_frame(Duration::from_micros(i), 100) == Verdict::Drop(DropCause::Loss) {
                run += 1;
                lost += 1;
            } else if run > 0 {
                bursts.push(run);
                run = 0;
            }
        }
        let mean_burst = bursts.iter().sum::<u32>() as f64 / bursts.len() as f64;
        assert!(
            (mean_burst - 1.0 / r).abs() < 0.2,
            "mean burst {mean_burst}, expected {}",
            1.0 / r
        );
        let rate = lost as f64 / n as f64;
        let expect = em.loss.mean();
        assert!((rate - expect).abs() < 0.004, "loss {rate} vs {expect}");
        // Bursty: far more bursts of 3+ than independent loss at the same rate would give.
        let long = bursts.iter().filter(|&&b| b >= 3).count() as f64 / bursts.len() as f64;
        assert!(long > 0.4, "{long}");
    }

    #[test]
    fn outages_drop_everything_then_the_link_comes_back() {
        let em = Emulation {
            delay: ms(5),
            outages: vec![Outage {
                start: ms(100),
                duration: ms(50),
            }],
            ..Emulation::default()
        };
        let base = Duration::from_secs(3);
        let mut m = LinkModel::new(em.clone(), 1, base);
        for t in 0..300u64 {
            let v = m.on_frame(base + ms(t), 100);
            if (100..150).contains(&t) {
                assert_eq!(v, Verdict::Drop(DropCause::Outage), "at {t} ms");
            } else {
                assert_eq!(v, Verdict::Deliver(base + ms(t + 5)), "at {t} ms");
            }
        }
        // Changing only the delay keeps the outage's time 0; a new outage list restarts it.
        m.update(
            Emulation {
                delay: ms(1),
                ..em.clone()
            },
            base + ms(300),
        );
        assert_eq!(
            m.on_frame(base + ms(310), 1),
            Verdict::Deliver(base + ms(311))
        );
        let mut again = em.clone();
        again.outages[0].start = ms(0);
        m.update(again, base + ms(400));
        assert_eq!(
            m.on_frame(base + ms(420), 1),
            Verdict::Drop(DropCause::Outage)
        );
        assert!(matches!(m.on_frame(base + ms(460), 1), Verdict::Deliver(_)));
    }

    #[test]
    fn rate_trace_serialises_frames() {
        // 8 Mbit/s for 1 s, then nothing for 1 s, then 80 Mbit/s
        let em = Emulation {
            trace: Some(RateTrace::Rates {
                name: "t".into(),
                steps: vec![
                    RateStep {
                        at: ms(0),
                        rate: Rate::mbit(8),
                    },
                    RateStep {
                        at: ms(1000),
                        rate: Rate(0),
                    },
                    RateStep {
                        at: ms(2000),
                        rate: Rate::mbit(80),
                    },
                ],
            }),
            ..Emulation::default()
        };
        let mut m = LinkModel::new(em, 1, Duration::ZERO);
        // 1000 bytes at 8 Mbit/s = 1 ms each; a burst of 10 at t=0 leaves 1 ms apart
        for i in 1..=10u64 {
            assert_eq!(m.on_frame(ms(0), 1000), Verdict::Deliver(ms(i)));
        }
        // a frame straddling the silent second waits for it
        assert_eq!(
            m.on_frame(Duration::from_micros(999_500), 1000),
            Verdict::Deliver(Duration::from_micros(2_000_050))
        );
        // during the silence frames queue; past QUEUE_LIMIT of waiting they are dropped
        assert!(matches!(m.on_frame(ms(1500), 1000), Verdict::Deliver(_)));
        let mut m2 = m.clone();
        m2.busy = ms(4000);
        assert_eq!(m2.on_frame(ms(2500), 1000), Verdict::Drop(DropCause::Queue));
    }

    #[test]
    fn delivery_trace_gives_one_frame_per_opportunity_and_loops() {
        let em = Emulation {
            trace: Some(RateTrace::Deliveries {
                name: "m".into(),
                period_ms: 10,
                opportunities_ms: vec![2, 2, 7, 10],
            }),
            ..Emulation::default()
        };
        let mut m = LinkModel::new(em, 1, ms(100));
        let at: Vec<Duration> = (0..9)
            .map(|_| match m.on_frame(ms(100), 1514) {
                Verdict::Deliver(t) => t - ms(100),
                v => panic!("{v:?}"),
            })
            .collect();
        assert_eq!(
            at,
            [2, 2, 7, 10, 12, 12, 17, 20, 22].map(ms).to_vec(),
            "opportunities in order, looped every 10 ms"
        );
        // small frames share an opportunity; a frame arriving later skips the ones missed
        let mut m = LinkModel::new(m.emulation().clone(), 1, Duration::ZERO);
        assert_eq!(m.on_frame(ms(0), 700), Verdict::Deliver(ms(2)));
        assert_eq!(m.on_frame(ms(0), 700), Verdict::Deliver(ms(2)));
        assert_eq!(m.on_frame(ms(0), 700), Verdict::Deliver(ms(2)));
        assert_eq!(m.on_frame(ms(33), 100), Verdict::Deliver(ms(37)));
        // throughput: 4 opportunities per 10 ms = 4 * 1514 * 8 bit / 10 ms
        let mut m = LinkModel::new(m.emulation().clone(), 1, Duration::ZERO);
        let mut end = Duration::ZERO;
        for _ in 0..400 {
            if let Verdict::Deliver(t) = m.on_frame(ms(0), 1514) {
                end = t;
            }
        }
        assert_eq!(end, ms(1000));
    }
}
