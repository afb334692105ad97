//! The version-1 handshake of aead (X25519 alone, no server key; replaced by version 2 in
//! issue 41), rebuilt from today's primitives as the "before" of `nena bench handshake`.
//! No peer speaks it any more and nothing here is used on a connection: it exists so that
//! one run can time the handshake with and without the post-quantum share and the
//! server's signature.
//!
//! What it keeps of version 1 (docs/PROTOCOL.md as of before issue 41): the messages'
//! layout and sizes (a hello offering aead alone, [`HELLO_LEN`] = 78 bytes: header, one
//! offer of 66 bytes with the X25519 share, `r_c`, suite and key-update interval; its
//! accept, [`ACCEPT_LEN`] = 76 bytes: suite, the server's X25519 share, its confirmation;
//! the client's confirm, 41 bytes), and its key schedule: `th = SHA-256(hello || accept
//! without its tag)`, `prk = HKDF-Extract(th, dh || r_c)`, the same confirmations and
//! traffic secrets, ending in the same [`Session`]s as version 2. What it leaves out is
//! exactly what version 2 added: ML-KEM-768 (key generation, encapsulation,
//! decapsulation, its 1,184 + 1,088 bytes) and the server's Ed25519 signature (signing,
//! verifying, its 96 bytes). It parses only what its own other side wrote (fixed
//! offsets, lengths checked).

use crate::error::HandshakeError;
use crate::keys::{
    expand_label, hkdf_extract, hmac_sha256, sha256, tags_equal, x25519_agree, x25519_share,
    TrafficSecret, RC_LEN, SECRET_LEN, SHARE_LEN, TAG_LEN,
};
use crate::session::{Keys, Role, Session};
use crate::{Mode, Suite};
use zeroize::Zeroizing;

/// Version 1's version byte.
const VERSION_1: u8 = 0x01;
/// A version-1 hello offering aead alone: header 9, count 1, mode id and length 2, offer 66.
pub const HELLO_LEN: usize = 78;
/// Its accept: header 9, mode id and length 2, suite 1, X25519 share 32, confirmation 32.
pub const ACCEPT_LEN: usize = 76;
/// The client's confirm: header 9, tag 32 (as in version 2, whose header it carries, since
/// the sessions that read it are today's).
pub const CONFIRM_LEN: usize = 41;
/// Entropy of a version-1 client: its X25519 secret, then `r_c`.
pub const CLIENT_ENTROPY_LEN: usize = SHARE_LEN + RC_LEN;

fn header(msg_type: u8, body: usize) -> [u8; 9] {
    let m = crate::magic::MAGIC;
    let l = (body as u16).to_be_bytes();
    [
        m[0], m[1], m[2], m[3], m[4], VERSION_1, msg_type, l[0], l[1],
    ]
}

/// `prk`, the transcript hash and the two confirmations' keys of version 1.
struct Schedule1 {
    prk: ring::hkdf::Prk,
    th: [u8; 32],
}

impl Schedule1 {
    fn new(dh: &[u8; 32], r_c: &[u8; RC_LEN], hello: &[u8], accept_prefix: &[u8]) -> Self {
        let th = sha256(&[hello, accept_prefix]);
        let mut ikm = Zeroizing::new([0u8; 64]);
        ikm[..32].copy_from_slice(dh);
        ikm[32..].copy_from_slice(r_c);
        Schedule1 {
            prk: hkdf_extract(&th, &ikm[..]),
            th,
        }
    }

    fn tag(&self, label: &str, msg: &[u8]) -> [u8; TAG_LEN] {
        let mut k = Zeroizing::new([0u8; 32]);
        expand_label(&self.prk, label, &[], &mut k[..]);
        hmac_sha256(&k[..], msg)
    }

    fn traffic(&self) -> (TrafficSecret, TrafficSecret) {
        let mut c2s = Zeroizing::new([0u8; SECRET_LEN]);
        let mut s2c = Zeroizing::new([0u8; SECRET_LEN]);
        expand_label(&self.prk, "c2s", &[], &mut c2s[..]);
        expand_label(&self.prk, "s2c", &[], &mut s2c[..]);
        (TrafficSecret(c2s), TrafficSecret(s2c))
    }
}

/// A version-1 client that offered aead.
pub struct Client1 {
    secret: Zeroizing<[u8; SHARE_LEN]>,
    r_c: Zeroizing<[u8; RC_LEN]>,
    hello: Zeroizing<Vec<u8>>,
    epoch_log2: u8,
}

impl Client1 {
    /// Key generation and the hello (78 bytes).
    pub fn new(entropy: &[u8; CLIENT_ENTROPY_LEN], suite: Suite, epoch_log2: u8) -> Client1 {
        let mut secret = Zeroizing::new([0u8; SHARE_LEN]);
        secret.copy_from_slice(&entropy[..SHARE_LEN]);
        let mut r_c = Zeroizing::new([0u8; RC_LEN]);
        r_c.copy_from_slice(&entropy[SHARE_LEN..]);
        let share = x25519_share(&secret);
        let mut hello = Zeroizing::new(Vec::with_capacity(HELLO_LEN));
        hello.extend_from_slice(&header(0x01, HELLO_LEN - 9));
        hello.extend_from_slice(&[1, Mode::Aead.wire_id(), 66]);
        hello.extend_from_slice(&share);
        hello.extend_from_slice(&r_c[..]);
        hello.extend_from_slice(&[suite.wire_id(), epoch_log2]);
        debug_assert_eq!(hello.len(), HELLO_LEN);
        Client1 {
            secret,
            r_c,
            hello,
            epoch_log2,
        }
    }

