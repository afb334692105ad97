//! A server as a client names it (`--to`, `--from`, `--via`): an address literal or a host
//! name, and a port. Parsing only: [`super::resolve`] turns a name into an address.

use crate::dns;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

/// A server as a user names it: an address literal or a host name, and a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerAddr {
    pub host: Host,
    pub port: u16,
}

/// The host part of a [`ServerAddr`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    Ip(IpAddr),
    /// A DNS name (checked by [`dns::name`]), as given.
    Name(String),
}

impl FromStr for ServerAddr {
    type Err = String;

    /// `198.18.3.2:7000`, `[2001:2::1]:7000`, `srv.example:7000`.
    fn from_str(s: &str) -> Result<Self, String> {
        if let Ok(a) = s.parse::<SocketAddr>() {
            return Ok(ServerAddr {
                host: Host::Ip(a.ip()),
                port: a.port(),
            });
        }
        let Some((host, port)) = s.rsplit_once(':') else {
            return Err(format!("`{s}` is not HOST:PORT (no port)"));
        };
        let port: u16 = port
            .parse()
            .map_err(|_| format!("`{s}`: `{port}` is not a port number"))?;
        if host.contains(':') || host.starts_with('[') {
            return Err(format!(
                "`{s}` is not HOST:PORT (an IPv6 address goes in brackets: [ADDR]:PORT)"
            ));
        }
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(ServerAddr {
                host: Host::Ip(ip),
                port,
            });
        }
        let valid = !host.is_empty()
            && host.len() <= 253
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
            && !host.starts_with('.')
            && !host.contains("..");
        if !valid {
            return Err(format!("`{s}`: `{host}` is not a host name or an address"));
        }
        dns::name(host)?;
        Ok(ServerAddr {
            host: Host::Name(host.trim_end_matches('.').to_string()),
            port,
        })
    }
}

impl fmt::Display for ServerAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            Host::Ip(ip) => write!(f, "{}", SocketAddr::new(*ip, self.port)),
            Host::Name(n) => write!(f, "{n}:{}", self.port),
        }
    }
}

impl From<SocketAddr> for ServerAddr {
    fn from(a: SocketAddr) -> Self {
        ServerAddr {
            host: Host::Ip(a.ip()),
            port: a.port(),
        }
    }
}
