//! A `stream` session past its first 2^36-byte key epoch (root, lab): `nena perf --mode
//! stream --bytes 70G` client to server and `--reverse`, over the bare veth links (no rate
//! limit). Before issue 19's fix AES-128-CTR refused the last block of the 64 GiB epoch and
//! the sender panicked with "keystream within its epoch: StreamCipherError" after
//! 68,718,166,020 bytes; now both directions carry every byte across the key update.
//! The keystream's boundary itself is unit-tested in crates/proto/src/cipher_limits_tests.rs.

use crate::harness::*;
use std::time::Instant;

/// 70 GiB: past the 64 GiB (2^36) epoch end of both suites' keystreams.
const BYTES: u64 = 70 << 30;

fn perf_70g(reverse: bool) {
    let lab = lab();
    let srv = TempDir::new("stream64g");
    let _s = serve(&lab, 7640, srv.path(), &["--mode", "stream"]);
    let to = server(&lab, 7640);
    let mut args = vec![
        "perf",
        "--to",
        &to,
        "--mode",
        "stream",
        "--cipher",
        "aes-128",
        "--bytes",
        "70G",
        "--interval",
        "0",
        "--timeout",
        "30",
        "--json",
    ];
    if reverse {
        args.push("--reverse");
    }
    args.extend_from_slice(&PATHS);
    let t = Instant::now();
    let r = client_json(&lab, &args);
    let secs = t.elapsed().as_secs_f64();
    eprintln!(
        "70 GiB stream {}: {secs:.1} s ({:.2} GB/s)",
        if reverse {
            "server to client"
        } else {
            "client to server"
        },
        BYTES as f64 / secs / 1e9
    );
    assert_eq!(r["mode"], "stream", "{r}");
    let (moved, idle) = if reverse {
        (&r["received"], &r["sent"])
    } else {
        (&r["sent"], &r["received"])
    };
    assert_eq!(moved.as_u64(), Some(BYTES), "{r}");
    assert_eq!(idle.as_u64(), Some(0), "{r}");
    // Every byte matched perf's pattern and the peer confirmed the count.
    assert_eq!(r["verified"], true, "{r}");
    // The moving direction crossed into its second key epoch (64 GiB + 6 GiB).
    let epochs = &r["key_epochs"][if reverse { "received" } else { "sent" }];
    assert_eq!(epochs.as_u64(), Some(2), "{r}");
}

#[test]
fn stream_past_64_gib_client_to_server() {
    perf_70g(false);
}

#[test]
fn stream_past_64_gib_server_to_client() {
    perf_70g(true);
}
