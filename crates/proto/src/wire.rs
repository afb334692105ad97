//! The byte layout of nena's handshake messages (docs/PROTOCOL.md, "Byte layout"):
//! constants, encoders, and an incremental, bounded frame reader.
//!
//! Every message is a 9-byte header followed by a body:
//!
//! | offset | size | field                                       |
//! |-------:|-----:|---------------------------------------------|
//! | 0      | 5    | magic `8b 4e 45 4e 41` (0x8b, then "NENA")  |
//! | 5      | 1    | protocol version (2)                        |
//! | 6      | 1    | message type (1 hello, 2 accept, 3 reject, 4 confirm, 5 resume, 6 resumed) |
//! | 7      | 2    | body length, big-endian                     |
//!
//! The header layout is the same in every protocol version, so a peer of
//! another version can always be recognised and answered.

use crate::error::HandshakeError;
use zeroize::Zeroizing;

pub use crate::magic::{MAGIC, VERSION};
/// Length of the fixed header.
pub const HEADER_LEN: usize = 9;
/// Largest client hello (header included) a server accepts (a hello with the hybrid key
/// share is about 1,300 bytes).
pub const MAX_HELLO_LEN: usize = 2048;
/// Largest server answer (header included) a client accepts (an accept with the server's
/// key block is about 1,260 bytes).
pub const MAX_ANSWER_LEN: usize = 2048;
/// The hello's key share, after its offers when it offers key agreement: the ML-KEM-768
/// encapsulation key, the X25519 share (the client's share of X25519MLKEM768), then `r_c`.
pub const KEY_SHARE_LEN: usize =
    crate::hybrid::MLKEM_EK_LEN + crate::keys::SHARE_LEN + crate::keys::RC_LEN;
/// The accept's server key block, after its parameters when the hello offered key
/// agreement: ML-KEM-768 ciphertext, X25519 share, the server's public key, its signature,
/// and the key confirmation.
pub const SERVER_BLOCK_LEN: usize = crate::hybrid::MLKEM_CT_LEN
    + crate::keys::SHARE_LEN
    + crate::identity::SERVER_KEY_LEN
    + crate::identity::SIGNATURE_LEN
    + crate::keys::TAG_LEN;
/// Most modes one hello may offer.
pub const MAX_OFFERS: usize = 32;

/// Message type of the client hello.
pub const TYPE_HELLO: u8 = 0x01;
/// Message type of the server's accept.
pub const TYPE_ACCEPT: u8 = 0x02;
/// Message type of the server's reject.
pub const TYPE_REJECT: u8 = 0x03;
/// Message type of the client's key confirmation (crypto modes, after the accept).
pub const TYPE_CONFIRM: u8 = 0x04;
/// Message type of the client's resume hello (a ticket instead of a key share).
pub const TYPE_RESUME: u8 = 0x05;
/// Message type of the server's answer that resumes (its fresh bytes and confirmation).
pub const TYPE_RESUMED: u8 = 0x06;
/// What follows a resume hello's offers: the ticket's id, `r_c`, the binder.
pub const RESUME_TAIL_LEN: usize =
    crate::keys::TICKET_ID_LEN + crate::keys::RC_LEN + crate::keys::TAG_LEN;
/// Length of the server's fresh bytes `r_s` in an answer that resumes.
pub const RS_LEN: usize = 32;
/// Length of the client's confirmation message (header and 32-byte tag).
pub const CONFIRM_LEN: usize = HEADER_LEN + crate::keys::TAG_LEN;

/// The header of a version-[`VERSION`] message of `msg_type` with a body of `body_len` bytes.
pub(crate) fn header(msg_type: u8, body_len: usize) -> [u8; HEADER_LEN] {
    let len = u16::try_from(body_len).expect("handshake bodies are bounded far below 64 KiB");
    let l = len.to_be_bytes();
    [
        MAGIC[0], MAGIC[1], MAGIC[2], MAGIC[3], MAGIC[4], VERSION, msg_type, l[0], l[1],
    ]
}

/// Builds one message: header (with [`VERSION`]) and body.
pub(crate) fn encode(msg_type: u8, body: &[u8]) -> Vec<u8> {
    encode_version(VERSION, msg_type, body)
}

