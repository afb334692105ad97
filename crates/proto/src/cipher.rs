//! The symmetric primitives of the cryptographic modes, from well-kept crates: the cipher
//! suites, which one this CPU prefers, the positioned keystream of `stream` mode
//! (AES-128-CTR from `aws-lc-rs` for runs of [`AWS_LC_CTR_FROM`] bytes or more and RustCrypto
//! `aes`+`ctr` below, ChaCha20 from RustCrypto `chacha20`) and the
//! record AEAD of `aead` mode (AES-128-GCM and ChaCha20-Poly1305 from `aws-lc-rs`, which
//! seals from one buffer into another). Why these crates: docs/BENCHMARKS.md, "Crypto
//! primitives".

use crate::keys::{TrafficSecret, IV_LEN};
use aws_lc_rs::aead;
use ctr::cipher::{KeyIvInit, StreamCipher};
use serde::Serialize;
use std::fmt;

/// A cipher suite of the cryptographic modes: which block or stream cipher runs under
/// `stream` (as a keystream) and `aead` (as an AEAD).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Suite {
    /// AES-128: CTR for `stream`, GCM for `aead`. Fast where the CPU has AES instructions.
    Aes128,
    /// ChaCha20: the bare stream cipher for `stream`, ChaCha20-Poly1305 for `aead`. Fast in
    /// software on any CPU.
    ChaCha20,
}

impl Suite {
    /// Wire id (docs/PROTOCOL.md).
    pub fn wire_id(self) -> u8 {
        match self {
            Suite::Aes128 => 0x01,
            Suite::ChaCha20 => 0x02,
        }
    }

    /// The suite with this wire id.
    pub fn from_wire_id(id: u8) -> Option<Suite> {
        match id {
            0x01 => Some(Suite::Aes128),
            0x02 => Some(Suite::ChaCha20),
            _ => None,
        }
    }

    /// Key length of the suite's cipher.
    pub fn key_len(self) -> usize {
        match self {
            Suite::Aes128 => 16,
            Suite::ChaCha20 => 32,
        }
    }

    /// AES-128 when this CPU has AES (and carry-less multiply) instructions, ChaCha20
    /// otherwise: decided at run time.
    pub fn preferred() -> Suite {
        if cpu_has_aes() {
            Suite::Aes128
        } else {
            Suite::ChaCha20
        }
    }

    /// The name of the cipher under `stream` mode.
    pub fn stream_name(self) -> &'static str {
        match self {
            Suite::Aes128 => "aes-128-ctr",
            Suite::ChaCha20 => "chacha20",
        }
    }

    /// The name of the AEAD under `aead` mode.
    pub fn aead_name(self) -> &'static str {
        match self {
            Suite::Aes128 => "aes-128-gcm",
            Suite::ChaCha20 => "chacha20-poly1305",
        }
    }
}

impl fmt::Display for Suite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Suite::Aes128 => "aes-128",
            Suite::ChaCha20 => "chacha20",
        })
    }
}

