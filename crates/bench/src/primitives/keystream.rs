//! The keystream candidates of `stream` mode (AES-128-CTR, ChaCha20) behind one small
//! trait with both ways a session can use them: continue an existing cipher instance, or
//! seek to a byte offset and apply from there. Candidates: OpenSSL (the reference),
//! aws-lc-rs (AES-CTR through its `cipher` module), RustCrypto in its current generation
//! (`aes` 0.9 + `ctr` 0.10, `chacha20` 0.10) and the previous one that nena-proto uses
//! (`aes` 0.8 + `ctr` 0.9, `chacha20` 0.9), and AWS-LC's ChaCha20 through raw FFI
//! (`aws-lc-sys`), which no safe crate exposes; plus the check against OpenSSL.
//!
//! The layouts are nena's (docs/PROTOCOL.md): AES-128-CTR runs the counter block
//! `nonce (12 bytes) || block number (u32, big-endian)` from block 0; ChaCha20 is RFC 8439
//! with a 96-bit nonce and a 32-bit block counter from 0.

use super::library::{Lib, Made};
use anyhow::{anyhow, bail, ensure, Result};
use openssl::cipher::Cipher;
use openssl::cipher_ctx::CipherCtx;
use serde::Serialize;

/// Nonce length of both keystreams.
pub const NONCE_LEN: usize = 12;

/// A keystream of `stream` mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StreamAlg {
    Aes128Ctr,
    ChaCha20,
}

impl StreamAlg {
    /// Both, in report order.
    pub const ALL: [StreamAlg; 2] = [StreamAlg::Aes128Ctr, StreamAlg::ChaCha20];

    /// The name in the report.
    pub fn name(self) -> &'static str {
        match self {
            StreamAlg::Aes128Ctr => "aes-128-ctr",
            StreamAlg::ChaCha20 => "chacha20",
        }
    }

    /// Key length in bytes.
    pub fn key_len(self) -> usize {
        match self {
            StreamAlg::Aes128Ctr => 16,
            StreamAlg::ChaCha20 => 32,
        }
    }

    /// Bytes per counter step.
    pub fn block_len(self) -> usize {
        match self {
            StreamAlg::Aes128Ctr => 16,
            StreamAlg::ChaCha20 => 64,
        }
    }

    /// The end of the keystream: 2^32 blocks (the 32-bit counter).
    pub fn max_offset(self) -> u64 {
        (self.block_len() as u64) << 32
    }

    /// The libraries that are timed for this keystream, OpenSSL first.
    pub fn libs(self) -> &'static [Lib] {
        match self {
            StreamAlg::Aes128Ctr => &[
                Lib::OpenSsl,
                Lib::Ring,
                Lib::AwsLcRs,
                Lib::RustCrypto,
                Lib::RustCryptoPrev,
            ],
            StreamAlg::ChaCha20 => &[
                Lib::OpenSsl,
                Lib::Ring,
                Lib::AwsLcRs,
                Lib::AwsLcSys,
                Lib::RustCrypto,
                Lib::RustCryptoPrev,
            ],
        }
    }
}

/// One keystream implementation for one direction, key and nonce set up once.
pub trait KeystreamImpl {
    /// XORs the next `buf.len()` keystream bytes into `buf` (continuing after the bytes
    /// of the last call).
    fn apply(&mut self, buf: &mut [u8]) -> Result<()>;
    /// XORs the keystream bytes from byte `offset` on into `buf`; a later `apply`
    /// continues after them.
    fn apply_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<()>;
}

