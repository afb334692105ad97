//! The forger on the path (issue 19, item 4) over the in-memory network (`testing::net`):
//! between the production `send` and `nena serve`'s `serve_on`, a dialer of the test's own
//! ([`Forging`], the memory network's connection with its writing half wrapped) XORs a
//! chosen change into the upload's last bytes *and* the matching change into its trailer,
//! as it would against an unkeyed SHA-256 trailer. It knows the file (so both trailers) and
//! the session's layout (the file's offset in the client's stream). Against `stream` (a
//! keystream) the change is XORed as it is, against `kato` each changed byte is spread over
//! the 65 output bytes it influences; no key is needed.
//!
//! Replaces the lab test `transfer_forge.rs::a_forged_file_and_trailer_are_refused` (the
//! same attack by a TC program on the lab's untrusted link; the protocol's answer is the
//! subject, not the link). The lab keeps its ignored `old_format_stores_the_forgery`, run
//! against an old build.

use nena_proto::appmac::AppMac;
use nena_proto::Mode;
use nena_transport::app::file_client::send;
use nena_transport::app::file_server::serve_on;
use nena_transport::app::files::FileServerConfig;
use nena_transport::app::names::FileName;
use nena_transport::conn::{ClientOptions, DialFuture, Dialer, WriteHalf};
use nena_transport::testing::net::{serve_options, MemoryNet};
use nena_transport::testing::pair::Dir;
use nena_transport::wire::{Request, TRAILER_LEN};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::AsyncWrite;

const SERVER: &str = "198.18.3.2:7000";
/// The forger turns the file's last bytes into these.
const FORGED_TAIL: &[u8; 8] = b"FORGED!!";
/// The client's key confirmation after its hello, in the crypto modes (docs/PROTOCOL.md).
const CONFIRM_LEN: u64 = 41;
/// Operation byte of a PUT in its trailer's input.
const OP_PUT: u8 = 1;

/// A writer that XORs `pattern` into the bytes at `at..` of what passes through it (its
/// first byte is the client's first after the hello).
struct Xor {
    inner: WriteHalf,
    pos: u64,
    at: u64,
    pattern: Vec<u8>,
}

impl AsyncWrite for Xor {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let me = &mut *self;
        let mut out = buf.to_vec();
        for (i, b) in out.iter_mut().enumerate() {
            let p = me.pos + i as u64;
            if let Some(d) = p
                .checked_sub(me.at)
                .and_then(|k| me.pattern.get(k as usize))
            {
                *b ^= d;
            }
        }
        // Whatever the inner writer takes of `out` is what it took of `buf`.
        let n = std::task::ready!(Pin::new(&mut me.inner).poll_write(cx, &out))?;
        me.pos += n as u64;
        Poll::Ready(Ok(n))
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The memory network with the forger on the client's direction: the next connection's
/// bytes after the hello get `(at, pattern)`.
#[derive(Debug)]
struct Forging {
    net: Arc<MemoryNet>,
    arm: Mutex<Option<(u64, Vec<u8>)>>,
    /// The length of the hello (the first flight) it carried.
    hello: AtomicUsize,
}

impl Dialer for Forging {
    fn dial<'a>(&'a self, opts: &'a ClientOptions, first: &'a [u8]) -> DialFuture<'a> {
        Box::pin(async move {
            let mut d = self.net.dial(opts, first).await?;
            self.hello.store(first.len(), Ordering::Relaxed);
            let (at, pattern) = self.arm.lock().unwrap().take().expect("armed");
            d.writer = WriteHalf::Pipe(Box::new(Xor {
                inner: d.writer,
                pos: 0,
                at,
                pattern,
            }));
            Ok(d)
        })
    }
}

/// `nena serve` on the memory network at [`SERVER`], storing into `srv`, every in-band mode
/// accepted; returns the server's task (it ends once the listener is closed and its sessions
/// are done).
fn serve(net: &Arc<MemoryNet>, srv: &std::path::Path) -> tokio::task::JoinHandle<()> {
    let listener = net.listen(SERVER.parse().unwrap());
    let opts = serve_options(SERVER.parse().unwrap(), FileServerConfig::new(srv));
    tokio::spawn(async move { serve_on(listener, opts).await.unwrap() })
}

/// The change on the wire that changes the plaintext by `delta` at its position (and the
/// bytes after it not): itself in stream and plain, spread over 65 bytes per byte in kato,
/// cut where the client's stream ends (the trailer is its last byte).
fn wire_pattern(mode: Mode, delta: &[u8]) -> Vec<u8> {
    match mode {
        Mode::Kato => {
            let mut out = vec![0u8; delta.len()];
            for (i, d) in delta.iter().enumerate() {
                for o in out.iter_mut().skip(i).take(65) {
                    *o ^= d;
                }
            }
            out
        }
        _ => delta.to_vec(),
    }
}

