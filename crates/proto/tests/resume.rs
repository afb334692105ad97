//! Resumed sessions through plain buffers: tickets granted by a full handshake and by a
//! resumed one, data both ways over a resumed session, the first flight's size, a replay,
//! a wrong binder, a lineage's budget and lifetime, a server without tickets, and what an
//! observer of the resumed session alone can compute (docs/PROTOCOL.md, "Resumed sessions").

mod common;

use common::{entropy, open_whole, seal_all};
use nena_proto::keys::{self, Schedule};
use nena_proto::*;

fn store(limits: StoreLimits) -> Resumption {
    Resumption::new(limits)
}

fn server_cfg(res: &Resumption, now: u64) -> ServerConfig {
    ServerConfig::default()
        .with_key(test_server_key())
        .with_resumption(res.at(now))
}

/// What one handshake gave both sides.
struct Done {
    hello: Vec<u8>,
    reply: Vec<u8>,
    client: Session,
    server: Session,
    confirm: Vec<u8>,
    tickets: Vec<Ticket>,
    resumed: (bool, bool),
    server_key: Option<PublicKey>,
}

fn handshake(cfg: &ClientConfig, scfg: &ServerConfig, seed: u8) -> Result<Done, HandshakeError> {
    let mut c = ClientHandshake::new(cfg, entropy(seed))?;
    let mut s = ServerHandshake::new(scfg, [seed ^ 0x5a; SERVER_ENTROPY_LEN]);
    let hello = c.first_flight().to_vec();
    let (reply, server) = match s.read(&hello) {
        Ok(Progress::Done { value, .. }) => value,
        Ok(Progress::NeedMore { .. }) => panic!("the whole hello was given"),
        Err(rej) => {
            // The client reads the refusal as the peer sent it.
            let reply = rej.reply.expect("a nena peer gets a reason");
            return Err(c.read(&reply).expect_err("a reject fails the client"));
        }
    };
    let Progress::Done {
        value: (confirm, client),
        ..
    } = c.read(&reply)?
    else {
        panic!("the whole answer was given")
    };
    Ok(Done {
        hello,
        reply,
        client,
        server,
        confirm,
        resumed: (c.resuming(), s.resumed()),
        server_key: c.server_key(),
        tickets: c.take_tickets(),
    })
}

fn asking(want: u8) -> ClientConfig {
    ClientConfig {
        want_tickets: want,
        ..ClientConfig::default()
    }
}

fn resuming(t: &Ticket, want: u8) -> ClientConfig {
    ClientConfig {
        resume: Some(t.clone()),
        ..asking(want)
    }
}

/// Data both ways over a pair of sessions, the client's confirmation first.
fn talk(d: Done) {
    let (mut ctx, mut crx) = d.client.split();
    let (mut stx, mut srx) = d.server.split();
    let mut up = d.confirm.clone();
    up.extend(seal_all(&mut ctx, b"GET / over a resumed session", 7));
    assert_eq!(
        open_whole(&mut srx, &up).data,
        b"GET / over a resumed session"
    );
    let down = seal_all(&mut stx, b"200 OK", 100);
    assert_eq!(open_whole(&mut crx, &down).data, b"200 OK");
}

