//! `#[repr(C)]` mirrors of the kernel's MPTCP socket-option uapi (`linux/mptcp.h`,
//! `linux/tcp.h`, as of Linux 6.18) and the constants nena needs.
//!
//! The kernel copies `min(user size, kernel size)` bytes of each structure and reports its
//! own size (`size_kernel`, `size_tcpinfo_kernel`, `size_sfinfo_kernel`, or `optlen` for
//! `MPTCP_INFO`), so an older kernel may fill only a prefix: callers check the reported size
//! before trusting a field (see [`MPTCP_INFO_BYTES_ACKED_END`] and friends).

/// `IPPROTO_MPTCP`.
pub const IPPROTO_MPTCP: libc::c_int = 262;
/// `SOL_MPTCP`: socket-option level of the MPTCP options below.
pub const SOL_MPTCP: libc::c_int = 284;

/// `getsockopt(SOL_MPTCP, MPTCP_INFO)`: `struct mptcp_info`.
pub const MPTCP_INFO: libc::c_int = 1;
/// `getsockopt(SOL_MPTCP, MPTCP_TCPINFO)`: `mptcp_subflow_data` + `tcp_info[]`.
pub const MPTCP_TCPINFO: libc::c_int = 2;
/// `getsockopt(SOL_MPTCP, MPTCP_SUBFLOW_ADDRS)`: `mptcp_subflow_data` + `mptcp_subflow_addrs[]`.
pub const MPTCP_SUBFLOW_ADDRS: libc::c_int = 3;
/// `getsockopt(SOL_MPTCP, MPTCP_FULL_INFO)`: `struct mptcp_full_info` (Linux >= 6.5).
pub const MPTCP_FULL_INFO: libc::c_int = 4;

/// `mptcpi_flags`: the connection fell back to plain TCP.
pub const MPTCP_INFO_FLAG_FALLBACK: u32 = 1 << 0;
/// `mptcpi_flags`: the peer's key was received (MP_CAPABLE completed).
pub const MPTCP_INFO_FLAG_REMOTE_KEY_RECEIVED: u32 = 1 << 1;

/// `struct mptcp_info` (Linux 6.18).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct MptcpInfo {
    /// Number of *additional* subflows (the initial one is not counted).
    pub mptcpi_subflows: u8,
    pub mptcpi_add_addr_signal: u8,
    pub mptcpi_add_addr_accepted: u8,
    pub mptcpi_subflows_max: u8,
    pub mptcpi_add_addr_signal_max: u8,
    pub mptcpi_add_addr_accepted_max: u8,
    pub mptcpi_flags: u32,
    pub mptcpi_token: u32,
    pub mptcpi_write_seq: u64,
    pub mptcpi_snd_una: u64,
    pub mptcpi_rcv_nxt: u64,
    pub mptcpi_local_addr_used: u8,
    pub mptcpi_local_addr_max: u8,
    pub mptcpi_csum_enabled: u8,
    pub mptcpi_retransmits: u32,
    pub mptcpi_bytes_retrans: u64,
    pub mptcpi_bytes_sent: u64,
    pub mptcpi_bytes_received: u64,
    pub mptcpi_bytes_acked: u64,
    /// Total number of subflows, the initial one included (Linux >= 6.10).
    pub mptcpi_subflows_total: u8,
    pub mptcpi_endp_add_addr_max: u8,
    pub reserved: [u8; 2],
    pub mptcpi_last_data_sent: u32,
    pub mptcpi_last_data_recv: u32,
    pub mptcpi_last_ack_recv: u32,
}

/// End offset of `mptcpi_rcv_nxt`: the original (Linux 5.16) structure ends 3 bytes later.
pub const MPTCP_INFO_RCV_NXT_END: usize = 40;
/// End offset of `mptcpi_bytes_acked` (Linux >= 6.5).
pub const MPTCP_INFO_BYTES_ACKED_END: usize = 80;
/// End offset of `mptcpi_subflows_total` (Linux >= 6.10).
pub const MPTCP_INFO_SUBFLOWS_TOTAL_END: usize = 81;

/// `struct mptcp_subflow_data`: header of the `MPTCP_TCPINFO` / `MPTCP_SUBFLOW_ADDRS` replies.
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy, Default)]
pub struct MptcpSubflowData {
    /// Size of this structure in user space.
    pub size_subflow_data: u32,
    /// Set by the kernel: number of subflows.
    pub num_subflows: u32,
    /// Set by the kernel: size of one element on the kernel side.
    pub size_kernel: u32,
    /// Size of one element in user space.
    pub size_user: u32,
}

