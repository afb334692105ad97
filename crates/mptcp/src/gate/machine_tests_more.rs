//! More unit tests of the gate's machine: subflows told apart by id, unknown addresses,
//! events, out-of-order use, fallback, the ACK counters, the release, and a property test
//! of random steps.

use super::*;
use crate::pm::{PmEvent, MPTCP_EVENT_SUB_CLOSED, MPTCP_EVENT_SUB_ESTABLISHED};

/// Two untrusted subflows from one local address and port (to two remote addresses);
/// the one that sent a byte of the first flight closes, the other stays: the gate must
/// see that one of the two is gone, by the kernel's ids or, before 6.5, by their count.
#[test]
fn one_of_two_subflows_from_one_address_closed_is_refused() {
    for ids in [(2, 3), (0, 0)] {
        let mut m = in_flight(PmKind::Kernel);
        let join = |id| SubflowSnapshot {
            id,
            ..sf(U, 41000, 0, 0)
        };
        let both = snap(0, vec![sf(T, 40000, 1200, 0), join(ids.0), join(ids.1)]);
        assert_eq!(
            m.poll_first_flight(LEN, &both),
            Ok(Verdict::Wait { acked: 0 })
        );
        let one = snap(1200, vec![sf(T, 40000, 1200, 0), join(ids.1)]);
        assert_eq!(
            m.poll_first_flight(LEN, &one),
            Err(Refusal::UntrustedClosed {
                local: sa(U, 41000)
            }),
            "ids {ids:?}"
        );
    }
    // With ids, one closed and another opened from the same address between two looks.
    let mut m = in_flight(PmKind::Kernel);
    let join = |id| SubflowSnapshot {
        id,
        ..sf(U, 41000, 0, 0)
    };
    let first = snap(0, vec![sf(T, 40000, 1200, 0), join(2)]);
    assert_eq!(
        m.poll_first_flight(LEN, &first),
        Ok(Verdict::Wait { acked: 0 })
    );
    let swapped = snap(1200, vec![sf(T, 40000, 1200, 0), join(3)]);
    assert_eq!(
        m.poll_first_flight(LEN, &swapped),
        Err(Refusal::UntrustedClosed {
            local: sa(U, 41000)
        })
    );
}

#[test]
fn subflow_with_unknown_address_counts_as_untrusted() {
    let mut m = in_flight(PmKind::Kernel);
    let mut s = snap(1200, vec![sf(T, 40000, 1200, 0)]);
    s.subflows.push(SubflowSnapshot {
        iface: None,
        id: 0,
        local: None,
        bytes_sent: 5,
        bytes_received: 0,
        notsent_bytes: 0,
    });
    assert_eq!(
        m.poll_first_flight(LEN, &s),
        Err(Refusal::UntrustedSent { local: None })
    );
}

#[test]
fn untrusted_subflow_that_received_the_peers_first_flight_is_refused() {
    // The peer's answer came over the untrusted subflow: invisible to the sender check,
    // refused by check_idle(received = true).
    let mut m = in_flight(PmKind::Kernel);
    let s = snap(1200, vec![sf(T, 40000, 1200, 0), sf(U, 40001, 0, 300)]);
    assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Proceed));
    assert_eq!(m.check_idle(&s, false), Ok(Verdict::Proceed));
    let r = m.check_idle(&s, true).unwrap_err();
    assert_eq!(
        r,
        Refusal::UntrustedReceived {
            local: sa(U, 40001)
        }
    );
    assert!(r
        .to_string()
        .contains("received data of the peer's first flight"));
    assert_final(&mut m, &s);
    // And check_idle's sender check, on its own.
    let mut m = in_flight(PmKind::Kernel);
    let s = snap(0, vec![sf(T, 40000, 1200, 0), sf(U, 40001, 7, 0)]);
    assert_eq!(
        m.check_idle(&s, false),
        Err(Refusal::UntrustedSent {
            local: sa(U, 40001)
        })
    );
}

