//! Compact real-time datagrams (plane version 2; docs/PROTOCOL.md, "Compact real-time
//! datagrams"): a call's small datagram sent on every path costs 15 bytes per copy instead
//! of 35 + its address, so two copies stay within 2.2 times the datagram sent straight.
//!
//! ```text
//! offset  size  field (clear, the AEAD's associated data)
//! 0       1     type 0x05 + path id (0x05..=0x0c)
//! 1       3     receiver id, big-endian (receiver ids of a version 2 plane are below 2^24)
//! 4       2     low 16 bits of the datagram's sequence number, big-endian
//! 6       1     flow id (0..=254), announced by a full datagram of kind 04 first
//! 7       n     ciphertext of the application's bytes (at most 1,024)
//! 7+n     8     tag: the first 8 bytes of the AES-128-GCM tag (SP 800-38D's t = 64;
//!               RFC 4106's AES-GCM with an 8-octet ICV)
//!
//! rt_key_n = Expand-Label(dg_dir, "dg rt key", u64 n, 16)     n = seq >> 20
//! rt_iv    = Expand-Label(dg_dir, "dg rt iv", "", 12)
//! nonce    = rt_iv XOR (0^32 || u64 (path << 56 | seq))        seq < 2^56
//! ```
//!
//! Every copy of one datagram has its own nonce (its path id differs), and a sender never
//! seals a sequence number twice on one path. AES-128-GCM only: no standard truncates
//! Poly1305's tag, so ChaCha20-Poly1305 sessions keep the full format. `aws-lc-rs` seals
//! (the first 8 bytes of its tag are kept); it cannot verify a truncated tag, so opening
//! decrypts with AES-CTR from GCM's first counter block (`ctr`'s 32-bit big-endian counter,
//! GCM's inc32) and seals the plaintext again to compare the tags in constant time.

use super::keys::{DatagramKeys, EPOCH_LOG2};
pub use super::wire::MAX_FLOWS;
use super::wire::{Malformed, PathId, ReceiverId, MAX_PATHS};
use crate::cipher::Suite;
use crate::keys::{expand_label, IV_LEN, SECRET_LEN};
use aws_lc_rs::{aead, constant_time};
use ctr::cipher::{KeyIvInit, StreamCipher};
use ring::hkdf;
use std::fmt;
use zeroize::Zeroizing;

/// The first byte of a compact datagram on path 0; path `p`'s is `TYPE_BASE + p`. The
/// eight values 0x05..=0x0c lie in the range RFC 9443 leaves unassigned (4-15), apart from
/// WireGuard's 1-4 and the full format's 0x0e.
pub const TYPE_BASE: u8 = 0x05;
/// Type, receiver id (3), sequence number (2), flow id.
pub const HEADER_LEN: usize = 1 + 3 + 2 + 1;
/// The truncated tag.
pub const TAG_LEN: usize = 8;
/// Bytes a compact datagram adds to the application's: 15.
pub const OVERHEAD: usize = HEADER_LEN + TAG_LEN;
/// The largest application datagram sent compact: 64 AES blocks, inside the row of
/// SP 800-38D's table 2 for 64-bit tags that allows the most decryptions (2^32 under one
/// key for messages of at most 2^15 bytes).
pub const MAX_BODY: usize = 1024;
/// Receiver ids of a version 2 plane are at most this (24 bits).
pub const MAX_RECEIVER: ReceiverId = (1 << 24) - 1;
/// Sequence numbers at or above this are never sent compact (the nonce has 56 bits for it).
pub const MAX_SEQ: u64 = 1 << 56;
/// Failed authentications of compact datagrams after which a receiver stops opening them
/// for the rest of the session and tells the sender (kind 06): an attacker's forgeries are
/// bounded to 2^24 tries of 2^-64 each (far inside SP 800-38D's 2^32 per key for t = 64).
pub const FAILURE_LIMIT: u64 = 1 << 24;

/// Whether `first` is the first byte of a compact datagram.
pub fn is_compact(first: u8) -> bool {
    (TYPE_BASE..TYPE_BASE + MAX_PATHS as u8).contains(&first)
}

/// The clear header of a compact datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The receiver id (24 bits).
    pub receiver: ReceiverId,
    pub path: PathId,
    /// The low 16 bits of the sequence number.
    pub seq16: u16,
    pub flow: u8,
}

