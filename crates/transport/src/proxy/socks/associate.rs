//! The proxy client's SOCKS5 UDP ASSOCIATE (RFC 1928 section 7), carried over the datagram
//! relay's sessions (wire op 7, [`crate::proxy::carry::relay`]).
//!
//! On a UDP ASSOCIATE request the proxy client binds a UDP socket on the address the
//! application reached its TCP listener at (port 0) and answers with it (BND.ADDR,
//! BND.PORT). It takes datagrams there only from the control connection's peer address (and
//! from the address and port the request named, when not zero); the first datagram taken
//! fixes the application's address and port, to which the replies go ([`Client`]). Each
//! datagram's header ([`crate::proxy::socks::UdpPacket`]) names its destination; a fragment (FRAG
//! not 0) is dropped, and so is a destination given as a domain name: resolving it here would
//! let the local network's resolver choose where the datagram goes (docs/THREAT-MODEL.md),
//! and op 7 carries addresses only. The others travel in one nena session per association,
//! opened on the first datagram; the proxy server sends each on only where its `--allow`
//! rules permit ([`crate::proxy::carry::relay::serve`]), and its replies come back framed with
//! their source, which the proxy client puts in the SOCKS UDP header of the datagram it
//! sends the application.
//!
//! The association ends when the control connection closes or the proxy stops (after its
//! `--grace`; the session is then ended cleanly and the socket closed), or when its session
//! ends: after
//! [`IDLE`] without a datagram from the application (as the server's side does), or on a
//! failure (a refusal, a broken session). Its control connection is closed with it.

use crate::conn::ClientOptions;
use crate::conn::Paths;
use crate::error::{Doing, During, Error, Result};
use crate::ops::metrics::Tally;
use crate::ops::stop::StopSignal;
use crate::proxy::carry::plane::Stamped;
use crate::proxy::carry::relay::{RelayStats, IDLE};
use crate::proxy::socks::{self, Host, Rep, Target, UdpPacket};
use crate::wire::dns_udp::Datagram;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio::sync::{mpsc, Semaphore};

/// Datagrams waiting for the association's session at most (while it opens, or when the
/// session is slower than the application); more are dropped, as a router's full queue
/// drops them.
const QUEUE: usize = 256;

/// How long an association whose proxy stops may take to end its session cleanly (within
/// the [`crate::conn::ABORT_NOTICE`] a stopping proxy gives its sessions).
const WIND_DOWN_STOPPING: Duration = Duration::from_millis(400);

/// How long an association whose control connection closed may take to end its session
/// cleanly. Nobody waits on it (the application has gone), and a path that just came back
/// from an outage may hold the session's last bytes behind TCP's backed-off retransmission
/// timer for a second or more: ending it sooner would reset a session that was ending well
/// and lose its final counts.
const WIND_DOWN_CLOSED: Duration = Duration::from_secs(3);

/// Who may send datagrams to an association (sans-IO): the control connection's peer
/// address, narrowed to the address and port of the request when they are not zero; the
/// first datagram taken fixes the application's address and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Client {
    peer: IpAddr,
    addr: Option<IpAddr>,
    port: Option<u16>,
    fixed: Option<SocketAddr>,
}

impl Client {
    /// `peer`: the control connection's peer; `requested`: the request's DST.ADDR and
    /// DST.PORT (a domain name there narrows nothing: it is not resolved).
    pub(crate) fn new(peer: IpAddr, requested: &Target) -> Client {
        let addr = match requested.host {
            Host::Ip(ip) if !ip.is_unspecified() => Some(ip.to_canonical()),
            _ => None,
        };
        Client {
            peer: peer.to_canonical(),
            addr,
            port: (requested.port != 0).then_some(requested.port),
            fixed: None,
        }
    }

    /// Whether a datagram from `from` is the application's; the first one taken fixes its
    /// address and port.
    pub(crate) fn admits(&mut self, from: SocketAddr) -> bool {
        let from = SocketAddr::new(from.ip().to_canonical(), from.port());
        if let Some(fixed) = self.fixed {
            return fixed == from;
        }
        let ok = from.ip() == self.peer
            && self.addr.is_none_or(|a| a == from.ip())
            && self.port.is_none_or(|p| p == from.port());
        if ok {
            self.fixed = Some(from);
        }
        ok
    }

    /// Where the replies go (once a datagram was taken).
    pub(crate) fn address(&self) -> Option<SocketAddr> {
        self.fixed
    }
}