#[test]
fn untrusted_subflow_gone_from_a_later_snapshot_is_refused_without_events() {
    let mut m = in_flight(PmKind::Kernel);
    let with = snap(0, vec![sf(T, 40000, 1200, 0), sf(U, 40001, 0, 0)]);
    assert_eq!(
        m.poll_first_flight(1200, &with).unwrap(),
        Verdict::Wait { acked: 0 }
    );
    // The next look does not list it: it was closed, what it carried is unknown.
    let without = snap(1200, vec![sf(T, 40000, 1200, 0)]);
    let r = m.poll_first_flight(1200, &without).unwrap_err();
    assert_eq!(
        r,
        Refusal::UntrustedClosed {
            local: sa(U, 40001)
        }
    );
    // Listed in both looks, with nothing sent: the first flight proceeds.
    let mut m = in_flight(PmKind::Kernel);
    m.poll_first_flight(1200, &with).unwrap();
    let acked = snap(1200, vec![sf(T, 40000, 1200, 0), sf(U, 40001, 0, 0)]);
    assert_eq!(m.poll_first_flight(1200, &acked).unwrap(), Verdict::Proceed);
}

#[test]
fn untrusted_subflow_closed_during_the_first_flight_is_refused() {
    let mut m = in_flight(PmKind::Userspace);
    let quiet = snap(1200, vec![sf(T, 40000, 1200, 0)]);
    // Another connection's subflow, and a trusted subflow of ours, may close.
    m.on_event(PathEvent::SubflowClosed {
        iface: None,
        token: TOKEN ^ 1,
        local: sa(U, 40001),
    })
    .unwrap();
    m.on_event(PathEvent::SubflowClosed {
        iface: None,
        token: TOKEN,
        local: sa(T2, 40002),
    })
    .unwrap();
    assert_eq!(m.stage(), Stage::FirstFlight);
    // Ours, untrusted: the counters show nothing any more, the event refuses.
    let r = m
        .on_event(PathEvent::SubflowClosed {
            iface: None,
            token: TOKEN,
            local: sa(U, 40001),
        })
        .unwrap_err();
    assert_eq!(
        r,
        Refusal::UntrustedClosed {
            local: sa(U, 40001)
        }
    );
    assert!(r.to_string().contains("closed during the first flight"));
    assert_final(&mut m, &quiet);
}

#[test]
fn untrusted_subflow_established_then_gone_is_not_acked_until_accounted_for() {
    let mut m = in_flight(PmKind::Kernel);
    m.on_event(PathEvent::SubflowEstablished {
        iface: None,
        token: TOKEN,
        local: sa(U, 40001),
    })
    .unwrap();
    // The ACK is complete but the established untrusted subflow is not listed: its close
    // event may not have been read yet.
    let gone = snap(1200, vec![sf(T, 40000, 1200, 0)]);
    assert_eq!(
        m.poll_first_flight(LEN, &gone),
        Ok(Verdict::Wait { acked: 1200 })
    );
    // Listed and idle: accounted for (also when listed as an IPv4-mapped address).
    let mut m2 = m.clone();
    let listed = snap(1200, vec![sf(T, 40000, 1200, 0), sf(U, 40001, 0, 0)]);
    assert_eq!(m2.poll_first_flight(LEN, &listed), Ok(Verdict::Proceed));
    let mut m3 = m.clone();
    let mapped = snap(
        1200,
        vec![sf(T, 40000, 1200, 0), sf("::ffff:198.18.2.2", 40001, 0, 0)],
    );
    assert_eq!(m3.poll_first_flight(LEN, &mapped), Ok(Verdict::Proceed));
    // Another port of the same address is another subflow.
    let mut m4 = m.clone();
    let other = snap(1200, vec![sf(T, 40000, 1200, 0), sf(U, 40009, 0, 0)]);
    assert_eq!(
        m4.poll_first_flight(LEN, &other),
        Ok(Verdict::Wait { acked: 1200 })
    );
    // Its close event arrives: refused.
    assert!(m
        .on_event(PathEvent::SubflowClosed {
            iface: None,
            token: TOKEN,
            local: sa(U, 40001),
        })
        .is_err());
    assert_final(&mut m, &gone);
}

