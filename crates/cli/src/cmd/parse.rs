//! The value parsers the commands share: servers and addresses, modes and ciphers, byte
//! counts and seconds.
use nena_proto::{Mode, Suite};
use nena_transport::resolve::ServerAddr;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

/// A server named by a client (`--to`, `--from`, `--via`): `IP:PORT` or `HOST:PORT`. A
/// name is resolved later, by `ClientCommon::options`, only through a trusted interface.
pub(crate) fn parse_server(s: &str) -> Result<ServerAddr, String> {
    s.parse()
}

/// A local socket address (`--listen`, `--metrics`) or a server's own target: `IP:PORT`
/// or `HOST:PORT` (resolved once, by the system's resolver: no untrusted path is involved
/// on the serving side).
pub(crate) fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    s.to_socket_addrs()
        .map_err(|e| format!("`{s}` is not ADDR:PORT ({e})"))?
        .next()
        .ok_or_else(|| format!("`{s}` resolves to no address"))
}

/// Modes: `aead`, `stream`, `kato`, `plain`, or a comma-separated preference list.
pub(crate) fn parse_modes(s: &str) -> Result<Vec<Mode>, String> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let m: Mode = part
            .parse()
            .map_err(|e: nena_proto::ParseModeError| e.to_string())?;
        if !out.contains(&m) {
            out.push(m);
        }
    }
    Ok(out)
}

/// A cipher suite: `aes-128` (or `aes`) or `chacha20` (or `chacha`).
pub(crate) fn parse_suite(s: &str) -> Result<Suite, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "aes-128" | "aes128" | "aes" => Ok(Suite::Aes128),
        "chacha20" | "chacha" => Ok(Suite::ChaCha20),
        _ => Err(format!("unknown cipher `{s}` (aes-128 or chacha20)")),
    }
}

/// A byte count (`64K`, `100M`, `1G`: binary units): the one parser of sizes, shared with
/// scenario files.
pub(crate) use nena_transport::text::units::parse_bytes;

/// Seconds, fractional allowed, > 0.
pub(crate) fn parse_secs(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !(v > 0.0 && v < 1e7) {
        return Err(format!("`{s}`: seconds must be > 0"));
    }
    Ok(Duration::from_secs_f64(v))
}

/// Seconds of a grace period: 0 or more.
pub(crate) fn parse_grace(s: &str) -> Result<Duration, String> {
    match s.trim().parse::<f64>() {
        Ok(0.0) => Ok(Duration::ZERO),
        _ => parse_secs(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_suites_and_seconds() {
        assert_eq!(parse_modes("kato,plain"), Ok(vec![Mode::Kato, Mode::Plain]));
        assert_eq!(
            parse_modes("aead,stream,aead"),
            Ok(vec![Mode::Aead, Mode::Stream])
        );
        assert_eq!(parse_suite("ChaCha20"), Ok(Suite::ChaCha20));
        assert!(parse_suite("des").is_err());
        assert!(parse_modes("aes").is_err());
        assert!(parse_secs("0").is_err());
        assert_eq!(parse_secs("1.5"), Ok(Duration::from_millis(1500)));
    }
}
