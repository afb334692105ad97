//! Unit tests of the gate's machine ([`super::GateMachine`]): each rule with the snapshots
//! and events that make it answer, one refusal at a time; more in `machine_tests_more.rs`.

use super::*;
use proptest::prelude::*;

const T: &str = "198.18.1.2";
const T2: &str = "198.18.4.2";
const U: &str = "198.18.2.2";
const TOKEN: u32 = 0x1234_5678;
const LEN: u64 = 1200;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}
fn sa(s: &str, port: u16) -> Option<SocketAddr> {
    Some(SocketAddr::new(ip(s), port))
}
fn remote() -> SocketAddr {
    "198.18.3.2:5000".parse().unwrap()
}
fn policy() -> ResolvedPolicy {
    ResolvedPolicy::new(
        [ip(T), ip(T2), ip("127.0.0.1")].into(),
        [ip(U), ip("2001:db8::2")].into(),
    )
    .unwrap()
}
fn machine(pm: PmKind) -> GateMachine {
    GateMachine::new(policy(), pm, remote(), false)
}
fn sf(local: &str, port: u16, sent: u64, received: u64) -> SubflowSnapshot {
    SubflowSnapshot {
        iface: None,
        id: 0,
        local: sa(local, port),
        bytes_sent: sent,
        bytes_received: received,
        notsent_bytes: 0,
    }
}
fn snap(acked: u64, subflows: Vec<SubflowSnapshot>) -> Snapshot {
    Snapshot {
        conn: ConnSnapshot {
            token: TOKEN,
            bytes_acked: Some(acked),
            snd_una: 1 + acked,
        },
        subflows,
        dropped: None,
    }
}
/// A machine whose first flight is on its way (initial trusted subflow, nothing acked).
fn in_flight(pm: PmKind) -> GateMachine {
    let mut m = machine(pm);
    let s = snap(0, vec![sf(T, 40000, 0, 0)]);
    assert_eq!(m.connected(&s), Ok(Verdict::Proceed));
    assert_eq!(m.before_first_flight(&s), Ok(Verdict::Proceed));
    assert_eq!(m.stage(), Stage::FirstFlight);
    m
}
fn assert_final(m: &mut GateMachine, s: &Snapshot) {
    assert_eq!(m.stage(), Stage::Refused);
    for r in [
        m.poll_first_flight(LEN, s),
        m.release(s),
        m.check_idle(s, false),
        m.before_first_flight(s),
    ] {
        assert_eq!(r, Err(Refusal::OutOfOrder(REFUSED)));
    }
}

/// The policy as `resolve` builds it on a host: each address with its interface
/// (trusted 5, untrusted 6).
fn policy_with_ifaces() -> ResolvedPolicy {
    let mut p = policy();
    for (a, name, index) in [(T, "trusted", 5), (U, "untrusted", 6)] {
        p.ifaces.insert(
            ip(a),
            crate::path::LocalIface {
                name: name.into(),
                index,
            },
        );
    }
    p
}
fn on(mut s: SubflowSnapshot, iface: Option<u32>) -> SubflowSnapshot {
    s.iface = iface;
    s
}

