//! Reading MPTCP state from a socket: fallback detection (`MPTCP_INFO`), connection-level
//! counters ([`ConnInfo`]) and per-subflow addresses and byte counters ([`SubflowInfo`],
//! from `MPTCP_FULL_INFO`, or `MPTCP_TCPINFO` + `MPTCP_SUBFLOW_ADDRS` on kernels < 6.5);
//! and the one option nena sets on it: its congestion control ([`set_congestion`]).

use crate::uapi::*;
use serde::Serialize;
use std::io;
use std::mem::size_of;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Connection-level MPTCP state (`struct mptcp_info`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ConnInfo {
    /// Local connection token (what the `mptcp_pm` netlink family calls `token`).
    pub token: u32,
    /// Number of subflows, the initial one included.
    pub subflows: u32,
    /// `mptcpi_flags` (bit 0 fallback, bit 1 remote key received).
    pub flags: u32,
    /// Whether the peer's key was received (MP_CAPABLE completed).
    pub remote_key_received: bool,
    /// Data-sequence counters.
    pub write_seq: u64,
    pub snd_una: u64,
    pub rcv_nxt: u64,
    /// Bytes sent / received / data-acked at the MPTCP level (None on kernels < 6.5).
    pub bytes_sent: Option<u64>,
    pub bytes_received: Option<u64>,
    pub bytes_acked: Option<u64>,
    pub bytes_retrans: Option<u64>,
    /// Whether DSS checksums are in use.
    pub csum_enabled: bool,
}

/// One subflow of an MPTCP connection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SubflowInfo {
    /// Per-connection subflow id (the initial subflow is 1; 0 on kernels < 6.5).
    pub id: u32,
    pub local: Option<SocketAddr>,
    pub remote: Option<SocketAddr>,
    /// TCP state (`TCP_ESTABLISHED` = 1, ...).
    pub state: u8,
    /// Payload bytes this subflow sent, retransmissions included (`tcpi_bytes_sent`).
    pub bytes_sent: u64,
    /// Payload bytes received on this subflow (`tcpi_bytes_received`).
    pub bytes_received: u64,
    /// Payload bytes acknowledged on this subflow (`tcpi_bytes_acked`).
    pub bytes_acked: u64,
    /// Payload bytes retransmitted on this subflow (`tcpi_bytes_retrans`).
    pub bytes_retrans: u64,
    /// Smoothed RTT in microseconds.
    pub rtt_us: u32,
    /// The subflow's retransmission timeout in microseconds (`tcpi_rto`).
    pub rto_us: u32,
    /// Bytes in the subflow's write queue not yet transmitted (`tcpi_notsent_bytes`): a
    /// send the stack could not complete (a local drop, a full queue) leaves them there.
    pub notsent_bytes: u32,
}

fn getsockopt_raw(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    buf: *mut libc::c_void,
    len: usize,
) -> io::Result<usize> {
    let mut optlen = len as libc::socklen_t;
    // SAFETY: `buf` points to at least `len` writable bytes owned by the caller.
    let rc = unsafe { libc::getsockopt(fd.as_raw_fd(), level, name, buf, &mut optlen) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(optlen as usize)
    }
}

/// The `SOL_MPTCP` structs read whole by [`mptcp_getsockopt`].
///
/// # Safety
/// `#[repr(C)]` structs of plain integers only: any bytes the kernel writes are a valid value.
unsafe trait KernelFilled: Sized {}
// SAFETY: both are #[repr(C)] structs of integers (uapi.rs).
unsafe impl KernelFilled for MptcpInfo {}
// SAFETY: as above.
unsafe impl KernelFilled for MptcpFullInfo {}

/// `getsockopt(SOL_MPTCP, name)` into `v`; returns the number of bytes the kernel filled in.
fn mptcp_getsockopt<T: KernelFilled>(
    fd: BorrowedFd<'_>,
    name: libc::c_int,
    v: &mut T,
) -> io::Result<usize> {
    getsockopt_raw(
        fd,
        SOL_MPTCP,
        name,
        v as *mut T as *mut libc::c_void,
        size_of::<T>(),
    )
}

/// Whether the error of a `SOL_MPTCP` getsockopt means "this is plain TCP": a fallen-back
/// MPTCP socket passes the option to its TCP subflow, which rejects the level.
fn is_not_mptcp_error(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EOPNOTSUPP) | Some(libc::ENOPROTOOPT)
    )
}

/// `MPTCP_INFO` with the number of bytes the kernel filled in.
pub(crate) fn raw_info(fd: BorrowedFd<'_>) -> io::Result<(MptcpInfo, usize)> {
    let mut info = MptcpInfo::default();
    let len = mptcp_getsockopt(fd, MPTCP_INFO, &mut info)?;
    Ok((info, len))
}

