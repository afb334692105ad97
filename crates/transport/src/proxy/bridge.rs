//! How a proxy session carries bytes between a plain TCP stream (the application or the
//! target) and a nena session, and how it ends: [`bridge`] relays both directions with
//! half-closes passed on; [`relay`] does it over a TCP stream and resets that stream when
//! the session fails or the proxy stops; [`abort_nena`] ends the nena side of a session a
//! stopping proxy abandons (the abort record in `aead`, then a reset). Used by the proxy
//! client and server in [`crate::proxy`].

use crate::error::ends::{is_shutting_down, ShuttingDown};
use crate::ops::stop::StopSignal;
use crate::stream::copy::{copy_in_slots, copy_out, ReadSlots};
use crate::stream::{SecureReader, SecureWriter};
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a session keeps reading (and dropping) what the other proxy still sends after
/// the plain side went away, waiting for that direction's clean end, before it aborts.
pub const DRAIN_AFTER_PLAIN_RESET: Duration = Duration::from_secs(5);

/// How a bridged session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bridged {
    /// Bytes plain -> nena.
    pub up: u64,
    /// Bytes nena -> plain.
    pub down: u64,
    /// The plain peer reset or closed its socket under data still due to it (an
    /// application that closes without reading the rest, as iperf3 does at the end of a
    /// test). Not a failure of the proxy: the nena session still ended cleanly.
    pub plain_gone: bool,
    /// Both directions ended with a flow-end record ([`Ending::Flow`]): the session may
    /// carry the client's next flow.
    pub flow_ended: bool,
}

/// How a relayed flow ends its direction of the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The closing record (in `aead`), then the transport's FIN: the session ends with the
    /// flow.
    Session,
    /// The flow-end record (`aead`, a session reused flow after flow, wire `OP_REUSE`): the
    /// session stays for the next flow.
    Flow,
}

/// An error of the plain side's own socket (not of the nena session), tagged so the bridge
/// can tell who failed.
#[derive(Debug)]
struct PlainSide(std::io::Error);

impl std::fmt::Display for PlainSide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for PlainSide {}

fn tag(e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), PlainSide(e))
}

/// The plain peer is gone (reset, or closed under our writes): the application's choice,
/// handled as an end, not as a failure of the session.
fn plain_peer_gone(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    e.get_ref().is_some_and(|i| i.is::<PlainSide>())
        && matches!(
            e.kind(),
            ConnectionReset | BrokenPipe | NotConnected | ConnectionAborted
        )
}

/// A plain stream whose errors are tagged [`PlainSide`].
struct Tagged<T>(T);

impl<T: AsyncRead + Unpin> AsyncRead for Tagged<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf).map_err(tag)
    }
}

impl<T: ReadSlots> ReadSlots for Tagged<T> {
    fn poll_read_slots(
        &mut self,
        cx: &mut std::task::Context<'_>,
        bufs: &mut [std::io::IoSliceMut<'_>],
    ) -> Poll<std::io::Result<usize>> {
        self.0.poll_read_slots(cx, bufs).map_err(tag)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Tagged<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf).map_err(tag)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0)
            .poll_write_vectored(cx, bufs)
            .map_err(tag)
    }
    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }
    fn poll_flush(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx).map_err(tag)
    }
    fn poll_shutdown(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx).map_err(tag)
    }
}

