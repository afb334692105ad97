//! The room's sans-IO parts: queries asked and taken, the answer check, the addresses an
//! answer gives, SERVFAIL and UDP's limit, resolv.conf; and the exchange against a resolver
//! on loopback.

use super::*;
use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, CNAME};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A resolver's answer to `Question::of(name, family, id)` with `records`.
fn answer_to(name: &Name, family: Family, id: u16, records: Vec<Record>) -> Message {
    let mut m = Message::new(id, MessageType::Response, OpCode::Query);
    m.add_query(Query::query(name.clone(), family.record_type()));
    m.add_answers(records);
    m
}

fn rec(owner: &str, data: RData) -> Record {
    Record::from_rdata(super::name(owner).unwrap(), 60, data)
}

/// An application's query (as a stub resolver sends it).
fn app_query(name: &str, ty: RecordType, id: u16) -> Vec<u8> {
    let mut m = Message::new(id, MessageType::Query, OpCode::Query);
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), ty));
    m.to_vec().unwrap()
}

/// An answer to [`app_query`]`(name, A, id)` with one address.
fn app_answer(name: &str, id: u16, truncated: bool) -> Vec<u8> {
    let n = Name::from_ascii(name).unwrap();
    let mut m = Message::response(id, OpCode::Query);
    m.metadata.truncation = truncated;
    m.add_query(Query::query(n.clone(), RecordType::A));
    m.add_answer(Record::from_rdata(
        n,
        60,
        RData::A(Ipv4Addr::new(198, 18, 3, 2).into()),
    ));
    m.to_vec().unwrap()
}

fn ok(truncated: bool) -> Checked {
    Checked {
        truncated,
        rcode: ResponseCode::NoError,
    }
}

#[test]
fn a_query_asks_one_absolute_question() {
    let n = name("srv.lab").unwrap();
    let q = Message::from_vec(&query(&n, Family::V6, 7)).unwrap();
    assert_eq!(q.metadata.id, 7);
    assert!(q.metadata.recursion_desired);
    assert_eq!(q.queries.len(), 1);
    assert_eq!(q.queries[0].query_type, RecordType::AAAA);
    assert_eq!(q.queries[0].name.to_ascii(), "srv.lab.");
    // What nena asks is what a responder takes.
    assert_eq!(
        check_query(&query(&n, Family::V6, 7)),
        Ok(Question::of(&n, Family::V6, 7))
    );
}

#[test]
fn addresses_follow_the_cname_chain_and_skip_strangers() {
    let n = name("www.lab").unwrap();
    let m = answer_to(
        &n,
        Family::V4,
        9,
        vec![
            rec("www.lab", RData::CNAME(CNAME(name("srv.lab").unwrap()))),
            rec("srv.lab", RData::A(A(Ipv4Addr::new(198, 18, 3, 2)))),
            // Not on the chain: an answer must not bring in another name's address.
            rec("evil.lab", RData::A(A(Ipv4Addr::new(198, 18, 3, 3)))),
            rec("srv.lab", RData::AAAA(AAAA(Ipv6Addr::LOCALHOST))),
        ],
    );
    let got = addresses(&m.to_vec().unwrap(), &Question::of(&n, Family::V4, 9)).unwrap();
    assert_eq!(got, vec![IpAddr::V4(Ipv4Addr::new(198, 18, 3, 2))]);
}

