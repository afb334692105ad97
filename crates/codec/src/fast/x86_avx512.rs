//! AVX-512 kernels (F + BW + VBMI), one 64-byte vector per step.
//!
//! Scrambling is a sliding XOR over 65 bytes, computed by doubling: `y2 = x ^ x[-1]`,
//! `y4 = y2 ^ y2[-2]`, ... `y32`, then `out = y32 ^ y32[-32] ^ x[-64]`, where `v[-d]` is the
//! stream of `v` delayed by `d` bytes: one `vpermt2b` (d = 1, 2, 4) or `valignq` (d = 8, 16,
//! 32) of the current and the previous vector. Each level only needs its own previous
//! vector, so consecutive vectors overlap in the pipeline.
//!
//! Descrambling uses the prefix XOR `Q`: `Q = C ^ Q[-65]` and `b = Q ^ Q[-1]`; `Q[-65]` of
//! the current vector is the previous vector delayed by one byte (with the last byte of the
//! one before), so each vector costs two `vpermt2b` and two XORs.
//!
//! A partial last vector uses masked loads and stores, which never touch the bytes outside
//! the mask.

use super::Backend;
use crate::WINDOW;
use std::arch::x86_64::*;

pub(super) static BACKEND: Backend = Backend {
    name: "avx512vbmi",
    scramble: scramble_entry,
    descramble: descramble_entry,
};

/// Index vectors for `_mm512_permutex2var_epi8(prev, idx, cur)` delaying the stream by `d`
/// bytes: `idx[t] = 64 + t - d` selects `cur[t - d]` for `t >= d`, else `prev[64 + t - d]`.
const fn delay_idx(d: usize) -> [u8; 64] {
    let mut a = [0u8; 64];
    let mut t = 0;
    while t < 64 {
        a[t] = (64 + t - d) as u8;
        t += 1;
    }
    a
}
static IDX1: [u8; 64] = delay_idx(1);
static IDX2: [u8; 64] = delay_idx(2);
static IDX4: [u8; 64] = delay_idx(4);
/// `idx[t] = t`, for building "last 64 bytes" windows after a partial vector.
static IOTA: [u8; 64] = delay_idx(64);

#[inline(always)]
unsafe fn ld(p: &[u8; 64]) -> __m512i {
    _mm512_loadu_si512(p.as_ptr() as *const _)
}

/// Delay by 8/16/32 bytes: `alignr` of (cur:prev) by whole qwords.
macro_rules! delay_q {
    ($prev:expr, $cur:expr, $qwords:literal) => {
        _mm512_alignr_epi64::<{ 8 - $qwords }>($cur, $prev)
    };
}

/// Mask of the first `r` bytes, `0 < r < 64`.
#[inline(always)]
fn mask(r: usize) -> __mmask64 {
    (1u64 << r) - 1
}

/// The window after a partial vector: the last 64 bytes of `prev` followed by the first `r`
/// bytes of `cur`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
unsafe fn shift_window(prev: __m512i, cur: __m512i, r: usize) -> __m512i {
    let idx = _mm512_add_epi8(ld(&IOTA), _mm512_set1_epi8(r as i8));
    _mm512_permutex2var_epi8(prev, idx, cur)
}

