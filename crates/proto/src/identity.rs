//! The server's long-term key and its proof in the handshake (docs/PROTOCOL.md, "Server
//! key"): Ed25519 (RFC 8032, from `ring`) signing the transcript hash with a context string,
//! as TLS 1.3's CertificateVerify does (RFC 8446 section 4.4.3). No certificates: the client
//! pins the public key on first contact or takes it from the user (the transport keeps the
//! `known_servers` file); this module only signs and verifies.

use ring::signature::{self, Ed25519KeyPair, KeyPair};
use std::fmt;
use std::sync::Arc;

/// Length of a server public key (Ed25519).
pub const SERVER_KEY_LEN: usize = 32;
/// Length of the server's signature (Ed25519).
pub const SIGNATURE_LEN: usize = 64;
/// The context string of the server's signature (RFC 8446 4.4.3 style).
pub const SIGNATURE_CONTEXT: &[u8] = b"nena2 server handshake signature";

/// A server public key as it crosses the wire and as clients pin it.
pub type PublicKey = [u8; SERVER_KEY_LEN];

/// Why a server key could not be loaded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not an Ed25519 private key (PKCS#8, RFC 8410): {0}")]
pub struct BadServerKey(String);

/// The server's long-term signing key. Cloning shares it; `Debug` shows the public key only.
#[derive(Clone)]
pub struct ServerKey {
    pair: Arc<Ed25519KeyPair>,
    public: PublicKey,
}

impl ServerKey {
    /// A key from its 32-byte seed (RFC 8032's private key).
    pub fn from_seed(seed: &[u8; 32]) -> Result<ServerKey, BadServerKey> {
        let pair =
            Ed25519KeyPair::from_seed_unchecked(seed).map_err(|e| BadServerKey(e.to_string()))?;
        Ok(ServerKey::of(pair))
    }

    /// A key from a PKCS#8 document (v1 as OpenSSL writes it, or v2 with the public key).
    pub fn from_pkcs8(der: &[u8]) -> Result<ServerKey, BadServerKey> {
        let pair = Ed25519KeyPair::from_pkcs8_maybe_unchecked(der)
            .map_err(|e| BadServerKey(e.to_string()))?;
        Ok(ServerKey::of(pair))
    }

    fn of(pair: Ed25519KeyPair) -> ServerKey {
        let mut public = [0u8; SERVER_KEY_LEN];
        public.copy_from_slice(pair.public_key().as_ref());
        ServerKey {
            pair: Arc::new(pair),
            public,
        }
    }

    /// The public key, which the server sends in every accept that answers key agreement.
    pub fn public(&self) -> PublicKey {
        self.public
    }

    /// The signature over `transcript_hash` ([`signed_content`]).
    pub(crate) fn sign(&self, transcript_hash: &[u8; 32]) -> [u8; SIGNATURE_LEN] {
        let mut out = [0u8; SIGNATURE_LEN];
        out.copy_from_slice(self.pair.sign(&signed_content(transcript_hash)).as_ref());
        out
    }
}

impl PartialEq for ServerKey {
    fn eq(&self, other: &Self) -> bool {
        self.public == other.public
    }
}

impl Eq for ServerKey {}

impl fmt::Debug for ServerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ServerKey(public ")?;
        for b in self.public {
            write!(f, "{b:02x}")?;
        }
        f.write_str(")")
    }
}

/// What is signed: 64 spaces, the context string, a zero byte, then the transcript hash
/// (the layout of RFC 8446 4.4.3, so that no other signed message can be mistaken for it).
pub fn signed_content(transcript_hash: &[u8; 32]) -> Vec<u8> {
    let mut m = Vec::with_capacity(64 + SIGNATURE_CONTEXT.len() + 1 + 32);
    m.extend_from_slice(&[0x20; 64]);
    m.extend_from_slice(SIGNATURE_CONTEXT);
    m.push(0);
    m.extend_from_slice(transcript_hash);
    m
}

/// Whether `sig` is `public`'s signature over `transcript_hash`.
pub fn verify(public: &PublicKey, transcript_hash: &[u8; 32], sig: &[u8]) -> bool {
    signature::UnparsedPublicKey::new(&signature::ED25519, public)
        .verify(&signed_content(transcript_hash), sig)
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// RFC 8032 section 7.1, TEST 1 (empty message) and TEST 2 (one byte), through ring.
    #[test]
    fn ed25519_rfc8032_known_answers() {
        for (seed, public, msg, sig) in [
            (
                "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
                "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
                "",
                "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
            ),
            (
                "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
                "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
                "72",
                "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
            ),
        ] {
            let seed: [u8; 32] = unhex(seed).try_into().unwrap();
            let pair = Ed25519KeyPair::from_seed_unchecked(&seed).unwrap();
            assert_eq!(pair.public_key().as_ref(), unhex(public).as_slice());
            assert_eq!(pair.sign(&unhex(msg)).as_ref(), unhex(sig).as_slice());
            assert!(signature::UnparsedPublicKey::new(&signature::ED25519, unhex(public))
                .verify(&unhex(msg), &unhex(sig))
                .is_ok());
        }
    }

    /// A key from OpenSSL's PKCS#8 (v1) encoding of TEST 1's seed is the same key.
    #[test]
    fn pkcs8_v1_as_openssl_writes_it() {
        let mut der = unhex("302e020100300506032b657004220420");
        der.extend(unhex(
            "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        ));
        let k = ServerKey::from_pkcs8(&der).unwrap();
        assert_eq!(
            k.public().to_vec(),
            unhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
        );
        assert!(ServerKey::from_pkcs8(&der[..20]).is_err());
        assert!(format!("{k:?}").contains("d75a9801"));
    }

    #[test]
    fn signatures_bind_the_transcript_and_the_key() {
        let k = ServerKey::from_seed(&[7; 32]).unwrap();
        let other = ServerKey::from_seed(&[8; 32]).unwrap();
        let th = [0x33; 32];
        let sig = k.sign(&th);
        assert!(verify(&k.public(), &th, &sig));
        assert!(!verify(&other.public(), &th, &sig));
        let mut th2 = th;
        th2[31] ^= 1;
        assert!(!verify(&k.public(), &th2, &sig));
        let mut bad = sig;
        bad[0] ^= 1;
        assert!(!verify(&k.public(), &th, &bad));
        // The context is part of what is signed: a bare signature of the hash is no proof.
        let bare = k.pair.sign(&th);
        assert!(!verify(&k.public(), &th, bare.as_ref()));
    }
}
