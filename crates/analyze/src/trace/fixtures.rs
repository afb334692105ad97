//! What the trace tests share: a pcap of frames at given times, two addresses, a TCP
//! timestamps option.

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use std::net::SocketAddrV4;
use std::time::Duration;

pub(crate) fn pcap_at(frames: &[(f64, Vec<u8>)]) -> Vec<u8> {
    let mut w = PcapWriter::with_header(
        Vec::new(),
        PcapHeader {
            datalink: pcap_file::DataLink::ETHERNET,
            ..PcapHeader::default()
        },
    )
    .unwrap();
    for (t, f) in frames {
        let ts = Duration::from_secs_f64(1000.0 + t);
        w.write_packet(&PcapPacket::new(ts, f.len() as u32, f))
            .unwrap();
    }
    w.into_writer()
}

pub(crate) fn addrs() -> (SocketAddrV4, SocketAddrV4) {
    (
        "198.18.1.2:40000".parse().unwrap(),
        "198.18.3.2:7000".parse().unwrap(),
    )
}

pub(crate) fn ts_opt(val: u32, ecr: u32) -> Vec<u8> {
    let mut o = vec![1, 1, 8, 10];
    o.extend_from_slice(&val.to_be_bytes());
    o.extend_from_slice(&ecr.to_be_bytes());
    o
}
