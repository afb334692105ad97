//! What the server does with one session once the nena handshake is done: read the request,
//! check it against the server's [`Limits`] (access token first, then read-only /
//! write-only) and run PUT, GET or PERF. A request that cannot be decoded is answered when
//! the answer helps (a bad name gets "bad file name", an unknown operation "refused"); bytes
//! that are not this protocol at all get no answer. Generic over the streams, so it is tested
//! without a network.

use crate::app::files::{server_get, server_put, FileServerConfig};
use crate::app::perf::{self, Counters, Limit};
use crate::error::{Doing, During, Error, Result, Timeout, Transfer};
use crate::ops::access::{ErrorReply, Limits};
use crate::stream::{MsgError, SecureReader, SecureWriter};
use crate::wire::{Reply, Request, Status, WireError};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};

/// Time a perf test has past the server's `--perf-max-time` to end (its last chunks, the
/// counts and the verdicts) before the server cuts it.
pub const PERF_END_GRACE: Duration = Duration::from_secs(5);

/// How long the server waits for the request after the handshake.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Server settings that matter inside a session.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    pub files: FileServerConfig,
    /// Only perf is served (raw baseline listener).
    pub perf_only: bool,
    /// Access token and read-only / write-only.
    pub limits: Limits,
}

/// Serve one request. Returns a one-line summary for the log.
pub async fn serve_request<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    r: &mut SecureReader<R>,
    w: &mut SecureWriter<W>,
    cfg: &SessionConfig,
) -> Result<String> {
    let msg = tokio::time::timeout(REQUEST_TIMEOUT, r.read_request())
        .await
        .map_err(|_| Timeout::Request {
            after: REQUEST_TIMEOUT,
        })?;
    let msg = match msg {
        Ok(m) => m,
        Err(MsgError::Wire(e)) => {
            // Our protocol, but a request we cannot take: say why (a peer that speaks
            // something else entirely gets no answer).
            let status = if e.is_bad_name() {
                Some(Status::BadName)
            } else if matches!(
                e,
                WireError::BadOp(_)
                    | WireError::BadFlags(_)
                    | WireError::EmptyToken
                    | WireError::OldVersion(_)
            ) {
                Some(Status::Refused)
            } else {
                None
            };
            if let Some(st) = status {
                w.write_msg(Reply::err(st, e.to_string()).encode()).await?;
                let log = format!("reading the request: protocol error: {e}");
                return Err(ErrorReply::new(st, log).into());
            }
            return Err(MsgError::Wire(e)).during(Doing::ReadingRequest);
        }
        Err(e) => return Err(e).during(Doing::ReadingRequest),
    };
    if let Err(reply) = cfg.limits.admit(&msg) {
        w.write_msg(reply.encode()).await?;
        let log = format!("refused a request: {}: {}", reply.status, reply.msg);
        return Err(ErrorReply::new(reply.status, log).into());
    }
    match msg.request {
        Request::Put { .. } | Request::Get { .. } if cfg.perf_only => {
            w.write_msg(
                Reply::err(Status::Refused, "this listener serves perf tests only").encode(),
            )
            .await?;
            Err(ErrorReply::new(
                Status::Refused,
                "refused a file request on a perf-only listener",
            )
            .into())
        }
        Request::Put { name, size } => server_put(r, w, &cfg.files, &name, size).await,
        Request::Get { name } => {
            tokio::select! {
                x = server_get(r, w, &cfg.files, &name) => x,
                () = cfg.files.stop.stopped() => Err(stopped_mid_session(w, &format!("GET {name:?}")).await),
            }
        }
        Request::Perf(p) => {
            let millis = Duration::from_millis(p.millis as u64);
            let caps = cfg.limits.perf;
            if let Err(reply) = caps.admit(p.bytes, p.millis) {
                w.write_msg(reply.encode()).await?;
                let log = format!("refused a perf test: {}", reply.msg);
                return Err(ErrorReply::new(reply.status, log).into());
            }
            w.write_msg(Reply::ok(0).encode()).await?;
            let limit = match (p.down, p.bytes) {
                (false, _) => Limit::Nothing,
                (true, 0) => Limit::Time(millis),
                (true, b) => Limit::Bytes(b),
            };
            let c = Counters::default();
            // Whatever the client sends (it decides how long its own direction runs), the
            // test ends at the server's cap.
            let cut = caps.max_time + PERF_END_GRACE;
            let o = tokio::select! {
                x = perf::run(r, w, limit, &c) => x?,
                () = tokio::time::sleep(cut) => {
                    return Err(Transfer::PerfCapped {
                        after: cut,
                        cap: caps.max_time,
                        received: c.received.load(std::sync::atomic::Ordering::Relaxed),
                    }
                    .into())
                }
                () = cfg.files.stop.stopped() => return Err(stopped_mid_session(w, "perf test").await),
            };
            Ok(format!(
                "perf: received {} B, sent {} B in {:.2}s ({:.1} Mbit/s total)",
                o.received,
                o.sent,
                o.seconds,
                perf::mbit_s(o.received + o.sent, o.seconds)
            ))
        }
    }
}

