//! The cipher baselines, all from OpenSSL through the `openssl` crate: the papers'
//! block ciphers (DES, TDEA, AES in ECB, AES-128-CBC) and the modern choices (AES-GCM,
//! ChaCha20-Poly1305, AES-CTR).
//!
//! Each baseline keeps one encryption and one decryption context for its whole life and
//! only re-initialises the IV/nonce per message (no key schedule, no allocation per
//! message), as a real implementation would. One round trip = encrypt the message into
//! a ciphertext buffer (plus a 16-byte tag for AEADs) and decrypt it into a plaintext
//! buffer (AEADs verify the tag). Every message gets a fresh IV/nonce from a counter.

use crate::subject::Subject;
use anyhow::{anyhow, bail, ensure, Context, Result};
use openssl::cipher::{Cipher, CipherRef};
use openssl::cipher_ctx::CipherCtx;
use openssl::provider::Provider;
use std::sync::OnceLock;

/// Length of an AEAD tag.
pub const TAG_LEN: usize = 16;

/// The library name and version OpenSSL reports at run time.
pub fn library_version() -> String {
    openssl::version::version().to_string()
}

/// Load OpenSSL 3's legacy provider (for DES) once, keeping the default provider.
/// Returns the reason when it cannot be loaded.
pub fn legacy_provider() -> Result<(), String> {
    static LEGACY: OnceLock<Result<Provider, String>> = OnceLock::new();
    match LEGACY.get_or_init(|| {
        Provider::try_load(None, "legacy", true)
            .map_err(|e| format!("OpenSSL legacy provider not available: {e}"))
    }) {
        Ok(_) => Ok(()),
        Err(e) => Err(e.clone()),
    }
}

/// Kind of a cipher baseline: how a message is processed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// No IV (ECB).
    Ecb,
    /// IV per message (CBC, CTR): `iv_len` bytes, counter in the first 8.
    Iv,
    /// AEAD with a 12-byte nonce and a 16-byte tag.
    Aead,
}

/// One OpenSSL cipher baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CipherSpec {
    /// Name in the report (`aes-128-gcm`).
    pub name: &'static str,
    /// OpenSSL algorithm name (`AES-128-GCM`).
    pub openssl_name: &'static str,
    pub mode: Mode,
    /// Needs the legacy provider.
    pub legacy: bool,
}

/// All cipher baselines, in report order.
pub const CIPHERS: &[CipherSpec] = &[
    CipherSpec {
        name: "des-ecb",
        openssl_name: "DES-ECB",
        mode: Mode::Ecb,
        legacy: true,
    },
    CipherSpec {
        name: "tdea-ecb",
        openssl_name: "DES-EDE3-ECB",
        mode: Mode::Ecb,
        legacy: false,
    },
    CipherSpec {
        name: "aes-128-ecb",
        openssl_name: "AES-128-ECB",
        mode: Mode::Ecb,
        legacy: false,
    },
    CipherSpec {
        name: "aes-192-ecb",
        openssl_name: "AES-192-ECB",
        mode: Mode::Ecb,
        legacy: false,
    },
    CipherSpec {
        name: "aes-256-ecb",
        openssl_name: "AES-256-ECB",
        mode: Mode::Ecb,
        legacy: false,
    },
    CipherSpec {
        name: "aes-128-cbc",
        openssl_name: "AES-128-CBC",
        mode: Mode::Iv,
        legacy: false,
    },
    CipherSpec {
        name: "aes-128-gcm",
        openssl_name: "AES-128-GCM",
        mode: Mode::Aead,
        legacy: false,
    },
    CipherSpec {
        name: "aes-256-gcm",
        openssl_name: "AES-256-GCM",
        mode: Mode::Aead,
        legacy: false,
    },
    CipherSpec {
        name: "chacha20-poly1305",
        openssl_name: "ChaCha20-Poly1305",
        mode: Mode::Aead,
        legacy: false,
    },
    CipherSpec {
        name: "aes-128-ctr",
        openssl_name: "AES-128-CTR",
        mode: Mode::Iv,
        legacy: false,
    },
];

/// Find a cipher baseline by report name.
pub fn spec(name: &str) -> Option<&'static CipherSpec> {
    CIPHERS.iter().find(|c| c.name == name)
}

