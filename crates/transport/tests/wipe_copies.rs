//! No copy of the hello's secrets (kato keys, r_c) or of the access token is left in memory
//! that is given back to the allocator (issue 41, finding 5): a global allocator that, while
//! it watches, searches every block freed (and every block a reallocation leaves) for any 16
//! bytes of those secrets. It runs the server's handshake on a hello fed in small pieces (the
//! frame reader's growth, the transport's read buffer inside a spawned task), the client's
//! answer handling, and a file request and a connect request with a token through a stream
//! session, read back by the server.
//!
//! The secrets are found without knowing the hello's layout: every 16-byte window of the
//! client's entropy (the hello's kato keys and r_c are raw copies of it, the X25519 secret
//! too) and of the token.

use nena_proto::{ClientConfig, ClientHandshake, Mode, ServerConfig, ENTROPY_LEN};
use nena_transport::stream::handshake::{client_finish, secure_pair, server_handshake};
use nena_transport::wire::{AccessToken, ConnectRequest, Request};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use zeroize::Zeroizing;

const W: usize = 16;
const MAX_NEEDLES: usize = 1024;

/// The windows searched for, sorted (binary search per position of a freed block).
struct Needles(UnsafeCell<[u128; MAX_NEEDLES]>);
// SAFETY: written only while nothing watches (WATCHING false), read only while it does.
unsafe impl Sync for Needles {}
static NEEDLES: Needles = Needles(UnsafeCell::new([0; MAX_NEEDLES]));
static NEEDLE_COUNT: AtomicUsize = AtomicUsize::new(0);
static WATCHING: AtomicBool = AtomicBool::new(false);
static HITS: AtomicUsize = AtomicUsize::new(0);
static LAST_HIT_SIZE: AtomicUsize = AtomicUsize::new(0);
/// `NENA_TEST_DEBUG` set: print where each copy was freed.
static SHOW: AtomicBool = AtomicBool::new(false);

struct Watch;

impl Watch {
    /// Counts a hit if the block holds one of the needles.
    unsafe fn scan(ptr: *const u8, len: usize) {
        if !WATCHING.load(Ordering::SeqCst) || len < W {
            return;
        }
        let n = NEEDLE_COUNT.load(Ordering::SeqCst);
        let needles: &[u128; MAX_NEEDLES] = unsafe { &*NEEDLES.0.get() };
        let needles = &needles[..n];
        for at in 0..=len - W {
            let v = unsafe { std::ptr::read_unaligned(ptr.add(at) as *const u128) };
            if needles.binary_search(&v).is_ok() {
                HITS.fetch_add(1, Ordering::SeqCst);
                LAST_HIT_SIZE.store(len, Ordering::SeqCst);
                if SHOW.load(Ordering::SeqCst) {
                    // Where the copy was freed (nothing watches while this allocates).
                    WATCHING.store(false, Ordering::SeqCst);
                    eprintln!(
                        "a freed block of {len} bytes held a secret at {at}:\n{}",
                        std::backtrace::Backtrace::force_capture()
                    );
                    WATCHING.store(true, Ordering::SeqCst);
                }
                return;
            }
        }
    }
}

unsafe impl GlobalAlloc for Watch {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe {
            Watch::scan(ptr, layout.size());
            System.dealloc(ptr, layout)
        }
    }
    /// Always moves, so that the block a reallocation leaves is searched too.
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        unsafe {
            let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
            let new = System.alloc(new_layout);
            if !new.is_null() {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            new
        }
    }
}

#[global_allocator]
static ALLOC: Watch = Watch;

/// Sets the needles: every 16-byte window of each secret (while nothing watches).
fn set_needles(secrets: &[&[u8]]) {
    assert!(!WATCHING.load(Ordering::SeqCst));
    // Wiped, or the freed list would hold the needles for later blocks to be found with.
    let mut v: Zeroizing<Vec<u128>> = Zeroizing::new(
        secrets
            .iter()
            .flat_map(|s| s.windows(W))
            .map(|w| u128::from_ne_bytes(w.try_into().unwrap()))
            .collect(),
    );
    v.sort_unstable();
    v.dedup();
    assert!(v.len() <= MAX_NEEDLES);
    // SAFETY: nothing watches, so no allocator call reads the array now.
    let all: &mut [u128; MAX_NEEDLES] = unsafe { &mut *NEEDLES.0.get() };
    all[..v.len()].copy_from_slice(&v);
    NEEDLE_COUNT.store(v.len(), Ordering::SeqCst);
}

/// Serves bytes from a wiped buffer in pieces of at most `step`.
struct Pieces {
    data: Zeroizing<Vec<u8>>,
    at: usize,
    step: usize,
}

