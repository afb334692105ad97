//! The client's default offer is aead alone (issue 19, item 5), the production code of both
//! ends over the in-memory network (`testing::net`): `nena send` (`file_client::send`)
//! offering `Mode::DEFAULT_OFFER` (what `--mode` defaults to) to `nena serve`'s accept loop
//! (`serve_on`). A server's preference can never move a default client to a mode without
//! integrity: a server that prefers stream still ends in aead; one that accepts only stream
//! is refused in one line naming the flag that would allow stream, before a byte of the
//! file; naming stream still works.
//!
//! Replaces the lab test `default_offer.rs::a_default_client_never_ends_in_stream`;
//! nothing of it needs the kernel.

use nena_proto::Mode;
use nena_transport::app::file_client::send;
use nena_transport::app::file_server::serve_on;
use nena_transport::app::files::FileServerConfig;
use nena_transport::app::names::FileName;
use nena_transport::testing::net::{serve_options, MemoryNet};
use nena_transport::testing::pair::Dir;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// `nena serve --mode MODES` on the memory network at `at`, storing into `dir`.
fn serve(net: &Arc<MemoryNet>, at: SocketAddr, dir: &Path, modes: Vec<Mode>) {
    let listener = net.listen(at);
    let mut opts = serve_options(at, FileServerConfig::new(dir));
    opts.accept.modes = modes;
    tokio::spawn(async move { serve_on(listener, opts).await.unwrap() });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_client_never_ends_in_stream() {
    assert_eq!(Mode::DEFAULT_OFFER, &[Mode::Aead], "the default offer");
    let work = tempfile::tempdir().unwrap();
    let (prefers, only) = (work.path().join("prefers"), work.path().join("only"));
    std::fs::create_dir(&prefers).unwrap();
    std::fs::create_dir(&only).unwrap();
    let content: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let file = work.path().join("f.txt");
    std::fs::write(&file, &content).unwrap();
    let name = FileName::new("f.txt").unwrap();
    let net = MemoryNet::new();
    let (at_prefers, at_only) = (addr("198.18.3.2:7000"), addr("198.18.3.2:7001"));

    // The server prefers stream: a default client still gets aead.
    serve(&net, at_prefers, &prefers, vec![Mode::Stream, Mode::Aead]);
    let default = net.options(at_prefers, Mode::DEFAULT_OFFER.to_vec());
    let r = send(&default, &file, &name, &()).await.unwrap();
    assert_eq!(r.mode, "aead");
    assert!(std::fs::read(prefers.join("f.txt")).unwrap() == content);
    // (The same server chooses stream when it is offered first: its preference is real.)
    let named = net.options(at_prefers, vec![Mode::Stream, Mode::Aead]);
    let r = send(&named, &file, &FileName::new("g.txt").unwrap(), &())
        .await
        .unwrap();
    assert_eq!(r.mode, "stream");

    // The server accepts only stream: a default client refuses, in one line naming the flag,
    // before a byte of the file; nothing stored.
    serve(&net, at_only, &only, vec![Mode::Stream]);
    let default = net.options(at_only, Mode::DEFAULT_OFFER.to_vec());
    let e = send(&default, &file, &name, &()).await.unwrap_err();
    let msg = format!("{e:#}");
    assert!(
        msg.contains("the server accepts [stream]") && msg.contains("--mode stream"),
        "{msg}"
    );
    assert_eq!(msg.trim().lines().count(), 1, "{msg}");
    let sent = net.taps().last().unwrap().len(Dir::ToServer);
    assert!(sent < 4096, "a refused client sent {sent} bytes");
    assert!(!only.join("f.txt").exists());
    // Named, stream is offered and chosen.
    let named = net.options(at_only, vec![Mode::Stream]);
    let r = send(&named, &file, &name, &()).await.unwrap();
    assert_eq!(r.mode, "stream");
    assert!(std::fs::read(only.join("f.txt")).unwrap() == content);
}
