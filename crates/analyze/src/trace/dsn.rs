//! The data level of MPTCP connections: DSS mappings read per subflow, each segment's
//! bytes placed at their DSNs (which subflow sent which range first; what another sent
//! again is a reinjection), data ACKs (and the recovery time of subflow outages waiting for
//! them), and the per-direction summary in the report.

use super::report::{DataDir, Reinjection, MAX_EVENTS};
use super::state::{ConnDir, ConnState, SubState};
use crate::dss::Mapping;
use crate::packet::Segment;

/// Widen a DSN sent in 32 bits against a reference.
fn widen(v: u64, is64: bool, reference: Option<u64>) -> u64 {
    if is64 {
        return v;
    }
    match reference {
        None => v,
        Some(r) => {
            let base = r & !0xffff_ffff;
            [base.wrapping_sub(1 << 32), base, base.wrapping_add(1 << 32)]
                .into_iter()
                .map(|b| b | (v & 0xffff_ffff))
                .min_by_key(|c| c.abs_diff(r))
                .expect("three candidates")
        }
    }
}

/// Record `[dsn, end)` as sent by subflow `si` at `t`: what another subflow sent before is
/// a reinjection.
fn place(c: &mut ConnDir, dsn: u64, end: u64, si: usize, t: f64) {
    // Overlapping ranges already owned.
    let mut over: Vec<(u64, u64, usize)> = Vec::new();
    if let Some((&s, &(e, o))) = c.owners.range(..dsn).next_back() {
        if e > dsn {
            over.push((s, e, o));
        }
    }
    over.extend(c.owners.range(dsn..end).map(|(&s, &(e, o))| (s, e, o)));
    let mut cur = dsn;
    let mut fresh: Vec<(u64, u64)> = Vec::new();
    for (s, e, o) in over {
        if s > cur {
            fresh.push((cur, s));
        }
        let (os, oe) = (s.max(dsn), e.min(end));
        if o != si && oe > os {
            c.reinjected += oe - os;
            let rel = os - c.first.unwrap_or(os).min(os);
            let n = c.reinjections.len();
            match c.reinjections.last_mut() {
                Some(r) if r.from == o && r.to == si && r.dsn + r.bytes == rel => {
                    r.bytes += oe - os;
                }
                _ if n < MAX_EVENTS => c.reinjections.push(Reinjection {
                    time: t,
                    from: o,
                    to: si,
                    dsn: rel,
                    bytes: oe - os,
                }),
                _ => {}
            }
        }
        cur = cur.max(e);
    }
    if cur < end {
        fresh.push((cur, end));
    }
    for (s, e) in fresh {
        // Merge with a neighbour of the same owner that ends right here.
        if let Some((&ps, &(pe, po))) = c.owners.range(..s).next_back() {
            if pe == s && po == si {
                c.owners.insert(ps, (e, si));
                continue;
            }
        }
        c.owners.insert(s, (e, si));
    }
}

/// The report of one connection direction's data level.
pub(super) fn data_dir(c: ConnDir, points: Vec<Vec<(f64, f64)>>, subflows: &[usize]) -> DataDir {
    let mut covered = 0u64;
    let mut holes = 0u64;
    let mut prev_end: Option<u64> = None;
    for (&s, &(e, _)) in &c.owners {
        covered += e - s;
        if prev_end.is_some_and(|p| s > p) {
            holes += 1;
        }
        prev_end = Some(prev_end.map_or(e, |p| p.max(e)));
    }
    let first = c.first;
    let span = match (first, c.max_end) {
        (Some(f), Some(e)) => e - f,
        _ => 0,
    };
    // Subflow numbers in events are indices into the connection's subflow list.
    let pos = |g: usize| subflows.iter().position(|&x| x == g).unwrap_or(usize::MAX);
    let reinjections = c
        .reinjections
        .into_iter()
        .map(|mut r| {
            r.from = pos(r.from);
            r.to = pos(r.to);
            r
        })
        .collect();
    DataDir {
        first_dsn: first,
        bytes_covered: covered,
        span,
        holes,
        data_acked: match (first, c.data_ack) {
            (Some(f), Some(a)) => Some(a.saturating_sub(f)),
            _ => None,
        },
        reinjected_bytes: c.reinjected,
        reinjections,
        unmapped_bytes: c.unmapped,
        points,
    }
}

