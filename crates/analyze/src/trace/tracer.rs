//! The measuring state machine, [`Tracer`]: segments and times in (in time order), report
//! out. Groups subflows into connections by token (MP_CAPABLE keys, MP_JOIN tokens), counts
//! bytes, retransmissions and throughput bins per subflow direction, and hands ACKs,
//! timestamps, the data level and silences to the modules that measure them; knows no files.

use super::dsn::{self, data_dir};
use super::outages;
use super::report::{
    auto_bin, CaptureInfo, Connection, DataDir, PerDir, RttStats, Subflow, TraceOptions,
    TraceReport, FINE_BIN, MAX_BINS,
};
use super::rtt;
use super::state::{ConnState, Out, SubState};
use crate::dss::token_of_key;
use crate::packet::Segment;
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::time::Duration;

/// The measuring state machine: feed it segments in time order, then [`Tracer::finish`].
#[derive(Debug)]
pub struct Tracer {
    opts: TraceOptions,
    t0: Option<Duration>,
    now: f64,
    subs: Vec<SubState>,
    index: HashMap<(SocketAddr, SocketAddr), usize>,
    conns: Vec<ConnState>,
    /// token -> (connection, whether a join naming it is opened by the server).
    tokens: HashMap<u32, (usize, bool)>,
}

impl Tracer {
    /// The width bytes are counted in while reading: the bin asked for, or [`FINE_BIN`]
    /// when the bin is chosen at the end from the capture's length.
    fn counting_bin(&self) -> f64 {
        self.opts.bin.map_or(FINE_BIN, |b| b.as_secs_f64())
    }

    pub fn new(opts: TraceOptions) -> Tracer {
        Tracer {
            opts,
            t0: None,
            now: 0.0,
            subs: Vec::new(),
            index: HashMap::new(),
            conns: Vec::new(),
            tokens: HashMap::new(),
        }
    }

    /// Which capture owns the subflow of this segment, if it is known yet.
    pub fn owner(&self, seg: &Segment) -> Option<usize> {
        self.index
            .get(&(seg.src, seg.dst))
            .or_else(|| self.index.get(&(seg.dst, seg.src)))
            .map(|&i| self.subs[i].capture)
    }

    fn new_conn(&mut self, token: Option<u32>, mptcp: bool) -> usize {
        self.conns.push(ConnState {
            token,
            mptcp,
            subflows: Vec::new(),
            dirs: Default::default(),
            outages: Vec::new(),
        });
        self.conns.len() - 1
    }

    fn attach(&mut self, si: usize, ci: usize, reversed: bool) {
        if self.subs[si].conn.is_none() {
            self.subs[si].conn = Some(ci);
            self.subs[si].reversed = reversed;
            self.conns[ci].subflows.push(si);
        }
    }

