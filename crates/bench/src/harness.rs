//! A small measurement harness: warm-up and calibration, then repeated samples, each
//! timing a batch of iterations with `std::time::Instant`; the figure reported is the
//! median time per iteration, with quartiles, minimum and maximum as the spread.
//!
//! Several jobs can be measured in *interleaved rounds* (one sample of every job per
//! round), so that a change of machine load during a run hits all of them alike and
//! ratios measured in one run stay meaningful.

use anyhow::{bail, Result};
use serde::Serialize;
use std::time::{Duration, Instant};

/// How long and how often to measure.
#[derive(Debug, Clone, PartialEq)]
pub struct HarnessConfig {
    /// Number of timed samples per job (the median is taken over these).
    pub samples: usize,
    /// Target duration of one sample; the batch size is chosen to take about this long.
    pub sample_time: Duration,
    /// Warm-up (and calibration) time per job before sampling.
    pub warmup: Duration,
    /// Time budget for the samples of one job: a job whose single iteration is longer
    /// than the sample time takes fewer samples (at least `MIN_SAMPLES`) to stay within it.
    pub max_job_time: Duration,
}

/// The fewest samples a job takes, whatever its budget.
pub const MIN_SAMPLES: usize = 5;

impl HarnessConfig {
    /// The default for a recorded run: 51 samples of about 1 ms after 50 ms of warm-up
    /// (short samples, so that the median escapes preemption on a shared machine), at
    /// most 1 s of samples per job.
    pub fn standard() -> Self {
        HarnessConfig {
            samples: 51,
            sample_time: Duration::from_millis(1),
            warmup: Duration::from_millis(50),
            max_job_time: Duration::from_secs(1),
        }
    }

    /// A short run for tests and demonstrations: 5 samples of about 1 ms.
    pub fn quick() -> Self {
        HarnessConfig {
            samples: 5,
            sample_time: Duration::from_millis(1),
            warmup: Duration::from_millis(5),
            max_job_time: Duration::from_millis(100),
        }
    }

    /// Reject settings that cannot produce a figure.
    pub fn validate(&self) -> Result<()> {
        if self.samples == 0 {
            bail!("the number of samples must be at least 1");
        }
        if self.samples > 100_000 {
            bail!("at most 100000 samples");
        }
        if self.sample_time.is_zero() {
            bail!("the sample time must be positive");
        }
        Ok(())
    }
}

/// Summary of the samples of one job, in nanoseconds per iteration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stats {
    pub median_ns: f64,
    pub p25_ns: f64,
    pub p75_ns: f64,
    pub min_ns: f64,
    pub max_ns: f64,
    /// Number of samples summarised.
    pub samples: usize,
    /// Iterations timed together in each sample.
    pub iters_per_sample: u64,
}

impl Stats {
    /// Interquartile range relative to the median (0.02 = 2 %).
    pub fn rel_spread(&self) -> f64 {
        if self.median_ns > 0.0 {
            (self.p75_ns - self.p25_ns) / self.median_ns
        } else {
            0.0
        }
    }
}

/// Quantile `q` (0..=1) of sorted values, linear interpolation between closest ranks.
fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    let n = sorted.len();
    if n == 1 {
        return sorted[0];
    }
    let pos = q.clamp(0.0, 1.0) * (n - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

/// A run of a lab bench that failed (variant `V` of repetition `rep`), with its error:
/// reported beside the runs that completed.
#[derive(Debug, Clone, Serialize)]
pub struct RunFailure<V> {
    pub variant: V,
    pub rep: usize,
    pub error: String,
}

/// The median of `v` (sorted in place; the mean of the middle two for an even count), NaN
/// for no values.
pub fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    quantile_sorted(v, 0.5)
}

/// Summarise per-iteration times (ns). Panics on an empty slice or NaN (a harness bug).
pub fn summarize(per_iter_ns: &[f64], iters_per_sample: u64) -> Stats {
    assert!(!per_iter_ns.is_empty(), "no samples to summarise");
    let mut v = per_iter_ns.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).expect("NaN sample"));
    Stats {
        median_ns: quantile_sorted(&v, 0.5),
        p25_ns: quantile_sorted(&v, 0.25),
        p75_ns: quantile_sorted(&v, 0.75),
        min_ns: v[0],
        max_ns: v[v.len() - 1],
        samples: v.len(),
        iters_per_sample,
    }
}

