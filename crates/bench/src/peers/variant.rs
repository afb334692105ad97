//! The tunnels `nena bench peers` compares, and what each is called.

use serde::Serialize;

/// A tunnel of the bench.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    Nena,
    /// nena's proxy pair in `plain` mode (its handshake, then the bytes as they are, over
    /// the same MPTCP): with the cipher primitive, the floor of [`Variant::Nena`].
    NenaPlain,
    /// nena's proxy pair serving the LAN host (SOCKS5 on the client's LAN address): the
    /// gateway's reference, the same bytes entering the client host the same way.
    NenaLan,
    /// `nena gateway` (aead) carrying a LAN host's connection, with its own proxy server:
    /// nena's, measured against the proxy client rather than against the peers.
    Gateway,
    /// `nena gateway` in `plain` mode with its own proxy server: with the cipher primitive,
    /// the floor of [`Variant::Gateway`]. The two gateways take turns (one nftables table
    /// per host): each is started in place of the other for its transfers.
    GatewayPlain,
    ShadowsocksAes,
    ShadowsocksChacha,
    Stunnel,
}

impl Variant {
    /// Every tunnel, nena's two first.
    pub const ALL: [Variant; 8] = [
        Variant::Nena,
        Variant::NenaPlain,
        Variant::NenaLan,
        Variant::Gateway,
        Variant::GatewayPlain,
        Variant::ShadowsocksAes,
        Variant::ShadowsocksChacha,
        Variant::Stunnel,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Variant::Nena => "nena aead",
            Variant::NenaPlain => "nena plain (floor)",
            Variant::NenaLan => "nena aead, LAN host",
            Variant::Gateway => "nena gateway aead",
            Variant::GatewayPlain => "nena gateway plain (floor)",
            Variant::ShadowsocksAes => "shadowsocks aes-128-gcm",
            Variant::ShadowsocksChacha => "shadowsocks chacha20",
            Variant::Stunnel => "stunnel TLS 1.3",
        }
    }

    pub(super) fn file_stem(self) -> &'static str {
        match self {
            Variant::Nena => "nena",
            Variant::NenaPlain => "nena-plain",
            Variant::NenaLan => "nena-lan",
            Variant::Gateway => "gateway",
            Variant::GatewayPlain => "gateway-plain",
            Variant::ShadowsocksAes => "ss-aes",
            Variant::ShadowsocksChacha => "ss-chacha",
            Variant::Stunnel => "stunnel",
        }
    }

    /// Whether this is nena's own (the proxy pair or the gateway), not a peer.
    pub fn is_nena(self) -> bool {
        matches!(
            self,
            Variant::Nena
                | Variant::NenaPlain
                | Variant::NenaLan
                | Variant::Gateway
                | Variant::GatewayPlain
        )
    }

    /// Whether the application runs in the LAN host behind the client.
    pub fn from_lan(self) -> bool {
        matches!(
            self,
            Variant::NenaLan | Variant::Gateway | Variant::GatewayPlain
        )
    }

    /// Whether this is one of the two `nena gateway`s (only one runs at a time).
    pub fn is_gateway(self) -> bool {
        matches!(self, Variant::Gateway | Variant::GatewayPlain)
    }

    /// nena's mode in this tunnel (`aead`, or `plain` for a floor's transport).
    pub fn nena_mode(self) -> &'static str {
        match self {
            Variant::NenaPlain | Variant::GatewayPlain => "plain",
            _ => "aead",
        }
    }

    /// The floor's transport of a nena aead tunnel: the same ends in `plain` mode.
    pub fn plain_twin(self) -> Option<Variant> {
        match self {
            Variant::Nena => Some(Variant::NenaPlain),
            Variant::Gateway => Some(Variant::GatewayPlain),
            _ => None,
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
