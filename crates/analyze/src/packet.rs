//! From a captured frame to a TCP segment with `etherparse` (lax slicing, so a frame cut
//! short by the snapshot length still yields its headers and the payload bytes present).
//! Link types: Ethernet, Linux cooked (SLL and SLL2), raw IPv4/IPv6, BSD loopback, and
//! 802.11 (plain or with radiotap) from monitor-mode captures of an open WLAN.

use crate::mptcp::{parse_options, MptcpInfo};
use etherparse::{EtherType, LaxNetSlice, LaxSlicedPacket, TransportSlice};
use pcap_file::DataLink;
use serde::Serialize;
use std::net::{IpAddr, SocketAddr};

/// TCP flags of a segment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Flags {
    pub syn: bool,
    pub ack: bool,
    pub fin: bool,
    pub rst: bool,
    pub psh: bool,
}

impl Flags {
    /// tcpdump's notation: `S`, `S.`, `P.`, `F.`, `R`, `.`.
    pub fn short(&self) -> String {
        let mut s = String::new();
        if self.syn {
            s.push('S');
        }
        if self.fin {
            s.push('F');
        }
        if self.rst {
            s.push('R');
        }
        if self.psh {
            s.push('P');
        }
        if self.ack {
            s.push('.');
        }
        if s.is_empty() {
            s.push_str("none");
        }
        s
    }
}

/// A TCP segment as seen on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub seq: u32,
    pub ack: u32,
    pub flags: Flags,
    pub mptcp: MptcpInfo,
    /// Payload bytes present in the capture.
    pub payload: Vec<u8>,
    /// The payload was cut short (snaplen or damaged frame): the wire carried more.
    pub truncated: bool,
    /// Payload length on the wire (what tshark calls `tcp.len`): the captured payload plus
    /// what the snapshot length cut off.
    pub wire_len: u32,
    /// The TCP timestamp option (TSval, TSecr), when present.
    pub timestamps: Option<(u32, u32)>,
}

/// Why a frame yielded no TCP segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// Not IP (ARP, unknown link type or EtherType).
    NotIp,
    /// IP but not TCP (UDP, ICMP, ...).
    NotTcp,
    /// An IP fragment: its TCP header is not (entirely) here.
    Fragment,
    /// Headers cut off or inconsistent.
    Malformed,
}

fn from_link(linktype: DataLink, data: &[u8]) -> Result<LaxSlicedPacket<'_>, Skip> {
    let be16 = |d: &[u8], at: usize| d.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    match linktype {
        DataLink::ETHERNET => LaxSlicedPacket::from_ethernet(data).map_err(|_| Skip::Malformed),
        DataLink::RAW | DataLink::IPV4 | DataLink::IPV6 => {
            LaxSlicedPacket::from_ip(data).map_err(|_| Skip::Malformed)
        }
        DataLink::LINUX_SLL => {
            let et = be16(data, 14).ok_or(Skip::Malformed)?;
            Ok(LaxSlicedPacket::from_ether_type(EtherType(et), &data[16..]))
        }
        DataLink::LINUX_SLL2 => {
            let et = be16(data, 0).ok_or(Skip::Malformed)?;
            let rest = data.get(20..).ok_or(Skip::Malformed)?;
            Ok(LaxSlicedPacket::from_ether_type(EtherType(et), rest))
        }
        DataLink::IEEE802_11 => wlan(data),
        DataLink::IEEE802_11_RADIOTAP => {
            // radiotap: version, pad, little-endian total length
            let len = data
                .get(2..4)
                .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
                .ok_or(Skip::Malformed)?;
            wlan(data.get(len..).ok_or(Skip::Malformed)?)
        }
        DataLink::NULL | DataLink::LOOP => {
            let rest = data.get(4..).ok_or(Skip::Malformed)?;
            LaxSlicedPacket::from_ip(rest).map_err(|_| Skip::Malformed)
        }
        _ => Err(Skip::NotIp),
    }
}

