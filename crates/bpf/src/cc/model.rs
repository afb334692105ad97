//! The increase and decrease rules of the four congestion controls as pure functions, in
//! exactly the fixed-point arithmetic of the BPF programs (`bpf/cc/cc.h` and each
//! `bpf/*.bpf.c`; the comment above each C function names its twin here), so the unit tests
//! below can hold the kernel's arithmetic against each paper's formula, computed in
//! floating point, on constructed subflow sets and synthetic cwnd traces.
//!
//! Units: cwnd in packets (clamped to [1, 2^20]); RTT in microseconds (the kernel's
//! `srtt_us >> 3`, at least 1). Every formula is invariant under scaling all RTTs by one
//! factor, so RTTs enter relative to the smallest: `q = rtt * 1024 / rtt_min` (clamped to
//! [1024, 2^24]). With `r' = q / 1024`: `a_i = cwnd_i / r'_i * 2^16` and
//! `b_i = cwnd_i / r'_i^2 * 2^16`.

/// Subflows the programs look at (the bounded walk of `conn_list`).
pub const MAX_SUBFLOWS: usize = 8;
/// cwnd clamp of the arithmetic.
pub const CWND_MAX: u32 = 1 << 20;
/// Largest relative RTT, x1024.
pub const Q_MAX: u64 = 1 << 24;
/// The fractional accumulator of OLIA and BALIA counts 2^-20 packets.
pub const FRAC_SHIFT: u32 = 20;
/// round(sqrt(n) * 256) for n = 0..=8 (EWTCP; n = 0 is never used and reads as 1).
pub const SQRT_N_256: [u32; MAX_SUBFLOWS + 1] = [256, 256, 362, 443, 512, 572, 627, 677, 724];

/// One subflow as the arithmetic sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subflow {
    /// Congestion window, packets.
    pub cwnd: u32,
    /// Smoothed RTT, microseconds.
    pub rtt_us: u32,
    /// OLIA: packets between losses (the larger of the last two intervals).
    pub l: u64,
}

impl Subflow {
    /// A subflow with the clamps the programs apply.
    pub fn new(cwnd: u32, rtt_us: u32) -> Subflow {
        Subflow {
            cwnd: cwnd.clamp(1, CWND_MAX),
            rtt_us: rtt_us.max(1),
            l: 0,
        }
    }
    /// The same with an OLIA loss interval.
    pub fn with_l(self, l: u64) -> Subflow {
        Subflow { l, ..self }
    }
}

/// The sums of `a_i` and `b_i` (cc.h `struct sums`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sums {
    /// Sum of a_i.
    pub a_sum: u64,
    /// Max of a_i.
    pub a_max: u64,
    /// Max of b_i.
    pub b_max: u64,
    /// a of the calling subflow.
    pub a_me: u64,
    /// b of the calling subflow.
    pub b_me: u64,
    /// cwnd of the subflow of largest a.
    pub c_best: u64,
    /// q of the subflow of largest a.
    pub q_best: u64,
    /// cwnd of the calling subflow.
    pub c_me: u64,
    /// q of the calling subflow.
    pub q_me: u64,
}

fn rel_rtts(subs: &[Subflow]) -> impl Iterator<Item = u64> + '_ {
    let rmin = subs.iter().map(|s| s.rtt_us).min().unwrap_or(1).max(1) as u64;
    subs.iter()
        .map(move |s| ((s.rtt_us as u64) << 10) / rmin)
        .map(|q| q.clamp(1024, Q_MAX))
}

/// cc.h `sums_of`.
pub fn sums(subs: &[Subflow], me: usize) -> Sums {
    let mut out = Sums {
        q_best: 1024,
        q_me: 1024,
        ..Sums::default()
    };
    for (i, (s, q)) in subs
        .iter()
        .zip(rel_rtts(subs))
        .take(MAX_SUBFLOWS)
        .enumerate()
    {
        let c = s.cwnd as u64;
        let a = (c << 26) / q;
        let b = (c << 36) / (q * q);
        out.a_sum += a;
        if a > out.a_max {
            out.a_max = a;
            out.c_best = c;
            out.q_best = q;
        }
        out.b_max = out.b_max.max(b);
        if i == me {
            out.a_me = a;
            out.b_me = b;
            out.c_me = c;
            out.q_me = q;
        }
    }
    out
}

