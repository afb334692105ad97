//! The TCP sockets of a process tree become MPTCP through seccomp user notification, for
//! where the kernel refuses tracing programs (fmod_ret), as some hosts do (lockdown, a BPF
//! LSM): `nena run --mptcp-only`'s second road.
//!
//! The child installs, between fork and exec, a seccomp filter (classic BPF, [`filter`]) that
//! hands `socket(AF_INET|AF_INET6, SOCK_STREAM, 0|IPPROTO_TCP)` to a listener, and sends the
//! listener's descriptor to the parent over a socket pair ([`pair`], [`ChildSide::install`]).
//! The parent ([`Mptcpizer`], from [`ParentSide::serve`]) answers each such call by creating
//! the socket itself with `IPPROTO_MPTCP` and installing it in the child as the call's result
//! (`SECCOMP_IOCTL_NOTIF_ADDFD` with `SECCOMP_ADDFD_FLAG_SEND`, Linux 5.14+); if MPTCP sockets
//! cannot be created, the call goes on as it was (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`). The
//! filter is inherited by the child's children. A filter cannot be taken off a process: when
//! the [`Mptcpizer`] is dropped it stops answering and closes the listener, and later calls
//! fail with ENOSYS (`nena run` drops it once CMD ended, just before it kills CMD's cgroup).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const AND_K: u16 = 0x54;
const RET_K: u16 = 0x06;

const fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

const fn jump(k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: JEQ_K,
        jt,
        jf,
        k,
    }
}

/// Offsets in `struct seccomp_data`: nr, arch, then args[i] at 16 + 8 i (low half first).
const NR: u32 = 0;
const ARCH: u32 = 4;
const fn arg(i: u32) -> u32 {
    16 + 8 * i
}

/// The seccomp filter: TCP stream sockets of IPv4/IPv6 go to the listener, every other
/// system call is allowed.
pub fn filter() -> [libc::sock_filter; 15] {
    [
        /* 0 */ stmt(LD_W_ABS, ARCH),
        /* 1 */ jump(AUDIT_ARCH, 0, 12),
        /* 2 */ stmt(LD_W_ABS, NR),
        /* 3 */ jump(libc::SYS_socket as u32, 0, 10),
        /* 4 */ stmt(LD_W_ABS, arg(0)),
        /* 5 */ jump(libc::AF_INET as u32, 1, 0),
        /* 6 */ jump(libc::AF_INET6 as u32, 0, 7),
        /* 7 */ stmt(LD_W_ABS, arg(1)),
        /* 8 */ stmt(AND_K, 0xf),
        /* 9 */ jump(libc::SOCK_STREAM as u32, 0, 4),
        /* 10 */ stmt(LD_W_ABS, arg(2)),
        /* 11 */ jump(0, 1, 0),
        /* 12 */ jump(libc::IPPROTO_TCP as u32, 0, 1),
        /* 13 */ stmt(RET_K, libc::SECCOMP_RET_USER_NOTIF),
        /* 14 */ stmt(RET_K, libc::SECCOMP_RET_ALLOW),
    ]
}

/// What the child needs between fork and exec: the filter and its end of the socket pair.
pub struct ChildSide {
    filter: [libc::sock_filter; 15],
    sock: RawFd,
}

/// The parent's end: receives the listener once CMD started.
pub struct ParentSide {
    sock: UnixStream,
    _child: UnixStream,
}

pub fn pair() -> std::io::Result<(ParentSide, ChildSide)> {
    let (p, c) = UnixStream::pair()?;
    let child = ChildSide {
        filter: filter(),
        sock: c.as_raw_fd(),
    };
    Ok((ParentSide { sock: p, _child: c }, child))
}

type CmsgBuf = [u64; 4];

impl ChildSide {
    /// In the child between fork and exec: install the filter and send the listener.
    /// Only system calls, no allocation.
    ///
    /// # Safety
    /// Call only in the child between fork and exec.
    pub unsafe fn install(&self) -> std::io::Result<()> {
        let prog = libc::sock_fprog {
            len: self.filter.len() as u16,
            filter: self.filter.as_ptr() as *mut libc::sock_filter,
        };
        let install = || {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
                &prog as *const libc::sock_fprog,
            )
        };
        let mut fd = install();
        if fd < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EACCES) {
            // Without CAP_SYS_ADMIN a filter needs no_new_privs.
            libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
            fd = install();
        }
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let fd = fd as RawFd;
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut cbuf: CmsgBuf = [0; 4];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(4) as _;
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(4) as _;
        std::ptr::copy_nonoverlapping(&fd as *const RawFd as *const u8, libc::CMSG_DATA(c), 4);
        let sent = libc::sendmsg(self.sock, &msg, 0);
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        if sent != 1 {
            return Err(err);
        }
        Ok(())
    }
}

