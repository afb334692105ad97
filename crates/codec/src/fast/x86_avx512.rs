//! AVX-512 kernels (F, BW, VBMI and GFNI), one 64-byte vector per step.
//!
//! Scrambling. Output byte `p = 8q + t` (qword `q`, byte `t`) is the XOR of the 65 bytes
//! `p-64..=p`: bytes `t..8` of qword `q-8`, qwords `q-7..q-1` whole, bytes `0..=t` of qword
//! `q`. Per vector:
//! - `gf2p8affineqb` with the data as the bit matrix transposes each qword (`T`); a second
//!   one with constant rows then XORs any chosen subset of the qword's bytes into each
//!   byte: here `SE`, the bytes after `t`;
//! - `SI = SE ^ x` (bytes `t..8`); qword `q-8` is the same lane of the previous vector, and
//!   byte 0 of `SI` is the qword's total;
//! - one `vpermb` (plus a blend with the previous vector's) gathers the totals of qwords
//!   `q-7..=q` into qword `q`, and two more affine ops XOR them: `U`;
//! - `out = SE ^ U ^ SI_prev` (one ternary-logic op).
//!
//! That is 4 affine ops (port 0), one `vpermb` (port 5) and 3 logic ops per 64 bytes, no
//! loop-carried chain. (`vpermt2b`, the obvious tool for byte shifts across vectors, costs
//! two cycles on port 5 here.)
//!
//! Descrambling. With `Q` the prefix XOR, `Q = C ^ Q[-65]` and `b = Q ^ Q[-1]`, and
//! `Q[-65]` of vector `n+1` equals `Q[-1]` of vector `n`: `D_n = Q_n delayed by one byte`
//! serves both. `D_n` is `R_n = rotate(Q_n)` (one `vpermb`) with byte 0 taken from
//! `R_{n-1}`; then `Q_{n+1} = C_{n+1} ^ D_n` and `b_n = Q_n ^ D_n = Q_n ^ Q_{n+1} ^ C_{n+1}`.
//! The loop-carried chain is one `vpermb` and one ternary-logic op per vector.
//!
//! Long inputs (at least [`TWO_STEP_MIN`] bytes) take two steps of the recurrence at once:
//! `Q_n = C_n ^ C[-65] ^ Q[-130]`, where `C[-65]` is one unaligned load from the input and
//! `Q[-130]` comes from `Q_{n-2}` and `Q_{n-3}` (a `vpermb` by two bytes and a blend folded into
//! ternary logic), so the chain spans two vectors: 5 ops and ~2.5 cycles per 64 bytes instead
//! of a 4-cycle chain, 17% less time for 12.8 kB (`--example timing`: 190 against 229 ns).
//! Short inputs keep the one-step form: the unaligned load straddles two 64-byte stores, and
//! when those were just made (a message scrambled and descrambled in place, as the benchmark
//! does) it waits for them to retire; on a 1280-byte round trip that cost 52 against 49 ns.
//!
//! A partial last vector uses masked loads and stores, which never touch the bytes outside
//! the mask.

use super::state::{Backend, State};
use std::arch::x86_64::*;

pub(super) static BACKEND: Backend = Backend {
    name: "avx512vbmi-gfni",
    scramble: scramble_entry,
    descramble: descramble_entry,
};

/// Index vectors `idx(k)[t] = (t + k) mod 128`. `idx(127)` with `vpermb` (which uses the
/// low 6 bits) rotates a vector by one byte: `out[t] = in[t-1]`, `out[0] = in[63]`;
/// `idx(0)` is the identity.
const fn idx(k: usize) -> [u8; 64] {
    let mut a = [0u8; 64];
    let mut t = 0;
    while t < 64 {
        a[t] = ((t + k) % 128) as u8;
        t += 1;
    }
    a
}
static ROT1: [u8; 64] = idx(127);
/// `idx(126)` rotates by two bytes: `out[t] = in[t-2]`, `out[0..2] = in[62..64]`.
static ROT2: [u8; 64] = idx(126);
static IOTA: [u8; 64] = idx(0);

/// `vpermb` index gathering qword totals (byte 0 of each qword of `si`): byte `j` of qword
/// `q` takes qword `(q + j + 1) mod 8`, which is global qword `q - 7 + j` of the current
/// vector when `q - 7 + j >= 0`, else of the previous one.
static GATHER: [u8; 64] = {
    let mut a = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        a[i] = (8 * ((i / 8 + i % 8 + 1) % 8)) as u8;
        i += 1;
    }
    a
};
/// Byte mask of the `GATHER` entries that come from the current vector (`q + j >= 7`).
const FROM_CURRENT: u64 = {
    let mut m = 0u64;
    let mut i = 0;
    while i < 64 {
        if i / 8 + i % 8 >= 7 {
            m |= 1 << i;
        }
        i += 1;
    }
    m
};

