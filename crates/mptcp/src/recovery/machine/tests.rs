//! Tests of `machine`.
use super::*;

const T: &str = "198.18.1.2";
const U: &str = "198.18.2.2";
const REMOTE: &str = "198.18.3.2:5201";

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}
fn sa(s: &str) -> SocketAddr {
    s.parse().unwrap()
}
fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
fn create(a: &str) -> Command {
    Command::CreateSubflow {
        local: ip(a),
        remote: sa(REMOTE),
    }
}

/// Released trusted and untrusted paths, each with its subflow.
fn released() -> RecoveryMachine {
    RecoveryMachine::new(
        sa(REMOTE),
        &[ip(U), ip(T)],
        &[
            (sa("198.18.1.2:40000"), sa(REMOTE)),
            (sa("198.18.2.2:40001"), sa(REMOTE)),
        ],
        RecoveryConfig::default(),
    )
}

/// Released paths with only the trusted subflow open (the untrusted join not made yet).
fn trusted_only() -> RecoveryMachine {
    RecoveryMachine::new(
        sa(REMOTE),
        &[ip(U), ip(T)],
        &[(sa("198.18.1.2:40000"), sa(REMOTE))],
        RecoveryConfig::default(),
    )
}

fn closed(m: &mut RecoveryMachine, local: &str, at: Instant) -> Vec<Command> {
    m.on_event(RecoveryEvent::SubflowClosed { local: sa(local) }, at)
}

#[test]
fn joins_that_never_establish_are_said_once_after_two_attempts() {
    let t0 = Instant::now();
    let mut m = trusted_only();
    // The release's own join, refused (a WLAN that strips MPTCP's options: RST).
    assert!(closed(&mut m, "198.18.2.2:40001", t0).is_empty());
    // The same close reported twice (the gate's subscription and the service's).
    assert!(closed(&mut m, "198.18.2.2:40001", t0).is_empty());
    assert!(m.take_notes().is_empty(), "one attempt is not enough");
    assert_eq!(m.poll(t0 + ms(250)), vec![create(U)]);
    assert!(closed(&mut m, "198.18.2.2:40002", t0 + ms(251)).is_empty());
    let notes = m.take_notes();
    assert_eq!(
        notes,
        vec![JoinNote {
            local: ip(U),
            target: Some(sa(REMOTE)),
            attempts: 2,
            retried: true
        }]
    );
    let line = notes[0].line(Some("wlan0"), sa(REMOTE));
    assert!(
        line.contains("198.18.2.2 on `wlan0`") && line.contains("strips"),
        "{line}"
    );
    // Once: later failures add no note, and the attempts go on, waiting longer.
    assert_eq!(m.poll(t0 + ms(751)), vec![create(U)]);
    closed(&mut m, "198.18.2.2:40003", t0 + ms(752));
    assert!(m.take_notes().is_empty());
    assert_eq!(m.next_deadline(), Some(t0 + ms(751) + ms(500)));
}

#[test]
fn a_path_that_joined_once_is_not_said_to_fail() {
    let t0 = Instant::now();
    let mut m = trusted_only();
    m.on_event(
        RecoveryEvent::SubflowEstablished {
            local: sa("198.18.2.2:40001"),
            remote: sa(REMOTE),
        },
        t0,
    );
    for (i, port) in [40001, 40002, 40003].into_iter().enumerate() {
        let at = t0 + Duration::from_secs(5 * i as u64);
        closed(&mut m, &format!("198.18.2.2:{port}"), at);
        m.poll(at + Duration::from_secs(5));
    }
    assert!(m.take_notes().is_empty());
}

#[test]
fn a_watch_only_machine_commands_nothing_and_says_one_failed_join() {
    let t0 = Instant::now();
    let mut m = trusted_only().watch_only();
    assert!(closed(&mut m, "198.18.2.2:40001", t0).is_empty());
    assert!(m.poll(t0 + Duration::from_secs(10)).is_empty());
    assert!(m
        .on_event(RecoveryEvent::LinkDown { addr: ip(T) }, t0)
        .is_empty());
    assert!(m
        .on_event(RecoveryEvent::LinkUp { addr: ip(T) }, t0 + ms(5))
        .is_empty());
    assert_eq!(m.next_deadline(), None);
    let notes = m.take_notes();
    assert_eq!(notes.len(), 1);
    assert!(!notes[0].retried && notes[0].attempts == 1, "{notes:?}");
}