#[test]
fn a_full_handshake_grants_tickets_and_each_resumes_one_session_with_a_small_first_flight() {
    let res = store(StoreLimits::default());
    let full = handshake(&asking(4), &server_cfg(&res, 0), 1).unwrap();
    assert_eq!(full.resumed, (false, false));
    assert_eq!(full.tickets.len(), 4);
    assert_eq!(res.tickets_held(), 4);
    assert!(full.tickets.iter().all(|t| t.lifetime_secs() == 600));
    assert_eq!(full.tickets[0].server_key(), test_server_key().public());
    // The full hello with the tickets block: 1,262 + 3 bytes; its accept 1,260 + 5.
    assert_eq!((full.hello.len(), full.reply.len()), (1265, 1265));
    let tickets = full.tickets.clone();
    talk(full);

    let r = handshake(&resuming(&tickets[0], 2), &server_cfg(&res, 30), 2).unwrap();
    assert_eq!(r.resumed, (true, true));
    assert_eq!(r.server_key, Some(test_server_key().public()));
    // docs/PROTOCOL.md: 9 + 1 + 4 + 3 + 16 + 32 + 32 bytes; the answer 9 + 8 + 32 + 32.
    assert_eq!(r.hello.len(), 97);
    assert!(r.hello.len() <= 200, "issue 59's bound on the first flight");
    assert_eq!(r.reply.len(), 81);
    assert_eq!(r.confirm.len(), wire::CONFIRM_LEN);
    assert_eq!(r.tickets.len(), 2, "a resumed session grants tickets too");
    assert_eq!(
        r.tickets[0].lifetime_secs(),
        570,
        "the lineage's ten minutes, less 30 s"
    );
    // 4 granted, 1 taken, 2 more granted.
    assert_eq!(res.tickets_held(), 5);
    let next = r.tickets[1].clone();
    talk(r);
    // A ticket from a resumed session resumes as well.
    let again = handshake(&resuming(&next, 0), &server_cfg(&res, 60), 3).unwrap();
    assert_eq!(again.resumed, (true, true));
    assert!(again.tickets.is_empty(), "none asked for");
    talk(again);
}

#[test]
fn a_replayed_resume_hello_is_refused() {
    let res = store(StoreLimits::default());
    let t = handshake(&asking(1), &server_cfg(&res, 0), 4)
        .unwrap()
        .tickets;
    let first = handshake(&resuming(&t[0], 0), &server_cfg(&res, 1), 5).unwrap();
    // The same bytes again, as an attacker who recorded them would send them.
    let mut s = ServerHandshake::new(&server_cfg(&res, 2), [9; SERVER_ENTROPY_LEN]);
    let rej = s.read(&first.hello).unwrap_err();
    assert_eq!(
        rej.error,
        HandshakeError::ResumeRefused(ResumeRefusal::UnknownTicket)
    );
    assert_eq!(
        rej.reply.as_deref(),
        Some(&ServerHandshake::refusal(RejectReason::ResumeRefused)[..])
    );
    // And the client, sent the ticket again, hears why.
    let e = handshake(&resuming(&t[0], 0), &server_cfg(&res, 3), 6).err();
    assert_eq!(
        e,
        Some(HandshakeError::PeerRejected(RejectReason::ResumeRefused))
    );
}

#[test]
fn a_resume_hello_without_the_tickets_secret_is_refused_and_burns_the_ticket() {
    let res = store(StoreLimits::default());
    let t = handshake(&asking(1), &server_cfg(&res, 0), 7)
        .unwrap()
        .tickets
        .remove(0);
    let mut hello = ClientHandshake::new(&resuming(&t, 0), entropy(8))
        .unwrap()
        .first_flight()
        .to_vec();
    // r_c altered on the way: the binder no longer matches it.
    let rc_at = hello.len() - 64;
    hello[rc_at] ^= 1;
    let mut s = ServerHandshake::new(&server_cfg(&res, 1), [1; SERVER_ENTROPY_LEN]);
    assert_eq!(
        s.read(&hello).unwrap_err().error,
        HandshakeError::ResumeRefused(ResumeRefusal::BadBinder)
    );
    assert_eq!(res.tickets_held(), 0, "taken, not put back");
}

#[test]
fn a_lineage_grants_its_budget_and_ends_with_its_lifetime() {
    let limits = StoreLimits {
        max_age_secs: 100,
        per_lineage: 3,
        capacity: 1000,
    };
    let res = store(limits);
    let t = handshake(&asking(2), &server_cfg(&res, 0), 10)
        .unwrap()
        .tickets;
    assert_eq!(t.len(), 2);
    let r = handshake(&resuming(&t[0], 8), &server_cfg(&res, 10), 11).unwrap();
    assert_eq!(r.tickets.len(), 1, "3 per lineage: 2, then 1");
    let r = handshake(&resuming(&r.tickets[0], 8), &server_cfg(&res, 20), 12).unwrap();
    assert!(
        r.tickets.is_empty(),
        "the budget is spent: the next session is a full one"
    );
    // The lineage ends 100 s after its full handshake, its last ticket with it.
    let e = handshake(&resuming(&t[1], 0), &server_cfg(&res, 100), 13).err();
    assert_eq!(
        e,
        Some(HandshakeError::PeerRejected(RejectReason::ResumeRefused))
    );
    assert_eq!(res.tickets_held(), 0);
}

