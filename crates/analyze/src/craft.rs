//! Synthetic captures for tests and demos: TCP/IPv4 frames built with etherparse and
//! written as a pcap file with pcap-file. Nothing touches the network.

use etherparse::PacketBuilder;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::DataLink;
use std::net::SocketAddrV4;
use std::time::Duration;

/// TCP flags for [`tcp_frame`].
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpFlags {
    pub syn: bool,
    pub ack: bool,
    pub psh: bool,
    pub fin: bool,
}

impl TcpFlags {
    pub const SYN: TcpFlags = TcpFlags {
        syn: true,
        ack: false,
        psh: false,
        fin: false,
    };
    pub const SYN_ACK: TcpFlags = TcpFlags {
        syn: true,
        ack: true,
        psh: false,
        fin: false,
    };
    pub const ACK: TcpFlags = TcpFlags {
        syn: false,
        ack: true,
        psh: false,
        fin: false,
    };
    pub const PSH_ACK: TcpFlags = TcpFlags {
        syn: false,
        ack: true,
        psh: true,
        fin: false,
    };
}

/// An Ethernet/IPv4/TCP frame. `options` are raw TCP option bytes (padded to 4 bytes here).
pub fn tcp_frame(
    src: SocketAddrV4,
    dst: SocketAddrV4,
    seq: u32,
    ack: u32,
    flags: TcpFlags,
    options: &[u8],
    payload: &[u8],
) -> Vec<u8> {
    let mut b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4(src.ip().octets(), dst.ip().octets(), 64)
        .tcp(src.port(), dst.port(), seq, 65000);
    if flags.syn {
        b = b.syn();
    }
    if flags.ack {
        b = b.ack(ack);
    }
    if flags.psh {
        b = b.psh();
    }
    if flags.fin {
        b = b.fin();
    }
    if !options.is_empty() {
        let mut o = options.to_vec();
        while !o.len().is_multiple_of(4) {
            o.push(0);
        }
        o.truncate(40);
        b = b
            .options_raw(&o)
            .expect("options are at most 40 bytes, a multiple of 4");
    }
    let mut v = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut v, payload).expect("writing to a Vec");
    v
}

