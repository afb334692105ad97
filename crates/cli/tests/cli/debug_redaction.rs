//! No `Debug` rendering of a key-holding type outside nena-proto shows key bytes (issue
//! 19), and the default build has no option that writes keys to disk. Each type is built
//! from the known bytes `TEST_KEY_BYTES`, formatted with `{:?}` and `{:#?}`, and checked
//! for hex and decimal renderings of them (`nena_testkit::assert_debug_hides`).
//!
//! Covered here: nena-bpf's `FlowRecord` (both MPTCP keys as the kato-mpc programs
//! record them), `KeyInfo` and `Event::Connect` (keys the policy programs report); the
//! transport's `MpcSeen`, `AccessToken` and `ClientOptions` (which holds the token). The
//! proto types (traffic secrets, ciphers, sessions, handshakes, kato-mpc keys) are
//! covered in crates/proto/src/redaction_tests.rs; `nena codec`'s arguments in
//! crates/cli/src/cmd/codec.rs. nena-bpf's `Flow` (the map value) has no `Debug`.

use nena_testkit::{assert_debug_hides, TEST_KEY_BYTES as K};
use std::fmt::Debug;

fn hides(v: &impl Debug, keys: &[&[u8]], what: &str) {
    for shown in [format!("{v:?}"), format!("{v:#?}")] {
        for k in keys {
            assert_debug_hides(&shown, k, what);
        }
    }
}

fn mptcp_keys() -> ([u8; 8], [u8; 8]) {
    (K[..8].try_into().unwrap(), K[8..16].try_into().unwrap())
}

#[test]
fn policy_records_and_events_hide_mptcp_keys() {
    let (local, remote) = mptcp_keys();
    let r = nena_bpf::mpc::FlowRecord {
        requested: true,
        consented: true,
        confirmed: true,
        mark_failed: false,
        mptcp_syn: true,
        local_key: Some(local),
        remote_key: Some(remote),
    };
    hides(&r, &[&local, &remote], "FlowRecord");
    assert!(
        format!("{r:?}").contains("local_key: Some([redacted])"),
        "{r:?}"
    );

    let info = |k: [u8; 8]| nena_bpf::chains::events::KeyInfo::new(u64::from_be_bytes(k));
    hides(&info(local), &[&local], "KeyInfo");
    let e = nena_bpf::chains::events::Event::Connect {
        src: "198.18.1.2:40000".parse().unwrap(),
        dst: "198.18.3.2:7000".parse().unwrap(),
        hook: nena_bpf::chains::spec::Hook::Ingress,
        ifindex: 2,
        stage: nena_bpf::chains::events::Stage::Ack,
        version: 1,
        flags: 0,
        sender: Some(info(local)),
        receiver: Some(info(remote)),
    };
    hides(&e, &[&local, &remote], "Event::Connect");
    // The JSON event stream still reports the keys: that is the tool's output, what an
    // observer of the path reads in clear.
    let json = serde_json::to_string(&e).unwrap();
    assert!(json.contains(&nena_testkit::hex(&local)), "{json}");
}

#[test]
fn transport_types_hide_keys_and_tokens() {
    let (local, remote) = mptcp_keys();
    let seen = nena_transport::conn::MpcSeen {
        requested: true,
        consented: true,
        confirmed: true,
        local_key: Some(local),
        remote_key: Some(remote),
    };
    hides(&seen, &[&local, &remote], "MpcSeen");
    let token = nena_transport::wire::AccessToken::new(K.to_vec()).unwrap();
    hides(&token, &[&K], "AccessToken");
    let mut opts = nena_transport::conn::ClientOptions::new(
        "198.18.3.2:7000".parse().unwrap(),
        nena_mptcp::PathPolicy::default(),
        vec![nena_proto::Mode::Aead],
    );
    opts.token = Some(token);
    hides(&opts, &[&K], "ClientOptions");
}

/// The default build has no `--debug-dump-first-flight` (it would write r_c and the kato
/// keys to disk): clap refuses it as an unknown argument, before any connection.
#[cfg(not(feature = "debug-dump"))]
#[test]
fn default_build_has_no_first_flight_dump() {
    for cmd in ["send", "get", "perf"] {
        let mut args = match cmd {
            "send" => vec![cmd, "f", "--to"],
            "get" => vec![cmd, "f", "--from"],
            _ => vec![cmd, "--to"],
        };
        args.extend_from_slice(&[
            "198.18.3.2:7000",
            "--trusted",
            "198.18.1.2",
            "--debug-dump-first-flight",
            "/tmp/nena-never-written.hex",
        ]);
        let out = std::process::Command::new(crate::harness::NENA)
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{cmd}: {err}");
        assert!(
            err.contains("unexpected argument '--debug-dump-first-flight'"),
            "{cmd}: {err}"
        );
    }
}
