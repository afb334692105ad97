//! Every selector and actor run with BPF_PROG_TEST_RUN on crafted frames (needs root and BPF,
//! no network): the bytes that come out, checksums included, counters and events.

use nena_bpf::chains::packet::{self, mp, Tcp, TCP_ACK, TCP_FIN, TCP_PSH, TCP_SYN};
use nena_bpf::chains::spec::{parse, ChainSpec};
use nena_bpf::{Event, Hook, TestBed};

const XDP_PASS: u32 = 2;
const TC_OK: u32 = 0;

fn verdict(h: Hook) -> u32 {
    match h {
        Hook::Ingress => XDP_PASS,
        Hook::Egress => TC_OK,
    }
}

/// A one-chain policy from its links (file syntax).
fn chain(hook: Hook, links: &str) -> ChainSpec {
    let text = format!(
        "[[chain]]\nname = \"t\"\ndev = \"lo\"\nhook = \"{}\"\nlinks = [ {links} ]\n",
        hook.name()
    );
    parse(&text)
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
        .chains
        .remove(0)
}

fn bed(hook: Hook, links: &str) -> TestBed {
    let mut b = TestBed::new().expect("loading the BPF object (root and BPF needed)");
    b.set_chain(hook, &chain(hook, links)).unwrap();
    b
}

fn run(b: &TestBed, hook: Hook, f: &[u8]) -> Vec<u8> {
    let o = b.run(hook, f, 1).unwrap();
    assert_eq!(o.ret, verdict(hook), "verdict");
    o.data
}

fn hits(b: &TestBed, hook: Hook) -> Vec<u64> {
    b.stats(hook).unwrap().iter().map(|s| s.hits).collect()
}

fn ack4() -> Tcp {
    Tcp::new("198.18.100.1", "198.18.100.2", 40000, 5201)
        .opt(&mp::ts(7, 9))
        .opt(&mp::dss(Some(77), None))
}

