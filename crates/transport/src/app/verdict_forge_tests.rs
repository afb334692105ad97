//! The review's attack on an upload's verdict (issue 41, finding 3), in stream and kato: an
//! attacker on the path alters one byte of the file so that the server discards it, then
//! XORs the known "data corrupt" verdict into "ok". Both are length-preserving and linear in
//! these modes (stream: a keystream; kato: a plaintext change `d` at position `p` shows as `d`
//! at the 65 output positions `p..=p+64`), so no key is needed. Before application protocol 3
//! the client reported the upload stored and printed its own file's SHA-256; now the verdict's
//! tag ([`crate::app::verdict`]) does not match and the client fails.

use crate::app::files::{client_put, server_put, FileServerConfig};
use crate::stream::handshake::{client_finish_held, entropy, secure_pair, server_handshake};
use crate::wire::{Reply, Request, Status};
use nena_proto::{ClientConfig, ClientHandshake, Mode, ServerConfig};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf};

/// A reader that XORs `mask[i]` into the i-th byte it passes on: an attacker on the path.
struct Rewrite<R> {
    inner: R,
    pos: usize,
    mask: Vec<u8>,
}

impl<R: AsyncRead + Unpin> AsyncRead for Rewrite<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        std::task::ready!(Pin::new(&mut self.inner).poll_read(cx, buf))?;
        let me = &mut *self;
        for b in &mut buf.filled_mut()[before..] {
            *b ^= me.mask.get(me.pos).copied().unwrap_or(0);
            me.pos += 1;
        }
        Poll::Ready(Ok(()))
    }
}

/// The change on the wire that changes the plaintext at `at` by `diff` (bytes after it
/// unchanged): itself in stream, spread over 65 bytes per byte in kato.
fn wire_change(mode: Mode, at: usize, diff: &[u8]) -> Vec<u8> {
    let mut plain = vec![0u8; at + diff.len()];
    plain[at..].copy_from_slice(diff);
    match mode {
        Mode::Stream => plain,
        Mode::Kato => {
            let mut out = vec![0u8; plain.len() + 64];
            for (i, d) in plain.iter().enumerate() {
                for o in &mut out[i..=i + 64] {
                    *o ^= d;
                }
            }
            out
        }
        other => panic!("no rewrite for {other}"),
    }
}

fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(x, y)| x ^ y).collect()
}

/// One upload of 1000 bytes in `mode`, the attacker flipping a data byte (`spoil`) and
/// rewriting the server's verdict from "data corrupt" to "ok" (`forge`). Returns the client's
/// outcome and the server's.
async fn upload(mode: Mode, spoil: bool, forge: bool) -> (crate::Result<String>, String) {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.bin");
    std::fs::write(&src, vec![0x42u8; 1000]).unwrap();
    let srv_dir = dir.path().join("srv");
    std::fs::create_dir(&srv_dir).unwrap();
    let name = "report.bin";
    let (c, s) = tokio::io::duplex(64 * 1024);
    let (mut cr, mut cw) = tokio::io::split(c);
    let (mut sr, mut sw) = tokio::io::split(s);

    // Client to server: the file's first byte lies right after the client's confirmation
    // (crypto modes: 9 + 32 bytes) and the request.
    let confirm_len = if mode == Mode::Kato { 0 } else { 41 };
    let request_len = Request::Put {
        name: name.into(),
        size: 1000,
    }
    .encode()
    .len();
    let up = if spoil {
        wire_change(mode, confirm_len + request_len, &[0x01])
    } else {
        Vec::new()
    };
    // Server to client: the verdict follows the first reply ("ok, send").
    let first = Reply::ok(0).encode().len();
    let corrupt = Reply::err(
        Status::Corrupt,
        "trailer MAC mismatch (the data or its trailer was altered on the way), file discarded",
    )
    .encode();
    let mut ok = Reply::ok(1000);
    ok.msg = " ".repeat(corrupt.len() - Reply::ok(0).encode().len());
    let down = if forge {
        wire_change(mode, first, &xor(&corrupt, &ok.encode()))
    } else {
        Vec::new()
    };

    let cfg = FileServerConfig::new(&srv_dir);
    let server = tokio::spawn(async move {
        let scfg = ServerConfig::accepting(&[mode]).with_key(nena_proto::test_server_key());
        let (sess, left) = server_handshake(&scfg, &mut sr, &mut sw, Duration::from_secs(5))
            .await
            .unwrap();
        assert!(left.is_empty());
        let sr = Rewrite {
            inner: sr,
            pos: 0,
            mask: up,
        };
        let (mut r, mut w) = secure_pair(Some(sess), left, sr, sw);
        let req = r.read_request().await.unwrap();
        let Request::Put { name, size } = req.request else {
            panic!("not a PUT")
        };
        let out = server_put(&mut r, &mut w, &cfg, &name, size).await;
        w.shutdown().await.unwrap();
        match out {
            Ok(s) => s,
            Err(e) => format!("{e:#}"),
        }
    });
    let mut hs =
        ClientHandshake::new(&ClientConfig::offering(&[mode]), entropy().unwrap()).unwrap();
    cw.write_all(hs.first_flight()).await.unwrap();
    let (sess, left, confirm) = client_finish_held(&mut hs, &mut cr, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(confirm.len(), confirm_len, "{mode}");
    cw.write_all(&confirm).await.unwrap();
    assert!(left.is_empty());
    let cr = Rewrite {
        inner: cr,
        pos: 0,
        mask: down,
    };
    let (mut r, mut w) = secure_pair(Some(sess), left, cr, cw);
    let file_name = crate::app::names::FileName::new(name).unwrap();
    let client = client_put(&mut r, &mut w, &src, &file_name, None, None, |_| {})
        .await
        .map(|o| o.sha256);
    let server = server.await.unwrap();
    // Whatever the client says, a spoiled file is never stored.
    assert_eq!(srv_dir.join(name).exists(), !spoil, "{mode}: {server}");
    (client, server)
}

#[tokio::test]
async fn a_rewritten_verdict_on_a_discarded_upload_fails_the_client() {
    for mode in [Mode::Stream, Mode::Kato] {
        // The rewriting machinery: an untouched upload is stored and confirmed; a spoiled
        // one is discarded and the client told so.
        let (client, server) = upload(mode, false, false).await;
        assert!(client.is_ok(), "{mode}: {client:?}");
        assert!(server.starts_with("stored"), "{mode}: {server}");
        let (client, server) = upload(mode, true, false).await;
        let err = format!("{:#}", client.unwrap_err());
        assert!(err.contains("data corrupt"), "{mode}: {err}");
        assert!(server.contains("discarded"), "{mode}: {server}");

        // The attack: the server discards the file, the forged "ok" reaches the client,
        // whose check of the verdict's tag fails.
        let (client, server) = upload(mode, true, true).await;
        assert!(server.contains("discarded"), "{mode}: {server}");
        let err = format!("{:#}", client.expect_err("a forged verdict was accepted"));
        assert!(
            err.contains("verdict") && err.contains("does not match its MAC"),
            "{mode}: {err}"
        );
    }
}
