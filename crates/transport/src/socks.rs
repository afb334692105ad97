//! SOCKS5 for `nena proxy client --socks5` and the allow-list of `nena proxy server --allow`,
//! sans-IO (bytes in, requests, replies and decisions out).
//!
//! - [`Handshake`]: the server side of RFC 1928 (version 5, CONNECT and UDP ASSOCIATE; ATYP
//!   IPv4, domain name, IPv6) with the methods "no authentication" and username/password
//!   (RFC 1929) when [`Users`] are configured. Feed it what the application sent; it says what
//!   to answer and, at the end, which command and destination the application asked for.
//! - [`UdpPacket`]: the header of a UDP ASSOCIATE datagram (RFC 1928 section 7), parsed from
//!   what arrives from the network ([`UdpPacket::parse`]) and put in front of a reply
//!   ([`UdpPacket::encode`]).
//! - [`Target`]: a requested destination (an address or a domain name, and a port), also
//!   carried to the proxy server inside the nena session ([`crate::wire::ConnectRequest`]).
//! - [`AllowRule`] / [`AllowList`]: `CIDR[:PORT[-PORT]]` rules; the proxy server forwards to an
//!   address only if a rule permits it (domain names are resolved first; the resolved address
//!   is what is checked). An empty list permits nothing.
//! - [`Rep`]: the reply codes of RFC 1928 section 6.

use sha2::{Digest, Sha256};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use subtle::ConstantTimeEq;
use thiserror::Error;

/// SOCKS protocol version.
pub const VERSION: u8 = 5;
/// Method: no authentication required.
pub const METHOD_NONE: u8 = 0x00;
/// Method: username/password (RFC 1929).
pub const METHOD_USERPASS: u8 = 0x02;
/// Method reply: no acceptable methods.
pub const METHOD_NO_ACCEPTABLE: u8 = 0xff;
/// Command CONNECT.
pub const CMD_CONNECT: u8 = 0x01;
/// Command UDP ASSOCIATE (RFC 1928 section 7). BIND (0x02) is not served.
pub const CMD_UDP_ASSOCIATE: u8 = 0x03;
/// Address types.
pub const ATYP_IPV4: u8 = 0x01;
pub const ATYP_DOMAIN: u8 = 0x03;
pub const ATYP_IPV6: u8 = 0x04;
/// Version of the RFC 1929 subnegotiation.
pub const USERPASS_VERSION: u8 = 0x01;

/// Reply codes (RFC 1928 section 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Rep {
    Succeeded = 0x00,
    GeneralFailure = 0x01,
    NotAllowed = 0x02,
    NetworkUnreachable = 0x03,
    HostUnreachable = 0x04,
    ConnectionRefused = 0x05,
    TtlExpired = 0x06,
    CommandNotSupported = 0x07,
    AddressTypeNotSupported = 0x08,
}

impl Rep {
    pub fn from_u8(v: u8) -> Option<Rep> {
        Some(match v {
            0 => Rep::Succeeded,
            1 => Rep::GeneralFailure,
            2 => Rep::NotAllowed,
            3 => Rep::NetworkUnreachable,
            4 => Rep::HostUnreachable,
            5 => Rep::ConnectionRefused,
            6 => Rep::TtlExpired,
            7 => Rep::CommandNotSupported,
            8 => Rep::AddressTypeNotSupported,
            _ => return None,
        })
    }

    /// The reply code for a failed `connect` to the destination.
    pub fn of_connect_error(e: &std::io::Error) -> Rep {
        use std::io::ErrorKind::*;
        match e.kind() {
            ConnectionRefused => Rep::ConnectionRefused,
            NetworkUnreachable | AddrNotAvailable => Rep::NetworkUnreachable,
            HostUnreachable | TimedOut => Rep::HostUnreachable,
            _ => match e.raw_os_error() {
                Some(libc::ENETUNREACH) | Some(libc::EADDRNOTAVAIL) => Rep::NetworkUnreachable,
                Some(libc::EHOSTUNREACH) | Some(libc::ETIMEDOUT) => Rep::HostUnreachable,
                Some(libc::ECONNREFUSED) => Rep::ConnectionRefused,
                _ => Rep::GeneralFailure,
            },
        }
    }
}

impl std::fmt::Display for Rep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Rep::Succeeded => "succeeded",
            Rep::GeneralFailure => "general SOCKS server failure",
            Rep::NotAllowed => "connection not allowed by ruleset",
            Rep::NetworkUnreachable => "network unreachable",
            Rep::HostUnreachable => "host unreachable",
            Rep::ConnectionRefused => "connection refused",
            Rep::TtlExpired => "TTL expired",
            Rep::CommandNotSupported => "command not supported",
            Rep::AddressTypeNotSupported => "address type not supported",
        })
    }
}

/// The host part of a destination.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Host {
    Ip(IpAddr),
    /// A domain name (1..=255 bytes, as sent; resolved by the proxy server).
    Domain(String),
}

/// A requested destination.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    pub host: Host,
    pub port: u16,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.host {
            Host::Ip(ip) => write!(f, "{}", SocketAddr::new(*ip, self.port)),
            Host::Domain(d) => write!(f, "{d}:{}", self.port),
        }
    }
}

