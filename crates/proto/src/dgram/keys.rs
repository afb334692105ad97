//! The datagram plane's keys, from the session's key schedule (docs/PROTOCOL.md, "Datagram
//! plane"): one secret per direction, expanded from that direction's first traffic secret
//! with a label of its own, and from it one AEAD key per epoch of 2^20 datagrams and one IV.
//! No key byte is ever sent: both ends derive the same keys from the handshake.
//!
//! ```text
//! dg_c2s = Expand-Label(c2s_0, "dg c2s", "", 32)     dg_s2c = Expand-Label(s2c_0, "dg s2c", "", 32)
//! key_n  = Expand-Label(dg_dir, "dg key", u64 n, 16 | 32)      n = counter >> 20
//! iv     = Expand-Label(dg_dir, "dg iv", "", 12)
//! nonce  = iv XOR (0^32 || u64 counter)
//! ```
//!
//! The AEAD is the session's suite: AES-128-GCM or ChaCha20-Poly1305, from `aws-lc-rs`.

use crate::cipher::{Suite, AEAD_TAG_LEN};
use crate::keys::{datagram_secret, expand_label, TrafficSecret, IV_LEN, SECRET_LEN};
use aws_lc_rs::aead;
use ring::hkdf;
use std::fmt;
use zeroize::Zeroizing;

/// Datagrams per key: 2^20. At the largest datagram (4,094 AES blocks) a key then covers
/// 2^32 blocks, far below the 2^34.5 RFC 8446 section 5.5 allows AES-GCM under one key.
pub const EPOCH_LOG2: u32 = 20;

/// Counters at or above this are refused by both ends (as WireGuard's REJECT_AFTER_MESSAGES):
/// `counter + 1` and the replay window's arithmetic never overflow.
pub const REJECT_AFTER: u64 = u64::MAX - (1 << 13);

/// A session's datagram keys, both directions, for one end (client or server): what
/// [`crate::Session::datagram_keys`] gives. Cheap to clone; the secrets are wiped when
/// dropped and never printed.
#[derive(Clone)]
pub struct DatagramKeys {
    suite: Suite,
    send: Zeroizing<[u8; SECRET_LEN]>,
    recv: Zeroizing<[u8; SECRET_LEN]>,
    client: bool,
}

impl DatagramKeys {
    /// The client's keys, from the session's first traffic secrets (c2s_0, s2c_0).
    pub fn client(suite: Suite, c2s: &TrafficSecret, s2c: &TrafficSecret) -> DatagramKeys {
        DatagramKeys {
            suite,
            send: datagram_secret(c2s, "dg c2s"),
            recv: datagram_secret(s2c, "dg s2c"),
            client: true,
        }
    }

    /// The server's keys, from the same secrets: it sends with `dg s2c`, receives `dg c2s`.
    pub fn server(suite: Suite, c2s: &TrafficSecret, s2c: &TrafficSecret) -> DatagramKeys {
        DatagramKeys {
            suite,
            send: datagram_secret(s2c, "dg s2c"),
            recv: datagram_secret(c2s, "dg c2s"),
            client: false,
        }
    }

    /// The AEAD of both directions.
    pub fn suite(&self) -> Suite {
        self.suite
    }

    /// Whether these are the client's keys.
    pub fn is_client(&self) -> bool {
        self.client
    }

    /// The outgoing direction's keys.
    pub fn sending(&self) -> DirectionKeys {
        DirectionKeys::new(self.suite, &self.send)
    }

    /// The incoming direction's keys.
    pub fn receiving(&self) -> DirectionKeys {
        DirectionKeys::new(self.suite, &self.recv)
    }

    /// The incoming direction's secret (`dg_s2c` for a client), for the compact keys.
    pub(crate) fn expose_recv(&self) -> &[u8; SECRET_LEN] {
        &self.recv
    }

    /// The outgoing direction's secret (`dg_c2s` for a client), for known-answer tests.
    pub fn expose_send(&self) -> &[u8; SECRET_LEN] {
        &self.send
    }
}

impl fmt::Debug for DatagramKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DatagramKeys")
            .field("suite", &self.suite)
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

/// The datagram authentication failed (wrong key, altered bytes, forged).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unauthentic;

