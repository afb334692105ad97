//! No `Debug` rendering of a key-holding type of this crate shows key bytes (issue 19):
//! every such type, built from the known bytes [`TEST_KEY_BYTES`] (or from secrets whose
//! bytes the test reads back), formatted with `{:?}` and `{:#?}`, and checked with
//! [`assert_debug_hides`] for hex and decimal renderings of those bytes.
//!
//! The key-holding types here: `TrafficSecret`, `Schedule`, `Keystream`, `RecordCipher`,
//! `RecordSealer`, `RecordOpener`, `Session`, `Protector`, `Unprotector` (kato, stream and
//! aead keys), `ClientHandshake` (X25519 secret, r_c, kato keys), `ServerHandshake`
//! (X25519 secret), `MpcKeys`, `MpcObservation`, `MpcDecision`. Types that hold keys but
//! have no `Debug` at all (so nothing to render): `session::Keys`, `client::KeyShare`,
//! `server::CryptoOffer`.

use crate::cipher::{Keystream, RecordCipher, Suite};
use crate::keys::{Schedule, TrafficSecret};
use crate::mpc::{self, MpcKeys, MpcObservation};
use crate::record::{RecordOpener, RecordSealer};
use crate::session::{Keys, Role, Session};
use crate::{ClientConfig, ClientHandshake, Mode, ServerConfig, ServerHandshake, ENTROPY_LEN};
use nena_testkit::{assert_debug_hides, TEST_KEY_BYTES as K};
use std::fmt::Debug;
use zeroize::Zeroizing;

/// `{:?}` and `{:#?}` of `v` show none of `keys`.
fn hides(v: &impl Debug, keys: &[&[u8]], what: &str) {
    for shown in [format!("{v:?}"), format!("{v:#?}")] {
        for k in keys {
            assert_debug_hides(&shown, k, what);
        }
    }
}

fn secret_a() -> TrafficSecret {
    TrafficSecret(Zeroizing::new(K))
}

fn secret_b() -> TrafficSecret {
    let mut b = K;
    b.reverse();
    TrafficSecret(Zeroizing::new(b))
}

/// Everything a secret leads to: itself, its next epoch's secret, and both suites' keys
/// and IVs.
fn derived(s: &TrafficSecret) -> Vec<Vec<u8>> {
    let mut v = vec![s.expose().to_vec(), s.next().expose().to_vec()];
    for suite in [Suite::Aes128, Suite::ChaCha20] {
        let (key, iv) = s.key_iv(suite.key_len());
        v.push(key.to_vec());
        v.push(iv.to_vec());
    }
    v
}

fn refs(v: &[Vec<u8>]) -> Vec<&[u8]> {
    v.iter().map(|x| &x[..]).collect()
}

#[test]
fn secrets_schedule_and_ciphers_hide_their_keys() {
    let a = derived(&secret_a());
    hides(&secret_a(), &refs(&a), "TrafficSecret");
    let sched = Schedule::new(
        &crate::keys::Secrets {
            kem: &K,
            dh: &K,
            r_c: &K,
        },
        b"hello",
        b"accept",
    );
    let (c2s, s2c) = sched.traffic();
    let mut keys = derived(&c2s);
    keys.extend(derived(&s2c));
    keys.push(K.to_vec());
    hides(&sched, &refs(&keys), "Schedule");
    for suite in [Suite::Aes128, Suite::ChaCha20] {
        hides(
            &Keystream::new(suite, secret_a(), 20),
            &refs(&a),
            "Keystream",
        );
        hides(
            &RecordCipher::new(suite, secret_a(), 20),
            &refs(&a),
            "RecordCipher",
        );
        hides(
            &RecordSealer::new(RecordCipher::new(suite, secret_a(), 20)),
            &refs(&a),
            "RecordSealer",
        );
        hides(
            &RecordOpener::new(RecordCipher::new(suite, secret_a(), 20)),
            &refs(&a),
            "RecordOpener",
        );
    }
}

#[test]
fn sessions_hide_their_keys() {
    let mut all = derived(&secret_a());
    all.extend(derived(&secret_b()));
    all.push(K.to_vec());
    let kato = |role| {
        let mut c2s = [0u8; 8];
        let mut s2c = [0u8; 8];
        c2s.copy_from_slice(&K[..8]);
        s2c.copy_from_slice(&K[8..16]);
        Session::new(role, Keys::Kato { c2s, s2c })
    };
    let crypto = |role, mode, suite| {
        let mut confirm = [0u8; 32];
        confirm.copy_from_slice(&K);
        Session::new(
            role,
            Keys::Crypto {
                mode,
                suite,
                epoch_log2: 20,
                c2s: secret_a(),
                s2c: secret_b(),
                expect_confirm: Some(confirm),
            },
        )
    };
    let mut sessions = Vec::new();
    for role in [Role::Client, Role::Server] {
        sessions.push(kato(role));
        for mode in [Mode::Stream, Mode::Aead] {
            for suite in [Suite::Aes128, Suite::ChaCha20] {
                sessions.push(crypto(role, mode, suite));
            }
        }
    }
    for mut s in sessions {
        hides(&s, &refs(&all), "Session");
        hides(s.protector(), &refs(&all), "Protector");
        hides(s.unprotector(), &refs(&all), "Unprotector");
        let (tx, rx) = s.split();
        hides(&tx, &refs(&all), "Protector");
        hides(&rx, &refs(&all), "Unprotector");
    }
}

#[test]
fn handshakes_hide_their_secrets() {
    // Entropy: kato keys (16), the X25519 secret (32), r_c (32), all from the known bytes.
    let mut entropy = [0u8; ENTROPY_LEN];
    for (i, b) in entropy.iter_mut().enumerate() {
        *b = K[i % K.len()];
    }
    let kato_keys = &entropy[..16];
    let x_secret = &entropy[16..48];
    let r_c = &entropy[48..80];
    for offer in [vec![Mode::Aead], vec![Mode::Stream], vec![Mode::Kato]] {
        let c = ClientHandshake::new(&ClientConfig::offering(&offer), entropy).unwrap();
        hides(&c, &[kato_keys, x_secret, r_c], "ClientHandshake");
    }
    let s = ServerHandshake::new(
        &ServerConfig::default().with_key(crate::test_server_key()),
        [0x5c; crate::SERVER_ENTROPY_LEN],
    );
    hides(&s, &[&K], "ServerHandshake");
}

#[test]
fn mpc_types_hide_the_mptcp_keys() {
    let local: [u8; 8] = K[..8].try_into().unwrap();
    let remote: [u8; 8] = K[8..16].try_into().unwrap();
    let keys = MpcKeys::derive(Role::Client, &local, &remote);
    hides(&keys, &[&local, &remote], "MpcKeys");
    let o = MpcObservation {
        fallback: false,
        seen: true,
        unrecorded: false,
        requested: true,
        consented: true,
        confirmed: true,
        local_key: Some(local),
        remote_key: Some(remote),
        socket_token: Some(mpc::mptcp_token(&local)),
    };
    hides(&o, &[&local, &remote], "MpcObservation");
    // The tokens stand in for the keys, so a person can still match records.
    let shown = format!("{o:?}");
    assert!(
        shown.contains(&format!("{:#010x}", mpc::mptcp_token(&local))),
        "{shown}"
    );
    let d = mpc::decide(Role::Client, &o).unwrap();
    assert!(matches!(d, crate::MpcDecision::Scramble(_)), "{d:?}");
    hides(&d, &[&local, &remote], "MpcDecision");
}
