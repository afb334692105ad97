//! The perf stream of the application protocol (sans-IO): each direction a run of chunks
//! (`len u32 | len bytes`, `len` <= [`MAX_CHUNK`]) ended by a zero length and the sender's
//! byte count, and the deterministic [`pattern`] every perf byte is checked against.

use super::{WireError, MAX_CHUNK};

/// Encode a perf chunk header for `len` payload bytes.
pub fn chunk_header(len: u32) -> [u8; 4] {
    len.to_be_bytes()
}

/// Encode the end marker of a perf stream that carried `total` payload bytes.
pub fn chunk_end(total: u64) -> [u8; 12] {
    let mut out = [0u8; 12];
    out[4..].copy_from_slice(&total.to_be_bytes());
    out
}

/// What [`ChunkDecoder::next`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkEvent {
    /// The consumed bytes were header bytes (nothing to deliver yet).
    Header,
    /// The consumed bytes are payload.
    Data,
    /// The stream ended; the sender says it sent this many payload bytes.
    End(u64),
}

/// Incremental decoder of a chunked perf stream.
#[derive(Debug, Default)]
pub struct ChunkDecoder {
    hdr: [u8; 12],
    have: usize,
    remaining: u32,
    in_end: bool,
    done: bool,
}

impl ChunkDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// True once the end marker was decoded; bytes after it belong to the final reply.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Consume a prefix of `input`: returns how many bytes were used and what they were.
    /// Must not be called with empty input or after the end.
    pub fn next(&mut self, input: &[u8]) -> Result<(usize, ChunkEvent), WireError> {
        debug_assert!(!input.is_empty() && !self.done);
        if self.remaining > 0 {
            let n = input.len().min(self.remaining as usize);
            self.remaining -= n as u32;
            return Ok((n, ChunkEvent::Data));
        }
        let want = if self.in_end { 12 } else { 4 };
        let n = input.len().min(want - self.have);
        self.hdr[self.have..self.have + n].copy_from_slice(&input[..n]);
        self.have += n;
        if self.have < want {
            return Ok((n, ChunkEvent::Header));
        }
        if self.in_end {
            self.done = true;
            let total = u64::from_be_bytes(self.hdr[4..12].try_into().unwrap());
            return Ok((n, ChunkEvent::End(total)));
        }
        let len = u32::from_be_bytes(self.hdr[..4].try_into().unwrap());
        if len == 0 {
            self.in_end = true;
            return Ok((n, ChunkEvent::Header));
        }
        if len > MAX_CHUNK {
            return Err(WireError::ChunkTooLong(len));
        }
        self.have = 0;
        self.remaining = len;
        Ok((n, ChunkEvent::Header))
    }
}

/// The deterministic perf payload: `PATTERN_LEN` pseudo-random bytes repeated, so the
/// receiver can check every byte without a digest.
pub const PATTERN_LEN: usize = 1 << 20;

/// The perf pattern (xorshift64* with a fixed seed), made once per process and shared by
/// every session: an idle perf session holds no mebibyte of its own.
pub fn pattern() -> &'static [u8] {
    static PATTERN: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    PATTERN.get_or_init(|| {
        let mut out = Vec::with_capacity(PATTERN_LEN);
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        while out.len() < PATTERN_LEN {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            out.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
        }
        out
    })
}

/// Checks a received byte stream against the repeating [`pattern`].
pub struct PatternCheck<'a> {
    pattern: &'a [u8],
    offset: usize,
    ok: bool,
}

impl<'a> PatternCheck<'a> {
    pub fn new(pattern: &'a [u8]) -> Self {
        PatternCheck {
            pattern,
            offset: 0,
            ok: true,
        }
    }
    pub fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let n = data.len().min(self.pattern.len() - self.offset);
            if self.ok && data[..n] != self.pattern[self.offset..self.offset + n] {
                self.ok = false;
            }
            self.offset = (self.offset + n) % self.pattern.len();
            data = &data[n..];
        }
    }
    pub fn ok(&self) -> bool {
        self.ok
    }
}