/// An 802.11 frame as a monitor-mode capture shows it (the papers' attacker captured an
/// open WLAN this way): data frames with an LLC/SNAP header carry IP; management, control
/// and protected (encrypted) frames do not yield IP.
fn wlan(f: &[u8]) -> Result<LaxSlicedPacket<'_>, Skip> {
    let fc0 = *f.first().ok_or(Skip::Malformed)?;
    let fc1 = *f.get(1).ok_or(Skip::Malformed)?;
    let (ftype, subtype) = ((fc0 >> 2) & 3, fc0 >> 4);
    if ftype != 2 || subtype & 0x4 != 0 {
        return Err(Skip::NotIp); // not a data frame, or a null-data frame
    }
    if fc1 & 0x40 != 0 {
        return Err(Skip::NotIp); // protected: WEP/WPA-encrypted payload
    }
    let mut hdr = 24;
    if fc1 & 0x3 == 0x3 {
        hdr += 6; // four addresses (WDS)
    }
    if subtype & 0x8 != 0 {
        hdr += 2; // QoS control
        if fc1 & 0x80 != 0 {
            hdr += 4; // HT control
        }
    }
    let llc = f.get(hdr..hdr + 8).ok_or(Skip::Malformed)?;
    if llc[..6] != [0xaa, 0xaa, 0x03, 0, 0, 0] {
        return Err(Skip::NotIp);
    }
    let et = u16::from_be_bytes([llc[6], llc[7]]);
    Ok(LaxSlicedPacket::from_ether_type(
        EtherType(et),
        &f[hdr + 8..],
    ))
}

/// Parse one frame. `orig_len > data.len()` marks a frame cut by the snapshot length.
pub fn parse_frame(linktype: DataLink, data: &[u8], orig_len: u32) -> Result<Segment, Skip> {
    let p = from_link(linktype, data)?;
    let (src, dst, fragmented, incomplete) = match &p.net {
        Some(LaxNetSlice::Ipv4(v4)) => {
            let h = v4.header();
            (
                IpAddr::V4(h.source_addr()),
                IpAddr::V4(h.destination_addr()),
                v4.is_payload_fragmented(),
                v4.payload().incomplete,
            )
        }
        Some(LaxNetSlice::Ipv6(v6)) => {
            let h = v6.header();
            (
                IpAddr::V6(h.source_addr()),
                IpAddr::V6(h.destination_addr()),
                v6.payload().fragmented,
                v6.payload().incomplete,
            )
        }
        Some(LaxNetSlice::Arp(_)) | None => return Err(Skip::NotIp),
    };
    if fragmented {
        return Err(Skip::Fragment);
    }
    match &p.transport {
        Some(TransportSlice::Tcp(tcp)) => Ok(Segment {
            src: SocketAddr::new(src, tcp.source_port()),
            dst: SocketAddr::new(dst, tcp.destination_port()),
            seq: tcp.sequence_number(),
            ack: tcp.acknowledgment_number(),
            flags: Flags {
                syn: tcp.syn(),
                ack: tcp.ack(),
                fin: tcp.fin(),
                rst: tcp.rst(),
                psh: tcp.psh(),
            },
            mptcp: parse_options(tcp.options()),
            payload: tcp.payload().to_vec(),
            truncated: incomplete || (orig_len as usize) > data.len(),
            wire_len: (tcp.payload().len() as u32)
                .saturating_add((orig_len as usize).saturating_sub(data.len()) as u32),
            timestamps: tcp_timestamps(tcp.options()),
        }),
        Some(_) => Err(Skip::NotTcp),
        None => {
            // IP whose transport did not parse: TCP with a cut header, or another protocol
            let proto = match &p.net {
                Some(LaxNetSlice::Ipv4(v4)) => v4.header().protocol(),
                Some(LaxNetSlice::Ipv6(v6)) => v6.payload().ip_number,
                _ => return Err(Skip::NotIp),
            };
            if proto == etherparse::IpNumber::TCP {
                Err(Skip::Malformed)
            } else {
                Err(Skip::NotTcp)
            }
        }
    }
}

/// The TCP timestamp option (kind 8, length 10) in option bytes: (TSval, TSecr).
pub fn tcp_timestamps(options: &[u8]) -> Option<(u32, u32)> {
    let mut i = 0usize;
    while i < options.len() {
        match options[i] {
            0 => return None,
            1 => i += 1,
            kind => {
                let len = *options.get(i + 1)? as usize;
                if len < 2 || i + len > options.len() {
                    return None;
                }
                if kind == 8 && len == 10 {
                    let o = &options[i + 2..i + 10];
                    return Some((
                        u32::from_be_bytes([o[0], o[1], o[2], o[3]]),
                        u32::from_be_bytes([o[4], o[5], o[6], o[7]]),
                    ));
                }
                i += len;
            }
        }
    }
    None
}
