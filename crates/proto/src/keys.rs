//! The key schedule of the cryptographic modes (`stream`, `aead`): X25519 and ML-KEM-768
//! (the hybrid, [`crate::hybrid`]), the transcript hash, HKDF-SHA256 with RFC 8446-style
//! labels, the two key confirmations, and the per-direction traffic secrets with their key
//! updates. Nothing here is new cryptography: X25519 (RFC 7748) comes from `x25519-dalek`,
//! SHA-256, HMAC and HKDF (RFC 5869) from `ring`; this module only composes them
//! (docs/PROTOCOL.md, "Key schedule").
//!
//! ```text
//! dh   = X25519(own secret, peer share)                 all-zero output refused
//! kem  = ML-KEM-768 shared secret (encapsulated by the server to the client's key)
//! th   = SHA-256(hello || accept without its tag)       (the server's signature included)
//! prk  = HKDF-Extract(salt = th, ikm = kem || dh || r_c)
//! server tag = HMAC-SHA256(Expand-Label(prk, "s confirm", "", 32), th)
//! client tag = HMAC-SHA256(Expand-Label(prk, "c confirm", "", 32), SHA-256(hello || accept))
//! c2s_0 = Expand-Label(prk, "c2s", "", 32)   s2c_0 = Expand-Label(prk, "s2c", "", 32)
//! secret_{n+1} = Expand-Label(secret_n, "ku", "", 32)          (key update, per direction)
//! key_n = Expand-Label(secret_n, "key", "", 16 | 32)   iv_n = Expand-Label(secret_n, "iv", "", 12)
//! ```

use ring::{digest, hkdf, hmac};
use std::fmt;
use zeroize::{Zeroize, Zeroizing};

/// Length of an X25519 key share (public key) and of an X25519 secret.
pub const SHARE_LEN: usize = 32;
/// Length of the client's random `r_c` (sent only on the trusted path).
pub const RC_LEN: usize = 32;
/// Length of a key-confirmation tag (HMAC-SHA256).
pub const TAG_LEN: usize = 32;
/// Length of a traffic secret.
pub const SECRET_LEN: usize = 32;
/// Length of a per-epoch IV (nonce base).
pub const IV_LEN: usize = 12;
/// The prefix of every HKDF label, as `tls13 ` is in RFC 8446.
pub const LABEL_PREFIX: &[u8] = b"nena1 ";

/// Why X25519 did not give a usable secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZeroSecret;

/// The X25519 public key (share) of a secret scalar (RFC 7748, clamped by the function).
pub fn x25519_share(secret: &[u8; SHARE_LEN]) -> [u8; SHARE_LEN] {
    x25519_dalek::x25519(*secret, x25519_dalek::X25519_BASEPOINT_BYTES)
}

/// X25519(secret, peer share). An all-zero result (the peer sent a low-order point, so the
/// "secret" is known to anyone) is refused, as RFC 7748 section 6.1 recommends.
pub fn x25519_agree(
    secret: &[u8; SHARE_LEN],
    peer: &[u8; SHARE_LEN],
) -> Result<Zeroizing<[u8; 32]>, ZeroSecret> {
    let out = Zeroizing::new(x25519_dalek::x25519(*secret, *peer));
    // Constant time is not needed to test for zero: an all-zero output is public anyway.
    if out.iter().all(|&b| b == 0) {
        Err(ZeroSecret)
    } else {
        Ok(out)
    }
}

