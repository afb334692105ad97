//! Crafted Ethernet/IP/TCP frames with MPTCP options, for the BPF_PROG_TEST_RUN tests and the
//! benchmark, and the checks on what the programs return (checksums, option walking).

use std::net::IpAddr;

pub const TCP_FIN: u8 = 0x01;
pub const TCP_SYN: u8 = 0x02;
pub const TCP_PSH: u8 = 0x08;
pub const TCP_ACK: u8 = 0x10;

/// A TCP segment to build.
#[derive(Clone, Debug)]
pub struct Tcp {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    /// Raw option bytes; padded with NOPs to a multiple of 4 by `build`.
    pub options: Vec<u8>,
    pub payload: Vec<u8>,
    /// IPv4 options (padded to a multiple of 4), or IPv6 destination-options header content.
    pub ip_options: Vec<u8>,
}

impl Tcp {
    pub fn new(src: &str, dst: &str, sport: u16, dport: u16) -> Tcp {
        Tcp {
            src: src.parse().expect("address"),
            dst: dst.parse().expect("address"),
            sport,
            dport,
            seq: 1000,
            ack: 2000,
            flags: TCP_ACK,
            window: 502,
            options: vec![],
            payload: vec![],
            ip_options: vec![],
        }
    }
    pub fn flags(mut self, f: u8) -> Self {
        self.flags = f;
        self
    }
    pub fn opt(mut self, o: &[u8]) -> Self {
        self.options.extend_from_slice(o);
        self
    }
    pub fn payload(mut self, p: &[u8]) -> Self {
        self.payload = p.to_vec();
        self
    }
    pub fn window(mut self, w: u16) -> Self {
        self.window = w;
        self
    }
    pub fn ip_options(mut self, o: &[u8]) -> Self {
        self.ip_options = o.to_vec();
        self
    }

    /// The flow key the BPF programs derive from this segment.
    pub fn flow(&self) -> crate::chains::abi::FlowKey {
        let mut k = crate::chains::abi::FlowKey {
            sport: self.sport.to_be(),
            dport: self.dport.to_be(),
            ..Default::default()
        };
        match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                k.saddr[..4].copy_from_slice(&s.octets());
                k.daddr[..4].copy_from_slice(&d.octets());
                k.family = 4;
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                k.saddr = s.octets();
                k.daddr = d.octets();
                k.family = 6;
            }
            _ => {}
        }
        k
    }

    /// The same flow in the other direction (addresses and ports swapped).
    pub fn reply(&self) -> Tcp {
        let mut t = self.clone();
        std::mem::swap(&mut t.src, &mut t.dst);
        std::mem::swap(&mut t.sport, &mut t.dport);
        t.options.clear();
        t.payload.clear();
        t
    }

    /// The Ethernet frame, checksums filled in.
    pub fn build(&self) -> Vec<u8> {
        let mut opts = self.options.clone();
        while !opts.len().is_multiple_of(4) {
            opts.push(1);
        }
        let mut tcp = Vec::new();
        tcp.extend_from_slice(&self.sport.to_be_bytes());
        tcp.extend_from_slice(&self.dport.to_be_bytes());
        tcp.extend_from_slice(&self.seq.to_be_bytes());
        tcp.extend_from_slice(&self.ack.to_be_bytes());
        tcp.push((((20 + opts.len()) / 4) as u8) << 4);
        tcp.push(self.flags);
        tcp.extend_from_slice(&self.window.to_be_bytes());
        tcp.extend_from_slice(&[0, 0, 0, 0]);
        tcp.extend_from_slice(&opts);
        tcp.extend_from_slice(&self.payload);
        let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
        match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let mut ipo = self.ip_options.clone();
                while !ipo.len().is_multiple_of(4) {
                    ipo.push(0);
                }
                f.extend_from_slice(&[0x08, 0x00]);
                let ihl = (20 + ipo.len()) / 4;
                let tot = (ihl * 4 + tcp.len()) as u16;
                let mut ip = vec![0x40 | ihl as u8, 0];
                ip.extend_from_slice(&tot.to_be_bytes());
                ip.extend_from_slice(&[0x12, 0x34, 0x40, 0x00, 64, 6, 0, 0]);
                ip.extend_from_slice(&s.octets());
                ip.extend_from_slice(&d.octets());
                ip.extend_from_slice(&ipo);
                let c = !fold(sum(&ip));
                ip[10..12].copy_from_slice(&c.to_be_bytes());
                f.extend_from_slice(&ip);
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                f.extend_from_slice(&[0x86, 0xdd]);
                let mut ext = Vec::new();
                if !self.ip_options.is_empty() {
                    // destination options header: next header TCP, length in 8-byte units - 1
                    let mut body = self.ip_options.clone();
                    while !(body.len() + 2).is_multiple_of(8) {
                        body.push(0);
                    }
                    ext.push(6);
                    ext.push(((body.len() + 2) / 8 - 1) as u8);
                    ext.extend_from_slice(&body);
                }
                let plen = (ext.len() + tcp.len()) as u16;
                f.extend_from_slice(&[0x60, 0, 0, 0]);
                f.extend_from_slice(&plen.to_be_bytes());
                f.push(if ext.is_empty() { 6 } else { 60 });
                f.push(64);
                f.extend_from_slice(&s.octets());
                f.extend_from_slice(&d.octets());
                f.extend_from_slice(&ext);
            }
            _ => panic!("source and destination of one IP version"),
        }
        let l4 = f.len();
        f.extend_from_slice(&tcp);
        let c = tcp_checksum(&f, l4).expect("well-formed frame");
        f[l4 + 16..l4 + 18].copy_from_slice(&c.to_be_bytes());
        f
    }
}