impl Target {
    /// `ATYP | ADDR | PORT`, as in a SOCKS request (and in nena's connect request).
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        match &self.host {
            Host::Ip(IpAddr::V4(a)) => {
                out.push(ATYP_IPV4);
                out.extend_from_slice(&a.octets());
            }
            Host::Ip(IpAddr::V6(a)) => {
                out.push(ATYP_IPV6);
                out.extend_from_slice(&a.octets());
            }
            Host::Domain(d) => {
                out.push(ATYP_DOMAIN);
                out.push(d.len() as u8);
                out.extend_from_slice(d.as_bytes());
            }
        }
        out.extend_from_slice(&self.port.to_be_bytes());
    }

    /// Decode `ATYP | ADDR | PORT` from the start of `buf`: `Ok(None)` if more bytes are
    /// needed, else the target and the bytes used.
    pub fn decode(buf: &[u8]) -> Result<Option<(Target, usize)>, SocksError> {
        let Some(&atyp) = buf.first() else {
            return Ok(None);
        };
        let (host, at) = match atyp {
            ATYP_IPV4 => {
                if buf.len() < 5 {
                    return Ok(None);
                }
                let o: [u8; 4] = buf[1..5].try_into().unwrap();
                (Host::Ip(IpAddr::V4(Ipv4Addr::from(o))), 5)
            }
            ATYP_IPV6 => {
                if buf.len() < 17 {
                    return Ok(None);
                }
                let o: [u8; 16] = buf[1..17].try_into().unwrap();
                (Host::Ip(IpAddr::V6(Ipv6Addr::from(o))), 17)
            }
            ATYP_DOMAIN => {
                let Some(&len) = buf.get(1) else {
                    return Ok(None);
                };
                if len == 0 {
                    return Err(SocksError::EmptyDomain);
                }
                let end = 2 + len as usize;
                if buf.len() < end {
                    return Ok(None);
                }
                let name = std::str::from_utf8(&buf[2..end])
                    .ok()
                    .filter(|s| s.bytes().all(|b| b.is_ascii_graphic()))
                    .ok_or(SocksError::BadDomain)?;
                (Host::Domain(name.to_owned()), end)
            }
            other => return Err(SocksError::AddressType(other)),
        };
        if buf.len() < at + 2 {
            return Ok(None);
        }
        let port = u16::from_be_bytes([buf[at], buf[at + 1]]);
        Ok(Some((Target { host, port }, at + 2)))
    }
}

/// Why a SOCKS exchange failed; [`SocksError::reply`] gives the bytes to answer with.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SocksError {
    #[error("not SOCKS version 5 (version byte {0:#04x})")]
    Version(u8),
    #[error("SOCKS greeting offers no authentication method")]
    NoMethods,
    #[error("no acceptable authentication method (offered {0:02x?})")]
    NoAcceptableMethod(Vec<u8>),
    #[error("username/password subnegotiation of unknown version {0:#04x}")]
    AuthVersion(u8),
    #[error("empty user name or password")]
    EmptyCredentials,
    #[error("wrong user name or password")]
    AuthFailed,
    #[error("SOCKS command {0:#04x} not supported (CONNECT and UDP ASSOCIATE only)")]
    Command(u8),
    #[error("reserved byte of the SOCKS request is {0:#04x}, not 0")]
    Reserved(u8),
    #[error("SOCKS address type {0:#04x} not supported")]
    AddressType(u8),
    #[error("empty domain name")]
    EmptyDomain,
    #[error("domain name is not printable ASCII")]
    BadDomain,
    #[error("the client closed the connection in the middle of the SOCKS exchange")]
    Truncated,
}

impl SocksError {
    /// What to send the application before closing, when the RFCs define an answer.
    pub fn reply(&self) -> Option<Vec<u8>> {
        match self {
            SocksError::NoMethods | SocksError::NoAcceptableMethod(_) => {
                Some(vec![VERSION, METHOD_NO_ACCEPTABLE])
            }
            SocksError::AuthVersion(_) | SocksError::EmptyCredentials | SocksError::AuthFailed => {
                Some(vec![USERPASS_VERSION, 0x01])
            }
            SocksError::Command(_) => Some(reply(Rep::CommandNotSupported, None)),
            SocksError::AddressType(_) => Some(reply(Rep::AddressTypeNotSupported, None)),
            SocksError::Reserved(_) | SocksError::EmptyDomain | SocksError::BadDomain => {
                Some(reply(Rep::GeneralFailure, None))
            }
            // Not SOCKS 5 (or the peer is gone): there is no version to answer in.
            SocksError::Version(_) | SocksError::Truncated => None,
        }
    }
}

/// A SOCKS reply: `VER REP RSV ATYP BND.ADDR BND.PORT` (unspecified IPv4 address when `bound`
/// is `None`).
pub fn reply(rep: Rep, bound: Option<SocketAddr>) -> Vec<u8> {
    let mut out = vec![VERSION, rep as u8, 0];
    let bound = bound.unwrap_or(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0));
    Target {
        host: Host::Ip(bound.ip()),
        port: bound.port(),
    }
    .encode_into(&mut out);
    out
}

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
    buf: Vec<u8>,
    user: String,
}