/// Whether the CPU has the instructions that make AES fast and constant-time.
pub fn cpu_has_aes() -> bool {
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    {
        std::arch::is_x86_feature_detected!("aes")
            && std::arch::is_x86_feature_detected!("pclmulqdq")
    }
    #[cfg(target_arch = "aarch64")]
    {
        std::arch::is_aarch64_feature_detected!("aes")
            && std::arch::is_aarch64_feature_detected!("pmull")
    }
    #[cfg(not(any(target_arch = "x86", target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}

/// AES-128 in counter mode over the 128-bit block `iv (12 bytes) || counter (4 bytes)`.
/// RustCrypto's 64-bit big-endian counter flavour over `iv[8..12] || 0u32` gives exactly
/// that block for the 2^32 block numbers of an epoch (no carry reaches the IV below 2^32),
/// and, unlike `Ctr32BE`, also produces the block numbered 0xffff_ffff: `Ctr32BE` counts
/// only 2^32 - 1 blocks before refusing, so a full 2^36-byte epoch ended in
/// `StreamCipherError` 16 bytes short of its end (the 64 GiB crash of issue 19).
type Aes128Ctr = ctr::Ctr64BE<aes::Aes128>;

/// From this many bytes in one call, AES-128-CTR runs through aws-lc-rs (AWS-LC's CTR: at
/// 16 KiB 6.2 GB/s against RustCrypto's 4.7 on the AMD host), below it through RustCrypto
/// (faster for short runs: aws-lc-rs has no in-place call that continues, so each call sets
/// up its counter block). docs/benchmarks-log.md, "Crypto primitives".
pub const AWS_LC_CTR_FROM: usize = 4096;

/// Which AES-128-CTR implementation a [`Keystream`] uses. The keystream is the same bytes
/// either way (tested): this only chooses the code, for `nena bench codec` to compare them
/// in one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AesCtrImpl {
    /// aws-lc-rs for runs of [`AWS_LC_CTR_FROM`] bytes or more, RustCrypto below.
    #[default]
    Fastest,
    /// RustCrypto `aes` + `ctr` for every run (nena before aws-lc-rs's CTR).
    RustCrypto,
}

enum KeystreamCipher {
    Aes {
        /// Positioned at the keystream's offset within the epoch at every call's end.
        rc: Box<Aes128Ctr>,
        /// The same key for long runs (none: [`AesCtrImpl::RustCrypto`]).
        lc: Option<Box<aws_lc_rs::cipher::EncryptingKey>>,
        iv: [u8; IV_LEN],
    },
    ChaCha(Box<chacha20::ChaCha20>),
}

/// XORs the keystream at byte `within` of the epoch into `buf`: RustCrypto's `rc` (there)
/// for a short run, else the part up to the next block boundary through `rc` and the rest
/// through aws-lc-rs's CTR from that block's counter, `rc` then moved past it.
fn aes_apply(
    rc: &mut Aes128Ctr,
    lc: Option<&aws_lc_rs::cipher::EncryptingKey>,
    iv: &[u8; IV_LEN],
    within: u64,
    buf: &mut [u8],
) {
    use aws_lc_rs::cipher::EncryptionContext;
    use ctr::cipher::StreamCipherSeek;
    let Some(lc) = lc.filter(|_| buf.len() >= AWS_LC_CTR_FROM) else {
        rc.apply_keystream(buf);
        return;
    };
    let head = ((16 - within % 16) % 16) as usize;
    let (first, rest) = buf.split_at_mut(head);
    rc.apply_keystream(first);
    // The block number of the rest's first byte: below 2^32 within an epoch (2^36 bytes at
    // most, and `rest` is not empty).
    let block = u32::try_from((within + head as u64) / 16).expect("a block of the epoch");
    let mut counter = [0u8; 16];
    counter[..IV_LEN].copy_from_slice(iv);
    counter[IV_LEN..].copy_from_slice(&block.to_be_bytes());
    lc.less_safe_encrypt(
        rest,
        EncryptionContext::Iv128(aws_lc_rs::iv::FixedLength::from(counter)),
    )
    .expect("AES-128-CTR of a key and counter block aws-lc-rs accepted");
    rc.seek(within + buf.len() as u64);
}

/// The keystream of one direction of `stream` mode, positioned by the byte offset in that
/// direction. The stream is cut into key epochs of `2^epoch_log2` bytes; epoch `n` uses the
/// key and IV of traffic secret `n` (each the key update of the one before). Within an
/// epoch, AES-128-CTR runs a 128-bit counter block `iv || u32 block number` (big-endian),
/// ChaCha20 (RFC 8439) the nonce `iv` and block counter from 0.
pub struct Keystream {
    suite: Suite,
    secret: TrafficSecret,
    epoch_log2: u8,
    aes: AesCtrImpl,
    /// Bytes processed so far in this direction.
    offset: u64,
    cipher: KeystreamCipher,
}