// Affine constants, one row byte per position `t` (the same for every qword); a row selects
// source byte `u` of the qword through its bit `7 - u` (see the `T` transposition).
/// Transpose: byte `t` of `T` gathers bit `7 - t` of every source byte.
const TRANSPOSE: i64 = 0x0102_0408_1020_4080;
/// Suffix, exclusive: row `t` selects bytes `u > t`, i.e. bits `0..7-t`: `(1 << (7 - t)) - 1`.
const SUFFIX_EXCL: i64 = 0x0001_0307_0F1F_3F7F;
/// All 8 bytes: the qword's total in every byte.
const TOTAL: i64 = -1;

#[inline(always)]
unsafe fn ld(p: *const u8) -> __m512i {
    _mm512_loadu_si512(p as *const _)
}

#[inline(always)]
unsafe fn st_(p: *mut u8, v: __m512i) {
    _mm512_storeu_si512(p as *mut _, v)
}

#[inline(always)]
fn zero() -> __m512i {
    // SAFETY: no memory access; AVX-512 F is a precondition of every caller.
    unsafe { _mm512_setzero_si512() }
}

/// Mask of the first `r` bytes, `0 < r < 64`.
#[inline(always)]
fn mask(r: usize) -> __mmask64 {
    (1u64 << r) - 1
}

/// The last 64 bytes of `prev` followed by the first `r` bytes of `cur` (`0 < r < 64`).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
unsafe fn shift_in(prev: __m512i, cur: __m512i, r: usize) -> __m512i {
    let idx = _mm512_add_epi8(ld(IOTA.as_ptr()), _mm512_set1_epi8(r as i8));
    _mm512_permutex2var_epi8(prev, idx, cur)
}

/// # Safety
/// See [`super::Kernel`]; the CPU must have AVX-512 F, BW, VBMI and GFNI (checked by
/// `available`).
unsafe fn scramble_entry(st: &mut State, src: *const u8, dst: *mut u8, len: usize) {
    scramble(st, src, dst, len)
}

/// Inputs from this length on are descrambled two steps at a time (see the module docs).
const TWO_STEP_MIN: usize = 4096;

/// # Safety
/// As [`scramble_entry`].
unsafe fn descramble_entry(st: &mut State, src: *const u8, dst: *mut u8, len: usize) {
    if len >= TWO_STEP_MIN {
        descramble_two_step(st, src, dst, len)
    } else {
        descramble(st, src, dst, len)
    }
}

// The last step!() updates state nobody reads afterwards.
#[allow(unused_assignments)]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,gfni")]
unsafe fn scramble(st: &mut State, src: *const u8, dst: *mut u8, len: usize) {
    if len == 0 {
        return;
    }
    let transpose = _mm512_set1_epi64(TRANSPOSE);
    let suffix_excl = _mm512_set1_epi64(SUFFIX_EXCL);
    let total = _mm512_set1_epi64(TOTAL);
    let gather = ld(GATHER.as_ptr());
    let zero = _mm512_setzero_si512();
    // Previous vector's values; from a stream of zero bytes, feeding the window through one
    // step gives exactly the values after the window.
    let (mut xp, mut sip, mut ap) = (zero, zero, zero);
    macro_rules! step {
        ($x:expr) => {{
            let x = $x;
            let t = _mm512_gf2p8affine_epi64_epi8::<0>(transpose, x);
            let se = _mm512_gf2p8affine_epi64_epi8::<0>(suffix_excl, t);
            // Byte 0 of each qword of `si` is the qword's total.
            let si = _mm512_xor_si512(se, x);
            // Qword q of `g`: the totals of qwords q-7..=q (older ones from the previous
            // vector), then their XOR in every byte.
            let a = _mm512_permutexvar_epi8(gather, si);
            let g = _mm512_mask_blend_epi8(FROM_CURRENT, ap, a);
            let tg = _mm512_gf2p8affine_epi64_epi8::<0>(transpose, g);
            let u = _mm512_gf2p8affine_epi64_epi8::<0>(total, tg);
            let out = _mm512_ternarylogic_epi64::<0x96>(se, u, sip);
            xp = x;
            sip = si;
            ap = a;
            out
        }};
    }
    let _ = step!(ld(st.b.as_ptr().add(64)));
    let full = len / 64;
    for n in 0..full {
        // SAFETY: n < len / 64: the 64 bytes at 64n are inside both buffers; read first.
        let out = step!(ld(src.add(64 * n)));
        st_(dst.add(64 * n), out);
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
        shift_in(before, x, r)
    };
    st_(st.b.as_mut_ptr().add(64), w);
}

