//! The application protocol spoken *inside* a nena session (sans-IO: bytes in, values out).
//!
//! After the nena handshake every byte below travels protected (scrambled in `kato` mode).
//! All integers are big-endian; every variable-length field has a small bound so a hostile
//! peer can never make us allocate or wait for more than a few kilobytes of header.
//!
//! ```text
//! Request  (client -> server, once, first bytes of the session)
//!   magic "nAP1" (4) | op u8 | op-specific fields
//!   op 1 PUT   : name_len u16 | name (UTF-8, <= 255 B) | size u64
//!   op 2 GET   : name_len u16 | name
//!   op 3 PERF  : flags u8 (bit0 client->server, bit1 server->client) | bytes u64 | millis u32
//! Reply    (either side)
//!   status u8 (0 = ok) | size u64 | msg_len u16 | msg (UTF-8, <= 1024 B)
//! ```
//!
//! File transfer (PUT, GET): the server answers the request with a [`Reply`] (for GET its
//! `size` is the file size). If it is ok, the data sender writes exactly `size` bytes and then
//! a 32-byte SHA-256 trailer of those bytes; the data receiver answers with a final [`Reply`]
//! (ok only when the digest matched and, on the server, the file was renamed into place).
//!
//! Perf: the server answers the request with a [`Reply`]; then each direction carries a
//! *chunked* stream (`len u32 | len bytes`, `len` <= [`MAX_CHUNK`]), ended by a zero length and
//! the sender's byte count (`u64`), followed by a final [`Reply`] in which the receiver states
//! how many bytes it received and whether they matched the deterministic [`pattern`].
//! A direction that carries no data is just the end marker.

use thiserror::Error;

/// First bytes of every request.
pub const MAGIC: [u8; 4] = *b"nAP1";
/// Longest file name accepted on the wire (bytes).
pub const MAX_NAME: usize = 255;
/// Longest message in a [`Reply`] (bytes).
pub const MAX_MSG: usize = 1024;
/// Largest perf chunk payload.
pub const MAX_CHUNK: u32 = 1 << 20;
/// Length of the SHA-256 trailer.
pub const TRAILER_LEN: usize = 32;
/// Length of an encoded reply without its message.
const REPLY_FIXED: usize = 1 + 8 + 2;

/// A protocol violation by the peer.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum WireError {
    #[error("peer does not speak the nena application protocol (bad magic {0:02x?})")]
    BadMagic([u8; 4]),
    #[error("unknown request operation {0}")]
    BadOp(u8),
    #[error("file name too long ({0} bytes, at most {MAX_NAME})")]
    NameTooLong(usize),
    #[error("file name is not UTF-8")]
    NameNotUtf8,
    #[error("reply message too long ({0} bytes, at most {MAX_MSG})")]
    MsgTooLong(usize),
    #[error("unknown reply status {0}")]
    BadStatus(u8),
    #[error("perf request has unknown flags {0:#x}")]
    BadFlags(u8),
    #[error("perf chunk of {0} bytes exceeds the limit of {MAX_CHUNK}")]
    ChunkTooLong(u32),
}

/// What a client asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Store a file of `size` bytes under `name` on the server.
    Put { name: String, size: u64 },
    /// Fetch the file `name` from the server.
    Get { name: String },
    /// A throughput test.
    Perf(PerfRequest),
}

/// Parameters of a perf test, as seen from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerfRequest {
    /// The client sends data.
    pub up: bool,
    /// The server sends data.
    pub down: bool,
    /// Stop after this many bytes per direction (0: run for `millis`).
    pub bytes: u64,
    /// Duration in milliseconds when `bytes` is 0.
    pub millis: u32,
}

/// Status codes of a [`Reply`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Status {
    Ok = 0,
    /// The file name is not acceptable (path outside DIR, control characters, ...).
    BadName = 1,
    /// The file exists and the server does not overwrite.
    Exists = 2,
    /// No such file.
    NotFound = 3,
    /// The data did not match its SHA-256 trailer or the pattern.
    Corrupt = 4,
    /// The server failed (I/O error, disk full, ...).
    ServerError = 5,
    /// The request is not allowed by this server.
    Refused = 6,
}