#[test]
fn lost_events_are_refused_as_unverifiable() {
    let mut m = in_flight(PmKind::Kernel);
    let r = m.on_event(PathEvent::Lost).unwrap_err();
    assert_eq!(r, Refusal::EventsLost);
    assert!(r.is_unverifiable());
    assert!(r.to_string().contains("events were lost"));
    assert_final(&mut m, &snap(1200, vec![sf(T, 40000, 1200, 0)]));
}

#[test]
fn events_outside_the_first_flight_are_ignored() {
    // Before: the driver drains the subscription when the first flight starts, so what
    // happened while idle (nothing was written) does not count.
    let mut m = machine(PmKind::Kernel);
    let s = snap(0, vec![sf(T, 40000, 0, 0)]);
    m.connected(&s).unwrap();
    m.on_event(PathEvent::Lost).unwrap();
    m.on_event(PathEvent::SubflowClosed {
        iface: None,
        token: TOKEN,
        local: sa(U, 40001),
    })
    .unwrap();
    assert_eq!(m.before_first_flight(&s), Ok(Verdict::Proceed));
    // After the ACK: untrusted subflows may come and go.
    let s = snap(1200, vec![sf(T, 40000, 1200, 0)]);
    assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Proceed));
    m.on_event(PathEvent::Lost).unwrap();
    assert_eq!(m.stage(), Stage::Acked);
}

#[test]
fn initial_subflow_not_trusted_is_refused() {
    for local in [U, "198.18.9.9"] {
        let mut m = machine(PmKind::Kernel);
        let s = snap(0, vec![sf(local, 40000, 0, 0)]);
        let r = m.connected(&s).unwrap_err();
        assert_eq!(
            r,
            Refusal::InitialNotTrusted {
                local: sa(local, 40000)
            }
        );
        assert!(r.to_string().contains("not trusted"));
        assert_final(&mut m, &s);
    }
    // Only the first subflow is the initial one: a trusted one listed second does not
    // make an untrusted initial subflow acceptable.
    let mut m = machine(PmKind::Kernel);
    let s = snap(0, vec![sf(U, 40000, 0, 0), sf(T, 40001, 0, 0)]);
    assert!(m.connected(&s).is_err());
    let mut m = machine(PmKind::Kernel);
    assert_eq!(m.connected(&Snapshot::default()), Err(Refusal::NoSubflow));
}

#[test]
fn out_of_order_use_is_refused() {
    let s = snap(1200, vec![sf(T, 40000, 1200, 0)]);
    let mut m = machine(PmKind::Userspace);
    let ooo =
        |r: Result<Verdict, Refusal>| matches!(r, Err(Refusal::OutOfOrder(w)) if w != REFUSED);
    assert!(ooo(m.before_first_flight(&s)));
    assert!(ooo(m.poll_first_flight(LEN, &s)));
    assert!(ooo(m.check_idle(&s, false)));
    m.connected(&s).unwrap();
    assert!(ooo(m.connected(&s)));
    assert!(ooo(m.poll_first_flight(LEN, &s)));
    assert!(ooo(m.release(&s)));
    m.before_first_flight(&snap(0, vec![sf(T, 40000, 0, 0)]))
        .unwrap();
    assert!(ooo(m.before_first_flight(&s)));
    // Release before the ACK: refused, and the gate is still waiting (not released).
    let r = m.release(&s).unwrap_err();
    assert_eq!(
        r.to_string(),
        "gate used out of order: the first flight is not acknowledged yet"
    );
    assert_eq!(m.stage(), Stage::FirstFlight);
    m.poll_first_flight(LEN, &s).unwrap();
    m.release(&s).unwrap();
    assert!(ooo(m.check_idle(&s, true)));
    // None of that was a refusal of the connection.
    assert_eq!(m.refusal(), None);
}

