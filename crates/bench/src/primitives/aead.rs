//! The AEAD candidates of `aead` mode (AES-128-GCM, ChaCha20-Poly1305) behind one small
//! trait, each built from its library's in-place API with the key set up once: OpenSSL
//! (the reference, two kept `EVP_CIPHER_CTX`), ring and aws-lc-rs (`LessSafeKey`) and
//! RustCrypto (`aes-gcm`, `chacha20poly1305`); and the check that every candidate seals to
//! the same bytes and tag as OpenSSL and rejects what it should.

use super::library::{Lib, Made};
use anyhow::{anyhow, ensure, Context, Result};
use openssl::cipher::Cipher;
use openssl::cipher_ctx::CipherCtx;
use serde::Serialize;

/// Nonce length of both AEADs.
pub const NONCE_LEN: usize = 12;
/// Tag length of both AEADs.
pub const TAG_LEN: usize = 16;

/// An AEAD of `aead` mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AeadAlg {
    Aes128Gcm,
    ChaCha20Poly1305,
}

impl AeadAlg {
    /// Both, in report order.
    pub const ALL: [AeadAlg; 2] = [AeadAlg::Aes128Gcm, AeadAlg::ChaCha20Poly1305];

    /// The name in the report.
    pub fn name(self) -> &'static str {
        match self {
            AeadAlg::Aes128Gcm => "aes-128-gcm",
            AeadAlg::ChaCha20Poly1305 => "chacha20-poly1305",
        }
    }

    /// Key length in bytes.
    pub fn key_len(self) -> usize {
        match self {
            AeadAlg::Aes128Gcm => 16,
            AeadAlg::ChaCha20Poly1305 => 32,
        }
    }

    /// The libraries that are timed for this AEAD, OpenSSL first.
    pub fn libs(self) -> &'static [Lib] {
        &[Lib::OpenSsl, Lib::Ring, Lib::AwsLcRs, Lib::RustCrypto]
    }
}

/// One AEAD implementation with its key set up. Both calls work in place; the nonce
/// changes per message, the key never.
pub trait AeadImpl {
    /// Encrypts `buf` in place and returns the tag over `aad` and the ciphertext.
    fn seal(
        &mut self,
        nonce: &[u8; NONCE_LEN],
        aad: &[u8],
        buf: &mut [u8],
    ) -> Result<[u8; TAG_LEN]>;
    /// Verifies `tag` and decrypts `buf` in place; an error if the tag does not verify.
    fn open(
        &mut self,
        nonce: &[u8; NONCE_LEN],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<()>;
}

/// The implementation of `alg` from `lib` with `key`, or why `lib` cannot provide it here.
pub fn make(lib: Lib, alg: AeadAlg, key: &[u8]) -> Result<Made<Box<dyn AeadImpl>>> {
    ensure!(
        key.len() == alg.key_len(),
        "{}: key of {} bytes",
        alg.name(),
        key.len()
    );
    Ok(match lib {
        Lib::OpenSsl => Made::Ready(Box::new(OpensslAead::new(alg, key)?)),
        Lib::Ring => Made::Ready(Box::new(RingAead::new(alg, key)?)),
        Lib::AwsLcRs => aws_lc::make(alg, key)?,
        Lib::RustCrypto => rust_crypto::make(alg, key)?,
        Lib::AwsLcSys | Lib::RustCryptoPrev => Made::Unavailable("not an AEAD candidate".into()),
    })
}

/// OpenSSL through the `openssl` crate: one encryption and one decryption context kept for
/// the whole session (key schedule once), re-initialised with the nonce per message.
pub struct OpensslAead {
    enc: CipherCtx,
    dec: CipherCtx,
}

impl OpensslAead {
    pub fn new(alg: AeadAlg, key: &[u8]) -> Result<Self> {
        let cipher = match alg {
            AeadAlg::Aes128Gcm => Cipher::aes_128_gcm(),
            AeadAlg::ChaCha20Poly1305 => Cipher::chacha20_poly1305(),
        };
        let mut enc = CipherCtx::new()?;
        enc.encrypt_init(Some(cipher), Some(key), None)?;
        let mut dec = CipherCtx::new()?;
        dec.decrypt_init(Some(cipher), Some(key), None)?;
        ensure!(
            enc.iv_length() == NONCE_LEN,
            "{}: nonce length {}",
            alg.name(),
            enc.iv_length()
        );
        Ok(OpensslAead { enc, dec })
    }
}

impl AeadImpl for OpensslAead {
    fn seal(
        &mut self,
        nonce: &[u8; NONCE_LEN],
        aad: &[u8],
        buf: &mut [u8],
    ) -> Result<[u8; TAG_LEN]> {
        self.enc.encrypt_init(None, None, Some(nonce))?;
        if !aad.is_empty() {
            self.enc.cipher_update(aad, None)?;
        }
        let n = self.enc.cipher_update_inplace(buf, buf.len())?;
        let m = self.enc.cipher_final(&mut [])?;
        ensure!(
            n + m == buf.len(),
            "OpenSSL sealed {} of {} bytes",
            n + m,
            buf.len()
        );
        let mut tag = [0u8; TAG_LEN];
        self.enc.tag(&mut tag)?;
        Ok(tag)
    }