/// One thing to measure: an iteration of it is one call of the closure.
pub type Job<'a> = Box<dyn FnMut() -> Result<()> + 'a>;

fn time_batch(job: &mut Job<'_>, iters: u64) -> Result<Duration> {
    let start = Instant::now();
    for _ in 0..iters {
        job()?;
    }
    Ok(start.elapsed())
}

/// Warm the job up for `cfg.warmup` (doubling the batch) and return the batch size that
/// takes about `cfg.sample_time` and the number of samples to take (fewer than
/// `cfg.samples` when even one iteration overruns the budget `cfg.max_job_time`).
pub fn calibrate(cfg: &HarnessConfig, job: &mut Job<'_>) -> Result<(u64, usize)> {
    let begin = Instant::now();
    let mut batch: u64 = 1;
    let mut per_iter;
    loop {
        let t = time_batch(job, batch)?;
        per_iter = t.as_secs_f64() / batch as f64;
        if begin.elapsed() >= cfg.warmup {
            break;
        }
        // Grow until one batch is a measurable slice of the warm-up.
        if t < cfg.warmup / 8 {
            batch = batch.saturating_mul(2);
        }
    }
    let iters =
        ((cfg.sample_time.as_secs_f64() / per_iter.max(1e-12)).round() as u64).clamp(1, 1 << 40);
    let batch_time = per_iter * iters as f64;
    let affordable = (cfg.max_job_time.as_secs_f64() / batch_time.max(1e-12)).floor() as usize;
    let samples = cfg.samples.min(affordable.max(MIN_SAMPLES));
    Ok((iters, samples))
}

/// Measure one job: calibrate, then `cfg.samples` timed batches.
pub fn measure(cfg: &HarnessConfig, mut job: Job<'_>) -> Result<Stats> {
    let mut stats = measure_interleaved(cfg, std::slice::from_mut(&mut job), &mut |_, _| {})?;
    Ok(stats.remove(0))
}