impl Keystream {
    /// Largest epoch: 2^36 bytes (2^32 AES blocks, numbered 0..=0xffff_ffff: the 32-bit
    /// block number of the counter block never wraps, and the CTR distinguishing advantage
    /// stays near 2^-64; ChaCha20's 32-bit block counter (RFC 8439) would allow 2^38 - 64
    /// bytes, and an epoch uses 2^30 of its blocks). Tested at its end:
    /// `limits_tests::keystream_across_each_epoch_end`.
    pub const MAX_EPOCH_LOG2: u8 = 36;
    /// Smallest epoch the cipher takes (for tests that force key updates).
    pub const MIN_EPOCH_LOG2: u8 = 8;
    /// Smallest epoch a server accepts in a hello, and a client offers: 64 KiB per key (a key
    /// update costs an HKDF expansion and a key schedule; at 256 bytes per key a client would
    /// make the server spend many times the CPU of the cipher itself).
    pub const MIN_OFFER_EPOCH_LOG2: u8 = 16;

    /// The keystream of a direction whose first traffic secret is `secret`.
    pub fn new(suite: Suite, secret: TrafficSecret, epoch_log2: u8) -> Keystream {
        Keystream::with_aes_ctr(suite, secret, epoch_log2, AesCtrImpl::Fastest)
    }

    /// [`Keystream::new`] with AES-128-CTR from `aes` (the same bytes; for benchmarks).
    pub fn with_aes_ctr(
        suite: Suite,
        secret: TrafficSecret,
        epoch_log2: u8,
        aes: AesCtrImpl,
    ) -> Keystream {
        assert!((Self::MIN_EPOCH_LOG2..=Self::MAX_EPOCH_LOG2).contains(&epoch_log2));
        let cipher = Self::epoch_cipher(suite, &secret, aes);
        Keystream {
            suite,
            secret,
            epoch_log2,
            aes,
            offset: 0,
            cipher,
        }
    }

    fn epoch_cipher(suite: Suite, secret: &TrafficSecret, aes: AesCtrImpl) -> KeystreamCipher {
        let (key, iv) = secret.key_iv(suite.key_len());
        match suite {
            Suite::Aes128 => {
                let mut block = [0u8; 16];
                block[..IV_LEN].copy_from_slice(&iv);
                let lc = match aes {
                    AesCtrImpl::Fastest => {
                        use aws_lc_rs::cipher::{EncryptingKey, UnboundCipherKey, AES_128};
                        let k = UnboundCipherKey::new(&AES_128, &key[..])
                            .and_then(EncryptingKey::ctr)
                            .expect("a 16-byte AES-128 key");
                        Some(Box::new(k))
                    }
                    AesCtrImpl::RustCrypto => None,
                };
                KeystreamCipher::Aes {
                    rc: Box::new(Aes128Ctr::new(key[..].into(), (&block).into())),
                    lc,
                    iv,
                }
            }
            Suite::ChaCha20 => KeystreamCipher::ChaCha(Box::new(chacha20::ChaCha20::new(
                key[..].into(),
                (&iv).into(),
            ))),
        }
    }

    /// The suite.
    pub fn suite(&self) -> Suite {
        self.suite
    }

    /// Bytes processed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Key epochs begun so far, the first included.
    pub fn epoch(&self) -> u64 {
        self.offset >> self.epoch_log2
    }

