//! What every kernel shares: the streaming [`State`] (its layout in the module docs of
//! `fast`), the kernel contract ([`Kernel`]) and a [`Backend`], a name and its two kernels.
//! A leaf: the kernels and the backend choice (`fast/mod.rs`) use it.

use crate::window::{Dir, WINDOW};

/// The streaming state of one direction, see the module docs for its layout.
#[derive(Clone)]
#[repr(C, align(64))]
pub(crate) struct State {
    pub(crate) b: [u8; 2 * WINDOW],
}

/// What a [`State`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StateKind {
    /// The plaintext window (scrambling).
    Plain,
    /// The prefix XOR `Q` (descrambling).
    Prefix,
}

impl State {
    /// The state for a window (the last 64 plaintext bytes, oldest first).
    pub(crate) fn new(kind: StateKind, window: &[u8; WINDOW]) -> Self {
        let mut b = [0u8; 2 * WINDOW];
        match kind {
            StateKind::Plain => b[WINDOW..].copy_from_slice(window),
            StateKind::Prefix => {
                // Q over the window, with Q = 0 before it (positions -128..-65).
                let mut q = 0u8;
                for (d, &w) in b[WINDOW..].iter_mut().zip(window) {
                    q ^= w;
                    *d = q;
                }
            }
        }
        State { b }
    }

    /// The window (last 64 plaintext bytes) this state stands for.
    #[cfg(test)]
    pub(crate) fn window(&self, kind: StateKind) -> [u8; WINDOW] {
        let mut w = [0u8; WINDOW];
        match kind {
            StateKind::Plain => w.copy_from_slice(&self.b[WINDOW..]),
            StateKind::Prefix => {
                for (t, x) in w.iter_mut().enumerate() {
                    *x = self.b[WINDOW + t] ^ self.b[WINDOW + t - 1];
                }
            }
        }
        w
    }
}

/// A kernel.
///
/// # Safety
/// `src` must be valid for reading `len` bytes and `dst` for writing `len` bytes; either
/// `src == dst` (in place) or the two ranges do not overlap. The CPU must support the
/// features the kernel was compiled for (guaranteed for the kernels in [`super::available`]).
/// Kernels read each block of `src` before writing the same block of `dst` and never read
/// a block again after writing it, so `src == dst` is fine.
pub(crate) type Kernel = unsafe fn(st: &mut State, src: *const u8, dst: *mut u8, len: usize);

/// One backend: a name and its two kernels.
pub(crate) struct Backend {
    pub(crate) name: &'static str,
    pub(super) scramble: Kernel,
    pub(super) descramble: Kernel,
}

impl Backend {
    #[inline]
    fn kernel(&self, dir: Dir) -> Kernel {
        match dir {
            Dir::Scramble => self.scramble,
            Dir::Descramble => self.descramble,
        }
    }

    /// Transform `input` into `output` (same length, checked by the caller).
    #[inline]
    pub(crate) fn run(&self, dir: Dir, st: &mut State, input: &[u8], output: &mut [u8]) {
        assert_eq!(input.len(), output.len());
        // SAFETY: both slices are valid for `len` bytes and cannot overlap (one is borrowed
        // shared, the other exclusively); `self` comes from `available()`, so the CPU has
        // the kernel's features.
        unsafe { (self.kernel(dir))(st, input.as_ptr(), output.as_mut_ptr(), input.len()) }
    }

    /// Transform `buf` in place.
    #[inline]
    pub(crate) fn run_in_place(&self, dir: Dir, st: &mut State, buf: &mut [u8]) {
        let p = buf.as_mut_ptr();
        // SAFETY: `src == dst`, valid for `buf.len()` bytes (exclusively borrowed), which the
        // kernel contract allows; CPU features as in `run`.
        unsafe { (self.kernel(dir))(st, p, p, buf.len()) }
    }
}
