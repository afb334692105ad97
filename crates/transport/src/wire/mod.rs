//! The application protocol spoken *inside* a nena session (sans-IO: bytes in, values out).
//!
//! After the nena handshake every byte below travels protected (scrambled in `kato` mode).
//! All integers are big-endian; every variable-length field has a small bound so a hostile
//! peer can never make us allocate or wait for more than a few kilobytes of header.
//!
//! ```text
//! Request  (client -> server, once, first bytes of the session)
//!   magic "nAP3" (4) | op u8 | [token_len u8 | token]  if op bit 7 (0x80) is set
//!                            | op-specific fields (op & 0x7f):
//!   op 1 PUT   : name_len u16 | name (UTF-8, <= 255 B) | size u64
//!   op 2 GET   : name_len u16 | name
//!   op 3 PERF  : flags u8 (bit0 client->server, bit1 server->client) | bytes u64 | millis u32
//! Reply    (either side)
//!   status u8 (0 = ok) | size u64 | msg_len u16 | msg (UTF-8, <= 1024 B)
//! ```
//!
//! The access token (op bit 7, 1..=255 bytes) travels only inside the session, after the
//! handshake, protected as the mode protects everything (`plain`: not at all); the raw
//! baseline refuses it. A request without it is encoded exactly as before the token existed,
//! so old clients and new servers (without `--token-file`) still understand each other;
//! statuses 7..=9 are newer than the rest (an old client reports them as unknown).
//!
//! File transfer (PUT, GET): the server answers the request with a [`Reply`] (for GET its
//! `size` is the file size). If it is ok, the data sender writes exactly `size` bytes and then
//! a 32-byte trailer (their MAC); the data receiver answers with a final [`Reply`] (ok only
//! when the trailer matched and, on the server, the file was renamed into place) and its
//! 32-byte tag ([`crate::app::verdict`], new in version 3).
//!
//! Perf: the server answers the request with a [`Reply`]; then each direction carries a
//! *chunked* stream (`len u32 | len bytes`, `len` <= [`MAX_CHUNK`]), ended by a zero length and
//! the sender's byte count (`u64`), followed by a final [`Reply`] in which the receiver states
//! how many bytes it received and whether they matched the deterministic [`pattern`].
//! A direction that carries no data is just the end marker.
//!
//! Proxy sessions (`nena proxy client` / `nena run` to `nena proxy server`) open with a
//! [`ConnectRequest`]: op 4 names a destination (SOCKS5 CONNECT, `nena run`; the server
//! checks it against `--allow`), op 5 asks for the server's one `--forward` target. Either
//! carries the access token the same way a file request does (op bit 7), and a 32-byte tag
//! (the application MAC) follows:
//!
//! ```text
//! ConnectRequest  magic "nAP3" | op 4 or 5 [| 0x80] | [token_len u8 | token]
//!                 | op 4 only: atyp u8 (1 IPv4, 3 domain, 4 IPv6)
//!                   | addr (4 B | len u8 + name (1..=255 B, printable ASCII) | 16 B) | port u16
//!                 | tag (32)
//! ConnectReply    code u8 (SOCKS5 reply code, RFC 1928 section 6: 0 succeeded .. 8)
//!                 | msg_len u8 | msg (UTF-8)
//! ```
//!
//! Ops 6 and 7 open the sessions of `nena run`'s DNS and UDP (no destination: it travels in
//! each message, [`dns_udp`]): op 6 asks the proxy server to answer DNS queries with its own
//! resolver (each direction then carries DNS messages framed as over TCP, `len u16 | msg`),
//! op 7 to relay datagrams within `--allow` (each direction then carries
//! `atyp u8 (1 | 4) | addr | port u16 | len u16 | payload`; to the server: the destination,
//! from it: the source). Both are tagged and carry the token as ops 4 and 5 do:
//!
//! ```text
//! ConnectRequest  magic "nAP3" | op 6 or 7 [| 0x80] | [token_len u8 | token] | tag (32)
//! ```
//!
//! After an ok reply both directions carry the application's raw bytes (ops 4, 5) or the
//! framed messages (ops 6, 7); after any other the server ends the session. A `--forward` client sends what the application has sent by
//! then (at most one record's worth) right after its request, in the same write, and the
//! rest after the reply, which it reads before passing anything on (a request-response
//! application pays no round trip for it). A file server answers ops 4 and 5 as unknown ops.