/// The implementation of `alg` from `lib` with `key` and `nonce`, or why `lib` cannot
/// provide it here.
pub fn make(
    lib: Lib,
    alg: StreamAlg,
    key: &[u8],
    nonce: &[u8; NONCE_LEN],
) -> Result<Made<Box<dyn KeystreamImpl>>> {
    ensure!(
        key.len() == alg.key_len(),
        "{}: key of {} bytes",
        alg.name(),
        key.len()
    );
    Ok(match (lib, alg) {
        (Lib::OpenSsl, _) => Made::Ready(Box::new(OpensslStream::new(alg, key, nonce)?)),
        (Lib::Ring, _) => Made::Unavailable(
            "ring 0.17 has no public AES-CTR or ChaCha20 keystream (only AEADs, and QUIC \
             header-protection masks of 5 bytes)"
                .into(),
        ),
        (Lib::AwsLcRs, StreamAlg::Aes128Ctr) => aws_lc::make_ctr(key, nonce)?,
        (Lib::AwsLcRs, StreamAlg::ChaCha20) => Made::Unavailable(
            "aws-lc-rs 1.x's `cipher` module has AES (and legacy DES) modes only; its \
             ChaCha20 is crate-private (QUIC header protection)"
                .into(),
        ),
        (Lib::AwsLcSys, StreamAlg::ChaCha20) => aws_lc::make_chacha_ffi(key, nonce)?,
        (Lib::AwsLcSys, StreamAlg::Aes128Ctr) => {
            Made::Unavailable("aws-lc-rs provides AES-CTR safely (row aws-lc-rs)".into())
        }
        (Lib::RustCrypto, _) => rust_crypto::make_current(alg, key, nonce)?,
        (Lib::RustCryptoPrev, _) => Made::Ready(rust_crypto_prev::make(alg, key, nonce)?),
    })
}

/// The counter block (AES) or IV (OpenSSL's ChaCha20: counter LE || nonce) of `block`.
fn openssl_iv(alg: StreamAlg, nonce: &[u8; NONCE_LEN], block: u32) -> [u8; 16] {
    let mut iv = [0u8; 16];
    match alg {
        StreamAlg::Aes128Ctr => {
            iv[..NONCE_LEN].copy_from_slice(nonce);
            iv[NONCE_LEN..].copy_from_slice(&block.to_be_bytes());
        }
        StreamAlg::ChaCha20 => {
            iv[..4].copy_from_slice(&block.to_le_bytes());
            iv[4..].copy_from_slice(nonce);
        }
    }
    iv
}

fn check_range(alg: StreamAlg, offset: u64, len: usize) -> Result<()> {
    match offset.checked_add(len as u64) {
        Some(end) if end <= alg.max_offset() => Ok(()),
        _ => bail!(
            "{}: keystream bytes {offset}+{len} past its end",
            alg.name()
        ),
    }
}

/// OpenSSL through the `openssl` crate: one `EVP_CIPHER_CTX` with the key schedule kept;
/// a seek re-initialises the IV (key kept) and discards the bytes before the offset in
/// its block.
pub struct OpensslStream {
    alg: StreamAlg,
    ctx: CipherCtx,
    nonce: [u8; NONCE_LEN],
    offset: u64,
    scratch: [u8; 64],
}

impl OpensslStream {
    pub fn new(alg: StreamAlg, key: &[u8], nonce: &[u8; NONCE_LEN]) -> Result<Self> {
        let cipher = match alg {
            StreamAlg::Aes128Ctr => Cipher::aes_128_ctr(),
            StreamAlg::ChaCha20 => Cipher::chacha20(),
        };
        let mut ctx = CipherCtx::new()?;
        ctx.encrypt_init(Some(cipher), Some(key), Some(&openssl_iv(alg, nonce, 0)))?;
        ensure!(
            ctx.block_size() == 1,
            "{}: OpenSSL block size {}",
            alg.name(),
            ctx.block_size()
        );
        Ok(OpensslStream {
            alg,
            ctx,
            nonce: *nonce,
            offset: 0,
            scratch: [0; 64],
        })
    }
}

impl KeystreamImpl for OpensslStream {
    fn apply(&mut self, buf: &mut [u8]) -> Result<()> {
        check_range(self.alg, self.offset, buf.len())?;
        let n = self.ctx.cipher_update_inplace(buf, buf.len())?;
        ensure!(n == buf.len(), "OpenSSL: {n} of {} bytes", buf.len());
        self.offset += n as u64;
        Ok(())
    }

    fn apply_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<()> {
        check_range(self.alg, offset, buf.len())?;
        let b = self.alg.block_len() as u64;
        let iv = openssl_iv(self.alg, &self.nonce, (offset / b) as u32);
        self.ctx.encrypt_init(None, None, Some(&iv))?;
        let skip = (offset % b) as usize;
        if skip > 0 {
            self.ctx
                .cipher_update_inplace(&mut self.scratch[..skip], skip)?;
        }
        self.offset = offset;
        self.apply(buf)
    }
}

