//! Peers that are not nena, the production code over the in-memory network (`testing::net`):
//! `nena send`/`get` (`file_client`) against a server of another protocol that answers the
//! hello with its banner (one line: "does not speak nena"), and against one that accepts and
//! says nothing (the handshake's deadline, saying it is likely not a nena server, on tokio's
//! paused clock); garbage to `nena serve`'s accept loop (`serve_on`), which says why it
//! dropped the connection, answers nothing and keeps serving.
//!
//! Moved here from the lab test `transfer_failures.rs::peers_that_are_not_nena_get_a_clear_error`;
//! what needs the kernel stays there: a server that speaks before the hello (the MPTCP
//! gate's early check, `conn::dial`'s "it spoke first"), and garbage over plain TCP (an
//! MPTCP listener's fallback).

mod logs;

use nena_proto::Mode;
use nena_transport::app::file_client::{get, send};
use nena_transport::app::file_server::serve_on;
use nena_transport::app::files::FileServerConfig;
use nena_transport::app::names::FileName;
use nena_transport::conn::{Acceptor, Connection, Dialer};
use nena_transport::testing::net::{serve_options, MemoryNet};
use nena_transport::testing::pair::in_band_modes;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// A server of another protocol at `at`: on each connection it reads what the client sends
/// first, answers with `banner` (nothing when empty) and keeps the connection open until
/// the client ends it.
fn other_server(net: &Arc<MemoryNet>, at: SocketAddr, banner: &'static [u8]) {
    let listener = net.listen(at);
    tokio::spawn(async move {
        while let Some(Ok((conn, _))) = listener.next().await {
            let Connection::Pipe(mut r, mut w) = conn else {
                unreachable!("the memory net's connections are pipes")
            };
            tokio::spawn(async move {
                let mut first = [0u8; 4096];
                let _ = r.read(&mut first).await;
                let _ = w.write_all(banner).await;
                let _ = tokio::io::copy(&mut r, &mut tokio::io::sink()).await;
            });
        }
    });
}

fn nena_server(net: &Arc<MemoryNet>, at: SocketAddr, dir: &std::path::Path) {
    let listener = net.listen(at);
    let opts = serve_options(at, FileServerConfig::new(dir));
    tokio::spawn(async move { serve_on(listener, opts).await.unwrap() });
}

/// A server that answers the hello with an SSH banner: one line saying it does not speak
/// nena, in every mode a client may offer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_of_another_protocol_is_one_clear_line() {
    let work = tempfile::tempdir().unwrap();
    let f = work.path().join("f");
    std::fs::write(&f, b"some data").unwrap();
    let net = MemoryNet::new();
    let at = addr("198.18.3.2:7100");
    other_server(&net, at, b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n");
    for mode in in_band_modes() {
        let mut opts = net.options(at, vec![mode]);
        opts.timeout = Duration::from_secs(3);
        let e = send(&opts, &f, &FileName::new("f").unwrap(), &())
            .await
            .unwrap_err();
        let msg = format!("{e:#}");
        assert!(msg.contains("does not speak nena"), "{mode}: {msg}");
        assert_eq!(msg.trim().lines().count(), 1, "{mode}: one line: {msg}");
    }
}

/// A server that accepts and says nothing: the client gives up at its `--timeout` with a
/// message that says what is likely wrong (not a nena server), not a bare timeout.
#[tokio::test(start_paused = true)]
async fn a_silent_server_is_a_timeout_that_says_what_is_wrong() {
    let work = tempfile::tempdir().unwrap();
    let net = MemoryNet::new();
    let at = addr("198.18.3.2:7101");
    other_server(&net, at, b"");
    let mut opts = net.options(at, vec![Mode::Aead]);
    opts.timeout = Duration::from_secs(1);
    let started = tokio::time::Instant::now();
    let e = get(
        &opts,
        &FileName::new("x").unwrap(),
        &work.path().join("x"),
        false,
        &(),
    )
    .await
    .unwrap_err();
    let msg = format!("{e:#}");
    assert!(
        msg.contains("no nena answer within 1.0 s") && msg.contains("not a nena server"),
        "{msg}"
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(1) && waited < Duration::from_secs(2),
        "gave up after {waited:?}"
    );
    assert!(!work.path().join("x").exists());
}

/// Garbage to a nena server (an HTTP request where the hello belongs): the server says why
/// it dropped the connection, answers nothing at all, and serves the next client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_to_a_nena_server_gets_no_answer_and_it_keeps_serving() {
    logs::keep();
    let work = tempfile::tempdir().unwrap();
    let net = MemoryNet::new();
    let at = addr("198.18.3.2:7102");
    nena_server(&net, at, work.path());
    let opts = net.options(at, vec![Mode::Aead]);
    let request = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut dialed = match net.dial(&opts, request).await {
        Ok(d) => d,
        Err(_) => panic!("the dial to a listening server failed"),
    };
    let mut back = Vec::new();
    tokio::time::timeout(
        Duration::from_secs(10),
        dialed.reader.read_to_end(&mut back),
    )
    .await
    .expect("the server closes the connection")
    .unwrap();
    assert!(back.is_empty(), "the server answered garbage with {back:?}");
    // The server's line names the peer (the memory net's first client address) and why.
    logs::wait_for(
        &["198.18.255.1:1024: ", "does not speak nena"],
        Duration::from_secs(10),
    )
    .await;
    let f = work.path().join("f");
    std::fs::write(&f, b"some data").unwrap();
    send(&opts, &f, &FileName::new("after").unwrap(), &())
        .await
        .expect("the server stopped serving");
    assert_eq!(
        std::fs::read(work.path().join("after")).unwrap(),
        b"some data"
    );
}