#[allow(unused_assignments)]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
unsafe fn descramble(st: &mut State, src: *const u8, dst: *mut u8, len: usize) {
    if len == 0 {
        return;
    }
    let rot1 = ld(ROT1.as_ptr());
    // Q at positions -128..-65 and -64..-1 (only -65..-1 matter).
    let mut qpp = ld(st.b.as_ptr());
    let mut qp = ld(st.b.as_ptr().add(64));
    // R = Q rotated by one byte: byte 0 of R_{n-1} is Q_{n-1}[63].
    let mut rpp = _mm512_permutexvar_epi8(rot1, qpp);
    let mut rp = _mm512_permutexvar_epi8(rot1, qp);
    // Byte 0 only. D_{n-1} = (R_{n-1} & !M) | (R_{n-2} & M).
    let m0 = _mm512_maskz_set1_epi8(1, -1);
    // Q_n = C_n ^ D_{n-1}.
    macro_rules! next_q {
        ($c:expr) => {{
            let a = _mm512_ternarylogic_epi64::<0x78>($c, rpp, m0); // c ^ (rpp & m0)
            _mm512_ternarylogic_epi64::<0xB4>(a, rp, m0) // a ^ (rp & !m0)
        }};
    }
    let full = len / 64;
    // Software-pipelined: b_{n-1} = Q_{n-1} ^ D_{n-1} = Q_{n-1} ^ Q_n ^ C_n is written once
    // C_n has been read.
    for n in 0..full {
        // SAFETY: n < len / 64: the 64 bytes at 64n are inside both buffers; block n is read
        // here and written in the next iteration (or after the loop), never read again.
        let c = ld(src.add(64 * n));
        let q = next_q!(c);
        if n > 0 {
            st_(
                dst.add(64 * (n - 1)),
                _mm512_ternarylogic_epi64::<0x96>(qp, q, c),
            );
        }
        qpp = qp;
        qp = q;
        rpp = rp;
        rp = _mm512_permutexvar_epi8(rot1, q);
    }
    let r = len % 64;
    if r == 0 {
        // SAFETY: full > 0 here (len > 0); the last block is inside `dst`.
        let d = _mm512_mask_blend_epi8(1, rp, rpp);
        st_(dst.add(64 * (full - 1)), _mm512_xor_si512(qp, d));
        st_(st.b.as_mut_ptr(), qpp);
        st_(st.b.as_mut_ptr().add(64), qp);
        return;
    }
    let off = 64 * full;
    let m = mask(r);
    // SAFETY: masked load/store touch only bytes off..off + r < len; the full block before
    // (if any) is inside `dst`.
    let c = _mm512_maskz_loadu_epi8(m, src.add(off) as *const i8);
    let q = next_q!(c);
    if full > 0 {
        st_(
            dst.add(64 * (full - 1)),
            _mm512_ternarylogic_epi64::<0x96>(qp, q, c),
        );
    }
    let d = _mm512_mask_blend_epi8(1, _mm512_permutexvar_epi8(rot1, q), rp);
    _mm512_mask_storeu_epi8(dst.add(off) as *mut i8, m, _mm512_xor_si512(q, d));
    st_(st.b.as_mut_ptr(), shift_in(qpp, qp, r));
    st_(st.b.as_mut_ptr().add(64), shift_in(qp, q, r));
}