/// SHA-256 of the concatenation of `parts`.
pub fn sha256(parts: &[&[u8]]) -> [u8; 32] {
    let mut ctx = digest::Context::new(&digest::SHA256);
    for p in parts {
        ctx.update(p);
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

/// HMAC-SHA256(key, msg).
pub fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; TAG_LEN] {
    let k = hmac::Key::new(hmac::HMAC_SHA256, key);
    let mut out = [0u8; TAG_LEN];
    out.copy_from_slice(hmac::sign(&k, msg).as_ref());
    out
}

/// Constant-time equality of two tags (`subtle`).
pub fn tags_equal(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

struct Len(usize);

impl hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

/// HKDF-Extract(salt, ikm) (RFC 5869, SHA-256).
pub fn hkdf_extract(salt: &[u8], ikm: &[u8]) -> hkdf::Prk {
    hkdf::Salt::new(hkdf::HKDF_SHA256, salt).extract(ikm)
}

/// HKDF-Expand(prk, info, out.len()) (RFC 5869, SHA-256). `out` is at most 255 * 32 bytes.
pub fn hkdf_expand(prk: &hkdf::Prk, info: &[&[u8]], out: &mut [u8]) {
    prk.expand(info, Len(out.len()))
        .and_then(|okm| okm.fill(out))
        .expect("HKDF output lengths here are far below 255 * 32 bytes");
}

/// HKDF-Expand-Label(secret, label, context, out.len()), the construction of RFC 8446
/// section 7.1 with the prefix [`LABEL_PREFIX`]: the info is
/// `u16 length | u8 len(prefix + label) | prefix + label | u8 len(context) | context`.
pub fn expand_label(prk: &hkdf::Prk, label: &str, context: &[u8], out: &mut [u8]) {
    let full_len = LABEL_PREFIX.len() + label.len();
    assert!(full_len <= 255 && context.len() <= 255 && out.len() <= u16::MAX as usize);
    let len = (out.len() as u16).to_be_bytes();
    let info: [&[u8]; 6] = [
        &len,
        &[full_len as u8],
        LABEL_PREFIX,
        label.as_bytes(),
        &[context.len() as u8],
        context,
    ];
    hkdf_expand(prk, &info, out);
}

/// A 32-byte secret used as an HKDF PRK (traffic secrets are expanded this way, as in TLS 1.3).
fn prk_of(secret: &[u8; SECRET_LEN]) -> hkdf::Prk {
    hkdf::Prk::new_less_safe(hkdf::HKDF_SHA256, secret)
}

/// One direction's traffic secret; zeroized when dropped, never printed.
#[derive(Clone)]
pub struct TrafficSecret(pub(crate) Zeroizing<[u8; SECRET_LEN]>);

impl TrafficSecret {
    /// The secret of the next key epoch (`Expand-Label(secret, "ku", "", 32)`).
    pub fn next(&self) -> TrafficSecret {
        let mut out = Zeroizing::new([0u8; SECRET_LEN]);
        expand_label(&prk_of(&self.0), "ku", &[], &mut out[..]);
        TrafficSecret(out)
    }

    /// This epoch's key of `key_len` bytes and its IV.
    pub fn key_iv(&self, key_len: usize) -> (Zeroizing<Vec<u8>>, [u8; IV_LEN]) {
        let prk = prk_of(&self.0);
        let mut key = Zeroizing::new(vec![0u8; key_len]);
        expand_label(&prk, "key", &[], &mut key);
        let mut iv = [0u8; IV_LEN];
        expand_label(&prk, "iv", &[], &mut iv);
        (key, iv)
    }

    /// For known-answer tests and vectors only.
    pub fn expose(&self) -> &[u8; SECRET_LEN] {
        &self.0
    }
}

impl fmt::Debug for TrafficSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TrafficSecret(..)")
    }
}

/// Length of the key of the application messages' MAC ([`app_mac_key`]).
pub const APP_MAC_KEY_LEN: usize = 32;

/// One direction's key of the application-layer MAC (file trailers, connect requests;
/// [`crate::appmac`]): `Expand-Label(secret_0, "app mac", "", 32)` of that direction's first
/// traffic secret. The label keeps it apart from every key and IV of the same secret.
pub fn app_mac_key(secret: &TrafficSecret) -> Zeroizing<[u8; APP_MAC_KEY_LEN]> {
    let mut k = Zeroizing::new([0u8; APP_MAC_KEY_LEN]);
    expand_label(&prk_of(&secret.0), "app mac", &[], &mut k[..]);
    k
}

/// One direction's secret of the datagram plane ([`crate::dgram`]):
/// `Expand-Label(secret_0, label, "", 32)` of that direction's first traffic secret, with
/// the label `"dg c2s"` or `"dg s2c"` (docs/PROTOCOL.md, "Datagram plane").
pub fn datagram_secret(secret: &TrafficSecret, label: &str) -> Zeroizing<[u8; SECRET_LEN]> {
    let mut k = Zeroizing::new([0u8; SECRET_LEN]);
    expand_label(&prk_of(&secret.0), label, &[], &mut k[..]);
    k
}