#[test]
fn answers_to_something_else_are_refused() {
    let n = name("srv.lab").unwrap();
    let ok = answer_to(&n, Family::V4, 5, vec![]).to_vec().unwrap();
    assert_eq!(
        addresses(&ok, &Question::of(&n, Family::V4, 6)),
        Err(DnsError::OtherId { got: 5, want: 6 })
    );
    assert_eq!(
        addresses(&ok, &Question::of(&n, Family::V6, 5)),
        Err(DnsError::OtherQuestion)
    );
    let other = name("other.lab").unwrap();
    assert_eq!(
        addresses(&ok, &Question::of(&other, Family::V4, 5)),
        Err(DnsError::OtherQuestion)
    );
    let q = query(&n, Family::V4, 5);
    assert_eq!(
        addresses(&q, &Question::of(&n, Family::V4, 5)),
        Err(DnsError::NotResponse)
    );
    let mut nx = answer_to(&n, Family::V4, 5, vec![]);
    nx.metadata.response_code = ResponseCode::NXDomain;
    assert_eq!(
        addresses(&nx.to_vec().unwrap(), &Question::of(&n, Family::V4, 5)),
        Err(DnsError::NoSuchName)
    );
    let mut refused = answer_to(&n, Family::V4, 5, vec![]);
    refused.metadata.response_code = ResponseCode::Refused;
    assert!(matches!(
        addresses(&refused.to_vec().unwrap(), &Question::of(&n, Family::V4, 5)),
        Err(DnsError::Rcode(_))
    ));
    let mut tc = answer_to(&n, Family::V4, 5, vec![]);
    tc.metadata.truncation = true;
    assert_eq!(
        addresses(&tc.to_vec().unwrap(), &Question::of(&n, Family::V4, 5)),
        Err(DnsError::Truncated)
    );
    assert!(matches!(
        addresses(b"\x00\x05", &Question::of(&n, Family::V4, 5)),
        Err(DnsError::Malformed(_))
    ));
}

#[test]
fn a_cname_loop_ends() {
    let n = name("a.lab").unwrap();
    let m = answer_to(
        &n,
        Family::V4,
        1,
        vec![
            rec("a.lab", RData::CNAME(CNAME(name("b.lab").unwrap()))),
            rec("b.lab", RData::CNAME(CNAME(name("a.lab").unwrap()))),
        ],
    );
    assert_eq!(
        addresses(&m.to_vec().unwrap(), &Question::of(&n, Family::V4, 1)),
        Ok(vec![])
    );
}

#[test]
fn a_standard_query_with_one_question_is_taken() {
    let q = check_query(&app_query("files.example.test.", RecordType::A, 77)).unwrap();
    assert_eq!(q.id, 77);
    assert_eq!(q.to_string(), "A files.example.test.");
    assert_eq!(
        check_query(&app_answer("files.example.test.", 77, false)),
        Err(DnsError::NotQuery)
    );
    let mut none = Message::new(5, MessageType::Query, OpCode::Query);
    assert_eq!(
        check_query(&none.to_vec().unwrap()),
        Err(DnsError::Questions(0))
    );
    none.add_query(Query::query(Name::from_ascii("a.").unwrap(), RecordType::A));
    none.add_query(Query::query(Name::from_ascii("b.").unwrap(), RecordType::A));
    assert_eq!(
        check_query(&none.to_vec().unwrap()),
        Err(DnsError::Questions(2))
    );
    let mut update = Message::new(5, MessageType::Query, OpCode::Update);
    update.add_query(Query::query(Name::from_ascii("a.").unwrap(), RecordType::A));
    assert!(matches!(
        check_query(&update.to_vec().unwrap()),
        Err(DnsError::OpCode(_))
    ));
    assert!(matches!(
        check_query(b"not dns at all"),
        Err(DnsError::Malformed(_))
    ));
}

#[test]
fn an_answer_must_match_the_id_and_the_question() {
    let q = check_query(&app_query("files.example.test.", RecordType::A, 9)).unwrap();
    assert_eq!(
        check_answer(&q, &app_answer("files.example.test.", 9, false)),
        Ok(ok(false))
    );
    assert_eq!(
        check_answer(&q, &app_answer("files.example.test.", 9, true)),
        Ok(ok(true))
    );
    // Names compare without regard to case, as DNS does.
    assert!(check_answer(&q, &app_answer("FILES.example.test.", 9, false)).is_ok());
    assert_eq!(
        check_answer(&q, &app_answer("files.example.test.", 10, false)),
        Err(DnsError::OtherId { got: 10, want: 9 })
    );
    assert_eq!(
        check_answer(&q, &app_answer("other.example.test.", 9, false)),
        Err(DnsError::OtherQuestion)
    );
    assert_eq!(
        check_answer(&q, &app_query("files.example.test.", RecordType::A, 9)),
        Err(DnsError::NotResponse)
    );
    let aaaa = check_query(&app_query("files.example.test.", RecordType::AAAA, 9)).unwrap();
    assert_eq!(
        check_answer(&aaaa, &app_answer("files.example.test.", 9, false)),
        Err(DnsError::OtherQuestion)
    );
    assert!(matches!(
        check_answer(&q, &[0u8; 5]),
        Err(DnsError::Malformed(_))
    ));
    // A carried answer keeps its response code (the application needs NXDOMAIN).
    let mut nx = Message::from_vec(&app_answer("files.example.test.", 9, false)).unwrap();
    nx.metadata.response_code = ResponseCode::NXDomain;
    assert_eq!(
        check_answer(&q, &nx.to_vec().unwrap()).map(|c| c.rcode),
        Ok(ResponseCode::NXDomain)
    );
    // What is no answer to the query is a stray; what the answer says is not.
    assert!(DnsError::OtherId { got: 1, want: 2 }.is_stray());
    assert!(!DnsError::NoSuchName.is_stray() && !DnsError::Truncated.is_stray());
}

