//! The vectorised implementation: kernels per CPU, chosen once at run time.
//!
//! Every kernel has the same contract ([`state::Kernel`]): it transforms `len` bytes from `src` to
//! `dst` and advances the streaming [`State`]. The state has one layout for all backends
//! (so a stream may even change backend between calls):
//! - scrambling: bytes 64..128 hold the window, the last 64 plaintext bytes, oldest first
//!   (bytes 0..64 are scratch);
//! - descrambling: bytes 0..128 hold `Q`, the prefix XOR of the plaintext stream, at the
//!   last 128 positions (oldest first), up to a constant. Only positions -65..-1 (bytes
//!   63..128) matter. Keeping `Q` instead of the plaintext saves rebuilding it (a 6-step
//!   dependency chain) at the start of every call.

mod portable;
#[cfg(target_arch = "x86_64")]
mod x86_avx2;
#[cfg(target_arch = "x86_64")]
mod x86_avx512;

mod state;

pub(crate) use state::{Backend, State, StateKind};
use std::sync::OnceLock;

static PORTABLE: Backend = Backend {
    name: "portable-u64",
    scramble: portable::scramble,
    descramble: portable::descramble,
};

/// The backends this CPU can run, best first (the portable one is always last).
pub(crate) fn available() -> Vec<&'static Backend> {
    let mut v = simd_backends();
    v.push(&PORTABLE);
    v
}

/// The SIMD backends this CPU supports, best first.
#[cfg(target_arch = "x86_64")]
fn simd_backends() -> Vec<&'static Backend> {
    let mut v: Vec<&'static Backend> = Vec::new();
    if std::is_x86_feature_detected!("avx512f")
        && std::is_x86_feature_detected!("avx512bw")
        && std::is_x86_feature_detected!("avx512vbmi")
        && std::is_x86_feature_detected!("gfni")
    {
        v.push(&x86_avx512::BACKEND);
    }
    if std::is_x86_feature_detected!("avx2") {
        v.push(&x86_avx2::BACKEND);
    }
    v
}

/// No SIMD backends on other architectures (yet): the portable one runs.
#[cfg(not(target_arch = "x86_64"))]
fn simd_backends() -> Vec<&'static Backend> {
    Vec::new()
}

