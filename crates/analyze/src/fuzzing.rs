//! Entry points for fuzzing: the same bodies run under cargo-fuzz and in `cargo test`.

/// Analyse arbitrary bytes as a capture and check a known run against it; must never
/// panic or hang, whatever the input.
pub fn pcap(data: &[u8]) {
    let opts = crate::Options {
        keep_segments: 64,
        keep_bytes: 64,
    };
    if let Ok(a) = crate::analyze_reader(data, &opts) {
        let known: Vec<u8> = data.iter().rev().take(64).copied().collect();
        let r = a.check_known(&known, 4);
        assert!(r.runs_found <= r.runs_checked);
        let _ = crate::render::summary(&a, None);
        for s in &a.shown {
            let _ = crate::render::segment_header(s);
            let _ = crate::render::text_dump(&s.payload, 64);
            let _ = crate::render::hex_dump(&s.payload);
        }
    }
    // The data level behind `nena attack`: placed bytes stay within what was captured,
    // and the attack's figures add up.
    if let Ok(d) = crate::datalevel::data_streams(data) {
        let crib: Vec<u8> = data.iter().cycle().take(80).copied().collect();
        let r = crate::attack::attack(
            &d,
            &[(1, crib)],
            crate::attack::AttackOptions { guess_zeros: true },
        );
        for (s, st) in r.streams.iter().zip(&d.streams) {
            assert!(s.bytes_recovered + s.bytes_guessed <= s.bytes_seen);
            assert_eq!(
                s.bytes_seen,
                st.runs.iter().map(|r| r.bytes.len() as u64).sum::<u64>()
            );
            assert!(st.bytes_seen <= data.len() as u64 * 2);
        }
    }
    mptcp_options(data);
}

/// `nena analyze` on arbitrary bytes as a capture: never panics, and what it reports
/// adds up (no more payload than the input holds, coverage within the span, every
/// reinjection between two of the connection's subflows), and the table renders.
pub fn trace(data: &[u8]) {
    let opts = crate::trace::TraceOptions {
        bin: Some(std::time::Duration::from_millis(100)),
        ..Default::default()
    };
    let Ok(r) = crate::trace::analyze_bytes(data, &opts) else {
        return;
    };
    let mut wire = 0u64;
    for c in &r.connections {
        assert!(!c.subflows.is_empty());
        for s in &c.subflows {
            wire += s.payload_bytes.c2s + s.payload_bytes.s2c;
            assert!(s.retransmitted_bytes.c2s <= s.payload_bytes.c2s);
            assert!(s.retransmitted_bytes.s2c <= s.payload_bytes.s2c);
            assert!(s.start <= s.end);
            for o in &s.outages {
                assert!(o.duration.is_none_or(|d| d >= 0.0));
            }
        }
        if let Some(d) = &c.data {
            for dd in [&d.c2s, &d.s2c] {
                assert!(dd.bytes_covered <= dd.span || dd.span == 0);
                for re in &dd.reinjections {
                    assert!(re.from < c.subflows.len() && re.to < c.subflows.len());
                    assert_ne!(re.from, re.to);
                }
            }
        }
        let _ = serde_json::to_string(c).expect("serialisable");
    }
    // Payload lengths on the wire may exceed what was captured (snaplen), but each
    // frame's original length is at most 2^32: bounded by the frame count.
    let frames: u64 = r.captures.iter().map(|c| c.frames).sum();
    assert!(wire <= frames * u32::MAX as u64);
}

/// MPTCP option parsers (all of them, and DSS and MP_JOIN on their own) on arbitrary
/// bytes: never panic, never report more than the bytes hold.
pub fn mptcp_options(data: &[u8]) {
    let info = crate::mptcp::parse_options(data);
    assert!(info.subtypes.len() <= data.len() / 2 + 1);
    for start in 0..data.len().min(64) {
        let opt = &data[start..];
        if let Some(d) = crate::dss::parse_dss(opt) {
            assert!(opt.len() >= 4);
            if let Some(m) = d.mapping {
                assert!(!m.dsn64 || opt.len() >= 18);
            }
        }
        let _ = crate::dss::parse_join(opt);
    }
}
