//! The scrambling subjects: the three implementations of nena-codec (straightforward,
//! revised, fast), each as a streaming scrambler and its matching descrambler whose
//! states persist across messages, as in a connection.

use crate::subject::Subject;
use anyhow::{ensure, Result};
use nena_codec::{Descrambler, Impl, Key, Scrambler};

/// Report names and implementations, in report order.
pub const KATO: &[(&str, Impl)] = &[
    ("kato-straight", Impl::Straight),
    ("kato-revised", Impl::Revised),
    ("kato-fast", Impl::Fast),
];

/// The key used by the benchmark (any 8 bytes do).
pub const KEY_BYTES: [u8; 8] = [0x4e, 0x45, 0x4e, 0x41, 0x13, 0x37, 0xc0, 0xde];

fn key() -> Key {
    KEY_BYTES
}

/// The scrambling exactly as the papers define it, one byte at a time (an oracle for
/// `verify`, independent of nena-codec): the window starts as 56 zero bytes and the
/// key; output = byte XOR all 64 window bytes; the plaintext byte is appended.
pub fn reference_scramble(key: [u8; 8], data: &[u8]) -> Vec<u8> {
    let mut w = [0u8; 64];
    w[56..].copy_from_slice(&key);
    data.iter()
        .map(|&b| {
            let x = w.iter().fold(b, |acc, &v| acc ^ v);
            w.copy_within(1.., 0);
            w[63] = b;
            x
        })
        .collect()
}

/// One implementation as a benchmark subject.
pub struct KatoSubject {
    name: &'static str,
    imp: Impl,
    scrambler: Scrambler,
    descrambler: Descrambler,
}

impl KatoSubject {
    pub fn new(name: &'static str, imp: Impl) -> Self {
        KatoSubject {
            name,
            imp,
            scrambler: Scrambler::with_impl(key(), imp),
            descrambler: Descrambler::with_impl(key(), imp),
        }
    }
}

impl Subject for KatoSubject {
    fn name(&self) -> &str {
        self.name
    }

    fn round_trip(&mut self, data: &mut [u8]) -> Result<()> {
        self.scrambler.scramble_in_place(data);
        self.descrambler.descramble_in_place(data);
        Ok(())
    }

    fn verify(&mut self, len: usize) -> Result<()> {
        let name = self.name;
        // Fresh streams of this implementation against the papers' definition, over
        // three consecutive messages (state carried across), one of them split unevenly.
        let mut s = Scrambler::with_impl(key(), self.imp);
        let mut d = Descrambler::with_impl(key(), self.imp);
        let msgs: Vec<Vec<u8>> = (1..=3u64)
            .map(|i| crate::ciphers::test_bytes(i * 104_729, len))
            .collect();
        let stream: Vec<u8> = msgs.concat();
        let expect = reference_scramble(KEY_BYTES, &stream);
        let mut got = Vec::with_capacity(stream.len());
        for (i, m) in msgs.iter().enumerate() {
            let mut buf = m.clone();
            if i == 1 && len > 3 {
                let (a, b) = buf.split_at_mut(len / 3 + 1);
                s.scramble_in_place(a);
                s.scramble_in_place(b);
            } else {
                s.scramble_in_place(&mut buf);
            }
            ensure!(
                buf != *m || len == 0,
                "{name}: scrambling left the message unchanged"
            );
            got.extend_from_slice(&buf);
        }
        ensure!(
            got == expect,
            "{name}: scrambled bytes differ from the papers' definition"
        );
        d.descramble_in_place(&mut got);
        ensure!(
            got == stream,
            "{name}: descrambling does not give back the message"
        );
        // The benchmark's own streams: a round trip restores the message.
        let mut buf = msgs[0].clone();
        self.round_trip(&mut buf)?;
        ensure!(
            buf == msgs[0],
            "{name}: round trip does not give back the message"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_matches_hand_computation() {
        // First byte: window is 56 zeros + key, so out = b ^ xor(key).
        let k = [1, 2, 4, 8, 16, 32, 64, 128];
        let out = reference_scramble(k, &[0x00, 0x00]);
        assert_eq!(out[0], 0xff);
        // Second byte: w[0] (a zero) dropped, b0 = 0 appended: xor unchanged.
        assert_eq!(out[1], 0xff);
        let out = reference_scramble(k, &[0x0f, 0x00]);
        assert_eq!(out[0], 0xf0);
        assert_eq!(out[1], 0xff ^ 0x0f);
    }

    #[test]
    fn every_implementation_verifies() {
        for &(name, imp) in KATO {
            let mut s = KatoSubject::new(name, imp);
            s.verify(1280).unwrap_or_else(|e| panic!("{e:#}"));
            s.verify(7).unwrap_or_else(|e| panic!("{e:#}"));
        }
    }
}
