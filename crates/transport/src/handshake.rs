//! Driving nena-proto's sans-IO handshake over async streams, with a deadline, and turning
//! the result into a [`SecureReader`]/[`SecureWriter`] pair.

use crate::stream::{SecureReader, SecureWriter};
use anyhow::{anyhow, Context, Result};
use nena_proto::{ClientHandshake, Progress, ServerConfig, ServerHandshake, Session};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Fresh entropy for a client hello, from the operating system.
pub fn entropy() -> Result<[u8; nena_proto::ENTROPY_LEN]> {
    let mut e = [0u8; nena_proto::ENTROPY_LEN];
    getrandom::fill(&mut e).map_err(|e| anyhow!("no randomness from the operating system: {e}"))?;
    Ok(e)
}

/// Read the server's answer to a hello already written. Returns the session and the bytes
/// read past the answer (session data, still protected).
pub async fn client_finish<R: AsyncRead + Unpin>(
    hs: &mut ClientHandshake,
    r: &mut R,
    timeout: Duration,
) -> Result<(Session, Vec<u8>)> {
    let work = async {
        let mut buf = [0u8; 1024];
        loop {
            let n = r
                .read(&mut buf)
                .await
                .context("reading the server's nena answer")?;
            if n == 0 {
                return Err(anyhow::Error::new(hs.eof()));
            }
            let mut input = &buf[..n];
            loop {
                match hs.read(input)? {
                    Progress::NeedMore { consumed } => {
                        input = &input[consumed..];
                        if input.is_empty() {
                            break;
                        }
                    }
                    Progress::Done { consumed, value } => {
                        return Ok((value, input[consumed..].to_vec()))
                    }
                }
            }
        }
    };
    tokio::time::timeout(timeout, work).await.map_err(|_| {
        anyhow!(
            "no nena answer from the server within {:.1}s: is it a nena server?",
            timeout.as_secs_f64()
        )
    })?
}

/// Run the server side of the handshake: read the hello, answer. On a refusal the reason is
/// sent to the client (when the protocol has one) before the error is returned.
pub async fn server_handshake<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    cfg: &ServerConfig,
    r: &mut R,
    w: &mut W,
    timeout: Duration,
) -> Result<(Session, Vec<u8>)> {
    let mut hs = ServerHandshake::new(cfg);
    let work = async {
        let mut buf = [0u8; 1024];
        loop {
            let n = r
                .read(&mut buf)
                .await
                .context("reading the client's nena hello")?;
            if n == 0 {
                return Err(anyhow::Error::new(hs.eof()));
            }
            let mut input = &buf[..n];
            loop {
                match hs.read(input) {
                    Ok(Progress::NeedMore { consumed }) => {
                        input = &input[consumed..];
                        if input.is_empty() {
                            break;
                        }
                    }
                    Ok(Progress::Done {
                        consumed,
                        value: (reply, session),
                    }) => {
                        w.write_all(&reply)
                            .await
                            .context("writing the nena answer")?;
                        return Ok((session, input[consumed..].to_vec()));
                    }
                    Err(rejected) => {
                        if let Some(reply) = rejected.reply {
                            let _ = w.write_all(&reply).await;
                            let _ = w.shutdown().await;
                        }
                        return Err(anyhow::Error::new(rejected.error));
                    }
                }
            }
        }
    };
    tokio::time::timeout(timeout, work).await.map_err(|_| {
        anyhow!(
            "no complete nena hello within {:.1}s",
            timeout.as_secs_f64()
        )
    })?
}