/// `struct mptcp_subflow_addrs`: two `sockaddr_storage` unions (local, remote).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct MptcpSubflowAddrs {
    pub local: libc::sockaddr_storage,
    pub remote: libc::sockaddr_storage,
}

impl Default for MptcpSubflowAddrs {
    fn default() -> Self {
        // SAFETY: sockaddr_storage is plain old data; all-zero is a valid (AF_UNSPEC) value.
        unsafe { std::mem::zeroed() }
    }
}

impl std::fmt::Debug for MptcpSubflowAddrs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MptcpSubflowAddrs")
            .field("local", &sockaddr_to_std(&self.local))
            .field("remote", &sockaddr_to_std(&self.remote))
            .finish()
    }
}

/// `struct mptcp_subflow_info` (element of `MPTCP_FULL_INFO`'s `subflow_info` array).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct MptcpSubflowInfo {
    /// Per-connection subflow id; the initial subflow is 1.
    pub id: u32,
    pub addrs: MptcpSubflowAddrs,
}

/// `struct mptcp_full_info` (Linux >= 6.5).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct MptcpFullInfo {
    /// Set by the kernel.
    pub size_tcpinfo_kernel: u32,
    pub size_tcpinfo_user: u32,
    /// Set by the kernel.
    pub size_sfinfo_kernel: u32,
    pub size_sfinfo_user: u32,
    /// Set by the kernel: the real number of subflows (may exceed `size_arrays_user`).
    pub num_subflows: u32,
    /// How many elements the two arrays below have room for.
    pub size_arrays_user: u32,
    /// User pointer to `size_arrays_user` × `size_sfinfo_user` bytes.
    pub subflow_info: u64,
    /// User pointer to `size_arrays_user` × `size_tcpinfo_user` bytes.
    pub tcp_info: u64,
    pub mptcp_info: MptcpInfo,
}

/// `struct tcp_info`, up to `tcpi_total_rto_time` (Linux 6.7). Newer kernels have more
/// fields after it; they are simply not copied.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpInfo {
    pub tcpi_state: u8,
    pub tcpi_ca_state: u8,
    pub tcpi_retransmits: u8,
    pub tcpi_probes: u8,
    pub tcpi_backoff: u8,
    pub tcpi_options: u8,
    /// `tcpi_snd_wscale:4, tcpi_rcv_wscale:4`.
    pub tcpi_wscale: u8,
    /// `tcpi_delivery_rate_app_limited:1, tcpi_fastopen_client_fail:2`.
    pub tcpi_flags: u8,
    pub tcpi_rto: u32,
    pub tcpi_ato: u32,
    pub tcpi_snd_mss: u32,
    pub tcpi_rcv_mss: u32,
    pub tcpi_unacked: u32,
    pub tcpi_sacked: u32,
    pub tcpi_lost: u32,
    pub tcpi_retrans: u32,
    pub tcpi_fackets: u32,
    pub tcpi_last_data_sent: u32,
    pub tcpi_last_ack_sent: u32,
    pub tcpi_last_data_recv: u32,
    pub tcpi_last_ack_recv: u32,
    pub tcpi_pmtu: u32,
    pub tcpi_rcv_ssthresh: u32,
    pub tcpi_rtt: u32,
    pub tcpi_rttvar: u32,
    pub tcpi_snd_ssthresh: u32,
    pub tcpi_snd_cwnd: u32,
    pub tcpi_advmss: u32,
    pub tcpi_reordering: u32,
    pub tcpi_rcv_rtt: u32,
    pub tcpi_rcv_space: u32,
    pub tcpi_total_retrans: u32,
    pub tcpi_pacing_rate: u64,
    pub tcpi_max_pacing_rate: u64,
    pub tcpi_bytes_acked: u64,
    pub tcpi_bytes_received: u64,
    pub tcpi_segs_out: u32,
    pub tcpi_segs_in: u32,
    pub tcpi_notsent_bytes: u32,
    pub tcpi_min_rtt: u32,
    pub tcpi_data_segs_in: u32,
    pub tcpi_data_segs_out: u32,
    pub tcpi_delivery_rate: u64,
    pub tcpi_busy_time: u64,
    pub tcpi_rwnd_limited: u64,
    pub tcpi_sndbuf_limited: u64,
    pub tcpi_delivered: u32,
    pub tcpi_delivered_ce: u32,
    pub tcpi_bytes_sent: u64,
    pub tcpi_bytes_retrans: u64,
    pub tcpi_dsack_dups: u32,
    pub tcpi_reord_seen: u32,
    pub tcpi_rcv_ooopack: u32,
    pub tcpi_snd_wnd: u32,
    pub tcpi_rcv_wnd: u32,
    pub tcpi_rehash: u32,
    pub tcpi_total_rto: u16,
    pub tcpi_total_rto_recoveries: u16,
    pub tcpi_total_rto_time: u32,
}