    fn open(
        &mut self,
        nonce: &[u8; NONCE_LEN],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<()> {
        self.dec.decrypt_init(None, None, Some(nonce))?;
        if !aad.is_empty() {
            self.dec.cipher_update(aad, None)?;
        }
        let n = self.dec.cipher_update_inplace(buf, buf.len())?;
        self.dec.set_tag(tag)?;
        let m = self
            .dec
            .cipher_final(&mut [])
            .map_err(|e| anyhow!("OpenSSL: authentication failed: {e}"))?;
        ensure!(
            n + m == buf.len(),
            "OpenSSL opened {} of {} bytes",
            n + m,
            buf.len()
        );
        Ok(())
    }
}

/// ring 0.17: `LessSafeKey` (explicit nonce per call), in place with a separate tag.
pub struct RingAead(ring::aead::LessSafeKey);

impl RingAead {
    pub fn new(alg: AeadAlg, key: &[u8]) -> Result<Self> {
        let a = match alg {
            AeadAlg::Aes128Gcm => &ring::aead::AES_128_GCM,
            AeadAlg::ChaCha20Poly1305 => &ring::aead::CHACHA20_POLY1305,
        };
        let k = ring::aead::UnboundKey::new(a, key).map_err(|_| anyhow!("ring: bad key"))?;
        Ok(RingAead(ring::aead::LessSafeKey::new(k)))
    }
}

impl AeadImpl for RingAead {
    fn seal(
        &mut self,
        nonce: &[u8; NONCE_LEN],
        aad: &[u8],
        buf: &mut [u8],
    ) -> Result<[u8; TAG_LEN]> {
        let tag = self
            .0
            .seal_in_place_separate_tag(
                ring::aead::Nonce::assume_unique_for_key(*nonce),
                ring::aead::Aad::from(aad),
                buf,
            )
            .map_err(|_| anyhow!("ring: seal failed"))?;
        tag.as_ref().try_into().context("ring: tag length")
    }

    fn open(
        &mut self,
        nonce: &[u8; NONCE_LEN],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<()> {
        let tag = ring::aead::Tag::from(*tag);
        self.0
            .open_in_place_separate_tag(
                ring::aead::Nonce::assume_unique_for_key(*nonce),
                ring::aead::Aad::from(aad),
                tag,
                buf,
                0..,
            )
            .map_err(|_| anyhow!("ring: authentication failed"))?;
        Ok(())
    }
}

mod aws_lc {
    //! aws-lc-rs 1.x: `LessSafeKey`, the same API as ring's over AWS-LC.

    use super::*;
    use aws_lc_rs::aead;

    pub struct AwsLcAead(aead::LessSafeKey);

    pub fn make(alg: AeadAlg, key: &[u8]) -> Result<Made<Box<dyn AeadImpl>>> {
        let a = match alg {
            AeadAlg::Aes128Gcm => &aead::AES_128_GCM,
            AeadAlg::ChaCha20Poly1305 => &aead::CHACHA20_POLY1305,
        };
        let k = aead::UnboundKey::new(a, key).map_err(|_| anyhow!("aws-lc-rs: bad key"))?;
        Ok(Made::Ready(Box::new(AwsLcAead(aead::LessSafeKey::new(k)))))
    }

    impl AeadImpl for AwsLcAead {
        fn seal(
            &mut self,
            nonce: &[u8; NONCE_LEN],
            aad: &[u8],
            buf: &mut [u8],
        ) -> Result<[u8; TAG_LEN]> {
            let tag = self
                .0
                .seal_in_place_separate_tag(
                    aead::Nonce::assume_unique_for_key(*nonce),
                    aead::Aad::from(aad),
                    buf,
                )
                .map_err(|_| anyhow!("aws-lc-rs: seal failed"))?;
            tag.as_ref().try_into().context("aws-lc-rs: tag length")
        }

        fn open(
            &mut self,
            nonce: &[u8; NONCE_LEN],
            aad: &[u8],
            buf: &mut [u8],
            tag: &[u8; TAG_LEN],
        ) -> Result<()> {
            self.0
                .open_in_place_separate_tag(
                    aead::Nonce::assume_unique_for_key(*nonce),
                    aead::Aad::from(aad),
                    tag,
                    buf,
                )
                .map_err(|_| anyhow!("aws-lc-rs: authentication failed"))?;
            Ok(())
        }
    }
}

#[cfg(feature = "compare-crypto")]
mod rust_crypto {
    //! RustCrypto `aes-gcm` 0.11 and `chacha20poly1305` 0.11 (aead 0.6: `AeadInOut`,
    //! detached tag, in place).

    use super::*;
    use aes_gcm::aead::{AeadInOut, KeyInit};

    pub struct Rc<A>(A);

