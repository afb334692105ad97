//! The papers' straightforward implementation: for every byte, XOR all 64 window bytes,
//! then shift the window by one and append the plaintext byte.

use crate::window::{Dir, WINDOW};

/// The window, oldest byte first.
#[derive(Clone)]
pub(crate) struct State {
    win: [u8; WINDOW],
}

impl State {
    pub(crate) fn new(win: [u8; WINDOW]) -> Self {
        State { win }
    }

    /// Transform one byte and advance the window.
    #[inline]
    fn step(&mut self, dir: Dir, byte: u8) -> u8 {
        let x = self.win.iter().fold(0u8, |acc, &w| acc ^ w);
        let out = byte ^ x;
        let plain = match dir {
            Dir::Scramble => byte,
            Dir::Descramble => out,
        };
        self.win.copy_within(1.., 0);
        self.win[WINDOW - 1] = plain;
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