/// True if the socket is plain TCP: either a TCP socket, or an MPTCP socket whose connection
/// fell back to TCP (peer without MPTCP, middlebox, SYN retries without MP_CAPABLE, ...).
pub fn is_fallback(fd: BorrowedFd<'_>) -> io::Result<bool> {
    match raw_info(fd) {
        Ok((info, _)) => Ok(info.mptcpi_flags & MPTCP_INFO_FLAG_FALLBACK != 0),
        Err(e) if is_not_mptcp_error(&e) => Ok(true),
        Err(e) => Err(e),
    }
}

/// `MPTCP_FULL_INFO` without arrays: `mptcp_info` plus the real number of subflows.
fn full_info_count(fd: BorrowedFd<'_>) -> io::Result<(MptcpInfo, usize, u32)> {
    let mut full = MptcpFullInfo::default();
    let len = mptcp_getsockopt(fd, MPTCP_FULL_INFO, &mut full)?;
    let ilen = len.saturating_sub(std::mem::offset_of!(MptcpFullInfo, mptcp_info));
    Ok((full.mptcp_info, ilen, full.num_subflows))
}

/// Connection-level MPTCP information. Fails with `EOPNOTSUPP` on a plain-TCP connection.
/// `subflows` is the real number of subflows (`MPTCP_FULL_INFO`); kernels < 6.5 fall back to
/// the PM's counter of extra subflows + 1, which the userspace PM does not maintain.
pub fn info(fd: BorrowedFd<'_>) -> io::Result<ConnInfo> {
    let (i, len, count) = match full_info_count(fd) {
        Ok((i, len, n)) if len >= MPTCP_INFO_RCV_NXT_END => (i, len, Some(n)),
        _ => {
            let (i, len) = raw_info(fd)?;
            (i, len, None)
        }
    };
    if len < MPTCP_INFO_RCV_NXT_END {
        return Err(io::Error::other(format!(
            "MPTCP_INFO returned only {len} bytes"
        )));
    }
    let new = len >= MPTCP_INFO_BYTES_ACKED_END;
    let subflows = if let Some(n) = count {
        n
    } else if len >= MPTCP_INFO_SUBFLOWS_TOTAL_END && i.mptcpi_subflows_total > 0 {
        u32::from(i.mptcpi_subflows_total)
    } else {
        u32::from(i.mptcpi_subflows) + 1
    };
    Ok(ConnInfo {
        token: i.mptcpi_token,
        subflows,
        flags: i.mptcpi_flags,
        remote_key_received: i.mptcpi_flags & MPTCP_INFO_FLAG_REMOTE_KEY_RECEIVED != 0,
        write_seq: i.mptcpi_write_seq,
        snd_una: i.mptcpi_snd_una,
        rcv_nxt: i.mptcpi_rcv_nxt,
        bytes_sent: new.then_some(i.mptcpi_bytes_sent),
        bytes_received: new.then_some(i.mptcpi_bytes_received),
        bytes_acked: new.then_some(i.mptcpi_bytes_acked),
        bytes_retrans: new.then_some(i.mptcpi_bytes_retrans),
        csum_enabled: i.mptcpi_csum_enabled != 0,
    })
}

fn subflow_from(
    id: u32,
    addrs: Option<&MptcpSubflowAddrs>,
    t: &TcpInfo,
    tlen: usize,
) -> SubflowInfo {
    SubflowInfo {
        id,
        local: addrs.and_then(|a| sockaddr_to_std(&a.local)),
        remote: addrs.and_then(|a| sockaddr_to_std(&a.remote)),
        state: t.tcpi_state,
        bytes_sent: if tlen >= TCP_INFO_BYTES_SENT_END {
            t.tcpi_bytes_sent
        } else {
            0
        },
        bytes_received: if tlen >= TCP_INFO_BYTES_RECEIVED_END {
            t.tcpi_bytes_received
        } else {
            0
        },
        bytes_acked: if tlen >= TCP_INFO_BYTES_RECEIVED_END {
            t.tcpi_bytes_acked
        } else {
            0
        },
        bytes_retrans: if tlen >= TCP_INFO_BYTES_SENT_END {
            t.tcpi_bytes_retrans
        } else {
            0
        },
        rtt_us: t.tcpi_rtt,
        rto_us: t.tcpi_rto,
        notsent_bytes: if tlen >= std::mem::offset_of!(TcpInfo, tcpi_notsent_bytes) + 4 {
            t.tcpi_notsent_bytes
        } else {
            0
        },
    }
}

/// Largest number of subflows read in one call (the kernel's own limit is 8 extra subflows).
const MAX_SUBFLOWS: usize = 64;

