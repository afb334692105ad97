//! Resumed sessions end to end over the in-memory network (`testing::net`): `nena serve`'s
//! accept loop (`serve_on`, tickets on as by default) and the client's `conn::connect` with
//! the ticket jar `ClientOptions::new` gives every command. The first session makes a full
//! handshake and fills the jar; the next ones resume (a resume hello, about 100 bytes, where a
//! full one is 1,265) and carry files byte-exact; a restarted server (its tickets gone) refuses
//! the ticket and the client makes a full handshake on a new connection in the same call;
//! `--no-resume` on either end makes every session a full one.

mod logs;

use nena_proto::Mode;
use nena_transport::app::file_client::{get, send};
use nena_transport::app::file_server::serve_on;
use nena_transport::app::files::FileServerConfig;
use nena_transport::app::names::FileName;
use nena_transport::conn::{connect, ClientOptions, END_WITHIN};
use nena_transport::testing::net::{serve_options, MemoryNet};
use nena_transport::testing::pair::Dir;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

/// `nena serve` on the memory network at `at`, storing into `dir` (`resume`: tickets on).
fn serve(
    net: &Arc<MemoryNet>,
    at: SocketAddr,
    dir: &Path,
    resume: bool,
) -> tokio::task::JoinHandle<()> {
    let listener = net.listen(at);
    let mut opts = serve_options(at, FileServerConfig::new(dir));
    if !resume {
        opts.accept.resumption = None;
    }
    tokio::spawn(async move { serve_on(listener, opts).await.unwrap() })
}

/// Opens a session and ends it; whether it resumed, and the first flight's size (the first
/// bytes the connection carried to the server, up to the end of the hello).
async fn open(o: &ClientOptions, net: &MemoryNet) -> (bool, usize) {
    let c = connect(o, None).await.unwrap_or_else(|e| panic!("{e:#}"));
    let resumed = c.resumed;
    c.end(END_WITHIN).await;
    let tap = net.taps().last().cloned().expect("a connection");
    let up = tap.crossed(Dir::ToServer);
    let hello_len = nena_proto::wire::HEADER_LEN + usize::from(u16::from_be_bytes([up[7], up[8]]));
    (resumed, hello_len)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_after_the_first_resume_and_a_restarted_server_gets_a_full_handshake() {
    logs::keep();
    let work = tempfile::tempdir().unwrap();
    let (store, cli) = (work.path().join("store"), work.path().join("cli"));
    std::fs::create_dir(&store).unwrap();
    std::fs::create_dir(&cli).unwrap();
    let to: SocketAddr = "198.18.3.2:7002".parse().unwrap();
    let net = MemoryNet::new();
    let o = net.options(to, vec![Mode::Aead]);
    let jar = o.tickets.clone().expect("ClientOptions::new holds tickets");
    let server = serve(&net, to, &store, true);

    assert_eq!(
        open(&o, &net).await,
        (false, 1265),
        "first contact: a full handshake"
    );
    assert_eq!(jar.held(to), 8);
    assert_eq!(open(&o, &net).await, (true, 97), "then a resume hello");
    // Files over resumed sessions, byte-exact both ways.
    let data: Vec<u8> = (0..300_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect();
    let file = cli.join("f.bin");
    std::fs::write(&file, &data).unwrap();
    let name = FileName::new("f").unwrap();
    send(&o, &file, &name, &()).await.unwrap();
    let back = cli.join("back");
    get(&o, &name, &back, false, &()).await.unwrap();
    assert!(std::fs::read(&back).unwrap() == data);
    assert!(std::fs::read(store.join("f")).unwrap() == data);
    assert_eq!(jar.held(to), 16, "each session asks for what fills the jar");

    // The server restarted: its tickets are gone. The client's ticket is refused and the same
    // call makes a full handshake on a new connection; the jar is refilled from it.
    net.close(to);
    server.abort();
    let _ = server.await;
    let server = serve(&net, to, &store, true);
    let before = net.taps().len();
    assert_eq!(open(&o, &net).await, (false, 1265));
    assert_eq!(
        net.taps().len(),
        before + 2,
        "the refused resume hello, then the full one"
    );
    assert_eq!(
        jar.held(to),
        8,
        "the old tickets forgotten, new ones granted"
    );
    assert_eq!(open(&o, &net).await, (true, 97));

    // --no-resume on the client: full handshakes, nothing asked for.
    let mut full = o.clone();
    full.tickets = None;
    assert_eq!(open(&full, &net).await, (false, 1262));
    assert_eq!(open(&full, &net).await, (false, 1262));

    // --no-resume on the server: no tickets granted; a ticket granted before is refused.
    net.close(to);
    server.abort();
    let _ = server.await;
    let _server = serve(&net, to, &store, false);
    assert_eq!(open(&o, &net).await, (false, 1265));
    assert_eq!(jar.held(to), 0, "none granted");
    assert_eq!(open(&o, &net).await, (false, 1265));
}