/// A data ACK `ack` for subflow direction `d` (sent by its receiver) at time `t`: the
/// connection's data ACK advances, and subflow outages waiting for it get their recovery time.
pub(super) fn data_ack(
    subs: &mut [SubState],
    conns: &mut [ConnState],
    si: usize,
    d: usize,
    ack: u64,
    is64: bool,
    t: f64,
) {
    let Some(ci) = subs[si].conn else { return };
    let cd = subs[si].cdir(d);
    let c = &mut conns[ci].dirs[cd];
    let a = widen(ack, is64, c.max_end.or(c.data_ack));
    if c.data_ack.is_some_and(|x| a <= x) {
        return;
    }
    c.data_ack = Some(a);
    c.ack_hist.push_back((t, a));
    while c.ack_hist.front().is_some_and(|&(x, _)| x < t - 60.0) {
        c.ack_hist.pop_front();
    }
    if c.max_end.is_some_and(|e| a >= e) {
        c.all_acked.get_or_insert(t);
    }
    let pending = std::mem::take(&mut c.pending);
    let mut keep = Vec::new();
    for p in pending {
        if a >= p.2 {
            subs[p.0].outages[p.1].recovery = Some(t - p.3);
        } else {
            keep.push(p);
        }
    }
    conns[ci].dirs[cd].pending = keep;
}

/// Place the segment's bytes at their DSNs (MPTCP only).
pub(super) fn data_level(
    subs: &mut [SubState],
    conns: &mut [ConnState],
    si: usize,
    d: usize,
    off: i64,
    seg: &Segment,
    t: f64,
) {
    let Some(ci) = subs[si].conn else { return };
    if !conns[ci].mptcp {
        return;
    }
    let cd = subs[si].cdir(d);
    let dir = &mut subs[si].dirs[d];
    // The ISN is needed to read mappings (relative SSNs); without the SYN, the first
    // segment that carries a mapping is taken to begin it.
    // MP_CAPABLE on the first data segment (RFC 8684 3.1): its data starts at the
    // sender's IDSN + 1 and subflow sequence number 1, without a DSS mapping.
    let capable = (seg.mptcp.dss.is_none()
        && seg.wire_len > 0
        && seg.mptcp.keys.len() == 2
        && seg.mptcp.subtypes.contains(&crate::Subtype::MpCapable))
    .then(|| Mapping {
        dsn: crate::dss::idsn_of_key(seg.mptcp.keys[0]).wrapping_add(1),
        dsn64: true,
        ssn: 1,
        len: seg.wire_len.min(u16::MAX as u32) as u16,
        checksum: None,
    });
    if let Some(m) = seg.mptcp.dss.and_then(|x| x.mapping).or(capable) {
        if dir.isn.is_none() && m.len > 0 {
            let isn = seg.seq.wrapping_sub(m.ssn);
            dir.isn = Some(isn);
            // Re-base offsets on this ISN: offset of seq is then m.ssn - 1.
            let delta = (m.ssn as i64 - 1) - off;
            dir.last = dir.last.map(|(s, o)| (s, o + delta));
            dir.max_end = dir.max_end.map(|e| e + delta);
            dir.max_ack = dir.max_ack.map(|e| e + delta);
            for o in dir.outstanding.iter_mut() {
                o.start += delta;
                o.end += delta;
            }
        }
        if let (true, Some(isn)) = (m.len > 0, dir.isn) {
            let rel = seg.seq.wrapping_sub(isn);
            let cur = dir.peek(seg.seq).expect("offset taken");
            // offset = relative ssn - 1
            let moff = cur + (m.ssn.wrapping_sub(rel) as i32) as i64;
            dir.mappings.insert(moff, m);
            if dir.mappings.len() > 4096 {
                dir.mappings.pop_first();
            }
        }
    }
    let Some(off) = dir.peek(if seg.flags.syn {
        seg.seq.wrapping_add(1)
    } else {
        seg.seq
    }) else {
        return;
    };
    if dir.isn.is_none() {
        conns[ci].dirs[cd].unmapped += seg.wire_len as u64;
        return;
    }
    let len = seg.wire_len as i64;
    let mut pieces: Vec<(u64, u64, bool)> = Vec::new(); // (dsn, len, 64-bit)
    let mut at = off;
    let mut unmapped = 0u64;
    while at < off + len {
        let Some((&ms, m)) = dir.mappings.range(..=at).next_back() else {
            unmapped += (off + len - at) as u64;
            break;
        };
        let into = at - ms;
        if m.len == 0 || into >= m.len as i64 {
            match dir.mappings.range(at + 1..).next() {
                Some((&next, _)) if next < off + len => {
                    unmapped += (next - at) as u64;
                    at = next;
                    continue;
                }
                _ => {
                    unmapped += (off + len - at) as u64;
                    break;
                }
            }
        }
        let n = (m.len as i64 - into).min(off + len - at);
        pieces.push((m.dsn.wrapping_add(into as u64), n as u64, m.dsn64));
        at += n;
    }
    let c = &mut conns[ci].dirs[cd];
    c.unmapped += unmapped;
    for (dsn, n, is64) in pieces {
        let dsn = widen(dsn, is64, c.last_dsn);
        c.last_dsn = Some(dsn);
        let first = *c.first.get_or_insert(dsn);
        if dsn < first {
            c.first = Some(dsn);
        }
        let end = dsn + n;
        if c.max_end.is_none_or(|e| end > e) {
            c.max_end = Some(end);
            c.all_acked = None;
        }
        place(c, dsn, end, si, t);
        subs[si].points[d].push((t, dsn.wrapping_sub(first) as f64));
    }
    if c.last_data.is_some_and(|l| t >= l) || c.last_data.is_none() {
        if let Some(oi) = c.outage_open.take() {
            let o = &mut conns[ci].outages[oi];
            o.end = Some(t);
            o.duration = Some(t - o.start);
            o.recovery = o.duration;
        }
    }
    let c = &mut conns[ci].dirs[cd];
    c.last_data = Some(t);
}

