//! The two halves of a nena session's byte stream, for async I/O.
//!
//! [`SecureReader`] reads from the socket into the caller's buffer and unprotects the new
//! bytes in place; [`SecureWriter`] protects the caller's buffer in place and writes it. No
//! other copy is made and nothing is queued: back-pressure is the socket's. A `None`
//! (un)protector means a raw stream (the plain-MPTCP baseline of the benchmark).

use crate::wire::{Reply, Request, WireError};
use nena_proto::{Protector, Unprotector};
use std::io;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Longest header message ([`Request`] or [`Reply`]) we are willing to buffer.
const MAX_HEADER: usize = 2048;

/// The incoming half: reads and unprotects.
pub struct SecureReader<R> {
    inner: R,
    unprot: Option<Unprotector>,
    /// Bytes already read and unprotected but not yet delivered (handshake leftovers,
    /// bytes read past a header).
    pending: Vec<u8>,
    pos: usize,
    received: u64,
    idle: Option<std::time::Duration>,
}

impl<R: AsyncRead + Unpin> SecureReader<R> {
    /// `leftover` are bytes read together with the handshake (still protected).
    pub fn new(inner: R, mut unprot: Option<Unprotector>, mut leftover: Vec<u8>) -> Self {
        if let Some(u) = unprot.as_mut() {
            u.unprotect(&mut leftover);
        }
        SecureReader {
            inner,
            unprot,
            pending: leftover,
            pos: 0,
            received: 0,
            idle: None,
        }
    }

    /// Fail a read that waits longer than `idle` for the peer (servers use it so a stalled
    /// client cannot hold a session forever).
    pub fn set_idle_timeout(&mut self, idle: Option<std::time::Duration>) {
        self.idle = idle;
    }

    /// The underlying stream.
    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    /// Payload bytes delivered so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Read up to `buf.len()` bytes (0 only at end of stream or for an empty `buf`).
    pub async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.pos < self.pending.len() {
            let n = buf.len().min(self.pending.len() - self.pos);
            buf[..n].copy_from_slice(&self.pending[self.pos..self.pos + n]);
            self.pos += n;
            if self.pos == self.pending.len() {
                self.pending = Vec::new();
                self.pos = 0;
            }
            self.received += n as u64;
            return Ok(n);
        }
        let n = match self.idle {
            None => self.inner.read(buf).await?,
            Some(d) => tokio::time::timeout(d, self.inner.read(buf))
                .await
                .map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("no data from the peer for {}s", d.as_secs_f64()),
                    )
                })??,
        };
        if let Some(u) = self.unprot.as_mut() {
            u.unprotect(&mut buf[..n]);
        }
        self.received += n as u64;
        Ok(n)
    }

    /// Give back bytes that a caller read (and that were unprotected) but that belong to
    /// the next reader of the stream. They are delivered before anything else.
    pub fn unread(&mut self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        self.received -= data.len() as u64;
        let mut merged = data.to_vec();
        merged.extend_from_slice(&self.pending[self.pos..]);
        self.pending = merged;
        self.pos = 0;
    }

    /// Fill `buf` completely; an early end of stream is `UnexpectedEof`.
    pub async fn read_exact(&mut self, buf: &mut [u8]) -> io::Result<()> {
        let mut got = 0;
        while got < buf.len() {
            let n = self.read(&mut buf[got..]).await?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "connection closed after {got} of {} expected bytes",
                        buf.len()
                    ),
                ));
            }
            got += n;
        }
        Ok(())
    }

    /// Read one header message with `decode`; bytes read past it are kept for the next read.
    async fn read_msg<T>(
        &mut self,
        what: &str,
        decode: impl Fn(&[u8]) -> Result<Option<(T, usize)>, WireError>,
    ) -> Result<T, MsgError> {
        let mut buf = Vec::with_capacity(256);
        let mut tmp = [0u8; 512];
        loop {
            if !buf.is_empty() {
                if let Some((msg, used)) = decode(&buf)? {
                    // Put back what belongs to the stream after the message.
                    self.unread(&buf[used..]);
                    return Ok(msg);
                }
                if buf.len() > MAX_HEADER {
                    return Err(MsgError::Io(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{what} longer than {MAX_HEADER} bytes"),
                    )));
                }
            }
            let n = self.read(&mut tmp).await?;
            if n == 0 {
                return Err(MsgError::Io(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    if buf.is_empty() {
                        format!("connection closed while waiting for the {what}")
                    } else {
                        format!("connection closed in the middle of the {what}")
                    },
                )));
            }
            buf.extend_from_slice(&tmp[..n]);
        }
    }

    /// Read a [`Request`].
    pub async fn read_request(&mut self) -> Result<Request, MsgError> {
        self.read_msg("request", Request::decode).await
    }

    /// Read a [`Reply`].
    pub async fn read_reply(&mut self) -> Result<Reply, MsgError> {
        self.read_msg("reply", Reply::decode).await
    }
}

/// Reading a header message failed.
#[derive(Debug, thiserror::Error)]
pub enum MsgError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("protocol error: {0}")]
    Wire(#[from] WireError),
}

/// The outgoing half: protects and writes.
pub struct SecureWriter<W> {
    inner: W,
    prot: Option<Protector>,
    sent: u64,
}

impl<W: AsyncWrite + Unpin> SecureWriter<W> {
    pub fn new(inner: W, prot: Option<Protector>) -> Self {
        SecureWriter {
            inner,
            prot,
            sent: 0,
        }
    }

    /// The underlying stream.
    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    /// Payload bytes written so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Protect `buf` in place and write all of it. `buf` holds protected bytes afterwards.
    pub async fn write_all(&mut self, buf: &mut [u8]) -> io::Result<()> {
        if let Some(p) = self.prot.as_mut() {
            p.protect(buf);
        }
        self.inner.write_all(buf).await?;
        self.sent += buf.len() as u64;
        Ok(())
    }

    /// Write a header message (encoded by the caller).
    pub async fn write_msg(&mut self, mut msg: Vec<u8>) -> io::Result<()> {
        self.write_all(&mut msg).await
    }

    /// Flush and close the outgoing direction (half-close: reading continues).
    pub async fn shutdown(&mut self) -> io::Result<()> {
        self.inner.shutdown().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn idle_timeout_and_unread() {
        let (a, mut b) = tokio::io::duplex(1024);
        let mut r = SecureReader::new(a, None, b"left".to_vec());
        r.set_idle_timeout(Some(std::time::Duration::from_millis(50)));
        let mut buf = [0u8; 16];
        assert_eq!(r.read(&mut buf).await.unwrap(), 4);
        assert_eq!(&buf[..4], b"left");
        r.unread(b"ft");
        assert_eq!(r.read(&mut buf).await.unwrap(), 2);
        assert_eq!(r.received(), 4);
        let err = r.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        b.write_all(b"x").await.unwrap();
        assert_eq!(r.read(&mut buf).await.unwrap(), 1);
    }
}
