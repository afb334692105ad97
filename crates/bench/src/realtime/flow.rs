//! The call-like flow of `nena bench realtime` and its echo: datagrams of a fixed size at a
//! fixed rate, each stamped with its flow, its sequence number and its send time (the
//! sender's own clock, so the sender alone measures the round trip), echoed back verbatim by
//! a host behind the proxy server; and what the sender's record says (percentiles with a
//! lost datagram counted as never back, lost, late, the longest stretch without an echo in
//! time). Before the flow a setup datagram goes there and back (a call's signalling before
//! its media): a nena session is open before the measured flow begins, and its opening is
//! reported apart (`setup_ms`), not in the percentiles. The sender runs as a thread of the bench inside a lab host, or as the hidden
//! `nena bench realtime-flow` under `nena run` (the same code: [`run_flow`]).

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bytes of a datagram's stamp: flow (u32), sequence number (u32), send time (u64, ns since
/// the flow's start), all big-endian; the rest of the datagram is filler checked on return.
pub const STAMP: usize = 16;
/// A datagram back later than this after its sending is late.
pub const LATE: Duration = Duration::from_secs(1);
/// IPv4 and UDP headers: what a datagram weighs on the wire beyond its payload.
pub const IP_UDP_HEADERS: u64 = 20 + 8;

/// One flow to send.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FlowSpec {
    /// The flow's number, in every datagram (the echo counts per flow).
    pub flow: u32,
    /// The echo.
    pub to: SocketAddr,
    /// The local address to bind (None: any, as an application does).
    pub bind: Option<SocketAddr>,
    /// Datagrams a second.
    pub rate: u32,
    /// Bytes of each datagram (at least [`STAMP`]).
    pub size: usize,
    /// Datagrams in all.
    pub count: u32,
    /// How long to wait for echoes after the last datagram left.
    pub drain: Duration,
}

impl FlowSpec {
    /// The time between two datagrams.
    pub fn period(&self) -> Duration {
        Duration::from_secs_f64(1.0 / f64::from(self.rate.max(1)))
    }
}

/// What the sender saw, datagram by datagram.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FlowRecord {
    pub flow: u32,
    /// Datagrams whose sending was tried (every one of the flow's unless it was cut short).
    pub sent: u32,
    /// Sends the socket refused (a link down under a bound socket): never back.
    pub send_errors: u32,
    /// Per sequence number, its send time (us since the flow's start) and its round trip
    /// (us), None when it never came back within the drain.
    pub sent_at_us: Vec<u64>,
    pub rtt_us: Vec<Option<u64>>,
    /// Copies of a datagram already back (a redundant plane's second copies, if any leak).
    pub duplicates: u32,
    /// Datagrams back that are not this flow's, from elsewhere, or altered.
    pub foreign: u32,
    /// How late the sender's wake-up came for its datagram, at most (us): the host's
    /// scheduling, not the path's (the send time stamped is the actual one).
    pub send_late_max_us: u64,
    /// The setup exchange's time (us): from its first datagram to its first echo, the
    /// opening of a nena session included.
    pub setup_us: u64,
}

/// The flow number of a flow's setup datagrams: the flow's with the top bit set (the echo
/// counts them apart, the receiver ignores late copies).
pub fn setup_flow(flow: u32) -> u32 {
    flow | 0x8000_0000
}

/// How often a setup datagram is sent again while no echo came, and for how long.
const SETUP_RETRY: Duration = Duration::from_millis(500);
const SETUP_WITHIN: Duration = Duration::from_secs(15);

/// The setup exchange: a datagram of the flow's size (flow [`setup_flow`]) sent every
/// [`SETUP_RETRY`] until one comes back, as a call's signalling precedes its media: the
/// path (a nena session through the gateway or `nena run`) is up before the measured flow.
fn setup(sock: &UdpSocket, spec: &FlowSpec) -> Result<Duration> {
    let start = Instant::now();
    let id = setup_flow(spec.flow);
    let mut buf = vec![0u8; 65536];
    let mut next = Duration::ZERO;
    let mut seq = 0u32;
    while start.elapsed() < SETUP_WITHIN {
        if start.elapsed() >= next {
            let ns = start.elapsed().as_nanos() as u64;
            // A refused send (the link not up yet) is tried again at the next retry.
            let _ = sock.send_to(&datagram(id, seq, ns, spec.size), spec.to);
            seq += 1;
            next += SETUP_RETRY;
        }
        // The socket's read timeout (20 ms) paces this loop.
        if let Ok((n, from)) = sock.recv_from(&mut buf) {
            if from == spec.to && parse(&buf[..n], spec.size).is_some_and(|(f, ..)| f == id) {
                return Ok(start.elapsed());
            }
        }
    }
    bail!(
        "no echo of the setup datagram from {} within {SETUP_WITHIN:?}",
        spec.to
    )
}

