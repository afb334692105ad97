//! nena-codec: the byte scrambling of Kato et al. (SECURWARE 2017 and the journal version,
//! Figure 14), sans-IO: bytes in, bytes out.
//!
//! # The scrambling
//! Each direction of a connection has its own state, a 64-byte window `w[0..64]`
//! (`w[0]` the oldest byte). Initially it holds 56 zero bytes followed by the 8 key bytes
//! (`w[56..64] = key`). To scramble a plaintext byte `b`, output
//! `b ^ w[0] ^ w[1] ^ ... ^ w[63]`, then drop `w[0]` and append `b` (the *plaintext* byte).
//! Descrambling a byte `B` computes `b = B ^ w[0] ^ ... ^ w[63]` and appends `b`.
//!
//! Three implementations give identical output ([`Impl`]):
//! - [`Impl::Straight`]: the papers' straightforward version, shift the window and XOR all
//!   64 bytes for every byte;
//! - [`Impl::Revised`]: the papers' Figure 14, a ring buffer and a running XOR (`sXor`);
//! - [`Impl::Fast`]: vectorised, chosen once at run time ([`fast_backend`]): AVX-512 (BW,
//!   VBMI and GFNI) or AVX2 on x86-64, otherwise a portable word-at-a-time (`u64`) version
//!   that any CPU (ARM included) runs.
//!
//! # The algebra behind `fast`
//! Let `s` be the initial window followed by the plaintext and `P` the prefix XOR over `s`.
//! Output byte `k` (counting from the start of `s`, `k >= 64`) is the XOR of the 65 bytes
//! `s[k-64..=k]`, i.e. `P[k] ^ P[k-65]`. Scrambling is therefore a sliding 65-byte XOR
//! (per 64-byte vector: in-qword partial XORs plus a window over qword totals);
//! descrambling is the recurrence `P[k] = C[k] ^ P[k-65]`, `b[k] = P[k] ^ P[k-1]`, whose
//! stride of 65 makes every 64-byte vector depend only on the previous one, shifted by a
//! byte. The kernels' own docs give the details.
//!
//! # Speed (this project's machine: Xeon with AVX-512, one core)
//! One 1280-byte message scrambled and descrambled in place with `fast` takes about
//! 42 ns on a 64-byte aligned buffer ([`AlignedBuf`]; about 50 ns on a `malloc`ed one)
//! (`cargo run --release -p nena-codec --example timing`; criterion:
//! `cargo bench -p nena-codec`), against about 1.3-1.5 us for `revised` and 0.75 us for
//! OpenSSL's AES-128-GCM. Bulk (1 MiB, in place) runs at about 47 GB/s per direction.
//!
//! # Weakness (read this before relying on it)
//! The scrambling is not encryption. From `out[k] = P[k] ^ P[k-65]` follows
//! `out[k] ^ out[k-1] = b[k] ^ b[k-65]`: an observer who knows (or guesses) any 65
//! consecutive plaintext bytes of an observed run of ciphertext recovers all the plaintext
//! of that run, after and before them, without the key; and the key only influences the
//! first 64 bytes of a stream. Protocol headers, file formats or repeated content make such known
//! plaintext easy to find. The papers do not discuss this; nena keeps the scheme because
//! it is the papers' method (and its "not every path" argument), and a later issue adds
//! cryptographic successors.
//!
//! # Streaming
//! [`Scrambler`] and [`Descrambler`] keep their state across calls: any split of a stream
//! into chunks (empty ones included) gives exactly the output of one call over the whole
//! stream. Both work in place or into a separate buffer.

mod buffer;
mod fast;
pub mod fuzzing;
mod revised;
mod straight;
mod window;

pub use buffer::{AlignedBuf, BUF_ALIGN};
use window::Dir;
pub use window::WINDOW;

use std::fmt;
use std::str::FromStr;

/// Size of a key in bytes.
pub const KEY_LEN: usize = 8;
/// A key: the 8 bytes that become window bytes 56..64 (in this order).
pub type Key = [u8; KEY_LEN];

/// Which implementation of the scrambling runs. All give identical output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Impl {
    /// Shift the window and XOR all 64 bytes for every byte (the papers' straightforward one).
    Straight,
    /// Ring buffer and running XOR (the papers' revised one, Figure 14).
    Revised,
    /// Vectorised, backend chosen at run time (see [`fast_backend`]).
    Fast,
}

impl Impl {
    /// Every implementation, slowest first.
    pub const ALL: [Impl; 3] = [Impl::Straight, Impl::Revised, Impl::Fast];