/// cc.h `coupled_term`: (w_me / rtt_me^2) / (sum w/rtt)^2 * factor / 1024 in 2^-20
/// packets (the factor applied before the last division keeps a small term's precision).
pub fn coupled_term(s: &Sums, factor: u64) -> u64 {
    if s.a_sum == 0 || s.q_me == 0 {
        return 0;
    }
    let u = (s.c_me << 36) / s.q_me;
    let u = (u << 16) / s.q_me;
    let t = (u << 10) / s.a_sum;
    t * factor / s.a_sum
}

/// lia.bpf.c `lia_w`: ACKed packets per +1 packet of cwnd on subflow `me`.
pub fn lia_w(subs: &[Subflow], me: usize) -> u32 {
    let s = sums(subs, me);
    let mine = subs[me].cwnd as u64;
    let (mut a, mut b) = (s.a_sum, s.b_max);
    let mut i = 0;
    while i < 32 && a > 0xffff_ffff {
        a >>= 1;
        b >>= 2;
        i += 1;
    }
    if b == 0 {
        return mine as u32;
    }
    let w = ((a * a / b) >> 16).max(mine);
    w.min(0xffff_ffff) as u32
}

/// ewtcp.bpf.c `ewtcp_w`: cwnd * sqrt(n).
pub fn ewtcp_w(subs: &[Subflow], me: usize) -> u32 {
    let n = subs.len().min(MAX_SUBFLOWS);
    let w = (subs[me].cwnd as u64 * SQRT_N_256[n] as u64) >> 8;
    w.max(1) as u32
}

/// olia.bpf.c `olia_inc`: the increase per ACKed packet in 2^-20 packets, signed.
pub fn olia_inc(subs: &[Subflow], me: usize) -> i64 {
    let s = sums(subs, me);
    let n = subs.len().min(MAX_SUBFLOWS);
    let w_max = subs.iter().take(n).map(|s| s.cwnd).max().unwrap_or(1);
    let m: Vec<u64> = subs
        .iter()
        .zip(rel_rtts(subs))
        .take(n)
        .map(|(s, q)| (s.l.min(0xffff_ffff) << 20) / ((q * q) >> 10))
        .collect();
    let m_best = m.iter().copied().max().unwrap_or(0);
    let (mut n_c, mut n_m, mut me_c, mut me_m) = (0u64, 0u64, false, false);
    for i in 0..n {
        let in_m = subs[i].cwnd == w_max;
        let in_c = m[i] == m_best && !in_m;
        n_m += in_m as u64;
        n_c += in_c as u64;
        if i == me {
            me_m = in_m;
            me_c = in_c;
        }
    }
    let mut inc = coupled_term(&s, 1024) as i64;
    let w = subs[me].cwnd as u64;
    if me_c {
        inc += ((1u64 << FRAC_SHIFT) / (n as u64 * n_c * w)) as i64;
    } else if me_m && n_c > 0 {
        inc -= ((1u64 << FRAC_SHIFT) / (n as u64 * n_m * w)) as i64;
    }
    inc
}

/// balia.bpf.c `balia_alpha`: max_k x_k / x_me in 2^-10, clamped to [1, 16384].
pub fn balia_alpha(s: &Sums) -> u64 {
    let den = s.q_best * s.c_me;
    if den == 0 {
        return 1024;
    }
    (((s.c_best * s.q_me) << 10) / den).clamp(1024, 1 << 24)
}

/// balia.bpf.c `balia_inc`: the increase per ACKed packet in 2^-20 packets.
pub fn balia_inc(subs: &[Subflow], me: usize) -> i64 {
    let s = sums(subs, me);
    let alpha = balia_alpha(&s);
    let factor = (1024 + alpha) * (4096 + alpha) / 10240;
    coupled_term(&s, factor) as i64
}

/// balia.bpf.c `balia_ssthresh`: w - w/2 * min(alpha, 1.5), at least 2.
pub fn balia_ssthresh(subs: &[Subflow], me: usize) -> u32 {
    let s = sums(subs, me);
    let m = balia_alpha(&s).min(1536);
    let w = subs[me].cwnd as u64;
    let cut = (w * m) >> 11;
    if w - cut > 2 {
        (w - cut) as u32
    } else {
        2
    }
}

/// Reno's halving on a loss (every algorithm but BALIA): max(cwnd / 2, 2).
pub fn reno_ssthresh(cwnd: u32) -> u32 {
    (cwnd >> 1).max(2)
}

/// cc.h `cong_avoid_ai` (the kernel's tcp_cong_avoid_ai): +1 packet per `w` ACKed packets.
/// Returns the new (cwnd, snd_cwnd_cnt).
pub fn cong_avoid_ai(mut cwnd: u32, mut cnt: u32, w: u32, acked: u32, clamp: u32) -> (u32, u32) {
    let w = w.max(1);
    if cnt >= w {
        cnt = 0;
        cwnd += 1;
    }
    cnt += acked;
    if cnt >= w {
        let delta = cnt / w;
        cnt -= delta * w;
        cwnd += delta;
    }
    (cwnd.min(clamp), cnt)
}

