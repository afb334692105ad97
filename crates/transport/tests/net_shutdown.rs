//! `nena serve` stopping in the middle of a transfer (issue 22, item 1), the production code
//! of both ends over the in-memory network (`testing::net`): `serve_on`'s accept loop ends
//! when its listener closes, as on SIGTERM, and then winds its sessions down as it does
//! after the signal (`--grace`, then the abort). Each transfer is held in the middle by its
//! connection's tap (`Tap::hold_after`), so that the server stops while it is under way.
//! With no grace an upload is told "server shutting down" at once and leaves no partial
//! file; with a grace it finishes and verifies; a download (aead) and a reverse perf test
//! are ended with the abort record, their clients saying why ("the peer aborted the
//! session: it is shutting down"), and the download leaves no partial file at the client.
//!
//! Moved here from the lab tests `transfer_failures.rs::sigterm_on_serve_tells_the_uploader_and_leaves_no_partial_file`
//! (its uploads) and `sigterm_on_serve_tells_the_downloader_and_the_perf_client_why`; the
//! signal itself stays in the lab (`sigterm_on_serve_with_every_slot_busy_still_stops`: the
//! process exits 0, a killed server's partial file is removed at the next start, the accept
//! loop hears the signal while every session slot is busy).

mod logs;

use nena_proto::Mode;
use nena_transport::app::file_client::{get, perf, send, PerfParams};
use nena_transport::app::file_server::{serve_on, ServeOptions};
use nena_transport::app::files::FileServerConfig;
use nena_transport::app::names::FileName;
use nena_transport::testing::net::{serve_options, MemoryNet};
use nena_transport::testing::pair::{Dir, Tap};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where a transfer is held: 2 MiB crossed (twice the pipe's room: the other end has read
/// at least 1 MiB of it by then).
const HELD_AT: u64 = 2 << 20;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// `nena serve --grace GRACE` on the memory network at `at`, storing into `dir`.
fn serve(
    net: &Arc<MemoryNet>,
    at: SocketAddr,
    dir: &Path,
    grace: Duration,
) -> tokio::task::JoinHandle<()> {
    let listener = net.listen(at);
    let opts = ServeOptions {
        grace,
        ..serve_options(at, FileServerConfig::new(dir))
    };
    tokio::spawn(async move { serve_on(listener, opts).await.unwrap() })
}

/// The tap of the next connection dialed, `dir` held once [`HELD_AT`] bytes crossed.
fn hold_next(net: &MemoryNet, dir: Dir) -> tokio::sync::oneshot::Receiver<Tap> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    net.on_next_dial(move |tap| {
        tap.hold_after(dir, HELD_AT);
        let _ = tx.send(tap.clone());
    });
    rx
}

/// Waits until the held transfer reached [`HELD_AT`] in `dir`, then closes the server's
/// listener (its "SIGTERM") and lets the transfer go on; returns when the server has ended.
async fn stop_in_the_middle(
    net: &MemoryNet,
    at: SocketAddr,
    tap: tokio::sync::oneshot::Receiver<Tap>,
    dir: Dir,
    server: tokio::task::JoinHandle<()>,
) {
    let tap = tap.await.expect("the transfer's connection");
    tokio::time::timeout(Duration::from_secs(10), tap.crossed_at_least(dir, HELD_AT))
        .await
        .expect("the transfer under way");
    net.close(at);
    tap.release(dir);
    tokio::time::timeout(Duration::from_secs(40), server)
        .await
        .expect("the server ends after its grace")
        .expect("the server's task");
}

fn pattern(n: usize, seed: u32) -> Vec<u8> {
    (0..n as u32)
        .map(|i| (i.wrapping_add(seed).wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

/// The `.nena-*.part` files in `dir`.
fn partial_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".part"))
        .collect()
}