    /// XORs the next `src.len()` bytes of the keystream with `src` into `dst`: one pass
    /// over the bytes instead of a copy and an in-place [`Keystream::apply`].
    ///
    /// # Panics
    /// If `src` and `dst` do not have the same length.
    pub fn apply_b2b(&mut self, mut src: &[u8], mut dst: &mut [u8]) {
        assert_eq!(src.len(), dst.len(), "apply_b2b: lengths differ");
        while !src.is_empty() {
            let epoch_end = ((self.offset >> self.epoch_log2) + 1) << self.epoch_log2;
            let n = (epoch_end - self.offset).min(src.len() as u64) as usize;
            let (s_now, s_rest) = src.split_at(n);
            let (d_now, d_rest) = dst.split_at_mut(n);
            let within = self.offset - (epoch_end - (1u64 << self.epoch_log2));
            let done = match &mut self.cipher {
                KeystreamCipher::Aes {
                    rc,
                    lc: Some(lc),
                    iv,
                } if n >= AWS_LC_CTR_FROM => {
                    // aws-lc-rs's CTR works in place: copy, then XOR (the copy is cheap
                    // beside the cipher).
                    d_now.copy_from_slice(s_now);
                    aes_apply(rc, Some(lc), iv, within, d_now);
                    Ok(())
                }
                KeystreamCipher::Aes { rc, .. } => rc.apply_keystream_b2b(s_now, d_now),
                KeystreamCipher::ChaCha(c) => c.apply_keystream_b2b(s_now, d_now),
            };
            // Within an epoch the counter cannot run out (see MAX_EPOCH_LOG2 and Aes128Ctr;
            // the boundary is tested in limits_tests).
            done.expect("keystream within its epoch");
            self.offset += n as u64;
            (src, dst) = (s_rest, d_rest);
            if self.offset == epoch_end {
                self.secret = self.secret.next();
                self.cipher = Self::epoch_cipher(self.suite, &self.secret, self.aes);
            }
        }
    }

    /// XORs the next `buf.len()` bytes of the keystream into `buf`.
    pub fn apply(&mut self, mut buf: &mut [u8]) {
        while !buf.is_empty() {
            let epoch_end = ((self.offset >> self.epoch_log2) + 1) << self.epoch_log2;
            let n = (epoch_end - self.offset).min(buf.len() as u64) as usize;
            let (now, rest) = buf.split_at_mut(n);
            let within = self.offset - (epoch_end - (1u64 << self.epoch_log2));
            match &mut self.cipher {
                KeystreamCipher::Aes { rc, lc, iv } => {
                    aes_apply(rc, lc.as_deref(), iv, within, now)
                }
                KeystreamCipher::ChaCha(c) => c.apply_keystream(now),
            }
            self.offset += n as u64;
            buf = rest;
            if self.offset == epoch_end {
                self.secret = self.secret.next();
                self.cipher = Self::epoch_cipher(self.suite, &self.secret, self.aes);
            }
        }
    }

    /// The keystream of [`Keystream::new`] moved to byte `offset` without processing the
    /// bytes before it (the secret of `offset`'s epoch, the cipher seeked within it): lets
    /// tests reach the end of a 2^36-byte epoch at once.
    #[cfg(test)]
    fn at_offset(suite: Suite, first: TrafficSecret, epoch_log2: u8, offset: u64) -> Keystream {
        use ctr::cipher::StreamCipherSeek;
        let mut k = Keystream::new(suite, first, epoch_log2);
        for _ in 0..offset >> epoch_log2 {
            k.secret = k.secret.next();
        }
        k.cipher = Self::epoch_cipher(suite, &k.secret, k.aes);
        let within = offset & ((1u64 << epoch_log2) - 1);
        match &mut k.cipher {
            KeystreamCipher::Aes { rc, .. } => rc.seek(within),
            KeystreamCipher::ChaCha(c) => c.seek(within),
        }
        k.offset = offset;
        k
    }

    /// Position within the current epoch, for tests: the cipher's own counter.
    #[cfg(test)]
    fn cipher_pos(&self) -> u64 {
        use ctr::cipher::StreamCipherSeek;
        match &self.cipher {
            KeystreamCipher::Aes { rc, .. } => rc.current_pos(),
            KeystreamCipher::ChaCha(c) => c.current_pos(),
        }
    }
}