const HOOKS: [Hook; 2] = [Hook::Ingress, Hook::Egress];

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn no_chain_passes_untouched() {
    let mut b = TestBed::new().unwrap();
    let f = ack4().build();
    for h in HOOKS {
        b.clear_chain(h).unwrap();
        assert_eq!(run(&b, h, &f), f);
    }
    // not TCP, not IP, too short: untouched
    let mut udp = f.clone();
    udp[23] = 17;
    assert_eq!(run(&b, Hook::Ingress, &udp), udp);
    let arp = vec![0xffu8; 42];
    assert_eq!(run(&b, Hook::Egress, &arp), arp);
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn set_backup_adds_mp_prio_to_pure_acks() {
    for h in HOOKS {
        for t in [
            ack4(),
            Tcp::new("2001:db8::1", "2001:db8::2", 1, 2).opt(&mp::ts(1, 2)),
            Tcp::new("2001:db8::1", "2001:db8::2", 1, 2).ip_options(&[1, 0, 0, 0]),
            ack4().ip_options(&[1, 1, 1, 0]),
        ] {
            let b = bed(h, r#"{ act = "set_backup", backup = true, repeat = 2 }"#);
            let f = t.build();
            let out = run(&b, h, &f);
            assert_eq!(out.len(), f.len() + 4, "{h:?} {t:?}");
            assert!(packet::checksums_ok(&out), "{h:?} checksums");
            let p = packet::parse(&out).unwrap();
            assert_eq!(p.doff, packet::parse(&f).unwrap().doff + 4);
            assert_eq!(p.ip_len + 14, out.len());
            let mo = packet::mptcp_options(&out);
            assert_eq!(mo.last().unwrap(), &mp::prio(true));
            // the original options are still there, in order
            assert_eq!(
                &out[p.l4 + 20..p.l4 + p.doff - 4],
                &f[p.l4 + 20..p.l4 + p.doff - 4]
            );
            // repeat = 2: the third ACK passes as it is
            assert_eq!(run(&b, h, &f).len(), f.len() + 4);
            assert_eq!(run(&b, h, &f), f);
            assert_eq!(hits(&b, h), vec![2]);
        }
    }
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn set_backup_leaves_data_and_full_headers_alone() {
    let b = bed(Hook::Egress, r#"{ act = "set_backup", backup = false }"#);
    let data = ack4().flags(TCP_ACK | TCP_PSH).payload(b"hello").build();
    assert_eq!(run(&b, Hook::Egress, &data), data);
    // 40 option bytes already: no room
    let full = Tcp::new("198.18.100.1", "198.18.100.2", 40000, 5201)
        .opt(&mp::ts(7, 9))
        .opt(&[1; 10])
        .opt(&mp::dss(Some(1), Some((1, 1, 1))))
        .build();
    assert_eq!(packet::parse(&full).unwrap().doff, 60);
    assert_eq!(run(&b, Hook::Egress, &full), full);
    // B = 0 clears
    let out = run(&b, Hook::Egress, &ack4().build());
    assert_eq!(
        packet::mptcp_options(&out).last().unwrap(),
        &mp::prio(false)
    );
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn rate_limit_caps_window_with_scale() {
    for h in HOOKS {
        let b = bed(h, r#"{ act = "rate_limit", window = 64000 }"#);
        let t = ack4().window(5000);
        let f = t.build();
        // handshake not seen: scale unknown, untouched
        assert_eq!(run(&b, h, &f), f);
        b.set_wscale(&t.flow(), 7).unwrap();
        b.set_wscale(&t.reply().flow(), 9).unwrap();
        let out = run(&b, h, &f);
        let p = packet::parse(&out).unwrap();
        assert_eq!(
            u16::from_be_bytes([out[p.l4 + 14], out[p.l4 + 15]]),
            64000 >> 7
        );
        assert!(packet::checksums_ok(&out));
        assert_eq!(out.len(), f.len());
        // a smaller window stays
        let small = ack4().window(100).build();
        assert_eq!(run(&b, h, &small), small);
        // the peer did not offer scaling: no scaling at all (RFC 7323)
        b.set_wscale(&t.reply().flow(), 0xff).unwrap();
        let out = run(&b, h, &ack4().window(65535).build());
        let p = packet::parse(&out).unwrap();
        assert_eq!(u16::from_be_bytes([out[p.l4 + 14], out[p.l4 + 15]]), 64000);
        assert!(packet::checksums_ok(&out));
        // SYNs are never scaled: untouched
        let syn = ack4().flags(TCP_SYN).window(65535).build();
        assert_eq!(run(&b, h, &syn), syn);
    }
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn dispatcher_learns_window_scale_from_syn() {
    let b = bed(Hook::Ingress, r#"{ act = "rate_limit", window = 1000 }"#);
    let t = Tcp::new("198.18.100.2", "198.18.100.1", 5201, 40000);
    // SYN/ACK with window scale 4 arrives; ACKs of that flow are then scaled by 4
    let synack = t
        .clone()
        .flags(TCP_SYN | TCP_ACK)
        .opt(&[1, 3, 3, 4])
        .build();
    run(&b, Hook::Ingress, &synack);
    let out = run(&b, Hook::Ingress, &t.clone().window(1000).build());
    let p = packet::parse(&out).unwrap();
    assert_eq!(
        u16::from_be_bytes([out[p.l4 + 14], out[p.l4 + 15]]),
        (1000 + 8) >> 4, // the nearest unit of 16 bytes
    );
    assert!(packet::checksums_ok(&out));
}

/// A pure ACK with a DSS data ACK and an option.
fn add_addr_ack(opt: &[u8]) -> Tcp {
    Tcp::new("198.18.100.2", "198.18.100.1", 5201, 40000)
        .opt(&mp::ts(5, 6))
        .opt(&mp::dss(Some(1), None))
        .opt(opt)
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn blk_subflow_nops_add_addr_and_keeps_it() {
    for h in HOOKS {
        let b = bed(h, r#"{ act = "blk_subflow" }"#);
        let aa = mp::add_addr_v4(2, [198, 18, 101, 2], None, Some(0x1122334455667788));
        let t = add_addr_ack(&aa);
        let f = t.build();
        let out = run(&b, h, &f);
        assert_eq!(out.len(), f.len());
        assert!(packet::checksums_ok(&out), "{h:?}");
        assert_eq!(
            packet::mptcp_options(&out),
            vec![mp::dss(Some(1), None)],
            "ADD_ADDR removed"
        );
        let p = packet::parse(&out).unwrap();
        let opts = &out[p.l4 + 20..p.l4 + p.doff];
        assert_eq!(
            &opts[20..20 + aa.len()],
            &vec![1u8; aa.len()][..],
            "NOPs in its place"
        );
        let k = b.kept(&t.flow()).unwrap().expect("kept");
        assert_eq!(k.slot[0].len as usize, aa.len());
        assert_eq!(&k.slot[0].opt[..aa.len()], &aa[..]);
        assert_eq!(k.slot[0].blocked, 1);
        // retransmission: blocked again, same slot
        run(&b, h, &f);
        let k = b.kept(&t.flow()).unwrap().unwrap();
        assert_eq!((k.slot[0].blocked, k.slot[1].len), (2, 0));
        // the echo (E = 1, no HMAC) announces nothing: passes
        let echo = add_addr_ack(&mp::add_addr_v4(2, [198, 18, 101, 2], None, None)).build();
        assert_eq!(run(&b, h, &echo), echo);
        // at an odd offset (after one NOP): every byte's position is accounted for
        let odd = add_addr_ack(&[1])
            .opt(&mp::add_addr_v4(5, [198, 18, 103, 2], Some(81), Some(3)))
            .build();
        let out = run(&b, h, &odd);
        assert!(packet::checksums_ok(&out), "odd offset {h:?}");
        assert_eq!(packet::mptcp_options(&out).len(), 1);
        // with a port, and IPv6
        let ap = add_addr_ack(&mp::add_addr_v4(3, [198, 18, 102, 2], Some(80), Some(1))).build();
        let out = run(&b, h, &ap);
        assert_eq!(packet::mptcp_options(&out).len(), 1, "only the DSS left");
        assert!(packet::checksums_ok(&out));
        let v6 = Tcp::new("2001:db8::2", "2001:db8::1", 1, 2)
            .opt(&mp::dss(Some(1), None))
            .opt(&mp::add_addr_v6(
                4,
                [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9],
                7,
            ))
            .build();
        let out = run(&b, h, &v6);
        assert_eq!(
            packet::mptcp_options(&out),
            vec![mp::dss(Some(1), None)],
            "v6 {h:?}"
        );
        assert!(packet::checksums_ok(&out));
        // a bare ACK that carries only the announcement (as Linux sends it) is dropped: with
        // NOPs it would carry no MPTCP option and make a new peer fall back to TCP
        let bare = Tcp::new("198.18.100.2", "198.18.100.1", 5201, 40000)
            .opt(&mp::ts(1, 2))
            .opt(&aa)
            .build();
        let o = b.run(h, &bare, 1).unwrap();
        assert_eq!(o.ret, if h == Hook::Ingress { 1 } else { 2 }, "dropped");
        assert_eq!(b.kept(&t.flow()).unwrap().unwrap().slot[0].blocked, 3);
    }
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn add_subflow_reannounces_the_kept_add_addr() {
    for h in HOOKS {
        let mut b = bed(h, r#"{ act = "blk_subflow" }"#);
        let aa = mp::add_addr_v4(2, [198, 18, 101, 2], Some(8080), Some(0x0102030405060708));
        let t = add_addr_ack(&aa);
        run(&b, h, &t.build());
        // swap the chain: now re-announce
        b.set_chain(h, &chain(h, r#"{ act = "add_subflow" }"#))
            .unwrap();
        let plain = Tcp::new("198.18.100.2", "198.18.100.1", 5201, 40000)
            .opt(&mp::ts(8, 9))
            .build();
        let out = run(&b, h, &plain);
        assert_eq!(out.len(), plain.len() + 20, "18 bytes + 2 NOPs");
        assert!(packet::checksums_ok(&out), "{h:?}");
        assert_eq!(packet::mptcp_options(&out), vec![aa.clone()]);
        // other flows get nothing
        let other = Tcp::new("198.18.100.2", "198.18.100.1", 5201, 40001).build();
        assert_eq!(run(&b, h, &other), other);
        // at most 3 re-announcements
        run(&b, h, &plain);
        run(&b, h, &plain);
        assert_eq!(run(&b, h, &plain), plain);
        assert_eq!(b.kept(&t.flow()).unwrap().unwrap().slot[0].reannounced, 3);
    }
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn get_connect_reports_keys_and_tokens() {
    let b = bed(Hook::Ingress, r#"{ act = "get_connect" }"#);
    let t = Tcp::new("198.18.100.2", "198.18.100.1", 5201, 40000);
    // v1 SYN carries no key
    run(
        &b,
        Hook::Ingress,
        &t.clone().flags(TCP_SYN).opt(&mp::capable(&[])).build(),
    );
    run(
        &b,
        Hook::Ingress,
        &t.clone()
            .flags(TCP_SYN | TCP_ACK)
            .opt(&mp::capable(&[0xaaaa_bbbb_cccc_dddd]))
            .build(),
    );
    run(
        &b,
        Hook::Ingress,
        &t.clone().opt(&mp::capable(&[1, 2])).build(),
    );
    let ev = b.drain_events().unwrap();
    assert_eq!(ev.len(), 3, "{ev:?}");
    match &ev[0] {
        Event::Connect {
            stage,
            sender,
            receiver,
            version,
            ..
        } => {
            assert_eq!(
                (*stage, *version),
                (nena_bpf::chains::events::Stage::Syn, 1)
            );
            assert!(sender.is_none() && receiver.is_none());
        }
        e => panic!("{e:?}"),
    }
    match &ev[1] {
        Event::Connect {
            stage,
            sender: Some(k),
            ..
        } => {
            assert_eq!(*stage, "synack");
            assert_eq!(k.key, "aaaabbbbccccdddd");
            let (tok, idsn) = nena_bpf::chains::events::token_idsn(0xaaaa_bbbb_cccc_dddd);
            assert_eq!(k.token, format!("{tok:08x}"));
            assert_eq!(k.idsn, idsn);
        }
        e => panic!("{e:?}"),
    }
    match &ev[2] {
        Event::Connect {
            stage,
            sender: Some(a),
            receiver: Some(r),
            src,
            ..
        } => {
            assert_eq!(*stage, "ack");
            assert_eq!(
                (a.key.as_str(), r.key.as_str()),
                ("0000000000000001", "0000000000000002")
            );
            assert_eq!(src.to_string(), "198.18.100.2:5201");
        }
        e => panic!("{e:?}"),
    }
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn get_subflow_reports_join() {
    let b = bed(Hook::Egress, r#"{ act = "get_subflow" }"#);
    let t = Tcp::new("198.18.101.1", "198.18.100.2", 40001, 5201);
    run(
        &b,
        Hook::Egress,
        &t.clone()
            .flags(TCP_SYN)
            .opt(&mp::join_syn(true, 3, 0xdeadbeef, 0x01020304))
            .build(),
    );
    let ev = b.drain_events().unwrap();
    match &ev[..] {
        [Event::Subflow {
            stage,
            backup,
            addr_id,
            token,
            nonce,
            ..
        }] => {
            assert_eq!(
                (*stage, *backup, *addr_id),
                (nena_bpf::chains::events::Stage::Syn, true, 3)
            );
            assert_eq!(token.as_deref(), Some("deadbeef"));
            assert_eq!(nonce.as_deref(), Some("01020304"));
        }
        e => panic!("{e:?}"),
    }
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn record_counts_and_measures_rtt() {
    let mut b = TestBed::new().unwrap();
    b.set_chain(Hook::Egress, &chain(Hook::Egress, r#"{ act = "record" }"#))
        .unwrap();
    b.set_chain(
        Hook::Ingress,
        &chain(Hook::Ingress, r#"{ act = "record" }"#),
    )
    .unwrap();
    let out = Tcp::new("198.18.100.1", "198.18.100.2", 40000, 5201)
        .opt(&mp::ts(1000, 1))
        .payload(&[0; 100]);
    run(
        &b,
        Hook::Egress,
        &out.clone().flags(TCP_ACK | TCP_PSH).build(),
    );
    // sleep: the round trip the metrics must measure
    std::thread::sleep(std::time::Duration::from_millis(3));
    let back = out.reply().opt(&mp::ts(50, 1000));
    run(&b, Hook::Ingress, &back.build());
    let m = b.metrics(&out.flow()).unwrap().unwrap();
    assert_eq!((m.pkts, m.payload), (1, 100));
    assert!(
        m.rtt_us >= 3000 && m.rtt_us < 1_000_000,
        "rtt {} us",
        m.rtt_us
    );
    assert_eq!(m.samples, 1);
    run(
        &b,
        Hook::Egress,
        &out.clone()
            .flags(TCP_ACK | TCP_FIN)
            .payload(&[1; 10])
            .build(),
    );
    let ev = b.drain_events().unwrap();
    match &ev[..] {
        [Event::Record {
            packets,
            flow_size,
            end,
            rtt_us,
            ..
        }] => {
            assert_eq!(
                (*packets, *flow_size, *end),
                (2, 110, nena_bpf::chains::events::End::Fin)
            );
            assert!(*rtt_us >= 3000);
        }
        e => panic!("{e:?}"),
    }
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn selectors_match_what_they_should() {
    let t = ack4();
    let f = t.build();
    let cases: &[(&str, bool)] = &[
        (
            r#"{ select = "subflow", src = "198.18.100.1", dst = "198.18.100.2", sport = 40000, dport = 5201 }"#,
            true,
        ),
        (
            r#"{ select = "subflow", src = "198.18.100.2", dst = "198.18.100.1", sport = 5201 }"#,
            true,
        ),
        (
            r#"{ select = "subflow", src = "198.18.100.1", dst = "198.18.100.2", dport = 80 }"#,
            false,
        ),
        (
            r#"{ select = "ip_pair", src = "198.18.100.1", dst = "198.18.100.2" }"#,
            true,
        ),
        (
            r#"{ select = "ip_pair", src = "198.18.100.2", dst = "198.18.100.1" }"#,
            false,
        ),
        (r#"{ select = "src", prefix = "198.18.100.0/24" }"#, true),
        (r#"{ select = "src", prefix = "198.18.101.0/24" }"#, false),
        (r#"{ select = "dst", prefix = "198.18.100.2" }"#, true),
        (r#"{ select = "dst", prefix = "198.16.0.0/15" }"#, false),
        (r#"{ select = "dst", prefix = "198.18.0.0/15" }"#, true),
        (r#"{ select = "dst", prefix = "2001:db8::/32" }"#, false),
        (
            r#"{ select = "sequence", what = "data_ack", from = 50, to = 100 }"#,
            true,
        ),
        (
            r#"{ select = "sequence", what = "data_ack", from = 78, to = 100 }"#,
            false,
        ),
        (
            r#"{ select = "sequence", what = "data_seq", from = 0, to = 100 }"#,
            false,
        ),
        (
            r#"{ select = "sequence", what = "subflow_seq", from = 1000, to = 1000 }"#,
            true,
        ),
        (
            r#"{ select = "sequence", what = "subflow_ack", from = 4294967000, to = 1999 }"#,
            false,
        ),
        (
            r#"{ select = "sequence", what = "subflow_ack", from = 4294967000, to = 2000 }"#,
            true,
        ),
        (
            r#"{ select = "packet_type", all = ["dss", "data_ack", "pure_ack"] }"#,
            true,
        ),
        (
            r#"{ select = "packet_type", any = ["mp_join", "mp_capable"] }"#,
            false,
        ),
        (r#"{ select = "packet_type", none = ["syn"] }"#, true),
        (
            r#"{ select = "packet_type", all = ["dss"], none = ["data_ack"] }"#,
            false,
        ),
    ];
    let mut beds = [TestBed::new().unwrap(), TestBed::new().unwrap()];
    for (sel, want) in cases {
        for (h, b) in HOOKS.into_iter().zip(beds.iter_mut()) {
            b.set_chain(h, &chain(h, &format!("{sel}, {{ act = \"record\" }}")))
                .unwrap();
            assert_eq!(run(b, h, &f), f);
            assert_eq!(hits(b, h), vec![*want as u64, *want as u64], "{sel} {h:?}");
        }
    }
    // IPv6 with an extension header
    let v6 = Tcp::new("2001:db8::1", "2001:db8::2", 1, 2)
        .ip_options(&[1, 0])
        .opt(&mp::dss(None, Some((5, 1, 10))))
        .payload(&[0; 10]);
    for (sel, want) in [
        (r#"{ select = "src", prefix = "2001:db8::/64" }"#, true),
        (r#"{ select = "dst", prefix = "2001:db8::1" }"#, false),
        (
            r#"{ select = "subflow", src = "2001:db8::2", dst = "2001:db8::1", sport = 2, dport = 1 }"#,
            true,
        ),
        (
            r#"{ select = "sequence", what = "data_seq", from = 5, to = 5 }"#,
            true,
        ),
        (
            r#"{ select = "packet_type", all = ["ipv6", "ip_options", "dss_map", "data"] }"#,
            true,
        ),
    ] {
        let b = &mut beds[0];
        b.set_chain(
            Hook::Ingress,
            &chain(Hook::Ingress, &format!("{sel}, {{ act = \"record\" }}")),
        )
        .unwrap();
        run(b, Hook::Ingress, &v6.build());
        assert_eq!(hits(b, Hook::Ingress)[0], want as u64, "{sel}");
    }
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn and_or_not_and_rules() {
    let f = ack4().build();
    let yes = r#"{ select = "src", prefix = "198.18.100.1" }"#;
    let no = r#"{ select = "src", prefix = "198.18.100.9" }"#;
    let or = |s: &str| s.replace(" }", ", op = \"or\" }");
    let not = |s: &str| s.replace(" }", ", not = true }");
    let act = r#"{ act = "record" }"#;
    // (links, did the actor act)
    let cases = [
        (format!("{yes}, {yes}, {act}"), true),
        (format!("{yes}, {no}, {act}"), false),
        (format!("{no}, {}, {act}", or(yes)), true),
        (format!("{no}, {}, {act}", or(no)), false),
        (format!("{}, {act}", not(no)), true),
        (format!("{yes}, {no}, {}, {act}", or(yes)), true),
        // a second rule starts afresh after an actor
        (format!("{no}, {act}, {yes}, {act}"), true),
    ];
    let mut b = TestBed::new().unwrap();
    for (links, acted) in cases {
        b.set_chain(Hook::Egress, &chain(Hook::Egress, &links))
            .unwrap();
        run(&b, Hook::Egress, &f);
        let h = hits(&b, Hook::Egress);
        assert_eq!(*h.last().unwrap() == 1, acted, "{links}: {h:?}");
    }
    // short circuit: after a false AND, the next AND selector does not even run
    b.set_chain(
        Hook::Egress,
        &chain(Hook::Egress, &format!("{no}, {yes}, {act}")),
    )
    .unwrap();
    run(&b, Hook::Egress, &f);
    let runs: Vec<u64> = b
        .stats(Hook::Egress)
        .unwrap()
        .iter()
        .map(|s| s.runs)
        .collect();
    assert_eq!(runs, vec![1, 0, 0]);
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn malformed_packets_pass_untouched() {
    for h in HOOKS {
        let b = bed(
            h,
            r#"{ act = "blk_subflow" }, { act = "set_backup" }, { act = "rate_limit", window = 1 }, { act = "record" }"#,
        );
        let aa = mp::add_addr_v4(2, [198, 18, 101, 2], None, Some(1));
        // a lying option length: the ADD_ADDR claims more bytes than the header has
        let mut lying = add_addr_ack(&aa).build();
        let p = packet::parse(&lying).unwrap();
        lying[p.l4 + 20 + 20 + 1] = 40;
        let n = lying.len();
        // keep the checksum right so that only the length lies
        let c = packet::tcp_checksum(&lying, p.l4).unwrap();
        lying[p.l4 + 16..p.l4 + 18].copy_from_slice(&c.to_be_bytes());
        assert_eq!(run(&b, h, &lying), lying, "{h:?} lying length");
        // truncated: the data offset points past the end of the frame
        let mut trunc = ack4().build();
        trunc.truncate(n.min(trunc.len()) - 6);
        assert_eq!(run(&b, h, &trunc), trunc);
        // a data offset under 5 words
        let mut small = ack4().build();
        let p = packet::parse(&small).unwrap();
        small[p.l4 + 12] = 0x30;
        assert_eq!(run(&b, h, &small), small);
        // an option of length 1 (illegal) in the middle
        let bad = ack4().opt(&[30, 1, 0, 0]).build();
        assert_eq!(run(&b, h, &bad), bad);
        // IP total length shorter than the TCP header
        let mut short = ack4().build();
        short[16] = 0;
        short[17] = 30;
        assert_eq!(run(&b, h, &short), short);
    }
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn chain_swap_at_run_time() {
    let mut b = bed(
        Hook::Egress,
        r#"{ act = "set_backup", backup = true, repeat = 100 }"#,
    );
    let f = ack4().build();
    assert_eq!(
        packet::mptcp_options(&run(&b, Hook::Egress, &f))
            .last()
            .unwrap(),
        &mp::prio(true)
    );
    b.set_chain(
        Hook::Egress,
        &chain(Hook::Egress, r#"{ act = "set_backup", backup = false }"#),
    )
    .unwrap();
    assert_eq!(
        packet::mptcp_options(&run(&b, Hook::Egress, &f))
            .last()
            .unwrap(),
        &mp::prio(false)
    );
    b.clear_chain(Hook::Egress).unwrap();
    assert_eq!(run(&b, Hook::Egress, &f), f);
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn set_backup_sets_the_b_flag_of_mp_join() {
    for h in HOOKS {
        let b = bed(h, r#"{ act = "set_backup", backup = true }"#);
        let t = Tcp::new("198.18.101.1", "198.18.100.2", 40001, 5201)
            .flags(TCP_SYN)
            .opt(&mp::join_syn(false, 2, 0xabcdef01, 7));
        let f = t.build();
        let out = run(&b, h, &f);
        assert_eq!(out.len(), f.len());
        let p = packet::parse(&out).unwrap();
        assert!(
            packet::checksums_ok(&out),
            "{h:?} {:02x?} want {:04x}",
            &out[p.l4..],
            packet::tcp_checksum(&out, p.l4).unwrap()
        );
        // already set: untouched
        assert_eq!(run(&b, h, &out), out);
        // SYN/ACK (length 16) too
        let mut sa = vec![30, 16, 0x10, 2];
        sa.extend_from_slice(&[9; 12]);
        let f = t.clone().flags(TCP_SYN | TCP_ACK).opt(&[]).build();
        let f2 = Tcp::new("198.18.100.2", "198.18.101.1", 5201, 40001)
            .flags(TCP_SYN | TCP_ACK)
            .opt(&sa)
            .build();
        let out = run(&b, h, &f2);
        assert!(packet::checksums_ok(&out));
        assert_eq!(packet::mptcp_options(&out)[0][2], 0x11);
        let _ = f;
    }
    // and clears it
    let b = bed(Hook::Egress, r#"{ act = "set_backup", backup = false }"#);
    let f = Tcp::new("198.18.101.1", "198.18.100.2", 1, 2)
        .flags(TCP_SYN)
        .opt(&mp::join_syn(true, 2, 1, 7))
        .build();
    let out = run(&b, Hook::Egress, &f);
    assert_eq!(
        packet::mptcp_options(&out),
        vec![mp::join_syn(false, 2, 1, 7)]
    );
    assert!(packet::checksums_ok(&out));
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn window_scale_settled_by_the_handshake() {
    let b = bed(Hook::Ingress, r#"{ act = "rate_limit", window = 100000 }"#);
    let syn = Tcp::new("198.18.100.1", "198.18.100.2", 40000, 5201);
    let back = syn.reply();
    // SYN offers 7, SYN/ACK offers 3: the SYN/ACK sender's windows are scaled by 3
    run(
        &b,
        Hook::Ingress,
        &syn.clone().flags(TCP_SYN).opt(&[1, 3, 3, 7]).build(),
    );
    run(
        &b,
        Hook::Ingress,
        &back
            .clone()
            .flags(TCP_SYN | TCP_ACK)
            .opt(&[1, 3, 3, 3])
            .build(),
    );
    let out = run(&b, Hook::Ingress, &back.clone().window(60000).build());
    let p = packet::parse(&out).unwrap();
    assert_eq!(
        u16::from_be_bytes([out[p.l4 + 14], out[p.l4 + 15]]),
        (100000 >> 3) as u16
    );
    let out = run(&b, Hook::Ingress, &syn.clone().window(60000).build());
    assert_eq!(
        u16::from_be_bytes([out[p.l4 + 14], out[p.l4 + 15]]),
        (100000 >> 7) as u16
    );
    assert!(packet::checksums_ok(&out));
    // a SYN/ACK without the option: no scaling either way
    let syn2 = Tcp::new("198.18.100.1", "198.18.100.2", 40002, 5201);
    run(
        &b,
        Hook::Ingress,
        &syn2.clone().flags(TCP_SYN).opt(&[1, 3, 3, 7]).build(),
    );
    run(
        &b,
        Hook::Ingress,
        &syn2.reply().flags(TCP_SYN | TCP_ACK).build(),
    );
    let out = run(&b, Hook::Ingress, &syn2.clone().window(65535).build());
    assert_eq!(
        u16::from_be_bytes([out[p.l4 + 14], out[p.l4 + 15]]),
        65535,
        "100000 unscaled does not fit: untouched"
    );
    let out = run(&b, Hook::Ingress, &syn2.reply().window(65535).build());
    assert_eq!(out, syn2.reply().window(65535).build());
}

/// An actor with nothing to do for a packet's type is not even tail-called (chain.h,
/// actor_wants): the chain goes on past it, and `show` still counts it as run, without a hit.
/// The same chain on a packet the actor wants reaches it and it acts.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn actors_skipped_for_packets_they_ignore_still_count_and_the_chain_goes_on() {
    let links = r#"{ select = "src", prefix = "198.18.100.1" }, { act = "get_connect" }, { act = "get_subflow" }, { act = "blk_subflow" }, { act = "record" }"#;
    for h in HOOKS {
        let b = bed(h, links);
        // a DSS data ACK: none of get_connect, get_subflow, blk_subflow acts on it
        let f = ack4().build();
        assert_eq!(run(&b, h, &f), f);
        let st = b.stats(h).unwrap();
        let runs: Vec<u64> = st.iter().map(|s| s.runs).collect();
        assert_eq!(runs, vec![1, 1, 1, 1, 1], "{h:?}");
        assert_eq!(hits(&b, h), vec![1, 0, 0, 0, 1], "{h:?}");
        // an MP_CAPABLE SYN: get_connect reports it, record too
        let syn = Tcp::new("198.18.100.1", "198.18.100.2", 40001, 5201)
            .flags(packet::TCP_SYN)
            .opt(&mp::capable(&[0x0102030405060708]))
            .build();
        run(&b, h, &syn);
        assert_eq!(hits(&b, h), vec![2, 1, 0, 0, 2], "{h:?}");
    }
}

/// Per-flow state lives in one map per family (12-byte keys for IPv4, 40-byte for IPv6): an
/// IPv4 and an IPv6 flow with the same ports never share it, and both are read back.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn per_flow_state_is_kept_apart_by_family() {
    for h in HOOKS {
        let b = bed(
            h,
            r#"{ act = "rate_limit", window = 1000 }, { act = "record" }"#,
        );
        let t4 = Tcp::new("198.18.100.2", "198.18.100.1", 5201, 40000);
        let t6 = Tcp::new("2001:db8::2", "2001:db8::1", 5201, 40000);
        // the IPv6 flow's handshake offers scale 4; the IPv4 flow's is never seen
        let synack = t6
            .clone()
            .flags(TCP_SYN | TCP_ACK)
            .opt(&[1, 3, 3, 4])
            .build();
        run(&b, h, &synack);
        let out6 = run(&b, h, &t6.clone().window(1000).build());
        let p = packet::parse(&out6).unwrap();
        assert_eq!(
            u16::from_be_bytes([out6[p.l4 + 14], out6[p.l4 + 15]]),
            (1000 + 8) >> 4,
            "{h:?}"
        );
        assert!(packet::checksums_ok(&out6));
        let f4 = t4.clone().window(1000).build();
        assert_eq!(run(&b, h, &f4), f4, "{h:?}: scale unknown for IPv4");
        let m6 = b.metrics(&t6.flow()).unwrap().expect("IPv6 metrics");
        let m4 = b.metrics(&t4.flow()).unwrap().expect("IPv4 metrics");
        assert_eq!((m6.pkts, m4.pkts), (2, 1), "{h:?}");
    }
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn drop_drops_at_both_hooks_but_not_a_malformed_packet() {
    for h in HOOKS {
        let b = bed(h, r#"{ act = "drop" }"#);
        let o = b.run(h, &ack4().build(), 1).unwrap();
        // XDP_DROP = 1, TC_ACT_SHOT = 2
        assert_eq!(o.ret, if h == Hook::Ingress { 1 } else { 2 }, "{h:?}");
        assert_eq!(hits(&b, h), [1]);
        // options whose length lies: passed untouched, as by every actor
        let mut bad = ack4().build();
        let l4 = 14 + 20;
        bad[l4 + 20 + 3] = 60; // the timestamps option (after two NOPs) claims 60 bytes
        assert_eq!(run(&b, h, &bad), bad);
        assert_eq!(hits(&b, h), [1]);
    }
}