/// The backend `Impl::Fast` uses: detected once, see `crate::fast_backend`.
pub(crate) fn backend() -> &'static Backend {
    static CHOSEN: OnceLock<&'static Backend> = OnceLock::new();
    CHOSEN.get_or_init(|| {
        let avail = available();
        if let Ok(want) = std::env::var("NENA_CODEC_BACKEND") {
            if let Some(b) = avail.iter().find(|b| b.name == want) {
                return b;
            }
        }
        avail[0]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::{Dir, WINDOW};
    use crate::{initial_window, revised};

    /// A small deterministic generator (xorshift64*), so these tests need no dependency.
    pub(crate) fn bytes(seed: u64, n: usize) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                x ^= x >> 12;
                x ^= x << 25;
                x ^= x >> 27;
                (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
            })
            .collect()
    }

    fn kind(dir: Dir) -> StateKind {
        match dir {
            Dir::Scramble => StateKind::Plain,
            Dir::Descramble => StateKind::Prefix,
        }
    }

    fn reference(dir: Dir, win: [u8; WINDOW], data: &[u8]) -> (Vec<u8>, [u8; WINDOW]) {
        let mut st = revised::State::new(win);
        let mut out = vec![0; data.len()];
        st.run(dir, data.iter().copied(), &mut out);
        // The window after the call: last 64 bytes of (window ++ plaintext).
        let plain = if dir == Dir::Scramble { data } else { &out[..] };
        let mut all = win.to_vec();
        all.extend_from_slice(plain);
        let mut w = [0u8; WINDOW];
        w.copy_from_slice(&all[all.len() - WINDOW..]);
        (out, w)
    }

    /// Every backend this CPU runs, against the revised implementation, for every length
    /// 0..300 and some large ones, both directions, in place and out of place, from random
    /// windows (a window is the state after any history, so this covers mid-stream calls).
    /// Then a second call continues the stream, and it is also run by another backend from
    /// the same state (the state layout is shared).
    #[test]
    fn every_backend_matches_revised() {
        let backends = available();
        eprintln!(
            "backends: {:?}",
            backends.iter().map(|b| b.name).collect::<Vec<_>>()
        );
        assert!(backends.iter().any(|b| b.name == "portable-u64"));
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            assert!(backends.iter().any(|b| b.name == "avx2"));
        }
        // Miri (`cargo +nightly miri test -p nena-codec --lib`) checks the raw-pointer code of
        // the portable kernels; it is slow, so it gets fewer lengths.
        let lens: Vec<usize> = if cfg!(miri) {
            (0..140).step_by(3).chain([191, 192, 193]).collect()
        } else {
            (0..300)
                .chain([511, 512, 513, 1280, 4096 + 17, 65536 + 63])
                .collect()
        };
        for (bi, b) in backends.iter().enumerate() {
            let other = backends[(bi + 1) % backends.len()];
            for (n, &len) in lens.iter().enumerate() {
                let mut win = [0u8; WINDOW];
                win.copy_from_slice(&bytes(1000 + n as u64, WINDOW));
                if n % 3 == 0 {
                    win = initial_window([n as u8, 2, 3, 4, 5, 6, 7, 0xff]);
                }
                let data = bytes(n as u64, len);
                let more = bytes(5000 + n as u64, 1 + n % 150);
                for dir in [Dir::Scramble, Dir::Descramble] {
                    let (want, want_win) = reference(dir, win, &data);
                    let (want2, _) = reference(dir, want_win, &more);
                    let mut st = State::new(kind(dir), &win);
                    let mut out = vec![0xAA; len];
                    b.run(dir, &mut st, &data, &mut out);
                    assert_eq!(out, want, "{} {dir:?} len {len}", b.name);
                    assert_eq!(
                        st.window(kind(dir)),
                        want_win,
                        "{} {dir:?} window len {len}",
                        b.name
                    );
                    for next in [b, &other] {
                        let mut st2 = st.clone();
                        let mut out2 = more.clone();
                        next.run_in_place(dir, &mut st2, &mut out2);
                        assert_eq!(
                            out2, want2,
                            "{} then {} {dir:?} len {len}",
                            b.name, next.name
                        );
                    }
                    let mut st = State::new(kind(dir), &win);
                    let mut buf = data.clone();
                    b.run_in_place(dir, &mut st, &mut buf);
                    assert_eq!(buf, want, "{} {dir:?} in place len {len}", b.name);
                    assert_eq!(
                        st.window(kind(dir)),
                        want_win,
                        "{} {dir:?} in place window len {len}",
                        b.name
                    );
                }
            }
        }
    }

    /// Streaming through every backend in odd chunk sizes equals the one-shot result.
    #[test]
    fn every_backend_chunked() {
        let data = bytes(77, if cfg!(miri) { 400 } else { 5000 });
        let win = initial_window(*b"nenakey!");
        for b in available() {
            for dir in [Dir::Scramble, Dir::Descramble] {
                let (want, _) = reference(dir, win, &data);
                for step in [1usize, 7, 31, 32, 33, 63, 64, 65, 100, 129] {
                    let mut st = State::new(kind(dir), &win);
                    let mut out = data.clone();
                    for (i, c) in out.chunks_mut(step).enumerate() {
                        if i % 5 == 0 {
                            b.run_in_place(dir, &mut st, &mut []);
                        }
                        b.run_in_place(dir, &mut st, c);
                    }
                    assert_eq!(out, want, "{} {dir:?} step {step}", b.name);
                }
            }
        }
    }
}