#[test]
fn link_back_replaces_the_stale_subflow_at_once() {
    let t0 = Instant::now();
    let mut m = released();
    assert!(m
        .on_event(RecoveryEvent::LinkDown { addr: ip(U) }, t0)
        .is_empty());
    // Nothing is tried while the link stays down, however long.
    assert!(m.poll(t0 + Duration::from_secs(60)).is_empty());
    assert_eq!(m.next_deadline(), None);
    let up = t0 + Duration::from_secs(2);
    let cmds = m.on_event(RecoveryEvent::LinkUp { addr: ip(U) }, up);
    assert_eq!(
        cmds,
        vec![
            Command::DestroySubflow {
                local: sa("198.18.2.2:40001"),
                remote: sa(REMOTE)
            },
            create(U)
        ]
    );
    // Our own destroy is reported back: no second create for it.
    let closed = m.on_event(
        RecoveryEvent::SubflowClosed {
            local: sa("198.18.2.2:40001"),
        },
        up,
    );
    assert!(closed.is_empty());
    let est = m.on_event(
        RecoveryEvent::SubflowEstablished {
            local: sa("198.18.2.2:40002"),
            remote: sa(REMOTE),
        },
        up + ms(5),
    );
    assert!(est.is_empty());
    assert_eq!(m.next_deadline(), None);
    assert!(m.poll(up + Duration::from_secs(10)).is_empty());
    // The trusted path was never touched.
    assert!(!cmds.iter().any(|c| matches!(c,
            Command::CreateSubflow { local, .. } if *local == ip(T))));
}

#[test]
fn unanswered_attempts_back_off_exponentially_to_the_bound() {
    let t0 = Instant::now();
    let mut m = released();
    m.on_event(RecoveryEvent::LinkDown { addr: ip(U) }, t0);
    let mut now = t0 + ms(100);
    assert_eq!(
        m.on_event(RecoveryEvent::LinkUp { addr: ip(U) }, now)
            .last(),
        Some(&create(U))
    );
    m.on_event(
        RecoveryEvent::SubflowClosed {
            local: sa("198.18.2.2:40001"),
        },
        now,
    );
    let mut waits = Vec::new();
    for _ in 0..7 {
        let next = m.next_deadline().unwrap();
        waits.push((next - now).as_millis() as u64);
        // Nothing before the deadline.
        assert!(m.poll(next - ms(1)).is_empty());
        now = next;
        assert_eq!(m.poll(now), vec![create(U)]);
    }
    assert_eq!(waits, [250, 500, 1000, 2000, 4000, 4000, 4000]);
    // Established at last: quiet, and the wait starts short again next time.
    m.on_event(
        RecoveryEvent::SubflowEstablished {
            local: sa("198.18.2.2:40009"),
            remote: sa(REMOTE),
        },
        now,
    );
    assert_eq!(m.next_deadline(), None);
    m.on_event(RecoveryEvent::LinkDown { addr: ip(U) }, now);
    m.on_event(RecoveryEvent::LinkUp { addr: ip(U) }, now + ms(10));
    assert_eq!(m.next_deadline(), Some(now + ms(10) + ms(250)));
}