/// With no grace (the default) an upload in progress is aborted at once: the client is told
/// "server shutting down" within seconds, the server ends and leaves no partial file. With
/// a grace the upload in progress completes and verifies before the server ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_server_tells_the_uploader_and_leaves_no_partial_file() {
    let work = tempfile::tempdir().unwrap();
    let store = work.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let data = pattern(8 << 20, 21);
    let big = work.path().join("big");
    std::fs::write(&big, &data).unwrap();
    let net = MemoryNet::new();

    let at = addr("198.18.3.2:7010");
    let server = serve(&net, at, &store, Duration::ZERO);
    let tap = hold_next(&net, Dir::ToServer);
    let opts = net.options(at, vec![Mode::Aead]);
    let (o, b) = (opts.clone(), big.clone());
    let upload =
        tokio::spawn(async move { send(&o, &b, &FileName::new("big").unwrap(), &()).await });
    stop_in_the_middle(&net, at, tap, Dir::ToServer, server).await;
    let t0 = Instant::now();
    let e = tokio::time::timeout(Duration::from_secs(10), upload)
        .await
        .expect("the uploader stops")
        .unwrap()
        .unwrap_err();
    let waited = t0.elapsed();
    assert!(format!("{e:#}").contains("server shutting down"), "{e:#}");
    assert!(
        waited < Duration::from_secs(5),
        "the client took {waited:?}"
    );
    assert_eq!(partial_files(&store), Vec::<String>::new());
    assert!(!store.join("big").exists());

    // With a grace period the upload in progress completes.
    let at = addr("198.18.3.2:7011");
    let server = serve(&net, at, &store, Duration::from_secs(30));
    let tap = hold_next(&net, Dir::ToServer);
    let opts = net.options(at, vec![Mode::Aead]);
    let (o, b) = (opts.clone(), big.clone());
    let upload =
        tokio::spawn(async move { send(&o, &b, &FileName::new("mid").unwrap(), &()).await });
    stop_in_the_middle(&net, at, tap, Dir::ToServer, server).await;
    let r = upload.await.unwrap().expect("the upload within the grace");
    assert_eq!(r.bytes, data.len() as u64);
    assert!(std::fs::read(store.join("mid")).unwrap() == data);
    assert_eq!(partial_files(&store), Vec::<String>::new());
}

/// A download and a reverse perf test (aead) in progress when the server stops: the server
/// gives each session up with the abort record, so the client says at once why and fails;
/// the download leaves no partial file at the client, and the server says it told the
/// client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_server_tells_the_downloader_and_the_perf_client_why() {
    logs::keep();
    let told = "the peer aborted the session: it is shutting down";
    let work = tempfile::tempdir().unwrap();
    let (store, cli) = (work.path().join("store"), work.path().join("cli"));
    std::fs::create_dir(&store).unwrap();
    std::fs::create_dir(&cli).unwrap();
    std::fs::write(store.join("big"), pattern(8 << 20, 23)).unwrap();
    let net = MemoryNet::new();

    let at = addr("198.18.3.2:7014");
    let server = serve(&net, at, &store, Duration::ZERO);
    let tap = hold_next(&net, Dir::ToClient);
    let opts = net.options(at, vec![Mode::Aead]);
    let (o, dest) = (opts.clone(), cli.join("big"));
    let download =
        tokio::spawn(
            async move { get(&o, &FileName::new("big").unwrap(), &dest, false, &()).await },
        );
    stop_in_the_middle(&net, at, tap, Dir::ToClient, server).await;
    let e = tokio::time::timeout(Duration::from_secs(10), download)
        .await
        .expect("the downloader stops")
        .unwrap()
        .unwrap_err();
    assert!(format!("{e:#}").contains(told), "{e:#}");
    assert_eq!(partial_files(&cli), Vec::<String>::new());
    assert!(!cli.join("big").exists());
    logs::wait_for(
        &[
            "198.18.255.1:1024",
            "server shutting down (the client was told)",
        ],
        Duration::from_secs(10),
    )
    .await;

    let at = addr("198.18.3.2:7015");
    let server = serve(&net, at, &store, Duration::ZERO);
    let tap = hold_next(&net, Dir::ToClient);
    let o = net.options(at, vec![Mode::Aead]);
    let test = tokio::spawn(async move {
        let p = PerfParams {
            up: false,
            down: true,
            bytes: None,
            time: Duration::from_secs(30),
            interval: None,
            omit: None,
        };
        perf(&o, p, |_| {}).await
    });
    stop_in_the_middle(&net, at, tap, Dir::ToClient, server).await;
    let e = tokio::time::timeout(Duration::from_secs(10), test)
        .await
        .expect("the perf client stops")
        .unwrap()
        .unwrap_err();
    assert!(format!("{e:#}").contains(told), "{e:#}");
}