#[test]
fn fallback_connection_proceeds_without_checks_and_opens_nothing() {
    let mut m = GateMachine::new(policy(), PmKind::Userspace, remote(), true);
    let none = Snapshot::default();
    assert!(m.is_fallback());
    assert_eq!(m.connected(&none), Ok(Verdict::Proceed));
    assert_eq!(m.before_first_flight(&none), Ok(Verdict::Proceed));
    assert_eq!(m.stage(), Stage::Acked);
    // Events mean nothing without MPTCP.
    m.on_event(PathEvent::Lost).unwrap();
    assert_eq!(m.poll_first_flight(LEN, &none), Ok(Verdict::Proceed));
    assert_eq!(m.check_idle(&none, true), Ok(Verdict::Proceed));
    assert_eq!(m.release(&none), Ok(Verdict::Release { open: vec![] }));
}

#[test]
fn acked_via_bytes_acked_is_counted_from_the_baseline() {
    let mut m = machine(PmKind::Kernel);
    let base = Snapshot {
        conn: ConnSnapshot {
            token: TOKEN,
            bytes_acked: Some(5_000),
            snd_una: 0,
        },
        subflows: vec![sf(T, 40000, 0, 0)],
        dropped: None,
    };
    m.connected(&base).unwrap();
    m.before_first_flight(&base).unwrap();
    let at = |acked| Snapshot {
        conn: ConnSnapshot {
            bytes_acked: Some(acked),
            ..base.conn
        },
        ..base.clone()
    };
    // snd_una is ignored when bytes_acked exists.
    assert_eq!(
        m.poll_first_flight(LEN, &at(6_199)),
        Ok(Verdict::Wait { acked: 1_199 })
    );
    assert_eq!(m.poll_first_flight(LEN, &at(6_200)), Ok(Verdict::Proceed));
}

#[test]
fn acked_via_snd_una_wraps_around() {
    // Kernels < 6.5: no bytes_acked; snd_una is a 64-bit sequence number that may wrap.
    let mut m = machine(PmKind::Kernel);
    let at = |una: u64| Snapshot {
        conn: ConnSnapshot {
            token: TOKEN,
            bytes_acked: None,
            snd_una: una,
        },
        subflows: vec![sf(T, 40000, 0, 0)],
        dropped: None,
    };
    let base = u64::MAX - 99;
    m.connected(&at(base)).unwrap();
    m.before_first_flight(&at(base)).unwrap();
    assert_eq!(
        m.poll_first_flight(LEN, &at(base.wrapping_add(1199))),
        Ok(Verdict::Wait { acked: 1199 })
    );
    assert_eq!(
        m.poll_first_flight(LEN, &at(base.wrapping_add(1200))),
        Ok(Verdict::Proceed)
    );
}

#[test]
fn trusted_second_subflow_is_fine() {
    let mut m = in_flight(PmKind::Kernel);
    m.on_event(PathEvent::SubflowEstablished {
        iface: None,
        token: TOKEN,
        local: sa(T2, 40002),
    })
    .unwrap();
    // It carries part of the first flight and of the peer's answer: allowed.
    let s = snap(1200, vec![sf(T, 40000, 700, 0), sf(T2, 40002, 500, 90)]);
    assert_eq!(m.check_idle(&s, true), Ok(Verdict::Proceed));
    assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Proceed));
    m.on_event(PathEvent::SubflowClosed {
        iface: None,
        token: TOKEN,
        local: sa(T2, 40002),
    })
    .unwrap();
    // In-kernel PM: the kernel opens its endpoints itself; nothing to open.
    assert_eq!(m.release(&s), Ok(Verdict::Release { open: vec![] }));
}

#[test]
fn release_opens_every_other_policy_address_of_the_remotes_family() {
    let mut m = in_flight(PmKind::Userspace);
    // T2 is in use already (a trusted second subflow): not opened again; loopback and
    // the IPv6 address are left out for an IPv4 remote.
    let s = snap(1200, vec![sf(T, 40000, 1200, 0), sf(T2, 40002, 0, 0)]);
    m.poll_first_flight(LEN, &s).unwrap();
    assert_eq!(m.release(&s), Ok(Verdict::Release { open: vec![ip(U)] }));
}

