//! Portable kernels, word at a time: a 64-byte block is eight little-endian `u64` words
//! (byte `t` of a word in bits `8t..8t+8`), so a shift left by 8 moves every byte one
//! position later in the stream. Works on any CPU (ARM included); the compiler may
//! vectorise it further.
//!
//! Both directions use `Q`, the prefix XOR of the stream (window then data), stored per word:
//! scrambling outputs `Q[k] ^ Q[k-65]`, descrambling inverts it as `Q[k] = C[k] ^ Q[k-65]`
//! and returns `Q[k] ^ Q[k-1]`. `Q[k-65]` for byte `t` of word `i` of a block is byte
//! `t-1` of word `i` of the previous block, so it is one shift and one OR away.
//! Scrambling rebuilds `Q` from the window in the state; descrambling keeps `Q` there.

use super::state::State;
use crate::window::WINDOW;
use std::ptr;

/// Broadcasts a byte value `v` (0..=255) to all 8 bytes of a word: `v * BCAST`.
const BCAST: u64 = 0x0101_0101_0101_0101;
type Block = [u64; 8];

#[inline(always)]
fn words(b: &[u8; WINDOW]) -> Block {
    let mut w = [0u64; 8];
    for (i, c) in b.chunks_exact(8).enumerate() {
        w[i] = u64::from_le_bytes(c.try_into().expect("8 bytes"));
    }
    w
}

#[inline(always)]
fn bytes_of(w: &Block) -> [u8; WINDOW] {
    let mut b = [0u8; WINDOW];
    for (i, c) in b.chunks_exact_mut(8).enumerate() {
        c.copy_from_slice(&w[i].to_le_bytes());
    }
    b
}

/// Inclusive prefix XOR of the bytes within one word.
#[inline(always)]
fn prefix_word(x: u64) -> u64 {
    let mut p = x ^ (x << 8);
    p ^= p << 16;
    p ^ (p << 32)
}

/// `Q[k-65]` for the bytes of word `i` of the current block, from the previous block `qp`
/// and the last word of the block before it.
#[inline(always)]
fn sh65(qp: &Block, qpp7: u64, i: usize) -> u64 {
    let before = if i == 0 { qpp7 } else { qp[i - 1] };
    (qp[i] << 8) | (before >> 56)
}

/// Scrambling state inside one call: `Q` of the previous block, the last word of the block
/// before, and the last byte of `Q` broadcast (the carry into the next block).
struct Scr {
    qp: Block,
    qpp7: u64,
    carry: u64,
}

impl Scr {
    /// The state of a stream that so far consisted of zero bytes (`Q` is all zero).
    fn zero() -> Self {
        Scr {
            qp: [0; 8],
            qpp7: 0,
            carry: 0,
        }
    }

    /// Scramble one block of plaintext words.
    #[inline(always)]
    fn block(&mut self, x: &Block) -> Block {
        let mut q = [0u64; 8];
        let mut out = [0u64; 8];
        for i in 0..8 {
            let p = prefix_word(x[i]);
            q[i] = p ^ self.carry;
            // The carry is a broadcast byte: XOR in this word's total, off the critical path.
            self.carry ^= (p >> 56) * BCAST;
            out[i] = q[i] ^ sh65(&self.qp, self.qpp7, i);
        }
        self.qpp7 = self.qp[7];
        self.qp = q;
        out
    }
}

/// Descrambling state inside one call: `Q` of the previous block, last word of the one before.
struct Des {
    qp: Block,
    qpp7: u64,
}

impl Des {
    /// Descramble one block of ciphertext words, returning the plaintext words.
    #[inline(always)]
    fn block(&mut self, c: &Block) -> Block {
        let mut q = [0u64; 8];
        let mut b = [0u64; 8];
        for i in 0..8 {
            q[i] = c[i] ^ sh65(&self.qp, self.qpp7, i);
            let before = if i == 0 { self.qp[7] } else { q[i - 1] };
            b[i] = q[i] ^ ((q[i] << 8) | (before >> 56));
        }
        self.qpp7 = self.qp[7];
        self.qp = q;
        b
    }
}

/// Read block `n` (64 bytes at offset `64n`).
///
/// # Safety
/// `src + 64n .. src + 64n + 64` readable.
#[inline(always)]
unsafe fn load(src: *const u8, n: usize) -> Block {
    words(&ptr::read_unaligned(src.add(64 * n) as *const [u8; WINDOW]))
}