impl AsyncRead for Pieces {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let me = &mut *self;
        let n = me.step.min(me.data.len() - me.at).min(buf.remaining());
        buf.put_slice(&me.data[me.at..me.at + n]);
        me.at += n;
        Poll::Ready(Ok(()))
    }
}

/// Collects what is written, reserved so that it never grows (what it holds is ciphertext or
/// public, but a test buffer must not leave copies of its own).
struct Collect(Zeroizing<Vec<u8>>);

impl AsyncWrite for Collect {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        assert!(
            self.0.len() + buf.len() <= self.0.capacity(),
            "Collect full"
        );
        self.0.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

fn collect() -> Collect {
    Collect(Zeroizing::new(Vec::with_capacity(64 * 1024)))
}

fn pieces(data: &[u8], step: usize) -> Pieces {
    let mut v = Zeroizing::new(Vec::with_capacity(data.len()));
    v.extend_from_slice(data);
    Pieces {
        data: v,
        at: 0,
        step,
    }
}

/// Deterministic bytes that look random (no run of them occurs by chance elsewhere).
fn noise(seed: u64, out: &mut [u8]) {
    let mut x = seed;
    for b in out {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = (x >> 24) as u8;
    }
}

#[test]
fn no_copy_of_the_hello_or_the_token_is_left_in_freed_memory() {
    let mut entropy = [0u8; ENTROPY_LEN];
    noise(0x6e65_6e61_2d77_6970, &mut entropy);
    let mut token_bytes = [0u8; 40];
    noise(0x746f_6b65_6e2d_3431, &mut token_bytes);
    // Every raw copy of the client's entropy (kato keys, the X25519 secret, r_c) and of the
    // token is a needle, from before the handshake exists.
    set_needles(&[&entropy, &token_bytes]);
    SHOW.store(
        std::env::var_os("NENA_TEST_DEBUG").is_some(),
        Ordering::SeqCst,
    );
    WATCHING.store(true, Ordering::SeqCst);
    let hs = ClientHandshake::new(
        &ClientConfig::offering(&[Mode::Stream, Mode::Kato]),
        entropy,
    )
    .unwrap();
    // The hello does carry raw entropy (kato keys and r_c), wherever it lies.
    let hello = hs.first_flight();
    let copied = hello
        .windows(W)
        .filter(|w| entropy.windows(W).any(|e| e == *w))
        .count();
    assert!(
        copied >= 2,
        "the hello carries no raw entropy: {copied} windows"
    );
    let hello_copy = pieces(hello, 7);

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let mut hs = hs;
        // The server: its handshake in a task of its own (its read buffer lives on the heap).
        let server = tokio::spawn(async move {
            let mut r = hello_copy;
            let mut answer = collect();
            let cfg =
                ServerConfig::accepting(&[Mode::Stream]).with_key(nena_proto::test_server_key());
            let (sess, left) = server_handshake(&cfg, &mut r, &mut answer, Duration::from_secs(5))
                .await
                .unwrap();
            (sess, left, answer)
        });
        let (server_sess, server_left, answer) = server.await.unwrap();
        let mut to_server = collect();
        let (client_sess, client_left) = client_finish(
            &mut hs,
            &mut pieces(&answer.0, 5),
            &mut to_server,
            Duration::from_secs(5),
        )
        .await
        .unwrap();
        drop(hs);

        // A file request and a connect request, each with the token, through the session.
        let token = AccessToken::new(token_bytes.to_vec()).unwrap();
        let (_r, mut w) = secure_pair(Some(client_sess), client_left, pieces(&[], 1), to_server);
        let put = Request::Put {
            name: "report.bin".into(),
            size: 7,
        };
        w.write_all(&put.encode_with(Some(&token))).await.unwrap();
        let mut open = ConnectRequest::of(nena_transport::wire::Service::Dns);
        open.token = Some(token.clone());
        let tagged = open.encode_tagged(w.app_mac_key());
        w.write_all(&tagged).await.unwrap();
        drop(tagged);
        w.flush().await.unwrap();
        let sent = w.into_inner().0;

        let (mut r, _w) = secure_pair(Some(server_sess), server_left, pieces(&sent, 13), collect());
        let got = r.read_request().await.unwrap();
        assert!(token.admits(got.token.as_ref()));
        let got = r.read_connect_request().await.unwrap();
        assert!(token.admits(got.token.as_ref()));
    });
    drop(rt);
    WATCHING.store(false, Ordering::SeqCst);
    let hits = HITS.load(Ordering::SeqCst);
    assert_eq!(
        hits,
        0,
        "{hits} freed blocks held bytes of the hello's secrets or of the token (the last one {} bytes)",
        LAST_HIT_SIZE.load(Ordering::SeqCst)
    );
}
