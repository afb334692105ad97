//! `nena codec scramble|descramble`: the papers' byte scrambling as a filter from standard
//! input to standard output, streamed in 64 KiB chunks (memory use does not grow with the
//! input). Bad keys, unknown implementations and I/O errors (a closed pipe included) end
//! with a one-line message and exit status 2.

use crate::exit::{CmdResult, Exit};
use anyhow::anyhow;
use clap::{Args, Subcommand};
use nena_codec::{parse_key_hex, Descrambler, Impl, Scrambler};
use std::fs::File;
use std::io::{self, ErrorKind, Read, Write};
use std::os::fd::AsFd;

/// Chunk size for reading and writing.
const CHUNK: usize = 64 * 1024;

#[derive(Subcommand, Debug)]
pub enum CodecCmd {
    /// Scramble standard input to standard output.
    Scramble(CodecArgs),
    /// Descramble standard input to standard output.
    Descramble(CodecArgs),
}

#[derive(Args)]
pub struct CodecArgs {
    /// The key: exactly 16 hex digits, the 8 key bytes in order (the first pair becomes
    /// window byte 56).
    #[arg(long, value_name = "HEX", allow_hyphen_values = true)]
    key: String,
    /// Implementation: straight, revised or fast (all give the same bytes).
    #[arg(
        long = "impl",
        value_name = "straight|revised|fast",
        default_value = "fast"
    )]
    imp: String,
}

impl std::fmt::Debug for CodecArgs {
    /// Never the key (issue 19).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodecArgs")
            .field("key", &"[redacted]")
            .field("imp", &self.imp)
            .finish()
    }
}

pub fn run(c: CodecCmd) -> CmdResult {
    let (scramble, args) = match c {
        CodecCmd::Scramble(a) => (true, a),
        CodecCmd::Descramble(a) => (false, a),
    };
    let key = parse_key_hex(&args.key).map_err(|e| Exit::usage(anyhow!("--key: {e}")))?;
    let imp: Impl = args
        .imp
        .parse()
        .map_err(|e| Exit::usage(anyhow!("--impl: {e}")))?;
    let mut scrambler = Scrambler::with_impl(key, imp);
    let mut descrambler = Descrambler::with_impl(key, imp);
    let mut transform = |b: &mut [u8]| {
        if scramble {
            scrambler.scramble_in_place(b)
        } else {
            descrambler.descramble_in_place(b)
        }
    };
    // Unbuffered handles on file descriptors 0 and 1: whole chunks go straight to the
    // system calls (std's stdout would scan every chunk for newlines).
    let dup = |fd: std::os::fd::BorrowedFd<'_>, what: &str| {
        fd.try_clone_to_owned()
            .map(File::from)
            .map_err(|e| Exit::usage(anyhow!("{what}: {e}")))
    };
    let mut input = dup(io::stdin().as_fd(), "standard input")?;
    let mut output = dup(io::stdout().as_fd(), "standard output")?;
    filter(&mut input, &mut output, &mut transform)
}

/// Read `input` to its end in chunks, transform each chunk, write it to `output`.
fn filter(
    input: &mut impl Read,
    output: &mut impl Write,
    f: &mut dyn FnMut(&mut [u8]),
) -> CmdResult {
    let mut buf = nena_codec::AlignedBuf::new(CHUNK);
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(Exit::usage(anyhow!("reading standard input: {e}"))),
        };
        f(&mut buf[..n]);
        output
            .write_all(&buf[..n])
            .map_err(|e| Exit::usage(anyhow!("writing standard output: {e}")))?;
    }
    output
        .flush()
        .map_err(|e| Exit::usage(anyhow!("writing standard output: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out its data in small, uneven pieces.
    struct Trickle<'a>(&'a [u8], usize);
    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.1 = self.1 % 97 + 1;
            let n = self.1.min(buf.len()).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    /// `nena codec`'s arguments (the kato key in hex) never show the key in `Debug`.
    #[test]
    fn codec_args_debug_hides_the_key() {
        let key = &nena_testkit::TEST_KEY_BYTES[..8];
        let args = CodecArgs {
            key: nena_testkit::hex(key),
            imp: "fast".into(),
        };
        for cmd in [CodecCmd::Scramble(args)] {
            for shown in [format!("{cmd:?}"), format!("{cmd:#?}")] {
                nena_testkit::assert_debug_hides(&shown, key, "CodecCmd");
                assert!(shown.contains("[redacted]"), "{shown}");
            }
        }
    }

    #[test]
    fn filter_streams_uneven_reads_like_one_call() {
        let key = [9, 8, 7, 6, 5, 4, 3, 2];
        let data: Vec<u8> = (0..200_000u32).map(|i| ((i * 31) >> 4) as u8).collect();
        let mut want = data.clone();
        Scrambler::with_impl(key, Impl::Revised).scramble_in_place(&mut want);
        let mut s = Scrambler::new(key);
        let mut out = Vec::new();
        filter(&mut Trickle(&data, 0), &mut out, &mut |b| {
            s.scramble_in_place(b)
        })
        .unwrap();
        assert_eq!(out, want);
    }

    struct Failing;
    impl Write for Failing {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::from(ErrorKind::BrokenPipe))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn write_error_is_usage_error() {
        let e = filter(&mut &b"abc"[..], &mut Failing, &mut |_| {}).unwrap_err();
        assert_eq!(e.code, 2);
        assert!(e.error.to_string().starts_with("writing standard output"));
    }
}
