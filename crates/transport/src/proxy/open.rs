//! The proxy client's side of a session's opening: the nena session, the open request (with
//! the first application bytes of a `--forward` or redirected session, [`FirstFlight`]) and the server's
//! reply, tried again with a new session when the server found the opening altered
//! (docs/investigations/kernel-41-bytes).

use crate::conn::{self, ClientOptions};
use crate::error::{Doing, During, Error, ProxyFault, Timeout};
use crate::ops::metrics::Tally;
use crate::proxy::ends::Refused;
use crate::proxy::socks::{Rep, Target};
use crate::wire::plane::{PlaneAnswer, PlaneOffer};
use crate::wire::{ConnectRequest, Service};
use nena_proto::{AbortReason, SessionError};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

/// Writes the session's [`ConnectRequest`] for `target` (`None`: the server's `--forward`
/// target), with the client's access token when it has one, under the session's
/// application MAC, and `first` (the application's first bytes of a `--forward` or redirected session)
/// behind it: with the key confirmation the writer holds, they leave in one `write()`, and
/// in `aead` in one record (`first` is at most [`FIRST_FLIGHT`] bytes).
async fn send_open(
    c: &mut conn::ClientConn,
    target: Option<&Target>,
    service: Service,
    offer: Option<&PlaneOffer>,
    reuse: bool,
    first: &[u8],
    opts: &ClientOptions,
) -> std::io::Result<()> {
    let req = ConnectRequest {
        target: target.cloned(),
        token: opts.token.clone(),
        service,
        plane: offer.cloned(),
        reuse,
    };
    let req = req.encode_tagged(c.writer.app_mac_key());
    c.writer.write_all(&req).await?;
    c.writer.write_all(first).await?;
    c.writer.flush().await
}

/// Sessions [`open_to`] opens at most for one application connection, when the proxy server
/// found the opening altered.
const OPEN_ATTEMPTS: usize = 3;

/// The application's bytes a `--forward` or redirected opening carries at most: with the open request,
/// one `aead` record.
const FIRST_FLIGHT: usize = nena_proto::record::MAX_PAYLOAD - 1024;

/// The application's first bytes of a `--forward` or redirected session (`nena run`, the
/// gateway: the application does not wait for a reply before it sends): what it has sent by the time the
/// first session is open, read once without waiting (at most [`FIRST_FLIGHT`] bytes), and
/// sent with the open request of every attempt. Nothing else of the application's leaves
/// before the server's reply, so a retried opening repeats all of it and nothing more.
pub(crate) struct FirstFlight<'a> {
    plain: &'a TcpStream,
    bytes: Option<Vec<u8>>,
}

impl<'a> FirstFlight<'a> {
    /// Nothing read yet from `plain`.
    pub(crate) fn new(plain: &'a TcpStream) -> Self {
        FirstFlight { plain, bytes: None }
    }

    fn take(&mut self) -> std::io::Result<&[u8]> {
        if self.bytes.is_none() {
            let mut b = Vec::with_capacity(FIRST_FLIGHT);
            while b.len() < FIRST_FLIGHT {
                match self.plain.try_read_buf(&mut b) {
                    // The application's end (read again, as the end, by the relay).
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e),
                }
            }
            b.shrink_to_fit();
            self.bytes = Some(b);
        }
        Ok(self.bytes.as_deref().unwrap_or_default())
    }

    /// The bytes read (0 before the first attempt).
    pub(crate) fn len(&self) -> u64 {
        self.bytes.as_ref().map_or(0, |b| b.len() as u64)
    }
}

/// Opens a nena session and asks the proxy server for `target` (wire op 4; `None`: its
/// `--forward` target, op 5, with the application's `first` bytes). On failure, the SOCKS
/// reply code the application is owed and why. When the server tells us that the opening
/// arrived altered ([`AbortReason::Altered`]: nothing was connected, and nothing of the
/// application's beyond `first` has been sent), it tries again with a new session and new
/// keys: a kernel that misplaces a new subflow's first bytes (docs/investigations/kernel-41-bytes)
/// costs the application nothing, and an attacker who alters the bytes gains nothing by it
/// but the retries. With the session, whether the server reuses it for the next flow
/// ([`crate::wire::OP_REUSE`]: the flow then ends with flow-end records, and the session
/// is given back to `opts.warm`).
pub(crate) async fn open_to(
    target: Option<&Target>,
    first: Option<&mut FirstFlight<'_>>,
    opts: &ClientOptions,
    connecting: &Semaphore,
    tally: &Tally,
) -> std::result::Result<Opened, (Rep, Error)> {
    open_with(
        target,
        Service::Stream,
        None,
        first,
        opts,
        connecting,
        tally,
    )
    .await
}

