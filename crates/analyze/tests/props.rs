//! Property: however a byte stream is cut into segments, reordered and partly retransmitted,
//! reassembly gives back exactly the stream and every 16-byte run of it is found.

use etherparse::PacketBuilder;
use nena_analyze::{analyze_reader, Options};
use pcap_file::pcap::{PcapPacket, PcapWriter};
use proptest::prelude::*;
use std::time::Duration;

fn frame(seq: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4([198, 18, 1, 2], [198, 18, 3, 2], 64)
        .tcp(40001, 80, seq, 65000)
        .ack(1)
        .write(&mut v, payload)
        .unwrap();
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn reassembly_recovers_the_stream(
        data in proptest::collection::vec(any::<u8>(), 1..3000),
        cuts in proptest::collection::vec(1usize..400, 1..40),
        isn in any::<u32>(),
        order_seed in any::<u64>(),
        dups in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        // cut the data into segments
        let mut segs = Vec::new();
        let mut at = 0usize;
        let mut i = 0usize;
        while at < data.len() {
            let n = cuts[i % cuts.len()].min(data.len() - at);
            segs.push((at, n));
            at += n;
            i += 1;
        }
        // the first segment stays first (it fixes the sequence origin); the rest are shuffled
        let mut rest: Vec<_> = segs[1..].to_vec();
        let mut rng = nena_testkit::Prng::new(order_seed);
        for j in (1..rest.len()).rev() {
            let x = rng.next_u64();
            rest.swap(j, (x % (j as u64 + 1)) as usize);
        }
        let mut order = vec![segs[0]];
        order.extend(rest);
        for d in &dups {
            order.push(segs[d.index(segs.len())]);
        }
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        for (k, (off, n)) in order.iter().enumerate() {
            let f = frame(isn.wrapping_add(*off as u32), &data[*off..off + n]);
            w.write_packet(&PcapPacket::new(Duration::from_micros(k as u64), f.len() as u32, &f)).unwrap();
        }
        let a = analyze_reader(&w.into_writer()[..], &Options::default()).unwrap();
        prop_assert_eq!(a.flows.len(), 1);
        prop_assert_eq!(&a.streams[0].chunks, &vec![(0u64, data.clone())]);
        let r = a.check_known(&data, 3);
        prop_assert_eq!(r.runs_found, r.runs_checked);
        prop_assert_eq!(r.bytes_covered, if data.len() >= 16 { data.len() as u64 } else { 0 });
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    /// Random bytes, as a capture and as MPTCP options, never make the parsers panic.
    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        nena_analyze::fuzzing::mptcp_options(&data);
        let mut opt = vec![30u8, (data.len().min(38) + 2) as u8];
        opt.extend_from_slice(&data[..data.len().min(38)]);
        nena_analyze::fuzzing::mptcp_options(&opt);
        nena_analyze::fuzzing::pcap(&data);
        nena_analyze::fuzzing::trace(&data);
    }

    /// A real-looking MPTCP capture with bytes flipped and cut anywhere: `nena analyze`
    /// never panics, and the intact capture is measured exactly.
    #[test]
    fn trace_survives_damaged_captures(
        data in proptest::collection::vec(any::<u8>(), 1..6000),
        mss in 1usize..1500,
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
        cut in any::<prop::sample::Index>(),
        retransmit in 0usize..4,
    ) {
        let c = "198.18.2.2:40001".parse().unwrap();
        let s = "198.18.3.2:4433".parse().unwrap();
        let pcap = nena_analyze::craft::joined_subflow(c, s, 9, &[(5, &data[..])], mss, true, retransmit);
        let r = nena_analyze::trace::analyze_bytes(&pcap, &Default::default()).unwrap();
        prop_assert_eq!(r.connections.len(), 1);
        let conn = &r.connections[0];
        let d = &conn.data.as_ref().unwrap().c2s;
        prop_assert_eq!(d.bytes_covered, data.len() as u64);
        prop_assert_eq!(d.reinjected_bytes, 0);
        let sf = &conn.subflows[0];
        prop_assert_eq!(sf.payload_bytes.c2s - sf.retransmitted_bytes.c2s, data.len() as u64);
        let mut bad = pcap.clone();
        for (i, b) in &flips {
            let at = i.index(bad.len());
            bad[at] ^= b | 1;
        }
        bad.truncate(cut.index(bad.len()) + 1);
        nena_analyze::fuzzing::trace(&bad);
    }

    /// A joined subflow cut into random segment sizes and captured with or without its SYN
    /// is placed at its data sequence numbers exactly.
    #[test]
    fn joined_subflows_place_exactly(
        data in proptest::collection::vec(any::<u8>(), 1..4000),
        mss in 1usize..1500,
        split in 0usize..4000,
        gap in 1u64..5000,
        syn in any::<bool>(),
        retransmit in 0usize..5,
    ) {
        let split = split % data.len();
        let base = 77_000u64;
        let pieces: Vec<(u64, &[u8])> = vec![
            (base, &data[..split]),
            (base + split as u64 + gap, &data[split..]),
        ];
        let pieces: Vec<(u64, &[u8])> = pieces.into_iter().filter(|p| !p.1.is_empty()).collect();
        let c = "198.18.2.2:40001".parse().unwrap();
        let s = "198.18.3.2:4433".parse().unwrap();
        let pcap = nena_analyze::craft::joined_subflow(c, s, 7, &pieces, mss, syn, retransmit);
        let d = nena_analyze::datalevel::data_streams(&pcap[..]).unwrap();
        prop_assert_eq!(d.streams.len(), 1);
        let runs = &d.streams[0].runs;
        prop_assert_eq!(runs.len(), pieces.len());
        for (r, (dsn, bytes)) in runs.iter().zip(&pieces) {
            prop_assert_eq!(r.dsn, *dsn);
            prop_assert_eq!(&r.bytes[..], *bytes);
        }
    }
}