impl ParentSide {
    /// After CMD started: the listener it sent.
    pub fn listener(self) -> std::io::Result<OwnedFd> {
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut cbuf: CmsgBuf = [0; 4];
        // SAFETY: a zeroed msghdr pointing at buffers that live through the call.
        unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = cbuf.as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of::<CmsgBuf>() as _;
            let n = libc::recvmsg(
                self.sock.as_raw_fd(),
                &mut msg,
                libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
            );
            if n != 1 {
                return Err(std::io::Error::other(
                    "CMD sent no seccomp listener (the filter was not installed)",
                ));
            }
            let c = libc::CMSG_FIRSTHDR(&msg);
            if c.is_null() || (*c).cmsg_type != libc::SCM_RIGHTS {
                return Err(std::io::Error::other("no descriptor in CMD's message"));
            }
            let mut fd: RawFd = -1;
            std::ptr::copy_nonoverlapping(libc::CMSG_DATA(c), &mut fd as *mut RawFd as *mut u8, 4);
            Ok(OwnedFd::from_raw_fd(fd))
        }
    }
}

/// Answers the listener's notifications on a thread of its own: each `socket()` becomes an
/// MPTCP socket. Stops when the listener closes (the child and all its children gone), and
/// when dropped (the listener closed then).
pub struct Mptcpizer {
    made: Arc<AtomicU64>,
    /// Written on drop: wakes the thread, which ends.
    stop: OwnedFd,
    thread: Option<JoinHandle<()>>,
}

impl ParentSide {
    /// After the child started: serve the listener it sent.
    pub fn serve(self) -> std::io::Result<Mptcpizer> {
        Mptcpizer::start(self.listener()?)
    }
}

impl Mptcpizer {
    /// Serves `listener` (a seccomp user-notification listener of the filter [`filter`]).
    pub fn start(listener: OwnedFd) -> std::io::Result<Mptcpizer> {
        // SAFETY: eventfd has no memory arguments; the result is checked.
        let stop = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if stop < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a descriptor just created, owned here alone.
        let stop = unsafe { OwnedFd::from_raw_fd(stop) };
        let made = Arc::new(AtomicU64::new(0));
        let count = made.clone();
        let wake = stop.as_raw_fd();
        let thread = std::thread::Builder::new()
            .name("mptcpize".into())
            .spawn(move || answer(&listener, wake, &count))?;
        Ok(Mptcpizer {
            made,
            stop,
            thread: Some(thread),
        })
    }

    /// Sockets made MPTCP so far.
    pub fn made(&self) -> u64 {
        self.made.load(Ordering::Relaxed)
    }
}

impl Drop for Mptcpizer {
    fn drop(&mut self) {
        let one = 1u64;
        // SAFETY: an 8-byte write to our eventfd.
        unsafe { libc::write(self.stop.as_raw_fd(), (&one as *const u64).cast(), 8) };
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The thread of an [`Mptcpizer`]: until the listener hangs up or `stop` is written.
fn answer(listener: &OwnedFd, stop: RawFd, count: &AtomicU64) {
    loop {
        // SAFETY: poll and ioctls on our listener with structs of the kernel's layout (libc's).
        unsafe {
            // Wait for a notification; POLLHUP: no process uses the filter any more (the
            // child and its children are gone), and RECV would fail at once, again and again
            // (ENOENT).
            let mut pfd = [
                libc::pollfd {
                    fd: listener.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: stop,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            if libc::poll(pfd.as_mut_ptr(), 2, -1) < 0 {
                if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return;
            }
            if pfd[1].revents != 0 || pfd[0].revents & libc::POLLIN == 0 {
                return;
            }
            let mut req: libc::seccomp_notif = std::mem::zeroed();
            if libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV,
                &mut req,
            ) < 0
            {
                match std::io::Error::last_os_error().raw_os_error() {
                    Some(libc::EINTR) | Some(libc::ENOENT) => continue,
                    _ => return,
                }
            }
            let family = req.data.args[0] as i32;
            let ty = req.data.args[1] as i32;
            let s = libc::socket(family, ty, libc::IPPROTO_MPTCP);
            if s < 0 {
                let resp = libc::seccomp_notif_resp {
                    id: req.id,
                    val: 0,
                    error: 0,
                    flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
                };
                libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SEND, &resp);
                continue;
            }
            let addfd = libc::seccomp_notif_addfd {
                id: req.id,
                flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
                srcfd: s as u32,
                newfd: 0,
                newfd_flags: if ty & libc::SOCK_CLOEXEC != 0 {
                    libc::O_CLOEXEC as u32
                } else {
                    0
                },
            };
            let r = libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ADDFD,
                &addfd,
            );
            libc::close(s);
            if r >= 0 {
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every jump of the filter lands inside it, and it ends in the two returns.
    #[test]
    fn the_filters_jumps_stay_inside_and_it_ends_in_returns() {
        let f = filter();
        for (i, ins) in f.iter().enumerate() {
            if ins.code == JEQ_K {
                assert!(i + 1 + (ins.jt as usize) < f.len(), "{i}");
                assert!(i + 1 + (ins.jf as usize) < f.len(), "{i}");
            }
        }
        assert_eq!(f[13].k, libc::SECCOMP_RET_USER_NOTIF);
        assert_eq!(f[14].k, libc::SECCOMP_RET_ALLOW);
        // Every "no" of a check goes to ALLOW.
        for i in [1usize, 3, 6, 9, 12] {
            assert_eq!(i + 1 + f[i].jf as usize, 14, "{i}");
        }
    }
}