/// Applies a keystream that a positioned primitive produces whole blocks of: the bytes
/// before the next block boundary through a one-block scratch, the rest in place in one
/// call. `apply_blocks(block, buf)` XORs the keystream from block `block` on into `buf`.
#[cfg_attr(not(feature = "compare-crypto"), allow(dead_code))]
fn positioned<const B: usize>(
    offset: u64,
    mut buf: &mut [u8],
    mut apply_blocks: impl FnMut(u32, &mut [u8]) -> Result<()>,
) -> Result<()> {
    let mut block = offset / B as u64;
    let r = (offset % B as u64) as usize;
    if r != 0 && !buf.is_empty() {
        let h = (B - r).min(buf.len());
        let mut scratch = [0u8; B];
        scratch[r..r + h].copy_from_slice(&buf[..h]);
        apply_blocks(block as u32, &mut scratch)?;
        buf[..h].copy_from_slice(&scratch[r..r + h]);
        buf = &mut buf[h..];
        block += 1;
    }
    if !buf.is_empty() {
        apply_blocks(block as u32, buf)?;
    }
    Ok(())
}

#[cfg(feature = "compare-crypto")]
mod aws_lc {
    //! aws-lc-rs 1.x: AES-128-CTR through `cipher::EncryptingKey::ctr` and
    //! `less_safe_encrypt` with the counter block of the offset (the only in-place CTR
    //! call; its `StreamingEncryptingKey` continues, but out of place only). ChaCha20
    //! through `aws_lc_sys::CRYPTO_chacha_20` (raw FFI, in place allowed).

    use super::*;
    use anyhow::Context as _;
    use aws_lc_rs::cipher::{EncryptingKey, EncryptionContext, UnboundCipherKey, AES_128};
    use aws_lc_rs::iv::FixedLength;

    pub struct AwsLcCtr {
        key: EncryptingKey,
        nonce: [u8; NONCE_LEN],
        offset: u64,
    }

    pub fn make_ctr(key: &[u8], nonce: &[u8; NONCE_LEN]) -> Result<Made<Box<dyn KeystreamImpl>>> {
        let k = UnboundCipherKey::new(&AES_128, key).map_err(|_| anyhow!("aws-lc-rs: bad key"))?;
        let key = EncryptingKey::ctr(k).map_err(|_| anyhow!("aws-lc-rs: no CTR key"))?;
        Ok(Made::Ready(Box::new(AwsLcCtr {
            key,
            nonce: *nonce,
            offset: 0,
        })))
    }

    impl KeystreamImpl for AwsLcCtr {
        fn apply(&mut self, buf: &mut [u8]) -> Result<()> {
            self.apply_at(self.offset, buf)
        }

        fn apply_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<()> {
            check_range(StreamAlg::Aes128Ctr, offset, buf.len())?;
            let (key, nonce) = (&self.key, &self.nonce);
            positioned::<16>(offset, buf, |block, data| {
                let iv = openssl_iv(StreamAlg::Aes128Ctr, nonce, block);
                key.less_safe_encrypt(data, EncryptionContext::Iv128(FixedLength::from(iv)))
                    .map_err(|_| anyhow!("aws-lc-rs: CTR failed"))?;
                Ok(())
            })?;
            self.offset = offset + buf.len() as u64;
            Ok(())
        }
    }

    pub struct AwsLcSysChaCha {
        key: [u8; 32],
        nonce: [u8; NONCE_LEN],
        offset: u64,
    }

    pub fn make_chacha_ffi(
        key: &[u8],
        nonce: &[u8; NONCE_LEN],
    ) -> Result<Made<Box<dyn KeystreamImpl>>> {
        let key: [u8; 32] = key.try_into().context("ChaCha20 key length")?;
        Ok(Made::Ready(Box::new(AwsLcSysChaCha {
            key,
            nonce: *nonce,
            offset: 0,
        })))
    }

    impl KeystreamImpl for AwsLcSysChaCha {
        fn apply(&mut self, buf: &mut [u8]) -> Result<()> {
            self.apply_at(self.offset, buf)
        }

