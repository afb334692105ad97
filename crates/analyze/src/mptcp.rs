//! Multipath TCP options (RFC 8684, TCP option kind 30) as an eavesdropper sees them in a
//! segment's option bytes: which subtypes are present, and the keys that MP_CAPABLE carries
//! in clear.

use serde::Serialize;

pub use crate::dss::KIND_MPTCP;

/// The MPTCP option subtypes (upper nibble of the third option byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Subtype {
    #[serde(rename = "MP_CAPABLE")]
    MpCapable,
    #[serde(rename = "MP_JOIN")]
    MpJoin,
    #[serde(rename = "DSS")]
    Dss,
    #[serde(rename = "ADD_ADDR")]
    AddAddr,
    #[serde(rename = "REMOVE_ADDR")]
    RemoveAddr,
    #[serde(rename = "MP_PRIO")]
    MpPrio,
    #[serde(rename = "MP_FAIL")]
    MpFail,
    #[serde(rename = "MP_FASTCLOSE")]
    MpFastclose,
    #[serde(rename = "MP_TCPRST")]
    MpTcpRst,
    #[serde(rename = "MP_EXPERIMENTAL")]
    Experimental,
    #[serde(rename = "MPTCP_UNKNOWN")]
    Unknown,
}

impl Subtype {
    pub fn from_nibble(n: u8) -> Subtype {
        match n {
            0 => Subtype::MpCapable,
            1 => Subtype::MpJoin,
            2 => Subtype::Dss,
            3 => Subtype::AddAddr,
            4 => Subtype::RemoveAddr,
            5 => Subtype::MpPrio,
            6 => Subtype::MpFail,
            7 => Subtype::MpFastclose,
            8 => Subtype::MpTcpRst,
            0xf => Subtype::Experimental,
            _ => Subtype::Unknown,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Subtype::MpCapable => "MP_CAPABLE",
            Subtype::MpJoin => "MP_JOIN",
            Subtype::Dss => "DSS",
            Subtype::AddAddr => "ADD_ADDR",
            Subtype::RemoveAddr => "REMOVE_ADDR",
            Subtype::MpPrio => "MP_PRIO",
            Subtype::MpFail => "MP_FAIL",
            Subtype::MpFastclose => "MP_FASTCLOSE",
            Subtype::MpTcpRst => "MP_TCPRST",
            Subtype::Experimental => "MP_EXPERIMENTAL",
            Subtype::Unknown => "MPTCP_UNKNOWN",
        }
    }
}

impl std::fmt::Display for Subtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What the MPTCP options of one segment reveal.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MptcpInfo {
    /// Subtypes present, in option order.
    pub subtypes: Vec<Subtype>,
    /// Keys carried by MP_CAPABLE (sender's, then receiver's on the third ACK), in clear.
    pub keys: Vec<u64>,
    /// The MP_CAPABLE flag byte (its bits A..H), when present. nena's papers negotiate
    /// scrambling with one of these bits.
    pub capable_flags: Option<u8>,
    /// The DSS option, when present (mapping, data ACK, DATA_FIN).
    pub dss: Option<crate::dss::Dss>,
    /// The MP_JOIN option, when present.
    pub join: Option<crate::dss::Join>,
    /// The backup flag of an MP_PRIO option, when present.
    pub prio_backup: Option<bool>,
}

impl MptcpInfo {
    pub fn is_empty(&self) -> bool {
        self.subtypes.is_empty()
    }
}

/// Walk TCP option bytes (`options` as found after the 20-byte TCP header) and collect the
/// MPTCP options. Malformed option lists end the walk; nothing here can panic.
pub fn parse_options(options: &[u8]) -> MptcpInfo {
    let mut info = MptcpInfo::default();
    let mut i = 0usize;
    while i < options.len() {
        let kind = options[i];
        match kind {
            0 => break,  // end of option list
            1 => i += 1, // no-op
            _ => {
                let Some(&len) = options.get(i + 1) else {
                    break;
                };
                let len = len as usize;
                if len < 2 || i + len > options.len() {
                    break;
                }
                let opt = &options[i..i + len];
                if kind == KIND_MPTCP && len >= 3 {
                    let st = Subtype::from_nibble(opt[2] >> 4);
                    info.subtypes.push(st);
                    if st == Subtype::Dss {
                        info.dss = crate::dss::parse_dss(opt);
                    }
                    if st == Subtype::MpPrio {
                        info.prio_backup = Some(opt[2] & 0x01 != 0);
                    }
                    if st == Subtype::MpJoin {
                        info.join = crate::dss::parse_join(opt);
                    }
                    if st == Subtype::MpCapable && len >= 4 {
                        info.capable_flags = Some(opt[3]);
                        // 12: one key (SYN, SYN/ACK, or v0 ACK); 20, 22, 24: two keys (third ACK)
                        for k in 0..2 {
                            let at = 4 + 8 * k;
                            if let Some(b) = opt.get(at..at + 8) {
                                let mut a = [0u8; 8];
                                a.copy_from_slice(b);
                                info.keys.push(u64::from_be_bytes(a));
                            }
                        }
                    }
                }
                i += len;
            }
        }
    }
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_subtypes_and_keys() {
        // NOP, NOP, MP_CAPABLE v1 with one key, then DSS (subtype 2)
        let mut o = vec![1, 1, 30, 12, 0x01, 0x81];
        o.extend_from_slice(&0x0102030405060708u64.to_be_bytes());
        o.extend_from_slice(&[30, 4, 0x20, 0x01]);
        let i = parse_options(&o);
        assert_eq!(i.subtypes, vec![Subtype::MpCapable, Subtype::Dss]);
        assert_eq!(i.keys, vec![0x0102030405060708]);
        assert_eq!(i.capable_flags, Some(0x81));
    }

    #[test]
    fn survives_garbage() {
        for o in [
            &[30u8][..],
            &[30, 1],
            &[30, 200, 0],
            &[2, 0],
            &[8, 10, 1, 2],
            &[30, 3, 0x10],
        ] {
            let i = parse_options(o);
            assert!(i.subtypes.len() <= 1);
        }
        assert_eq!(
            parse_options(&[30, 3, 0x10]).subtypes,
            vec![Subtype::MpJoin]
        );
    }
}
