//! A negotiated session: the chosen mode and, per direction, the state that
//! protects outgoing bytes and unprotects incoming ones (same length, in place).

use crate::mode::{Mode, KATO_KEY_LEN};
use nena_codec::{Descrambler, Scrambler};
use std::fmt;

/// Which end of the connection a session belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// The side that sent the hello (and all key material).
    Client,
    /// The side that answered.
    Server,
}

/// The key material of one session, per direction.
#[derive(Clone)]
pub(crate) enum Keys {
    Plain,
    Kato {
        c2s: [u8; KATO_KEY_LEN],
        s2c: [u8; KATO_KEY_LEN],
    },
}

impl Drop for Keys {
    fn drop(&mut self) {
        if let Keys::Kato { c2s, s2c } = self {
            zeroize::Zeroize::zeroize(c2s);
            zeroize::Zeroize::zeroize(s2c);
        }
    }
}

impl Keys {
    fn mode(&self) -> Mode {
        match self {
            Keys::Plain => Mode::Plain,
            Keys::Kato { .. } => Mode::Kato,
        }
    }
}

/// The outgoing half of a session: transforms bytes before they are written.
pub struct Protector {
    mode: Mode,
    inner: ProtectInner,
}

enum ProtectInner {
    Plain,
    Kato(Scrambler),
}

/// The incoming half of a session: transforms bytes after they are read.
pub struct Unprotector {
    mode: Mode,
    inner: UnprotectInner,
}

enum UnprotectInner {
    Plain,
    Kato(Descrambler),
}

impl Protector {
    /// The session's mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Protects the next `buf.len()` bytes of the outgoing stream, in place.
    /// Call it on every byte written, in stream order, exactly once.
    pub fn protect(&mut self, buf: &mut [u8]) {
        match &mut self.inner {
            ProtectInner::Plain => {}
            ProtectInner::Kato(s) => s.scramble_in_place(buf),
        }
    }
}

impl Unprotector {
    /// The session's mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Unprotects the next `buf.len()` bytes of the incoming stream, in place.
    /// Call it on every byte read after the handshake, in stream order, exactly once.
    pub fn unprotect(&mut self, buf: &mut [u8]) {
        match &mut self.inner {
            UnprotectInner::Plain => {}
            UnprotectInner::Kato(d) => d.descramble_in_place(buf),
        }
    }
}

impl fmt::Debug for Protector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Protector")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for Unprotector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Unprotector")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

/// A negotiated session. Bytes after the handshake, in both directions, go
/// through [`Session::protect`] (outgoing) and [`Session::unprotect`] (incoming);
/// [`Session::split`] gives the two halves to separate tasks.
pub struct Session {
    role: Role,
    tx: Protector,
    rx: Unprotector,
}

impl Session {
    pub(crate) fn new(role: Role, keys: &Keys) -> Session {
        let mode = keys.mode();
        let (tx, rx) = match keys {
            Keys::Plain => (ProtectInner::Plain, UnprotectInner::Plain),
            Keys::Kato { c2s, s2c } => {
                let (out_key, in_key) = match role {
                    Role::Client => (*c2s, *s2c),
                    Role::Server => (*s2c, *c2s),
                };
                (
                    ProtectInner::Kato(Scrambler::new(out_key)),
                    UnprotectInner::Kato(Descrambler::new(in_key)),
                )
            }
        };
        Session {
            role,
            tx: Protector { mode, inner: tx },
            rx: Unprotector { mode, inner: rx },
        }
    }

    /// The negotiated mode.
    pub fn mode(&self) -> Mode {
        self.tx.mode
    }

    /// Which end this session is.
    pub fn role(&self) -> Role {
        self.role
    }

    /// Protects outgoing bytes in place (see [`Protector::protect`]).
    pub fn protect(&mut self, buf: &mut [u8]) {
        self.tx.protect(buf)
    }

    /// Unprotects incoming bytes in place (see [`Unprotector::unprotect`]).
    pub fn unprotect(&mut self, buf: &mut [u8]) {
        self.rx.unprotect(buf)
    }

    /// Splits into the outgoing and incoming halves (each `Send`), for full-duplex I/O.
    pub fn split(self) -> (Protector, Unprotector) {
        (self.tx, self.rx)
    }
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("role", &self.role)
            .field("mode", &self.mode())
            .finish_non_exhaustive()
    }
}