    pub fn make(alg: AeadAlg, key: &[u8]) -> Result<Made<Box<dyn AeadImpl>>> {
        Ok(Made::Ready(match alg {
            AeadAlg::Aes128Gcm => {
                Box::new(Rc(aes_gcm::Aes128Gcm::new_from_slice(key)
                    .map_err(|_| anyhow!("aes-gcm: bad key"))?))
            }
            AeadAlg::ChaCha20Poly1305 => {
                Box::new(Rc(chacha20poly1305::ChaCha20Poly1305::new_from_slice(key)
                    .map_err(|_| anyhow!("chacha20poly1305: bad key"))?))
            }
        }))
    }

    impl<A> AeadImpl for Rc<A>
    where
        A: AeadInOut<NonceSize = aes_gcm::aead::consts::U12, TagSize = aes_gcm::aead::consts::U16>,
    {
        fn seal(
            &mut self,
            nonce: &[u8; NONCE_LEN],
            aad: &[u8],
            buf: &mut [u8],
        ) -> Result<[u8; TAG_LEN]> {
            let tag = self
                .0
                .encrypt_inout_detached(&(*nonce).into(), aad, buf.into())
                .map_err(|_| anyhow!("RustCrypto: seal failed"))?;
            Ok(tag.into())
        }

        fn open(
            &mut self,
            nonce: &[u8; NONCE_LEN],
            aad: &[u8],
            buf: &mut [u8],
            tag: &[u8; TAG_LEN],
        ) -> Result<()> {
            self.0
                .decrypt_inout_detached(&(*nonce).into(), aad, buf.into(), &(*tag).into())
                .map_err(|_| anyhow!("RustCrypto: authentication failed"))
        }
    }
}

#[cfg(not(feature = "compare-crypto"))]
mod rust_crypto {
    use super::*;

    pub fn make(_: AeadAlg, _: &[u8]) -> Result<Made<Box<dyn AeadImpl>>> {
        Ok(Made::Unavailable(
            super::super::library::NEEDS_FEATURE.into(),
        ))
    }
}

/// Checks `imp` against OpenSSL on the same key, nonces, associated data and messages:
/// the same ciphertext and tag for messages of 0 to 16 KiB + 5 bytes; OpenSSL's output
/// opens; a flipped bit in the ciphertext, the tag, the associated data or the nonce is
/// rejected; the key still works after a rejection.
pub fn check_against_openssl(alg: AeadAlg, key: &[u8], imp: &mut dyn AeadImpl) -> Result<()> {
    let name = alg.name();
    let mut reference = OpensslAead::new(alg, key)?;
    let lens = [
        0usize, 1, 15, 16, 17, 63, 64, 65, 255, 1280, 1405, 16384, 16389,
    ];
    for (i, &len) in lens.iter().enumerate() {
        let msg = crate::ciphers::test_bytes(0xaead ^ ((i as u64) << 8), len);
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&crate::ciphers::test_bytes(
            0x6e6f6e6365 + i as u64,
            NONCE_LEN,
        ));
        let aad: &[u8] = if i % 3 == 0 {
            b""
        } else {
            &[0x17, 0x03, 0x03, 0x05, 0x1c][..(i % 6)]
        };
        let (mut want, mut got) = (msg.clone(), msg.clone());
        let want_tag = reference.seal(&nonce, aad, &mut want)?;
        let got_tag = imp.seal(&nonce, aad, &mut got)?;
        ensure!(
            got == want,
            "{name}: ciphertext of {len} bytes differs from OpenSSL's"
        );
        ensure!(
            got_tag == want_tag,
            "{name}: tag of a {len}-byte message differs from OpenSSL's"
        );
        ensure!(
            len == 0 || got != msg,
            "{name}: ciphertext equals the plaintext"
        );
        imp.open(&nonce, aad, &mut got, &want_tag)
            .with_context(|| format!("{name}: OpenSSL's {len}-byte record does not open"))?;
        ensure!(
            got == msg,
            "{name}: opening gives other bytes than the message"
        );
        // Tampering of every kind is rejected.
        let mut bad = want.clone();
        if len > 0 {
            bad[len / 2] ^= 0x01;
            ensure!(
                imp.open(&nonce, aad, &mut bad, &want_tag).is_err(),
                "{name}: a flipped ciphertext bit was accepted"
            );
        }
        let mut bad_tag = want_tag;
        bad_tag[TAG_LEN - 1] ^= 0x80;
        let mut c = want.clone();
        ensure!(
            imp.open(&nonce, aad, &mut c, &bad_tag).is_err(),
            "{name}: a flipped tag bit was accepted"
        );
        let mut other_nonce = nonce;
        other_nonce[0] ^= 1;
        let mut c = want.clone();
        ensure!(
            imp.open(&other_nonce, aad, &mut c, &want_tag).is_err(),
            "{name}: another nonce was accepted"
        );
        let mut other_aad = aad.to_vec();
        other_aad.push(0);
        let mut c = want.clone();
        ensure!(
            imp.open(&nonce, &other_aad, &mut c, &want_tag).is_err(),
            "{name}: other associated data was accepted"
        );
        // And the key still works after the rejections.
        let mut c = want.clone();
        imp.open(&nonce, aad, &mut c, &want_tag)
            .with_context(|| format!("{name}: the key fails after a rejected record"))?;
        ensure!(
            c == msg,
            "{name}: opening after a rejection gives other bytes"
        );
    }
    Ok(())
}
