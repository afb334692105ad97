//! What both sides of a datagram session share (ops 7 and 8): the frames' reads and
//! writes, the idle time and the bound on destinations, the server's counts. A leaf: the
//! relay and the datagram plane both use it.

use crate::wire::dns_udp::Datagram;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// A flow (one application socket) ends after this long without a datagram from it.
pub const IDLE: Duration = Duration::from_secs(120);
/// Destinations one server-side session remembers (see [`super::relay`]'s module doc).
pub const DESTINATIONS: usize = 1024;

/// One datagram frame; `None` at a clean end before it.
pub async fn read_datagram<R: AsyncRead + Unpin>(r: &mut R) -> std::io::Result<Option<Datagram>> {
    let invalid = |e| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
    let mut header = [0u8; 21];
    if r.read(&mut header[..1]).await? == 0 {
        return Ok(None);
    }
    let n = Datagram::header_len(header[0]).map_err(invalid)?;
    r.read_exact(&mut header[1..n]).await?;
    let (addr, len) = Datagram::parse_header(&header[..n]).map_err(invalid)?;
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload).await?;
    Ok(Some(Datagram { addr, payload }))
}

/// Writes one datagram frame (op 7's: no sequence number) and flushes.
pub async fn write_datagram<W: AsyncWrite + Unpin>(
    w: &mut W,
    addr: SocketAddr,
    payload: &[u8],
) -> std::io::Result<()> {
    write_frame(w, None, addr, payload).await
}

/// Writes one frame, with the plane's sequence number when `seq` is given, and flushes.
pub async fn write_frame<W: AsyncWrite + Unpin>(
    w: &mut W,
    seq: Option<u64>,
    addr: SocketAddr,
    payload: &[u8],
) -> std::io::Result<()> {
    let framed = crate::wire::dns_udp::Frame::encode(seq, addr, payload).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("a datagram of {} bytes", payload.len()),
        )
    })?;
    w.write_all(&framed).await?;
    w.flush().await
}

/// What a server-side datagram session did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayCounts {
    pub sent: u64,
    pub received: u64,
    pub refused: u64,
}