/// End offset of `tcpi_bytes_received` (Linux >= 4.1).
pub const TCP_INFO_BYTES_RECEIVED_END: usize = 136;
/// End offset of `tcpi_bytes_sent` (Linux >= 4.19).
pub const TCP_INFO_BYTES_SENT_END: usize = 208;

/// Convert a kernel `sockaddr_storage` holding `AF_INET`/`AF_INET6` to a std address.
pub fn sockaddr_to_std(ss: &libc::sockaddr_storage) -> Option<std::net::SocketAddr> {
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
    match ss.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: sockaddr_storage is large and aligned enough for sockaddr_in.
            let sin = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 = unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    #[test]
    fn mptcp_info_layout_matches_uapi() {
        assert_eq!(offset_of!(MptcpInfo, mptcpi_flags), 8);
        assert_eq!(offset_of!(MptcpInfo, mptcpi_token), 12);
        assert_eq!(offset_of!(MptcpInfo, mptcpi_write_seq), 16);
        assert_eq!(
            offset_of!(MptcpInfo, mptcpi_rcv_nxt) + 8,
            MPTCP_INFO_RCV_NXT_END
        );
        assert_eq!(offset_of!(MptcpInfo, mptcpi_csum_enabled), 42);
        assert_eq!(offset_of!(MptcpInfo, mptcpi_retransmits), 44);
        assert_eq!(offset_of!(MptcpInfo, mptcpi_bytes_retrans), 48);
        assert_eq!(
            offset_of!(MptcpInfo, mptcpi_bytes_acked) + 8,
            MPTCP_INFO_BYTES_ACKED_END
        );
        assert_eq!(
            offset_of!(MptcpInfo, mptcpi_subflows_total) + 1,
            MPTCP_INFO_SUBFLOWS_TOTAL_END
        );
        assert_eq!(offset_of!(MptcpInfo, mptcpi_last_ack_recv), 92);
        assert_eq!(size_of::<MptcpInfo>(), 96);
    }

    #[test]
    fn subflow_structs_layout_matches_uapi() {
        assert_eq!(size_of::<MptcpSubflowData>(), 16);
        assert_eq!(align_of::<MptcpSubflowData>(), 8);
        assert_eq!(size_of::<libc::sockaddr_storage>(), 128);
        assert_eq!(size_of::<MptcpSubflowAddrs>(), 256);
        assert_eq!(offset_of!(MptcpSubflowInfo, addrs), 8);
        assert_eq!(size_of::<MptcpSubflowInfo>(), 264);
        assert_eq!(offset_of!(MptcpFullInfo, subflow_info), 24);
        assert_eq!(offset_of!(MptcpFullInfo, tcp_info), 32);
        assert_eq!(offset_of!(MptcpFullInfo, mptcp_info), 40);
        assert_eq!(size_of::<MptcpFullInfo>(), 136);
    }

    #[test]
    fn tcp_info_layout_matches_uapi() {
        assert_eq!(offset_of!(TcpInfo, tcpi_rto), 8);
        assert_eq!(offset_of!(TcpInfo, tcpi_rtt), 68);
        assert_eq!(offset_of!(TcpInfo, tcpi_pacing_rate), 104);
        assert_eq!(
            offset_of!(TcpInfo, tcpi_bytes_received) + 8,
            TCP_INFO_BYTES_RECEIVED_END
        );
        assert_eq!(
            offset_of!(TcpInfo, tcpi_bytes_sent) + 8,
            TCP_INFO_BYTES_SENT_END
        );
        assert_eq!(offset_of!(TcpInfo, tcpi_snd_wnd), 228);
        assert_eq!(size_of::<TcpInfo>(), 248);
    }

    #[test]
    fn sockaddr_conversion() {
        let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let sin = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in) };
        sin.sin_family = libc::AF_INET as libc::sa_family_t;
        sin.sin_port = 8080u16.to_be();
        sin.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::new(198, 18, 1, 2)).to_be();
        assert_eq!(
            sockaddr_to_std(&ss),
            Some("198.18.1.2:8080".parse().unwrap())
        );
        ss.ss_family = 0;
        assert_eq!(sockaddr_to_std(&ss), None);
    }
}
