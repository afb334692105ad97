//! A whole handshake in memory, both sides at once: for tests, benchmarks and tools that
//! need a session pair without a network (the real transport drives each side over its
//! socket instead).

use crate::{
    ClientConfig, ClientHandshake, HandshakeError, Mode, Progress, ServerConfig, ServerHandshake,
    ServerKey, Session, ENTROPY_LEN, SERVER_ENTROPY_LEN,
};

/// The result of [`exchange`]: both sessions and the messages that made them.
#[derive(Debug)]
pub struct Exchange {
    pub client: Session,
    pub server: Session,
    /// The client's hello.
    pub hello: Vec<u8>,
    /// The server's accept.
    pub reply: Vec<u8>,
    /// The client's key confirmation (empty unless the mode is cryptographic): the server's
    /// session reads it before any data.
    pub confirm: Vec<u8>,
}

/// Runs a handshake between a client with `cfg` and a server accepting `accept` with
/// [`test_server_key`], with the given entropies. Errors are the side's own (the server's `Rejected` as its error).
pub fn exchange(
    cfg: &ClientConfig,
    accept: &[Mode],
    client_entropy: [u8; ENTROPY_LEN],
    server_entropy: [u8; SERVER_ENTROPY_LEN],
) -> Result<Exchange, HandshakeError> {
    let mut c = ClientHandshake::new(cfg, client_entropy)?;
    let scfg = ServerConfig::accepting(accept).with_key(test_server_key());
    let mut s = ServerHandshake::new(&scfg, server_entropy);
    let hello = c.first_flight().to_vec();
    let (reply, server) = match s.read(&hello).map_err(|r| r.error)? {
        Progress::Done { value, .. } => value,
        Progress::NeedMore { .. } => return Err(HandshakeError::ClosedEarly { received: 0 }),
    };
    let (confirm, client) = match c.read(&reply)? {
        Progress::Done { value, .. } => value,
        Progress::NeedMore { .. } => return Err(c.eof()),
    };
    Ok(Exchange {
        client,
        server,
        hello,
        reply,
        confirm,
    })
}

/// The fixed server key of [`exchange`] (seed `0x5e` x 32): for tests and benchmarks only,
/// never for a real server.
pub fn test_server_key() -> ServerKey {
    ServerKey::from_seed(&[0x5e; 32]).expect("any 32 bytes are an Ed25519 seed")
}

/// [`exchange`] with fixed, distinct entropies and the client offering `mode` alone.
pub fn exchange_in(mode: Mode) -> Exchange {
    let ce: [u8; ENTROPY_LEN] = std::array::from_fn(|i| (i as u8).wrapping_mul(97) ^ 0x3c);
    exchange(
        &ClientConfig::offering(&[mode]),
        &[mode],
        ce,
        [0x5e; SERVER_ENTROPY_LEN],
    )
    .expect("a client offering one mode and a server accepting it agree")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_and_a_refusal() {
        for &m in Mode::ALL {
            let x = exchange_in(m);
            assert_eq!((x.client.mode(), x.server.mode()), (m, m));
            assert_eq!(x.confirm.is_empty(), !m.is_cryptographic());
        }
        let e = exchange(
            &ClientConfig::offering(&[Mode::Plain]),
            &[Mode::Aead],
            [1; ENTROPY_LEN],
            [2; SERVER_ENTROPY_LEN],
        );
        assert!(
            matches!(e, Err(HandshakeError::Config(_))),
            "constant entropy: {e:?}"
        );
        let e = exchange(
            &ClientConfig::offering(&[Mode::Plain]),
            &[Mode::Aead],
            std::array::from_fn(|i| i as u8),
            [2; SERVER_ENTROPY_LEN],
        );
        assert!(
            matches!(e, Err(HandshakeError::NoCommonMode { .. })),
            "{e:?}"
        );
    }
}
