//! Tests of the counters and limits of `cipher.rs` at their boundaries: the keystream of
//! `stream` mode just before, at and across the end of each key epoch (the largest epoch,
//! 2^36 bytes, reached by seeking, not by 64 GiB of XOR), and the record numbers and nonces
//! of `aead` mode across their epoch's end. Each expected byte is computed independently:
//! AES-128 as a bare block cipher over `iv || u32 block number`, ChaCha20 (RFC 8439) built
//! directly with the epoch's key, nonce and block counter, the AEADs straight from `ring`
//! (another implementation than the `aws-lc-rs` that nena seals and opens with) with the
//! epoch's key and the nonce of RFC 8446 section 5.3.

use super::*;
use crate::keys::Schedule;
use ctr::cipher::{BlockEncrypt, KeyInit, StreamCipherSeek};
use ring::aead as ring_aead;

fn first_secret() -> TrafficSecret {
    Schedule::new(
        &crate::keys::Secrets {
            kem: &[0x5a; 32],
            dh: &[0x5a; 32],
            r_c: &[0xc3; 32],
        },
        b"hello",
        b"accept",
    )
    .traffic()
    .0
}

/// The secret of epoch `n`: `n` key updates of the first.
fn epoch_secret(n: u64) -> TrafficSecret {
    let mut s = first_secret();
    for _ in 0..n {
        s = s.next();
    }
    s
}

/// `len` keystream bytes of epoch `epoch` from byte `pos` of that epoch, computed without
/// [`Keystream`].
fn expected(suite: Suite, epoch: u64, pos: u64, len: usize) -> Vec<u8> {
    let (key, iv) = epoch_secret(epoch).key_iv(suite.key_len());
    match suite {
        Suite::Aes128 => {
            let aes = aes::Aes128::new(key[..].into());
            let first = pos / 16;
            let last = (pos + len as u64).div_ceil(16);
            let mut out = Vec::new();
            for block_no in first..last {
                let ctr = u32::try_from(block_no).expect("a block number of an epoch is 32-bit");
                let mut block = [0u8; 16];
                block[..IV_LEN].copy_from_slice(&iv);
                block[IV_LEN..].copy_from_slice(&ctr.to_be_bytes());
                let mut b = block.into();
                aes.encrypt_block(&mut b);
                out.extend_from_slice(&b);
            }
            let skip = (pos % 16) as usize;
            out[skip..skip + len].to_vec()
        }
        Suite::ChaCha20 => {
            let mut c = chacha20::ChaCha20::new(key[..].into(), (&iv).into());
            c.seek(pos);
            let mut out = vec![0u8; len];
            c.apply_keystream(&mut out);
            out
        }
    }
}

/// Keystream bytes `[start, start + len)` of the whole direction, epoch by epoch.
fn expected_span(suite: Suite, epoch_log2: u8, start: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    let mut at = start;
    while out.len() < len {
        let epoch = at >> epoch_log2;
        let pos = at & ((1u64 << epoch_log2) - 1);
        let left_in_epoch = (1u64 << epoch_log2) - pos;
        let n = (len - out.len()).min(left_in_epoch as usize);
        out.extend(expected(suite, epoch, pos, n));
        at += n as u64;
    }
    out
}

/// Distances before an epoch's end at which a read starts: inside the last block, at its
/// start, across block and (for ChaCha20) 64-byte block edges, and further back; the last
/// two long enough for AES-128-CTR's aws-lc-rs path (`AWS_LC_CTR_FROM`), from mid-block.
const BEFORE_END: [u64; 11] = [1, 15, 16, 17, 32, 63, 64, 65, 300, 5000, 70_008];

/// From just before the end of epochs 0, 1, 2 and 5, across the key update, into the next
/// epoch: `apply` and `apply_b2b`, in one call and in calls that stop exactly at the end,
/// give the keystream computed independently, for the largest epoch (2^36 bytes: 2^32 AES
/// blocks, the last of which is block number 0xffff_ffff) and smaller ones.
#[test]
fn keystream_across_each_epoch_end() {
    for suite in [Suite::Aes128, Suite::ChaCha20] {
        for epoch_log2 in [Keystream::MAX_EPOCH_LOG2, 32, 20, Keystream::MIN_EPOCH_LOG2] {
            for epoch in [0u64, 1, 2, 5] {
                let end = (epoch + 1) << epoch_log2;
                for before in BEFORE_END {
                    if before > 1u64 << epoch_log2 {
                        continue;
                    }
                    let start = end - before;
                    let len = before as usize + 100;
                    let want = expected_span(suite, epoch_log2, start, len);
                    let ctx =
                        format!("{suite:?} epoch_log2 {epoch_log2} epoch {epoch} start {start}");
                    let data: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
                    let want_xor: Vec<u8> = data.iter().zip(&want).map(|(d, k)| d ^ k).collect();

                    // apply, one call across the end.
                    let mut k = Keystream::at_offset(suite, first_secret(), epoch_log2, start);
                    let mut buf = data.clone();
                    k.apply(&mut buf);
                    assert_eq!(buf, want_xor, "apply: {ctx}");
                    assert_eq!(
                        (k.offset(), k.epoch()),
                        (start + len as u64, epoch + 1),
                        "{ctx}"
                    );

                    // apply_b2b, one call across the end.
                    let mut k = Keystream::at_offset(suite, first_secret(), epoch_log2, start);
                    let mut out = vec![0u8; len];
                    k.apply_b2b(&data, &mut out);
                    assert_eq!(out, want_xor, "apply_b2b: {ctx}");

                    // Calls that stop exactly at the end, then go on in the next epoch.
                    let cut = before as usize;
                    let mut k = Keystream::at_offset(suite, first_secret(), epoch_log2, start);
                    let mut buf = data.clone();
                    k.apply(&mut buf[..cut]);
                    assert_eq!((k.offset(), k.epoch()), (end, epoch + 1), "{ctx}");
                    k.apply(&mut buf[cut..]);
                    assert_eq!(buf, want_xor, "apply in two calls: {ctx}");
                    let mut k = Keystream::at_offset(suite, first_secret(), epoch_log2, start);
                    let mut out = vec![0u8; len];
                    k.apply_b2b(&data[..cut], &mut out[..cut]);
                    k.apply_b2b(&data[cut..], &mut out[cut..]);
                    assert_eq!(out, want_xor, "apply_b2b in two calls: {ctx}");
                }
            }
        }
    }
}