/// The application MAC keys of a kato session (kato, kato-mpc), from its two 8-byte
/// scrambling keys: `prk = HKDF-Extract(salt = "nena1 kato app mac", c2s || s2c)`, then
/// `Expand-Label(prk, "c2s app mac" | "s2c app mac", "", 32)`. Only as secret as those keys,
/// which cross the trusted path in clear (docs/THREAT-MODEL.md). Returns (c2s, s2c).
pub fn kato_app_mac_keys(
    c2s: &[u8; 8],
    s2c: &[u8; 8],
) -> (
    Zeroizing<[u8; APP_MAC_KEY_LEN]>,
    Zeroizing<[u8; APP_MAC_KEY_LEN]>,
) {
    let mut ikm = Zeroizing::new([0u8; 16]);
    ikm[..8].copy_from_slice(c2s);
    ikm[8..].copy_from_slice(s2c);
    let prk = hkdf_extract(b"nena1 kato app mac", &ikm[..]);
    let mut a = Zeroizing::new([0u8; APP_MAC_KEY_LEN]);
    let mut b = Zeroizing::new([0u8; APP_MAC_KEY_LEN]);
    expand_label(&prk, "c2s app mac", &[], &mut a[..]);
    expand_label(&prk, "s2c app mac", &[], &mut b[..]);
    (a, b)
}

/// The shared secrets of the hybrid key agreement and the client's `r_c`: the IKM of the
/// key schedule, concatenated as TLS's X25519MLKEM768 concatenates (ML-KEM's first).
pub struct Secrets<'a> {
    pub kem: &'a [u8; 32],
    pub dh: &'a [u8; 32],
    pub r_c: &'a [u8; RC_LEN],
}

/// Everything the handshake derives from the shared secrets, `r_c` and the transcript.
pub struct Schedule {
    prk: hkdf::Prk,
    /// Hash of hello || accept-without-tag.
    th: [u8; 32],
}

impl Schedule {
    /// `prk = HKDF-Extract(SHA-256(hello || accept_prefix), kem || dh || r_c)`.
    pub fn new(secrets: &Secrets<'_>, hello: &[u8], accept_prefix: &[u8]) -> Self {
        let th = sha256(&[hello, accept_prefix]);
        let mut ikm = Zeroizing::new([0u8; 96]);
        ikm[..32].copy_from_slice(secrets.kem);
        ikm[32..64].copy_from_slice(secrets.dh);
        ikm[64..].copy_from_slice(secrets.r_c);
        Schedule {
            prk: hkdf_extract(&th, &ikm[..]),
            th,
        }
    }

    fn confirm_key(&self, label: &str) -> Zeroizing<[u8; 32]> {
        let mut k = Zeroizing::new([0u8; 32]);
        expand_label(&self.prk, label, &[], &mut k[..]);
        k
    }

    /// The server's key confirmation: `HMAC(Expand-Label(prk, "s confirm"), th)`.
    pub fn server_tag(&self) -> [u8; TAG_LEN] {
        hmac_sha256(&self.confirm_key("s confirm")[..], &self.th)
    }

    /// The client's key confirmation over the whole exchange (the accept with its tag):
    /// `HMAC(Expand-Label(prk, "c confirm"), SHA-256(hello || accept))`.
    pub fn client_tag(&self, hello: &[u8], accept: &[u8]) -> [u8; TAG_LEN] {
        hmac_sha256(
            &self.confirm_key("c confirm")[..],
            &sha256(&[hello, accept]),
        )
    }

    /// The first traffic secrets: (client-to-server, server-to-client).
    pub fn traffic(&self) -> (TrafficSecret, TrafficSecret) {
        let mut c2s = Zeroizing::new([0u8; SECRET_LEN]);
        let mut s2c = Zeroizing::new([0u8; SECRET_LEN]);
        expand_label(&self.prk, "c2s", &[], &mut c2s[..]);
        expand_label(&self.prk, "s2c", &[], &mut s2c[..]);
        (TrafficSecret(c2s), TrafficSecret(s2c))
    }

