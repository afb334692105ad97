//! The MPTCP options that place bytes in the data stream (RFC 8684): the DSS option's
//! mapping (data sequence number, subflow sequence number, data-level length), its data ACK
//! and DATA_FIN, and MP_JOIN's token, which ties a joined subflow to its connection.
//! Parsers of bytes from the network: they never panic and refuse what does not fit.

use serde::Serialize;

/// TCP option kind of MPTCP (defined here, the parser `mptcp` builds on; `mptcp`
/// re-exports it).
pub const KIND_MPTCP: u8 = 30;

/// A DSS mapping: `len` bytes of the subflow from relative sequence number `ssn` carry the
/// data stream from `dsn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Mapping {
    /// Data sequence number of the first byte (the low 32 bits only when `!dsn64`).
    pub dsn: u64,
    /// Whether `dsn` was sent in 8 bytes.
    pub dsn64: bool,
    /// Subflow sequence number of the first byte, relative to the subflow's initial sequence
    /// number (the first data byte of a subflow has 1).
    pub ssn: u32,
    /// Data-level length (0: an infinite mapping after a fallback, or a bare DATA_FIN).
    pub len: u16,
    /// The DSS checksum, when the connection negotiated it.
    pub checksum: Option<u16>,
}

/// What one DSS option says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Dss {
    /// Data ACK (the low 32 bits only when it was sent in 4 bytes).
    pub data_ack: Option<u64>,
    /// Whether `data_ack` was sent in 8 bytes.
    pub ack64: bool,
    pub mapping: Option<Mapping>,
    /// The mapping ends the sender's data stream.
    pub data_fin: bool,
}

/// What an MP_JOIN option says (the SYN form carries the receiver's token).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Join {
    /// The token of the connection the subflow joins (SYN only).
    pub token: Option<u32>,
    pub backup: bool,
    pub address_id: u8,
}

fn be(b: &[u8]) -> u64 {
    b.iter().fold(0u64, |a, &x| (a << 8) | x as u64)
}

/// Parses a DSS option (`opt` is the whole option: kind, length, subtype and flags first).
pub fn parse_dss(opt: &[u8]) -> Option<Dss> {
    if opt.len() < 4 || opt[0] != KIND_MPTCP || opt[2] >> 4 != 2 {
        return None;
    }
    let flags = opt[3];
    let (ack_present, ack8, map_present, dsn8, fin) = (
        flags & 0x01 != 0,
        flags & 0x02 != 0,
        flags & 0x04 != 0,
        flags & 0x08 != 0,
        flags & 0x10 != 0,
    );
    let mut at = 4usize;
    let mut take = |n: usize| -> Option<&[u8]> {
        let b = opt.get(at..at + n)?;
        at += n;
        Some(b)
    };
    let data_ack = match (ack_present, ack8) {
        (false, _) => None,
        (true, true) => Some(be(take(8)?)),
        (true, false) => Some(be(take(4)?)),
    };
    let mapping = if map_present {
        let dsn = be(take(if dsn8 { 8 } else { 4 })?);
        let ssn = be(take(4)?) as u32;
        let len = be(take(2)?) as u16;
        let checksum = take(2).map(|b| be(b) as u16);
        Some(Mapping {
            dsn,
            dsn64: dsn8,
            ssn,
            len,
            checksum,
        })
    } else {
        None
    };
    Some(Dss {
        data_ack,
        ack64: ack_present && ack8,
        mapping,
        data_fin: fin,
    })
}

/// Parses an MP_JOIN option (the SYN form of 12 bytes carries the token).
pub fn parse_join(opt: &[u8]) -> Option<Join> {
    if opt.len() < 4 || opt[0] != KIND_MPTCP || opt[2] >> 4 != 1 {
        return None;
    }
    Some(Join {
        token: (opt.len() == 12).then(|| be(&opt[4..8]) as u32),
        backup: opt[2] & 0x01 != 0,
        address_id: opt[3],
    })
}

