//! The bench's verdicts and its table: each target against the figures of one run
//! (the better single link's p99 plus the margin, nothing lost or late through an outage,
//! the bulk stream's loss, the wire bytes), and the lines a person reads.

use super::*;

/// Every target of the run: per setting and nena subject, p99 against the better single
/// link, nothing lost or late through an outage, bytes on the wire; and the bulk stream's
/// loss beyond straight.
pub fn targets(settings: &[SettingResult], bulk: Option<&bulk::Bulk>) -> Vec<Target> {
    let mut v = Vec::new();
    for s in settings {
        for x in s
            .subjects
            .iter()
            .filter(|x| x.subject == GATEWAY || x.subject == RUN)
        {
            let limit = s.better_single_p99_ms.map(|p| p + P99_MARGIN_MS);
            v.push(Target {
                setting: s.name.clone(),
                subject: x.subject.clone(),
                name: format!("p99 <= better single link's p99 + {P99_MARGIN_MS} ms"),
                value: x.flow.p99_ms,
                limit,
                pass: limit.map(|l| x.flow.p99_ms.is_some_and(|p| p <= l)),
            });
            if s.outage.is_some() {
                v.push(Target {
                    setting: s.name.clone(),
                    subject: x.subject.clone(),
                    name: "lost or > 1 s late through the outage = 0".into(),
                    value: Some(f64::from(x.flow.lost_or_late)),
                    limit: Some(0.0),
                    pass: Some(x.flow.lost_or_late == 0),
                });
            }
            v.push(Target {
                setting: s.name.clone(),
                subject: x.subject.clone(),
                name: format!("bytes on the wire <= {WIRE_TARGET}x payload + IP/UDP headers"),
                value: Some(x.wire_ratio),
                limit: Some(WIRE_TARGET),
                pass: Some(x.wire_ratio <= WIRE_TARGET),
            });
        }
    }
    if let Some(b) = bulk {
        v.push(Target {
            setting: "bulk".into(),
            subject: GATEWAY.into(),
            name: format!(
                "{} Mbit/s UDP: lost through the gateway - straight < {} point",
                b.target_mbit_s,
                crate::peers::udp::LOSS_TARGET_PERCENT
            ),
            value: Some(b.beyond_percent),
            limit: Some(crate::peers::udp::LOSS_TARGET_PERCENT),
            pass: Some(b.pass),
        });
    }
    v
}

fn setting_title(r: &SettingResult, outage_s: f64) -> String {
    let mut t = format!("WLAN {}% loss each way", r.wlan_loss_percent);
    if let (Some(l), Some(d), Some(u)) = (&r.outage, r.outage_down_s, r.outage_up_s) {
        let which = if l == "untrusted" {
            "WLAN"
        } else {
            "trusted link"
        };
        t += &format!(", {which} down {outage_s} s (from {d:.2} s to {u:.2} s)");
    }
    t
}

/// The human table.
pub fn table(r: &RealtimeReport) -> String {
    let mut s = format!(
        "{} datagrams/s of {} B for {} s from each subject at once, echoed by the server \
         host; trusted {} ms ±{} one way, WLAN {} ms ±{}; round trips in ms over every \
         datagram sent (\"lost\": the percentile falls on lost ones); late > 1 s; wire = IP \
         bytes at the client's end of each link, x = over (sent + echoed) x {} B\n",
        r.rate,
        r.size,
        r.seconds,
        r.trusted_delay_ms,
        r.trusted_jitter_ms,
        r.wlan_delay_ms,
        r.wlan_jitter_ms,
        r.size as u64 + IP_UDP_HEADERS
    );
    if let Some(m) = &r.udp_redundancy {
        s += &format!("  --udp-redundancy {m}\n");
    }
    if !r.gateway_args.is_empty() || !r.run_args.is_empty() {
        s += &format!(
            "  gateway args {:?}, run args {:?}\n",
            r.gateway_args, r.run_args
        );
    }
    for st in &r.settings {
        s += &format!("\n{}: {}\n", st.name, setting_title(st, r.outage_seconds));
        s += &format!(
            "  {:<17} {:>7} {:>7} {:>7} {:>7} {:>5} {:>5} {:>7} {:>9} {:>9} {:>6} {:>7}\n",
            "subject",
            "p50",
            "p95",
            "p99",
            "max",
            "lost",
            "late",
            "gap ms",
            "trusted KB",
            "WLAN KB",
            "x",
            "setup"
        );
        for x in &st.subjects {
            let f = &x.flow;
            s += &format!(
                "  {:<17} {:>7} {:>7} {:>7} {:>7} {:>5} {:>5} {:>7.0} {:>9.1} {:>9.1} {:>6.2} {:>7.1}\n",
                x.subject,
                opt_ms(f.p50_ms),
                opt_ms(f.p95_ms),
                opt_ms(f.p99_ms),
                f.max_ms.map_or("-".to_string(), |v| format!("{v:.0}")),
                f.lost,
                f.late,
                f.longest_gap_ms,
                (x.wire.trusted_up + x.wire.trusted_down) as f64 / 1e3,
                (x.wire.wlan_up + x.wire.wlan_down) as f64 / 1e3,
                x.wire_ratio,
                f.setup_ms
            );
        }
        let others: Vec<String> = st
            .links
            .iter()
            .map(|l| format!("{} {} B", l.link, l.unattributed))
            .collect();
        let late = st
            .subjects
            .iter()
            .map(|x| x.flow.send_late_max_ms)
            .fold(0.0, f64::max);
        s += &format!(
            "  unattributed on the links: {}; senders woke up to {late:.1} ms late\n",
            others.join(", ")
        );
    }
    if let Some(b) = &r.bulk {
        s += &format!(
            "\nbulk: {} Mbit/s UDP for {} s (1400 B datagrams), WLAN without loss: lost {:.3}% \
             straight over the trusted link, {:.3}% through the gateway ({:.2} Mbit/s \
             received); gateway CPU {:.3} s for {:.3} GB = {:.2} s/GB\n",
            b.target_mbit_s,
            b.seconds,
            b.straight.lost_percent,
            b.gateway.lost_percent,
            b.gateway.received_mbit_s,
            b.gateway_cpu_s,
            b.gateway_gb,
            b.gateway_cpu_s_per_gb
        );
    }
    s += "\ntargets\n";
    for t in &r.targets {
        let verdict = match t.pass {
            Some(true) => "PASS",
            Some(false) => "FAIL",
            None => "not judged",
        };
        s += &format!(
            "  {:<15} {:<8} {:<58} {:>9} (limit {:>7})  {}\n",
            t.setting,
            t.subject,
            t.name,
            t.value.map_or("lost".to_string(), |v| format!("{v:.3}")),
            t.limit.map_or("none".to_string(), |v| format!("{v:.3}")),
            verdict
        );
    }
    s += &format!(
        "  {}; {}; {}; load {} -> {}\n",
        r.nena_version,
        r.cpu,
        r.kernel,
        r.loadavg_start.trim(),
        r.loadavg_end.trim()
    );
    s
}