impl fmt::Debug for Keystream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keystream")
            .field("suite", &self.suite)
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}

/// Length of an AEAD tag (both suites).
pub const AEAD_TAG_LEN: usize = 16;

/// One direction's AEAD of `aead` mode: the key and IV of the current epoch, and the record
/// numbers. Epoch `n` covers records `n * 2^epoch_log2 ..`; the nonce of a record is the
/// epoch's IV XOR its number within the epoch (64-bit, big-endian, left-padded: RFC 8446
/// section 5.3).
pub struct RecordCipher {
    suite: Suite,
    secret: TrafficSecret,
    epoch_log2: u8,
    /// Records sealed or opened so far in this direction.
    records: u64,
    key: aead::LessSafeKey,
    iv: [u8; IV_LEN],
}

/// The record failed authentication.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unauthentic;

impl RecordCipher {
    /// Largest epoch: 2^23 records (at 16 KiB each 128 GiB per key), below the 2^24.5 full
    /// records RFC 8446 section 5.5 allows AES-GCM.
    pub const MAX_EPOCH_LOG2: u8 = 23;
    /// Smallest epoch the cipher takes (a new key for every record; for tests).
    pub const MIN_EPOCH_LOG2: u8 = 0;
    /// Smallest epoch a server accepts in a hello, and a client offers: 2 records per key
    /// (a new key for every record would cost a server CPU at any client's will).
    pub const MIN_OFFER_EPOCH_LOG2: u8 = 1;

    /// The record cipher of a direction whose first traffic secret is `secret`.
    pub fn new(suite: Suite, secret: TrafficSecret, epoch_log2: u8) -> RecordCipher {
        assert!(epoch_log2 <= Self::MAX_EPOCH_LOG2);
        let (key, iv) = Self::epoch_key(suite, &secret);
        RecordCipher {
            suite,
            secret,
            epoch_log2,
            records: 0,
            key,
            iv,
        }
    }

    fn epoch_key(suite: Suite, secret: &TrafficSecret) -> (aead::LessSafeKey, [u8; IV_LEN]) {
        let (key, iv) = secret.key_iv(suite.key_len());
        let alg = match suite {
            Suite::Aes128 => &aead::AES_128_GCM,
            Suite::ChaCha20 => &aead::CHACHA20_POLY1305,
        };
        let unbound = aead::UnboundKey::new(alg, &key).expect("key length matches the suite");
        (aead::LessSafeKey::new(unbound), iv)
    }

    /// The suite.
    pub fn suite(&self) -> Suite {
        self.suite
    }

    /// Records processed so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Key epochs begun so far, the first included.
    pub fn epoch(&self) -> u64 {
        self.records >> self.epoch_log2
    }

    fn nonce(&self) -> aead::Nonce {
        let seq = self.records & ((1u64 << self.epoch_log2) - 1);
        let mut n = self.iv;
        for (b, s) in n[IV_LEN - 8..].iter_mut().zip(seq.to_be_bytes()) {
            *b ^= s;
        }
        aead::Nonce::assume_unique_for_key(n)
    }

    /// Moves to the next record number, and to the next key when an epoch ends.
    fn advance(&mut self) {
        self.records += 1;
        if self.records & ((1u64 << self.epoch_log2) - 1) == 0 {
            self.secret = self.secret.next();
            (self.key, self.iv) = Self::epoch_key(self.suite, &self.secret);
        }
    }

    /// Encrypts `payload` in place with `aad` and returns the tag.
    pub fn seal(&mut self, aad: &[u8], payload: &mut [u8]) -> [u8; AEAD_TAG_LEN] {
        let mut tag = [0u8; AEAD_TAG_LEN];
        self.seal_joined(aad, payload, &[], &mut tag);
        tag
    }