/// The test's own construction agrees with the real keystream from offset 0 (so a
/// seek-only bug cannot make both sides agree), and the epochs' keystreams differ.
#[test]
fn seeked_keystream_matches_the_unseeked_one() {
    for suite in [Suite::Aes128, Suite::ChaCha20] {
        let log2 = Keystream::MIN_EPOCH_LOG2;
        let mut whole = vec![0u8; 5 << log2];
        Keystream::new(suite, first_secret(), log2).apply(&mut whole);
        assert_eq!(
            whole,
            expected_span(suite, log2, 0, whole.len()),
            "{suite:?}"
        );
        for start in [0u64, 1, 255, 256, 257, 700] {
            let mut part = vec![0u8; whole.len() - start as usize];
            Keystream::at_offset(suite, first_secret(), log2, start).apply(&mut part);
            assert_eq!(part, whole[start as usize..], "{suite:?} from {start}");
        }
        assert_ne!(
            expected(suite, 0, 0, 64),
            expected(suite, 1, 0, 64),
            "{suite:?}: epochs share a key"
        );
    }
}

/// A record cipher moved to record `records` (the secret of its epoch), as after sealing
/// or opening that many records.
fn record_cipher_at(suite: Suite, epoch_log2: u8, records: u64) -> RecordCipher {
    let secret = epoch_secret(records >> epoch_log2);
    let (key, iv) = RecordCipher::epoch_key(suite, &secret);
    RecordCipher {
        suite,
        secret,
        epoch_log2,
        records,
        key,
        iv,
    }
}

/// Record `records`, sealed with ring directly (not nena's AEAD library): the epoch's key, and the nonce "IV xor the
/// record's number within the epoch" (64-bit, big-endian, left-padded).
fn expected_record(suite: Suite, epoch_log2: u8, records: u64, aad: &[u8], p: &[u8]) -> Vec<u8> {
    let (key, iv) = epoch_secret(records >> epoch_log2).key_iv(suite.key_len());
    let alg = match suite {
        Suite::Aes128 => &ring_aead::AES_128_GCM,
        Suite::ChaCha20 => &ring_aead::CHACHA20_POLY1305,
    };
    let key = ring_aead::LessSafeKey::new(ring_aead::UnboundKey::new(alg, &key).unwrap());
    let within = records % (1u64 << epoch_log2);
    let mut nonce = iv;
    for (n, w) in nonce[IV_LEN - 8..].iter_mut().zip(within.to_be_bytes()) {
        *n ^= w;
    }
    let mut out = p.to_vec();
    key.seal_in_place_append_tag(
        ring_aead::Nonce::assume_unique_for_key(nonce),
        ring_aead::Aad::from(aad),
        &mut out,
    )
    .unwrap();
    out
}

/// The last records of an epoch and the first of the next (the key update) are sealed with
/// the right key and nonce and open on the other side, for the largest epoch (2^23
/// records) and smaller ones, including a new key for every record.
#[test]
fn records_across_each_epoch_end() {
    for suite in [Suite::Aes128, Suite::ChaCha20] {
        for epoch_log2 in [
            RecordCipher::MAX_EPOCH_LOG2,
            8,
            1,
            RecordCipher::MIN_EPOCH_LOG2,
        ] {
            for epoch in [0u64, 1, 4] {
                let end = (epoch + 1) << epoch_log2;
                let start = end.saturating_sub(2).max(epoch << epoch_log2);
                let mut tx = record_cipher_at(suite, epoch_log2, start);
                let mut rx = record_cipher_at(suite, epoch_log2, start);
                for r in start..end + 3 {
                    let ctx = format!("{suite:?} epoch_log2 {epoch_log2} record {r}");
                    let aad = r.to_be_bytes();
                    let plain: Vec<u8> = (0..50u8).map(|i| i ^ r as u8).collect();
                    let mut sealed = plain.clone();
                    let tag = tx.seal(&aad, &mut sealed);
                    sealed.extend_from_slice(&tag);
                    assert_eq!(
                        sealed,
                        expected_record(suite, epoch_log2, r, &aad, &plain),
                        "{ctx}"
                    );
                    assert_eq!(rx.open(&aad, &mut sealed), Ok(plain.len()), "{ctx}");
                    assert_eq!(sealed[..plain.len()], plain[..], "{ctx}");
                    assert_eq!(tx.records(), r + 1);
                    assert_eq!(tx.epoch(), (r + 1) >> epoch_log2, "{ctx}");
                }
            }
        }
    }
}