/// Measure several jobs in interleaved rounds: every job is calibrated first, then each
/// round takes one sample of every job in turn (a job that has all its samples drops
/// out). `progress(done, total)` is called after each step (calibrations plus samples).
pub fn measure_interleaved(
    cfg: &HarnessConfig,
    jobs: &mut [Job<'_>],
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Vec<Stats>> {
    cfg.validate()?;
    let mut total = (jobs.len() * (cfg.samples + 1)) as u64;
    let mut done = 0;
    let mut iters = Vec::with_capacity(jobs.len());
    let mut wanted = Vec::with_capacity(jobs.len());
    for job in jobs.iter_mut() {
        let (n, k) = calibrate(cfg, job)?;
        iters.push(n);
        wanted.push(k);
        total -= (cfg.samples - k) as u64;
        done += 1;
        progress(done, total);
    }
    let mut samples: Vec<Vec<f64>> = vec![Vec::with_capacity(cfg.samples); jobs.len()];
    for round in 0..cfg.samples {
        for (i, job) in jobs.iter_mut().enumerate() {
            if round >= wanted[i] {
                continue;
            }
            let t = time_batch(job, iters[i])?;
            samples[i].push(t.as_nanos() as f64 / iters[i] as f64);
            done += 1;
            progress(done, total);
        }
    }
    Ok(samples
        .iter()
        .zip(&iters)
        .map(|(s, &n)| summarize(s, n))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hint::black_box;

    #[test]
    fn median_of_odd_and_even_counts() {
        let s = summarize(&[5.0, 1.0, 3.0], 1);
        assert_eq!(s.median_ns, 3.0);
        assert_eq!(s.min_ns, 1.0);
        assert_eq!(s.max_ns, 5.0);
        let s = summarize(&[4.0, 1.0, 3.0, 2.0], 1);
        assert_eq!(s.median_ns, 2.5);
        assert_eq!(s.samples, 4);
    }

    #[test]
    fn quartiles_interpolate() {
        let v: Vec<f64> = (0..=100).map(f64::from).collect();
        let s = summarize(&v, 7);
        assert_eq!(s.p25_ns, 25.0);
        assert_eq!(s.p75_ns, 75.0);
        assert_eq!(s.median_ns, 50.0);
        assert_eq!(s.iters_per_sample, 7);
        assert!((s.rel_spread() - 1.0).abs() < 1e-12);
        // Between ranks: 4 values, q=0.25 sits at position 0.75.
        let s = summarize(&[0.0, 4.0, 8.0, 12.0], 1);
        assert_eq!(s.p25_ns, 3.0);
        assert_eq!(s.p75_ns, 9.0);
    }

    #[test]
    fn single_sample_is_its_own_summary() {
        let s = summarize(&[42.0], 1);
        assert_eq!(
            (s.median_ns, s.p25_ns, s.p75_ns, s.min_ns, s.max_ns),
            (42.0, 42.0, 42.0, 42.0, 42.0)
        );
        assert_eq!(s.rel_spread(), 0.0);
    }

    #[test]
    fn rejects_zero_samples() {
        let cfg = HarnessConfig {
            samples: 0,
            ..HarnessConfig::quick()
        };
        assert!(measure(&cfg, Box::new(|| Ok(()))).is_err());
    }

    #[test]
    fn measures_a_sleep_roughly() {
        // 200 us sleeps: the median must be at least that, and not absurdly more.
        let cfg = HarnessConfig {
            samples: 3,
            sample_time: Duration::from_millis(2),
            warmup: Duration::from_millis(2),
            max_job_time: Duration::from_secs(1),
        };
        let s = measure(
            &cfg,
            Box::new(|| {
                // sleep: a job of known length for the harness to measure
                std::thread::sleep(Duration::from_micros(200));
                Ok(())
            }),
        )
        .unwrap();
        assert!(s.median_ns >= 200_000.0, "{s:?}");
        assert!(s.median_ns < 50_000_000.0, "{s:?}");
        assert!(s.min_ns <= s.median_ns && s.median_ns <= s.max_ns);
    }

    #[test]
    fn interleaved_orders_jobs_and_counts_progress() {
        let cfg = HarnessConfig {
            samples: 4,
            sample_time: Duration::from_micros(300),
            warmup: Duration::from_millis(1),
            max_job_time: Duration::from_secs(1),
        };
        let mut buf = vec![0u8; 4096];
        let mut small = [0u8; 16];
        let mut jobs: Vec<Job> = vec![
            Box::new(|| {
                for b in buf.iter_mut() {
                    *b = black_box(b.wrapping_add(1));
                }
                Ok(())
            }),
            Box::new(|| {
                for b in small.iter_mut() {
                    *b = black_box(b.wrapping_add(1));
                }
                Ok(())
            }),
        ];
        let mut calls = 0;
        let mut last = (0, 0);
        let stats = measure_interleaved(&cfg, &mut jobs, &mut |d, t| {
            calls += 1;
            last = (d, t);
        })
        .unwrap();
        assert_eq!(stats.len(), 2);
        assert_eq!(calls, 2 * 5);
        assert_eq!(last, (10, 10));
        // 256x more work must take clearly longer per iteration.
        assert!(stats[0].median_ns > stats[1].median_ns * 4.0, "{stats:?}");
    }

    #[test]
    fn slow_jobs_take_fewer_samples_within_budget() {
        let cfg = HarnessConfig {
            samples: 50,
            sample_time: Duration::from_micros(100),
            warmup: Duration::from_micros(100),
            max_job_time: Duration::from_millis(20),
        };
        let mut jobs: Vec<Job> = vec![
            Box::new(|| {
                // sleep: a slow job of known length, to exhaust the time budget
                std::thread::sleep(Duration::from_millis(2));
                Ok(())
            }),
            Box::new(|| Ok(())),
        ];
        let mut steps = 0;
        let mut last_total = 0;
        let stats = measure_interleaved(&cfg, &mut jobs, &mut |d, t| {
            steps += 1;
            assert!(d <= t);
            last_total = t;
        })
        .unwrap();
        // 2 ms per iteration, 20 ms budget: at most 10 samples, never fewer than MIN_SAMPLES.
        assert!(
            stats[0].samples >= MIN_SAMPLES && stats[0].samples <= 10,
            "{:?}",
            stats[0]
        );
        assert_eq!(stats[0].iters_per_sample, 1);
        assert_eq!(stats[1].samples, 50);
        assert_eq!(steps, last_total);
        assert_eq!(last_total as usize, 2 + stats[0].samples + 50);
    }

    #[test]
    fn job_errors_propagate() {
        let r = measure(
            &HarnessConfig::quick(),
            Box::new(|| anyhow::bail!("broken subject")),
        );
        assert!(r.unwrap_err().to_string().contains("broken subject"));
    }
}