#[test]
fn a_server_without_a_store_grants_nothing_and_refuses_tickets() {
    let res = store(StoreLimits::default());
    let t = handshake(&asking(1), &server_cfg(&res, 0), 14)
        .unwrap()
        .tickets;
    let plain = ServerConfig::default().with_key(test_server_key());
    let full = handshake(&asking(3), &plain, 15).unwrap();
    assert!(full.tickets.is_empty());
    assert_eq!(full.resumed, (false, false));
    let e = handshake(&resuming(&t[0], 0), &plain, 16).err();
    assert_eq!(
        e,
        Some(HandshakeError::PeerRejected(RejectReason::ResumeRefused))
    );
}

#[test]
fn a_ticket_is_not_offered_to_a_server_expected_to_hold_another_key() {
    let res = store(StoreLimits::default());
    let t = handshake(&asking(1), &server_cfg(&res, 0), 17)
        .unwrap()
        .tickets;
    let other = ServerKey::from_seed(&[0x61; 32]).unwrap().public();
    let cfg = ClientConfig {
        server_key: Some(other),
        ..resuming(&t[0], 0)
    };
    assert!(matches!(
        ClientHandshake::new(&cfg, entropy(18)),
        Err(HandshakeError::ServerKeyMismatch { .. })
    ));
}

#[test]
fn an_answer_altered_on_the_way_fails_the_confirmation() {
    let res = store(StoreLimits::default());
    let t = handshake(&asking(1), &server_cfg(&res, 0), 19)
        .unwrap()
        .tickets;
    let mut c = ClientHandshake::new(&resuming(&t[0], 1), entropy(20)).unwrap();
    let mut s = ServerHandshake::new(&server_cfg(&res, 1), [2; SERVER_ENTROPY_LEN]);
    let Ok(Progress::Done {
        value: (mut reply, _),
        ..
    }) = s.read(c.first_flight())
    else {
        panic!()
    };
    // The granted count, 1 -> 0: a parameter the confirmation covers.
    reply[wire::HEADER_LEN + 3] = 0;
    assert_eq!(
        c.read(&reply).err(),
        Some(HandshakeError::ConfirmationFailed)
    );
}

/// What an observer who saw every byte of the resumed session (its hello with `r_c`, the
/// answer) but not the full handshake has: not the ticket's secret, which is derived from the
/// full handshake's key schedule. Another lineage's secret gives other keys; the right secret
/// with any `r_c` but the one on the trusted path gives other keys (an observer of the
/// untrusted paths alone, who holds even the ticket, still lacks `r_c`).
#[test]
fn the_resumed_keys_need_both_the_tickets_secret_and_r_c() {
    let res = store(StoreLimits::default());
    let a = handshake(&asking(1), &server_cfg(&res, 0), 21)
        .unwrap()
        .tickets;
    let b = handshake(&asking(1), &server_cfg(&res, 0), 22)
        .unwrap()
        .tickets;
    assert_ne!(a[0], b[0], "tickets differ between full handshakes");
    let r = handshake(&resuming(&a[0], 0), &server_cfg(&res, 1), 23).unwrap();
    let prefix = &r.reply[..r.reply.len() - 32];
    let rc_at = r.hello.len() - 64;
    let r_c: [u8; 32] = r.hello[rc_at..rc_at + 32].try_into().unwrap();
    let real = Schedule::resumed(&ticket_secret(&a[0]), &r_c, &r.hello, prefix);
    // The server's confirmation in the answer is the real schedule's.
    assert_eq!(&r.reply[r.reply.len() - 32..], &real.server_tag()[..]);
    let other_lineage = Schedule::resumed(&ticket_secret(&b[0]), &r_c, &r.hello, prefix);
    let other_rc = Schedule::resumed(&ticket_secret(&a[0]), &[0; 32], &r.hello, prefix);
    let c2s = |s: &Schedule| *s.traffic().0.expose();
    assert_ne!(c2s(&real), c2s(&other_lineage));
    assert_ne!(c2s(&real), c2s(&other_rc));
    // Nothing of the answer is secret: neither r_c nor the ticket's secret appears in it.
    assert!(!r
        .reply
        .windows(32)
        .any(|w| w == r_c || w == ticket_secret(&a[0])));
    talk(r);
}