/// One direction's AEAD: the direction's secret, its IV, and the keys of the last two
/// epochs used (a receiver sees datagrams of the epoch before while the window spans the
/// change). A key enters the cache only after it opened a datagram, so forged counters of
/// other epochs cost one key derivation each and displace nothing.
pub struct DirectionKeys {
    suite: Suite,
    secret: Zeroizing<[u8; SECRET_LEN]>,
    iv: [u8; IV_LEN],
    cache: [Option<(u64, aead::LessSafeKey)>; 2],
}

impl DirectionKeys {
    fn new(suite: Suite, secret: &[u8; SECRET_LEN]) -> DirectionKeys {
        let prk = hkdf::Prk::new_less_safe(hkdf::HKDF_SHA256, secret);
        let mut iv = [0u8; IV_LEN];
        expand_label(&prk, "dg iv", &[], &mut iv);
        DirectionKeys {
            suite,
            secret: Zeroizing::new(*secret),
            iv,
            cache: [None, None],
        }
    }

    /// The key of epoch `n`, as bytes (for known-answer tests; the AEAD keys are made from
    /// them).
    pub fn epoch_key_bytes(&self, epoch: u64) -> Zeroizing<Vec<u8>> {
        let prk = hkdf::Prk::new_less_safe(hkdf::HKDF_SHA256, &self.secret[..]);
        let mut key = Zeroizing::new(vec![0u8; self.suite.key_len()]);
        expand_label(&prk, "dg key", &epoch.to_be_bytes(), &mut key);
        key
    }

    /// The direction's IV.
    pub fn iv(&self) -> [u8; IV_LEN] {
        self.iv
    }

    fn derive(&self, epoch: u64) -> aead::LessSafeKey {
        let alg = match self.suite {
            Suite::Aes128 => &aead::AES_128_GCM,
            Suite::ChaCha20 => &aead::CHACHA20_POLY1305,
        };
        let key = self.epoch_key_bytes(epoch);
        let unbound = aead::UnboundKey::new(alg, &key).expect("key length matches the suite");
        aead::LessSafeKey::new(unbound)
    }

    fn cached(&self, epoch: u64) -> Option<usize> {
        self.cache
            .iter()
            .position(|e| matches!(e, Some((n, _)) if *n == epoch))
    }

    /// Puts epoch `n`'s key in the cache, in place of the lower epoch of the two (the
    /// highest epoch, where the counters are, stays).
    fn insert(&mut self, epoch: u64, key: aead::LessSafeKey) -> usize {
        let slot = match &self.cache {
            [None, _] => 0,
            [_, None] => 1,
            [Some((a, _)), Some((b, _))] => usize::from(a > b),
        };
        self.cache[slot] = Some((epoch, key));
        slot
    }

    fn nonce(&self, counter: u64) -> aead::Nonce {
        let mut n = self.iv;
        for (b, c) in n[IV_LEN - 8..].iter_mut().zip(counter.to_be_bytes()) {
            *b ^= c;
        }
        aead::Nonce::assume_unique_for_key(n)
    }

    /// Encrypts `in_out` in place under `counter`'s epoch key and nonce, with `aad`, and
    /// returns the tag. The caller never reuses a counter.
    pub fn seal(&mut self, counter: u64, aad: &[u8], in_out: &mut [u8]) -> [u8; AEAD_TAG_LEN] {
        let epoch = counter >> EPOCH_LOG2;
        let slot = match self.cached(epoch) {
            Some(s) => s,
            None => {
                let k = self.derive(epoch);
                self.insert(epoch, k)
            }
        };
        let nonce = self.nonce(counter);
        let Some((_, key)) = &self.cache[slot] else {
            unreachable!("the slot was just filled")
        };
        let tag = key
            .seal_in_place_separate_tag(nonce, aead::Aad::from(aad), in_out)
            .expect("datagrams are far below the AEAD's length limit");
        let mut out = [0u8; AEAD_TAG_LEN];
        out.copy_from_slice(tag.as_ref());
        out
    }

    /// Decrypts `ciphertext || tag` in place; on success returns the plaintext's length
    /// (its first bytes). Nothing is kept of a datagram that fails.
    pub fn open(
        &mut self,
        counter: u64,
        aad: &[u8],
        sealed: &mut [u8],
    ) -> Result<usize, Unauthentic> {
        let epoch = counter >> EPOCH_LOG2;
        let nonce = self.nonce(counter);
        match self.cached(epoch) {
            Some(slot) => {
                let Some((_, key)) = &self.cache[slot] else {
                    unreachable!("cached() found the slot filled")
                };
                key.open_in_place(nonce, aead::Aad::from(aad), sealed)
                    .map(|p| p.len())
                    .map_err(|_| Unauthentic)
            }
            None => {
                let key = self.derive(epoch);
                let n = key
                    .open_in_place(nonce, aead::Aad::from(aad), sealed)
                    .map(|p| p.len())
                    .map_err(|_| Unauthentic)?;
                self.insert(epoch, key);
                Ok(n)
            }
        }
    }
}

