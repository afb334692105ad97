//! DNS messages framed as over TCP (RFC 7766: `len u16 | msg`) on async streams: a
//! resolver's TCP connection, an application's redirected connection to port 53, and a
//! nena DNS session (op 6), whose frames are the wire layer's
//! [`DnsFrame`](crate::wire::dns_udp::DnsFrame) (the framing itself, sans-IO, lives there).

use crate::wire::dns_udp::DnsFrame;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// One DNS message framed as over TCP; `None` at a clean end before it.
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R) -> std::io::Result<Option<Vec<u8>>> {
    let mut h = [0u8; 2];
    if r.read(&mut h[..1]).await? == 0 {
        return Ok(None);
    }
    r.read_exact(&mut h[1..]).await?;
    let len =
        DnsFrame::length(h).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let mut m = vec![0u8; len];
    r.read_exact(&mut m).await?;
    Ok(Some(m))
}

/// Writes `msg` framed, and flushes.
pub async fn write_frame<W: AsyncWrite + Unpin>(w: &mut W, msg: &[u8]) -> std::io::Result<()> {
    let framed = DnsFrame::encode(msg).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("a DNS message of {} bytes cannot be framed", msg.len()),
        )
    })?;
    w.write_all(&framed).await?;
    w.flush().await
}