impl Header {
    /// The header's bytes (`receiver` below 2^24, `path` below [`MAX_PATHS`], `flow` below
    /// [`MAX_FLOWS`]: the sealer's checks).
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let r = self.receiver.to_be_bytes();
        let s = self.seq16.to_be_bytes();
        [
            TYPE_BASE + self.path,
            r[1],
            r[2],
            r[3],
            s[0],
            s[1],
            self.flow,
        ]
    }

    /// Reads a compact datagram's header, checking what can be checked without the key:
    /// the type, the length (header and tag at least, [`MAX_BODY`] of ciphertext at most)
    /// and the flow id.
    pub fn parse(datagram: &[u8]) -> Result<Header, Malformed> {
        if datagram.len() < OVERHEAD {
            return Err(Malformed::TooShort);
        }
        if datagram.len() > OVERHEAD + MAX_BODY {
            return Err(Malformed::TooLong);
        }
        if !is_compact(datagram[0]) {
            return Err(Malformed::NotADatagram);
        }
        if usize::from(datagram[6]) >= MAX_FLOWS {
            return Err(Malformed::Inner);
        }
        Ok(Header {
            receiver: u32::from_be_bytes([0, datagram[1], datagram[2], datagram[3]]),
            path: datagram[0] - TYPE_BASE,
            seq16: u16::from_be_bytes([datagram[4], datagram[5]]),
            flow: datagram[6],
        })
    }
}

type Aes128Ctr32 = ctr::Ctr32BE<aes::Aes128>;

/// One direction's compact keys: the direction's datagram secret, the IV, and the keys of
/// the last two epochs that opened (or sealed) a datagram.
pub struct CompactKeys {
    secret: Zeroizing<[u8; SECRET_LEN]>,
    iv: [u8; IV_LEN],
    cache: [Option<EpochKey>; 2],
}

struct EpochKey {
    epoch: u64,
    bytes: Zeroizing<[u8; 16]>,
    aead: aead::LessSafeKey,
}

/// A compact datagram did not authenticate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unauthentic;

impl CompactKeys {
    /// Whether a session with `keys` has compact keys: AES-128-GCM sessions only (no
    /// standard truncates ChaCha20-Poly1305's tag).
    pub fn available(keys: &DatagramKeys) -> bool {
        keys.suite() == Suite::Aes128
    }

    /// The outgoing direction's compact keys, where [`CompactKeys::available`].
    pub fn sending(keys: &DatagramKeys) -> Option<CompactKeys> {
        Self::available(keys).then(|| CompactKeys::new(keys.expose_send()))
    }

    /// The incoming direction's compact keys, as [`CompactKeys::sending`].
    pub fn receiving(keys: &DatagramKeys) -> Option<CompactKeys> {
        Self::available(keys).then(|| CompactKeys::new(keys.expose_recv()))
    }

    /// The keys of the direction whose datagram secret (`dg_c2s` or `dg_s2c`) is `secret`.
    pub fn new(secret: &[u8; SECRET_LEN]) -> CompactKeys {
        let prk = hkdf::Prk::new_less_safe(hkdf::HKDF_SHA256, secret);
        let mut iv = [0u8; IV_LEN];
        expand_label(&prk, "dg rt iv", &[], &mut iv);
        CompactKeys {
            secret: Zeroizing::new(*secret),
            iv,
            cache: [None, None],
        }
    }

    /// The AES-128 key of epoch `n` (for known-answer tests).
    pub fn epoch_key_bytes(&self, epoch: u64) -> Zeroizing<[u8; 16]> {
        let prk = hkdf::Prk::new_less_safe(hkdf::HKDF_SHA256, &self.secret[..]);
        let mut key = Zeroizing::new([0u8; 16]);
        expand_label(&prk, "dg rt key", &epoch.to_be_bytes(), &mut key[..]);
        key
    }

    /// The IV (for known-answer tests).
    pub fn iv(&self) -> [u8; IV_LEN] {
        self.iv
    }

    fn derive(&self, epoch: u64) -> EpochKey {
        let bytes = self.epoch_key_bytes(epoch);
        let unbound = aead::UnboundKey::new(&aead::AES_128_GCM, &bytes[..]).expect("a 16-byte key");
        EpochKey {
            epoch,
            bytes,
            aead: aead::LessSafeKey::new(unbound),
        }
    }