#[test]
fn a_trusted_address_counts_only_on_a_trusted_interface() {
    let fresh = || GateMachine::new(policy_with_ifaces(), PmKind::Kernel, remote(), false);
    // The initial subflow from the trusted address, leaving by the untrusted interface
    // (a laptop whose default route is the WLAN, the socket bound to no device), or by
    // one nobody could tell: refused before anything is written.
    for iface in [Some(6), None] {
        let mut m = fresh();
        let s = snap(0, vec![on(sf(T, 40000, 0, 0), iface)]);
        assert_eq!(
            m.connected(&s),
            Err(Refusal::InitialNotTrusted {
                local: sa(T, 40000)
            }),
            "{iface:?}"
        );
    }
    // On its own interface it proceeds; a second subflow from the same trusted address
    // that leaves by the untrusted interface (an endpoint without `dev`, an answer to
    // the server's ADD_ADDR) is a subflow on an untrusted path before the first flight.
    let mut m = fresh();
    let first = on(sf(T, 40000, 0, 0), Some(5));
    assert_eq!(m.connected(&snap(0, vec![first])), Ok(Verdict::Proceed));
    let s = snap(0, vec![first, on(sf(T, 40001, 0, 0), Some(6))]);
    assert_eq!(
        m.before_first_flight(&s),
        Err(Refusal::UntrustedBeforeFirstFlight {
            local: sa(T, 40001)
        })
    );
    // During the first flight: such a subflow that sent a byte is first-flight data on
    // an untrusted path; one that closed took its counters with it.
    let mut m = fresh();
    let s = snap(0, vec![first]);
    m.connected(&s).unwrap();
    m.before_first_flight(&s).unwrap();
    let s = snap(0, vec![first, on(sf(T, 40001, 100, 0), Some(6))]);
    assert_eq!(
        m.poll_first_flight(LEN, &s),
        Err(Refusal::UntrustedSent {
            local: sa(T, 40001)
        })
    );
    let mut m = fresh();
    let s = snap(0, vec![first]);
    m.connected(&s).unwrap();
    m.before_first_flight(&s).unwrap();
    let closed = |iface| PathEvent::SubflowClosed {
        token: TOKEN,
        local: sa(T, 40001),
        iface,
    };
    assert_eq!(m.on_event(closed(Some(5))), Ok(()));
    m.on_event(PathEvent::SubflowEstablished {
        token: TOKEN,
        local: sa(T, 40001),
        iface: Some(6),
    })
    .unwrap();
    assert_eq!(
        m.on_event(closed(Some(6))),
        Err(Refusal::UntrustedClosed {
            local: sa(T, 40001)
        })
    );
    // An untrusted address stays untrusted on the trusted interface.
    let p = policy_with_ifaces();
    assert_eq!(p.classify_path(ip(U), Some(5)), Trust::Untrusted);
    assert_eq!(p.classify_path(ip(T), Some(5)), Trust::Trusted);
    assert_eq!(p.classify_path(ip(T), Some(6)), Trust::Untrusted);
    assert_eq!(p.classify_path(ip(T), None), Trust::Untrusted);
}

#[test]
fn the_whole_sequence_proceeds_on_a_trusted_path() {
    let mut m = in_flight(PmKind::Userspace);
    let s = snap(0, vec![sf(T, 40000, 1200, 0)]);
    assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Wait { acked: 0 }));
    let s = snap(600, vec![sf(T, 40000, 1200, 0)]);
    assert_eq!(
        m.poll_first_flight(LEN, &s),
        Ok(Verdict::Wait { acked: 600 })
    );
    let s = snap(1200, vec![sf(T, 40000, 1200, 0)]);
    assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Proceed));
    assert_eq!(m.stage(), Stage::Acked);
    // Acked stays acked, without looking at the snapshot again.
    assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Proceed));
    assert_eq!(
        m.release(&s),
        Ok(Verdict::Release {
            open: vec![ip(U), ip(T2)]
        })
    );
    assert_eq!(m.stage(), Stage::Released);
    // Releasing twice opens nothing more.
    assert_eq!(m.release(&s), Ok(Verdict::Release { open: vec![] }));
    assert_eq!(m.refusal(), None);
}

#[test]
fn recovery_only_after_release_with_the_userspace_pm() {
    // Before release: nothing may be recovered (the first flight is not settled).
    let mut m = in_flight(PmKind::Userspace);
    assert_eq!(m.recovery_paths(), None);
    let s = snap(1200, vec![sf(T, 40000, 1200, 0)]);
    assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Proceed));
    assert_eq!(m.recovery_paths(), None, "acked but not released");
    m.release(&s).unwrap();
    // Released: the policy's addresses of the remote's family (not loopback).
    assert_eq!(m.recovery_paths(), Some(vec![ip(U), ip(T), ip(T2)]));
    // The in-kernel PM opens subflows itself: nena recovers nothing.
    let mut k = in_flight(PmKind::Kernel);
    k.poll_first_flight(LEN, &s).unwrap();
    k.release(&s).unwrap();
    assert_eq!(k.recovery_paths(), None);
    // A refused connection is never recovered.
    let mut r = in_flight(PmKind::Userspace);
    let bad = snap(1200, vec![sf(T, 40000, 1200, 0), sf(U, 40001, 10, 0)]);
    assert!(r.poll_first_flight(LEN, &bad).is_err());
    assert!(r.release(&bad).is_err());
    assert_eq!(r.recovery_paths(), None);
}

