//! File names and existing files, over the in-memory network (`testing::net`): the
//! production `send`/`get` clients and a raw session (`conn::connect`, requests written by
//! hand, as a hostile client would) against `nena serve`'s `serve_on`.
//!
//! Replaces the lab test `transfer_files.rs::hostile_file_names_are_refused`; the CLI's
//! refusal of such names as usage errors (exit 2, nothing sent) is
//! `crates/cli/tests/cli/transfer_cli.rs::bad_arguments_are_usage_errors` (no lab needed).

use nena_proto::Mode;
use nena_transport::app::file_client::{get, send};
use nena_transport::app::file_server::serve_on;
use nena_transport::app::files::FileServerConfig;
use nena_transport::app::names::FileName;
use nena_transport::conn::{self};
use nena_transport::testing::net::{serve_options, MemoryNet};
use nena_transport::wire::{Request, Status};
use std::net::SocketAddr;
use std::sync::Arc;

/// `nena serve` on the memory network at `addr` with `files`.
fn serve(
    net: &Arc<MemoryNet>,
    addr: SocketAddr,
    files: FileServerConfig,
) -> tokio::task::JoinHandle<()> {
    let listener = net.listen(addr);
    let opts = serve_options(addr, files);
    tokio::spawn(async move { serve_on(listener, opts).await.unwrap() })
}

const HOSTILE: [&str; 7] = [
    "../escape",
    "/etc/passwd",
    "..",
    ".hidden",
    "x\0y",
    "\x1b[2J",
    "",
];

/// Names that leave the directory, hide, or carry control bytes: the client will not make
/// one (`FileName::new`); sent anyway in a PUT or a GET, the server answers "bad name" to
/// each, creates nothing in its directory nor beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_file_names_are_refused() {
    let work = tempfile::tempdir().unwrap();
    let srv = work.path().join("srv");
    std::fs::create_dir(&srv).unwrap();
    for name in HOSTILE.iter().chain(&["a/b"]) {
        assert!(FileName::new(name).is_err(), "the client takes {name:?}");
    }
    let net = MemoryNet::new();
    let addr: SocketAddr = "198.18.3.2:7000".parse().unwrap();
    let _s = serve(&net, addr, FileServerConfig::new(&srv));
    let opts = net.options(addr, vec![Mode::Aead]);
    let mut statuses = Vec::new();
    for (i, name) in HOSTILE.iter().enumerate() {
        let mut c = conn::connect(&opts, None).await.unwrap();
        let req = if i % 2 == 0 {
            Request::Put {
                name: (*name).into(),
                size: 5,
            }
        } else {
            Request::Get {
                name: (*name).into(),
            }
        };
        c.writer.write_msg(req.encode()).await.unwrap();
        statuses.push(c.reader.read_reply().await.unwrap().status);
    }
    assert!(
        statuses.iter().all(|s| *s == Status::BadName),
        "{statuses:?}"
    );
    assert_eq!(
        std::fs::read_dir(&srv).unwrap().count(),
        0,
        "the server created a file"
    );
    assert!(!work.path().join("escape").exists());
}

/// A file that exists is not replaced, unless the server allows it (`--overwrite`); `get`
/// does not replace a local file unless asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn existing_files_are_replaced_only_when_allowed() {
    let work = tempfile::tempdir().unwrap();
    let srv = work.path().join("srv");
    std::fs::create_dir(&srv).unwrap();
    let f = work.path().join("ok.txt");
    std::fs::write(&f, b"hello").unwrap();
    let name = FileName::new("ok.txt").unwrap();
    let net = MemoryNet::new();
    let a: SocketAddr = "198.18.3.2:7000".parse().unwrap();
    let _s = serve(&net, a, FileServerConfig::new(&srv));
    let opts = net.options(a, vec![Mode::Aead]);
    send(&opts, &f, &name, &()).await.unwrap();
    std::fs::write(&f, b"changed").unwrap();
    let e = send(&opts, &f, &name, &()).await.unwrap_err();
    assert!(format!("{e:#}").contains("file exists"), "{e:#}");
    assert_eq!(std::fs::read(srv.join("ok.txt")).unwrap(), b"hello");

    let b: SocketAddr = "198.18.3.2:7001".parse().unwrap();
    let files = FileServerConfig {
        overwrite: true,
        ..FileServerConfig::new(&srv)
    };
    let _s2 = serve(&net, b, files);
    let opts = net.options(b, vec![Mode::Aead]);
    send(&opts, &f, &name, &()).await.unwrap();
    assert_eq!(std::fs::read(srv.join("ok.txt")).unwrap(), b"changed");

    let local = work.path().join("local.txt");
    std::fs::write(&local, b"mine").unwrap();
    get(&opts, &name, &local, false, &()).await.unwrap_err();
    assert_eq!(std::fs::read(&local).unwrap(), b"mine");
    get(&opts, &name, &local, true, &()).await.unwrap();
    assert_eq!(std::fs::read(&local).unwrap(), b"changed");
}