use thiserror::Error;
use zeroize::Zeroizing;

/// First bytes of every request.
pub const MAGIC: [u8; 4] = *b"nAP3";
/// The version of the protocol [`MAGIC`] names (its last byte, as a digit).
pub const VERSION: u8 = 3;
/// The magics of the older versions, refused with [`WireError::OldVersion`], never read as
/// this one: 1 (an unkeyed SHA-256 trailer, an untagged connect request) and 2 (an untagged
/// verdict on a file, [`crate::app::verdict`]).
pub const OLD_MAGICS: [[u8; 4]; 2] = [*b"nAP1", *b"nAP2"];
/// Longest file name accepted on the wire (bytes).
pub const MAX_NAME: usize = 255;
/// Longest message in a [`Reply`] (bytes).
pub const MAX_MSG: usize = 1024;
/// Largest perf chunk payload.
pub const MAX_CHUNK: u32 = 1 << 20;
/// Length of the trailer of a file (its MAC, [`nena_proto::appmac`]) and of a connect
/// request's tag.
pub const TRAILER_LEN: usize = 32;
/// Length of an encoded reply without its message.
const REPLY_FIXED: usize = 1 + 8 + 2;
/// Bit of the op byte that says an access token follows it.
pub const OP_TOKEN: u8 = 0x80;
/// Longest access token on the wire (bytes).
pub const MAX_TOKEN: usize = 255;

/// A protocol violation by the peer.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum WireError {
    #[error("peer does not speak the nena application protocol (its first bytes were {}, expected 6e 41 50 33 \"nAP3\")", hex_text(.0))]
    BadMagic([u8; 4]),
    #[error("the peer speaks version {v} of the nena application protocol (\"nAP{v}\": {lacks}); this build speaks version 3 (\"nAP3\"): upgrade the older side", v = .0, lacks = old_version_lacks(*.0))]
    OldVersion(u8),
    #[error("the connect request's tag does not match: the request was altered on the way (refused before connecting anywhere)")]
    BadConnectTag,
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
    #[error("empty access token")]
    EmptyToken,
    #[error("access token too long ({0} bytes, at most {MAX_TOKEN})")]
    TokenTooLong(usize),
    #[error("not a connect request (op {0:#04x})")]
    NotConnect(u8),
    #[error("bad destination in the connect request: {0}")]
    BadTarget(crate::wire::target::SocksError),
    #[error("unknown connect reply code {0}")]
    BadConnectCode(u8),
    #[error("a DNS message of {0} bytes, shorter than a DNS header")]
    DnsTooShort(usize),
    #[error("a datagram with address type {0} (1 IPv4 or 4 IPv6 expected)")]
    DatagramAddress(u8),
    #[error("a datagram of {0} bytes, longer than a UDP datagram can be")]
    DatagramTooLong(usize),
    #[error(transparent)]
    Plane(#[from] plane::PlaneError),
}

impl WireError {
    /// The error is about the file name (the server answers it with [`Status::BadName`]).
    pub fn is_bad_name(&self) -> bool {
        matches!(self, WireError::NameTooLong(_) | WireError::NameNotUtf8)
    }
}

/// Checks the magic at the start of `buf` (as much of it as has arrived).
fn check_magic(buf: &[u8]) -> Result<(), WireError> {
    let m = buf.len().min(4);
    if buf[..m] == MAGIC[..m] {
        return Ok(());
    }
    if let Some(i) = OLD_MAGICS.iter().position(|old| buf[..m] == old[..m]) {
        if m < 4 {
            return Ok(()); // "nAP" so far: the next byte decides
        }
        return Err(WireError::OldVersion(i as u8 + 1));
    }
    let mut got = [0u8; 4];
    got[..m].copy_from_slice(&buf[..m]);
    Err(WireError::BadMagic(got))
}

/// What an older version of the application protocol lacks, for its error.
fn old_version_lacks(version: u8) -> &'static str {
    match version {
        1 => "unkeyed file trailers, untagged connect requests",
        _ => "an untagged verdict on a file",
    }
}