#[test]
fn untrusted_subflow_before_the_first_flight_is_refused() {
    for local in [U, "198.18.9.9"] {
        let mut m = machine(PmKind::Kernel);
        let s = snap(0, vec![sf(T, 40000, 0, 100), sf(local, 40001, 0, 0)]);
        m.connected(&s).unwrap();
        let r = m.before_first_flight(&s).unwrap_err();
        assert_eq!(
            r,
            Refusal::UntrustedBeforeFirstFlight {
                local: sa(local, 40001)
            }
        );
        assert!(r.to_string().contains("exists before the first flight"));
        assert!(r.to_string().contains(&format!("{local}:40001")));
        assert_final(&mut m, &s);
    }
}

#[test]
fn untrusted_subflow_that_sent_first_flight_bytes_is_refused() {
    let mut m = in_flight(PmKind::Kernel);
    // The untrusted subflow exists without having sent anything: wait.
    let s = snap(100, vec![sf(T, 40000, 1200, 0), sf(U, 40001, 0, 0)]);
    assert_eq!(
        m.poll_first_flight(LEN, &s),
        Ok(Verdict::Wait { acked: 100 })
    );
    // One byte on it is one byte of the first flight, even if the ACK is complete.
    let s = snap(1200, vec![sf(T, 40000, 1200, 0), sf(U, 40001, 1, 0)]);
    let r = m.poll_first_flight(LEN, &s).unwrap_err();
    assert_eq!(
        r,
        Refusal::UntrustedSent {
            local: sa(U, 40001)
        }
    );
    assert_eq!(r.local(), sa(U, 40001));
    assert!(!r.is_unverifiable());
    assert_eq!(m.refusal(), Some(&r));
    assert_final(&mut m, &s);
}

/// Held ([`crate::hold`]): an untrusted subflow's sent bytes were dropped by the hold,
/// not carried, so they refuse nothing, but the connection proceeds only once that
/// subflow is withdrawn (its queued bytes would leave when the hold ends); its close,
/// even one the kernel made itself, refuses nothing; and the check after the peer's
/// first flight skips the withdrawn subflow still listed while it closes.
#[test]
fn held_bytes_on_an_untrusted_subflow_withdraw_it_instead_of_refusing() {
    // (the hold counted the drop of what the join sent)
    let snap = |a, v| Snapshot {
        dropped: Some(1),
        ..snap(a, v)
    };
    let mut m = in_flight(PmKind::Kernel);
    m.set_held(true);
    let join = |id, port, sent| SubflowSnapshot {
        id,
        ..sf(U, port, sent, 0)
    };
    m.on_event(PathEvent::SubflowEstablished {
        iface: None,
        token: TOKEN,
        local: sa(U, 41000),
    })
    .unwrap();
    // acknowledged, but the join holds 1200 bytes: wait for its withdrawal
    let s = snap(1200, vec![sf(T, 40000, 2400, 0), join(2, 41000, 1200)]);
    assert_eq!(
        m.poll_first_flight(LEN, &s),
        Ok(Verdict::Wait { acked: 1200 })
    );
    assert!(m.holds_back(&s));
    // bytes queued and not sent yet hold it back too
    let queued = SubflowSnapshot {
        notsent_bytes: 300,
        ..join(2, 41000, 0)
    };
    let q = snap(1200, vec![sf(T, 40000, 2400, 0), queued]);
    assert!(m.holds_back(&q));
    assert_eq!(
        m.poll_first_flight(LEN, &q),
        Ok(Verdict::Wait { acked: 1200 })
    );
    assert_eq!(m.withdraw_untrusted(&s), Ok(vec![join(2, 41000, 1200)]));
    assert!(!m.holds_back(&s));
    // withdrawn and still listed while it closes: proceed
    assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Proceed));
    assert_eq!(m.check_idle(&s, true), Ok(Verdict::Proceed));

    // a held join the kernel closed by itself carried nothing either
    let mut m = in_flight(PmKind::Kernel);
    m.set_held(true);
    m.on_event(PathEvent::SubflowEstablished {
        iface: None,
        token: TOKEN,
        local: sa(U, 41001),
    })
    .unwrap();
    let s = snap(0, vec![sf(T, 40000, 1200, 0), join(3, 41001, 600)]);
    assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Wait { acked: 0 }));
    m.on_event(PathEvent::SubflowClosed {
        iface: None,
        token: TOKEN,
        local: sa(U, 41001),
    })
    .unwrap();
    let s = snap(1200, vec![sf(T, 40000, 1200, 0)]);
    assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Proceed));

    // not held: the same bytes refuse
    let mut m = in_flight(PmKind::Kernel);
    let s = snap(1200, vec![sf(T, 40000, 2400, 0), join(2, 41000, 1200)]);
    assert!(matches!(
        m.poll_first_flight(LEN, &s),
        Err(Refusal::UntrustedSent { .. })
    ));
}