/// # Safety
/// `dst + 64n .. dst + 64n + 64` writable.
#[inline(always)]
unsafe fn store(dst: *mut u8, n: usize, w: &Block) {
    ptr::write_unaligned(dst.add(64 * n) as *mut [u8; WINDOW], bytes_of(w));
}

/// Copy the last `r < 64` bytes (from `off`) into a zero-padded block.
///
/// # Safety
/// `src + off .. src + off + r` readable.
#[inline(always)]
unsafe fn load_tail(src: *const u8, off: usize, r: usize) -> [u8; WINDOW] {
    let mut buf = [0u8; WINDOW];
    ptr::copy_nonoverlapping(src.add(off), buf.as_mut_ptr(), r);
    buf
}

/// The last 128 bytes of `a ++ b ++ c[..r]` (the state after a partial block of `r` bytes).
#[inline(always)]
fn shifted_state(a: &Block, b: &Block, c: &Block, r: usize) -> [u8; 2 * WINDOW] {
    let mut all = [0u8; 3 * WINDOW];
    all[..WINDOW].copy_from_slice(&bytes_of(a));
    all[WINDOW..2 * WINDOW].copy_from_slice(&bytes_of(b));
    all[2 * WINDOW..].copy_from_slice(&bytes_of(c));
    let mut st = [0u8; 2 * WINDOW];
    st.copy_from_slice(&all[r..r + 2 * WINDOW]);
    st
}

fn half(st: &State, i: usize) -> Block {
    let mut b = [0u8; WINDOW];
    b.copy_from_slice(&st.b[i * WINDOW..(i + 1) * WINDOW]);
    words(&b)
}

fn set_half(st: &mut State, i: usize, w: &Block) {
    st.b[i * WINDOW..(i + 1) * WINDOW].copy_from_slice(&bytes_of(w));
}

/// Scramble kernel, see [`super::Kernel`] for the contract.
///
/// # Safety
/// As [`super::Kernel`].
pub(super) unsafe fn scramble(st: &mut State, src: *const u8, dst: *mut u8, len: usize) {
    if len == 0 {
        return;
    }
    let mut s = Scr::zero();
    let (mut older, mut prev) = (half(st, 0), half(st, 1));
    // Feed the window as if it followed zero bytes: that sets `Q` up to a constant.
    s.block(&prev);
    let full = len / WINDOW;
    for n in 0..full {
        // SAFETY: n < len / 64, so the block lies inside both buffers; it is read before it
        // is written.
        let x = load(src, n);
        let out = s.block(&x);
        store(dst, n, &out);
        older = prev;
        prev = x;
    }
    let r = len % WINDOW;
    if r == 0 {
        set_half(st, 0, &older);
        set_half(st, 1, &prev);
        return;
    }
    let off = full * WINDOW;
    // SAFETY: the tail lies inside both buffers (off + r == len).
    let tail = words(&load_tail(src, off, r));
    let out = bytes_of(&s.block(&tail));
    ptr::copy_nonoverlapping(out.as_ptr(), dst.add(off), r);
    st.b = shifted_state(&older, &prev, &tail, r);
}

/// Descramble kernel, see [`super::Kernel`] for the contract.
///
/// # Safety
/// As [`super::Kernel`].
pub(super) unsafe fn descramble(st: &mut State, src: *const u8, dst: *mut u8, len: usize) {
    if len == 0 {
        return;
    }
    let qpp = half(st, 0);
    let mut d = Des {
        qp: half(st, 1),
        qpp7: qpp[7],
    };
    let full = len / WINDOW;
    for n in 0..full {
        // SAFETY: as in `scramble`.
        let c = load(src, n);
        let b = d.block(&c);
        store(dst, n, &b);
    }
    let r = len % WINDOW;
    if r == 0 {
        let mut older = [0u64; 8];
        older[7] = d.qpp7;
        set_half(st, 0, &older);
        set_half(st, 1, &d.qp);
        return;
    }
    let off = full * WINDOW;
    // SAFETY: the tail lies inside both buffers (off + r == len).
    let tail = words(&load_tail(src, off, r));
    let mut older = [0u64; 8];
    older[7] = d.qpp7;
    let before = d.qp;
    let plain = bytes_of(&d.block(&tail));
    ptr::copy_nonoverlapping(plain.as_ptr(), dst.add(off), r);
    st.b = shifted_state(&older, &before, &d.qp, r);
}
