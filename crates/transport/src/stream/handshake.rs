//! Driving nena-proto's sans-IO handshake over async streams with a deadline (one loop for
//! both sides), and turning the session into a [`SecureReader`]/[`SecureWriter`] pair.

use crate::error::{Doing, During, Error, Result, Timeout};
use crate::stream::{SecureReader, SecureWriter, BULK_BUF};
use nena_proto::{
    ClientHandshake, HandshakeError, Progress, RejectReason, ServerConfig, ServerHandshake, Session,
};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use zeroize::Zeroizing;

/// Fresh bytes from the operating system's random number generator.
pub fn random<const N: usize>() -> Result<[u8; N]> {
    let mut e = [0u8; N];
    getrandom::fill(&mut e)?;
    Ok(e)
}

/// Fresh entropy for a client hello.
pub fn entropy() -> Result<[u8; nena_proto::ENTROPY_LEN]> {
    random()
}

/// What feeding a state machine gives: progress towards (bytes to write, session), or an
/// error with the reply to send before closing, if any.
type Fed = Result<Progress<(Vec<u8>, Session)>, (Option<Vec<u8>>, HandshakeError)>;

/// The two sides' state machines as the driver sees them: feed input, get the bytes to
/// write and the session, or an error with (maybe) a reply to send before closing.
trait Side {
    /// Which message is awaited, for errors.
    const AWAITED: &'static str;
    fn feed(&mut self, input: &[u8]) -> Fed;
    fn eof(&mut self) -> HandshakeError;
}

impl Side for ClientHandshake {
    const AWAITED: &'static str = "the server's nena answer";
    fn feed(&mut self, input: &[u8]) -> Fed {
        self.read(input).map_err(|e| (None, e))
    }
    fn eof(&mut self) -> HandshakeError {
        ClientHandshake::eof(self)
    }
}

impl Side for ServerHandshake {
    const AWAITED: &'static str = "the client's nena hello";
    fn feed(&mut self, input: &[u8]) -> Fed {
        self.read(input).map_err(|r| (r.reply, r.error))
    }
    fn eof(&mut self) -> HandshakeError {
        ServerHandshake::eof(self)
    }
}

/// What [`drive`] returns: the session, the bytes read past the peer's message (session
/// data, still protected), and the bytes to send (the server's answer, the client's key
/// confirmation; not yet written).
type Driven = (Session, Vec<u8>, Vec<u8>);

/// Reads the peer's handshake message and returns what the state machine says: the session,
/// the bytes read past the message, and what to write (left to the caller). A refusal with
/// its reason is written here, before the error is returned.
async fn drive<H: Side, R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    hs: &mut H,
    r: &mut R,
    w: &mut W,
) -> Result<Driven, Error> {
    // Holds the hello's secrets (kato keys, r_c) on the server: wiped on every way out.
    let mut buf = Zeroizing::new([0u8; 1024]);
    loop {
        let n = r.read(&mut buf[..]).await.during(Doing::ReadingHandshake {
            awaited: H::AWAITED,
        })?;
        if n == 0 {
            return Err(hs.eof().into());
        }
        let mut input = &buf[..n];
        while !input.is_empty() {
            match hs.feed(input) {
                Ok(Progress::NeedMore { consumed }) => input = &input[consumed..],
                Ok(Progress::Done {
                    consumed,
                    value: (out, session),
                }) => return Ok((session, input[consumed..].to_vec(), out)),
                Err((reply, error)) => {
                    if let Some(reply) = reply {
                        let _ = w.write_all(&reply).await;
                        let _ = w.shutdown().await;
                    }
                    return Err(error.into());
                }
            }
        }
    }
}

/// Reads the server's answer to a hello already written, and writes the client's key
/// confirmation (crypto modes). Returns the session and the bytes read past the answer.
pub async fn client_finish<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    hs: &mut ClientHandshake,
    r: &mut R,
    w: &mut W,
    timeout: Duration,
) -> Result<(Session, Vec<u8>), Error> {
    let (session, leftover, confirm) = client_finish_held(hs, r, timeout).await?;
    write_handshake(w, &confirm).await?;
    Ok((session, leftover))
}

