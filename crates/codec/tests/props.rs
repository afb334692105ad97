//! Property tests: round trip, chunking invariance, in place == out of place, all three
//! implementations equal, on random keys and inputs; every length 0..300 and large sizes.

use nena_codec::{Descrambler, Impl, Key, Scrambler, WINDOW};
use proptest::prelude::*;

fn scramble(key: Key, imp: Impl, data: &[u8]) -> Vec<u8> {
    let mut out = vec![0; data.len()];
    Scrambler::with_impl(key, imp).scramble(data, &mut out);
    out
}

fn descramble(key: Key, imp: Impl, data: &[u8]) -> Vec<u8> {
    let mut out = data.to_vec();
    Descrambler::with_impl(key, imp).descramble_in_place(&mut out);
    out
}

fn any_impl() -> impl Strategy<Value = Impl> {
    prop_oneof![Just(Impl::Straight), Just(Impl::Revised), Just(Impl::Fast)]
}

/// Split `data` at the (sorted, deduplicated) cut points, keeping empty chunks.
fn chunks<'a>(data: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
    cuts.sort_unstable();
    let mut out = Vec::new();
    let mut last = 0;
    for c in cuts {
        out.push(&data[last..c]);
        last = c;
    }
    out.push(&data[last..]);
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn round_trip(key: Key, imp in any_impl(), data in proptest::collection::vec(any::<u8>(), 0..3000)) {
        let c = scramble(key, imp, &data);
        prop_assert_eq!(descramble(key, imp, &c), data);
    }

    #[test]
    fn implementations_agree(key: Key, data in proptest::collection::vec(any::<u8>(), 0..3000)) {
        let want = scramble(key, Impl::Revised, &data);
        for imp in Impl::ALL {
            prop_assert_eq!(&scramble(key, imp, &data), &want, "{}", imp.name());
            prop_assert_eq!(&descramble(key, imp, &want), &data, "{}", imp.name());
        }
    }

    #[test]
    fn chunking_invariance(
        key: Key,
        imp in any_impl(),
        data in proptest::collection::vec(any::<u8>(), 0..2000),
        cuts in proptest::collection::vec(any::<usize>(), 0..40),
    ) {
        let want = scramble(key, imp, &data);
        let mut s = Scrambler::with_impl(key, imp);
        let mut d = Descrambler::with_impl(key, imp);
        let mut got = Vec::new();
        let mut back = Vec::new();
        for (i, piece) in chunks(&data, &cuts).into_iter().enumerate() {
            let mut out = vec![0; piece.len()];
            if i % 2 == 0 {
                s.scramble(piece, &mut out);
            } else {
                out.copy_from_slice(piece);
                s.scramble_in_place(&mut out);
            }
            got.extend_from_slice(&out);
            let mut p = vec![0; out.len()];
            if i % 3 == 0 {
                d.descramble(&out, &mut p);
            } else {
                p.copy_from_slice(&out);
                d.descramble_in_place(&mut p);
            }
            back.extend_from_slice(&p);
        }
        prop_assert_eq!(got, want);
        prop_assert_eq!(back, data);
    }

    /// The weakness in BRIEF.md: out[j] ^ out[j-1] == b[j] ^ b[j-65] once j >= 65.
    #[test]
    fn known_plaintext_relation(key: Key, data in proptest::collection::vec(any::<u8>(), 66..600)) {
        let c = scramble(key, Impl::Fast, &data);
        for j in 65..data.len() {
            prop_assert_eq!(c[j] ^ c[j - 1], data[j] ^ data[j - 65]);
        }
    }
}

fn test_bytes(seed: u64, n: usize) -> Vec<u8> {
    nena_testkit::random_bytes(seed, n)
}

/// Every length 0..300 (all tails and block boundaries of every backend), every
/// implementation, in place and out of place, with a stream already in progress.
#[test]
fn every_length_below_300() {
    let key = *b"\x00\xff\x10\x20\x30\x40\x50\x60";
    let warm = test_bytes(1, 3 * WINDOW + 5);
    for len in 0..300 {
        let data = test_bytes(len as u64 + 10, len);
        let mut want = vec![0; len];
        let mut r = Scrambler::with_impl(key, Impl::Revised);
        r.scramble(&warm, &mut vec![0; warm.len()]);
        r.scramble(&data, &mut want);
        for imp in Impl::ALL {
            let mut s = Scrambler::with_impl(key, imp);
            let mut d = Descrambler::with_impl(key, imp);
            let mut w = warm.clone();
            s.scramble_in_place(&mut w);
            d.descramble_in_place(&mut w);
            assert_eq!(w, warm);
            let mut out = vec![0; len];
            s.clone().scramble(&data, &mut out);
            assert_eq!(out, want, "{} len {len}", imp.name());
            let mut buf = data.clone();
            s.scramble_in_place(&mut buf);
            assert_eq!(buf, want, "{} in place len {len}", imp.name());
            let mut back = vec![0; len];
            d.clone().descramble(&buf, &mut back);
            assert_eq!(back, data, "{} descramble len {len}", imp.name());
            d.descramble_in_place(&mut buf);
            assert_eq!(buf, data, "{} descramble in place len {len}", imp.name());
        }
    }
}

/// Large sizes: 1 MiB + 13 bytes (fast vs revised), 256 KiB + 1 for straight too.
#[test]
fn large_sizes() {
    let key = *b"bigbytes";
    let data = test_bytes(42, (1 << 20) + 13);
    let want = scramble(key, Impl::Revised, &data);
    assert_eq!(scramble(key, Impl::Fast, &data), want);
    assert_eq!(descramble(key, Impl::Fast, &want), data);
    assert_eq!(descramble(key, Impl::Revised, &want), data);
    let small = &data[..(1 << 18) + 1];
    assert_eq!(scramble(key, Impl::Straight, small), want[..small.len()]);
    // The same megabyte in 64 KiB + 1 chunks (like the CLI's reads, but misaligned).
    let mut s = Scrambler::new(key);
    let mut got = data.clone();
    for c in got.chunks_mut((1 << 16) + 1) {
        s.scramble_in_place(c);
    }
    assert_eq!(got, want);
}

#[test]
#[should_panic(expected = "same length")]
fn length_mismatch_panics() {
    Scrambler::new([0; 8]).scramble(&[1, 2, 3], &mut [0; 2]);
}