    /// Encrypts the plaintext `head || rest` with `aad`: `head` in place, `rest` into the
    /// first `rest.len()` bytes of `out`, followed by the tag. The same record as
    /// [`RecordCipher::seal`] over the joined plaintext, without copying `rest` next to
    /// `head` first.
    ///
    /// # Panics
    /// If `out` is not exactly `rest.len() + AEAD_TAG_LEN` bytes.
    pub fn seal_joined(&mut self, aad: &[u8], head: &mut [u8], rest: &[u8], out: &mut [u8]) {
        assert_eq!(
            out.len(),
            rest.len() + AEAD_TAG_LEN,
            "seal_joined: output length"
        );
        self.key
            .seal_in_place_scatter(self.nonce(), aead::Aad::from(aad), head, rest, out)
            .expect("record payloads are far below the AEAD's length limit");
        self.advance();
    }

    /// Decrypts `ciphertext || tag` in place; on success the plaintext is the first
    /// `len - 16` bytes. A failure leaves the cipher unusable for this stream (the caller
    /// aborts).
    pub fn open(&mut self, aad: &[u8], sealed: &mut [u8]) -> Result<usize, Unauthentic> {
        let n = self
            .key
            .open_in_place(self.nonce(), aead::Aad::from(aad), sealed)
            .map_err(|_| Unauthentic)?
            .len();
        self.advance();
        Ok(n)
    }
}

impl fmt::Debug for RecordCipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordCipher")
            .field("suite", &self.suite)
            .field("records", &self.records)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