impl fmt::Debug for DirectionKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DirectionKeys")
            .field("suite", &self.suite)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{Schedule, Secrets};

    fn secrets() -> (TrafficSecret, TrafficSecret) {
        Schedule::new(
            &Secrets {
                kem: &[1; 32],
                dh: &[2; 32],
                r_c: &[3; 32],
            },
            b"hello",
            b"accept",
        )
        .traffic()
    }

    /// The client's sending keys are the server's receiving keys and the other way round;
    /// the two directions differ, and differ from the session's own record keys.
    #[test]
    fn the_two_ends_agree_and_the_directions_differ() {
        let (c2s, s2c) = secrets();
        for suite in [Suite::Aes128, Suite::ChaCha20] {
            let c = DatagramKeys::client(suite, &c2s, &s2c);
            let s = DatagramKeys::server(suite, &c2s, &s2c);
            assert_eq!(c.send[..], s.recv[..]);
            assert_eq!(c.recv[..], s.send[..]);
            assert_ne!(c.send[..], c.recv[..]);
            let (record_key, record_iv) = c2s.key_iv(suite.key_len());
            let dk = c.sending();
            assert_eq!(dk.epoch_key_bytes(0).len(), suite.key_len());
            assert_ne!(dk.epoch_key_bytes(0)[..], record_key[..]);
            assert_ne!(dk.iv(), record_iv);
            assert_ne!(dk.epoch_key_bytes(0)[..], dk.epoch_key_bytes(1)[..]);
            // Sealed by one end, opened by the other.
            let mut tx = c.sending();
            let mut rx = s.receiving();
            let mut buf = b"a datagram".to_vec();
            let tag = tx.seal(5, b"ad", &mut buf);
            buf.extend_from_slice(&tag);
            assert_eq!(rx.open(5, b"ad", &mut buf), Ok(10));
            assert_eq!(&buf[..10], b"a datagram");
        }
    }

    /// Datagrams of several epochs open in any order; a datagram under the wrong counter
    /// (another nonce or another epoch's key) fails, and a failure caches nothing.
    #[test]
    fn epochs_and_counters_bind_the_key() {
        let (c2s, s2c) = secrets();
        let c = DatagramKeys::client(Suite::Aes128, &c2s, &s2c);
        let s = DatagramKeys::server(Suite::Aes128, &c2s, &s2c);
        let mut tx = c.sending();
        let mut rx = s.receiving();
        let counters = [
            0u64,
            1,
            (1 << EPOCH_LOG2) - 1,
            1 << EPOCH_LOG2,
            5 << EPOCH_LOG2,
        ];
        let mut sealed = Vec::new();
        for &n in &counters {
            let mut b = n.to_be_bytes().to_vec();
            let t = tx.seal(n, &[], &mut b);
            b.extend_from_slice(&t);
            sealed.push((n, b));
        }
        for (n, b) in sealed.iter().rev() {
            let mut wrong = b.clone();
            assert_eq!(rx.open(n ^ 1, &[], &mut wrong), Err(Unauthentic));
            let mut other_epoch = b.clone();
            assert_eq!(
                rx.open(n ^ (1 << EPOCH_LOG2), &[], &mut other_epoch),
                Err(Unauthentic)
            );
            let mut ok = b.clone();
            assert_eq!(rx.open(*n, &[], &mut ok), Ok(8), "counter {n}");
            assert_eq!(&ok[..8], &n.to_be_bytes());
        }
        // The highest epoch (5) stays cached; the other slot holds the last other epoch
        // that opened a datagram (0).
        let mut cached: Vec<u64> = rx.cache.iter().flatten().map(|(e, _)| *e).collect();
        cached.sort();
        assert_eq!(cached, vec![0, 5]);
    }

    #[test]
    fn keys_do_not_print() {
        let (c2s, s2c) = secrets();
        let k = DatagramKeys::client(Suite::ChaCha20, &c2s, &s2c);
        assert_eq!(
            format!("{k:?} {:?}", k.sending()),
            "DatagramKeys { suite: ChaCha20, client: true, .. } DirectionKeys { suite: ChaCha20, .. }"
        );
    }
}