        fn apply_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<()> {
            check_range(StreamAlg::ChaCha20, offset, buf.len())?;
            let (key, nonce) = (&self.key, &self.nonce);
            positioned::<64>(offset, buf, |block, data| {
                // SAFETY: `CRYPTO_chacha_20` reads `in_len` bytes from `in_` and writes as
                // many to `out`, which may be the same buffer (AWS-LC's chacha.h); the key is
                // 32 bytes and the nonce 12, as it reads. `check_range` keeps the 32-bit block
                // counter from wrapping within `data`.
                unsafe {
                    aws_lc_sys::CRYPTO_chacha_20(
                        data.as_mut_ptr(),
                        data.as_ptr(),
                        data.len(),
                        key.as_ptr(),
                        nonce.as_ptr(),
                        block,
                    );
                }
                Ok(())
            })?;
            self.offset = offset + buf.len() as u64;
            Ok(())
        }
    }
}

#[cfg(not(feature = "compare-crypto"))]
mod aws_lc {
    use super::*;

    pub fn make_ctr(_: &[u8], _: &[u8; NONCE_LEN]) -> Result<Made<Box<dyn KeystreamImpl>>> {
        Ok(Made::Unavailable(
            super::super::library::NEEDS_FEATURE.into(),
        ))
    }

    pub fn make_chacha_ffi(_: &[u8], _: &[u8; NONCE_LEN]) -> Result<Made<Box<dyn KeystreamImpl>>> {
        Ok(Made::Unavailable(
            super::super::library::NEEDS_FEATURE.into(),
        ))
    }
}

/// The RustCrypto keystreams of one generation of the `cipher` traits: `apply` is
/// `apply_keystream`, `apply_at` is `seek` (by byte offset) then `apply_keystream`.
macro_rules! rust_crypto_keystream {
    ($cipher:path) => {
        use super::*;
        use $cipher::{KeyIvInit, StreamCipher, StreamCipherSeek};

        pub struct Rc<C> {
            c: C,
            alg: StreamAlg,
            offset: u64,
        }

        impl<C: StreamCipher + StreamCipherSeek> KeystreamImpl for Rc<C> {
            fn apply(&mut self, buf: &mut [u8]) -> Result<()> {
                check_range(self.alg, self.offset, buf.len())?;
                self.c
                    .try_apply_keystream(buf)
                    .map_err(|e| anyhow!("RustCrypto: {e:?}"))?;
                self.offset += buf.len() as u64;
                Ok(())
            }

            fn apply_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<()> {
                check_range(self.alg, offset, buf.len())?;
                self.c
                    .try_seek(offset)
                    .map_err(|e| anyhow!("RustCrypto: seek to {offset}: {e:?}"))?;
                self.offset = offset;
                self.apply(buf)
            }
        }

        fn new<C: KeyIvInit + StreamCipher + StreamCipherSeek + 'static>(
            alg: StreamAlg,
            key: &[u8],
            iv: &[u8],
        ) -> Result<Box<dyn KeystreamImpl>> {
            let c =
                C::new_from_slices(key, iv).map_err(|_| anyhow!("RustCrypto: key/IV length"))?;
            Ok(Box::new(Rc { c, alg, offset: 0 }))
        }
    };
}

mod rust_crypto_prev {
    //! `aes` 0.8 + `ctr` 0.9 (`Ctr32BE`) and `chacha20` 0.9: `cipher` 0.4, as nena-proto.
    rust_crypto_keystream!(ctr::cipher);

    pub fn make(
        alg: StreamAlg,
        key: &[u8],
        nonce: &[u8; NONCE_LEN],
    ) -> Result<Box<dyn KeystreamImpl>> {
        match alg {
            StreamAlg::Aes128Ctr => {
                new::<ctr::Ctr32BE<aes::Aes128>>(alg, key, &openssl_iv(alg, nonce, 0))
            }
            StreamAlg::ChaCha20 => new::<chacha20::ChaCha20>(alg, key, nonce),
        }
    }
}

#[cfg(feature = "compare-crypto")]
mod rust_crypto {
    //! `aes` 0.9 + `ctr` 0.10 (`Ctr32BE`) and `chacha20` 0.10: `cipher` 0.5.
    rust_crypto_keystream!(ctr010::cipher);

