//! Counts and sizes past 2^32 (issue 19's review of every counter): a file's size, a
//! reply's size and a perf byte count of more than 4 GiB survive the application protocol's
//! encoding (all are u64 on the wire), and a `stream` session carries more than 4 GiB
//! through `copy_in`/`copy_out` (the file transfer's data path) with every count exact: a
//! u32 anywhere in the sizes, offsets or counters would wrap here. (The key epoch's end:
//! crates/proto/src/cipher_limits_tests.rs at 2^36, net_key_updates.rs end to end.)

use nena_proto::{exchange_in, Mode};
use nena_transport::stream::copy::{copy_in, copy_out};
use nena_transport::stream::handshake::secure_pair_with;
use nena_transport::stream::BULK_BUF;
use nena_transport::wire::{PerfRequest, Reply, Request, RequestMsg};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// 4 GiB + 1 MiB + 3: past 2^32, not a multiple of any buffer or block size.
const PAST_4_GIB: u64 = (1 << 32) + (1 << 20) + 3;

#[test]
fn sizes_past_4_gib_survive_the_wire_encoding() {
    for size in [PAST_4_GIB, 70 << 30, u64::MAX] {
        let put = Request::Put {
            name: "big.iso".into(),
            size,
        };
        let bytes = put.encode();
        let (msg, used) = RequestMsg::decode(&bytes).unwrap().unwrap();
        assert_eq!((msg.request, used), (put, bytes.len()), "{size}");

        let perf = Request::Perf(PerfRequest {
            up: true,
            down: false,
            bytes: size,
            millis: 0,
        });
        let bytes = perf.encode();
        let (msg, _) = RequestMsg::decode(&bytes).unwrap().unwrap();
        assert_eq!(msg.request, perf, "{size}");

        let reply = Reply::ok(size);
        let bytes = reply.encode();
        let (back, _) = Reply::decode(&bytes).unwrap().unwrap();
        assert_eq!(back.size, size);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_session_copies_past_4_gib_exactly() {
    let x = exchange_in(Mode::Stream);
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let (cr, cw) = tokio::io::split(client_io);
    let (sr, sw) = tokio::io::split(server_io);
    // The server's reader starts with the client's key confirmation, as when it arrived
    // with the end of the handshake.
    let (_, mut w) = secure_pair_with(Some(x.client), Vec::new(), cr, cw, BULK_BUF);
    let (mut r, _) = secure_pair_with(Some(x.server), x.confirm.clone(), sr, sw, BULK_BUF);
    let send = async move {
        let mut src = tokio::io::repeat(0xa5).take(PAST_4_GIB);
        let n = copy_in(&mut src, &mut w, u64::MAX, |_| {}).await?;
        w.shutdown().await?;
        Ok::<_, std::io::Error>((n, w.sent()))
    };
    let recv = async move {
        let mut sink = tokio::io::sink();
        let mut wrong = 0u64;
        let n = copy_out(&mut r, &mut sink, u64::MAX, |b| {
            wrong += b.iter().filter(|&&x| x != 0xa5).count() as u64;
        })
        .await?;
        Ok::<_, std::io::Error>((n, r.received(), wrong))
    };
    let (s, g) = tokio::join!(send, recv);
    let (sent, w_sent) = s.unwrap();
    let (got, r_received, wrong) = g.unwrap();
    assert_eq!(sent, PAST_4_GIB);
    assert_eq!(got, PAST_4_GIB);
    assert_eq!(wrong, 0, "bytes that did not decrypt to the pattern");
    assert!(w_sent >= PAST_4_GIB, "writer counted {w_sent}");
    assert!(r_received >= PAST_4_GIB, "reader counted {r_received}");
}