/// The filler byte at offset `i` of datagram `seq` of flow `flow`.
fn filler(flow: u32, seq: u32, i: usize) -> u8 {
    (flow.wrapping_mul(31) ^ seq.wrapping_mul(2654435761) ^ (i as u32).wrapping_mul(97)) as u8
}

/// Datagram `seq` of `flow`, `size` bytes, stamped with `sent_ns`.
pub fn datagram(flow: u32, seq: u32, sent_ns: u64, size: usize) -> Vec<u8> {
    let mut d = Vec::with_capacity(size.max(STAMP));
    d.extend_from_slice(&flow.to_be_bytes());
    d.extend_from_slice(&seq.to_be_bytes());
    d.extend_from_slice(&sent_ns.to_be_bytes());
    d.extend((STAMP..size).map(|i| filler(flow, seq, i)));
    d
}

/// A datagram's flow, sequence number and send time, if it is whole (its filler intact,
/// `size` bytes).
pub fn parse(d: &[u8], size: usize) -> Option<(u32, u32, u64)> {
    if d.len() != size || d.len() < STAMP {
        return None;
    }
    let flow = u32::from_be_bytes(d[0..4].try_into().ok()?);
    let seq = u32::from_be_bytes(d[4..8].try_into().ok()?);
    let sent = u64::from_be_bytes(d[8..16].try_into().ok()?);
    d[STAMP..]
        .iter()
        .enumerate()
        .all(|(i, &b)| b == filler(flow, seq, STAMP + i))
        .then_some((flow, seq, sent))
}

/// Send the flow `spec` from a socket bound here (call it on a thread inside the sender's
/// host): the socket is bound and the setup exchange done ([`setup`]: the path is up),
/// then `ready()` is called, then `go()` waited for (false: do not send, an error). Each datagram is sent at its time (start + seq x period), stamped
/// with the time just before its sending; echoes are read by a second thread until every
/// datagram is back or [`FlowSpec::drain`] has passed since the last was sent.
pub fn run_flow(
    spec: &FlowSpec,
    ready: impl FnOnce(),
    go: impl FnOnce() -> bool,
) -> Result<FlowRecord> {
    if spec.size < STAMP {
        bail!(
            "a datagram of {} bytes has no room for its stamp",
            spec.size
        );
    }
    let bind = spec.bind.unwrap_or_else(|| match spec.to {
        SocketAddr::V4(_) => "0.0.0.0:0".parse().expect("an address"),
        SocketAddr::V6(_) => "[::]:0".parse().expect("an address"),
    });
    // The instrument at real-time priority, as the lab's relay is: on a loaded host a
    // thread woken at normal priority waits for a CPU, which would add to every round trip
    // of every subject alike; nena's own processes run as they are.
    nena_lab::emulate::realtime();
    let sock = UdpSocket::bind(bind).with_context(|| format!("binding {bind}"))?;
    sock.set_read_timeout(Some(Duration::from_millis(20)))?;
    let rx = sock.try_clone()?;
    let setup = setup(&sock, spec)?;
    ready();
    if !go() {
        bail!("the flow was called off before it started");
    }
    let start = Instant::now();
    let count = spec.count as usize;
    // The drain's end, in ns since the start; u64::MAX while datagrams are still to go.
    let until = Arc::new(AtomicU64::new(u64::MAX));
    let receiver = {
        let (until, to, size, flow) = (until.clone(), spec.to, spec.size, spec.flow);
        std::thread::spawn(move || {
            nena_lab::emulate::realtime();
            receive(&rx, start, &until, to, size, flow, count)
        })
    };
    let period = spec.period();
    let (mut sent, mut send_errors, mut late_max) = (0u32, 0u32, Duration::ZERO);
    let mut sent_at_us = vec![0u64; count];
    for seq in 0..spec.count {
        let due = period * seq;
        let now = start.elapsed();
        if let Some(wait) = due.checked_sub(now) {
            // sleep: pacing, the datagram's time has not come
            std::thread::sleep(wait);
        }
        let at = start.elapsed();
        late_max = late_max.max(at.saturating_sub(due));
        let ns = at.as_nanos() as u64;
        sent_at_us[seq as usize] = ns / 1000;
        sent += 1;
        if sock
            .send_to(&datagram(spec.flow, seq, ns, spec.size), spec.to)
            .is_err()
        {
            send_errors += 1;
        }
    }
    until.store(
        (start.elapsed() + spec.drain).as_nanos() as u64,
        Ordering::Relaxed,
    );
    let (rtt_us, duplicates, foreign) = receiver
        .join()
        .map_err(|_| anyhow::anyhow!("the flow's receiver panicked"))?;
    Ok(FlowRecord {
        flow: spec.flow,
        sent,
        send_errors,
        sent_at_us,
        rtt_us,
        duplicates,
        foreign,
        send_late_max_us: late_max.as_micros() as u64,
        setup_us: setup.as_micros() as u64,
    })
}

