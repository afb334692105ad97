//! The body of the `codec_stream` fuzz target, callable from a stable `cargo test` too.
//!
//! Input layout: 8 key bytes, 1 byte choosing the implementation under test, then a list of
//! chunk lengths (one byte each, 0 meaning an empty chunk) up to a 0xFF separator, then the
//! data. Every byte is accepted; short inputs use defaults.

use crate::{Descrambler, Impl, Key, Scrambler};

/// Check, for data, key, chunking and implementation taken from `data`: chunked output ==
/// one-shot output == every other implementation's output (in place and out of place), and
/// descrambling gives the plaintext back. Panics on any mismatch.
pub fn stream(data: &[u8]) {
    let mut key: Key = [0; 8];
    let k = data.len().min(8);
    key[..k].copy_from_slice(&data[..k]);
    let rest = &data[k..];
    let (imp_byte, rest) = rest.split_first().map_or((0, rest), |(b, r)| (*b, r));
    let imp = Impl::ALL[imp_byte as usize % 3];
    let sep = rest
        .iter()
        .position(|&b| b == 0xFF)
        .unwrap_or(rest.len().min(16));
    let chunks: Vec<usize> = rest[..sep].iter().map(|&b| b as usize).collect();
    let plain = rest.get(sep + 1..).unwrap_or(&[]);

    // One-shot results of every implementation.
    let oneshot: Vec<Vec<u8>> = Impl::ALL
        .iter()
        .map(|&i| {
            let mut out = vec![0; plain.len()];
            Scrambler::with_impl(key, i).scramble(plain, &mut out);
            out
        })
        .collect();
    for (i, o) in oneshot.iter().enumerate() {
        assert_eq!(
            o,
            &oneshot[0],
            "{} differs from straight",
            Impl::ALL[i].name()
        );
    }
    let want = &oneshot[0];

    // Chunk lengths: cycle through the list (at least once, empty chunks included) until
    // the data is used up or a step limit is reached; the rest is one final chunk.
    let mut lens = Vec::new();
    let mut left = plain.len();
    let limit = 2 * chunks.len() + plain.len();
    for (i, &c) in chunks.iter().cycle().enumerate().take(limit) {
        if left == 0 && i >= chunks.len() {
            break;
        }
        let l = c.min(left);
        lens.push(l);
        left -= l;
    }
    if left > 0 {
        lens.push(left);
    }

    // Chunked, alternating in place and out of place.
    let mut s = Scrambler::with_impl(key, imp);
    let mut d = Descrambler::with_impl(key, imp);
    let mut scrambled = Vec::with_capacity(plain.len());
    let mut back = Vec::with_capacity(plain.len());
    let mut pos = 0;
    for (n, len) in lens.into_iter().enumerate() {
        let piece = &plain[pos..pos + len];
        let mut out = vec![0; len];
        if n % 2 == 0 {
            s.scramble(piece, &mut out);
        } else {
            out.copy_from_slice(piece);
            s.scramble_in_place(&mut out);
        }
        scrambled.extend_from_slice(&out);
        if n % 3 == 0 {
            d.descramble_in_place(&mut out);
        } else {
            let mut p = vec![0; len];
            d.descramble(&out, &mut p);
            out = p;
        }
        back.extend_from_slice(&out);
        pos += len;
    }
    assert_eq!(pos, plain.len());
    assert_eq!(&scrambled, want, "chunked {} != one-shot", imp.name());
    assert_eq!(back, plain, "{} round trip", imp.name());

    // One-shot descrambling with every implementation.
    for i in Impl::ALL {
        let mut p = want.clone();
        Descrambler::with_impl(key, i).descramble_in_place(&mut p);
        assert_eq!(p, plain, "{} one-shot descramble", i.name());
    }
}
