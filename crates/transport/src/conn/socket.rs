//! A session's socket as protected halves ([`Reader`], [`Writer`]), and the process's limit
//! of open files raised for servers and proxies that hold many.

use crate::stream::handshake::secure_pair_with;
use crate::stream::{SecureReader, SecureWriter};
use std::os::fd::AsRawFd;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// A session's reader over a tokio TCP stream.
pub type Reader = SecureReader<OwnedReadHalf>;
/// A session's writer over a tokio TCP stream.
pub type Writer = SecureWriter<OwnedWriteHalf>;
/// [`secure_pair_with`] over the two halves of a connection's socket; a protected session's
/// reader wakes on whole records ([`SecureReader::wake_on_whole_records`], `SO_RCVLOWAT`).
pub(crate) fn socket_pair(
    session: Option<nena_proto::Session>,
    leftover: Vec<u8>,
    r: OwnedReadHalf,
    w: OwnedWriteHalf,
    cap: usize,
) -> (Reader, Writer) {
    let fd = r.as_ref().as_raw_fd();
    let (mut reader, writer) = secure_pair_with(session, leftover, r, w, cap);
    if reader.info().is_some() {
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