/// Relays both directions between a plain stream and a nena session until both ended.
///
/// Each direction ends the way it ended on its source: a clean end (FIN, or `aead`'s closing
/// record) is passed on as a clean end (half-close), so either side may keep sending after
/// the other finished. When the plain peer goes away (a reset, or writes to a socket it
/// closed), that is the application's end, not a failure: the nena direction toward it is
/// read to its clean end and dropped (for at most [`DRAIN_AFTER_PLAIN_RESET`]) and the other
/// is ended cleanly, so the other proxy sees clean ends too. Any other error (the nena
/// session failed: an integrity failure, a truncated `aead` stream) ends the session with
/// that error; [`relay`] then resets the plain TCP side. With [`Ending::Flow`] the nena
/// direction ends with the flow-end record instead (the session goes on), and a flow-end
/// record from the other proxy ends the direction toward the plain side as a closing
/// record does.
pub async fn bridge<PR, PW, SR, SW>(
    plain_r: PR,
    plain_w: PW,
    sec_r: &mut SecureReader<SR>,
    sec_w: &mut SecureWriter<SW>,
    ending: Ending,
) -> std::io::Result<Bridged>
where
    PR: ReadSlots,
    PW: AsyncWrite + Unpin,
    SR: AsyncRead + Unpin,
    SW: AsyncWrite + Unpin,
{
    let (mut plain_r, mut plain_w) = (Tagged(plain_r), Tagged(plain_w));
    let up = async {
        let mut n = 0u64;
        let gone = match copy_in_slots(&mut plain_r, sec_w, u64::MAX, |b| n += b.len() as u64).await
        {
            Ok(_) => false,
            Err(e) if plain_peer_gone(&e) => true,
            Err(e) => return Err(e),
        };
        match ending {
            Ending::Session => sec_w.shutdown().await?,
            Ending::Flow => sec_w.end_flow().await?,
        }
        Ok::<_, std::io::Error>((n, gone))
    };
    let down = async {
        let mut n = 0u64;
        let copied = copy_out(sec_r, &mut plain_w, u64::MAX, |b| n += b.len() as u64).await;
        let gone = match copied {
            Ok(_) => match plain_w.shutdown().await {
                Ok(()) => false,
                Err(e) if plain_peer_gone(&e) => true,
                Err(e) => return Err(e),
            },
            Err(e) if plain_peer_gone(&e) => {
                // Nobody reads any more: take the rest off the session up to its clean end
                // (it is still checked), and drop it.
                let mut sink = tokio::io::sink();
                let rest = copy_out(sec_r, &mut sink, u64::MAX, |_| {});
                match tokio::time::timeout(DRAIN_AFTER_PLAIN_RESET, rest).await {
                    Ok(r) => {
                        r?;
                    }
                    Err(_) => {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            format!(
                                "the plain side went away ({e}) and the other proxy kept \
                                 sending for {}s; aborting",
                                DRAIN_AFTER_PLAIN_RESET.as_secs()
                            ),
                        ))
                    }
                }
                true
            }
            Err(e) => return Err(e),
        };
        Ok::<_, std::io::Error>((n, gone))
    };
    let ((up, gone_up), (down, gone_down)) = tokio::try_join!(up, down)?;
    Ok(Bridged {
        up,
        down,
        plain_gone: gone_up || gone_down,
        flow_ended: ending == Ending::Flow && sec_r.flow_ended() && sec_w.flow_ended(),
    })
}

/// [`bridge`] over a plain TCP connection: on failure the TCP side is reset (RST).
pub(crate) async fn relay<SR, SW>(
    plain: TcpStream,
    sec_r: &mut SecureReader<SR>,
    sec_w: &mut SecureWriter<SW>,
    ending: Ending,
    stop: &StopSignal,
) -> std::io::Result<Bridged>
where
    SR: AsyncRead + Unpin,
    SW: AsyncWrite + Unpin,
{
    plain.set_nodelay(true)?;
    let (mut pr, mut pw) = plain.into_split();
    let result = tokio::select! {
        r = bridge(&mut pr, &mut pw, sec_r, sec_w, ending) => r,
        _ = stop.stopped() => Err(std::io::Error::other(ShuttingDown)),
    };
    if result.is_err() {
        // SO_LINGER 0, then close the socket whole: a reset, which the application reads as
        // an error. (Dropping the write half alone would send a FIN first: a clean end.)
        if let Ok(tcp) = pr.reunite(pw) {
            let _ = tcp.set_zero_linger();
        }
    }
    result
}