/// A download or perf test the stopping server abandons: `aead` tells the client why (the
/// abort record: its reader fails with "the peer aborted the session: it is shutting
/// down"); the other modes have no room for a message once data flows, and the client sees
/// the stream end without its trailer or count. Counted as aborted.
async fn stopped_mid_session<W: AsyncWrite + Unpin>(w: &mut SecureWriter<W>, what: &str) -> Error {
    let told = w
        .abort(nena_proto::AbortReason::ShuttingDown)
        .await
        .unwrap_or(false);
    let how = if told {
        "the client was told"
    } else {
        "this mode cannot tell the client why"
    };
    ErrorReply::new(
        Status::ShuttingDown,
        format!("{what}: server shutting down ({how})"),
    )
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::files::{client_get, client_put};
    use crate::app::names::FileName;
    use crate::ops::access::Access;
    use crate::stream::handshake::secure_pair;
    use crate::stream::{SecureReader, SecureWriter};
    use crate::wire::AccessToken;
    use std::path::Path;
    #[allow(unused_imports)]
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::io::{DuplexStream, ReadHalf, WriteHalf};

    type R = SecureReader<ReadHalf<DuplexStream>>;
    type W = SecureWriter<WriteHalf<DuplexStream>>;

    /// A scratch directory, removed when the guard is dropped.
    fn tmpdir(tag: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("nena-transport-{tag}-"))
            .tempdir()
            .unwrap()
    }

    /// A client session and a server task serving one request over it.
    fn connect(dir: &Path, overwrite: bool) -> (R, W, tokio::task::JoinHandle<Result<String>>) {
        let cfg = SessionConfig {
            files: FileServerConfig {
                overwrite,
                ..FileServerConfig::new(dir)
            },
            perf_only: false,
            limits: Limits::default(),
        };
        connect_with(cfg)
    }

    /// [`connect`] with a server configuration of the caller's.
    fn connect_with(cfg: SessionConfig) -> (R, W, tokio::task::JoinHandle<Result<String>>) {
        let (c, s) = tokio::io::duplex(256 * 1024);
        let (cr, cw) = tokio::io::split(c);
        let (sr, sw) = tokio::io::split(s);
        let server = tokio::spawn(async move {
            let (mut r, mut w) = secure_pair(None, Vec::new(), sr, sw);
            serve_request(&mut r, &mut w, &cfg).await
        });
        let (r, w) = secure_pair(None, Vec::new(), cr, cw);
        (r, w, server)
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[tokio::test]
    async fn put_then_get_roundtrip_sizes() {
        let srv_dir = tmpdir("srv");
        let srv = srv_dir.path();
        let cli_dir = tmpdir("cli");
        let cli = cli_dir.path();
        for size in [0usize, 1, 63, 64, 65, 300_001] {
            let data: Vec<u8> = (0..size).map(|i| (i * 7 + 3) as u8).collect();
            let src = cli.join(format!("src{size}"));
            std::fs::write(&src, &data).unwrap();
            let name = FileName::new(&format!("f{size}")).unwrap();
            let (mut r, mut w, server) = connect(srv, false);
            let out = client_put(&mut r, &mut w, &src, &name, None, None, |_| {})
                .await
                .unwrap();
            assert_eq!(out.bytes, size as u64);
            server.await.unwrap().unwrap();
            assert_eq!(std::fs::read(srv.join(name.as_str())).unwrap(), data);

            let dest = cli.join(format!("back{size}"));
            let (mut r, mut w, server) = connect(srv, false);
            let got = client_get(&mut r, &mut w, &name, &dest, false, None, None, |_| {})
                .await
                .unwrap();
            server.await.unwrap().unwrap();
            assert_eq!(got.sha256, out.sha256);
            assert_eq!(std::fs::read(&dest).unwrap(), data);
        }
        // No temporary file is left behind.
        assert!(entries(srv).iter().all(|n| !n.starts_with('.')));
        assert!(entries(cli).iter().all(|n| !n.starts_with('.')));
    }

    #[tokio::test]
    async fn hostile_names_are_refused_by_the_server() {
        let srv_dir = tmpdir("hostile");
        let srv = srv_dir.path();
        for name in [
            "../escape",
            "/etc/passwd",
            "..",
            "a/b",
            ".hidden",
            "nul\0",
            "",
            "\x1b[31m",
        ] {
            let (mut r, mut w, server) = connect(srv, false);
            // Bypass the client's own check: write the request by hand.
            w.write_msg(
                Request::Put {
                    name: name.into(),
                    size: 3,
                }
                .encode(),
            )
            .await
            .unwrap();
            let reply = r.read_reply().await.unwrap();
            assert_eq!(reply.status, Status::BadName, "{name:?}");
            let err = server.await.unwrap().unwrap_err();
            assert!(err.to_string().contains("refused file name"), "{err}");
            let (mut r, mut w, server) = connect(srv, false);
            w.write_msg(Request::Get { name: name.into() }.encode())
                .await
                .unwrap();
            assert_eq!(
                r.read_reply().await.unwrap().status,
                Status::BadName,
                "{name:?}"
            );
            assert!(server.await.unwrap().is_err());
        }
        assert!(entries(srv).is_empty());
        assert!(!srv.parent().unwrap().join("escape").exists());
    }

    #[tokio::test]
    async fn no_overwrite_unless_asked() {
        let srv_dir = tmpdir("ow");
        let srv = srv_dir.path();
        let cli_dir = tmpdir("owc");
        let cli = cli_dir.path();
        std::fs::write(srv.join("keep"), b"old").unwrap();
        std::fs::write(cli.join("new"), b"new contents").unwrap();
        let (mut r, mut w, server) = connect(srv, false);
        let err = client_put(
            &mut r,
            &mut w,
            &cli.join("new"),
            &FileName::new("keep").unwrap(),
            None,
            None,
            |_| {},
        )
        .await
        .unwrap_err();
        assert!(err.to_string().contains("file exists"), "{err}");
        assert!(server.await.unwrap().is_err());
        assert_eq!(std::fs::read(srv.join("keep")).unwrap(), b"old");

        let (mut r, mut w, server) = connect(srv, true);
        client_put(
            &mut r,
            &mut w,
            &cli.join("new"),
            &FileName::new("keep").unwrap(),
            None,
            None,
            |_| {},
        )
        .await
        .unwrap();
        server.await.unwrap().unwrap();
        assert_eq!(std::fs::read(srv.join("keep")).unwrap(), b"new contents");
    }

    #[tokio::test]
    async fn corrupt_or_truncated_upload_leaves_nothing() {
        let srv_dir = tmpdir("corrupt");
        let srv = srv_dir.path();
        // Wrong trailer.
        let (mut r, mut w, server) = connect(srv, false);
        w.write_msg(
            Request::Put {
                name: "x".into(),
                size: 4,
            }
            .encode(),
        )
        .await
        .unwrap();
        assert!(r.read_reply().await.unwrap().is_ok());
        let data = b"abcd".to_vec();
        w.write_all(&data).await.unwrap();
        w.write_all(&[0u8; 32]).await.unwrap();
        w.flush().await.unwrap();
        let fin = r.read_reply().await.unwrap();
        assert_eq!(fin.status, Status::Corrupt);
        assert!(server.await.unwrap().is_err());
        // Connection dropped in the middle.
        let (mut r, mut w, server) = connect(srv, false);
        w.write_msg(
            Request::Put {
                name: "y".into(),
                size: 1000,
            }
            .encode(),
        )
        .await
        .unwrap();
        assert!(r.read_reply().await.unwrap().is_ok());
        w.write_all(&[1u8; 10]).await.unwrap();
        w.flush().await.unwrap();
        drop((r, w));
        let err = server.await.unwrap().unwrap_err();
        assert!(
            format!("{err:#}").contains("closed after 10 of 1000"),
            "{err:#}"
        );
        assert!(entries(srv).is_empty(), "{:?}", entries(srv));
    }

    /// An aead session whose client-to-server bytes pass a middle that flips one byte at
    /// offset `flip` (an active attacker on the path).
    async fn tampered_aead_put(
        flip: usize,
        dir: &Path,
        src: &Path,
    ) -> (Result<String>, Result<crate::app::files::FileOutcome>) {
        let nena_proto::Exchange {
            client: cs,
            server: ss,
            confirm,
            ..
        } = nena_proto::exchange_in(nena_proto::Mode::Aead);
        let (c_end, mut m_in) = tokio::io::duplex(64 * 1024);
        let (mut m_out, s_end) = tokio::io::duplex(64 * 1024);
        // The middle: copies, flipping one byte.
        let middle = tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            let mut pos = 0usize;
            loop {
                let n = match m_in.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                if (pos..pos + n).contains(&flip) {
                    buf[flip - pos] ^= 0x40;
                }
                pos += n;
                if m_out.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
        });
        let (s_down, c_down) = tokio::io::duplex(64 * 1024);
        let (sr, _) = tokio::io::split(s_end);
        let (_, sw) = tokio::io::split(s_down);
        let (cr, _) = tokio::io::split(c_down);
        let (_, mut cw) = tokio::io::split(c_end);
        cw.write_all(&confirm).await.unwrap();
        let cfg = SessionConfig {
            files: FileServerConfig::new(dir),
            perf_only: false,
            limits: Limits::default(),
        };
        let server = tokio::spawn(async move {
            let (mut r, mut w) = secure_pair(Some(ss), Vec::new(), sr, sw);
            let out = serve_request(&mut r, &mut w, &cfg).await;
            if out.is_err() {
                let _ = w.shutdown().await;
                r.discard(std::time::Duration::from_secs(2)).await;
            }
            out
        });
        let (mut r, mut w) = secure_pair(Some(cs), Vec::new(), cr, cw);
        let client = client_put(
            &mut r,
            &mut w,
            src,
            &FileName::new("t").unwrap(),
            None,
            None,
            |_| {},
        )
        .await;
        drop((r, w));
        let out = server.await.unwrap();
        middle.abort();
        (out, client)
    }

    #[tokio::test]
    async fn an_altered_record_fails_the_upload_and_both_sides_name_it() {
        let srv_dir = tmpdir("tamper");
        let cli_dir = tmpdir("tamperc");
        let src = cli_dir.path().join("src");
        std::fs::write(&src, vec![0x61u8; 200_000]).unwrap();
        // Byte 100,000 of the client's stream: inside the file data, past the request.
        let (server, client) = tampered_aead_put(100_000, srv_dir.path(), &src).await;
        let se = format!("{:#}", server.unwrap_err());
        assert!(se.contains("integrity check failed"), "{se}");
        let ce = format!("{:#}", client.unwrap_err());
        assert!(ce.contains("integrity check failed"), "{ce}");
        assert!(entries(srv_dir.path()).is_empty(), "nothing stored");
        // The same upload untouched (the flip beyond the end of the stream) is stored.
        let (server, client) = tampered_aead_put(usize::MAX, srv_dir.path(), &src).await;
        server.unwrap();
        client.unwrap();
        assert_eq!(
            std::fs::read(srv_dir.path().join("t")).unwrap().len(),
            200_000
        );
    }

    #[tokio::test]
    async fn get_missing_and_garbage_request() {
        let srv_dir = tmpdir("missing");
        let srv = srv_dir.path();
        let cli_dir = tmpdir("missingc");
        let cli = cli_dir.path();
        let (mut r, mut w, server) = connect(srv, false);
        let err = client_get(
            &mut r,
            &mut w,
            &FileName::new("nope").unwrap(),
            &cli.join("nope"),
            false,
            None,
            None,
            |_| {},
        )
        .await
        .unwrap_err();
        assert!(err.to_string().contains("not found"), "{err}");
        assert!(server.await.unwrap().is_err());
        assert!(!cli.join("nope").exists());

        let (_r, mut w, server) = connect(srv, false);
        w.write_msg(b"HELO garbage".to_vec()).await.unwrap();
        let err = server.await.unwrap().unwrap_err();
        assert!(
            format!("{err:#}").contains("does not speak the nena application protocol"),
            "{err:#}"
        );
    }

    fn limited(
        dir: &Path,
        max: Option<u64>,
        access: Access,
        token: Option<&[u8]>,
    ) -> SessionConfig {
        SessionConfig {
            files: FileServerConfig {
                max_file_size: max,
                ..FileServerConfig::new(dir)
            },
            perf_only: false,
            limits: Limits {
                access,
                token: token.map(|t| AccessToken::new(t.to_vec()).unwrap()),
                ..Limits::default()
            },
        }
    }

    /// A client may not take the server's CPU and bandwidth at will (issue 41, finding 6): a
    /// perf test asking for more than the caps is refused, and one whose client never ends
    /// its direction is cut at the time cap.
    #[tokio::test]
    async fn perf_tests_beyond_the_servers_caps_are_refused_or_cut() {
        use crate::ops::access::PerfCaps;
        use crate::wire::PerfRequest;
        let dir = tmpdir("perfcaps");
        let caps = PerfCaps {
            max_bytes: 1 << 20,
            max_time: Duration::from_secs(1),
        };
        let cfg = || {
            let mut c = limited(dir.path(), None, Access::ReadWrite, None);
            c.limits.perf = caps;
            c
        };
        let perf = |bytes, millis, up, down| {
            Request::Perf(PerfRequest {
                up,
                down,
                bytes,
                millis,
            })
        };
        let (reply, log) = ask(cfg(), perf(2 << 20, 0, false, true), None).await;
        assert_eq!(reply.status, Status::Refused, "{reply:?}");
        assert!(reply.msg.contains("--perf-max-bytes"), "{reply:?} {log}");
        let (reply, _) = ask(cfg(), perf(0, 2000, false, true), None).await;
        assert!(reply.msg.contains("--perf-max-time"), "{reply:?}");
        // Within the caps, but the client never ends its direction: cut at the cap.
        let (mut r, mut w, server) = connect_with(cfg());
        w.write_msg(perf(0, 1000, true, false).encode())
            .await
            .unwrap();
        assert!(r.read_reply().await.unwrap().is_ok());
        let out = tokio::time::timeout(Duration::from_secs(60), server)
            .await
            .expect("the server let a perf test run on past its cap")
            .unwrap();
        let err = format!("{:#}", out.unwrap_err());
        assert!(err.contains("perf test cut after 6 s"), "{err}");
        drop((r, w));
        // The defaults.
        assert_eq!(Limits::default().perf, PerfCaps::DEFAULT);
    }

    /// Writes `req` (with `token`) and returns the server's first reply and its result.
    async fn ask(cfg: SessionConfig, req: Request, token: Option<&[u8]>) -> (Reply, String) {
        let (mut r, mut w, server) = connect_with(cfg);
        let token = token.map(|t| AccessToken::new(t.to_vec()).unwrap());
        w.write_msg(req.encode_with(token.as_ref())).await.unwrap();
        let reply = r.read_reply().await.unwrap();
        drop((r, w));
        let log = match server.await.unwrap() {
            Ok(s) => s,
            Err(e) => format!("{e:#}"),
        };
        (reply, log)
    }

    #[tokio::test]
    async fn an_upload_that_is_too_large_or_does_not_fit_is_refused_before_any_data() {
        let srv_dir = tmpdir("limits");
        let srv = srv_dir.path();
        let put = |size| Request::Put {
            name: "big".into(),
            size,
        };
        // More than --max-file-size.
        let cfg = limited(srv, Some(1 << 20), Access::ReadWrite, None);
        let (reply, log) = ask(cfg.clone(), put((1 << 20) + 1), None).await;
        assert_eq!(reply.status, Status::TooLarge, "{reply:?}");
        assert!(reply.msg.contains("at most 1.0 MiB"), "{reply:?}");
        assert!(log.contains("file too large"), "{log}");
        // At the limit it is taken (the data is then not sent: the server waits for it).
        let (reply, _) = ask(cfg, put(1 << 20), None).await;
        assert!(reply.is_ok(), "{reply:?}");
        // 2^40 bytes without a limit: more than the disk holds (checked, not assumed).
        let free = crate::app::files::free_space(srv).unwrap();
        assert!(
            free < 1 << 40,
            "this test needs less than 1 TiB free in /tmp"
        );
        let cfg = limited(srv, None, Access::ReadWrite, None);
        let (reply, log) = ask(cfg, put(1 << 40), None).await;
        assert_eq!(reply.status, Status::NoSpace, "{reply:?}");
        assert!(reply.msg.starts_with("1.0 TiB announced"), "{reply:?}");
        assert!(log.contains("not enough space"), "{log}");
        assert!(entries(srv).is_empty(), "{:?}", entries(srv));
    }

    #[tokio::test]
    async fn read_only_write_only_and_the_access_token() {
        let srv_dir = tmpdir("access");
        let srv = srv_dir.path();
        std::fs::write(srv.join("there"), b"content").unwrap();
        let put = Request::Put {
            name: "new".into(),
            size: 1,
        };
        let get = Request::Get {
            name: "there".into(),
        };
        let (reply, _) = ask(
            limited(srv, None, Access::ReadOnly, None),
            put.clone(),
            None,
        )
        .await;
        assert_eq!(reply.status, Status::Refused);
        assert!(reply.msg.contains("read-only"), "{reply:?}");
        let (reply, _) = ask(
            limited(srv, None, Access::ReadOnly, None),
            get.clone(),
            None,
        )
        .await;
        assert!(reply.is_ok() && reply.size == 7, "{reply:?}");
        let (reply, _) = ask(
            limited(srv, None, Access::WriteOnly, None),
            get.clone(),
            None,
        )
        .await;
        assert_eq!(reply.status, Status::Refused);
        assert!(reply.msg.contains("write-only"), "{reply:?}");

        let right: &[u8] = b"the right token, 32 bytes long!!";
        let cfg = limited(srv, None, Access::ReadWrite, Some(right));
        for given in [None, Some(&b"the wrong token, 32 bytes long!!"[..])] {
            for req in [put.clone(), get.clone()] {
                let (reply, log) = ask(cfg.clone(), req, given).await;
                assert_eq!(reply.status, Status::AccessDenied, "{given:?}");
                assert_eq!(reply.msg, crate::ops::access::DENIED);
                assert!(log.contains("access denied"), "{log}");
            }
        }
        let (reply, _) = ask(cfg.clone(), get.clone(), Some(right)).await;
        assert!(reply.is_ok() && reply.size == 7, "{reply:?}");
        // Through the client functions, with the token.
        let cli_dir = tmpdir("accessc");
        let src = cli_dir.path().join("src");
        std::fs::write(&src, b"uploaded").unwrap();
        let tok = AccessToken::new(right.to_vec()).unwrap();
        let (mut r, mut w, server) = connect_with(cfg.clone());
        client_put(
            &mut r,
            &mut w,
            &src,
            &FileName::new("up").unwrap(),
            Some(&tok),
            None,
            |_| {},
        )
        .await
        .unwrap();
        server.await.unwrap().unwrap();
        assert_eq!(std::fs::read(srv.join("up")).unwrap(), b"uploaded");
        let (mut r, mut w, server) = connect_with(cfg);
        let err = client_put(
            &mut r,
            &mut w,
            &src,
            &FileName::new("up2").unwrap(),
            None,
            None,
            |_| {},
        )
        .await
        .unwrap_err();
        assert!(format!("{err:#}").contains("access denied"), "{err:#}");
        assert!(server.await.unwrap().is_err());
        assert!(!srv.join("up2").exists());
    }

    #[tokio::test]
    async fn names_the_decoder_refuses_get_the_bad_name_status() {
        let srv_dir = tmpdir("wirenames");
        let srv = srv_dir.path();
        let long = "x".repeat(300);
        let cases: Vec<Vec<u8>> = vec![
            // Over 255 bytes (PUT and GET).
            Request::Put {
                name: long.clone(),
                size: 1,
            }
            .encode(),
            Request::Get { name: long }.encode(),
            // Not UTF-8.
            b"nAP3\x02\x00\x02\xff\xfe".to_vec(),
            // Length 0xffff (the name itself never comes).
            b"nAP3\x01\xff\xff".to_vec(),
        ];
        for raw in cases {
            let (mut r, mut w, server) = connect(srv, false);
            w.write_msg(raw.clone()).await.unwrap();
            let reply = r.read_reply().await.unwrap();
            assert_eq!(reply.status, Status::BadName, "{raw:?}: {reply:?}");
            assert!(reply.msg.contains("file name"), "{reply:?}");
            let err = format!("{:#}", server.await.unwrap().unwrap_err());
            assert_eq!(err.matches("file name").count(), 1, "said once: {err}");
        }
        // An unknown operation is refused with a reason, too.
        let (mut r, mut w, server) = connect(srv, false);
        w.write_msg(b"nAP3\x09".to_vec()).await.unwrap();
        let reply = r.read_reply().await.unwrap();
        assert_eq!(reply.status, Status::Refused);
        assert!(
            reply.msg.contains("unknown request operation 9"),
            "{reply:?}"
        );
        assert!(server.await.unwrap().is_err());
        assert!(entries(srv).is_empty());
    }

    #[tokio::test]
    async fn an_early_close_is_reported_once() {
        let srv_dir = tmpdir("early");
        let (r, w, server) = connect(srv_dir.path(), false);
        drop((r, w));
        let err = format!("{:#}", server.await.unwrap().unwrap_err());
        assert_eq!(
            err,
            "reading the request: connection closed while waiting for the request"
        );
    }
}