#[test]
fn path_events_from_pm_events() {
    let e = PmEvent {
        kind: MPTCP_EVENT_SUB_CLOSED,
        token: Some(7),
        local: sa(U, 1),
        remote: None,
        backup: None,
        flags: None,
        ifindex: None,
    };
    assert_eq!(
        PathEvent::from_pm(&e),
        Some(PathEvent::SubflowClosed {
            iface: None,
            token: 7,
            local: sa(U, 1)
        })
    );
    let est = PmEvent {
        kind: MPTCP_EVENT_SUB_ESTABLISHED,
        ..e.clone()
    };
    assert_eq!(
        PathEvent::from_pm(&est),
        Some(PathEvent::SubflowEstablished {
            iface: None,
            token: 7,
            local: sa(U, 1)
        })
    );
    let no_token = PmEvent {
        token: None,
        ..e.clone()
    };
    assert_eq!(PathEvent::from_pm(&no_token), None);
    let other = PmEvent {
        kind: crate::pm::MPTCP_EVENT_CREATED,
        ..e
    };
    assert_eq!(PathEvent::from_pm(&other), None);
}

#[test]
fn refusals_are_one_line() {
    let all = [
        Refusal::NoSubflow,
        Refusal::InitialNotTrusted { local: None },
        Refusal::UntrustedBeforeFirstFlight { local: sa(U, 1) },
        Refusal::UntrustedSent { local: sa(U, 1) },
        Refusal::UntrustedReceived { local: sa(U, 1) },
        Refusal::UntrustedClosed { local: sa(U, 1) },
        Refusal::HoldNotInEffect {
            local: sa(U, 1),
            sent: 1200,
            dropped: Some(0),
        },
        Refusal::EventsLost,
        Refusal::OutOfOrder(REFUSED),
    ];
    for r in all {
        let m = r.to_string();
        assert!(!m.is_empty() && !m.contains('\n'), "{m}");
        assert_eq!(r.is_unverifiable(), r == Refusal::EventsLost);
    }
}

/// A simulated connection during its first flight: what really happened (the ground
/// truth) and what the gate may observe (snapshots of open subflows, events that may be
/// lost, in which case the loss is reported).
#[derive(Debug, Clone)]
enum Step {
    /// The trusted initial subflow sends `n` bytes of the first flight.
    TrustedSend(u64),
    /// A new subflow is established, from a trusted address or not.
    Open { trusted: bool },
    /// Subflow `i` (modulo the number) sends `n` bytes.
    Send(usize, u64),
    /// Subflow `i` receives `n` bytes.
    Receive(usize, u64),
    /// Subflow `i` is closed (the initial one never is).
    Close(usize),
    /// The peer acknowledges `n` more bytes at the data level.
    Ack(u64),
    /// The event queue overruns: queued events are dropped, the loss is reported.
    LoseEvents,
    /// The driver reads a snapshot, feeds the events and polls.
    Observe,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (1u64..800).prop_map(Step::TrustedSend),
        any::<bool>().prop_map(|trusted| Step::Open { trusted }),
        (0usize..8, 1u64..300).prop_map(|(i, n)| Step::Send(i, n)),
        (0usize..8, 1u64..300).prop_map(|(i, n)| Step::Receive(i, n)),
        (1usize..8).prop_map(Step::Close),
        (1u64..700).prop_map(Step::Ack),
        Just(Step::LoseEvents),
        Just(Step::Observe),
        Just(Step::Observe),
    ]
}

