//! `nena serve`'s limits and access control over the in-memory network (`testing::net`):
//! the production `send`/`get`/`perf` clients against `serve_on` with the settings its flags
//! make (`FileServerConfig::max_file_size` for `--max-file-size`, `Limits::access` for
//! `--read-only`, `Limits::token` for `--token-file`). An upload announcing more than the
//! limit or the free space is refused before any data; read-only refuses uploads; a missing
//! or wrong token is "access denied", the right one is served.
//!
//! Replaces the lab tests `transfer_limits.rs::uploads_too_large_for_the_limit_or_the_disk_are_refused_before_any_data`
//! and `read_only_and_the_access_token`; the flags' wiring into these settings stays in the
//! lab: `crates/cli/tests/cli/transfer_limits.rs::serve_flags_set_the_limits`.

use nena_proto::Mode;
use nena_transport::app::file_client::{get, perf, send, PerfParams};
use nena_transport::app::file_server::serve_on;
use nena_transport::app::files::{free_space, FileServerConfig};
use nena_transport::app::names::FileName;
use nena_transport::ops::access::{Access, Limits};
use nena_transport::testing::net::{serve_options, MemoryNet};
use nena_transport::testing::pair::Dir;
use nena_transport::wire::AccessToken;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// `nena serve` on the memory network at `addr`, storing into `files.dir`, with `limits`.
fn serve(
    net: &Arc<MemoryNet>,
    addr: SocketAddr,
    files: FileServerConfig,
    limits: Limits,
) -> tokio::task::JoinHandle<()> {
    let listener = net.listen(addr);
    let mut opts = serve_options(addr, files);
    opts.session.limits = limits;
    tokio::spawn(async move { serve_on(listener, opts).await.unwrap() })
}

fn pattern(n: usize, seed: u32) -> Vec<u8> {
    (0..n as u32)
        .map(|i| (i.wrapping_add(seed).wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

fn no_part_files(dir: &Path) {
    let names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.ends_with(".part")),
        "partial uploads left behind: {names:?}"
    );
}

/// An upload of a sparse 2^40-byte file is refused for the free space when no limit is set
/// ("not enough space", the size announced in the message); with a limit of 1 MiB, 1 MiB is
/// stored and 1 MiB + 1 byte (and 1 TiB) is "file too large". Each refusal comes before
/// the data: the client's direction carried less than the data it would have sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_too_large_for_the_limit_or_the_disk_are_refused_before_any_data() {
    let work = tempfile::tempdir().unwrap();
    let srv = work.path().join("srv");
    std::fs::create_dir(&srv).unwrap();
    let huge = work.path().join("huge");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(1 << 40)
        .unwrap();
    let free = free_space(&srv).unwrap();
    assert!(
        free < 1 << 40,
        "this test needs a scratch directory with less than 1 TiB free ({free} B)"
    );
    let net = MemoryNet::new();

    // No limit given: the free-space check refuses it.
    let a: SocketAddr = "198.18.3.2:7400".parse().unwrap();
    let _s = serve(&net, a, FileServerConfig::new(&srv), Limits::default());
    let opts = net.options(a, vec![Mode::Aead]);
    let e = send(&opts, &huge, &FileName::new("huge").unwrap(), &())
        .await
        .unwrap_err();
    let e = format!("{e:#}");
    assert!(e.contains("not enough space"), "{e}");
    assert!(e.contains("1.0 TiB announced"), "{e}");
    let tap = net.taps().pop().unwrap();
    assert!(
        tap.len(Dir::ToServer) < 1 << 20,
        "data was sent: {}",
        tap.len(Dir::ToServer)
    );
    no_part_files(&srv);

    // A limit of 1 MiB: 1 MiB is taken, 1 MiB + 1 byte is not.
    let b: SocketAddr = "198.18.3.2:7401".parse().unwrap();
    let files = FileServerConfig {
        max_file_size: Some(1 << 20),
        ..FileServerConfig::new(&srv)
    };
    let _s = serve(&net, b, files, Limits::default());
    let opts = net.options(b, vec![Mode::Aead]);
    let big = work.path().join("big");
    std::fs::write(&big, pattern((1 << 20) + 1, 4)).unwrap();
    let e = send(&opts, &big, &FileName::new("big").unwrap(), &())
        .await
        .unwrap_err();
    let e = format!("{e:#}");
    assert!(
        e.contains("file too large") && e.contains("at most 1.0 MiB"),
        "{e}"
    );
    let tap = net.taps().pop().unwrap();
    assert!(
        tap.len(Dir::ToServer) < 1 << 20,
        "data was sent: {}",
        tap.len(Dir::ToServer)
    );
    let e = send(&opts, &huge, &FileName::new("huge").unwrap(), &())
        .await
        .unwrap_err();
    assert!(format!("{e:#}").contains("file too large"), "{e:#}");
    let ok = work.path().join("ok");
    std::fs::write(&ok, pattern(1 << 20, 3)).unwrap();
    let r = send(&opts, &ok, &FileName::new("ok").unwrap(), &())
        .await
        .unwrap();
    assert_eq!(r.bytes, 1 << 20);
    assert_eq!(std::fs::read(srv.join("ok")).unwrap(), pattern(1 << 20, 3));
    assert!(!srv.join("big").exists() && !srv.join("huge").exists());
    no_part_files(&srv);
}