/// The MPTCP token of a key: the most significant 32 bits of SHA-256 of the key
/// (RFC 8684 section 3.2).
pub fn token_of_key(key: u64) -> u32 {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(key.to_be_bytes());
    u32::from_be_bytes([d[0], d[1], d[2], d[3]])
}

/// The initial data sequence number of a key: the least significant 64 bits of SHA-256 of
/// the key (RFC 8684 section 3.2). A direction's first data byte has IDSN + 1.
pub fn idsn_of_key(key: u64) -> u64 {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(key.to_be_bytes());
    u64::from_be_bytes(d[24..32].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opt(flags: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![30, (4 + body.len()) as u8, 0x20, flags];
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn mapping_with_eight_byte_dsn_and_ack() {
        // A (ack present), a (8 bytes), M (map), m (8-byte dsn)
        let mut body = 0x0102_0304_0506_0708u64.to_be_bytes().to_vec();
        body.extend_from_slice(&0x1112_1314_1516_1718u64.to_be_bytes());
        body.extend_from_slice(&1000u32.to_be_bytes());
        body.extend_from_slice(&1448u16.to_be_bytes());
        let d = parse_dss(&opt(0x0f, &body)).unwrap();
        assert_eq!(d.data_ack, Some(0x0102_0304_0506_0708));
        assert!(d.ack64);
        assert_eq!(
            d.mapping,
            Some(Mapping {
                dsn: 0x1112_1314_1516_1718,
                dsn64: true,
                ssn: 1000,
                len: 1448,
                checksum: None
            })
        );
        assert!(!d.data_fin);
    }

    #[test]
    fn four_byte_forms_checksum_and_data_fin() {
        let mut body = 7u32.to_be_bytes().to_vec(); // ack (4)
        body.extend_from_slice(&0xdead_beefu32.to_be_bytes()); // dsn (4)
        body.extend_from_slice(&1u32.to_be_bytes());
        body.extend_from_slice(&0u16.to_be_bytes());
        body.extend_from_slice(&0xabcdu16.to_be_bytes()); // checksum
        let d = parse_dss(&opt(0x01 | 0x04 | 0x10, &body)).unwrap();
        assert_eq!(d.data_ack, Some(7));
        assert!(!d.ack64);
        let m = d.mapping.unwrap();
        assert_eq!((m.dsn, m.dsn64, m.ssn, m.len), (0xdead_beef, false, 1, 0));
        assert_eq!(m.checksum, Some(0xabcd));
        assert!(d.data_fin);
        // Only a data ACK.
        let d = parse_dss(&opt(0x01, &9u32.to_be_bytes())).unwrap();
        assert_eq!((d.data_ack, d.mapping), (Some(9), None));
    }

    #[test]
    fn short_or_foreign_options_are_refused() {
        assert_eq!(parse_dss(&opt(0x0f, &[1, 2, 3])), None);
        assert_eq!(parse_dss(&opt(0x04, &[0; 9])), None);
        assert_eq!(parse_dss(&[30, 4, 0x10, 0]), None, "MP_JOIN is not DSS");
        assert_eq!(parse_dss(&[8, 4, 0x20, 0]), None, "not MPTCP");
        assert_eq!(parse_dss(&[30]), None);
    }

    #[test]
    fn join_token_and_key_derivations() {
        let j = parse_join(&[30, 12, 0x11, 3, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4]).unwrap();
        assert_eq!(
            j,
            Join {
                token: Some(0xdead_beef),
                backup: true,
                address_id: 3
            }
        );
        assert_eq!(
            parse_join(&[30, 16, 0x10, 0, 0, 0, 0, 0]).unwrap().token,
            None
        );
        // SHA-256 of the 8 zero bytes: af5570f5a1810b7a f78caf4bc70a660f 0df51e42baf91d4d e5b2328de0e83dfc
        assert_eq!(token_of_key(0), 0xaf55_70f5);
        assert_eq!(idsn_of_key(0), 0xe5b2_328d_e0e8_3dfc);
    }
}
