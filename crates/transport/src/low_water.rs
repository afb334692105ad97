//! The receive low-water mark of a session's socket (`SO_RCVLOWAT`): a reader that knows how
//! many bytes of a record are still to come asks the socket to wake it only once they are
//! all there, so a record that arrives in many packets costs one wake-up and one read. The
//! reader sets the mark before the read that may find the socket empty, never after it, so
//! no arrival is missed, and lowers it to 1 before any wait with no record begun (a small
//! record that comes next still wakes it); a mark the socket refuses turns this off.
//! Used by [`crate::stream::SecureReader::wake_on_whole_records`].

use std::io;

/// Bytes of a record still to come from which the reader asks the socket to wake it only
/// once they are all there ([`crate::stream::SecureReader::wake_on_whole_records`]); below it, a wake-up
/// per packet costs too little to trade for a system call.
pub const LOW_WATER_MIN: usize = 4096;

/// How a reader sets its socket's receive low-water mark (`SO_RCVLOWAT`), and the mark set.
pub(crate) struct LowWater {
    set: Box<dyn Fn(usize) -> io::Result<()> + Send + Sync>,
    current: usize,
}

/// `SO_RCVLOWAT` of socket `fd`, the least number of queued bytes that makes it readable
/// (an end of stream or an error still does at once).
pub fn set_rcvlowat(fd: std::os::fd::RawFd, bytes: usize) -> io::Result<()> {
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: a valid pointer to an int and its size; a closed fd fails with EBADF.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl LowWater {
    /// A mark set through `set`, starting at 1.
    pub(crate) fn new(set: impl Fn(usize) -> io::Result<()> + Send + Sync + 'static) -> Self {
        LowWater {
            set: Box::new(set),
            current: 1,
        }
    }

    /// Set the mark for the next wait, `missing` bytes of a record being still to come (from
    /// [`LOW_WATER_MIN`]; 1 below it). False when the socket refused: the caller stops
    /// adjusting (the mark is put back to 1 as far as the socket lets it).
    pub(crate) fn wait_for(&mut self, missing: usize) -> bool {
        let want = if missing >= LOW_WATER_MIN { missing } else { 1 };
        if want == self.current {
            return true;
        }
        match (self.set)(want) {
            Ok(()) => {
                self.current = want;
                true
            }
            Err(e) => {
                log::debug!("receive low-water mark {want}: {e}; waking per arrival instead");
                let _ = (self.set)(1);
                false
            }
        }
    }
}
