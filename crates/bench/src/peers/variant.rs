//! The tunnels `nena bench peers` compares, and what each is called.

use serde::Serialize;

/// A tunnel of the bench.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    Nena,
    /// nena's proxy pair serving the LAN host (SOCKS5 on the client's LAN address): the
    /// gateway's reference, the same bytes entering the client host the same way.
    NenaLan,
    /// `nena gateway` (aead) carrying a LAN host's connection, with its own proxy server:
    /// nena's, measured against the proxy client rather than against the peers.
    Gateway,
    ShadowsocksAes,
    ShadowsocksChacha,
    Stunnel,
}

impl Variant {
    /// Every tunnel, nena's two first.
    pub const ALL: [Variant; 6] = [
        Variant::Nena,
        Variant::NenaLan,
        Variant::Gateway,
        Variant::ShadowsocksAes,
        Variant::ShadowsocksChacha,
        Variant::Stunnel,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Variant::Nena => "nena aead",
            Variant::NenaLan => "nena aead, LAN host",
            Variant::Gateway => "nena gateway aead",
            Variant::ShadowsocksAes => "shadowsocks aes-128-gcm",
            Variant::ShadowsocksChacha => "shadowsocks chacha20",
            Variant::Stunnel => "stunnel TLS 1.3",
        }
    }

    pub(super) fn file_stem(self) -> &'static str {
        match self {
            Variant::Nena => "nena",
            Variant::NenaLan => "nena-lan",
            Variant::Gateway => "gateway",
            Variant::ShadowsocksAes => "ss-aes",
            Variant::ShadowsocksChacha => "ss-chacha",
            Variant::Stunnel => "stunnel",
        }
    }

    /// Whether this is nena's own (the proxy pair or the gateway), not a peer.
    pub fn is_nena(self) -> bool {
        matches!(self, Variant::Nena | Variant::NenaLan | Variant::Gateway)
    }

    /// Whether the application runs in the LAN host behind the client.
    pub fn from_lan(self) -> bool {
        matches!(self, Variant::NenaLan | Variant::Gateway)
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
