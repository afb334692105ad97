//! Analysis of crafted captures: packets built with etherparse, files written with pcap-file.

use etherparse::{LinuxSllPacketType, PacketBuilder};
use nena_analyze::{analyze_reader, render, Options, Subtype};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::DataLink;
use std::borrow::Cow;
use std::time::Duration;

const C: [u8; 4] = [198, 18, 2, 2];
const S: [u8; 4] = [198, 18, 3, 2];

#[derive(Clone, Copy, Default)]
struct F {
    syn: bool,
    ack: bool,
    psh: bool,
    fin: bool,
}

const SYN: F = F {
    syn: true,
    ack: false,
    psh: false,
    fin: false,
};
const SYNACK: F = F {
    syn: true,
    ack: true,
    psh: false,
    fin: false,
};
const ACK: F = F {
    syn: false,
    ack: true,
    psh: false,
    fin: false,
};
const PSH: F = F {
    syn: false,
    ack: true,
    psh: true,
    fin: false,
};

#[allow(clippy::too_many_arguments)]
fn tcp(
    src: [u8; 4],
    sp: u16,
    dst: [u8; 4],
    dp: u16,
    seq: u32,
    f: F,
    opts: &[u8],
    payload: &[u8],
) -> Vec<u8> {
    let mut b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4(src, dst, 64)
        .tcp(sp, dp, seq, 65000);
    if f.syn {
        b = b.syn();
    }
    if f.ack {
        b = b.ack(1);
    }
    if f.psh {
        b = b.psh();
    }
    if f.fin {
        b = b.fin();
    }
    if !opts.is_empty() {
        b = b.options_raw(opts).unwrap();
    }
    let mut v = Vec::new();
    b.write(&mut v, payload).unwrap();
    v
}

fn up(seq: u32, f: F, payload: &[u8]) -> Vec<u8> {
    tcp(C, 40000, S, 5201, seq, f, &[], payload)
}

fn pcap(frames: &[Vec<u8>]) -> Vec<u8> {
    pcap_with(frames, DataLink::ETHERNET, &[])
}