    /// The name used on the command line: `straight`, `revised` or `fast`.
    pub fn name(self) -> &'static str {
        match self {
            Impl::Straight => "straight",
            Impl::Revised => "revised",
            Impl::Fast => "fast",
        }
    }
}

impl fmt::Display for Impl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown implementation name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseImplError(pub String);

impl fmt::Display for ParseImplError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown implementation {:?} (valid: straight, revised, fast)",
            self.0
        )
    }
}

impl std::error::Error for ParseImplError {}

impl FromStr for Impl {
    type Err = ParseImplError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Impl::ALL
            .into_iter()
            .find(|i| i.name() == s)
            .ok_or_else(|| ParseImplError(s.to_string()))
    }
}

/// A key string that is not exactly 16 hexadecimal digits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyError {
    /// The string does not have 16 characters.
    Length(usize),
    /// A character that is not a hexadecimal digit, at this (character) position.
    NotHex { pos: usize, ch: char },
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::Length(n) => write!(
                f,
                "key must be exactly 16 hex digits (8 bytes), got {n} characters"
            ),
            KeyError::NotHex { pos, ch } => write!(
                f,
                "key must be exactly 16 hex digits (8 bytes): {ch:?} at position {} is not a hex digit",
                pos + 1
            ),
        }
    }
}

impl std::error::Error for KeyError {}

/// Parse a key written as exactly 16 hex digits (either case, no prefix, no separators):
/// the 8 key bytes in order, the first pair becomes window byte 56.
pub fn parse_key_hex(s: &str) -> Result<Key, KeyError> {
    let n = s.chars().count();
    if n != 2 * KEY_LEN {
        return Err(KeyError::Length(n));
    }
    if let Some((pos, ch)) = s.chars().enumerate().find(|(_, c)| !c.is_ascii_hexdigit()) {
        return Err(KeyError::NotHex { pos, ch });
    }
    let mut key = [0u8; KEY_LEN];
    for (i, pair) in s.as_bytes().chunks_exact(2).enumerate() {
        let hi = (pair[0] as char).to_digit(16).expect("checked hex digit");
        let lo = (pair[1] as char).to_digit(16).expect("checked hex digit");
        key[i] = (hi * 16 + lo) as u8;
    }
    Ok(key)
}

/// The initial window for a key: 56 zero bytes followed by the key.
pub fn initial_window(key: Key) -> [u8; WINDOW] {
    let mut w = [0u8; WINDOW];
    w[WINDOW - KEY_LEN..].copy_from_slice(&key);
    w
}

/// Which vectorised backend [`Impl::Fast`] uses on this machine: `"avx512vbmi-gfni"`, `"avx2"` or
/// `"portable-u64"`. Detected once. The environment variable `NENA_CODEC_BACKEND`, if set to
/// one of these names when it is first read, forces a slower backend that this CPU supports
/// (for measuring and testing the fallbacks); other values are ignored.
pub fn fast_backend() -> &'static str {
    fast::backend().name
}

/// The state of one direction, for each implementation.
#[derive(Clone)]
enum Engine {
    Straight(straight::State),
    Revised(revised::State),
    Fast {
        st: fast::State,
        backend: &'static fast::Backend,
    },
}

impl Engine {
    fn new(key: Key, imp: Impl, dir: Dir) -> Self {
        let w = initial_window(key);
        match imp {
            Impl::Straight => Engine::Straight(straight::State::new(w)),
            Impl::Revised => Engine::Revised(revised::State::new(w)),
            Impl::Fast => Engine::Fast {
                st: fast::State::new(
                    match dir {
                        Dir::Scramble => fast::StateKind::Plain,
                        Dir::Descramble => fast::StateKind::Prefix,
                    },
                    &w,
                ),
                backend: fast::backend(),
            },
        }
    }

    fn imp(&self) -> Impl {
        match self {
            Engine::Straight(_) => Impl::Straight,
            Engine::Revised(_) => Impl::Revised,
            Engine::Fast { .. } => Impl::Fast,
        }
    }

    fn run(&mut self, dir: Dir, input: &[u8], output: &mut [u8]) {
        assert_eq!(
            input.len(),
            output.len(),
            "nena-codec: input and output buffers must have the same length"
        );
        match self {
            Engine::Straight(s) => s.run(dir, input.iter().copied(), output),
            Engine::Revised(s) => s.run(dir, input.iter().copied(), output),
            Engine::Fast { st, backend } => backend.run(dir, st, input, output),
        }
    }

    fn run_in_place(&mut self, dir: Dir, buf: &mut [u8]) {
        match self {
            Engine::Straight(s) => s.run_in_place(dir, buf),
            Engine::Revised(s) => s.run_in_place(dir, buf),
            Engine::Fast { st, backend } => backend.run_in_place(dir, st, buf),
        }
    }
}