pub(crate) fn encode_version(version: u8, msg_type: u8, body: &[u8]) -> Vec<u8> {
    let len = u16::try_from(body.len()).expect("handshake bodies are bounded far below 64 KiB");
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(&MAGIC);
    out.push(version);
    out.push(msg_type);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// A header whose magic matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub version: u8,
    pub msg_type: u8,
}

/// How reading a frame went wrong before the body was complete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FrameError {
    /// Magic mismatch: the bytes up to and including the first wrong one.
    NotNena(Vec<u8>),
    /// Magic matched, the version is not ours.
    Version(u8),
    /// Magic and version matched, but the type is not one we expect here.
    Type(u8),
    /// The announced message length exceeds the bound.
    TooLong { len: usize, max: usize },
}

impl FrameError {
    pub(crate) fn into_error(self) -> HandshakeError {
        match self {
            FrameError::NotNena(got) => HandshakeError::NotNena { got },
            FrameError::Version(theirs) => HandshakeError::UnsupportedVersion {
                ours: VERSION,
                theirs,
            },
            FrameError::Type(_) => HandshakeError::Malformed("unexpected message type"),
            FrameError::TooLong { len, max } => HandshakeError::TooLong { len, max },
        }
    }
}

/// Reads one message incrementally. It takes from the input only the bytes
/// that belong to the message and never buffers more than `max_len` bytes.
/// Every check is a function of the bytes received so far, made as soon as
/// the byte it needs is there, so any split of the input gives the same result.
#[derive(Debug)]
pub(crate) struct FrameReader {
    /// Holds a hello's secrets (kato keys, r_c): wiped when dropped, and reserved at
    /// `max_len` so that it never grows (a reallocation would leave a copy behind).
    buf: Zeroizing<Vec<u8>>,
    max_len: usize,
    types: &'static [u8],
}

impl FrameReader {
    pub(crate) fn new(max_len: usize, types: &'static [u8]) -> Self {
        FrameReader {
            buf: Zeroizing::new(Vec::with_capacity(max_len)),
            max_len,
            types,
        }
    }

    /// Bytes of the message received so far.
    pub(crate) fn received(&self) -> usize {
        self.buf.len()
    }

    /// Feeds input. Returns how many bytes were taken and whether the frame is complete.
    pub(crate) fn feed(&mut self, input: &[u8]) -> Result<(usize, bool), FrameError> {
        let mut taken = 0;
        loop {
            let target = match self.body_len() {
                None => HEADER_LEN,
                Some(n) => HEADER_LEN + n,
            };
            if self.buf.len() == target {
                return Ok((taken, true));
            }
            if taken == input.len() {
                return Ok((taken, false));
            }
            let n = (target - self.buf.len()).min(input.len() - taken);
            // Within the capacity reserved in `new` (checked against `max_len` below).
            debug_assert!(self.buf.len() + n <= self.buf.capacity());
            self.buf.extend_from_slice(&input[taken..taken + n]);
            taken += n;
            self.check_header()?;
        }
    }

    /// Zeroes and drops the buffered bytes (they may hold keys).
    pub(crate) fn wipe(&mut self) {
        zeroize::Zeroize::zeroize(&mut *self.buf);
    }

    fn body_len(&self) -> Option<usize> {
        (self.buf.len() >= HEADER_LEN)
            .then(|| u16::from_be_bytes([self.buf[7], self.buf[8]]) as usize)
    }

    fn check_header(&self) -> Result<(), FrameError> {
        let b = &self.buf;
        for (i, &m) in MAGIC.iter().enumerate().take(b.len()) {
            if b[i] != m {
                return Err(FrameError::NotNena(b[..=i].to_vec()));
            }
        }
        if b.len() > 5 && b[5] != VERSION {
            return Err(FrameError::Version(b[5]));
        }
        if b.len() > 6 && !self.types.contains(&b[6]) {
            return Err(FrameError::Type(b[6]));
        }
        if let Some(n) = self.body_len() {
            if HEADER_LEN + n > self.max_len {
                return Err(FrameError::TooLong {
                    len: HEADER_LEN + n,
                    max: self.max_len,
                });
            }
        }
        Ok(())
    }

