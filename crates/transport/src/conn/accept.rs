//! The server side of opening a session: listen on MPTCP, accept, refuse a fallback unless
//! allowed, the handshake with a deadline. A connection from the in-memory harness (a pipe,
//! not a socket) takes the same handshake; it has no fallback and no kato-mpc.

use super::dial::is_kato_mpc;
use super::halves::{session_halves, Connection, ReadHalf, WriteHalf};
use super::mpc::{mpc_session, MpcLookup, MpcOutcome};
use crate::error::{Doing, During, Result, Unsupported};
use crate::stream::handshake::server_handshake_telling;
use crate::stream::{SecureReader, SecureWriter};
use nena_proto::{Mode, ServerConfig, SessionInfo};
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::Duration;

/// How a server accepts sessions.
#[derive(Debug, Clone)]
pub struct AcceptOptions {
    /// Modes accepted, most preferred first.
    pub modes: Vec<Mode>,
    pub allow_fallback: bool,
    /// No nena handshake (benchmark baseline listener).
    pub raw: bool,
    pub handshake_timeout: Duration,
    /// Buffer per direction of a session.
    pub buffer: usize,
    /// `--mode kato-mpc`: the programs' records (None: no programs attached on this side).
    pub mpc: Option<MpcLookup>,
    /// `--mode kato-mpc`: serve in the clear a connection whose negotiation did not
    /// complete (by default it is closed unread).
    pub allow_plain: bool,
    /// Congestion control of the listener, which its connections inherit (`--cc NAME`;
    /// `None`: the namespace's default).
    pub congestion: Option<String>,
    /// The server's long-term key, which signs every handshake with key agreement
    /// (`--key-file`). Without one only kato and plain are served.
    pub key: Option<nena_proto::ServerKey>,
    /// Resumed sessions: the tickets this server grants and takes (`None`: every session
    /// makes a full handshake; `--no-resume`).
    pub resumption: Option<super::ServerTickets>,
}

/// An accepted server session: over a connection's halves as [`accept`] returns it, or over
/// any halves (the proxy server's sessions in the `testing` module's in-memory pair).
pub struct ServerConn<R = ReadHalf, W = WriteHalf> {
    pub reader: SecureReader<R>,
    pub writer: SecureWriter<W>,
    /// Negotiated mode and cipher; `None` for a raw connection.
    pub info: Option<SessionInfo>,
    pub peer: SocketAddr,
    /// kato-mpc: whether it scrambles, or why not.
    pub mpc: Option<MpcOutcome>,
    /// The session's datagram plane keys (aead and stream), taken before it was split.
    pub dgram: Option<nena_proto::dgram::DatagramKeys>,
    /// Whether the session resumed an earlier one with a ticket (no key agreement).
    pub resumed: bool,
}

impl ServerConn {
    /// The socket's descriptor (`None`: a pipe, which has no subflows).
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.reader.get_ref().fd()
    }
}

/// Open an MPTCP listener for tokio, its connections with congestion control `congestion`.
pub fn listen(addr: SocketAddr, congestion: Option<&str>) -> Result<tokio::net::TcpListener> {
    nena_mptcp::check_enabled()?;
    let l = nena_mptcp::listen(addr, congestion).during(Doing::Listening { addr })?;
    l.set_nonblocking(true)?;
    Ok(tokio::net::TcpListener::from_std(l)?)
}

/// Run the server side of a freshly accepted connection up to an open session.
pub async fn accept(
    conn: Connection,
    peer: SocketAddr,
    opts: &AcceptOptions,
) -> Result<ServerConn, crate::Error> {
    let fallback = match &conn {
        Connection::Socket(s) => nena_mptcp::is_fallback(s.as_fd()).unwrap_or(false),
        Connection::Pipe(..) => false,
    };
    let (mut r, mut w) = conn.into_halves()?;
    if fallback && !opts.allow_fallback {
        // A nena client (one that allowed fallback on its side) is told why.
        crate::stream::handshake::refuse_fallback(&mut r, &mut w, opts.handshake_timeout).await;
        return Err(Unsupported::Fallback.into());
    }
    if opts.raw {
        let (reader, writer) = session_halves(None, Vec::new(), r, w, opts.buffer);
        return Ok(ServerConn {
            reader,
            writer,
            info: None,
            peer,
            mpc: None,
            dgram: None,
            resumed: false,
        });
    }
    if is_kato_mpc(&opts.modes)? {
        let ReadHalf::Socket(socket) = &r else {
            return Err(Unsupported::KatoMpcOverPipe.into());
        };
        let (fd, local, remote) = (
            socket.as_ref().as_fd(),
            socket.local_addr()?,
            socket.peer_addr()?,
        );
        let (session, outcome) = mpc_session(
            nena_proto::Role::Server,
            fd,
            local,
            remote,
            opts.mpc.as_ref(),
            opts.allow_plain,
        )
        .await?;
        if let Some(w) = outcome.warning() {
            log::warn!("{peer}: {w} (--allow-plain)");
        }
        let info = Some(session.info());
        let (reader, writer) = session_halves(Some(session), Vec::new(), r, w, opts.buffer);
        return Ok(ServerConn {
            reader,
            writer,
            info,
            peer,
            mpc: Some(outcome),
            dgram: None,
            resumed: false,
        });
    }
    let cfg = ServerConfig {
        key: opts.key.clone(),
        resumption: opts.resumption.as_ref().map(super::ServerTickets::now),
        ..ServerConfig::accepting(&opts.modes)
    };
    let (session, leftover, resumed) =
        server_handshake_telling(&cfg, &mut r, &mut w, opts.handshake_timeout).await?;
    let info = Some(session.info());
    let dgram = session.datagram_keys();
    let (reader, writer) = session_halves(Some(session), leftover, r, w, opts.buffer);
    Ok(ServerConn {
        reader,
        writer,
        info,
        peer,
        mpc: None,
        dgram,
        resumed,
    })
}