    /// The transcript hash (hello || accept without its tag).
    pub fn transcript_hash(&self) -> &[u8; 32] {
        &self.th
    }

    /// A resumed session's schedule (docs/PROTOCOL.md, "Resumed sessions"):
    /// `prk = HKDF-Extract(SHA-256(resume hello || resumed accept without its tag), psk || r_c)`.
    /// The same confirmations and traffic secrets follow from it as from a full handshake's.
    pub fn resumed(
        psk: &[u8; SECRET_LEN],
        r_c: &[u8; RC_LEN],
        hello: &[u8],
        accept_prefix: &[u8],
    ) -> Self {
        let th = sha256(&[hello, accept_prefix]);
        let mut ikm = Zeroizing::new([0u8; SECRET_LEN + RC_LEN]);
        ikm[..SECRET_LEN].copy_from_slice(psk);
        ikm[SECRET_LEN..].copy_from_slice(r_c);
        Schedule {
            prk: hkdf_extract(&th, &ikm[..]),
            th,
        }
    }

    /// Ticket `i` this session grants: its id `Expand-Label(prk, "ticket id", [i], 16)` and
    /// its secret `Expand-Label(prk, "ticket", [i], 32)`. Both ends derive them: no ticket
    /// crosses the wire, and only a holder of the session's keys can link its id to it.
    pub fn ticket(&self, i: u8) -> ([u8; TICKET_ID_LEN], Zeroizing<[u8; SECRET_LEN]>) {
        let mut id = [0u8; TICKET_ID_LEN];
        expand_label(&self.prk, "ticket id", &[i], &mut id);
        let mut secret = Zeroizing::new([0u8; SECRET_LEN]);
        expand_label(&self.prk, "ticket", &[i], &mut secret[..]);
        (id, secret)
    }
}

/// Length of a resumption ticket's id.
pub const TICKET_ID_LEN: usize = 16;

/// The binder of a resume hello: `HMAC(Expand-Label(psk, "res binder", "", 32),
/// SHA-256(resume hello without its last 32 bytes))`: the server checks that the client holds
/// the ticket's secret before it answers or grants anything.
pub fn resume_binder(psk: &[u8; SECRET_LEN], hello_prefix: &[u8]) -> [u8; TAG_LEN] {
    let mut k = Zeroizing::new([0u8; 32]);
    expand_label(&prk_of(psk), "res binder", &[], &mut k[..]);
    hmac_sha256(&k[..], &sha256(&[hello_prefix]))
}

impl fmt::Debug for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Schedule(..)")
    }
}

