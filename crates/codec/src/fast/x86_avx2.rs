//! AVX2 kernels, one 32-byte vector per step; the same algebra as the AVX-512 kernels
//! (sliding 65-byte XOR by doubling to scramble, the stride-65 prefix recurrence to
//! descramble). A delay by `d < 16` bytes across the vector boundary is a lane permute and a
//! `palignr`; by 16 bytes the permute alone; by 32 the previous vector itself.
//! A partial last vector goes through a zero-padded stack buffer. The state (see the parent
//! module) is read and written as three 32-byte vectors at bytes 32..128.

use super::state::{Backend, State};
use std::arch::x86_64::*;
use std::ptr;

pub(super) static BACKEND: Backend = Backend {
    name: "avx2",
    scramble: scramble_entry,
    descramble: descramble_entry,
};

/// The stream of (prev, cur) delayed by `16 - R` bytes, for `0 < 16 - R < 16`.
macro_rules! delay {
    ($prev:expr, $cur:expr, $r:literal) => {{
        let cur = $cur;
        let mid = _mm256_permute2x128_si256::<0x21>($prev, cur); // prev.hi : cur.lo
        _mm256_alignr_epi8::<$r>(cur, mid)
    }};
}

/// Delay by 16 bytes.
macro_rules! delay16 {
    ($prev:expr, $cur:expr) => {
        _mm256_permute2x128_si256::<0x21>($prev, $cur)
    };
}

#[inline(always)]
unsafe fn ld(p: *const u8) -> __m256i {
    _mm256_loadu_si256(p as *const __m256i)
}

#[inline(always)]
unsafe fn st_(p: *mut u8, v: __m256i) {
    _mm256_storeu_si256(p as *mut __m256i, v)
}

/// After a partial vector of `r` bytes: `st.b[32..128]` = the last 96 bytes of
/// `h2 ++ h1 ++ h0 ++ tail[..r]`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn shifted_state(
    st: &mut State,
    h2: __m256i,
    h1: __m256i,
    h0: __m256i,
    tail: __m256i,
    r: usize,
) {
    let mut all = [0u8; 128];
    st_(all.as_mut_ptr(), h2);
    st_(all.as_mut_ptr().add(32), h1);
    st_(all.as_mut_ptr().add(64), h0);
    st_(all.as_mut_ptr().add(96), tail);
    st.b[32..].copy_from_slice(&all[r..r + 96]);
}

/// # Safety
/// See [`super::Kernel`]; the CPU must have AVX2 (checked by `available`).
unsafe fn scramble_entry(st: &mut State, src: *const u8, dst: *mut u8, len: usize) {
    scramble(st, src, dst, len)
}

/// # Safety
/// As [`scramble_entry`].
unsafe fn descramble_entry(st: &mut State, src: *const u8, dst: *mut u8, len: usize) {
    descramble(st, src, dst, len)
}

// The last step!() updates state nobody reads afterwards.
#[allow(unused_assignments)]
#[target_feature(enable = "avx2")]
unsafe fn scramble(st: &mut State, src: *const u8, dst: *mut u8, len: usize) {
    if len == 0 {
        return;
    }
    let z = _mm256_setzero_si256();
    let (mut xpp, mut xp, mut y2p, mut y4p, mut y8p, mut y16p, mut y32p) = (z, z, z, z, z, z, z);
    macro_rules! step {
        ($x:expr) => {{
            let x = $x;
            let y2 = _mm256_xor_si256(x, delay!(xp, x, 15));
            let y4 = _mm256_xor_si256(y2, delay!(y2p, y2, 14));
            let y8 = _mm256_xor_si256(y4, delay!(y4p, y4, 12));
            let y16 = _mm256_xor_si256(y8, delay!(y8p, y8, 8));
            let y32 = _mm256_xor_si256(y16, delay16!(y16p, y16));
            // y32 ^ y32[-32] covers 64 bytes, x[-64] (= xpp) is the 65th.
            let out = _mm256_xor_si256(_mm256_xor_si256(y32, y32p), xpp);
            xpp = xp;
            xp = x;
            y2p = y2;
            y4p = y4;
            y8p = y8;
            y16p = y16;
            y32p = y32;
            out
        }};
    }
    // From a stream of zero bytes, feed the window: the levels are then those after it.
    let h2 = ld(st.b.as_ptr().add(32));
    let _ = step!(ld(st.b.as_ptr().add(64)));
    let _ = step!(ld(st.b.as_ptr().add(96)));
    let (mut h2, mut h1) = (h2, xpp);
    let full = len / 32;
    for n in 0..full {
        // SAFETY: n < len / 32: the 32 bytes at 32n are inside both buffers; read first.
        let out = step!(ld(src.add(32 * n)));
        st_(dst.add(32 * n), out);
        h2 = h1;
        h1 = xpp;
    }
    let r = len % 32;
    if r == 0 {
        st_(st.b.as_mut_ptr().add(32), h2);
        st_(st.b.as_mut_ptr().add(64), xpp);
        st_(st.b.as_mut_ptr().add(96), xp);
        return;
    }
    let off = 32 * full;
    let mut tail = [0u8; 32];
    // SAFETY: off + r == len.
    ptr::copy_nonoverlapping(src.add(off), tail.as_mut_ptr(), r);
    let t = ld(tail.as_ptr());
    let (a, b, c) = (h2, xpp, xp);
    let mut out = [0u8; 32];
    st_(out.as_mut_ptr(), step!(t));
    ptr::copy_nonoverlapping(out.as_ptr(), dst.add(off), r);
    shifted_state(st, a, b, c, t, r);
}

#[allow(unused_assignments)]
#[target_feature(enable = "avx2")]
unsafe fn descramble(st: &mut State, src: *const u8, dst: *mut u8, len: usize) {
    if len == 0 {
        return;
    }
    // Q at positions -96..-1 (only -65..-1 matter).
    let (mut q3, mut q2, mut q1) = (
        ld(st.b.as_ptr().add(32)),
        ld(st.b.as_ptr().add(64)),
        ld(st.b.as_ptr().add(96)),
    );
    macro_rules! step {
        ($c:expr) => {{
            // Q[-65]: block n-2 delayed by one byte, first byte from block n-3.
            let q = _mm256_xor_si256($c, delay!(q3, q2, 15));
            let b = _mm256_xor_si256(q, delay!(q1, q, 15));
            q3 = q2;
            q2 = q1;
            q1 = q;
            b
        }};
    }
    let full = len / 32;
    for n in 0..full {
        // SAFETY: as in `scramble`.
        let b = step!(ld(src.add(32 * n)));
        st_(dst.add(32 * n), b);
    }
    let r = len % 32;
    if r == 0 {
        st_(st.b.as_mut_ptr().add(32), q3);
        st_(st.b.as_mut_ptr().add(64), q2);
        st_(st.b.as_mut_ptr().add(96), q1);
        return;
    }
    let off = 32 * full;
    let mut tail = [0u8; 32];
    // SAFETY: off + r == len.
    ptr::copy_nonoverlapping(src.add(off), tail.as_mut_ptr(), r);
    let (a, b, c) = (q3, q2, q1);
    let mut plain = [0u8; 32];
    st_(plain.as_mut_ptr(), step!(ld(tail.as_ptr())));
    ptr::copy_nonoverlapping(plain.as_ptr(), dst.add(off), r);
    shifted_state(st, a, b, c, q1, r);
}
