//! AVX2 kernels, one 32-byte vector per step; the same algebra as the AVX-512 kernels
//! (sliding 65-byte XOR by doubling to scramble, the stride-65 prefix recurrence to
//! descramble). A delay by `d < 16` bytes across the vector boundary is a lane permute and a
//! `palignr`; by 16 bytes the permute alone; by 32 the previous vector itself.
//! A partial last vector goes through a zero-padded stack buffer.

use super::Backend;
use crate::WINDOW;
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
unsafe fn st(p: *mut u8, v: __m256i) {
    _mm256_storeu_si256(p as *mut __m256i, v)
}

/// The new window after a partial vector of `r` bytes: last 64 bytes of h1 ++ h0 ++ tail[..r].
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn shifted_window(
    win: &mut [u8; WINDOW],
    h1: __m256i,
    h0: __m256i,
    tail: &[u8; 32],
    r: usize,
) {
    let mut all = [0u8; 96];
    st(all.as_mut_ptr(), h1);
    st(all.as_mut_ptr().add(32), h0);
    all[64..].copy_from_slice(tail);
    win.copy_from_slice(&all[r..r + WINDOW]);
}

/// # Safety
/// See [`super::Kernel`]; the CPU must have AVX2 (checked by `available`).
unsafe fn scramble_entry(win: &mut [u8; WINDOW], src: *const u8, dst: *mut u8, len: usize) {
    scramble(win, src, dst, len)
}

/// # Safety
/// As [`scramble_entry`].
unsafe fn descramble_entry(win: &mut [u8; WINDOW], src: *const u8, dst: *mut u8, len: usize) {
    descramble(win, src, dst, len)
}

// The last step!() updates state nobody reads afterwards.
#[allow(unused_assignments)]
#[target_feature(enable = "avx2")]
unsafe fn scramble(win: &mut [u8; WINDOW], src: *const u8, dst: *mut u8, len: usize) {
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
    let _ = step!(ld(win.as_ptr()));
    let _ = step!(ld(win.as_ptr().add(32)));
    let full = len / 32;
    for n in 0..full {
        // SAFETY: n < len / 32: the 32 bytes at 32n are inside both buffers; read first.
        let out = step!(ld(src.add(32 * n)));
        st(dst.add(32 * n), out);
    }
    let r = len % 32;
    if r == 0 {
        st(win.as_mut_ptr(), xpp);
        st(win.as_mut_ptr().add(32), xp);
        return;
    }
    let off = 32 * full;
    let mut tail = [0u8; 32];
    // SAFETY: off + r == len.
    ptr::copy_nonoverlapping(src.add(off), tail.as_mut_ptr(), r);
    let (h1, h0) = (xpp, xp);
    let mut out = [0u8; 32];
    st(out.as_mut_ptr(), step!(ld(tail.as_ptr())));
    ptr::copy_nonoverlapping(out.as_ptr(), dst.add(off), r);
    shifted_window(win, h1, h0, &tail, r);
}

/// Inclusive prefix XOR within a vector.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn prefix(v: __m256i) -> __m256i {
    let z = _mm256_setzero_si256();
    let mut q = v;
    q = _mm256_xor_si256(q, delay!(z, q, 15));
    q = _mm256_xor_si256(q, delay!(z, q, 14));
    q = _mm256_xor_si256(q, delay!(z, q, 12));
    q = _mm256_xor_si256(q, delay!(z, q, 8));
    _mm256_xor_si256(q, delay16!(z, q))
}

#[allow(unused_assignments)]
#[target_feature(enable = "avx2")]
unsafe fn descramble(win: &mut [u8; WINDOW], src: *const u8, dst: *mut u8, len: usize) {
    if len == 0 {
        return;
    }
    let w0 = ld(win.as_ptr());
    let w1 = ld(win.as_ptr().add(32));
    // Q over the window, Q = 0 before it: the high half continues from the last byte of the
    // low half (broadcast byte 31: byte 15 within each lane, then the high lane).
    let q_lo = prefix(w0);
    let last = _mm256_shuffle_epi8(q_lo, _mm256_set1_epi8(15));
    let q_hi = _mm256_xor_si256(prefix(w1), _mm256_permute2x128_si256::<0x11>(last, last));
    let (mut q3, mut q2, mut q1) = (_mm256_setzero_si256(), q_lo, q_hi);
    let (mut bpp, mut bp) = (w0, w1);
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
        st(dst.add(32 * n), b);
        bpp = bp;
        bp = b;
    }
    let r = len % 32;
    if r == 0 {
        st(win.as_mut_ptr(), bpp);
        st(win.as_mut_ptr().add(32), bp);
        return;
    }
    let off = 32 * full;
    let mut tail = [0u8; 32];
    // SAFETY: off + r == len.
    ptr::copy_nonoverlapping(src.add(off), tail.as_mut_ptr(), r);
    let mut plain = [0u8; 32];
    st(plain.as_mut_ptr(), step!(ld(tail.as_ptr())));
    ptr::copy_nonoverlapping(plain.as_ptr(), dst.add(off), r);
    shifted_window(win, bpp, bp, &plain, r);
}
