//! An attacker that alters one byte in flight, over the in-memory network (`testing::net`):
//! the tap of a memory connection flips the byte (`Tap::flip_write_after`, as
//! `nena lab tamper` flips one in a segment), the production code of both ends runs
//! unmodified: `nena proxy client` (on loopback TCP, no root) and `nena proxy server` with
//! in-memory targets; `nena perf` (`app::file_client::perf`) against `nena serve`'s accept
//! loop (`app::file_server::serve_on`). Replaces the lab tests
//! `an_altered_session_opening_is_retried_unseen_by_the_application`,
//! `an_altered_forward_opening_is_retried_with_the_applications_first_bytes` and
//! `perf_fails_when_one_received_byte_is_wrong` of crates/cli/tests/cli/transfer_tamper.rs;
//! the TC attacker itself on a kernel path stays there (`an_altered_byte_on_the_untrusted_path`,
//! `exactly_one_byte_changes_where_the_record_says`).

mod proxies;

use nena_proto::Mode;
use nena_transport::app::file_client::{perf, PerfParams};
use nena_transport::app::file_server::serve_on;
use nena_transport::app::files::FileServerConfig;
use nena_transport::ops::metrics::{Metrics, Role};
use nena_transport::proxy::client::Entry;
use nena_transport::proxy::socks::AllowList;
use nena_transport::proxy::Egress;
use nena_transport::testing::net::{serve_options, MemoryNet};
use nena_transport::testing::pair::{Dir, Targets};
use proxies::{addr, client, counter, exchange, payload, socks_connect, v4, Server};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;

const SERVER: &str = "198.18.3.2:7401";
const ECHO: &str = "198.18.4.2:8007";

/// Byte 41 (after the 41-byte key confirmation: record 0's first byte, its type) of the
/// client's first write after its hello, XOR 0x40: the lab test's `--skip-bytes 78 --offset
/// 41 --mask 0x40`, on the next session dialed only.
fn alter_the_next_opening(net: &MemoryNet) {
    net.on_next_dial(|tap| tap.flip_write_after(Dir::ToServer, 1, 41, 0x40));
}

/// A proxy pair in `aead` (the server with `egress`, the client with `entry` and counters
/// of its own); the next session's opening altered in flight. Returns the client's address,
/// its counters and the server's targets.
async fn altered_pair(
    net: &Arc<MemoryNet>,
    egress: Egress,
    entry: Entry,
) -> (SocketAddr, Arc<Metrics>, Targets) {
    let targets = Server::new(net, SERVER, egress).start();
    let metrics = Metrics::new(Role::ProxyClient);
    let front = client(
        net,
        SERVER,
        entry,
        Mode::Aead,
        None,
        Some(metrics.clone()),
        16,
    )
    .await;
    alter_the_next_opening(net);
    (front, metrics, targets)
}

/// The first session was altered where it should be and refused; a second one carried the
/// application: exactly two sessions, one connection to the target, which got `msg`; the
/// operator sees one retried opening in the client's metrics.
async fn check_retried(net: &MemoryNet, metrics: &Metrics, targets: &Targets, msg: &[u8]) {
    let taps = net.taps();
    assert_eq!(taps.len(), 2, "one retry");
    let hello = taps[0].crossed(Dir::ToServer).len() as u64;
    let flipped = taps[0].flipped(Dir::ToServer).expect("the attack happened");
    assert!(flipped > 41 && flipped < hello, "at {flipped} of {hello}");
    assert_eq!(
        taps[1].flipped(Dir::ToServer),
        None,
        "the retry is untouched"
    );
    let conns = targets.take();
    assert_eq!(conns.len(), 1, "the altered opening connected nothing");
    assert_eq!(conns[0].addr, addr(ECHO));
    assert!(conns.into_iter().next().unwrap().received.await.unwrap() == msg);
    assert_eq!(
        counter(
            metrics,
            "nena_retried_openings_total{role=\"proxy_client\"}"
        ),
        1,
        "{}",
        metrics.encode()
    );
}

/// The kernel bug of docs/investigations/kernel-41-bytes (a new subflow's first bytes
/// misplaced), made on purpose in memory: the record type of a SOCKS session's open request
/// (sent with the key confirmation) is altered. The proxy server tells the client with an
/// abort record ("altered"), the proxy client opens a new session, and the application gets
/// its SOCKS success and its echo, byte-exact: it never learns of the first session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_altered_session_opening_is_retried_unseen_by_the_application() {
    let net = MemoryNet::new();
    let egress = Egress::Allow(AllowList(vec!["198.18.4.0/24:8007".parse().unwrap()]));
    let (front, metrics, targets) = altered_pair(&net, egress, Entry::Socks5 { users: None }).await;
    let msg = payload(11, 20_000);
    let (code, s) = socks_connect(front, &v4([198, 18, 4, 2], 8007), false).await;
    assert_eq!(code, 0, "the SOCKS reply");
    let back = exchange(s, &msg).await.expect("the application's exchange");
    assert!(back == msg, "echo of {} bytes, not the message", back.len());
    check_retried(&net, &metrics, &targets, &msg).await;
}

/// The same for a `--forward` session, whose opening carries the application's first bytes
/// (written before the session is open, in the same record as the open request): the
/// retried session sends them again, and the echo is byte-exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_altered_forward_opening_is_retried_with_the_applications_first_bytes() {
    let net = MemoryNet::new();
    let (front, metrics, targets) =
        altered_pair(&net, Egress::Forward(addr(ECHO)), Entry::Plain).await;
    let msg = payload(12, 20_000);
    let s = TcpStream::connect(front).await.unwrap();
    let back = exchange(s, &msg).await.expect("the application's exchange");
    assert!(back == msg, "echo of {} bytes, not the message", back.len());
    check_retried(&net, &metrics, &targets, &msg).await;
}

/// `nena perf` checks every byte it receives against its pattern: one byte altered in
/// `plain` mode (which has no integrity of its own) past the first 300 KB of the upload
/// makes the run fail with the server's verdict, so a perf report is never a count of
/// unchecked bytes. Without the attacker the same run passes and counts every byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn perf_fails_when_one_received_byte_is_wrong() {
    let work = tempfile::tempdir().unwrap();
    let net = MemoryNet::new();
    let at = addr("198.18.3.2:7000");
    let listener = net.listen(at);
    let opts = serve_options(at, FileServerConfig::new(work.path()));
    tokio::spawn(async move { serve_on(listener, opts).await.unwrap() });
    let params = || PerfParams {
        up: true,
        down: false,
        bytes: Some(8 << 20),
        time: Duration::from_secs(10),
        interval: None,
        omit: None,
    };
    let client = net.options(at, vec![Mode::Plain]);
    net.on_next_dial(|tap| tap.flip_write_after(Dir::ToServer, 300_000, 77, 0x20));
    let e = perf(&client, params(), |_| {})
        .await
        .expect_err("perf passed with an altered byte");
    let flipped = net.taps()[0]
        .flipped(Dir::ToServer)
        .expect("the attack happened");
    assert!(flipped >= 300_000, "{flipped}");
    assert!(
        format!("{e:#}").contains("did not match the pattern"),
        "{e:#}"
    );
    let r = perf(&client, params(), |_| {}).await.unwrap();
    assert_eq!(r.sent, 8 << 20);
    assert_eq!(r.mode, "plain");
    assert_eq!(net.taps()[1].flipped(Dir::ToServer), None);
}
