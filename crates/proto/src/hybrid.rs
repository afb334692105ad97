//! The post-quantum half of the hybrid key agreement of `stream` and `aead`: ML-KEM-768
//! (FIPS 203, RustCrypto `ml-kem`) beside X25519, laid out as TLS's X25519MLKEM768 lays
//! them out (draft-ietf-tls-ecdhe-mlkem): the client's share is the ML-KEM encapsulation
//! key followed by its X25519 share, the server's the ML-KEM ciphertext followed by its
//! X25519 share, and the shared secrets enter the key schedule as ML-KEM's then X25519's.
//! Nothing here is new cryptography; randomness comes from the caller (sans-IO).

use ml_kem::kem::{Decapsulate, KeyExport};
use ml_kem::{ml_kem_768, Seed};
use std::fmt;
use zeroize::Zeroizing;

/// Length of an ML-KEM-768 encapsulation key.
pub const MLKEM_EK_LEN: usize = 1184;
/// Length of an ML-KEM-768 ciphertext.
pub const MLKEM_CT_LEN: usize = 1088;
/// Length of the client's ML-KEM seed (`d || z` of FIPS 203 ML-KEM.KeyGen_internal).
pub const MLKEM_SEED_LEN: usize = 64;
/// Length of the server's encapsulation randomness (`m` of ML-KEM.Encaps_internal).
pub const MLKEM_RAND_LEN: usize = 32;
/// Length of an ML-KEM shared secret.
pub const MLKEM_SS_LEN: usize = 32;

/// The client's ML-KEM decapsulation key (wiped when dropped, by the crate).
pub struct Decapsulator(ml_kem_768::DecapsulationKey);

impl fmt::Debug for Decapsulator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Decapsulator(..)")
    }
}

/// The key pair of `seed` (`d || z`): the decapsulation key and the encoded encapsulation
/// key (FIPS 203 ML-KEM.KeyGen_internal).
pub fn keypair(seed: &[u8; MLKEM_SEED_LEN]) -> (Decapsulator, [u8; MLKEM_EK_LEN]) {
    let mut s = Seed::default();
    s.copy_from_slice(seed);
    let dk = ml_kem_768::DecapsulationKey::from_seed(s);
    zeroize::Zeroize::zeroize(s.as_mut_slice());
    let mut ek = [0u8; MLKEM_EK_LEN];
    ek.copy_from_slice(dk.encapsulation_key().to_bytes().as_slice());
    (Decapsulator(dk), ek)
}

/// The encapsulation key was refused (FIPS 203 7.2's modulus check).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidEncapsulationKey;

/// Encapsulates to `ek` with the randomness `m` (FIPS 203 ML-KEM.Encaps_internal, after
/// the input check of ML-KEM.Encaps): the ciphertext and the shared secret.
pub fn encapsulate(
    ek: &[u8],
    m: &[u8; MLKEM_RAND_LEN],
) -> Result<([u8; MLKEM_CT_LEN], Zeroizing<[u8; MLKEM_SS_LEN]>), InvalidEncapsulationKey> {
    let key = ml_kem::Key::<ml_kem_768::EncapsulationKey>::try_from(ek)
        .map_err(|_| InvalidEncapsulationKey)?;
    let ek = ml_kem_768::EncapsulationKey::new(&key).map_err(|_| InvalidEncapsulationKey)?;
    let mut mm = ml_kem::B32::default();
    mm.copy_from_slice(m);
    let (ct, mut k) = ek.encapsulate_deterministic(&mm);
    zeroize::Zeroize::zeroize(mm.as_mut_slice());
    let mut out = [0u8; MLKEM_CT_LEN];
    out.copy_from_slice(ct.as_slice());
    let mut ss = Zeroizing::new([0u8; MLKEM_SS_LEN]);
    ss.copy_from_slice(k.as_slice());
    zeroize::Zeroize::zeroize(k.as_mut_slice());
    Ok((out, ss))
}

impl Decapsulator {
    /// The shared secret of ciphertext `ct` (FIPS 203 ML-KEM.Decaps: a ciphertext not made
    /// for this key gives an unrelated secret, never an error, so the key confirmation fails).
    pub fn decapsulate(&self, ct: &[u8; MLKEM_CT_LEN]) -> Zeroizing<[u8; MLKEM_SS_LEN]> {
        let ct = ml_kem_768::Ciphertext::try_from(&ct[..]).expect("the length is the type's");
        let mut k = self.0.decapsulate(&ct);
        let mut ss = Zeroizing::new([0u8; MLKEM_SS_LEN]);
        ss.copy_from_slice(k.as_slice());
        zeroize::Zeroize::zeroize(k.as_mut_slice());
        ss
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::digest;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    fn sha256(b: &[u8]) -> String {
        hex(digest::digest(&digest::SHA256, b).as_ref())
    }

    /// Known answers for ML-KEM-768 from an independent implementation of FIPS 203 (the
    /// pure-Python `kyber-py` 1.2.0, `ML_KEM_768._keygen_internal(d, z)` and
    /// `_encaps_internal(ek, m)`), for d = 00..1f, z = 20..3f, m = 40..5f: the SHA-256 of
    /// the encapsulation key and of the ciphertext, and the shared secret.
    #[test]
    fn mlkem768_known_answer() {
        let seed: [u8; 64] = std::array::from_fn(|i| i as u8);
        let m: [u8; 32] = std::array::from_fn(|i| 0x40 + i as u8);
        let (dk, ek) = keypair(&seed);
        assert_eq!(sha256(&ek), KAT_EK_SHA256);
        let (ct, ss) = encapsulate(&ek, &m).unwrap();
        assert_eq!(sha256(&ct), KAT_CT_SHA256);
        assert_eq!(hex(&ss[..]), KAT_SS);
        assert_eq!(dk.decapsulate(&ct)[..], ss[..]);
        // Implicit rejection: another ciphertext gives another secret, no error.
        let mut bad = ct;
        bad[0] ^= 1;
        assert_ne!(dk.decapsulate(&bad)[..], ss[..]);
    }

    #[test]
    fn a_key_with_coefficients_out_of_range_is_refused() {
        let (_, mut ek) = keypair(&[9; 64]);
        // The first 12-bit coefficient set to 4095 (>= q = 3329).
        ek[0] = 0xff;
        ek[1] |= 0x0f;
        assert_eq!(
            encapsulate(&ek, &[1; 32]).unwrap_err(),
            InvalidEncapsulationKey
        );
        assert!(encapsulate(&ek[..100], &[1; 32]).is_err());
    }

    const KAT_EK_SHA256: &str = "0b7934c83125c788995e2ba6bd761e33046b3e40571be53e023309a29f398cc9";
    const KAT_CT_SHA256: &str = "dbf4e9aa48b078ad46ec1c9c47bda8c2d2fec9d0e7a21bd48d2238a2abedb856";
    const KAT_SS: &str = "9cddd089ffe70e3996e76f7c8d06746df34d07e8657bc0fcf2bb0e1c3084aea1";
}