/// cc.h `cong_avoid_frac`: the signed accumulator of OLIA and BALIA. Returns (cwnd, acc).
pub fn cong_avoid_frac(
    mut cwnd: u32,
    mut acc: i64,
    inc: i64,
    acked: u32,
    clamp: u32,
) -> (u32, i64) {
    let one = 1i64 << FRAC_SHIFT;
    acc += inc * acked as i64;
    if acc >= one {
        let add = ((acc as u64) >> FRAC_SHIFT).min(CWND_MAX as u64) as u32;
        acc &= one - 1;
        cwnd = (cwnd + add).min(clamp);
    } else if acc <= -one {
        acc = 0;
        if cwnd > 2 {
            cwnd -= 1;
        }
    }
    (cwnd, acc)
}

/// The papers' formulas in floating point: the increase of cwnd_me per ACKed packet.
pub mod reference {
    use super::Subflow;

    fn rate_sum(subs: &[Subflow]) -> f64 {
        subs.iter().map(|s| s.cwnd as f64 / s.rtt_us as f64).sum()
    }

    /// RFC 6356 section 3: min(alpha / cwnd_total, 1 / cwnd_i).
    pub fn lia(subs: &[Subflow], me: usize) -> f64 {
        let total: f64 = subs.iter().map(|s| s.cwnd as f64).sum();
        let best = subs
            .iter()
            .map(|s| s.cwnd as f64 / (s.rtt_us as f64 * s.rtt_us as f64))
            .fold(0.0, f64::max);
        let alpha = total * best / rate_sum(subs).powi(2);
        (alpha / total).min(1.0 / subs[me].cwnd as f64)
    }

    /// The LTE study's Algorithm 2: alpha / cwnd_P with alpha = 1 / sqrt(n).
    pub fn ewtcp(subs: &[Subflow], me: usize) -> f64 {
        1.0 / ((subs.len() as f64).sqrt() * subs[me].cwnd as f64)
    }

    /// OLIA (Khalili et al. 2013, eq. 4 and 5).
    pub fn olia(subs: &[Subflow], me: usize) -> f64 {
        let n = subs.len() as f64;
        let r = &subs[me];
        let rtt = r.rtt_us as f64;
        let base = (r.cwnd as f64 / (rtt * rtt)) / rate_sum(subs).powi(2);
        let w_max = subs.iter().map(|s| s.cwnd).max().unwrap();
        let metric = |s: &Subflow| s.l as f64 / (s.rtt_us as f64 * s.rtt_us as f64);
        let best = subs.iter().map(metric).fold(0.0, f64::max);
        let in_m = |s: &Subflow| s.cwnd == w_max;
        let in_c = |s: &Subflow| metric(s) >= best * (1.0 - 1e-9) && !in_m(s);
        let n_c = subs.iter().filter(|s| in_c(s)).count() as f64;
        let n_m = subs.iter().filter(|s| in_m(s)).count() as f64;
        let alpha = if in_c(r) {
            1.0 / (n * n_c)
        } else if in_m(r) && n_c > 0.0 {
            -1.0 / (n * n_m)
        } else {
            0.0
        };
        base + alpha / r.cwnd as f64
    }

    fn balia_alpha(subs: &[Subflow], me: usize) -> f64 {
        let x = |s: &Subflow| s.cwnd as f64 / s.rtt_us as f64;
        (subs.iter().map(x).fold(0.0, f64::max) / x(&subs[me])).min(16384.0)
    }

    /// BALIA (Peng et al. 2016, eq. 12): increase per ACK (alpha capped at 16384, as the
    /// program's fixed point).
    pub fn balia(subs: &[Subflow], me: usize) -> f64 {
        let r = &subs[me];
        let a = balia_alpha(subs, me);
        let x_r = r.cwnd as f64 / r.rtt_us as f64;
        x_r / (r.rtt_us as f64 * rate_sum(subs).powi(2)) * (1.0 + a) / 2.0 * (4.0 + a) / 5.0
    }

    /// BALIA's decrease on a loss: the window after it, w - w/2 * min(alpha, 1.5).
    pub fn balia_after_loss(subs: &[Subflow], me: usize) -> f64 {
        let w = subs[me].cwnd as f64;
        w - w / 2.0 * balia_alpha(subs, me).min(1.5)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (xorshift), so the cases are the same every run.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn range(&mut self, lo: u32, hi: u32) -> u32 {
            lo + (self.next() % (hi - lo + 1) as u64) as u32
        }
    }