#[test]
fn servfail_answers_the_question() {
    let q = check_query(&app_query("files.example.test.", RecordType::AAAA, 4242)).unwrap();
    let a = servfail(&q);
    assert_eq!(
        check_answer(&q, &a),
        Ok(Checked {
            truncated: false,
            rcode: ResponseCode::ServFail
        })
    );
    let m = Message::from_vec(&a).unwrap();
    assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
    assert!(m.answers.is_empty());
}

#[test]
fn an_answer_too_large_for_udp_is_sent_truncated() {
    let n = Name::from_ascii("files.example.test.").unwrap();
    let q = check_query(&app_query("files.example.test.", RecordType::A, 31)).unwrap();
    let mut big = Message::response(31, OpCode::Query);
    big.add_query(q.query.clone());
    for i in 0..60u8 {
        big.add_answer(Record::from_rdata(
            n.clone(),
            60,
            RData::A(Ipv4Addr::new(198, 18, 3, i).into()),
        ));
    }
    let big = big.to_vec().unwrap();
    assert!(big.len() > 512, "{}", big.len());
    // Without EDNS the limit is 512; with EDNS, its payload size.
    assert_eq!(
        udp_limit(&app_query("files.example.test.", RecordType::A, 31)),
        512
    );
    let mut edns = Message::new(31, MessageType::Query, OpCode::Query);
    edns.add_query(q.query.clone());
    let mut e = Edns::new();
    e.set_max_payload(1232);
    edns.edns = Some(e);
    assert_eq!(udp_limit(&edns.to_vec().unwrap()), 1232);
    assert_eq!(udp_limit(b"junk"), 512);
    // Fits: unchanged.
    assert_eq!(fit_udp(big.clone(), 4096), big);
    // Too large: the question with TC set, still an answer to the query.
    let cut = fit_udp(big, 512);
    assert!(cut.len() <= 512);
    assert_eq!(check_answer(&q, &cut), Ok(ok(true)));
    assert!(Message::from_vec(&cut).unwrap().answers.is_empty());
}

#[test]
fn the_nameservers_of_a_resolv_conf() {
    let conf = "# generated\nsearch lab\n;nameserver 9.9.9.9\noptions ndots:1\n\
                nameserver 198.18.3.2 # the lab\nnameserver 198.18.3.3\n";
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    assert_eq!(nameservers(conf), vec![ip("198.18.3.2"), ip("198.18.3.3")]);
    let text =
        "search wlan.example\nnameserver 198.18.2.1\nnameserver 2001:2::53\noptions ndots:1\n";
    assert_eq!(nameservers(text), vec![ip("198.18.2.1"), ip("2001:2::53")]);
    assert_eq!(
        nameservers("nameserver fe80::1%eth0\n"),
        vec![ip("fe80::1")]
    );
    // A line that names no address is skipped, as the C library does.
    assert_eq!(
        nameservers("nameserver\nnameserver not-an-address\nnameserver 198.18.3.4"),
        vec![ip("198.18.3.4")]
    );
    assert!(nameservers("").is_empty());
}