/// Whether `relayed` ended in [`ShuttingDown`].
pub(crate) fn stopped(relayed: &std::io::Result<Bridged>) -> bool {
    relayed.as_ref().is_err_and(is_shutting_down)
}

/// How long a session aborted by a stopping proxy waits for the other proxy to take its
/// abort notice (within the [`crate::conn::ABORT_NOTICE`] the proxy gives all of them).
const TELL_PEER: Duration = Duration::from_millis(400);

/// Ends the nena side of a session the stopping proxy abandons, never cleanly (a clean end
/// would let the other proxy, in `stream` or `kato` mode, end its plain side as if the
/// stream were complete). `aead`: the abort record tells the other proxy why (it logs "the
/// peer aborted the session: it is shutting down" and resets its application's
/// connection); the peer's bytes are read and dropped until it closes, at most
/// [`TELL_PEER`], so that the reset below cannot discard the notice. The other modes have
/// no room for a message: the reset alone. The reset is SO_LINGER 0 with the write half
/// given up without the shutdown its drop would do; it comes when the socket's last
/// descriptor closes, with the rest of the session.
pub(crate) async fn abort_nena<R: AsyncRead + Unpin, W: crate::conn::halves::SessionSocket>(
    reader: &mut SecureReader<R>,
    mut writer: SecureWriter<W>,
) {
    let told = tokio::time::timeout(TELL_PEER, async {
        if !writer
            .abort(nena_proto::AbortReason::ShuttingDown)
            .await
            .unwrap_or(false)
        {
            return false;
        }
        let mut sink = tokio::io::sink();
        let _ = copy_out(reader, &mut sink, u64::MAX, |_| {}).await;
        true
    })
    .await;
    log::debug!(
        "session aborted; the peer {}",
        match told {
            Ok(true) => "was told why and closed",
            Ok(false) => "cannot be told why in this mode: reset",
            Err(_) => "was told why but did not close in time: reset",
        }
    );
    writer.into_inner().reset();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::stop::StopSignal;
    use crate::stream::handshake::secure_pair;
    #[allow(unused_imports)]
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    /// Two proxies' nena halves joined back to back in memory, with kato-like protection
    /// replaced by raw (protection is tested elsewhere); checks both directions and half-close.
    #[tokio::test]
    async fn bridge_carries_both_directions_and_half_close() {
        // app <-> [bridge A] <-> secure link <-> [bridge B] <-> target
        let (app, a_plain) = tokio::io::duplex(4096);
        let (a_sec, b_sec) = tokio::io::duplex(4096);
        let (b_plain, target) = tokio::io::duplex(4096);
        let a = tokio::spawn(async move {
            let (sr, sw) = tokio::io::split(a_sec);
            let (mut r, mut w) = secure_pair(None, Vec::new(), sr, sw);
            let (pr, pw) = tokio::io::split(a_plain);
            bridge(pr, pw, &mut r, &mut w, Ending::Session)
                .await
                .unwrap()
        });
        let b = tokio::spawn(async move {
            let (sr, sw) = tokio::io::split(b_sec);
            let (mut r, mut w) = secure_pair(None, Vec::new(), sr, sw);
            let (pr, pw) = tokio::io::split(b_plain);
            bridge(pr, pw, &mut r, &mut w, Ending::Session)
                .await
                .unwrap()
        });
        // Target: read everything until EOF, then answer with its reverse and close.
        let t = tokio::spawn(async move {
            let (mut tr, mut tw) = tokio::io::split(target);
            let mut got = Vec::new();
            tr.read_to_end(&mut got).await.unwrap();
            let answer: Vec<u8> = got.iter().rev().copied().collect();
            tw.write_all(&answer).await.unwrap();
            tw.shutdown().await.unwrap();
            got.len()
        });
        let (mut ar, mut aw) = tokio::io::split(app);
        let msg: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        aw.write_all(&msg).await.unwrap();
        aw.shutdown().await.unwrap(); // half-close: the answer must still arrive
        let mut back = Vec::new();
        ar.read_to_end(&mut back).await.unwrap();
        let expect: Vec<u8> = msg.iter().rev().copied().collect();
        assert_eq!(back, expect);
        assert_eq!(t.await.unwrap(), msg.len());
        let ends = |up, down| Bridged {
            up,
            down,
            plain_gone: false,
            flow_ended: false,
        };
        assert_eq!(a.await.unwrap(), ends(100_000, 100_000));
        assert_eq!(b.await.unwrap(), ends(100_000, 100_000));
    }

    /// A nena side that ends without its closing record (a forged FIN on the way) must not
    /// look like a clean end to the application: the proxy resets the TCP connection.
    #[tokio::test]
    async fn a_truncated_aead_stream_resets_the_plain_side() {
        let nena_proto::Exchange {
            client: cs,
            server: ss,
            confirm,
            ..
        } = nena_proto::exchange_in(nena_proto::Mode::Aead);
        // The proxy's nena side: the client's records arrive, then the stream just ends.
        let (mut peer, ours) = tokio::io::duplex(1 << 16);
        let (_unused, peer_w) = tokio::io::duplex(16);
        peer.write_all(&confirm).await.unwrap();
        let mut w = crate::stream::SecureWriter::new(peer, Some(cs.split().0));
        w.write_all(b"first part of the answer").await.unwrap();
        w.flush().await.unwrap();
        drop(w); // no closing record
        let (sr, _) = tokio::io::split(ours);
        let (_, sw) = tokio::io::split(peer_w);
        let (mut r, mut sw) = secure_pair(Some(ss), Vec::new(), sr, sw);

        // The plain side: an application on loopback.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut s = TcpStream::connect(addr).await.unwrap();
        let app = tokio::spawn(async move {
            let mut got = Vec::new();
            let end = s.read_to_end(&mut got).await;
            (got, end)
        });
        let (plain, _) = listener.accept().await.unwrap();
        let err = relay(
            plain,
            &mut r,
            &mut sw,
            Ending::Session,
            &StopSignal::never(),
        )
        .await
        .unwrap_err();
        assert!(
            err.to_string().contains("without its closing record"),
            "{err}"
        );
        let (got, end) = app.await.unwrap();
        assert_eq!(got, b"first part of the answer");
        let e = end.expect_err("the application must see an error, not a clean end");
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}");
    }

    /// An application that closes its socket without reading the rest (iperf3 at the end of
    /// a test): the session ends cleanly, the rest is taken off the nena side and dropped,
    /// and the nena side is ended cleanly too (no reset toward the other proxy).
    #[tokio::test]
    async fn an_application_that_closes_without_reading_ends_the_session_cleanly() {
        // The other proxy: sends 1 MiB, then its clean end; reads what we send until our end.
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let (sr, sw) = tokio::io::split(ours);
        let (mut r, mut w) = secure_pair(None, Vec::new(), sr, sw);
        let other = tokio::spawn(async move {
            let (tr, tw) = tokio::io::split(theirs);
            let (mut tr, mut tw) = secure_pair(None, Vec::new(), tr, tw);
            let data = vec![7u8; 1 << 20];
            let send = async {
                tw.write_all(&data).await?;
                tw.shutdown().await
            };
            let mut got = Vec::new();
            let recv = tr.read_to_end(&mut got);
            let (s, g) = tokio::join!(send, recv);
            (s, g.map(|_| got))
        });
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut app = TcpStream::connect(addr).await.unwrap();
        let (plain, _) = listener.accept().await.unwrap();
        app.write_all(b"request").await.unwrap();
        drop(app); // closed whole, nothing read
        let b = relay(plain, &mut r, &mut w, Ending::Session, &StopSignal::never())
            .await
            .expect("a clean end");
        assert!(b.plain_gone, "{b:?}");
        assert_eq!(b.up, 7);
        let (sent, got) = other.await.unwrap();
        sent.expect("the other proxy's data was taken off the session");
        assert_eq!(got.unwrap(), b"request", "our side ended cleanly");
    }
}