/// Read-only: a download is served, an upload refused ("read-only") and nothing stored.
/// With a token: a send, a get and a perf test without it or with a wrong one are all
/// "access denied" (nothing stored); the right one is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_and_the_access_token() {
    let work = tempfile::tempdir().unwrap();
    let srv = work.path().join("srv");
    std::fs::create_dir(&srv).unwrap();
    std::fs::write(srv.join("there"), b"served content").unwrap();
    let f = work.path().join("f");
    std::fs::write(&f, b"uploaded content").unwrap();
    let (f_name, there) = (FileName::new("f").unwrap(), FileName::new("there").unwrap());
    let net = MemoryNet::new();

    let a: SocketAddr = "198.18.3.2:7410".parse().unwrap();
    let read_only = Limits {
        access: Access::ReadOnly,
        ..Limits::default()
    };
    let _s = serve(&net, a, FileServerConfig::new(&srv), read_only);
    let opts = net.options(a, vec![Mode::Aead]);
    let e = send(&opts, &f, &f_name, &()).await.unwrap_err();
    assert!(format!("{e:#}").contains("read-only"), "{e:#}");
    assert!(!srv.join("f").exists());
    let out = work.path().join("there");
    get(&opts, &there, &out, false, &()).await.unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), b"served content");

    let right = AccessToken::new(b"secret token for the lab".to_vec()).unwrap();
    let wrong = AccessToken::new(b"secret token for the lac".to_vec()).unwrap();
    let b: SocketAddr = "198.18.3.2:7411".parse().unwrap();
    let with_token = Limits {
        token: Some(right.clone()),
        ..Limits::default()
    };
    let _s = serve(&net, b, FileServerConfig::new(&srv), with_token);
    let one_mib = PerfParams {
        up: true,
        down: false,
        bytes: Some(1 << 20),
        time: Duration::ZERO,
        interval: None,
        omit: None,
    };
    for token in [None, Some(wrong)] {
        let opts = nena_transport::conn::ClientOptions {
            token: token.clone(),
            ..net.options(b, vec![Mode::Aead])
        };
        let what = if token.is_some() { "wrong" } else { "none" };
        let e = send(&opts, &f, &f_name, &()).await.unwrap_err();
        assert!(format!("{e:#}").contains("access denied"), "{what}: {e:#}");
        let e = get(&opts, &there, &out, true, &()).await.unwrap_err();
        assert!(format!("{e:#}").contains("access denied"), "{what}: {e:#}");
        let e = perf(&opts, one_mib, |_| {}).await.unwrap_err();
        assert!(format!("{e:#}").contains("access denied"), "{what}: {e:#}");
    }
    assert!(!srv.join("f").exists());
    assert_eq!(std::fs::read(&out).unwrap(), b"served content", "unchanged");
    let opts = nena_transport::conn::ClientOptions {
        token: Some(right),
        ..net.options(b, vec![Mode::Aead])
    };
    send(&opts, &f, &f_name, &()).await.unwrap();
    assert_eq!(std::fs::read(srv.join("f")).unwrap(), b"uploaded content");
    let r = perf(&opts, one_mib, |_| {}).await.unwrap();
    assert!(r.verified && r.sent == 1 << 20);
}