#[test]
fn refused_creates_are_retried_after_the_wait_and_the_wait_doubles() {
    let t0 = Instant::now();
    let mut m = released();
    m.on_event(RecoveryEvent::LinkDown { addr: ip(U) }, t0);
    m.on_event(RecoveryEvent::LinkUp { addr: ip(U) }, t0);
    m.on_event(
        RecoveryEvent::SubflowClosed {
            local: sa("198.18.2.2:40001"),
        },
        t0,
    );
    // The route is not back yet: the kernel refuses.
    assert!(m
        .on_event(RecoveryEvent::CreateFailed { addr: ip(U) }, t0)
        .is_empty());
    assert_eq!(m.next_deadline(), Some(t0 + ms(250)));
    assert_eq!(m.poll(t0 + ms(250)), vec![create(U)]);
    m.on_event(RecoveryEvent::CreateFailed { addr: ip(U) }, t0 + ms(250));
    assert_eq!(m.next_deadline(), Some(t0 + ms(750)));
    // A route comes back: the waiting retry is made at once, once.
    let r = t0 + ms(260);
    assert_eq!(m.on_event(RecoveryEvent::RoutesChanged, r), vec![create(U)]);
    assert!(m.on_event(RecoveryEvent::RoutesChanged, r).is_empty());
    assert_eq!(m.next_deadline(), Some(r + ms(1000)));
    m.on_event(RecoveryEvent::CreateFailed { addr: ip(U) }, r);
    // The link goes down again: the retry is cancelled.
    m.on_event(RecoveryEvent::LinkDown { addr: ip(U) }, t0 + ms(300));
    assert_eq!(m.next_deadline(), None);
    assert!(m
        .on_event(RecoveryEvent::RoutesChanged, t0 + ms(400))
        .is_empty());
    assert!(m.poll(t0 + Duration::from_secs(5)).is_empty());
}

#[test]
fn stale_subflows_are_closed_with_every_attempt_until_their_close_is_reported() {
    let t0 = Instant::now();
    let mut m = released();
    let stale = Command::DestroySubflow {
        local: sa("198.18.2.2:40001"),
        remote: sa(REMOTE),
    };
    m.on_event(RecoveryEvent::LinkDown { addr: ip(U) }, t0);
    // No route yet: the driver made nothing of the attempt and says so.
    assert_eq!(
        m.on_event(RecoveryEvent::LinkUp { addr: ip(U) }, t0),
        vec![stale, create(U)]
    );
    m.on_event(RecoveryEvent::CreateFailed { addr: ip(U) }, t0);
    // The next attempt closes the stale subflow again.
    assert_eq!(
        m.on_event(RecoveryEvent::RoutesChanged, t0 + ms(5)),
        vec![stale, create(U)]
    );
    // The new one is established before the close is reported: close it once more.
    assert_eq!(
        m.on_event(
            RecoveryEvent::SubflowEstablished {
                local: sa("198.18.2.2:40007"),
                remote: sa(REMOTE)
            },
            t0 + ms(6)
        ),
        vec![stale]
    );
    // Reported closed: no replacement (the path has its new subflow), nothing pending.
    assert!(m
        .on_event(
            RecoveryEvent::SubflowClosed {
                local: sa("198.18.2.2:40001")
            },
            t0 + ms(7)
        )
        .is_empty());
    assert_eq!(m.next_deadline(), None);
    // Two outages: the second one's stale subflow is the first one's replacement.
    m.on_event(RecoveryEvent::LinkDown { addr: ip(U) }, t0 + ms(100));
    assert_eq!(
        m.on_event(RecoveryEvent::LinkUp { addr: ip(U) }, t0 + ms(200)),
        vec![
            Command::DestroySubflow {
                local: sa("198.18.2.2:40007"),
                remote: sa(REMOTE)
            },
            create(U)
        ]
    );
}

#[test]
fn paths_the_gate_did_not_release_are_never_touched() {
    let t0 = Instant::now();
    // Only the trusted path was released (the untrusted one was refused / not listed).
    let mut m = RecoveryMachine::new(
        sa(REMOTE),
        &[ip(T)],
        &[(sa("198.18.1.2:40000"), sa(REMOTE))],
        RecoveryConfig::default(),
    );
    for ev in [
        RecoveryEvent::LinkDown { addr: ip(U) },
        RecoveryEvent::LinkUp { addr: ip(U) },
        RecoveryEvent::SubflowClosed {
            local: sa("198.18.2.2:40001"),
        },
        RecoveryEvent::CreateFailed { addr: ip(U) },
        RecoveryEvent::SubflowEstablished {
            local: sa("198.18.2.2:40003"),
            remote: sa(REMOTE),
        },
    ] {
        assert!(m.on_event(ev, t0).is_empty(), "{ev:?}");
    }
    assert_eq!(m.next_deadline(), None);
    assert!(m.poll(t0 + Duration::from_secs(30)).is_empty());
    assert_eq!(m.paths().collect::<Vec<_>>(), vec![ip(T)]);
}

