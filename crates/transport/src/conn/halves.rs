//! What carries a session's bytes, as the two halves its protected reader and writer wrap:
//! a kernel MPTCP socket's ([`ReadHalf::Socket`]) or, for the in-memory harness (the
//! `testing` module's network), any other byte pipe's ([`ReadHalf::Pipe`]). Only a socket
//! has subflows, a receive low-water mark and a reset. Also the process's limit of open files,
//! raised for servers and proxies that hold many.

use crate::stream::handshake::secure_pair_with;
use crate::stream::{SecureReader, SecureWriter};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// A byte pipe's reading end (not a socket).
pub type PipeReader = Box<dyn AsyncRead + Send + Sync + Unpin>;
/// A byte pipe's writing end (not a socket).
pub type PipeWriter = Box<dyn AsyncWrite + Send + Sync + Unpin>;

/// A connection as a dialer or an acceptor hands it over: a kernel socket or a pipe.
pub enum Connection {
    Socket(TcpStream),
    Pipe(PipeReader, PipeWriter),
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Connection::Socket(s) => f.debug_tuple("Socket").field(s).finish(),
            Connection::Pipe(..) => f.write_str("Pipe"),
        }
    }
}

impl From<TcpStream> for Connection {
    fn from(s: TcpStream) -> Connection {
        Connection::Socket(s)
    }
}

impl Connection {
    /// The two halves (a socket's with TCP_NODELAY: records go out whole, at once).
    pub fn into_halves(self) -> io::Result<(ReadHalf, WriteHalf)> {
        Ok(match self {
            Connection::Socket(s) => {
                s.set_nodelay(true)?;
                let (r, w) = s.into_split();
                (ReadHalf::Socket(r), WriteHalf::Socket(w))
            }
            Connection::Pipe(r, w) => (ReadHalf::Pipe(r), WriteHalf::Pipe(w)),
        })
    }
}

/// A session's reading half.
pub enum ReadHalf {
    Socket(OwnedReadHalf),
    Pipe(PipeReader),
}

/// A session's writing half.
pub enum WriteHalf {
    Socket(OwnedWriteHalf),
    Pipe(PipeWriter),
}

impl ReadHalf {
    /// The socket's descriptor (`None`: a pipe).
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        match self {
            ReadHalf::Socket(r) => Some(r.as_ref().as_fd()),
            ReadHalf::Pipe(_) => None,
        }
    }
}

impl AsyncRead for ReadHalf {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ReadHalf::Socket(r) => Pin::new(r).poll_read(cx, buf),
            ReadHalf::Pipe(r) => Pin::new(r).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for WriteHalf {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            WriteHalf::Socket(w) => Pin::new(w).poll_write(cx, buf),
            WriteHalf::Pipe(w) => Pin::new(w).poll_write(cx, buf),
        }
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            WriteHalf::Socket(w) => Pin::new(w).poll_write_vectored(cx, bufs),
            WriteHalf::Pipe(w) => Pin::new(w).poll_write_vectored(cx, bufs),
        }
    }
    fn is_write_vectored(&self) -> bool {
        match self {
            WriteHalf::Socket(w) => w.is_write_vectored(),
            WriteHalf::Pipe(w) => w.is_write_vectored(),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteHalf::Socket(w) => Pin::new(w).poll_flush(cx),
            WriteHalf::Pipe(w) => Pin::new(w).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteHalf::Socket(w) => Pin::new(w).poll_shutdown(cx),
            WriteHalf::Pipe(w) => Pin::new(w).poll_shutdown(cx),
        }
    }
}

/// The socket under a session's writer, as the proxies' OS-bound steps see it: its
/// descriptor, for the bytes per subflow at the session's end, and its reset when a stopping
/// proxy abandons the session (the proxies' abort). A session's TCP socket is one; an in-memory
/// session (the `testing` module's pair) has neither subflows nor a reset.
pub trait SessionSocket: AsyncWrite + Unpin + Send {
    /// The session's socket (`None`: not a socket, so no subflows to count).
    fn socket_fd(&self) -> Option<BorrowedFd<'_>>;
    /// Given up with a reset: SO_LINGER 0 and no shutdown (which its drop would do); the
    /// reset comes when the socket's last descriptor closes.
    fn reset(self);
}

impl SessionSocket for tokio::net::tcp::OwnedWriteHalf {
    fn socket_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.as_ref().as_fd())
    }
    fn reset(self) {
        let _ = socket2::SockRef::from(self.as_ref()).set_linger(Some(std::time::Duration::ZERO));
        self.forget();
    }
}

/// A socket's subflows and reset; a pipe has neither (its reset is its end).
impl SessionSocket for WriteHalf {
    fn socket_fd(&self) -> Option<BorrowedFd<'_>> {
        match self {
            WriteHalf::Socket(w) => w.socket_fd(),
            WriteHalf::Pipe(_) => None,
        }
    }
    fn reset(self) {
        if let WriteHalf::Socket(w) = self {
            w.reset()
        }
    }
}

/// A session's reader.
pub type Reader = SecureReader<ReadHalf>;
/// A session's writer.
pub type Writer = SecureWriter<WriteHalf>;

/// [`secure_pair_with`] over a connection's two halves; over a socket, a protected session's
/// reader wakes on whole records ([`SecureReader::wake_on_whole_records`], `SO_RCVLOWAT`).
pub(crate) fn session_halves(
    session: Option<nena_proto::Session>,
    leftover: Vec<u8>,
    r: ReadHalf,
    w: WriteHalf,
    cap: usize,
) -> (Reader, Writer) {
    let fd = r.fd().map(|f| f.as_raw_fd());
    let (mut reader, writer) = secure_pair_with(session, leftover, r, w, cap);
    if let (Some(fd), Some(_)) = (fd, reader.info()) {
        if let Err(e) = crate::stream::low_water::widen_receive_window(fd) {
            log::debug!("receive window not widened: {e}");
        }
        // The reader owns the read half, so `fd` stays open for as long as it is used.
        reader.wake_on_whole_records(move |n| crate::stream::low_water::set_rcvlowat(fd, n));
    }
    (reader, writer)
}

/// Raise the soft limit of open files to the hard limit (servers and proxies hold many).
pub fn raise_nofile_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}