    pub fn make_current(
        alg: StreamAlg,
        key: &[u8],
        nonce: &[u8; NONCE_LEN],
    ) -> Result<Made<Box<dyn KeystreamImpl>>> {
        Ok(Made::Ready(match alg {
            StreamAlg::Aes128Ctr => {
                new::<ctr010::Ctr32BE<aes09::Aes128>>(alg, key, &openssl_iv(alg, nonce, 0))?
            }
            StreamAlg::ChaCha20 => new::<chacha20_010::ChaCha20>(alg, key, nonce)?,
        }))
    }
}

#[cfg(not(feature = "compare-crypto"))]
mod rust_crypto {
    use super::*;

    pub fn make_current(
        _: StreamAlg,
        _: &[u8],
        _: &[u8; NONCE_LEN],
    ) -> Result<Made<Box<dyn KeystreamImpl>>> {
        Ok(Made::Unavailable(
            super::super::library::NEEDS_FEATURE.into(),
        ))
    }
}

/// Chunk sizes of the continuation check: around both block sizes and beyond a record.
const CHUNKS: [usize; 12] = [1, 13, 15, 16, 17, 63, 64, 65, 127, 1280, 3000, 0];
/// Offsets of the seek check: block boundaries and the bytes around them.
const OFFSETS: [u64; 12] = [0, 1, 13, 15, 16, 17, 63, 64, 65, 1000, 4097, 16397];

/// Checks `make_fresh()`'s instances against OpenSSL's keystream with the same key and
/// nonce over 24 KiB: continuing over chunks of 0 to 3000 bytes, seeking to offsets in
/// and around blocks with lengths of 1 to 1280 bytes, and continuing after a seek.
pub fn check_against_openssl(
    alg: StreamAlg,
    key: &[u8],
    nonce: &[u8; NONCE_LEN],
    make_fresh: &mut dyn FnMut() -> Result<Box<dyn KeystreamImpl>>,
) -> Result<()> {
    let name = alg.name();
    const LEN: usize = 24 * 1024;
    let msg = crate::ciphers::test_bytes(0x5eed, LEN);
    let mut want = msg.clone();
    OpensslStream::new(alg, key, nonce)?.apply(&mut want)?;
    ensure!(want != msg, "{name}: OpenSSL's keystream is zero");

    // Continue over chunks of every size.
    let mut imp = make_fresh()?;
    let mut got = msg.clone();
    let (mut at, mut i) = (0, 0);
    while at < LEN {
        let n = CHUNKS[i % CHUNKS.len()].min(LEN - at);
        imp.apply(&mut got[at..at + n])?;
        at += n;
        i += 1;
    }
    if let Some(p) = got.iter().zip(&want).position(|(a, b)| a != b) {
        bail!("{name}: continued keystream differs from OpenSSL's at byte {p}");
    }

    // Seek anywhere, then continue.
    let mut imp = make_fresh()?;
    for (j, &off) in OFFSETS.iter().enumerate() {
        for len in [1usize, 50, 1280] {
            let (o, e) = (off as usize, off as usize + len);
            let mut got = msg[o..e].to_vec();
            imp.apply_at(off, &mut got)?;
            ensure!(
                got == want[o..e],
                "{name}: {len} bytes at offset {off} differ from OpenSSL's"
            );
            let more = CHUNKS[j] + 1;
            let mut next = msg[e..e + more].to_vec();
            imp.apply(&mut next)?;
            ensure!(
                next == want[e..e + more],
                "{name}: continuing after a seek to {off}+{len} differs from OpenSSL's"
            );
        }
    }
    // An empty seek positions for the next apply.
    imp.apply_at(4099, &mut [])?;
    let mut got = msg[4099..5000].to_vec();
    imp.apply(&mut got)?;
    ensure!(
        got == want[4099..5000],
        "{name}: apply after an empty seek differs from OpenSSL's"
    );
    // The end of the keystream is an error, not a wrapped counter.
    ensure!(
        imp.apply_at(alg.max_offset() - 1, &mut [0u8; 2]).is_err(),
        "{name}: applied past the 32-bit block counter"
    );
    Ok(())
}