/// [`client_finish`] that leaves the key confirmation to the caller: it is returned (empty
/// unless the mode is cryptographic), for the caller to send in front of its first record
/// ([`crate::stream::SecureWriter::queue_raw`]), in one write with it. Nothing is written
/// (the client sends no refusal).
pub async fn client_finish_held<R: AsyncRead + Unpin>(
    hs: &mut ClientHandshake,
    r: &mut R,
    timeout: Duration,
) -> Result<(Session, Vec<u8>, Vec<u8>), Error> {
    let mut nowhere = tokio::io::sink();
    tokio::time::timeout(timeout, drive(hs, r, &mut nowhere))
        .await
        .map_err(|_| Timeout::NenaAnswer { after: timeout })?
}

/// Writes a handshake message (the server's answer, the client's confirmation).
async fn write_handshake<W: AsyncWrite + Unpin>(w: &mut W, out: &[u8]) -> Result<(), Error> {
    w.write_all(out).await.during(Doing::WritingHandshake)
}

/// Runs the server side of the handshake: reads the hello, answers. On a refusal the reason
/// is sent to the client (when the protocol has one) before the error is returned.
pub async fn server_handshake<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    cfg: &ServerConfig,
    r: &mut R,
    w: &mut W,
    timeout: Duration,
) -> Result<(Session, Vec<u8>), Error> {
    let (session, leftover, _) = server_handshake_telling(cfg, r, w, timeout).await?;
    Ok((session, leftover))
}

/// [`server_handshake`] that also tells whether the session resumed an earlier one.
pub async fn server_handshake_telling<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    cfg: &ServerConfig,
    r: &mut R,
    w: &mut W,
    timeout: Duration,
) -> Result<(Session, Vec<u8>, bool), Error> {
    let mut hs = ServerHandshake::new(cfg, random()?);
    let answered = async {
        let (session, leftover, answer) = drive(&mut hs, r, w).await?;
        write_handshake(w, &answer).await?;
        Ok((session, leftover, hs.resumed()))
    };
    tokio::time::timeout(timeout, answered)
        .await
        .map_err(|_| Timeout::NenaHello { after: timeout })?
}