#[test]
fn a_subflow_closed_while_its_link_is_up_is_replaced_after_the_wait() {
    let t0 = Instant::now();
    let mut m = released();
    assert!(m
        .on_event(
            RecoveryEvent::SubflowClosed {
                local: sa("198.18.2.2:40001")
            },
            t0
        )
        .is_empty());
    assert!(m.poll(t0 + ms(249)).is_empty());
    assert_eq!(m.poll(t0 + ms(250)), vec![create(U)]);
    // Two attempts both succeed: the second is destroyed.
    let a = sa("198.18.2.2:40005");
    let b = sa("198.18.2.2:40006");
    assert!(m
        .on_event(
            RecoveryEvent::SubflowEstablished {
                local: a,
                remote: sa(REMOTE)
            },
            t0 + ms(300)
        )
        .is_empty());
    assert_eq!(
        m.on_event(
            RecoveryEvent::SubflowEstablished {
                local: b,
                remote: sa(REMOTE)
            },
            t0 + ms(301)
        ),
        vec![Command::DestroySubflow {
            local: b,
            remote: sa(REMOTE)
        }]
    );
}

#[test]
fn gives_up_cleanly_when_the_connection_closes() {
    let t0 = Instant::now();
    let mut m = released();
    m.on_event(RecoveryEvent::LinkDown { addr: ip(U) }, t0);
    m.on_event(RecoveryEvent::LinkUp { addr: ip(U) }, t0 + ms(10));
    assert!(m.next_deadline().is_some());
    assert!(m
        .on_event(RecoveryEvent::ConnectionClosed, t0 + ms(20))
        .is_empty());
    assert!(m.is_done());
    assert_eq!(m.next_deadline(), None);
    assert!(m.poll(t0 + Duration::from_secs(60)).is_empty());
    for ev in [
        RecoveryEvent::LinkDown { addr: ip(U) },
        RecoveryEvent::LinkUp { addr: ip(U) },
        RecoveryEvent::SubflowClosed {
            local: sa("198.18.1.2:40000"),
        },
    ] {
        assert!(m.on_event(ev, t0 + ms(30)).is_empty());
    }
}

#[test]
fn a_link_that_comes_back_with_a_healthy_subflow_is_left_alone() {
    // Up without a preceding down (a duplicate notification) and a path with no outage.
    let t0 = Instant::now();
    let mut m = released();
    assert!(m
        .on_event(RecoveryEvent::LinkUp { addr: ip(U) }, t0)
        .is_empty());
    // Mapped IPv4 addresses are the same path.
    m.on_event(
        RecoveryEvent::LinkDown {
            addr: ip("::ffff:198.18.2.2"),
        },
        t0,
    );
    assert_eq!(
        m.on_event(RecoveryEvent::LinkUp { addr: ip(U) }, t0).len(),
        2,
        "destroy the stale subflow and create a new one"
    );
}

#[test]
fn without_a_target_nothing_is_tried_until_the_peer_announces_one() {
    let t0 = Instant::now();
    // Released, the trusted path has its initial subflow, the untrusted one none yet:
    // the peer denies joins to REMOTE and has announced nothing.
    let mut m = RecoveryMachine::new(
        sa(REMOTE),
        &[ip(U), ip(T)],
        &[(sa("198.18.1.2:40000"), sa(REMOTE))],
        RecoveryConfig::default(),
    )
    .awaiting_announcement();
    assert_eq!(m.target(), None);
    // Nothing to join: no timer, no link or route event makes an attempt.
    assert_eq!(m.next_deadline(), None);
    assert!(m.poll(t0 + Duration::from_secs(60)).is_empty());
    for ev in [
        RecoveryEvent::LinkDown { addr: ip(U) },
        RecoveryEvent::LinkUp { addr: ip(U) },
        RecoveryEvent::RoutesChanged,
    ] {
        assert!(m.on_event(ev, t0).is_empty(), "{ev:?}");
    }
    // Another family gives no target; an IPv4 address with a port does, and the path
    // without a subflow is opened to it at once (the trusted one keeps its subflow).
    let v6 = sa("[2001:db8::1]:4461");
    assert!(m
        .on_event(RecoveryEvent::Announced { remote: v6 }, t0)
        .is_empty());
    let join = sa("198.18.4.2:4461");
    assert_eq!(
        m.on_event(RecoveryEvent::Announced { remote: join }, t0),
        vec![Command::CreateSubflow {
            local: ip(U),
            remote: join
        }]
    );
    assert_eq!(m.target(), Some(join));
    // A later announcement does not move the target; recovery goes on to it.
    let other = sa("198.18.5.2:4462");
    assert!(m
        .on_event(RecoveryEvent::Announced { remote: other }, t0)
        .is_empty());
    assert_eq!(
        m.poll(t0 + ms(250)),
        vec![Command::CreateSubflow {
            local: ip(U),
            remote: join
        }],
        "unanswered: asked again after the first wait"
    );
}