    /// Subflow sets of 1..=4 subflows, cwnd 2..2000 packets, RTT 200 us..400 ms.
    fn cases() -> Vec<(Vec<Subflow>, usize)> {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        (0..5000)
            .map(|_| {
                let n = rng.range(1, 4) as usize;
                let subs: Vec<Subflow> = (0..n)
                    .map(|_| Subflow::new(rng.range(2, 2000), rng.range(200, 400_000)))
                    .collect();
                let me = rng.range(0, n as u32 - 1) as usize;
                (subs, me)
            })
            .collect()
    }

    fn frac(inc: i64) -> f64 {
        inc as f64 / (1u64 << FRAC_SHIFT) as f64
    }

    #[test]
    fn lia_threshold_is_the_rfc_6356_increase() {
        for (subs, me) in cases() {
            let want = 1.0 / reference::lia(&subs, me);
            let got = lia_w(&subs, me) as f64;
            // "+1 per w ACKs" with w an integer: w is floor(1/increase), up to 1% + 1 off.
            assert!(
                (got - want).abs() <= 1.0 + 0.01 * want,
                "{subs:?} me {me}: w {got} against 1/increase {want}"
            );
        }
    }

    #[test]
    fn lia_of_one_subflow_is_reno_and_never_beats_tcp_on_its_best_path() {
        for cwnd in [1, 2, 10, 333, 65535, CWND_MAX] {
            assert_eq!(lia_w(&[Subflow::new(cwnd, 12_345)], 0), cwnd);
        }
        // Two equal paths: each subflow gets a quarter of Reno's increase per ACK
        // (alpha = 1/2: the pair grows by half a packet per RTT, i.e. like one TCP).
        let two = [Subflow::new(100, 20_000), Subflow::new(100, 20_000)];
        assert_eq!(lia_w(&two, 0), 400);
    }