/// The longest exchange step we buffer: a greeting (2 + 255), an RFC 1929 request
/// (3 + 255 + 255) or a SOCKS request (4 + 1 + 255 + 2).
const MAX_STEP: usize = 513;

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

/// Why a UDP ASSOCIATE datagram was dropped ([`UdpPacket::parse`]).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum UdpError {
    #[error("a datagram of {0} bytes is shorter than its SOCKS UDP header")]
    Short(usize),
    #[error("reserved bytes of the SOCKS UDP header are {0:#06x}, not 0")]
    Reserved(u16),
    #[error("SOCKS UDP fragment {0:#04x} (fragmentation is not supported)")]
    Fragment(u8),
    #[error("SOCKS UDP header: {0}")]
    Address(SocksError),
}

/// A datagram of a UDP association (RFC 1928 section 7):
/// `RSV u16 (0) | FRAG u8 | ATYP | DST.ADDR | DST.PORT | DATA`. From the application,
/// `target` is where to send `data`; toward it, where the reply came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpPacket<'a> {
    pub target: Target,
    pub data: &'a [u8],
}

impl<'a> UdpPacket<'a> {
    /// Parses a whole datagram from the network. Refused: a header cut short, reserved
    /// bytes that are not zero, a fragment (FRAG not 0: reassembly is not supported, as in
    /// most servers), an unknown address type, an empty or unprintable domain name. The
    /// data is the rest of the datagram, possibly empty.
    pub fn parse(buf: &'a [u8]) -> Result<UdpPacket<'a>, UdpError> {
        let Some(head) = buf.get(..3) else {
            return Err(UdpError::Short(buf.len()));
        };
        let rsv = u16::from_be_bytes([head[0], head[1]]);
        if rsv != 0 {
            return Err(UdpError::Reserved(rsv));
        }
        if head[2] != 0 {
            return Err(UdpError::Fragment(head[2]));
        }
        match Target::decode(&buf[3..]) {
            Ok(Some((target, used))) => Ok(UdpPacket {
                target,
                data: &buf[3 + used..],
            }),
            Ok(None) => Err(UdpError::Short(buf.len())),
            Err(e) => Err(UdpError::Address(e)),
        }
    }

    /// The datagram with its header (`FRAG` 0); `None` when the whole would not fit a UDP
    /// datagram (65,507 bytes over IPv4) or the domain name is longer than 255 bytes.
    pub fn encode(&self) -> Option<Vec<u8>> {
        if let Host::Domain(d) = &self.target.host {
            if d.is_empty() || d.len() > 255 {
                return None;
            }
        }
        let mut out = Vec::with_capacity(3 + 1 + 16 + 2 + self.data.len());
        out.extend_from_slice(&[0, 0, 0]);
        self.target.encode_into(&mut out);
        out.extend_from_slice(self.data);
        (out.len() <= MAX_UDP_PAYLOAD).then_some(out)
    }
}

/// The largest payload of a UDP datagram over IPv4 (65535 - 20 - 8); a reply whose header
/// would make it larger is dropped.
pub const MAX_UDP_PAYLOAD: usize = 65507;

/// One `--allow` rule: `CIDR[:PORT[-PORT]]`; IPv6 with ports in brackets:
/// `[2001:db8::/32]:443`. Without a prefix length the rule is one address; without ports,
/// every port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowRule {
    pub net: IpAddr,
    pub prefix: u8,
    pub ports: (u16, u16),
}

impl std::str::FromStr for AllowRule {
    type Err = String;
    fn from_str(s: &str) -> Result<AllowRule, String> {
        let bad = |why: &str| format!("`{s}` is not CIDR[:PORT[-PORT]] ({why})");
        let (cidr, ports) = if let Some(rest) = s.strip_prefix('[') {
            let (c, after) = rest.split_once(']').ok_or_else(|| bad("missing `]`"))?;
            match after {
                "" => (c, None),
                p => (
                    c,
                    Some(
                        p.strip_prefix(':')
                            .ok_or_else(|| bad("expected `:` after `]`"))?,
                    ),
                ),
            }
        } else if s.matches(':').count() == 1 {
            let (c, p) = s.split_once(':').unwrap();
            (c, Some(p))
        } else {
            (s, None)
        };
        let (addr, prefix) = match cidr.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (cidr, None),
        };
        let net: IpAddr = addr.parse().map_err(|_| bad("not an IP address"))?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| bad("bad prefix length"))?,
        };
        let port = |p: &str| p.parse::<u16>().map_err(|_| bad("bad port"));
        let ports = match ports {
            None => (0, u16::MAX),
            Some(p) => match p.split_once('-') {
                Some((lo, hi)) => (port(lo)?, port(hi)?),
                None => (port(p)?, port(p)?),
            },
        };
        if ports.0 > ports.1 {
            return Err(bad("empty port range"));
        }
        Ok(AllowRule {
            net: mask(net, prefix),
            prefix,
            ports,
        })
    }
}

fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(a) => {
            let m = u32::MAX.checked_shl(32 - prefix as u32).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & m))
        }
        IpAddr::V6(a) => {
            let m = u128::MAX.checked_shl(128 - prefix as u32).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(a) & m))
        }
    }
}

impl AllowRule {
    /// Whether the rule permits `addr` (an IPv4-mapped IPv6 address counts as IPv4).
    pub fn permits(&self, addr: SocketAddr) -> bool {
        let ip = addr.ip().to_canonical();
        let port = addr.port();
        ip.is_ipv4() == self.net.is_ipv4()
            && mask(ip, self.prefix) == self.net
            && (self.ports.0..=self.ports.1).contains(&port)
    }
}

/// The proxy server's `--allow` rules. Empty: nothing is permitted (never an open relay).
#[derive(Debug, Clone, Default)]
pub struct AllowList(pub Vec<AllowRule>);

impl AllowList {
    pub fn permits(&self, addr: SocketAddr) -> bool {
        self.0.iter().any(|r| r.permits(addr))
    }

    /// Of the addresses a destination resolved to, those the list permits (in order):
    /// the proxy server connects to these only; none means [`Rep::NotAllowed`].
    pub fn filter(&self, resolved: &[SocketAddr]) -> Vec<SocketAddr> {
        resolved
            .iter()
            .copied()
            .filter(|a| self.permits(*a))
            .collect()
    }
}

/// Entry points for fuzzing: the same bodies run under cargo-fuzz and in `cargo test`.
pub mod fuzzing {
    use super::*;

    /// Drive a [`Handshake`] (with and without users) with arbitrary bytes cut at every
    /// fourth position: never a panic, the buffer stays bounded, the answers are well formed,
    /// and splitting the input does not change the outcome.
    pub fn handshake(data: &[u8]) {
        let users = Users::parse("u:p").unwrap();
        for users in [None, Some(users)] {
            let whole = run(users.clone(), &[data]);
            let pieces: Vec<&[u8]> = data.chunks(4).collect();
            let split = run(users.clone(), &pieces);
            assert_eq!(whole, split, "splitting the input changed the outcome");
            if let Ok((sent, Some(t), _)) = &whole {
                // What was requested encodes back to a request that decodes the same.
                let mut enc = Vec::new();
                t.encode_into(&mut enc);
                assert_eq!(Target::decode(&enc), Ok(Some((t.clone(), enc.len()))));
                assert!(sent.len() >= 2);
            }
        }
        if let Ok(s) = std::str::from_utf8(data) {
            if let Ok(r) = s.parse::<AllowRule>() {
                assert!(r.prefix <= if r.net.is_ipv4() { 32 } else { 128 });
                assert!(r.ports.0 <= r.ports.1);
                assert!(r.permits(SocketAddr::new(r.net, r.ports.0)));
            }
        }
    }

    /// Parse arbitrary bytes as a UDP ASSOCIATE datagram: never a panic; what parses
    /// encodes back to exactly the bytes it came from, and every cut of its header is refused
    /// as too short.
    pub fn udp_packet(data: &[u8]) {
        let Ok(p) = UdpPacket::parse(data) else {
            return;
        };
        if data.len() <= MAX_UDP_PAYLOAD {
            assert_eq!(
                p.encode().as_deref(),
                Some(data),
                "parse and encode disagree"
            );
        }
        let header = data.len() - p.data.len();
        assert!(header >= 3 + 1 + 2, "a header of {header} bytes");
        for cut in 0..header {
            assert_eq!(
                UdpPacket::parse(&data[..cut]),
                Err(UdpError::Short(cut)),
                "cut at {cut}"
            );
        }
    }

    type Outcome = Result<(Vec<u8>, Option<Target>, Vec<u8>), SocksError>;