/// `3a 3a 3a 3a "::::"`: bytes in hex, and as text when they are printable ASCII.
fn hex_text(b: &[u8]) -> String {
    let mut s: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    if b.iter().all(|c| c.is_ascii_graphic() || *c == b' ') {
        s.push(format!("\"{}\"", b.escape_ascii()));
    }
    s.join(" ")
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
    /// The server needs an access token and the request's is missing or wrong.
    AccessDenied = 7,
    /// The announced file is larger than the server's `--max-file-size`.
    TooLarge = 8,
    /// The announced file does not fit in the free space of the server's directory.
    NoSpace = 9,
    /// The server is stopping (SIGTERM, Ctrl-C) and aborted this request after its grace
    /// period; an upload in progress was discarded.
    ShuttingDown = 10,
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
            7 => Status::AccessDenied,
            8 => Status::TooLarge,
            9 => Status::NoSpace,
            10 => Status::ShuttingDown,
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
            Status::AccessDenied => "access denied",
            Status::TooLarge => "file too large",
            Status::NoSpace => "not enough space",
            Status::ShuttingDown => "server shutting down",
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
        // Printed by the client: no terminal escape or control character from the peer.
        let msg = crate::text::printable::printable(&buf[REPLY_FIXED..REPLY_FIXED + len]);
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

/// Room for the longest request of either kind, token and tag included: an encoded request is
/// built in one allocation of this size, so that no reallocation leaves a copy of the token
/// behind, and wiped when dropped ([`Zeroizing`]).
const MAX_REQUEST_LEN: usize = 4 + 1 + 1 + MAX_TOKEN + 2 + MAX_NAME + 8 + TRAILER_LEN;

/// An empty buffer for an encoded request, [`MAX_REQUEST_LEN`] reserved, starting with the
/// magic.
fn request_buf() -> Zeroizing<Vec<u8>> {
    let mut out = Zeroizing::new(Vec::with_capacity(MAX_REQUEST_LEN));
    out.extend_from_slice(&MAGIC);
    out
}

impl Request {
    /// The request without an access token.
    pub fn encode(&self) -> Vec<u8> {
        self.encode_with(None).to_vec()
    }

    /// The request, with `token` when given (op bit 7 set and the token after the op); wiped
    /// when dropped.
    pub fn encode_with(&self, token: Option<&AccessToken>) -> Zeroizing<Vec<u8>> {
        let mut out = request_buf();
        let op = match self {
            Request::Put { .. } => 1,
            Request::Get { .. } => 2,
            Request::Perf(_) => 3,
        };
        push_op(&mut out, op, token);
        match self {
            Request::Put { name, size } => {
                push_name(&mut out, name);
                out.extend_from_slice(&size.to_be_bytes());
            }
            Request::Get { name } => push_name(&mut out, name),
            Request::Perf(p) => {
                out.push(u8::from(p.up) | (u8::from(p.down) << 1));
                out.extend_from_slice(&p.bytes.to_be_bytes());
                out.extend_from_slice(&p.millis.to_be_bytes());
            }
        }
        out
    }
}

/// A request as the server reads it: the operation and the access token it came with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestMsg {
    pub request: Request,
    pub token: Option<AccessToken>,
}

impl RequestMsg {
    /// Decode a request from the start of `buf`: `Ok(None)` if more bytes are needed,
    /// otherwise the request and how many bytes it used. Errors as soon as the bytes seen
    /// so far cannot start a valid request.
    pub fn decode(buf: &[u8]) -> Result<Option<(RequestMsg, usize)>, WireError> {
        check_magic(buf)?;
        if buf.len() < 5 {
            return Ok(None);
        }
        let op = buf[4] & !OP_TOKEN;
        if !(1..=3).contains(&op) {
            return Err(WireError::BadOp(buf[4]));
        }
        let Some((token, at)) = take_token(buf)? else {
            return Ok(None);
        };
        let rest = &buf[at..];
        type Decoded = Result<Option<(RequestMsg, usize)>, WireError>;
        let done = |request: Request, used: usize| -> Decoded {
            Ok(Some((RequestMsg { request, token }, at + used)))
        };
        match op {
            1 | 2 => {
                let Some((name, used)) = take_name(rest)? else {
                    return Ok(None);
                };
                if op == 2 {
                    return done(Request::Get { name }, used);
                }
                let rest = &rest[used..];
                if rest.len() < 8 {
                    return Ok(None);
                }
                let size = u64::from_be_bytes(rest[..8].try_into().unwrap());
                done(Request::Put { name, size }, used + 8)
            }
            _ => {
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
                done(Request::Perf(p), 13)
            }
        }
    }
}