fn sum(b: &[u8]) -> u32 {
    let mut s = 0u32;
    for ch in b.chunks(2) {
        let w = if ch.len() == 2 {
            u16::from_be_bytes([ch[0], ch[1]])
        } else {
            u16::from_be_bytes([ch[0], 0])
        };
        s = s.wrapping_add(w as u32);
    }
    s
}

fn fold(mut s: u32) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// A parsed frame: where things are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    pub l3: usize,
    pub l4: usize,
    pub v6: bool,
    pub doff: usize,
    pub ip_len: usize,
}

/// Locate the IP and TCP headers of a frame built like `Tcp::build` does.
pub fn parse(f: &[u8]) -> Option<Parsed> {
    if f.len() < 14 {
        return None;
    }
    let (l4, v6, ip_len) = match [f[12], f[13]] {
        [0x08, 0x00] => {
            let ihl = (f.get(14)? & 0x0f) as usize * 4;
            (14 + ihl, false, u16::from_be_bytes([f[16], f[17]]) as usize)
        }
        [0x86, 0xdd] => {
            let mut nh = *f.get(20)?;
            let mut off = 54;
            while nh == 60 || nh == 0 || nh == 43 {
                nh = *f.get(off)?;
                off += (*f.get(off + 1)? as usize + 1) * 8;
            }
            (off, true, u16::from_be_bytes([f[18], f[19]]) as usize + 40)
        }
        _ => return None,
    };
    let doff = (*f.get(l4 + 12)? >> 4) as usize * 4;
    Some(Parsed {
        l3: 14,
        l4,
        v6,
        doff,
        ip_len,
    })
}

/// The TCP checksum a frame should carry (computed with its checksum field as zero).
pub fn tcp_checksum(f: &[u8], l4: usize) -> Option<u16> {
    let p = parse(f)?;
    let seg_end = 14 + p.ip_len;
    if seg_end > f.len() || l4 + 18 > seg_end {
        return None;
    }
    let mut seg = f[l4..seg_end].to_vec();
    seg[16] = 0;
    seg[17] = 0;
    let len = seg.len() as u32;
    let mut s = sum(&seg);
    if p.v6 {
        s += sum(&f[22..54]);
        s += len >> 16;
        s += len & 0xffff;
        s += 6;
    } else {
        s += sum(&f[26..34]);
        s += 6 + len;
    }
    Some(!fold(s))
}

/// True if the frame's TCP checksum (and IPv4 header checksum) are right.
pub fn checksums_ok(f: &[u8]) -> bool {
    let Some(p) = parse(f) else { return false };
    if !p.v6 {
        let ihl = (f[14] & 0x0f) as usize * 4;
        if fold(sum(&f[14..14 + ihl])) != 0xffff {
            return false;
        }
    }
    let Some(want) = tcp_checksum(f, p.l4) else {
        return false;
    };
    u16::from_be_bytes([f[p.l4 + 16], f[p.l4 + 17]]) == want
}

/// The TCP options of a frame as (kind, bytes) pairs; None if a length lies.
pub fn options(f: &[u8]) -> Option<Vec<(u8, Vec<u8>)>> {
    let p = parse(f)?;
    let o = f.get(p.l4 + 20..p.l4 + p.doff)?;
    let mut out = vec![];
    let mut i = 0;
    while i < o.len() {
        match o[i] {
            0 => break,
            1 => {
                out.push((1, vec![1]));
                i += 1;
            }
            k => {
                let l = *o.get(i + 1)? as usize;
                if l < 2 || i + l > o.len() {
                    return None;
                }
                out.push((k, o[i..i + l].to_vec()));
                i += l;
            }
        }
    }
    Some(out)
}