/// The echoes of a flow: each datagram's round trip (its first copy), duplicates, foreign.
fn receive(
    rx: &UdpSocket,
    start: Instant,
    until: &AtomicU64,
    to: SocketAddr,
    size: usize,
    flow: u32,
    count: usize,
) -> (Vec<Option<u64>>, u32, u32) {
    let mut rtt = vec![None; count];
    let (mut back, mut duplicates, mut foreign) = (0usize, 0u32, 0u32);
    let mut buf = vec![0u8; 65536];
    while back < count && (start.elapsed().as_nanos() as u64) < until.load(Ordering::Relaxed) {
        let (n, from) = match rx.recv_from(&mut buf) {
            Ok(x) => x,
            // The read timeout (to look at the drain's end), or an ICMP error of a send.
            Err(_) => continue,
        };
        let now = start.elapsed().as_nanos() as u64;
        match parse(&buf[..n], size) {
            // A setup datagram's late copy.
            Some((f, ..)) if f == setup_flow(flow) && from == to => {}
            Some((f, seq, sent)) if f == flow && from == to && (seq as usize) < count => {
                let slot = &mut rtt[seq as usize];
                if slot.is_some() {
                    duplicates += 1;
                } else {
                    *slot = Some(now.saturating_sub(sent) / 1000);
                    back += 1;
                }
            }
            _ => foreign += 1,
        }
    }
    (rtt, duplicates, foreign)
}

/// The echo behind the proxy server: every datagram sent back to where it came from, and
/// counted per flow (its first four bytes), until [`Echo::stop`].
pub struct Echo {
    stop: Arc<AtomicBool>,
    counts: Arc<Mutex<HashMap<u32, u64>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Echo {
    /// Serve `sock` on a thread of its own (bound already, in the echo's host).
    pub fn serve(sock: UdpSocket) -> Result<Echo> {
        sock.set_read_timeout(Some(Duration::from_millis(50)))?;
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new(Mutex::new(HashMap::<u32, u64>::new()));
        let thread = {
            let (stop, counts) = (stop.clone(), counts.clone());
            std::thread::spawn(move || {
                nena_lab::emulate::realtime();
                let mut buf = vec![0u8; 65536];
                while !stop.load(Ordering::Relaxed) {
                    let Ok((n, from)) = sock.recv_from(&mut buf) else {
                        continue;
                    };
                    // Counted before it is sent back, so that the count is never behind
                    // what the flow has received (a flow that has all its datagrams back
                    // reads them all counted); taken back if the send fails.
                    let flow =
                        (n >= 4).then(|| u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]));
                    let count = |delta: i64| {
                        if let Some(flow) = flow {
                            let mut counts = counts.lock().unwrap_or_else(|e| e.into_inner());
                            let c = counts.entry(flow).or_default();
                            *c = c.saturating_add_signed(delta);
                        }
                    };
                    count(1);
                    if sock.send_to(&buf[..n], from).is_err() {
                        count(-1);
                    }
                }
            })
        };
        Ok(Echo {
            stop,
            counts,
            thread: Some(thread),
        })
    }

    /// Datagrams of `flow` echoed so far.
    pub fn echoed(&self, flow: u32) -> u64 {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&flow)
            .copied()
            .unwrap_or(0)
    }

    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A flow's figures.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FlowStats {
    pub sent: u32,
    /// Datagrams the echo sent back (from its count for the flow).
    pub echoed: u64,
    /// Datagrams back within the drain (first copies).
    pub received: u32,
    /// Sent and never back.
    pub lost: u32,
    /// Back, but more than [`LATE`] after their sending.
    pub late: u32,
    pub lost_or_late: u32,
    pub lost_or_late_percent: f64,
    /// Round-trip percentiles over every datagram sent, a lost one counted as never back:
    /// None where the percentile falls on lost datagrams.
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// The longest round trip of a datagram that came back (None: none did).
    pub max_ms: Option<f64>,
    /// The longest span between the send times of the first and last of consecutive
    /// datagrams that were all lost or late (0: none was): how long the call dropped.
    pub longest_gap_ms: f64,
    pub duplicates: u32,
    pub foreign: u32,
    pub send_errors: u32,
    pub send_late_max_ms: f64,
    /// The setup exchange before the flow (its round trip, a nena session's opening
    /// included), not in the percentiles.
    pub setup_ms: f64,
}