    fn run(users: Option<Users>, pieces: &[&[u8]]) -> Outcome {
        let mut h = Handshake::new(users);
        let mut sent = Vec::new();
        let mut leftover = Vec::new();
        let mut request = None;
        for p in pieces {
            if h.is_done() {
                leftover.extend_from_slice(p);
                continue;
            }
            let got = h.feed(p)?;
            assert!(h.buf.len() <= MAX_STEP);
            sent.extend_from_slice(&got.send);
            leftover.extend_from_slice(&got.leftover);
            if got.request.is_some() {
                request = got.request;
            }
        }
        Ok((sent, request, leftover))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v4(a: [u8; 4], port: u16) -> Target {
        Target {
            host: Host::Ip(IpAddr::V4(Ipv4Addr::from(a))),
            port,
        }
    }

    /// Feeds `input` byte by byte, collecting everything.
    fn bytewise(h: &mut Handshake, input: &[u8]) -> Result<Progress, SocksError> {
        let mut all = Progress::default();
        for (i, b) in input.iter().enumerate() {
            let p = h.feed(std::slice::from_ref(b))?;
            all.send.extend_from_slice(&p.send);
            if p.request.is_some() {
                all.request = p.request;
                all.leftover = input[i + 1..].to_vec();
                return Ok(all);
            }
        }
        Ok(all)
    }

    #[test]
    fn the_rfcs_address_forms_are_accepted() {
        let v6: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let cases: Vec<(Vec<u8>, Target)> = vec![
            (
                vec![5, 1, 0, 1, 198, 18, 3, 2, 0, 80],
                v4([198, 18, 3, 2], 80),
            ),
            (
                {
                    let mut r = vec![5, 1, 0, 4];
                    r.extend_from_slice(&v6.octets());
                    r.extend_from_slice(&443u16.to_be_bytes());
                    r
                },
                Target {
                    host: Host::Ip(IpAddr::V6(v6)),
                    port: 443,
                },
            ),
            (
                {
                    let mut r = vec![5, 1, 0, 3, 11];
                    r.extend_from_slice(b"example.org");
                    r.extend_from_slice(&8080u16.to_be_bytes());
                    r
                },
                Target {
                    host: Host::Domain("example.org".into()),
                    port: 8080,
                },
            ),
        ];
        for (req, want) in cases {
            // Offering several methods, the no-auth one among them.
            let mut input = vec![5, 3, 0x80, 0x02, 0x00];
            input.extend_from_slice(&req);
            input.extend_from_slice(b"GET /");
            // Whole, and byte by byte.
            let mut h = Handshake::new(None);
            let p = h.feed(&input).unwrap();
            assert_eq!(p.send, vec![5, 0]);
            assert_eq!(p.request.as_ref(), Some(&want));
            assert_eq!(p.leftover, b"GET /");
            let mut h = Handshake::new(None);
            let p = bytewise(&mut h, &input).unwrap();
            assert_eq!(p.send, vec![5, 0]);
            assert_eq!(p.request, Some(want.clone()));
            assert_eq!(p.leftover, b"GET /");
            // The target's encoding is the request's tail.
            let mut enc = Vec::new();
            want.encode_into(&mut enc);
            assert_eq!(enc, req[3..]);
        }
    }

    #[test]
    fn a_truncated_exchange_waits_then_fails_at_eof() {
        let input = [5u8, 1, 0, 5, 1, 0, 3, 3, b'a', b'b', b'c', 0, 80];
        for cut in 0..input.len() {
            let mut h = Handshake::new(None);
            let p = h.feed(&input[..cut]).unwrap();
            assert!(p.request.is_none(), "cut {cut}");
            assert_eq!(h.eof(), Err(SocksError::Truncated));
            assert_eq!(SocksError::Truncated.reply(), None);
        }
        let mut h = Handshake::new(None);
        assert!(h.feed(&input).unwrap().request.is_some());
        assert_eq!(h.eof(), Ok(()));
    }

    #[test]
    fn malformed_greetings_get_the_right_answer() {
        // Not version 5 (SOCKS4, or HTTP): no answer, closed.
        for bad in [&[4u8, 1, 0, 80][..], b"GET / HTTP/1.1\r\n"] {
            let e = Handshake::new(None).feed(bad).unwrap_err();
            assert_eq!(e, SocksError::Version(bad[0]));
            assert_eq!(e.reply(), None);
        }
        // Zero methods.
        let e = Handshake::new(None).feed(&[5, 0]).unwrap_err();
        assert_eq!(e, SocksError::NoMethods);
        assert_eq!(e.reply(), Some(vec![5, 0xff]));
        // Only username/password offered to a server without users, and the reverse.
        let e = Handshake::new(None).feed(&[5, 1, 2]).unwrap_err();
        assert_eq!(e.reply(), Some(vec![5, 0xff]));
        let users = Users::parse("alice:secret").unwrap();
        let e = Handshake::new(Some(users)).feed(&[5, 1, 0]).unwrap_err();
        assert_eq!(e, SocksError::NoAcceptableMethod(vec![0]));
        assert_eq!(e.reply(), Some(vec![5, 0xff]));
    }

    #[test]
    fn malformed_requests_get_the_rfcs_reply() {
        let greet = [5u8, 1, 0];
        let check = |req: &[u8], err: SocksError, rep: Rep| {
            let mut input = greet.to_vec();
            input.extend_from_slice(req);
            let e = Handshake::new(None).feed(&input).unwrap_err();
            assert_eq!(e, err, "{req:?}");
            let r = e.reply().unwrap();
            assert_eq!(r[..2], [5, rep as u8], "{req:?}");
            assert_eq!(r.len(), 10, "VER REP RSV ATYP(IPv4) ADDR PORT");
        };
        // BIND, and a command RFC 1928 does not define.
        check(
            &[5, 2, 0, 1],
            SocksError::Command(2),
            Rep::CommandNotSupported,
        );
        check(
            &[5, 4, 0, 1],
            SocksError::Command(4),
            Rep::CommandNotSupported,
        );
        // Unknown address types.
        check(
            &[5, 1, 0, 2, 1, 2],
            SocksError::AddressType(2),
            Rep::AddressTypeNotSupported,
        );
        check(
            &[5, 1, 0, 0],
            SocksError::AddressType(0),
            Rep::AddressTypeNotSupported,
        );
        check(&[5, 1, 7, 1], SocksError::Reserved(7), Rep::GeneralFailure);
        check(
            &[5, 1, 0, 3, 0],
            SocksError::EmptyDomain,
            Rep::GeneralFailure,
        );
        check(
            &[5, 1, 0, 3, 2, b'a', b' ', 0, 80],
            SocksError::BadDomain,
            Rep::GeneralFailure,
        );
        // A request of another version after a good greeting: no answer.
        let e = Handshake::new(None).feed(&[5, 1, 0, 4, 1, 0]).unwrap_err();
        assert_eq!(e, SocksError::Version(4));
    }

    #[test]
    fn udp_associate_is_read_with_the_clients_address_and_keeps_authentication() {
        // No authentication: the command and the address the client will send from.
        let mut h = Handshake::new(None);
        let p = h
            .feed(&[5, 1, 0, 5, 3, 0, 1, 198, 18, 1, 2, 0x30, 0x39])
            .unwrap();
        assert_eq!(p.send, vec![5, 0]);
        assert_eq!(p.command, Command::UdpAssociate);
        assert_eq!(p.request, Some(v4([198, 18, 1, 2], 12345)));
        // Zeros (the client does not know its address yet), byte by byte.
        let mut h = Handshake::new(None);
        let p = bytewise(&mut h, &[5, 1, 0, 5, 3, 0, 1, 0, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!(p.request, Some(v4([0, 0, 0, 0], 0)));
        assert_eq!(h.command(), Command::UdpAssociate);
        // CONNECT stays CONNECT.
        let p = Handshake::new(None)
            .feed(&[5, 1, 0, 5, 1, 0, 1, 1, 2, 3, 4, 0, 80])
            .unwrap();
        assert_eq!(p.command, Command::Connect);
        // With users, UDP ASSOCIATE needs the password too: no request is read without it.
        let users = Users::parse("alice:secret").unwrap();
        let assoc = [5u8, 3, 0, 1, 0, 0, 0, 0, 0, 0];
        let e = Handshake::new(Some(users.clone()))
            .feed(&[&[5, 1, 0][..], &assoc].concat())
            .unwrap_err();
        assert_eq!(e, SocksError::NoAcceptableMethod(vec![0]));
        let wrong = [&[5u8, 1, 2, 1, 5][..], b"alice", &[5], b"wrong", &assoc].concat();
        let e = Handshake::new(Some(users.clone()))
            .feed(&wrong)
            .unwrap_err();
        assert_eq!(e, SocksError::AuthFailed);
        let right = [&[5u8, 1, 2, 1, 5][..], b"alice", &[6], b"secret", &assoc].concat();
        let mut h = Handshake::new(Some(users));
        let p = h.feed(&right).unwrap();
        assert_eq!(p.send, vec![5, 2, 1, 0]);
        assert_eq!(p.command, Command::UdpAssociate);
        assert_eq!(h.user(), "alice");
    }

    #[test]
    fn udp_headers_parse_and_malformed_ones_are_refused() {
        // IPv4, IPv6 and a domain name, with data and without.
        let d = UdpPacket::parse(&[0, 0, 0, 1, 198, 18, 3, 2, 0x1b, 0x5f, b'h', b'i']).unwrap();
        assert_eq!(d.target, v4([198, 18, 3, 2], 7007));
        assert_eq!(d.data, b"hi");
        let v6: Ipv6Addr = "2001:2::2".parse().unwrap();
        let mut b = vec![0, 0, 0, 4];
        b.extend_from_slice(&v6.octets());
        b.extend_from_slice(&53u16.to_be_bytes());
        let d = UdpPacket::parse(&b).unwrap();
        assert_eq!(d.target.host, Host::Ip(IpAddr::V6(v6)));
        assert_eq!((d.target.port, d.data), (53, &b""[..]));
        let d = UdpPacket::parse(b"\0\0\0\x03\x0bexample.org\0\x35q").unwrap();
        assert_eq!(d.target.host, Host::Domain("example.org".into()));
        assert_eq!(d.data, b"q");
        // Each malformed case is an error.
        let cases: Vec<(Vec<u8>, UdpError)> = vec![
            (vec![], UdpError::Short(0)),
            (vec![0, 0], UdpError::Short(2)),
            (vec![0, 0, 0], UdpError::Short(3)),
            (vec![0, 0, 0, 1, 198, 18, 3, 2, 0], UdpError::Short(9)),
            (vec![0, 0, 0, 4, 0, 0], UdpError::Short(6)),
            (vec![0, 0, 0, 3, 5, b'a'], UdpError::Short(6)),
            (vec![0, 1, 0, 1, 1, 2, 3, 4, 0, 7], UdpError::Reserved(1)),
            (
                vec![0xff, 0, 0, 1, 1, 2, 3, 4, 0, 7],
                UdpError::Reserved(0xff00),
            ),
            (
                vec![0, 0, 1, 1, 1, 2, 3, 4, 0, 7, b'x'],
                UdpError::Fragment(1),
            ),
            (
                vec![0, 0, 0x81, 1, 1, 2, 3, 4, 0, 7],
                UdpError::Fragment(0x81),
            ),
            (
                vec![0, 0, 0, 2, 1, 2, 3, 4, 0, 7],
                UdpError::Address(SocksError::AddressType(2)),
            ),
            (
                vec![0, 0, 0, 0, 1, 2, 3, 4, 0, 7],
                UdpError::Address(SocksError::AddressType(0)),
            ),
            (
                vec![0, 0, 0, 3, 0, 0, 7],
                UdpError::Address(SocksError::EmptyDomain),
            ),
            (
                vec![0, 0, 0, 3, 2, b'a', 0, 0, 7],
                UdpError::Address(SocksError::BadDomain),
            ),
        ];
        for (bytes, want) in cases {
            assert_eq!(UdpPacket::parse(&bytes), Err(want), "{bytes:?}");
            fuzzing::udp_packet(&bytes);
        }
        // A reply too large for a UDP datagram once its header is added is not encoded.
        let big = vec![0u8; MAX_UDP_PAYLOAD - 10];
        let p = UdpPacket {
            target: v4([1, 2, 3, 4], 5),
            data: &big,
        };
        assert_eq!(p.encode().map(|e| e.len()), Some(MAX_UDP_PAYLOAD));
        let bigger = vec![0u8; MAX_UDP_PAYLOAD - 21];
        let p = UdpPacket {
            target: Target {
                host: Host::Ip(IpAddr::V6(v6)),
                port: 5,
            },
            data: &bigger,
        };
        assert_eq!(p.encode(), None);
    }

    #[test]
    fn username_password_is_checked() {
        let users = Users::parse("# users\nalice:secret\n\nbob:b:c\n").unwrap();
        assert!(users.admits(b"bob", b"b:c"));
        assert!(!users.admits(b"alice", b"secre"));
        // The digest binds the split between name and password.
        assert!(!users.admits(b"alic", b"esecret"));
        let auth = |u: &[u8], p: &[u8]| {
            let mut v = vec![1, u.len() as u8];
            v.extend_from_slice(u);
            v.push(p.len() as u8);
            v.extend_from_slice(p);
            v
        };
        let mut input = vec![5, 2, 0, 2];
        input.extend(auth(b"alice", b"secret"));
        input.extend([5, 1, 0, 1, 198, 18, 3, 2, 0x1f, 0x40]);
        let mut h = Handshake::new(Some(users.clone()));
        let p = bytewise(&mut h, &input).unwrap();
        assert_eq!(p.send, vec![5, 2, 1, 0]);
        assert_eq!(p.request, Some(v4([198, 18, 3, 2], 8000)));
        assert_eq!(h.user(), "alice");
        // Wrong password: status 1, no request read.
        let mut input = vec![5, 1, 2];
        input.extend(auth(b"alice", b"wrong"));
        input.extend([5, 1, 0, 1, 198, 18, 3, 2, 0, 80]);
        let mut h = Handshake::new(Some(users.clone()));
        let e = h.feed(&input).unwrap_err();
        assert_eq!(e, SocksError::AuthFailed);
        assert_eq!(e.reply(), Some(vec![1, 1]));
        let e = Handshake::new(Some(users))
            .feed(&[5, 1, 2, 9, 1, b'a', 1, b'b'])
            .unwrap_err();
        assert_eq!(e, SocksError::AuthVersion(9));
        assert!(Users::parse("").is_err());
        assert!(Users::parse("nocolon").is_err());
        assert!(Users::parse(":pw").is_err());
        assert!(!format!("{:?}", Users::parse("a:topsecret").unwrap()).contains("topsecret"));
    }

    #[test]
    fn replies_encode_their_bound_address() {
        assert_eq!(
            reply(Rep::NotAllowed, None),
            vec![5, 2, 0, 1, 0, 0, 0, 0, 0, 0]
        );
        let r = reply(Rep::Succeeded, Some("[2001:db8::2]:1080".parse().unwrap()));
        assert_eq!(r.len(), 4 + 16 + 2);
        assert_eq!(r[3], ATYP_IPV6);
        assert_eq!(Rep::from_u8(5), Some(Rep::ConnectionRefused));
        assert_eq!(Rep::from_u8(9), None);
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(Rep::of_connect_error(&refused), Rep::ConnectionRefused);
        let unreach = std::io::Error::from_raw_os_error(libc::EHOSTUNREACH);
        assert_eq!(Rep::of_connect_error(&unreach), Rep::HostUnreachable);
        // No source address of the destination's family (IPv6 off on the server).
        let noaddr = std::io::Error::from_raw_os_error(libc::EADDRNOTAVAIL);
        assert_eq!(Rep::of_connect_error(&noaddr), Rep::NetworkUnreachable);
    }

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn allow_rules_match_cidr_ports_and_ipv6() {
        let r: AllowRule = "198.18.0.0/15:80-443".parse().unwrap();
        assert!(r.permits(sa("198.18.3.2:80")));
        assert!(r.permits(sa("198.19.255.255:443")));
        assert!(!r.permits(sa("198.20.0.1:80")));
        assert!(!r.permits(sa("198.18.3.2:79")));
        assert!(!r.permits(sa("198.18.3.2:444")));
        // An IPv4-mapped IPv6 address is the IPv4 address.
        assert!(r.permits(sa("[::ffff:198.18.3.2]:100")));
        // The network is masked: host bits in the rule do not matter.
        let r: AllowRule = "198.18.3.77/24".parse().unwrap();
        assert_eq!(r.net, "198.18.3.0".parse::<IpAddr>().unwrap());
        assert!(r.permits(sa("198.18.3.200:1")) && r.permits(sa("198.18.3.1:65535")));
        // One address, one port.
        let r: AllowRule = "198.18.3.2:8000".parse().unwrap();
        assert!(r.permits(sa("198.18.3.2:8000")));
        assert!(!r.permits(sa("198.18.3.2:8001")) && !r.permits(sa("198.18.3.3:8000")));
        // IPv6: bare (every port) and bracketed with ports.
        let r: AllowRule = "2001:db8::/32".parse().unwrap();
        assert!(r.permits(sa("[2001:db8:ffff::1]:22")));
        assert!(!r.permits(sa("[2001:db9::1]:22")));
        assert!(!r.permits(sa("198.18.3.2:22")));
        let r: AllowRule = "[2001:db8::/48]:443".parse().unwrap();
        assert!(r.permits(sa("[2001:db8:0:1::1]:443")));
        assert!(!r.permits(sa("[2001:db8:1::1]:443")));
        assert!(!r.permits(sa("[2001:db8::1]:80")));
        // 0/0 is everything of one family only.
        let r: AllowRule = "0.0.0.0/0".parse().unwrap();
        assert!(r.permits(sa("1.2.3.4:1")) && !r.permits(sa("[::1]:1")));
        for bad in [
            "198.18.0.0/33",
            "198.18.0.0/15:443-80",
            "198.18.0.0:99999",
            "host.example:80",
            "[2001:db8::/32]443",
            "2001:db8::/129",
            "",
        ] {
            assert!(bad.parse::<AllowRule>().is_err(), "{bad}");
        }
        // A list permits what any rule does; the empty list nothing.
        let list = AllowList(vec![
            "198.18.3.2:8000".parse().unwrap(),
            "198.18.4.0/24".parse().unwrap(),
        ]);
        let resolved = [
            sa("198.18.9.9:8000"),
            sa("198.18.3.2:8000"),
            sa("198.18.4.4:1"),
        ];
        assert_eq!(list.filter(&resolved), resolved[1..].to_vec());
        assert!(AllowList::default().filter(&resolved).is_empty());
    }

    proptest! {
        #[test]
        fn fuzz_body_on_random_input(data in proptest::collection::vec(any::<u8>(), 0..600)) {
            fuzzing::handshake(&data);
        }

        #[test]
        fn fuzz_body_on_near_valid_input(
            methods in proptest::collection::vec(any::<u8>(), 0..4),
            atyp in prop_oneof![Just(1u8), Just(3u8), Just(4u8), any::<u8>()],
            tail in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            let mut data = vec![5, methods.len() as u8];
            data.extend_from_slice(&methods);
            data.extend_from_slice(&[5, 1, 0, atyp]);
            data.extend_from_slice(&tail);
            fuzzing::handshake(&data);
        }

        #[test]
        fn udp_fuzz_body_on_random_and_near_valid_input(
            data in proptest::collection::vec(any::<u8>(), 0..300),
            atyp in prop_oneof![Just(1u8), Just(3u8), Just(4u8), any::<u8>()],
            frag in prop_oneof![Just(0u8), any::<u8>()],
        ) {
            fuzzing::udp_packet(&data);
            let mut near = vec![0, 0, frag, atyp];
            near.extend_from_slice(&data);
            fuzzing::udp_packet(&near);
        }

        #[test]
        fn udp_packets_roundtrip(a in any::<[u8; 16]>(), port in any::<u16>(),
                                 name in "[a-z0-9.-]{1,255}",
                                 data in proptest::collection::vec(any::<u8>(), 0..1500)) {
            for host in [
                Host::Ip(IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3]))),
                Host::Ip(IpAddr::V6(Ipv6Addr::from(a))),
                Host::Domain(name.clone()),
            ] {
                let p = UdpPacket { target: Target { host, port }, data: &data };
                let enc = p.encode().unwrap();
                prop_assert_eq!(UdpPacket::parse(&enc), Ok(p.clone()));
                fuzzing::udp_packet(&enc);
            }
        }

        #[test]
        fn targets_roundtrip(a in any::<[u8; 16]>(), port in any::<u16>(),
                             name in "[a-z0-9.-]{1,255}") {
            for host in [
                Host::Ip(IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3]))),
                Host::Ip(IpAddr::V6(Ipv6Addr::from(a))),
                Host::Domain(name.clone()),
            ] {
                let t = Target { host, port };
                let mut enc = Vec::new();
                t.encode_into(&mut enc);
                for cut in 0..enc.len() {
                    prop_assert_eq!(Target::decode(&enc[..cut]), Ok(None));
                }
                prop_assert_eq!(Target::decode(&enc), Ok(Some((t, enc.len()))));
            }
        }
    }
}