/// Split a session over the two halves of a stream.
pub fn secure_pair<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    session: Option<Session>,
    leftover: Vec<u8>,
    r: R,
    w: W,
) -> (SecureReader<R>, SecureWriter<W>) {
    match session {
        Some(s) => {
            let (p, u) = s.split();
            (
                SecureReader::new(r, Some(u), leftover),
                SecureWriter::new(w, Some(p)),
            )
        }
        None => (
            SecureReader::new(r, None, leftover),
            SecureWriter::new(w, None),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nena_proto::{ClientConfig, Mode};

    #[tokio::test]
    async fn handshake_over_a_duplex_and_protected_bytes() {
        let (c, s) = tokio::io::duplex(64 * 1024);
        let (mut cr, mut cw) = tokio::io::split(c);
        let (mut sr, mut sw) = tokio::io::split(s);
        let server = tokio::spawn(async move {
            let cfg = ServerConfig {
                accept: vec![Mode::Kato],
            };
            let (sess, left) = server_handshake(&cfg, &mut sr, &mut sw, Duration::from_secs(5))
                .await
                .unwrap();
            assert_eq!(sess.mode(), Mode::Kato);
            let (mut r, _w) = secure_pair(Some(sess), left, sr, sw);
            let mut got = vec![0u8; 100];
            r.read_exact(&mut got).await.unwrap();
            got
        });
        let mut hs = ClientHandshake::new(
            &ClientConfig {
                offer: vec![Mode::Kato],
            },
            entropy().unwrap(),
        )
        .unwrap();
        cw.write_all(hs.first_flight()).await.unwrap();
        let (sess, left) = client_finish(&mut hs, &mut cr, Duration::from_secs(5))
            .await
            .unwrap();
        assert!(left.is_empty());
        let (_r, mut w) = secure_pair(Some(sess), left, cr, cw);
        let plain: Vec<u8> = (0..100u8).collect();
        let mut buf = plain.clone();
        w.write_all(&mut buf).await.unwrap();
        assert_ne!(buf, plain, "kato must change the bytes on the wire");
        assert_eq!(server.await.unwrap(), plain);
    }

    #[tokio::test]
    async fn garbage_from_a_server_is_a_clear_error() {
        let (c, s) = tokio::io::duplex(1024);
        let (mut cr, _cw) = tokio::io::split(c);
        let (_sr, mut sw) = tokio::io::split(s);
        sw.write_all(b"SSH-2.0-OpenSSH_9.2\r\n").await.unwrap();
        let mut hs = ClientHandshake::new(
            &ClientConfig {
                offer: vec![Mode::Kato],
            },
            entropy().unwrap(),
        )
        .unwrap();
        let err = client_finish(&mut hs, &mut cr, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("does not speak nena"), "{err}");
    }

    #[tokio::test]
    async fn silent_server_times_out() {
        let (c, _s) = tokio::io::duplex(1024);
        let (mut cr, _cw) = tokio::io::split(c);
        let mut hs = ClientHandshake::new(
            &ClientConfig {
                offer: vec![Mode::Kato],
            },
            entropy().unwrap(),
        )
        .unwrap();
        let err = client_finish(&mut hs, &mut cr, Duration::from_millis(100))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no nena answer"), "{err}");
    }

    #[tokio::test]
    async fn server_refuses_http_and_mode_mismatch() {
        let (c, s) = tokio::io::duplex(1024);
        let (_cr, mut cw) = tokio::io::split(c);
        let (mut sr, mut sw) = tokio::io::split(s);
        cw.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        let cfg = ServerConfig {
            accept: vec![Mode::Kato],
        };
        let err = server_handshake(&cfg, &mut sr, &mut sw, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("does not speak nena"), "{err}");

        let (c, s) = tokio::io::duplex(1024);
        let (mut cr, mut cw) = tokio::io::split(c);
        let (mut sr, mut sw) = tokio::io::split(s);
        let mut hs = ClientHandshake::new(
            &ClientConfig {
                offer: vec![Mode::Plain],
            },
            entropy().unwrap(),
        )
        .unwrap();
        cw.write_all(hs.first_flight()).await.unwrap();
        let serr = server_handshake(&cfg, &mut sr, &mut sw, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(serr.to_string().contains("no common mode"), "{serr}");
        let cerr = client_finish(&mut hs, &mut cr, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(cerr.to_string().contains("no common mode"), "{cerr}");
    }
}