/// The value at quantile `q` (0..=1) of `sorted` by nearest rank (None stands for a lost
/// datagram, sorted last).
fn nearest_rank(sorted: &[Option<u64>], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1].map(|us| us as f64 / 1e3)
}

impl FlowStats {
    /// The figures of `r`, with the echo's count for the flow.
    pub fn of(r: &FlowRecord, echoed: u64) -> FlowStats {
        let sent = r.sent as usize;
        let rtt = &r.rtt_us[..sent.min(r.rtt_us.len())];
        let mut sorted: Vec<Option<u64>> = rtt.to_vec();
        // Some(x) before None, ascending.
        sorted.sort_by_key(|x| (x.is_none(), *x));
        let late_us = LATE.as_micros() as u64;
        let received = rtt.iter().filter(|x| x.is_some()).count() as u32;
        let late = rtt
            .iter()
            .filter(|x| x.is_some_and(|v| v > late_us))
            .count() as u32;
        let lost = sent as u32 - received;
        let bad = |i: usize| rtt[i].is_none_or(|v| v > late_us);
        let (mut longest, mut run_start) = (0u64, None::<usize>);
        for i in 0..rtt.len() {
            match (bad(i), run_start) {
                (true, None) => run_start = Some(i),
                (false, Some(_)) => run_start = None,
                _ => {}
            }
            if let Some(s) = run_start {
                // One datagram alone is a gap of one period (its own slot).
                let span = r.sent_at_us[i] - r.sent_at_us[s] + period_us(r);
                longest = longest.max(span);
            }
        }
        FlowStats {
            sent: r.sent,
            echoed,
            received,
            lost,
            late,
            lost_or_late: lost + late,
            lost_or_late_percent: if sent == 0 {
                0.0
            } else {
                f64::from(lost + late) * 100.0 / sent as f64
            },
            p50_ms: nearest_rank(&sorted, 0.50),
            p95_ms: nearest_rank(&sorted, 0.95),
            p99_ms: nearest_rank(&sorted, 0.99),
            max_ms: rtt.iter().flatten().max().map(|&us| us as f64 / 1e3),
            longest_gap_ms: longest as f64 / 1e3,
            duplicates: r.duplicates,
            foreign: r.foreign,
            send_errors: r.send_errors,
            send_late_max_ms: r.send_late_max_us as f64 / 1e3,
            setup_ms: r.setup_us as f64 / 1e3,
        }
    }
}