    /// The complete message, header included; only valid after `feed` returned `true`.
    pub(crate) fn message(&self) -> &[u8] {
        &self.buf
    }

    /// The complete frame; only valid after `feed` returned `true`.
    pub(crate) fn frame(&self) -> (Header, &[u8]) {
        (
            Header {
                version: self.buf[5],
                msg_type: self.buf[6],
            },
            &self.buf[HEADER_LEN..],
        )
    }
}

/// A cursor over a body that reports overruns as `Malformed`.
pub(crate) struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Cursor { data, pos: 0 }
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, HandshakeError> {
        Ok(self.bytes(1, what)?[0])
    }

    pub(crate) fn bytes(
        &mut self,
        n: usize,
        what: &'static str,
    ) -> Result<&'a [u8], HandshakeError> {
        if self.data.len() - self.pos < n {
            return Err(HandshakeError::Malformed(what));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// The next `N` bytes as an array.
    pub(crate) fn array<const N: usize>(
        &mut self,
        what: &'static str,
    ) -> Result<&'a [u8; N], HandshakeError> {
        Ok(self.bytes(N, what)?.try_into().expect("N bytes"))
    }

    /// The bytes not read yet.
    pub(crate) fn rest(&self) -> &'a [u8] {
        &self.data[self.pos..]
    }

    pub(crate) fn finish(&self, what: &'static str) -> Result<(), HandshakeError> {
        if self.pos == self.data.len() {
            Ok(())
        } else {
            Err(HandshakeError::Malformed(what))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_frame_and_leaves_the_rest() {
        let mut msg = encode(TYPE_ACCEPT, &[2, 0]);
        msg.extend_from_slice(b"after");
        let mut r = FrameReader::new(MAX_ANSWER_LEN, &[TYPE_ACCEPT]);
        assert_eq!(r.feed(&msg), Ok((HEADER_LEN + 2, true)));
        let (h, body) = r.frame();
        assert_eq!(
            h,
            Header {
                version: VERSION,
                msg_type: TYPE_ACCEPT
            }
        );
        assert_eq!(body, &[2, 0]);
    }

    #[test]
    fn header_errors_are_found_early() {
        let mut r = FrameReader::new(MAX_ANSWER_LEN, &[TYPE_ACCEPT]);
        assert_eq!(
            r.feed(&[0x8b, b'N', b'X']),
            Err(FrameError::NotNena(vec![0x8b, b'N', b'X']))
        );
        let mut r = FrameReader::new(MAX_ANSWER_LEN, &[TYPE_ACCEPT]);
        assert_eq!(
            r.feed(&[0x8b, b'N', b'E', b'N', b'A', 9]),
            Err(FrameError::Version(9))
        );
        let mut r = FrameReader::new(MAX_ANSWER_LEN, &[TYPE_ACCEPT]);
        assert_eq!(
            r.feed(&encode(TYPE_HELLO, &[])[..7]),
            Err(FrameError::Type(TYPE_HELLO))
        );
        let mut r = FrameReader::new(MAX_ANSWER_LEN, &[TYPE_ACCEPT]);
        let long = encode(TYPE_ACCEPT, &[0; MAX_ANSWER_LEN]);
        assert_eq!(
            r.feed(&long),
            Err(FrameError::TooLong {
                len: HEADER_LEN + MAX_ANSWER_LEN,
                max: MAX_ANSWER_LEN
            })
        );
        assert!(
            r.received() <= HEADER_LEN,
            "must not buffer an oversized body"
        );
    }

    #[test]
    fn cursor_bounds() {
        let mut c = Cursor::new(&[1, 2, 3]);
        assert_eq!(c.u8("a"), Ok(1));
        assert_eq!(c.bytes(3, "b"), Err(HandshakeError::Malformed("b")));
        assert_eq!(c.finish("c"), Err(HandshakeError::Malformed("c")));
        assert_eq!(c.bytes(2, "b"), Ok(&[2u8, 3][..]));
        assert_eq!(c.finish("c"), Ok(()));
    }
}
