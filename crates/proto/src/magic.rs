//! What a nena peer's first bytes are: the magic and the protocol version (the start of
//! every handshake message's header, `wire`), which errors name too. A leaf, so `error`
//! and `wire` both use it without using each other both ways.

/// The first bytes of every nena handshake message. 0x8b is a UTF-8 continuation
/// byte, so no text protocol (HTTP, SMTP, SSH banners ...) starts with it, and it
/// differs from the first byte of TLS (0x16).
pub const MAGIC: [u8; 5] = [0x8b, b'N', b'E', b'N', b'A'];
/// The protocol version this build speaks.
pub const VERSION: u8 = 2;