impl Status {
    fn from_u8(v: u8) -> Result<Status, WireError> {
        Ok(match v {
            0 => Status::Ok,
            1 => Status::BadName,
            2 => Status::Exists,
            3 => Status::NotFound,
            4 => Status::Corrupt,
            5 => Status::ServerError,
            6 => Status::Refused,
            other => return Err(WireError::BadStatus(other)),
        })
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self {
            Status::Ok => "ok",
            Status::BadName => "bad file name",
            Status::Exists => "file exists",
            Status::NotFound => "not found",
            Status::Corrupt => "data corrupt",
            Status::ServerError => "server error",
            Status::Refused => "refused",
        };
        f.write_str(s)
    }
}

/// An answer: to a request, or the receiver's verdict after the data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: Status,
    /// GET: the file size; perf final reply: bytes received; otherwise 0.
    pub size: u64,
    pub msg: String,
}

impl Reply {
    pub fn ok(size: u64) -> Reply {
        Reply {
            status: Status::Ok,
            size,
            msg: String::new(),
        }
    }
    pub fn err(status: Status, msg: impl Into<String>) -> Reply {
        let mut msg: String = msg.into();
        truncate_utf8(&mut msg, MAX_MSG);
        Reply {
            status,
            size: 0,
            msg,
        }
    }
    pub fn is_ok(&self) -> bool {
        self.status == Status::Ok
    }
    pub fn encode(&self) -> Vec<u8> {
        let mut msg = self.msg.clone();
        truncate_utf8(&mut msg, MAX_MSG);
        let mut out = Vec::with_capacity(REPLY_FIXED + msg.len());
        out.push(self.status as u8);
        out.extend_from_slice(&self.size.to_be_bytes());
        out.extend_from_slice(&(msg.len() as u16).to_be_bytes());
        out.extend_from_slice(msg.as_bytes());
        out
    }
    /// Decode a reply from the start of `buf`: `Ok(None)` if more bytes are needed,
    /// otherwise the reply and how many bytes it used.
    pub fn decode(buf: &[u8]) -> Result<Option<(Reply, usize)>, WireError> {
        if buf.is_empty() {
            return Ok(None);
        }
        let status = Status::from_u8(buf[0])?;
        if buf.len() < REPLY_FIXED {
            return Ok(None);
        }
        let size = u64::from_be_bytes(buf[1..9].try_into().unwrap());
        let len = u16::from_be_bytes([buf[9], buf[10]]) as usize;
        if len > MAX_MSG {
            return Err(WireError::MsgTooLong(len));
        }
        if buf.len() < REPLY_FIXED + len {
            return Ok(None);
        }
        let msg = String::from_utf8_lossy(&buf[REPLY_FIXED..REPLY_FIXED + len]).into_owned();
        Ok(Some((Reply { status, size, msg }, REPLY_FIXED + len)))
    }
}

fn truncate_utf8(s: &mut String, max: usize) {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
}