/// An IPv6 connection with an IPv4 untrusted path: nothing is tried on it until the
/// peer announces an IPv4 address (an IPv6 one is no target for it), then it is opened
/// there at once and recovered there after an outage; the IPv6 path keeps the
/// connection's address.
#[test]
fn a_path_of_the_other_family_goes_to_the_address_announced_in_it() {
    let t0 = Instant::now();
    let r6 = sa("[2001:2:0:3::2]:4433");
    let t6 = "2001:2:0:1::2";
    let mut m = RecoveryMachine::new(
        r6,
        &[ip(U), ip(t6)],
        &[(sa("[2001:2:0:1::2]:40000"), r6)],
        RecoveryConfig::default(),
    );
    assert_eq!(m.target_for(ip(U)), None);
    assert_eq!(m.target_for(ip(t6)), Some(r6));
    for ev in [
        RecoveryEvent::LinkDown { addr: ip(U) },
        RecoveryEvent::LinkUp { addr: ip(U) },
        RecoveryEvent::RoutesChanged,
        RecoveryEvent::Announced {
            remote: sa("[2001:2:0:3::3]:0"),
        },
    ] {
        assert!(m.on_event(ev, t0).is_empty(), "{ev:?}");
    }
    assert!(m.poll(t0 + Duration::from_secs(60)).is_empty());
    // announced without a port: the connection's
    let join = sa("198.18.3.2:4433");
    assert_eq!(
        m.on_event(
            RecoveryEvent::Announced {
                remote: sa("198.18.3.2:0")
            },
            t0
        ),
        vec![Command::CreateSubflow {
            local: ip(U),
            remote: join
        }]
    );
    assert_eq!(m.target_for(ip(U)), Some(join));
    assert_eq!(
        m.target(),
        Some(r6),
        "the connection's own family keeps its target"
    );
    assert!(m
        .on_event(
            RecoveryEvent::SubflowEstablished {
                local: sa("198.18.2.2:40001"),
                remote: join
            },
            t0
        )
        .is_empty());
    // an outage of the IPv4 link: back to the announced address
    assert!(m
        .on_event(RecoveryEvent::LinkDown { addr: ip(U) }, t0)
        .is_empty());
    assert_eq!(
        m.on_event(RecoveryEvent::LinkUp { addr: ip(U) }, t0),
        vec![
            Command::DestroySubflow {
                local: sa("198.18.2.2:40001"),
                remote: join
            },
            Command::CreateSubflow {
                local: ip(U),
                remote: join
            }
        ]
    );
    // known from the start (announced before the registration)
    let m = RecoveryMachine::new(r6, &[ip(U)], &[], RecoveryConfig::default()).with_target(join);
    assert_eq!((m.target(), m.target_for(ip(U))), (Some(r6), Some(join)));
}

#[test]
fn a_machine_with_a_target_ignores_announcements() {
    let t0 = Instant::now();
    let mut m = released();
    let ev = RecoveryEvent::Announced {
        remote: sa("198.18.4.2:4461"),
    };
    assert!(m.on_event(ev, t0).is_empty());
    assert_eq!(m.target(), Some(sa(REMOTE)));
    assert!(m
        .on_event(RecoveryEvent::LinkDown { addr: ip(U) }, t0)
        .is_empty());
    assert_eq!(
        m.on_event(RecoveryEvent::LinkUp { addr: ip(U) }, t0),
        vec![
            Command::DestroySubflow {
                local: sa("198.18.2.2:40001"),
                remote: sa(REMOTE)
            },
            create(U)
        ]
    );
}