/// Held ([`crate::hold`]), an untrusted subflow that holds no payload stays: it may
/// exist before the first flight (the server's ADD_ADDR beat the first write), it is
/// not answered for withdrawal, and the connection proceeds with it listed once the
/// first flight is acknowledged; one handed bytes is answered (alone), and the rest
/// stay. Not held, the same subflow before the first flight refuses.
#[test]
fn held_untrusted_subflows_that_hold_nothing_stay() {
    let snap = |a, v| Snapshot {
        dropped: Some(1),
        ..snap(a, v)
    };
    let join = |id, port, sent, notsent| SubflowSnapshot {
        id,
        notsent_bytes: notsent,
        ..sf(U, port, sent, 0)
    };
    let mut m = machine(PmKind::Kernel);
    m.set_held(true);
    let early = snap(0, vec![sf(T, 40000, 0, 0), join(2, 41000, 0, 0)]);
    assert_eq!(m.connected(&early), Ok(Verdict::Proceed));
    assert_eq!(m.before_first_flight(&early), Ok(Verdict::Proceed));
    m.on_event(PathEvent::SubflowEstablished {
        iface: None,
        token: TOKEN,
        local: sa(U, 41001),
    })
    .unwrap();
    let s = snap(
        0,
        vec![
            sf(T, 40000, 1200, 0),
            join(2, 41000, 0, 0),
            join(3, 41001, 0, 0),
        ],
    );
    assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Wait { acked: 0 }));
    assert!(!m.holds_back(&s));
    assert_eq!(m.withdraw_untrusted(&s), Ok(vec![]));
    // the kernel hands the second join the first flight again: it alone is answered
    let s = snap(
        0,
        vec![
            sf(T, 40000, 1200, 0),
            join(2, 41000, 0, 0),
            join(3, 41001, 1200, 0),
        ],
    );
    assert!(m.holds_back(&s));
    assert_eq!(m.withdraw_untrusted(&s), Ok(vec![join(3, 41001, 1200, 0)]));
    assert!(!m.holds_back(&s));
    // acknowledged: proceed with the empty join listed (it carries data from now on)
    let s = snap(
        1200,
        vec![
            sf(T, 40000, 2400, 0),
            join(2, 41000, 0, 0),
            join(3, 41001, 1200, 0),
        ],
    );
    assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Proceed));
    m.set_held(false);
    assert_eq!(m.release(&s), Ok(Verdict::Release { open: vec![] }));

    // not held: the early subflow refuses before anything is written
    let mut m = machine(PmKind::Kernel);
    m.connected(&early).unwrap();
    assert_eq!(
        m.before_first_flight(&early),
        Err(Refusal::UntrustedBeforeFirstFlight {
            local: sa(U, 41000)
        })
    );
}

