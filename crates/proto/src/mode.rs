//! Protection modes a nena session can run in, with their wire ids and
//! how much key material each one needs in the client hello.

use std::fmt;
use std::str::FromStr;

/// How the byte stream is protected after the handshake.
///
/// New (cryptographic) modes will be added as new variants with new wire ids;
/// the enum is `#[non_exhaustive]` so that adding one is not a breaking change.
#[non_exhaustive]
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Negotiated but unprotected: bytes go through unchanged (for comparisons).
    Plain,
    /// The scrambling of Kato et al.: a 64-byte XOR window, one 8-byte key per direction.
    Kato,
}

impl Mode {
    /// Every mode this build knows, in the default preference order
    /// (most protective first).
    pub const ALL: &'static [Mode] = &[Mode::Kato, Mode::Plain];

    /// The name used on command lines, in config files and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Plain => "plain",
            Mode::Kato => "kato",
        }
    }

    /// The one-byte id of this mode on the wire (see docs/PROTOCOL.md).
    pub fn wire_id(self) -> u8 {
        match self {
            Mode::Plain => 0x01,
            Mode::Kato => 0x02,
        }
    }

    /// The mode with this wire id, if this build knows it.
    pub fn from_wire_id(id: u8) -> Option<Mode> {
        match id {
            0x01 => Some(Mode::Plain),
            0x02 => Some(Mode::Kato),
            _ => None,
        }
    }

    /// Length of the key material block this mode carries in the client hello.
    pub fn key_material_len(self) -> usize {
        match self {
            Mode::Plain => 0,
            // 8-byte client-to-server key followed by 8-byte server-to-client key.
            Mode::Kato => 2 * KATO_KEY_LEN,
        }
    }

    /// Length of the (never secret) parameter block the server's accept carries
    /// for this mode. Zero for every mode of protocol version 1.
    pub fn answer_param_len(self) -> usize {
        0
    }

    /// Whether this mode changes the bytes at all.
    pub fn is_protected(self) -> bool {
        !matches!(self, Mode::Plain)
    }
}

/// Length of one kato key (one per direction).
pub const KATO_KEY_LEN: usize = 8;

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A mode name that is not one of [`Mode::ALL`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown mode {0:?} (known modes: plain, kato)")]
pub struct ParseModeError(pub String);

impl FromStr for Mode {
    type Err = ParseModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mode::ALL
            .iter()
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
            "unknown mode \"aes\" (known modes: plain, kato)"
        );
        assert_eq!(Mode::from_wire_id(0), None);
        assert_eq!(Mode::Kato.key_material_len(), 16);
        assert!(!Mode::Plain.is_protected());
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