/// # Safety
/// See [`super::Kernel`]; the CPU must have AVX-512 F, BW and VBMI (checked by `available`).
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
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
unsafe fn scramble(win: &mut [u8; WINDOW], src: *const u8, dst: *mut u8, len: usize) {
    if len == 0 {
        return;
    }
    let i1 = ld(&IDX1);
    let i2 = ld(&IDX2);
    let i4 = ld(&IDX4);
    let zero = _mm512_setzero_si512();
    // Levels of the previous vector; starting from a stream of zero bytes and feeding the
    // window through gives exactly the levels after the window.
    let (mut xp, mut y2p, mut y4p, mut y8p, mut y16p, mut y32p) =
        (zero, zero, zero, zero, zero, zero);
    macro_rules! step {
        ($x:expr) => {{
            let x = $x;
            let y2 = _mm512_xor_si512(x, _mm512_permutex2var_epi8(xp, i1, x));
            let y4 = _mm512_xor_si512(y2, _mm512_permutex2var_epi8(y2p, i2, y2));
            let y8 = _mm512_xor_si512(y4, _mm512_permutex2var_epi8(y4p, i4, y4));
            let y16 = _mm512_xor_si512(y8, delay_q!(y8p, y8, 1));
            let y32 = _mm512_xor_si512(y16, delay_q!(y16p, y16, 2));
            // y32 ^ y32[-32] covers 64 bytes, x[-64] (= xp) is the 65th.
            let out = _mm512_ternarylogic_epi64::<0x96>(y32, delay_q!(y32p, y32, 4), xp);
            xp = x;
            y2p = y2;
            y4p = y4;
            y8p = y8;
            y16p = y16;
            y32p = y32;
            out
        }};
    }
    let _ = step!(ld(win));
    let full = len / 64;
    for n in 0..full {
        // SAFETY: n < len / 64: the 64 bytes at 64n are inside both buffers; read first.
        let x = _mm512_loadu_si512(src.add(64 * n) as *const _);
        let out = step!(x);
        _mm512_storeu_si512(dst.add(64 * n) as *mut _, out);
    }
    let r = len % 64;
    let w = if r == 0 {
        xp
    } else {
        let off = 64 * full;
        let m = mask(r);
        let before = xp;
        // SAFETY: masked load/store touch only bytes off..off + r < len (masked-out bytes are
        // neither read nor written, and do not fault).
        let x = _mm512_maskz_loadu_epi8(m, src.add(off) as *const i8);
        let out = step!(x);
        _mm512_mask_storeu_epi8(dst.add(off) as *mut i8, m, out);
        shift_window(before, x, r)
    };
    _mm512_storeu_si512(win.as_mut_ptr() as *mut _, w);
}

#[allow(unused_assignments)]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
unsafe fn descramble(win: &mut [u8; WINDOW], src: *const u8, dst: *mut u8, len: usize) {
    if len == 0 {
        return;
    }
    let i1 = ld(&IDX1);
    let i2 = ld(&IDX2);
    let i4 = ld(&IDX4);
    let zero = _mm512_setzero_si512();
    let w = ld(win);
    // Q over the window (in-vector prefix XOR), with Q = 0 before it.
    let mut q = w;
    q = _mm512_xor_si512(q, _mm512_permutex2var_epi8(zero, i1, q));
    q = _mm512_xor_si512(q, _mm512_permutex2var_epi8(zero, i2, q));
    q = _mm512_xor_si512(q, _mm512_permutex2var_epi8(zero, i4, q));
    q = _mm512_xor_si512(q, delay_q!(zero, q, 1));
    q = _mm512_xor_si512(q, delay_q!(zero, q, 2));
    q = _mm512_xor_si512(q, delay_q!(zero, q, 4));
    let (mut qpp, mut qp, mut bp) = (zero, q, w);
    macro_rules! step {
        ($c:expr) => {{
            // Q[-65] = the previous vector delayed by one byte, its first byte from the one
            // before.
            let q = _mm512_xor_si512($c, _mm512_permutex2var_epi8(qpp, i1, qp));
            let b = _mm512_xor_si512(q, _mm512_permutex2var_epi8(qp, i1, q));
            qpp = qp;
            qp = q;
            b
        }};
    }
    let full = len / 64;
    for n in 0..full {
        // SAFETY: as in `scramble`.
        let c = _mm512_loadu_si512(src.add(64 * n) as *const _);
        let b = step!(c);
        _mm512_storeu_si512(dst.add(64 * n) as *mut _, b);
        bp = b;
    }
    let r = len % 64;
    let w = if r == 0 {
        bp
    } else {
        let off = 64 * full;
        let m = mask(r);
        // SAFETY: as in `scramble`.
        let c = _mm512_maskz_loadu_epi8(m, src.add(off) as *const i8);
        let b = step!(c);
        _mm512_mask_storeu_epi8(dst.add(off) as *mut i8, m, b);
        shift_window(bp, b, r)
    };
    _mm512_storeu_si512(win.as_mut_ptr() as *mut _, w);
}