/// A resolver on loopback that answers a stray first (another ID), then truncated, then in
/// full over TCP: the exchange returns the TCP answer, checked, and the same query went
/// over TCP.
#[tokio::test]
async fn the_exchange_skips_strays_and_asks_again_over_tcp() {
    let udp = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let ns = udp.local_addr().unwrap();
    let tcp = tokio::net::TcpListener::bind(ns).await.unwrap();
    let n = name("srv.lab").unwrap();
    let q = Question::of(&n, Family::V4, 0x4242);
    let asked = q.encode();
    let sent = asked.clone();
    let fake = tokio::spawn(async move {
        let mut buf = [0u8; 512];
        let (len, peer) = udp.recv_from(&mut buf).await.unwrap();
        assert_eq!(&buf[..len], &sent[..]);
        let stray = answer_to(&n, Family::V4, 0x4243, vec![]);
        udp.send_to(&stray.to_vec().unwrap(), peer).await.unwrap();
        let mut tc = answer_to(&n, Family::V4, 0x4242, vec![]);
        tc.metadata.truncation = true;
        udp.send_to(&tc.to_vec().unwrap(), peer).await.unwrap();
        let (mut s, _) = tcp.accept().await.unwrap();
        let again = read_frame(&mut s).await.unwrap().unwrap();
        assert_eq!(again, sent, "the same query over TCP");
        let full = answer_to(
            &n,
            Family::V4,
            0x4242,
            vec![rec("srv.lab", RData::A(A(Ipv4Addr::new(198, 18, 3, 2))))],
        );
        write_frame(&mut s, &full.to_vec().unwrap()).await.unwrap();
    });
    let until = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    let a = exchange(ns, None, &q, &asked, until).await.unwrap();
    assert_eq!(
        addresses(&a, &q).unwrap(),
        vec![IpAddr::V4(Ipv4Addr::new(198, 18, 3, 2))]
    );
    fake.await.unwrap();
}

/// A resolver that never answers: the query is sent again each [`exchange::RESEND`], and
/// the exchange ends with no answer at its deadline (the paused clock: no waiting).
#[tokio::test(start_paused = true)]
async fn a_silent_resolver_is_asked_again_until_the_deadline() {
    let silent = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let n = name("srv.lab").unwrap();
    let q = Question::of(&n, Family::V6, 9);
    let until = tokio::time::Instant::now() + exchange::RESEND * 3 / 2;
    let e = exchange(silent.local_addr().unwrap(), None, &q, &q.encode(), until)
        .await
        .unwrap_err();
    assert!(matches!(e, ExchangeError::NoAnswer), "{e}");
    assert_eq!(e.to_string(), "no answer");
    let mut buf = [0u8; 512];
    for copy in 0..2 {
        let n = silent
            .try_recv(&mut buf)
            .unwrap_or_else(|e| panic!("copy {copy}: {e}"));
        assert_eq!(&buf[..n], &q.encode()[..]);
    }
}

proptest::proptest! {
    /// Well-formed answers with arbitrary records: the addresses believed are those of the
    /// family asked, and only when the question is the one asked.
    #[test]
    fn generated_answers(id in proptest::prelude::any::<u16>(), v4 in proptest::collection::vec(proptest::prelude::any::<[u8; 4]>(), 0..5), other_id in proptest::prelude::any::<bool>()) {
        let n = name("srv.lab").unwrap();
        let recs = v4.iter().map(|o| Record::from_rdata(n.clone(), 5, RData::A(A((*o).into())))).collect();
        let bytes = answer_to(&n, Family::V4, id, recs).to_vec().unwrap();
        let asked = if other_id { id.wrapping_add(1) } else { id };
        let got = addresses(&bytes, &Question::of(&n, Family::V4, asked));
        if other_id {
            proptest::prop_assert!(got.is_err());
        } else {
            proptest::prop_assert_eq!(got.unwrap().len(), v4.len());
        }
    }

    /// Bytes from the network (an answer, an application's query) and from a file
    /// (resolv.conf): the fuzz target's checks, never a panic.
    #[test]
    fn any_bytes_are_a_message_or_refused(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600)) {
        fuzzing::messages(&bytes);
    }

    #[test]
    fn any_text_is_a_resolv_conf(text in "((nameserver|search|#|;| |[0-9a-f.:%]{1,12})\n?){0,12}") {
        fuzzing::messages(text.as_bytes());
    }
}
