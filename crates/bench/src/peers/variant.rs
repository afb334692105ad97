//! The tunnels `nena bench peers` compares, and what each is called.

use serde::Serialize;

/// A tunnel of the bench.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    Nena,
    ShadowsocksAes,
    ShadowsocksChacha,
    Stunnel,
}

impl Variant {
    /// Every tunnel, nena first.
    pub const ALL: [Variant; 4] = [
        Variant::Nena,
        Variant::ShadowsocksAes,
        Variant::ShadowsocksChacha,
        Variant::Stunnel,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Variant::Nena => "nena aead",
            Variant::ShadowsocksAes => "shadowsocks aes-128-gcm",
            Variant::ShadowsocksChacha => "shadowsocks chacha20",
            Variant::Stunnel => "stunnel TLS 1.3",
        }
    }

    pub(super) fn file_stem(self) -> &'static str {
        match self {
            Variant::Nena => "nena",
            Variant::ShadowsocksAes => "ss-aes",
            Variant::ShadowsocksChacha => "ss-chacha",
            Variant::Stunnel => "stunnel",
        }
    }

    /// The shadowsocks cipher of a shadowsocks variant.
    pub(super) fn cipher(self) -> &'static str {
        match self {
            Variant::ShadowsocksChacha => "chacha20-ietf-poly1305",
            _ => "aes-128-gcm",
        }
    }
}

impl Serialize for Variant {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl std::fmt::Display for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.name())
    }
}