    /// Feed one segment read from capture `capture` at absolute time `ts`.
    pub fn segment(&mut self, capture: usize, ts: Duration, seg: &Segment) {
        let t0 = *self.t0.get_or_insert(ts);
        // Captures may go back in time a little; keep times monotonic per subflow use.
        let t = ts.saturating_sub(t0).as_secs_f64().max(0.0);
        self.now = self.now.max(t);
        let si = match self
            .index
            .get(&(seg.src, seg.dst))
            .or_else(|| self.index.get(&(seg.dst, seg.src)))
        {
            Some(&i) => i,
            None => {
                // The opener is the sender of a SYN without ACK; else the first sender seen,
                // or the receiver of a SYN/ACK.
                let (client, server) = if seg.flags.syn && seg.flags.ack {
                    (seg.dst, seg.src)
                } else {
                    (seg.src, seg.dst)
                };
                self.subs.push(SubState {
                    client,
                    server,
                    capture,
                    syn_seen: false,
                    join: false,
                    backup: false,
                    mptcp: false,
                    start: t,
                    end: t,
                    fin: false,
                    rst: false,
                    conn: None,
                    reversed: false,
                    dirs: Default::default(),
                    outages: Vec::new(),
                    points: Default::default(),
                });
                let i = self.subs.len() - 1;
                self.index.insert((client, server), i);
                i
            }
        };
        if self.subs[si].capture != capture {
            return;
        }
        let d = if seg.src == self.subs[si].client {
            0
        } else {
            1
        };
        let r = 1 - d;
        {
            let s = &mut self.subs[si];
            s.end = s.end.max(t);
            s.fin |= seg.flags.fin;
            s.rst |= seg.flags.rst;
            if !seg.mptcp.is_empty() {
                s.mptcp = true;
            }
            if let Some(b) = seg.mptcp.prio_backup {
                s.backup = b;
            }
        }
        self.handshake(si, d, seg);
        if self.subs[si].conn.is_none() && (seg.wire_len > 0 || seg.flags.fin || seg.flags.rst) {
            // Data before any token was learnt: a plain TCP connection, or an MPTCP subflow
            // whose handshake was not captured (it stays a connection of its own).
            let mptcp = self.subs[si].mptcp;
            let ci = self.new_conn(None, mptcp);
            self.attach(si, ci, false);
        }
        // Silences that have lasted beyond their threshold by now are outages.
        outages::check(&mut self.subs, &mut self.conns, &self.opts, si, t, true);

        // The ACK side: this segment acknowledges data of the reverse direction.
        if seg.flags.ack {
            self.subs[si].dirs[r].ack(seg.ack, t);
        }
        if let Some(ts) = seg.timestamps {
            self.subs[si].dirs[r].ts_echo(ts.1, t);
        }
        if let Some(a) = seg.mptcp.dss.and_then(|x| x.data_ack) {
            let is64 = seg.mptcp.dss.is_some_and(|x| x.ack64);
            dsn::data_ack(&mut self.subs, &mut self.conns, si, r, a, is64, t);
        }
        // The data side.
        let dir = &mut self.subs[si].dirs[d];
        dir.segments += 1;
        if seg.flags.syn && dir.isn.is_none() {
            dir.isn = Some(seg.seq);
            dir.last = Some((seg.seq.wrapping_add(1), 0));
        }
        if seg.wire_len == 0 {
            return;
        }
        let data_seq = if seg.flags.syn {
            seg.seq.wrapping_add(1)
        } else {
            seg.seq
        };
        let off = dir.offset(data_seq);
        let end = off + seg.wire_len as i64;
        let len = seg.wire_len as u64;
        dir.payload += len;
        let bin = (t / self.counting_bin()).max(0.0) as u64;
        let dir = &mut self.subs[si].dirs[d];
        *dir.bins.entry(bin).or_default() += len;
        let max_end = dir.max_end.unwrap_or(i64::MIN);
        if off < max_end {
            // (Partly) sent before: a retransmission. Karn: no sample from these segments.
            dir.retx += (max_end.min(end) - off) as u64;
            for o in dir.outstanding.iter_mut() {
                if o.start < end && off < o.end {
                    o.retx = true;
                }
            }
        }
        if end > max_end {
            let from = off.max(max_end);
            dir.outstanding.push_back(Out {
                start: from,
                end,
                t,
                retx: from != off,
            });
            dir.max_end = Some(end);
            dir.all_acked = None;
        }
        // TCP timestamps: the first data segment with a TSval is the one its echo times.
        if let Some((tsval, _)) = seg.timestamps {
            if dir.ts_sent.back().is_none_or(|&(v, _)| v != tsval) {
                dir.ts_sent.push_back((tsval, t));
                if dir.ts_sent.len() > 4096 {
                    dir.ts_sent.pop_front();
                }
            }
        }
        // A subflow outage ends when this direction sends again.
        let thr = dir.threshold(&self.opts);
        let open = dir.outage_open.take();
        dir.last_data = Some(t);
        if let Some(oi) = open {
            let o = &mut self.subs[si].outages[oi];
            o.end = Some(t);
            o.duration = Some(t - o.start);
            o.threshold = thr;
        }
        dsn::data_level(&mut self.subs, &mut self.conns, si, d, off, seg, t);
        let conn_dsn = self.subs[si]
            .conn
            .and_then(|ci| self.conns[ci].dirs[self.subs[si].cdir(d)].max_end);
        self.subs[si].dirs[d].conn_dsn_at_last = conn_dsn;
    }

    fn handshake(&mut self, si: usize, d: usize, seg: &Segment) {
        if !seg.flags.syn {
            // The third ACK of MP_CAPABLE carries both keys: the client's names joins the
            // server opens.
            if seg.mptcp.keys.len() == 2 && d == 0 {
                if let Some(ci) = self.subs[si].conn {
                    self.tokens
                        .entry(token_of_key(seg.mptcp.keys[0]))
                        .or_insert((ci, true));
                }
            }
            return;
        }
        self.subs[si].syn_seen = true;
        if let Some(j) = seg.mptcp.join {
            self.subs[si].join = true;
            self.subs[si].mptcp = true;
            self.subs[si].backup |= j.backup;
            if let Some(tok) = j.token {
                let (ci, rev) = match self.tokens.get(&tok) {
                    Some(&x) => x,
                    None => {
                        let ci = self.new_conn(Some(tok), true);
                        self.tokens.insert(tok, (ci, false));
                        (ci, false)
                    }
                };
                self.attach(si, ci, rev);
            }
        }
        if seg.flags.ack && seg.mptcp.subtypes.contains(&crate::Subtype::MpCapable) {
            if let Some(&k) = seg.mptcp.keys.first() {
                let tok = token_of_key(k);
                let ci = match self.tokens.get(&tok) {
                    Some(&(ci, _)) => ci,
                    None => {
                        let ci = self.new_conn(Some(tok), true);
                        self.tokens.insert(tok, (ci, false));
                        ci
                    }
                };
                self.attach(si, ci, false);
            }
        }
    }

