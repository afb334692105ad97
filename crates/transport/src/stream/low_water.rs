//! The receive low-water mark of a session's socket (`SO_RCVLOWAT`): a reader that knows how
//! many bytes of a record are still to come asks the socket to wake it only once they are
//! all there, so a record that arrives in many packets costs one wake-up and one read. The
//! reader sets the mark before the read that may find the socket empty, never after it, so
//! no arrival is missed, and lowers it to 1 before any wait with no record begun (a small
//! record that comes next still wakes it); a mark the socket refuses turns this off.
//! Used by [`crate::stream::SecureReader::wake_on_whole_records`]. Also here: the one raise
//! of the mark at a session's start that lets its receive window open wide
//! ([`widen_receive_window`]).

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

/// The receive window a session's socket can open from the start ([`widen_receive_window`]).
pub const RECEIVE_WINDOW_START: usize = 1 << 20;

/// Let the receive window of MPTCP socket `fd` open to [`RECEIVE_WINDOW_START`] from the
/// start, instead of the 64 KiB that the default 128 KiB receive buffer allows until the
/// kernel's autotuning grows it (the buffer stays autotuned: unlike `SO_RCVBUF`, this does not
/// fix its size).
///
/// Why: the kernel's MPTCP (seen on 6.18) sends a window update after the application has
/// read only when the free space has at least doubled since the last window it advertised.
/// A receiver that has sent data of its own (every nena server: its handshake reply) last
/// advertised a window with its buffer empty; when a sender then fills that window before the
/// application reads, the space can at most return to what it was, no update goes out, and
/// the sender waits for its MPTCP retransmission timer: 200 ms. A 2 MiB upload took 205 ms
/// instead of 2 ms on the lab's veth (the same with a bare Python MPTCP client and server, and
/// gone when the server's buffer was raised this way). Raising `SO_RCVLOWAT` grows the
/// buffer (and its subflows') without locking it; the mark goes back to 1 at once.
pub fn widen_receive_window(fd: std::os::fd::RawFd) -> io::Result<()> {
    set_rcvlowat(fd, RECEIVE_WINDOW_START)?;
    set_rcvlowat(fd, 1)
}

/// The receive buffer a session's socket may take when its data begins
/// ([`widen_for_data`]): room for the window the kernel's autotuning gives a bulk transfer on
/// a fast path (24-30 MB measured on the lab's veth), as a limit, not an allocation.
pub const RECEIVE_WINDOW_DATA: usize = 16 << 20;

/// Let the receive window of session socket `fd` open to [`RECEIVE_WINDOW_DATA`] when the
/// session's data begins (the proxy server at the open request, a client taking a session
/// opened ahead). Why: the kernel's MPTCP grows a receive buffer by autotuning from the
/// connection's start; on a session that waited between its handshake and its data (the
/// gateway's sessions opened ahead) the advertised window stayed at 0.7-0.8 MB where a new
/// session's grew to 24-30 MB, and a bulk transfer on veth ran at 2-4 Gbit/s instead of 14-18
/// (`nena bench peers --gateway-warm 8` against 0). As [`widen_receive_window`], this raises
/// the buffer's limit without locking it, and the mark goes back to 1 at once. Best effort: a
/// socket that refuses keeps its autotuned buffer.
pub fn widen_for_data(fd: std::os::fd::RawFd) {
    if let Err(e) = set_rcvlowat(fd, RECEIVE_WINDOW_DATA).and_then(|()| set_rcvlowat(fd, 1)) {
        log::debug!("receive window not widened for the data: {e}");
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn int_opt(fd: std::os::fd::RawFd, opt: libc::c_int) -> libc::c_int {
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: a valid int and its length for the kernel to fill.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&mut v as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        assert_eq!(rc, 0, "{}", io::Error::last_os_error());
        v
    }

    /// The buffer grows to hold the start window (TCP grows it the way MPTCP does, and runs
    /// anywhere), and the low-water mark is back to 1 afterwards.
    #[test]
    fn the_receive_buffer_grows_to_the_start_window_and_the_mark_returns_to_1() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let fd = c.as_raw_fd();
        let before = int_opt(fd, libc::SO_RCVBUF) as usize;
        assert!(before < RECEIVE_WINDOW_START, "{before}");
        widen_receive_window(fd).unwrap();
        let after = int_opt(fd, libc::SO_RCVBUF) as usize;
        // The kernel caps the mark at half of net.ipv4.tcp_rmem's maximum.
        let rmem = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_rmem").unwrap();
        let max: usize = rmem.split_whitespace().nth(2).unwrap().parse().unwrap();
        let want = RECEIVE_WINDOW_START.min(max / 2);
        assert!(after >= want, "{before} -> {after}, wanted {want}");
        assert_eq!(int_opt(fd, libc::SO_RCVLOWAT), 1);
    }

    /// When the data begins the buffer may grow further, to the data window (as far as
    /// net.ipv4.tcp_rmem lets it), and the mark is back to 1.
    #[test]
    fn the_receive_buffer_grows_to_the_data_window_when_the_data_begins() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let fd = c.as_raw_fd();
        widen_receive_window(fd).unwrap();
        let start = int_opt(fd, libc::SO_RCVBUF) as usize;
        widen_for_data(fd);
        let after = int_opt(fd, libc::SO_RCVBUF) as usize;
        let rmem = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_rmem").unwrap();
        let max: usize = rmem.split_whitespace().nth(2).unwrap().parse().unwrap();
        let want = RECEIVE_WINDOW_DATA.min(max / 2);
        assert!(after >= want, "{start} -> {after}, wanted {want}");
        if want > RECEIVE_WINDOW_START {
            assert!(after > start, "{start} -> {after}");
        }
        assert_eq!(int_opt(fd, libc::SO_RCVLOWAT), 1);
    }
}
