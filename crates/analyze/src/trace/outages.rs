//! Outages: a subflow direction, or an MPTCP connection direction, that sends nothing for
//! longer than its threshold (a multiple of its smoothed RTT, at least the minimum) while
//! data is outstanding; for a subflow, also the time the connection took to get the
//! stranded data through (its recovery).

use super::report::{Outage, TraceOptions};
use super::state::{dir_name, ConnState, SubState};

/// Open outages that have become visible by time `t` (silence beyond the threshold with
/// data outstanding), for the subflows of `si`'s connection and the connection itself.
///
/// A subflow direction is silent with data outstanding when its own data is not all
/// acknowledged, or (MPTCP, `conn_evidence`) when its connection has data outstanding at
/// the data level throughout: data stranded on a path that went down is often never
/// captured (dropped before the capture point), and the connection carries on elsewhere.
pub(super) fn check(
    subs: &mut [SubState],
    conns: &mut [ConnState],
    opts: &TraceOptions,
    si: usize,
    t: f64,
    conn_evidence: bool,
) {
    let members: Vec<usize> = match subs[si].conn {
        Some(ci) => conns[ci].subflows.clone(),
        None => vec![si],
    };
    for s in members {
        for d in 0..2 {
            let thr = subs[s].dirs[d].threshold(opts);
            let dir = &subs[s].dirs[d];
            let Some(last) = dir.last_data else { continue };
            if dir.outage_open.is_some() || t - last <= thr {
                continue;
            }
            let cd = subs[s].cdir(d);
            let conn_out = conn_evidence
                && subs[s].conn.is_some_and(|ci| {
                    let c = &conns[ci].dirs[cd];
                    conns[ci].mptcp
                        && c.max_end.is_some()
                        && c.all_acked.is_none_or(|a| a > last + thr)
                });
            let outstanding = dir.all_acked.is_none_or(|a| a > last + thr) || conn_out;
            if !outstanding {
                continue;
            }
            let target = dir.conn_dsn_at_last;
            let o = Outage {
                direction: dir_name(d),
                start: last,
                end: None,
                duration: None,
                threshold: thr,
                recovery: None,
            };
            subs[s].outages.push(o);
            let oi = subs[s].outages.len() - 1;
            subs[s].dirs[d].outage_open = Some(oi);
            if let (Some(ci), Some(target)) = (subs[s].conn, target) {
                let c = &mut conns[ci].dirs[cd];
                // Already covered since the outage began?
                let done = c
                    .ack_hist
                    .iter()
                    .find(|&&(at, a)| at >= last && a >= target)
                    .map(|&(at, _)| at);
                match done {
                    Some(at) => subs[s].outages[oi].recovery = Some(at - last),
                    None => c.pending.push((s, oi, target, last)),
                }
            }
        }
    }
    if let Some(ci) = subs[si].conn {
        if !conns[ci].mptcp {
            return;
        }
        let min = opts.min_outage.as_secs_f64();
        // The connection's threshold: its subflows' largest smoothed RTT.
        let srtt = conns[ci]
            .subflows
            .iter()
            .flat_map(|&s| subs[s].dirs.iter().filter_map(|d| d.srtt))
            .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x))));
        let thr = srtt.map_or(min, |s| (s * opts.outage_rtts).max(min));
        for cd in 0..2 {
            let c = &conns[ci].dirs[cd];
            let Some(last) = c.last_data else { continue };
            if c.outage_open.is_some() || t - last <= thr {
                continue;
            }
            let outstanding = match (c.data_ack, c.max_end) {
                (Some(a), Some(e)) => a < e || c.all_acked.is_some_and(|x| x > last + thr),
                _ => false,
            };
            if !outstanding {
                continue;
            }
            conns[ci].outages.push(Outage {
                direction: dir_name(cd),
                start: last,
                end: None,
                duration: None,
                threshold: thr,
                recovery: None,
            });
            let oi = conns[ci].outages.len() - 1;
            conns[ci].dirs[cd].outage_open = Some(oi);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::craft::{tcp_frame, TcpFlags};
    use crate::trace::fixtures::{addrs, pcap_at};
    use crate::trace::{analyze_bytes, TraceOptions};

    #[test]
    fn a_silence_with_everything_acked_is_no_outage() {
        let (c, s) = addrs();
        let frames = vec![
            (0.0, tcp_frame(c, s, 1, 1, TcpFlags::ACK, &[], &[1; 10])),
            (0.001, tcp_frame(s, c, 1, 11, TcpFlags::ACK, &[], &[])),
            (5.0, tcp_frame(c, s, 11, 1, TcpFlags::ACK, &[], &[1; 10])),
            (5.001, tcp_frame(s, c, 1, 21, TcpFlags::ACK, &[], &[])),
        ];
        let r = analyze_bytes(&pcap_at(&frames), &TraceOptions::default()).unwrap();
        assert!(r.connections[0].subflows[0].outages.is_empty());
        assert_eq!(r.connections[0].subflows[0].rtt.c2s.samples, 2);
    }
}