/// Why an association ended.
enum End {
    /// The control connection closed, or the proxy stopped: the session is ended cleanly
    /// (datagrams are whole or absent: nothing looks complete that is cut).
    Closing(&'static str, Duration),
    Session(Result<Option<String>, Error>),
    Socket(Error),
}

/// One UDP ASSOCIATE of the proxy client, from the request (`requested`: the client's
/// address and port as it gave them) to its end. Answers the request on `control`, then
/// relays until the association ends; returns its log line.
pub(crate) async fn associate(
    mut control: TcpStream,
    requested: Target,
    opts: &ClientOptions,
    connecting: &Semaphore,
    stop: &StopSignal,
    tally: &Tally,
) -> Result<String, Error> {
    let peer = control.peer_addr()?;
    let local = control.local_addr()?.ip().to_canonical();
    let sock = match UdpSocket::bind(SocketAddr::new(local, 0)).await {
        Ok(s) => s,
        Err(e) => {
            let _ = control
                .write_all(&socks::reply(Rep::GeneralFailure, None))
                .await;
            return Err(Error::from(e).during(Doing::BindingAssociation { local }));
        }
    };
    let bound = sock.local_addr()?;
    control
        .write_all(&socks::reply(Rep::Succeeded, Some(bound)))
        .await?;
    log::info!("{peer}: SOCKS UDP ASSOCIATE (datagrams from {requested}): relay on {bound}");
    let client = Mutex::new(Client::new(peer.ip(), &requested));
    let stats = RelayStats::default();
    let (tx, mut rx) = mpsc::channel::<Stamped>(QUEUE);

    // The application's datagrams, checked and queued for the session.
    let receive = async {
        // Owned here: the queue ends (and the session after what is queued) when this does.
        let tx = tx;
        let mut buf = vec![0u8; 65535];
        // The first datagram of each kind dropped is a warning, the others debug lines.
        let mut strangers = 0u64;
        let mut told = [false; 3];
        loop {
            let (n, from) = sock.recv_from(&mut buf).await?;
            if !client.lock().expect("client").admits(from) {
                stats.dropped.fetch_add(1, Ordering::Relaxed);
                strangers += 1;
                if strangers == 1 {
                    log::warn!(
                        "UDP ASSOCIATE on {bound}: a datagram from {from}, not the \
                         association's client; dropped"
                    );
                }
                continue;
            }
            let (kind, why) = match UdpPacket::parse(&buf[..n]) {
                Ok(UdpPacket {
                    target:
                        Target {
                            host: Host::Ip(ip),
                            port,
                        },
                    data,
                }) => {
                    let d = Stamped::now(Datagram {
                        addr: SocketAddr::new(ip, port),
                        payload: data.to_vec(),
                    });
                    if tx.try_send(d).is_err() {
                        stats.dropped.fetch_add(1, Ordering::Relaxed);
                    }
                    continue;
                }
                Ok(UdpPacket { target, .. }) => (
                    0,
                    format!(
                        "a datagram to the domain name {target}: names are not resolved on \
                         this side (the local network's resolver must not choose \
                         destinations); send to an address"
                    ),
                ),
                Err(e @ socks::UdpError::Fragment(_)) => (1, e.to_string()),
                Err(e) => (2, e.to_string()),
            };
            stats.dropped.fetch_add(1, Ordering::Relaxed);
            if !std::mem::replace(&mut told[kind], true) {
                log::warn!("UDP ASSOCIATE on {bound}: {why}; dropped");
            } else {
                log::debug!("UDP ASSOCIATE on {bound}: {why}; dropped");
            }
        }
        #[allow(unreachable_code)]
        Ok::<_, std::io::Error>(())
    };

    // The association's one session, opened on the first datagram.
    let session = async {
        let Some(first) = rx.recv().await else {
            return Ok(None);
        };
        let mut session = crate::proxy::carry::plane::open_datagrams(opts, connecting, tally)
            .await
            .map_err(|(_, e)| e)?;
        stats.sessions.fetch_add(1, Ordering::Relaxed);
        let mode = session.conn.info.map_or("?".to_string(), |i| i.describe());
        log::info!(
            "UDP ASSOCIATE on {bound}: session open, mode {mode}{}",
            if session.has_plane() {
                ", datagram plane"
            } else {
                ""
            }
        );
        let (dtx, mut drx) = mpsc::channel::<Datagram>(QUEUE);
        let carrying = crate::proxy::carry::plane::carry(
            &mut session,
            tally,
            Some(first),
            &mut rx,
            dtx,
            &stats.sent,
            &stats.received,
        );
        let down = async {
            while let Some(d) = drx.recv().await {
                let to = client.lock().expect("client").address();
                let framed = UdpPacket {
                    target: Target {
                        host: Host::Ip(d.addr.ip()),
                        port: d.addr.port(),
                    },
                    data: &d.payload,
                }
                .encode();
                let (Some(to), Some(framed)) = (to, framed) else {
                    stats.dropped.fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                sock.send_to(&framed, to).await?;
            }
            Ok::<_, Error>(())
        };
        let ended = tokio::try_join!(carrying, down).map(|(carried, ())| {
            use crate::proxy::carry::plane::Ending;
            let why = match carried.ending {
                Ending::Idle => format!("{IDLE:?} without a datagram from the application"),
                Ending::Application => "the session ended cleanly".to_string(),
                Ending::Server => "the proxy server ended the session".to_string(),
            };
            if let Some(p) = &carried.plane {
                tally.datagrams(&p.metrics());
            }
            format!("{why}; {}", carried.describe())
        });
        let c = &session.conn;
        let paths = Paths::of(c);
        tally.paths_used(session.usage_with(&paths));
        ended
            .map(|why| {
                Some(format!(
                    "{why}; mode {mode}; subflows: {}",
                    paths.describe()
                ))
            })
            .during(Doing::AssociationSession {
                mode: mode.to_string(),
            })
    };
    tokio::pin!(session);

    let control_closed = async {
        // The control connection carries nothing more: read (and drop) until it closes.
        let mut b = [0u8; 512];
        while matches!(control.read(&mut b).await, Ok(n) if n > 0) {}
    };
    let end = {
        tokio::pin!(receive);
        tokio::select! {
            r = &mut session => End::Session(r),
            r = &mut receive => End::Socket(Error::from(r.err().unwrap_or_else(|| {
                std::io::Error::other("the association's socket ended")
            }))),
            () = control_closed => End::Closing("the control connection closed", WIND_DOWN_CLOSED),
            () = stop.stopped() => End::Closing("the proxy is stopping", WIND_DOWN_STOPPING),
        }
        // `receive` ends here, and with it the queue toward the session.
    };
    let counts = || {
        format!(
            "{} datagrams sent, {} received, {} dropped",
            stats.sent.load(Ordering::Relaxed),
            stats.received.load(Ordering::Relaxed),
            stats.dropped.load(Ordering::Relaxed)
        )
    };
    let what = format!("UDP ASSOCIATE on {bound}");
    let associating = || Doing::Associating {
        bound,
        sent: stats.sent.load(Ordering::Relaxed),
        received: stats.received.load(Ordering::Relaxed),
        dropped: stats.dropped.load(Ordering::Relaxed),
    };
    match end {
        End::Closing(why, limit) => {
            // The session (if any) ends cleanly once it has sent what was queued.
            // A proxy that stops meanwhile cuts the longer wait to its own.
            let limit = async {
                tokio::select! {
                    () = tokio::time::sleep(limit) => {}
                    () = async {
                        stop.stopped().await;
                        tokio::time::sleep(WIND_DOWN_STOPPING).await;
                    } => {}
                }
            };
            let ending = tokio::select! {
                r = &mut session => Some(r),
                () = limit => None,
            };
            let how = match ending {
                Some(Ok(Some(s))) => s,
                Some(Ok(None)) => "no session".to_string(),
                Some(Err(e)) => return Err(e.during(associating())),
                None => "the session did not end in time".to_string(),
            };
            Ok(format!("{what} ended: {why}; {}; {how}", counts()))
        }
        End::Session(Ok(how)) => Ok(format!(
            "{what} ended: {}; {}",
            how.unwrap_or_default(),
            counts()
        )),
        End::Session(Err(e)) => Err(e.during(associating())),
        End::Socket(e) => Err(e.during(associating())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Target {
        let a: SocketAddr = s.parse().unwrap();
        Target {
            host: Host::Ip(a.ip()),
            port: a.port(),
        }
    }

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn only_the_control_connections_peer_and_then_one_port_are_admitted() {
        // Zeros: any port of the peer's address; the first one taken is then the only one.
        let mut c = Client::new(sa("198.18.1.2:1").ip(), &t("0.0.0.0:0"));
        assert_eq!(c.address(), None);
        assert!(!c.admits(sa("198.18.1.3:5000")), "another host");
        assert_eq!(c.address(), None, "a stranger fixes nothing");
        assert!(c.admits(sa("198.18.1.2:5000")));
        assert_eq!(c.address(), Some(sa("198.18.1.2:5000")));
        assert!(c.admits(sa("198.18.1.2:5000")));
        assert!(!c.admits(sa("198.18.1.2:5001")), "another port of the peer");
        // An IPv4-mapped source is the IPv4 address.
        assert!(c.admits(sa("[::ffff:198.18.1.2]:5000")));
        // A port named in the request: only that port, from the peer.
        let mut c = Client::new(sa("198.18.1.2:1").ip(), &t("0.0.0.0:6000"));
        assert!(!c.admits(sa("198.18.1.2:5000")));
        assert!(c.admits(sa("198.18.1.2:6000")));
        // An address named in the request narrows the peer's: another one admits nothing.
        let mut c = Client::new(sa("198.18.1.2:1").ip(), &t("198.18.1.9:0"));
        assert!(!c.admits(sa("198.18.1.9:6000")), "not the peer");
        assert!(!c.admits(sa("198.18.1.2:6000")), "not the named address");
        let mut c = Client::new(sa("198.18.1.2:1").ip(), &t("198.18.1.2:7000"));
        assert!(!c.admits(sa("198.18.1.2:7001")));
        assert!(c.admits(sa("198.18.1.2:7000")));
        // A domain name in the request narrows nothing (it is not resolved).
        let named = Target {
            host: Host::Domain("client.example".into()),
            port: 0,
        };
        let mut c = Client::new(sa("[2001:2::1]:1").ip(), &named);
        assert!(c.admits(sa("[2001:2::1]:9")));
    }
}