#[path = "cipher_limits_tests.rs"]
mod limits_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Schedule;

    fn secret(b: u8) -> TrafficSecret {
        Schedule::new(
            &crate::keys::Secrets {
                kem: &[b; 32],
                dh: &[b; 32],
                r_c: &[1; 32],
            },
            b"hello",
            b"accept",
        )
        .traffic()
        .0
    }

    /// `apply_b2b` gives what a copy and `apply` give, across key epochs and in any split.
    #[test]
    fn b2b_equals_copy_and_apply() {
        for suite in [Suite::Aes128, Suite::ChaCha20] {
            let data: Vec<u8> = (0..5000u32).map(|i| (i * 31 % 251) as u8).collect();
            let mut a = Keystream::new(suite, secret(7), Keystream::MIN_EPOCH_LOG2);
            let mut b = Keystream::new(suite, secret(7), Keystream::MIN_EPOCH_LOG2);
            let mut want = data.clone();
            a.apply(&mut want);
            let mut got = vec![0u8; data.len()];
            let mut at = 0;
            for piece in [1usize, 255, 256, 17, 1000, 3471] {
                b.apply_b2b(&data[at..at + piece], &mut got[at..at + piece]);
                at += piece;
            }
            assert_eq!(at, data.len());
            assert_eq!(got, want, "{suite:?}");
            assert_eq!((a.offset(), a.epoch()), (b.offset(), b.epoch()));
        }
    }

    /// AES-128-CTR gives the same bytes through aws-lc-rs (long runs) as through RustCrypto
    /// alone, in runs of every size around the switch, starting mid-block, across key
    /// epochs, in place and from one buffer into another.
    #[test]
    fn aws_lc_and_rustcrypto_ctr_give_the_same_keystream() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 37 % 253) as u8).collect();
        let runs = [
            3usize,
            AWS_LC_CTR_FROM - 1,
            AWS_LC_CTR_FROM,
            AWS_LC_CTR_FROM + 5,
            13,
            65_536,
            40_001,
            7,
        ];
        for epoch_log2 in [16u8, 20] {
            let new = |aes| Keystream::with_aes_ctr(Suite::Aes128, secret(3), epoch_log2, aes);
            let mut want = data.clone();
            new(AesCtrImpl::RustCrypto).apply(&mut want);
            let (mut inplace, mut b2b) = (new(AesCtrImpl::Fastest), new(AesCtrImpl::Fastest));
            let mut got = data.clone();
            let mut out = vec![0u8; data.len()];
            let mut at = 0;
            for n in runs.iter().cycle() {
                let n = (*n).min(data.len() - at);
                inplace.apply(&mut got[at..at + n]);
                b2b.apply_b2b(&data[at..at + n], &mut out[at..at + n]);
                at += n;
                if at == data.len() {
                    break;
                }
            }
            assert!(got == want, "in place, epoch_log2 {epoch_log2}");
            assert!(out == want, "b2b, epoch_log2 {epoch_log2}");
            assert_eq!(inplace.epoch(), (data.len() as u64) >> epoch_log2);
        }
    }

    /// The keystream is a function of the byte offset only: any split of the input gives
    /// the same output, epochs included.
    #[test]
    fn keystream_is_positioned_by_offset() {
        for suite in [Suite::Aes128, Suite::ChaCha20] {
            let data: Vec<u8> = (0..5000u32).map(|i| (i * 31 % 251) as u8).collect();
            let mut whole = data.clone();
            Keystream::new(suite, secret(9), 10).apply(&mut whole);
            let mut split = data.clone();
            let mut k = Keystream::new(suite, secret(9), 10);
            let mut pos = 0;
            for n in [1usize, 15, 16, 17, 1000, 7, 1024, 2000] {
                let end = (pos + n).min(split.len());
                k.apply(&mut split[pos..end]);
                pos = end;
            }
            k.apply(&mut split[pos..]);
            assert_eq!(whole, split, "{suite:?}");
            assert_eq!(k.offset(), 5000);
            assert_eq!(k.epoch(), 4);
            assert_eq!(k.cipher_pos(), 5000 - 4096);
            assert_ne!(whole, data);
            // Epochs use different keys: the keystream of epoch 1 is not epoch 0's again.
            let mut zeros = vec![0u8; 2048];
            Keystream::new(suite, secret(9), 10).apply(&mut zeros);
            assert_ne!(zeros[..1024], zeros[1024..]);
        }
    }

    /// AES-128-CTR here is exactly AES-128 in counter mode over `iv || counter` (checked
    /// with the block cipher itself, which the RustCrypto `aes` crate tests against FIPS-197).
    #[test]
    fn ctr_matches_the_block_cipher() {
        use ctr::cipher::{BlockEncrypt, KeyInit};
        let s = secret(3);
        let (key, iv) = s.key_iv(16);
        let aes = aes::Aes128::new(key[..].into());
        let mut expect = Vec::new();
        for ctr in 0u32..3 {
            let mut block = [0u8; 16];
            block[..12].copy_from_slice(&iv);
            block[12..].copy_from_slice(&ctr.to_be_bytes());
            let mut b = block.into();
            aes.encrypt_block(&mut b);
            expect.extend_from_slice(&b);
        }
        let mut got = vec![0u8; 48];
        Keystream::new(Suite::Aes128, s, 36).apply(&mut got);
        assert_eq!(got, expect);
    }

    #[test]
    fn records_round_trip_and_rekey() {
        for suite in [Suite::Aes128, Suite::ChaCha20] {
            let mut tx = RecordCipher::new(suite, secret(5), 2);
            let mut rx = RecordCipher::new(suite, secret(5), 2);
            let mut tags = Vec::new();
            for i in 0..10u8 {
                let mut p = vec![i; 100];
                let tag = tx.seal(&[i], &mut p);
                tags.push(tag);
                p.extend_from_slice(&tag);
                assert_eq!(rx.open(&[i], &mut p), Ok(100));
                assert_eq!(&p[..100], &[i; 100][..]);
            }
            assert_eq!((tx.epoch(), rx.epoch()), (2, 2));
            // A record fails under the wrong AD, and under the wrong number.
            let mut p = vec![0u8; 10];
            let tag = tx.seal(b"ad", &mut p);
            p.extend_from_slice(&tag);
            let mut q = p.clone();
            assert_eq!(rx.clone_for_test().open(b"AD", &mut q), Err(Unauthentic));
            let mut skip = rx.clone_for_test();
            skip.advance();
            assert_eq!(skip.open(b"ad", &mut p.clone()), Err(Unauthentic));
            assert_eq!(rx.open(b"ad", &mut p), Ok(10));
        }
    }

    /// `seal_joined` makes the record that a copy of `rest` behind `head` and `seal` make,
    /// for every split of the payload (nothing in place, part, all of it), across key
    /// epochs, in both suites; and ring, another implementation, opens it.
    #[test]
    fn seal_joined_equals_copy_and_seal() {
        for suite in [Suite::Aes128, Suite::ChaCha20] {
            let data: Vec<u8> = (0..16384u32).map(|i| (i * 131 % 253) as u8).collect();
            let mut copied = RecordCipher::new(suite, secret(4), 1);
            let mut joined = RecordCipher::new(suite, secret(4), 1);
            let mut opener = RecordCipher::new(suite, secret(4), 1);
            for (len, head) in [(16384, 0), (16384, 4), (16384, 16383), (16384, 16384)]
                .into_iter()
                .chain([(1, 0), (1, 1), (17, 16), (5000, 1), (5000, 4096)])
            {
                let aad = [0x17, (len >> 8) as u8, len as u8];
                let mut want = data[..len].to_vec();
                let tag = copied.seal(&aad, &mut want);
                want.extend_from_slice(&tag);

                let mut head_buf = data[..head].to_vec();
                let mut out = vec![0u8; len - head + AEAD_TAG_LEN];
                joined.seal_joined(&aad, &mut head_buf, &data[head..len], &mut out);
                head_buf.extend_from_slice(&out);
                assert_eq!(head_buf, want, "{suite:?} {len} bytes, {head} in place");

                let mut opened = head_buf.clone();
                assert_eq!(opener.open(&aad, &mut opened), Ok(len));
                assert_eq!(opened[..len], data[..len]);
            }
            assert_eq!(joined.epoch(), copied.epoch());
            assert!(joined.epoch() > 1, "the splits crossed key epochs");
        }
    }

    /// ring, an independent implementation of the same AEADs, opens what nena seals (the
    /// wire format does not depend on the library).
    #[test]
    fn ring_opens_what_nena_seals() {
        use ring::aead as r;
        for suite in [Suite::Aes128, Suite::ChaCha20] {
            let s = secret(8);
            let (key, iv) = s.key_iv(suite.key_len());
            let alg = match suite {
                Suite::Aes128 => &r::AES_128_GCM,
                Suite::ChaCha20 => &r::CHACHA20_POLY1305,
            };
            let key = r::LessSafeKey::new(r::UnboundKey::new(alg, &key).unwrap());
            let mut tx = RecordCipher::new(suite, s, 23);
            let mut head = b"nena".to_vec();
            let rest = vec![0x5a; 1000];
            let mut out = vec![0u8; rest.len() + AEAD_TAG_LEN];
            tx.seal_joined(b"ad", &mut head, &rest, &mut out);
            head.extend_from_slice(&out);
            let plain = key
                .open_in_place(
                    r::Nonce::assume_unique_for_key(iv),
                    r::Aad::from(b"ad"),
                    &mut head,
                )
                .expect("ring opens the record");
            assert_eq!(&plain[..4], b"nena");
            assert_eq!(&plain[4..], &rest[..]);
        }
    }

    impl RecordCipher {
        fn clone_for_test(&self) -> RecordCipher {
            let (key, iv) = Self::epoch_key(self.suite, &self.secret);
            RecordCipher {
                suite: self.suite,
                secret: self.secret.clone(),
                epoch_log2: self.epoch_log2,
                records: self.records,
                key,
                iv,
            }
        }
    }
}