#[cfg(test)]
mod tests {
    use crate::craft;
    use crate::trace::fixtures::{addrs, pcap_at};
    use crate::trace::{analyze_captures, TraceOptions};
    use std::net::SocketAddrV4;

    /// Two joined subflows of one connection; the second sends DSNs 1000..1500 again.
    #[test]
    fn joined_subflows_group_by_token_and_reinjections_are_found() {
        let (c1, s) = addrs();
        let c2: SocketAddrV4 = "198.18.2.2:40001".parse().unwrap();
        let data = vec![5u8; 2000];
        let a = craft::joined_subflow(c1, s, 0xabcd, &[(0, &data[..1500])], 500, true, 0);
        let b = craft::joined_subflow(c2, s, 0xabcd, &[(1000, &data[1000..])], 500, true, 0);
        let dir = std::env::temp_dir().join(format!("nena-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (pa, pb) = (dir.join("a.pcap"), dir.join("b.pcap"));
        std::fs::write(&pa, &a).unwrap();
        // The second capture 10 ms later than the first (craft's frames start at 1 s).
        let shifted: Vec<(f64, Vec<u8>)> = {
            let mut v = Vec::new();
            crate::capture::read_frames(&b[..], |f| {
                v.push((f.ts.as_secs_f64() - 1000.0 + 0.010, f.data.to_vec()))
            })
            .unwrap();
            v
        };
        std::fs::write(&pb, pcap_at(&shifted)).unwrap();
        let r = analyze_captures(&[pa.clone(), pb.clone()], &TraceOptions::default());
        // the same capture twice: its segments are counted once
        let twice = analyze_captures(&[pa.clone(), pa.clone()], &TraceOptions::default());
        std::fs::remove_dir_all(&dir).unwrap();
        let r = r.unwrap();
        assert_eq!(r.connections.len(), 1, "{r:#?}");
        let conn = &r.connections[0];
        assert!(conn.mptcp);
        assert_eq!(conn.token.as_deref(), Some("0000abcd"));
        assert_eq!(conn.subflows.len(), 2);
        assert!(conn.subflows.iter().all(|s| s.join));
        assert_eq!(conn.payload_bytes.c2s, 2500);
        let d = &conn.data.as_ref().unwrap().c2s;
        assert_eq!((d.bytes_covered, d.span, d.holes), (2000, 2000, 0));
        assert_eq!(d.reinjected_bytes, 500);
        assert_eq!(d.reinjections.len(), 1);
        let re = &d.reinjections[0];
        assert_eq!((re.from, re.to, re.dsn, re.bytes), (0, 1, 1000, 500));
        let twice = twice.unwrap();
        assert_eq!(twice.connections[0].payload_bytes.c2s, 1500);
        assert!(twice.captures[1].duplicate_segments > 0);
        assert_eq!(
            twice.connections[0]
                .data
                .as_ref()
                .unwrap()
                .c2s
                .reinjected_bytes,
            0
        );
    }
}
