//! The papers' own C code (Figure 14 of Kato et al., journal version, in c/figure14.c,
//! compiled by build.rs with gcc -O2) as an informative benchmark subject: the revised
//! algorithm as the authors wrote it, state reached through `tp->mpcb`, one byte per
//! iteration. Checked against nena-codec's revised implementation byte for byte.

use crate::kato::{reference_scramble, KEY_BYTES};
use crate::subject::Subject;
use anyhow::{anyhow, ensure, Result};
use nena_codec::{Descrambler, Impl, Scrambler};

/// The report name of this row.
pub const NAME: &str = "paper-revised-c";

#[repr(C)]
struct Conn {
    _private: [u8; 0],
}

extern "C" {
    fn nena_fig14_new(loc_key: *const u8, rem_key: *const u8) -> *mut Conn;
    fn nena_fig14_free(c: *mut Conn);
    fn nena_fig14_scramble(c: *mut Conn, data: *mut u8, len: usize);
    fn nena_fig14_descramble(c: *mut Conn, data: *mut u8, len: usize);
}

/// One connection of the C code: a send side (scramble) and a receive side (descramble)
/// with the same key, so that a message scrambled and descrambled comes back.
pub struct PaperC {
    conn: *mut Conn,
}

impl PaperC {
    pub fn new(key: [u8; 8]) -> Result<Self> {
        // SAFETY: both keys are 8 readable bytes; the C side copies them.
        let conn = unsafe { nena_fig14_new(key.as_ptr(), key.as_ptr()) };
        if conn.is_null() {
            return Err(anyhow!("{NAME}: out of memory"));
        }
        Ok(PaperC { conn })
    }

    /// Figure 14's scramble() on `data`, in place.
    pub fn scramble(&mut self, data: &mut [u8]) {
        // SAFETY: `conn` is a live connection owned by `self`; `data` is valid for
        // `data.len()` bytes and exclusively borrowed.
        unsafe { nena_fig14_scramble(self.conn, data.as_mut_ptr(), data.len()) }
    }

    /// The matching descramble(), in place.
    pub fn descramble(&mut self, data: &mut [u8]) {
        // SAFETY: as in `scramble`.
        unsafe { nena_fig14_descramble(self.conn, data.as_mut_ptr(), data.len()) }
    }
}

impl Drop for PaperC {
    fn drop(&mut self) {
        // SAFETY: allocated by nena_fig14_new, freed once.
        unsafe { nena_fig14_free(self.conn) }
    }
}

/// The benchmark subject.
pub struct PaperCSubject {
    c: PaperC,
}

impl PaperCSubject {
    pub fn new() -> Result<Self> {
        Ok(PaperCSubject {
            c: PaperC::new(KEY_BYTES)?,
        })
    }
}

impl Subject for PaperCSubject {
    fn name(&self) -> &str {
        NAME
    }

    fn round_trip(&mut self, data: &mut [u8]) -> Result<()> {
        self.c.scramble(data);
        self.c.descramble(data);
        Ok(())
    }

    fn verify(&mut self, len: usize) -> Result<()> {
        // Three consecutive messages through a fresh connection and through
        // nena-codec's revised implementation: the same scrambled bytes, the same
        // descrambled bytes, and the papers' definition.
        let mut c = PaperC::new(KEY_BYTES)?;
        let mut s = Scrambler::with_impl(KEY_BYTES, Impl::Revised);
        let mut d = Descrambler::with_impl(KEY_BYTES, Impl::Revised);
        let mut stream = Vec::new();
        let mut scrambled = Vec::new();
        for i in 1..=3u64 {
            let msg = crate::ciphers::test_bytes(i * 7919, len);
            let mut a = msg.clone();
            let mut b = msg.clone();
            c.scramble(&mut a);
            s.scramble_in_place(&mut b);
            ensure!(
                a == b,
                "{NAME}: scrambled bytes differ from nena-codec's kato-revised"
            );
            ensure!(
                a != msg || len == 0,
                "{NAME}: scrambling left the message unchanged"
            );
            let mut back = a.clone();
            c.descramble(&mut back);
            d.descramble_in_place(&mut b);
            ensure!(
                back == b && back == msg,
                "{NAME}: descrambling does not give back the message"
            );
            stream.extend_from_slice(&msg);
            scrambled.extend_from_slice(&a);
        }
        ensure!(
            scrambled == reference_scramble(KEY_BYTES, &stream),
            "{NAME}: scrambled bytes differ from the papers' definition"
        );
        // The benchmark's own connection: a round trip restores the message.
        let msg = crate::ciphers::test_bytes(11, len);
        let mut buf = msg.clone();
        self.round_trip(&mut buf)?;
        ensure!(
            buf == msg,
            "{NAME}: round trip does not give back the message"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_code_matches_revised_and_definition() {
        let mut s = PaperCSubject::new().unwrap();
        for len in [0, 1, 63, 64, 65, 1280] {
            s.verify(len).unwrap_or_else(|e| panic!("{e:#}"));
        }
    }

    #[test]
    fn first_bytes_by_hand() {
        // Window = 56 zeros + key: the first output byte is the byte XOR the key bytes.
        let mut c = PaperC::new([1, 2, 4, 8, 16, 32, 64, 128]).unwrap();
        let mut d = [0x0f, 0x00];
        c.scramble(&mut d);
        assert_eq!(d, [0xf0, 0xff ^ 0x0f]);
    }
}