/// Refuses a connection that fell back to plain TCP: reads the client's hello (within
/// `timeout`) and, if the peer speaks nena, answers with a reject that says so
/// ([`RejectReason::FallbackRefused`]) instead of just closing, so that a client that allowed
/// fallback learns why. A peer that is not nena gets nothing, as in [`server_handshake`].
/// The hello is read whole before answering, and the client's end awaited briefly after,
/// so that closing does not reset the connection under the answer.
pub async fn refuse_fallback<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    r: &mut R,
    w: &mut W,
    timeout: Duration,
) {
    let work = async {
        // Accepting no mode: the state machine reads the whole hello, then refuses it.
        let Ok(secret) = random() else { return };
        let mut hs = ServerHandshake::new(&ServerConfig::accepting(&[]), secret);
        let mut buf = Zeroizing::new([0u8; 1024]);
        let speaks_nena = loop {
            let n = match r.read(&mut buf[..]).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            match hs.read(&buf[..n]) {
                Ok(Progress::NeedMore { .. }) => continue,
                // Not reachable while accepting nothing; treat as nena all the same.
                Ok(Progress::Done { .. }) => break true,
                Err(rej) => break rej.reply.is_some(),
            }
        };
        if !speaks_nena {
            return;
        }
        let _ = w
            .write_all(&ServerHandshake::refusal(RejectReason::FallbackRefused))
            .await;
        let _ = w.shutdown().await;
        // Until the client closes (it does once it has read the refusal).
        while let Ok(n) = r.read(&mut buf[..]).await {
            if n == 0 {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(timeout, work).await;
}

/// Splits a session over the two halves of a stream, with buffers of `cap` bytes per
/// direction (`None`: a raw stream, no protection).
pub fn secure_pair_with<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    session: Option<Session>,
    leftover: Vec<u8>,
    r: R,
    w: W,
    cap: usize,
) -> (SecureReader<R>, SecureWriter<W>) {
    let (p, u) = match session.map(Session::split) {
        Some((p, u)) => (Some(p), Some(u)),
        None => (None, None),
    };
    (
        SecureReader::with_capacity(r, u, leftover, cap),
        SecureWriter::with_capacity(w, p, cap),
    )
}

/// [`secure_pair_with`] with the bulk buffer size.
pub fn secure_pair<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    session: Option<Session>,
    leftover: Vec<u8>,
    r: R,
    w: W,
) -> (SecureReader<R>, SecureWriter<W>) {
    secure_pair_with(session, leftover, r, w, BULK_BUF)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nena_proto::{ClientConfig, Mode};

    #[tokio::test]
    async fn handshake_over_a_duplex_and_protected_bytes() {
        for mode in Mode::ALL.iter().copied() {
            let (c, s) = tokio::io::duplex(64 * 1024);
            let (mut cr, mut cw) = tokio::io::split(c);
            let (mut sr, mut sw) = tokio::io::split(s);
            // A tap on the client's bytes: what an observer of the path sees.
            let (tap_w, mut tap_r) = tokio::io::duplex(64 * 1024);
            let server = tokio::spawn(async move {
                let cfg = ServerConfig::accepting(&[mode]).with_key(nena_proto::test_server_key());
                let (sess, left) = server_handshake(&cfg, &mut sr, &mut sw, Duration::from_secs(5))
                    .await
                    .unwrap();
                assert_eq!(sess.mode(), mode);
                let (mut r, _w) = secure_pair(Some(sess), left, sr, sw);
                let mut got = vec![0u8; 100];
                r.read_exact(&mut got).await.unwrap();
                got
            });
            let mut hs =
                ClientHandshake::new(&ClientConfig::offering(&[mode]), entropy().unwrap()).unwrap();
            cw.write_all(hs.first_flight()).await.unwrap();
            let (sess, left) = client_finish(&mut hs, &mut cr, &mut cw, Duration::from_secs(5))
                .await
                .unwrap();
            assert!(left.is_empty());
            let (_r, mut w) = secure_pair(Some(sess), left, cr, Tee(cw, tap_w));
            let plain: Vec<u8> = (0..100u8).collect();
            w.write_all(&plain).await.unwrap();
            w.flush().await.unwrap();
            assert_eq!(server.await.unwrap(), plain, "{mode}");
            drop(w);
            let mut seen = Vec::new();
            tap_r.read_to_end(&mut seen).await.unwrap();
            assert_eq!(
                seen.windows(16).any(|x| plain.windows(16).any(|p| p == x)),
                !mode.is_protected(),
                "{mode}: the bytes on the wire"
            );
        }
    }

    /// Writes to both streams (the second one observes).
    struct Tee<A, B>(A, B);

    impl<A: AsyncWrite + Unpin, B: AsyncWrite + Unpin> AsyncWrite for Tee<A, B> {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            let n = std::task::ready!(std::pin::Pin::new(&mut self.0).poll_write(cx, buf))?;
            // The observer's pipe is large enough for these tests.
            let _ = std::pin::Pin::new(&mut self.1).poll_write(cx, &buf[..n]);
            std::task::Poll::Ready(Ok(n))
        }
        fn poll_flush(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::pin::Pin::new(&mut self.0).poll_flush(cx)
        }
        fn poll_shutdown(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
        }
    }

    #[tokio::test]
    async fn garbage_from_a_server_is_a_clear_error() {
        let (c, s) = tokio::io::duplex(1024);
        let (mut cr, _cw) = tokio::io::split(c);
        let (_sr, mut sw) = tokio::io::split(s);
        sw.write_all(b"SSH-2.0-OpenSSH_9.2\r\n").await.unwrap();
        let mut hs =
            ClientHandshake::new(&ClientConfig::offering(&[Mode::Kato]), entropy().unwrap())
                .unwrap();
        let err = client_finish(
            &mut hs,
            &mut cr,
            &mut tokio::io::sink(),
            Duration::from_secs(5),
        )
        .await
        .unwrap_err();
        assert!(err.to_string().contains("does not speak nena"), "{err}");
    }

    #[tokio::test]
    async fn silent_server_times_out() {
        let (c, _s) = tokio::io::duplex(1024);
        let (mut cr, _cw) = tokio::io::split(c);
        let mut hs =
            ClientHandshake::new(&ClientConfig::offering(&[Mode::Kato]), entropy().unwrap())
                .unwrap();
        let err = client_finish(
            &mut hs,
            &mut cr,
            &mut tokio::io::sink(),
            Duration::from_millis(100),
        )
        .await
        .unwrap_err();
        assert!(err.to_string().contains("no nena answer"), "{err}");
    }

    #[tokio::test]
    async fn a_fallback_refusal_tells_a_nena_client_and_nothing_else() {
        let (c, s) = tokio::io::duplex(4096);
        let (mut cr, mut cw) = tokio::io::split(c);
        let (mut sr, mut sw) = tokio::io::split(s);
        let mut hs =
            ClientHandshake::new(&ClientConfig::offering(&[Mode::Aead]), entropy().unwrap())
                .unwrap();
        cw.write_all(hs.first_flight()).await.unwrap();
        let server = tokio::spawn(async move {
            refuse_fallback(&mut sr, &mut sw, Duration::from_secs(5)).await;
        });
        let err = client_finish(&mut hs, &mut cr, &mut cw, Duration::from_secs(5))
            .await
            .unwrap_err();
        let text = format!("{err:#}");
        assert!(
            text.contains("plain TCP") && text.contains("refuses fallback"),
            "{text}"
        );
        drop((cr, cw));
        server.await.unwrap();
        // Not nena: no answer at all.
        let (c, s) = tokio::io::duplex(4096);
        let (mut cr, mut cw) = tokio::io::split(c);
        let (mut sr, mut sw) = tokio::io::split(s);
        cw.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        refuse_fallback(&mut sr, &mut sw, Duration::from_secs(5)).await;
        drop((sr, sw));
        let mut got = Vec::new();
        cr.read_to_end(&mut got).await.unwrap();
        assert!(got.is_empty(), "{got:?}");
    }

    #[tokio::test]
    async fn server_refuses_http_and_mode_mismatch() {
        let (c, s) = tokio::io::duplex(1024);
        let (_cr, mut cw) = tokio::io::split(c);
        let (mut sr, mut sw) = tokio::io::split(s);
        cw.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        let cfg = ServerConfig::accepting(&[Mode::Kato]);
        let err = server_handshake(&cfg, &mut sr, &mut sw, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("does not speak nena"), "{err}");

        let (c, s) = tokio::io::duplex(1024);
        let (mut cr, mut cw) = tokio::io::split(c);
        let (mut sr, mut sw) = tokio::io::split(s);
        let mut hs =
            ClientHandshake::new(&ClientConfig::offering(&[Mode::Plain]), entropy().unwrap())
                .unwrap();
        cw.write_all(hs.first_flight()).await.unwrap();
        let serr = server_handshake(&cfg, &mut sr, &mut sw, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(serr.to_string().contains("no common mode"), "{serr}");
        let cerr = client_finish(
            &mut hs,
            &mut cr,
            &mut tokio::io::sink(),
            Duration::from_secs(5),
        )
        .await
        .unwrap_err();
        assert!(cerr.to_string().contains("no common mode"), "{cerr}");
    }
}
