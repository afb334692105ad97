//! The MAC of the application messages a session carries (docs/PROTOCOL.md, "Application
//! MAC"): the file trailer and the SOCKS proxy's connect request. Each direction of a session
//! has its own key ([`crate::keys::app_mac_key`] for aead and stream,
//! [`crate::keys::kato_app_mac_keys`] for kato and kato-mpc); the tag is HMAC-SHA256 (ring)
//! over a context string naming the message, the message's fields and, for a trailer, the
//! file's bytes. A keystream or the scrambling lets an attacker who knows the plaintext XOR
//! any change into it; without the key it cannot make the tag of the changed message.
//!
//! `plain` has no key: its tag is a SHA-256 of the same input, which catches accidents and
//! nothing else (an attacker recomputes it). [`AppMac::is_keyed`] says which one it is.

use crate::keys::{tags_equal, APP_MAC_KEY_LEN, TAG_LEN};
use ring::{digest, hmac};

/// Context of a file trailer (PUT and GET alike; the op is in the input).
pub const FILE_CONTEXT: &[u8] = b"nena app v2 file";
/// Context of a connect request's tag.
pub const CONNECT_CONTEXT: &[u8] = b"nena app v2 connect";

/// A tag being computed: keyed (HMAC-SHA256) or, without a key, a plain SHA-256.
pub enum AppMac {
    Keyed(hmac::Context),
    Unkeyed(digest::Context),
}

impl AppMac {
    /// Starts a tag with `key` (None: plain mode, a hash) over `context` and `fields`, each
    /// field prefixed by its length (u16, big-endian) so that no two inputs run together.
    pub fn new(key: Option<&[u8; APP_MAC_KEY_LEN]>, context: &[u8], fields: &[&[u8]]) -> AppMac {
        let mut m = match key {
            Some(k) => AppMac::Keyed(hmac::Context::with_key(&hmac::Key::new(
                hmac::HMAC_SHA256,
                k,
            ))),
            None => AppMac::Unkeyed(digest::Context::new(&digest::SHA256)),
        };
        m.update(&[context.len() as u8]);
        m.update(context);
        for f in fields {
            m.update(&(f.len() as u16).to_be_bytes());
            m.update(f);
        }
        m
    }

    /// The tag of a file: `op` (1 PUT, 2 GET), the name and the size, then [`AppMac::update`]
    /// with the bytes.
    pub fn file(key: Option<&[u8; APP_MAC_KEY_LEN]>, op: u8, name: &str, size: u64) -> AppMac {
        AppMac::new(
            key,
            FILE_CONTEXT,
            &[&[op], name.as_bytes(), &size.to_be_bytes()],
        )
    }

    /// Whether the tag is a MAC (a session key) rather than a plain hash.
    pub fn is_keyed(&self) -> bool {
        matches!(self, AppMac::Keyed(_))
    }

    pub fn update(&mut self, data: &[u8]) {
        match self {
            AppMac::Keyed(c) => c.update(data),
            AppMac::Unkeyed(c) => c.update(data),
        }
    }

    /// The tag.
    pub fn finish(self) -> [u8; TAG_LEN] {
        let mut out = [0u8; TAG_LEN];
        match self {
            AppMac::Keyed(c) => out.copy_from_slice(c.sign().as_ref()),
            AppMac::Unkeyed(c) => out.copy_from_slice(c.finish().as_ref()),
        }
        out
    }

    /// Whether `got` is the tag (constant time).
    pub fn verify(self, got: &[u8]) -> bool {
        tags_equal(&self.finish(), got)
    }
}

/// The tag of a whole message (a connect request).
pub fn message_tag(key: Option<&[u8; APP_MAC_KEY_LEN]>, context: &[u8], msg: &[u8]) -> [u8; 32] {
    AppMac::new(key, context, &[msg]).finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_tags_depend_on_key_fields_and_data() {
        let k1 = [1u8; 32];
        let k2 = [2u8; 32];
        let tag = |k: Option<&[u8; 32]>, name: &str, data: &[u8]| {
            let mut m = AppMac::file(k, 1, name, data.len() as u64);
            m.update(data);
            m.finish()
        };
        let t = tag(Some(&k1), "f", b"data");
        assert_ne!(t, tag(Some(&k2), "f", b"data"));
        assert_ne!(t, tag(Some(&k1), "g", b"data"));
        assert_ne!(t, tag(Some(&k1), "f", b"datb"));
        assert_ne!(t, tag(None, "f", b"data"));
        // Split updates give the same tag; verify accepts it and nothing else.
        let mut m = AppMac::file(Some(&k1), 1, "f", 4);
        m.update(b"da");
        m.update(b"ta");
        assert!(m.verify(&t));
        let mut bad = t;
        bad[31] ^= 1;
        let mut m = AppMac::file(Some(&k1), 1, "f", 4);
        m.update(b"data");
        assert!(!m.verify(&bad));
        assert!(AppMac::file(Some(&k1), 1, "f", 0).is_keyed());
        assert!(!AppMac::file(None, 1, "f", 0).is_keyed());
    }

    /// The construction, spelled out: HMAC-SHA256 over len-prefixed context and fields.
    #[test]
    fn file_tag_layout() {
        let k = [7u8; 32];
        let mut m = AppMac::file(Some(&k), 2, "ab", 3);
        m.update(b"xyz");
        let mut input = vec![FILE_CONTEXT.len() as u8];
        input.extend_from_slice(FILE_CONTEXT);
        input.extend_from_slice(&[0, 1, 2, 0, 2, b'a', b'b', 0, 8]);
        input.extend_from_slice(&3u64.to_be_bytes());
        input.extend_from_slice(b"xyz");
        assert_eq!(m.finish(), crate::keys::hmac_sha256(&k, &input));
    }
}