impl Request {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        match self {
            Request::Put { name, size } => {
                out.push(1);
                push_name(&mut out, name);
                out.extend_from_slice(&size.to_be_bytes());
            }
            Request::Get { name } => {
                out.push(2);
                push_name(&mut out, name);
            }
            Request::Perf(p) => {
                out.push(3);
                out.push(u8::from(p.up) | (u8::from(p.down) << 1));
                out.extend_from_slice(&p.bytes.to_be_bytes());
                out.extend_from_slice(&p.millis.to_be_bytes());
            }
        }
        out
    }

    /// Decode a request from the start of `buf`: `Ok(None)` if more bytes are needed,
    /// otherwise the request and how many bytes it used. Errors as soon as the bytes seen
    /// so far cannot start a valid request.
    pub fn decode(buf: &[u8]) -> Result<Option<(Request, usize)>, WireError> {
        let m = buf.len().min(4);
        if buf[..m] != MAGIC[..m] {
            let mut got = [0u8; 4];
            got[..m].copy_from_slice(&buf[..m]);
            return Err(WireError::BadMagic(got));
        }
        if buf.len() < 5 {
            return Ok(None);
        }
        let rest = &buf[5..];
        match buf[4] {
            op @ (1 | 2) => {
                let Some((name, used)) = take_name(rest)? else {
                    return Ok(None);
                };
                if op == 2 {
                    return Ok(Some((Request::Get { name }, 5 + used)));
                }
                let rest = &rest[used..];
                if rest.len() < 8 {
                    return Ok(None);
                }
                let size = u64::from_be_bytes(rest[..8].try_into().unwrap());
                Ok(Some((Request::Put { name, size }, 5 + used + 8)))
            }
            3 => {
                if rest.is_empty() {
                    return Ok(None);
                }
                let flags = rest[0];
                if flags & !3 != 0 {
                    return Err(WireError::BadFlags(flags));
                }
                if rest.len() < 13 {
                    return Ok(None);
                }
                let bytes = u64::from_be_bytes(rest[1..9].try_into().unwrap());
                let millis = u32::from_be_bytes(rest[9..13].try_into().unwrap());
                let p = PerfRequest {
                    up: flags & 1 != 0,
                    down: flags & 2 != 0,
                    bytes,
                    millis,
                };
                Ok(Some((Request::Perf(p), 5 + 13)))
            }
            op => Err(WireError::BadOp(op)),
        }
    }
}

fn push_name(out: &mut Vec<u8>, name: &str) {
    out.extend_from_slice(&(name.len() as u16).to_be_bytes());
    out.extend_from_slice(name.as_bytes());
}

fn take_name(buf: &[u8]) -> Result<Option<(String, usize)>, WireError> {
    if buf.len() < 2 {
        return Ok(None);
    }
    let len = u16::from_be_bytes([buf[0], buf[1]]) as usize;
    if len > MAX_NAME {
        return Err(WireError::NameTooLong(len));
    }
    if buf.len() < 2 + len {
        return Ok(None);
    }
    let name = std::str::from_utf8(&buf[2..2 + len]).map_err(|_| WireError::NameNotUtf8)?;
    Ok(Some((name.to_owned(), 2 + len)))
}

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