/// A shared secret that a server may require with every request (`--token-file`). It is
/// compared in constant time (as SHA-256 digests, so that not even its length leaks through
/// timing) and never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessToken(Vec<u8>);

impl AccessToken {
    /// A token of 1..=[`MAX_TOKEN`] bytes.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Result<AccessToken, WireError> {
        let bytes = bytes.into();
        match bytes.len() {
            0 => Err(WireError::EmptyToken),
            1..=MAX_TOKEN => Ok(AccessToken(bytes)),
            _ => Err(WireError::TokenTooLong(bytes.len())),
        }
    }

    /// Whether `given` is this token, in time that depends on neither's content.
    pub fn admits(&self, given: Option<&AccessToken>) -> bool {
        use sha2::{Digest, Sha256};
        use subtle::ConstantTimeEq;
        let want = Sha256::digest(&self.0);
        let got = Sha256::digest(given.map_or(&[][..], |t| &t.0[..]));
        // An absent token hashes the empty string, which no token equals (tokens are never
        // empty); the `&` keeps the comparison free of branches on secret data.
        let same: bool = want.ct_eq(&got).into();
        same & given.is_some()
    }
}

impl std::fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AccessToken(..)")
    }
}

impl Drop for AccessToken {
    /// Wipes the token (docs/THREAT-MODEL.md, "Keys in memory").
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.0);
    }
}

/// The op byte (bit 7 set when a token follows) and the token: `[len u8 | token]`.
fn push_op(out: &mut Vec<u8>, op: u8, token: Option<&AccessToken>) {
    match token {
        Some(t) => {
            out.push(op | OP_TOKEN);
            out.push(t.0.len() as u8);
            out.extend_from_slice(&t.0);
        }
        None => out.push(op),
    }
}

/// The token after the op byte at `buf[4]` (when its bit 7 is set) and where the op's own
/// fields start; `Ok(None)` if more bytes are needed.
fn take_token(buf: &[u8]) -> Result<Option<(Option<AccessToken>, usize)>, WireError> {
    let at = 5;
    if buf[4] & OP_TOKEN == 0 {
        return Ok(Some((None, at)));
    }
    let Some(&len) = buf.get(at) else {
        return Ok(None);
    };
    if len == 0 {
        return Err(WireError::EmptyToken);
    }
    let end = at + 1 + len as usize;
    if buf.len() < end {
        return Ok(None);
    }
    Ok(Some((Some(AccessToken(buf[at + 1..end].to_vec())), end)))
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

mod perf_stream;
pub use perf_stream::{
    chunk_end, chunk_header, pattern, ChunkDecoder, ChunkEvent, PatternCheck, PATTERN_LEN,
};

/// Op of a [`ConnectRequest`] naming its destination (SOCKS5 CONNECT, `nena run`).
pub const OP_CONNECT: u8 = 4;
/// Op of a [`ConnectRequest`] for the proxy server's one `--forward` target.
pub const OP_FORWARD: u8 = 5;
/// Op of a [`ConnectRequest`] for DNS queries answered by the proxy server's resolver
/// (`nena run`); the session then carries [`dns_udp::DnsFrame`]s.
pub const OP_DNS: u8 = 6;
/// Op of a [`ConnectRequest`] for datagrams relayed by the proxy server within `--allow`
/// (`nena run --udp carry`); the session then carries [`dns_udp::Datagram`]s.
pub const OP_DATAGRAM: u8 = 7;
/// Op of a [`ConnectRequest`] for datagrams as op 7, with the client's offer of the
/// datagram plane ([`plane::PlaneOffer`]); the server answers it after its reply.
pub const OP_DATAGRAM_PLANE: u8 = 8;
/// Bit 6 of the op of a stream request (ops 4, 5): the client reuses the session for its
/// next flows, each ended by the flow-end record (`aead` only; docs/PROTOCOL.md, "Sessions
/// reused flow after flow"). Refused on the other ops.
pub const OP_REUSE: u8 = 0x40;

/// Why a file name was refused (`app::names` checks names; here so that the errors can
/// name it).
#[derive(Debug, Clone, Copy, thiserror::Error, PartialEq, Eq)]
pub enum NameError {
    #[error("empty file name")]
    Empty,
    #[error("file name longer than {} bytes", MAX_NAME)]
    TooLong,
    #[error("file name must be a single path component (no '/' or '\\')")]
    Separator,
    #[error("file name '.' or '..' is not allowed")]
    Dots,
    #[error("hidden file names (leading '.') are not allowed")]
    Hidden,
    #[error("file name contains a control character")]
    Control,
}

pub mod dns_udp;
pub mod plane;
pub mod target;

/// What a proxy session carries once open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Service {
    /// A byte stream to a destination (op 4) or to the `--forward` target (op 5).
    #[default]
    Stream,
    /// DNS queries and their answers (op 6).
    Dns,
    /// Datagrams, each with its destination or source (op 7).
    Datagram,
}