/// Held, an untrusted subflow that sent payload while the hold counted no drop for the
/// connection (the program never saw its packets: the process moved to another cgroup)
/// refuses, in one line naming the hold; as many drops as subflows that sent are
/// needed, and a missing entry (`None`) counts as none.
#[test]
fn bytes_sent_while_held_without_a_counted_drop_refuse_naming_the_hold() {
    let join = |id, port, sent| SubflowSnapshot {
        id,
        ..sf(U, port, sent, 0)
    };
    for dropped in [None, Some(0)] {
        let mut m = in_flight(PmKind::Kernel);
        m.set_held(true);
        let s = Snapshot {
            dropped,
            ..snap(0, vec![sf(T, 40000, 1200, 0), join(2, 41000, 1200)])
        };
        let r = m.poll_first_flight(LEN, &s).unwrap_err();
        assert_eq!(
            r,
            Refusal::HoldNotInEffect {
                local: sa(U, 41000),
                sent: 1200,
                dropped
            }
        );
        let line = r.to_string();
        assert!(!line.contains('\n'), "{line}");
        assert!(
            line.contains("first-flight hold")
                && line.contains("another cgroup")
                && line.contains(U),
            "{line}"
        );
        assert_final(&mut m, &s);
    }
    // two untrusted subflows sent, one drop counted: one of them was not held
    let mut m = in_flight(PmKind::Kernel);
    m.set_held(true);
    let two = vec![
        sf(T, 40000, 1200, 0),
        join(2, 41000, 600),
        join(3, 41001, 600),
    ];
    let s = Snapshot {
        dropped: Some(1),
        ..snap(0, two.clone())
    };
    assert!(matches!(
        m.withdraw_untrusted(&s),
        Err(Refusal::HoldNotInEffect { .. })
    ));
    // two drops for two: withdrawn, as before
    let mut m = in_flight(PmKind::Kernel);
    m.set_held(true);
    let s = Snapshot {
        dropped: Some(2),
        ..snap(0, two)
    };
    assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Wait { acked: 0 }));
    assert_eq!(m.withdraw_untrusted(&s).unwrap().len(), 2);
    // not held: no drop is expected, the bytes refuse as sent
    let mut m = in_flight(PmKind::Kernel);
    let s = snap(0, vec![sf(T, 40000, 1200, 0), join(2, 41000, 1200)]);
    assert!(matches!(
        m.poll_first_flight(LEN, &s),
        Err(Refusal::UntrustedSent { .. })
    ));
}

/// On every exit but a proceed (refused, not acknowledged in time, dropped unfinished)
/// every untrusted subflow is answered for closing, whatever it holds, withdrawn before
/// or not, its address unknown included; trusted ones are not. Once proceeded, or for a
/// fallback connection, nothing.
#[test]
fn every_untrusted_subflow_is_closed_on_any_exit_but_a_proceed() {
    let all = vec![
        sf(T, 40000, 1200, 0),
        sf(U, 41000, 0, 0),
        SubflowSnapshot {
            local: None,
            ..sf(U, 41001, 0, 0)
        },
        sf(T2, 42000, 0, 0),
        sf(U, 41002, 600, 0),
    ];
    // not yet connected, connected, in flight
    let m = machine(PmKind::Kernel);
    assert_eq!(m.exit_withdrawals(&all), Some(vec![1, 2, 4]));
    let mut m = in_flight(PmKind::Kernel);
    m.set_held(true);
    assert_eq!(m.exit_withdrawals(&all), Some(vec![1, 2, 4]));
    // one withdrawn already is answered again (its close may not have happened)
    let s = Snapshot {
        dropped: Some(1),
        ..snap(0, all.clone())
    };
    assert_eq!(m.withdraw_untrusted(&s).unwrap().len(), 1);
    assert_eq!(m.exit_withdrawals(&all), Some(vec![1, 2, 4]));
    // refused
    let mut m = in_flight(PmKind::Kernel);
    assert!(m.poll_first_flight(LEN, &snap(0, all.clone())).is_err());
    assert_eq!(m.exit_withdrawals(&all), Some(vec![1, 2, 4]));
    // proceeded, released: nothing to undo
    let mut m = in_flight(PmKind::Kernel);
    let ok = snap(LEN, vec![sf(T, 40000, LEN, 0)]);
    assert_eq!(m.poll_first_flight(LEN, &ok), Ok(Verdict::Proceed));
    assert_eq!(m.exit_withdrawals(&all), None);
    m.release(&ok).unwrap();
    assert_eq!(m.exit_withdrawals(&all), None);
    let m = GateMachine::new(policy(), PmKind::Kernel, remote(), true);
    assert_eq!(m.exit_withdrawals(&all), None);
}