#[allow(unused_assignments)]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
unsafe fn descramble_two_step(st: &mut State, src: *const u8, dst: *mut u8, len: usize) {
    if len == 0 {
        return;
    }
    let rot1 = ld(ROT1.as_ptr());
    let rot2 = ld(ROT2.as_ptr());
    // Bytes 0 and 1, as a vector (for ternary logic).
    let m2 = _mm512_maskz_set1_epi8(3, -1);
    // Q_{n-1}, Q_{n-2}, Q_{n-3} (before the call: positions -64..-1 and -128..-65).
    let mut q1 = ld(st.b.as_ptr().add(64));
    let mut q2 = ld(st.b.as_ptr());
    // rot2(Q_{n-1}), rot2(Q_{n-2}), rot2(Q_{n-3}): blocks from 2 on need the last two (block
    // 2 takes Q_0 and Q_{-1}, hence the start value of r1).
    let mut r1 = _mm512_permutexvar_epi8(rot2, q1);
    let mut r2 = zero();
    let mut r3 = zero();
    // S1(n): Q delayed by 65 bytes at block n = rot1(Q_{n-1}) with byte 0 from Q_{n-2}[63].
    macro_rules! s1 {
        ($qa:expr, $qb:expr) => {{
            let a = _mm512_permutexvar_epi8(rot1, $qa);
            let b = _mm512_permutexvar_epi8(rot1, $qb);
            _mm512_mask_blend_epi8(1, a, b)
        }};
    }
    let full = len / 64;
    // b_{n-2}, written once block n's loads are done (the unaligned load of block n reads
    // bytes of blocks n-2 and n-1 of `src`, which may be `dst`).
    let mut pending = zero();
    for n in 0..full {
        // SAFETY: n < len / 64: the 64 bytes at 64n are inside both buffers; for n >= 2 the
        // bytes 64n-65..64n-2 are too. Blocks n-2 and n-1 of `dst` are written only after
        // these loads (pending, below), so reading `src == dst` is fine.
        let c = ld(src.add(64 * n));
        let q = if n >= 2 {
            // Q_n = C_n ^ C delayed by 65 ^ Q delayed by 130 (from Q_{n-2}, Q_{n-3}); the
            // loop-carried chain spans two vectors.
            let cs = ld(src.add(64 * n - 65));
            let e = _mm512_ternarylogic_epi64::<0x78>(c, r3, m2); // c ^ (r3 & m2)
            let a = _mm512_xor_si512(e, cs);
            _mm512_ternarylogic_epi64::<0xB4>(a, r2, m2) // a ^ (r2 & !m2)
        } else {
            _mm512_xor_si512(c, s1!(q1, q2))
        };
        if n >= 2 {
            st_(dst.add(64 * (n - 2)), pending);
        }
        if n >= 1 {
            // b_{n-1} = Q_{n-1} ^ S1(n) = Q_{n-1} ^ Q_n ^ C_n
            pending = _mm512_ternarylogic_epi64::<0x96>(q1, q, c);
        }
        q2 = q1;
        q1 = q;
        r3 = r2;
        r2 = r1;
        r1 = _mm512_permutexvar_epi8(rot2, q);
    }
    let r = len % 64;
    if r == 0 {
        // SAFETY: full > 0 here (len > 0); blocks full-2 and full-1 are inside `dst`.
        if full >= 2 {
            st_(dst.add(64 * (full - 2)), pending);
        }
        st_(dst.add(64 * (full - 1)), _mm512_xor_si512(q1, s1!(q1, q2)));
        st_(st.b.as_mut_ptr(), q2);
        st_(st.b.as_mut_ptr().add(64), q1);
        return;
    }
    let off = 64 * full;
    let m = mask(r);
    // SAFETY: masked load/store touch only bytes off..off + r < len; the full blocks before
    // (if any) are inside `dst`.
    let c = _mm512_maskz_loadu_epi8(m, src.add(off) as *const i8);
    let q = _mm512_xor_si512(c, s1!(q1, q2));
    if full >= 2 {
        st_(dst.add(64 * (full - 2)), pending);
    }
    if full >= 1 {
        st_(
            dst.add(64 * (full - 1)),
            _mm512_ternarylogic_epi64::<0x96>(q1, q, c),
        );
    }
    _mm512_mask_storeu_epi8(dst.add(off) as *mut i8, m, _mm512_xor_si512(q, s1!(q, q1)));
    st_(st.b.as_mut_ptr(), shift_in(q2, q1, r));
    st_(st.b.as_mut_ptr().add(64), shift_in(q1, q, r));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fast::tests::bytes;

    /// The two-step descrambler equals the one-step one for every length (the backend
    /// only calls it from `TWO_STEP_MIN` bytes on), from random states, in place and out of
    /// place, with the state carried into a second call.
    #[test]
    fn two_step_equals_one_step() {
        if !(is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vbmi"))
        {
            nena_testkit::skip!("no AVX-512 F/BW/VBMI on this CPU");
        }
        for len in (0..400).chain([1280, 4095, 4096, 4097, 9000]) {
            let mut st0 = State { b: [0; 128] };
            st0.b.copy_from_slice(&bytes(len as u64 + 1, 128));
            let data = bytes(len as u64, len);
            let more = bytes(len as u64 + 7, 1 + len % 200);
            let (mut s1, mut s2) = (st0.clone(), st0.clone());
            let mut want = vec![0u8; len];
            let mut got = data.clone();
            // SAFETY: the CPU features were checked above; buffers are `len` bytes long.
            unsafe {
                descramble(&mut s1, data.as_ptr(), want.as_mut_ptr(), len);
                descramble_two_step(&mut s2, got.as_ptr(), got.as_mut_ptr(), len);
            }
            assert_eq!(got, want, "len {len}");
            assert_eq!(s1.b[63..], s2.b[63..], "state after len {len}");
            let (mut w2, mut g2) = (more.clone(), more.clone());
            // SAFETY: as above.
            unsafe {
                descramble(&mut s1, w2.as_ptr(), w2.as_mut_ptr(), w2.len());
                descramble_two_step(&mut s2, g2.as_ptr(), g2.as_mut_ptr(), g2.len());
            }
            assert_eq!(g2, w2, "second call after len {len}");
        }
    }
}