/// The flow's period in us, from its send times (the median step; 0 with fewer than two).
fn period_us(r: &FlowRecord) -> u64 {
    let n = (r.sent as usize).min(r.sent_at_us.len());
    if n < 2 {
        return 0;
    }
    let mut steps: Vec<u64> = r.sent_at_us[..n]
        .windows(2)
        .map(|w| w[1].saturating_sub(w[0]))
        .collect();
    steps.sort_unstable();
    steps[steps.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_datagram_carries_its_stamp_and_an_altered_one_is_refused() {
        let d = datagram(7, 42, 123_456_789, 160);
        assert_eq!(d.len(), 160);
        assert_eq!(parse(&d, 160), Some((7, 42, 123_456_789)));
        let mut bad = d.clone();
        bad[100] ^= 1;
        assert_eq!(parse(&bad, 160), None);
        assert_eq!(parse(&d[..159], 160), None);
        // Another flow's filler under this flow's number: refused.
        let mut other = datagram(8, 42, 1, 160);
        other[..4].copy_from_slice(&7u32.to_be_bytes());
        assert_eq!(parse(&other, 160), None);
    }

    fn record(rtt_ms: &[Option<u64>]) -> FlowRecord {
        FlowRecord {
            flow: 1,
            sent: rtt_ms.len() as u32,
            send_errors: 0,
            sent_at_us: (0..rtt_ms.len() as u64).map(|i| i * 20_000).collect(),
            rtt_us: rtt_ms.iter().map(|x| x.map(|ms| ms * 1000)).collect(),
            duplicates: 0,
            foreign: 0,
            send_late_max_us: 0,
            setup_us: 0,
        }
    }

    #[test]
    fn percentiles_count_a_lost_datagram_as_never_back() {
        // 100 datagrams: 1..=98 ms, one lost, one 1500 ms late.
        let mut v: Vec<Option<u64>> = (1..=98).map(Some).collect();
        v.push(None);
        v.push(Some(1500));
        let s = FlowStats::of(&record(&v), 99);
        assert_eq!((s.sent, s.received, s.lost, s.late), (100, 99, 1, 1));
        assert_eq!(s.lost_or_late, 2);
        assert_eq!(s.p50_ms, Some(50.0));
        assert_eq!(s.p95_ms, Some(95.0));
        // The 99th of 100 is the late one, the 100th the lost one.
        assert_eq!(s.p99_ms, Some(1500.0));
        assert_eq!(s.max_ms, Some(1500.0));
        assert!((s.lost_or_late_percent - 2.0).abs() < 1e-12);
        // Two lost: the 99th percentile is lost.
        v[0] = None;
        let s = FlowStats::of(&record(&v), 98);
        assert_eq!(s.p99_ms, None);
        assert_eq!(s.p95_ms, Some(96.0));
        // Nothing back at all.
        let s = FlowStats::of(&record(&[None, None]), 0);
        assert_eq!((s.p50_ms, s.max_ms, s.received), (None, None, 0));
    }

    #[test]
    fn the_longest_gap_spans_consecutive_lost_or_late_datagrams() {
        let s = FlowStats::of(&record(&[Some(20); 10]), 10);
        assert_eq!(s.longest_gap_ms, 0.0);
        // One lost: one period. Three in a row (lost, late, lost): three periods.
        let mut v = vec![Some(20); 12];
        v[2] = None;
        v[6] = None;
        v[7] = Some(2000);
        v[8] = None;
        let s = FlowStats::of(&record(&v), 12);
        assert_eq!(s.longest_gap_ms, 60.0);
        // Up to the end.
        v[11] = None;
        v[10] = None;
        v[9] = None;
        let s = FlowStats::of(&record(&v), 12);
        assert_eq!(s.longest_gap_ms, 120.0);
    }

    #[test]
    fn a_flow_through_a_local_echo_comes_back_whole() {
        let echo_sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = echo_sock.local_addr().unwrap();
        let mut echo = Echo::serve(echo_sock).unwrap();
        let spec = FlowSpec {
            flow: 9,
            to,
            bind: None,
            rate: 200,
            size: 160,
            count: 40,
            drain: Duration::from_secs(2),
        };
        let r = run_flow(&spec, || {}, || true).unwrap();
        let s = FlowStats::of(&r, echo.echoed(9));
        assert_eq!((s.sent, s.received, s.lost, s.echoed), (40, 40, 0, 40));
        // The setup datagram came back first, counted apart.
        assert_eq!(echo.echoed(setup_flow(9)), 1);
        assert!(s.setup_ms > 0.0);
        assert_eq!((s.duplicates, s.foreign, s.send_errors), (0, 0, 0));
        assert!(s.p99_ms.is_some_and(|ms| ms < 1000.0), "{s:?}");
        // Paced: the last left about 39 periods (195 ms) after the first.
        assert!(r.sent_at_us[39] >= 190_000, "{:?}", r.sent_at_us);
        // Called off after the setup: no flow.
        let e = run_flow(&spec, || {}, || false).unwrap_err();
        assert!(format!("{e:#}").contains("called off"), "{e:#}");
        echo.stop();
    }
}
