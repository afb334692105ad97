//! The papers' revised implementation (Figure 14 of the journal version): the window is a
//! ring buffer with the index of its newest byte, and `xor` (the papers' `sXor`/`rXor`) is
//! the XOR of all window bytes, updated with the byte that leaves and the byte that enters.

use crate::window::{Dir, WINDOW};

#[derive(Clone)]
pub(crate) struct State {
    /// Ring buffer of the window (`sScrBuf`).
    buf: [u8; WINDOW],
    /// Position of the newest byte (`sIndex`); the oldest is at `idx + 1` (mod 64).
    idx: usize,
    /// XOR of all 64 window bytes (`sXor`).
    xor: u8,
}

impl State {
    /// `scramble_init()`: the window in order (oldest first), newest byte at index 63.
    pub(crate) fn new(win: [u8; WINDOW]) -> Self {
        let xor = win.iter().fold(0u8, |a, &b| a ^ b);
        State {
            buf: win,
            idx: WINDOW - 1,
            xor,
        }
    }

    /// One iteration of Figure 14's loop.
    #[inline]
    fn step(&mut self, dir: Dir, byte: u8) -> u8 {
        let out = byte ^ self.xor;
        let plain = match dir {
            Dir::Scramble => byte,
            Dir::Descramble => out,
        };
        self.idx = (self.idx + 1) % WINDOW;
        self.xor ^= self.buf[self.idx] ^ plain;
        self.buf[self.idx] = plain;
        out
    }

    pub(crate) fn run(&mut self, dir: Dir, input: impl Iterator<Item = u8>, output: &mut [u8]) {
        for (o, b) in output.iter_mut().zip(input) {
            *o = self.step(dir, b);
        }
    }

    pub(crate) fn run_in_place(&mut self, dir: Dir, buf: &mut [u8]) {
        for b in buf.iter_mut() {
            *b = self.step(dir, *b);
        }
    }
}