    /// The report. `captures` describes the inputs, in the order of their indices.
    pub fn finish(mut self, captures: Vec<CaptureInfo>, warnings: Vec<String>) -> TraceReport {
        let now = self.now;
        // Silences that last to the end of the capture.
        for si in 0..self.subs.len() {
            // At the end, only a subflow's own unacknowledged data counts: the connection
            // finishing on another subflow is not an outage of this one.
            outages::check(&mut self.subs, &mut self.conns, &self.opts, si, now, false);
        }
        // Bytes were counted per `counting_bin`; the series are per `bin`, a multiple of it.
        let counted = self.counting_bin();
        let bin = self
            .opts
            .bin
            .map_or_else(|| auto_bin(now), |b| b.as_secs_f64());
        let factor = ((bin / counted).round() as u64).max(1);
        let rebin = |bins: BTreeMap<u64, u64>| -> BTreeMap<u64, u64> {
            if factor == 1 {
                return bins;
            }
            let mut out = BTreeMap::new();
            for (i, b) in bins {
                *out.entry(i / factor).or_default() += b;
            }
            out
        };
        // Dense from the first to the last bin with data (zeros between), or, when that
        // would exceed MAX_BINS, the bins with data only.
        let series = |bins: &BTreeMap<u64, u64>| -> Vec<(f64, f64)> {
            let rate = |i: u64, b: u64| (i as f64 * bin, b as f64 * 8.0 / bin / 1e6);
            match (bins.first_key_value(), bins.last_key_value()) {
                (Some((&a, _)), Some((&z, _))) if z - a < MAX_BINS => (a..=z)
                    .map(|i| rate(i, bins.get(&i).copied().unwrap_or(0)))
                    .collect(),
                _ => bins.iter().map(|(&i, &b)| rate(i, b)).collect(),
            }
        };
        // Subflows never attached (no payload at all): each its own connection.
        for si in 0..self.subs.len() {
            if self.subs[si].conn.is_none() {
                let mptcp = self.subs[si].mptcp;
                let ci = self.new_conn(None, mptcp);
                self.attach(si, ci, false);
            }
        }
        let mut connections = Vec::new();
        let mut subs: Vec<Option<SubState>> = self.subs.into_iter().map(Some).collect();
        for c in self.conns {
            if c.subflows.is_empty() {
                continue;
            }
            let mut subflows = Vec::new();
            let mut payload = PerDir::<u64>::default();
            let mut agg: [BTreeMap<u64, u64>; 2] = Default::default();
            let mut points: [Vec<Vec<(f64, f64)>>; 2] = Default::default();
            let mut start = f64::MAX;
            let mut end = 0f64;
            for &si in &c.subflows {
                let s = subs[si].take().expect("a subflow is in one connection");
                start = start.min(s.start);
                end = end.max(s.end);
                let mut sub = Subflow {
                    src: s.client.to_string(),
                    dst: s.server.to_string(),
                    capture: s.capture,
                    syn_seen: s.syn_seen,
                    join: s.join,
                    backup: s.backup,
                    start: s.start,
                    end: s.end,
                    fin: s.fin,
                    rst: s.rst,
                    payload_bytes: Default::default(),
                    segments: Default::default(),
                    retransmitted_bytes: Default::default(),
                    rtt: Default::default(),
                    rtt_ts: Default::default(),
                    throughput: Default::default(),
                    rtt_series: Default::default(),
                    outages: s.outages,
                    rtt_samples: Default::default(),
                };
                for (d, mut dir) in s.dirs.into_iter().enumerate() {
                    dir.bins = rebin(std::mem::take(&mut dir.bins));
                    let cd = if s.reversed { 1 - d } else { d };
                    *sub.payload_bytes.get_mut(d) = dir.payload;
                    *sub.segments.get_mut(d) = dir.segments;
                    *sub.retransmitted_bytes.get_mut(d) = dir.retx;
                    *sub.rtt.get_mut(d) = RttStats::of(&dir.rtt);
                    *sub.rtt_ts.get_mut(d) = RttStats::of(&dir.rtt_ts);
                    *sub.throughput.get_mut(d) = series(&dir.bins);
                    *sub.rtt_series.get_mut(d) = rtt::series(&dir.rtt, bin);
                    *payload.get_mut(cd) += dir.payload;
                    for (&i, &b) in &dir.bins {
                        *agg[cd].entry(i).or_default() += b;
                    }
                    *sub.rtt_samples.get_mut(d) = dir.rtt;
                }
                for (d, p) in s.points.into_iter().enumerate() {
                    let cd = if s.reversed { 1 - d } else { d };
                    points[cd].push(p.pts);
                }
                subflows.push(sub);
            }
            let data = c.mptcp.then(|| {
                let mut out = PerDir::<DataDir>::default();
                for (cd, (cdir, pts)) in c.dirs.into_iter().zip(points).enumerate() {
                    *out.get_mut(cd) = data_dir(cdir, pts, &c.subflows);
                }
                out
            });
            connections.push(Connection {
                mptcp: c.mptcp,
                token: c.token.map(|t| format!("{t:08x}")),
                start,
                end,
                subflows,
                payload_bytes: payload,
                throughput: PerDir {
                    c2s: series(&agg[0]),
                    s2c: series(&agg[1]),
                },
                data,
                outages: c.outages,
            });
        }
        connections.sort_by(|a, b| a.start.total_cmp(&b.start));
        TraceReport {
            captures,
            start_epoch: self.t0.map_or(0.0, |t| t.as_secs_f64()),
            duration: now,
            bin,
            bin_auto: self.opts.bin.is_none(),
            connections,
            warnings,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::craft;
    use crate::trace::fixtures::addrs;
    use crate::trace::{analyze_bytes, PerDir, TraceOptions};

    #[test]
    fn plain_tcp_bytes_rtt_and_throughput() {
        let (c, s) = addrs();
        let data = vec![7u8; 10_000];
        let pcap = craft::connection(c, s, &data, 1000);
        let r = analyze_bytes(
            &pcap,
            &TraceOptions {
                bin: Some(std::time::Duration::from_secs(1)),
                ..TraceOptions::default()
            },
        )
        .unwrap();
        assert_eq!(r.connections.len(), 1);
        let conn = &r.connections[0];
        assert!(!conn.mptcp && conn.data.is_none());
        let sf = &conn.subflows[0];
        assert_eq!(
            (sf.src.as_str(), sf.dst.as_str()),
            ("198.18.1.2:40000", "198.18.3.2:7000")
        );
        assert_eq!(
            sf.payload_bytes,
            PerDir {
                c2s: 10_000,
                s2c: 0
            }
        );
        assert!(sf.syn_seen && sf.fin && !sf.join);
        // Every data segment is acked 1 ms later (the crafted frames are 1 ms apart).
        assert_eq!(sf.rtt.c2s.samples, 10);
        assert!(
            (sf.rtt.c2s.median_ms.unwrap() - 1.0).abs() < 1e-6,
            "{:?}",
            sf.rtt.c2s
        );
        assert_eq!(sf.rtt.s2c.samples, 0);
        let total: f64 = sf.throughput.c2s.iter().map(|p| p.1).sum();
        assert!(
            (total - 0.08).abs() < 1e-9,
            "10 kB in one 1 s bin: {total} Mbit/s"
        );
        assert!(sf.outages.is_empty(), "{:?}", sf.outages);
    }

    #[test]
    fn the_bin_is_chosen_from_the_captures_length_and_keeps_every_byte() {
        use crate::trace::{auto_bin, NICE_BINS};
        for (d, want) in [
            (0.023, 0.01),
            (1.8, 0.05),
            (2.0, 0.05),
            (10.0, 0.2),
            (30.0, 0.5),
            (60.0, 1.0),
            (600.0, 10.0),
            (1e9, 1800.0),
        ] {
            assert_eq!(auto_bin(d), want, "{d} s");
        }
        // Every width is a whole number of counting bins (10 ms).
        for b in NICE_BINS {
            assert!(((b / 0.01).round() * 0.01 - b).abs() < 1e-9, "{b}");
        }
        let (c, s) = addrs();
        let pcap = craft::connection(c, s, &vec![7u8; 10_000], 1000);
        let r = analyze_bytes(&pcap, &TraceOptions::default()).unwrap();
        assert!(r.bin_auto && r.bin == 0.01, "{}", r.bin);
        let th = &r.connections[0].subflows[0].throughput.c2s;
        assert_eq!(th.len(), 3, "23 ms in 10 ms bins: {th:?}");
        let bytes: f64 = th.iter().map(|p| p.1 * r.bin * 1e6 / 8.0).sum();
        assert!((bytes - 10_000.0).abs() < 1e-6, "{bytes}");
    }
}