/// A live cipher baseline: two contexts and the buffers of one message.
pub struct CipherSubject {
    spec: CipherSpec,
    enc: CipherCtx,
    dec: CipherCtx,
    iv: Vec<u8>,
    counter: u64,
    ct: Vec<u8>,
    pt: Vec<u8>,
    tag: [u8; TAG_LEN],
    tail: [u8; 32],
}

pub use crate::bytes::test_bytes;

impl CipherSubject {
    /// Set up the baseline for messages of up to `max_len` bytes. Fails (with the reason)
    /// when OpenSSL cannot provide the cipher, e.g. DES without the legacy provider.
    pub fn new(spec: &CipherSpec, max_len: usize) -> Result<Self> {
        if spec.legacy {
            legacy_provider().map_err(|e| anyhow!(e))?;
        }
        let cipher = Cipher::fetch(None, spec.openssl_name, None)
            .with_context(|| format!("OpenSSL cannot provide {}", spec.openssl_name))?;
        let c: &CipherRef = &cipher;
        let key = test_bytes(0x006b_6579 ^ spec.name.len() as u64, c.key_length());
        let iv = vec![0u8; c.iv_length()];
        let iv_opt = if spec.mode == Mode::Ecb {
            None
        } else {
            Some(&iv[..])
        };
        let mut enc = CipherCtx::new()?;
        enc.encrypt_init(Some(c), Some(&key), iv_opt)
            .with_context(|| format!("{}: encryption init", spec.openssl_name))?;
        let mut dec = CipherCtx::new()?;
        dec.decrypt_init(Some(c), Some(&key), iv_opt)
            .with_context(|| format!("{}: decryption init", spec.openssl_name))?;
        if spec.mode != Mode::Aead {
            enc.set_padding(false);
            dec.set_padding(false);
        }
        if spec.mode == Mode::Aead {
            ensure!(
                iv.len() == 12,
                "{}: expected a 12-byte nonce",
                spec.openssl_name
            );
        }
        Ok(CipherSubject {
            spec: *spec,
            enc,
            dec,
            iv,
            counter: 0,
            ct: vec![0; max_len + 32],
            pt: vec![0; max_len + 32],
            tag: [0; TAG_LEN],
            tail: [0; 32],
        })
    }

    fn next_iv(&mut self) {
        self.counter += 1;
        if self.iv.len() >= 8 {
            self.iv[..8].copy_from_slice(&self.counter.to_le_bytes());
        }
    }

    /// Encrypt `data` into the ciphertext buffer (AEAD: and the tag).
    pub fn seal(&mut self, data: &[u8]) -> Result<()> {
        if data.len() + 32 > self.ct.len() {
            bail!("message of {} bytes larger than the buffers", data.len());
        }
        match self.spec.mode {
            Mode::Ecb => self.enc.encrypt_init(None, None, None)?,
            Mode::Iv | Mode::Aead => {
                self.next_iv();
                self.enc.encrypt_init(None, None, Some(&self.iv))?
            }
        }
        let n = self.enc.cipher_update(data, Some(&mut self.ct))?;
        let m = self.enc.cipher_final(&mut self.tail)?;
        ensure!(
            n + m == data.len(),
            "{}: ciphertext length {} != {}",
            self.spec.name,
            n + m,
            data.len()
        );
        if self.spec.mode == Mode::Aead {
            self.enc.tag(&mut self.tag)?;
        }
        Ok(())
    }

    /// Decrypt the first `len` ciphertext bytes into the plaintext buffer (AEAD: verify
    /// the tag; a wrong tag is an error).
    pub fn open(&mut self, len: usize) -> Result<()> {
        match self.spec.mode {
            Mode::Ecb => self.dec.decrypt_init(None, None, None)?,
            Mode::Iv | Mode::Aead => self.dec.decrypt_init(None, None, Some(&self.iv))?,
        }
        let n = self
            .dec
            .cipher_update(&self.ct[..len], Some(&mut self.pt))?;
        if self.spec.mode == Mode::Aead {
            self.dec.set_tag(&self.tag)?;
        }
        let m = self
            .dec
            .cipher_final(&mut self.tail)
            .map_err(|e| anyhow!("{}: authentication failed: {e}", self.spec.name))?;
        ensure!(
            n + m == len,
            "{}: plaintext length {} != {}",
            self.spec.name,
            n + m,
            len
        );
        Ok(())
    }