/// How every proxy session opens: the proxy client asks the proxy server for a destination
/// (SOCKS5 CONNECT, `nena run`) or for its `--forward` target, with the access token when it
/// has one (`--token-file`). The server answers with a [`ConnectReply`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectRequest {
    /// `None`: the proxy server's `--forward` target (op 5); always `None` for
    /// [`Service::Dns`] and [`Service::Datagram`] (not encoded).
    pub target: Option<crate::wire::target::Target>,
    pub token: Option<AccessToken>,
    /// What the session carries: a stream (ops 4, 5), DNS (op 6) or datagrams (op 7).
    pub service: Service,
    /// With [`Service::Datagram`]: the offer of the datagram plane (op 8 instead of 7).
    pub plane: Option<plane::PlaneOffer>,
    /// With [`Service::Stream`]: the flow ends with the flow-end record each way and the
    /// session carries the client's next flow ([`OP_REUSE`]).
    pub reuse: bool,
}

impl ConnectRequest {
    /// A request for `target` without a token.
    pub fn to(target: crate::wire::target::Target) -> Self {
        ConnectRequest {
            target: Some(target),
            token: None,
            service: Service::Stream,
            plane: None,
            reuse: false,
        }
    }

    /// A request for a session of `service` (DNS or datagrams) without a token.
    pub fn of(service: Service) -> Self {
        ConnectRequest {
            target: None,
            token: None,
            service,
            plane: None,
            reuse: false,
        }
    }

    /// The request (with its token, if any); wiped when dropped.
    pub fn encode(&self) -> Zeroizing<Vec<u8>> {
        let mut out = request_buf();
        let op = match (self.service, &self.target) {
            (Service::Dns, _) => OP_DNS,
            (Service::Datagram, _) if self.plane.is_some() => OP_DATAGRAM_PLANE,
            (Service::Datagram, _) => OP_DATAGRAM,
            (Service::Stream, Some(_)) => OP_CONNECT,
            (Service::Stream, None) => OP_FORWARD,
        };
        let reuse = if self.reuse && self.service == Service::Stream {
            OP_REUSE
        } else {
            0
        };
        push_op(&mut out, op | reuse, self.token.as_ref());
        if let (Service::Stream, Some(t)) = (self.service, &self.target) {
            t.encode_into(&mut out);
        }
        if let (Service::Datagram, Some(p)) = (self.service, &self.plane) {
            p.encode_into(&mut out);
        }
        out
    }