/// All subflows of an MPTCP connection, in the kernel's order (initial subflow first).
/// Fails with `EOPNOTSUPP` on a plain-TCP connection.
pub fn subflows(fd: BorrowedFd<'_>) -> io::Result<Vec<SubflowInfo>> {
    match full_info(fd) {
        Ok(v) => Ok(v),
        // Kernels before 6.5 do not know MPTCP_FULL_INFO: use the two older options, but only
        // if the socket is MPTCP at all (otherwise keep the "not MPTCP" error).
        Err(e) if is_not_mptcp_error(&e) || e.raw_os_error() == Some(libc::EINVAL) => {
            raw_info(fd)?;
            legacy_subflows(fd)
        }
        Err(e) => Err(e),
    }
}

/// `MPTCP_FULL_INFO` with arrays for up to `cap` subflows: the header the kernel filled in,
/// and the subflow and `tcp_info` arrays (`cap` entries each, the first `num_subflows` set).
fn full_info_arrays(
    fd: BorrowedFd<'_>,
    cap: usize,
) -> io::Result<(MptcpFullInfo, Vec<MptcpSubflowInfo>, Vec<TcpInfo>)> {
    let mut sfinfo = vec![MptcpSubflowInfo::default(); cap];
    let mut tinfo = vec![TcpInfo::default(); cap];
    let mut full = MptcpFullInfo {
        size_tcpinfo_user: size_of::<TcpInfo>() as u32,
        size_sfinfo_user: size_of::<MptcpSubflowInfo>() as u32,
        size_arrays_user: cap as u32,
        subflow_info: sfinfo.as_mut_ptr() as u64,
        tcp_info: tinfo.as_mut_ptr() as u64,
        ..Default::default()
    };
    mptcp_getsockopt(fd, MPTCP_FULL_INFO, &mut full)?;
    Ok((full, sfinfo, tinfo))
}

fn full_info(fd: BorrowedFd<'_>) -> io::Result<Vec<SubflowInfo>> {
    let (full, sfinfo, tinfo) = full_info_arrays(fd, MAX_SUBFLOWS)?;
    let n = (full.num_subflows as usize).min(MAX_SUBFLOWS);
    let tlen = (full.size_tcpinfo_kernel as usize).min(size_of::<TcpInfo>());
    let slen = full.size_sfinfo_kernel as usize;
    let have_addrs = slen >= size_of::<MptcpSubflowInfo>();
    Ok((0..n)
        .map(|k| {
            subflow_from(
                sfinfo[k].id,
                have_addrs.then_some(&sfinfo[k].addrs),
                &tinfo[k],
                tlen,
            )
        })
        .collect())
}

/// Read an `MPTCP_TCPINFO`/`MPTCP_SUBFLOW_ADDRS`-style array: header + `MAX_SUBFLOWS` × `T`.
fn legacy_array<T: Copy + Default>(
    fd: BorrowedFd<'_>,
    name: libc::c_int,
) -> io::Result<(Vec<T>, usize)> {
    let hdr = size_of::<MptcpSubflowData>();
    let elem = size_of::<T>();
    // u64 storage keeps the 8-byte alignment of the header and of the elements.
    let mut buf = vec![0u64; (hdr + MAX_SUBFLOWS * elem).div_ceil(8)];
    let head = MptcpSubflowData {
        size_subflow_data: hdr as u32,
        num_subflows: 0,
        size_kernel: 0,
        size_user: elem as u32,
    };
    // SAFETY: buf is at least `hdr` bytes and 8-aligned.
    unsafe { std::ptr::write(buf.as_mut_ptr() as *mut MptcpSubflowData, head) };
    let len = getsockopt_raw(
        fd,
        SOL_MPTCP,
        name,
        buf.as_mut_ptr() as *mut libc::c_void,
        buf.len() * 8,
    )?;
    // SAFETY: as above.
    let head = unsafe { std::ptr::read(buf.as_ptr() as *const MptcpSubflowData) };
    let n = (head.num_subflows as usize)
        .min(MAX_SUBFLOWS)
        .min(len.saturating_sub(hdr) / elem.max(1));
    let base = buf.as_ptr() as *const u8;
    let items = (0..n)
        .map(|k| {
            // SAFETY: element k lies within the first `len` bytes of buf; read_unaligned is
            // used although elements are aligned, to stay correct for any `size_user`.
            unsafe { std::ptr::read_unaligned(base.add(hdr + k * elem) as *const T) }
        })
        .collect();
    Ok((items, (head.size_kernel as usize).min(elem)))
}