    fn cached(&self, epoch: u64) -> Option<usize> {
        self.cache
            .iter()
            .position(|e| matches!(e, Some(k) if k.epoch == epoch))
    }

    fn insert(&mut self, key: EpochKey) -> usize {
        let slot = match &self.cache {
            [None, _] => 0,
            [_, None] => 1,
            [Some(a), Some(b)] => usize::from(a.epoch > b.epoch),
        };
        self.cache[slot] = Some(key);
        slot
    }

    fn nonce(&self, path: PathId, seq: u64) -> [u8; IV_LEN] {
        let mut n = self.iv;
        let v = (u64::from(path) << 56) | seq;
        for (b, c) in n[IV_LEN - 8..].iter_mut().zip(v.to_be_bytes()) {
            *b ^= c;
        }
        n
    }

    /// Encrypts `body` in place for `path` and `seq` with the header `aad`; returns the
    /// truncated tag. The caller never seals one (`path`, `seq`) twice, keeps `seq` below
    /// [`MAX_SEQ`] and `body` at most [`MAX_BODY`] long.
    pub fn seal(&mut self, path: PathId, seq: u64, aad: &[u8], body: &mut [u8]) -> [u8; TAG_LEN] {
        debug_assert!(seq < MAX_SEQ && body.len() <= MAX_BODY);
        let slot = match self.cached(seq >> EPOCH_LOG2) {
            Some(s) => s,
            None => {
                let k = self.derive(seq >> EPOCH_LOG2);
                self.insert(k)
            }
        };
        let nonce = aead::Nonce::assume_unique_for_key(self.nonce(path, seq));
        let Some(k) = &self.cache[slot] else {
            unreachable!("the slot was just filled")
        };
        let tag = k
            .aead
            .seal_in_place_separate_tag(nonce, aead::Aad::from(aad), body)
            .expect("a compact body is far below the AEAD's limit");
        let mut out = [0u8; TAG_LEN];
        out.copy_from_slice(&tag.as_ref()[..TAG_LEN]);
        out
    }

    /// Decrypts `ciphertext || tag` in place; on success the plaintext is the first
    /// `sealed.len() - TAG_LEN` bytes. A datagram that fails leaves zeros.
    pub fn open(
        &mut self,
        path: PathId,
        seq: u64,
        aad: &[u8],
        sealed: &mut [u8],
    ) -> Result<usize, Unauthentic> {
        let Some(n) = sealed.len().checked_sub(TAG_LEN) else {
            return Err(Unauthentic);
        };
        if n > MAX_BODY || seq >= MAX_SEQ {
            return Err(Unauthentic);
        }
        let epoch = seq >> EPOCH_LOG2;
        let fresh = match self.cached(epoch) {
            Some(_) => None,
            None => Some(self.derive(epoch)),
        };
        let key = match (&fresh, self.cached(epoch)) {
            (Some(k), _) => k,
            (None, Some(slot)) => self.cache[slot].as_ref().expect("cached() found it"),
            (None, None) => unreachable!("derived above when not cached"),
        };
        let nonce = self.nonce(path, seq);
        let (body, tag) = sealed.split_at_mut(n);
        // GCM's keystream starts at inc32(J0) = IV || 00000002 for a 96-bit IV.
        let mut block = [0u8; 16];
        block[..IV_LEN].copy_from_slice(&nonce);
        block[15] = 2;
        let mut ctr = Aes128Ctr32::new(key.bytes[..].into(), (&block).into());
        ctr.apply_keystream(body);
        // The tag of this plaintext under this nonce; sealing a copy recomputes it.
        let mut again = Zeroizing::new([0u8; MAX_BODY]);
        again[..n].copy_from_slice(body);
        let want = key
            .aead
            .seal_in_place_separate_tag(
                aead::Nonce::assume_unique_for_key(nonce),
                aead::Aad::from(aad),
                &mut again[..n],
            )
            .expect("a compact body is far below the AEAD's limit");
        if constant_time::verify_slices_are_equal(&want.as_ref()[..TAG_LEN], tag).is_err() {
            body.fill(0);
            return Err(Unauthentic);
        }
        if let Some(k) = fresh {
            self.insert(k);
        }
        Ok(n)
    }
}

impl fmt::Debug for CompactKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompactKeys").finish_non_exhaustive()
    }
}

#[cfg(test)]
#[path = "compact_tests.rs"]
mod tests;