/// [`open_to`] for a session of `service`: DNS (op 6) or datagrams (op 7), no target.
pub(crate) async fn open_service(
    service: Service,
    opts: &ClientOptions,
    connecting: &Semaphore,
    tally: &Tally,
) -> std::result::Result<conn::ClientConn, (Rep, Error)> {
    open_with(None, service, None, None, opts, connecting, tally)
        .await
        .map(|o| o.c)
}

/// [`open_service`] for datagrams with the offer of the datagram plane (op 8): the session
/// and the server's answer. A server older than op 8 closes the session without a reply:
/// the error then was [`Doing::AwaitingPlaneAnswer`] (the caller opens an op 7 session
/// instead).
pub(crate) async fn open_plane(
    offer: &PlaneOffer,
    opts: &ClientOptions,
    connecting: &Semaphore,
    tally: &Tally,
) -> std::result::Result<(conn::ClientConn, PlaneAnswer), (Rep, Error)> {
    let Opened { c, plane, .. } = open_with(
        None,
        Service::Datagram,
        Some(offer),
        None,
        opts,
        connecting,
        tally,
    )
    .await?;
    match plane {
        Some(a) => Ok((c, a)),
        None => Err((
            Rep::GeneralFailure,
            Error::Internal("an op 8 opening without the plane's answer"),
        )),
    }
}

/// A session opened for a flow and the server's answer.
pub(crate) struct Opened {
    pub(crate) c: conn::ClientConn,
    /// The datagram plane's answer (op 8).
    pub(crate) plane: Option<PlaneAnswer>,
    /// The server reuses the session flow after flow (`OP_REUSE`, asked for and answered).
    pub(crate) reuse: bool,
}

async fn open_with(
    target: Option<&Target>,
    service: Service,
    offer: Option<&PlaneOffer>,
    mut first: Option<&mut FirstFlight<'_>>,
    opts: &ClientOptions,
    connecting: &Semaphore,
    tally: &Tally,
) -> std::result::Result<Opened, (Rep, Error)> {
    let mut attempt = 1;
    loop {
        match open_once(
            target,
            service,
            offer,
            first.as_deref_mut(),
            opts,
            connecting,
            tally,
        )
        .await
        {
            Err((_, e)) if attempt < OPEN_ATTEMPTS && server_found_altered(&e) => {
                attempt += 1;
                tally.retried_opening();
                let again = match first.as_deref() {
                    Some(f) if f.len() > 0 => {
                        format!(", with the application's first {} bytes again", f.len())
                    }
                    _ => String::new(),
                };
                log::warn!(
                    "{e:#}; trying again with a new session ({attempt} of {OPEN_ATTEMPTS}){again}"
                );
            }
            other => return other,
        }
    }
}

/// Whether `e` is the proxy server's abort record saying that what we sent arrived altered.
fn server_found_altered(e: &Error) -> bool {
    matches!(
        e.kind(),
        Error::Session(SessionError::PeerAborted {
            reason: AbortReason::Altered
        })
    )
}