    #[test]
    fn ewtcp_threshold_is_the_studys_algorithm_2() {
        for (n, v) in SQRT_N_256.iter().enumerate().skip(1) {
            assert_eq!(*v, ((n as f64).sqrt() * 256.0).round() as u32, "sqrt({n})");
        }
        for (subs, me) in cases() {
            let want = 1.0 / reference::ewtcp(&subs, me);
            let got = ewtcp_w(&subs, me) as f64;
            assert!(
                (got - want).abs() <= 1.0 + 0.002 * want,
                "{subs:?}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn olia_increase_is_khalilis_formula() {
        let mut rng = Rng(77);
        for (subs, me) in cases() {
            // loss intervals: some equal (ties), some different
            let subs: Vec<Subflow> = subs
                .iter()
                .map(|s| {
                    s.with_l(if rng.range(0, 3) == 0 {
                        500
                    } else {
                        rng.range(0, 100_000) as u64
                    })
                })
                .collect();
            let want = reference::olia(&subs, me);
            let got = frac(olia_inc(&subs, me));
            // absolute error: the 2^-20 quantum and the 2^16 scale of a_i, b_i
            let tol = 1e-5 + 0.01 * want.abs();
            assert!(
                (got - want).abs() <= tol,
                "{subs:?} me {me}: {got} against {want}"
            );
        }
    }

    #[test]
    fn olia_moves_window_from_the_largest_to_the_best_path() {
        // Path 0 has the largest window, path 1 the longest loss interval (the best path):
        // 1 gets alpha = +1/(2*1), 0 gets -1/(2*1).
        let subs = [
            Subflow::new(50, 10_000).with_l(100),
            Subflow::new(20, 10_000).with_l(1000),
        ];
        assert!(olia_inc(&subs, 1) > 0);
        let base0 = coupled_term(&sums(&subs, 0), 1024) as i64;
        assert!(
            olia_inc(&subs, 0) < base0,
            "the largest window gets less than its base"
        );
    }

    #[test]
    fn balia_increase_and_decrease_are_pengs_formulas() {
        for (subs, me) in cases() {
            let want = reference::balia(&subs, me);
            let got = frac(balia_inc(&subs, me));
            assert!(
                (got - want).abs() <= 1e-5 + 0.01 * want,
                "{subs:?} me {me}: {got} vs {want}"
            );
            let want = reference::balia_after_loss(&subs, me).max(2.0);
            let got = balia_ssthresh(&subs, me) as f64;
            // relative RTTs carry 10 fractional bits: alpha, and so the cut, within 0.5%
            assert!(
                (got - want).abs() <= 1.0 + 0.005 * want,
                "{subs:?}: ssthresh {got} vs {want}"
            );
        }
        // One subflow: alpha = 1, BALIA is Reno (1/w per ACK, halve on loss).
        let one = [Subflow::new(64, 5000)];
        assert_eq!(balia_inc(&one, 0), (1 << FRAC_SHIFT) / 64);
        assert_eq!(balia_ssthresh(&one, 0), 32);
    }

    /// A synthetic trace: two subflows (RTT 20 and 60 ms) in congestion avoidance, one ACK
    /// per packet, a loss on each path every `period` ACKs. The integer rule of each
    /// algorithm and the paper's formula integrated in floating point must end within 3%.
    fn trace(
        step: impl Fn(&[Subflow], usize, &mut (u32, u32, i64)),
        exact: impl Fn(&[Subflow], usize) -> f64,
        loss: impl Fn(&[Subflow], usize) -> u32,
    ) {
        let rtts = [20_000, 60_000];
        let mut fixed = [(10u32, 0u32, 0i64), (10, 0, 0)];
        let mut float = [10.0f64, 10.0];
        let mut since = [0u64, 0];
        let mut prev = [0u64, 0];
        for ack in 0..200_000u64 {
            let p = (ack % 3 == 0) as usize; // path 1 gets a third of the ACKs
            let view: Vec<Subflow> = (0..2)
                .map(|i| Subflow::new(fixed[i].0, rtts[i]).with_l(since[i].max(prev[i])))
                .collect();
            let fview: Vec<Subflow> = (0..2)
                .map(|i| {
                    Subflow::new(float[i].round() as u32, rtts[i]).with_l(since[i].max(prev[i]))
                })
                .collect();
            step(&view, p, &mut fixed[p]);
            float[p] += exact(&fview, p);
            since[p] += 1;
            if ack % 20_000 == 19_999 {
                for i in 0..2 {
                    let v: Vec<Subflow> =
                        (0..2).map(|k| Subflow::new(fixed[k].0, rtts[k])).collect();
                    let fv: Vec<Subflow> = (0..2)
                        .map(|k| Subflow::new(float[k].round() as u32, rtts[k]))
                        .collect();
                    fixed[i] = (loss(&v, i), 0, 0);
                    float[i] = loss(&fv, i) as f64;
                    prev[i] = since[i];
                    since[i] = 0;
                }
            }
        }
        for i in 0..2 {
            let (got, want) = (fixed[i].0 as f64, float[i]);
            assert!(
                (got - want).abs() <= 1.0 + 0.03 * want,
                "path {i}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn traces_of_fixed_point_follow_the_formulas() {
        let clamp = u32::MAX;
        trace(
            |v, p, st| (st.0, st.1) = cong_avoid_ai(st.0, st.1, lia_w(v, p), 1, clamp),
            reference::lia,
            |v, i| reno_ssthresh(v[i].cwnd),
        );
        trace(
            |v, p, st| (st.0, st.1) = cong_avoid_ai(st.0, st.1, ewtcp_w(v, p), 1, clamp),
            reference::ewtcp,
            |v, i| reno_ssthresh(v[i].cwnd),
        );
        trace(
            |v, p, st| (st.0, st.2) = cong_avoid_frac(st.0, st.2, olia_inc(v, p), 1, clamp),
            reference::olia,
            |v, i| reno_ssthresh(v[i].cwnd),
        );
        trace(
            |v, p, st| (st.0, st.2) = cong_avoid_frac(st.0, st.2, balia_inc(v, p), 1, clamp),
            reference::balia,
            balia_ssthresh,
        );
    }

    #[test]
    fn ai_and_frac_steps_match_the_kernels_rules() {
        // tcp_cong_avoid_ai: 10 ACKs at w = 4 add 2 packets, 2 left in the counter.
        assert_eq!(cong_avoid_ai(10, 0, 4, 10, u32::MAX), (12, 2));
        assert_eq!(cong_avoid_ai(10, 4, 4, 1, u32::MAX), (11, 1));
        assert_eq!(cong_avoid_ai(10, 0, 4, 100, 15), (15, 0));
        let half = 1i64 << (FRAC_SHIFT - 1);
        assert_eq!(cong_avoid_frac(10, 0, half, 3, u32::MAX), (11, half));
        assert_eq!(cong_avoid_frac(10, 0, -half, 2, u32::MAX), (9, 0));
        assert_eq!(cong_avoid_frac(2, 0, -half, 4, u32::MAX), (2, 0));
    }
}
