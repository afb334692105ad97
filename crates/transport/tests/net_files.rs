//! `nena serve` and `nena send`/`get`, the production code of both ends, over the in-memory
//! network (`testing::net`): the client's `conn::connect` with its real handshake dials a
//! `MemoryNet`, the server's real accept loop (`serve_on`) takes its connections. No socket,
//! namespace or root. What needs the kernel (subflows, the gate, the paths) stays in the lab
//! tests of crates/cli/tests/cli/transfer_files.rs and transfer_cli.rs.

use nena_proto::Mode;
use nena_transport::app::file_client::{get, send};
use nena_transport::app::file_server::serve_on;
use nena_transport::app::files::FileServerConfig;
use nena_transport::app::names::FileName;
use nena_transport::testing::net::{serve_options, MemoryNet};
use nena_transport::testing::pair::{in_band_modes, Dir};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

const SERVER: &str = "198.18.3.2:7000";

fn server_addr() -> SocketAddr {
    SERVER.parse().unwrap()
}

/// `nena serve` on the memory network at [`SERVER`], storing into `dir`, every in-band mode
/// accepted; returns the server's task (it ends once the listener is closed).
fn serve(net: &Arc<MemoryNet>, dir: &std::path::Path) -> tokio::task::JoinHandle<()> {
    let listener = net.listen(server_addr());
    let opts = serve_options(server_addr(), FileServerConfig::new(dir));
    tokio::spawn(async move { serve_on(listener, opts).await.unwrap() })
}

/// A file sent and fetched back in every in-band mode arrives byte-exact in the server's
/// directory and back; in the cryptographic modes and kato no 64-byte run of it crosses the
/// wire as it is, in plain it does (the check can fail). The report names the mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_and_get_move_a_file_byte_exact_in_every_mode() {
    let work = tempfile::tempdir().unwrap();
    let store = work.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let net = MemoryNet::new();
    let server = serve(&net, &store);
    let content: Vec<u8> = (0..300_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let src = work.path().join("letter.bin");
    std::fs::write(&src, &content).unwrap();
    for (i, mode) in in_band_modes().into_iter().enumerate() {
        let name = FileName::new(&format!("letter-{mode}.bin")).unwrap();
        let opts = net.options(server_addr(), vec![mode]);
        let sent = send(&opts, &src, &name, &()).await.unwrap();
        assert_eq!(sent.bytes, content.len() as u64, "{mode}");
        assert_eq!(sent.mode, mode.name(), "{mode}");
        assert!(sent.verified);
        assert_eq!(
            std::fs::read(store.join(name.as_str())).unwrap(),
            content,
            "{mode}: the stored file"
        );
        let dest = work.path().join(format!("back-{mode}.bin"));
        let got = get(&opts, &name, &dest, false, &()).await.unwrap();
        assert_eq!(got.sha256, sent.sha256, "{mode}");
        assert_eq!(std::fs::read(&dest).unwrap(), content, "{mode}: fetched");
        // Two connections per mode, in order: the send's and the get's.
        let taps = net.taps();
        assert_eq!(taps.len(), 2 * (i + 1));
        for (tap, dir) in [
            (&taps[2 * i], Dir::ToServer),
            (&taps[2 * i + 1], Dir::ToClient),
        ] {
            let crossed = tap.crossed(dir);
            assert!(crossed.len() >= content.len(), "{mode}: {dir:?}");
            let clear = content
                .chunks(64)
                .take(200)
                .any(|run| crossed.windows(64).any(|w| w == run));
            assert_eq!(
                clear,
                mode == Mode::Plain,
                "{mode} {dir:?}: the file in the clear"
            );
        }
    }
    net.close(server_addr());
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("the server ends once its listener is closed")
        .unwrap();
}

/// The server's refusals reach the client as the server words them: a file that exists is
/// not replaced, a name that is not there cannot be fetched; the first file is unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_refusals_reach_the_client() {
    let work = tempfile::tempdir().unwrap();
    let store = work.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let net = MemoryNet::new();
    let _server = serve(&net, &store);
    let opts = net.options(server_addr(), vec![Mode::Aead]);
    let src = work.path().join("a.txt");
    std::fs::write(&src, b"first").unwrap();
    let name = FileName::new("a.txt").unwrap();
    send(&opts, &src, &name, &()).await.unwrap();
    std::fs::write(&src, b"second").unwrap();
    let e = send(&opts, &src, &name, &()).await.unwrap_err();
    assert!(format!("{e:#}").contains("exists"), "{e:#}");
    assert_eq!(std::fs::read(store.join("a.txt")).unwrap(), b"first");
    let missing = FileName::new("nothing-here.txt").unwrap();
    let e = get(&opts, &missing, &work.path().join("x"), false, &())
        .await
        .unwrap_err();
    assert!(
        format!("{e:#}").to_lowercase().contains("not found"),
        "{e:#}"
    );
    assert!(!work.path().join("x").exists(), "no partial file left");
}

/// A dial to an address nothing listens on is refused, as a closed port is; a closed
/// listener refuses the next dial too.
#[tokio::test]
async fn a_dial_to_nothing_is_refused() {
    let work = tempfile::tempdir().unwrap();
    let net = MemoryNet::new();
    let src = work.path().join("a.txt");
    std::fs::write(&src, b"x").unwrap();
    let name = FileName::new("a.txt").unwrap();
    let opts = net.options("198.18.3.9:7000".parse().unwrap(), vec![Mode::Aead]);
    let e = send(&opts, &src, &name, &()).await.unwrap_err();
    assert!(format!("{e:#}").contains("nothing listens"), "{e:#}");
    let server = serve(&net, work.path());
    net.close(server_addr());
    let opts = net.options(server_addr(), vec![Mode::Aead]);
    let e = send(&opts, &src, &name, &()).await.unwrap_err();
    assert!(format!("{e:#}").contains("nothing listens"), "{e:#}");
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .unwrap()
        .unwrap();
}