/// A pcap file (Ethernet link type, microsecond timestamps 1 ms apart) of `frames`.
pub fn pcap(frames: &[Vec<u8>]) -> Vec<u8> {
    let header = PcapHeader {
        datalink: DataLink::ETHERNET,
        snaplen: 262144,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(Vec::new(), header).expect("writing to a Vec");
    for (i, f) in frames.iter().enumerate() {
        let p = PcapPacket::new(Duration::from_millis(1_000 + i as u64), f.len() as u32, f);
        w.write_packet(&p).expect("writing to a Vec");
    }
    w.into_writer()
}

/// A capture of one TCP connection from `client` to `server` carrying `data` client->server
/// in segments of at most `mss` bytes: handshake, data with acks, and FIN.
pub fn connection(client: SocketAddrV4, server: SocketAddrV4, data: &[u8], mss: usize) -> Vec<u8> {
    let (cisn, sisn) = (0x1000_0000u32, 0x7000_0000u32);
    let mut frames = vec![
        tcp_frame(client, server, cisn, 0, TcpFlags::SYN, &[], &[]),
        tcp_frame(server, client, sisn, cisn + 1, TcpFlags::SYN_ACK, &[], &[]),
        tcp_frame(client, server, cisn + 1, sisn + 1, TcpFlags::ACK, &[], &[]),
    ];
    let mut off = 0usize;
    for chunk in data.chunks(mss.max(1)) {
        let seq = cisn.wrapping_add(1).wrapping_add(off as u32);
        frames.push(tcp_frame(
            client,
            server,
            seq,
            sisn + 1,
            TcpFlags::PSH_ACK,
            &[],
            chunk,
        ));
        off += chunk.len();
        let ack = cisn.wrapping_add(1).wrapping_add(off as u32);
        frames.push(tcp_frame(
            server,
            client,
            sisn + 1,
            ack,
            TcpFlags::ACK,
            &[],
            &[],
        ));
    }
    let fin = TcpFlags {
        fin: true,
        ..TcpFlags::ACK
    };
    frames.push(tcp_frame(
        client,
        server,
        cisn.wrapping_add(1).wrapping_add(off as u32),
        sisn + 1,
        fin,
        &[],
        &[],
    ));
    pcap(&frames)
}

/// A DSS option with a mapping (8-byte DSN) of `len` bytes from `dsn` at relative subflow
/// sequence number `ssn`, and a 4-byte data ACK.
pub fn dss_mapping(dsn: u64, ssn: u32, len: u16) -> Vec<u8> {
    let mut o = vec![30, 22, 0x20, 0x01 | 0x04 | 0x08];
    o.extend_from_slice(&1u32.to_be_bytes());
    o.extend_from_slice(&dsn.to_be_bytes());
    o.extend_from_slice(&ssn.to_be_bytes());
    o.extend_from_slice(&len.to_be_bytes());
    o
}

/// An MP_JOIN option of a SYN, naming the connection by `token`.
pub fn join_syn(token: u32) -> Vec<u8> {
    let mut o = vec![30, 12, 0x10, 1];
    o.extend_from_slice(&token.to_be_bytes());
    o.extend_from_slice(&[9, 9, 9, 9]);
    o
}

/// A joined subflow from `client` to `server` (connection `token`) carrying the pieces
/// `(dsn, bytes)` of the client's data stream, one DSS mapping per segment of at most `mss`
/// bytes; every `retransmit`-th segment is sent twice. With `syn`, the handshake is
/// captured; without, the capture starts with the first data segment.
pub fn joined_subflow(
    client: SocketAddrV4,
    server: SocketAddrV4,
    token: u32,
    pieces: &[(u64, &[u8])],
    mss: usize,
    syn: bool,
    retransmit: usize,
) -> Vec<u8> {
    let (cisn, sisn) = (0xffff_f000u32, 0x2000_0000u32); // the client's wraps around
    let mut frames = Vec::new();
    if syn {
        frames.push(tcp_frame(
            client,
            server,
            cisn,
            0,
            TcpFlags::SYN,
            &join_syn(token),
            &[],
        ));
        frames.push(tcp_frame(
            server,
            client,
            sisn,
            cisn + 1,
            TcpFlags::SYN_ACK,
            &[],
            &[],
        ));
    }
    let mut ssn = 1u32;
    let mut k = 0usize;
    for (dsn, data) in pieces {
        let mut off = 0usize;
        for chunk in data.chunks(mss.max(1)) {
            let opt = dss_mapping(dsn + off as u64, ssn, chunk.len() as u16);
            let seq = cisn.wrapping_add(ssn);
            let f = tcp_frame(
                client,
                server,
                seq,
                sisn + 1,
                TcpFlags::PSH_ACK,
                &opt,
                chunk,
            );
            frames.push(f.clone());
            k += 1;
            if retransmit > 0 && k.is_multiple_of(retransmit) {
                frames.push(f);
            }
            ssn = ssn.wrapping_add(chunk.len() as u32);
            off += chunk.len();
        }
    }
    pcap(&frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crafted_connection_analyses_back() {
        let c: SocketAddrV4 = "198.18.2.2:40000".parse().unwrap();
        let s: SocketAddrV4 = "198.18.3.2:5201".parse().unwrap();
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 97) as u8).collect();
        let a = crate::analyze_reader(
            &connection(c, s, &data, 1448)[..],
            &crate::Options::default(),
        )
        .unwrap();
        assert_eq!(a.segments, 4);
        assert_eq!(a.streams[0].chunks, vec![(0, data)]);
        assert_eq!(a.shown[1].ack, 1, "relative ack of the server's SYN");
    }
}
