//! Deterministic, non-secret test bytes for keys and messages, shared by every benchmark
//! (`ciphers` re-exports them).

/// `len` bytes of a fixed xorshift stream: all different runs, so that no transfer, cipher
/// or compressor can shortcut them (the payload of the lab benches).
pub fn incompressible(len: usize) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect()
}

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