/// Write frames; `cut` lists (frame index, captured length) to simulate a small snaplen.
fn pcap_with(frames: &[Vec<u8>], link: DataLink, cut: &[(usize, usize)]) -> Vec<u8> {
    let header = PcapHeader {
        datalink: link,
        snaplen: 262144,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(Vec::new(), header).unwrap();
    for (i, f) in frames.iter().enumerate() {
        let keep = cut
            .iter()
            .find(|c| c.0 == i)
            .map(|c| c.1)
            .unwrap_or(f.len());
        let p = PcapPacket::new(
            Duration::from_millis(1000 + i as u64),
            f.len() as u32,
            &f[..keep],
        );
        w.write_packet(&p).unwrap();
    }
    w.into_writer()
}

fn pcapng(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    w.write_pcapng_block(InterfaceDescriptionBlock::new(DataLink::ETHERNET, 0))
        .unwrap();
    for (i, f) in frames.iter().enumerate() {
        let b = EnhancedPacketBlock {
            interface_id: 0,
            timestamp: Duration::from_millis(i as u64),
            original_len: f.len() as u32,
            data: Cow::Borrowed(&f[..]),
            options: vec![],
        };
        w.write_pcapng_block(b).unwrap();
    }
    w.into_inner()
}

fn handshake() -> Vec<Vec<u8>> {
    vec![
        up(999, SYN, b""),
        tcp(S, 5201, C, 40000, 5000, SYNACK, &[], b""),
        up(1000, ACK, b""),
    ]
}

fn known_file() -> Vec<u8> {
    // pseudo-random text: no 16-byte run occurs twice
    let mut rng = nena_testkit::Prng::new(0x2545f4914f6cdd1d);
    (0..4000)
        .map(|_| {
            let x = rng.next_u64();
            b"abcdefghijklmnopqrstuvwxyz0123456789 .,;"[(x >> 32) as usize % 40]
        })
        .collect()
}

#[test]
fn iperf_like_capture_shows_the_digits() {
    let digits = b"0123456789".repeat(146); // 1460 bytes, the papers' iperf pattern
    let mut frames = handshake();
    for k in 0..4u32 {
        frames.push(up(1000 + k * 1460, PSH, &digits));
    }
    let a = analyze_reader(&pcap(&frames)[..], &Options::default()).unwrap();
    assert_eq!(a.frames, 7);
    assert_eq!(a.tcp_segments, 7);
    assert_eq!(a.segments, 4);
    assert_eq!(a.payload_bytes, 4 * 1460);
    assert_eq!(a.flows.len(), 2);
    let f = &a.flows[0];
    assert_eq!(f.label, "198.18.2.2:40000 -> 198.18.3.2:5201");
    assert_eq!(
        (f.payload_bytes, f.stream_bytes, f.gaps, f.duplicate_bytes),
        (5840, 5840, 0, 0)
    );
    assert!(f.syn_seen);
    assert_eq!(a.shown.len(), 4);
    assert_eq!(a.shown[1].seq, 1461, "relative sequence numbers start at 1");
    let hdr = render::segment_header(&a.shown[0]);
    assert!(
        hdr.contains("198.18.2.2:40000 -> 198.18.3.2:5201")
            && hdr.contains("[P.]")
            && hdr.contains("len=1460"),
        "{hdr}"
    );
    assert!(render::text_dump(&a.shown[0].payload, 64).contains("0123456789012345"));
    // the periodic file is fully visible
    let r = a.check_known(&digits, 5);
    assert_eq!(r.runs_found, r.runs_checked);
    assert!(render::summary(&a, Some(("digits", &r))).contains("LEAK: 1445 of 1445 runs"));
}

#[test]
fn known_runs_spanning_two_segments_are_found() {
    let known = known_file();
    let mut frames = handshake();
    frames.push(up(1000, PSH, &known[0..20]));
    frames.push(up(1020, PSH, &known[20..40]));
    let a = analyze_reader(&pcap(&frames)[..], &Options::default()).unwrap();
    let r = a.check_known(&known, 10);
    // every run inside known[0..40], including the 15 that straddle the segment boundary
    assert_eq!(r.runs_found, 40 - 15);
    assert_eq!(r.bytes_covered, 40);
    assert_eq!(r.first_matches.len(), 1);
    assert_eq!(r.first_matches[0].known_offset, 0);
    assert_eq!(r.first_matches[0].length, 40);
    assert_eq!(r.first_matches[0].stream_offset, Some(0));
    assert_eq!(
        r.first_matches[0].flow.as_deref(),
        Some("198.18.2.2:40000 -> 198.18.3.2:5201")
    );
}

#[test]
fn retransmissions_and_reordering_are_reassembled() {
    let known = known_file();
    let mut frames = handshake();
    frames.push(up(1000, PSH, &known[0..100]));
    frames.push(up(1200, PSH, &known[200..300])); // arrives before the middle
    frames.push(up(1100, PSH, &known[100..200]));
    frames.push(up(1000, PSH, &known[0..100])); // retransmission
    frames.push(up(1050, PSH, &known[50..150])); // overlapping repacketisation
    let a = analyze_reader(&pcap(&frames)[..], &Options::default()).unwrap();
    let f = &a.flows[0];
    assert_eq!(f.payload_bytes, 500);
    assert_eq!(f.stream_bytes, 300);
    assert_eq!(f.duplicate_bytes, 200);
    assert_eq!(f.gaps, 0);
    assert_eq!(a.streams[0].chunks, vec![(0, known[0..300].to_vec())]);
    let r = a.check_known(&known, 10);
    assert_eq!(r.runs_found, 300 - 15);
    assert_eq!(r.stretches, 1);
}

#[test]
fn a_hole_splits_the_stream() {
    let known = known_file();
    let mut frames = handshake();
    frames.push(up(1000, PSH, &known[0..100]));
    frames.push(up(1200, PSH, &known[200..300])); // known[100..200] never captured
    let a = analyze_reader(&pcap(&frames)[..], &Options::default()).unwrap();
    assert_eq!(a.flows[0].gaps, 1);
    let r = a.check_known(&known, 10);
    assert_eq!(r.runs_found, 2 * (100 - 15));
    assert_eq!(r.stretches, 2);
    assert_eq!(r.first_matches[1].known_offset, 200);
    assert_eq!(r.first_matches[1].stream_offset, Some(200));
}

#[test]
fn non_tcp_frames_are_counted_and_skipped() {
    let mut frames = handshake();
    let mut udp = Vec::new();
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4(C, S, 64)
        .udp(5353, 5353)
        .write(&mut udp, b"not tcp at all, 0123456789")
        .unwrap();
    let mut icmp = Vec::new();
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4(C, S, 64)
        .icmpv4_echo_request(1, 1)
        .write(&mut icmp, b"ping")
        .unwrap();
    let mut arp = vec![0xffu8; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
    arp.extend_from_slice(&[
        0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 198, 18, 2, 2, 0, 0, 0, 0, 0, 0, 198, 18, 2, 1,
    ]);
    frames.push(udp);
    frames.push(icmp);
    frames.push(arp);
    frames.push(vec![0u8; 10]); // runt frame
    frames.push(up(1000, PSH, b"real data"));
    let a = analyze_reader(&pcap(&frames)[..], &Options::default()).unwrap();
    assert_eq!(a.frames, 8);
    assert_eq!(a.tcp_segments, 4);
    assert_eq!(a.segments, 1);
    assert_eq!(a.skipped.not_tcp, 2);
    assert_eq!(a.skipped.not_ip + a.skipped.malformed, 2, "{:?}", a.skipped);
    let s = render::summary(&a, None);
    assert!(s.contains("skipped frames"), "{s}");
}

#[test]
fn cut_off_file_and_snaplen_truncation() {
    let known = known_file();
    let mut frames = handshake();
    frames.push(up(1000, PSH, &known[0..1000]));
    frames.push(up(2000, PSH, &known[1000..2000]));
    frames.push(up(3000, PSH, &known[2000..3000]));
    // frame 3 captured with only 200 bytes of its 1000-byte payload (snaplen)
    let mut file = pcap_with(&frames, DataLink::ETHERNET, &[(3, 14 + 20 + 20 + 200)]);
    // and the file ends in the middle of the last frame (tcpdump killed)
    file.truncate(file.len() - 500);
    let a = analyze_reader(&file[..], &Options::default()).unwrap();
    assert_eq!(a.frames, 5, "the incomplete last frame is not delivered");
    assert_eq!(a.truncated_segments, 1);
    assert!(
        a.warnings
            .iter()
            .any(|w| w.contains("cut off after 5 frames")),
        "{:?}",
        a.warnings
    );
    assert_eq!(a.flows[0].stream_bytes, 1200);
    assert_eq!(a.flows[0].gaps, 1);
    let r = a.check_known(&known, 10);
    assert_eq!(r.runs_found, (200 - 15) + (1000 - 15));
    let hdr = render::segment_header(&a.shown[0]);
    assert!(hdr.contains("cut by snaplen"), "{hdr}");
}

#[test]
fn not_a_capture_is_a_clear_error() {
    let e = analyze_reader(&b"hello world, not a pcap"[..], &Options::default()).unwrap_err();
    assert!(
        format!("{e:#}").contains("not a pcap or pcapng file"),
        "{e:#}"
    );
    let e = analyze_reader(&b"ab"[..], &Options::default()).unwrap_err();
    assert!(format!("{e:#}").contains("only 2 bytes"), "{e:#}");
    // a pcap header cut short
    let e = analyze_reader(&pcap(&[])[..10], &Options::default()).unwrap_err();
    assert!(format!("{e:#}").contains("pcap"), "{e:#}");
}

#[test]
fn pcapng_and_linux_cooked_captures() {
    let known = known_file();
    // pcapng, Ethernet
    let ng = pcapng(&[
        up(1000, PSH, &known[0..500]),
        up(1500, PSH, &known[500..1000]),
    ]);
    let a = analyze_reader(&ng[..], &Options::default()).unwrap();
    assert_eq!(a.format, "pcapng");
    assert_eq!(a.check_known(&known, 1).runs_found, 1000 - 15);

    // Linux cooked (tcpdump -i any)
    let mut frame = Vec::new();
    PacketBuilder::linux_sll(LinuxSllPacketType::OUTGOING, 6, [2, 0, 0, 0, 0, 1, 0, 0])
        .ipv4(C, S, 64)
        .tcp(40000, 5201, 1000, 65000)
        .write(&mut frame, &known[0..300])
        .unwrap();
    let a = analyze_reader(
        &pcap_with(&[frame], DataLink::LINUX_SLL, &[])[..],
        &Options::default(),
    )
    .unwrap();
    assert_eq!(a.segments, 1);
    assert_eq!(a.check_known(&known, 1).runs_found, 300 - 15);
}

#[test]
fn monitor_mode_wlan_frames() {
    // the papers' attacker: an open WLAN captured in monitor mode (radiotap + 802.11)
    let known = known_file();
    let eth = up(1000, PSH, &known[0..400]);
    let ip_and_up = &eth[14..];
    let mut qos_data = vec![0x88, 0x01, 0, 0]; // QoS data, to-DS
    qos_data.extend_from_slice(&[0x11; 20]); // three addresses and sequence control
    qos_data.extend_from_slice(&[0, 0]); // QoS control
    qos_data.extend_from_slice(&[0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00]);
    qos_data.extend_from_slice(ip_and_up);
    let mut radiotap = vec![0, 0, 8, 0, 0, 0, 0, 0];
    radiotap.extend_from_slice(&qos_data);
    let mut protected = radiotap.clone();
    protected[8 + 1] |= 0x40;
    let beacon = vec![0, 0, 8, 0, 0, 0, 0, 0, 0x80, 0, 0, 0, 1, 2, 3];
    let a = analyze_reader(
        &pcap_with(
            &[radiotap, protected, beacon],
            DataLink::IEEE802_11_RADIOTAP,
            &[],
        )[..],
        &Options::default(),
    )
    .unwrap();
    assert_eq!(a.segments, 1);
    assert_eq!(
        a.skipped.not_ip, 2,
        "encrypted data and a beacon carry no readable IP"
    );
    assert_eq!(a.check_known(&known, 1).runs_found, 400 - 15);
    let a = analyze_reader(
        &pcap_with(&[qos_data], DataLink::IEEE802_11, &[])[..],
        &Options::default(),
    )
    .unwrap();
    assert_eq!(a.segments, 1);
}

#[test]
fn mptcp_options_and_keys_are_reported() {
    let mut cap = vec![30, 12, 0x01, 0x81];
    cap.extend_from_slice(&0x1122334455667788u64.to_be_bytes());
    let dss = [30, 4, 0x20, 0x01];
    let frames = vec![
        tcp(C, 40000, S, 5201, 999, SYN, &cap, b""),
        tcp(C, 40000, S, 5201, 1000, PSH, &dss, b"scrambled?"),
    ];
    let a = analyze_reader(&pcap(&frames)[..], &Options::default()).unwrap();
    assert_eq!(a.flows[0].mptcp, vec![Subtype::MpCapable, Subtype::Dss]);
    assert_eq!(a.flows[0].mptcp_keys, vec!["1122334455667788".to_string()]);
    assert_eq!(a.shown[0].mptcp, vec![Subtype::Dss]);
    assert!(render::segment_header(&a.shown[0]).contains("MPTCP: DSS"));
    let json = serde_json::to_value(&a).unwrap();
    assert_eq!(json["flows"][0]["mptcp"][0], "MP_CAPABLE");
}

#[test]
fn scrambled_looking_data_does_not_leak() {
    let known = known_file();
    // XOR with a keystream-like pattern: no 16-byte run survives
    let garbled: Vec<u8> = known
        .iter()
        .enumerate()
        .map(|(i, b)| b ^ (i as u8).wrapping_mul(37).wrapping_add(11))
        .collect();
    let mut frames = handshake();
    for (k, c) in garbled.chunks(1000).enumerate() {
        frames.push(up(1000 + 1000 * k as u32, PSH, c));
    }
    let a = analyze_reader(&pcap(&frames)[..], &Options::default()).unwrap();
    let r = a.check_known(&known, 10);
    assert_eq!(r.runs_checked, 4000 - 15);
    assert_eq!(r.runs_found, 0);
    assert!(
        render::summary(&a, Some(("f", &r))).contains("no 16-byte run of the known file appears")
    );
}

#[test]
fn display_limits_are_honoured() {
    let mut frames = handshake();
    for k in 0..10u32 {
        frames.push(up(1000 + k * 100, PSH, &[b'x'; 100]));
    }
    let a = analyze_reader(
        &pcap(&frames)[..],
        &Options {
            keep_segments: 3,
            keep_bytes: 16,
        },
    )
    .unwrap();
    assert_eq!(a.segments, 10);
    assert_eq!(a.shown.len(), 3);
    assert!(a
        .shown
        .iter()
        .all(|s| s.payload.len() == 16 && s.len == 100));
    assert_eq!(a.flows[0].stream_bytes, 1000, "limits affect display only");
}

/// Random and mutated inputs never panic (the cargo-fuzz target's body, on stable).
#[test]
fn fuzz_pcap_parser_on_random_and_mutated_inputs() {
    let known = known_file();
    let mut frames = handshake();
    frames.push(up(1000, PSH, &known[0..300]));
    frames.push(tcp(
        C,
        40000,
        S,
        5201,
        1300,
        PSH,
        &[30, 4, 0x20, 0x01, 1, 1, 30, 3, 0x10, 0],
        &known[300..400],
    ));
    let seeds = [
        pcap(&frames),
        pcap_with(&frames, DataLink::LINUX_SLL, &[]),
        pcap_with(&frames, DataLink::RAW, &[]),
        pcapng(&frames),
    ];
    let mut rng = nena_testkit::Prng::new(0x9e3779b97f4a7c15);
    let mut rnd = move || rng.next_u64();
    for i in 0..4000 {
        let mut d = seeds[i % seeds.len()].clone();
        match rnd() % 4 {
            0 => {
                for _ in 0..(1 + rnd() % 8) {
                    let at = (rnd() as usize) % d.len();
                    d[at] = rnd() as u8;
                }
            }
            1 => d.truncate((rnd() as usize) % d.len()),
            2 => {
                // header bytes that matter most: lengths in the record headers
                let at = 24 + (rnd() as usize) % 64;
                if at < d.len() {
                    d[at] = 0xff;
                }
            }
            _ => d = (0..(rnd() % 300)).map(|_| rnd() as u8).collect(),
        }
        nena_analyze::fuzzing::pcap(&d);
    }
}