/// The ticket's secret as the vectors need it (tests only: [`Ticket`] keeps it private).
fn ticket_secret(t: &Ticket) -> [u8; 32] {
    *t.expose_secret()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// docs/PROTOCOL.md's resumption vectors: the full handshake of the "Test vectors" section
/// (client entropy byte `i` = `3i + 1`, server entropy `0xc0 + i`, the server key of seed
/// `5e` x 32, aead alone) asking for one ticket, then a session resumed with it (client
/// entropy byte `i` = `5i + 2`, server entropy `0xa0 + i`) asking for one more. Prints them;
/// checks that each is in the document.
#[test]
fn resumption_vectors_match_protocol_md() {
    let res = store(StoreLimits::default());
    let cfg = ServerConfig::default()
        .with_key(test_server_key())
        .with_resumption(res.at(0));
    let run = |ccfg: &ClientConfig, ce: [u8; ENTROPY_LEN], se: [u8; SERVER_ENTROPY_LEN]| {
        let mut c = ClientHandshake::new(ccfg, ce).unwrap();
        let mut s = ServerHandshake::new(&cfg, se);
        let hello = c.first_flight().to_vec();
        let Ok(Progress::Done {
            value: (reply, _), ..
        }) = s.read(&hello)
        else {
            panic!()
        };
        let Ok(Progress::Done {
            value: (confirm, _),
            ..
        }) = c.read(&reply)
        else {
            panic!()
        };
        (hello, reply, confirm, c.take_tickets())
    };
    let (hello, reply, _, t) = run(
        &asking(1),
        std::array::from_fn(|i| (i * 3 + 1) as u8),
        std::array::from_fn(|i| 0xc0 + i as u8),
    );
    let ticket = &t[0];
    let (rhello, rreply, rconfirm, next) = run(
        &resuming(ticket, 1),
        std::array::from_fn(|i| (i * 5 + 2) as u8),
        std::array::from_fn(|i| 0xa0 + i as u8),
    );
    let r_c: [u8; 32] = rhello[rhello.len() - 64..rhello.len() - 32]
        .try_into()
        .unwrap();
    let sched = Schedule::resumed(
        ticket.expose_secret(),
        &r_c,
        &rhello,
        &rreply[..rreply.len() - 32],
    );
    let (c2s, s2c) = sched.traffic();
    let values = [
        ("SHA-256 of the full hello", hex(&keys::sha256(&[&hello]))),
        ("SHA-256 of the full accept", hex(&keys::sha256(&[&reply]))),
        ("ticket 0 id", hex(ticket.id())),
        ("ticket 0 secret", hex(ticket.expose_secret())),
        ("resume hello", hex(&rhello)),
        ("resumed answer", hex(&rreply)),
        ("confirm", hex(&rconfirm)),
        ("transcript hash", hex(sched.transcript_hash())),
        ("c2s traffic secret 0", hex(c2s.expose())),
        ("s2c traffic secret 0", hex(s2c.expose())),
        ("next ticket id", hex(next[0].id())),
    ];
    for (name, v) in &values {
        println!("{name}:\n  {v}");
    }
    let doc = include_str!("../../../docs/PROTOCOL.md");
    let doc_hex: String = doc.split_whitespace().collect::<Vec<_>>().join("");
    let missing: Vec<String> = values
        .iter()
        .filter(|(_, v)| !doc_hex.contains(v.as_str()))
        .map(|(n, v)| format!("{n}: {v}"))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/PROTOCOL.md lacks (or has other values for):\n{}",
        missing.join("\n")
    );
}