struct World {
    /// (local, trusted, sent, received, open)
    subflows: Vec<(SocketAddr, bool, u64, u64, bool)>,
    acked: u64,
    events: Vec<PathEvent>,
    /// An untrusted subflow sent bytes while the first flight was not fully acked.
    violated: bool,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Never Proceed (or Release) while any untrusted subflow has sent bytes before the
    /// first flight was acked, whatever the interleaving, even when that subflow is
    /// closed again before the gate looks; and a clean run proceeds once acked.
    #[test]
    fn never_releases_after_untrusted_bytes_before_the_ack(
        steps in proptest::collection::vec(step(), 1..60),
        pm in prop_oneof![Just(PmKind::Kernel), Just(PmKind::Userspace)],
    ) {
        let mut m = machine(pm);
        let mut w = World {
            subflows: vec![(sa(T, 40000).unwrap(), true, 0, 0, true)],
            acked: 0,
            events: vec![],
            violated: false,
        };
        let observe = |w: &World| Snapshot {
            conn: ConnSnapshot { token: TOKEN, bytes_acked: Some(w.acked), snd_una: 1 + w.acked },
            subflows: w.subflows.iter().filter(|s| s.4)
                .map(|s| SubflowSnapshot { iface: None, id: 0, local: Some(s.0), bytes_sent: s.2, bytes_received: s.3, notsent_bytes: 0 })
                .collect(),
            dropped: None,
        };
        let s0 = observe(&w);
        m.connected(&s0).unwrap();
        m.before_first_flight(&s0).unwrap();
        let mut proceeded = false;
        let mut untrusted_ever = false;
        let mut lost_ever = false;
        for st in steps.iter().cloned().chain([Step::Observe]) {
            match st {
                Step::TrustedSend(n) => w.subflows[0].2 += n,
                Step::Open { trusted } => {
                    let k = w.subflows.len() as u16;
                    let addr = if trusted { T2 } else { U };
                    let local = sa(addr, 41000 + k).unwrap();
                    w.subflows.push((local, trusted, 0, 0, true));
                    untrusted_ever |= !trusted;
                    w.events.push(PathEvent::SubflowEstablished { iface: None, token: TOKEN, local: Some(local) });
                }
                Step::Send(i, n) => {
                    let i = i % w.subflows.len();
                    if w.subflows[i].4 {
                        w.subflows[i].2 += n;
                        if !w.subflows[i].1 && w.acked < LEN {
                            w.violated = true;
                        }
                    }
                }
                Step::Receive(i, n) => {
                    let i = i % w.subflows.len();
                    if w.subflows[i].4 {
                        w.subflows[i].3 += n;
                    }
                }
                Step::Close(i) => {
                    let i = i % w.subflows.len();
                    if i > 0 && w.subflows[i].4 {
                        w.subflows[i].4 = false;
                        w.events.push(PathEvent::SubflowClosed { iface: None, token: TOKEN, local: Some(w.subflows[i].0) });
                    }
                }
                Step::Ack(n) => w.acked = (w.acked + n).min(LEN),
                Step::LoseEvents => {
                    w.events.clear();
                    w.events.push(PathEvent::Lost);
                    lost_ever = true;
                }
                Step::Observe => {
                    let s = observe(&w);
                    for e in w.events.drain(..) {
                        let _ = m.on_event(e);
                    }
                    match m.poll_first_flight(LEN, &s) {
                        Ok(Verdict::Proceed) => {
                            prop_assert!(!w.violated, "proceeded after a violation");
                            proceeded = true;
                            let r = m.release(&s);
                            prop_assert!(matches!(r, Ok(Verdict::Release { .. })), "{:?}", r);
                            // After the release, everything is allowed: stop here.
                            break;
                        }
                        Ok(Verdict::Wait { acked }) => prop_assert!(acked < LEN || untrusted_ever),
                        Ok(other) => prop_assert!(false, "unexpected {other:?}"),
                        Err(_) => {
                            prop_assert_eq!(m.stage(), Stage::Refused);
                            prop_assert!(m.release(&s).is_err());
                        }
                    }
                }
            }
        }
        // Not vacuous: a run with no untrusted subflow and no lost event proceeds as
        // soon as it is acked.
        if !untrusted_ever && !lost_ever && w.acked >= LEN {
            prop_assert!(proceeded, "a clean acked run did not proceed");
        }
        if w.violated {
            prop_assert!(!proceeded);
        }
    }
}