/// Wipes a fixed array in place (helper for secrets held outside `Zeroizing`).
pub fn wipe<const N: usize>(a: &mut [u8; N]) {
    a.zeroize();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        data_encoding::HEXLOWER_PERMISSIVE
            .decode(s.as_bytes())
            .unwrap()
    }

    fn arr(s: &str) -> [u8; 32] {
        unhex(s).try_into().unwrap()
    }

    /// RFC 7748 section 5.2, the two single-step vectors, and section 6.1 (Alice and Bob).
    #[test]
    fn x25519_rfc7748_known_answers() {
        let k = arr("a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4");
        let u = arr("e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c");
        assert_eq!(
            x25519_dalek::x25519(k, u).to_vec(),
            unhex("c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552")
        );
        let k = arr("4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d");
        let u = arr("e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493");
        assert_eq!(
            x25519_dalek::x25519(k, u).to_vec(),
            unhex("95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957")
        );
        let a = arr("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
        let a_pub = unhex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a");
        let b = arr("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb");
        let b_pub = unhex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f");
        let shared = unhex("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742");
        assert_eq!(x25519_share(&a).to_vec(), a_pub);
        assert_eq!(x25519_share(&b).to_vec(), b_pub);
        let b_pub: [u8; 32] = b_pub.try_into().unwrap();
        let a_pub: [u8; 32] = a_pub.try_into().unwrap();
        assert_eq!(x25519_agree(&a, &b_pub).unwrap().to_vec(), shared);
        assert_eq!(x25519_agree(&b, &a_pub).unwrap().to_vec(), shared);
    }

    /// Low-order points give an all-zero secret, which is refused.
    #[test]
    fn low_order_shares_are_refused() {
        let k = [0x42u8; 32];
        let zero = [0u8; 32];
        let mut one = [0u8; 32];
        one[0] = 1;
        // A point of order 8 (from the list in curve25519-dalek / libsodium's blacklist).
        let order8 = arr("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800");
        for p in [zero, one, order8] {
            assert_eq!(x25519_agree(&k, &p), Err(ZeroSecret), "{p:02x?}");
        }
    }

    /// RFC 5869 test cases 1 and 3 (SHA-256), through ring's HKDF.
    #[test]
    fn hkdf_rfc5869_known_answers() {
        let ikm = [0x0bu8; 22];
        let salt = unhex("000102030405060708090a0b0c");
        let info = unhex("f0f1f2f3f4f5f6f7f8f9");
        let mut okm = [0u8; 42];
        hkdf_expand(&hkdf_extract(&salt, &ikm), &[&info], &mut okm);
        assert_eq!(
            okm.to_vec(),
            unhex(
                "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf
                 34007208d5b887185865"
            )
        );
        // Test case 3: empty salt and info.
        let mut okm = [0u8; 42];
        hkdf_expand(&hkdf_extract(&[], &ikm), &[], &mut okm);
        assert_eq!(
            okm.to_vec(),
            unhex(
                "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d
                 9d201395faa4b61a96c8"
            )
        );
        // Test case 2: long inputs, info given in pieces (as expand_label does).
        let ikm: Vec<u8> = (0x00..=0x4f).collect();
        let salt: Vec<u8> = (0x60..=0xaf).collect();
        let info: Vec<u8> = (0xb0..=0xff).collect();
        let mut okm = [0u8; 82];
        hkdf_expand(
            &hkdf_extract(&salt, &ikm),
            &[&info[..10], &info[10..]],
            &mut okm,
        );
        assert_eq!(
            okm.to_vec(),
            unhex(
                "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c
                 59045a99cac7827271cb41c65e590e09da3275600c2f09b8367793a9aca3db71
                 cc30c58179ec3e87c14c01d5c1f3434f1d87"
            )
        );
    }

    /// RFC 4231 test case 2 (HMAC-SHA-256 with key "Jefe").
    #[test]
    fn hmac_rfc4231_known_answer() {
        assert_eq!(
            hmac_sha256(b"Jefe", b"what do ya want for nothing?").to_vec(),
            unhex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        );
    }

    /// The label layout of RFC 8446 section 7.1, checked against a hand-built info.
    #[test]
    fn expand_label_layout() {
        let prk = prk_of(&[7u8; 32]);
        let mut a = [0u8; 16];
        expand_label(&prk, "key", b"ctx", &mut a);
        let mut info = vec![0, 16, 9];
        info.extend_from_slice(b"nena1 key");
        info.push(3);
        info.extend_from_slice(b"ctx");
        let mut b = [0u8; 16];
        hkdf_expand(&prk, &[&info], &mut b);
        assert_eq!(a, b);
    }

    /// The kato application MAC keys for the scrambling keys 00..07 and 08..0f (values
    /// computed independently with Python's hmac module; also in docs/PROTOCOL.md).
    #[test]
    fn kato_app_mac_keys_known_answer() {
        let c2s: [u8; 8] = std::array::from_fn(|i| i as u8);
        let s2c: [u8; 8] = std::array::from_fn(|i| 8 + i as u8);
        let (a, b) = kato_app_mac_keys(&c2s, &s2c);
        assert_eq!(
            a.to_vec(),
            unhex("22ea4e98487ee105006e9e8cb0f4766aada956caf371356fb5de30b4e71060eb")
        );
        assert_eq!(
            b.to_vec(),
            unhex("a2ceaf758f954c4cdc06528fed5632ecbe8b77ae4e0ef5be655d40dac614612f")
        );
    }

    #[test]
    fn secrets_do_not_print() {
        let s = TrafficSecret(Zeroizing::new([0xab; 32]));
        assert_eq!(format!("{s:?}"), "TrafficSecret(..)");
        assert_ne!(s.next().expose(), s.expose());
    }
}