fn legacy_subflows(fd: BorrowedFd<'_>) -> io::Result<Vec<SubflowInfo>> {
    let (tinfo, tlen) = legacy_array::<TcpInfo>(fd, MPTCP_TCPINFO)?;
    let (addrs, alen) = legacy_array::<MptcpSubflowAddrs>(fd, MPTCP_SUBFLOW_ADDRS)?;
    let have_addrs = alen >= size_of::<MptcpSubflowAddrs>();
    Ok(tinfo
        .iter()
        .enumerate()
        .map(|(k, t)| subflow_from(0, if have_addrs { addrs.get(k) } else { None }, t, tlen))
        .collect())
}

/// `snd_cwnd × snd_mss` of the first subflow.
pub(crate) fn initial_window(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let (full, _, tinfo) = full_info_arrays(fd, 1)?;
    if full.num_subflows == 0 {
        return Err(io::Error::other("the connection has no subflow"));
    }
    Ok(u64::from(tinfo[0].tcpi_snd_cwnd) * u64::from(tinfo[0].tcpi_snd_mss))
}

fn fmt_addr(a: &Option<SocketAddr>) -> String {
    a.map(|a| a.to_string()).unwrap_or_else(|| "?".into())
}

/// A one-line human description of the connection, for logs.
pub fn describe(fd: BorrowedFd<'_>) -> String {
    match is_fallback(fd) {
        Err(e) => return format!("socket state unavailable: {e}"),
        Ok(true) => return "plain TCP (no MPTCP or fallback)".into(),
        Ok(false) => {}
    }
    let mut s = match info(fd) {
        Ok(i) => format!(
            "MPTCP token {:#010x}, {} subflow(s), sent {} B, received {} B, data-acked {} B",
            i.token,
            i.subflows,
            i.bytes_sent.map_or("?".into(), |b| b.to_string()),
            i.bytes_received.map_or("?".into(), |b| b.to_string()),
            i.bytes_acked.map_or("?".into(), |b| b.to_string()),
        ),
        Err(e) => format!("MPTCP (info unavailable: {e})"),
    };
    if let Ok(sfs) = subflows(fd) {
        for sf in sfs {
            s.push_str(&format!(
                "; #{} {} -> {} sent {} B received {} B rtt {} us",
                sf.id,
                fmt_addr(&sf.local),
                fmt_addr(&sf.remote),
                sf.bytes_sent,
                sf.bytes_received,
                sf.rtt_us
            ));
        }
    }
    s
}

/// `SO_LINGER` {on, 0}: closing the socket then resets it (on an MPTCP socket, every
/// subflow) instead of delivering what is still unacknowledged.
pub fn set_linger_zero(fd: BorrowedFd<'_>) -> io::Result<()> {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    nix::sys::socket::setsockopt(&fd, nix::sys::socket::sockopt::Linger, &l)
        .map_err(io::Error::from)
}

/// `SO_LINGER` off: closing the socket delivers what is still unacknowledged (the default).
pub fn set_linger_off(fd: BorrowedFd<'_>) -> io::Result<()> {
    let l = libc::linger {
        l_onoff: 0,
        l_linger: 0,
    };
    nix::sys::socket::setsockopt(&fd, nix::sys::socket::sockopt::Linger, &l)
        .map_err(io::Error::from)
}

/// `connect(AF_UNSPEC)`: disconnects the socket at once. On an MPTCP socket the kernel's
/// `mptcp_disconnect` fast-closes the connection (every subflow reset, the token gone).
pub fn disconnect(fd: BorrowedFd<'_>) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let sa = libc::sockaddr {
        sa_family: libc::AF_UNSPEC as libc::sa_family_t,
        sa_data: [0; 14],
    };
    // SAFETY: a valid descriptor and a sockaddr that lives for the call, with its size.
    let rc = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            &sa,
            std::mem::size_of::<libc::sockaddr>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `setsockopt(TCP_CONGESTION)`: on an MPTCP socket the kernel applies it to every subflow.
/// ENOENT: no congestion control of that name is registered.
pub fn set_congestion(fd: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    // SAFETY: valid fd; pointer and length of a live buffer.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `getsockopt(TCP_CONGESTION)`: the congestion control of a TCP socket, or of every subflow
/// of an MPTCP socket.
pub fn congestion(fd: BorrowedFd<'_>) -> io::Result<String> {
    let mut buf = [0u8; 16];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: valid fd; buf and len describe a live buffer.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let s = &buf[..(len as usize).min(buf.len())];
    let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
    Ok(String::from_utf8_lossy(&s[..end]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;

    /// A plain TCP loopback socket is reported as fallback, and info()/subflows() refuse it.
    #[test]
    fn plain_tcp_is_fallback() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        assert!(is_fallback(c.as_fd()).unwrap());
        assert!(info(c.as_fd()).is_err());
        assert!(subflows(c.as_fd()).is_err());
        assert!(describe(c.as_fd()).contains("plain TCP"));
    }
}
