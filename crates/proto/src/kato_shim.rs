//! Temporary stand-in for `nena_codec`'s scrambler until that crate lands
//! (the papers' straightforward algorithm); removed once it does.
#![allow(dead_code)]

pub struct Scrambler {
    w: [u8; 64],
}
pub struct Descrambler {
    w: [u8; 64],
}

fn init(key: [u8; 8]) -> [u8; 64] {
    let mut w = [0u8; 64];
    w[56..].copy_from_slice(&key);
    w
}
fn step(w: &mut [u8; 64], plain: u8) {
    w.copy_within(1.., 0);
    w[63] = plain;
}
fn xor(w: &[u8; 64]) -> u8 {
    w.iter().fold(0, |a, b| a ^ b)
}

impl Scrambler {
    pub fn new(key: [u8; 8]) -> Self {
        Scrambler { w: init(key) }
    }
    pub fn scramble_in_place(&mut self, buf: &mut [u8]) {
        for b in buf {
            let p = *b;
            *b = p ^ xor(&self.w);
            step(&mut self.w, p);
        }
    }
}
impl Descrambler {
    pub fn new(key: [u8; 8]) -> Self {
        Descrambler { w: init(key) }
    }
    pub fn descramble_in_place(&mut self, buf: &mut [u8]) {
        for b in buf {
            let p = *b ^ xor(&self.w);
            *b = p;
            step(&mut self.w, p);
        }
    }
}