/// MPTCP options (kind 30) of a frame.
pub fn mptcp_options(f: &[u8]) -> Vec<Vec<u8>> {
    options(f)
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| *k == 30)
        .map(|(_, b)| b)
        .collect()
}

/// MPTCP v1 option builders (RFC 8684 section 3).
pub mod mp {
    /// MP_CAPABLE of a SYN (no key), of a SYN/ACK (sender key) or a third ACK (both keys).
    pub fn capable(keys: &[u64]) -> Vec<u8> {
        let mut o = vec![30, (4 + 8 * keys.len()) as u8, 0x01, 0x81];
        for k in keys {
            o.extend_from_slice(&k.to_be_bytes());
        }
        o
    }
    /// MP_JOIN of a SYN: token, nonce.
    pub fn join_syn(backup: bool, addr_id: u8, token: u32, nonce: u32) -> Vec<u8> {
        let mut o = vec![30, 12, 0x10 | backup as u8, addr_id];
        o.extend_from_slice(&token.to_be_bytes());
        o.extend_from_slice(&nonce.to_be_bytes());
        o
    }
    /// DSS with a 4-byte data ACK and, optionally, a mapping with a 4-byte DSN.
    pub fn dss(data_ack: Option<u32>, dsn: Option<(u32, u32, u16)>) -> Vec<u8> {
        let mut flags = 0;
        let mut body = vec![];
        if let Some(a) = data_ack {
            flags |= 0x01;
            body.extend_from_slice(&a.to_be_bytes());
        }
        if let Some((dsn, ssn, len)) = dsn {
            flags |= 0x04;
            body.extend_from_slice(&dsn.to_be_bytes());
            body.extend_from_slice(&ssn.to_be_bytes());
            body.extend_from_slice(&len.to_be_bytes());
        }
        let mut o = vec![30, (4 + body.len()) as u8, 0x20, flags];
        o.extend(body);
        o
    }
    /// ADD_ADDR v1 for IPv4: with HMAC (announcement) or echo (E = 1, no HMAC).
    pub fn add_addr_v4(id: u8, addr: [u8; 4], port: Option<u16>, hmac: Option<u64>) -> Vec<u8> {
        let echo = hmac.is_none();
        let mut o = vec![30, 0, 0x30 | echo as u8, id];
        o.extend_from_slice(&addr);
        if let Some(p) = port {
            o.extend_from_slice(&p.to_be_bytes());
        }
        if let Some(h) = hmac {
            o.extend_from_slice(&h.to_be_bytes());
        }
        o[1] = o.len() as u8;
        o
    }
    /// ADD_ADDR v1 for IPv6 with HMAC.
    pub fn add_addr_v6(id: u8, addr: [u8; 16], hmac: u64) -> Vec<u8> {
        let mut o = vec![30, 28, 0x30, id];
        o.extend_from_slice(&addr);
        o.extend_from_slice(&hmac.to_be_bytes());
        o
    }
    /// MP_PRIO (v1: 3 bytes).
    pub fn prio(backup: bool) -> Vec<u8> {
        vec![30, 3, 0x50 | backup as u8]
    }
    /// TCP timestamps (with the usual two NOPs before).
    pub fn ts(val: u32, ecr: u32) -> Vec<u8> {
        let mut o = vec![1, 1, 8, 10];
        o.extend_from_slice(&val.to_be_bytes());
        o.extend_from_slice(&ecr.to_be_bytes());
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_valid_frames() {
        let f = Tcp::new("198.18.100.1", "198.18.100.2", 1, 2)
            .opt(&mp::dss(Some(5), None))
            .payload(b"abc")
            .build();
        assert!(checksums_ok(&f));
        let p = parse(&f).unwrap();
        assert_eq!((p.l4, p.doff, p.ip_len), (34, 28, 20 + 28 + 3));
        assert_eq!(mptcp_options(&f), vec![mp::dss(Some(5), None)]);
        let mut bad = f.clone();
        bad[40] ^= 1;
        assert!(!checksums_ok(&bad));
        let g = Tcp::new("2001:db8::1", "2001:db8::2", 1, 2)
            .ip_options(&[1, 0])
            .opt(&mp::prio(true))
            .build();
        assert!(checksums_ok(&g));
        assert_eq!(parse(&g).unwrap().l4, 14 + 40 + 8);
        let h = Tcp::new("198.18.100.1", "198.18.100.2", 1, 2)
            .ip_options(&[1, 1, 1, 1])
            .build();
        assert!(checksums_ok(&h));
        assert_eq!(parse(&h).unwrap().l4, 38);
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3 example bytes: sum 0xddf2
        assert_eq!(
            fold(sum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7])),
            0xddf2
        );
    }
}