/// One upload of `orig` as `name` in `mode` under attack: its tail turned into
/// [`FORGED_TAIL`], its trailer into the unkeyed trailer of the forgery. Returns the
/// client's outcome and what the server stored under the name (empty: nothing).
async fn attacked_upload(
    net: &Arc<MemoryNet>,
    work: &std::path::Path,
    srv: &std::path::Path,
    mode: Mode,
    orig: &[u8],
) -> (Result<(), String>, Vec<u8>) {
    let name = format!("f-{mode}");
    let file = work.join(&name);
    std::fs::write(&file, orig).unwrap();
    let n = orig.len();
    let mut forged = orig.to_vec();
    forged[n - 8..].copy_from_slice(FORGED_TAIL);
    let trailer = |data: &[u8]| {
        let mut m = AppMac::file(None, OP_PUT, &name, n as u64);
        m.update(data);
        m.finish()
    };
    let mut delta: Vec<u8> = orig[n - 8..]
        .iter()
        .zip(FORGED_TAIL)
        .map(|(a, b)| a ^ b)
        .collect();
    delta.extend(
        trailer(orig)
            .iter()
            .zip(trailer(&forged))
            .map(|(a, b)| a ^ b),
    );
    // After the hello: the confirmation (crypto modes), the request, then the data.
    let confirm = if mode == Mode::Stream { CONFIRM_LEN } else { 0 };
    let request = Request::Put {
        name: name.clone(),
        size: n as u64,
    }
    .encode()
    .len() as u64;
    let at = confirm + request + n as u64 - 8;
    let forger = Arc::new(Forging {
        net: net.clone(),
        arm: Mutex::new(Some((at, wire_pattern(mode, &delta)))),
        hello: AtomicUsize::new(0),
    });
    let opts = ClientOptions {
        dialer: forger.clone(),
        ..net.options(SERVER.parse().unwrap(), vec![mode])
    };
    let taps_before = net.taps().len();
    let server = serve(net, srv);
    let sent = send(&opts, &file, &FileName::new(&name).unwrap(), &()).await;
    // The layout was right: the client's stream after its hello ends with the forged bytes
    // (the file's last 8 and the trailer), nothing after them.
    let tap = &net.taps()[taps_before];
    let hello = forger.hello.load(Ordering::Relaxed) as u64;
    assert_eq!(
        tap.len(Dir::ToServer),
        hello + confirm + request + n as u64 + TRAILER_LEN as u64,
        "{mode}: not the layout assumed (hello {hello})"
    );
    // The server's session is over (its cleanup done) once the server has ended.
    net.close(SERVER.parse().unwrap());
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("the server ends")
        .unwrap();
    let stored = std::fs::read(srv.join(&name)).unwrap_or_default();
    let left: Vec<_> = std::fs::read_dir(srv)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".part"))
        .collect();
    assert!(left.is_empty(), "{mode}: temporary files left: {left:?}");
    (sent.map(|_| ()).map_err(|e| format!("{e:#}")), stored)
}

/// The trailer is a MAC keyed from the session: the forger rewrote the file's end and, as
/// it would for an unkeyed SHA-256, the trailer; in `stream` and `kato` the server refuses
/// ("trailer MAC mismatch"), stores nothing under the name, and the client is told. The same
/// forger against `plain` (whose trailer is unkeyed) gets the forgery stored: the attack
/// lands where it aims, the refusal is the key's doing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_file_and_trailer_are_refused() {
    let work = tempfile::tempdir().unwrap();
    let srv = work.path().join("srv");
    std::fs::create_dir(&srv).unwrap();
    let net = MemoryNet::new();
    let orig: Vec<u8> = (0..(4u32 << 20))
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let mut forged = orig.clone();
    let n = forged.len();
    forged[n - 8..].copy_from_slice(FORGED_TAIL);
    for mode in [Mode::Stream, Mode::Kato] {
        let (sent, stored) = attacked_upload(&net, work.path(), &srv, mode, &orig).await;
        let e = sent.expect_err("the forged upload succeeded");
        assert!(stored.is_empty(), "{mode}: a forged file was stored");
        assert!(e.contains("trailer MAC mismatch"), "{mode}: {e}");
    }
    let (_, stored) = attacked_upload(&net, work.path(), &srv, Mode::Plain, &orig).await;
    assert!(stored == forged, "plain: the forgery was not stored");
}