/// The first flight is late: the untrusted subflows listed now are answered once, for
/// the caller to close; their going and their close events are then expected, a new one
/// is answered at the next look, and the first flight still needs its ACK.
#[test]
fn late_first_flight_withdraws_untrusted_subflows_once() {
    let mut m = in_flight(PmKind::Kernel);
    let join = |id, port| SubflowSnapshot {
        id,
        ..sf(U, port, 0, 0)
    };
    let s = snap(0, vec![sf(T, 40000, 1200, 0), join(2, 41000)]);
    assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Wait { acked: 0 }));
    m.on_event(PathEvent::SubflowEstablished {
        iface: None,
        token: TOKEN,
        local: sa(U, 41000),
    })
    .unwrap();
    assert_eq!(m.withdraw_untrusted(&s), Ok(vec![join(2, 41000)]));
    assert_eq!(m.withdraw_untrusted(&s), Ok(vec![]));
    // Still listed while it closes; then gone, its close event read: no refusal.
    assert_eq!(m.poll_first_flight(LEN, &s), Ok(Verdict::Wait { acked: 0 }));
    m.on_event(PathEvent::SubflowClosed {
        iface: None,
        token: TOKEN,
        local: sa(U, 41000),
    })
    .unwrap();
    let later = snap(0, vec![sf(T, 40000, 1200, 0), join(3, 41001)]);
    assert_eq!(
        m.poll_first_flight(LEN, &later),
        Ok(Verdict::Wait { acked: 0 })
    );
    assert_eq!(m.withdraw_untrusted(&later), Ok(vec![join(3, 41001)]));
    let acked = snap(1200, vec![sf(T, 40000, 1200, 0)]);
    assert_eq!(m.poll_first_flight(LEN, &acked), Ok(Verdict::Proceed));
    // After the first flight, nothing is withdrawn.
    assert_eq!(m.withdraw_untrusted(&later), Ok(vec![]));
}

/// One that sent a byte already is refused, not withdrawn; a subflow nena could not close
/// refuses the connection, naming it.
#[test]
fn withdrawing_a_subflow_that_sent_or_cannot_be_closed_refuses() {
    let mut m = in_flight(PmKind::Kernel);
    let s = snap(0, vec![sf(T, 40000, 1200, 0), sf(U, 41000, 1, 0)]);
    assert_eq!(
        m.withdraw_untrusted(&s),
        Err(Refusal::UntrustedSent {
            local: sa(U, 41000)
        })
    );
    assert_final(&mut m, &s);
    let mut m = in_flight(PmKind::Kernel);
    let r = m.refuse_unwithdrawable(sa(U, 41000), 120, "Operation not permitted".into());
    assert_eq!(r.local(), sa(U, 41000));
    assert!(r.to_string().contains("after 120 ms"), "{r}");
    assert!(r.to_string().contains("CAP_NET_ADMIN"), "{r}");
    assert_final(&mut m, &snap(0, vec![sf(T, 40000, 1200, 0)]));
}

#[path = "machine_tests_more.rs"]
mod more;