/// The perf pattern (xorshift64* with a fixed seed).
pub fn pattern() -> Vec<u8> {
    let mut out = Vec::with_capacity(PATTERN_LEN);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    while out.len() < PATTERN_LEN {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all_requests() -> Vec<Request> {
        vec![
            Request::Put {
                name: "a.bin".into(),
                size: 0,
            },
            Request::Put {
                name: "x".repeat(MAX_NAME),
                size: u64::MAX,
            },
            Request::Get {
                name: "report.pdf".into(),
            },
            Request::Perf(PerfRequest {
                up: true,
                down: false,
                bytes: 1 << 30,
                millis: 0,
            }),
            Request::Perf(PerfRequest {
                up: true,
                down: true,
                bytes: 0,
                millis: 10_000,
            }),
        ]
    }

    #[test]
    fn request_roundtrip_and_incremental() {
        for req in all_requests() {
            let enc = req.encode();
            for cut in 0..enc.len() {
                assert_eq!(
                    Request::decode(&enc[..cut]),
                    Ok(None),
                    "cut {cut} of {req:?}"
                );
            }
            let mut with_tail = enc.clone();
            with_tail.extend_from_slice(b"data after");
            assert_eq!(
                Request::decode(&with_tail),
                Ok(Some((req.clone(), enc.len())))
            );
        }
    }

    #[test]
    fn request_errors() {
        assert_eq!(
            Request::decode(b"GET / HTTP/1.1\r\n"),
            Err(WireError::BadMagic(*b"GET "))
        );
        assert_eq!(Request::decode(b"nX"), Err(WireError::BadMagic(*b"nX\0\0")));
        assert_eq!(Request::decode(b"nAP1\x09"), Err(WireError::BadOp(9)));
        assert_eq!(
            Request::decode(b"nAP1\x01\x01\x00"),
            Err(WireError::NameTooLong(256))
        );
        assert_eq!(
            Request::decode(b"nAP1\x02\x00\x01\xff"),
            Err(WireError::NameNotUtf8)
        );
        assert_eq!(
            Request::decode(b"nAP1\x03\x04"),
            Err(WireError::BadFlags(4))
        );
    }

    #[test]
    fn reply_roundtrip_and_errors() {
        let r = Reply {
            status: Status::NotFound,
            size: 7,
            msg: "no such file: é".into(),
        };
        let enc = r.encode();
        for cut in 0..enc.len() {
            assert_eq!(Reply::decode(&enc[..cut]), Ok(None));
        }
        assert_eq!(Reply::decode(&enc), Ok(Some((r, enc.len()))));
        assert_eq!(Reply::decode(&[9]), Err(WireError::BadStatus(9)));
        let mut long = vec![0u8; 9];
        long.extend_from_slice(&2000u16.to_be_bytes());
        assert_eq!(Reply::decode(&long), Err(WireError::MsgTooLong(2000)));
        // Over-long messages are truncated on a char boundary when encoding.
        let big = Reply::err(Status::ServerError, "é".repeat(MAX_MSG));
        assert!(big.msg.len() <= MAX_MSG);
        let enc = big.encode();
        assert_eq!(Reply::decode(&enc).unwrap().unwrap().0, big);
    }

    fn chunk_stream(payloads: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut total = 0u64;
        for p in payloads {
            out.extend_from_slice(&chunk_header(p.len() as u32));
            out.extend_from_slice(p);
            total += p.len() as u64;
        }
        out.extend_from_slice(&chunk_end(total));
        out
    }

    fn decode_all(stream: &[u8], step: usize) -> Result<(Vec<u8>, u64, usize), WireError> {
        let mut dec = ChunkDecoder::new();
        let mut data = Vec::new();
        let mut pos = 0;
        while pos < stream.len() {
            let end = (pos + step).min(stream.len());
            let mut input = &stream[pos..end];
            while !input.is_empty() {
                let (n, ev) = dec.next(input)?;
                match ev {
                    ChunkEvent::Data => data.extend_from_slice(&input[..n]),
                    ChunkEvent::Header => {}
                    ChunkEvent::End(t) => return Ok((data, t, pos + n)),
                }
                input = &input[n..];
                pos += n;
            }
        }
        panic!("no end marker");
    }

    proptest! {
        #[test]
        fn chunks_roundtrip(payloads in proptest::collection::vec(
                proptest::collection::vec(any::<u8>(), 1..300), 0..8),
                step in 1usize..64) {
            let mut stream = chunk_stream(&payloads);
            let len = stream.len();
            stream.extend_from_slice(b"reply bytes");
            let (data, total, used) = decode_all(&stream, step).unwrap();
            prop_assert_eq!(data, payloads.concat());
            prop_assert_eq!(total as usize, payloads.iter().map(Vec::len).sum::<usize>());
            prop_assert_eq!(used, len);
        }

        #[test]
        fn request_decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Request::decode(&bytes);
            let _ = Reply::decode(&bytes);
        }
    }

    #[test]
    fn chunk_too_long_is_refused() {
        let mut dec = ChunkDecoder::new();
        let hdr = chunk_header(MAX_CHUNK + 1);
        assert_eq!(dec.next(&hdr), Err(WireError::ChunkTooLong(MAX_CHUNK + 1)));
    }

    #[test]
    fn pattern_check_detects_a_flipped_byte() {
        let p = pattern();
        assert_eq!(p.len(), PATTERN_LEN);
        let mut stream = p.clone();
        stream.extend_from_slice(&p[..1000]);
        let mut ok = PatternCheck::new(&p);
        for piece in stream.chunks(777) {
            ok.feed(piece);
        }
        assert!(ok.ok());
        stream[PATTERN_LEN + 10] ^= 1;
        let mut bad = PatternCheck::new(&p);
        bad.feed(&stream);
        assert!(!bad.ok());
    }
}
