//! The server side of the SOCKS5 exchange (RFC 1928, with username/password from RFC
//! 1929), sans-IO: [`Handshake`] is fed what the application sent and says what to answer
//! and, at the end, which command and destination the application asked for; [`Users`] are
//! the username/password pairs it admits.

use super::message::*;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Username/password pairs (`--socks-user-file`: one `user:password` a line; empty lines and
/// lines starting with `#` are skipped). Kept as SHA-256 digests, compared in constant time.
#[derive(Clone, Default)]
pub struct Users(Vec<[u8; 32]>);

impl std::fmt::Debug for Users {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Users({} entries)", self.0.len())
    }
}

fn credential_digest(user: &[u8], pass: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update((user.len() as u32).to_be_bytes());
    h.update(user);
    h.update(pass);
    h.finalize().into()
}

impl Users {
    /// Parse the user file's text; errors name the line.
    pub fn parse(text: &str) -> Result<Users, String> {
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let (u, p) = line
                .split_once(':')
                .ok_or_else(|| format!("line {}: expected user:password", i + 1))?;
            if u.is_empty() || p.is_empty() || u.len() > 255 || p.len() > 255 {
                return Err(format!(
                    "line {}: user name and password must each be 1 to 255 bytes",
                    i + 1
                ));
            }
            out.push(credential_digest(u.as_bytes(), p.as_bytes()));
        }
        if out.is_empty() {
            return Err("no user:password line".into());
        }
        Ok(Users(out))
    }

    /// Whether the pair is one of the users (every entry is compared, in constant time).
    pub fn admits(&self, user: &[u8], pass: &[u8]) -> bool {
        let d = credential_digest(user, pass);
        let mut ok = subtle::Choice::from(0);
        for e in &self.0 {
            ok |= e.ct_eq(&d);
        }
        ok.into()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Greeting,
    Auth,
    Request,
    Done,
}

/// The command of a SOCKS request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Command {
    /// CONNECT: the request's destination is where to connect.
    #[default]
    Connect,
    /// UDP ASSOCIATE: the request's "destination" is the address and port the application
    /// will send its datagrams from (zeros when it does not know them yet).
    UdpAssociate,
}

/// What [`Handshake::feed`] produced.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Progress {
    /// Bytes to send to the application now.
    pub send: Vec<u8>,
    /// The request's address and port, once complete. The reply to it is the caller's
    /// ([`reply`]): it depends on what the proxy server answers.
    pub request: Option<Target>,
    /// The request's command (meaningful once `request` is set).
    pub command: Command,
    /// Bytes the application sent after its request (to be relayed once connected).
    pub leftover: Vec<u8>,
}

/// The server side of a SOCKS5 exchange, up to the request (sans-IO).
#[derive(Debug)]
pub struct Handshake {
    users: Option<Users>,
    state: State,
    command: Command,
    pub(super) buf: Vec<u8>,
    user: String,
}

/// The longest exchange step we buffer: a greeting (2 + 255), an RFC 1929 request
/// (3 + 255 + 255) or a SOCKS request (4 + 1 + 255 + 2).
pub(super) const MAX_STEP: usize = 513;

impl Handshake {
    /// `users`: require username/password (RFC 1929); `None`: no authentication.
    pub fn new(users: Option<Users>) -> Handshake {
        Handshake {
            users,
            state: State::Greeting,
            command: Command::Connect,
            buf: Vec::new(),
            user: String::new(),
        }
    }

    /// The authenticated user name (empty without authentication).
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The request's command (meaningful once it was read).
    pub fn command(&self) -> Command {
        self.command
    }

    /// Whether the request was read.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// The application closed its side: an error unless the request was complete.
    pub fn eof(&self) -> Result<(), SocksError> {
        if self.is_done() {
            Ok(())
        } else {
            Err(SocksError::Truncated)
        }
    }

