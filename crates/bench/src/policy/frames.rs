//! The frames the bench feeds the dispatchers (IPv4, 198.18.100.1 -> 198.18.100.2): a DSS
//! ACK, ADD_ADDR, MP_JOIN SYNs, chain-8's frame, and fresh subflows for single runs.

use super::links::Frame;
use nena_bpf::chains::packet::{mp, Tcp};

pub(super) const SRC: &str = "198.18.100.1";
pub(super) const DST: &str = "198.18.100.2";
/// The subflow whose handshake the dispatcher sees (window scale 7 both ways).
pub(super) const BENCH_PORT: u16 = 40000;

fn ack(src: &str, dst: &str, sport: u16, dport: u16) -> Tcp {
    Tcp::new(src, dst, sport, dport)
        .opt(&mp::ts(7, 9))
        .opt(&mp::dss(Some(77), None))
        .window(40000)
}

pub(super) fn add_addr_ack(sport: u16, dport: u16) -> Tcp {
    ack(SRC, DST, sport, dport).opt(&mp::add_addr_v4(
        2,
        [198, 18, 101, 2],
        None,
        Some(0x1122334455667788),
    ))
}

fn join_syn(sport: u16, dport: u16) -> Tcp {
    Tcp::new(SRC, DST, sport, dport)
        .flags(nena_bpf::chains::packet::TCP_SYN)
        .opt(&mp::join_syn(false, 2, 0xa1b2c3d4, 0x01020304))
}

/// The subflow of `add_subflow`'s acting frame (its kept announcement is renewed each pair).
pub(super) const KEPT_PORT: u16 = 40004;
/// The subflow of chain-8's frame (window scale 0: its handshake at the start).
pub(super) const CHAIN8_PORT: u16 = 40005;
/// The subflow of `blk_subflow`'s acting frame (apart: what it keeps, add_subflow would
/// announce on the bench subflow).
const BLK_PORT: u16 = 40006;

/// A frame of the bench; `NewSubflowAck` takes a new subflow from `flows`.
pub(super) fn frame(f: Frame, flows: &mut Flows) -> Vec<u8> {
    match f {
        Frame::DssAck | Frame::DssAckPrioSent => ack(SRC, DST, BENCH_PORT, 5201).build(),
        Frame::DssAckSmallWindow => ack(SRC, DST, BENCH_PORT, 5201).window(100).build(),
        Frame::DssAckWideWindow => ack(SRC, DST, BENCH_PORT, 5201).window(65535).build(),
        Frame::DssAckOtherSeq => Tcp::new(SRC, DST, BENCH_PORT, 5201)
            .opt(&mp::ts(7, 9))
            .opt(&mp::dss(Some(200_000), None))
            .window(40000)
            .build(),
        Frame::PlainAck => Tcp::new(SRC, DST, BENCH_PORT, 5201)
            .opt(&mp::ts(7, 9))
            .window(40000)
            .build(),
        Frame::DssAckOtherFlow => ack("198.18.200.1", "198.18.200.2", 40001, 5301).build(),
        Frame::CapableSyn => Tcp::new(SRC, DST, 40002, 5201)
            .flags(nena_bpf::chains::packet::TCP_SYN)
            .opt(&mp::capable(&[]))
            .build(),
        Frame::JoinSyn => join_syn(40003, 5201).build(),
        Frame::NewSubflowAck => new_subflow(flows).1,
        Frame::AddAddrAck => add_addr_ack(BLK_PORT, 5201).build(),
        Frame::KeptAck => ack(SRC, DST, KEPT_PORT, 5201).build(),
        Frame::Chain8 => chain8_frame().build(),
    }
}

/// A new subflow's SYN (window scale 7) and its first DSS ACK.
pub(super) fn new_subflow(flows: &mut Flows) -> (Vec<u8>, Vec<u8>) {
    let (sport, dport) = flows.next();
    let syn = Tcp::new(SRC, DST, sport, dport)
        .flags(nena_bpf::chains::packet::TCP_SYN)
        .opt(&[1, 3, 3, 7]);
    (syn.build(), ack(SRC, DST, sport, dport).build())
}

pub(super) fn chain8_frame() -> Tcp {
    Tcp::new(SRC, DST, CHAIN8_PORT, 5201)
        .opt(&mp::dss(Some(77), None))
        .opt(&mp::add_addr_v4(
            2,
            [198, 18, 101, 2],
            None,
            Some(0x1122334455667788),
        ))
        .window(65535)
}

/// New subflows for `set_backup`'s single runs: ports never used before in this run.
pub(super) struct Flows(pub(super) u32);

impl Flows {
    pub(super) fn next(&mut self) -> (u16, u16) {
        let i = self.0;
        self.0 += 1;
        (1024 + (i % 60000) as u16, 6000 + (i / 60000) as u16)
    }
}
