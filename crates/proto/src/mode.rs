//! Protection modes a nena session can run in, with their wire ids and
//! how much key material each one needs in the client hello.

use std::fmt;
use std::str::FromStr;

/// How the byte stream is protected after the handshake.
///
/// The enum is `#[non_exhaustive]` so that adding a mode is not a breaking change.
#[non_exhaustive]
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Negotiated but unprotected: bytes go through unchanged (for comparisons).
    Plain,
    /// The scrambling of Kato et al.: a 64-byte XOR window, one 8-byte key per direction.
    /// An obfuscation, not encryption (docs/THREAT-MODEL.md).
    Kato,
    /// A keystream (AES-128-CTR or ChaCha20) XORed in place: confidentiality with zero
    /// expansion, keys from X25519 and a secret that only crossed the trusted path.
    /// No integrity.
    Stream,
    /// Authenticated records (AES-128-GCM or ChaCha20-Poly1305) of at most 16 KiB, with a
    /// closing record: confidentiality, integrity, and truncation detected.
    Aead,
    /// The papers' own negotiation of kato: no in-band hello; the request and consent ride
    /// on the SYN and SYN-ACK (an RFC 6994 experimental TCP option added by nena's BPF
    /// programs) and each direction's key is that side's MPTCP key, read from the handshake
    /// packets (see [`crate::mpc`]). Scrambles from the first data byte, or is plain on both
    /// sides when either side did not take part. Never offered in a hello.
    #[serde(rename = "kato-mpc")]
    KatoMpc,
}

impl Mode {
    /// Every mode negotiated in band (in a hello), most protective first. [`Mode::KatoMpc`]
    /// is negotiated out of band and is not one of them.
    pub const ALL: &'static [Mode] = &[Mode::Aead, Mode::Stream, Mode::Kato, Mode::Plain];

    /// What a client offers unless told otherwise: `aead` alone, the one mode with
    /// integrity, so that no server preference can move a default client to a mode without
    /// it (stream, kato and plain are offered only when named; the answer is authenticated
    /// whatever it is, as the offer carries a key share).
    pub const DEFAULT_OFFER: &'static [Mode] = &[Mode::Aead];

    /// What a server accepts unless told otherwise (plain only when named).
    pub const DEFAULT_ACCEPT: &'static [Mode] = &[Mode::Aead, Mode::Stream, Mode::Kato];

    /// The name used on command lines, in config files and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Plain => "plain",
            Mode::Kato => "kato",
            Mode::Stream => "stream",
            Mode::Aead => "aead",
            Mode::KatoMpc => "kato-mpc",
        }
    }

    /// The name with what it is, for people: `kato` is always labelled as the papers'
    /// obfuscation, `plain` as unprotected.
    pub fn label(self) -> &'static str {
        match self {
            Mode::Plain => "plain (unprotected)",
            Mode::Kato => "kato (the papers' obfuscation, not encryption)",
            Mode::Stream => "stream (encrypted, no integrity)",
            Mode::Aead => "aead (encrypted and authenticated)",
            Mode::KatoMpc => {
                "kato-mpc (the papers' obfuscation with their own negotiation, not encryption)"
            }
        }
    }

    /// The one-byte id of this mode on the wire (see docs/PROTOCOL.md). `kato-mpc`'s id,
    /// 0x05, is reserved (no in-band mode takes it) but never sent: it has no hello.
    pub fn wire_id(self) -> u8 {
        match self {
            Mode::Plain => 0x01,
            Mode::Kato => 0x02,
            Mode::Stream => 0x03,
            Mode::Aead => 0x04,
            Mode::KatoMpc => 0x05,
        }
    }

    /// The in-band mode with this wire id, if this build knows it (0x05, kato-mpc, is not
    /// negotiable in a hello: a hello offering it offers an unknown mode).
    pub fn from_wire_id(id: u8) -> Option<Mode> {
        match id {
            0x01 => Some(Mode::Plain),
            0x02 => Some(Mode::Kato),
            0x03 => Some(Mode::Stream),
            0x04 => Some(Mode::Aead),
            _ => None,
        }
    }

    /// Length of the key material block this mode carries in the client hello.
    pub fn key_material_len(self) -> usize {
        match self {
            Mode::Plain | Mode::KatoMpc => 0,
            // 8-byte client-to-server key followed by 8-byte server-to-client key.
            Mode::Kato => 2 * KATO_KEY_LEN,
            // Preferred suite, key update interval (log2); the key share follows the offers.
            Mode::Stream | Mode::Aead => CRYPTO_OFFER_LEN,
        }
    }

    /// Whether this mode is cryptographic (keys from the X25519 key agreement).
    pub fn is_cryptographic(self) -> bool {
        matches!(self, Mode::Stream | Mode::Aead)
    }

    /// Whether this mode is negotiated in a hello (all but `kato-mpc`).
    pub fn is_in_band(self) -> bool {
        !matches!(self, Mode::KatoMpc)
    }

    /// Whether this mode changes the bytes at all.
    pub fn is_protected(self) -> bool {
        !matches!(self, Mode::Plain)
    }
}

