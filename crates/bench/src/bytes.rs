//! Deterministic, non-secret test bytes for keys and messages, shared by every benchmark
//! (`ciphers` re-exports them).

/// Deterministic, non-secret test bytes (xorshift64*), for keys and messages.
pub fn test_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect()
}