/// The sending side: scrambles a byte stream, keeping its window across calls.
#[derive(Clone)]
pub struct Scrambler {
    engine: Engine,
}

impl fmt::Debug for Scrambler {
    /// Shows the implementation only, never the window (it holds key and plaintext).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scrambler")
            .field("impl", &self.engine.imp())
            .finish_non_exhaustive()
    }
}

impl Scrambler {
    /// A scrambler for `key` using the fast implementation.
    pub fn new(key: Key) -> Self {
        Self::with_impl(key, Impl::Fast)
    }

    /// A scrambler for `key` using the given implementation.
    pub fn with_impl(key: Key, imp: Impl) -> Self {
        Scrambler {
            engine: Engine::new(key, imp, Dir::Scramble),
        }
    }

    /// The implementation this scrambler uses.
    pub fn imp(&self) -> Impl {
        self.engine.imp()
    }

    /// Scramble `buf` in place (the next `buf.len()` bytes of the stream).
    pub fn scramble_in_place(&mut self, buf: &mut [u8]) {
        self.engine.run_in_place(Dir::Scramble, buf);
    }

    /// Scramble `input` (the next `input.len()` bytes of the stream) into `output`.
    ///
    /// # Panics
    /// If `input` and `output` do not have the same length.
    pub fn scramble(&mut self, input: &[u8], output: &mut [u8]) {
        self.engine.run(Dir::Scramble, input, output);
    }
}

/// The receiving side: descrambles a byte stream, keeping its window across calls.
#[derive(Clone)]
pub struct Descrambler {
    engine: Engine,
}

impl fmt::Debug for Descrambler {
    /// Shows the implementation only, never the window (it holds key and plaintext).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Descrambler")
            .field("impl", &self.engine.imp())
            .finish_non_exhaustive()
    }
}

impl Descrambler {
    /// A descrambler for `key` using the fast implementation.
    pub fn new(key: Key) -> Self {
        Self::with_impl(key, Impl::Fast)
    }

    /// A descrambler for `key` using the given implementation.
    pub fn with_impl(key: Key, imp: Impl) -> Self {
        Descrambler {
            engine: Engine::new(key, imp, Dir::Descramble),
        }
    }

    /// The implementation this descrambler uses.
    pub fn imp(&self) -> Impl {
        self.engine.imp()
    }

    /// Descramble `buf` in place (the next `buf.len()` bytes of the stream).
    pub fn descramble_in_place(&mut self, buf: &mut [u8]) {
        self.engine.run_in_place(Dir::Descramble, buf);
    }

    /// Descramble `input` (the next `input.len()` bytes of the stream) into `output`.
    ///
    /// # Panics
    /// If `input` and `output` do not have the same length.
    pub fn descramble(&mut self, input: &[u8], output: &mut [u8]) {
        self.engine.run(Dir::Descramble, input, output);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impl_names_round_trip() {
        for i in Impl::ALL {
            assert_eq!(i.name().parse::<Impl>().unwrap(), i);
        }
        let e = "aes".parse::<Impl>().unwrap_err().to_string();
        assert!(e.contains("straight") && e.contains("revised") && e.contains("fast"));
    }

    #[test]
    fn key_parsing() {
        assert_eq!(
            parse_key_hex("0123456789abcdEF").unwrap(),
            [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef]
        );
        assert_eq!(parse_key_hex("").unwrap_err(), KeyError::Length(0));
        assert_eq!(
            parse_key_hex("0123456789abcdef0").unwrap_err(),
            KeyError::Length(17)
        );
        assert_eq!(
            parse_key_hex("0123456789abcdeg").unwrap_err(),
            KeyError::NotHex { pos: 15, ch: 'g' }
        );
        assert!(matches!(
            parse_key_hex("0x23456789abcdef"),
            Err(KeyError::NotHex { pos: 1, ch: 'x' })
        ));
        // Multi-byte characters: never a panic, always an error.
        assert!(parse_key_hex("ééééééééééééééé").is_err());
        assert!(parse_key_hex("0123456789abcdé").is_err());
        assert!(parse_key_hex("+123456789abcdef").is_err());
        for e in [KeyError::Length(3), KeyError::NotHex { pos: 0, ch: 'z' }] {
            assert!(!e.to_string().contains('\n'));
        }
    }

    #[test]
    fn debug_hides_state() {
        let s = format!("{:?}", Scrambler::with_impl([0xAA; 8], Impl::Revised));
        assert!(s.contains("Revised") && !s.contains("170"));
    }
}
