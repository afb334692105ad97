//! A path's round-trip time, smoothed as RFC 6298 section 2 smooths TCP's (alpha 1/8,
//! beta 1/4), from the probe round trips the path table measures; and the probe timeout
//! derived from it, bounded for probes rather than for TCP's retransmissions.

use std::time::Duration;

/// The smoothed round trip of one path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    latest: Option<Duration>,
}

impl RttEstimator {
    /// Takes one measured round trip `r` (RFC 6298 2.2 for the first, 2.3 after).
    pub fn sample(&mut self, r: Duration) {
        self.latest = Some(r);
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(s) => {
                let diff = s.abs_diff(r);
                self.rttvar = (self.rttvar * 3 + diff) / 4;
                self.srtt = Some((s * 7 + r) / 8);
            }
        }
    }

    /// The smoothed round trip, once there is a sample.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// The round-trip variation.
    pub fn rttvar(&self) -> Duration {
        self.rttvar
    }

    /// The last sample.
    pub fn latest(&self) -> Option<Duration> {
        self.latest
    }

    /// How long to wait for a probe's reply before counting it missed: RFC 6298's
    /// `SRTT + max(G, 4 * RTTVAR)` (G = 1 ms), `initial` before any sample, within
    /// `[min, max]`.
    pub fn timeout(&self, initial: Duration, min: Duration, max: Duration) -> Duration {
        let t = match self.srtt {
            None => initial,
            Some(s) => s + (self.rttvar * 4).max(Duration::from_millis(1)),
        };
        t.clamp(min, max.max(min))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// RFC 6298's formulas by hand: first sample 100 ms, then 200 ms, then 100 ms.
    #[test]
    fn smoothing_follows_rfc_6298() {
        let mut r = RttEstimator::default();
        assert_eq!(r.srtt(), None);
        assert_eq!(r.timeout(ms(1000), ms(200), ms(3000)), ms(1000));
        r.sample(ms(100));
        assert_eq!((r.srtt(), r.rttvar()), (Some(ms(100)), ms(50)));
        // rttvar = 3/4 * 50 + 1/4 * |100 - 200| = 62.5; srtt = 7/8 * 100 + 1/8 * 200 = 112.5
        r.sample(ms(200));
        assert_eq!(r.rttvar(), Duration::from_micros(62_500));
        assert_eq!(r.srtt(), Some(Duration::from_micros(112_500)));
        // rttvar = 3/4 * 62.5 + 1/4 * 12.5 = 50; srtt = 7/8 * 112.5 + 1/8 * 100 = 110.9375
        r.sample(ms(100));
        assert_eq!(r.rttvar(), ms(50));
        assert_eq!(r.srtt(), Some(Duration::from_nanos(110_937_500)));
        assert_eq!(r.latest(), Some(ms(100)));
        // timeout = srtt + 4 rttvar = 310.9375 ms, inside the bounds
        assert_eq!(
            r.timeout(ms(1000), ms(200), ms(3000)),
            Duration::from_nanos(310_937_500)
        );
        assert_eq!(r.timeout(ms(1000), ms(400), ms(3000)), ms(400));
        assert_eq!(r.timeout(ms(1000), ms(10), ms(250)), ms(250));
    }

    /// A steady path converges on its round trip and its variation decays.
    #[test]
    fn a_steady_path_converges() {
        let mut r = RttEstimator::default();
        r.sample(ms(300));
        for _ in 0..100 {
            r.sample(ms(40));
        }
        let s = r.srtt().unwrap();
        assert!(s >= ms(40) && s < ms(41), "{s:?}");
        assert!(r.rttvar() < ms(1), "{:?}", r.rttvar());
    }
}