/// Length of one kato key (one per direction).
pub const KATO_KEY_LEN: usize = 8;

/// Length of the key material of a `stream` or `aead` offer: preferred suite (1), key
/// update interval as log2 (1). The hello's one key share follows the offers (protocol 2).
pub const CRYPTO_OFFER_LEN: usize = 2;

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A mode name that is not one of [`Mode::ALL`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown mode {0:?} (known modes: aead, stream, kato, plain, kato-mpc)")]
pub struct ParseModeError(pub String);

impl FromStr for Mode {
    type Err = ParseModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mode::ALL
            .iter()
            .chain(&[Mode::KatoMpc])
            .copied()
            .find(|m| m.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| ParseModeError(s.to_string()))
    }
}

/// Formats a list of modes as `[kato, plain]` for error messages.
pub(crate) struct ModeList<'a>(pub &'a [Mode]);

impl fmt::Display for ModeList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, m) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(m.name())?;
        }
        f.write_str("]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ids_round_trip() {
        for &m in Mode::ALL {
            assert_eq!(m.name().parse::<Mode>().unwrap(), m);
            assert_eq!(Mode::from_wire_id(m.wire_id()), Some(m));
            assert_eq!(m.to_string(), m.name());
        }
        assert_eq!(" KATO ".parse::<Mode>().unwrap(), Mode::Kato);
        let e = "aes".parse::<Mode>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown mode \"aes\" (known modes: aead, stream, kato, plain, kato-mpc)"
        );
        assert_eq!("kato-mpc".parse::<Mode>().unwrap(), Mode::KatoMpc);
        assert_eq!(Mode::KatoMpc.wire_id(), 0x05);
        assert_eq!(Mode::from_wire_id(0x05), None, "not negotiable in a hello");
        assert!(!Mode::ALL.contains(&Mode::KatoMpc) && !Mode::KatoMpc.is_in_band());
        assert!(Mode::KatoMpc.is_protected() && !Mode::KatoMpc.is_cryptographic());
        assert!(Mode::KatoMpc.label().contains("not encryption"));
        assert_eq!(Mode::from_wire_id(0), None);
        assert_eq!(Mode::from_wire_id(5), None);
        assert_eq!(Mode::Kato.key_material_len(), 16);
        assert_eq!(Mode::Aead.key_material_len(), 2);
        assert!(!Mode::Plain.is_protected());
        assert!(Mode::Stream.is_cryptographic() && !Mode::Kato.is_cryptographic());
        assert!(Mode::Kato.label().contains("not encryption"));
    }

    #[test]
    fn serde_uses_the_names() {
        assert_eq!(
            serde_json::to_string(&[Mode::Kato, Mode::Plain]).unwrap(),
            r#"["kato","plain"]"#
        );
        assert_eq!(
            serde_json::from_str::<Mode>(r#""plain""#).unwrap(),
            Mode::Plain
        );
        assert!(serde_json::from_str::<Mode>(r#""aes""#).is_err());
        assert_eq!(
            serde_json::to_string(&Mode::KatoMpc).unwrap(),
            r#""kato-mpc""#
        );
    }

    #[test]
    fn list_display() {
        assert_eq!(
            ModeList(&[Mode::Kato, Mode::Plain]).to_string(),
            "[kato, plain]"
        );
        assert_eq!(ModeList(&[]).to_string(), "[]");
    }
}
