//! The lab's attack simulator (`bpf/attack/tamper.bpf.c`) under BPF_PROG_TEST_RUN (root and BPF, no
//! network): one byte altered, once, where configured, the TCP checksum still valid, other
//! traffic untouched, and a retransmission altered the same way.

use nena_bpf::attack::tamper::{TamperBed, TamperConfig};
use nena_bpf::chains::packet::{self, Tcp, TCP_ACK, TCP_PSH, TCP_SYN};

const CLIENT: &str = "198.18.2.2";
const SERVER: &str = "198.18.3.2";

fn cfg() -> TamperConfig {
    TamperConfig {
        port: 4433,
        match_dst: true,
        skip: 3000,
        offset: 10,
        mask: 0x40,
    }
}

fn seg(src: &str, dst: &str, sport: u16, dport: u16, seq: u32) -> Tcp {
    Tcp {
        seq,
        ..Tcp::new(src, dst, sport, dport)
    }
}

fn syn(isn: u32) -> Vec<u8> {
    seg(CLIENT, SERVER, 40001, 4433, isn).flags(TCP_SYN).build()
}

fn data(isn: u32, rel: u32, payload: &[u8]) -> Vec<u8> {
    seg(
        CLIENT,
        SERVER,
        40001,
        4433,
        isn.wrapping_add(1).wrapping_add(rel),
    )
    .flags(TCP_ACK | TCP_PSH)
    .payload(payload)
    .build()
}

/// Where the TCP payload of a frame starts.
fn payload_at(f: &[u8]) -> usize {
    let p = packet::parse(f).unwrap();
    p.l4 + p.doff
}

fn diff(a: &[u8], b: &[u8]) -> Vec<usize> {
    assert_eq!(a.len(), b.len());
    (0..a.len()).filter(|&i| a[i] != b[i]).collect()
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn one_byte_once_with_a_valid_checksum() {
    let bed = TamperBed::new(&cfg()).expect("loading the tamper program (root and BPF needed)");
    let isn = 0xffff_ff00; // the sequence numbers wrap inside the flow
    let payload: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(bed.run(&syn(isn)).unwrap(), syn(isn));
    // The first 3000 payload bytes pass untouched.
    for rel in [0u32, 1000, 2000] {
        let f = data(isn, rel, &payload);
        assert_eq!(bed.run(&f).unwrap(), f, "rel {rel}");
    }
    assert!(!bed.record().unwrap().fired);
    // The first segment at or past 3000: byte 10 flipped, checksum fixed.
    let f = data(isn, 3000, &payload);
    let out = bed.run(&f).unwrap();
    let d = diff(&f, &out);
    let p = packet::parse(&f).unwrap();
    let at = payload_at(&f) + 10;
    assert!(d.contains(&at), "{d:?}");
    assert_eq!(out[at], f[at] ^ 0x40);
    // Only that byte and the checksum field changed.
    assert!(
        d.iter()
            .all(|&i| i == at || i == p.l4 + 16 || i == p.l4 + 17),
        "{d:?}"
    );
    assert!(
        packet::checksums_ok(&out),
        "the TCP checksum must stay valid"
    );
    let r = bed.record().unwrap();
    assert!(r.fired);
    assert_eq!((r.old_byte, r.new_byte), (f[at], f[at] ^ 0x40));
    assert_eq!(r.offset_in_flow, 3010);
    assert_eq!(r.seq, isn.wrapping_add(1).wrapping_add(3010));
    assert_eq!(
        r.flow.as_deref(),
        Some("198.18.2.2:40001 -> 198.18.3.2:4433")
    );
    // Once: the next segments pass untouched ...
    let g = data(isn, 4000, &payload);
    assert_eq!(bed.run(&g).unwrap(), g);
    // ... but a retransmission holding the altered byte (here shifted: it starts earlier)
    // is altered the same way.
    let h = data(isn, 2990, &payload);
    let out = bed.run(&h).unwrap();
    let hp = payload_at(&h) + 20;
    assert_eq!(out[hp], h[hp] ^ 0x40);
    assert!(packet::checksums_ok(&out));
    assert_eq!(bed.record().unwrap().altered, 2);
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn other_traffic_is_left_alone() {
    let bed = TamperBed::new(&cfg()).unwrap();
    let payload = vec![7u8; 500];
    // Before any SYN: no flow is watched.
    let f = data(1, 5000, &payload);
    assert_eq!(bed.run(&f).unwrap(), f);
    assert_eq!(bed.record().unwrap().flow, None);
    bed.run(&syn(1)).unwrap();
    // Another port, another flow, the other direction: untouched.
    let other_port = seg(CLIENT, SERVER, 40001, 80, 5000)
        .flags(TCP_ACK)
        .payload(&payload)
        .build();
    let other_flow = seg(CLIENT, SERVER, 40002, 4433, 5000)
        .flags(TCP_ACK)
        .payload(&payload)
        .build();
    let reverse = seg(SERVER, CLIENT, 4433, 40001, 5000)
        .flags(TCP_ACK)
        .payload(&payload)
        .build();
    for f in [other_port, other_flow, reverse] {
        assert_eq!(bed.run(&f).unwrap(), f);
    }
    assert!(!bed.record().unwrap().fired);
    // A segment shorter than the offset: its last byte.
    let f = data(1, 3000, &payload[..4]);
    let out = bed.run(&f).unwrap();
    let at = payload_at(&f) + 3;
    assert_eq!(out[at], f[at] ^ 0x40);
    assert!(packet::checksums_ok(&out));
}

#[test]
fn a_zero_mask_is_refused() {
    let c = TamperConfig { mask: 0, ..cfg() };
    let e = nena_bpf::attack::tamper::attach("lo", true, &c).unwrap_err();
    assert!(e.to_string().contains("mask"), "{e}");
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn ipv6_toward_the_client_and_an_odd_last_byte() {
    // Toward the client: the flow is taken from the server's SYN/ACK, the port is the source.
    let c = TamperConfig {
        match_dst: false,
        skip: 0,
        offset: 10_000, // beyond every segment: the last byte of the first one
        ..cfg()
    };
    let bed = TamperBed::new(&c).unwrap();
    let (srv, cli) = ("2001:db8::3", "2001:db8::2");
    let synack = seg(srv, cli, 4433, 40001, 77)
        .flags(TCP_SYN | TCP_ACK)
        .build();
    assert_eq!(bed.run(&synack).unwrap(), synack);
    // A payload of odd length: its last byte has no partner in the checksum's 16-bit words.
    let payload: Vec<u8> = (0..333u32).map(|i| (i * 7) as u8).collect();
    let f = seg(srv, cli, 4433, 40001, 78)
        .flags(TCP_ACK | TCP_PSH)
        .payload(&payload)
        .build();
    let out = bed.run(&f).unwrap();
    let at = payload_at(&f) + 332;
    assert_eq!(
        diff(&f, &out)
            .iter()
            .filter(|&&i| i >= payload_at(&f))
            .count(),
        1
    );
    assert_eq!(out[at], f[at] ^ 0x40);
    assert!(
        packet::checksums_ok(&out),
        "checksum with the odd byte padded"
    );
    let r = bed.record().unwrap();
    assert!(r.fired);
    assert_eq!(r.offset_in_flow, 332);
    assert_eq!(
        r.flow.as_deref(),
        Some("[2001:db8::3]:4433 -> [2001:db8::2]:40001")
    );
}