    /// Decode from the start of `buf`: `Ok(None)` if more bytes are needed, otherwise the
    /// request and how many bytes it used.
    pub fn decode(buf: &[u8]) -> Result<Option<(ConnectRequest, usize)>, WireError> {
        check_magic(buf)?;
        let Some(&op) = buf.get(4) else {
            return Ok(None);
        };
        let reuse = op & OP_REUSE != 0;
        let service = match op & !(OP_TOKEN | OP_REUSE) {
            OP_CONNECT => None,
            OP_FORWARD => Some(Service::Stream),
            OP_DNS => Some(Service::Dns),
            OP_DATAGRAM | OP_DATAGRAM_PLANE => Some(Service::Datagram),
            _ => return Err(WireError::NotConnect(op)),
        };
        if reuse && matches!(service, Some(Service::Dns | Service::Datagram)) {
            return Err(WireError::NotConnect(op));
        }
        let Some((token, at)) = take_token(buf)? else {
            return Ok(None);
        };
        if op & !OP_TOKEN == OP_DATAGRAM_PLANE {
            return Ok(plane::PlaneOffer::decode(&buf[at..])?.map(|(offer, used)| {
                (
                    ConnectRequest {
                        target: None,
                        token,
                        service: Service::Datagram,
                        plane: Some(offer),
                        reuse: false,
                    },
                    at + used,
                )
            }));
        }
        if let Some(service) = service {
            return Ok(Some((
                ConnectRequest {
                    target: None,
                    token,
                    service,
                    plane: None,
                    reuse,
                },
                at,
            )));
        }
        match crate::wire::target::Target::decode(&buf[at..]) {
            Ok(Some((target, used))) => Ok(Some((
                ConnectRequest {
                    target: Some(target),
                    token,
                    service: Service::Stream,
                    plane: None,
                    reuse,
                },
                at + used,
            ))),
            Ok(None) => Ok(None),
            Err(e) => Err(WireError::BadTarget(e)),
        }
    }

    /// The request followed by its tag: the session's application MAC of this direction
    /// (`key`, the client-to-server one) over the request, token included (plain mode: no
    /// key, a SHA-256).
    pub fn encode_tagged(&self, key: Option<&[u8; 32]>) -> Zeroizing<Vec<u8>> {
        let mut out = self.encode();
        let tag = nena_proto::appmac::message_tag(key, nena_proto::appmac::CONNECT_CONTEXT, &out);
        out.extend_from_slice(&tag);
        out
    }

    /// [`ConnectRequest::decode`] of a tagged request: the request is returned only once its
    /// tag arrived and matched (`key`: the client-to-server application MAC key), so a proxy
    /// server never acts on a destination an attacker rewrote on the way.
    pub fn decode_tagged(
        buf: &[u8],
        key: Option<&[u8; 32]>,
    ) -> Result<Option<(ConnectRequest, usize)>, WireError> {
        let Some((req, used)) = ConnectRequest::decode(buf)? else {
            return Ok(None);
        };
        let Some(tag) = buf.get(used..used + TRAILER_LEN) else {
            return Ok(None);
        };
        let mac = nena_proto::appmac::AppMac::new(
            key,
            nena_proto::appmac::CONNECT_CONTEXT,
            &[&buf[..used]],
        );
        if !mac.verify(tag) {
            return Err(WireError::BadConnectTag);
        }
        Ok(Some((req, used + TRAILER_LEN)))
    }
}

/// The proxy server's answer to a [`ConnectRequest`]: a SOCKS5 reply code and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectReply {
    pub code: crate::wire::target::Rep,
    pub msg: String,
}

impl ConnectReply {
    pub fn encode(&self) -> Vec<u8> {
        let mut msg = self.msg.clone();
        truncate_utf8(&mut msg, 255);
        let mut out = vec![self.code as u8, msg.len() as u8];
        out.extend_from_slice(msg.as_bytes());
        out
    }

    pub fn decode(buf: &[u8]) -> Result<Option<(ConnectReply, usize)>, WireError> {
        let Some(&c) = buf.first() else {
            return Ok(None);
        };
        let code = crate::wire::target::Rep::from_u8(c).ok_or(WireError::BadConnectCode(c))?;
        let Some(&len) = buf.get(1) else {
            return Ok(None);
        };
        let end = 2 + len as usize;
        if buf.len() < end {
            return Ok(None);
        }
        let msg = crate::text::printable::printable(&buf[2..end]);
        Ok(Some((ConnectReply { code, msg }, end)))
    }
}

pub mod fuzzing;

#[cfg(test)]
mod tests;