    /// Feed bytes the application sent. On error, send [`SocksError::reply`] (if any) and
    /// close.
    pub fn feed(&mut self, input: &[u8]) -> Result<Progress, SocksError> {
        debug_assert!(self.state != State::Done, "fed after the request");
        self.buf.extend_from_slice(input);
        let mut out = Progress::default();
        loop {
            let step = match self.state {
                State::Greeting => self.greeting(&mut out)?,
                State::Auth => self.auth(&mut out)?,
                State::Request => self.request(&mut out)?,
                State::Done => unreachable!(),
            };
            match step {
                None => {
                    debug_assert!(self.buf.len() <= MAX_STEP);
                    return Ok(out);
                }
                Some(used) => {
                    self.buf.drain(..used);
                    if self.state == State::Done {
                        out.leftover = std::mem::take(&mut self.buf);
                        return Ok(out);
                    }
                }
            }
        }
    }

    fn greeting(&mut self, out: &mut Progress) -> Result<Option<usize>, SocksError> {
        let b = &self.buf;
        let Some(&ver) = b.first() else {
            return Ok(None);
        };
        if ver != VERSION {
            return Err(SocksError::Version(ver));
        }
        let Some(&n) = b.get(1) else { return Ok(None) };
        if n == 0 {
            return Err(SocksError::NoMethods);
        }
        let end = 2 + n as usize;
        if b.len() < end {
            return Ok(None);
        }
        let methods = &b[2..end];
        let chosen = if self.users.is_some() {
            METHOD_USERPASS
        } else {
            METHOD_NONE
        };
        if !methods.contains(&chosen) {
            return Err(SocksError::NoAcceptableMethod(methods.to_vec()));
        }
        out.send.extend_from_slice(&[VERSION, chosen]);
        self.state = if self.users.is_some() {
            State::Auth
        } else {
            State::Request
        };
        Ok(Some(end))
    }

    fn auth(&mut self, out: &mut Progress) -> Result<Option<usize>, SocksError> {
        let b = &self.buf;
        let Some(&ver) = b.first() else {
            return Ok(None);
        };
        if ver != USERPASS_VERSION {
            return Err(SocksError::AuthVersion(ver));
        }
        let Some(&ulen) = b.get(1) else {
            return Ok(None);
        };
        let ulen = ulen as usize;
        let Some(&plen) = b.get(2 + ulen) else {
            return Ok(None);
        };
        let end = 3 + ulen + plen as usize;
        if b.len() < end {
            return Ok(None);
        }
        let (user, pass) = (&b[2..2 + ulen], &b[3 + ulen..end]);
        if user.is_empty() || pass.is_empty() {
            return Err(SocksError::EmptyCredentials);
        }
        let users = self.users.as_ref().expect("auth state without users");
        if !users.admits(user, pass) {
            return Err(SocksError::AuthFailed);
        }
        self.user = String::from_utf8_lossy(user).into_owned();
        out.send.extend_from_slice(&[USERPASS_VERSION, 0x00]);
        self.state = State::Request;
        Ok(Some(end))
    }

    fn request(&mut self, out: &mut Progress) -> Result<Option<usize>, SocksError> {
        let b = &self.buf;
        let Some(&ver) = b.first() else {
            return Ok(None);
        };
        if ver != VERSION {
            return Err(SocksError::Version(ver));
        }
        let Some(&cmd) = b.get(1) else {
            return Ok(None);
        };
        let command = match cmd {
            CMD_CONNECT => Command::Connect,
            CMD_UDP_ASSOCIATE => Command::UdpAssociate,
            other => return Err(SocksError::Command(other)),
        };
        let Some(&rsv) = b.get(2) else {
            return Ok(None);
        };
        if rsv != 0 {
            return Err(SocksError::Reserved(rsv));
        }
        let Some((target, used)) = Target::decode(&b[3..])? else {
            return Ok(None);
        };
        out.request = Some(target);
        out.command = command;
        self.command = command;
        self.state = State::Done;
        Ok(Some(3 + used))
    }
}