    /// The ciphertext of the last message (without tag).
    pub fn ciphertext(&self, len: usize) -> &[u8] {
        &self.ct[..len]
    }

    /// The plaintext recovered from the last message.
    pub fn plaintext(&self, len: usize) -> &[u8] {
        &self.pt[..len]
    }

    /// Flip one ciphertext bit (for the authentication check).
    fn corrupt(&mut self, at: usize) {
        self.ct[at] ^= 0x01;
    }
}

impl Subject for CipherSubject {
    fn name(&self) -> &str {
        self.spec.name
    }

    fn round_trip(&mut self, data: &mut [u8]) -> Result<()> {
        self.seal(data)?;
        self.open(data.len())
    }

    fn verify(&mut self, len: usize) -> Result<()> {
        let name = self.spec.name;
        for seed in 1..=3u64 {
            let msg = test_bytes(seed * 7919, len);
            let mut buf = msg.clone();
            self.round_trip(&mut buf)?;
            ensure!(
                self.plaintext(len) == &msg[..],
                "{name}: decryption does not give back the message"
            );
            ensure!(
                self.ciphertext(len) != &msg[..],
                "{name}: ciphertext equals the plaintext"
            );
        }
        // A fresh IV/nonce per message: the same message twice must give different
        // ciphertexts except in ECB.
        let msg = test_bytes(99, len);
        self.seal(&msg)?;
        let first = self.ciphertext(len).to_vec();
        self.seal(&msg)?;
        let same = self.ciphertext(len) == &first[..];
        match self.spec.mode {
            Mode::Ecb => ensure!(same, "{name}: ECB is not deterministic"),
            _ => ensure!(
                !same,
                "{name}: the IV/nonce does not change between messages"
            ),
        }
        if self.spec.mode == Mode::Aead {
            self.seal(&msg)?;
            self.corrupt(len / 2);
            ensure!(
                self.open(len).is_err(),
                "{name}: a corrupted ciphertext was accepted"
            );
            // And the context still works afterwards.
            let mut buf = msg.clone();
            self.round_trip(&mut buf)?;
            ensure!(
                self.plaintext(len) == &msg[..],
                "{name}: round trip fails after a rejected message"
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cipher_round_trips_and_verifies() {
        for spec in CIPHERS {
            let mut s = match CipherSubject::new(spec, 4096) {
                Ok(s) => s,
                Err(e) if spec.legacy => {
                    eprintln!("{}: unavailable here: {e:#}", spec.name);
                    continue;
                }
                Err(e) => panic!("{}: {e:#}", spec.name),
            };
            s.verify(1280)
                .unwrap_or_else(|e| panic!("{}: {e:#}", spec.name));
            // A bulk-sized message through the same contexts.
            let msg = test_bytes(5, 4096);
            let mut buf = msg.clone();
            s.round_trip(&mut buf).unwrap();
            assert_eq!(s.plaintext(4096), &msg[..], "{}", spec.name);
        }
    }

    #[test]
    fn known_answer_aes_128_ecb() {
        // FIPS-197 appendix C.1.
        let key = hex("000102030405060708090a0b0c0d0e0f");
        let pt = hex("00112233445566778899aabbccddeeff");
        let mut ctx = CipherCtx::new().unwrap();
        ctx.encrypt_init(Some(Cipher::aes_128_ecb()), Some(&key), None)
            .unwrap();
        ctx.set_padding(false);
        let mut out = [0u8; 32];
        let n = ctx.cipher_update(&pt, Some(&mut out)).unwrap();
        assert_eq!(&out[..n], &hex("69c4e0d86a7b0430d8cdb78070b4c55a")[..]);
    }

    #[test]
    fn oversized_message_is_an_error_not_a_panic() {
        let mut s = CipherSubject::new(spec("aes-128-gcm").unwrap(), 64).unwrap();
        let mut big = vec![0u8; 1000];
        assert!(s.round_trip(&mut big).is_err());
    }

    #[test]
    fn library_version_names_openssl() {
        assert!(
            library_version().contains("OpenSSL"),
            "{}",
            library_version()
        );
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }
}