    /// The hello, the first flight.
    pub fn first_flight(&self) -> &[u8] {
        &self.hello
    }

    /// The server's accept: its confirmation checked, then the client's confirm and the
    /// session.
    pub fn read(&self, accept: &[u8]) -> Result<(Vec<u8>, Session), HandshakeError> {
        if accept.len() != ACCEPT_LEN || accept[..9] != header(0x02, ACCEPT_LEN - 9) {
            return Err(HandshakeError::Malformed("not a version-1 accept of aead"));
        }
        let suite =
            Suite::from_wire_id(accept[11]).ok_or(HandshakeError::Malformed("unknown suite"))?;
        let peer: [u8; SHARE_LEN] = accept[12..44].try_into().expect("32 bytes");
        let dh = x25519_agree(&self.secret, &peer).map_err(|_| HandshakeError::ZeroSharedSecret)?;
        let s = Schedule1::new(&dh, &self.r_c, &self.hello, &accept[..44]);
        if !tags_equal(&s.tag("s confirm", &s.th), &accept[44..]) {
            return Err(HandshakeError::ConfirmationFailed);
        }
        // (Today's header: the session that reads it is today's; 41 bytes as in version 1.)
        let mut confirm = crate::wire::header(crate::wire::TYPE_CONFIRM, TAG_LEN).to_vec();
        confirm.extend_from_slice(&s.tag("c confirm", &sha256(&[&self.hello, accept])));
        let (c2s, s2c) = s.traffic();
        let keys = Keys::Crypto {
            mode: Mode::Aead,
            suite,
            epoch_log2: self.epoch_log2,
            c2s,
            s2c,
            expect_confirm: None,
        };
        Ok((confirm, Session::new(Role::Client, keys)))
    }
}

/// A version-1 server's answer to a version-1 hello of aead: key generation, the key
/// agreement and schedule, the accept (76 bytes) and the session (which expects the
/// client's confirm first).
pub fn server_read(
    hello: &[u8],
    entropy: &[u8; SHARE_LEN],
) -> Result<(Vec<u8>, Session), HandshakeError> {
    if hello.len() != HELLO_LEN
        || hello[..9] != header(0x01, HELLO_LEN - 9)
        || hello[9..12] != [1, Mode::Aead.wire_id(), 66]
    {
        return Err(HandshakeError::Malformed(
            "not a version-1 hello offering aead",
        ));
    }
    let peer: [u8; SHARE_LEN] = hello[12..44].try_into().expect("32 bytes");
    let r_c: [u8; RC_LEN] = hello[44..76].try_into().expect("32 bytes");
    let r_c = Zeroizing::new(r_c);
    let suite = Suite::from_wire_id(hello[76]).ok_or(HandshakeError::Malformed("unknown suite"))?;
    let epoch_log2 = hello[77];
    let secret = Zeroizing::new(*entropy);
    let share = x25519_share(&secret);
    let dh = x25519_agree(&secret, &peer).map_err(|_| HandshakeError::ZeroSharedSecret)?;
    let mut accept = header(0x02, ACCEPT_LEN - 9).to_vec();
    accept.extend_from_slice(&[Mode::Aead.wire_id(), 65, suite.wire_id()]);
    accept.extend_from_slice(&share);
    let s = Schedule1::new(&dh, &r_c, hello, &accept);
    accept.extend_from_slice(&s.tag("s confirm", &s.th));
    let expect = s.tag("c confirm", &sha256(&[hello, &accept]));
    let (c2s, s2c) = s.traffic();
    let keys = Keys::Crypto {
        mode: Mode::Aead,
        suite,
        epoch_log2,
        c2s,
        s2c,
        expect_confirm: Some(expect),
    };
    Ok((accept, Session::new(Role::Server, keys)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Opened;

    /// The two sides agree (the server's session opens what the client's seals, after the
    /// confirm), the messages have version 1's sizes, and a changed accept byte fails.
    #[test]
    fn a_version_1_exchange_agrees_and_has_its_sizes() {
        let c = Client1::new(&[3; CLIENT_ENTROPY_LEN], Suite::Aes128, 10);
        assert_eq!(c.first_flight().len(), HELLO_LEN);
        assert_eq!(c.first_flight()[5], VERSION_1);
        let (accept, s_sess) = server_read(c.first_flight(), &[5; SHARE_LEN]).unwrap();
        assert_eq!(accept.len(), ACCEPT_LEN);
        let (confirm, c_sess) = c.read(&accept).unwrap();
        assert_eq!(confirm.len(), CONFIRM_LEN);
        let (mut tx, _) = c_sess.split();
        let (_, mut rx) = s_sess.split();
        let h = tx.header_len();
        let mut buf = vec![0u8; h + 9 + tx.trailer_len()];
        buf[h..h + 9].copy_from_slice(b"same keys");
        let n = tx.seal(&mut buf, 9);
        let mut wire = confirm.clone();
        wire.extend_from_slice(&buf[..n]);
        let mut got = Vec::new();
        let mut at = 0;
        while at < wire.len() {
            match rx.open(&mut wire[at..]).unwrap() {
                Opened::Data { consumed, plain } => {
                    got.extend_from_slice(&wire[at..][plain]);
                    at += consumed;
                }
                Opened::NeedMore { .. } => break,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(got, b"same keys");
        let mut bad = accept.clone();
        bad[20] ^= 1;
        assert!(c.read(&bad).is_err());
    }
}