/// One attempt of [`open_to`].
async fn open_once(
    target: Option<&Target>,
    service: Service,
    offer: Option<&PlaneOffer>,
    first: Option<&mut FirstFlight<'_>>,
    opts: &ClientOptions,
    connecting: &Semaphore,
    tally: &Tally,
) -> std::result::Result<Opened, (Rep, Error)> {
    let what = match (service, target) {
        (Service::Dns, _) => "DNS".to_string(),
        (Service::Datagram, _) => "datagrams".to_string(),
        (Service::Stream, Some(t)) => t.to_string(),
        (Service::Stream, None) => "the --forward target".to_string(),
    };
    let mut first = first;
    // A session opened ahead, when the proxy keeps some (`nena gateway --warm`); if it turns
    // out to be gone (its server gave up waiting), a new one in the flow's path.
    let mut ahead = opts.warm.as_ref();
    loop {
        let taken = ahead.and_then(|w| w.take(opts));
        let from_pool = taken.is_some();
        let mut c = match taken {
            Some(c) => c,
            None => {
                let slot = connecting
                    .acquire()
                    .await
                    .map_err(|_| (Rep::GeneralFailure, ProxyFault::Stopping.into()))?;
                let opened = conn::connect(opts, None).await;
                drop(slot);
                match opened {
                    Ok(c) => c,
                    Err(e) => {
                        return Err((
                            Rep::GeneralFailure,
                            e.during(Doing::OpeningSession { what: what.clone() }),
                        ))
                    }
                }
            }
        };
        if !c.reused {
            tally.handshake(c.setup, c.info, c.resumed);
        }
        if let (Service::Stream, None, Some(i)) = (service, target, c.info) {
            log::info!("session to {}: mode {}", opts.remote, i.describe());
        }
        // Flows after this one on the same session: asked for in `aead` (flow-end records).
        let reuse = service == Service::Stream
            && c.info.is_some_and(|i| i.mode == nena_proto::Mode::Aead)
            && opts.reuse.as_ref().is_some_and(|r| r.asking());
        let first = first.as_deref_mut();
        let answer = async {
            let first = match first {
                Some(f) => f.take().during(Doing::ReadingFirstBytes)?,
                None => &[],
            };
            send_open(&mut c, target, service, offer, reuse, first, opts).await?;
            let reply = match c.reader.read_connect_reply().await {
                Ok(r) => r,
                // A server older than `OP_REUSE` closes the session unanswered (no closing
                // record): asked no more, and this flow opens a session without it.
                Err(e)
                    if reuse
                        && !from_pool
                        && e.session_error()
                            .is_some_and(|s| matches!(s, SessionError::Truncated { .. })) =>
                {
                    return Err(Error::from(e).during(Doing::AskingReuse));
                }
                // An old server closes an op 8 session unanswered.
                Err(e)
                    if offer.is_some()
                        && !e
                            .session_error()
                            .is_some_and(|s| matches!(s, SessionError::PeerAborted { .. })) =>
                {
                    return Err(Error::from(e).during(Doing::AwaitingPlaneAnswer));
                }
                Err(e) => return Err(e.into()),
            };
            let answer = match (offer, reply.code) {
                (Some(o), Rep::Succeeded) => Some(c.reader.read_plane_answer(o.version).await?),
                _ => None,
            };
            Ok::<_, Error>((reply, answer))
        };
        let wait = opts.timeout + Duration::from_secs(5);
        let (answer, plane) = match tokio::time::timeout(wait, answer).await {
            Ok(Ok(a)) => a,
            Ok(Err(e)) if from_pool => {
                log::debug!("a session opened ahead is gone ({e:#}); opening one for {what}");
                ahead = None;
                continue;
            }
            Ok(Err(e)) if e.was_doing(&Doing::AskingReuse) => {
                if let Some(r) = &opts.reuse {
                    r.server_is_older();
                }
                log::warn!(
                    "the proxy server closed a session that asked to be reused flow after \
                     flow without an answer (a server older than that?); its sessions now \
                     carry one flow each ({e:#})"
                );
                continue;
            }
            Ok(Err(e)) => {
                return Err((
                    Rep::GeneralFailure,
                    e.during(Doing::AskingProxyServer { what: what.clone() }),
                ));
            }
            Err(_) => {
                return Err((
                    Rep::GeneralFailure,
                    Timeout::ProxyAnswer {
                        what: what.clone(),
                        after: wait,
                    }
                    .into(),
                ));
            }
        };
        if answer.code != Rep::Succeeded {
            let _ = c.writer.shutdown().await;
            let code = answer.code;
            return Err((
                code,
                Error::from(Refused(answer)).during(Doing::SessionFor { what }),
            ));
        }
        return Ok(Opened { c, plane, reuse });
    }
}
