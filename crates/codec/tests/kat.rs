//! Known-answer tests, derived by hand from the definition (BRIEF.md, Figure 14), not from
//! running the code.
//!
//! Notation: `s` = initial window (56 zero bytes, then key bytes k0..k7 at s[56..64]) followed
//! by the plaintext b0, b1, ... at s[64..]. Output byte j is `b_j` XOR the window before it,
//! i.e. XOR of s[j..j+64]. So:
//! - for j <= 56 the window holds all 8 key bytes and b0..b_{j-1}:
//!   `out_j = b_j ^ (k0^..^k7) ^ (b0^..^b_{j-1})`;
//! - for 57 <= j <= 63 the key bytes k0..k_{j-57} have dropped out:
//!   `out_j = b_j ^ (k_{j-56}^..^k7) ^ (b0^..^b_{j-1})`;
//! - for j >= 64 the key is gone: `out_j = b_j ^ b_{j-64} ^ .. ^ b_{j-1}` (65 plaintext bytes).

use nena_codec::{parse_key_hex, Descrambler, Impl, Key, Scrambler};

/// Check `plain -> want` with every implementation, one call and byte by byte, and back.
fn check(key: Key, plain: &[u8], want: &[u8]) {
    for imp in Impl::ALL {
        let mut out = plain.to_vec();
        Scrambler::with_impl(key, imp).scramble_in_place(&mut out);
        assert_eq!(out, want, "{} scramble", imp.name());
        let mut s = Scrambler::with_impl(key, imp);
        let mut one = vec![0u8; plain.len()];
        for (i, b) in plain.iter().enumerate() {
            s.scramble(std::slice::from_ref(b), &mut one[i..i + 1]);
        }
        assert_eq!(one, want, "{} scramble byte by byte", imp.name());
        let mut back = vec![0u8; want.len()];
        Descrambler::with_impl(key, imp).descramble(want, &mut back);
        assert_eq!(back, plain, "{} descramble", imp.name());
    }
}

/// Key bytes 01 02 04 08 10 20 40 80 (XOR = 0xFF), plaintext all zero: the window XOR is
/// 0xFF while all key bytes are in it (j = 0..=56), then k0, k1, ... drop out one per byte:
/// XOR(k_m..k7) = 0xFF << m, i.e. FE FC F8 F0 E0 C0 80 for j = 57..=63, then 0.
/// (This is also the weakness in one picture: after 64 bytes the key is gone.)
#[test]
fn zeros_show_the_key_dropping_out() {
    let key = parse_key_hex("0102040810204080").unwrap();
    let mut want = vec![0xFF; 57];
    want.extend_from_slice(&[0xFE, 0xFC, 0xF8, 0xF0, 0xE0, 0xC0, 0x80]);
    want.extend_from_slice(&[0x00; 8]);
    check(key, &[0u8; 72], &want);
}

/// Same key, plaintext all 0x01. The XOR of j plaintext bytes is (j & 1).
/// - j <= 56: out = 0x01 ^ 0xFF ^ (j & 1): FE for even j, FF for odd j.
/// - j = 57..=63: out = 0x01 ^ (0xFF << (j - 56)) ^ (j & 1):
///   57: 01^FE^01 = FE, 58: 01^FC = FD, 59: 01^F8^01 = F8, 60: 01^F0 = F1,
///   61: 01^E0^01 = E0, 62: 01^C0 = C1, 63: 01^80^01 = 80.
/// - j >= 64: the window is 64 bytes of 0x01, XOR 0: out = 0x01.
#[test]
fn ones_cross_the_64_65_boundary() {
    let key = parse_key_hex("0102040810204080").unwrap();
    let mut want: Vec<u8> = (0..57)
        .map(|j| if j % 2 == 0 { 0xFE } else { 0xFF })
        .collect();
    want.extend_from_slice(&[0xFE, 0xFD, 0xF8, 0xF1, 0xE0, 0xC1, 0x80]);
    want.extend_from_slice(&[0x01; 80]);
    assert_eq!(want.len(), 144);
    check(key, &[0x01; 144], &want);
}

/// Zero key, one plaintext byte 0xAA followed by zeros: b0 sits in the window of outputs
/// 1..=64 (s[64] is inside s[j..j+64] iff 1 <= j <= 64), and is out_0 itself, so the
/// "impulse response" is exactly 65 bytes of 0xAA, then zeros.
#[test]
fn impulse_response_is_65_bytes_wide() {
    let mut plain = vec![0u8; 200];
    plain[0] = 0xAA;
    let mut want = vec![0u8; 200];
    want[..65].fill(0xAA);
    check([0; 8], &plain, &want);
}

/// The key's byte order: the first hex pair is window byte 56, which leaves the window
/// first (after 57 outputs); the last pair is window byte 63 and leaves after 64.
#[test]
fn key_byte_order() {
    let mut want = vec![0x80u8; 57];
    want.extend_from_slice(&[0; 20]);
    check(parse_key_hex("8000000000000000").unwrap(), &[0; 77], &want);

    let mut want = vec![0x80u8; 64];
    want.extend_from_slice(&[0; 20]);
    check(parse_key_hex("0000000000000080").unwrap(), &[0; 84], &want);
}

/// A short message, worked byte by byte: key "nenakey!" = 6E 65 6E 61 6B 65 79 21, whose
/// XOR is K = 52 (6E^65 = 0B, ^6E = 65, ^61 = 04, ^6B = 6F, ^65 = 0A, ^79 = 73, ^21 = 52).
/// While only zeros leave the window, its XOR w goes K, K^b0, K^b0^b1, ... and out_j = b_j ^ w.
/// Plaintext "MPTCP" = 4D 50 54 43 50:
/// out0 = 4D^52 = 1F (w = 1F), out1 = 50^1F = 4F (w = 4F), out2 = 54^4F = 1B (w = 1B),
/// out3 = 43^1B = 58 (w = 58), out4 = 50^58 = 08.
#[test]
fn short_message_by_hand() {
    check(*b"nenakey!", b"MPTCP", &[0x1F, 0x4F, 0x1B, 0x58, 0x08]);
}

/// kato leaks without any known plaintext: from byte 64 on, `out_j = b_j ^ (b_{j-64} ^ .. ^
/// b_{j-1})`, and the XOR of the 64 bytes before `j` is zero wherever the text repeats with
/// a period that divides 32 (two, four, ... copies of each byte in the window). Indented
/// code, separator lines, tables and zero padding do. There the scrambled bytes are the
/// plaintext itself: an eavesdropper who knows nothing reads them off the wire. (The 26
/// plaintext pieces a lab capture of a kato text transfer showed were such runs.)
#[test]
fn periodic_text_crosses_in_clear_without_any_known_plaintext() {
    let key = parse_key_hex("8a4f1c0be27d3956").unwrap();
    let line = b"| port | subflow | bytes | rtt |"; // 32 bytes, repeated
    assert_eq!(line.len(), 32);
    let mut plain = b"secret preamble that the window forgets after 64 bytes..........".to_vec();
    for _ in 0..6 {
        plain.extend_from_slice(line);
    }
    for imp in Impl::ALL {
        let mut out = plain.clone();
        Scrambler::with_impl(key, imp).scramble_in_place(&mut out);
        // After two copies fill the window, every further copy is on the wire as it is.
        let start = 64 + 2 * 32;
        assert_eq!(&out[start..], &plain[start..], "{}", imp.name());
        assert!(out.windows(32).filter(|w| *w == line).count() >= 4);
        // and the preamble is not
        assert_ne!(&out[..64], &plain[..64]);
    }
}
